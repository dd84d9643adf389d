//! Providers as they are, through the binary against `fake-openai` behaving as documented: a reasoning
//! model (no `max_tokens`, temperature fixed at 1) and a strict schema subset (no numeric or length
//! bounds). The run adapts once per kind of refusal, completes with every dimension scored inside the
//! scale's range, and records what it adapted in `session.adaptations`.

use std::path::Path;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer, Fault};
use serde_json::Value;

use crate::common;

/// Runs Hermione × BFI × ER_batch, OC against `fake` and returns the server and the export.
async fn run_against(fake: FakeConfig) -> (FakeServer, Value) {
    run_with(fake, "").await
}

/// [`run_against`] with `extra` lines in the provider's config.
async fn run_with(fake: FakeConfig, extra: &str) -> (FakeServer, Value) {
    let s = common::setup(fake, &format!("max_concurrency = 8\n{extra}")).await;
    let out = common::output(
        &s.config,
        &s.data,
        &common::run_hermione("BFI", "er-batch,oc", &["--json"]),
    )
    .await;
    let id = common::json_of(out)["session"].as_str().unwrap().to_string();
    let export = export(&s.config, &s.data, &id);
    (s.server, export)
}

/// A provider that answers every request with the same 400, which no adaptation helps.
fn refusing_everything() -> FakeConfig {
    FakeConfig {
        fault_share: 1.0,
        faults_per_request: 1000,
        faults: vec![Fault::BadRequest],
        ..FakeConfig::default()
    }
}

fn export(config: &Path, data: &Path, id: &str) -> Value {
    common::json_of(
        common::command(config, data, &["export", id, "--format", "json"])
            .output()
            .unwrap(),
    )
}

