//! RoleBench runs through the binary against `fake-openai`: the `--json` shape, every exported Rouge-L
//! equal to the best over the row's references, the pairwise judge's win rate recomputed from the
//! exported verdicts, and a run killed with SIGKILL that resumes without asking a question twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common;

use incharacter::domain::rouge;
use incharacter::method::rolebench::{Winner, pair_score};
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

fn reference() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference/RoleBench");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: ../shared/reference/RoleBench is not on this machine");
        None
    }
}

fn json_of(out: std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn export(config: &Path, data: &Path, id: &str) -> Value {
    json_of(
        common::command(config, data, &["export", id, "--format", "json"])
            .output()
            .unwrap(),
    )
}

fn winner(v: &Value) -> Winner {
    serde_json::from_value(v["winner"].clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn english_rows_are_scored_against_their_best_reference() {
    let Some(reference) = reference() else { return };
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "");
    let data = dir.path().join("data");
    let file = reference.join("rolebench-eng/role-generalization/role_specific/test.jsonl");
    let args = [
        "rolebench",
        "--data",
        file.to_str().unwrap(),
        "--roles",
        "Jack Sparrow",
        "--limit",
        "20",
        "--rpa",
        "fake",
        "--json",
    ];
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out = tokio::task::spawn_blocking({
        let (config, data) = (config.clone(), data.clone());
        move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            common::command(&config, &data, &args).output().unwrap()
        }
    })
    .await
    .unwrap();
    let summary = json_of(out);
    let id = summary["session"].as_str().unwrap().to_string();
    assert!(
        Path::new(summary["path"].as_str().unwrap())
            .join("journal.jsonl")
            .is_file()
    );
    assert_eq!(summary["summary"]["answered"], 20);

    let e = export(&config, &data, &id);
    let rows = e["rolebench"].as_array().unwrap();
    assert_eq!(rows.len(), 20);
    let mut sum = 0.0;
    for row in rows {
        assert_eq!(row["role"], "Jack Sparrow");
        let refs: Vec<String> = serde_json::from_value(row["references"].clone()).unwrap();
        let response = row["response"].as_str().unwrap();
        let best = refs
            .iter()
            .map(|r| rouge::score(r, response, rouge::detect(r)).f)
            .fold(0.0, f64::max);
        assert!((row["rouge_l"]["f"].as_f64().unwrap() - best).abs() < 1e-12, "{row}");
        assert!(row["judge"].is_null());
        sum += best;
    }
    let overall = e["summary"]["overall"]["f"].as_f64().unwrap();
    assert!((overall - sum / 20.0).abs() < 1e-12);
    assert!(
        e["session"]["unprofiled_roles"][0] == "Jack Sparrow",
        "said in the session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_judge_asks_both_orders_and_a_killed_run_resumes_without_repeats() {
    let Some(reference) = reference() else { return };
    let server = FakeServer::start(FakeConfig {
        seed: 3,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "max_concurrency = 2");
    let data = dir.path().join("data");
    let zh = reference.join("rolebench-zh/role_specific");
    let (test, baseline) = (zh.join("test.jsonl"), zh.join("rolegpt_baseline.jsonl"));
    let args = [
        "rolebench",
        "--data",
        test.to_str().unwrap(),
        "--roles",
        "李白,孙悟空",
        "--limit",
        "12",
        "--rpa",
        "fake",
        "--judge",
        "fake",
        "--baseline",
        baseline.to_str().unwrap(),
        "--json",
    ];
    // Killed once the 12 answers and a few verdicts (two requests each) are asked.
    let session = common::kill_after_requests(&config, &data, &args, &server, 18).await;
    let id = session.file_name().unwrap().to_str().unwrap().to_string();
    let kept = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    assert!(
        kept.contains("\"step\":\"judged\""),
        "some verdicts kept before the kill"
    );
    let out = tokio::task::spawn_blocking({
        let (config, data, id) = (config.clone(), data.clone(), id.clone());
        move || {
            common::command(&config, &data, &["rolebench", "--resume", &id, "--json"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let summary = json_of(out);
    assert_eq!(summary["summary"]["answered"], 12);
    // The progress counts what the first sitting kept, verdicts as answers.
    let last = stderr.lines().rfind(|l| l.contains(" answered, ")).unwrap_or_default();
    assert!(last.contains("12/12 answered, 12 judged"), "{stderr}");

    // Each question answered once and judged once, across the kill.
    let journal = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    let mut seen: BTreeMap<(String, u64), usize> = BTreeMap::new();
    for line in journal.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        if e["event"] == "rolebench" {
            *seen
                .entry((e["step"].as_str().unwrap().into(), e["line"].as_u64().unwrap()))
                .or_default() += 1;
        }
    }
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
    assert_eq!(seen.keys().filter(|(s, _)| s == "answered").count(), 12);
    assert_eq!(seen.keys().filter(|(s, _)| s == "judged").count(), 12);

    // The win rate is the mean of the pair scores the exported verdicts give.
    let e = export(&config, &data, &id);
    let scores: Vec<f64> = e["rolebench"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let j = &row["judge"];
            assert!(j["baseline"].is_string());
            let s = pair_score(winner(&j["agent_as_a"]), winner(&j["agent_as_b"]));
            assert_eq!(j["score"].as_f64().unwrap(), s);
            s
        })
        .collect();
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    assert!((e["summary"]["win_rate"].as_f64().unwrap() - mean).abs() < 1e-12);
    // Chinese answers are scored by characters.
    let row = &e["rolebench"][0];
    let chars = rouge::tokenize_zh(row["response"].as_str().unwrap()).len();
    assert!(chars > 3, "{row}");
}

#[test]
fn a_question_file_with_no_question_says_so_not_that_filters_matched_none() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let data = dir.path().join("data");
    let file = empty.display().to_string();
    let out = common::offline(&data, &["rolebench", "--data", &file]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{file}: holds no question")),
        "named: {stderr}"
    );
    assert!(!stderr.contains("filters"), "{stderr}");
}

/// The questions chosen are kept in the session's first journal record: a choice too large for a
/// journal line is refused before a session is made (it made one that could be neither listed nor
/// resumed), measured after the filters, so a large file is refused only for what is chosen of it.
#[test]
fn questions_a_session_could_not_keep_are_refused_before_it_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.jsonl");
    let row =
        |role: &str, q: &str| format!("{{\"role\": \"{role}\", \"question\": \"{q}\", \"generated\": [\"a\"]}}\n");
    let long = "q".repeat(17 << 20);
    std::fs::write(&big, row("Wren", &long) + &row("Wren", &long)).unwrap();
    let data = dir.path().join("data");
    let file = big.display().to_string();
    let out = common::offline(&data, &["rolebench", "--data", &file]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{file}: the 2 question(s) chosen")),
        "{stderr}"
    );
    assert!(stderr.contains("choose fewer (--roles, --type, --limit)"), "{stderr}");
    let sessions = data.join("sessions");
    let made = std::fs::read_dir(&sessions).map(|d| d.count()).unwrap_or(0);
    assert_eq!(made, 0, "no session folder is left");
}
