//! Sessions: a study's run on disk, `<data dir>/sessions/<id>/journal.jsonl` (every record the run
//! made, see [`crate::journal`]) and `results.json` when it is complete. [`Store`] finds, lists and
//! exports them, the bundled samples included; [`run::Run`] is the one lifecycle every kind of study
//! goes through (open → journal → execute → finish, and resume). The CLI and the TUI both stand on it.

pub mod batch;
pub mod resume;
pub mod run;
pub mod store;

use std::path::PathBuf;

pub use run::{Run, Start};
pub use store::{SessionEntry, Store};

use crate::journal::{self, JournalError};
use crate::study::StudyError;
use crate::fault::{Classify, Fault};

/// Why a session could not be opened, run or finished. [`SessionError::is_input`] tells the user's
/// mistakes (exit 2) from the machine's and the providers' (exit 1); advice on what to do next is
/// the edge's to write.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no session \"{}\" (`incharacter sessions` lists them)", .0.to_string())]
    NotFound(String),
    /// A session's folder whose journal is missing or is no file: said why, not just "no session".
    #[error("{}: no session, {why}", crate::text::visible(&.dir.display().to_string()))]
    NoJournal { dir: PathBuf, why: String },
    /// A bundled sample asked to be written (resumed): samples are read-only.
    #[error(
        "session {id} is a bundled sample, which is read-only: to go on with it, copy its folder {} into {}",
        from.display(),
        to.display()
    )]
    Sample { id: String, from: PathBuf, to: PathBuf },
    /// A session folder outside the data dir asked to be written (resumed, annotated).
    #[error(
        "{} is not one of the data dir's sessions ({}): a resume, an import or an annotation writes to \
         those; copy the folder there to go on with it",
        path.display(),
        sessions.display()
    )]
    NotOwn { path: PathBuf, sessions: PathBuf },
    #[error("session {} is not {}", id.to_string(), expected)]
    WrongKind { id: String, expected: &'static str },
    /// A resume of a session that has every answer and score (found once its journal was taken: a
    /// resume elsewhere may just have completed it). Nothing is sent or appended; a `results.json`
    /// the last sitting could not write (missing, or one an earlier sitting left) is written (`wrote`).
    #[error(
        "session {} is complete: nothing to resume (nothing sent{})",
        id.to_string(),
        match wrote {
            Some(path) => format!("; {} written, which was missing or out of date", path.display()),
            None => ", nothing written".to_string(),
        }
    )]
    Complete { id: String, wrote: Option<PathBuf> },
    /// A file given where a session was expected that is not a session's journal.
    #[error(
        "{}: not a session journal (give a session's id, its folder, or its journal.jsonl)",
        .0.display().to_string()
    )]
    NotAJournal(PathBuf),
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Another process appends to the session's journal (a run, a resume, a batch import, the TUI).
    #[error(
        "session {} is being written by another incharacter ({}); wait for it to end, or stop it",
        id.to_string(),
        // The lock is taken before the writer's record is written: a writer without one is starting.
        pid.map_or_else(|| "one that is just starting".to_string(), |p| format!("pid {p}"))
    )]
    Busy { id: String, pid: Option<u32> },
    /// A journal that holds no record: not a session (yet), whatever its folder says.
    #[error(
        "{}: an empty journal is not a session (a run stopped as it began: nothing was recorded; remove its folder)",
        .0.display().to_string()
    )]
    Empty(PathBuf),
    /// A record that no run writes: out of its scale's range, or of a kind this build does not know.
    #[error("{}:{line}: {}", path.display().to_string(), message.to_string())]
    Invalid {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("cannot write the journal {}: {source}", path.display())]
    Unwritable { path: PathBuf, source: std::io::Error },
    #[error("cannot write {}: {source}", path.display())]
    Results { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Study(#[from] StudyError),
    /// A provider stopped answering at all (connection refused, no route): the run stopped early.
    #[error("{provider} at {base_url} cannot be reached ({reason}); the run stopped")]
    Unreachable {
        provider: String,
        base_url: String,
        reason: String,
    },
    /// What the run spent reached its cap (`--max-cost`), or in batch mode its next phase was
    /// estimated to take it past the cap (`next`): it stopped cleanly.
    #[error("{}", capped(*spent, *cap, next.as_ref()))]
    CostCap { spent: f64, cap: f64, next: Option<NextPhase> },
    /// Batch mode could not go on (a results file refused, a batch that failed, a Batch API that
    /// answers no more); `input` when the user's file or config is at fault.
    #[error("{}", reason.to_string())]
    Batch { reason: String, input: bool },
    /// A re-assessment asked of a session that has not ended: running (its writer's pid) or
    /// interrupted.
    #[error(
        "session {parent} has not ended: {}",
        match writer {
            Some(pid) => format!("it is being written by another incharacter (pid {pid}); assess it once that ends"),
            None => format!(
                "it was interrupted; finish it first (incharacter run --resume {parent}), then assess it"
            ),
        }
    )]
    ParentUnfinished { parent: String, writer: Option<u32> },
    /// A resume whose config gives a role another model than the session started with: its records
    /// would mix two models under the first one's name.
    #[error(
        "session {id} ran its {role} on {was}; the config now gives {now}. A resume goes on with the models the \
         session started with: restore them in the config, or start a new run{}",
        if role == "judge" { " (`assess` re-assesses a session's answers with another judge)" } else { "" }
    )]
    ModelChanged {
        id: String,
        role: String,
        /// Both as `provider (kind: model)`.
        was: String,
        now: String,
    },
    /// A resume whose config no longer defines a provider the session ran a role on.
    #[error(
        "session {id} ran its {role} on {was}, a provider the config no longer defines. A resume goes on with \
         the models the session started with: put provider \"{provider}\" back in the config, or start a new \
         run{}",
        if role == "judge" { " (`assess` re-assesses a session's answers with another judge)" } else { "" }
    )]
    ProviderGone {
        id: String,
        role: String,
        /// As `provider (kind: model)`.
        was: String,
        provider: String,
    },
    /// A resume whose scale of one's own was edited since the session started: its items would be
    /// asked and scored in two versions.
    #[error(
        "scale {scale} has changed since session {id} started{where_}: a resume would ask and score its items in \
         two versions. Put back the version the session started with, or start a new run"
    )]
    ScaleChanged {
        id: String,
        scale: String,
        /// ` (FILE)` for a user's scale file, else what the bundled one now stands for.
        where_: String,
    },
    /// A resume whose scale is no longer in the catalog (its file removed, or unreadable now).
    #[error(
        "session {id} asks scale {scale}, which is no longer in the catalog (its file was removed or cannot be \
         read now: see the warnings above); put it back to go on"
    )]
    ScaleMissing { id: String, scale: String },
    /// A resume whose character is no longer in the catalog.
    #[error(
        "session {id} asks character {character}, which is no longer in the catalog (its file was removed or \
         cannot be read now: see the warnings above); put it back to go on"
    )]
    CharacterMissing { id: String, character: String },
    /// A provider refused every request the same way: the run stopped early.
    #[error("{provider} at {base_url} refused {n} requests in a row the same way ({reason}); the run stopped")]
    Refused {
        provider: String,
        base_url: String,
        reason: String,
        n: u32,
    },
}

