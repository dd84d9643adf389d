//! What starts a task in the workbench's place, and the question asked before one stops a run.

use super::screens::Request;
use super::vocab::Effect;

/// A start asked about: the screen it came from, its kind, and what exactly it starts (the effect
/// written out), so that only the very same start confirms it.
pub(super) type Start = (super::vocab::Screen, &'static str, String);

/// The kind of start among `requests`, if one is (a run, a probe (a run), a resume, a replay, or a
/// session opened in the run's place), with what exactly it starts.
pub(super) fn kind(requests: &[Request]) -> Option<(&'static str, String)> {
    requests.iter().find_map(|r| {
        let Request::Effect(effect) = r else { return None };
        let kind = match effect {
            Effect::StartRun { .. } => "run",
            Effect::StartObserve { .. } => "observe",
            Effect::StartRolebench { .. } => "rolebench",
            Effect::Resume { .. } => "resume",
            Effect::Replay { .. } => "replay",
            Effect::Open(_) => "open",
            _ => return None,
        };
        Some((kind, format!("{effect:?}")))
    })
}

/// Whether a start of `kind` is asked about over what goes: always over a run, and over a replay
/// unless it is another replay or a session opened (a run may cost; a replay is stopped freely).
pub(super) fn asked(replaying: bool, kind: &str) -> bool {
    !(replaying && matches!(kind, "replay" | "open"))
}

/// The question: what goes (the run of `session`, or a replay), what the same again does.
pub(super) fn question(replaying: bool, session: &str, kind: &str) -> String {
    let going = match (replaying, session) {
        (true, _) => "a replay is going".to_string(),
        (false, "") => "a run is going".to_string(),
        (false, id) => format!("the run of {id} is going"),
    };
    let keeps = if replaying {
        ""
    } else {
        " (its session keeps what was done; u on Sessions resumes it)"
    };
    let this = if kind == "open" {
        "opens this session"
    } else {
        "starts this"
    };
    format!("{going}: the same again stops it{keeps} and {this}")
}

/// Whether the session folder `path` is session `id`'s (none when no session is named yet).
pub(super) fn is_session(path: &std::path::Path, id: &str) -> bool {
    !id.is_empty() && path.file_name().is_some_and(|n| n == id)
}
