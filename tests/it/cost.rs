//! A cost cap: a run estimated above `--max-cost` does not start (exit 2, the estimate printed, no
//! session made); a run that reaches its cap while running stops cleanly, and `--resume` finishes it.

use incharacter_testkit::fake_openai::{FakeConfig, ScriptRule};

use crate::common;

/// One cent per prompt token: any interview costs dollars.
const PRICED: &str = "price_in_per_mtok = 10000\nprice_out_per_mtok = 10000\nmax_concurrency = 2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_estimated_above_the_cap_does_not_start() {
    let s = common::setup(FakeConfig::default(), PRICED).await;
    let args = common::run_hermione("BFI", "er-batch", &["--max-cost", "5"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the run is estimated at $"), "{stderr}");
    assert!(
        stderr.contains("above the cap of $5.00; nothing was started"),
        "{stderr}"
    );
    assert!(
        stderr.contains("requests, ≈ "),
        "the estimate says what it is made of: {stderr}"
    );
    assert_eq!(s.server.stats().requests, 0);
    assert!(!s.data.join("sessions").exists(), "no session made");
    // The config's max_cost does the same.
    std::fs::write(
        &s.config,
        format!("max_cost = 5\n{}", std::fs::read_to_string(&s.config).unwrap()),
    )
    .unwrap();
    let out = common::output(&s.config, &s.data, &common::run_hermione("BFI", "er-batch", &[])).await;
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_reaches_its_cap_stops_cleanly_and_resumes() {
    let s = common::setup(FakeConfig::default(), PRICED).await;
    let args = common::run_hermione("BFI", "er-batch", &["--max-cost", "20", "--yes", "--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("reaching its cap of $20.00; it stopped"), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    // With --json, the stop is an object on stdout too.
    let stopped: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(stopped["stopped"]["reason"], "cost cap", "{stopped}");
    assert_eq!(stopped["stopped"]["cap_usd"], 20.0, "{stopped}");
    assert!(stopped["stopped"]["next_phase"].is_null(), "{stopped}");
    assert!(
        stopped["session"].is_string() && stopped["usage"].is_array(),
        "{stopped}"
    );
    // What the stopped sitting spent is said too, at the providers' prices.
    let used = stderr
        .lines()
        .find(|l| l.starts_with("used: rpa fake: "))
        .expect(&stderr);
    let spent: f64 = used.rsplit_once('$').and_then(|(_, usd)| usd.parse().ok()).expect(used);
    assert!(spent > 0.0, "{used}");
    let sessions: Vec<_> = std::fs::read_dir(s.data.join("sessions")).unwrap().flatten().collect();
    assert_eq!(sessions.len(), 1);
    let dir = sessions[0].path();
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    let answered = journal.matches(r#""event":"item_answered""#).count();
    assert!(answered > 0 && answered < 44, "stopped part way: {answered} answers");
    assert!(!dir.join("results.json").exists(), "not finished");
    assert!(
        journal.contains(r#""event":"stopped","reason":"the sitting spent $"#)
            && journal.contains("reaching its cost cap of $20.00"),
        "the journal says why it stopped: {journal}"
    );
    let status = |sessions: serde_json::Value| sessions.as_array().unwrap()[0]["status"].as_str().unwrap().to_string();
    let listed = common::json_of(common::output(&s.config, &s.data, &["sessions", "--json"]).await);
    assert_eq!(status(listed), "stopped at its cost cap");
    let id = dir.file_name().unwrap().to_string_lossy().to_string();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id, "--json"]).await;
    let summary = common::json_of(out);
    assert_eq!(summary["summary"][0]["failed_dimensions"], 0, "{summary}");
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert_eq!(
        journal.matches(r#""event":"item_answered""#).count(),
        44,
        "nothing asked twice"
    );
    let listed = common::json_of(common::output(&s.config, &s.data, &["sessions", "--json"]).await);
    assert_eq!(status(listed), "complete");
}

/// The requests of a run's `used:` line for `role` (`used: rpa fake: 7 requests, …`).
fn used_requests(stderr: &str, role: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&format!("used: {role} fake: ")))
        .unwrap_or_else(|| panic!("no used line for {role}: {stderr}"));
    line.split(": ")
        .nth(2)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect(line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_what_is_in_flight_comes_back_and_is_journaled_so_nothing_is_paid_twice() {
    // Slow replies, eight in flight, no cache: a reply dropped at the cap would be asked again.
    let fake = FakeConfig {
        first_byte: std::time::Duration::from_millis(150),
        ..FakeConfig::default()
    };
    let s = common::setup(
        fake,
        "price_in_per_mtok = 10000\nprice_out_per_mtok = 10000\nmax_concurrency = 8",
    )
    .await;
    let config = std::fs::read_to_string(&s.config).unwrap();
    std::fs::write(&s.config, format!("cache = \"off\"\n{config}")).unwrap();
    let args = common::run_hermione("BFI", "er-batch", &["--max-cost", "20", "--yes", "--concurrency", "8"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let sent = s.server.stats().requests;
    let (dir, answered) = common::only_session(&s.data);
    let answered = answered as u64;
    assert!(answered < 44, "stopped part way: {answered}");
    assert!(sent > 1, "several in flight: {sent}");
    assert_eq!(
        sent, answered,
        "every reply the server sent is in the journal: {stderr}"
    );
    assert_eq!(used_requests(&stderr, "rpa"), sent, "{stderr}");

    let id = dir.file_name().unwrap().to_string_lossy().to_string();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        used_requests(&stderr, "rpa"),
        44 - answered,
        "only what was missing: {stderr}"
    );
}

/// The binary's output, or a failure naming the hang if it has not ended within a minute.
fn output_within_a_minute(mut command: std::process::Command) -> std::process::Output {
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            panic!("the run did not stop within a minute of reaching its cap");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_reached_as_the_judges_first_request_of_its_shape_goes_still_stops() {
    // What the interviews alone cost, from a run without a cap on the same seeded server.
    let s = common::setup(
        FakeConfig::default(),
        "price_in_per_mtok = 10000\nprice_out_per_mtok = 10000",
    )
    .await;
    let args = common::run_hermione("BFI", "er-batch", &["--concurrency", "1"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("used: rpa fake: "))
        .expect(&stderr);
    let interviews: f64 = line.rsplit_once('$').and_then(|(_, usd)| usd.parse().ok()).expect(line);
    // A cap the last interview answer reaches: the judge's requests (a shape of their own, the
    // first sent alone) start after it, and wait at the cap with the rest.
    let cap = format!("{}", interviews * 0.9999);
    let data = s.dir.path().join("capped");
    let mut args = common::run_hermione("BFI", "er-batch", &["--concurrency", "1", "--yes", "--max-cost"]);
    args.push(&cap);
    let command = common::command(&s.config, &data, &args);
    let out = tokio::task::spawn_blocking(move || output_within_a_minute(command))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("reaching its cap"), "{stderr}");
    let (dir, answered) = common::only_session(&data);
    assert_eq!(answered, 44, "every answer kept");
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(
        !journal.contains(r#""event":"dimension_assessed""#),
        "no judge request went out"
    );
}

/// In batch mode a phase once submitted is paid whole: one estimated to take the sitting past its
/// cap is not sent. The stop is journaled, said (with `--json`, as an object on stdout too), and a
/// resume with a higher cap sends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_phase_estimated_past_the_cap_is_not_sent() {
    let s = common::setup(FakeConfig::default(), &format!("{PRICED}\nbatch_poll_ms = 5")).await;
    let args = common::run_hermione("GSE", "er-batch", &["--batch", "--max-cost", "0.5", "--yes", "--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("batch phase 1 (10 requests) is estimated at $")
            && stderr.contains("which would take this sitting from $0.00 past its cap of $0.50; it was not sent"),
        "{stderr}"
    );
    assert_eq!(s.server.stats().batches, 0, "nothing submitted");
    let stopped: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(stopped["stopped"]["reason"], "cost cap", "{stopped}");
    assert_eq!(stopped["stopped"]["next_phase"]["requests"], 10, "{stopped}");
    let estimate = stopped["stopped"]["next_phase"]["estimate_usd"].as_f64().unwrap();
    assert!(estimate > 0.5, "{stopped}");
    let (dir, answered) = common::only_session(&s.data);
    assert_eq!(answered, 0);
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(
        journal.contains(r#""event":"stopped""#) && journal.contains("batch phase 1 was estimated at $"),
        "{journal}"
    );

    // Estimated close from above: the sitting that sends it spends less than the estimate said.
    let id = dir.file_name().unwrap().to_string_lossy().to_string();
    let out = common::output(
        &s.config,
        &s.data,
        &["run", "--resume", &id, "--max-cost", "1000", "--json"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rpa_cost: f64 = summary["usage"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["role"] == "rpa")
        .map(|r| r["cost"].as_f64().unwrap())
        .sum();
    assert!(
        rpa_cost > 0.0 && rpa_cost <= estimate,
        "spent {rpa_cost} against an estimate of {estimate}"
    );
}

/// A phase's estimate takes each reply at 150 tokens: replies far longer cost more than it said,
/// and a sitting whose last phase took it past the cap says so and exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_sitting_that_ended_above_its_cap_says_so() {
    let long = format!(
        "{{\"analysis\": \"{}\", \"result\": 3}}",
        "She weighs every side of it before she answers. ".repeat(200)
    );
    let fake = FakeConfig {
        script: vec![ScriptRule {
            contains: "The conversation:".into(),
            reply: long,
        }],
        ..FakeConfig::default()
    };
    // Only replies are priced (a cent a token): the estimate is what it allows for them.
    let s = common::setup(
        fake,
        "price_out_per_mtok = 10000\nmax_concurrency = 2\nbatch_poll_ms = 5",
    )
    .await;
    let args = common::run_hermione("GSE", "er-batch", &["--batch", "--max-cost", "25"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("warning: this sitting spent $") && stderr.contains("above its cap of $25.00"),
        "{stderr}"
    );
    assert_eq!(s.server.stats().batches, 2, "{stderr}");
}
