//! The OpenAI Batch API in the fake server: JSONL files uploaded (`POST /v1/files`) and read back
//! (`GET /v1/files/{id}/content`), batches over them (`POST /v1/batches`, `GET /v1/batches/{id}`,
//! `GET /v1/batches`). A batch moves one status per poll of it — `validating`, then `in_progress` (or
//! `failed` with the bad lines), then `completed` with an output file and, when lines failed, an error file —
//! never by the wall clock, so a test sees every status. Each line is answered exactly as the streaming
//! `/v1/chat/completions` path answers the same request (reply, usage, refusals, injected faults), and
//! [`batch_output_for`] answers a batch file without a server, as `vllm run-batch` does.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{FakeConfig, Fault, Shared, digest, error_body, refused, reply_for, split_tokens, unit};

/// The only endpoint a batch may target here.
const ENDPOINT: &str = "/v1/chat/completions";

/// The order a batch's results come back in. OpenAI promises none (a client matches them by
/// `custom_id`), so the default, `Reverse`, catches a client that trusts the input order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BatchOrder {
    Forward,
    #[default]
    Reverse,
}

/// One refused line of a batch file, as OpenAI lists it in a failed batch's `errors.data`; `line`
/// counts from 1, and is `None` for the file as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub code: &'static str,
    pub message: String,
    pub line: Option<usize>,
}

/// Why a batch file cannot run: every bad line, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBatch(pub Vec<LineError>);

impl fmt::Display for InvalidBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            match error.line {
                Some(line) => write!(f, "line {line}: {} ({})", error.message, error.code)?,
                None => write!(f, "{} ({})", error.message, error.code)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for InvalidBatch {}

/// The results of every request in `input_jsonl` (a batch input file), one JSON line each in
/// `config.batch_order`, failed ones included, as `vllm run-batch` writes them; the server splits the same
/// lines into its output and error files. Each request is a first attempt.
pub fn batch_output_for(config: &FakeConfig, input_jsonl: &str) -> Result<String, InvalidBatch> {
    let lines = parse(input_jsonl)?;
    let answered = answer_all(config, &lines, &mut HashMap::new());
    Ok(jsonl(answered.iter().map(|a| &a.line)))
}

/// A valid line of a batch input file.
struct BatchLine {
    custom_id: String,
    body: Map<String, Value>,
}

/// The requests of a batch input file, or every reason it cannot run.
fn parse(input: &str) -> Result<Vec<BatchLine>, InvalidBatch> {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    let mut ids = HashSet::new();
    for (index, text) in input.lines().enumerate() {
        if text.trim().is_empty() {
            continue;
        }
        match parse_line(text, &mut ids) {
            Ok(line) => lines.push(line),
            Err((code, message)) => errors.push(LineError {
                code,
                message,
                line: Some(index + 1),
            }),
        }
    }
    if lines.is_empty() && errors.is_empty() {
        errors.push(LineError {
            code: "empty_file",
            message: "The batch input file is empty.".into(),
            line: None,
        });
    }
    if errors.is_empty() {
        Ok(lines)
    } else {
        Err(InvalidBatch(errors))
    }
}

/// One line checked as OpenAI checks it; `ids` holds the custom_ids of the lines before.
fn parse_line(text: &str, ids: &mut HashSet<String>) -> Result<BatchLine, (&'static str, String)> {
    let Ok(Value::Object(mut line)) = serde_json::from_str::<Value>(text) else {
        return Err((
            "invalid_json_line",
            "This line is not parseable as a JSON object.".into(),
        ));
    };
    let Some(custom_id) = line.get("custom_id").and_then(Value::as_str).map(str::to_string) else {
        return Err(("missing_custom_id", "Each request needs a string custom_id.".into()));
    };
    if line.get("method").and_then(Value::as_str) != Some("POST") {
        return Err(("invalid_method", "The method must be POST.".into()));
    }
    if line.get("url").and_then(Value::as_str) != Some(ENDPOINT) {
        return Err((
            "invalid_url",
            format!("The url must be the batch's endpoint, {ENDPOINT}."),
        ));
    }
    let Some(Value::Object(body)) = line.remove("body") else {
        return Err(("invalid_body", "The body must be a JSON object.".into()));
    };
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err((
            "invalid_body",
            "Streaming is not supported in a batch (\"stream\": true).".into(),
        ));
    }
    if !ids.insert(custom_id.clone()) {
        return Err((
            "duplicate_custom_id",
            format!("The custom_id {custom_id:?} is a duplicate; each must be unique in the file."),
        ));
    }
    Ok(BatchLine { custom_id, body })
}