fn all_scored_in_range(export: &Value) {
    for a in export["assessments"].as_array().unwrap() {
        for (dimension, d) in a["dimensions"].as_object().unwrap() {
            let score = d["score"]
                .as_f64()
                .unwrap_or_else(|| panic!("{dimension} unscored: {d}"));
            assert!((1.0..=5.0).contains(&score), "{dimension}: {score}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reasoning_model_is_adapted_to_once_per_refusal_and_every_dimension_is_scored() {
    let (server, export) = run_against(FakeConfig {
        reasoning: true,
        ..FakeConfig::default()
    })
    .await;
    all_scored_in_range(&export);
    let requests = server.requests();
    let refused = requests
        .iter()
        .filter(|r| {
            r.get("max_tokens").is_some() || r.get("temperature").and_then(Value::as_f64).is_some_and(|t| t != 1.0)
        })
        .count();
    assert!(refused <= 2, "{refused} refusals over {} requests", requests.len());
    assert!(requests.len() > 50);
    let kinds: Vec<&str> = export["session"]["adaptations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(kinds.contains(&"max_completion_tokens") && kinds.contains(&"fixed_temperature"));
    let adapted = &export["session"]["adaptations"][0];
    assert_eq!(
        (adapted["provider"].as_str(), adapted["model"].as_str()),
        (Some("fake"), Some("fake-model"))
    );
    assert!(adapted["detail"].as_str().unwrap().contains("Unsupported"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_schema_subset_gets_schemas_without_bounds_and_replies_are_checked_locally() {
    let (server, export) = run_against(FakeConfig {
        no_numeric_bounds: true,
        ..FakeConfig::default()
    })
    .await;
    all_scored_in_range(&export);
    let requests = server.requests();
    let bounded = requests
        .iter()
        .filter(|r| {
            r.pointer("/response_format/json_schema/schema")
                .is_some_and(|s| s.to_string().contains("\"maximum\""))
        })
        .count();
    assert_eq!(bounded, 1, "one refusal, then every schema goes without bounds");
    let adaptations = export["session"]["adaptations"].as_array().unwrap();
    assert_eq!(adaptations.len(), 1);
    assert_eq!(adaptations[0]["kind"], "no_numeric_bounds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_takes_everything_is_never_adapted_to() {
    let (_, export) = run_against(FakeConfig::default()).await;
    assert_eq!(export["session"]["adaptations"], serde_json::json!([]));
}

/// `providers check` sends the method's own requests: against a server that refuses bounds, the judge
/// shapes say they needed adapting, never a plain `works`; against a reasoning model, every shape does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_tells_which_of_the_methods_requests_needed_adapting() {
    for (fake, expected) in [
        (
            FakeConfig {
                no_numeric_bounds: true,
                ..FakeConfig::default()
            },
            [
                ("interview", "works"),
                ("expert_rating", "adapted"),
                ("16p_rating", "adapted"),
                ("option_conversion", "adapted"),
            ],
        ),
        (
            FakeConfig {
                reasoning: true,
                ..FakeConfig::default()
            },
            [
                ("interview", "adapted"),
                ("expert_rating", "adapted"),
                ("16p_rating", "adapted"),
                ("option_conversion", "adapted"),
            ],
        ),
    ] {
        let s = common::setup(fake, "").await;
        let out = common::output(&s.config, &s.data, &["providers", "check", "fake", "--json"]).await;
        let v = common::json_of(out);
        let shapes: Vec<(&str, &str)> = v["shapes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["shape"].as_str().unwrap(), s["status"].as_str().unwrap()))
            .collect();
        assert_eq!(shapes, expected, "{v}");
        assert_eq!(v["provider"], "fake");
    }
}

/// A provider that refuses every request the same way (a 400 no adaptation helps) stops the run early,
/// with the provider's words and how to resume; it does not fail 44 items one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_refusing_every_request_the_same_way_stops_the_run_early() {
    let s = common::setup(refusing_everything(), "max_concurrency = 2").await;
    let out = common::output(&s.config, &s.data, &common::run_hermione("BFI", "oc", &["--json"])).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("refused 8 requests in a row the same way"), "{stderr}");
    // --json promises one object at the end, a stop included.
    let said: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["stopped"]["reason"], "refused", "{said}");
    assert!(
        said["stopped"]["message"]
            .as_str()
            .unwrap()
            .contains("injected: invalid request"),
        "{said}"
    );
    assert!(
        stderr.contains("injected: invalid request"),
        "the provider's words: {stderr}"
    );
    assert!(stderr.contains("incharacter run --resume"), "{stderr}");
    assert!(s.server.stats().requests < 20, "stopped early: {:?}", s.server.stats());
}

/// A phase shorter than the early stop's streak (GSE's one ER_all judge call), refused: the run ends
/// with exit 1, the provider's words and how to resume, not with counts alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_refused_whole_ends_with_the_providers_words_and_how_to_resume() {
    let rpa = FakeServer::start(FakeConfig::default()).await.unwrap();
    let judge = FakeServer::start(refusing_everything()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "cache = \"off\"\n[[providers]]\nname = \"agent\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\n\n[[providers]]\nname = \"strict\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-judge\"\n\n[roles]\nrpa = \"agent\"\njudge = \"strict\"\n",
            rpa.base_url(),
            judge.base_url()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let out = common::output(&config, &data, &common::run_hermione("GSE", "er-all", &[])).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(judge.stats().requests, 1, "a 400 is not retried: {stderr}");
    assert!(
        stderr.contains("most often (1×, judge ") && stderr.contains("injected: invalid request"),
        "the provider's words: {stderr}"
    );
    assert!(stderr.contains("incharacter run --resume"), "{stderr}");
}

/// Quirks stated in the config are adapted to from the first request (nothing is refused) and are
/// journaled all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stated_quirks_cost_no_refusal_and_are_still_recorded() {
    let (server, export) = run_with(
        FakeConfig {
            reasoning: true,
            ..FakeConfig::default()
        },
        "max_tokens_param = \"max_completion_tokens\"\ntemperature = \"fixed\"",
    )
    .await;
    all_scored_in_range(&export);
    let refused = server
        .requests()
        .iter()
        .filter(|r| r.get("max_tokens").is_some() || r.get("temperature").is_some())
        .count();
    assert_eq!(refused, 0);
    let adaptations = export["session"]["adaptations"].as_array().unwrap();
    assert_eq!(adaptations.len(), 2, "{adaptations:?}");
    assert!(
        adaptations
            .iter()
            .all(|a| a["detail"] == "stated in the provider's config")
    );
}
