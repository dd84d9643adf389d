//! What a self-hosted server says about itself, where it says it, and what a request costs in its
//! context. On first contact a provider's server is probed (a few short GETs and POSTs, seconds at
//! most): llama.cpp's `llama-server` (`/props`: each slot's context and the slots), vLLM (`/v1/models`:
//! `max_model_len`), Ollama (`/api/show`: the model's `num_ctx`), LM Studio (`/api/v0/models/<id>`:
//! the loaded context) and llama-cpp-python (`/extras/tokenize/count`: it serves one request at a
//! time and reports no context). The [`Facts`] learned set the defaults a provider's config leaves
//! open — requests in flight, the context — and are journaled; a configured value always wins, and
//! where it exceeds what the server said, the run says so.
//!
//! Requests are measured before they are sent ([`estimate`], or the server's own count where it
//! offers tokenization) so that nothing goes out that the context cannot hold, and a server's
//! context refusal, worded differently by each, is recognised as one ([`context_refusal`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ChatRequest, Speaker};
pub use crate::config::ServerKind;
use crate::config::{ProviderConfig, Secret};

/// How a server counts a request's tokens exactly, when it offers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenize {
    /// llama.cpp: `POST /tokenize {"content"}` → `{"tokens": […]}`.
    LlamaCpp,
    /// llama-cpp-python: `POST /extras/tokenize/count {"input"}` → `{"count"}`.
    LlamaCppPython,
    /// vLLM: `POST /tokenize {"model", "messages"}` → `{"count"}` (its chat template included).
    Vllm,
}

/// What the run uses for a provider, after the config and the server have had their say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Used {
    /// The context requests are fitted to; `None` when neither the config nor the server says.
    pub context_tokens: Option<usize>,
    /// The most requests in flight to this provider.
    pub max_concurrency: usize,
}

/// What was learned of one provider's server, as the session journals it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    pub provider: String,
    pub model: String,
    /// The server recognised, if any.
    pub server: Option<ServerKind>,
    /// The context of one request, as the server reports it (a llama.cpp slot's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<usize>,
    /// Requests the server processes at once (llama.cpp's slots; llama-cpp-python's one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<usize>,
    /// How it counts tokens exactly, when it offers to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenize: Option<Tokenize>,
    /// Prompts beyond its context are cut silently, not refused (Ollama's OpenAI endpoint).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncates: bool,
    /// Where each fact came from: `GET /props: n_ctx 2048, total_slots 1`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// What the run uses.
    pub used: Used,
    /// Where the config and the server disagree, or a fact had to be assumed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Facts {
    /// One line for a run's notes and the providers check: `local (m): llama.cpp says context 2048,
    /// 1 slot, exact token counts (/tokenize); requests fitted to 2048 tokens, at most 1 in flight`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.context_tokens {
            parts.push(format!("context {n}"));
        }
        if let Some(n) = self.slots {
            parts.push(format!("{n} slot{}", if n == 1 { "" } else { "s" }));
        }
        if let Some(t) = self.tokenize {
            parts.push(format!("exact token counts ({})", tokenize_path(t)));
        }
        let said = match (self.sources.is_empty(), self.server) {
            // Nothing answered the probes: what is known comes from the preset, if anything.
            (true, Some(kind)) => format!(
                "the server (a {} server, by its preset) said nothing about itself",
                kind.name()
            ),
            (true, None) => "the server said nothing about itself".to_string(),
            (false, kind) => format!(
                "{} says {}",
                kind.map_or("the server", ServerKind::name),
                if parts.is_empty() {
                    "nothing more".to_string()
                } else {
                    parts.join(", ")
                }
            ),
        };
        let context = self.used.context_tokens.map_or("no context limit known".into(), |n| {
            format!("requests fitted to {n} tokens")
        });
        format!(
            "{} ({}): {said}; {context}, at most {} in flight",
            self.provider, self.model, self.used.max_concurrency
        )
    }
}

fn tokenize_path(t: Tokenize) -> &'static str {
    match t {
        Tokenize::LlamaCpp | Tokenize::Vllm => "/tokenize",
        Tokenize::LlamaCppPython => "/extras/tokenize/count",
    }
}

/// llama-cpp-python's default `n_ctx` (its server settings), assumed when it is the server and the
/// config states no context: it reports none.
pub const LLAMA_CPP_PYTHON_CONTEXT: usize = 2048;

/// The smallest default context Ollama has used, assumed when a model's parameters state no
/// `num_ctx`: its OpenAI endpoint cuts longer prompts silently.
pub const OLLAMA_DEFAULT_CONTEXT: usize = 2048;

