//! Re-assessment through the binary against `fake-openai`: `assess` sends only judge requests, copies
//! the parent's answers into its own journal and, with the same judge, measures what the parent
//! measured; methods whose interviews the parent lacks are refused before anything is sent; a killed
//! re-assessment resumes without asking twice. Interview requests carry the recorded temperature.

use std::path::{Path, PathBuf};
use std::process::Output;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

use crate::common;

fn json_of(out: Output) -> Value {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

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

async fn parent(s: &Setup) -> String {
    let out = binary(
        &s.config,
        &s.data,
        &[
            "run",
            "--characters",
            "hermione-en",
            "--scales",
            "BFI",
            "--methods",
            "er-batch,oc",
            "--json",
        ],
    )
    .await;
    json_of(out)["session"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assess_sends_only_judge_requests_and_the_same_judge_measures_the_same() {
    let s = setup().await;
    let parent = parent(&s).await;
    let asked = s.server.requests();
    let interviews: Vec<&Value> = asked.iter().filter(|r| is_role_play(r)).collect();
    assert_eq!(interviews.len(), 44, "one open question per BFI item");
    for r in &interviews {
        assert_eq!(r["temperature"].as_f64(), Some(0.699999988079071), "{r}");
        assert_eq!(r["max_tokens"], 300);
    }
    let judged = asked.len() - interviews.len();

    let out = json_of(binary(&s.config, &s.data, &["assess", &parent, "--json", "--name", "again"]).await);
    let child = out["session"].as_str().unwrap().to_string();
    let during: Vec<Value> = s.server.requests()[asked.len()..].to_vec();
    assert!(!during.iter().any(is_role_play), "no role-play request during assess");
    assert_eq!(
        during.len(),
        judged,
        "the judge is asked what it was asked for the parent"
    );
    assert!(out["summary"].as_array().is_some_and(|rows| !rows.is_empty()), "{out}");

    let export = |id: &str| {
        json_of(
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
async fn a_killed_reassessment_resumes_without_asking_twice() {
    // Slow replies, so the kill lands while judge calls are still to come.
    let s = setup_with(FakeConfig {
        first_byte: std::time::Duration::from_millis(40),
        ..FakeConfig::default()
    })
    .await;
    let parent = parent(&s).await;
    let base = s.server.stats().requests;
    let mut child = common::command(
        &s.config,
        &s.data,
        &["assess", &parent, "--methods", "er-batch,oc,d-oc"],
    )
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
        .filter(|id| *id != parent)
        .collect();
    assert_eq!(sessions.len(), 1);
    let journal = s.data.join("sessions").join(&sessions[0]).join("journal.jsonl");
    let killed = std::fs::read_to_string(&journal).unwrap();
    assert!(!killed.contains("run_finished"), "killed before the end");
    let out = json_of(binary(&s.config, &s.data, &["assess", "--resume", &sessions[0], "--json"]).await);
    assert_eq!(out["session"], Value::String(sessions[0].clone()));
    let requests = s.server.requests();
    let bodies: Vec<String> = requests[base as usize..].iter().map(Value::to_string).collect();
    let mut unique = bodies.clone();
    unique.sort();
    unique.dedup();
    // A request in flight at the kill may be sent again; nothing journaled is.
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
