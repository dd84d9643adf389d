//! The method's vocabulary, free of I/O: scales, characters and labels, scoring, metrics, statistics.

pub mod character;
pub mod decimal;
pub mod diagnostic;
pub mod metrics;
pub mod resample;
pub mod rng;
pub mod rouge;
pub mod scale;
pub mod scoring;
pub mod stats;