/// The server's root: the base URL without its `/v1`.
pub fn root(base_url: &str) -> &str {
    let url = base_url.trim_end_matches('/');
    url.strip_suffix("/v1").unwrap_or(url)
}

/// The servers worth probing for `config`: the one its preset names, else every self-hosted kind.
fn candidates(config: &ProviderConfig) -> Vec<ServerKind> {
    match config.server {
        Some(ServerKind::Api) => Vec::new(),
        Some(kind) => vec![kind],
        None => vec![
            ServerKind::LlamaCpp,
            ServerKind::Vllm,
            ServerKind::Ollama,
            ServerKind::LmStudio,
            ServerKind::LlamaCppPython,
        ],
    }
}

/// One probe's finding.
#[derive(Debug, Default, Clone, PartialEq)]
struct Finding {
    server: Option<ServerKind>,
    context: Option<usize>,
    slots: Option<usize>,
    tokenize: Option<Tokenize>,
    truncates: bool,
    source: String,
    warning: Option<String>,
}

/// `/props` of llama-server: each slot's context (`default_generation_settings.n_ctx`, or `n_ctx` in
/// older builds) and `total_slots`.
pub fn llama_props(v: &Value) -> Option<(Option<usize>, Option<usize>)> {
    let ctx = v
        .pointer("/default_generation_settings/n_ctx")
        .or_else(|| v.get("n_ctx"))
        .and_then(Value::as_u64)
        .map(|n| n as usize);
    let slots = v.get("total_slots").and_then(Value::as_u64).map(|n| n as usize);
    (ctx.is_some() || slots.is_some()).then_some((ctx, slots))
}

/// `max_model_len` of `model` in vLLM's `/v1/models` (of the only model, when the id differs).
pub fn vllm_max_len(v: &Value, model: &str) -> Option<usize> {
    let data = v.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))?;
    entry.get("max_model_len").and_then(Value::as_u64).map(|n| n as usize)
}

/// Ollama's `/api/show`: the `num_ctx` its parameters state, if any (`None` inside when the model
/// runs at the server's default), or `None` when the body is not Ollama's.
pub fn ollama_num_ctx(v: &Value) -> Option<Option<usize>> {
    if v.get("parameters").is_none() && v.get("model_info").is_none() && v.get("modelfile").is_none() {
        return None;
    }
    let stated = v.get("parameters").and_then(Value::as_str).and_then(|p| {
        p.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx"))
                .then(|| words.next()?.parse().ok())
                .flatten()
        })
    });
    Some(stated)
}

/// LM Studio's `/api/v0/models/<id>`: the context the model is loaded with, else its largest.
pub fn lmstudio_context(v: &Value) -> Option<usize> {
    v.get("loaded_context_length")
        .or_else(|| v.get("max_context_length"))
        .and_then(Value::as_u64)
        .map(|n| n as usize)
}

