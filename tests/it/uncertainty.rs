//! Numbers a paper can use: `report`'s 95% bootstrap intervals (reproducible from their seed, none
//! with one character), its LaTeX table, and `compare`'s paired comparison of two sessions.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const BFI: &str = "20261130-231918-bfi-and-16p-on-the-local-model-248f";
const GSE: &str = "20261129-201520-gse-on-the-local-model-e700";

/// The binary on an empty data dir (no config), so only the bundled samples are found.
fn incharacter(data: &Path, args: &[&str]) -> std::process::Output {
    crate::common::offline(data, args)
}

fn stdout(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(data: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&stdout(&incharacter(data, args))).unwrap()
}

/// A copy of sample `id` in `data` keeping only the records of `character` (and the run's own).
fn one_character(data: &Path, id: &str, drop: &str) -> String {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(id);
    let text = std::fs::read_to_string(from.join("journal.jsonl")).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.contains(&format!("\"character\":\"{drop}\"")))
        .map(|l| format!("{l}\n"))
        .collect();
    let to = data.join("sessions").join(id);
    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(to.join("journal.jsonl"), kept).unwrap();
    id.to_string()
}

#[test]
fn every_interval_contains_its_value_and_a_seed_gives_the_same_json() {
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    let report = json(data, &["report", BFI, "--format", "json"]);
    assert_eq!(
        report[0]["bootstrap"],
        serde_json::json!({"resamples": 2000, "seed": 1})
    );
    let mut checked = 0;
    for row in report[0]["summary"].as_array().unwrap() {
        let intervals = row["intervals"].as_object().unwrap();
        for key in ["acc_dim", "acc_full", "mae"] {
            assert!(intervals.contains_key(key), "{row}");
        }
        // The scalar fields stay as they were.
        assert_eq!(row["acc_dim"], intervals["acc_dim"]["value"]);
        for (name, i) in intervals {
            let (Some(v), Some(ci)) = (i["value"].as_f64(), i["ci"].as_array()) else {
                assert!(i["ci"].is_null(), "{name}: an interval without a value: {i}");
                continue;
            };
            let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
            assert!(lo <= v && v <= hi, "{name}: {v} outside [{lo}, {hi}]");
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked}");
    let again = json(data, &["report", BFI, "--format", "json"]);
    assert_eq!(report, again, "the same seed prints the same JSON");
    let other = json(
        data,
        &["report", BFI, "--format", "json", "--seed", "9", "--bootstrap", "500"],
    );
    assert_eq!(other[0]["bootstrap"], serde_json::json!({"resamples": 500, "seed": 9}));
    assert_ne!(report[0]["summary"], other[0]["summary"], "another seed, other draws");
    // Too few resamples to place a 95% interval's ends: refused, not printed as one.
    let few = crate::common::offline(data, &["report", BFI, "--bootstrap", "1"]);
    assert_eq!(few.status.code(), Some(2));
    // Four billion would be 32 GiB per figure: refused too, never an abort.
    let many = crate::common::offline(data, &["report", BFI, "--bootstrap", "4294967295"]);
    assert_eq!(many.status.code(), Some(2), "{}", String::from_utf8_lossy(&many.stderr));
}

#[test]
fn one_character_has_no_interval_never_a_fake_one() {
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    let id = one_character(data, GSE, "zhongli-zh");
    let report = json(data, &["report", &id, "--format", "json"]);
    let rows = report[0]["summary"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        for i in row["intervals"].as_object().unwrap().values() {
            assert!(i["ci"].is_null(), "{row}");
        }
    }
    let md = stdout(&incharacter(data, &["report", &id]));
    assert!(md.contains(" [–] |"), "{md}");
    // The LaTeX caption promises no interval the table does not have.
    let tex = stdout(&incharacter(data, &["report", &id, "--format", "latex"]));
    assert!(
        tex.contains("No intervals") && !tex.contains("Beside each figure"),
        "{tex}"
    );
}

#[test]
fn one_scored_character_among_several_has_no_interval_either() {
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    // All three characters answered; only Hermione's dimensions were assessed.
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(BFI);
    let text = std::fs::read_to_string(from.join("journal.jsonl")).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.contains("\"event\":\"dimension_assessed\"") || l.contains("\"character\":\"hermione-en\""))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        kept.contains("\"character\":\"sheldon-en\""),
        "the others' answers stay"
    );
    let to = data.join("sessions").join(BFI);
    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(to.join("journal.jsonl"), kept).unwrap();
    let report = json(data, &["report", BFI, "--format", "json"]);
    let rows = report[0]["summary"].as_array().unwrap();
    assert!(!rows.is_empty());
    let mut valued = 0;
    for row in rows {
        for key in ["acc_dim", "acc_full", "mae"] {
            let i = &row["intervals"][key];
            assert!(i["ci"].is_null(), "{key}: {row}");
            valued += usize::from(i["value"].is_number());
        }
    }
    assert!(valued >= 3, "Hermione's figures are there: {rows:?}");
    let md = stdout(&incharacter(data, &["report", BFI]));
    assert!(md.contains(" [–] |") && !md.contains("0.500 [0.500, 0.500]"), "{md}");
}

