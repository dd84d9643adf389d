//! Human annotations imported into a finished session: `agreement --session` equals statistics computed
//! here from the exported OC options by formulas written out in this file (Pearson, Spearman with
//! average ranks, Kendall τ-b, right/close/wrong, sklearn's quadratic-weighted kappa), and bad rows
//! are located and write nothing.

use std::collections::BTreeMap;
use std::process::Command;

use crate::common;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer, ScriptRule};
use serde_json::Value;

use crate::common::command;

fn ok(mut c: Command) -> Vec<u8> {
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

pub(crate) fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

pub(crate) fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let (mx, my) = (mean(x), mean(y));
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    cov / (vx * vy).sqrt()
}

pub(crate) fn ranks(x: &[f64]) -> Vec<f64> {
    x.iter()
        .map(|v| {
            let below = x.iter().filter(|w| *w < v).count() as f64;
            let equal = x.iter().filter(|w| *w == v).count() as f64;
            below + (equal + 1.0) / 2.0
        })
        .collect()
}

fn kendall_b(x: &[f64], y: &[f64]) -> f64 {
    let (mut c, mut d, mut tx, mut ty) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            // (f64::signum of 0.0 is 1.0, so compare instead.)
            let sign = |v: f64| {
                if v > 0.0 {
                    1.0
                } else if v < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            };
            let (a, b) = (sign(x[i] - x[j]), sign(y[i] - y[j]));
            if a == 0.0 && b == 0.0 {
            } else if a == 0.0 {
                tx += 1.0;
            } else if b == 0.0 {
                ty += 1.0;
            } else if a == b {
                c += 1.0;
            } else {
                d += 1.0;
            }
        }
    }
    (c - d) / ((c + d + tx) * (c + d + ty)).sqrt()
}

/// sklearn.metrics.cohen_kappa_score(a, b, weights="quadratic"): labels = sorted union, weights by
/// label index.
pub(crate) fn qwk(a: &[i64], b: &[i64]) -> f64 {
    let mut labels: Vec<i64> = a.iter().chain(b).copied().collect();
    labels.sort();
    labels.dedup();
    let k = labels.len();
    let idx = |v: i64| labels.iter().position(|l| *l == v).unwrap();
    let mut m = vec![vec![0.0; k]; k];
    for (x, y) in a.iter().zip(b) {
        m[idx(*x)][idx(*y)] += 1.0;
    }
    let n = a.len() as f64;
    let rows: Vec<f64> = m.iter().map(|r| r.iter().sum()).collect();
    let cols: Vec<f64> = (0..k).map(|j| m.iter().map(|r| r[j]).sum()).collect();
    let (mut observed, mut expected) = (0.0, 0.0);
    for i in 0..k {
        for j in 0..k {
            let w = ((i as f64 - j as f64) / (k as f64 - 1.0)).powi(2);
            observed += w * m[i][j];
            expected += w * rows[i] * cols[j] / n;
        }
    }
    1.0 - observed / expected
}

