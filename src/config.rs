//! The workbench's `config.toml`: which servers exist, how to reach them, which one plays the
//! role-playing agent, the judge and the observers, how each role samples, and the TUI's theme and key
//! bindings. Keys are never stored here: only the name of the environment variable that holds one (or,
//! in a 0600 file, the key itself). It sits below `llm`, which reads it to connect models, and so holds
//! the few words of the model layer a config file states: the roles and the refusals a provider is known
//! to make.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::domain::diagnostic::{Diagnostic, Source};

mod keys;
mod raw;
mod secrets;
use raw::{RawConfig, RawProvider, RawSampling, RawTui};
use secrets::{FRAMING, header_name_ok, header_value_ok, private_file};
pub use secrets::{MissingKey, Secret, Secrets};

/// The largest config file read: a few providers and key bindings fit in a page.
pub const MAX_CONFIG: u64 = 1024 * 1024;
/// The provider every role uses when nothing else is configured: the embedded local model.
pub const LOCAL_PROVIDER: &str = "local";
/// The provider added automatically when `OPENAI_API_KEY` is set.
pub const OPENAI_PROVIDER: &str = "openai";

/// Context of the embedded llama-family models: the positions a local llama's prompts are budgeted
/// to, whatever the GGUF says (SmolLM2's says 8,192).
pub const LLAMA_CONTEXT: usize = 4096;

/// The part of the workbench a request serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The role-playing agent being interviewed.
    Rpa,
    /// The interviewer LLM that rates and converts answers.
    Judge,
    /// Observer agents.
    Observer,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Rpa, Role::Judge, Role::Observer];

    pub fn name(self) -> &'static str {
        match self {
            Role::Rpa => "rpa",
            Role::Judge => "judge",
            Role::Observer => "observer",
        }
    }
}

/// What a provider refused, and so what is changed in every later request to it. (`llm::adapt` names
/// it `Kind` and adapts requests to it; it is defined here because a config may state it up front.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// `max_tokens` is sent as `max_completion_tokens`.
    MaxCompletionTokens,
    /// No temperature is sent: the provider's fixed one applies.
    FixedTemperature,
    /// Schemas go without numeric and length bounds; replies are checked locally instead.
    NoNumericBounds,
    /// The schema goes as `response_format` `json_object` and is described in the prompt (a server
    /// that takes no `json_schema`, such as llama-cpp-python's).
    JsonObject,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Any server speaking the OpenAI `/v1/chat/completions` API.
    Openai,
    /// The embedded GGUF model.
    Local,
}

impl ProviderKind {
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Local => "local",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheMode {
    #[default]
    ReadWrite,
    ReadOnly,
    Off,
}

/// The kinds of server behind a base URL (a preset's or an entry's `server`): which probes apply
/// on first contact (the server module asks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ServerKind {
    /// llama.cpp's `llama-server`.
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// `python -m llama_cpp.server`.
    #[serde(rename = "llama-cpp-python")]
    LlamaCppPython,
    #[serde(rename = "vllm")]
    Vllm,
    #[serde(rename = "ollama")]
    Ollama,
    #[serde(rename = "lmstudio")]
    LmStudio,
    /// A hosted API: it says nothing of itself, and nothing is probed.
    #[serde(rename = "api")]
    Api,
}

