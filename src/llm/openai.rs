//! One attempt against an OpenAI-compatible `/v1/chat/completions` endpoint (OpenAI, vLLM, Ollama,
//! llama.cpp server, LM Studio, OpenRouter): builds the request body, checks the status before
//! streaming, and parses the server-sent events (tokens, usage, `[DONE]`, error objects inside a 200
//! stream, chunks with no choices). Retrying is the caller's business (`client.rs`).

use std::time::Duration;

use async_trait::async_trait;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::time::{Instant, timeout_at};

use super::client::{AttemptError, Finished, Transport};
use super::{ChatRequest, LlmError, ModelInfo, Usage};
use crate::config::{ProviderConfig, Secret, Secrets};

pub struct OpenAi {
    config: ProviderConfig,
    key: Option<Secret>,
    /// The key and the header values, kept out of what a server writes back.
    secrets: Secrets,
    http: reqwest::Client,
}

impl OpenAi {
    /// A transport for `config`; `key` comes from `ProviderConfig::resolve_key`.
    pub fn new(config: ProviderConfig, key: Option<Secret>) -> Result<Self, LlmError> {
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs_f64(config.timeout_connect_s))
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build an HTTP client: {e}")))?;
        let secrets = Secrets::of(key.as_ref(), &config.headers);
        Ok(OpenAi {
            config,
            key,
            secrets,
            http,
        })
    }

    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.config.base_url)
    }
}

/// Makes `ring` the process's TLS crypto provider, once, before the first client is built: reqwest is
/// built without a provider of its own (its default, aws-lc-rs, needs a C toolchain and cmake).
pub(crate) fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // An Err means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A sampling value as the user wrote it: `0.7`, not the `0.699999988079071` an `f32` widens to.
fn decimal(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

#[cfg(any(test, feature = "testing"))]
/// The JSON body sent for `request`. With a schema and `structured_output`, the schema goes into
/// `response_format`; without `structured_output` it is described in the prompt instead.
pub fn request_body(model: &str, request: &ChatRequest, structured_output: bool) -> Value {
    request_body_as(model, request, structured_output, false)
}

/// [`request_body`] for a server that takes `response_format: {"type": "json_object"}` only
/// (`json_object`): the schema is then described in the prompt as well.
pub fn request_body_as(model: &str, request: &ChatRequest, structured_output: bool, json_object: bool) -> Value {
    let mut messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    let mut body = json!({
        "model": model,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let s = &request.sampling;
    if let Some(t) = s.temperature {
        body["temperature"] = json!(decimal(t));
    }
    if let Some(p) = s.top_p {
        body["top_p"] = json!(decimal(p));
    }
    if let Some(n) = s.max_tokens {
        let name = if s.max_completion_tokens {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[name] = json!(n);
    }
    if let Some(seed) = s.seed {
        body["seed"] = json!(seed);
    }
    if let Some(n) = s.top_logprobs {
        body["logprobs"] = json!(true);
        body["top_logprobs"] = json!(n);
    }
    if let Some(schema) = &request.schema {
        if json_object {
            body["response_format"] = json!({"type": "json_object"});
        }
        if structured_output && !json_object {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": schema.name, "schema": schema.schema, "strict": schema.strict},
            });
        } else {
            messages = super::described(&request.messages, schema)
                .iter()
                .map(|m| json!({"role": m.role, "content": m.content}))
                .collect();
        }
    }
    body["messages"] = Value::Array(messages);
    body
}

/// The `param` and `code` of an OpenAI-style error body, when it has them.
fn error_fields(body: &str) -> (Option<String>, Option<String>) {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    (field("param"), field("code"))
}

/// The message of an error body, reduced to what a person reads: an OpenAI-style
/// `{"error": {"message": …}}` (or `{"error": "…"}`, or vLLM's older `{"object": "error", "message":
/// …}`), else the text itself; of a Python traceback only its last line (the exception), of an HTML
/// page only its text. At most 300 characters, on one line.
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.get("error")
            .and_then(|e| {
                e.get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| e.as_str().map(str::to_string))
            })
            .or_else(|| v.get("message").and_then(Value::as_str).map(str::to_string))
            .or_else(|| v.get("detail").and_then(Value::as_str).map(str::to_string))
    });
    let text = message.unwrap_or_else(|| body.trim().to_string());
    let text = without_traceback(&text);
    let text = if text.trim_start().starts_with('<') {
        without_tags(&text)
    } else {
        text
    };
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(300).collect()
}

