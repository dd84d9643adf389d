//! The judge's side of a run, through the binary against `fake-openai`. `assess` sends only judge
//! requests, copies the parent's answers into its own journal and, with the same judge, measures what
//! the parent measured; methods whose interviews the parent lacks are refused before anything is
//! sent; a killed re-assessment resumes without asking twice. Interview requests carry the recorded
//! temperature. One item the judge always gets wrong does not void its option-conversion call. A
//! judgment that failed is asked again on a resume, not read back from the response cache.

use std::path::{Path, PathBuf};
use std::process::Output;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer, Fault, ScriptRule};
use serde_json::{Value, json};

use crate::common;

async fn binary(config: &Path, data: &Path, args: &[&str]) -> Output {
    let (config, data) = (config.to_path_buf(), data.to_path_buf());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::command(&config, &data, &args).output().unwrap()
    })
    .await
    .unwrap()
}

/// A role-play request is the one without a response format (judge requests all carry a schema).
fn is_role_play(request: &Value) -> bool {
    request.get("response_format").is_none()
}

/// (method, dimension) → score, from `export --format json`.
fn scores(export: &Value) -> Vec<(String, String, Option<f64>)> {
    let mut out = Vec::new();
    for a in export["assessments"].as_array().unwrap() {
        for (dimension, d) in a["dimensions"].as_object().unwrap() {
            out.push((
                a["method"].as_str().unwrap().to_string(),
                dimension.clone(),
                d["score"].as_f64(),
            ));
        }
    }
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

struct Setup {
    server: FakeServer,
    _dir: tempfile::TempDir,
    config: PathBuf,
    data: PathBuf,
}

async fn setup() -> Setup {
    setup_with(FakeConfig::default()).await
}

async fn setup_with(fake: FakeConfig) -> Setup {
    let server = FakeServer::start(fake).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "max_concurrency = 4");
    // No cache: every request the workbench makes reaches the server.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("cache = \"off\"\n{text}")).unwrap();
    let data = dir.path().join("data");
    Setup {
        server,
        config,
        data,
        _dir: dir,
    }
}

/// `run --json` of Hermione × BFI with `methods`.
async fn run(s: &Setup, methods: &str) -> Output {
    let args = [
        "run",
        "--characters",
        "hermione-en",
        "--scales",
        "BFI",
        "--methods",
        methods,
        "--json",
    ];
    binary(&s.config, &s.data, &args).await
}