/// The streaming request the project's client sends for a batch line's `body` (which is that request
/// without `stream` and `stream_options`): `model`, then `"stream": true` and
/// `"stream_options": {"include_usage": true}`, then the other keys in their order. Its digest picks the
/// reply, so the line gets its streaming twin's answer.
fn streaming_twin(body: &Map<String, Value>) -> Value {
    let mut twin = Map::new();
    if let Some(model) = body.get("model") {
        twin.insert("model".into(), model.clone());
    }
    twin.insert("stream".into(), json!(true));
    twin.insert("stream_options".into(), json!({"include_usage": true}));
    for (key, value) in body {
        if !matches!(key.as_str(), "model" | "stream" | "stream_options") {
            twin.insert(key.clone(), value.clone());
        }
    }
    Value::Object(twin)
}

/// One answered line: its result line, whether it failed (it then goes to the error file), and whether
/// an injected fault failed it (`Stats::faults` counts those).
struct Answered {
    line: Value,
    failed: bool,
    fault: bool,
}

/// Answers `lines` in file order (attempts count in that order) and returns them in
/// `config.batch_order`.
fn answer_all(config: &FakeConfig, lines: &[BatchLine], attempts: &mut HashMap<String, u32>) -> Vec<Answered> {
    let mut answered: Vec<Answered> = lines.iter().map(|line| answer(config, line, attempts)).collect();
    if config.batch_order == BatchOrder::Reverse {
        answered.reverse();
    }
    answered
}

/// What `/v1/chat/completions` answers the line's streaming twin, as a batch result line. The checks come
/// in `chat`'s order; the attempt counts whatever the answer.
fn answer(config: &FakeConfig, line: &BatchLine, attempts: &mut HashMap<String, u32>) -> Answered {
    let request = streaming_twin(&line.body);
    let content_key = digest(&request.to_string());
    let attempt = {
        let n = attempts.entry(content_key.clone()).or_insert(0);
        *n += 1;
        *n - 1
    };
    let mut fault = false;
    let (status, body) =
        if config.reject_json_schema && request.pointer("/response_format/type") == Some(&json!("json_schema")) {
            (
                StatusCode::BAD_REQUEST,
                error_body("response_format.type: Input should be 'text' or 'json_object'"),
            )
        } else if let Some(refusal) = refused(config, &request) {
            refusal
        } else if let Some(injected) = injected_fault(config, &content_key, attempt) {
            fault = true;
            match injected.replied() {
                Some(text) => (
                    StatusCode::OK,
                    completion_of(config, &request, &content_key, text.into()),
                ),
                None => fault_reply(injected),
            }
        } else {
            (StatusCode::OK, completion(config, &request, &content_key))
        };
    // Unique per request actually made: a retry of the same content is another attempt.
    let name = format!("{}_{attempt}", &content_key[..12]);
    Answered {
        line: json!({
            "id": format!("batch_req_{name}"),
            "custom_id": line.custom_id,
            "response": {"status_code": status.as_u16(), "request_id": format!("req_{name}"), "body": body},
            "error": null,
        }),
        failed: status != StatusCode::OK,
        fault,
    }
}

/// The fault `chat` injects into this attempt of the request with `content_key`, if any (the same draw).
fn injected_fault(config: &FakeConfig, content_key: &str, attempt: u32) -> Option<Fault> {
    (!config.faults.is_empty()
        && attempt < config.faults_per_request
        && unit(content_key, config.seed) < config.fault_share)
        .then(|| {
            config.faults
                [(attempt as usize + (unit(content_key, config.seed + 1) * 1000.0) as usize) % config.faults.len()]
        })
}

