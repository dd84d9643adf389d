//! `fake-openai`: a TEST INSTRUMENT, not a model. It serves the OpenAI chat-completions API on
//! 127.0.0.1 with deterministic, scripted replies (role-play filler text; JSON derived from the
//! request's schema), a configurable latency and streaming rate, and seeded fault injection (429 with
//! Retry-After, 500, 503, 400, a connection dropped after the headers, a stream cut mid-way, an error
//! inside the stream, a complete reply with no text or only whitespace). It counts requests and the
//! most ever in flight, and can log every request as JSONL (never the Authorization header's value).
//! With a [`Persona`] it behaves as a real self-hosted server does (see [`servers`]).
//! Integration tests and benchmarks run it in-process (`FakeServer::start`) or as the `fake-openai`
//! binary of this crate.

pub mod batch;
mod content;
use content::reply_for;
pub use content::{generate, split_tokens};
pub mod servers;

pub use self::servers::{Persona, TRACEBACK, chat_prompt_tokens, count_tokens};

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use incharacter::domain::rng::SplitMix64;

use self::batch::BatchOrder;

/// A fault the server can inject instead of (or in the middle of) a normal reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// 429 with `retry-after-ms` and `Retry-After`.
    RateLimited,
    /// 500.
    ServerError,
    /// 503.
    Unavailable,
    /// 400: never worth retrying.
    BadRequest,
    /// 200 headers, then the connection closes with no event.
    Drop,
    /// Half of the reply, then the connection closes before `[DONE]`.
    Cut,
    /// 200 with an error object as the first event.
    InStreamError,
    /// 200 headers, then nothing for `FakeConfig::stall` (the client's first-token timeout should fire).
    Stall,
    /// A complete, well-formed reply (stop, usage, `[DONE]`) with no text, as a llama.cpp server
    /// dropping requests under load sends.
    Empty,
    /// A complete reply whose text is only whitespace.
    Blank,
    /// A complete reply of prose whatever was asked: an answer to a role-play question, never a
    /// structured reply a judge's parser can use.
    Prose,
}

impl Fault {
    pub fn parse(name: &str) -> Option<Fault> {
        Some(match name.trim() {
            "429" | "rate-limited" => Fault::RateLimited,
            "500" | "server-error" => Fault::ServerError,
            "503" | "unavailable" => Fault::Unavailable,
            "400" | "bad-request" => Fault::BadRequest,
            "drop" => Fault::Drop,
            "cut" => Fault::Cut,
            "in-stream-error" => Fault::InStreamError,
            "stall" => Fault::Stall,
            "empty" => Fault::Empty,
            "blank" => Fault::Blank,
            "prose" => Fault::Prose,
            _ => return None,
        })
    }

    /// The text of the complete reply this fault answers with, if it is one of those.
    pub fn replied(self) -> Option<&'static str> {
        match self {
            Fault::Empty => Some(""),
            Fault::Blank => Some("\n \n"),
            Fault::Prose => Some("I would rather not put a number on it."),
            _ => None,
        }
    }
}

/// A scripted reply: when the last user message contains `contains`, answer `reply`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptRule {
    pub contains: String,
    pub reply: String,
}

