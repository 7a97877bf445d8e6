//! End-to-end tests of cadre through its public APIs and its binary, against
//! a local mock OpenAI-compatible server.

mod plan_mode;
mod samples;
mod support;
