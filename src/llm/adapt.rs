//! Providers as they are: a request a provider refuses in one of the documented ways (a reasoning
//! model's `max_tokens` and fixed temperature, a strict schema subset without numeric and length
//! bounds) is adapted once, the adaptation remembered for that provider and model for the rest of the
//! run, and reported so the session journals it. Until a provider+model's first request has come back,
//! no second one is sent in parallel, so a refusal costs one request, not a wave.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ChatRequest;

/// What a provider refused, and so what is changed in every later request to it. Defined with the
/// config, which may state a refusal up front.
pub use crate::config::Refusal as Kind;

impl Kind {
    /// What the adaptation means for the method, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::MaxCompletionTokens => "max_tokens sent as max_completion_tokens",
            Kind::FixedTemperature => "temperature: fixed by provider",
            Kind::NoNumericBounds => "schemas without numeric and length bounds (checked locally)",
            Kind::JsonObject => "response_format json_object, the schema described in the prompt",
        }
    }
}

/// One adaptation as the session records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adaptation {
    pub provider: String,
    pub model: String,
    pub kind: Kind,
    /// The provider's own words for the refusal.
    pub detail: String,
}

/// The adaptations in force for one provider and model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quirks {
    pub max_completion_tokens: bool,
    pub fixed_temperature: bool,
    pub no_numeric_bounds: bool,
    pub json_object: bool,
}

impl Quirks {
    fn with(mut self, kind: Kind) -> Quirks {
        match kind {
            Kind::MaxCompletionTokens => self.max_completion_tokens = true,
            Kind::FixedTemperature => self.fixed_temperature = true,
            Kind::NoNumericBounds => self.no_numeric_bounds = true,
            Kind::JsonObject => self.json_object = true,
        }
        self
    }

    fn has(self, kind: Kind) -> bool {
        match kind {
            Kind::MaxCompletionTokens => self.max_completion_tokens,
            Kind::FixedTemperature => self.fixed_temperature,
            Kind::NoNumericBounds => self.no_numeric_bounds,
            Kind::JsonObject => self.json_object,
        }
    }

    /// `request` as this provider takes it. The changes are part of the request, so of its cache key.
    pub fn apply(self, request: &ChatRequest) -> ChatRequest {
        let mut r = request.clone();
        if self.max_completion_tokens {
            r.sampling.max_completion_tokens = r.sampling.max_tokens.is_some();
        }
        if self.fixed_temperature {
            r.sampling.temperature = None;
        }
        if self.json_object {
            r.sampling.json_object = r.schema.is_some();
        }
        if self.no_numeric_bounds
            && let Some(schema) = &mut r.schema
        {
            schema.schema = without_bounds(&schema.schema);
        }
        r
    }
}

/// Schema keywords of the numeric and length family: a provider that refuses one refuses them all.
const BOUNDS: [&str; 11] = [
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
];

/// `schema` without any numeric or length bound, at every depth. A node that had bounds says them in
/// its `description` instead (`minimum 1, maximum 5`), which strict subsets allow and models read.
pub fn without_bounds(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let said: Vec<String> = BOUNDS
                .iter()
                .filter_map(|b| map.get(*b).map(|v| format!("{b} {v}")))
                .collect();
            let mut out: serde_json::Map<String, Value> = map
                .iter()
                .filter(|(k, _)| !BOUNDS.contains(&k.as_str()))
                .map(|(k, v)| {
                    // Inside `properties`, keys are property names, which may be called "minimum".
                    let v = match (k.as_str(), v) {
                        ("properties", Value::Object(props)) => {
                            Value::Object(props.iter().map(|(p, s)| (p.clone(), without_bounds(s))).collect())
                        }
                        _ => without_bounds(v),
                    };
                    (k.clone(), v)
                })
                .collect();
            if !said.is_empty() {
                let before = out.get("description").and_then(Value::as_str).map(str::to_string);
                let text = match before {
                    Some(d) => format!("{d} ({})", said.join(", ")),
                    None => said.join(", "),
                };
                out.insert("description".into(), Value::String(text));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(without_bounds).collect()),
        other => other.clone(),
    }
}

