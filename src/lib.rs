//! incharacter: a terminal workbench that measures whether role-playing agents keep their character's
//! personality. `domain` holds the method's pure vocabulary; `catalog` the bundled and user scales and
//! characters; `cli` the headless subcommands; `tui` the workbench screens.

pub mod catalog;
pub mod cli;
pub mod domain;
pub mod engine;
pub mod llm;
pub mod logging;
pub mod method;
pub mod observer;
pub mod paths;
pub mod rpa;
pub mod session;
pub mod text;
pub mod tui;
