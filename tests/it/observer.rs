//! Observer runs through the real binary against the `fake-openai` instrument: the export holds the
//! relationships, dialogues and reports the plan asks for, the aggregate equals the mean of the
//! observers' trait scores recomputed here from their items and the IPIP-50 keying, and a run killed
//! with SIGKILL resumes without generating any step twice and ends like an uninterrupted run.

use crate::common;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

/// The provider's lines of these tests' configs: retries at once, four in flight.
const PROVIDER: &str = "retry_base_ms = 1\nmax_concurrency = 4";

fn write_config(dir: &Path, server: &FakeServer) -> std::path::PathBuf {
    common::fake_config(dir, server, PROVIDER)
}

use crate::common::command;

async fn run(config: &Path, data: &Path, args: &[&str]) -> Value {
    let (config, data) = (config.to_path_buf(), data.to_path_buf());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
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

/// item id → (dimension, reversed) from the scale as the binary shows it.
fn ipip_keying(config: &Path, data: &Path) -> (Vec<String>, BTreeMap<String, (usize, bool)>) {
    let out = command(config, data, &["scales", "show", "IPIP-50", "--json"])
        .output()
        .unwrap();
    let scale: Value = serde_json::from_slice(&out.stdout).unwrap();
    let dims = scale["dimensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    let keying = scale["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["role"] == "scored")
        .map(|i| {
            (
                i["id"].to_string(),
                (i["dimension"].as_u64().unwrap() as usize, i["keying"] == "negative"),
            )
        })
        .collect();
    (dims, keying)
}

/// Trait means of one report's items, recomputed independently (1–5, reverse = 6 − option).
fn recompute(items: &Value, dims: &[String], keying: &BTreeMap<String, (usize, bool)>) -> BTreeMap<String, f64> {
    let mut sums = vec![(0.0, 0usize); dims.len()];
    for (id, option) in items.as_object().unwrap() {
        let (d, reversed) = keying[id];
        let v = option.as_f64().unwrap();
        sums[d].0 += if reversed { 6.0 - v } else { v };
        sums[d].1 += 1;
    }
    dims.iter()
        .zip(sums)
        .map(|(name, (s, n))| (name.clone(), s / n as f64))
        .collect()
}

const SYNTHETIC: &[&str] = &[
    "observe",
    "--subject",
    "synthetic",
    "--latent",
    "1,4,2,1,2",
    "--observers",
    "3",
    "--scenarios",
    "2",
    "--provider",
    "fake",
    "--seed",
    "5",
    "--json",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synthetic_subject_gets_relationships_dialogues_and_reports_whose_aggregate_recomputes() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server);
    let data = dir.path().join("data");
    let out = run(&config, &data, SYNTHETIC).await;
    let id = out["session"].as_str().unwrap();
    assert!(Path::new(out["path"].as_str().unwrap()).join("results.json").is_file());
    let e = export(&config, &data, id);
    let (dims, keying) = ipip_keying(&config, &data);
    let subject = &e["subjects"][0];
    assert_eq!(subject["kind"], "synthetic");
    assert_eq!(subject["latent"]["Intellect/Imagination"], 1);
    assert_eq!(
        subject["latent"]["Emotional Stability"], 5,
        "N = 2 on the stability direction"
    );
    assert_eq!(subject["self_report"]["items"].as_object().unwrap().len(), 50);
    let observers = subject["observers"].as_array().unwrap();
    assert_eq!(observers.len(), 3);
    let contexts: BTreeSet<&str> = observers.iter().map(|o| o["context"].as_str().unwrap()).collect();
    assert_eq!(contexts, ["family", "friend", "workplace"].into_iter().collect());
    let mut dialogues = 0;
    let mut reports = Vec::new();
    for o in observers {
        assert!(!o["relationship"].as_str().unwrap().is_empty());
        for s in o["scenarios"].as_array().unwrap() {
            let turns = s["dialogue"].as_array().unwrap();
            assert!(turns.len() >= 2, "{s}");
            assert_eq!(turns[0]["speaker"], "observer", "the observer opens");
            assert!(turns.len() <= 10, "turn cap");
            dialogues += 1;
        }
        let items = &o["report"]["items"];
        assert_eq!(items.as_object().unwrap().len(), 50);
        let traits = recompute(items, &dims, &keying);
        for (t, v) in &traits {
            assert!((o["report"]["traits"][t].as_f64().unwrap() - v).abs() < 1e-9, "{t}");
        }
        reports.push(traits);
    }
    assert_eq!(dialogues, 6);
    for d in &dims {
        let mean = reports.iter().map(|r| r[d]).sum::<f64>() / reports.len() as f64;
        assert!((subject["aggregate"][d].as_f64().unwrap() - mean).abs() < 1e-9, "{d}");
    }
    let stats = &e["statistics"];
    assert_eq!(stats["traits"].as_object().unwrap().len(), 5);
    assert_eq!(stats["traits"]["Extraversion"]["n"], 1);
    assert_eq!(stats["observers_curve"].as_array().unwrap().len(), 3);
    assert_eq!(stats["by_context"].as_object().unwrap().len(), 3);

    let csv = command(&config, &data, &["export", id, "--format", "csv"])
        .output()
        .unwrap();
    let csv = String::from_utf8(csv.stdout).unwrap();
    assert!(csv.starts_with("subject,observer,context,trait,score,source\n"));
    for source in ["self", "observer", "aggregate", "latent"] {
        assert!(csv.lines().any(|l| l.ends_with(&format!(",{source}"))), "{source}");
    }
}

