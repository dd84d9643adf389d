//! The model layer against the `fake-openai` test instrument: streaming over split events, structured
//! outputs, retries on injected faults (and no retries on 4xx), concurrency limits, the cache, and
//! keys kept out of every file. Tests wait on results, never on the clock.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use incharacter::config::{CacheMode, ProviderConfig, ProviderKind};
use incharacter::llm::cache::Cache;
use incharacter::llm::client::{Shared, Transport};
use incharacter::llm::openai::OpenAi;
use incharacter::llm::{ChatEvent, ChatMessage, ChatModel, ChatRequest, Client, LlmError, ResponseSchema, complete};
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer, Fault, ScriptRule};
use serde_json::json;

fn provider(server: &FakeServer) -> ProviderConfig {
    let mut p = ProviderConfig::new("fake", ProviderKind::Openai, &server.base_url(), "fake-model");
    p.retry_base_ms = 1;
    p
}

fn client(p: ProviderConfig, cache: Option<Cache>, mode: CacheMode) -> Client {
    let transport: Arc<dyn Transport> = Arc::new(OpenAi::new(p.clone(), None).unwrap());
    Client::new(transport, p, Shared::new(64, cache, mode, 1))
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("You are Hermione Granger."),
        ChatMessage::user(text),
    ])
}