/// A message without the Python traceback a server appended to it (llama-cpp-python puts the
/// frames after its message: `… 'json_object'\n\n  File "…/app.py", line 376, …`), or, for a bare
/// traceback, its last line (the exception).
fn without_traceback(text: &str) -> String {
    let is_frame = |l: &str| {
        let l = l.trim();
        l.starts_with("File \"") || l.starts_with("Traceback (most recent call last)")
    };
    let Some(first) = text.lines().position(is_frame) else {
        return text.to_string();
    };
    let before: Vec<&str> = text.lines().take(first).filter(|l| !l.trim().is_empty()).collect();
    if !before.is_empty() {
        return before.join("\n");
    }
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("File \"") && !l.starts_with('^') && !l.starts_with('~'))
        .filter(|l| !l.starts_with("Traceback"))
        .unwrap_or("the server failed (a traceback with no message)")
        .to_string()
}

/// The text of an HTML page, without its tags, scripts and styles.
fn without_tags(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        out.push(' ');
        let after = &rest[open..];
        let lower = after.get(..8).unwrap_or(after).to_ascii_lowercase();
        let end = if lower.starts_with("<script") || lower.starts_with("<style") {
            let close = if lower.starts_with("<script") {
                "</script>"
            } else {
                "</style>"
            };
            after.to_ascii_lowercase().find(close).map(|i| i + close.len())
        } else {
            after.find('>').map(|i| i + 1)
        };
        match end {
            Some(e) => rest = &after[e..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

impl OpenAi {
    /// One attempt of `request`, its errors in the server's words (see [`redacted`]).
    async fn attempt_as_sent(
        &self,
        request: &ChatRequest,
        on_token: &mut (dyn FnMut(String) -> bool + Send),
    ) -> Result<Finished, AttemptError> {
        let started = Instant::now();
        let first_token_deadline = started + Duration::from_secs_f64(self.config.timeout_first_token_s);
        let idle = Duration::from_secs_f64(self.config.timeout_idle_s);
        let body = request_body_as(
            &self.config.model,
            request,
            self.config.structured_output,
            self.config.json_object || request.sampling.json_object,
        );
        let mut http = self.http.post(self.endpoint()).json(&body);
        if let Some(key) = &self.key {
            http = http.bearer_auth(key.expose());
        }
        for (name, value) in &self.config.headers {
            http = http.header(name, value);
        }
        let response = match timeout_at(first_token_deadline, http.send()).await {
            Err(_) => return Err(AttemptError::FirstTokenTimeout),
            Ok(Err(e)) if e.is_connect() => return Err(AttemptError::NoConnection(without_url(&e))),
            Ok(Err(e)) => return Err(AttemptError::Connect(without_url(&e))),
            Ok(Ok(r)) => r,
        };
        let status = response.status().as_u16();
        let headers = response.headers();
        let rate = super::pace::RateHeaders::read(
            |name| headers.get(name).and_then(|v| v.to_str().ok()),
            std::time::SystemTime::now(),
        );
        if !response.status().is_success() {
            let text = match timeout_at(first_token_deadline, response.text()).await {
                Ok(Ok(t)) => t,
                _ => String::new(),
            };
            // Before the message is cut to length, which could leave part of a repeated key.
            let text = self.secrets.scrub(&text);
            let message = error_message(&text);
            if status == 401 || status == 403 {
                let env = super::key_source(&self.config);
                return Err(AttemptError::Fatal(LlmError::Unauthorized {
                    env,
                    base_url: self.config.base_url.clone(),
                    status,
                    message,
                }));
            }
            if status == 429 && quota_exhausted(&text) {
                return Err(AttemptError::Fatal(LlmError::Http {
                    base_url: self.config.base_url.clone(),
                    status,
                    message: format!(
                        "{message} (the account's quota is used up: waiting will not help; see the provider's billing page)"
                    ),
                }));
            }
            let (param, code) = error_fields(&text);
            return Err(AttemptError::Status {
                status,
                rate: Box::new(rate),
                message,
                param,
                code,
            });
        }

        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if content_type.starts_with("application/json") || content_type.starts_with("text/html") {
            // Not a stream: an error in a 200, a whole completion from a server that ignores
            // `stream`, a proxy's page.
            let text = match timeout_at(first_token_deadline, response.text()).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => return Err(AttemptError::Cut(without_url(&e))),
                Err(_) => return Err(AttemptError::FirstTokenTimeout),
            };
            let finished = whole_reply(&content_type, &text, on_token)?;
            return Ok(Finished { rate, ..finished });
        }
        let finished = read_events(response.bytes_stream(), first_token_deadline, idle, on_token)
            .await
            .map_err(|e| match e {
                // An event stream with no event is how llama-cpp-python refuses a prompt past its
                // context; from anything else (a page, an empty body) it means nothing of the kind.
                AttemptError::Cut(m) if m == NO_EVENT && content_type.starts_with("text/event-stream") => {
                    AttemptError::Cut(format!(
                        "{m} (llama-cpp-python does so for a prompt longer than its context: if that is the server, \
                         set the provider's context_tokens)"
                    ))
                }
                e => e,
            })?;
        Ok(Finished { rate, ..finished })
    }
}

/// `e` without the key or a header's value in any text a server wrote into it: some servers and
/// proxies repeat the key they refused, and these texts reach journals, logs and the terminal.
/// (Values shorter than eight characters are placeholders, not secrets: [`Secrets`].)
fn redacted(e: AttemptError, secrets: &Secrets) -> AttemptError {
    let clean = |text: String| secrets.scrub(&text);
    match e {
        AttemptError::Status {
            status,
            rate,
            message,
            param,
            code,
        } => AttemptError::Status {
            status,
            rate,
            message: clean(message),
            param: param.map(clean),
            code: code.map(clean),
        },
        AttemptError::Cut(m) => AttemptError::Cut(clean(m)),
        AttemptError::NotAnApi(m) => AttemptError::NotAnApi(clean(m)),
        AttemptError::InStream(m) => AttemptError::InStream(clean(m)),
        AttemptError::Connect(m) => AttemptError::Connect(clean(m)),
        AttemptError::NoConnection(m) => AttemptError::NoConnection(clean(m)),
        AttemptError::ContextRefused { message, refusal } => AttemptError::ContextRefused {
            message: clean(message),
            refusal,
        },
        AttemptError::Fatal(LlmError::Unauthorized {
            env,
            base_url,
            status,
            message,
        }) => AttemptError::Fatal(LlmError::Unauthorized {
            env,
            base_url,
            status,
            message: clean(message),
        }),
        AttemptError::Fatal(LlmError::Http {
            base_url,
            status,
            message,
        }) => AttemptError::Fatal(LlmError::Http {
            base_url,
            status,
            message: clean(message),
        }),
        other => other,
    }
}

/// A 200 answer that is not an event stream (`content_type`): a whole completion is taken as the
/// reply (some servers and proxies ignore `stream`), an error object is the server's error, and
/// anything else is a cut reply that says what came instead.
fn whole_reply(
    content_type: &str,
    body: &str,
    on_token: &mut (dyn FnMut(String) -> bool + Send),
) -> Result<Finished, AttemptError> {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let Some(v) = parsed.filter(|v| v.is_object()) else {
        return Err(AttemptError::NotAnApi(format!(
            "the server answered {content_type}, not an event stream: {}",
            error_message(body)
        )));
    };
    if v.get("error").is_some_and(|e| !e.is_null()) {
        return Err(AttemptError::InStream(error_message(body)));
    }
    let choice = v.pointer("/choices/0");
    let (Some(text), Some(reason)) = (
        choice.and_then(|c| c.pointer("/message/content")).and_then(Value::as_str),
        choice.and_then(|c| c.get("finish_reason")).and_then(Value::as_str),
    ) else {
        return Err(AttemptError::Cut(format!(
            "the server answered JSON that is neither a completion nor an error: {}",
            error_message(body)
        )));
    };
    if !text.is_empty() && !on_token(text.to_string()) {
        return Err(AttemptError::Cancelled);
    }
    let usage = v.get("usage").and_then(usage_of);
    Ok(Finished {
        usage,
        finish_reason: Some(reason.to_string()),
        ..Finished::default()
    })
}

/// Whether a 429's body says the account's quota is used up (OpenAI's `insufficient_quota`), which
/// waiting does not cure, unlike a rate limit.
fn quota_exhausted(body: &str) -> bool {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    ["code", "type"]
        .iter()
        .any(|f| error.and_then(|e| e.get(f)).and_then(Value::as_str) == Some("insufficient_quota"))
}

#[async_trait]
impl Transport for OpenAi {
    async fn attempt(
        &self,
        request: &ChatRequest,
        on_token: &mut (dyn FnMut(String) -> bool + Send),
    ) -> Result<Finished, AttemptError> {
        self.attempt_as_sent(request, on_token)
            .await
            .map_err(|e| redacted(e, &self.secrets))
    }

    fn info(&self) -> ModelInfo {
        info(&self.config)
    }

    fn base_url(&self) -> &str {
        &self.config.base_url
    }

    async fn learn(&self) -> Option<super::server::Facts> {
        Some(super::server::learn(&self.http, &self.config, self.key.as_ref(), PROBE_BUDGET).await)
    }

    async fn count_tokens(&self, request: &ChatRequest, how: super::server::Tokenize) -> Option<usize> {
        let body = request_body_as(
            &self.config.model,
            request,
            self.config.structured_output,
            self.config.json_object || request.sampling.json_object,
        );
        let messages = body.get("messages")?.as_array()?;
        super::server::count(&self.http, &self.config, self.key.as_ref(), how, messages, PROBE_BUDGET).await
    }
}

/// How long the probes of a server on first contact, and a token count, may take in all.
pub const PROBE_BUDGET: Duration = Duration::from_secs(3);

/// What sessions record of an OpenAI-compatible provider's model.
pub(crate) fn info(config: &ProviderConfig) -> ModelInfo {
    ModelInfo {
        provider: config.name.clone(),
        kind: "openai".into(),
        model: config.model.clone(),
        sha256: None,
    }
}

/// A stream that ended before its first event.
const NO_EVENT: &str = "the server ended the stream before any reply";

/// Reads an SSE body (bytes split anywhere, events split across chunks) up to `[DONE]`, passing each
/// piece of content to `on_token`.
pub async fn read_events<S, B, E>(
    body: S,
    first_token_deadline: Instant,
    idle: Duration,
    on_token: &mut (dyn FnMut(String) -> bool + Send),
) -> Result<Finished, AttemptError>
where
    S: futures_util::Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    // A body may start with a UTF-8 byte order mark, which the SSE format allows; eventsource-stream
    // 0.2.3 then slices the 3-byte U+FEFF at byte 1 and panics. Drop leading marks first (all of them:
    // a second one would reach the same slice), even when their bytes arrive in separate chunks.
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let mut head = Some(Vec::new());
    let body = body.map(move |chunk| {
        chunk.map(|bytes| {
            let Some(mut held) = head.take() else {
                return bytes.as_ref().to_vec();
            };
            held.extend_from_slice(bytes.as_ref());
            let marks = held.chunks_exact(BOM.len()).take_while(|c| *c == BOM).count();
            held.drain(..marks * BOM.len());
            if BOM.starts_with(&held) {
                // Nothing yet, or a mark cut short: wait for more.
                head = Some(held);
                return Vec::new();
            }
            held
        })
    });
    let mut events = std::pin::pin!(body.eventsource());
    let mut usage = None;
    let mut finish_reason = None;
    let mut got_first = false;
    let mut choices: Vec<super::TokenChoice> = Vec::new();
    let mut offset = 0;
    loop {
        let deadline = if got_first {
            Instant::now() + idle
        } else {
            first_token_deadline
        };
        let event = match timeout_at(deadline, events.next()).await {
            Err(_) if got_first => return Err(AttemptError::IdleTimeout),
            Err(_) => return Err(AttemptError::FirstTokenTimeout),
            Ok(None) if !got_first => return Err(AttemptError::Cut(NO_EVENT.into())),
            Ok(None) => return Err(AttemptError::Cut("the stream ended before [DONE]".into())),
            Ok(Some(Err(e))) => return Err(AttemptError::Cut(format!("the stream broke: {e}"))),
            Ok(Some(Ok(event))) => event,
        };
        got_first = true;
        let data = event.data.trim();
        if data == "[DONE]" {
            // Every server that finishes a reply says why; `[DONE]` without a reason is a request
            // the server ended early (llama-cpp-python ends the running request so when another
            // arrives): a cut reply, asked again, never an answer.
            if finish_reason.is_none() {
                return Err(AttemptError::Interrupted);
            }
            return Ok(Finished {
                usage,
                finish_reason,
                choices,
                ..Finished::default()
            });
        }
        if data.is_empty() {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            AttemptError::Cut(format!(
                "an unreadable event ({e}): {}",
                data.chars().take(80).collect::<String>()
            ))
        })?;
        if let Some(error) = chunk.get("error") {
            return Err(AttemptError::InStream(error_message(
                &json!({"error": error}).to_string(),
            )));
        }
        if let Some(u) = chunk.get("usage").and_then(usage_of) {
            usage = Some(u);
        }
        for choice in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            let text = choice
                .pointer("/delta/content")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty());
            if let Some(text) = text
                && !on_token(text.to_string())
            {
                return Err(AttemptError::Cancelled);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                finish_reason = Some(reason.to_string());
            }
            choices.extend(token_choices(choice, &mut offset));
        }
    }
}

