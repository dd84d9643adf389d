//! Whole runs through the real binary against the `fake-openai` instrument: every dimension score in
//! the export is recomputed from the exported transcripts, batches, options and the scales' keying;
//! a run killed with SIGKILL and resumed asks nothing twice and ends with the same results.

use std::path::Path;

use crate::common;

use incharacter::catalog::Catalog;
use incharacter::method::expert;
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

fn write_config(dir: &Path, server: &FakeServer) -> std::path::PathBuf {
    common::fake_config(dir, server, "retry_base_ms = 1\nmax_concurrency = 4")
}

use crate::common::command;

const PLAN: &[&str] = &[
    "run",
    "--characters",
    "hermione-en,zhongli-zh",
    "--scales",
    "BFI,16Personalities",
    "--methods",
    "er-batch,er-all,oc,d-oc,sr,sr-cot",
    "--repeats",
    "2",
    "--seed",
    "7",
    "--json",
];

async fn run_plan(config: &Path, data: &Path) -> Value {
    run_args(config, data, PLAN.iter()).await
}

/// `incharacter <args>`'s JSON, which must succeed.
async fn run_args<'a>(config: &Path, data: &Path, args: impl Iterator<Item = &'a &'a str>) -> Value {
    let (config, data) = (config.to_path_buf(), data.to_path_buf());
    let args: Vec<String> = args.map(|s| s.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        command(&config, &data, &args.iter().map(String::as_str).collect::<Vec<_>>())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn export(config: &Path, data: &Path, id: &str) -> Value {
    let out = command(config, data, &["export", id, "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Recomputes every dimension score of an export; returns how many it checked.
fn check_scores(export: &Value) -> usize {
    let catalog = Catalog::bundled().unwrap();
    let mut checked = 0;
    for a in export["assessments"].as_array().unwrap() {
        let scale = catalog.scale(a["scale"].as_str().unwrap()).unwrap();
        let method = a["method"].as_str().unwrap();
        for (dim, d) in a["dimensions"].as_object().unwrap() {
            let index = scale.dimension_index(dim).unwrap();
            let score = d["score"]
                .as_f64()
                .unwrap_or_else(|| panic!("{a}: {dim} has no score: {}", d["failure"]));
            let expected = if method.starts_with("er-") {
                let batches = d["batches"].as_array().unwrap();
                let mut ids: Vec<u64> = batches
                    .iter()
                    .flat_map(|b| b["item_ids"].as_array().unwrap().iter().map(|i| i.as_u64().unwrap()))
                    .collect();
                ids.sort();
                let want: Vec<u64> = scale.items_of(index).map(|i| u64::from(i.id)).collect();
                assert_eq!(ids, want, "{method} {dim}: batches cover the dimension's items once");
                let mut sizes: Vec<usize> = batches
                    .iter()
                    .map(|b| b["item_ids"].as_array().unwrap().len())
                    .collect();
                let mut rule: Vec<usize> = if method == "er-batch" {
                    expert::batches(want.len()).iter().map(Vec::len).collect()
                } else {
                    vec![want.len()]
                };
                sizes.sort();
                rule.sort();
                assert_eq!(sizes, rule, "{method} {dim}: batch rule");
                batches.iter().map(|b| b["score"].as_f64().unwrap()).sum::<f64>() / batches.len() as f64
            } else {
                let items = d["items"].as_array().unwrap();
                let (min, max) = (f64::from(scale.range.min), f64::from(scale.range.max));
                let scores: Vec<f64> = items
                    .iter()
                    .map(|i| {
                        let item = scale.item(i["item_id"].as_u64().unwrap() as u32).unwrap();
                        let value = match &i["option"] {
                            Value::String(x) if x == "x" => {
                                assert_eq!(i["refused"], true);
                                (min + max) / 2.0
                            }
                            o => {
                                let o = o.as_f64().unwrap();
                                let flip = method != "d-oc" && !item.keying().unwrap().is_positive();
                                if flip { min + max - o } else { o }
                            }
                        };
                        assert!(
                            (i["score"].as_f64().unwrap() - value).abs() < 1e-9,
                            "{method} item {}",
                            i["item_id"]
                        );
                        value
                    })
                    .collect();
                let mean = scores.iter().sum::<f64>() / scores.len() as f64;
                if scale.is_pole_percent() {
                    (mean - min) / (max - min) * 100.0
                } else {
                    mean
                }
            };
            assert!((score - expected).abs() < 1e-3, "{method} {dim}: {score} vs {expected}");
            checked += 1;
        }
    }
    checked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_run_exports_scores_that_recompute_from_its_transcripts() {
    let server = FakeServer::start(FakeConfig {
        split_events: true,
        seed: 3,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server);
    let data = dir.path().join("data");
    let summary = run_plan(&config, &data).await;
    let id = summary["session"].as_str().unwrap().to_string();
    assert_eq!(summary["summary"].as_array().unwrap().len(), 12, "2 scales × 6 methods");
    let exported = export(&config, &data, &id);
    // 2 characters × 2 repeats × 6 methods × (5 + 4) dimensions.
    assert_eq!(check_scores(&exported), 2 * 2 * 6 * 9);
    assert_eq!(exported["session"]["status"], "complete");
    assert_eq!(exported["session"]["providers"]["judge"]["model"], "fake-model");
    let interviews = exported["interviews"].as_array().unwrap();
    assert_eq!(
        interviews.len(),
        2 * 2 * 2 * 3,
        "characters × scales × repeats × styles"
    );
    let csv = String::from_utf8(
        command(&config, &data, &["export", &id, "--format", "csv"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(csv.starts_with(
        "character,scale,method,repeat,dimension,score,label_pdb,label_annotation,pred_type,label_type,correct,label_target,\
         label_source\n"
    ));
    assert_eq!(csv.lines().count(), 1 + 2 * 2 * 6 * 9);
    // Side by side with a copy of itself (a session is given once: the copy is another folder).
    let copy = format!("{id}-copy");
    let copy_dir = data.join("sessions").join(&copy);
    std::fs::create_dir_all(&copy_dir).unwrap();
    std::fs::copy(
        data.join("sessions").join(&id).join("journal.jsonl"),
        copy_dir.join("journal.jsonl"),
    )
    .unwrap();
    let report = String::from_utf8(
        command(&config, &data, &["report", &id, &copy])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        report.starts_with("[lo, hi]: 95% percentile bootstrap interval over characters"),
        "{report}"
    );
    assert_eq!(
        report.lines().filter(|l| l.starts_with('|')).count(),
        2 + 2 * 12,
        "a header, a rule, 12 rows per session:\n{report}"
    );
    assert!(
        report.contains("| fake-model | fake-model | BFI | er-batch |"),
        "{report}"
    );
    let sessions: Value = serde_json::from_slice(
        &command(&config, &data, &["sessions", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(sessions[0]["id"], id.as_str());
    assert_eq!(sessions[0]["status"], "complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_resumes_without_asking_twice_and_ends_the_same() {
    // The reference: the same plan, uninterrupted, on its own server and data dir.
    let reference_server = FakeServer::start(FakeConfig {
        seed: 9,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let reference_dir = tempfile::tempdir().unwrap();
    let reference_config = write_config(reference_dir.path(), &reference_server);
    let reference_data = reference_dir.path().join("data");
    let id = run_plan(&reference_config, &reference_data).await["session"]
        .as_str()
        .unwrap()
        .to_string();
    let reference = export(&reference_config, &reference_data, &id);

    // The interrupted run: a slower server, killed after a few hundred requests.
    let server = FakeServer::start(FakeConfig {
        seed: 9,
        tokens_per_s: 2000.0,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server);
    let data = dir.path().join("data");
    let sessions = [common::kill_after_requests(&config, &data, PLAN, &server, 300).await];
    let journal = std::fs::read_to_string(sessions[0].join("journal.jsonl")).unwrap();
    let answered_before: Vec<Value> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "item_answered")
        .collect();
    assert!(
        !answered_before.is_empty() && !journal.contains("run_finished"),
        "killed mid-run"
    );
    let requests_before = server.stats().requests as usize;

    let id = sessions[0].file_name().unwrap().to_string_lossy().to_string();
    let resumed = run_args(&config, &data, ["run", "--resume", &id, "--json"].iter()).await;
    assert_eq!(resumed["session"], id.as_str());
    // Nothing answered before the kill reached the server again.
    let after: Vec<Value> = server.requests()[requests_before..].to_vec();
    for e in &answered_before {
        let question = e["question"].as_str().unwrap();
        // The interview seed of this (repeat, item) under plan seed 7 tells repeats apart.
        let seed = 7 + e["repeat"].as_u64().unwrap() * 1_000_003 + e["item_id"].as_u64().unwrap();
        let asked_again = after.iter().any(|r| {
            r.get("response_format").is_none()
                && r["seed"].as_u64() == Some(seed)
                && r["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["role"] == "user" && m["content"].as_str().unwrap().contains(question))
        });
        assert!(!asked_again, "asked twice: {question} (repeat {})", e["repeat"]);
    }
    let mut finished = export(&config, &data, &id);
    let mut reference = reference;
    for v in [&mut finished, &mut reference] {
        v.as_object_mut().unwrap().remove("session");
        // Attempt records say whether a reply came from the cache, which differs after a resume.
        common::strip(v, "attempts");
    }
    assert_eq!(finished, reference, "the resumed results equal an uninterrupted run's");
}

#[test]
fn unknown_ids_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = command(
        &dir.path().join("none.toml"),
        dir.path(),
        &["run", "--characters", "nobody", "--scales", "BFI"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown character \"nobody\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_chatharuhi_character_is_interviewed_with_its_classic_scenes() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server);
    let data = dir.path().join("data");
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chatharuhi/Wren");
    let out = command(&config, &data, &["import", "chatharuhi", folder.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("wren-en\n") && stdout.contains("(4 chunks)"),
        "{stdout}"
    );
    let shown: Value = serde_json::from_slice(
        &command(&config, &data, &["characters", "show", "wren", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(shown["experimenter"], "Mara");

    let (c, d) = (config.clone(), data.clone());
    let out = tokio::task::spawn_blocking(move || {
        command(
            &c,
            &d,
            &[
                "run",
                "--characters",
                "wren-en",
                "--scales",
                "GSE",
                "--methods",
                "er-all",
                "--style",
                "chatharuhi",
                "--json",
            ],
        )
        .output()
        .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = common::session_id(&out);
    let exported = export(&config, &data, &id);
    let items = exported["interviews"][0]["items"].as_array().unwrap();
    assert!(
        items.iter().any(|i| !i["retrieved"].as_array().unwrap().is_empty()),
        "some prompts carried memories"
    );
    let with_scenes = server
        .requests()
        .iter()
        .filter(|r| {
            r["messages"].as_array().unwrap().iter().any(|m| {
                m["content"]
                    .as_str()
                    .unwrap()
                    .starts_with("Classic scenes for the role Wren")
            })
        })
        .count();
    assert!(with_scenes > 0);

    // rolegpt: the role's instruction, then dialogue pairs replayed as earlier turns.
    let (c, d) = (config.clone(), data.clone());
    let out = tokio::task::spawn_blocking(move || {
        command(
            &c,
            &d,
            &[
                "run",
                "--characters",
                "wren-en",
                "--scales",
                "GSE",
                "--methods",
                "er-all",
                "--style",
                "rolegpt",
                "--json",
            ],
        )
        .output()
        .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed = server.requests().iter().any(|r| {
        let m = r["messages"].as_array().unwrap();
        m[0]["content"].as_str().unwrap().contains("Speak like Wren")
            && m.iter()
                .any(|x| x["role"] == "assistant" && x["content"].as_str().unwrap().contains("puffins"))
    });
    assert!(replayed, "a rolegpt prompt replays Wren's own lines as assistant turns");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_with_a_small_context_gets_fewer_items_per_conversion_call() {
    let server = FakeServer::start(FakeConfig {
        seed: 5,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // (4096 − 1000) / (300 + 200) = 6 items per call.
    let config = common::fake_config(dir.path(), &server, "retry_base_ms = 1\ncontext_tokens = 4096");
    let data = dir.path().join("data");
    let args = [
        "run",
        "--characters",
        "hermione-en",
        "--scales",
        "BFI",
        "--methods",
        "oc,d-oc",
        "--json",
    ];
    let out = command(&config, &data, &args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let path = Path::new(summary["path"].as_str().unwrap()).join("journal.jsonl");
    let journal = std::fs::read_to_string(&path).unwrap();
    let header: Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
    assert_eq!(header["plan"]["items_per_call"], 6, "the plan records the grouping");
    let sizes: Vec<(String, usize)> = server
        .requests()
        .iter()
        .filter_map(|r| {
            let schema = &r["response_format"]["json_schema"];
            let name = schema["name"].as_str()?;
            Some((name.to_string(), schema["schema"]["properties"].as_object()?.len()))
        })
        .filter(|(name, _)| name == "option_conversion")
        .collect();
    // OC: 44 items in 8 calls of 5 or 6; d-OC: per dimension (8, 9, 9, 8, 10 items), split in 2.
    assert_eq!(sizes.len(), 8 + 10, "{sizes:?}");
    assert!(sizes.iter().all(|(_, n)| (4..=6).contains(n)), "{sizes:?}");
    assert_eq!(sizes.iter().map(|(_, n)| n).sum::<usize>(), 2 * 44);
    let exported = export(&config, &data, summary["session"].as_str().unwrap());
    assert_eq!(check_scores(&exported), 2 * 5, "OC and d-OC × the 5 BFI dimensions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_on_a_judge_with_less_context_regroups_and_journals_it() {
    let server = FakeServer::start(FakeConfig {
        seed: 6,
        tokens_per_s: 2000.0,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = [
        "run",
        "--characters",
        "hermione-en",
        "--scales",
        "BFI",
        "--methods",
        "oc,d-oc",
    ];
    // Started on a judge of unknown context (60 items a call), killed during the interview…
    let roomy = common::fake_config(dir.path(), &server, "retry_base_ms = 1");
    let session = common::kill_after_requests(&roomy, &data, &args, &server, 10).await;
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    // …and resumed on one that holds 4,096 tokens: 6 items a call from here on.
    let small = common::fake_config(dir.path(), &server, "retry_base_ms = 1\ncontext_tokens = 4096");
    let out = command(&small, &data, &["run", "--resume", &id]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let events: Vec<Value> = std::fs::read_to_string(session.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["plan"]["items_per_call"], 60, "the start is kept as it was");
    let resumed: Vec<&Value> = events.iter().filter(|e| e["event"] == "resumed").collect();
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0]["items_per_call"], 6);
    let assessed: Vec<&Value> = events.iter().filter(|e| e["event"] == "dimension_assessed").collect();
    assert_eq!(assessed.len(), 2 * 5);
    for a in assessed {
        let calls = a["calls"].as_array().unwrap();
        assert!(!calls.is_empty(), "{a}");
        for call in calls {
            assert!((1..=6).contains(&call.as_array().unwrap().len()), "{a}");
        }
        for item in a["items"].as_array().unwrap() {
            let in_a_call = calls.iter().any(|c| c.as_array().unwrap().contains(&item["item_id"]));
            assert!(
                in_a_call,
                "item {} is in one of the recorded calls: {a}",
                item["item_id"]
            );
        }
    }
    assert_eq!(check_scores(&export(&small, &data, &id)), 2 * 5);
}