#[test]
fn the_latex_table_is_booktabs_with_a_column_per_figure() {
    let data = tempfile::tempdir().unwrap();
    let tex = stdout(&incharacter(data.path(), &["report", BFI, GSE, "--format", "latex"]));
    for part in [
        "\\begin{table}",
        "\\toprule",
        "\\midrule",
        "\\bottomrule",
        "\\end{tabular}",
        "\\end{table}",
    ] {
        assert!(tex.contains(part), "{part}: {tex}");
    }
    // Two sessions: session and method, then 3 figures for each of the 3 scales (16P, BFI, GSE).
    assert!(tex.contains("\\begin{tabular}{llccccccccc}"), "{tex}");
    let body: Vec<&str> = tex
        .lines()
        .skip_while(|l| *l != "\\midrule")
        .skip(1)
        .take_while(|l| *l != "\\bottomrule")
        .collect();
    assert_eq!(body.len(), 3 + 4, "BFI's session: 3 methods; GSE's: 4");
    for row in &body {
        // Cells are separated by & outside braces.
        let mut depth = 0i32;
        let cells = 1 + row
            .chars()
            .filter(|c| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                *c == '&' && depth == 0
            })
            .count()
            - row.matches("\\&").count();
        assert_eq!(cells, 11, "{row}");
        assert!(row.ends_with("\\\\"), "{row}");
    }
    // Special characters of ids and model names are escaped.
    assert!(!body.iter().any(|r| r.contains("local_model")), "underscores escaped");
    assert!(tex.contains("95\\% percentile bootstrap"), "{tex}");
    // Where a TeX engine is installed, the table compiles in a minimal document.
    let engine = Command::new("pdflatex").arg("--version").output();
    if engine.is_ok_and(|o| o.status.success()) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.tex"), &tex).unwrap();
        std::fs::write(
            dir.path().join("doc.tex"),
            "\\documentclass{article}\\usepackage{booktabs}\\begin{document}\\input{t.tex}\\end{document}\n",
        )
        .unwrap();
        let out = Command::new("pdflatex")
            .args(["-interaction=nonstopmode", "-halt-on-error", "doc.tex"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        assert!(dir.path().join("doc.pdf").is_file());
    }
}

#[test]
fn a_session_compared_with_itself_differs_by_nothing() {
    let data = tempfile::tempdir().unwrap();
    let c = json(data.path(), &["compare", BFI, BFI, "--json"]);
    for figure in ["mean_abs_error", "acc_dim"] {
        assert_eq!(c[figure]["diff"], 0.0, "{c}");
        assert_eq!(c[figure]["p"], 1.0, "{c}");
        assert_eq!(c[figure]["a"], c[figure]["b"]);
        assert_eq!(c[figure]["ci"], serde_json::json!([0.0, 0.0]));
    }
    assert_eq!(c["n"], 67, "3 characters × (BFI × 3 methods + 16P × 2 scored)");
    assert_eq!(c["characters"], 3);
    assert_eq!(c["permutation"], serde_json::json!({"exact": true, "resamples": 8}));
    // Three characters: the text says the interval runs narrow and p is the one to go by.
    let text = incharacter(data.path(), &["compare", BFI, BFI]);
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains("With 3 character(s) the bootstrap interval runs narrow: go by p (exact at this size)."),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
    // Filters narrow it; a filter leaving nothing in common says what each measured.
    let er = json(
        data.path(),
        &["compare", BFI, BFI, "--method", "er-batch", "--scale", "bfi", "--json"],
    );
    assert_eq!(er["n"], 15);
    let none = incharacter(data.path(), &["compare", BFI, BFI, "--scale", "GSE"]);
    assert_eq!(none.status.code(), Some(2));
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(
        err.contains("no scored character × dimension on GSE") && err.contains("BFI × er-batch"),
        "{err}"
    );
}