#[derive(Debug, Clone)]
pub struct FakeConfig {
    pub seed: u64,
    /// Delay before the response headers.
    pub first_byte: Duration,
    /// Streaming rate; 0 streams as fast as possible.
    pub tokens_per_s: f64,
    /// Write every SSE event in two separate chunks (exercises the client's event reassembly).
    pub split_events: bool,
    /// Share of distinct requests (by content) whose first `faults_per_request` attempts fail.
    pub fault_share: f64,
    pub faults_per_request: u32,
    pub faults: Vec<Fault>,
    /// How long a `Fault::Stall` reply stays silent before the connection closes.
    pub stall: Duration,
    /// Require `Authorization: Bearer <key>`; otherwise 401.
    pub require_key: Option<String>,
    /// Answer a `json_schema` response_format with 400, as llama-cpp-python's server does.
    pub reject_json_schema: bool,
    pub script: Vec<ScriptRule>,
    /// Refuse as OpenAI's reasoning models document: `max_tokens` (use `max_completion_tokens`) and any
    /// temperature but 1, with an OpenAI-style error naming the `param`.
    pub reasoning: bool,
    /// Refuse a `json_schema` holding numeric or length bounds, as strict schema subsets do.
    pub no_numeric_bounds: bool,
    /// Answer 429 (with `retry-after-ms: 20`) to a request that would make more than this many in
    /// flight, as a rate-limited API does.
    pub concurrency_limit: Option<usize>,
    /// At most this many requests per window (windows of this length from the server's start), as
    /// OpenAI counts them: every reply says what is left (`x-ratelimit-remaining-requests`) and when
    /// the window ends (`x-ratelimit-reset-requests`), and a request over the budget gets a 429
    /// saying so (with no `Retry-After`: the reset is the only hint).
    pub requests_per_window: Option<(u32, Duration)>,
    /// In every structured reply that has this property, give it 99 (out of any questionnaire's range):
    /// a judge that always gets one item wrong.
    pub out_of_range_key: Option<String>,
    pub log: Option<PathBuf>,
    pub model: String,
    /// The order of a batch's output lines (see [`batch`]).
    pub batch_order: BatchOrder,
    /// Behave as this real server does (its routes, context rules, slots; see [`servers`]); `None`:
    /// the plain fake, which has no context limit and takes every request at once.
    pub persona: Option<Persona>,
    /// A persona's context in tokens (per slot, as llama-server reports `n_ctx`).
    pub context: usize,
    /// How many chat requests a llama.cpp or Ollama persona processes at once; the others queue.
    pub slots: usize,
    /// The Ollama persona's `/api/show` states `num_ctx` (as a Modelfile that sets it does).
    pub ollama_modelfile_ctx: bool,
    /// Every route answers 500 with a Python traceback (a server that is up but broken).
    pub fail_all: bool,
    /// Every batch fails when it is validated, with no output file (as one past the organisation's
    /// enqueued-token limit does); its files and the streaming path are unaffected.
    pub fail_batches: bool,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            seed: 0,
            first_byte: Duration::ZERO,
            tokens_per_s: 0.0,
            split_events: false,
            fault_share: 0.0,
            faults_per_request: 0,
            faults: Vec::new(),
            stall: Duration::from_secs(60),
            require_key: None,
            reject_json_schema: false,
            script: Vec::new(),
            out_of_range_key: None,
            reasoning: false,
            no_numeric_bounds: false,
            concurrency_limit: None,
            requests_per_window: None,
            log: None,
            model: "fake-openai".into(),
            batch_order: BatchOrder::default(),
            persona: None,
            context: 2048,
            slots: 1,
            ollama_modelfile_ctx: true,
            fail_all: false,
            fail_batches: false,
        }
    }
}

/// What the server has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stats {
    pub requests: u64,
    pub faults: u64,
    pub in_flight: usize,
    pub max_in_flight: usize,
    /// Requests refused by `concurrency_limit` or `requests_per_window`.
    pub throttled: u64,
    /// Batches created (`POST /v1/batches`); `requests` counts `/v1/chat/completions` calls only.
    pub batches: u64,
    /// Batch lines answered.
    pub batch_lines: u64,
    /// Files uploaded (`POST /v1/files`; not the output and error files the server writes).
    pub files: u64,
    /// Streams llama-cpp-python's persona ended early (`[DONE]`, no finish_reason) for a waiting request.
    pub interrupted: u64,
    /// Chat requests a persona refused because the prompt (or prompt + max_tokens) exceeds its context.
    pub context_refusals: u64,
    /// Chat prompts the Ollama persona cut to its context without saying so.
    pub truncated: u64,
    /// The largest chat prompt received, by [`chat_prompt_tokens`], before any truncation.
    pub max_prompt_tokens: usize,
    /// The most chat requests processed at once (holding a slot or the lock); `max_in_flight` also
    /// counts the queued ones.
    pub max_processing: usize,
    /// Requests to routes other than chat completions while a persona (or `fail_all`) is set.
    pub probes: u64,
}

