//! How an interrupted session goes on, decided in one place for the command line and the workbench:
//! as the kind of study its first record says (whichever subcommand or screen asked for it), and in
//! the batch mode its journal says it last ran in (an open Batch API batch is polled, not submitted
//! again; a batch files session writes its next phase's requests file instead of streaming them).
//! The CLI's `run`/`assess`/`observe`/`rolebench --resume` and `batch import`/`export`, and the TUI's
//! Sessions screen (`u`), all read a [`Resume`] and run the study it names.

use std::path::Path;

use super::batch::{BatchMode, History};
use super::{SessionError, Store};
use crate::study::{Event, Interviews, Kind, Study, kind_of};

/// How session `id` resumes.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    pub id: String,
    /// The kind of study it goes on as.
    pub kind: Kind,
    /// The batch mode it last ran in (`None`: it streams its requests).
    pub batch: Option<BatchMode>,
    /// An interview session made by `assess` (it re-assesses another session's interviews).
    pub reassessment: bool,
}

impl Resume {
    /// How the data dir's session `id` resumes (samples are read-only: not found here).
    pub fn of(store: &Store, id: &str) -> Result<Resume, SessionError> {
        let id = &store.own_id(id)?;
        let dir = store.own(id)?;
        let events = store.load(&dir)?;
        Resume::from_events(id, &events).ok_or_else(|| SessionError::NotAJournal(dir.join("journal.jsonl")))
    }

    /// How the session whose records are `events` resumes; `None` when they hold no first record.
    pub fn from_events(id: &str, events: &[Event]) -> Option<Resume> {
        let kind = kind_of(events)?;
        Some(Resume {
            id: id.to_string(),
            kind,
            // What the batches say, else the mode the run was started in (stopped before its first).
            batch: History::of(events).mode().or_else(|| {
                let start = events.iter().find_map(Event::start)?;
                start.batch.map(BatchMode::of_start)
            }),
            reassessment: kind == Kind::Interviews
                && Interviews::plan_of(events).is_some_and(|plan| plan.parent.is_some()),
        })
    }

    /// The subcommand that made the session (and names it in advice): `assess` for a re-assessment,
    /// else its kind's.
    pub fn subcommand(&self) -> &'static str {
        if self.reassessment {
            "assess"
        } else {
            self.kind.command()
        }
    }

    /// The command line that resumes it, e.g. `incharacter observe --resume <id>`.
    pub fn command(&self) -> String {
        format!("incharacter {} --resume {}", self.subcommand(), self.id)
    }

    /// What the session is, in a sentence's words: `an observer session`, `a re-assessment`.
    pub fn what(&self) -> &'static str {
        match (self.kind, self.reassessment) {
            (Kind::Interviews, true) => "a re-assessment",
            (Kind::Interviews, false) => "an interview session",
            (Kind::Observers, _) => "an observer session",
            (Kind::Rolebench, _) => "a RoleBench session",
        }
    }
}

/// What to do with a phase's requests file written for an offline engine: run it, then import its
/// results into session `id` (the exact command).
pub fn next_step(id: &str, requests: &Path) -> String {
    format!(
        "run them with an offline engine (e.g. vllm run-batch -i {} -o results.jsonl), then: incharacter batch \
         import {} results.jsonl",
        requests.display(),
        id
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::batch::Step;

    fn first(line: &str) -> Event {
        serde_json::from_str(line).unwrap()
    }

    const INTERVIEWS: &str = r#"{"event":"run_started","session":"s","name":null,"created":"2026-01-01T00:00:00Z","app_version":"0.1.0","plan":{"characters":["anna"],"scales":["GSE"],"methods":["er-batch"],"repeats":1,"rpa":"p","judge":"p","style":"description","seed":1,"max_attempts":5},"providers":{}}"#;
    const OBSERVERS: &str = r#"{"event":"observe_started","session":"o","name":null,"created":"2026-01-01T00:00:00Z","app_version":"0.1.0","plan":{"subjects":[],"scenarios":1,"turn_cap":2,"temperature":1.0,"subject_provider":"local","observer_provider":"local","self_report":"batched","seed":3,"max_attempts":5},"providers":{}}"#;

    #[test]
    fn a_session_resumes_as_its_kind_in_the_batch_mode_it_last_ran_in() {
        let streamed = Resume::from_events("s", &[first(INTERVIEWS)]).unwrap();
        assert_eq!(streamed.kind, Kind::Interviews);
        assert_eq!(streamed.batch, None);
        assert_eq!(streamed.command(), "incharacter run --resume s");
        assert_eq!(streamed.what(), "an interview session");

        let observers = Resume::from_events("o", &[first(OBSERVERS)]).unwrap();
        assert_eq!(observers.kind, Kind::Observers);
        assert_eq!(observers.command(), "incharacter observe --resume o");

        let written = Event::Batch(Step::Written {
            phase: 1,
            path: "/batches/s-phase1.jsonl".into(),
            requests: vec!["ic-1".into()],
        });
        let files = Resume::from_events("s", &[first(INTERVIEWS), written.clone()]).unwrap();
        assert_eq!(
            files.batch,
            Some(BatchMode::Files {
                dir: "/batches".into(),
                output: None
            })
        );
        let submitted = Event::Batch(Step::Submitted {
            phase: 2,
            provider: "p".into(),
            batch: "b".into(),
            file: "f".into(),
        });
        let api = Resume::from_events("s", &[first(INTERVIEWS), written, submitted]).unwrap();
        assert_eq!(api.batch, Some(BatchMode::Api), "the mode it last ran in");

        assert_eq!(Resume::from_events("x", &[]), None, "no first record: not a session");
    }

    #[test]
    fn a_reassessment_is_resumed_by_the_command_that_made_it() {
        let mut record: serde_json::Value = serde_json::from_str(INTERVIEWS).unwrap();
        record["plan"]["parent"] = "parent-session".into();
        let event: Event = serde_json::from_value(record).unwrap();
        let resume = Resume::from_events("r", &[event]).unwrap();
        assert_eq!(resume.kind, Kind::Interviews);
        assert!(resume.reassessment);
        assert_eq!(resume.command(), "incharacter assess --resume r");
        assert_eq!(resume.what(), "a re-assessment");
    }

    #[test]
    fn the_next_step_names_the_file_and_the_exact_import_command() {
        assert_eq!(
            next_step("s-1", Path::new("/b/s-1-phase2.jsonl")),
            "run them with an offline engine (e.g. vllm run-batch -i /b/s-1-phase2.jsonl -o results.jsonl), then: \
             incharacter batch import s-1 results.jsonl"
        );
    }
}