async fn parent(s: &Setup) -> String {
    common::json_of(run(s, "er-batch,oc").await)["session"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assess_sends_only_judge_requests_and_the_same_judge_measures_the_same() {
    let s = setup().await;
    let parent = parent(&s).await;
    let asked = s.server.requests();
    let interviews: Vec<&Value> = asked.iter().filter(|r| is_role_play(r)).collect();
    assert_eq!(interviews.len(), 44, "one open question per BFI item");
    for r in &interviews {
        assert_eq!(r["temperature"].to_string(), "0.7", "{r}");
        assert_eq!(r["max_tokens"], 300);
    }
    let judged = asked.len() - interviews.len();

    let out = common::json_of(binary(&s.config, &s.data, &["assess", &parent, "--json", "--name", "again"]).await);
    let child = out["session"].as_str().unwrap().to_string();
    let during: Vec<Value> = s.server.requests()[asked.len()..].to_vec();
    assert!(!during.iter().any(is_role_play), "no role-play request during assess");
    assert_eq!(
        during.len(),
        judged,
        "the judge is asked what it was asked for the parent"
    );
    assert!(out["summary"].as_array().is_some_and(|rows| !rows.is_empty()), "{out}");
    // What it used: the judge's requests only, as many as the server saw, with their tokens.
    let usage = out["usage"].as_array().unwrap();
    assert_eq!(usage.len(), 1, "{out}");
    assert_eq!(
        (&usage[0]["provider"], &usage[0]["role"]),
        (&json!("fake"), &json!("judge"))
    );
    assert_eq!(usage[0]["requests"], json!(judged));
    assert!(usage[0]["prompt_tokens"].as_u64().unwrap() > 0, "{out}");

    let export = |id: &str| {
        common::json_of(
            common::command(&s.config, &s.data, &["export", id, "--format", "json"])
                .output()
                .unwrap(),
        )
    };
    let (p, c) = (export(&parent), export(&child));
    assert_eq!(scores(&p), scores(&c));
    assert!(scores(&c).iter().all(|(_, _, score)| score.is_some()));
    // The re-assessment stands alone: it holds the answers and names where they came from.
    let journal = std::fs::read_to_string(s.data.join("sessions").join(&child).join("journal.jsonl")).unwrap();
    let first: Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
    assert_eq!(first["plan"]["parent"], Value::String(parent.clone()));
    assert_eq!(first["providers"]["rpa"]["model"], "fake-model");
    assert_eq!(journal.matches("\"event\":\"item_answered\"").count(), 44);
    // Without --name, a re-assessment is called after what it re-assesses and its judge.
    let out = common::json_of(
        binary(
            &s.config,
            &s.data,
            &["assess", &child, "--json", "--methods", "er-batch"],
        )
        .await,
    );
    let listed = common::json_of(binary(&s.config, &s.data, &["sessions", "--json"]).await);
    let named = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == out["session"])
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(named["name"], "again, re-assessed by fake", "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_the_parent_did_not_interview_for_are_refused_before_any_request() {
    let s = setup().await;
    let parent = parent(&s).await;
    let before = s.server.stats().requests;
    let out = binary(&s.config, &s.data, &["assess", &parent, "--methods", "oc,sr"]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sr needs (sr questions)"), "{err}");
    assert_eq!(s.server.stats().requests, before);
    let unknown = binary(&s.config, &s.data, &["assess", "no-such-session"]).await;
    assert_eq!(unknown.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_has_not_ended_is_not_reassessed() {
    // Slow replies: the kill lands while most of the run is still to come, however busy the machine.
    let fake = FakeConfig {
        first_byte: std::time::Duration::from_millis(40),
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "max_concurrency = 2").await;
    let run = common::run_hermione("GSE", "er-batch", &[]);
    let session = common::kill_after_requests(&s.config, &s.data, &run, &s.server, 3).await;
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    let before = s.server.stats().requests;
    let out = binary(&s.config, &s.data, &["assess", &id, "--methods", "oc"]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "session {id} has not ended: it was interrupted; finish it first (incharacter run --resume {id}), then assess it"
        )),
        "{err}"
    );
    assert_eq!(s.server.stats().requests, before, "nothing asked");
    let sessions = std::fs::read_dir(s.data.join("sessions")).unwrap().count();
    assert_eq!(sessions, 1, "no re-assessment session started");

    // Ended once, then resumed and killed after its resume was journaled: not ended either.
    let out = binary(&s.config, &s.data, &["run", "--resume", &id]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let journal = session.join("journal.jsonl");
    let ended = std::fs::read_to_string(&journal).unwrap();
    let resumed = r#"{"event":"resumed","at":"2026-12-07T10:00:00Z"}"#;
    std::fs::write(&journal, format!("{ended}{resumed}\n")).unwrap();
    let out = binary(&s.config, &s.data, &["assess", &id, "--methods", "oc"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("session {id} has not ended: it was interrupted")));
    std::fs::write(&journal, ended).unwrap();
    let out = binary(&s.config, &s.data, &["assess", &id, "--methods", "oc"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Slow replies, so a kill lands while judge calls are still to come.
async fn slow() -> Setup {
    setup_with(FakeConfig {
        first_byte: std::time::Duration::from_millis(40),
        ..FakeConfig::default()
    })
    .await
}

/// The id of a re-assessment of `parent` with `methods`, killed after three judge requests.
async fn killed_reassessment(s: &Setup, parent: &str, methods: &str) -> String {
    let base = s.server.stats().requests;
    let mut child = common::command(&s.config, &s.data, &["assess", parent, "--methods", methods])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    s.server.wait_for_requests(base + 3).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let sessions: Vec<String> = std::fs::read_dir(s.data.join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|id| id != parent)
        .collect();
    assert_eq!(sessions.len(), 1);
    let journal = std::fs::read_to_string(s.data.join("sessions").join(&sessions[0]).join("journal.jsonl")).unwrap();
    assert!(!journal.contains("run_finished"), "killed before the end");
    sessions[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_reassessment_resumes_without_asking_twice() {
    let s = slow().await;
    let parent = parent(&s).await;
    // With the cache, a reply that came back before the kill is not asked again even when the
    // dimension it belongs to was not finished (and so not journaled).
    let text = std::fs::read_to_string(&s.config).unwrap();
    std::fs::write(&s.config, text.replace("cache = \"off\"\n", "")).unwrap();
    let base = s.server.stats().requests;
    let id = killed_reassessment(&s, &parent, "er-batch,oc,d-oc").await;
    let journal = s.data.join("sessions").join(&id).join("journal.jsonl");
    let out = common::json_of(binary(&s.config, &s.data, &["assess", "--resume", &id, "--json"]).await);
    assert_eq!(out["session"], Value::String(id.clone()));
    let requests = s.server.requests();
    let bodies: Vec<String> = requests[base as usize..].iter().map(Value::to_string).collect();
    let mut unique = bodies.clone();
    unique.sort();
    unique.dedup();
    // A request in flight at the kill (4 at most) may be sent again; nothing that came back is.
    assert!(
        bodies.len() - unique.len() <= 4,
        "{} repeated",
        bodies.len() - unique.len()
    );
    assert!(!requests[base as usize..].iter().any(is_role_play));
    let journal = std::fs::read_to_string(&journal).unwrap();
    assert_eq!(
        journal.matches("\"event\":\"item_answered\"").count(),
        44,
        "copied once"
    );
    assert!(journal.contains("\"event\":\"resumed\""));
}

/// A re-assessment records the parent's answerer beside its own judge: when both ran on one provider
/// name with different models, a resume whose config gives that provider the answerer's model is
/// refused for the judge before the judge is connected (its key is missing here, which a connection
/// would have reported instead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reassessment_resumed_on_its_answerers_model_is_refused_before_connecting_the_judge() {
    let s = slow().await;
    let parent = parent(&s).await;
    let config = std::fs::read_to_string(&s.config).unwrap();
    std::fs::write(&s.config, config.replace("fake-model", "other-model")).unwrap();
    let id = killed_reassessment(&s, &parent, "er-batch,oc").await;
    let journal = std::fs::read_to_string(s.data.join("sessions").join(&id).join("journal.jsonl")).unwrap();
    let answerers = config.replace(
        "model = \"fake-model\"",
        "model = \"fake-model\"\napi_key_env = \"INCHARACTER_TEST_UNSET_KEY\"",
    );
    assert_ne!(answerers, config);
    std::fs::write(&s.config, answerers).unwrap();
    let out = common::command(&s.config, &s.data, &["assess", "--resume", &id])
        .env_remove("INCHARACTER_TEST_UNSET_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "session {id} ran its judge on fake (openai: other-model); the config now gives fake (openai: fake-model)"
        )),
        "{said}"
    );
    assert!(!said.contains("INCHARACTER_TEST_UNSET_KEY"), "{said}");
    let after = std::fs::read_to_string(s.data.join("sessions").join(&id).join("journal.jsonl")).unwrap();
    assert_eq!(after, journal, "nothing written");
}

/// A judgment whose every attempt the judge answered unusably leaves nothing in the response cache:
/// a resume with the cache on asks the judge again instead of reading the same failure back. The
/// fake server answers the first attempt of each distinct request with prose, so each re-ask of the
/// first sitting (a request of its own) is rejected too, and the resume's first attempts are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_asks_the_judge_again_instead_of_reading_back_a_failed_judgment() {
    let s = setup_with(FakeConfig {
        fault_share: 1.0,
        faults_per_request: 1,
        faults: vec![Fault::Prose],
        ..FakeConfig::default()
    })
    .await;
    let text = std::fs::read_to_string(&s.config).unwrap();
    std::fs::write(&s.config, text.replacen("cache = \"off\"\n", "", 1)).unwrap();
    let first = run(&s, "er-batch").await;
    assert_eq!(first.status.code(), Some(1), "every judgment failed: {first:?}");
    let first: Value = serde_json::from_slice(&first.stdout).unwrap();
    let id = first["session"].as_str().unwrap().to_string();
    let asked = s.server.requests();
    let judged = asked.iter().filter(|r| !is_role_play(r)).count();
    assert!(judged > 0 && judged % 5 == 0, "5 attempts of each judgment: {judged}");

    let out = binary(&s.config, &s.data, &["run", "--resume", &id, "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let resumed = &s.server.requests()[asked.len()..];
    assert!(
        resumed.iter().all(|r| !is_role_play(r)),
        "the answers come from the journal"
    );
    assert_eq!(resumed.len(), judged / 5, "each judgment asked once more, and answered");
}

/// OC over BFI with one item that the judge always gets wrong: the other items of the call keep their
/// options, only that item is asked again (alone, 5 attempts), every other dimension scores as on a
/// clean server, the item's own dimension is scored from its other items with the item shown as
/// failed, and the run exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_item_never_voids_an_option_conversion() {
    let clean = setup().await;
    let clean_out = common::json_of(run(&clean, "oc").await);
    let bad = setup_with(FakeConfig {
        out_of_range_key: Some("12".into()),
        ..FakeConfig::default()
    })
    .await;
    let bad_out = run(&bad, "oc").await;
    assert_eq!(bad_out.status.code(), Some(1), "a run with a failed item exits 1");
    let stderr = String::from_utf8_lossy(&bad_out.stderr);
    assert!(
        stderr.contains("failed: 1 item(s) left out of scored dimensions"),
        "{stderr}"
    );
    let bad_json: Value = serde_json::from_slice(&bad_out.stdout).unwrap();
    assert_eq!(bad_json["summary"][0]["failed_items"], 1);

    let judge_requests: Vec<Value> = bad.server.requests().into_iter().filter(|r| !is_role_play(r)).collect();
    let keys = |r: &Value| {
        r.pointer("/response_format/json_schema/schema/properties")
            .and_then(Value::as_object)
            .map_or(0, |p| p.len())
    };
    assert_eq!(keys(&judge_requests[0]), 44, "one call for the 44 items");
    assert_eq!(judge_requests.len(), 1 + 5, "the call, then item 12 alone, 5 attempts");
    assert!(judge_requests[1..].iter().all(|r| keys(r) == 1));

    let export = |s: &Setup, out: &Value| {
        let id = out["session"].as_str().unwrap().to_string();
        common::json_of(
            common::command(&s.config, &s.data, &["export", &id, "--format", "json"])
                .output()
                .unwrap(),
        )
    };
    let (clean_export, bad_export) = (export(&clean, &clean_out), export(&bad, &bad_json));
    let dims = |e: &Value| e["assessments"][0]["dimensions"].as_object().unwrap().clone();
    let (clean_dims, bad_dims) = (dims(&clean_export), dims(&bad_export));
    let holds_12 = |d: &Value| d["items"].as_array().unwrap().iter().any(|i| i["item_id"] == 12);
    let mut compared = 0;
    for (name, d) in &bad_dims {
        assert!(d["score"].is_number(), "{name} is scored");
        if holds_12(d) {
            let item = d["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["item_id"] == 12)
                .unwrap();
            assert!(item["option"].is_null(), "{item}");
        } else {
            assert_eq!(d["score"], clean_dims[name]["score"], "{name}");
            compared += 1;
        }
    }
    assert_eq!(compared, 4);
    // Every reply is in the journal, each call once (with the first dimension it converts), and why
    // each rejected one was: the 5 replies to item 12 alone, all rejected.
    let calls: Vec<&Value> = bad_dims
        .values()
        .flat_map(|d| d["conversions"].as_array().into_iter().flatten())
        .collect();
    let attempts: Vec<&Value> = calls.iter().flat_map(|c| c["attempts"].as_array().unwrap()).collect();
    assert_eq!(attempts.len(), judge_requests.len(), "{calls:#?}");
    assert!(
        attempts
            .iter()
            .all(|a| a["reply"].as_str().is_some_and(|r| !r.is_empty()))
    );
    let alone: Vec<&&Value> = calls
        .iter()
        .filter(|c| c["item_ids"] == serde_json::json!([12]))
        .collect();
    assert_eq!(alone.len(), 1, "{calls:#?}");
    let errors = alone[0]["attempts"].as_array().unwrap();
    assert_eq!(errors.len(), 5);
    assert!(
        errors
            .iter()
            .all(|a| a["error"].as_str().is_some_and(|e| e.contains("12"))),
        "{errors:#?}"
    );
}

/// A parent with an item it has no answer to: its re-assessment cannot ask it (it sends only judge
/// requests), so the closing line says to resume the parent first, and a resume that finds the parent
/// unchanged does not journal the same failure again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reassessment_of_a_parent_missing_answers_says_to_resume_the_parent_and_records_each_failure_once() {
    let s = setup_with(FakeConfig {
        script: vec![ScriptRule {
            contains: "how much of the conversation tends to come from you".into(),
            reply: String::new(),
        }],
        ..FakeConfig::default()
    })
    .await;
    let text = std::fs::read_to_string(&s.config).unwrap();
    std::fs::write(
        &s.config,
        text.replace("max_concurrency = 4", "max_concurrency = 4\nmax_retries = 0"),
    )
    .unwrap();
    let session = |out: &Output| -> String {
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        json["session"].as_str().unwrap().to_string()
    };
    let parent = session(&run(&s, "er-batch").await);
    let out = binary(&s.config, &s.data, &["assess", &parent, "--json"]).await;
    let child = session(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("`incharacter run --resume {parent}` asks them"))
            && stderr.contains(&format!("then `incharacter assess --resume {child}` assesses them")),
        "{stderr}"
    );
    let journal = s.data.join("sessions").join(&child).join("journal.jsonl");
    let count = |what: &str| {
        std::fs::read_to_string(&journal)
            .unwrap()
            .matches(&format!("\"event\":\"{what}\""))
            .count()
    };
    assert_eq!(count("item_failed"), 1);
    let assessed = count("dimension_assessed");
    assert!(assessed > 0);
    let again = binary(&s.config, &s.data, &["assess", "--resume", &child]).await;
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert_eq!(count("item_failed"), 1, "the parent still has no answer: said once");
    assert_eq!(
        count("dimension_assessed"),
        assessed,
        "nothing changed: no dimension is assessed again"
    );
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains(&format!("`incharacter run --resume {parent}` asks them")),
        "{stderr}"
    );
}

/// A character renamed after its interview (a hand edit, or a card imported over it) keeps the
/// names its answers were given under hidden from a re-assessment's judge: the session records
/// the names it masked, and the re-assessment masks those and the current ones.
#[tokio::test]
async fn a_reassessment_after_a_rename_hides_the_names_the_answers_were_given_under() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let fake = FakeConfig {
        script: vec![ScriptRule {
            contains: "Bob:".into(),
            reply: "I am Quinn Alpha, and Quinn always wins, Bob.".into(),
        }],
        log: Some(log.clone()),
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "").await;
    let file = s.data.join("characters").join("quinn-en.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let card = |name: &str, aliases: &str, experimenter: &str| {
        format!(
            "id = \"quinn-en\"\nname = \"{name}\"\naliases = [{aliases}]\nlanguage = \"en\"\nexperimenter = \"{experimenter}\"\ndescription = \"\"\"You are {name}.\"\"\"\n"
        )
    };
    std::fs::write(&file, card("Quinn Alpha", "\"Quinn\", \"Quinn Alpha\"", "Bob")).unwrap();
    let run = binary(
        &s.config,
        &s.data,
        &[
            "run",
            "--characters",
            "quinn-en",
            "--scales",
            "GSE",
            "--methods",
            "er-batch",
            "--json",
        ],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let parent = common::session_id(&run);
    let asked = std::fs::read_to_string(&log).unwrap();
    assert!(
        asked.contains("<the participant> always wins, <the experimenter>"),
        "the judge reads the answers masked: {asked}"
    );

    std::fs::write(&file, card("Zed Beta", "\"Zed\"", "Ann")).unwrap();
    std::fs::write(&log, "").unwrap();
    // Another temperature, so the judge is asked again rather than read from the cache.
    let again = binary(&s.config, &s.data, &["assess", &parent, "--judge-temperature", "0.5"]).await;
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let judged = std::fs::read_to_string(&log).unwrap();
    assert!(!judged.is_empty());
    for name in ["Quinn", "Bob"] {
        assert!(!judged.contains(name), "{name} reached the judge: {judged}");
    }
    assert!(
        judged.contains("<the participant> always wins, <the experimenter>"),
        "{judged}"
    );
}

/// A self-report with reasons whose reply is only the number is read as the original reads it, as
/// a plain self-report's is: no judge call, the option as written (`**3**` too).
#[tokio::test]
async fn a_bare_number_is_read_for_both_self_reports_without_the_judge() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let fake = FakeConfig {
        script: vec![
            ScriptRule {
                contains: "number alone on the last line".into(),
                reply: "**3**".into(),
            },
            ScriptRule {
                contains: "number only".into(),
                reply: "Hermione: 「2」".into(),
            },
        ],
        log: Some(log.clone()),
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "").await;
    let args = common::run_hermione("GSE", "sr,sr-cot", &["--json"]);
    let out = binary(&s.config, &s.data, &args).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let requests: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(requests.len(), 20, "ten items each, no conversion call");
    assert!(
        requests.iter().all(|r| r["response_format"].is_null()),
        "no judge request"
    );
    let id = common::session_id(&out);
    let export = common::json_of(common::command(&s.config, &s.data, &["export", &id]).output().unwrap());
    for a in export["assessments"].as_array().unwrap() {
        let want = if a["method"] == "sr-cot" { 3 } else { 2 };
        for item in a["dimensions"]["Self-efficacy"]["items"].as_array().unwrap() {
            assert_eq!(item["option"], want, "{a}");
        }
    }
}

/// A character renamed twice while its session was interrupted: each sitting's names are recorded
/// (the middle one's in its `resumed` record), so a re-assessment hides all three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_of_every_sitting_stay_hidden_from_the_judge() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let said = |experimenter: &str, name: &str| ScriptRule {
        contains: format!("{experimenter}:"),
        reply: format!("I am {name}, {experimenter}."),
    };
    let fake = FakeConfig {
        first_byte: std::time::Duration::from_millis(30),
        script: vec![said("Bob", "Quinn"), said("Cat", "Zed"), said("Dan", "Yann")],
        log: Some(log.clone()),
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "max_concurrency = 1").await;
    let file = s.data.join("characters").join("quinn-en.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let card = |name: &str, experimenter: &str| {
        format!(
            "id = \"quinn-en\"\nname = \"{name}\"\naliases = [\"{name}\"]\nlanguage = \"en\"\nexperimenter = \"{experimenter}\"\ndescription = \"\"\"You are {name}.\"\"\"\n"
        )
    };
    std::fs::write(&file, card("Quinn", "Bob")).unwrap();
    let args = [
        "run",
        "--characters",
        "quinn-en",
        "--scales",
        "GSE",
        "--methods",
        "er-batch",
    ];
    let session = common::kill_after_requests(&s.config, &s.data, &args, &s.server, 3).await;
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    std::fs::write(&file, card("Zed", "Cat")).unwrap();
    let resume = ["run", "--resume", id.as_str()];
    common::kill_after_requests(&s.config, &s.data, &resume, &s.server, 6).await;
    std::fs::write(&file, card("Yann", "Dan")).unwrap();
    let done = binary(&s.config, &s.data, &resume).await;
    assert_eq!(done.status.code(), Some(0), "{}", String::from_utf8_lossy(&done.stderr));
    let journal = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    for name in ["Quinn", "Zed", "Yann"] {
        assert!(
            journal.contains(&format!("I am {name}")),
            "an answer given as {name}: {journal}"
        );
    }
    // The last sitting's judge, as the re-assessment's below.
    let hidden = |log: &str| {
        for request in log.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()) {
            if request["response_format"].is_null() {
                continue;
            }
            for name in ["Quinn", "Zed", "Yann", "Bob", "Cat", "Dan"] {
                assert!(
                    !request.to_string().contains(name),
                    "{name} reached the judge: {request}"
                );
            }
        }
    };
    hidden(&std::fs::read_to_string(&log).unwrap());

    std::fs::write(&log, "").unwrap();
    let again = binary(&s.config, &s.data, &["assess", &id, "--judge-temperature", "0.5"]).await;
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let judged = std::fs::read_to_string(&log).unwrap();
    assert!(!judged.is_empty());
    hidden(&judged);
}