impl ServerKind {
    pub const ALL: [ServerKind; 6] = [
        ServerKind::LlamaCpp,
        ServerKind::LlamaCppPython,
        ServerKind::Vllm,
        ServerKind::Ollama,
        ServerKind::LmStudio,
        ServerKind::Api,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ServerKind::LlamaCpp => "llama.cpp",
            ServerKind::LlamaCppPython => "llama-cpp-python",
            ServerKind::Vllm => "vllm",
            ServerKind::Ollama => "ollama",
            ServerKind::LmStudio => "lmstudio",
            ServerKind::Api => "api",
        }
    }

    pub fn parse(name: &str) -> Option<ServerKind> {
        ServerKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderConfig {
    pub name: String,
    pub kind: ProviderKind,
    pub base_url: String,
    pub model: String,
    pub api_key_env: Option<String>,
    #[serde(skip)]
    pub api_key: Option<Secret>,
    pub max_concurrency: usize,
    /// Whether the config (or the preset) states `max_concurrency`: then it wins over the slots a
    /// server reports; else the server's slots are the default.
    #[serde(skip)]
    pub concurrency_stated: bool,
    /// The kind of server behind the base URL, when a preset or the entry names it (`server =
    /// "llama.cpp"`): only its probes are tried; `api` probes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerKind>,
    pub timeout_connect_s: f64,
    pub timeout_first_token_s: f64,
    pub timeout_idle_s: f64,
    pub max_retries: u32,
    /// First retry waits about this long; each further retry doubles it (with jitter).
    pub retry_base_ms: u64,
    pub structured_output: bool,
    pub price_in_per_mtok: f64,
    pub price_out_per_mtok: f64,
    /// The model's context in tokens, if smaller than the work asks for (e.g. Ollama's `num_ctx`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<usize>,
    /// The provider's rate limits, if known: requests are paced to stay under them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u64>,
    #[serde(skip)]
    pub headers: BTreeMap<String, String>,
    /// Refusals the config states up front (`max_tokens_param`, `temperature = "fixed"`,
    /// `schema_dialect = "no-numeric-bounds"`): adapted to from the first request, and journaled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stated: Vec<Refusal>,
    /// `schema_dialect = "json-object"`: `response_format` is `{"type": "json_object"}` and the schema
    /// is described in the prompt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json_object: bool,
    /// How often a run in batch mode (`run --batch`) asks the Batch API how its batch is doing.
    pub batch_poll_ms: u64,
}

impl ProviderConfig {
    /// The context known before the model is reached: `context_tokens` if set, else the embedded
    /// model's for a `local` provider (a run asks the loaded model itself, and that number wins).
    pub fn known_context(&self) -> Option<usize> {
        self.context_tokens
            .or_else(|| (self.kind == ProviderKind::Local).then_some(LLAMA_CONTEXT))
    }

    pub fn new(name: &str, kind: ProviderKind, base_url: &str, model: &str) -> Self {
        ProviderConfig {
            name: name.into(),
            kind,
            base_url: base_url.trim_end_matches('/').into(),
            model: model.into(),
            api_key_env: None,
            api_key: None,
            max_concurrency: 8,
            concurrency_stated: false,
            server: None,
            timeout_connect_s: 10.0,
            timeout_first_token_s: 120.0,
            timeout_idle_s: 60.0,
            max_retries: 4,
            retry_base_ms: 500,
            structured_output: true,
            price_in_per_mtok: 0.0,
            price_out_per_mtok: 0.0,
            context_tokens: None,
            batch_poll_ms: 10_000,
            requests_per_minute: None,
            tokens_per_minute: None,
            headers: BTreeMap::new(),
            stated: Vec::new(),
            json_object: false,
        }
    }

    /// The provider as a check asks it: within `budget_s` seconds in all, so short timeouts and at
    /// most one retry, soon after the failure.
    pub fn hurried(&self, budget_s: f64) -> ProviderConfig {
        let mut p = self.clone();
        p.timeout_connect_s = p.timeout_connect_s.min(2.0).min(budget_s);
        p.timeout_first_token_s = p.timeout_first_token_s.min(budget_s);
        p.timeout_idle_s = p.timeout_idle_s.min(budget_s);
        p.max_retries = p.max_retries.min(1);
        p.retry_base_ms = p.retry_base_ms.min(250);
        p
    }

    /// The key to send, from the config file or the named environment variable.
    pub fn resolve_key(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Secret>, MissingKey> {
        if let Some(key) = &self.api_key {
            return Ok(Some(key.clone()));
        }
        match &self.api_key_env {
            None => Ok(None),
            Some(var) => match env(var) {
                Some(value) if !value.trim().is_empty() => {
                    let value = value.trim();
                    // A line break or another control character cannot go in a header: every
                    // request would fail as if the server could not be reached.
                    if !header_value_ok(value) {
                        return Err(MissingKey {
                            provider: self.name.clone(),
                            var: var.clone(),
                            unusable: true,
                        });
                    }
                    Ok(Some(Secret::new(value.to_string())))
                }
                _ => Err(MissingKey {
                    provider: self.name.clone(),
                    var: var.clone(),
                    unusable: false,
                }),
            },
        }
    }

    /// Whether the key's environment variable is set (for listings; the key itself is never shown).
    pub fn key_present(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<bool> {
        if self.api_key.is_some() {
            return Some(true);
        }
        self.api_key_env
            .as_ref()
            .map(|var| env(var).is_some_and(|v| !v.trim().is_empty()))
    }
}

/// `preset = "<name>"` in a `[[providers]]` entry: a base URL and the refusals a provider is known to
/// make, from `assets/providers.toml`. The entry's own keys win over the preset's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    pub name: String,
    pub base_url: Option<String>,
    pub max_tokens_param: Option<String>,
    pub temperature: Option<String>,
    pub schema_dialect: Option<String>,
    /// The kind of server (`llama.cpp`, `llama-cpp-python`, `vllm`, `ollama`, `lmstudio`, or `api` for a
    /// hosted API): which probes apply on first contact.
    pub server: Option<String>,
    /// Requests the server takes at once, when it is known not to say (llama-cpp-python: 1).
    pub max_concurrency: Option<usize>,
}

/// The bundled presets, with a comment giving the source of each fact.
pub const PRESETS_TOML: &str = include_str!("../assets/providers.toml");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetFile {
    presets: Vec<Preset>,
}

/// The bundled presets (the file is checked by the tests, so a parse failure cannot ship).
pub fn presets() -> &'static [Preset] {
    static PRESETS: std::sync::OnceLock<Vec<Preset>> = std::sync::OnceLock::new();
    PRESETS.get_or_init(|| {
        toml::from_str::<PresetFile>(PRESETS_TOML)
            .map(|f| f.presets)
            .unwrap_or_default()
    })
}

/// A quirk key's value and where it was stated: the entry's own key, else the preset's value
/// (located at the `preset` key).
fn stated_or_preset(
    own: &Option<Spanned<String>>,
    preset: Option<(&Option<String>, std::ops::Range<usize>)>,
) -> Option<(String, std::ops::Range<usize>)> {
    match own {
        Some(v) => Some((v.get_ref().clone(), v.span())),
        None => preset.and_then(|(value, span)| value.clone().map(|v| (v, span))),
    }
}

/// The embedded model the default configuration uses.
pub const DEFAULT_LOCAL_MODEL: &str = "smollm2-135m";

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub providers: Vec<ProviderConfig>,
    pub roles: BTreeMap<Role, String>,
    pub cache: CacheMode,
    /// Requests in flight across all providers.
    pub max_concurrency: usize,
    /// `max_cost`: the most, in USD at the providers' prices, a run may spend (`run --max-cost`).
    pub max_cost: Option<f64>,
    /// `[sampling.<role>]`: sampling a role's requests use unless the command line says otherwise.
    pub sampling: BTreeMap<Role, RoleSampling>,
    pub tui: TuiConfig,
}