/// The tokens of a choice's `logprobs.content`, each placed at `offset` (moved past it).
pub(crate) fn token_choices(choice: &Value, offset: &mut usize) -> Vec<super::TokenChoice> {
    let tokens = choice.pointer("/logprobs/content").and_then(Value::as_array);
    let mut choices = Vec::new();
    for token in tokens.into_iter().flatten() {
        let (text, len) = token_text(token);
        let top = token
            .get("top_logprobs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|t| {
                let logprob = t.get("logprob").and_then(Value::as_f64).unwrap_or(f64::NEG_INFINITY);
                (token_text(t).0, logprob as f32)
            })
            .collect();
        choices.push(super::TokenChoice {
            offset: *offset,
            token: text,
            top,
        });
        *offset += len;
    }
    choices
}

/// A `logprobs` entry's token as text, and how many bytes of the reply it is (its `bytes` when the
/// server sends them: a token may be part of a character).
fn token_text(entry: &Value) -> (String, usize) {
    let text = entry.get("token").and_then(Value::as_str).unwrap_or_default().to_string();
    let bytes = entry.get("bytes").and_then(Value::as_array).map(Vec::len);
    let len = bytes.unwrap_or(text.len());
    (text, len)
}

/// A reqwest error without its URL's query (which could carry a key on some proxies).
/// The error without the URL (the caller names the base URL), with its root cause: reqwest's own
/// message ("error sending request") does not say that the connection was refused.
pub(crate) fn without_url(e: &reqwest::Error) -> String {
    let text = e.to_string();
    let mut message = match text.find(" for url (") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let mut root: &dyn std::error::Error = e;
    while let Some(next) = root.source() {
        root = next;
    }
    if !std::ptr::addr_eq(root, e as &dyn std::error::Error) {
        message.push_str(&format!(": {root}"));
    }
    message
}

