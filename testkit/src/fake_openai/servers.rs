//! Personas: the fake server behaving as a real self-hosted OpenAI-compatible server does — llama.cpp's
//! `llama-server`, llama-cpp-python's server, vLLM, Ollama, LM Studio — so incharacter's tests can meet
//! what those servers really send: their probe routes (`/props`, `/tokenize`, `/api/show`, …), their
//! context-size refusals in their own words, their queueing of requests on slots, llama-cpp-python's
//! interruption of a running stream, Ollama's silent truncation, and a server that fails every request
//! with a Python traceback. Token counts come from a deterministic public tokenizer
//! ([`count_tokens`], [`chat_prompt_tokens`]) so a test can compute what the server will say.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

use super::{FakeConfig, InFlight, Shared, log_request};

/// The real server a [`FakeConfig::persona`] emulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persona {
    /// llama.cpp's `llama-server`: `/props`, `/slots`, `/tokenize`, `/health`; SLOTS requests at once,
    /// the others queued; a prompt that does not fit its slot's context refused with 400.
    LlamaCpp,
    /// `python -m llama_cpp.server` (0.3.x, `interrupt_requests` on by default): one request at a time
    /// behind one lock — chat, `/extras/tokenize*` and `/v1/models` alike, as each of those routes
    /// `Depends(get_llama_proxy)` — and a request that waits for the lock ends the running stream
    /// right after the chunk it is sending (see `Admission::gives_way`).
    LlamaCppPython,
    /// `vllm serve`: `max_model_len` in `/v1/models`, `/tokenize`, prompt + max_tokens over the context
    /// refused with 400, no slot limit.
    Vllm,
    /// Ollama: `/api/show` (its `num_ctx`), `/api/version`; a prompt over the context silently cut.
    Ollama,
    /// LM Studio: `/api/v0/models` (its `loaded_context_length`); a prompt over the context refused.
    LmStudio,
}

impl Persona {
    /// The persona a name means: `llama.cpp` (or `llamacpp`, `llama-server`), `llama-cpp-python`,
    /// `vllm`, `ollama`, `lmstudio` (or `lm-studio`).
    pub fn parse(name: &str) -> Option<Persona> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "llama.cpp" | "llamacpp" | "llama-server" => Persona::LlamaCpp,
            "llama-cpp-python" => Persona::LlamaCppPython,
            "vllm" => Persona::Vllm,
            "ollama" => Persona::Ollama,
            "lmstudio" | "lm-studio" => Persona::LmStudio,
            _ => return None,
        })
    }

    /// FastAPI servers answer an unknown route with `{"detail":"Not Found"}`; the others with text.
    fn fastapi(self) -> bool {
        matches!(self, Persona::LlamaCppPython | Persona::Vllm)
    }
}

/// The fake's tokenizer: each maximal run of ASCII letters and digits is ⌈len/4⌉ tokens, every other
/// character but whitespace (punctuation, CJK, any non-ASCII) is one, whitespace is free.
pub fn count_tokens(text: &str) -> usize {
    let (mut tokens, mut run) = (0, 0usize);
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            run += 1;
            continue;
        }
        tokens += run.div_ceil(4) + usize::from(!c.is_whitespace());
        run = 0;
    }
    tokens + run.div_ceil(4)
}

/// A chat prompt's tokens as the personas count them: each message's content plus 4 (its role and
/// delimiters), plus 3 for the chat template's frame.
pub fn chat_prompt_tokens(messages: &[Value]) -> usize {
    messages
        .iter()
        .map(|m| count_tokens(&content_text(m)) + 4)
        .sum::<usize>()
        + 3
}

/// A message's text: a string content, or the text parts of a content array.
fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn request_prompt_tokens(request: &Value) -> usize {
    chat_prompt_tokens(request["messages"].as_array().map(Vec::as_slice).unwrap_or_default())
}

/// Token ids for `n` tokens: any deterministic numbers serve.
fn token_ids(n: usize) -> Vec<usize> {
    (0..n).map(|i| 100 + (i * 7919) % 30_000).collect()
}