/// Asks one kind of server about itself; `None` when it is not that kind (or says nothing).
async fn ask(
    http: &reqwest::Client,
    config: &ProviderConfig,
    key: Option<&Secret>,
    kind: ServerKind,
    timeout: Duration,
) -> Option<Finding> {
    let root = root(&config.base_url);
    let get = |url: String| {
        let mut r = http.get(url).timeout(timeout);
        if let Some(k) = key {
            r = r.bearer_auth(k.expose());
        }
        r
    };
    let post = |url: String, body: Value| {
        let mut r = http.post(url).timeout(timeout).json(&body);
        if let Some(k) = key {
            r = r.bearer_auth(k.expose());
        }
        r
    };
    let json_of = |r: reqwest::RequestBuilder| async move {
        let response = r.send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let bytes = response.bytes().await.ok()?;
        serde_json::from_slice::<Value>(&bytes[..bytes.len().min(4 << 20)]).ok()
    };
    match kind {
        ServerKind::LlamaCpp => {
            let props = json_of(get(format!("{root}/props"))).await?;
            let (ctx, slots) = llama_props(&props)?;
            Some(Finding {
                server: Some(kind),
                context: ctx,
                slots,
                tokenize: Some(Tokenize::LlamaCpp),
                source: format!(
                    "GET /props: n_ctx {}, total_slots {}",
                    ctx.map_or("–".into(), |n| n.to_string()),
                    slots.map_or("–".into(), |n| n.to_string())
                ),
                ..Finding::default()
            })
        }
        ServerKind::Vllm => {
            let models = json_of(get(format!("{}/models", config.base_url))).await?;
            let len = vllm_max_len(&models, &config.model)?;
            Some(Finding {
                server: Some(kind),
                context: Some(len),
                tokenize: Some(Tokenize::Vllm),
                source: format!("GET /v1/models: max_model_len {len}"),
                ..Finding::default()
            })
        }
        ServerKind::Ollama => {
            let show = json_of(post(format!("{root}/api/show"), json!({"model": config.model}))).await?;
            let stated = ollama_num_ctx(&show)?;
            let (context, source, warning) = match stated {
                Some(n) => (Some(n), format!("POST /api/show: num_ctx {n}"), None),
                None => (
                    None,
                    "POST /api/show: no num_ctx (the server's default applies)".to_string(),
                    Some(format!(
                        "Ollama does not say the context {} runs with: assuming {OLLAMA_DEFAULT_CONTEXT}, the \
                         smallest default Ollama has used (its OpenAI endpoint cuts longer prompts without a \
                         word). Set num_ctx in the model's Modelfile, or OLLAMA_CONTEXT_LENGTH, and state it as \
                         context_tokens",
                        config.model
                    )),
                ),
            };
            Some(Finding {
                server: Some(kind),
                context,
                truncates: true,
                source,
                warning,
                ..Finding::default()
            })
        }
        ServerKind::LmStudio => {
            let model = json_of(get(format!("{root}/api/v0/models/{}", config.model))).await?;
            let ctx = lmstudio_context(&model)?;
            Some(Finding {
                server: Some(kind),
                context: Some(ctx),
                source: format!("GET /api/v0/models/{}: context {ctx}", config.model),
                ..Finding::default()
            })
        }
        ServerKind::LlamaCppPython => {
            let count = json_of(post(
                format!("{root}/extras/tokenize/count"),
                json!({"input": "probe", "model": config.model}),
            ))
            .await?;
            count.get("count")?.as_u64()?;
            Some(Finding {
                server: Some(kind),
                context: None,
                slots: Some(1),
                tokenize: Some(Tokenize::LlamaCppPython),
                source: "POST /extras/tokenize/count: llama-cpp-python (one request at a time)".into(),
                ..Finding::default()
            })
        }
        ServerKind::Api => None,
    }
}

/// Probes `config`'s server within `budget` (each probe at most `budget`, all at once) and decides
/// what the run uses. A provider whose preset names a hosted API, or whose server answers none of
/// the probes, keeps its config's values.
pub async fn learn(http: &reqwest::Client, config: &ProviderConfig, key: Option<&Secret>, budget: Duration) -> Facts {
    let kinds = candidates(config);
    let asks = kinds.iter().map(|&kind| ask(http, config, key, kind, budget));
    let found: Vec<Finding> = tokio::time::timeout(budget, futures_util::future::join_all(asks))
        .await
        .map(|all| all.into_iter().flatten().collect())
        .unwrap_or_default();
    // The first recognised, in the order of `candidates` (llama.cpp's /props is the most specific).
    let finding = found.into_iter().next().unwrap_or_else(|| Finding {
        server: config.server.filter(|k| *k != ServerKind::Api),
        ..Finding::default()
    });
    decide(config, finding)
}

/// What the run uses, given the config and what the server said.
fn decide(config: &ProviderConfig, f: Finding) -> Facts {
    let mut warnings: Vec<String> = f.warning.into_iter().collect();
    // What the server said, else what it is known to run with.
    let mut context = f.context;
    if context.is_none() && f.server == Some(ServerKind::LlamaCppPython) && config.context_tokens.is_none() {
        context = Some(LLAMA_CPP_PYTHON_CONTEXT);
        warnings.push(format!(
            "llama-cpp-python does not report its context: assuming its default n_ctx {LLAMA_CPP_PYTHON_CONTEXT}; \
             state context_tokens if the server was started with another --n_ctx"
        ));
    }
    if context.is_none() && f.server == Some(ServerKind::Ollama) && config.context_tokens.is_none() {
        // Ollama cuts what does not fit without a word: the smallest context it may run with.
        context = Some(OLLAMA_DEFAULT_CONTEXT);
        if warnings.is_empty() {
            warnings.push(format!(
                "Ollama did not say the context {} runs with: assuming {OLLAMA_DEFAULT_CONTEXT}; state \
                 context_tokens (its num_ctx)",
                config.model
            ));
        }
    }
    let used_context = match (config.context_tokens, f.context) {
        (Some(mine), Some(theirs)) if mine > theirs => {
            warnings.push(format!(
                "context_tokens = {mine} in the config exceeds the {theirs} the server reports: requests are \
                 fitted to {mine}, as configured, and the server may refuse or cut them"
            ));
            Some(mine)
        }
        (Some(mine), _) => Some(mine),
        (None, _) => context,
    };
    let max_concurrency = match (config.concurrency_stated, f.slots) {
        (true, Some(slots)) if config.max_concurrency > slots => {
            warnings.push(format!(
                "max_concurrency = {} in the config exceeds the server's {slots} slot(s): {} requests are sent \
                 at once, as configured, and the server queues or interrupts the rest",
                config.max_concurrency, config.max_concurrency
            ));
            config.max_concurrency
        }
        (false, Some(slots)) => slots.min(config.max_concurrency).max(1),
        _ => config.max_concurrency,
    };
    Facts {
        provider: config.name.clone(),
        model: config.model.clone(),
        server: f.server,
        context_tokens: f.context,
        slots: f.slots,
        tokenize: f.tokenize,
        truncates: f.truncates,
        sources: (!f.source.is_empty()).then_some(f.source).into_iter().collect(),
        used: Used {
            context_tokens: used_context,
            max_concurrency,
        },
        warnings,
    }
}