/// A judge that never gives item 7 a number in range: the other 49 items of every report are kept,
/// item 7 is asked again on its own and then left out, and each trait is scored from what remains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_unusable_item_never_voids_a_questionnaire() {
    let fake = FakeConfig {
        out_of_range_key: Some("7".into()),
        ..FakeConfig::default()
    };
    let s = common::setup(fake, PROVIDER).await;
    let (config, data) = (s.config.as_path(), s.data.as_path());
    let out = run(config, data, SYNTHETIC).await;
    let journal = std::fs::read_to_string(Path::new(out["path"].as_str().unwrap()).join("journal.jsonl")).unwrap();
    assert_eq!(
        journal.matches(r#""left_out":[7]"#).count(),
        4,
        "what was left out is journaled: {journal}"
    );
    assert_eq!(
        journal.matches(r#""asked_again":[7]"#).count(),
        4,
        "and that it was asked again on its own: {journal}"
    );
    let e = export(config, data, out["session"].as_str().unwrap());
    let (dims, keying) = ipip_keying(config, data);
    let subject = &e["subjects"][0];
    let reports = std::iter::once(&subject["self_report"])
        .chain(subject["observers"].as_array().unwrap().iter().map(|o| &o["report"]));
    let mut n = 0;
    for report in reports {
        let items = report["items"].as_object().unwrap();
        assert_eq!(items.len(), 49, "all but item 7: {report}");
        assert!(!items.contains_key("7"));
        let traits = recompute(&report["items"], &dims, &keying);
        assert_eq!(traits.len(), 5, "every trait scored");
        for (t, v) in &traits {
            assert!((report["traits"][t].as_f64().unwrap() - v).abs() < 1e-9, "{t}");
        }
        n += 1;
    }
    assert_eq!(n, 4, "the self-report and three observers' reports");
    assert_eq!(e["statistics"]["traits"]["Extraversion"]["n"], 1, "{}", e["statistics"]);
    // Said where results are read: the run's summary and the export name what was left out.
    for left in [&out["left_out"], &e["left_out"]] {
        let left = left.as_array().unwrap();
        assert_eq!(left.len(), 4, "{left:?}");
        assert!(left.iter().all(|l| l["items"] == serde_json::json!([7])), "{left:?}");
        assert_eq!(
            left.iter().filter(|l| l["observer"].is_null()).count(),
            1,
            "the self-report: {left:?}"
        );
    }
    let text = command(config, data, &["observe", "--resume", out["session"].as_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("self-report: item(s) 7 (no usable answer; its traits scored from the rest)"),
        "{text}"
    );
    // Asked one statement at a time, the same: item 7 left out, the self-report kept.
    let mut one_by_one = SYNTHETIC.to_vec();
    one_by_one.extend(["--self-report", "items"]);
    let out = run(config, data, &one_by_one).await;
    let left = out["left_out"].as_array().unwrap();
    let own = left
        .iter()
        .find(|l| l["observer"].is_null())
        .expect("the self-report's");
    assert_eq!(own["items"], serde_json::json!([7]), "{left:?}");
}

/// A self-report that only ever answers item 1 (and whose re-asks answer nothing) is no self-report:
/// four traits would have no item and Extraversion one of ten. It fails, naming the traits, the run
/// exits 1, the export lists it, and no trait is scored from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_questionnaire_that_leaves_out_half_a_traits_items_fails_rather_than_guesses() {
    use incharacter_testkit::fake_openai::ScriptRule;
    let fake = FakeConfig {
        script: vec![
            ScriptRule {
                contains: "That reply cannot be used".into(),
                reply: "{\"oops\": true}".into(),
            },
            ScriptRule {
                contains: "each statement describes you".into(),
                reply: "{\"1\": 5}".into(),
            },
        ],
        ..FakeConfig::default()
    };
    let s = common::setup(fake, PROVIDER).await;
    let (config, data) = (s.config.as_path(), s.data.as_path());
    let out = command(config, data, SYNTHETIC).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let id = common::session_id(&out);
    let e = export(config, data, &id);
    let failed = e["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0]["observer"].is_null(), "the self-report: {failed:?}");
    let error = failed[0]["error"].as_str().unwrap();
    assert!(
        error.starts_with("the replies were read, but fewer than half of the items of")
            && error.contains("Agreeableness")
            && error.contains("Extraversion"),
        "{error}"
    );
    assert!(e["subjects"][0]["self_report"].is_null(), "{}", e["subjects"][0]);
    // The observers' reports are whole and scored as ever.
    for o in e["subjects"][0]["observers"].as_array().unwrap() {
        assert_eq!(o["report"]["traits"].as_object().unwrap().len(), 5, "{o}");
    }
}

/// An observer session records options, not scores: once IPIP-50 is edited, its traits are scored
/// with the scale as it is, and reading it says so (not that the recorded scores stand).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_ipip_is_said_to_rescore_an_observer_session() {
    let s = common::setup(FakeConfig::default(), PROVIDER).await;
    let (config, data) = (s.config.as_path(), s.data.as_path());
    let out = run(config, data, SYNTHETIC).await;
    let id = out["session"].as_str().unwrap().to_string();
    let before = export(config, data, &id);
    let scale = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/scales/IPIP-50.toml")).unwrap();
    let first = "id = 1\ndimension = \"Extraversion\"\nkeying = \"positive\"";
    assert!(scale.contains(first));
    std::fs::create_dir_all(data.join("scales")).unwrap();
    std::fs::write(
        data.join("scales/IPIP-50.toml"),
        scale.replace(first, &first.replace("positive", "negative")),
    )
    .unwrap();
    let shown = command(config, data, &["export", &id]).output().unwrap();
    let stderr = String::from_utf8_lossy(&shown.stderr);
    assert!(shown.status.success(), "{stderr}");
    assert!(
        stderr.contains("has changed since session")
            && stderr.contains("every trait score is computed from them with the scale as it is now")
            && !stderr.contains("stand (keyed as they were)"),
        "{stderr}"
    );
    let after: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_ne!(before["subjects"], after["subjects"], "re-keyed, as said");
}

/// A reply that cannot be used at first and can after a re-ask is recorded with every attempt, and
/// the summary and the export count it: the policy's work is never hidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_usable_only_after_a_reask_are_recorded_with_their_attempts() {
    let fake = FakeConfig {
        // The scenarios' first request gets prose; its re-ask (a new last message) gets JSON.
        script: vec![incharacter_testkit::fake_openai::ScriptRule {
            contains: "everyday scenarios".into(),
            reply: "I would rather tell you a story instead.".into(),
        }],
        ..FakeConfig::default()
    };
    let s = common::setup(fake, PROVIDER).await;
    let (config, data) = (s.config.as_path(), s.data.as_path());
    let out = run(config, data, SYNTHETIC).await;
    let journal = std::fs::read_to_string(Path::new(out["path"].as_str().unwrap()).join("journal.jsonl")).unwrap();
    let reasked: Vec<Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["step"] == "reasked")
        .collect();
    assert_eq!(reasked.len(), 3, "one per observer's scenarios: {journal}");
    for r in &reasked {
        assert!(r["purpose"].as_str().unwrap().starts_with("scenarios "), "{r}");
        assert!(r["observer"].is_string(), "{r}");
        let attempts = r["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 2, "{r}");
        assert_eq!(attempts[0]["reply"], "I would rather tell you a story instead.");
        assert!(
            attempts[0]["error"].is_string() && attempts[1]["error"].is_null(),
            "{r}"
        );
    }
    assert_eq!(out["reasked"], 3, "{out}");
    assert_eq!(export(config, data, out["session"].as_str().unwrap())["reasked"], 3);
    // A kill between a call's record and its step makes the call again on resume, and records it
    // again: one call, counted once.
    let journal_path = Path::new(out["path"].as_str().unwrap()).join("journal.jsonl");
    let first = journal.lines().find(|l| l.contains(r#""step":"reasked""#)).unwrap();
    let doubled = journal.replacen(first, &format!("{first}\n{first}"), 1);
    std::fs::write(&journal_path, doubled).unwrap();
    assert_eq!(export(config, data, out["session"].as_str().unwrap())["reasked"], 3);
    // Every observer still has its two scenarios and its report.
    let e = export(config, data, out["session"].as_str().unwrap());
    for o in e["subjects"][0]["observers"].as_array().unwrap() {
        assert_eq!(o["scenarios"].as_array().unwrap().len(), 2, "{o}");
        assert!(o["report"].is_object(), "{o}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_subject_is_played_by_its_agent() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server);
    let data = dir.path().join("data");
    let out = run(
        &config,
        &data,
        &[
            "observe",
            "--subject",
            "hermione-en",
            "--observers",
            "2",
            "--scenarios",
            "1",
            "--provider",
            "fake",
            "--json",
        ],
    )
    .await;
    let e = export(&config, &data, out["session"].as_str().unwrap());
    let subject = &e["subjects"][0];
    assert_eq!(
        (subject["kind"].as_str(), subject["id"].as_str()),
        (Some("character"), Some("hermione-en"))
    );
    assert!(subject["latent"].is_null());
    assert_eq!(subject["observers"].as_array().unwrap().len(), 2);
    // Her agent's system prompt is her description.
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.to_string().contains("You are Hermione Granger") && r.to_string().contains("utterance")),
        "the subject's turns go to her agent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_observer_run_resumes_without_generating_anything_twice() {
    let reference_server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let reference_dir = tempfile::tempdir().unwrap();
    let reference_config = write_config(reference_dir.path(), &reference_server);
    let reference_data = reference_dir.path().join("data");
    let id = run(&reference_config, &reference_data, SYNTHETIC).await["session"]
        .as_str()
        .unwrap()
        .to_string();
    let reference = export(&reference_config, &reference_data, &id);

    let server = FakeServer::start(FakeConfig {
        tokens_per_s: 3000.0,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server);
    let data = dir.path().join("data");
    let session = common::kill_after_requests(&config, &data, SYNTHETIC, &server, 12).await;
    let journal = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    assert!(!journal.contains("run_finished"), "killed mid-run");
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    run(&config, &data, &["observe", "--resume", &id, "--json"]).await;

    let journal = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    let steps: Vec<Value> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "observed")
        .collect();
    let mut seen = BTreeSet::new();
    let mut turn_index: BTreeMap<(String, String, u64), usize> = BTreeMap::new();
    for s in &steps {
        let key = match s["step"].as_str().unwrap() {
            "turn" => {
                let k = (
                    s["subject"].to_string(),
                    s["observer"].to_string(),
                    s["scenario"].as_u64().unwrap(),
                );
                let n = turn_index.entry(k.clone()).or_default();
                *n += 1;
                format!("turn {k:?} {n}")
            }
            other => format!("{other} {} {}", s["subject"], s["observer"]),
        };
        assert!(seen.insert(key.clone()), "generated twice: {key}");
    }
    let resumed = export(&config, &data, &id);
    assert_eq!(
        resumed["subjects"], reference["subjects"],
        "same results as the uninterrupted run"
    );
}

/// The subject's self-report is the subject's: its requests count under the role-play agent's
/// role and provider, never under an observer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subjects_self_report_counts_as_the_subjects() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text = text.replacen(
        "[[providers]]",
        &format!(
            "[[providers]]\nname = \"subject\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\n\n[[providers]]",
            server.base_url()
        ),
        1,
    );
    std::fs::write(&config, text).unwrap();
    let data = dir.path().join("data");
    let args = [
        "observe",
        "--subject",
        "synthetic",
        "--observers",
        "1",
        "--scenarios",
        "1",
        "--subject-provider",
        "subject",
        "--observer-provider",
        "fake",
        "--self-report",
        "items",
        "--json",
    ];
    let out = run(&config, &data, &args).await;
    let usage = out["usage"].as_array().unwrap();
    let roles = |provider: &str| -> BTreeSet<String> {
        usage
            .iter()
            .filter(|u| u["provider"] == provider)
            .map(|u| u["role"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(roles("subject"), BTreeSet::from(["rpa".to_string()]), "{usage:?}");
    assert_eq!(roles("fake"), BTreeSet::from(["observer".to_string()]), "{usage:?}");
    let subject = usage.iter().find(|u| u["provider"] == "subject").unwrap();
    assert!(
        subject["requests"].as_u64().unwrap() >= 50,
        "50 items asked one by one: {subject}"
    );
}

/// A questionnaire that failed for good is named in the export with the failure that ended it (JSON
/// `failed`, a `failed` row in the CSV), so a missing report is never missing unsaid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_names_the_reports_that_failed_and_why() {
    use incharacter_testkit::fake_openai::ScriptRule;
    let prose = "I would rather tell you a story instead.";
    let fake = FakeConfig {
        // Every observer's scenarios, and every re-ask of them, get prose: no observer reports.
        script: vec![
            ScriptRule {
                contains: "everyday scenarios".into(),
                reply: prose.into(),
            },
            ScriptRule {
                contains: "That reply cannot be used".into(),
                reply: prose.into(),
            },
        ],
        ..FakeConfig::default()
    };
    let s = common::setup(fake, PROVIDER).await;
    let (config, data) = (s.config.as_path(), s.data.as_path());
    let out = command(config, data, SYNTHETIC).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let id = common::session_id(&out);
    let e = export(config, data, &id);
    let failed = e["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 3, "one per observer: {failed:?}");
    for f in failed {
        assert_eq!(f["subject"], "s1", "{f}");
        assert!(f["observer"].is_string(), "{f}");
        assert_eq!(f["what"], "scenarios", "{f}");
        assert!(!f["error"].as_str().unwrap().is_empty(), "{f}");
    }
    let out = command(config, data, &["export", &id, "--format", "csv"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = csv.lines().filter(|l| l.ends_with(",failed")).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    for (row, f) in rows.iter().zip(failed) {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells[0], "s1");
        assert_eq!(cells[1], f["observer"].as_str().unwrap());
        assert!(!cells[2].is_empty(), "the observer's context: {row}");
        assert_eq!(&cells[3..], ["", "", "failed"], "{row}");
    }
    assert_eq!(
        csv.lines().filter(|l| l.ends_with(",self")).count(),
        5,
        "the self-report's traits: {csv}"
    );
    // Where results are read, the missing reports are said, not only counted in n.
    let report = command(config, data, &["report", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert_eq!(text.matches("failed: o").count(), 3, "{text}");
    assert!(text.contains("'s report on s1 (scenarios): "), "{text}");
    let md = command(config, data, &["export", &id, "--format", "md"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&md.stdout).matches("failed: o").count(), 3);
    let json = command(config, data, &["report", &id, "--format", "json"])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json[0]["failed"].as_array().unwrap().len(), 3, "{json}");
    // A resume asks the failed ones again (and they fail again here).
    let before = s.server.stats().requests;
    let out = command(config, data, &["observe", "--resume", &id, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(s.server.stats().requests > before);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["failed"].as_array().unwrap().len(),
        3,
        "--json says them too: {summary}"
    );
    assert_eq!(export(config, data, &id)["failed"].as_array().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_whose_subject_character_is_gone_is_refused_and_an_edited_one_is_said() {
    let server = FakeServer::start(FakeConfig {
        tokens_per_s: 3000.0,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server);
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("characters")).unwrap();
    let own = data.join("characters/wren-en.toml");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/assets/characters/hermione-en.toml"
    ))
    .unwrap()
    .replace("id = \"hermione-en\"", "id = \"wren-en\"");
    std::fs::write(&own, &text).unwrap();
    let args = [
        "observe",
        "--subject",
        "wren-en",
        "--observers",
        "2",
        "--scenarios",
        "2",
        "--provider",
        "fake",
        "--seed",
        "4",
    ];
    let session = common::kill_after_requests(&config, &data, &args, &server, 6).await;
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    let journal = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    assert!(
        journal.lines().next().unwrap().contains("\"wren-en\":"),
        "its version is recorded: {journal}"
    );

    std::fs::rename(&own, dir.path().join("wren-en.toml")).unwrap();
    let out = command(&config, &data, &["observe", "--resume", &id]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("asks character wren-en, which is no longer in the catalog") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(session.join("journal.jsonl")).unwrap(),
        journal,
        "nothing written"
    );

    std::fs::write(
        &own,
        text.replacen("description = \"\"\"", "description = \"\"\"Edited. ", 1),
    )
    .unwrap();
    let out = command(&config, &data, &["observe", "--resume", &id]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("character wren-en changed since the session recorded it"),
        "the edit is said: {stderr}"
    );
}

/// A character has one version wherever it is measured: an observer session versions it with its
/// memories, as an interview does (else every imported character showed a phantom edit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_session_records_the_version_an_interview_records() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &server);
    let data = dir.path().join("data");
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/import/ake.jsonl");
    let out = command(
        &config,
        &data,
        &["import", "chatharuhi", fixture, "--name", "阿珂", "--id", "ake"],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let version = |args: &[&str]| {
        let out = command(&config, &data, args).output().unwrap();
        let id = common::session_id(&out);
        let first = std::fs::read_to_string(data.join("sessions").join(&id).join("journal.jsonl")).unwrap();
        let first: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
        first["character_versions"]["ake"].as_str().unwrap().to_string()
    };
    let interviewed = version(&[
        "run",
        "--characters",
        "ake",
        "--scales",
        "GSE",
        "--methods",
        "er-batch",
        "--rpa",
        "fake",
        "--judge",
        "fake",
        "--json",
    ]);
    let observed = version(&[
        "observe",
        "--subject",
        "ake",
        "--observers",
        "1",
        "--scenarios",
        "1",
        "--provider",
        "fake",
        "--seed",
        "2",
        "--json",
    ]);
    assert_eq!(observed, interviewed);
}
