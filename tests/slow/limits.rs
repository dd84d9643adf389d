//! Runs against providers as the limits and failures of a whole study meet them: a provider's
//! `max_concurrency` holds whatever roles it serves; a provider that refuses connections stops the
//! run within seconds (exit 1, resumable); a run that ends with failures exits non-zero. (An unknown
//! character exiting 2 is `engine::unknown_ids_are_input_errors`.)

use std::time::{Duration, Instant};

use crate::common::{self, command};
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer, Fault, ScriptRule};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_provider_serving_both_roles_keeps_its_own_limit() {
    let server = FakeServer::start(FakeConfig {
        first_byte: Duration::from_millis(10),
        tokens_per_s: 2000.0,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The global limit is well above the provider's, so only the provider's can hold the line.
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "max_concurrency = 32\n\n[[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\nmax_concurrency = 4\nretry_base_ms = 1\n\n[roles]\nrpa = \"fake\"\njudge = \"fake\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let data = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        command(
            &config,
            &data,
            &[
                "run",
                "--characters",
                "hermione-en,zhongli-zh",
                "--scales",
                "BFI,16Personalities",
                "--methods",
                "er-batch,oc,sr",
                "--json",
            ],
        )
        .output()
        .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stats = server.stats();
    assert!(stats.requests > 200, "{stats:?}");
    assert!(stats.max_in_flight <= 4, "the provider's limit was exceeded: {stats:?}");
    assert_eq!(
        stats.max_in_flight, 4,
        "the limit is used, not just respected: {stats:?}"
    );
}

#[test]
fn a_provider_that_refuses_connections_stops_the_run_with_exit_1_and_how_to_resume() {
    // A port that was just free: connections to it are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base_url = format!("http://127.0.0.1:{port}/v1");
    // With the default backoff, and with one so short that every retry of a request is spent in
    // well under the three seconds a streak must last: the run stops either way, no item failed.
    for backoff in ["", "retry_base_ms = 10\n"] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[[providers]]\nname = \"down\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"m\"\n{backoff}\n[roles]\nrpa = \"down\"\njudge = \"down\"\n"
            ),
        )
        .unwrap();
        let started = Instant::now();
        let out = command(
            &config,
            dir.path(),
            &[
                "run",
                "--characters",
                "hermione-en",
                "--scales",
                "GSE",
                "--methods",
                "er-batch",
            ],
        )
        .output()
        .unwrap();
        let elapsed = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backoff}{stderr}");
        assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}: {stderr}");
        assert!(stderr.contains(&base_url), "{stderr}");
        // Requests given up for it are not sent, not failed.
        let used: Vec<&str> = stderr.lines().filter(|l| l.starts_with("used: ")).collect();
        assert!(!used.is_empty(), "{backoff}{stderr}");
        assert!(used.iter().all(|l| !l.contains("failed")), "{backoff}{stderr}");
        let session = std::fs::read_dir(dir.path().join("sessions"))
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .file_name()
            .to_string_lossy()
            .into_owned();
        assert!(
            stderr.contains(&format!("incharacter run --resume {session}")),
            "{stderr}"
        );
        // The journal is whole and not finished, and no item is recorded as failed: a resume can
        // take it all up.
        let journal =
            std::fs::read_to_string(dir.path().join("sessions").join(&session).join("journal.jsonl")).unwrap();
        assert!(
            journal.ends_with('\n') && !journal.contains("run_finished"),
            "{journal}"
        );
        assert!(!journal.contains("\"item_failed\""), "{backoff}{journal}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ends_with_failed_assessments_exits_1_and_says_what_failed() {
    // Every reply is prose: interviews succeed, no judge reply can be read.
    let server = FakeServer::start(FakeConfig {
        script: vec![ScriptRule {
            contains: String::new(),
            reply: "I would rather not say.".into(),
        }],
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "retry_base_ms = 1");
    let data = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        command(
            &config,
            &data,
            &[
                "run",
                "--characters",
                "hermione-en",
                "--scales",
                "GSE",
                "--methods",
                "er-batch",
            ],
        )
        .output()
        .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("failed: 1 dimension assessment(s)"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_asks_failed_items_again_and_then_makes_their_assessments() {
    // A third of the requests are refused once with a 400 (never retried within a run); the second
    // time the same request comes, it is answered. Each attempt of a judge call is a new request (its
    // seed moves), so with some fault layouts all five attempts of one call are refused (0.34^5): the
    // bounded policy working, not what this test is about. Seed 7 makes items fail in the first run
    // and gives every call of the resume an attempt that is answered.
    let server = FakeServer::start(FakeConfig {
        seed: 7,
        fault_share: 0.34,
        faults_per_request: 1,
        faults: vec![Fault::BadRequest],
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "retry_base_ms = 1");
    let data = dir.path().to_path_buf();
    let run = move |args: Vec<String>| {
        let (config, data) = (config.clone(), data.clone());
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            command(&config, &data, &args).output().unwrap()
        })
    };
    let args = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let first = run(args(&[
        "run",
        "--characters",
        "hermione-en",
        "--scales",
        "GSE",
        "--methods",
        "er-batch,oc",
        "--json",
    ]))
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("interview item(s)"), "{stderr}");
    let id = common::session_id(&first);
    let second = run(args(&["run", "--resume", &id, "--json"])).await.unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(0), "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    for row in summary["summary"].as_array().unwrap() {
        assert_eq!(row["failed_dimensions"], 0, "{row}");
    }
}