/// A reply's `usage` object (`None` for null, or for counts no reply can have).
fn usage_of(u: &Value) -> Option<Usage> {
    if u.is_null() {
        return None;
    }
    let count = |key: &str| u.get(key).and_then(Value::as_u64).unwrap_or(0);
    let usage = Usage {
        prompt_tokens: count("prompt_tokens"),
        completion_tokens: count("completion_tokens"),
    };
    (usage.prompt_tokens <= super::MOST_TOKENS && usage.completion_tokens <= super::MOST_TOKENS).then_some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::config::ProviderKind;
    use crate::llm::{ChatMessage, ResponseSchema};

    #[test]
    fn an_https_client_builds_on_the_ring_provider() {
        let config = ProviderConfig::new(
            "openai",
            ProviderKind::Openai,
            "https://api.openai.com/v1",
            "gpt-4o-mini",
        );
        assert!(OpenAi::new(config.clone(), None).is_ok());
        // Twice: the provider is installed once per process.
        assert!(OpenAi::new(config, None).is_ok());
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }

    #[test]
    fn a_json_object_server_gets_json_object_and_the_schema_in_the_prompt() {
        let mut r = ChatRequest::new(vec![ChatMessage::system("Rate."), ChatMessage::user("Hi")]);
        r.schema = Some(ResponseSchema::new("rating", json!({"type": "object"})));
        let b = request_body_as("m", &r, true, true);
        assert_eq!(b["response_format"], json!({"type": "json_object"}));
        assert!(b["messages"][0]["content"].as_str().unwrap().contains("JSON Schema"));
    }

    #[test]
    fn a_request_adapted_to_json_object_goes_so_with_the_schema_in_the_prompt() {
        let mut r = ChatRequest::new(vec![ChatMessage::system("Rate."), ChatMessage::user("Hi")]);
        r.schema = Some(ResponseSchema::new("rating", json!({"type": "object"})));
        r.sampling.json_object = true;
        let b = request_body_as("m", &r, true, r.sampling.json_object);
        assert_eq!(b["response_format"]["type"], "json_object");
        assert!(b["messages"][0]["content"].as_str().unwrap().contains("JSON Schema"));
    }

    #[test]
    fn sampling_values_go_out_as_written() {
        let mut r = ChatRequest::new(vec![ChatMessage::user("Hi")]);
        r.sampling.temperature = Some(0.7);
        r.sampling.top_p = Some(0.9);
        let b = request_body("m", &r, true);
        assert_eq!(b["temperature"].to_string(), "0.7");
        assert_eq!(b["top_p"].to_string(), "0.9");
    }

    #[test]
    fn body_carries_sampling_usage_and_schema() {
        let mut r = ChatRequest::new(vec![ChatMessage::system("Be Hermione."), ChatMessage::user("Hi")]);
        r.sampling.temperature = Some(0.0);
        r.sampling.seed = Some(3);
        r.meta.purpose = "secret bookkeeping".into();
        r.schema = Some(ResponseSchema::new("rating", json!({"type": "object"})));
        let b = request_body("m", &r, true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["response_format"]["type"], "json_schema");
        assert_eq!(b["response_format"]["json_schema"]["name"], "rating");
        assert_eq!(b["seed"], 3);
        assert!(
            !b.to_string().contains("bookkeeping"),
            "metadata never goes on the wire"
        );
        let b = request_body("m", &r, false);
        assert!(b.get("response_format").is_none());
        assert!(b["messages"][0]["content"].as_str().unwrap().contains("JSON Schema"));
    }

    const BODY: &str = concat!(
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        ": a comment line\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"Honestly, \"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"我很健谈。\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n",
        "data: [DONE]\n\n",
    );

    async fn read(chunks: Vec<Vec<u8>>) -> (Result<Finished, AttemptError>, String) {
        let body = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>));
        let mut text = String::new();
        let far = Instant::now() + Duration::from_secs(60);
        let result = read_events(body, far, Duration::from_secs(60), &mut |t| {
            text.push_str(&t);
            true
        })
        .await;
        (result, text)
    }

    /// The tokens' rivals, asked for with `logprobs`, are read from the stream's `logprobs.content`,
    /// each token placed by its bytes (a Chinese character may span two tokens).
    #[tokio::test]
    async fn token_choices_are_read_from_the_stream() {
        let mut r = ChatRequest::new(vec![ChatMessage::user("Hi")]);
        assert!(request_body("m", &r, true).get("logprobs").is_none());
        r.sampling.top_logprobs = Some(3);
        let b = request_body("m", &r, true);
        assert_eq!((b["logprobs"].clone(), b["top_logprobs"].clone()), (json!(true), json!(3)));
        let body = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"4\"},\"logprobs\":{\"content\":[",
            "{\"token\":\"4\",\"logprob\":-0.2,\"bytes\":[52],\"top_logprobs\":[",
            "{\"token\":\"4\",\"logprob\":-0.2,\"bytes\":[52]},{\"token\":\"3\",\"logprob\":-1.7,\"bytes\":[51]}]}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"好\"},\"logprobs\":{\"content\":[",
            "{\"token\":\"\\ufffd\",\"logprob\":-0.1,\"bytes\":[229,165],\"top_logprobs\":[]},",
            "{\"token\":\"\\ufffd\",\"logprob\":-0.1,\"bytes\":[189],\"top_logprobs\":[]}]},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let (result, text) = read(vec![body.as_bytes().to_vec()]).await;
        let choices = result.unwrap().choices;
        assert_eq!(text, "4好");
        let placed: Vec<usize> = choices.iter().map(|c| c.offset).collect();
        assert_eq!(placed, [0, 1, 3]);
        assert_eq!(choices[0].top, [("4".to_string(), -0.2), ("3".to_string(), -1.7)]);
    }

    #[tokio::test]
    async fn events_split_at_every_byte_give_the_same_reply() {
        let bytes = BODY.as_bytes();
        for cut in 1..bytes.len() {
            let (result, text) = read(vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()]).await;
            let finished = result.unwrap_or_else(|e| panic!("cut at {cut}: {e:?}"));
            assert_eq!(text, "Honestly, 我很健谈。", "cut at {cut}");
            assert_eq!(finished.finish_reason.as_deref(), Some("stop"));
            assert_eq!(
                finished.usage,
                Some(Usage {
                    prompt_tokens: 7,
                    completion_tokens: 3
                })
            );
        }
        // One byte per chunk.
        let (result, text) = read(bytes.iter().map(|b| vec![*b]).collect()).await;
        assert!(result.is_ok());
        assert_eq!(text, "Honestly, 我很健谈。");
    }

    #[tokio::test]
    async fn a_stream_without_done_or_with_an_error_object_fails() {
        let cut = BODY.replace("data: [DONE]\n\n", "");
        assert!(matches!(
            read(vec![cut.into_bytes()]).await.0,
            Err(AttemptError::Cut(_))
        ));
        let err = "data: {\"error\":{\"message\":\"overloaded\"}}\n\n";
        assert_eq!(
            read(vec![err.as_bytes().to_vec()]).await.0,
            Err(AttemptError::InStream("overloaded".into()))
        );
    }

    #[tokio::test]
    async fn done_without_a_finish_reason_is_an_interrupted_request_not_an_answer() {
        let interrupted = BODY.replace(",\"finish_reason\":\"stop\"", "");
        assert!(!interrupted.contains("finish_reason\":\""), "{interrupted}");
        let (result, text) = read(vec![interrupted.into_bytes()]).await;
        assert_eq!(result, Err(AttemptError::Interrupted));
        assert!(AttemptError::Interrupted.retryable(), "asked again");
        assert!(
            !text.is_empty(),
            "the partial text streamed, and is discarded by the retry"
        );
    }

    #[tokio::test]
    async fn a_leading_byte_order_mark_is_skipped_wherever_the_chunks_split_it() {
        let body = [b"\xEF\xBB\xBF".as_slice(), BODY.as_bytes()].concat();
        for cut in 0..=4 {
            let (result, text) = read(vec![body[..cut].to_vec(), body[cut..].to_vec()]).await;
            assert!(result.is_ok(), "cut at {cut}: {result:?}");
            assert_eq!(text, "Honestly, 我很健谈。", "cut at {cut}");
        }
        let (result, text) = read(body.iter().map(|b| vec![*b]).collect()).await;
        assert!(result.is_ok());
        assert_eq!(text, "Honestly, 我很健谈。");
        let twice = [b"\xEF\xBB\xBF".as_slice(), &body].concat();
        let (result, text) = read(vec![twice[..4].to_vec(), twice[4..].to_vec()]).await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(text, "Honestly, 我很健谈。");
        // Bytes that only begin like a mark are kept (here invalid UTF-8, so the reply fails).
        assert!(read(vec![b"\xEF".to_vec(), BODY.as_bytes().to_vec()]).await.0.is_err());
    }

    #[test]
    fn a_key_a_server_repeats_is_taken_out_of_its_errors() {
        let key = Secret::new("sk-live-0123456789".into());
        let secrets = Secrets::of(Some(&key), &BTreeMap::new());
        let status = AttemptError::Status {
            status: 500,
            rate: Box::default(),
            message: "internal: header Bearer sk-live-0123456789".into(),
            param: None,
            code: Some("sk-live-0123456789".into()),
        };
        let AttemptError::Status { message, code, .. } = redacted(status, &secrets) else {
            unreachable!()
        };
        assert_eq!((message.as_str(), code.as_deref()), ("internal: header Bearer [the key]", Some("[the key]")));
        let refused = AttemptError::Fatal(LlmError::Unauthorized {
            env: "K".into(),
            base_url: "http://x".into(),
            status: 401,
            message: "Incorrect API key provided: sk-live-0123456789.".into(),
        });
        assert!(!format!("{:?}", redacted(refused, &secrets)).contains("0123456789"));
        let cut = AttemptError::InStream("bad sk-live-0123456789".into());
        assert_eq!(redacted(cut, &secrets), AttemptError::InStream("bad [the key]".into()));
        // A placeholder key is no secret, and words that happen to contain it are left alone.
        let short = Secrets::of(Some(&Secret::new("none".into())), &BTreeMap::new());
        let e = AttemptError::Cut("none left".into());
        assert_eq!(redacted(e.clone(), &short), e);
        // A header's value (an Azure-style api-key) and a key as a URL carries it are kept out too.
        let key = Secret::new("sk-Audit/Key+abc=123".into());
        let headers = BTreeMap::from([("api-key".to_string(), "azure-0123456789".to_string())]);
        let secrets = Secrets::of(Some(&key), &headers);
        let echoed = AttemptError::InStream(
            "refused api-key azure-0123456789 from ?key=sk-Audit%2FKey%2Babc%3D123 (sk-Audit%2fKey%2babc%3d123)".into(),
        );
        assert_eq!(
            redacted(echoed, &secrets),
            AttemptError::InStream("refused api-key [a header's value] from ?key=[the key] ([the key])".into())
        );
        // A header's value that holds the key is taken out whole, not around it.
        let headers = BTreeMap::from([("x-auth".to_string(), "sk-Audit/Key+abc=123:extra".to_string())]);
        let secrets = Secrets::of(Some(&key), &headers);
        let echoed = AttemptError::InStream("got sk-Audit/Key+abc=123:extra".into());
        assert_eq!(redacted(echoed, &secrets), AttemptError::InStream("got [a header's value]".into()));
    }

    #[test]
    fn a_used_up_quota_is_not_a_rate_limit() {
        let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert!(quota_exhausted(quota));
        assert!(!quota_exhausted(r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#));
        assert!(!quota_exhausted("Too Many Requests"));
    }

    #[test]
    fn a_whole_answer_in_place_of_a_stream_is_read_as_one() {
        let text = std::sync::Mutex::new(String::new());
        let mut take = |t: String| {
            text.lock().unwrap().push_str(&t);
            true
        };
        let completion = r#"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}"#;
        let finished = whole_reply("application/json", completion, &mut take).unwrap();
        assert_eq!(finished.finish_reason.as_deref(), Some("stop"));
        assert_eq!(finished.usage.map(|u| u.prompt_tokens + u.completion_tokens), Some(9));
        assert_eq!(*text.lock().unwrap(), "Hi.");
        let error = r#"{"error":{"message":"model overloaded, try later","type":"server_error"}}"#;
        assert_eq!(
            whole_reply("application/json", error, &mut take).unwrap_err(),
            AttemptError::InStream("model overloaded, try later".into())
        );
        let page = "<html><body><h1>Gateway login</h1></body></html>";
        let AttemptError::NotAnApi(said) = whole_reply("text/html", page, &mut take).unwrap_err() else {
            unreachable!()
        };
        assert!(said.contains("text/html, not an event stream") && said.contains("Gateway login"), "{said}");
        // JSON that is no completion (a body a proxy cut, a refusal without content) may come right.
        assert!(matches!(whole_reply("application/json", "{}", &mut take), Err(AttemptError::Cut(_))));
    }

    #[test]
    fn error_bodies_are_summarised() {
        assert_eq!(
            error_message(r#"{"error": {"message": "bad key", "type": "x"}}"#),
            "bad key"
        );
        assert_eq!(error_message("Service Unavailable"), "Service Unavailable");
        assert_eq!(
            error_message(
                r#"{"object":"error","message":"This model's maximum context length is 2048 tokens.","code":400}"#
            ),
            "This model's maximum context length is 2048 tokens."
        );
        assert_eq!(error_message(r#"{"error":"Model not found"}"#), "Model not found");
    }

    #[test]
    fn a_traceback_is_reduced_to_its_exception_and_a_page_to_its_text() {
        let traceback = "Traceback (most recent call last):\n  File \"/usr/lib/python3.11/site-packages/llama_cpp/server/app.py\", line 412, in create_chat_completion\n    raise RuntimeError(\"llama_decode returned -3\")\nRuntimeError: llama_decode returned -3\n";
        assert_eq!(error_message(traceback), "RuntimeError: llama_decode returned -3");
        let wrapped = serde_json::json!({"error": {"message": traceback}}).to_string();
        assert_eq!(error_message(&wrapped), "RuntimeError: llama_decode returned -3");
        let page = "<html><head><style>body{color:red}</style><title>502</title></head><body><h1>502 Bad Gateway</h1><script>x()</script></body></html>";
        assert_eq!(error_message(page), "502 502 Bad Gateway");
        assert!(!error_message(traceback).contains("File"));
        // llama-cpp-python 0.3.36's answer to a json_schema response_format, frames and all.
        let appended = r#"{"error":{"message":"1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}\n\n  File \"/usr/lib/python3.11/site-packages/llama_cpp/server/app.py\", line 376, in create_chat_completion\n    POST /v1/chat/completions\n","type":"internal_server_error"}}"#;
        let m = error_message(appended);
        assert!(m.contains("Input should be 'text' or 'json_object'"), "{m}");
        assert!(!m.contains("File") && !m.contains("app.py"), "{m}");
    }

    #[test]
    fn a_usage_no_reply_can_have_is_none() {
        assert_eq!(
            usage_of(&json!({"prompt_tokens": 7, "completion_tokens": 2})),
            Some(Usage { prompt_tokens: 7, completion_tokens: 2 })
        );
        assert_eq!(usage_of(&json!({"prompt_tokens": u64::MAX, "completion_tokens": 2})), None);
        assert_eq!(usage_of(&Value::Null), None);
    }
}
