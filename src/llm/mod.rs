//! Everything that talks to a model. One trait, `ChatModel`, streams `ChatEvent`s for a `ChatRequest`;
//! `Client` implements it for any `Transport` (one HTTP attempt against an OpenAI-compatible server, the
//! embedded model, a replay) and adds the policy (concurrency, timeouts, retries), the response cache and
//! the accounting around it.

pub mod accounting;
pub mod adapt;
pub mod batch;
pub mod cache;
pub mod client;
pub mod coalesce;
#[cfg(feature = "local-model")]
pub mod local;
pub mod openai;
pub mod pace;
pub mod policy;
pub mod server;

use std::fmt;
use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

/// Defined with the config, which names the roles; requests carry them.
pub use crate::config::Role;
pub use client::Client;

use crate::config;
use crate::fault::{Classify, Fault};

/// Who is speaking in a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    System,
    User,
    Assistant,
}

impl Speaker {
    /// The role's name, as chat APIs write it.
    pub fn name(self) -> &'static str {
        match self {
            Speaker::System => "system",
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Speaker,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Speaker::System,
            content: content.into(),
        }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Speaker::User,
            content: content.into(),
        }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Speaker::Assistant,
            content: content.into(),
        }
    }
}

/// Sampling parameters; `None` leaves the server's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The cap goes out as `max_completion_tokens` (reasoning models refuse `max_tokens`); absent from
    /// the cache key when false, so keys made before it existed stay valid.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub max_completion_tokens: bool,
    /// A schema goes as `response_format: {"type": "json_object"}` and is described in the prompt
    /// (a server that refuses `json_schema`); absent from the cache key when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json_object: bool,
    /// Ask for each token's most likely rivals with their log-probabilities (`logprobs` and
    /// `top_logprobs` on the wire); they arrive as [`ChatEvent::Choices`]. Absent from the cache key
    /// when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u8>,
}

/// One token of a reply and the tokens that could have come in its place, with their natural-log
/// probabilities (OpenAI's `logprobs.content[]`; the embedded model's among what the schema allowed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenChoice {
    /// Where the token's bytes begin in the reply's text.
    pub offset: usize,
    pub token: String,
    /// The most likely tokens and their log-probabilities, most likely first.
    pub top: Vec<(String, f32)>,
}

/// A JSON Schema the reply must follow (OpenAI structured outputs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseSchema {
    pub name: String,
    pub schema: serde_json::Value,
    pub strict: bool,
    /// How the schema is described in the prompt where it cannot go as `response_format` (a server
    /// without structured outputs, the embedded model): a prompt set's `schema_instruction`, rendered.
    /// `None`: the bundled one (a request's cache key stays what it was before the template existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
}

impl ResponseSchema {
    /// A strict schema, described by the bundled instruction.
    pub fn new(name: impl Into<String>, schema: serde_json::Value) -> ResponseSchema {
        ResponseSchema {
            name: name.into(),
            schema,
            strict: true,
            instruction: None,
        }
    }

    /// The text that describes the schema in the prompt.
    pub fn instruction(&self) -> String {
        self.instruction.clone().unwrap_or_else(|| schema_instruction(&self.schema))
    }
}

/// `messages` with `schema` described at the end of the system message (one is put first if there is
/// none), as a model reads them when the schema cannot go as `response_format`.
pub fn described(messages: &[ChatMessage], schema: &ResponseSchema) -> Vec<ChatMessage> {
    let instruction = schema.instruction();
    let mut out = messages.to_vec();
    match out.iter_mut().find(|m| m.role == Speaker::System) {
        Some(system) => system.content = format!("{}\n\n{instruction}", system.content),
        None => out.insert(0, ChatMessage::system(instruction)),
    }
    out
}

/// Bookkeeping that travels with a request but never goes on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestMeta {
    pub role: Role,
    /// Repeat index of the run; part of the cache key so repeats are independent samples.
    pub repeat: u32,
    /// What the request is for, e.g. "interview BFI 12".
    pub purpose: String,
}

impl Default for RequestMeta {
    fn default() -> Self {
        Self {
            role: Role::Rpa,
            repeat: 0,
            purpose: String::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub sampling: Sampling,
    pub schema: Option<ResponseSchema>,
    pub meta: RequestMeta,
}

impl ChatRequest {
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            sampling: Sampling::default(),
            schema: None,
            meta: RequestMeta::default(),
        }
    }
}

