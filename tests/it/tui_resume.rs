//! The workbench resumes every kind of session as the command line does: `u` on the Sessions screen
//! goes on with an interrupted interview, observer or RoleBench session against `fake-openai` until it is
//! complete, on the screen of its kind; a batch files session writes its next phase's requests file
//! (nothing streams) and says where it is and the exact `batch import` command; a Batch API session
//! polls the batch it had submitted instead of submitting again. Each session is made by the binary,
//! then cut back to what a kill would have left; the workbench runs its own event loop with frames
//! drawn into a TestBackend.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use incharacter::catalog::Catalog;
use incharacter::config::Config;
use incharacter::session::Store;
use incharacter::tui::app::{App, Screen};
use incharacter::tui::keys::Keymap;
use incharacter::tui::{event_loop, theme, ui};
use incharacter_testkit::fake_openai::FakeConfig;
use incharacter_testkit::fake_openai::batch::batch_output_for;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event as CtEvent, KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::common;

/// Snapshots are kept in `tests/snapshots/` with the other screens'.
const SNAPSHOTS: &str = "../snapshots";

fn text(buffer: &ratatui::buffer::Buffer) -> String {
    let area = buffer.area;
    let mut out = String::new();
    for y in 0..area.height {
        // A wide character (CJK) fills two cells; the second is not printed.
        let mut skip = 0;
        for x in 0..area.width {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let symbol = buffer[(x, y)].symbol();
            out.push_str(symbol);
            skip = unicode_width::UnicodeWidthStr::width(symbol).saturating_sub(1);
        }
        out.push('\n');
    }
    out
}

fn render(app: &App, (w, h): (u16, u16)) -> String {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| ui::render(f, app)).unwrap();
    text(terminal.backend().buffer())
}

/// What the workbench showed once the resumed run had ended.
struct Ended {
    screen: Screen,
    flash: Option<String>,
    /// The frame at 120×40 and at 80×24.
    frames: [String; 2],
    /// The answers the run had when this sitting began (as the resume's record told the view), and
    /// whether its log says it resumed.
    items_before: usize,
    resumed_logged: bool,
}

/// Opens the workbench on `config` and `data` (no samples) at the Sessions screen, presses `u` on
/// the first session once the list is read, and returns what it shows when the resumed run has
/// ended (complete, written for an offline engine, or failed).
async fn resume_first_session(config: &Path, data: &Path) -> Ended {
    let config = Config::load(config, &|_| None).unwrap();
    let catalog = Arc::new(Catalog::load(None).unwrap());
    let (themes, _) = theme::load_all(None);
    let mut app = App::new(catalog, &config, Some(data), Keymap::default(), themes, 0);
    app.screen = Screen::Sessions;
    let (keys, rx) = mpsc::unbounded_channel::<CtEvent>();
    let input = Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok(e), rx))
    }));
    let mut keys = Some(keys);
    let (mut pressed, mut started) = (false, false);
    let mut ended = None;
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let mut draw = |app: &App| -> anyhow::Result<()> {
        terminal.draw(|f| ui::render(f, app))?;
        if !pressed && !app.sessions.list.is_empty() {
            pressed = true;
            let u = CtEvent::Key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::NONE));
            keys.as_ref().expect("keys until the end").send(u)?;
        } else if pressed && app.live.running {
            started = true;
        } else if started && !app.live.running && ended.is_none() {
            ended = Some(Ended {
                screen: app.screen,
                flash: app.flash.clone(),
                frames: [text(terminal.backend().buffer()), render(app, (80, 24))],
                items_before: app.run.sitting.items_before,
                resumed_logged: app.run.log.iter().any(|l| l.starts_with("resumed at ")),
            });
            // The input ends: so does the loop.
            keys = None;
        }
        Ok(())
    };
    let store = Store::with_samples(data, None);
    let run = event_loop(
        input,
        app,
        config,
        store,
        vec![incharacter::tui::app::Effect::ListSessions],
        &mut draw,
    );
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the resumed run ends")
        .unwrap();
    ended.expect("the resumed run ended")
}