/// The personas' state and counters, part of the server's shared state.
pub(crate) struct Runtime {
    /// llama.cpp's slots, Ollama's `OLLAMA_NUM_PARALLEL`: a fair (arrival-order) queue.
    slots: Option<Arc<Semaphore>>,
    /// llama-cpp-python's lock.
    lock: Option<PythonLock>,
    processing: AtomicUsize,
    max_processing: AtomicUsize,
    interrupted: AtomicU64,
    context_refusals: AtomicU64,
    truncated: AtomicU64,
    max_prompt_tokens: AtomicUsize,
    probes: AtomicU64,
}

/// The personas' counters, as [`super::Stats`] reports them.
pub(crate) struct Counts {
    pub(crate) interrupted: u64,
    pub(crate) context_refusals: u64,
    pub(crate) truncated: u64,
    pub(crate) max_prompt_tokens: usize,
    pub(crate) max_processing: usize,
    pub(crate) probes: u64,
}

impl Runtime {
    pub(crate) fn new(config: &FakeConfig) -> Runtime {
        let slots = matches!(config.persona, Some(Persona::LlamaCpp | Persona::Ollama))
            .then(|| Arc::new(Semaphore::new(config.slots.max(1))));
        let lock = (config.persona == Some(Persona::LlamaCppPython)).then(|| PythonLock {
            held: Arc::new(AsyncMutex::new(())),
            waiting: AtomicUsize::new(0),
        });
        Runtime {
            slots,
            lock,
            processing: AtomicUsize::new(0),
            max_processing: AtomicUsize::new(0),
            interrupted: AtomicU64::new(0),
            context_refusals: AtomicU64::new(0),
            truncated: AtomicU64::new(0),
            max_prompt_tokens: AtomicUsize::new(0),
            probes: AtomicU64::new(0),
        }
    }

    pub(crate) fn counts(&self) -> Counts {
        Counts {
            interrupted: self.interrupted.load(Ordering::SeqCst),
            context_refusals: self.context_refusals.load(Ordering::SeqCst),
            truncated: self.truncated.load(Ordering::SeqCst),
            max_prompt_tokens: self.max_prompt_tokens.load(Ordering::SeqCst),
            max_processing: self.max_processing.load(Ordering::SeqCst),
            probes: self.probes.load(Ordering::SeqCst),
        }
    }
}

/// llama-cpp-python's two locks, reduced to what a client can see: one holder at a time, in arrival
/// order, and whether anyone is waiting (its "outer lock" is locked exactly then).
struct PythonLock {
    held: Arc<AsyncMutex<()>>,
    waiting: AtomicUsize,
}

/// Counts a request as waiting for the lock until it gets it or gives up (its client went away).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PythonLock {
    async fn acquire(&self) -> OwnedMutexGuard<()> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        self.held.clone().lock_owned().await
    }
}

/// What a chat request holds while it is processed: its place in `max_processing`, and its slot or
/// the lock. The count drops before the slot frees (fields drop in order), so the next request in the
/// queue is never counted alongside it.
struct Held {
    _processing: Processing,
    _slot: Slot,
}

enum Slot {
    Unlimited,
    Permit { _permit: OwnedSemaphorePermit },
    Lock { _guard: OwnedMutexGuard<()> },
}

struct Processing(Arc<Shared>);

impl Processing {
    fn enter(shared: &Arc<Shared>) -> Processing {
        let runtime = &shared.servers;
        let now = runtime.processing.fetch_add(1, Ordering::SeqCst) + 1;
        runtime.max_processing.fetch_max(now, Ordering::SeqCst);
        Processing(shared.clone())
    }
}