/// The most tokens one reply may count: more than any context holds. A count above it (a results
/// file edited by hand, a server's bug) is no usage, and the reply's tokens are estimated instead.
pub const MOST_TOKENS: u64 = 1 << 30;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One thing that happened while a reply was produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatEvent {
    /// A piece of the reply's text.
    Token(String),
    /// The attempt failed and will be retried; the `discarded_chars` already streamed must be dropped.
    Retry {
        attempt: u32,
        reason: String,
        discarded_chars: usize,
        delay_ms: u64,
    },
    Usage(Usage),
    /// The reply's tokens with their likeliest rivals, when the request asked for `top_logprobs`
    /// (sent once, before `Done`).
    Choices(Vec<TokenChoice>),
    /// The reply is complete. `cached` when it was replayed from the response cache.
    Done {
        finish_reason: Option<String>,
        cached: bool,
    },
    /// The request failed for good (after the allowed retries, or at once for errors that retrying cannot fix).
    Error(LlmError),
}

pub type EventStream = Pin<Box<dyn Stream<Item = ChatEvent> + Send>>;

/// Why a request failed for good.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("{0}")]
    Config(String),
    #[error("{}", unauthorized(env, base_url, *status, message))]
    Unauthorized {
        /// Where the key sent came from (`MY_KEY`, the config file's `api_key`); empty: none was.
        env: String,
        base_url: String,
        status: u16,
        message: String,
    },
    #[error("{base_url} answered HTTP {status}: {message}")]
    Http {
        base_url: String,
        status: u16,
        message: String,
    },
    #[error("{0}")]
    Transport(String),
    /// `attempts` counts every request sent, `throttled` those of them refused for the rate limit
    /// (waited out on their own budget, beside `max_retries`).
    #[error(
        "gave up after {attempts} attempt{}{}: {last}",
        if *attempts == 1 { "" } else { "s" },
        match throttled { 0 => String::new(), n => format!(" ({n} waited out for the rate limit)") }
    )]
    Exhausted { attempts: u32, throttled: u32, last: String },
    /// The provider refused connections again and again; nothing more is sent to it in this run.
    #[error("{base_url} cannot be reached")]
    Unreachable { base_url: String },
    /// The model replied with no text (or only whitespace) on the last attempt, after the allowed
    /// retries: an empty reply is never an answer.
    #[error(
        "the replies were empty: {empty} of {attempts} attempt(s) came back with no text{}",
        empty_hint(.finish_reason.as_deref())
    )]
    EmptyReplies {
        attempts: u32,
        /// How many of the attempts were empty (the others failed otherwise).
        empty: u32,
        /// How the last empty reply ended, as the model said.
        finish_reason: Option<String>,
    },
    /// The request does not fit the model's context with room for its reply: it was not sent.
    #[error(
        "the request does not fit the context: {prompt_tokens} prompt tokens ({how}) + {reply_tokens} for the \
         reply exceed the {context_tokens}-token context; not sent"
    )]
    Context {
        prompt_tokens: usize,
        reply_tokens: usize,
        context_tokens: usize,
        /// How the prompt was measured: `estimated`, or `counted by the server`.
        how: String,
    },
    /// The server refused the request as too long for its context (in its own words).
    #[error("the server refused the request as too long for its context{}: {message}", .context_tokens.map_or(String::new(), |n| format!(" ({n} tokens)")))]
    ContextRefused {
        message: String,
        prompt_tokens: Option<usize>,
        context_tokens: Option<usize>,
    },
    /// A local model that cannot be fetched, read or loaded.
    #[error("{0}")]
    Model(String),
    #[error("cancelled")]
    Cancelled,
}

/// A provider's missing key, as connecting to it reports it.
impl From<config::MissingKey> for LlmError {
    fn from(e: config::MissingKey) -> Self {
        LlmError::Config(e.to_string())
    }
}

impl LlmError {
    /// Whether the request was too long for the context (refused here or by the server): smaller
    /// requests may go where this one could not.
    pub fn is_context(&self) -> bool {
        matches!(self, LlmError::Context { .. } | LlmError::ContextRefused { .. })
    }
}

impl Classify for LlmError {
    /// The user's configuration (exit 2), or the machine, the network or
    /// the provider (exit 1).
    fn fault(&self) -> Fault {
        let input = matches!(self, LlmError::Config(_) | LlmError::Unauthorized { .. });
        if input { Fault::Input } else { Fault::Machine }
    }
}

/// A 401 or 403, as the key sent (or none) explains it.
fn unauthorized(env: &str, base_url: &str, status: u16, message: &str) -> String {
    if env.is_empty() {
        format!(
            "{base_url} asks for a key (HTTP {status}) and the provider has none: name the environment variable \
             that holds it in api_key_env: {message}"
        )
    } else {
        format!("the key in {env} was rejected by {base_url} (HTTP {status}): {message}")
    }
}