/// The judge's requests (those with a reply schema) in a request log.
fn judge_requests(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| !r["response_format"].is_null())
        .collect()
}

/// The items of each judge request in a request log (a re-ask holds none), largest call first.
fn call_sizes(log: &std::path::Path) -> Vec<usize> {
    let mut calls: Vec<usize> = judge_requests(log)
        .iter()
        .map(|r| {
            let last = &r["messages"].as_array().unwrap().last().unwrap()["content"];
            last.as_str().unwrap().matches("\"statement\":").count()
        })
        .filter(|n| *n > 0)
        .collect();
    // (Calls asked together are in the log in either order.)
    calls.sort_unstable_by(|a, b| b.cmp(a));
    calls
}

/// Answers the judge cannot convert (every reply to a call holding one, re-asks included, is prose)
/// void only themselves: the call's items are asked again one at a time, the first and the last
/// first; the journal says so, and why each item failed. When neither of those two converts alone,
/// the judge is at fault and the rest are not asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_the_judge_cannot_convert_void_only_their_own_items() {
    let prose = |contains: &str| ScriptRule {
        contains: contains.into(),
        reply: "I would rather not rate these.".into(),
    };
    let answer = |question: &str| ScriptRule {
        contains: question.into(),
        reply: "POISON, I say.".into(),
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let fake = FakeConfig {
        script: vec![
            // A call that holds item 3's or item 8's answer, and every re-ask (only those are re-asked).
            prose("POISON"),
            prose("That reply cannot be used"),
            answer("how certain do you feel that you will actually reach it"),
            answer("how many different ways of solving it do you typically come up with"),
        ],
        log: Some(log.clone()),
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "retry_base_ms = 1").await;
    let args = common::run_hermione("GSE", "oc", &["--json"]);
    let out = binary(&s.config, &s.data, &args).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "items failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 10 items (5 attempts), then each alone: items 1 and 10, then the other 8; items 3 and 8 have
    // 5 attempts each (re-asks hold no samples).
    assert_eq!(call_sizes(&log), [10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
    let id = common::session_id(&out);
    let export = common::json_of(common::command(&s.config, &s.data, &["export", &id]).output().unwrap());
    let oc = &export["assessments"][0]["dimensions"]["Self-efficacy"];
    assert!(oc["score"].is_number(), "8 of 10 items converted: {oc}");
    let unconverted: Vec<&Value> = oc["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["option"].is_null())
        .collect();
    let ids: Vec<&Value> = unconverted.iter().map(|i| &i["item_id"]).collect();
    assert_eq!(ids, [3, 8], "{oc}");
    for i in unconverted {
        assert!(i["error"].as_str().unwrap().contains("holds no JSON"), "{i}");
    }
    assert_eq!(
        oc["fitted"],
        "no reply to a call of 10 items could be used: its items were asked again one at a time"
    );

    // A judge that converts nothing: the whole call, the first and the last item, and no more.
    let log = dir.path().join("broken.jsonl");
    let fake = FakeConfig {
        script: vec![prose("\"statement\":"), prose("That reply cannot be used")],
        log: Some(log.clone()),
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "retry_base_ms = 1").await;
    let out = binary(&s.config, &s.data, &args).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(call_sizes(&log), [10, 1, 1]);
    assert_eq!(judge_requests(&log).len(), 15, "three calls of five attempts");
}
