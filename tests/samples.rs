//! The bundled sample sessions (what `incharacter demo` replays): every journal line loads, every
//! header names the model, its provider kind and the date, every line carries the timing a replay
//! needs, `incharacter report` prints each one's tables, and the folder stays small.

use std::path::{Path, PathBuf};
use std::process::Command;

use incharacter::engine::Event;
use incharacter::session;

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
        let events: Vec<Event> = session::read(&journal).unwrap_or_else(|e| panic!("{}: {e}", journal.display()));
        let providers = match events.first() {
            Some(Event::RunStarted { providers, created, .. } | Event::ObserveStarted { providers, created, .. }) => {
                assert!(created.starts_with("20"), "{}: created {created}", dir.display());
                providers.clone()
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
