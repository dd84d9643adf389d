//! Whether this machine can do the workbench's main job — interviews on the embedded model, offline,
//! or on a configured provider — and what to do if not. [`Facts`] come in two steps: [`Facts::quick`]
//! looks at what answers at once (the config, the data dir, the keys' variables, whether the model is
//! fetched, the terminal) and [`examine`] adds what takes seconds or the network (each provider's tiny
//! request, the model's checksum and load, pip). [`judge`] turns facts into the [`Report`] that
//! `incharacter doctor` prints and the welcome screen shows; it is pure, so every verdict is tested
//! without a network or a model. It sits above `llm` and `study` (it reuses `providers check`'s probe)
//! and below the two faces. A [`Check`] holds the config's and the machine's text as they said it.
//!
//! Here is what both faces read: the [`Report`], its [`Check`]s and their [`Status`]. `facts` holds
//! what the doctor knows and the quick look, `examine` the slow look, `verdict` the judgement and its
//! wording.

mod examine;
mod facts;
mod verdict;

pub use examine::examine;
// The parts of `Facts` are the doctor's API as much as `Facts` is (public with the feature `testing`),
// though the crate itself names only `Facts`.
#[cfg_attr(not(feature = "testing"), allow(unused_imports))]
pub use facts::{Checksum, DataDir, Facts, Model, Provider, Reach, Terminal};
pub use facts::Workbench;
pub use verdict::judge;

use serde::Serialize;


/// The smallest terminal the workbench draws in.
pub const SMALLEST_TERMINAL: (u16, u16) = (80, 24);

/// The embedded model the doctor checks: the one `model fetch` fetches and the default config uses.
pub const EMBEDDED_MODEL: &str = crate::config::DEFAULT_LOCAL_MODEL;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

/// One line of the report: what was looked at, how it is, and what to do when it is not ok.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    /// Names, paths and messages come from the config and the machine, kept as they were said; both
    /// faces print them through their terminal gates.
    fn new(name: impl AsRef<str>, status: Status, detail: impl AsRef<str>) -> Check {
        Check {
            name: name.as_ref().to_string(),
            status,
            detail: detail.as_ref().to_string(),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl AsRef<str>) -> Check {
        self.fix = Some(fix.as_ref().to_string());
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The main job can run: the config is valid, the data dir writable, and the embedded model loads
    /// or the providers of the rpa and judge roles answer.
    pub ok: bool,
    /// The verdict in one line.
    pub summary: String,
    pub checks: Vec<Check>,
}
