//! What the fake says: role-play filler text, the scripted replies, and JSON made up from the
//! request's schema (in range, deterministic for a seed).

use serde_json::{Value, json};

use incharacter::domain::rng::SplitMix64;

use super::FakeConfig;

/// Pieces of about one word (each keeps its trailing space), as a tokenizer would stream them.
pub fn split_tokens(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        let cjk = ('\u{4e00}'..='\u{9fff}').contains(&c)
            || ('\u{3000}'..='\u{303f}').contains(&c)
            || ('\u{ff00}'..='\u{ffef}').contains(&c);
        if c == ' ' || c == '\n' || cjk {
            tokens.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

const ROLE_PLAY: &[&str] = &[
    "Well, that depends on the company I keep.",
    "I suppose I do enjoy a good conversation, though I pick my moments.",
    "Honestly, I have never thought about it quite like that.",
    "When I am among friends I can talk for hours; with strangers I listen first.",
    "I like to plan things properly before I start.",
    "Some days I surprise even myself.",
    "I would rather act than talk about acting.",
    "People tell me I worry too much, and perhaps they are right.",
];
const ROLE_PLAY_ZH: &[&str] = &[
    "这要看和谁在一起。",
    "说实话，我很少这样想。",
    "和朋友在一起时我话很多。",
    "我做事喜欢先想清楚。",
    "有时候连我自己都觉得意外。",
];

pub(crate) fn reply_for(config: &FakeConfig, request: &Value, key: &str) -> String {
    let last_user = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    if let Some(rule) = config.script.iter().find(|r| last_user.contains(&r.contains)) {
        return rule.reply.clone();
    }
    let mut rng = SplitMix64(u64::from_str_radix(&key[..16], 16).unwrap_or(0) ^ config.seed);
    if let Some(schema) = request.pointer("/response_format/json_schema/schema") {
        let mut reply = generate(schema, &mut rng, 0);
        if let Some(key) = &config.out_of_range_key
            && let Some(value) = reply.get_mut(key)
        {
            *value = json!(99);
        }
        return reply.to_string();
    }
    // Prompt-only JSON (structured_output = false): the schema is quoted in the system prompt.
    let system = request
        .pointer("/messages/0/content")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(schema) = system
        .split("JSON Schema:\n")
        .nth(1)
        .and_then(|s| serde_json::from_str::<Value>(s.trim()).ok())
    {
        return generate(&schema, &mut rng, 0).to_string();
    }
    let chinese = last_user.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
    let pool = if chinese { ROLE_PLAY_ZH } else { ROLE_PLAY };
    let n = 2 + rng.below(3);
    (0..n)
        .map(|_| pool[rng.below(pool.len())])
        .collect::<Vec<_>>()
        .join(if chinese { "" } else { " " })
}

/// A numeric bound of a schema node: the keyword, or as a schema without bounds says it in its
/// description (`minimum 1, maximum 5`), which a model reads as well.
fn bound(schema: &Value, name: &str) -> Option<f64> {
    schema.get(name).and_then(Value::as_f64).or_else(|| {
        let description = schema.get("description")?.as_str()?;
        let at = description.find(&format!("{name} "))? + name.len() + 1;
        let number: String = description[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-'))
            .collect();
        number.parse().ok()
    })
}

/// A value that conforms to `schema` (objects, arrays, numbers with minimum/maximum, enums, anyOf);
/// `depth` is how deep in the schema this value sits (0 at the top; nesting stops at 8).
pub fn generate(schema: &Value, rng: &mut SplitMix64, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array).filter(|o| !o.is_empty()) {
        return options[rng.below(options.len())].clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array).filter(|o| !o.is_empty()) {
            // Mostly the first branch (a real answer); now and then another (e.g. a refusal).
            let pick = if rng.below(10) < 8 { 0 } else { rng.below(options.len()) };
            return generate(&options[pick], rng, depth + 1);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::Array(types)) => types
            .iter()
            .find(|t| *t != "null")
            .and_then(Value::as_str)
            .unwrap_or("null"),
        Some(Value::String(t)) => t.as_str(),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    let (min, max) = (bound(schema, "minimum"), bound(schema, "maximum"));
    match kind {
        "object" => {
            let mut out = serde_json::Map::new();
            // Two percentages (a 16Personalities rating of both poles) are made to sum to 100.
            if let Some(props) = schema.get("properties").and_then(Value::as_object).filter(|p| {
                p.len() == 2
                    && p.values().all(|v| {
                        v["type"] == "number" && bound(v, "minimum") == Some(0.0) && bound(v, "maximum") == Some(100.0)
                    })
            }) {
                let first = (rng.below(21) * 5) as f64;
                let mut keys = props.keys();
                out.insert(keys.next().cloned().unwrap_or_default(), json!(first));
                out.insert(keys.next().cloned().unwrap_or_default(), json!(100.0 - first));
                return Value::Object(out);
            }
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    out.insert(name.clone(), generate(sub, rng, depth + 1));
                }
            }
            Value::Object(out)
        }
        "array" => {
            let n = schema.get("minItems").and_then(Value::as_u64).unwrap_or(1).max(1) as usize;
            let item = schema.get("items").cloned().unwrap_or(json!({}));
            Value::Array((0..n).map(|_| generate(&item, rng, depth + 1)).collect())
        }
        "integer" => {
            let (lo, hi) = (min.unwrap_or(1.0).ceil() as i64, max.unwrap_or(5.0).floor() as i64);
            json!(lo + rng.below((hi - lo + 1).max(1) as usize) as i64)
        }
        "number" => {
            let (lo, hi) = (min.unwrap_or(0.0), max.unwrap_or(1.0));
            let steps = 10usize;
            json!(lo + (hi - lo) * rng.below(steps + 1) as f64 / steps as f64)
        }
        "boolean" => json!(rng.below(2) == 1),
        "null" => Value::Null,
        _ => json!(ROLE_PLAY[rng.below(ROLE_PLAY.len())]),
    }
}
