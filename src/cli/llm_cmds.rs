//! `providers`, `providers check` and `chat`: the model layer from the command line.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use futures_util::StreamExt;
use serde_json::json;

use super::table::Table;
use super::{Ctx, input_error};
use crate::config::{CacheMode, Config};
use crate::llm::cache::Cache;
use crate::llm::client::Shared;
use crate::llm::{self, ChatEvent, ChatMessage, ChatModel, ChatRequest, ResponseSchema, Role};

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn shared(config: &Config, cache_mode: CacheMode) -> Shared {
    let cache = crate::paths::data_dir().map(|d| Cache::new(d.join("cache")));
    Shared::new(config.max_concurrency, cache, cache_mode, 0)
}

pub fn list(ctx: &Ctx, json_output: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let config = ctx.config()?;
    if json_output {
        let providers: Vec<_> = config
            .providers
            .iter()
            .map(|p| {
                json!({
                    "name": p.name, "kind": p.kind.name(), "base_url": p.base_url, "model": p.model,
                    "api_key_env": p.api_key_env, "key_present": p.key_present(&env),
                    "max_concurrency": p.max_concurrency, "structured_output": p.structured_output,
                    "roles": Role::ALL.iter().filter(|r| config.roles.get(r) == Some(&p.name)).map(|r| r.name()).collect::<Vec<_>>(),
                })
            })
            .collect();
        writeln!(
            out,
            "{}",
            crate::text::json_pretty(&json!({"providers": providers, "cache": config.cache}))?
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&["name", "kind", "model", "base_url", "key", ">concurrency", "roles"]);
    for p in &config.providers {
        let key = match (&p.api_key_env, p.key_present(&env)) {
            (Some(var), Some(true)) => format!("{var} (set)"),
            (Some(var), _) => format!("{var} (NOT set)"),
            (None, Some(true)) => "in config file".into(),
            (None, _) => "none".into(),
        };
        let roles: Vec<&str> = Role::ALL
            .iter()
            .filter(|r| config.roles.get(r) == Some(&p.name))
            .map(|r| r.name())
            .collect();
        t.row(vec![
            p.name.to_string(),
            p.kind.name().into(),
            p.model.to_string(),
            (if p.base_url.is_empty() { "–" } else { &p.base_url }).to_string(),
            key.to_string(),
            p.max_concurrency.to_string(),
            roles.join(", "),
        ]);
    }
    write!(out, "{}", t.render())?;
    Ok(ExitCode::SUCCESS)
}

/// Which provider `providers check` asks.
pub enum Target {
    /// One of the config's providers, by name.
    Configured(String),
    /// A server by its preset, not in the config.
    Preset {
        preset: String,
        base_url: Option<String>,
        model: String,
    },
}

/// The config `check` connects with, and the name of the provider in it: the user's, or the user's
/// plus a provider `check` made of a preset (parsed as a config entry is, so a preset's facts and
/// a URL's checks apply alike).
fn checked_config(config: &Config, target: &Target) -> anyhow::Result<(Config, String)> {
    match target {
        Target::Configured(name) => {
            if config.provider(name).is_none() {
                let names: Vec<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
                return Err(input_error(format!(
                    "unknown provider \"{}\" (configured: {})",
                    name,
                    names.join(", ")
                )));
            }
            Ok((config.clone(), name.clone()))
        }
        Target::Preset {
            preset,
            base_url,
            model,
        } => {
            let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
            let mut text = format!(
                "[[providers]]\nname = \"check\"\nkind = \"openai\"\npreset = {}\nmodel = {}\n",
                quote(preset),
                quote(model)
            );
            if let Some(url) = base_url {
                text.push_str(&format!("base_url = {}\n", quote(url)));
            }
            let parsed = Config::parse(crate::domain::diagnostic::Source::new("--preset", &text), false, &env)
                .map_err(|errors| {
                    let words: Vec<String> = errors.iter().map(|d| d.message.clone()).collect();
                    input_error(words.join("; "))
                })?;
            let mut merged = config.clone();
            merged.providers.retain(|p| p.name != "check");
            merged.providers.extend(parsed.providers);
            Ok((merged, "check".into()))
        }
    }
}

/// `providers check`: what the server says of itself, one tiny request with a schema (reachable?
/// how fast? structured output?), then the method's own requests — each step said on stderr as it
/// goes, all within `budget_s` seconds (short timeouts, at most one retry).
pub fn check(
    ctx: &Ctx,
    target: &Target,
    budget_s: f64,
    json_output: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let (config, name) = checked_config(ctx.config()?, target)?;
    let mut config = config;
    for p in &mut config.providers {
        if p.name == name {
            *p = p.hurried(budget_s);
        }
    }
    let config = &config;
    let started = std::time::Instant::now();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs_f64(budget_s);
    let say = |line: String| crate::note!("{line}");
    let client = llm::connect(
        config,
        &name,
        shared(config, CacheMode::Off),
        &env,
        crate::paths::data_dir().as_deref(),
    )
    .map_err(anyhow::Error::new)?;
    let info = client.info();
    let base_url = config.provider(&name).map_or(String::new(), |p| p.base_url.clone());
    say(format!(
        "checking {} at {} (at most {budget_s:.0} s)",
        info,
        if base_url.is_empty() {
            "the embedded model"
        } else {
            &base_url
        }
    ));
    say("  asking the server about itself …".into());
    let facts = ctx
        .block_on(async { tokio::time::timeout_at(deadline, client.server()).await })
        .ok()
        .flatten();
    match &facts {
        Some(f) => {
            say(format!("  server: {}", f.summary()));
            for w in &f.warnings {
                say(format!("  warning: {w}"));
            }
        }
        None => say("  server: nothing to ask (the embedded model, or out of time)".into()),
    }
    say("  a tiny request asking for JSON …".into());
    let probe = ctx.block_on(async { tokio::time::timeout_at(deadline, crate::study::check::probe(&client)).await });
    let probe = match probe {
        Ok(p) => p,
        Err(_) => crate::study::check::Probe {
            first: None,
            total: started.elapsed(),
            reply: Err(llm::LlmError::Transport(format!(
                "no reply within the check's {budget_s:.0} s"
            ))),
        },
    };
    let (first, total, result) = (probe.first, probe.total, &probe.reply);
    match result {
        Ok(_) => say(format!("  a tiny request: ok ({:.0} ms)", total.as_secs_f64() * 1000.0)),
        Err(e) => say(format!("  a tiny request: FAILED: {e}")),
    }
    // The method's own requests, each on a fresh client, when the provider answers at all.
    let fresh = || -> anyhow::Result<(std::sync::Arc<dyn ChatModel>, Shared)> {
        let sh = shared(config, CacheMode::Off);
        let c = llm::connect(config, &name, sh.clone(), &env, crate::paths::data_dir().as_deref())
            .map_err(anyhow::Error::new)?;
        Ok((std::sync::Arc::new(c), sh))
    };
    let shapes = match result {
        Ok(_) => {
            say("the method's requests:".into());
            ctx.block_on(crate::study::check::check(&fresh, &*ctx.catalog()?, deadline, &say))?
        }
        Err(_) => Vec::new(),
    };
    say(format!("checked in {:.1} s", started.elapsed().as_secs_f64()));
    let shapes_fail = shapes.iter().any(|v| v.status == "fails");
    let ms = |d: std::time::Duration| (d.as_secs_f64() * 1000.0).round();
    let uses = config.provider(&name).is_some_and(|p| p.structured_output);
    // What the probe's response_format was (json_object carries the schema in the prompt).
    let sent = if config.provider(&name).is_some_and(|p| p.json_object) {
        "response_format json_object, the schema in the prompt"
    } else {
        "response_format json_schema"
    };
    let code = if result.is_ok() && !shapes_fail {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    if json_output {
        let structured = probe.valid_json();
        let report = json!({
            "provider": info.provider, "kind": info.kind, "model": info.model, "base_url": base_url,
            "ok": result.is_ok(),
            "error": result.as_ref().err().map(|e| e.to_string()),
            "first_token_ms": first.map(ms), "total_ms": ms(total),
            "elapsed_ms": ms(started.elapsed()), "budget_s": budget_s,
            "server": facts.as_deref(),
            "structured_output_requested": uses, "valid_json": structured,
            "reply": result.as_ref().ok(),
            "shapes": shapes,
        });
        writeln!(out, "{}", crate::text::json_pretty(&report)?)?;
        return Ok(code);
    }
    human(out, &info, &probe, facts.as_deref(), &shapes, (uses, sent))?;
    Ok(code)
}

/// What `providers check` found, for a person.
fn human(
    out: &mut dyn Write,
    info: &llm::ModelInfo,
    probe: &crate::study::check::Probe,
    facts: Option<&crate::llm::server::Facts>,
    shapes: &[crate::study::check::Verdict],
    (uses, sent): (bool, &str),
) -> anyhow::Result<()> {
    let ms = |d: std::time::Duration| (d.as_secs_f64() * 1000.0).round();
    let (first, total, result) = (probe.first, probe.total, &probe.reply);
    match result {
        Err(e) => {
            writeln!(out, "{}: FAILED after {:.2} s: {}", info, total.as_secs_f64(), e)?;
        }
        Ok(text) => {
            let structured = probe.valid_json() == Some(true);
            writeln!(out, "{}: ok", info)?;
            if let Some(f) = facts {
                writeln!(out, "server: {}", f.summary())?;
            }
            writeln!(
                out,
                "first token: {}",
                first.map_or("–".into(), |d| format!("{:.0} ms", ms(d)))
            )?;
            writeln!(out, "total:       {:.0} ms", ms(total))?;
            let verdict = match (structured, uses) {
                (true, true) => format!("works ({sent})"),
                (true, false) => "works (prompt-only JSON; structured_output = false)".into(),
                (false, true) => "did NOT produce valid JSON: try structured_output = false".into(),
                (false, false) => "did NOT produce valid JSON (prompt-only)".into(),
            };
            writeln!(out, "structured output: {verdict}")?;
            writeln!(out, "reply: {}", text)?;
            writeln!(out, "the method's requests:")?;
            for v in shapes {
                writeln!(
                    out,
                    "  {:<18} {}{}",
                    v.shape,
                    v.status,
                    v.detail.as_ref().map_or(String::new(), |d| format!(": {}", d))
                )?;
            }
        }
    }
    Ok(())
}

/// The largest schema file `chat --schema` reads: a schema is a page of JSON, not a data set.
const MAX_SCHEMA: u64 = 4 * 1024 * 1024;

fn read_schema(path: &Path) -> anyhow::Result<ResponseSchema> {
    let text = crate::files::read_text_limited(path, MAX_SCHEMA, "a JSON Schema file")?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| input_error(crate::files::json_error(path, &text, &e)))?;
    // Either {"name", "schema", "strict"?} or a bare JSON Schema.
    let not_a_schema = |at: String, why: &str| input_error(format!("{}: not a JSON Schema: {at}{why}", path.display()));
    if let (Some(n), Some(schema)) = (value.get("name").and_then(|n| n.as_str()), value.get("schema")) {
        // OpenAI refuses any other name (a 400 after the file was taken): said here.
        let named =
            !n.is_empty() && n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !named {
            return Err(input_error(format!(
                "{}: the schema's name {:?} must be 1 to 64 ASCII letters, digits, `_` or `-` (as OpenAI takes it)",
                path.display(),
                crate::text::visible(n)
            )));
        }
        root_shape(schema, "schema").map_err(|(at, why)| not_a_schema(at, why))?;
        let strict = value.get("strict").and_then(|s| s.as_bool()).unwrap_or(true);
        return Ok(ResponseSchema {
            strict,
            ..ResponseSchema::new(n, schema.clone())
        });
    }
    let stem = path
        .file_stem()
        .map_or("reply".to_string(), |s| s.to_string_lossy().into_owned());
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    root_shape(&value, "").map_err(|(at, why)| not_a_schema(at, why))?;
    Ok(ResponseSchema::new(name, value))
}

/// [`schema_shape`] of a whole schema: an object (`response_format` takes no `true` or `false`).
fn root_shape(schema: &serde_json::Value, at: &str) -> Result<(), (String, &'static str)> {
    if !schema.is_object() {
        let at = if at.is_empty() {
            String::new()
        } else {
            format!("{at}: ")
        };
        return Err((at, "a schema is a JSON object"));
    }
    schema_shape(schema, at)
}

/// Whether `schema` has a JSON Schema's shape where a provider would refuse it otherwise (an object or
/// a boolean; `type` one of its seven types; the same below, in `properties`, `items`, `anyOf`, …):
/// the place (`at`, a path of keys) and why, if not.
fn schema_shape(schema: &serde_json::Value, at: &str) -> Result<(), (String, &'static str)> {
    use serde_json::Value;
    const TYPES: [&str; 7] = ["object", "array", "string", "number", "integer", "boolean", "null"];
    let place = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    let map = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(map) => map,
        _ => {
            let at = if at.is_empty() {
                String::new()
            } else {
                format!("{at}: ")
            };
            return Err((at, "a schema is a JSON object (or true or false)"));
        }
    };
    let known = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
    match map.get("type") {
        None => {}
        Some(Value::Array(types)) if !types.is_empty() && types.iter().all(known) => {}
        Some(t) if known(t) => {}
        Some(_) => {
            return Err((
                format!("{}: ", place("type")),
                "object, array, string, number, integer, boolean or null (or a list of them)",
            ));
        }
    }
    for key in [
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
    ] {
        if let Some(inner @ (Value::Object(_) | Value::Bool(_))) = map.get(key) {
            schema_shape(inner, &place(key))?;
        }
    }
    for key in ["properties", "patternProperties", "$defs", "definitions"] {
        if let Some(Value::Object(named)) = map.get(key) {
            for (name, inner) in named {
                schema_shape(inner, &place(&format!("{key}.{name}")))?;
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(all)) = map.get(key) {
            for (i, inner) in all.iter().enumerate() {
                schema_shape(inner, &place(&format!("{key}[{i}]")))?;
            }
        }
    }
    Ok(())
}

pub struct ChatArgs<'a> {
    pub provider: &'a str,
    pub model: Option<&'a str>,
    pub system: Option<&'a str>,
    pub schema: Option<&'a Path>,
    pub temperature: Option<f32>,
    pub seed: Option<u64>,
    pub cache: Option<CacheMode>,
    pub text: &'a str,
}