/// One request as the latency model sees it (for benchmarks that compare with the ideal bound).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceEntry {
    /// Milliseconds from the server's start to the request's arrival.
    pub arrival_ms: f64,
    /// `judge` when the request asks for JSON (a `response_format`, or a schema quoted in the prompt),
    /// else `chat`.
    pub kind: &'static str,
    /// Content pieces streamed.
    pub tokens: usize,
    /// SSE events written (the role chunk, the pieces, the stop chunk, usage, `[DONE]`).
    pub events: usize,
    /// `first_byte + (events − 1) / tokens_per_s`: what an ideal client waits for this reply.
    pub model_ms: f64,
    pub fault: Option<Fault>,
}

pub(crate) struct Shared {
    pub(crate) config: FakeConfig,
    started: tokio::time::Instant,
    trace: Mutex<Vec<TraceEntry>>,
    pub(crate) attempts: Mutex<HashMap<String, u32>>,
    requests: AtomicU64,
    pub(crate) faults: AtomicU64,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    throttled: AtomicU64,
    /// The current `requests_per_window` window's index and the requests it has seen.
    window: Mutex<(u128, u32)>,
    log: Mutex<Option<std::fs::File>>,
    seen: Mutex<Vec<Value>>,
    /// The request count, for tests that wait until the server has seen enough.
    count: tokio::sync::watch::Sender<u64>,
    /// The Batch API's files and batches.
    pub(crate) batch: batch::Store,
    /// The persona's slots, lock and counters.
    servers: servers::Runtime,
}

/// Keeps the in-flight count right however a response ends (finished, cut, or dropped by the client).
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: &Arc<Shared>) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(shared.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

pub struct FakeServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    /// Binds 127.0.0.1 on a free port and serves until dropped.
    pub async fn start(config: FakeConfig) -> std::io::Result<FakeServer> {
        Self::start_on(config, 0).await
    }

    pub async fn start_on(config: FakeConfig, port: u16) -> std::io::Result<FakeServer> {
        let log = match &config.log {
            Some(path) => Some(std::fs::OpenOptions::new().create(true).append(true).open(path)?),
            None => None,
        };
        let shared = Arc::new(Shared {
            servers: servers::Runtime::new(&config),
            config,
            started: tokio::time::Instant::now(),
            trace: Mutex::default(),
            attempts: Mutex::default(),
            requests: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            throttled: AtomicU64::new(0),
            window: Mutex::default(),
            log: Mutex::new(log),
            seen: Mutex::default(),
            count: tokio::sync::watch::channel(0).0,
            batch: batch::Store::default(),
        });
        let app = servers::router(&shared).unwrap_or_else(|| {
            Router::new()
                .route("/v1/chat/completions", post(chat))
                .route("/v1/models", get(models))
                .route("/v1/_stats", get(stats))
                .merge(batch::routes())
                .with_state(shared.clone())
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeServer { addr, shared, task })
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn stats(&self) -> Stats {
        snapshot(&self.shared)
    }

    /// Resolves once the server has received at least `n` requests (no polling, no sleeping).
    pub async fn wait_for_requests(&self, n: u64) {
        let mut rx = self.shared.count.subscribe();
        let _ = rx.wait_for(|&c| c >= n).await;
    }

    /// Every request with its model latency, in arrival order.
    pub fn trace(&self) -> Vec<TraceEntry> {
        self.shared.trace.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every request body received, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn snapshot(shared: &Shared) -> Stats {
    let batch = shared.batch.counts();
    let servers = shared.servers.counts();
    Stats {
        requests: shared.requests.load(Ordering::SeqCst),
        faults: shared.faults.load(Ordering::SeqCst),
        in_flight: shared.in_flight.load(Ordering::SeqCst),
        max_in_flight: shared.max_in_flight.load(Ordering::SeqCst),
        throttled: shared.throttled.load(Ordering::SeqCst),
        batches: batch.batches,
        batch_lines: batch.batch_lines,
        files: batch.files,
        interrupted: servers.interrupted,
        context_refusals: servers.context_refusals,
        truncated: servers.truncated,
        max_prompt_tokens: servers.max_prompt_tokens,
        max_processing: servers.max_processing,
        probes: servers.probes,
    }
}

async fn stats(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    axum::Json(snapshot(&shared))
}

async fn models(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    axum::Json(
        json!({"object": "list", "data": [{"id": shared.config.model, "object": "model", "owned_by": "fake-openai (test instrument)"}]}),
    )
}

pub(crate) fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(crate) fn unit(hex: &str, salt: u64) -> f64 {
    let x = u64::from_str_radix(&hex[..16], 16).unwrap_or(0) ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    SplitMix64(x).unit()
}

/// A 400 as OpenAI words a refused parameter: the status and the error body.
fn refusal(message: &str, param: &str, code: &str) -> (StatusCode, Value) {
    (
        StatusCode::BAD_REQUEST,
        json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}),
    )
}

/// The first numeric or length bound keyword in a schema (property names are not keywords).
fn bound_in(schema: &Value) -> Option<&'static str> {
    const BOUNDS: [&str; 6] = [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
    ];
    match schema {
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if let Some(b) = BOUNDS.iter().find(|b| **b == k.as_str()) {
                return Some(*b);
            }
            match (k.as_str(), v) {
                ("properties", Value::Object(props)) => props.values().find_map(bound_in),
                _ => bound_in(v),
            }
        }),
        Value::Array(items) => items.iter().find_map(bound_in),
        _ => None,
    }
}