/// A faulty line's status and error body, worded as `chat` words them.
fn fault_reply(fault: Fault) -> (StatusCode, Value) {
    let (status, message) = match fault {
        Fault::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "Rate limit reached (injected)."),
        Fault::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "injected: overloaded"),
        Fault::BadRequest => (StatusCode::BAD_REQUEST, "injected: invalid request"),
        // A batch line has no stream to drop, cut or stall: those faults fail it as a server error.
        // Empty replies are answered as completions (`answer`); these are the faults that fail a line.
        Fault::ServerError
        | Fault::Drop
        | Fault::Cut
        | Fault::InStreamError
        | Fault::Stall
        | Fault::Empty
        | Fault::Blank
        | Fault::Prose => (StatusCode::INTERNAL_SERVER_ERROR, "injected server error"),
    };
    (status, error_body(message))
}

/// The `chat.completion` object `chat` answers a non-streaming request with, usage counted as the
/// streaming path counts it.
fn completion(config: &FakeConfig, request: &Value, content_key: &str) -> Value {
    completion_of(config, request, content_key, reply_for(config, request, content_key))
}

/// [`completion`] with the reply's text given.
fn completion_of(config: &FakeConfig, request: &Value, content_key: &str, reply: String) -> Value {
    let completion_tokens = split_tokens(&reply).len();
    let prompt_tokens = super::prompt_tokens(request);
    json!({
        "id": format!("chatcmpl-fake-{}", &content_key[..12]),
        "object": "chat.completion",
        "model": request["model"].as_str().unwrap_or(&config.model),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    })
}

fn jsonl<'a>(lines: impl Iterator<Item = &'a Value>) -> String {
    lines.map(|line| format!("{line}\n")).collect()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The Batch API's counts for `Stats`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Counts {
    pub(crate) batches: u64,
    pub(crate) batch_lines: u64,
    pub(crate) files: u64,
}

/// The server's files and batches.
#[derive(Default)]
pub(crate) struct Store(Mutex<Batches>);

impl Store {
    pub(crate) fn counts(&self) -> Counts {
        self.lock().counts
    }

    fn lock(&self) -> MutexGuard<'_, Batches> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Default)]
struct Batches {
    files: Vec<StoredFile>,
    /// Oldest first.
    batches: Vec<Batch>,
    counts: Counts,
}

struct StoredFile {
    id: String,
    filename: String,
    /// `batch` for an upload; `batch_output` for the output and error files the server writes.
    purpose: &'static str,
    bytes: Bytes,
    created_at: u64,
}

impl StoredFile {
    fn object(&self) -> Value {
        json!({
            "id": self.id, "object": "file", "bytes": self.bytes.len(), "created_at": self.created_at,
            "filename": self.filename, "purpose": self.purpose,
        })
    }
}

#[derive(Clone, Copy)]
enum Status {
    Validating,
    Failed,
    InProgress,
    Completed,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Validating => "validating",
            Status::Failed => "failed",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
        }
    }
}

struct Batch {
    id: String,
    input_file_id: String,
    metadata: Value,
    created_at: u64,
    status: Status,
    /// The file's requests, checked when the batch was created; shown once it has `failed`.
    lines: Result<Vec<BatchLine>, InvalidBatch>,
    in_progress_at: Option<u64>,
    completed_at: Option<u64>,
    failed_at: Option<u64>,
    output_file_id: Option<String>,
    error_file_id: Option<String>,
    /// Total, completed, failed.
    request_counts: (usize, usize, usize),
}

impl Batch {
    fn object(&self) -> Value {
        let errors = match (&self.lines, self.status) {
            (Err(invalid), Status::Failed) => {
                let data: Vec<Value> = invalid
                    .0
                    .iter()
                    .map(|e| json!({"code": e.code, "message": e.message, "param": null, "line": e.line}))
                    .collect();
                json!({"object": "list", "data": data})
            }
            _ => Value::Null,
        };
        let (total, completed, failed) = self.request_counts;
        json!({
            "id": self.id, "object": "batch", "endpoint": ENDPOINT, "errors": errors,
            "input_file_id": self.input_file_id, "completion_window": "24h", "status": self.status.name(),
            "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
            "created_at": self.created_at, "in_progress_at": self.in_progress_at,
            "expires_at": self.created_at + 24 * 3600, "completed_at": self.completed_at, "failed_at": self.failed_at,
            "request_counts": {"total": total, "completed": completed, "failed": failed},
            "metadata": self.metadata,
        })
    }
}

