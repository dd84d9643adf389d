//! A data dir that fills up or turns read-only mid-way: a real tmpfs mounted as the data dir (needs
//! root; elsewhere each test prints why it did nothing). The run stops with an error that names the
//! journal, the cause and the resume command; the journal ends on a whole line and loads; once there
//! is room again the session resumes and ends like an uninterrupted run, with no item asked twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;

use incharacter::study::Event;
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

const PLAN: &[&str] = &[
    "run",
    "--characters",
    "hermione-en,zhongli-zh",
    "--scales",
    "BFI",
    "--methods",
    "er-batch,oc",
    "--seed",
    "9",
    "--json",
];

/// A tmpfs mounted on a fresh folder, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, options: &str) -> Option<Tmpfs> {
        let at = dir.join("data");
        std::fs::create_dir_all(&at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&at)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("skipped: mounting a tmpfs needs root (this test checks a real full or read-only disk)");
            return None;
        }
        Some(Tmpfs(at))
    }

    fn remount(&self, options: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

fn run(config: &Path, data: &Path, args: &[&str]) -> Output {
    common::command(config, data, args).output().unwrap()
}

fn session_of(data: &Path) -> (String, PathBuf) {
    let dirs: Vec<PathBuf> = std::fs::read_dir(data.join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = dirs.into_iter().next().unwrap();
    (dir.file_name().unwrap().to_string_lossy().into_owned(), dir)
}

fn export(config: &Path, data: &Path, id: &str) -> Value {
    let out = run(config, data, &["export", id, "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_object_mut().unwrap().remove("session");
    common::strip(&mut v, "attempts");
    v
}

/// The journal ends on a whole line and loads; returns how often each item was answered.
fn answered(dir: &Path) -> BTreeMap<String, usize> {
    let bytes = std::fs::read(dir.join("journal.jsonl")).unwrap();
    assert_eq!(bytes.last(), Some(&b'\n'), "the journal ends on a whole line");
    let events: Vec<Event> = incharacter::journal::read(&dir.join("journal.jsonl")).unwrap();
    let mut seen = BTreeMap::new();
    for e in events {
        if let Event::ItemAnswered { character, item_id, .. } = e {
            *seen.entry(format!("{character} {item_id}")).or_default() += 1;
        }
    }
    seen
}

/// A tmpfs data dir, a server and a config for it; `None` where mounting is not allowed.
async fn setup(dir: &Path, options: &str) -> Option<(Tmpfs, FakeServer, PathBuf)> {
    let disk = Tmpfs::mount(dir, options)?;
    let server = FakeServer::start(FakeConfig {
        seed: 9,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let config = common::fake_config(dir, &server, "max_concurrency = 4");
    Some((disk, server, config))
}

async fn uninterrupted(server: &FakeServer) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), server, "max_concurrency = 4");
    let data = dir.path().join("data");
    let out = run(&config, &data, PLAN);
    assert!(out.status.success());
    let (id, _) = session_of(&data);
    export(&config, &data, &id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_the_run_clearly_and_the_session_resumes() {
    let dir = tempfile::tempdir().unwrap();
    // 160 KiB: the session starts, then its journal and cache fill the disk part-way through.
    let Some((disk, server, config)) = setup(dir.path(), "size=160k").await else {
        return;
    };
    let data = disk.0.clone();

    let out = run(&config, &data, PLAN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let (id, session) = session_of(&data);
    assert!(stderr.contains("cannot write the journal"), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(stderr.contains(&format!("incharacter run --resume {id}")), "{stderr}");
    assert!(
        !stderr.contains("tracing"),
        "no log complaints on the terminal: {stderr}"
    );
    let before = answered(&session);
    assert!(
        !before.is_empty() && before.len() < 2 * 44,
        "stopped part-way: {}",
        before.len()
    );

    // Still full: the resume fails the same way and loses nothing.
    let again = run(&config, &data, &["run", "--resume", &id, "--json"]);
    assert!(!again.status.success());
    assert!(answered(&session).len() >= before.len());

    disk.remount("size=64m");
    let out = run(&config, &data, &["run", "--resume", &id, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = answered(&session);
    assert_eq!(after.len(), 2 * 44);
    assert!(after.values().all(|&n| n == 1), "no item answered twice");
    assert_eq!(export(&config, &data, &id), uninterrupted(&server).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_data_dir_is_refused_clearly_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let Some((disk, _server, config)) = setup(dir.path(), "size=64m").await else {
        return;
    };
    let data = disk.0.clone();
    let out = run(&config, &data, PLAN);
    assert!(out.status.success());
    let (id, session) = session_of(&data);
    let journal = std::fs::read(session.join("journal.jsonl")).unwrap();

    // An interrupted copy of it (its last record taken off), to resume while the disk is read-only.
    let interrupted = data.join("sessions").join("interrupted");
    std::fs::create_dir_all(&interrupted).unwrap();
    let cut: String = String::from_utf8_lossy(&journal)
        .lines()
        .filter(|l| !l.contains("\"run_finished\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(interrupted.join("journal.jsonl"), cut).unwrap();

    disk.remount("ro");
    // Reading works: the report prints its tables.
    let report = run(&config, &data, &["report", &id]);
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    // A complete session resumed has nothing to write, and says so.
    let resumed = run(&config, &data, &["run", "--resume", &id]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(String::from_utf8_lossy(&resumed.stderr).contains("is complete: nothing to resume"));
    // Writing is refused with the reason, and nothing changes.
    for args in [PLAN, &["run", "--resume", "interrupted"]] {
        let out = run(&config, &data, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains("Read-only file system"), "{stderr}");
        assert!(stderr.contains("the data dir must be writable"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert_eq!(std::fs::read(session.join("journal.jsonl")).unwrap(), journal);

    disk.remount("rw");
    let out = run(&config, &data, &["run", "--resume", &id, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