/// What a server that behaves as documented refuses in `request`, if anything.
fn documented_refusal(config: &FakeConfig, request: &Value) -> Option<Response> {
    refused(config, request).map(|(status, body)| (status, axum::Json(body)).into_response())
}

/// [`documented_refusal`] as a status and an error body (a batch line's result carries them).
pub(crate) fn refused(config: &FakeConfig, request: &Value) -> Option<(StatusCode, Value)> {
    if config.reasoning {
        if request.get("max_tokens").is_some() {
            return Some(refusal(
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            ));
        }
        if let Some(t) = request.get("temperature").and_then(Value::as_f64)
            && t != 1.0
        {
            return Some(refusal(
                &format!(
                    "Unsupported value: 'temperature' does not support {t} with this model. Only the default (1) value is supported."
                ),
                "temperature",
                "unsupported_value",
            ));
        }
    }
    if config.no_numeric_bounds
        && let Some(schema) = request.pointer("/response_format/json_schema/schema")
        && let Some(bound) = bound_in(schema)
    {
        return Some(refusal(
            &format!("Invalid schema for response_format: '{bound}' is not permitted."),
            "response_format",
            "invalid_json_schema",
        ));
    }
    None
}

/// The body of an error this server makes up (an injected fault, a refusal of its own).
pub(crate) fn error_body(message: &str) -> Value {
    json!({"error": {"message": message, "type": "fake_openai_fault"}})
}

fn error_response(status: StatusCode, message: &str, extra: &[(&str, &str)]) -> Response {
    let mut response = (status, axum::Json(error_body(message))).into_response();
    for (name, value) in extra {
        if let (Ok(n), Ok(v)) = (name.parse::<axum::http::HeaderName>(), value.parse()) {
            response.headers_mut().insert(n, v);
        }
    }
    response
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let guard = InFlight::enter(&shared);
    let arrival_ms = shared.started.elapsed().as_secs_f64() * 1000.0;
    let total = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
    shared.count.send_replace(total);
    let config = &shared.config;
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error_response(StatusCode::BAD_REQUEST, "the body is not JSON", &[]);
    };
    let content_key = digest(&request.to_string());
    let attempt = {
        let mut attempts = shared.attempts.lock().unwrap_or_else(|p| p.into_inner());
        let n = attempts.entry(content_key.clone()).or_insert(0);
        *n += 1;
        *n - 1
    };
    let authorized = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let fault = injected_fault(config, &content_key, attempt);
    log_request(&shared, &request, attempt, fault, authorized.is_some());
    servers::note_prompt(&shared, &request);

    let window = match turned_away(&shared, &request, authorized.as_deref()) {
        Ok(window) => window,
        Err(refused) => return *refused,
    };
    // A persona's slot or lock, and its context rules.
    let admission = match servers::admit(&shared, &request).await {
        Ok(admission) => admission,
        Err(refused) => return with_headers(refused, &window),
    };
    tokio::time::sleep(config.first_byte).await;
    if fault.is_some() {
        shared.faults.fetch_add(1, Ordering::SeqCst);
    }
    if let Some(response) = fault.and_then(injected_error) {
        record(&shared, arrival_ms, &request, 0, 0, fault);
        return with_headers(response, &window);
    }

    let reply = match fault.and_then(Fault::replied) {
        Some(text) => text.to_string(),
        None => reply_for(config, &request, &content_key),
    };
    let (tokens, finish) = admission.complete(split_tokens(&reply));
    let reply = Reply {
        id: format!("chatcmpl-fake-{}", &content_key[..12]),
        model: request["model"].as_str().unwrap_or(&config.model).to_string(),
        prompt_tokens: admission.prompt_tokens,
        tokens,
        finish,
    };
    let stream_events = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if !stream_events {
        record(&shared, arrival_ms, &request, reply.tokens.len(), 1, fault);
        return with_headers(reply.completion(), &window);
    }
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let events = reply.pieces(fault, include_usage);
    record(&shared, arrival_ms, &request, reply.tokens.len(), events.len(), fault);
    with_headers(event_stream(config, events, guard, admission), &window)
}