impl SessionError {
    /// Whether the journal kept everything so far and `--resume` can go on from it.
    pub fn resumable(&self) -> bool {
        matches!(
            self,
            SessionError::Unwritable { .. }
                | SessionError::Results { .. }
                | SessionError::Unreachable { .. }
                | SessionError::Refused { .. }
                | SessionError::Batch { input: false, .. }
                | SessionError::CostCap { .. }
        )
    }
}

impl Classify for SessionError {
    /// The user's input (an id, a file, the config) or the machine.
    fn fault(&self) -> Fault {
        let input = match self {
            SessionError::NotFound(_)
            | SessionError::NoJournal { .. }
            | SessionError::Sample { .. }
            | SessionError::NotOwn { .. }
            | SessionError::WrongKind { .. }
            | SessionError::Complete { .. }
            | SessionError::NotAJournal(_) => true,
            SessionError::Journal(JournalError::Damaged { .. }) => true,
            SessionError::Journal(JournalError::Io { .. }) => false,
            SessionError::Busy { .. } => false,
            SessionError::Empty(_)
            | SessionError::Invalid { .. }
            | SessionError::ModelChanged { .. }
            | SessionError::ProviderGone { .. }
            | SessionError::ScaleChanged { .. }
            | SessionError::ScaleMissing { .. }
            | SessionError::CharacterMissing { .. }
            | SessionError::ParentUnfinished { .. } => true,
            // A record too long for a journal line (what was asked for is too large) is the input's.
            SessionError::Unwritable { source, .. } => source.kind() == std::io::ErrorKind::InvalidInput,
            SessionError::Results { .. }
            | SessionError::Unreachable { .. }
            | SessionError::Refused { .. } => false,
            SessionError::Study(e) => e.is_input(),
            SessionError::Batch { input, .. } => *input,
            SessionError::CostCap { .. } => false,
        };
        if input { Fault::Input } else { Fault::Machine }
    }
}

/// A batch phase held back at the cost cap: its number, its requests and what they were estimated
/// to cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NextPhase {
    pub phase: u32,
    pub requests: usize,
    pub estimate: f64,
    /// A phase of batch files mode: written for the user's engine, not sent.
    pub files: bool,
}

/// Why a sitting stopped at its cost cap, in words.
pub fn capped(spent: f64, cap: f64, next: Option<&NextPhase>) -> String {
    let usd = crate::text::usd;
    match next {
        None => format!(
            "the run spent ${} at the providers' prices, reaching its cap of ${}; it stopped",
            usd(spent),
            usd(cap)
        ),
        Some(n) => format!(
            "batch phase {} ({} request{}) is estimated at ${}, which would take this sitting from ${} past its cap of \
             ${}; it was not {}, and the run stopped",
            n.phase,
            n.requests,
            if n.requests == 1 { "" } else { "s" },
            usd(n.estimate),
            usd(spent),
            usd(cap),
            if n.files { "written" } else { "sent" }
        ),
    }
}

pub fn sessions_dir(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("sessions")
}

/// A new session id: creation time (UTC, sortable) plus a short random suffix.
pub fn new_id(name: Option<&str>) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = journal::civil_from_days(days as i64);
    let stamp = format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    let suffix = format!("{:04x}", (now.subsec_nanos() ^ std::process::id()) & 0xffff);
    match name.map(slug).filter(|s| !s.is_empty()) {
        Some(n) => format!("{stamp}-{n}-{suffix}"),
        None => format!("{stamp}-{suffix}"),
    }
}

fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
        .chars()
        .take(40)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_time_and_carry_the_name() {
        let id = new_id(Some("BFI vs 16P!"));
        assert!(id.contains("-bfi-vs-16p-"), "{id}");
        assert!(id.starts_with("20"), "{id}");
    }
}
