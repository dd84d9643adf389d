//! A provider that refuses for its rate (429 when too many requests are in flight, or over a
//! window's budget): the client cuts its concurrency to what the server accepts, waits for the
//! resets the server's headers announce, and rides the refusals out on their own retry budget, so a
//! rate-limited run gives no item up.

use incharacter_testkit::fake_openai::FakeConfig;

use crate::common;

/// Hermione on `scale` × ER_batch against a server behaving as `fake`, with `extra` provider lines: the
/// run must end well with every dimension scored. The server, to read its counts.
async fn run_scored(fake: FakeConfig, extra: &str, scale: &str) -> common::Setup {
    let s = common::setup(fake, extra).await;
    let args = common::run_hermione(scale, "er-batch", &["--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary = common::json_of(out);
    assert_eq!(summary["summary"][0]["failed_dimensions"], 0, "{summary}");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_run_adapts_its_concurrency_and_gives_nothing_up() {
    // The client may have 16 in flight (it starts at 8); the server takes 2 and refuses the rest
    // with 429.
    let fake = FakeConfig {
        concurrency_limit: Some(2),
        first_byte: std::time::Duration::from_millis(5),
        ..FakeConfig::default()
    };
    let s = run_scored(fake, "max_concurrency = 16\nmax_retries = 1", "BFI").await;
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
    let s = run_scored(fake, "max_concurrency = 8\nmax_retries = 1", "GSE").await;
    let stats = s.server.stats();
    // Each distinct request (10 interview items, then the judge's batches) refused 3 times, then answered.
    assert_eq!(stats.faults * 4, stats.requests * 3, "{stats:?}");
    assert!(stats.requests >= 4 * 11, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waits_for_the_reset_its_headers_announce_instead_of_hammering() {
    // Eight requests per 300 ms window, announced in x-ratelimit-* headers; a request over the
    // budget gets a 429 with no Retry-After. The client may have 16 in flight (it starts at 8).
    let fake = FakeConfig {
        requests_per_window: Some((8, std::time::Duration::from_millis(300))),
        first_byte: std::time::Duration::from_millis(5),
        ..FakeConfig::default()
    };
    let s = run_scored(fake, "max_concurrency = 16\nmax_retries = 1", "BFI").await;
    // Once, as the limit grows to 16, a window opens on 16 requests sent blind (the budget after a
    // reset is unknown until a reply says it): 8 are refused and the limit halves. Otherwise the
    // client holds its requests until the reset the headers announce (without reading them: over 70
    // refusals).
    let stats = s.server.stats();
    assert!(stats.throttled >= 8, "the server did refuse: {stats:?}");
    assert!(stats.throttled <= 8 + 4, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_per_minute_paces_a_run_before_the_server_refuses() {
    // 600 requests a minute: one every 100 ms, though the client may send 8 at once.
    let s = common::setup(FakeConfig::default(), "max_concurrency = 8\nrequests_per_minute = 600").await;
    let args = common::run_hermione("GSE", "er-batch", &["--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let summary = common::json_of(out);
    assert_eq!(summary["summary"][0]["failed_dimensions"], 0, "{summary}");
    let arrivals: Vec<f64> = s.server.trace().iter().map(|t| t.arrival_ms).collect();
    assert!(arrivals.len() >= 11, "{arrivals:?}");
    // Any five requests in a row span at least 400 ms (less the network's jitter): never more
    // than the rate allows, where unpaced the first eight arrive together.
    for (i, window) in arrivals.windows(5).enumerate() {
        assert!(
            window[4] - window[0] >= 400.0 - 50.0,
            "requests {i}..{}: {arrivals:?}",
            i + 4
        );
    }
}

/// Issue 23's acceptance: a server that answers 429 whenever more than 4 requests are in flight, and
/// `max_concurrency = 32`: the run (2 characters × BFI + 16Personalities × ER_batch) completes with
/// every dimension scored, and the 429s are at most a third of the successful requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_taking_four_at_a_time_refuses_a_run_of_32_at_most_a_third_as_often_as_it_answers() {
    let fake = FakeConfig {
        concurrency_limit: Some(4),
        first_byte: std::time::Duration::from_millis(10),
        ..FakeConfig::default()
    };
    let s = common::setup(fake, "max_concurrency = 32").await;
    let args = [
        "run",
        "--characters",
        "hermione-en,harry-en",
        "--scales",
        "BFI,16Personalities",
        "--methods",
        "er-batch",
        "--json",
    ];
    let out = common::output(&s.config, &s.data, &args).await;
    let summary = common::json_of(out);
    let rows = summary["summary"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{summary}");
    for row in rows {
        assert_eq!(row["failed_dimensions"], 0, "{summary}");
    }
    let stats = s.server.stats();
    let successful = stats.requests - stats.throttled - stats.faults;
    assert!(stats.throttled > 0, "the server did refuse: {stats:?}");
    assert!(
        stats.throttled * 3 <= successful,
        "{} refusals for {successful} answers: {stats:?}",
        stats.throttled
    );
}
