//! A run killed with SIGKILL at 20 seeded moments, resumed after each: the journal always loads, no
//! journaled item is ever asked again, and the final results equal an uninterrupted run's.

use std::path::Path;
use std::process::Stdio;

use crate::common;

use incharacter::domain::rng::SplitMix64;
use incharacter::study::Event;
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

const PLAN: &[&str] = &[
    "run",
    "--characters",
    "hermione-en,zhongli-zh",
    "--scales",
    "BFI,16Personalities",
    "--methods",
    "er-batch,oc,sr",
    "--seed",
    "5",
    "--json",
];

fn command(config: &Path, data: &Path, args: &[&str]) -> std::process::Command {
    let mut c = common::command(config, data, args);
    c.stdout(Stdio::piped()).stderr(Stdio::null());
    c
}

fn config(dir: &Path, server: &FakeServer) -> std::path::PathBuf {
    common::fake_config(dir, server, "max_concurrency = 4")
}

fn export(config: &Path, data: &Path, id: &str) -> Value {
    let out = command(config, data, &["export", id, "--format", "json"])
        .output()
        .unwrap();
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_object_mut().unwrap().remove("session");
    common::strip(&mut v, "attempts");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_kills_and_resumes_end_like_an_uninterrupted_run() {
    let reference_server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let reference_dir = tempfile::tempdir().unwrap();
    let reference_config = config(reference_dir.path(), &reference_server);
    let reference_data = reference_dir.path().join("data");
    let out = command(&reference_config, &reference_data, PLAN).output().unwrap();
    let id = common::session_id(&out);
    let reference = export(&reference_config, &reference_data, &id);

    let server = FakeServer::start(FakeConfig {
        tokens_per_s: 4000.0,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &server);
    let data = dir.path().join("data");
    let mut rng = SplitMix64(20);
    let mut session: Option<String> = None;
    let mut kills = 0;
    while kills < 20 {
        let args: Vec<String> = match &session {
            None => PLAN.iter().map(|s| s.to_string()).collect(),
            Some(id) => ["run", "--resume", id, "--json"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        };
        let journal_path = |id: &str| data.join("sessions").join(id).join("journal.jsonl");
        let answered_before: Vec<Value> = session
            .as_ref()
            .map(|id| {
                std::fs::read_to_string(journal_path(id))
                    .unwrap()
                    .lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .filter(|e| e["event"] == "item_answered")
                    .collect()
            })
            .unwrap_or_default();
        let requests_before = server.stats().requests;
        let mut child = command(&cfg, &data, &args.iter().map(String::as_str).collect::<Vec<_>>())
            .spawn()
            .unwrap();
        // A seeded moment: after 1 to 30 more requests reach the server.
        let wait = requests_before + 1 + rng.below(30) as u64;
        let finished = tokio::select! {
            _ = server.wait_for_requests(wait) => false,
            _ = tokio::time::sleep(std::time::Duration::from_secs(30)) => true,
        };
        child.kill().unwrap(); // SIGKILL (a no-op if it already ended)
        child.wait().unwrap();
        kills += 1;
        let id = std::fs::read_dir(data.join("sessions"))
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .file_name();
        let id = id.to_string_lossy().to_string();
        // The journal always loads.
        let events: Vec<Event> = incharacter::journal::read(&journal_path(&id)).unwrap();
        // Nothing journaled before this start was asked again.
        for r in &server.requests()[requests_before as usize..] {
            if r.get("response_format").is_some() {
                continue;
            }
            for e in &answered_before {
                let seed = 5 + e["repeat"].as_u64().unwrap() * 1_000_003 + e["item_id"].as_u64().unwrap();
                let question = e["question"].as_str().unwrap();
                let same = r["seed"].as_u64() == Some(seed)
                    && r["messages"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|m| m["role"] == "user" && m["content"].as_str().unwrap().contains(question));
                assert!(!same, "asked twice after kill {kills}: {question}");
            }
        }
        session = Some(id);
        if finished || events.iter().any(|e| matches!(e, Event::RunFinished { .. })) {
            break;
        }
    }
    let id = session.unwrap();
    let out = command(&cfg, &data, &["run", "--resume", &id, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(kills >= 5, "the run outlived several kills ({kills})");
    assert_eq!(
        export(&cfg, &data, &id),
        reference,
        "same results as the uninterrupted run"
    );
}