pub(crate) fn close(a: f64, b: &Value, what: &str) {
    assert!((a - b.as_f64().unwrap()).abs() < 1e-9, "{what}: {a} vs {b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_ratings_agree_with_an_independent_computation() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "max_concurrency = 4");
    let data = dir.path().join("data");
    let (c, d) = (config.clone(), data.clone());
    let out = tokio::task::spawn_blocking(move || {
        ok(command(
            &c,
            &d,
            &[
                "run",
                "--characters",
                "hermione-en",
                "--scales",
                "BFI",
                "--methods",
                "oc,er-batch",
                "--json",
            ],
        ))
    })
    .await
    .unwrap();
    let id = serde_json::from_slice::<Value>(&out).unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();
    let export: Value =
        serde_json::from_slice(&ok(command(&config, &data, &["export", &id, "--format", "json"]))).unwrap();
    let oc = export["assessments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["method"] == "oc")
        .unwrap();
    // item id → (dimension, OC option)
    let mut options: BTreeMap<u64, (String, Value)> = BTreeMap::new();
    for (dim, v) in oc["dimensions"].as_object().unwrap() {
        for item in v["items"].as_array().unwrap() {
            options.insert(item["item_id"].as_u64().unwrap(), (dim.clone(), item["option"].clone()));
        }
    }
    // Two annotators: ann rates every item, bob the first 30; a few x.
    let mut csv = String::from("annotator,task,character,scale,dimension,item_id,value\n");
    let mut expected: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    let (mut ann_q, mut bob_q) = (Vec::new(), Vec::new());
    for (&id, (dim, option)) in &options {
        let a = if id % 11 == 0 {
            None
        } else {
            Some(1 + (id * 7 % 5) as i64)
        };
        let b = 1 + (id * 3 % 5) as i64;
        let value = |v: Option<i64>| v.map_or("x".to_string(), |v| v.to_string());
        csv.push_str(&format!("ann,item,Hermione Granger,BFI,{dim},{id},{}\n", value(a)));
        if id <= 30 {
            csv.push_str(&format!("bob,item,hermione-en,bfi,{dim},{id},{b}\n"));
            if let Some(a) = a {
                ann_q.push(a);
                bob_q.push(b);
            }
        }
        if let (Some(a), Some(m)) = (a, option.as_f64()) {
            expected.entry("ann").or_default().push((a as f64, m));
        }
        if let (true, Some(m)) = (id <= 30, option.as_f64()) {
            expected.entry("bob").or_default().push((b as f64, m));
        }
    }
    let csv_path = dir.path().join("ratings.csv");
    std::fs::write(&csv_path, &csv).unwrap();
    // One annotator's file cannot be written (a folder in its place): nothing is imported, for
    // neither annotator, and no file is left made for it.
    let annotations = data.join("sessions").join(&id).join("annotations");
    let import = || {
        command(
            &config,
            &data,
            &["annotations", "import", &id, csv_path.to_str().unwrap()],
        )
    };
    std::fs::create_dir_all(annotations.join("bob.jsonl")).unwrap();
    let refused = import().output().unwrap();
    assert!(!refused.status.success());
    let files: Vec<_> = std::fs::read_dir(&annotations)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        files,
        ["bob.jsonl"],
        "nothing written: {}",
        String::from_utf8_lossy(&refused.stderr)
    );
    std::fs::remove_dir(annotations.join("bob.jsonl")).unwrap();
    // Nor is a link in its place followed.
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"mine").unwrap();
    std::os::unix::fs::symlink(&victim, annotations.join("bob.jsonl")).unwrap();
    let refused = import().output().unwrap();
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is a symbolic link"));
    assert_eq!(std::fs::read(&victim).unwrap(), b"mine");
    assert!(!annotations.join("ann.jsonl").exists());
    std::fs::remove_file(annotations.join("bob.jsonl")).unwrap();
    let said = ok(import());
    assert!(String::from_utf8_lossy(&said).contains("by ann, bob"));
    // An import that cannot be written whole (bob's file past a file size limit, after cat's rows
    // were appended) takes back what it wrote: all or none.
    let kept: Vec<Vec<u8>> = ["ann", "bob"]
        .iter()
        .map(|a| std::fs::read(annotations.join(format!("{a}.jsonl"))).unwrap())
        .collect();
    assert!(
        kept[1].len() > 4096,
        "bob's file is past the limit below: {}",
        kept[1].len()
    );
    let more = dir.path().join("more.csv");
    let (dim, _) = &options[&1];
    std::fs::write(
        &more,
        format!("annotator,task,character,scale,dimension,item_id,value\ncat,item,hermione-en,BFI,{dim},1,2\nbob,item,hermione-en,BFI,{dim},1,2\n"),
    )
    .unwrap();
    let limited = Command::new("bash")
        .args(["-c", "ulimit -f 4 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_incharacter"))
        .args(["annotations", "import", &id, more.to_str().unwrap()])
        .env("INCHARACTER_CONFIG", &config)
        .env("INCHARACTER_DATA_DIR", &data)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&limited.stderr);
    assert!(!limited.status.success(), "{said}");
    assert!(said.contains("nothing of the 2 annotations was imported"), "{said}");
    for (a, before) in ["ann", "bob"].iter().zip(&kept) {
        assert_eq!(
            &std::fs::read(annotations.join(format!("{a}.jsonl"))).unwrap(),
            before,
            "{a}"
        );
    }
    assert!(
        !annotations.join("cat.jsonl").exists(),
        "the file made for cat is taken back too"
    );

    let report: Value = serde_json::from_slice(&ok(command(
        &config,
        &data,
        &["agreement", "--session", &id, "--method", "oc", "--json"],
    )))
    .unwrap();
    assert_eq!(report["method"], "oc");
    for (name, pairs) in &expected {
        let got = &report["annotators"][name];
        let (h, m): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
        assert_eq!(got["n"], pairs.len());
        close(pearson(&h, &m), &got["pearson"], "pearson");
        close(pearson(&ranks(&h), &ranks(&m)), &got["spearman"], "spearman");
        close(kendall_b(&h, &m), &got["kendall_tau_b"], "kendall");
        let right = pairs.iter().filter(|(a, b)| (a - b).abs() < 1.0).count();
        let closes = pairs.iter().filter(|(a, b)| (a - b).abs() == 1.0).count();
        assert_eq!(got["right"], right);
        assert_eq!(got["close"], closes);
        assert_eq!(got["wrong"], pairs.len() - right - closes);
        close(
            (right as f64 + closes as f64 / 2.0) / pairs.len() as f64,
            &got["accuracy"],
            "accuracy",
        );
    }
    close(qwk(&ann_q, &bob_q), &report["inter_annotator"]["qwk"], "qwk");
    assert_eq!(report["inter_annotator"]["pairs"][0]["n"], ann_q.len());
    // The table's columns line up under its header.
    let table = String::from_utf8(ok(command(
        &config,
        &data,
        &["agreement", "--session", &id, "--method", "oc"],
    )))
    .unwrap();
    let lines: Vec<&str> = table.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("annotator")).unwrap();
    for row in &lines[header + 1..header + 1 + expected.len()] {
        assert_eq!(row.chars().count(), lines[header].chars().count(), "{table}");
    }
    // A method the session never ran has no judgments to agree with: refused, never a table of
    // zeros; an observer session's task takes no --method either.
    let mut never = command(&config, &data, &["agreement", "--session", &id, "--method", "er-all"]);
    let never = never.output().unwrap();
    assert_eq!(never.status.code(), Some(2));
    let said = String::from_utf8_lossy(&never.stderr);
    assert!(said.contains("did not run it; it ran oc, er-batch"), "{said}");

    let before = ok(command(
        &config,
        &data,
        &["annotations", "export", &id, "--format", "csv"],
    ));
    // Bad rows are located and nothing of the file is written: a value out of range, and subject rows
    // and observers, which belong to observer sessions.
    for (sheet, says) in [
        (
            "annotator,task,character,scale,dimension,item_id,value\nann,item,hermione-en,BFI,Openness,5,2\nann,item,hermione-en,BFI,Openness,5,9\n",
            ":3:37: value 9 is outside [1, 5]",
        ),
        (
            "annotator,task,character,scale,dimension,item_id,value,observer\nann,subject,hermione-en,IPIP-50,Extraversion,,3,\n",
            ":2:5: session",
        ),
        (
            "annotator,task,character,scale,dimension,item_id,value,observer\nann,item,hermione-en,BFI,Openness,5,2,o1\n",
            ":2:39: an interview case has no observer",
        ),
        // A case the session lacks is named at the first field that no case matches.
        (
            "annotator,task,character,scale,dimension,item_id,value,repeat\nann,item,hermione-en,BFI,Openness,5,2,7\n",
            ":2:39: no such item case in session",
        ),
        (
            "annotator,task,character,scale,dimension,item_id,value\nann,item,hermione-en,BFI,Openness,77,2\n",
            ":2:35: no such item case in session",
        ),
    ] {
        std::fs::write(&csv_path, sheet).unwrap();
        let out = command(
            &config,
            &data,
            &["annotations", "import", &id, csv_path.to_str().unwrap()],
        )
        .output()
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("ratings.csv{says}")), "{err}");
    }
    assert_eq!(
        ok(command(
            &config,
            &data,
            &["annotations", "export", &id, "--format", "csv"]
        )),
        before
    );
}

