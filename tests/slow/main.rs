//! The slow integration suites: whole matrices with every method (and killed mid-way), a run killed at
//! 20 moments, a matrix under injected faults, a data dir that fills up (needs root), providers' limits
//! and failures over whole runs, and the embedded model for real (needs `incharacter model fetch`).
//! `cargo test --test slow` runs only these.

// Tests report to the test harness's stdout and stderr; the product's gate is not theirs.
#![allow(clippy::disallowed_macros)]

#[path = "../common/mod.rs"]
mod common;

mod crashes;
mod disk;
mod engine;
mod faults;
mod limits;
mod local_model;
