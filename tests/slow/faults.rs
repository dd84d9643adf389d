//! A 4-character BFI + 16Personalities matrix with every method, run once against a clean
//! `fake-openai` and once with 30 % of distinct requests failing on their first attempts (429 with
//! Retry-After, 500, 503, dropped connections, streams cut mid-way, errors inside the stream, replies
//! that stall until the client's first-token timeout): the
//! results must be identical and the journal must hold every item and dimension exactly once.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer, Fault};
use serde_json::Value;

const PLAN: &[&str] = &[
    "run",
    "--characters",
    "hermione-en,zhongli-zh,sheldon-en,hutao-zh",
    "--scales",
    "BFI,16Personalities",
    "--methods",
    "er-batch,er-all,oc,d-oc,sr,sr-cot",
    "--seed",
    "3",
    "--json",
];

async fn run(server: &FakeServer, dir: &Path) -> (Value, Vec<Value>) {
    let cfg = common::fake_config(
        dir,
        server,
        "retry_base_ms = 1\nmax_retries = 4\nmax_concurrency = 16\ntimeout_first_token_s = 0.5",
    );
    let data = dir.join("data");
    tokio::task::spawn_blocking(move || {
        let out = common::command(&cfg, &data, PLAN).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let id = common::session_id(&out);
        let export = common::command(&cfg, &data, &["export", &id, "--format", "json"])
            .output()
            .unwrap();
        let journal = std::fs::read_to_string(data.join("sessions").join(&id).join("journal.jsonl")).unwrap();
        (
            serde_json::from_slice::<Value>(&export.stdout).unwrap(),
            journal
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<Value>>(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_percent_faults_change_nothing_and_lose_nothing() {
    let clean_server = FakeServer::start(FakeConfig {
        seed: 4,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let clean_dir = tempfile::tempdir().unwrap();
    let (clean, _) = run(&clean_server, clean_dir.path()).await;

    let faulty_server = FakeServer::start(FakeConfig {
        seed: 4,
        fault_share: 0.3,
        faults_per_request: 2,
        faults: vec![
            Fault::RateLimited,
            Fault::ServerError,
            Fault::Unavailable,
            Fault::Drop,
            Fault::Cut,
            Fault::InStreamError,
            Fault::Stall,
        ],
        stall: std::time::Duration::from_secs(30),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let faulty_dir = tempfile::tempdir().unwrap();
    let (faulty, journal) = run(&faulty_server, faulty_dir.path()).await;
    let stats = faulty_server.stats();
    assert!(
        stats.requests > clean_server.stats().requests + 100,
        "faults were injected and retried: {stats:?}"
    );

    let trace = faulty_server.trace();
    for fault in [Fault::Stall, Fault::Cut, Fault::Drop, Fault::RateLimited] {
        assert!(trace.iter().any(|t| t.fault == Some(fault)), "{fault:?} was injected");
    }

    assert_eq!(faulty["interviews"], clean["interviews"]);
    assert_eq!(faulty["assessments"], clean["assessments"]);

    // Every item answered once, every dimension assessed once, nothing failed.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for e in &journal {
        let key = match e["event"].as_str().unwrap() {
            "item_answered" => format!(
                "item {} {} {} {} {}",
                e["character"], e["scale"], e["repeat"], e["style"], e["item_id"]
            ),
            "dimension_assessed" => format!(
                "dim {} {} {} {} {}",
                e["character"], e["scale"], e["method"], e["repeat"], e["dimension"]
            ),
            "item_failed" => panic!("an item failed despite retries: {e}"),
            _ => continue,
        };
        *seen.entry(key).or_default() += 1;
    }
    assert!(seen.values().all(|&n| n == 1), "an event was journaled twice");
    let items = seen.keys().filter(|k| k.starts_with("item")).count();
    let dims = seen.keys().filter(|k| k.starts_with("dim")).count();
    // 4 characters × (44 + 60) items × 3 query styles; 4 × (5 + 4) dimensions × 6 methods.
    assert_eq!((items, dims), (4 * 104 * 3, 4 * 9 * 6));
    assert!(
        journal
            .iter()
            .filter(|e| e["event"] == "dimension_assessed")
            .all(|e| e.get("failure").is_none()),
        "no dimension failed"
    );
}