/// Where the key a provider sends comes from, as [`LlmError::Unauthorized`] names it (empty: none).
pub fn key_source(config: &crate::config::ProviderConfig) -> String {
    match (&config.api_key_env, &config.api_key) {
        (Some(var), _) => var.clone(),
        (None, Some(_)) => "the config file's api_key".into(),
        (None, None) => String::new(),
    }
}

/// What the last empty reply's `finish_reason` tells the user.
fn empty_hint(finish_reason: Option<&str>) -> String {
    match finish_reason {
        Some("length") => " (finish_reason \"length\": the token cap ran out before any text, as when a \
                            reasoning model spends it all on thinking; raise the cap)"
            .into(),
        Some(reason) => format!(
            " (the last ended with finish_reason \"{}\")",
            reason
        ),
        None => String::new(),
    }
}

/// Whether a reply holds nothing to read: no text, or only whitespace, control characters and
/// invisible marks (zero-width spaces and joiners, direction marks and overrides, a byte order mark). Such a reply is a failed attempt, never an answer, for
/// every role and every transport (a server dropping requests under load, an embedded model's
/// immediate end of sequence).
pub fn is_empty_reply(text: &str) -> bool {
    use unicode_width::UnicodeWidthChar;
    // A terminal's escape sequences go whole (`ESC [0m` leaves no "[0m" to read).
    crate::text::terminal_safe(text).chars().all(|c| {
        c.is_whitespace()
            || c.is_control()
            // What takes no column: zero-width characters, combining marks alone, variation
            // selectors, tag characters.
            || c.width() == Some(0)
            // Direction marks and overrides, the soft hyphen; and blanks drawn as nothing (Hangul
            // fillers, the braille blank).
            || matches!(c, '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}' | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' | '\u{2800}')
    })
}

/// How many leading bytes of a reply are a reasoning model's thought (`<think>…</think>` and the
/// blank after it; the whole reply when the thought never closed, as when the token cap ran out
/// while thinking): none of it is the answer. Servers that pass thoughts in the text (llama.cpp
/// with `--reasoning-format none`, some Ollama models) send it before the answer.
pub fn thought_len(text: &str) -> usize {
    let start = text.len() - text.trim_start().len();
    if !text[start..].starts_with("<think>") {
        return 0;
    }
    match text[start..].find("</think>") {
        Some(end) => {
            let after = start + end + "</think>".len();
            after + (text[after..].len() - text[after..].trim_start().len())
        }
        None => text.len(),
    }
}

/// Which model served a request, as recorded in sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub provider: String,
    pub kind: String,
    pub model: String,
    /// The SHA-256 of the embedded model's file, when it is known (a fetched model's, or one `model
    /// add` recorded): a name stands for one file, and a resume checks it is still that file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl ModelInfo {
    /// Whether `other` is another model than this one: another name, or the same name for a file of
    /// another SHA-256 (where both are known).
    pub fn differs_from(&self, other: &ModelInfo) -> bool {
        self.model != other.model || matches!((&self.sha256, &other.sha256), (Some(a), Some(b)) if a != b)
    }

    /// As [`fmt::Display`], with the file's SHA-256 when it is known.
    pub fn with_file(&self) -> String {
        match &self.sha256 {
            Some(sha) => format!("{self}, the file of sha256 {sha}"),
            None => self.to_string(),
        }
    }
}

impl fmt::Display for ModelInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}: {})", self.provider, self.kind, self.model)
    }
}

/// A model the workbench can talk to.
pub trait ChatModel: Send + Sync {
    /// Streams the reply to `request`. The stream always ends with `Done` or `Error`.
    fn stream(&self, request: ChatRequest) -> EventStream;

    fn info(&self) -> ModelInfo;

    /// How many tokens a prompt and its reply may hold together, when known (the local model's own
    /// context, or `context_tokens` in the provider's config). Work is split to fit it.
    fn context_tokens(&self) -> Option<usize> {
        None
    }

    /// `request`'s reply, `reply`, could not be used after every attempt its caller allows: it is not
    /// served again from the response cache, so a resume or a rerun asks anew. A model that keeps no
    /// cache, or one whose cache is read-only or off, has nothing to forget; a model that wraps
    /// another passes it on.
    fn forget(&self, _request: &ChatRequest, _reply: &str) {}
}

/// A finished reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    pub cached: bool,
    pub retries: u32,
    /// With `top_logprobs`: the reply's tokens and their rivals (empty when the provider gave none).
    pub choices: Vec<TokenChoice>,
}