fn snap(name: &str, ended: &Ended) {
    for (frame, size) in ended.frames.iter().zip(["120x40", "80x24"]) {
        insta::with_settings!({ snapshot_path => SNAPSHOTS }, {
            insta::assert_snapshot!(format!("{name}_{size}"), frame);
        });
    }
}

fn records(session: &Path) -> Vec<Value> {
    std::fs::read_to_string(session.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn write_records(session: &Path, records: &[Value]) {
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(session.join("journal.jsonl"), text).unwrap();
}

/// The one session in `data`.
fn only_session(data: &Path) -> PathBuf {
    let sessions: Vec<PathBuf> = std::fs::read_dir(data.join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    sessions.into_iter().next().unwrap()
}

/// Cuts the session the binary completed back to what a kill would have left: its first `keep`
/// records of event `step_event` (and what came before them), no end and no results; then gives it
/// the fixed id `id` (so the screens show the same id on every run) and forgets the cached replies
/// (so what the resume asks reaches the server). Returns the session's folder.
fn interrupt(data: &Path, step_event: &str, keep: usize, id: &str) -> PathBuf {
    let session = only_session(data);
    let mut kept = Vec::new();
    let mut steps = 0;
    for record in records(&session) {
        if record["event"] == step_event {
            if steps == keep {
                break;
            }
            steps += 1;
        }
        assert_ne!(
            record["event"], "run_finished",
            "fewer than {keep} {step_event} records"
        );
        kept.push(record);
    }
    kept[0]["session"] = id.into();
    kept[0]["created"] = "2026-01-01T12:00:00Z".into();
    std::fs::remove_file(session.join("results.json")).unwrap();
    let renamed = data.join("sessions").join(id);
    std::fs::rename(&session, &renamed).unwrap();
    write_records(&renamed, &kept);
    std::fs::remove_dir_all(data.join("cache")).unwrap();
    renamed
}

fn count(records: &[Value], event: &str) -> usize {
    records.iter().filter(|r| r["event"] == event).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_interview_session_resumes_from_sessions_to_its_end() {
    // One request at a time: the answers come in the same order on every run.
    let s = common::setup(FakeConfig::default(), "retry_base_ms = 1\nmax_concurrency = 1").await;
    let args = common::run_hermione("GSE", "er-batch,oc", &["--json"]);
    common::json_of(common::output(&s.config, &s.data, &args).await);
    let whole = records(&only_session(&s.data));
    let session = interrupt(&s.data, "item_answered", 4, "20260101-120000-interviews-0001");
    let records_before = records(&session);
    let before = s.server.stats().requests;

    let ended = resume_first_session(&s.config, &s.data).await;
    assert_eq!(ended.flash.as_deref(), Some("run finished"), "{}", ended.frames[0]);
    assert_eq!(ended.screen, Screen::Live, "an interview plays on Live");
    let after = records(&session);
    for event in ["item_answered", "dimension_assessed"] {
        assert_eq!(
            count(&after, event),
            count(&whole, event),
            "every {event} once, none twice"
        );
    }
    assert_eq!(count(&after, "resumed"), 1);
    assert_eq!(count(&after, "run_finished"), 1);
    assert!(session.join("results.json").is_file());
    assert!(s.server.stats().requests > before, "the rest was asked of the server");
    // The view was told of the resume: this sitting's work is counted from what the journal had.
    assert!(ended.resumed_logged, "{}", ended.frames[0]);
    assert_eq!(ended.items_before, count(&records_before, "item_answered"));
    // Which answer streams last depends on the scheduler: the frame is checked, not snapshotted.
    let frame = &ended.frames[0];
    assert!(
        frame.contains("Items 10/10") && frame.contains("interviews 10/10") && frame.contains("assessments 2/2"),
        "{frame}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_observer_session_resumes_from_sessions_to_its_end() {
    // One request at a time: the dialogue's steps come in the same order on every run.
    let s = common::setup(FakeConfig::default(), "retry_base_ms = 1\nmax_concurrency = 1").await;
    let args = [
        "observe",
        "--provider",
        "fake",
        "--subject",
        "synthetic",
        "--observers",
        "2",
        "--contexts",
        "family,friend",
        "--scenarios",
        "1",
        "--turns",
        "2",
        "--seed",
        "7",
        "--json",
    ];
    common::json_of(common::output(&s.config, &s.data, &args).await);
    let whole = records(&only_session(&s.data));
    let steps = count(&whole, "observed");
    let session = interrupt(&s.data, "observed", 3, "20260101-120000-observers-0001");
    let before = s.server.stats().requests;

    let ended = resume_first_session(&s.config, &s.data).await;
    assert_eq!(ended.flash.as_deref(), Some("run finished"), "{}", ended.frames[0]);
    assert_eq!(
        ended.screen,
        Screen::Observers,
        "an observer session plays on its own screen"
    );
    let after = records(&session);
    assert_eq!(count(&after, "observed"), steps, "every step once, none twice");
    assert_eq!(count(&after, "resumed"), 1);
    assert_eq!(count(&after, "run_finished"), 1);
    assert!(session.join("results.json").is_file());
    assert!(s.server.stats().requests > before, "the rest was asked of the server");
    snap("tui_resume_observers", &ended);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_rolebench_session_resumes_from_sessions_to_its_end() {
    let s = common::setup(FakeConfig::default(), "retry_base_ms = 1\nmax_concurrency = 1").await;
    let questions = s.dir.path().join("questions.jsonl");
    let rows = [
        (
            "Hermione Granger",
            "What is your favourite book?",
            "Hogwarts: A History, of course.",
        ),
        (
            "Hermione Granger",
            "How do you prepare for exams?",
            "With a colour-coded revision timetable.",
        ),
        (
            "Sheldon Cooper",
            "What is your spot?",
            "The left end of the couch, in the winter.",
        ),
        (
            "Sheldon Cooper",
            "Do you like trains?",
            "I love trains, especially model trains.",
        ),
    ];
    let text: String = rows
        .iter()
        .map(|(role, question, answer)| {
            format!(
                "{}\n",
                serde_json::json!({"role": role, "question": question, "generated": [answer], "type": "script_agnostic"})
            )
        })
        .collect();
    std::fs::write(&questions, text).unwrap();
    let data_arg = questions.display().to_string();
    let args = ["rolebench", "--data", &data_arg, "--rpa", "fake", "--json"];
    let summary = common::json_of(common::output(&s.config, &s.data, &args).await);
    assert_eq!(summary["summary"]["answered"], 4, "{summary}");
    let session = interrupt(&s.data, "rolebench", 2, "20260101-120000-rolebench-0001");
    let before = s.server.stats().requests;

    let ended = resume_first_session(&s.config, &s.data).await;
    assert_eq!(ended.flash.as_deref(), Some("run finished"), "{}", ended.frames[0]);
    assert_eq!(
        ended.screen,
        Screen::Rolebench,
        "a RoleBench session plays on its own screen"
    );
    let after = records(&session);
    let answered: Vec<u64> = after
        .iter()
        .filter(|r| r["event"] == "rolebench" && r["step"] == "answered")
        .map(|r| r["line"].as_u64().unwrap())
        .collect();
    let mut lines = answered.clone();
    lines.sort();
    lines.dedup();
    assert_eq!(lines.len(), 4, "every question answered: {answered:?}");
    assert_eq!(answered.len(), 4, "none twice: {answered:?}");
    assert_eq!(count(&after, "run_finished"), 1);
    assert_eq!(
        s.server.stats().requests - before,
        2,
        "the two questions left, asked once each"
    );
    snap("tui_resume_rolebench", &ended);
}

const RUN: [&str; 7] = [
    "run",
    "--characters",
    "hermione-en",
    "--scales",
    "BFI",
    "--methods",
    "er-batch",
];

/// A batch files session killed while it imported its first phase's results: the results are kept
/// and journaled, its next phase (the judge's) not yet written. The workbench's resume writes that
/// phase, the same requests `batch import` had written, and streams nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_files_session_resumed_from_sessions_writes_its_next_phase() {
    let s = common::setup(FakeConfig::default(), "").await;
    let files = s.dir.path().join("batches");
    let dir_arg = files.display().to_string();
    let mut args = RUN.to_vec();
    args.extend(["--batch-files", &dir_arg, "--json"]);
    let first = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = first["session"].as_str().unwrap().to_string();
    let phase1 = PathBuf::from(first["requests"].as_str().unwrap());
    let results = files.join("results-1.jsonl");
    let input = std::fs::read_to_string(&phase1).unwrap();
    std::fs::write(&results, batch_output_for(&FakeConfig::default(), &input).unwrap()).unwrap();
    let results_arg = results.display().to_string();
    let imported =
        common::json_of(common::output(&s.config, &s.data, &["batch", "import", &id, &results_arg, "--json"]).await);
    let phase2 = PathBuf::from(imported["requests"].as_str().unwrap());
    assert_eq!(phase2, files.join(format!("{id}-phase2.jsonl")));
    let expected = std::fs::read_to_string(&phase2).unwrap();
    // The kill: phase 2 was never written.
    let session = s.data.join("sessions").join(&id);
    let mut kept = records(&session);
    let at = kept
        .iter()
        .position(|r| r["event"] == "batch" && r["step"] == "written" && r["phase"] == 2)
        .unwrap();
    kept.truncate(at);
    write_records(&session, &kept);
    std::fs::remove_file(&phase2).unwrap();

    let ended = resume_first_session(&s.config, &s.data).await;
    assert_eq!(
        std::fs::read_to_string(&phase2).unwrap(),
        expected,
        "the judge's phase, written again"
    );
    assert_eq!(s.server.stats().requests, 0, "nothing streamed");
    let command = format!("incharacter batch import {id} results.jsonl");
    let flash = ended.flash.unwrap();
    assert!(flash.contains(&phase2.display().to_string()), "{flash}");
    assert!(flash.contains(&command), "{flash}");
    assert_eq!(ended.screen, Screen::Live);
    // The live screen says both, whole (wrapped), as the command line does.
    let screen: String = ended.frames[0]
        .lines()
        .map(|l| l.trim_matches(|c: char| c == '│' || c == ' '))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        screen.contains("Batch files: waiting for the results"),
        "{}",
        ended.frames[0]
    );
    let said = |what: &str| {
        let words: Vec<&str> = what.split_whitespace().collect();
        screen.contains(&words.join(" "))
    };
    assert!(
        said(&format!("session {id}: the next requests are in")),
        "{}",
        ended.frames[0]
    );
    assert!(said(&command), "{}", ended.frames[0]);
    let after = records(&session);
    assert_eq!(
        after
            .iter()
            .filter(|r| r["step"] == "written" && r["phase"] == 2)
            .count(),
        1,
        "phase 2 journaled once"
    );
    assert_eq!(
        count(&after, "run_finished"),
        0,
        "the session waits for the judge's results"
    );
}

/// A Batch API session killed while its second batch ran: the workbench follows that batch to its
/// end (no new batch is created, nothing streams) and finishes the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_api_session_resumed_from_sessions_polls_its_open_batch() {
    let s = common::setup(FakeConfig::default(), "batch_poll_ms = 5").await;
    let mut args = RUN.to_vec();
    args.extend(["--batch", "--json"]);
    let summary = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = summary["session"].as_str().unwrap().to_string();
    let session = s.data.join("sessions").join(&id);
    let whole = records(&session);
    let assessed = count(&whole, "dimension_assessed");
    // The kill: right after the judge's batch was submitted.
    let mut kept = whole.clone();
    let at = kept
        .iter()
        .position(|r| r["event"] == "batch" && r["step"] == "submitted" && r["phase"] == 2)
        .unwrap();
    kept.truncate(at + 1);
    write_records(&session, &kept);
    std::fs::remove_file(session.join("results.json")).unwrap();
    let batches = s.server.stats().batches;

    let ended = resume_first_session(&s.config, &s.data).await;
    assert_eq!(ended.flash.as_deref(), Some("run finished"), "{}", ended.frames[0]);
    let stats = s.server.stats();
    assert_eq!(stats.batches, batches, "the open batch was polled, not submitted again");
    assert_eq!(stats.requests, 0, "nothing streamed");
    let after = records(&session);
    assert_eq!(count(&after, "dimension_assessed"), assessed);
    assert_eq!(
        after.iter().filter(|r| r["step"] == "submitted").count(),
        2,
        "no batch submitted again"
    );
    assert!(session.join("results.json").is_file());
}

/// The command line agrees with the workbench: a session resumes as its kind whichever subcommand
/// names it, and says so (`run --resume` of an observer session goes on as `observe --resume`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_resume_of_an_observer_session_goes_on_as_observe_resume() {
    let s = common::setup(FakeConfig::default(), "retry_base_ms = 1\nmax_concurrency = 1").await;
    let args = [
        "observe",
        "--provider",
        "fake",
        "--subject",
        "synthetic",
        "--observers",
        "1",
        "--scenarios",
        "1",
        "--turns",
        "2",
        "--json",
    ];
    common::json_of(common::output(&s.config, &s.data, &args).await);
    let steps = count(&records(&only_session(&s.data)), "observed");
    let id = "20260101-120000-observers-0002";
    let session = interrupt(&s.data, "observed", 1, id);
    let out = common::output(&s.config, &s.data, &["run", "--resume", id, "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let summary = common::json_of(out);
    assert!(
        stderr.contains(&format!(
            "note: session {id} is an observer session: it goes on as `incharacter observe --resume {id}` does"
        )),
        "{stderr}"
    );
    assert_eq!(summary["session"], id);
    assert!(summary["subjects"].is_array(), "the observers' summary: {summary}");
    let after = records(&session);
    assert_eq!(count(&after, "observed"), steps, "every step once");
    assert_eq!(count(&after, "run_finished"), 1);
}

/// `u` on a row the list read as interrupted, once another incharacter has completed the session:
/// the open finds it complete with its journal taken, appends nothing and sends nothing, and writes
/// the `results.json` the completing sitting could not (a full disk, a kill before the file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_completed_meanwhile_is_not_resumed_again() {
    use incharacter::session::{Run, SessionError, Start};
    use incharacter::study::Interviews;
    let s = common::setup(FakeConfig::default(), "retry_base_ms = 1").await;
    let args = common::run_hermione("GSE", "er-batch", &["--json"]);
    common::json_of(common::output(&s.config, &s.data, &args).await);
    let session = only_session(&s.data);
    let results = session.join("results.json");
    let written = std::fs::read(&results).unwrap();
    std::fs::remove_file(&results).unwrap();
    let journal = std::fs::read(session.join("journal.jsonl")).unwrap();
    let requests = s.server.stats().requests;
    let config = Config::load(&s.config, &|_| None).unwrap();
    let catalog = Arc::new(Catalog::load(None).unwrap());
    let store = Store::with_samples(&s.data, None);
    let id = session.file_name().unwrap().to_string_lossy().into_owned();
    for wrote in [Some(results.clone()), None] {
        let opened = Run::<Interviews>::open(catalog.clone(), &config, &store, Start::Resume { id: id.clone() }, None);
        match opened {
            Err(e @ SessionError::Complete { .. }) => {
                assert!(
                    matches!(&e, SessionError::Complete { wrote: w, .. } if *w == wrote),
                    "{e}"
                );
                assert!(
                    e.to_string().contains("is complete: nothing to resume (nothing sent"),
                    "{e}"
                );
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a complete session was opened to resume"),
        }
        assert_eq!(
            std::fs::read(session.join("journal.jsonl")).unwrap(),
            journal,
            "nothing appended"
        );
        assert_eq!(std::fs::read(&results).unwrap(), written, "the file a whole run writes");
    }
    assert_eq!(s.server.stats().requests, requests, "nothing sent");
    // So does the command line, which reads it first without taking the journal.
    std::fs::remove_file(&results).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("{} written, which was missing", results.display())),
        "{said}"
    );
    assert_eq!(std::fs::read(&results).unwrap(), written);
    // One an earlier sitting left (its failures since made good) is out of date: written again.
    std::fs::write(&results, b"{\"from\": \"an earlier sitting\"}").unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("out of date"));
    assert_eq!(std::fs::read(&results).unwrap(), written);
    // A folder where it goes is said, not passed over.
    std::fs::remove_file(&results).unwrap();
    std::fs::create_dir(&results).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(session.join("journal.jsonl")).unwrap(), journal);
}