#[tokio::test]
async fn split_events_stream_exactly_the_served_text() {
    let script = vec![ScriptRule {
        contains: "talkative".into(),
        reply: "Honestly, Harry — only when it matters. 我很健谈。".into(),
    }];
    let server = FakeServer::start(FakeConfig {
        split_events: true,
        script,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let c = client(provider(&server), None, CacheMode::Off);
    let mut events = c.stream(ask("Are you talkative?"));
    let mut tokens = Vec::new();
    let mut done = false;
    let mut usage = None;
    while let Some(e) = events.next().await {
        match e {
            ChatEvent::Token(t) => tokens.push(t),
            ChatEvent::Usage(u) => usage = Some(u),
            ChatEvent::Done { cached, .. } => {
                assert!(!cached);
                done = true;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(done);
    assert!(tokens.len() > 3, "streamed in pieces: {tokens:?}");
    assert_eq!(tokens.concat(), "Honestly, Harry — only when it matters. 我很健谈。");
    assert!(usage.unwrap().completion_tokens > 0);
    let sent = &server.requests()[0];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn a_schema_goes_out_as_response_format_and_the_json_comes_back() {
    let server = FakeServer::start(FakeConfig {
        split_events: true,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let c = client(provider(&server), None, CacheMode::Off);
    let mut r = ask("Rate the conversation.");
    let schema = json!({"type": "object", "properties": {
        "analysis": {"type": "string"},
        "result": {"anyOf": [{"type": "number", "minimum": 1, "maximum": 5}, {"enum": ["x"]}]}},
        "required": ["analysis", "result"], "additionalProperties": false});
    r.schema = Some(ResponseSchema::new("expert_rating", schema.clone()));
    let reply = complete(&c, r.clone()).await.unwrap();
    let sent = &server.requests()[0];
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(sent["response_format"]["json_schema"]["schema"], schema);
    let v: serde_json::Value = serde_json::from_str(&reply.text).unwrap();
    assert!(v["analysis"].is_string());

    // structured_output = false: no response_format; the schema is described in the prompt.
    let mut p = provider(&server);
    p.structured_output = false;
    let reply = complete(&client(p, None, CacheMode::Off), r).await.unwrap();
    let sent = server.requests().last().cloned().unwrap();
    assert!(sent.get("response_format").is_none());
    assert!(sent["messages"][0]["content"].as_str().unwrap().contains("JSON Schema"));
    assert!(serde_json::from_str::<serde_json::Value>(&reply.text).is_ok());
}

#[tokio::test]
async fn injected_faults_are_retried_until_the_right_text_arrives() {
    let clean = FakeServer::start(FakeConfig {
        seed: 5,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let faulty = FakeServer::start(FakeConfig {
        seed: 5,
        split_events: true,
        fault_share: 0.5,
        faults_per_request: 2,
        faults: vec![
            Fault::RateLimited,
            Fault::ServerError,
            Fault::Unavailable,
            Fault::Drop,
            Fault::Cut,
            Fault::InStreamError,
        ],
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let good = client(provider(&clean), None, CacheMode::Off);
    let flaky = client(provider(&faulty), None, CacheMode::Off);
    let mut retried = 0;
    for i in 0..40 {
        let request = ask(&format!("Question number {i}: how do you spend a free afternoon?"));
        let want = complete(&good, request.clone()).await.unwrap().text;
        let mut events = flaky.stream(request);
        let mut text = String::new();
        let mut discarded = 0;
        loop {
            match events.next().await.expect("stream ends with Done or Error") {
                ChatEvent::Token(t) => text.push_str(&t),
                ChatEvent::Retry { discarded_chars, .. } => {
                    assert_eq!(
                        discarded_chars,
                        text.chars().count(),
                        "the retry names the text it discards"
                    );
                    discarded += discarded_chars;
                    text.clear();
                    retried += 1;
                }
                ChatEvent::Usage(_) | ChatEvent::Choices(_) => {}
                ChatEvent::Done { .. } => break,
                ChatEvent::Error(e) => panic!("request {i} failed: {e}"),
            }
        }
        assert_eq!(text, want, "request {i} (discarded {discarded} chars)");
    }
    let stats = faulty.stats();
    assert!(stats.faults >= 20, "faults were injected: {stats:?}");
    assert_eq!(retried as u64, stats.faults);
    assert_eq!(stats.requests, 40 + stats.faults);
    let snapshot = flaky.accounting().snapshot().total();
    assert_eq!(
        (snapshot.requests, snapshot.retries, snapshot.failures),
        (stats.requests, stats.faults, 0)
    );
}

#[tokio::test]
async fn a_server_refusing_json_schema_is_adapted_to_json_object_and_prompt_only_json_works() {
    let server = FakeServer::start(FakeConfig {
        reject_json_schema: true,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let mut r = ask("Rate the conversation.");
    r.schema = Some(ResponseSchema::new(
        "check",
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}),
    ));
    // "Input should be 'text' or 'json_object'": the schema goes as json_object from then on.
    let c = client(provider(&server), None, CacheMode::Off);
    let reply = complete(&c, r.clone()).await.unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(&reply.text).is_ok(),
        "{}",
        reply.text
    );
    let sent = server.requests();
    assert_eq!(sent.len(), 2, "one refusal, then the adapted request");
    assert_eq!(sent[0]["response_format"]["type"], "json_schema");
    assert_eq!(sent[1]["response_format"]["type"], "json_object");
    assert!(
        sent[1]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("JSON Schema")
    );
    let mut p = provider(&server);
    p.structured_output = false;
    let reply = complete(&client(p, None, CacheMode::Off), r).await.unwrap();
    assert!(serde_json::from_str::<serde_json::Value>(&reply.text).is_ok());
}

#[tokio::test]
async fn client_errors_are_never_retried_and_retries_are_bounded() {
    let server = FakeServer::start(FakeConfig {
        fault_share: 1.0,
        faults_per_request: 100,
        faults: vec![Fault::BadRequest],
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let err = complete(&client(provider(&server), None, CacheMode::Off), ask("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 400, .. }), "{err:?}");
    assert_eq!(server.stats().requests, 1, "400 is not retried");

    let server = FakeServer::start(FakeConfig {
        fault_share: 1.0,
        faults_per_request: 100,
        faults: vec![Fault::Unavailable],
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let mut p = provider(&server);
    p.max_retries = 3;
    let err = complete(&client(p, None, CacheMode::Off), ask("hi")).await.unwrap_err();
    assert!(matches!(err, LlmError::Exhausted { attempts: 4, .. }), "{err:?}");
    assert_eq!(server.stats().requests, 4);

    // Rate-limit refusals have their own budget: the error counts every request that was sent.
    let server = FakeServer::start(FakeConfig {
        fault_share: 1.0,
        faults_per_request: 1000,
        faults: vec![Fault::RateLimited],
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let mut p = provider(&server);
    p.max_retries = 2;
    let err = complete(&client(p, None, CacheMode::Off), ask("hi")).await.unwrap_err();
    let sent = server.stats().requests;
    assert_eq!(sent, 3 + u64::from(incharacter::llm::client::RATE_LIMIT_RETRIES));
    assert!(
        err.to_string().starts_with(&format!(
            "gave up after {sent} attempts (50 waited out for the rate limit): "
        )),
        "{err}"
    );
}

#[tokio::test]
async fn a_rejected_key_says_which_variable_and_server() {
    let server = FakeServer::start(FakeConfig {
        require_key: Some("right".into()),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let mut p = provider(&server);
    p.api_key_env = Some("MY_TEST_KEY".into());
    let transport: Arc<dyn Transport> =
        Arc::new(OpenAi::new(p.clone(), Some(incharacter::config::Secret::new("wrong".into()))).unwrap());
    let c = Client::new(transport, p, Shared::new(4, None, CacheMode::Off, 0));
    let err = complete(&c, ask("hi")).await.unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("the key in MY_TEST_KEY was rejected by {}", server.base_url())),
        "{err}"
    );
    assert_eq!(server.stats().requests, 1);
}

#[tokio::test]
async fn timeouts_are_retried_then_reported() {
    let server = FakeServer::start(FakeConfig {
        first_byte: Duration::from_millis(400),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let mut p = provider(&server);
    p.timeout_first_token_s = 0.05;
    p.max_retries = 1;
    let err = complete(&client(p, None, CacheMode::Off), ask("hi"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("gave up after 2 attempts") && err.contains("no first token"),
        "{err}"
    );

    let server = FakeServer::start(FakeConfig {
        tokens_per_s: 4.0,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let mut p = provider(&server);
    p.timeout_idle_s = 0.05;
    p.max_retries = 0;
    let err = complete(&client(p, None, CacheMode::Off), ask("hi"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("stalled"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrency_is_never_exceeded() {
    let server = FakeServer::start(FakeConfig {
        first_byte: Duration::from_millis(15),
        tokens_per_s: 400.0,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let mut p = provider(&server);
    p.max_concurrency = 3;
    let c = client(p, None, CacheMode::Off);
    let tasks: Vec<_> = (0..30)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { complete(&c, ask(&format!("parallel {i}"))).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let stats = server.stats();
    assert_eq!(stats.requests, 30);
    assert!(stats.max_in_flight <= 3, "{stats:?}");
    assert_eq!(
        stats.max_in_flight, 3,
        "the limit is used, not just respected: {stats:?}"
    );
}

#[tokio::test]
async fn the_cache_serves_repeats_and_can_be_turned_off() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path());
    let c = client(provider(&server), Some(cache.clone()), CacheMode::ReadWrite);
    let first = complete(&c, ask("Tell me about Hogwarts.")).await.unwrap();
    assert!(!first.cached);
    let tokens_live: Vec<ChatEvent> = c.stream(ask("Tell me about Hogwarts.")).collect().await;
    assert_eq!(server.stats().requests, 1, "the repeat never reached the server");
    assert!(matches!(tokens_live.last(), Some(ChatEvent::Done { cached: true, .. })));
    let replayed: String = tokens_live
        .iter()
        .filter_map(|e| {
            if let ChatEvent::Token(t) = e {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(replayed, first.text);

    // A different repeat index is a different sample.
    let mut other = ask("Tell me about Hogwarts.");
    other.meta.repeat = 1;
    complete(&c, other).await.unwrap();
    assert_eq!(server.stats().requests, 2);

    let off = client(provider(&server), Some(cache.clone()), CacheMode::Off);
    assert!(!complete(&off, ask("Tell me about Hogwarts.")).await.unwrap().cached);
    assert_eq!(server.stats().requests, 3);

    let read_only = client(provider(&server), Some(cache), CacheMode::ReadOnly);
    complete(&read_only, ask("Something new.")).await.unwrap();
    complete(&read_only, ask("Something new.")).await.unwrap();
    assert_eq!(server.stats().requests, 5, "read-only never writes");
    assert_eq!(c.accounting().snapshot().total().cache_hits, 1);
}

fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return hits;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            hits.extend(files_containing(&path, needle));
        } else if std::fs::read(&path).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle)) {
            hits.push(path.display().to_string());
        }
    }
    hits
}

/// The real binary: `chat` prints exactly the served text over split events, retries injected faults,
/// and after all that no file in the data dir or the server log contains the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_cli_prints_the_served_text_and_never_writes_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.jsonl");
    let key = "sk-test-9f8e7d6c5b4a-secret";
    let script = vec![ScriptRule {
        contains: "talkative".into(),
        reply: "Only with people I trust, Harry.".into(),
    }];
    let server = FakeServer::start(FakeConfig {
        split_events: true,
        require_key: Some(key.into()),
        fault_share: 0.5,
        faults_per_request: 1,
        faults: vec![Fault::Cut, Fault::RateLimited],
        script,
        log: Some(log.clone()),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[providers]]\nname = \"x\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"TEST_KEY\"\nretry_base_ms = 1\n",
            server.base_url()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let run = |args: Vec<String>| {
        let (config, data) = (config.clone(), data.clone());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_incharacter"))
                .args(&args)
                .env("INCHARACTER_CONFIG", &config)
                .env("INCHARACTER_DATA_DIR", &data)
                .env("TEST_KEY", key)
                .output()
                .unwrap()
        })
    };
    let out = run(vec![
        "chat".into(),
        "--provider".into(),
        "x".into(),
        "Are you talkative?".into(),
    ])
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "Only with people I trust, Harry."
    );
    for i in 0..6 {
        let out = run(vec![
            "chat".into(),
            "--provider".into(),
            "x".into(),
            format!("Question {i}?"),
        ])
        .await
        .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let schema = dir.path().join("rating.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"result":{"type":"integer","minimum":1,"maximum":5}},"required":["result"]}"#,
    )
    .unwrap();
    let out = run(vec![
        "chat".into(),
        "--provider".into(),
        "x".into(),
        "--schema".into(),
        schema.display().to_string(),
        "Rate".into(),
    ])
    .await
    .unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(&printed).unwrap();
    assert!((1..=5).contains(&v["result"].as_i64().unwrap()));
    assert_eq!(
        server.requests().last().unwrap()["response_format"]["type"],
        "json_schema"
    );

    // Repeated: served from the cache; --cache off sends it again.
    let before = server.stats().requests;
    run(vec![
        "chat".into(),
        "--provider".into(),
        "x".into(),
        "Are you talkative?".into(),
    ])
    .await
    .unwrap();
    assert_eq!(server.stats().requests, before);
    run(vec![
        "chat".into(),
        "--provider".into(),
        "x".into(),
        "--cache".into(),
        "off".into(),
        "Are you talkative?".into(),
    ])
    .await
    .unwrap();
    assert!(server.stats().requests > before);

    // providers: the key's variable and whether it is set, never the key.
    let out = run(vec!["providers".into(), "--json".into()]).await.unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(&listing).unwrap();
    let x = v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "x")
        .unwrap();
    assert_eq!(
        (x["api_key_env"].as_str(), x["key_present"].as_bool()),
        (Some("TEST_KEY"), Some(true))
    );
    assert!(!listing.contains(key));
    let out = run(vec!["providers".into(), "check".into(), "x".into()]).await.unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success() && report.contains("structured output: works"),
        "{report}"
    );
    let out = run(vec!["providers".into(), "check".into(), "x".into(), "--json".into()])
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["valid_json"].as_bool()),
        (Some(true), Some(true)),
        "{v}"
    );
    assert!(v["total_ms"].as_f64().unwrap() >= v["first_token_ms"].as_f64().unwrap());
    assert!(!v.to_string().contains(key));

    assert!(data.join("cache").is_dir() && data.join("logs").is_dir());
    assert_eq!(files_containing(&data, key), Vec::<String>::new());
    assert_eq!(
        files_containing(dir.path(), key).len(),
        0,
        "nothing under the test dir holds the key"
    );
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("\"authorization_present\":true")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_check_names_the_response_format_it_sent() {
    for (extra, sent) in [
        ("", "structured output: works (response_format json_schema)"),
        (
            "schema_dialect = \"json-object\"",
            "structured output: works (response_format json_object, the schema in the prompt)",
        ),
    ] {
        let s = crate::common::setup(FakeConfig::default(), extra).await;
        let out = crate::common::output(&s.config, &s.data, &["providers", "check", "fake"]).await;
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && report.contains(sent), "{extra}: {report}");
    }
}