/// `[sampling.rpa]` / `[sampling.judge]`: `temperature` (0–2) and, for the role-playing agent,
/// `max_tokens` (the answer cap).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RoleSampling {
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
}

/// The `[tui]` section: the theme and key bindings (checked by the TUI, which knows the actions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TuiConfig {
    pub theme: Option<String>,
    pub keys: Vec<KeyBinding>,
}

/// `[tui.keys.<screen>] "<key>" = "<action>"`, with where it was written for error messages.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyBinding {
    pub screen: String,
    /// Where the screen's name was written.
    pub screen_at: Diagnostic,
    pub key: String,
    pub action: String,
    pub at: Diagnostic,
}

impl Config {
    /// The configuration with no file: the local model for every role, plus an `openai` provider when
    /// `OPENAI_API_KEY` is set.
    pub fn defaults(env: &dyn Fn(&str) -> Option<String>) -> Config {
        let mut local = ProviderConfig::new(LOCAL_PROVIDER, ProviderKind::Local, "", DEFAULT_LOCAL_MODEL);
        // One model on the CPU: the requests in flight are decoded side by side, eight at most.
        local.max_concurrency = 8;
        let mut providers = vec![local];
        if env("OPENAI_API_KEY").is_some_and(|k| !k.trim().is_empty()) {
            let mut openai = ProviderConfig::new(
                OPENAI_PROVIDER,
                ProviderKind::Openai,
                "https://api.openai.com/v1",
                "gpt-4o-mini",
            );
            openai.api_key_env = Some("OPENAI_API_KEY".into());
            openai.price_in_per_mtok = 0.15;
            openai.price_out_per_mtok = 0.60;
            providers.push(openai);
        }
        let roles = Role::ALL.iter().map(|&r| (r, LOCAL_PROVIDER.to_string())).collect();
        Config {
            providers,
            roles,
            cache: CacheMode::ReadWrite,
            max_concurrency: 64,
            max_cost: None,
            sampling: BTreeMap::new(),
            tui: TuiConfig::default(),
        }
    }

