//! A session journal (`events.jsonl`) and an annotator's file, read from disk as the app reads them.
//! The input is written to one file per process, reused for every run.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use incharacter::annotation;
use incharacter::journal;
use incharacter::study::Event;
use libfuzzer_sys::fuzz_target;

/// The bundled catalog, which annotations are checked against as they are read.
fn catalog() -> &'static incharacter::catalog::Catalog {
    static CATALOG: OnceLock<incharacter::catalog::Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| incharacter::catalog::Catalog::bundled().expect("the bundled catalog"))
}

/// `<tmp>/incharacter-fuzz-<pid>/`, a session folder whose one annotator file holds the input.
fn session_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("incharacter-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(annotation::dir(&dir)).expect("a temp session folder");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let session = session_dir();
    let path = annotation::dir(session).join("fuzz.jsonl");
    std::fs::write(&path, data).expect("write the journal");
    let lines = data
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .count();
    if let Ok(events) = journal::read::<Event>(&path) {
        assert!(events.len() <= lines);
    }
    if let Ok(timed) = journal::read_timed::<Event>(&path) {
        assert!(timed.len() <= lines);
    }
    if let Ok(annotators) = annotation::load(session, catalog()) {
        assert!(annotators.values().map(|cases| cases.len()).sum::<usize>() <= lines);
    }
});
