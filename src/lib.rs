//! cadre
