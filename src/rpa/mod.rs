//! How a character becomes a role-playing agent: the messages sent to the RPA model.

pub mod prompt;
