//! Self-hosted servers as they behave, emulated by the test instrument's personas (see
//! `incharacter_testkit::fake_openai::servers`): what a server says of itself on first contact sets
//! the run's requests in flight and its context, and is journaled; nothing is sent that its context
//! cannot hold; its refusals for length are recognised, not retried; a server that interrupts the
//! running request for the next is met with fewer in flight; `providers check` is quick against a
//! server that fails everything.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use incharacter_testkit::fake_openai::servers::Persona;
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

use crate::common;

const RUN: &[&str] = &[
    "run",
    "--characters",
    "hermione-en,snape-en",
    "--scales",
    "BFI",
    "--methods",
    "er-batch,oc",
    "--seed",
    "5",
    "--json",
];

fn persona(persona: Persona, context: usize, slots: usize) -> FakeConfig {
    FakeConfig {
        persona: Some(persona),
        context,
        slots,
        model: "fake-model".into(),
        ..FakeConfig::default()
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn session_dir(data: &Path, out: &Output) -> PathBuf {
    data.join("sessions").join(common::session_id(out))
}

/// The JSON export of the session a `--json` run printed.
async fn export(s: &common::Setup, out: &Output) -> Value {
    let id = common::session_id(out);
    common::json_of(common::output(&s.config, &s.data, &["export", &id, "--format", "json"]).await)
}

fn events(session: &Path) -> Vec<Value> {
    std::fs::read_to_string(session.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// Every answer in the journal has text, and every dimension has a score or a reason.
fn answers_are_answers(events: &[Value]) {
    for a in of_kind(events, "item_answered") {
        assert!(
            !a["response"].as_str().unwrap().trim().is_empty(),
            "an empty answer was journaled: {a}"
        );
    }
    for d in of_kind(events, "dimension_assessed") {
        assert!(
            d["score"].is_number() || d["failure"].as_str().is_some_and(|f| !f.is_empty()),
            "{d}"
        );
    }
}

/// Every cached reply has text.
fn cache_holds_no_empty_reply(data: &Path) {
    let mut files = Vec::new();
    common::all_bytes(&data.join("cache"), &mut files);
    assert!(!files.is_empty());
    for (path, bytes) in files {
        let entry: Value = serde_json::from_slice(&bytes).unwrap();
        let text: String = entry["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(!text.trim().is_empty(), "{path} caches an empty reply");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_llama_server_with_one_slot_gets_one_request_at_a_time_without_a_configured_limit() {
    let s = common::setup(persona(Persona::LlamaCpp, 8192, 1), "").await;
    let out = common::output(&s.config, &s.data, RUN).await;
    assert!(out.status.success(), "{}", text(&out));
    let stats = s.server.stats();
    assert_eq!(
        stats.max_in_flight, 1,
        "never more than one request in flight: {stats:?}"
    );
    assert_eq!(stats.interrupted + stats.context_refusals, 0, "{stats:?}");
    let session = session_dir(&s.data, &out);
    let events = events(&session);
    let servers = of_kind(&events, "server");
    assert_eq!(servers.len(), 1, "what the server said is journaled once");
    assert_eq!(servers[0]["server"], "llama.cpp");
    assert_eq!(servers[0]["slots"], 1);
    assert_eq!(servers[0]["context_tokens"], 8192);
    assert_eq!(servers[0]["used"]["max_concurrency"], 1);
    assert_eq!(of_kind(&events, "item_answered").len(), 88);
    let scored = of_kind(&events, "dimension_assessed")
        .iter()
        .filter(|d| d["score"].is_number())
        .count();
    assert_eq!(scored, 20, "2 characters × 5 dimensions × 2 methods");
    answers_are_answers(&events);
    // The export says it too.
    let export = export(&s, &out).await;
    assert_eq!(export["session"]["servers"][0]["slots"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configured_limit_wins_over_the_slots_and_the_run_says_so() {
    let s = common::setup(persona(Persona::LlamaCpp, 8192, 1), "max_concurrency = 3").await;
    let out = common::output(&s.config, &s.data, &RUN[..RUN.len() - 1]).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(s.server.stats().max_in_flight > 1, "{:?}", s.server.stats());
    let all = text(&out);
    assert!(
        all.contains("max_concurrency = 3 in the config exceeds the server's 1 slot(s)"),
        "{all}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn llama_cpp_python_is_recognised_and_asked_one_at_a_time_so_nothing_is_interrupted() {
    let s = common::setup(persona(Persona::LlamaCppPython, 2048, 1), "").await;
    let out = common::output(&s.config, &s.data, RUN).await;
    assert!(out.status.success(), "{}", text(&out));
    let stats = s.server.stats();
    assert_eq!(stats.interrupted, 0, "{stats:?}");
    assert_eq!(stats.context_refusals, 0, "nothing sent past the context: {stats:?}");
    assert!(stats.max_prompt_tokens < 2048, "{stats:?}");
    let events = events(&session_dir(&s.data, &out));
    let servers = of_kind(&events, "server");
    assert_eq!(servers[0]["server"], "llama-cpp-python");
    assert_eq!(servers[0]["tokenize"], "llama_cpp_python");
    // It refuses `json_schema` (a 500 with its traceback's frames): adapted once, journaled.
    let adapted = of_kind(&events, "adapted");
    assert!(adapted.iter().any(|a| a["kind"] == "json_object"), "{adapted:?}");
    let scored = of_kind(&events, "dimension_assessed")
        .iter()
        .filter(|d| d["score"].is_number())
        .count();
    assert_eq!(scored, 20, "every dimension scored");
    answers_are_answers(&events);
    cache_holds_no_empty_reply(&s.data);
}

/// llama-cpp-python with less context than the 2,048 assumed for it refuses the longer prompts
/// with an empty stream: what finally fails names the likely cause and the setting that fixes it.
#[tokio::test(flavor = "multi_thread")]
async fn an_empty_stream_from_llama_cpp_python_names_its_context() {
    let s = common::setup(persona(Persona::LlamaCppPython, 1024, 1), "retry_base_ms = 1").await;
    let out = common::output(&s.config, &s.data, RUN).await;
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("set the provider's context_tokens"), "{said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn interruptions_of_a_one_request_server_stop_soon_when_the_config_asks_for_more() {
    // The config insists on 8 in flight: the server ends the running stream for each newcomer.
    let s = common::setup(
        FakeConfig {
            tokens_per_s: 400.0,
            ..persona(Persona::LlamaCppPython, 4096, 1)
        },
        "max_concurrency = 8\nretry_base_ms = 5\nmax_retries = 6",
    )
    .await;
    let run = common::run_hermione("BFI", "er-batch", &["--json"]);
    let out = common::output(&s.config, &s.data, &run).await;
    assert!(out.status.success(), "{}", text(&out));
    let stats = s.server.stats();
    assert!(stats.interrupted > 0, "the test must provoke interruptions: {stats:?}");
    assert!(
        stats.interrupted < 44,
        "each interruption lowers the requests in flight, so they stop soon: {stats:?}"
    );
    let events = events(&session_dir(&s.data, &out));
    assert_eq!(of_kind(&events, "item_answered").len(), 44);
    answers_are_answers(&events);
    cache_holds_no_empty_reply(&s.data);
}

#[tokio::test(flavor = "multi_thread")]
async fn vllm_is_never_sent_more_than_its_max_model_len() {
    let s = common::setup(persona(Persona::Vllm, 2048, 1), "").await;
    let out = common::output(&s.config, &s.data, RUN).await;
    let all = text(&out);
    let stats = s.server.stats();
    assert_eq!(stats.context_refusals, 0, "{stats:?}\n{all}");
    let events = events(&session_dir(&s.data, &out));
    answers_are_answers(&events);
    assert_eq!(of_kind(&events, "server")[0]["context_tokens"], 2048);
    // Each request went with its prompt and its cap inside the context.
    for body in s.server.requests() {
        let prompt =
            incharacter_testkit::fake_openai::servers::chat_prompt_tokens(body["messages"].as_array().unwrap());
        let cap = body["max_tokens"].as_u64().unwrap_or(0) as usize;
        assert!(prompt + cap <= 2048, "{prompt} + {cap} sent to a 2048-token context");
    }
    // What did not fit one call went in smaller ones, and the assessment says so.
    let fitted: Vec<&Value> = of_kind(&events, "dimension_assessed")
        .into_iter()
        .filter(|d| d["fitted"].is_string())
        .collect();
    for d in &fitted {
        assert!(d["fitted"].as_str().unwrap().contains("context"), "{d}");
    }
    assert!(out.status.success(), "{all}");
    // The departure is part of the exported result, dimension by dimension.
    let id = common::session_id(&out);
    let export = common::json_of(common::output(&s.config, &s.data, &["export", &id, "--format", "json"]).await);
    let key = |d: &Value, dim: &str| format!("{} {} {} {dim}", d["character"], d["scale"], d["method"]);
    let mut journaled: Vec<String> = fitted
        .iter()
        .map(|d| key(d, d["dimension"].as_str().unwrap()))
        .collect();
    let mut exported: Vec<String> = export["assessments"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| {
            a["dimensions"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(_, d)| d["fitted"].is_string())
                .map(|(dim, _)| key(a, dim))
                .collect::<Vec<_>>()
        })
        .collect();
    journaled.sort();
    exported.sort();
    assert!(!journaled.is_empty(), "the test must make calls that do not fit");
    assert_eq!(exported, journaled);
    // What was kept back for the context is said as such, not counted as the server's failures.
    let used: Vec<&str> = all.lines().filter(|l| l.starts_with("used: ")).collect();
    assert!(used.iter().all(|l| !l.contains("failed")), "{used:?}");
    if !fitted.is_empty() {
        assert!(
            used.iter().any(|l| l.contains("not sent (longer than the context)")),
            "{used:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_context_refusal_is_not_retried_and_what_it_says_fits_the_rest() {
    // The config says 32k; the server holds 1200 tokens and refuses beyond, in vLLM's words.
    let s = common::setup(
        persona(Persona::Vllm, 1200, 1),
        "context_tokens = 32768\nmax_concurrency = 1",
    )
    .await;
    let run = common::run_hermione("BFI", "er-all", &["--json"]);
    let out = common::output(&s.config, &s.data, &run).await;
    let all = text(&out);
    assert!(all.contains("exceeds the 1200 the server reports"), "{all}");
    let stats = s.server.stats();
    let events = events(&session_dir(&s.data, &out));
    answers_are_answers(&events);
    // One refused call teaches the context: the rest are fitted before they go, so the server
    // refuses at most once per request that was in flight when it first refused.
    assert!(
        (1..=2).contains(&stats.context_refusals),
        "refusals are not retried, and the context is learned from the first: {stats:?}"
    );
    for d in of_kind(&events, "dimension_assessed") {
        let why = d["failure"].as_str().unwrap_or("").to_string() + d["fitted"].as_str().unwrap_or("");
        assert!(d["score"].is_number() || why.contains("context"), "{d}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ollama_is_never_sent_a_prompt_it_would_cut_silently() {
    let s = common::setup(persona(Persona::Ollama, 2048, 1), "").await;
    let out = common::output(&s.config, &s.data, RUN).await;
    assert!(out.status.success(), "{}", text(&out));
    let stats = s.server.stats();
    assert_eq!(stats.truncated, 0, "{stats:?}");
    let events = events(&session_dir(&s.data, &out));
    let servers = of_kind(&events, "server");
    assert_eq!(servers[0]["server"], "ollama");
    assert_eq!(servers[0]["truncates"], true);
    answers_are_answers(&events);
}

#[tokio::test(flavor = "multi_thread")]
async fn providers_check_against_a_server_failing_everything_is_quick_and_clean() {
    let server = FakeServer::start(FakeConfig {
        fail_all: true,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "");
    let data = dir.path().join("data");
    let started = Instant::now();
    let out = common::output(&config, &data, &["providers", "check", "fake"]).await;
    let took = started.elapsed();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(took < Duration::from_secs(15), "{took:?}\n{all}");
    assert!(all.contains("RuntimeError: llama_decode returned -3"), "{all}");
    assert!(!all.contains("Traceback") && !all.contains("File \""), "{all}");
    assert!(all.contains("asking the server about itself"), "a line per step: {all}");
    let chat = server.stats().requests;
    assert!(chat <= 2, "at most one retry of the request: {chat}");
    // --json carries what was learned (here: nothing) and the time taken.
    let out = common::output(&config, &data, &["providers", "check", "fake", "--json"]).await;
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert!(report["elapsed_ms"].as_f64().unwrap() < 15_000.0);
    assert!(report.get("server").is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn providers_check_by_preset_reports_what_the_server_said() {
    let server = FakeServer::start(persona(Persona::LlamaCpp, 4096, 2)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = common::output(
        &dir.path().join("none.toml"),
        &data,
        &[
            "providers",
            "check",
            "--preset",
            "llamacpp",
            "--base-url",
            &server.base_url(),
            "--json",
        ],
    )
    .await;
    let report = common::json_of(out);
    assert_eq!(report["server"]["server"], "llama.cpp");
    assert_eq!(report["server"]["context_tokens"], 4096);
    assert_eq!(report["server"]["slots"], 2);
    assert_eq!(report["server"]["tokenize"], "llama_cpp");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_cut_at_the_answer_cap_is_kept_and_marked() {
    let s = common::setup(persona(Persona::LlamaCpp, 8192, 2), "").await;
    let run = common::run_hermione("BFI", "er-batch", &["--max-answer-tokens", "16", "--json"]);
    let out = common::output(&s.config, &s.data, &run).await;
    assert!(out.status.success(), "{}", text(&out));
    let events = events(&session_dir(&s.data, &out));
    let answers = of_kind(&events, "item_answered");
    assert_eq!(answers.len(), 44, "a cut answer is an answer: the cap is the method's");
    let cut = answers.iter().filter(|a| a["truncated"] == true).count();
    assert!(cut > 0, "some answers reach a 16-token cap: {:?}", answers[0]);
    answers_are_answers(&events);
    let text = export(&s, &out).await.to_string();
    assert!(
        text.contains("\"truncated\":true"),
        "the export says which answers were cut"
    );
}

/// An OC call too long for the context is split and its parts are asked; when those fail (replies
/// with no JSON), the dimension's failure says what they met, not the refusal that split the call.
#[tokio::test(flavor = "multi_thread")]
async fn a_split_conversion_fails_for_what_its_parts_met() {
    use incharacter_testkit::fake_openai::ScriptRule;
    let s = common::setup(
        FakeConfig {
            // The conversion and its re-asks are answered with no JSON.
            script: ["\"statement\": ", "That reply cannot be used"]
                .map(|contains| ScriptRule {
                    contains: contains.into(),
                    reply: "I would rather not say.".into(),
                })
                .into(),
            ..persona(Persona::Vllm, 2048, 1)
        },
        "retry_base_ms = 5",
    )
    .await;
    let run = common::run_hermione("BFI", "oc", &["--json"]);
    let out = common::output(&s.config, &s.data, &run).await;
    let events = events(&session_dir(&s.data, &out));
    let failed: Vec<&Value> = of_kind(&events, "dimension_assessed")
        .into_iter()
        .filter(|d| d["fitted"].is_string())
        .collect();
    assert!(!failed.is_empty(), "the test must split calls: {}", text(&out));
    for d in failed {
        let why = d["failure"].as_str().unwrap_or_default();
        assert!(why.contains("no usable conversion"), "{d}");
        assert!(!why.contains("does not fit the context"), "{d}");
        assert!(why.contains("JSON"), "what the parts met: {d}");
    }
}

/// A base URL that names the endpoint itself gets a 404 with no words: the error says what base_url
/// should be, rather than `HTTP 404: ` and nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_url_naming_the_endpoint_is_said_to_be_the_apis_root() {
    let s = common::setup(FakeConfig::default(), "").await;
    let config = std::fs::read_to_string(&s.config).unwrap();
    let endpoint = format!("{}/chat/completions", s.server.base_url());
    std::fs::write(&s.config, config.replace(&s.server.base_url(), &endpoint)).unwrap();
    let out = common::output(
        &s.config,
        &s.data,
        &["chat", "--provider", "fake", "--cache", "off", "hi"],
    )
    .await;
    let said = text(&out);
    assert_ne!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("answered HTTP 404: (nothing answers at"), "{said}");
    assert!(said.contains("base_url is the API's root"), "{said}");
}