/// Two judges that differ only in their noise (the scripted server's seed), on the same interviews.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judges_differing_only_in_noise_give_an_interval_that_covers_zero() {
    use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
    let first = FakeServer::start(FakeConfig::default()).await.unwrap();
    let second = FakeServer::start(FakeConfig {
        seed: 2,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config_a = crate::common::fake_config(one.path(), &first, "max_concurrency = 8");
    let config_b = crate::common::fake_config(two.path(), &second, "max_concurrency = 8");
    let data = one.path().join("data");
    let characters = "hermione,harry,ron,luna,snape,malfoy,sheldon,raj";
    let run = [
        "run",
        "--characters",
        characters,
        "--scales",
        "BFI",
        "--methods",
        "er-batch",
        "--json",
    ];
    let a = crate::common::session_id(&crate::common::output(&config_a, &data, &run).await);
    let assess = ["assess", &a, "--json"];
    let b = crate::common::session_id(&crate::common::output(&config_b, &data, &assess).await);
    let out = crate::common::output(&config_a, &data, &["compare", &a, &b, "--json"]).await;
    let c: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(c["characters"], 8);
    assert_eq!(c["n"], 40);
    let mae = &c["mean_abs_error"];
    assert_ne!(mae["diff"], 0.0, "the two judges did differ: {c}");
    let (lo, hi) = (mae["ci"][0].as_f64().unwrap(), mae["ci"][1].as_f64().unwrap());
    assert!(lo <= 0.0 && 0.0 <= hi, "{c}");
    assert!(mae["p"].as_f64().unwrap() > 0.05, "{c}");
    assert_eq!(c["permutation"], serde_json::json!({"exact": true, "resamples": 256}));
}

#[test]
fn the_export_gives_each_dimension_its_spread() {
    let data = tempfile::tempdir().unwrap();
    // The BFI sample has one repeat: ER_batch's spread is its batches'; OC has a single measurement.
    let export = json(data.path(), &["export", BFI, "--format", "json"]);
    let spreads = export["spreads"].as_array().unwrap();
    let er: Vec<&Value> = spreads
        .iter()
        .filter(|s| s["method"] == "er-batch" && s["scale"] == "BFI")
        .collect();
    assert_eq!(er.len(), 15, "3 characters × 5 dimensions");
    for s in &er {
        assert_eq!(s["over"], "batches", "{s}");
        assert!(
            s["score"]["sd"].as_f64().unwrap() >= 0.0 && s["n"].as_u64().unwrap() >= 2,
            "{s}"
        );
        assert!(s["score"]["value"].is_f64());
    }
    let oc = spreads.iter().find(|s| s["method"] == "oc").unwrap();
    assert!(oc["score"]["sd"].is_null() && oc["over"].is_null(), "{oc}");
}

/// A model's name with a `|` (or a session's with a line break) stays in its cell of the Markdown
/// table: every row has the header's 13 cells.
#[test]
fn the_summary_tables_cells_hold_what_would_end_them() {
    let data = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(GSE);
    let text = std::fs::read_to_string(from.join("journal.jsonl"))
        .unwrap()
        .replace("\"model\":\"smollm2-135m\"", "\"model\":\"org/qwen|7b\\nq4\"");
    let to = data.path().join("sessions").join(GSE);
    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(to.join("journal.jsonl"), text).unwrap();
    let printed = stdout(&incharacter(data.path(), &["report", GSE]));
    let cells = |row: &str| row.replace("\\|", "").matches('|').count() - 1;
    let rows: Vec<&str> = printed.lines().filter(|l| l.starts_with('|')).collect();
    assert!(rows.len() >= 3, "{printed}");
    assert!(rows.iter().all(|r| cells(r) == 13), "{printed}");
    assert!(printed.contains("| org/qwen\\|7b q4 |"), "{printed}");
}
