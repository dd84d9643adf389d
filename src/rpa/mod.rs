//! How a character becomes a role-playing agent: prompt assembly, memory retrieval, and importers.

pub mod import;
pub mod memories;
pub mod prompt;
pub mod retrieval;
