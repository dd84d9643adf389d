//! The integration tests that run in seconds: one binary, one module per area. The suites that take
//! minutes (whole matrices, SIGKILL at many moments, injected faults, a full disk, the embedded model for
//! real) are the `slow` binary beside this one; `cargo test` runs both, `cargo test --lib --test it`
//! only the fast.

// Tests report to the test harness's stdout and stderr; the product's gate is not theirs.
#![allow(clippy::disallowed_macros)]

#[path = "../common/mod.rs"]
mod common;

mod adapt;
mod annotation;
mod batch;
mod bench;
mod cache;
mod cards;
mod cli;
mod completions;
mod cost;
mod diff;
mod doctor;
mod empty_replies;
mod gguf_logits;
mod inert;
mod instruments;
mod judge_replies;
mod judging;
mod llm;
mod malformed;
mod method;
mod observer;
mod plot;
mod prompts;
mod protocol;
mod rate_limits;
mod readme;
mod reference;
mod robustness;
mod rolebench;
mod rolebench_runs;
mod samples;
mod scoring;
mod security;
mod servers;
mod subject_ratings;
mod trust;
mod trust_imports;
mod trust_writes;
mod tui;
mod tui_catalog;
mod tui_resume;
mod uncertainty;
