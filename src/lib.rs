//! incharacter: a terminal workbench that measures whether role-playing agents keep their character's
//! personality. Data flows one way, and no module imports one above it:
//! `domain` (the method's pure vocabulary) and `catalog` (scales, characters) → `llm` (models) →
//! `rpa`, `method`, `observer` (the procedures) → `study` (the kinds of run) → `session` (runs on disk:
//! lifecycle and store) → `cli` and `tui` (the two faces, which never import each other).
//! `journal`, `paths` and `text` are leaves any layer may use.

pub mod catalog;
pub mod cli;
pub mod domain;
pub mod journal;
pub mod llm;
pub mod logging;
pub mod method;
pub mod observer;
pub mod paths;
pub mod rpa;
pub mod session;
pub mod study;
pub mod text;
pub mod tui;
