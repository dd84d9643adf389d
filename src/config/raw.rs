//! The config file as TOML gives it, before it is checked: every value with its place in the file.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::{CacheMode, ProviderKind};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) cache: Option<CacheMode>,
    pub(super) max_concurrency: Option<Spanned<usize>>,
    pub(super) max_cost: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) providers: Vec<RawProvider>,
    #[serde(default)]
    pub(super) roles: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    pub(super) sampling: BTreeMap<Spanned<String>, RawSampling>,
    pub(super) tui: Option<RawTui>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSampling {
    pub(super) temperature: Option<Spanned<f32>>,
    pub(super) max_tokens: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTui {
    pub(super) theme: Option<String>,
    #[serde(default)]
    pub(super) keys: BTreeMap<Spanned<String>, BTreeMap<Spanned<String>, Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    pub(super) name: Spanned<String>,
    pub(super) kind: Spanned<ProviderKind>,
    pub(super) preset: Option<Spanned<String>>,
    pub(super) server: Option<Spanned<String>>,
    pub(super) base_url: Option<Spanned<String>>,
    pub(super) model: Option<String>,
    pub(super) api_key_env: Option<Spanned<String>>,
    pub(super) api_key: Option<Spanned<String>>,
    pub(super) max_concurrency: Option<Spanned<usize>>,
    pub(super) timeout_connect_s: Option<Spanned<f64>>,
    pub(super) timeout_first_token_s: Option<Spanned<f64>>,
    pub(super) timeout_idle_s: Option<Spanned<f64>>,
    pub(super) max_retries: Option<u32>,
    pub(super) retry_base_ms: Option<Spanned<u64>>,
    pub(super) batch_poll_ms: Option<Spanned<u64>>,
    pub(super) structured_output: Option<bool>,
    pub(super) price_in_per_mtok: Option<Spanned<f64>>,
    pub(super) price_out_per_mtok: Option<Spanned<f64>>,
    pub(super) context_tokens: Option<Spanned<usize>>,
    pub(super) requests_per_minute: Option<Spanned<u32>>,
    pub(super) tokens_per_minute: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) headers: BTreeMap<Spanned<String>, Spanned<String>>,
    pub(super) max_tokens_param: Option<Spanned<String>>,
    pub(super) temperature: Option<Spanned<String>>,
    pub(super) schema_dialect: Option<Spanned<String>>,
}
