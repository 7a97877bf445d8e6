//! Per-call safety of `bash` (T5).
