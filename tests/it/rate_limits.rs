//! A provider that refuses for its rate (429 when too many requests are in flight): the client cuts
//! its concurrency to what the server accepts and rides the refusals out on their own retry budget,
//! so a rate-limited run gives no item up.

use incharacter_testkit::fake_openai::FakeConfig;

use crate::common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_run_adapts_its_concurrency_and_gives_nothing_up() {
    // The client may send 16 at once; the server takes 2 and refuses the rest with 429.
    let fake = FakeConfig {
        concurrency_limit: Some(2),
        first_byte: std::time::Duration::from_millis(5),
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "max_concurrency = 16\nmax_retries = 1").await;
    let args = common::run_hermione("BFI", "er-batch", &["--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary = common::json_of(out);
    let rows = summary["summary"].as_array().unwrap();
    assert_eq!(rows[0]["failed_dimensions"], 0, "{summary}");
    let stats = s.server.stats();
    assert!(stats.throttled > 0, "the server did refuse: {stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_refusals_do_not_use_up_a_requests_retries() {
    // Every request is refused three times with 429 before it is answered; the provider allows one
    // retry for errors. Rate limits have their own budget, so nothing fails.
    let fake = FakeConfig {
        faults: vec![incharacter_testkit::fake_openai::Fault::RateLimited],
        fault_share: 1.0,
        faults_per_request: 3,
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "max_concurrency = 8\nmax_retries = 1").await;
    let args = common::run_hermione("GSE", "er-batch", &["--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary = common::json_of(out);
    assert_eq!(summary["summary"][0]["failed_dimensions"], 0, "{summary}");
    let stats = s.server.stats();
    // Each distinct request (10 interview items, then the judge's batches) refused 3 times, then answered.
    assert_eq!(stats.faults * 4, stats.requests * 3, "{stats:?}");
    assert!(stats.requests >= 4 * 11, "{stats:?}");
}
