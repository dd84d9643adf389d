//! The one headless driver of a study (`run`, `observe`, `rolebench`): open or resume the session,
//! say what it will do, run it with progress on stderr, print the summary (a table, or JSON with
//! `--json`), and exit non-zero when anything failed. What differs per kind of study is
//! [`Headless`]: the intro line, the progress and the summary.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use super::{Advised, Ctx};
use crate::catalog::Catalog;
use crate::session::{Run, SessionError, Start};
use crate::study::{Event, Failures, Kind, Study};
use crate::text::terminal_safe as safe;

/// Progress on stderr, fed every journaled record.
pub(super) trait Progress: Send {
    fn record(&mut self, event: &Event);
    fn finish(&mut self) {}
}

/// How a study shows itself headless.
pub(super) trait Headless: Study {
    /// What the run will do, after "session <id>: ".
    fn intro(run: &Run<Self>, catalog: &Catalog) -> String;
    /// The progress of a run (`live`: stderr is a terminal).
    fn progress(run: &Run<Self>, catalog: &Catalog, live: bool) -> Box<dyn Progress>;
    /// The summary: a table, and the fields `--json` prints beside `session` and `path`.
    fn summary(events: &[Event], catalog: &Catalog) -> anyhow::Result<(String, Map<String, Value>)>;
}

/// What the user can do about a session error, written here at the edge: `running` is the id of a
/// session whose run had begun (its journal keeps what was done), `None` while opening it.
pub(super) fn advise(error: SessionError, kind: Kind, running: Option<&str>) -> anyhow::Error {
    let advice = match (&error, running) {
        (e, Some(id)) if e.resumable() => Some(format!(
            "the session is kept; once that is fixed: incharacter {} --resume {id}",
            kind.command()
        )),
        (SessionError::Unwritable { .. }, None) => {
            Some("the data dir must be writable (INCHARACTER_DATA_DIR moves it); nothing was changed".into())
        }
        _ => None,
    };
    match advice {
        Some(advice) => anyhow::Error::new(Advised { error, advice }),
        None => anyhow::Error::new(error),
    }
}

pub(super) fn drive<S: Headless>(
    ctx: &Ctx,
    start: Start<S::Plan>,
    concurrency: Option<usize>,
    json_output: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let catalog = ctx.catalog()?;
    let config = ctx.config()?;
    let store = ctx.store()?;
    let run =
        Run::<S>::open(catalog.clone(), config, &store, start, concurrency).map_err(|e| advise(e, S::KIND, None))?;
    for note in &run.notes {
        eprintln!("note: {}", safe(note));
    }
    for change in &run.changed {
        eprintln!("warning: {change}");
    }
    eprintln!("session {}: {}", run.id, S::intro(&run, &catalog));
    let (id, dir) = (run.id.clone(), run.dir.clone());
    let mut progress = S::progress(&run, &catalog, std::io::stderr().is_terminal());
    let result = ctx.block_on(run.execute(None, |e| progress.record(e)));
    progress.finish();
    let events = result.map_err(|e| advise(e, S::KIND, Some(&id)))?;
    let (table, fields) = S::summary(&events, &catalog)?;
    if json_output {
        let mut object = Map::new();
        object.insert("session".into(), json!(id));
        object.insert("path".into(), json!(dir));
        object.extend(fields);
        writeln!(out, "{}", serde_json::to_string_pretty(&Value::Object(object))?)?;
    } else {
        write!(out, "{table}")?;
        writeln!(out, "session {id}: {}", dir.display())?;
    }
    for line in crate::study::adaptation_lines(&events) {
        eprintln!("adapted: {}", safe(&line));
    }
    let failures = S::failures(&events);
    if failures.any() {
        if let Some((error, n)) = crate::study::commonest_error(&events) {
            eprintln!("most often ({n}×): {}", safe(&error));
        }
        eprintln!("{}", failed(failures, S::KIND, &id));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The closing line of a run with failures (exit 1).
fn failed(f: Failures, kind: Kind, id: &str) -> String {
    let (items, assessments) = match kind {
        Kind::Interviews => ("interview item(s)", "dimension assessment(s)"),
        Kind::Observers => ("dialogue step(s)", "report(s)"),
        Kind::Rolebench => ("question(s) unanswered", "verdict(s)"),
    };
    let mut parts = Vec::new();
    if f.items > 0 {
        parts.push(format!("{} {items}", f.items));
    }
    if f.assessments > 0 {
        parts.push(format!("{} {assessments}", f.assessments));
    }
    format!(
        "failed: {} (the journal says why; `incharacter {} --resume {id}` asks what has no answer again)",
        parts.join(", "),
        kind.command()
    )
}