impl Batches {
    fn add_file(&mut self, filename: String, purpose: &'static str, bytes: Bytes) -> &StoredFile {
        let file = StoredFile {
            id: format!("file-fake-{}", self.files.len() + 1),
            filename,
            purpose,
            bytes,
            created_at: unix_now(),
        };
        self.files.push(file);
        &self.files[self.files.len() - 1]
    }

    /// One step of the batch at `index`, the next status: validation's verdict, or every line answered.
    fn advance(&mut self, index: usize, shared: &Shared) {
        let now = Some(unix_now());
        let batch = &mut self.batches[index];
        match (batch.status, &batch.lines) {
            (Status::Validating, Err(_)) => {
                batch.status = Status::Failed;
                batch.failed_at = now;
            }
            (Status::Validating, Ok(lines)) => {
                batch.status = Status::InProgress;
                batch.in_progress_at = now;
                batch.request_counts = (lines.len(), 0, 0);
            }
            (Status::InProgress, Ok(lines)) => {
                let answered = {
                    let mut attempts = shared.attempts.lock().unwrap_or_else(|p| p.into_inner());
                    answer_all(&shared.config, lines, &mut attempts)
                };
                let faults = answered.iter().filter(|a| a.fault).count() as u64;
                shared.faults.fetch_add(faults, std::sync::atomic::Ordering::SeqCst);
                let (failed, done): (Vec<Answered>, Vec<Answered>) = answered.into_iter().partition(|a| a.failed);
                batch.status = Status::Completed;
                batch.completed_at = now;
                batch.request_counts = (failed.len() + done.len(), done.len(), failed.len());
                let id = batch.id.clone();
                self.counts.batch_lines += (failed.len() + done.len()) as u64;
                let output = jsonl(done.iter().map(|a| &a.line));
                let output_id = self
                    .add_file(format!("{id}_output.jsonl"), "batch_output", output.into())
                    .id
                    .clone();
                let error_id = (!failed.is_empty()).then(|| {
                    let errors = jsonl(failed.iter().map(|a| &a.line));
                    self.add_file(format!("{id}_error.jsonl"), "batch_output", errors.into())
                        .id
                        .clone()
                });
                let batch = &mut self.batches[index];
                batch.output_file_id = Some(output_id);
                batch.error_file_id = error_id;
            }
            _ => {}
        }
    }
}

/// The Batch API's routes, merged into the server's router.
pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/v1/files", post(upload))
        .route("/v1/files/{id}/content", get(content))
        .route("/v1/batches", post(create).get(list))
        .route("/v1/batches/{id}", get(poll))
        // OpenAI takes batch files up to 200 MB; axum's default limit is 2 MB.
        .layer(DefaultBodyLimit::max(200 << 20))
}

fn reply(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// An OpenAI-style `invalid_request_error`.
fn invalid(status: StatusCode, message: &str, param: Option<&str>) -> Response {
    reply(
        status,
        json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": null}}),
    )
}

/// The 401 `chat` gives without the configured key, on the Batch API's endpoints too.
fn unauthorized(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let key = shared.config.require_key.as_ref()?;
    let given = headers.get("authorization").and_then(|v| v.to_str().ok());
    (given != Some(format!("Bearer {key}").as_str()))
        .then(|| reply(StatusCode::UNAUTHORIZED, error_body("Incorrect API key provided.")))
}

async fn upload(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    if let Some(refusal) = unauthorized(&shared, &headers) {
        return refusal;
    }
    let mut multipart = match multipart {
        Ok(m) => m,
        Err(e) => {
            return invalid(
                StatusCode::BAD_REQUEST,
                &format!("expected multipart/form-data: {e}"),
                None,
            );
        }
    };
    let (mut purpose, mut file) = (None, None);
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => return invalid(StatusCode::BAD_REQUEST, &format!("unreadable form: {e}"), None),
        };
        match field.name() {
            Some("purpose") => purpose = field.text().await.ok(),
            Some("file") => {
                let filename = field.file_name().unwrap_or("upload.jsonl").to_string();
                match field.bytes().await {
                    Ok(bytes) => file = Some((filename, bytes)),
                    Err(e) => return invalid(StatusCode::BAD_REQUEST, &format!("unreadable file: {e}"), Some("file")),
                }
            }
            _ => {}
        }
    }
    if purpose.as_deref() != Some("batch") {
        return invalid(
            StatusCode::BAD_REQUEST,
            "This server takes files with purpose 'batch' only.",
            Some("purpose"),
        );
    }
    let Some((filename, bytes)) = file else {
        return invalid(StatusCode::BAD_REQUEST, "The form has no 'file' field.", Some("file"));
    };
    let mut store = shared.batch.lock();
    store.counts.files += 1;
    let object = store.add_file(filename, "batch", bytes).object();
    reply(StatusCode::OK, object)
}

