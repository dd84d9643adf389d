//! The bundled sample sessions (what `incharacter demo` replays): every journal line loads, every
//! header names the model, its provider kind and the date, every line carries the timing a replay
//! needs, `incharacter report` prints each one's tables, and the folder stays small.

use std::path::{Path, PathBuf};
use std::process::Command;

use incharacter::study::Event;

fn samples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn size(path: &Path) -> u64 {
    if path.is_dir() {
        std::fs::read_dir(path).unwrap().map(|e| size(&e.unwrap().path())).sum()
    } else {
        path.metadata().unwrap().len()
    }
}

#[test]
fn every_sample_names_its_model_and_replays_with_its_timing() {
    let dirs = samples();
    assert!(dirs.len() >= 3, "interview, self-report and observer samples: {dirs:?}");
    for dir in &dirs {
        let journal = dir.join("journal.jsonl");
        let events: Vec<Event> =
            incharacter::journal::read(&journal).unwrap_or_else(|e| panic!("{}: {e}", journal.display()));
        let providers = match events.first() {
            Some(first @ (Event::RunStarted { .. } | Event::ObserveStarted { .. })) => {
                let header = first.start().unwrap();
                assert!(
                    header.created.starts_with("20"),
                    "{}: created {}",
                    dir.display(),
                    header.created
                );
                header.providers.clone()
            }
            other => panic!("{}: starts with {other:?}", dir.display()),
        };
        assert!(!providers.is_empty());
        for (role, info) in &providers {
            assert!(
                !info.model.is_empty() && !info.kind.is_empty(),
                "{}: the {role} names its model and provider kind",
                dir.display()
            );
        }
        let text = std::fs::read_to_string(&journal).unwrap();
        for (i, line) in text.lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(
                v["ts_ms"].as_u64().is_some(),
                "{}:{}: no ts_ms for the replay",
                journal.display(),
                i + 1
            );
        }
    }
    let total: u64 = dirs.iter().map(|d| size(d)).sum();
    assert!(total < 5 * 1024 * 1024, "sample-sessions/ holds {total} bytes");
}