/// Streams one reply. On a terminal, tokens appear as they arrive (a retry is announced on stderr and
/// its partial text is marked discarded); into a pipe or file, only the final text is written, so a
/// retried attempt's partial text never reaches a script.
pub fn chat(ctx: &Ctx, args: ChatArgs<'_>, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut config = ctx.config()?.clone();
    if let Some(model) = args.model
        && let Some(p) = config.providers.iter_mut().find(|p| p.name == args.provider)
    {
        p.model = model.to_string();
    }
    let config = &config;
    let mode = args.cache.unwrap_or(config.cache);
    let client = llm::connect(
        config,
        args.provider,
        shared(config, mode),
        &env,
        crate::paths::data_dir().as_deref(),
    )
    .map_err(anyhow::Error::new)?;
    let mut messages = Vec::new();
    if let Some(system) = args.system {
        messages.push(ChatMessage::system(system));
    }
    messages.push(ChatMessage::user(args.text));
    let mut request = ChatRequest::new(messages);
    request.sampling.temperature = args.temperature;
    request.sampling.seed = args.seed;
    request.schema = args.schema.map(read_schema).transpose()?;
    request.meta.purpose = "chat".into();
    let is_json = request.schema.is_some();
    let live = std::io::stdout().is_terminal();
    let result = ctx.block_on(async {
        let mut events = client.stream(request);
        let mut text = String::new();
        while let Some(event) = events.next().await {
            match event {
                ChatEvent::Token(t) => {
                    if live {
                        write!(out, "{}", t)?;
                        out.flush()?;
                    }
                    text.push_str(&t);
                }
                ChatEvent::Retry {
                    attempt,
                    reason,
                    delay_ms,
                    ..
                } => {
                    if live && !text.is_empty() {
                        writeln!(out)?;
                    }
                    crate::note!(
                        "[retry {attempt} in {delay_ms} ms: {}; text so far discarded]",
                        reason.to_string()
                    );
                    text.clear();
                }
                ChatEvent::Usage(_) | ChatEvent::Choices(_) => {}
                ChatEvent::Done { cached, .. } => {
                    if cached {
                        crate::note!("[from the cache]");
                    }
                    return Ok::<_, anyhow::Error>(Ok(text));
                }
                ChatEvent::Error(e) => return Ok(Err(e)),
            }
        }
        Ok(Err(llm::LlmError::Transport("the reply ended without Done".into())))
    })?;
    match result {
        // Which provider failed, as a run's failures say it.
        Err(e) => Err(anyhow::anyhow!("{}: {}", args.provider, e)),
        Ok(text) => {
            if live {
                writeln!(out)?;
            } else {
                write!(out, "{}", text)?;
            }
            if is_json && serde_json::from_str::<serde_json::Value>(&text).is_err() {
                crate::note!("warning: the reply is not valid JSON");
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `providers`: the list, or `providers check` of a configured provider or of a preset's server.
pub fn providers(
    ctx: &Ctx,
    json: bool,
    command: Option<super::ProvidersCommand>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    match command {
        None => list(ctx, json, out),
        Some(super::ProvidersCommand::Check {
            name,
            preset,
            base_url,
            model,
            timeout,
        }) => {
            let target = match (name, preset) {
                (Some(name), _) => Target::Configured(name),
                (None, preset) => Target::Preset {
                    preset: preset.unwrap_or_default(),
                    base_url,
                    model,
                },
            };
            check(ctx, &target, timeout, json, out)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// A wrapped schema's name is one OpenAI takes, or the file is refused before anything is sent.
    #[test]
    fn a_schema_name_openai_would_refuse_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        for (name, ok) in [("bad name!", false), ("", false), ("ok_name-1", true)] {
            std::fs::write(&file, json!({"name": name, "schema": {"type": "object"}}).to_string()).unwrap();
            let read = super::read_schema(&file);
            assert_eq!(read.is_ok(), ok, "{name:?}: {:?}", read.err());
        }
        let long = dir.path().join(format!("{}.json", "x".repeat(80)));
        std::fs::write(&long, json!({"type": "object"}).to_string()).unwrap();
        assert_eq!(super::read_schema(&long).unwrap().name.len(), 64);
    }

    #[test]
    fn what_is_not_a_schema_is_said_where() {
        let shape = |v: serde_json::Value| super::root_shape(&v, "").map_err(|(at, why)| format!("{at}{why}"));
        assert_eq!(shape(json!([1, 2])), Err("a schema is a JSON object".into()));
        assert_eq!(shape(json!(true)), Err("a schema is a JSON object".into()));
        assert_eq!(
            shape(json!({"$defs": {"x": {"type": "int"}}})),
            Err("$defs.x.type: object, array, string, number, integer, boolean or null (or a list of them)".into())
        );
        assert_eq!(
            shape(json!({"type": "nonsense"})),
            Err("type: object, array, string, number, integer, boolean or null (or a list of them)".into())
        );
        assert_eq!(
            shape(json!({"type": "object", "properties": {"a": {"type": "array", "items": 5}}})),
            Ok(()),
            "a value where no schema can be is the provider's to judge"
        );
        assert_eq!(
            shape(json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "int"}]}}})),
            Err(
                "properties.a.anyOf[0].type: object, array, string, number, integer, boolean or null (or a list of \
                 them)"
                    .into()
            )
        );
        assert_eq!(
            shape(json!({"properties": {"a": 5}})),
            Err("properties.a: a schema is a JSON object (or true or false)".into())
        );
        for good in [
            json!({"properties": {"a": true}}),
            json!({}),
            json!({"type": ["string", "null"]}),
            json!({"type": "object", "additionalProperties": false}),
        ] {
            assert_eq!(shape(good.clone()), Ok(()), "{good}");
        }
    }
}