/// The exact prompt tokens of `messages`, counted by the server, or `None` when it cannot say in
/// `timeout`. Tokenizers that see only text get the messages' contents joined, plus the chat
/// template's allowance per message ([`TEMPLATE_PER_MESSAGE`]).
pub async fn count(
    http: &reqwest::Client,
    config: &ProviderConfig,
    key: Option<&Secret>,
    how: Tokenize,
    messages: &[Value],
    timeout: Duration,
) -> Option<usize> {
    let root = root(&config.base_url);
    let text = || {
        messages
            .iter()
            .filter_map(|m| m.get("content").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let template = TEMPLATE_FIXED + TEMPLATE_PER_MESSAGE * messages.len();
    let (url, body) = match how {
        Tokenize::LlamaCpp => (format!("{root}/tokenize"), json!({"content": text()})),
        Tokenize::LlamaCppPython => (
            format!("{root}/extras/tokenize/count"),
            json!({"input": text(), "model": config.model}),
        ),
        Tokenize::Vllm => (
            format!("{root}/tokenize"),
            json!({"model": config.model, "messages": messages}),
        ),
    };
    let mut r = http.post(url).timeout(timeout).json(&body);
    if let Some(k) = key {
        r = r.bearer_auth(k.expose());
    }
    let response = r.send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let v: Value = response.json().await.ok()?;
    match how {
        Tokenize::LlamaCpp => Some(v.get("tokens")?.as_array()?.len() + template),
        Tokenize::LlamaCppPython => Some(v.get("count")?.as_u64()? as usize + template),
        Tokenize::Vllm => Some(v.get("count")?.as_u64()? as usize),
    }
}

/// Tokens a chat template adds around each message (role markers, separators), at most.
pub const TEMPLATE_PER_MESSAGE: usize = 8;
/// Tokens a chat template adds once (the generation prompt, a default system line), at most.
pub const TEMPLATE_FIXED: usize = 16;

/// A close upper estimate of the tokens `text` takes in a model's tokenizer, with no tokenizer at
/// hand: every run of ASCII letters a token per 4 letters (common words are one token; rare ones a
/// few), every digit and every other ASCII mark a token, a line break with the indent after it a
/// token, and every other character two (byte-level vocabularies spend two or three on a CJK
/// character that is not among their merges). Measured against a real tokenizer in the tests.
pub fn estimate_text(text: &str) -> usize {
    let mut tokens = 0;
    let mut letters = 0usize;
    let mut after_break = false;
    for c in text.chars() {
        if c.is_ascii_alphabetic() {
            letters += 1;
            after_break = false;
            continue;
        }
        tokens += letters.div_ceil(4);
        letters = 0;
        if c == '\n' || c == '\r' {
            if !after_break {
                tokens += 1;
            }
            after_break = true;
        } else if c.is_whitespace() {
            // A space joins the word after it; an indent joins the line break before it.
        } else {
            after_break = false;
            tokens += if c.is_ascii() { 1 } else { 2 };
        }
    }
    tokens + letters.div_ceil(4)
}

/// How much [`estimate_text`] is inflated before a request is judged to fit: the margin for
/// tokenizers that split more finely than it assumes.
pub const MARGIN: f64 = 1.1;

/// The estimated prompt tokens of `request` as sent: its messages, the chat template's allowance,
/// and its schema when it goes in the prompt (or in a grammar, which some servers count).
pub fn estimate(request: &ChatRequest) -> usize {
    let mut raw: usize = request.messages.iter().map(|m| estimate_text(&m.content)).sum();
    if let Some(schema) = &request.schema {
        raw += estimate_text(&schema.instruction());
        if !request.messages.iter().any(|m| m.role == Speaker::System) {
            raw += TEMPLATE_PER_MESSAGE;
        }
    }
    (raw as f64 * MARGIN).ceil() as usize + TEMPLATE_FIXED + TEMPLATE_PER_MESSAGE * request.messages.len()
}

/// Room kept for the reply when a request states no cap.
pub const DEFAULT_REPLY_ROOM: usize = 256;

/// The tokens a request's reply may take, as far as the context is concerned.
pub fn reply_room(request: &ChatRequest) -> usize {
    request.sampling.max_tokens.map_or(DEFAULT_REPLY_ROOM, |n| n as usize)
}

/// A server's refusal of a prompt too long for its context, with the numbers it gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Refusal {
    pub prompt_tokens: Option<usize>,
    pub context_tokens: Option<usize>,
}

/// The first number after `marker` in `text` (digits with optional thousands separators).
fn number_after(text: &str, marker: &str) -> Option<usize> {
    let at = text.find(marker)? + marker.len();
    let digits: String = text[at..]
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether an error (its message, and the error body's `code`) is a context refusal, as:
/// llama.cpp ("request (P tokens) exceeds the available context size (C tokens)",
/// `exceed_context_size_error`), vLLM and OpenAI ("This model's maximum context length is C tokens.
/// However, you requested P tokens", `context_length_exceeded`), llama-cpp-python ("Requested tokens
/// (P) exceed context window of C") and LM Studio ("the model is loaded with context length of only
/// C tokens").
pub fn context_refusal(message: &str, code: Option<&str>) -> Option<Refusal> {
    let m = message.to_lowercase();
    let known = m.contains("exceeds the available context size")
        || m.contains("exceed_context_size")
        || m.contains("maximum context length")
        || m.contains("exceed context window")
        || m.contains("context length of only")
        || m.contains("context_length_exceeded")
        || code.is_some_and(|c| c.contains("context_length_exceeded") || c.contains("exceed_context_size"));
    if !known {
        return None;
    }
    let context = number_after(&m, "available context size")
        .or_else(|| number_after(&m, "maximum context length is"))
        .or_else(|| number_after(&m, "context window of"))
        .or_else(|| number_after(&m, "context length of only"));
    let prompt = number_after(&m, "request (")
        .or_else(|| number_after(&m, "you requested"))
        .or_else(|| number_after(&m, "requested tokens ("))
        .or_else(|| number_after(&m, "resulted in"))
        .or_else(|| number_after(&m, "keep the first"));
    Some(Refusal {
        prompt_tokens: prompt,
        context_tokens: context,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProviderKind;

    fn config(server: Option<ServerKind>) -> ProviderConfig {
        let mut c = ProviderConfig::new("local", ProviderKind::Openai, "http://127.0.0.1:8080/v1", "m");
        c.server = server;
        c
    }

    #[test]
    fn the_root_drops_v1() {
        assert_eq!(root("http://h:8080/v1"), "http://h:8080");
        assert_eq!(root("http://h:8080/v1/"), "http://h:8080");
        assert_eq!(root("http://h:8080"), "http://h:8080");
    }

    #[test]
    fn each_servers_self_description_is_read() {
        let props = json!({"default_generation_settings": {"n_ctx": 2048}, "total_slots": 4});
        assert_eq!(llama_props(&props), Some((Some(2048), Some(4))));
        assert_eq!(llama_props(&json!({"detail": "Not Found"})), None);
        let models = json!({"data": [{"id": "q", "max_model_len": 4096}, {"id": "r", "max_model_len": 8}]});
        assert_eq!(vllm_max_len(&models, "q"), Some(4096));
        assert_eq!(
            vllm_max_len(&json!({"data": [{"id": "x", "max_model_len": 8}]}), "q"),
            Some(8)
        );
        assert_eq!(
            vllm_max_len(&json!({"data": [{"id": "x"}]}), "x"),
            None,
            "OpenAI's own list"
        );
        let show = json!({"parameters": "num_ctx                        8192\nstop \"<|im_end|>\"", "model_info": {}});
        assert_eq!(ollama_num_ctx(&show), Some(Some(8192)));
        assert_eq!(ollama_num_ctx(&json!({"parameters": "stop \"x\""})), Some(None));
        assert_eq!(ollama_num_ctx(&json!({"error": "nope"})), None);
        assert_eq!(
            lmstudio_context(&json!({"max_context_length": 32768, "loaded_context_length": 4096})),
            Some(4096)
        );
    }

    #[test]
    fn learned_slots_and_context_are_defaults_and_the_config_wins() {
        let found = Finding {
            server: Some(ServerKind::LlamaCpp),
            context: Some(2048),
            slots: Some(1),
            ..Finding::default()
        };
        let facts = decide(&config(None), found.clone());
        assert_eq!(
            facts.used,
            Used {
                context_tokens: Some(2048),
                max_concurrency: 1
            }
        );
        assert!(facts.warnings.is_empty());
        let mut mine = config(None);
        mine.max_concurrency = 4;
        mine.concurrency_stated = true;
        mine.context_tokens = Some(4096);
        let facts = decide(&mine, found);
        assert_eq!(
            facts.used,
            Used {
                context_tokens: Some(4096),
                max_concurrency: 4
            }
        );
        assert_eq!(facts.warnings.len(), 2, "{:?}", facts.warnings);
        assert!(facts.warnings[0].contains("exceeds the 2048"));
        assert!(facts.warnings[1].contains("1 slot(s)"));
    }

    #[test]
    fn llama_cpp_python_is_assumed_at_its_default_context_and_one_at_a_time() {
        let found = Finding {
            server: Some(ServerKind::LlamaCppPython),
            slots: Some(1),
            ..Finding::default()
        };
        let facts = decide(&config(None), found);
        assert_eq!(facts.used.context_tokens, Some(LLAMA_CPP_PYTHON_CONTEXT));
        assert_eq!(facts.used.max_concurrency, 1);
        assert!(facts.warnings[0].contains("does not report its context"));
    }

    #[test]
    fn a_hosted_api_is_not_probed() {
        assert!(candidates(&config(Some(ServerKind::Api))).is_empty());
        assert_eq!(candidates(&config(Some(ServerKind::Vllm))), vec![ServerKind::Vllm]);
        assert_eq!(candidates(&config(None)).len(), 5);
    }

    #[test]
    fn context_refusals_are_recognised_in_each_servers_words() {
        let cases = [
            (
                "request (2086 tokens) exceeds the available context size (2048 tokens), try increasing it",
                None,
                (Some(2086), Some(2048)),
            ),
            (
                "This model's maximum context length is 2048 tokens. However, you requested 2086 tokens \
                 (1900 in the messages, 186 in the completion). Please reduce the length of the messages or completion.",
                None,
                (Some(2086), Some(2048)),
            ),
            (
                "This model's maximum context length is 128000 tokens. However, your messages resulted in \
                 130,512 tokens. Please reduce the length of the messages.",
                Some("context_length_exceeded"),
                (Some(130_512), Some(128_000)),
            ),
            (
                "Requested tokens (2086) exceed context window of 2048",
                None,
                (Some(2086), Some(2048)),
            ),
            (
                "Trying to keep the first 2500 tokens when context the overflows. However, the model is loaded \
                 with context length of only 2048 tokens, which is not enough.",
                None,
                (Some(2500), Some(2048)),
            ),
        ];
        for (message, code, (prompt, context)) in cases {
            let r = context_refusal(message, code).unwrap_or_else(|| panic!("{message}"));
            assert_eq!((r.prompt_tokens, r.context_tokens), (prompt, context), "{message}");
        }
        assert_eq!(context_refusal("Internal Server Error", None), None);
        assert_eq!(context_refusal("rate limited: too many tokens per minute", None), None);
        assert!(context_refusal("bad", Some("context_length_exceeded")).is_some());
    }

    #[test]
    fn the_estimate_counts_words_marks_and_wide_characters() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("the cat"), 2);
        assert_eq!(estimate_text("Hermione,"), 3);
        assert_eq!(estimate_text("{\n  \"12\": 3\n}"), 10);
        assert_eq!(estimate_text("我很健谈"), 8);
        let mut r = ChatRequest::new(vec![crate::llm::ChatMessage::user("the cat")]);
        assert_eq!(estimate(&r), 3 + TEMPLATE_FIXED + TEMPLATE_PER_MESSAGE);
        r.sampling.max_tokens = Some(100);
        assert_eq!(reply_room(&r), 100);
    }
}