/// What a 400 refuses, if it is one of the documented refusals of something `request` sent: by the
/// error's `param` and `code` first, its message second.
pub fn recognise(request: &ChatRequest, param: Option<&str>, code: Option<&str>, message: &str) -> Option<Kind> {
    let m = message.to_lowercase();
    let unsupported = m.contains("unsupported") || m.contains("not supported") || m.contains("does not support");
    if request.sampling.max_tokens.is_some()
        && !request.sampling.max_completion_tokens
        && (param == Some("max_tokens") || m.contains("max_completion_tokens"))
    {
        return Some(Kind::MaxCompletionTokens);
    }
    if request.sampling.temperature.is_some()
        && (param == Some("temperature") || (m.contains("temperature") && unsupported))
    {
        return Some(Kind::FixedTemperature);
    }
    // llama-cpp-python's validation error (a 500, frames appended): "Input should be 'text' or
    // 'json_object'".
    if request.schema.is_some()
        && !request.sampling.json_object
        && message.contains("json_object")
        && (message.contains("Input should be") || m.contains("json_schema"))
    {
        return Some(Kind::JsonObject);
    }
    let schema_error = code.is_some_and(|c| c.contains("schema"))
        || m.contains("schema")
        || param.is_some_and(|p| p.contains("response_format"));
    let names_a_bound = BOUNDS
        .iter()
        .any(|b| message.contains(&format!("'{b}'")) || message.contains(b));
    if request.schema.is_some() && schema_error && names_a_bound {
        return Some(Kind::NoNumericBounds);
    }
    None
}

#[derive(Default)]
struct Entry {
    quirks: Quirks,
}

/// Whether a request of one shape to one provider and model has come back (until then, one at a time).
#[derive(Default)]
struct Gate {
    opened: bool,
    lock: Arc<tokio::sync::Mutex<()>>,
}

/// What a provider may refuse in a request: its schema, its token cap, its temperature. Requests of
/// the same shape meet the same refusals.
pub fn shape(request: &ChatRequest) -> String {
    let s = &request.sampling;
    format!(
        "{}{}{}",
        if request.schema.is_some() { "schema " } else { "" },
        if s.max_tokens.is_some() { "cap " } else { "" },
        if s.temperature.is_some() { "temperature" } else { "" }
    )
}

/// The adaptations of a run, shared by every client.
#[derive(Default)]
pub struct Adapter {
    entries: Mutex<BTreeMap<(String, String), Entry>>,
    gates: Mutex<BTreeMap<(String, String, String), Gate>>,
    /// Adaptations not yet journaled.
    fresh: Mutex<Vec<Adaptation>>,
    /// Every adaptation of the run.
    all: Mutex<Vec<Adaptation>>,
}