    /// The user's config: `$INCHARACTER_CONFIG`, else `config.toml` in the platform's config dir
    /// (defaults when there is none), with keys from the environment.
    pub fn load_user() -> Result<Config, ConfigError> {
        let path = crate::paths::config_file().ok_or(ConfigError::NoLocation)?;
        let env = |k: &str| std::env::var(k).ok();
        Config::load(&path, &env).map_err(ConfigError::Invalid)
    }

    /// Reads the config file if it exists (a regular file of at most [`MAX_CONFIG`] bytes), else the
    /// defaults.
    pub fn load(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, Vec<Diagnostic>> {
        use crate::files::FileError;
        let name = path.display().to_string();
        match crate::files::read_text_limited(path, MAX_CONFIG, "a config file") {
            Ok(text) => Config::parse(Source::new(&name, &text), private_file(path), env),
            Err(FileError::Read { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
                Ok(Config::defaults(env))
            }
            // Located once, where the bytes are (not at 1:1 with the place again in the message).
            Err(FileError::NotUtf8 { line, column, .. }) => Err(vec![Diagnostic {
                file: name,
                line,
                column,
                message: "not UTF-8 text".into(),
            }]),
            Err(e) => Err(vec![
                Source::new(&name, "").whole(format!("cannot read the config file: {e}")),
            ]),
        }
    }

    /// Parses a config file. `private` says whether only its owner can read it (0600), the only case
    /// in which a literal `api_key` is accepted.
    pub fn parse(
        source: Source<'_>,
        private: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, Vec<Diagnostic>> {
        let raw: RawConfig = toml::from_str(source.text).map_err(|e| {
            let mut located = source.toml_error(&e);
            located.message = without_strings(&located.message);
            vec![located]
        })?;
        let mut config = Config::defaults(env);
        let mut reader = Reader {
            source,
            private,
            errors: Vec::new(),
        };
        if let Some(cache) = raw.cache {
            config.cache = cache;
        }
        if let Some(tui) = raw.tui {
            reader.tui(&mut config.tui, tui);
        }
        reader.limits(&mut config, raw.max_concurrency, raw.max_cost);
        reader.providers(&mut config.providers, raw.providers);
        reader.sampling(&mut config.sampling, raw.sampling);
        reader.roles(&mut config, raw.roles);
        if reader.errors.is_empty() {
            Ok(config)
        } else {
            Err(reader.errors)
        }
    }

    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
    }

    pub fn provider_for(&self, role: Role) -> Option<&ProviderConfig> {
        self.roles.get(&role).and_then(|n| self.provider(n))
    }
}

/// Reading one config file, a section at a time: the text (to locate a mistake) and every mistake
/// found so far, so that one pass reports them all.
struct Reader<'a> {
    source: Source<'a>,
    /// Whether only the file's owner can read it: a literal `api_key` is accepted only then.
    private: bool,
    errors: Vec<Diagnostic>,
}

impl Reader<'_> {
    fn error(&mut self, span: std::ops::Range<usize>, message: impl Into<String>) {
        self.errors.push(self.source.at(span, message));
    }

    /// `[tui]`: the theme and the key bindings, each binding located for the checks made later.
    fn tui(&mut self, out: &mut TuiConfig, tui: RawTui) {
        out.theme = tui.theme;
        for (screen, keys) in tui.keys {
            let screen_at = self.source.at(screen.span(), "");
            let screen = screen.into_inner();
            for (key, action) in keys {
                out.keys.push(KeyBinding {
                    screen: screen.clone(),
                    screen_at: screen_at.clone(),
                    at: self.source.at(key.span(), ""),
                    key: key.into_inner(),
                    action: action.into_inner(),
                });
            }
        }
    }

    /// A `max_concurrency`, 1 to [`MAX_CONCURRENCY`].
    fn concurrency(&mut self, n: &Spanned<usize>) -> usize {
        if !(1..=MAX_CONCURRENCY).contains(n.get_ref()) {
            self.error(
                n.span(),
                format!("max_concurrency is a number of requests in flight, 1 to {MAX_CONCURRENCY}"),
            );
        }
        (*n.get_ref()).clamp(1, MAX_CONCURRENCY)
    }