/// An assessment a resume made again supersedes the one it replaced: agreement is reckoned against
/// what `export` shows, not against the first sitting's record of a dimension with a failed item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agreement_reads_the_assessment_a_resume_made_again() {
    let failing = FakeServer::start(FakeConfig {
        script: vec![ScriptRule {
            contains: "how much of the conversation tends to come from you".into(),
            reply: String::new(),
        }],
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &failing, "max_retries = 0");
    let data = dir.path().join("data");
    let (c, d) = (config.clone(), data.clone());
    let first = tokio::task::spawn_blocking(move || {
        command(
            &c,
            &d,
            &[
                "run",
                "--characters",
                "hermione-en",
                "--scales",
                "BFI",
                "--methods",
                "oc",
                "--json",
            ],
        )
        .output()
        .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(first.status.code(), Some(1), "an item failed");
    let id = serde_json::from_slice::<Value>(&first.stdout).unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace(&failing.base_url(), &server.base_url())).unwrap();
    let (c, d, i) = (config.clone(), data.clone(), id.clone());
    tokio::task::spawn_blocking(move || ok(command(&c, &d, &["run", "--resume", &i])))
        .await
        .unwrap();
    let export: Value =
        serde_json::from_slice(&ok(command(&config, &data, &["export", &id, "--format", "json"]))).unwrap();
    let mut csv = String::from("annotator,task,character,scale,dimension,item_id,value\n");
    let (mut human, mut machine) = (Vec::new(), Vec::new());
    for (dim, v) in export["assessments"][0]["dimensions"].as_object().unwrap() {
        for item in v["items"].as_array().unwrap() {
            let id = item["item_id"].as_u64().unwrap();
            let value = 1 + (id * 7 % 5);
            csv.push_str(&format!("ann,item,hermione-en,BFI,{dim},{id},{value}\n"));
            if let Some(option) = item["option"].as_f64() {
                human.push(value as f64);
                machine.push(option);
            }
        }
    }
    assert!(
        machine.len() > 30,
        "the resume answered and converted the items: {export}"
    );
    let ratings = dir.path().join("ratings.csv");
    std::fs::write(&ratings, csv).unwrap();
    ok(command(
        &config,
        &data,
        &["annotations", "import", &id, ratings.to_str().unwrap()],
    ));
    let report: Value = serde_json::from_slice(&ok(command(
        &config,
        &data,
        &["agreement", "--session", &id, "--method", "oc", "--json"],
    )))
    .unwrap();
    assert_eq!(report["annotators"]["ann"]["n"], machine.len(), "{report}");
    close(
        pearson(&human, &machine),
        &report["annotators"]["ann"]["pearson"],
        "pearson",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agreement_keeps_a_dimension_of_each_scale_apart() {
    // BFI and EPQ-R both have an Extraversion, on ranges of their own (1–5 and 0–1): pooled, its
    // statistics would mean nothing.
    let s = common::setup(FakeConfig::default(), "max_concurrency = 4").await;
    let args = common::run_hermione("BFI,EPQ-R", "oc", &["--json"]);
    let id = common::json_of(common::output(&s.config, &s.data, &args).await)["session"]
        .as_str()
        .unwrap()
        .to_string();
    let export = common::json_of(common::output(&s.config, &s.data, &["export", &id, "--format", "json"]).await);
    let mut csv = String::from("annotator,task,character,scale,dimension,item_id,value\n");
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for a in export["assessments"].as_array().unwrap() {
        let scale = a["scale"].as_str().unwrap();
        let d = &a["dimensions"]["Extraversion"];
        for item in d["items"].as_array().unwrap() {
            let value = if scale == "BFI" { 3 } else { 1 };
            csv.push_str(&format!(
                "ann,item,hermione-en,{scale},Extraversion,{},{value}\n",
                item["item_id"]
            ));
            // Pairs the interviewer converted to a number count.
            *counts.entry(scale.to_string()).or_default() += usize::from(item["option"].is_number());
        }
    }
    let path = s.dir.path().join("ratings.csv");
    std::fs::write(&path, csv).unwrap();
    let path_arg = path.display().to_string();
    let imported = common::output(&s.config, &s.data, &["annotations", "import", &id, &path_arg]).await;
    assert!(imported.status.success(), "{imported:?}");
    let report = common::json_of(
        common::output(
            &s.config,
            &s.data,
            &["agreement", "--session", &id, "--method", "oc", "--json"],
        )
        .await,
    );
    let rows = report["annotators"]["ann"]["dimensions"].as_array().unwrap();
    let got: BTreeMap<String, u64> = rows
        .iter()
        .map(|r| {
            assert_eq!(r["dimension"], "Extraversion", "{r}");
            (r["scale"].as_str().unwrap().to_string(), r["n"].as_u64().unwrap())
        })
        .collect();
    let expected: BTreeMap<String, u64> = counts.into_iter().map(|(k, v)| (k, v as u64)).collect();
    assert_eq!(got, expected, "{report}");
    assert_eq!(got.len(), 2);
    // The overall line pools the two scales: each also has its own, and the table says which to read.
    let ann = &report["annotators"]["ann"];
    assert_eq!(ann["pooled_scales"], 2, "{ann}");
    let scales: BTreeMap<String, u64> = ann["scales"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["scale"].as_str().unwrap().to_string(), r["n"].as_u64().unwrap()))
        .collect();
    assert_eq!(scales, expected, "{ann}");
    let table = common::output(&s.config, &s.data, &["agreement", "--session", &id, "--method", "oc"]).await;
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("  BFI ")) && text.lines().any(|l| l.starts_with("  EPQ-R ")),
        "{text}"
    );
    assert!(text.contains("pools scales of different ranges"), "{text}");
}
