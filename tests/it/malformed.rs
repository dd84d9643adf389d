//! The malformed-input corpus (`tests/fixtures/malformed/`): scale and character files, configs,
//! session journals and import files, each fed to the binary the way a user would. Every one must end
//! with exit status 2, an error that names the file (with line and column where the format has them)
//! and says what is wrong — and no panic.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    file: String,
    kind: String,
    expect: Vec<String>,
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/malformed")
}

#[test]
fn every_malformed_file_gets_a_located_error_and_no_panic() {
    let cases: Vec<Case> =
        serde_json::from_str(&std::fs::read_to_string(corpus().join("expected.json")).unwrap()).unwrap();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    for case in &cases {
        let file = corpus().join(&case.file);
        let f = file.to_str().unwrap();
        let data = tempfile::tempdir().unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_incharacter"));
        c.env("INCHARACTER_DATA_DIR", data.path())
            .env("INCHARACTER_CONFIG", data.path().join("none.toml"));
        match case.kind.as_str() {
            "validate" => c.args(["validate", f]),
            "config" => c.env("INCHARACTER_CONFIG", &file).arg("providers"),
            "journal" => {
                let id = "20261129-000000-bad-0001";
                let dir = data.path().join("sessions").join(id);
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::copy(&file, dir.join("journal.jsonl")).unwrap();
                c.args(["report", id])
            }
            "import-scale" => c.args(["import", "scale", f]),
            "import-psychobench" => c.args(["import", "scale", "--format", "psychobench", f]),
            "import-chatharuhi" => c.args(["import", "chatharuhi", f, "--id", "x"]),
            "import-rolebench" => c.args(["import", "rolebench", "--desc", f, "--profiles", f, "--role", "Wren"]),
            other => panic!("unknown kind {other}"),
        };
        let out = c.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(2), "{}: {text}", case.file);
        assert!(!text.contains("panicked"), "{}: {text}", case.file);
        for e in &case.expect {
            assert!(text.contains(e.as_str()), "{}: expected {e:?} in {text}", case.file);
        }
        // Where the format has positions, the file is named with line:column.
        if !case.file.starts_with("questionnaire-item") && !case.file.starts_with("psychobench") {
            let stem = if case.kind == "journal" {
                "journal.jsonl".to_string()
            } else {
                case.file.clone()
            };
            let at = text
                .find(&format!("{stem}:"))
                .unwrap_or_else(|| panic!("{}: no location in {text}", case.file));
            let rest = &text[at + stem.len() + 1..];
            let line: String = rest.chars().take_while(char::is_ascii_digit).collect();
            assert!(!line.is_empty(), "{}: no line number in {text}", case.file);
        }
        // Nothing was written into the data dir by a failed import.
        if case.kind.starts_with("import") {
            let written: Vec<_> = std::fs::read_dir(data.path()).unwrap().flatten().collect();
            assert!(
                written.iter().all(|e| e.file_name() == "logs"),
                "{}: wrote {written:?}",
                case.file
            );
        }
    }
}