/// The fault injected into this attempt of a request, if any: the first `faults_per_request`
/// attempts of a `fault_share` of the requests (chosen by their content) each get one of `faults`.
fn injected_fault(config: &FakeConfig, content_key: &str, attempt: u32) -> Option<Fault> {
    (!config.faults.is_empty()
        && attempt < config.faults_per_request
        && unit(content_key, config.seed) < config.fault_share)
        .then(|| {
            config.faults
                [(attempt as usize + (unit(content_key, config.seed + 1) * 1000.0) as usize) % config.faults.len()]
        })
}

/// What turns a request away before it is admitted: a wrong key, a refused `json_schema`, a
/// documented refusal, too many in flight, a spent window. Else the window's headers, which every
/// reply carries.
fn turned_away(
    shared: &Shared,
    request: &Value,
    authorized: Option<&str>,
) -> Result<Vec<(&'static str, String)>, Box<Response>> {
    let config = &shared.config;
    if let Some(key) = &config.require_key
        && authorized != Some(&format!("Bearer {key}"))
    {
        // Some servers and proxies repeat the key they refused; so does this one.
        let sent = authorized.and_then(|a| a.strip_prefix("Bearer ")).unwrap_or("none");
        return Err(Box::new(error_response(
            StatusCode::UNAUTHORIZED,
            &format!("Incorrect API key provided: {sent}."),
            &[],
        )));
    }
    if config.reject_json_schema && request.pointer("/response_format/type") == Some(&json!("json_schema")) {
        return Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            "response_format.type: Input should be 'text' or 'json_object'",
            &[],
        )));
    }
    if let Some(refused) = servers::refuse_json_schema(config, request) {
        return Err(Box::new(refused));
    }
    if let Some(refused) = documented_refusal(config, request) {
        return Err(Box::new(refused));
    }
    if config
        .concurrency_limit
        .is_some_and(|limit| shared.in_flight.load(Ordering::SeqCst) > limit)
    {
        shared.throttled.fetch_add(1, Ordering::SeqCst);
        return Err(Box::new(error_response(
            StatusCode::TOO_MANY_REQUESTS,
            "Rate limit reached: too many requests in flight.",
            &[("retry-after-ms", "20")],
        )));
    }
    let window = count_in_window(shared);
    if let Some((headers, true)) = &window {
        shared.throttled.fetch_add(1, Ordering::SeqCst);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        return Err(Box::new(error_response(
            StatusCode::TOO_MANY_REQUESTS,
            "Rate limit reached for requests in this window.",
            &headers,
        )));
    }
    Ok(window.map(|(headers, _)| headers).unwrap_or_default())
}

/// The error status an injected fault answers with, for the faults that are one.
fn injected_error(fault: Fault) -> Option<Response> {
    match fault {
        Fault::RateLimited => Some(error_response(
            StatusCode::TOO_MANY_REQUESTS,
            "Rate limit reached (injected).",
            &[("retry-after-ms", "20"), ("retry-after", "1")],
        )),
        Fault::ServerError => Some(error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "injected server error",
            &[],
        )),
        Fault::Unavailable => Some(error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "injected: overloaded",
            &[],
        )),
        Fault::BadRequest => Some(error_response(
            StatusCode::BAD_REQUEST,
            "injected: invalid request",
            &[],
        )),
        _ => None,
    }
}

/// A reply, ready to be sent whole or streamed.
struct Reply {
    id: String,
    model: String,
    prompt_tokens: usize,
    tokens: Vec<String>,
    finish: &'static str,
}

