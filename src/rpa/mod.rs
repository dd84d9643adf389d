//! How a character becomes a role-playing agent: prompt assembly, memory retrieval, importers, and
//! character cards.

pub mod card;
pub mod import;
pub mod memories;
pub mod prompt;
pub mod retrieval;
