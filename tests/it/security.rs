//! API keys never reach disk or output: a whole interview run, an observer run, exports, reports and
//! the log are written with a key from the environment and with a literal key in a private config, and
//! no byte of the data dir, the config dir's neighbours or stdout/stderr holds it. A literal key in a
//! config file others can read is refused with the reason.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};

async fn exercise(config: &Path, data: &Path, key_env: Option<(&'static str, &'static str)>) -> Vec<u8> {
    let (config, data) = (config.to_path_buf(), data.to_path_buf());
    tokio::task::spawn_blocking(move || {
        let mut printed = Vec::new();
        let run = |args: &[&str], printed: &mut Vec<u8>| {
            let mut c = common::command(&config, &data, args);
            c.env("INCHARACTER_LOG", "debug");
            if let Some((k, v)) = key_env {
                c.env(k, v);
            }
            let out = c.output().unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            printed.extend(&out.stdout);
            printed.extend(&out.stderr);
            out.stdout
        };
        let out = run(
            &[
                "run",
                "--characters",
                "hermione-en",
                "--scales",
                "GSE",
                "--methods",
                "er-batch,oc",
                "--json",
            ],
            &mut printed,
        );
        let id = serde_json::from_slice::<serde_json::Value>(&out).unwrap()["session"]
            .as_str()
            .unwrap()
            .to_string();
        for format in ["json", "csv", "md"] {
            run(&["export", &id, "--format", format], &mut printed);
        }
        run(&["report", &id], &mut printed);
        run(&["providers", "--json"], &mut printed);
        run(
            &[
                "observe",
                "--subject",
                "synthetic",
                "--observers",
                "1",
                "--scenarios",
                "1",
                "--provider",
                "fake",
                "--json",
            ],
            &mut printed,
        );
        run(&["sessions", "--json"], &mut printed);
        printed
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_never_reach_journals_exports_caches_logs_or_output() {
    const KEY: &str = "sk-live-0d5e8c1a-never-written";
    let server = FakeServer::start(FakeConfig {
        require_key: Some(KEY.into()),
        ..FakeConfig::default()
    })
    .await
    .unwrap();

    // The key from the environment.
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "api_key_env = \"FAKE_KEY\"\nmax_concurrency = 4");
    let data = dir.path().join("data");
    let printed = exercise(&config, &data, Some(("FAKE_KEY", KEY))).await;
    // The literal key in a private config file.
    let dir2 = tempfile::tempdir().unwrap();
    let config2 = common::fake_config(
        dir2.path(),
        &server,
        &format!("api_key = \"{KEY}\"\nmax_concurrency = 4"),
    );
    std::fs::set_permissions(&config2, std::fs::Permissions::from_mode(0o600)).unwrap();
    let data2 = dir2.path().join("data");
    let printed2 = exercise(&config2, &data2, None).await;

    assert!(server.stats().requests > 20, "the runs reached the server with the key");
    assert!(
        !common::contains(&printed, KEY) && !common::contains(&printed2, KEY),
        "printed"
    );
    let mut files = Vec::new();
    common::all_bytes(&data, &mut files);
    common::all_bytes(&data2, &mut files);
    let kinds = ["journal.jsonl", "results.json", "cache", "logs"];
    for kind in kinds {
        assert!(files.iter().any(|(p, _)| p.contains(kind)), "the runs wrote {kind}");
    }
    for (path, bytes) in &files {
        assert!(!common::contains(bytes, KEY), "the key is in {path}");
    }

    // A server that refuses the key and repeats it in its error (as some proxies do): the key is
    // taken out of the error before it is printed, journaled or logged.
    let other = FakeServer::start(FakeConfig {
        require_key: Some("another-key".into()),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir3 = tempfile::tempdir().unwrap();
    let config3 = common::fake_config(dir3.path(), &other, "api_key_env = \"FAKE_KEY\"\nmax_retries = 1");
    let data3 = dir3.path().join("data");
    let (c3, d3) = (config3.clone(), data3.clone());
    let printed3 = tokio::task::spawn_blocking(move || {
        let mut printed = Vec::new();
        for args in [
            &["chat", "--provider", "fake", "--cache", "off", "Hello?"][..],
            &[
                "run",
                "--characters",
                "hermione-en",
                "--scales",
                "GSE",
                "--methods",
                "er-batch",
            ],
        ] {
            let out = common::command(&c3, &d3, args)
                .env("FAKE_KEY", KEY)
                .env("INCHARACTER_LOG", "debug")
                .output()
                .unwrap();
            assert!(!out.status.success(), "{args:?}: the key was refused");
            printed.extend(&out.stdout);
            printed.extend(&out.stderr);
        }
        printed
    })
    .await
    .unwrap();
    assert!(
        common::contains(&printed3, "[the key]"),
        "the server's words, the key taken out: {}",
        String::from_utf8_lossy(&printed3)
    );
    assert!(
        !common::contains(&printed3, KEY),
        "printed: {}",
        String::from_utf8_lossy(&printed3)
    );
    assert!(
        common::contains(&printed3, "fake: the key in FAKE_KEY was rejected"),
        "chat names the provider that refused: {}",
        String::from_utf8_lossy(&printed3)
    );
    let mut files = Vec::new();
    common::all_bytes(&data3, &mut files);
    assert!(
        files.iter().any(|(p, _)| p.contains("journal.jsonl")),
        "the run journaled its failures"
    );
    for (path, bytes) in &files {
        assert!(!common::contains(bytes, KEY), "the key is in {path}");
    }

    // A literal key in a file others can read is refused, and says why.
    std::fs::set_permissions(&config2, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = common::command(&config2, &data2, &["providers"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chmod 600") && err.contains("config.toml:"), "{err}");
    assert!(!err.contains(KEY), "the refusal does not echo the key");
}