    /// The top-level `max_concurrency` and `max_cost`.
    fn limits(&mut self, config: &mut Config, max_concurrency: Option<Spanned<usize>>, max_cost: Option<Spanned<f64>>) {
        if let Some(n) = max_concurrency {
            config.max_concurrency = self.concurrency(&n);
        }
        if let Some(c) = &max_cost {
            if !(*c.get_ref() > 0.0 && c.get_ref().is_finite()) {
                self.error(c.span(), "max_cost is USD > 0");
            }
            config.max_cost = Some(*c.get_ref());
        }
    }

    /// `[[providers]]`: each entry replaces a default provider of the same name or adds one; a name
    /// may be given once.
    fn providers(&mut self, providers: &mut Vec<ProviderConfig>, raw: Vec<RawProvider>) {
        let mut seen = BTreeMap::new();
        for p in raw {
            let name = p.name.get_ref().trim().to_string();
            if name.is_empty() {
                self.error(p.name.span(), "provider name is empty");
                continue;
            }
            // Typed on the command line: what cannot be seen could not be typed back.
            if name
                .chars()
                .any(|c| crate::text::acts_on_terminal(c) || crate::text::shows_nothing(c))
            {
                self.error(
                    p.name.span(),
                    "a provider name holds no control or invisible character (it is typed on the command line)",
                );
                continue;
            }
            if seen.insert(name.clone(), ()).is_some() {
                self.error(p.name.span(), format!("a second provider named \"{name}\""));
                continue;
            }
            let c = self.provider(name, p);
            match providers.iter().position(|x| x.name == c.name) {
                Some(i) => providers[i] = c,
                None => providers.push(c),
            }
        }
    }