async fn content(State(shared): State<Arc<Shared>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(refusal) = unauthorized(&shared, &headers) {
        return refusal;
    }
    let store = shared.batch.lock();
    match store.files.iter().find(|f| f.id == id) {
        Some(file) => ([("content-type", "application/octet-stream")], file.bytes.clone()).into_response(),
        None => invalid(StatusCode::NOT_FOUND, &format!("No such File object: {id}"), Some("id")),
    }
}

async fn create(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refusal) = unauthorized(&shared, &headers) {
        return refusal;
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return invalid(StatusCode::BAD_REQUEST, "The body is not JSON.", None);
    };
    let text = |key: &str| request.get(key).and_then(Value::as_str);
    if text("endpoint") != Some(ENDPOINT) {
        return invalid(
            StatusCode::BAD_REQUEST,
            &format!("This server batches {ENDPOINT} only."),
            Some("endpoint"),
        );
    }
    if text("completion_window") != Some("24h") {
        return invalid(
            StatusCode::BAD_REQUEST,
            "The completion_window must be '24h'.",
            Some("completion_window"),
        );
    }
    let mut store = shared.batch.lock();
    let Some(file) =
        text("input_file_id").and_then(|id| store.files.iter().find(|f| f.id == id && f.purpose == "batch"))
    else {
        return invalid(
            StatusCode::BAD_REQUEST,
            "The input_file_id names no uploaded batch file.",
            Some("input_file_id"),
        );
    };
    let lines = match std::str::from_utf8(&file.bytes) {
        _ if shared.config.fail_batches => Err(InvalidBatch(vec![LineError {
            code: "token_limit_exceeded",
            message: "Enqueued token limit reached for this organization.".into(),
            line: None,
        }])),
        Ok(text) => parse(text),
        Err(_) => Err(InvalidBatch(vec![LineError {
            code: "invalid_file",
            message: "The file is not UTF-8 text.".into(),
            line: None,
        }])),
    };
    let batch = Batch {
        id: format!("batch_fake_{}", store.batches.len() + 1),
        input_file_id: file.id.clone(),
        metadata: request.get("metadata").cloned().unwrap_or(Value::Null),
        created_at: unix_now(),
        status: Status::Validating,
        lines,
        in_progress_at: None,
        completed_at: None,
        failed_at: None,
        output_file_id: None,
        error_file_id: None,
        request_counts: (0, 0, 0),
    };
    let object = batch.object();
    store.batches.push(batch);
    store.counts.batches += 1;
    reply(StatusCode::OK, object)
}

/// The batch, one status further on than the last time it was asked for.
async fn poll(State(shared): State<Arc<Shared>>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(refusal) = unauthorized(&shared, &headers) {
        return refusal;
    }
    let mut store = shared.batch.lock();
    let Some(index) = store.batches.iter().position(|b| b.id == id) else {
        return invalid(
            StatusCode::NOT_FOUND,
            &format!("No such Batch object: {id}"),
            Some("id"),
        );
    };
    store.advance(index, &shared);
    reply(StatusCode::OK, store.batches[index].object())
}

/// Every batch, newest first (a client that crashed finds its batch by `input_file_id`); listing does
/// not move them on.
async fn list(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = unauthorized(&shared, &headers) {
        return refusal;
    }
    let store = shared.batch.lock();
    let data: Vec<Value> = store.batches.iter().rev().map(Batch::object).collect();
    reply(
        StatusCode::OK,
        json!({
            "object": "list",
            "first_id": data.first().map(|b| b["id"].clone()),
            "last_id": data.last().map(|b| b["id"].clone()),
            "data": data,
            "has_more": false,
        }),
    )
}

#[cfg(test)]
mod tests;