impl Adapter {
    /// Starts from adaptations a session already recorded (a resume does not meet them again).
    pub fn known(&self, recorded: &[Adaptation]) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        for a in recorded {
            let e = entries.entry((a.provider.clone(), a.model.clone())).or_default();
            e.quirks = e.quirks.with(a.kind);
        }
        self.all
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(recorded.iter().cloned());
    }

    pub fn quirks(&self, provider: &str, model: &str) -> Quirks {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(&(provider.to_string(), model.to_string()))
            .map_or_else(Quirks::default, |e| e.quirks)
    }

    /// The gate a request of `shape` must pass while none of that shape to this provider and model
    /// has come back.
    pub fn gate(&self, provider: &str, model: &str, shape: &str) -> Option<Arc<tokio::sync::Mutex<()>>> {
        let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
        let g = gates
            .entry((provider.to_string(), model.to_string(), shape.to_string()))
            .or_default();
        (!g.opened).then(|| g.lock.clone())
    }

    /// A request of `shape` came back (or failed in a way adaptation cannot help): requests of that
    /// shape go in parallel now.
    pub fn open(&self, provider: &str, model: &str, shape: &str) {
        let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
        gates
            .entry((provider.to_string(), model.to_string(), shape.to_string()))
            .or_default()
            .opened = true;
    }

    /// Records an adaptation; false if it was already in force (another request adapted first).
    pub fn adapt(&self, provider: &str, model: &str, kind: Kind, detail: &str) -> bool {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let e = entries.entry((provider.to_string(), model.to_string())).or_default();
        if e.quirks.has(kind) {
            return false;
        }
        e.quirks = e.quirks.with(kind);
        let a = Adaptation {
            provider: provider.to_string(),
            model: model.to_string(),
            kind,
            detail: detail.chars().take(300).collect(),
        };
        tracing::warn!(provider, model, kind = ?kind, detail, "adapted to the provider");
        self.fresh.lock().unwrap_or_else(|p| p.into_inner()).push(a.clone());
        self.all.lock().unwrap_or_else(|p| p.into_inner()).push(a);
        true
    }

    /// Adaptations made since the last call (for the journal).
    pub fn take_fresh(&self) -> Vec<Adaptation> {
        std::mem::take(&mut *self.fresh.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Every adaptation of the run.
    pub fn all(&self) -> Vec<Adaptation> {
        self.all.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ChatMessage, ResponseSchema};
    use serde_json::json;

    fn judge_request() -> ChatRequest {
        let mut r = ChatRequest::new(vec![ChatMessage::user("rate")]);
        r.sampling.temperature = Some(0.0);
        r.sampling.max_tokens = Some(300);
        r.schema = Some(ResponseSchema::new("x", json!({"type": "object", "properties": {
                "minimum": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 5}, {"enum": ["x"]}]},
                "analysis": {"type": "string", "maxLength": 9}},
                "required": ["minimum", "analysis"], "additionalProperties": false})));
        r
    }

    #[test]
    fn documented_refusals_are_recognised_by_param_first_then_message() {
        let r = judge_request();
        assert_eq!(
            recognise(&r, Some("max_tokens"), Some("unsupported_parameter"), "whatever"),
            Some(Kind::MaxCompletionTokens)
        );
        assert_eq!(
            recognise(
                &r,
                None,
                None,
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
            ),
            Some(Kind::MaxCompletionTokens)
        );
        assert_eq!(
            recognise(
                &r,
                Some("temperature"),
                Some("unsupported_value"),
                "Only the default (1) value is supported."
            ),
            Some(Kind::FixedTemperature)
        );
        assert_eq!(
            recognise(
                &r,
                Some("response_format"),
                None,
                "Invalid schema for response_format 'x': 'minimum' is not permitted."
            ),
            Some(Kind::NoNumericBounds)
        );
        assert_eq!(recognise(&r, None, None, "The model `gpt-9` does not exist"), None);
        let mut plain = ChatRequest::new(vec![ChatMessage::user("hi")]);
        plain.sampling.temperature = None;
        assert_eq!(
            recognise(&plain, Some("temperature"), None, "unsupported"),
            None,
            "only what the request sent"
        );
    }

    #[test]
    fn a_server_that_takes_json_object_only_is_recognised_and_the_schema_goes_so() {
        let r = judge_request();
        let said = "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), \
                    'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}";
        assert_eq!(recognise(&r, None, None, said), Some(Kind::JsonObject));
        let adapted = Quirks::default().with(Kind::JsonObject).apply(&r);
        assert!(adapted.sampling.json_object);
        assert_eq!(recognise(&adapted, None, None, said), None, "once adapted, not again");
        let mut plain = r.clone();
        plain.schema = None;
        assert!(
            !Quirks::default()
                .with(Kind::JsonObject)
                .apply(&plain)
                .sampling
                .json_object
        );
    }

    #[test]
    fn a_relaxed_schema_has_no_bounds_at_any_depth_and_keeps_property_names() {
        let r = judge_request();
        let relaxed = without_bounds(&r.schema.unwrap().schema);
        let text = relaxed.to_string();
        for b in ["\"maximum\"", "\"maxLength\""] {
            assert!(!text.contains(b), "{text}");
        }
        assert!(relaxed["properties"]["minimum"]["anyOf"][0]["type"] == "integer");
        assert_eq!(
            relaxed["properties"]["minimum"]["anyOf"][0]["description"], "minimum 1, maximum 5",
            "the bounds are said instead"
        );
        assert_eq!(relaxed["required"], json!(["minimum", "analysis"]));
    }

    #[test]
    fn quirks_change_the_request_and_so_its_cache_key() {
        let r = judge_request();
        let q = Quirks::default()
            .with(Kind::FixedTemperature)
            .with(Kind::MaxCompletionTokens);
        let adapted = q.apply(&r);
        assert_eq!(adapted.sampling.temperature, None);
        assert!(adapted.sampling.max_completion_tokens);
        assert_ne!(
            crate::llm::cache::key("u", "m", &r),
            crate::llm::cache::key("u", "m", &adapted)
        );
        assert_eq!(
            crate::llm::cache::key("u", "m", &Quirks::default().apply(&r)),
            crate::llm::cache::key("u", "m", &r),
            "no quirk, the same key as before adaptation existed"
        );
    }

    #[test]
    fn an_adaptation_is_recorded_once_per_provider_and_model() {
        let a = Adapter::default();
        assert!(a.adapt("p", "m", Kind::FixedTemperature, "no"));
        assert!(!a.adapt("p", "m", Kind::FixedTemperature, "no"));
        assert!(a.adapt("p", "other", Kind::FixedTemperature, "no"));
        assert_eq!(a.take_fresh().len(), 2);
        assert!(a.take_fresh().is_empty());
        assert!(a.quirks("p", "m").fixed_temperature);
        assert!(!a.quirks("q", "m").fixed_temperature);
        assert!(a.gate("p", "m", "schema").is_some());
        a.open("p", "m", "schema");
        assert!(a.gate("p", "m", "schema").is_none());
        assert!(
            a.gate("p", "m", "cap").is_some(),
            "another shape waits for its own first reply"
        );
    }
}