    /// One `[[providers]]` entry, over its preset's values.
    fn provider(&mut self, name: String, p: RawProvider) -> ProviderConfig {
        let kind = *p.kind.get_ref();
        let preset = self.preset(p.preset.as_ref());
        let preset_url = preset.as_ref().and_then(|(x, _)| x.base_url.as_deref());
        let mut c = ProviderConfig::new(
            &name,
            kind,
            p.base_url.as_ref().map_or(preset_url.unwrap_or(""), |u| u.get_ref()),
            p.model.as_deref().unwrap_or_default(),
        );
        if kind == ProviderKind::Local {
            // The embedded model is reached by no URL, key or header: one given would be ignored
            // while the entry seemed to say where the model is.
            if let Some(u) = &p.base_url {
                self.error(
                    u.span(),
                    format!("provider \"{name}\" is kind local (the embedded model): it has no base_url"),
                );
            }
            if let Some(k) = &p.api_key {
                self.error(
                    k.span(),
                    format!("provider \"{name}\" is kind local (the embedded model): it takes no api_key"),
                );
            }
            if p.api_key_env.is_some() || !p.headers.is_empty() {
                self.error(
                    p.name.span(),
                    format!("provider \"{name}\" is kind local (the embedded model): it takes no api_key_env or headers"),
                );
            }
            if c.model.trim().is_empty() {
                c.model = DEFAULT_LOCAL_MODEL.into();
            }
        }
        if kind == ProviderKind::Openai {
            match &p.base_url {
                // A preset that names no known one has been said to be wrong already: its URL is
                // not missing as well.
                None if preset_url.is_some() || (p.preset.is_some() && preset.is_none()) => {}
                None => self.error(
                    p.name.span(),
                    format!("provider \"{name}\": base_url is required (e.g. http://localhost:11434/v1)"),
                ),
                // The URL is never repeated in these errors: it may hold a secret.
                Some(u) => match reqwest::Url::parse(u.get_ref()) {
                    Err(e) => self.error(u.span(), format!("base_url is not a URL: {e}")),
                    // Shown wherever the URL is (errors, logs, `providers`): a secret does not go there.
                    Ok(url) if !url.username().is_empty() || url.password().is_some() => self.error(
                        u.span(),
                        "base_url holds a user name or password, which would be shown wherever the URL is; \
                         put the key in an environment variable named by api_key_env",
                    ),
                    Ok(url) if !matches!(url.scheme(), "http" | "https") => {
                        self.error(u.span(), "base_url must start with http:// or https://")
                    }
                    // Requests go to base_url + "/chat/completions": a query or a fragment would end
                    // up in the middle of every one (and a key in it, wherever the URL is shown).
                    Ok(url) if url.query().is_some() || url.fragment().is_some() => self.error(
                        u.span(),
                        "base_url ends at its path (e.g. http://localhost:8000/v1): no ?query or #fragment, \
                         which would be shown wherever the URL is; a key goes in the variable named by api_key_env",
                    ),
                    Ok(_) => {}
                },
            }
            if c.model.trim().is_empty() {
                self.error(p.name.span(), format!("provider \"{name}\": model is required"));
            }
            // Shown without it everywhere, sent with it: a server's "no such model" would name a
            // model the user cannot see.
            if c.model.chars().any(crate::text::acts_on_terminal) {
                self.error(
                    p.name.span(),
                    format!("provider \"{name}\": model {:?} holds a control character", c.model),
                );
            }
        }
        self.keys(&mut c, &p, &name);
        if let Some(n) = preset.as_ref().and_then(|(x, _)| x.max_concurrency) {
            c.max_concurrency = n.max(1);
            c.concurrency_stated = true;
        }
        if let Some(n) = &p.max_concurrency {
            c.max_concurrency = self.concurrency(n);
            c.concurrency_stated = true;
        }
        self.server(&mut c, &p, preset.clone());
        self.pacing(&mut c, &p);
        for (header, value) in &p.headers {
            if !header_name_ok(header.get_ref()) {
                self.error(
                    header.span(),
                    format!(
                        "\"{}\" cannot name a header: letters, digits and !#$%&'*+-.^_`|~ only",
                        header.get_ref().escape_debug()
                    ),
                );
            } else if let Some(framing) = FRAMING.iter().find(|f| f.eq_ignore_ascii_case(header.get_ref())) {
                // A Content-Length of another body made every request fail with "the body is not JSON".
                self.error(
                    header.span(),
                    format!("header {framing} is written by the client for each request: it cannot be set here"),
                );
            } else if !header_value_ok(value.get_ref()) {
                self.error(
                    value.span(),
                    format!(
                        "header {}: a line break or another control character cannot go in a header",
                        header.get_ref()
                    ),
                );
            } else if !self.private && secrets::credential(header.get_ref()) {
                // A key by another name: held to an api_key's rule.
                self.error(
                    value.span(),
                    format!(
                        "header {} carries a credential: it is accepted only if the config file is private (chmod \
                         600), as an api_key is",
                        header.get_ref()
                    ),
                );
            }
        }
        c.headers = p.headers.iter().map(|(k, v)| (k.get_ref().clone(), v.get_ref().clone())).collect();
        self.quirks(&mut c, &p, preset);
        c
    }

    /// The preset an entry names, located at its `preset` key; an unknown name is a mistake.
    fn preset(&mut self, named: Option<&Spanned<String>>) -> Option<(&'static Preset, std::ops::Range<usize>)> {
        let n = named?;
        match presets().iter().find(|x| x.name == *n.get_ref()) {
            Some(found) => Some((found, n.span())),
            None => {
                let names: Vec<&str> = presets().iter().map(|x| x.name.as_str()).collect();
                self.error(
                    n.span(),
                    format!("unknown preset \"{}\" (presets: {})", n.get_ref(), names.join(", ")),
                );
                None
            }
        }
    }