impl Drop for Processing {
    fn drop(&mut self) {
        self.0.servers.processing.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A chat request the server has taken on: what it holds until its reply ends, the prompt's size as
/// the usage reports it, and how long the reply may grow.
pub(crate) struct Admission {
    _held: Held,
    shared: Arc<Shared>,
    /// The prompt's tokens in `usage.prompt_tokens`.
    pub(crate) prompt_tokens: usize,
    /// Most completion pieces before the reply stops with `finish_reason: "length"` (max_tokens or
    /// the context's end); `None`: no limit.
    room: Option<usize>,
    /// llama-cpp-python: the stream gives way to a request waiting for the lock.
    interruptible: bool,
}

impl Admission {
    /// The reply's pieces cut to the room left, and the finish reason.
    pub(crate) fn complete(&self, mut tokens: Vec<String>) -> (Vec<String>, &'static str) {
        match self.room {
            Some(room) if tokens.len() > room => {
                tokens.truncate(room);
                (tokens, "length")
            }
            _ => (tokens, "stop"),
        }
    }

    /// Whether the stream ends here, after the chunk just sent, with `[DONE]` and no finish_reason:
    /// llama-cpp-python's event publisher does so when another request waits for the lock
    /// (`if settings.interrupt_requests and llama_outer_lock.locked(): await
    /// inner_send_chan.send(dict(data="[DONE]"))`). `events_left` counts the events still to send; a
    /// stream with only its `[DONE]` left ends as it would anyway.
    pub(crate) fn gives_way(&self, events_left: usize) -> bool {
        let waiting = self
            .shared
            .servers
            .lock
            .as_ref()
            .is_some_and(|lock| lock.waiting.load(Ordering::SeqCst) > 0);
        let gives_way = self.interruptible && events_left > 1 && waiting;
        if gives_way {
            self.shared.servers.interrupted.fetch_add(1, Ordering::SeqCst);
        }
        gives_way
    }
}

/// Notes a chat request's prompt size (before any truncation) in `max_prompt_tokens`.
pub(crate) fn note_prompt(shared: &Shared, request: &Value) {
    let tokens = request_prompt_tokens(request);
    shared.servers.max_prompt_tokens.fetch_max(tokens, Ordering::SeqCst);
}

/// Takes a chat request on as the persona would: waits for a slot or the lock (in arrival order),
/// then applies the persona's context rules — a refusal in the persona's words, or the room left for
/// the reply. Without a persona every request is taken on at once, with no limit.
pub(crate) async fn admit(shared: &Arc<Shared>, request: &Value) -> Result<Admission, Response> {
    let config = &shared.config;
    let Some(persona) = config.persona else {
        return Ok(Admission {
            _held: Held {
                _processing: Processing::enter(shared),
                _slot: Slot::Unlimited,
            },
            shared: shared.clone(),
            prompt_tokens: super::prompt_tokens(request),
            room: None,
            interruptible: false,
        });
    };
    let slot = match (&shared.servers.slots, &shared.servers.lock) {
        (Some(slots), _) => match slots.clone().acquire_owned().await {
            Ok(permit) => Slot::Permit { _permit: permit },
            Err(_) => return Err(plain(StatusCode::SERVICE_UNAVAILABLE, "the slots are closed")),
        },
        (None, Some(lock)) => Slot::Lock {
            _guard: lock.acquire().await,
        },
        (None, None) => Slot::Unlimited,
    };
    let held = Held {
        _processing: Processing::enter(shared),
        _slot: slot,
    };
    let (ctx, prompt) = (config.context, request_prompt_tokens(request));
    let max_tokens = request
        .get("max_completion_tokens")
        .or_else(|| request.get("max_tokens"))
        .and_then(Value::as_u64)
        .map(|m| usize::try_from(m).unwrap_or(usize::MAX));
    let left = ctx.saturating_sub(prompt);
    let fits = |room: usize| Some(max_tokens.map_or(room, |m| m.min(room)));
    let refused = |response: Response| {
        shared.servers.context_refusals.fetch_add(1, Ordering::SeqCst);
        response
    };
    let (prompt_tokens, room) = match persona {
        Persona::LlamaCpp if prompt >= ctx => return Err(refused(llama_cpp_refusal(prompt, ctx))),
        Persona::LlamaCppPython if prompt >= ctx => {
            let stream = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
            return Err(refused(python_refusal(request, stream, prompt, ctx, max_tokens)));
        }
        Persona::Vllm => match max_tokens {
            Some(m) if prompt.saturating_add(m) > ctx => return Err(refused(vllm_refusal(prompt, ctx, Some(m)))),
            None if prompt >= ctx => return Err(refused(vllm_refusal(prompt, ctx, None))),
            _ => (prompt, fits(left)),
        },
        Persona::LmStudio if prompt > ctx => return Err(refused(lm_studio_refusal(prompt, ctx))),
        Persona::Ollama if prompt > ctx => {
            shared.servers.truncated.fetch_add(1, Ordering::SeqCst);
            (ctx, max_tokens)
        }
        Persona::Ollama => (prompt, max_tokens),
        Persona::LlamaCpp | Persona::LlamaCppPython | Persona::LmStudio => (prompt, fits(left)),
    };
    Ok(Admission {
        _held: held,
        shared: shared.clone(),
        prompt_tokens,
        room,
        interruptible: persona == Persona::LlamaCppPython,
    })
}

/// llama-server refuses, once the request has its slot, a prompt its slot's context cannot hold
/// (`n_prompt_tokens >= n_ctx`): "request (P tokens) exceeds the available context size (C tokens),
/// try increasing it", type `exceed_context_size_error`. A prompt that fits but leaves too little
/// room for `max_tokens` is answered, and the reply stops when the context is full (`length`).
fn llama_cpp_refusal(prompt: usize, ctx: usize) -> Response {
    let message =
        format!("request ({prompt} tokens) exceeds the available context size ({ctx} tokens), try increasing it");
    let body = json!({"error": {"code": 400, "message": message, "type": "exceed_context_size_error",
                      "n_prompt_tokens": prompt, "n_ctx": ctx}});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// llama-cpp-python (0.3.36) takes `response_format` `text` or `json_object` only: a `json_schema`
/// fails its request validation, answered as a 500 whose message carries the frames of the
/// server's traceback after it (measured, word for word but the install path).
pub(crate) fn refuse_json_schema(config: &FakeConfig, request: &Value) -> Option<Response> {
    if config.persona != Some(Persona::LlamaCppPython)
        || request.pointer("/response_format/type") != Some(&json!("json_schema"))
    {
        return None;
    }
    let message = "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"/usr/lib/python3.11/site-packages/llama_cpp/server/app.py\", line 376, in create_chat_completion\n    POST /v1/chat/completions";
    let body = json!({"error": {"message": message, "type": "internal_server_error", "param": null, "code": null}});
    Some((StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response())
}

/// llama-cpp-python raises `ValueError: Requested tokens (P) exceed context window of C` when
/// `len(prompt_tokens) >= n_ctx`. Streamed, 0.3.36 answers 200 and ends the body at once, with no
/// event at all (measured: an empty body; the server prints the traceback). Not streamed, its
/// `RouteErrorHandler` answers 400 in OpenAI's words, as its `errors.py` words a chat completion:
/// "This model's maximum context length is C tokens. However, you requested T tokens (P in the
/// messages, M in the completion). Please reduce the length of the messages or completion.", where M
/// is the request's `max_tokens` (`None` when absent) and T is P + M.
fn python_refusal(_request: &Value, stream: bool, prompt: usize, ctx: usize, max_tokens: Option<usize>) -> Response {
    if stream {
        let _ = (prompt, ctx);
        return Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/event-stream; charset=utf-8")
            .body(Body::empty())
            .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "cannot build the response"));
    }
    let completion = max_tokens.map_or("None".to_string(), |m| m.to_string());
    let message = format!(
        "This model's maximum context length is {ctx} tokens. However, you requested {} tokens ({prompt} in the messages, {completion} in the completion). Please reduce the length of the messages or completion.",
        prompt + max_tokens.unwrap_or(0)
    );
    let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// vLLM validates before scheduling: with `max_tokens`, prompt + max_tokens over `max_model_len` is
/// refused with "This model's maximum context length is C tokens. However, you requested T tokens
/// (P in the messages, M in the completion). Please reduce the length of the messages or
/// completion."; without it, a prompt of `max_model_len` tokens or more with "This model's maximum
/// context length is C tokens. However, you requested P tokens in the messages, Please reduce the
/// length of the messages." — both as `{"object":"error",…,"type":"BadRequestError","code":400}`.
fn vllm_refusal(prompt: usize, ctx: usize, max_tokens: Option<usize>) -> Response {
    let message = match max_tokens {
        Some(m) => format!(
            "This model's maximum context length is {ctx} tokens. However, you requested {} tokens ({prompt} in the messages, {m} in the completion). Please reduce the length of the messages or completion.",
            prompt.saturating_add(m)
        ),
        None => format!(
            "This model's maximum context length is {ctx} tokens. However, you requested {prompt} tokens in the messages, Please reduce the length of the messages."
        ),
    };
    let body = json!({"object": "error", "message": message, "type": "BadRequestError", "param": null, "code": 400});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// LM Studio refuses a prompt longer than the loaded context: "Trying to keep the first P tokens when
/// context the overflows. However, the model is loaded with context length of only C tokens, which is
/// not enough. Try to load the model with a larger context length, or provide a shorter input" (its
/// wording, "context the overflows" included).
fn lm_studio_refusal(prompt: usize, ctx: usize) -> Response {
    let message = format!(
        "Trying to keep the first {prompt} tokens when context the overflows. However, the model is loaded with context length of only {ctx} tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"
    );
    (StatusCode::BAD_REQUEST, axum::Json(json!({"error": message}))).into_response()
}

/// What a llama-cpp-python server in trouble answers on every route: 500 and the traceback as text.
pub const TRACEBACK: &str = "Traceback (most recent call last):\n  File \"/usr/lib/python3.11/site-packages/uvicorn/protocols/http/httptools_impl.py\", line 409, in run_asgi\n    result = await app(  # type: ignore[func-returns-value]\n  File \"/usr/lib/python3.11/site-packages/llama_cpp/server/app.py\", line 412, in create_chat_completion\n    raise RuntimeError(\"llama_decode returned -3\")\nRuntimeError: llama_decode returned -3\n";

fn plain(status: StatusCode, text: &'static str) -> Response {
    (status, [("content-type", "text/plain; charset=utf-8")], text).into_response()
}

async fn traceback() -> Response {
    plain(StatusCode::INTERNAL_SERVER_ERROR, TRACEBACK)
}

/// With `fail_all`, a chat request is still counted and logged before it fails.
async fn failing_chat(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let _in_flight = InFlight::enter(&shared);
    let total = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
    shared.count.send_replace(total);
    if let Ok(request) = serde_json::from_slice::<Value>(&body) {
        note_prompt(&shared, &request);
        log_request(&shared, &request, 0, None, false);
    }
    traceback().await
}

/// The router of a persona (or of `fail_all`), or `None` for the plain fake. Every request but a chat
/// completion (and the instrument's own `/v1/_stats`) counts as a probe, answered or not.
pub(crate) fn router(shared: &Arc<Shared>) -> Option<Router> {
    let config = &shared.config;
    let app = if config.fail_all {
        Router::new()
            .route("/v1/chat/completions", post(failing_chat))
            .fallback(traceback)
    } else {
        let routes = match config.persona? {
            Persona::LlamaCpp => Router::new()
                .route("/props", get(props))
                .route("/slots", get(slots))
                .route("/tokenize", post(llama_cpp_tokenize))
                .route("/health", get(|| async { axum::Json(json!({"status": "ok"})) })),
            Persona::LlamaCppPython => Router::new()
                .route("/extras/tokenize", post(python_tokenize))
                .route("/extras/tokenize/count", post(python_tokenize_count)),
            Persona::Vllm => Router::new().route("/tokenize", post(vllm_tokenize)),
            Persona::Ollama => Router::new().route("/api/show", post(ollama_show)).route(
                "/api/version",
                get(|| async { axum::Json(json!({"version": "0.9.0"})) }),
            ),
            Persona::LmStudio => Router::new()
                .route("/api/v0/models", get(lm_studio_models))
                .route("/api/v0/models/{*id}", get(lm_studio_model)),
        };
        routes
            .route("/v1/models", get(models))
            .route("/v1/chat/completions", post(super::chat))
            .route("/v1/_stats", get(super::stats))
            .fallback(not_found)
    };
    let app = app.layer(axum::middleware::from_fn_with_state(shared.clone(), count_probe));
    Some(app.with_state(shared.clone()))
}

async fn count_probe(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if !matches!(request.uri().path(), "/v1/chat/completions" | "/v1/_stats") {
        shared.servers.probes.fetch_add(1, Ordering::SeqCst);
    }
    next.run(request).await
}

/// An unknown route: FastAPI's `{"detail":"Not Found"}` (llama-cpp-python, vLLM), else plain text.
async fn not_found(State(shared): State<Arc<Shared>>) -> Response {
    if shared.config.persona.is_some_and(Persona::fastapi) {
        (StatusCode::NOT_FOUND, axum::Json(json!({"detail": "Not Found"}))).into_response()
    } else {
        plain(StatusCode::NOT_FOUND, "Not Found")
    }
}

fn json_of(body: &Bytes) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// `GET /v1/models` as each server lists its model (llama-cpp-python's takes the lock, as every route
/// of its that `Depends(get_llama_proxy)` does).
async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let (config, model) = (&shared.config, shared.config.model.as_str());
    let entry = match config.persona {
        Some(Persona::LlamaCpp) => {
            json!({"id": model, "object": "model", "owned_by": "llamacpp", "meta": {"n_ctx_train": 8192}})
        }
        Some(Persona::LlamaCppPython) => {
            let _lock = python_lock(&shared).await;
            json!({"id": model, "object": "model", "owned_by": "me", "permissions": []})
        }
        Some(Persona::Vllm) => json!({"id": model, "object": "model", "created": 1_700_000_000, "owned_by": "vllm",
                                      "root": model, "parent": null, "max_model_len": config.context, "permission": []}),
        Some(Persona::Ollama) => {
            json!({"id": model, "object": "model", "created": 1_700_000_000, "owned_by": "library"})
        }
        Some(Persona::LmStudio) => json!({"id": model, "object": "model", "owned_by": "organization_owner"}),
        None => json!({"id": model, "object": "model"}),
    };
    axum::Json(json!({"object": "list", "data": [entry]})).into_response()
}

async fn python_lock(shared: &Shared) -> Option<OwnedMutexGuard<()>> {
    match &shared.servers.lock {
        Some(lock) => Some(lock.acquire().await),
        None => None,
    }
}

/// llama-server's `/props`; `n_ctx` is each slot's context, as llama-server reports it.
async fn props(State(shared): State<Arc<Shared>>) -> Response {
    let config = &shared.config;
    axum::Json(json!({
        "default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": config.context, "speculative": false,
            "is_processing": false, "params": {"n_predict": -1, "temperature": 0.8, "top_p": 0.95}},
        "total_slots": config.slots.max(1),
        "model_path": format!("models/{}.gguf", config.model),
        "chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
        "modalities": {"vision": false, "audio": false},
        "build_info": "b5600-fake",
    }))
    .into_response()
}

/// llama-server's `/slots`: the first slots are busy, as many as requests are being processed.
async fn slots(State(shared): State<Arc<Shared>>) -> Response {
    let busy = shared.servers.processing.load(Ordering::SeqCst);
    let slots: Vec<Value> = (0..shared.config.slots.max(1))
        .map(|i| json!({"id": i, "n_ctx": shared.config.context, "is_processing": i < busy}))
        .collect();
    axum::Json(Value::Array(slots)).into_response()
}

/// llama-server's `POST /tokenize` `{"content": "…"}`.
async fn llama_cpp_tokenize(body: Bytes) -> Response {
    let content = json_of(&body)["content"].as_str().map(count_tokens).unwrap_or(0);
    axum::Json(json!({"tokens": token_ids(content)})).into_response()
}

/// FastAPI's 422 for a body without its `input`.
fn missing_input() -> Response {
    let body = json!({"detail": [{"type": "missing", "loc": ["body", "input"], "msg": "Field required"}]});
    (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(body)).into_response()
}

/// llama-cpp-python's `POST /extras/tokenize` `{"input": "…"}`; it takes the lock.
async fn python_tokenize(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let Some(input) = json_of(&body)["input"].as_str().map(count_tokens) else {
        return missing_input();
    };
    let _lock = python_lock(&shared).await;
    axum::Json(json!({"tokens": token_ids(input)})).into_response()
}

/// llama-cpp-python's `POST /extras/tokenize/count` `{"input": "…"}`; it takes the lock.
async fn python_tokenize_count(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let Some(input) = json_of(&body)["input"].as_str().map(count_tokens) else {
        return missing_input();
    };
    let _lock = python_lock(&shared).await;
    axum::Json(json!({"count": input})).into_response()
}

/// vLLM's `POST /tokenize`: `{"model", "messages"}` counts the chat prompt as the server will,
/// `{"model", "prompt"}` counts the text.
async fn vllm_tokenize(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let request = json_of(&body);
    let count = match (&request["messages"], &request["prompt"]) {
        (Value::Array(messages), _) => chat_prompt_tokens(messages),
        (_, Value::String(prompt)) => count_tokens(prompt),
        _ => {
            let body = json!({"object": "error", "message": "Either `messages` or `prompt` is required.",
                              "type": "BadRequestError", "param": null, "code": 400});
            return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        }
    };
    axum::Json(json!({"count": count, "max_model_len": shared.config.context, "tokens": token_ids(count)}))
        .into_response()
}

/// Ollama's `POST /api/show` `{"model": …}` (or `{"name": …}`): the model's `num_ctx` when its
/// Modelfile sets one (`ollama_modelfile_ctx`); without it the server's default context applies.
async fn ollama_show(State(shared): State<Arc<Shared>>) -> Response {
    let config = &shared.config;
    // Ollama writes each parameter as `%-30s %s`.
    let mut parameters = Vec::new();
    if config.ollama_modelfile_ctx {
        parameters.push(format!("{:<30} {}", "num_ctx", config.context));
    }
    parameters.push(format!("{:<30} {}", "stop", "\"<|im_end|>\""));
    axum::Json(json!({
        "modelfile": "# Modelfile generated by \"ollama show\"\nFROM /root/.ollama/models/blobs/sha256-fake\n",
        "parameters": parameters.join("\n"),
        "template": "{{ .Prompt }}",
        "details": {"format": "gguf", "family": "qwen2", "parameter_size": "494.03M", "quantization_level": "Q4_K_M"},
        "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
        "capabilities": ["completion"],
    }))
    .into_response()
}

fn lm_studio_entry(config: &FakeConfig) -> Value {
    json!({"id": config.model, "object": "model", "type": "llm", "publisher": "lmstudio-community", "arch": "qwen2",
           "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "loaded", "max_context_length": 32768,
           "loaded_context_length": config.context})
}

/// LM Studio's `GET /api/v0/models`: its `loaded_context_length` is the context in use.
async fn lm_studio_models(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(json!({"object": "list", "data": [lm_studio_entry(&shared.config)]})).into_response()
}

/// LM Studio's `GET /api/v0/models/{id}`.
async fn lm_studio_model(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    if id == shared.config.model {
        axum::Json(lm_studio_entry(&shared.config)).into_response()
    } else {
        (StatusCode::NOT_FOUND, axum::Json(json!({"error": "Model not found"}))).into_response()
    }
}

#[cfg(test)]
mod tests;
