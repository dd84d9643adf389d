//! The slow integration suites: whole matrices with every method (and killed mid-way), a run killed at
//! 20 moments, a matrix under injected faults, a data dir that fills up (needs root), providers' limits
//! and failures over whole runs, and the embedded model for real (needs `incharacter model fetch`).
//! `cargo test --test slow` runs only these.

#[path = "../common/mod.rs"]
mod common;

mod crashes;
mod disk;
mod engine;
mod faults;
mod limits;
mod local_model;