    /// The kind of server, from the entry or its preset.
    fn server(
        &mut self,
        c: &mut ProviderConfig,
        p: &RawProvider,
        preset: Option<(&'static Preset, std::ops::Range<usize>)>,
    ) {
        let server = p
            .server
            .as_ref()
            .map(|s| (s.get_ref().clone(), s.span()))
            .or_else(|| preset.and_then(|(x, span)| Some((x.server.clone()?, span))));
        if let Some((name, span)) = server {
            match ServerKind::parse(&name) {
                Some(kind) => c.server = Some(kind),
                None => {
                    let known: Vec<&str> = ServerKind::ALL.iter().map(|k| k.name()).collect();
                    self.error(
                        span,
                        format!("unknown server \"{name}\" (servers: {})", known.join(", ")),
                    );
                }
            }
        }
    }

    /// Timeouts, retries, polling, prices, context and rate limits of one entry.
    fn pacing(&mut self, c: &mut ProviderConfig, p: &RawProvider) {
        for (value, field) in [
            (&p.timeout_connect_s, &mut c.timeout_connect_s),
            (&p.timeout_first_token_s, &mut c.timeout_first_token_s),
            (&p.timeout_idle_s, &mut c.timeout_idle_s),
        ] {
            if let Some(v) = value {
                if !(*v.get_ref() > 0.0 && *v.get_ref() <= MAX_TIMEOUT_S) {
                    self.error(
                        v.span(),
                        format!("timeouts are seconds, more than 0 and at most {MAX_TIMEOUT_S} (a day)"),
                    );
                }
                *field = *v.get_ref();
            }
        }
        if let Some(v) = p.max_retries {
            c.max_retries = v;
        }
        // Waits in milliseconds, bounded: a typo of a few zeros would leave a run asleep for days.
        for (value, field, name, most, what) in [
            (&p.retry_base_ms, &mut c.retry_base_ms, "retry_base_ms", MAX_RETRY_BASE_MS, "a minute"),
            (&p.batch_poll_ms, &mut c.batch_poll_ms, "batch_poll_ms", MAX_BATCH_POLL_MS, "an hour"),
        ] {
            if let Some(v) = value {
                let ms = *v.get_ref();
                if !(1..=most).contains(&ms) {
                    self.error(v.span(), format!("{name} must be at least 1 and at most {most} ({what})"));
                }
                *field = ms.clamp(1, most);
            }
        }
        if let Some(v) = p.structured_output {
            c.structured_output = v;
        }
        for (value, field) in [
            (&p.price_in_per_mtok, &mut c.price_in_per_mtok),
            (&p.price_out_per_mtok, &mut c.price_out_per_mtok),
        ] {
            if let Some(v) = value {
                // A negative price would make every estimate and the cost cap meaningless.
                if !(*v.get_ref() >= 0.0 && v.get_ref().is_finite()) {
                    self.error(v.span(), "prices are USD per million tokens, 0 or more");
                }
                *field = *v.get_ref();
            }
        }
        if let Some(n) = &p.context_tokens {
            if *n.get_ref() < 1024 {
                self.error(n.span(), "context_tokens must be at least 1024");
            }
            c.context_tokens = Some(*n.get_ref());
        }
        if let Some(n) = &p.requests_per_minute {
            if *n.get_ref() == 0 {
                self.error(n.span(), "requests_per_minute must be at least 1");
            }
            c.requests_per_minute = Some(*n.get_ref());
        }
        if let Some(n) = &p.tokens_per_minute {
            if *n.get_ref() == 0 {
                self.error(n.span(), "tokens_per_minute must be at least 1");
            }
            c.tokens_per_minute = Some(*n.get_ref());
        }
    }

    /// The refusals a provider is stated to make (`max_tokens_param`, `temperature`, `schema_dialect`),
    /// from the entry or else its preset.
    fn quirks(
        &mut self,
        c: &mut ProviderConfig,
        p: &RawProvider,
        preset: Option<(&'static Preset, std::ops::Range<usize>)>,
    ) {
        let from_preset =
            |field: fn(&Preset) -> &Option<String>| preset.as_ref().map(|(x, span)| (field(x), span.clone()));
        if let Some((v, span)) = stated_or_preset(&p.max_tokens_param, from_preset(|x| &x.max_tokens_param)) {
            match v.as_str() {
                "max_tokens" => {}
                "max_completion_tokens" => c.stated.push(Refusal::MaxCompletionTokens),
                other => self.error(
                    span,
                    format!("max_tokens_param \"{other}\": max_tokens or max_completion_tokens"),
                ),
            }
        }
        if let Some((v, span)) = stated_or_preset(&p.temperature, from_preset(|x| &x.temperature)) {
            match v.as_str() {
                "free" => {}
                "fixed" => c.stated.push(Refusal::FixedTemperature),
                other => self.error(span, format!("temperature \"{other}\": fixed or free")),
            }
        }
        if let Some((v, span)) = stated_or_preset(&p.schema_dialect, from_preset(|x| &x.schema_dialect)) {
            match v.as_str() {
                "openai-strict" => {}
                "no-numeric-bounds" => c.stated.push(Refusal::NoNumericBounds),
                "json-object" => c.json_object = true,
                "prompt-only" => c.structured_output = false,
                other => self.error(
                    span,
                    format!("schema_dialect \"{other}\": openai-strict, no-numeric-bounds, json-object or prompt-only"),
                ),
            }
        }
    }

    /// `[sampling.<role>]`: temperature for any role, an answer cap for the agent's only.
    fn sampling(&mut self, out: &mut BTreeMap<Role, RoleSampling>, raw: BTreeMap<Spanned<String>, RawSampling>) {
        for (role, sampling) in raw {
            let Some(r) = self.role(&role) else {
                continue;
            };
            let mut one = RoleSampling::default();
            if let Some(t) = sampling.temperature {
                if !(0.0..=2.0).contains(t.get_ref()) {
                    self.error(t.span(), "temperature must be between 0 and 2");
                }
                one.temperature = Some(*t.get_ref());
            }
            if let Some(n) = sampling.max_tokens {
                if r != Role::Rpa {
                    self.error(n.span(), "max_tokens is set for the rpa role only (its answer cap)");
                } else if *n.get_ref() == 0 {
                    self.error(n.span(), "max_tokens must be at least 1");
                }
                one.max_tokens = Some(*n.get_ref());
            }
            out.insert(r, one);
        }
    }

    /// `[roles]`: which provider plays each role; it must be one the config knows.
    fn roles(&mut self, config: &mut Config, raw: BTreeMap<Spanned<String>, Spanned<String>>) {
        for (role, provider) in raw {
            let Some(role) = self.role(&role) else {
                continue;
            };
            if !config.providers.iter().any(|p| p.name == *provider.get_ref()) {
                let names: Vec<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
                // The default openai provider exists only while its key is set.
                let openai = if provider.get_ref() == "openai" {
                    "; the provider openai is there only while OPENAI_API_KEY is set: export it, or add a \
                     [[providers]] entry named openai"
                } else {
                    ""
                };
                self.error(
                    provider.span(),
                    format!(
                        "role {} names unknown provider \"{}\" (providers: {}){openai}",
                        role.name(),
                        provider.get_ref(),
                        names.join(", ")
                    ),
                );
                continue;
            }
            config.roles.insert(role, provider.into_inner());
        }
    }

    /// A role named as a table key; an unknown name is a mistake.
    fn role(&mut self, name: &Spanned<String>) -> Option<Role> {
        let found = Role::ALL.iter().copied().find(|r| r.name() == name.get_ref());
        if found.is_none() {
            self.error(
                name.span(),
                format!("unknown role \"{}\" (roles: rpa, judge, observer)", name.get_ref()),
            );
        }
        found
    }
}

/// The most requests in flight a config or a command line may ask for.
pub const MAX_CONCURRENCY: usize = 1024;

/// The longest timeout, in seconds.
const MAX_TIMEOUT_S: f64 = 86_400.0;
/// The longest first backoff of a retry, and the longest wait between polls of a batch (ms).
const MAX_RETRY_BASE_MS: u64 = 60_000;
const MAX_BATCH_POLL_MS: u64 = 3_600_000;

/// Whether `name` reads as an environment variable's name: capitals, digits and `_`, not a digit
/// first. (Lower case is refused too: many keys, such as `gsk_…` and `AIza…`, are otherwise made of
/// exactly those characters, and a key pasted here would be shown wherever the name is.)
fn env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// A TOML error's message without the strings it quotes (`invalid type: string "…", expected a
/// map`): a value in the wrong place may be a key, and the location says where it is.
fn without_strings(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find("string \"") {
        out.push_str(&rest[..at]);
        out.push_str("a string");
        let after = &rest[at + "string \"".len()..];
        // The quoted text is Debug-escaped: a quote inside it follows a backslash.
        let mut escaped = false;
        let end = after.char_indices().find(|&(_, c)| {
            let closes = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            closes
        });
        match end {
            Some((i, _)) => rest = &after[i + 1..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// A config file that cannot be used: always the user's to fix (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no config location: set INCHARACTER_CONFIG to a config.toml path")]
    NoLocation,
    #[error("{}", .0.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Diagnostic>),
}

/// A config file the user wrote is at fault.
impl crate::fault::Classify for ConfigError {
    fn fault(&self) -> crate::fault::Fault {
        crate::fault::Fault::Input
    }
}

#[cfg(test)]
mod tests;
