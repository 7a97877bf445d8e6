//! Unit tests of the ACP mapping.