#[test]
fn report_prints_the_tables_of_every_sample() {
    let data = tempfile::tempdir().unwrap();
    for dir in samples() {
        let id = dir.file_name().unwrap().to_string_lossy().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_incharacter"))
            .args(["report", &id])
            .env("INCHARACTER_DATA_DIR", data.path())
            .env("INCHARACTER_CONFIG", data.path().join("none.toml"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{id}: {}", String::from_utf8_lossy(&out.stderr));
        // An interview's table has a row per scale × method; an observer run's, a row per trait.
        let rows = stdout
            .lines()
            .filter(|l| l.contains(&format!("| {id} |")) || l.starts_with("Agreeableness"))
            .count();
        assert!(rows >= 1, "{id}: a table with rows:\n{stdout}");
    }
}

/// The binary on an empty data dir (no config), so only the bundled samples are found.
fn incharacter(data: &Path, args: &[&str]) -> std::process::Output {
    crate::common::offline(data, args)
}

#[test]
fn the_annotated_sample_is_read_by_id_and_its_export_imports_back_with_repeat_and_note() {
    const GSE: &str = "20261129-201520-gse-on-the-local-model-e700";
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    let agreement = incharacter(data, &["agreement", "--session", GSE, "--method", "oc"]);
    assert!(
        agreement.status.success(),
        "{}",
        String::from_utf8_lossy(&agreement.stderr)
    );
    assert!(String::from_utf8_lossy(&agreement.stdout).contains("maintainer"));
    let listed: serde_json::Value = serde_json::from_slice(&incharacter(data, &["sessions", "--json"]).stdout).unwrap();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == GSE && s["sample"] == true),
        "{listed}"
    );

    let exported = incharacter(data, &["annotations", "export", GSE, "--format", "csv"]);
    assert!(exported.status.success());
    let csv = String::from_utf8(exported.stdout).unwrap();
    assert!(csv.starts_with("annotator,task,character,scale,repeat,dimension,item_id,value,note,observer\n"));
    // A note on the first row, as a colleague might add in a spreadsheet (before the empty observer).
    let mut lines: Vec<String> = csv.lines().map(String::from).collect();
    assert!(lines[1].ends_with(",,"), "{}", lines[1]);
    let at = lines[1].len() - 1;
    lines[1].insert_str(at, "too short to judge");
    let edited = lines.join("\n") + "\n";
    let sheet = data.join("ratings.csv");
    std::fs::write(&sheet, &edited).unwrap();

    let refused = incharacter(data, &["annotations", "import", GSE, sheet.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("read-only"));

    // Into a copy of its journal without annotations, the sheet imports whole and exports the same.
    let copy = data.join("sessions").join(GSE);
    std::fs::create_dir_all(&copy).unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(GSE);
    std::fs::copy(sample.join("journal.jsonl"), copy.join("journal.jsonl")).unwrap();
    let imported = incharacter(data, &["annotations", "import", GSE, sheet.to_str().unwrap()]);
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    let again = incharacter(data, &["annotations", "export", GSE, "--format", "csv"]);
    assert_eq!(String::from_utf8(again.stdout).unwrap(), edited);
}

#[test]
fn the_markdown_export_holds_the_interviews_and_the_assessments() {
    let data = tempfile::tempdir().unwrap();
    let id = "20261129-233202-bfi-on-the-local-model-e80e";
    let out = incharacter(data.path(), &["export", id, "--format", "md"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let md = String::from_utf8_lossy(&out.stdout);
    let json = incharacter(data.path(), &["export", id, "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(md.starts_with(&format!("# Session {id}")), "{md}");
    // Every answer is there, under its question; every assessed dimension has a row.
    let answers = json["interviews"].as_array().unwrap();
    let items: usize = answers.iter().map(|g| g["items"].as_array().unwrap().len()).sum();
    assert_eq!(md.matches(". **Q** (item ").count(), items);
    let first = &answers[0]["items"][0];
    assert!(md.contains(first["question"].as_str().unwrap()), "{md}");
    let groups = json["assessments"].as_array().unwrap();
    let dimensions: usize = groups.iter().map(|g| g["dimensions"].as_object().unwrap().len()).sum();
    let rows = md
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| dimension"))
        .count();
    assert!(rows >= dimensions, "{rows} rows for {dimensions} dimensions");
    assert!(md.contains("## Interviews") && md.contains("## Assessments"), "{md}");
}

/// A sample whose journal cannot be read is said to be left out, as a data-dir session is, never
/// dropped from the list without a word.
#[test]
fn a_damaged_sample_is_said_to_be_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples");
    for id in [
        "20261129-201520-gse-on-the-local-model-e700",
        "20261129-233202-bfi-on-the-local-model-e80e",
    ] {
        std::fs::create_dir_all(samples.join(id)).unwrap();
    }
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    let good = "20261129-201520-gse-on-the-local-model-e700";
    std::fs::copy(
        from.join(good).join("journal.jsonl"),
        samples.join(good).join("journal.jsonl"),
    )
    .unwrap();
    std::fs::write(
        samples.join("20261129-233202-bfi-on-the-local-model-e80e/journal.jsonl"),
        "",
    )
    .unwrap();
    let data = dir.path().join("data");
    let out = crate::common::command(&data.join("none.toml"), &data, &["sessions"])
        .env("INCHARACTER_SAMPLES", &samples)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(stdout.contains(good), "{stdout}");
    assert!(
        stderr.contains("20261129-233202-bfi-on-the-local-model-e80e is not listed"),
        "{stderr}"
    );
}

#[test]
fn dash_as_the_output_is_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let id = "20261129-201520-gse-on-the-local-model-e700";
    for args in [
        vec!["export", id, "--format", "md", "-o", "-"],
        vec!["annotations", "export", id, "-o", "-"],
    ] {
        let out = crate::common::command(&data.join("none.toml"), &data, &args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!stdout.contains("wrote -") && !stdout.is_empty(), "{args:?}: {stdout}");
        assert!(!dir.path().join("-").exists(), "{args:?} made a file named \"-\"");
    }
}