/// Runs `request` to the end and collects the text (dropping text discarded by retries).
pub async fn complete(model: &dyn ChatModel, request: ChatRequest) -> Result<Completion, LlmError> {
    let mut events = model.stream(request);
    let mut text = String::new();
    let mut usage = None;
    let mut retries = 0;
    let mut choices = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            ChatEvent::Token(t) => text.push_str(&t),
            ChatEvent::Retry { .. } => {
                text.clear();
                choices.clear();
                retries += 1;
            }
            ChatEvent::Usage(u) => usage = Some(u),
            ChatEvent::Choices(c) => choices = c,
            ChatEvent::Done { finish_reason, cached } => {
                // The answer without a leading thought; the tokens' rivals keep their places in it.
                let thought = thought_len(&text);
                if thought > 0 {
                    text.drain(..thought);
                    choices.retain(|c: &TokenChoice| c.offset >= thought);
                    choices.iter_mut().for_each(|c| c.offset -= thought);
                }
                return Ok(Completion {
                    text,
                    usage,
                    finish_reason,
                    cached,
                    retries,
                    choices,
                });
            }
            ChatEvent::Error(e) => return Err(e),
        }
    }
    Err(LlmError::Transport("the event stream ended without Done".into()))
}

/// What a session records of provider `name`'s model, from the configuration alone (nothing is
/// connected or loaded): what a connection's [`ChatModel::info`] says.
pub fn describe(config: &config::Config, name: &str) -> Option<ModelInfo> {
    let provider = config.provider(name)?;
    Some(match provider.kind {
        config::ProviderKind::Openai => openai::info(provider),
        config::ProviderKind::Local => ModelInfo {
            provider: provider.name.clone(),
            kind: "local".into(),
            model: local_name(provider).to_string(),
            sha256: None,
        },
    })
}

/// The embedded model a local provider names (the default when it names none).
fn local_name(provider: &config::ProviderConfig) -> &str {
    if provider.model.is_empty() {
        config::DEFAULT_LOCAL_MODEL
    } else {
        provider.model.as_str()
    }
}

/// Builds the client for provider `name`, resolving its key from `env`. A local provider loads its
/// model (once per process) from `<data_dir>/models`.
pub fn connect(
    config: &config::Config,
    name: &str,
    shared: client::Shared,
    env: &dyn Fn(&str) -> Option<String>,
    data_dir: Option<&std::path::Path>,
) -> Result<Client, LlmError> {
    let provider = config.provider(name).ok_or_else(|| {
        let names: Vec<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
        LlmError::Config(format!(
            "unknown provider \"{name}\" (configured: {})",
            names.join(", ")
        ))
    })?;
    let transport: std::sync::Arc<dyn client::Transport> = match provider.kind {
        config::ProviderKind::Openai => {
            let key = provider.resolve_key(env)?;
            std::sync::Arc::new(openai::OpenAi::new(provider.clone(), key)?)
        }
        config::ProviderKind::Local => local_transport(provider, data_dir)?,
    };
    Ok(Client::new(transport, provider.clone(), shared))
}

#[cfg(feature = "local-model")]
fn local_transport(
    provider: &config::ProviderConfig,
    data_dir: Option<&std::path::Path>,
) -> Result<std::sync::Arc<dyn client::Transport>, LlmError> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static LOADED: OnceLock<Mutex<HashMap<std::path::PathBuf, Arc<local::LocalModel>>>> = OnceLock::new();
    let data_dir = data_dir.ok_or_else(|| LlmError::Config("no data dir: set INCHARACTER_DATA_DIR".into()))?;
    let name = local_name(provider);
    let entry = local::resolve_entry(&local::models_dir(data_dir), name)?;
    let (path, sha256) = (entry.path, entry.identity.map(|i| i.sha256));
    let mut loaded = LOADED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let model = match loaded.get(&path) {
        Some(m) => m.clone(),
        None => {
            let m = Arc::new(local::LocalModel::load(name, &path)?);
            loaded.insert(path, m.clone());
            m
        }
    };
    // The requests a provider lets run at once are decoded side by side.
    model.allow_batch(provider.max_concurrency);
    Ok(Arc::new(
        local::LocalTransport::new(model, &provider.name)
            .named(name)
            .identified(sha256),
    ))
}

#[cfg(not(feature = "local-model"))]
fn local_transport(
    provider: &config::ProviderConfig,
    _: Option<&std::path::Path>,
) -> Result<std::sync::Arc<dyn client::Transport>, LlmError> {
    Err(LlmError::Config(format!(
        "provider \"{}\" is the embedded local model, but this build has no `local-model` feature",
        provider.name
    )))
}

/// The instruction that describes a reply's JSON Schema in the prompt (servers without structured
/// outputs, and the local model, which is also constrained token by token).
pub fn schema_instruction(schema: &serde_json::Value) -> String {
    crate::templates::fill(
        crate::templates::Template::SchemaInstruction.bundled_text(),
        &[("schema", &schema.to_string())],
    )
}
