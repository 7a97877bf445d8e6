//! The deterministic floor (P4).