impl Reply {
    fn usage(&self) -> Value {
        json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": self.tokens.len(),
               "total_tokens": self.prompt_tokens + self.tokens.len()})
    }

    /// The reply as one `chat.completion` object.
    fn completion(&self) -> Response {
        axum::Json(json!({
            "id": self.id, "object": "chat.completion", "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": self.tokens.concat()},
                         "finish_reason": self.finish}],
            "usage": self.usage(),
        }))
        .into_response()
    }

    fn chunk(&self, delta: Value, finish: Value) -> String {
        json!({"id": self.id, "object": "chat.completion.chunk", "model": self.model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    }

    /// The reply as server-sent events, as the fault (if any) shapes them: cut, dropped, stalled or
    /// an error inside the stream.
    fn pieces(&self, fault: Option<Fault>, include_usage: bool) -> Vec<Piece> {
        let mut events: Vec<Piece> = Vec::new();
        match fault {
            Some(Fault::Drop) => events.push(Piece::Drop),
            Some(Fault::Stall) => events.push(Piece::Stall),
            Some(Fault::InStreamError) => events.push(Piece::Data(
                json!({"error": {"message": "injected: the model is overloaded", "type": "server_error"}}).to_string(),
            )),
            _ => {
                events.push(Piece::Data(
                    self.chunk(json!({"role": "assistant", "content": ""}), Value::Null),
                ));
                let cut_at = (fault == Some(Fault::Cut)).then_some(self.tokens.len() / 2);
                for (i, token) in self.tokens.iter().enumerate() {
                    if cut_at == Some(i) {
                        events.push(Piece::Drop);
                        break;
                    }
                    events.push(Piece::Data(self.chunk(json!({"content": token}), Value::Null)));
                }
                if cut_at.is_none() {
                    events.push(Piece::Data(self.chunk(json!({}), json!(self.finish))));
                    if include_usage {
                        events.push(Piece::Data(
                            json!({"id": self.id, "object": "chat.completion.chunk", "model": self.model,
                                   "choices": [], "usage": self.usage()})
                            .to_string(),
                        ));
                    }
                    events.push(Piece::Data("[DONE]".into()));
                }
            }
        }
        events
    }
}

/// The events as a `text/event-stream` body, paced at `tokens_per_s`, optionally split in two
/// writes each; the in-flight mark and the admission are held until the stream ends.
fn event_stream(config: &FakeConfig, events: Vec<Piece>, guard: InFlight, admission: servers::Admission) -> Response {
    let gap = (config.tokens_per_s > 0.0).then(|| Duration::from_secs_f64(1.0 / config.tokens_per_s));
    let split = config.split_events;
    let stall = config.stall;
    // Event n leaves at start + n·gap: deadlines, not sleeps, so timer slack does not accumulate.
    let start = tokio::time::Instant::now();
    let body = futures_util::stream::unfold(
        (events.into_iter(), 0u32, Some((guard, admission)), Vec::<Bytes>::new()),
        move |(mut events, n, guard, mut pending)| async move {
            if let Some(piece) = pending.pop() {
                return Some((Ok::<Bytes, std::io::Error>(piece), (events, n, guard, pending)));
            }
            if n > 0
                && let Some((_, admission)) = &guard
                && admission.gives_way(events.len())
            {
                let done = Bytes::from_static(b"data: [DONE]\n\n");
                return Some((Ok(done), (Vec::new().into_iter(), n + 1, None, pending)));
            }
            let event = events.next()?;
            if let (Some(gap), true) = (gap, n > 0) {
                tokio::time::sleep_until(start + gap * n).await;
            }
            match event {
                Piece::Drop => Some((
                    Err(std::io::Error::other("injected: connection dropped")),
                    (events, n + 1, None, pending),
                )),
                Piece::Stall => {
                    tokio::time::sleep(stall).await;
                    Some((
                        Err(std::io::Error::other("injected: stalled, then dropped")),
                        (events, n + 1, None, pending),
                    ))
                }
                Piece::Data(data) => {
                    let text = format!("data: {data}\n\n");
                    if split {
                        // Two writes per event, cut at a character boundary in the middle.
                        let mut mid = text.len() / 2;
                        while !text.is_char_boundary(mid) {
                            mid -= 1;
                        }
                        pending.push(Bytes::copy_from_slice(&text.as_bytes()[mid..]));
                        Some((
                            Ok(Bytes::copy_from_slice(&text.as_bytes()[..mid])),
                            (events, n + 1, guard, pending),
                        ))
                    } else {
                        Some((Ok(Bytes::from(text)), (events, n + 1, guard, pending)))
                    }
                }
            }
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| error_response(StatusCode::INTERNAL_SERVER_ERROR, "cannot build the response", &[]))
}

/// Counts a request in its `requests_per_window` window: the headers every reply in it carries, and
/// whether the window's budget was spent before it.
fn count_in_window(shared: &Shared) -> Option<(Vec<(&'static str, String)>, bool)> {
    let (budget, length) = shared.config.requests_per_window?;
    let length = length.as_nanos().max(1);
    let elapsed = shared.started.elapsed().as_nanos();
    let index = elapsed / length;
    let used = {
        let mut window = shared.window.lock().unwrap_or_else(|p| p.into_inner());
        if window.0 != index {
            *window = (index, 0);
        }
        window.1 += 1;
        window.1
    };
    let reset = Duration::from_nanos(u64::try_from((index + 1) * length - elapsed).unwrap_or(u64::MAX));
    let headers = vec![
        ("x-ratelimit-limit-requests", budget.to_string()),
        (
            "x-ratelimit-remaining-requests",
            budget.saturating_sub(used).to_string(),
        ),
        ("x-ratelimit-reset-requests", go_duration(reset)),
    ];
    Some((headers, used > budget))
}

/// A duration as OpenAI's headers write it (Go's notation), in whole milliseconds rounded up:
/// `20ms`, `1.5s`, `6m0s`.
fn go_duration(d: Duration) -> String {
    let ms = d.as_nanos().div_ceil(1_000_000);
    let (minutes, seconds) = (ms / 60_000, (ms % 60_000) as f64 / 1000.0);
    match (minutes, ms) {
        (0, ..1000) => format!("{ms}ms"),
        (0, _) => format!("{seconds}s"),
        _ => format!("{minutes}m{seconds}s"),
    }
}

fn with_headers(mut response: Response, headers: &[(&'static str, String)]) -> Response {
    for (name, value) in headers {
        if let Ok(value) = value.parse() {
            response.headers_mut().insert(*name, value);
        }
    }
    response
}

/// What the streamed body carries, event by event.
enum Piece {
    Data(String),
    /// The connection closes.
    Drop,
    /// Nothing for `FakeConfig::stall`, then the connection closes.
    Stall,
}

fn record(shared: &Shared, arrival_ms: f64, request: &Value, tokens: usize, events: usize, fault: Option<Fault>) {
    let config = &shared.config;
    let json = request.get("response_format").is_some_and(|f| !f.is_null())
        || request
            .pointer("/messages/0/content")
            .and_then(Value::as_str)
            .is_some_and(|s| s.contains("JSON Schema:"));
    let streaming = if config.tokens_per_s > 0.0 {
        events.saturating_sub(1) as f64 / config.tokens_per_s
    } else {
        0.0
    };
    let entry = TraceEntry {
        arrival_ms,
        kind: if json { "judge" } else { "chat" },
        tokens,
        events,
        model_ms: (config.first_byte.as_secs_f64() + streaming) * 1000.0,
        fault,
    };
    shared.trace.lock().unwrap_or_else(|p| p.into_inner()).push(entry);
}

fn log_request(shared: &Shared, request: &Value, attempt: u32, fault: Option<Fault>, authorized: bool) {
    let entry = json!({
        "attempt": attempt,
        "fault": fault,
        "authorization_present": authorized,
        "model": request["model"],
        "messages": request["messages"],
        "response_format": request.get("response_format"),
        "temperature": request.get("temperature"),
        "seed": request.get("seed"),
    });
    shared
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(request.clone());
    if let Some(file) = shared.log.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        let _ = writeln!(file, "{entry}");
    }
}

/// The prompt's tokens as the fake counts them: whitespace-separated words of every message.
pub(crate) fn prompt_tokens(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .map(|c| c.split_whitespace().count())
        .sum()
}
