//! The config file: every field, every mistake located, the presets.
use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

const OLLAMA: &str = r#"
[[providers]]
name = "ollama"
kind = "openai"
base_url = "http://localhost:11434/v1/"
model = "qwen2.5:7b"
max_concurrency = 2
price_in_per_mtok = 0.5

[roles]
rpa = "ollama"
judge = "local"
"#;

#[test]
fn defaults_use_the_local_model_and_add_openai_with_a_key() {
    let c = Config::defaults(&no_env);
    assert_eq!(c.provider_for(Role::Judge).unwrap().kind, ProviderKind::Local);
    let c = Config::defaults(&|v| (v == "OPENAI_API_KEY").then(|| "sk-test".to_string()));
    let openai = c.provider("openai").unwrap();
    assert_eq!(openai.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(c.roles[&Role::Rpa], "local");
}

#[test]
fn parses_providers_and_roles() {
    let c = Config::parse(Source::new("c.toml", OLLAMA), false, &no_env).unwrap();
    let p = c.provider_for(Role::Rpa).unwrap();
    assert_eq!(
        (p.base_url.as_str(), p.max_concurrency, p.price_in_per_mtok),
        ("http://localhost:11434/v1", 2, 0.5)
    );
    assert_eq!(c.provider_for(Role::Observer).unwrap().name, "local");
}

#[test]
fn a_context_size_is_read_and_a_tiny_one_is_located() {
    let text = OLLAMA.replace("max_concurrency = 2", "context_tokens = 4096");
    let c = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
    assert_eq!(c.provider("ollama").unwrap().context_tokens, Some(4096));
    assert_eq!(
        c.provider("local").unwrap().context_tokens,
        None,
        "the local model knows its own"
    );
    let text = OLLAMA.replace("max_concurrency = 2", "context_tokens = 512");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (7, 18));
    assert!(e[0].message.contains("at least 1024"), "{}", e[0]);
}

#[test]
fn a_negative_price_is_located() {
    let text = OLLAMA.replace("max_concurrency = 2", "price_out_per_mtok = -5");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (7, 22));
    assert!(e[0].message.contains("0 or more"), "{}", e[0]);
    let text = OLLAMA.replace("max_concurrency = 2", "price_out_per_mtok = 0");
    let c = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
    assert_eq!(c.provider("ollama").unwrap().price_out_per_mtok, 0.0, "free is a price");
}

#[test]
fn waits_beyond_their_bounds_are_located() {
    let text = OLLAMA.replace("max_concurrency = 2", "retry_base_ms = 0\nbatch_poll_ms = 36000000000");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (7, 17), "{}", e[0]);
    assert!(e[0].message.contains("retry_base_ms must be at least 1 and at most 60000 (a minute)"), "{}", e[0]);
    assert_eq!((e[1].line, e[1].column), (8, 17), "{}", e[1]);
    assert!(e[1].message.contains("batch_poll_ms must be at least 1 and at most 3600000 (an hour)"), "{}", e[1]);
    let text = OLLAMA.replace("max_concurrency = 2", "retry_base_ms = 60000\nbatch_poll_ms = 3600000");
    let c = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
    let p = c.provider("ollama").unwrap();
    assert_eq!((p.retry_base_ms, p.batch_poll_ms), (60_000, 3_600_000));
}

#[test]
fn rate_limits_are_read_and_bad_ones_located() {
    let text = OLLAMA.replace(
        "max_concurrency = 2",
        "requests_per_minute = 500\ntokens_per_minute = 200000",
    );
    let c = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
    let p = c.provider("ollama").unwrap();
    assert_eq!((p.requests_per_minute, p.tokens_per_minute), (Some(500), Some(200_000)));
    assert_eq!(c.provider("local").unwrap().requests_per_minute, None);
    let text = OLLAMA.replace("max_concurrency = 2", "requests_per_minute = 0\ntokens_per_minute = 0");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (7, 23), "{}", e[0]);
    assert!(
        e[0].message.contains("requests_per_minute must be at least 1"),
        "{}",
        e[0]
    );
    assert_eq!((e[1].line, e[1].column), (8, 21), "{}", e[1]);
    assert!(
        e[1].message.contains("tokens_per_minute must be at least 1"),
        "{}",
        e[1]
    );
    // Not a positive whole number: located by the TOML reader.
    for bad in ["-5", "1.5", "\"fast\""] {
        let text = OLLAMA.replace("max_concurrency = 2", &format!("requests_per_minute = {bad}"));
        let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
        assert_eq!(e[0].line, 7, "{bad}: {}", e[0]);
    }
}

#[test]
fn sampling_per_role_is_read_and_bad_values_are_located() {
    let text =
        format!("{OLLAMA}\n[sampling.rpa]\ntemperature = 0.3\nmax_tokens = 500\n[sampling.judge]\ntemperature = 0.1\n");
    let c = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
    assert_eq!(
        c.sampling[&Role::Rpa],
        RoleSampling {
            temperature: Some(0.3),
            max_tokens: Some(500)
        }
    );
    assert_eq!(c.sampling[&Role::Judge].temperature, Some(0.1));
    let text = format!("{OLLAMA}\n[sampling.rpa]\ntemperature = 3.0\n[sampling.judge]\nmax_tokens = 9\n");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    let at = |needle: &str| {
        let d = e.iter().find(|d| d.message.contains(needle)).expect(needle);
        (d.line, d.column)
    };
    assert_eq!(at("between 0 and 2"), (15, 15));
    assert_eq!(at("rpa role only"), (17, 14));
}

#[test]
fn known_quirks_are_stated_per_provider_and_bad_ones_located() {
    let text = OLLAMA.replace(
        "max_concurrency = 2",
        "max_tokens_param = \"max_completion_tokens\"\ntemperature = \"fixed\"\nschema_dialect = \"json-object\"",
    );
    let c = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
    let p = c.provider("ollama").unwrap();
    use super::Refusal as Kind;
    assert_eq!(p.stated, vec![Kind::MaxCompletionTokens, Kind::FixedTemperature]);
    assert!(p.json_object && p.structured_output);
    let text = OLLAMA.replace("max_concurrency = 2", "schema_dialect = \"lenient\"");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (7, 18), "{}", e[0]);
    assert!(e[0].message.contains("openai-strict, no-numeric-bounds"), "{}", e[0]);
}

const PRESET: &str = "[[providers]]\nname = \"r\"\nkind = \"openai\"\npreset = \"openai-reasoning\"\nmodel = \"o3\"\n";

#[test]
fn a_preset_fills_base_url_and_quirks() {
    let c = Config::parse(Source::new("c.toml", PRESET), false, &no_env).unwrap();
    let p = c.provider("r").unwrap();
    use super::Refusal as Kind;
    assert_eq!(p.base_url, "https://api.openai.com/v1");
    assert_eq!(p.stated, vec![Kind::MaxCompletionTokens, Kind::FixedTemperature]);
    let text = PRESET.replace("openai-reasoning", "anthropic");
    let p = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
    let p = p.provider("r").unwrap();
    assert_eq!(p.base_url, "https://api.anthropic.com/v1");
    assert!(!p.structured_output && p.stated.is_empty());
}

#[test]
fn the_entrys_own_keys_win_over_its_preset() {
    let text = format!(
        "{PRESET}base_url = \"https://proxy.example/v1\"\ntemperature = \"free\"\nmax_tokens_param = \"max_tokens\"\nschema_dialect = \"json-object\"\n"
    );
    let c = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
    let p = c.provider("r").unwrap();
    assert_eq!(p.base_url, "https://proxy.example/v1");
    assert!(p.stated.is_empty() && p.json_object, "{p:?}");
    let text = PRESET.replace("openai-reasoning", "azure-openai");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert!(
        e[0].message.contains("base_url is required"),
        "a preset without a base URL: {}",
        e[0]
    );
}

#[test]
fn an_unknown_preset_is_located_and_the_known_ones_listed() {
    let text = PRESET.replace("openai-reasoning", "openia");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (4, 10), "{}", e[0]);
    assert!(e[0].message.contains("unknown preset \"openia\""), "{}", e[0]);
    assert_eq!(e.len(), 1, "said once, not again as a missing base_url: {e:?}");
    assert!(
        e[0].message.contains("openai, openai-reasoning, azure-openai"),
        "{}",
        e[0]
    );
}

#[test]
fn every_bundled_preset_parses_and_gives_its_source() {
    let file: PresetFile = toml::from_str(PRESETS_TOML).unwrap();
    assert_eq!(presets(), file.presets.as_slice());
    assert!(presets().len() >= 14);
    for preset in presets() {
        let text = format!(
            "[[providers]]\nname = \"p\"\nkind = \"openai\"\npreset = \"{}\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"\n",
            preset.name
        );
        let parsed = Config::parse(Source::new("c.toml", &text), false, &no_env);
        assert!(parsed.is_ok(), "preset {}: {:?}", preset.name, parsed.err());
        if let Some(url) = &preset.base_url {
            assert!(url.starts_with("http://") || url.starts_with("https://"), "{url}");
        }
    }
    // The comment block right above each [[presets]] names a source page.
    let lines: Vec<&str> = PRESETS_TOML.lines().collect();
    let mut headers = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.trim() != "[[presets]]" {
            continue;
        }
        headers += 1;
        let comments: Vec<&str> = lines[..i]
            .iter()
            .rev()
            .take_while(|l| l.starts_with('#'))
            .copied()
            .collect();
        let name = lines[i + 1];
        assert!(
            comments
                .iter()
                .any(|c| c.starts_with("# source: https://") || c.starts_with("# source: none")),
            "{name} has no source comment"
        );
    }
    assert_eq!(headers, presets().len());
}

#[test]
fn unknown_provider_in_roles_is_located() {
    let text = OLLAMA.replace("rpa = \"ollama\"", "rpa = \"olama\"");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert_eq!(e[0].line, 11);
    assert!(e[0].message.contains("unknown provider \"olama\""), "{}", e[0]);
}

/// A key by another name (an Azure-style `api-key`, an `Authorization` header) is held to an
/// api_key's rule; a header that carries no credential is not.
#[test]
fn a_header_carrying_a_credential_needs_a_private_file() {
    for header in ["\"api-key\" = \"azure-0123456789\"", "Authorization = \"Bearer sk-SECRET-abc123\""] {
        let text = OLLAMA.replace("max_concurrency = 2", &format!("headers = {{ {header} }}"));
        let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
        assert!(e[0].message.contains("carries a credential") && e[0].message.contains("chmod 600"), "{}", e[0]);
        assert!(!e[0].message.contains("0123456789") && !e[0].message.contains("SECRET"), "{}", e[0]);
        Config::parse(Source::new("c.toml", &text), true, &no_env).unwrap();
    }
    let text = OLLAMA.replace("max_concurrency = 2", "headers = { \"OpenAI-Organization\" = \"org-123456789\" }");
    Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
}

#[test]
fn literal_keys_need_a_private_file_and_env_keys_must_exist() {
    let text = OLLAMA.replace("max_concurrency = 2", "api_key = \"sk-secret\"");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert!(e[0].message.contains("chmod 600"));
    let c = Config::parse(Source::new("c.toml", &text), true, &no_env).unwrap();
    let p = c.provider("ollama").unwrap();
    assert_eq!(p.resolve_key(&no_env).unwrap().unwrap().expose(), "sk-secret");
    assert_eq!(
        format!("{p:?}").matches("sk-secret").count(),
        0,
        "Debug must not show the key"
    );
    let mut q = p.clone();
    q.api_key = None;
    q.api_key_env = Some("MY_KEY".into());
    let err = q.resolve_key(&no_env).unwrap_err().to_string();
    assert!(err.contains("set MY_KEY or change api_key_env"), "{err}");
    // A key with a line break is refused before any request (it failed each as "cannot reach").
    let err = q
        .resolve_key(&|_| Some("sk-a\nInjected: 1".into()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("MY_KEY holds a line break"), "{err}");
    assert!(!err.contains("sk-a"), "the key is never shown: {err}");
    let text = OLLAMA.replace("max_concurrency = 2", "api_key = \"sk-x\\r\\nInjected: 1\"");
    let e = Config::parse(Source::new("c.toml", &text), true, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (7, 11), "{}", e[0]);
    assert!(!e[0].to_string().contains("Injected"), "{}", e[0]);
    // A key in the file and a variable named for it: which is sent would be a guess.
    let text = OLLAMA.replace("max_concurrency = 2", "api_key = \"sk-secret-1\"\napi_key_env = \"MY_KEY\"");
    let e = Config::parse(Source::new("c.toml", &text), true, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (7, 11), "{}", e[0]);
    assert!(e[0].message.contains("both api_key and api_key_env"), "{}", e[0]);
}

#[test]
fn headers_and_provider_names_that_no_request_could_carry_are_located() {
    let cases = [
        ("headers = { \"X-A\" = \"v\\r\\nInjected: 1\" }", (7, 21), "header X-A: a line break"),
        ("headers = { \"X A\" = \"v\" }", (7, 13), "\"X A\" cannot name a header"),
    ];
    for (line, at, expect) in cases {
        let text = OLLAMA.replace("max_concurrency = 2", line);
        let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
        assert_eq!((e[0].line, e[0].column), at, "{}", e[0]);
        assert!(e[0].message.contains(expect), "{}", e[0]);
    }
    // What frames a request is the client's: a Content-Length made every body "not JSON".
    for framing in ["Content-Length", "transfer-encoding", "Host"] {
        let text = OLLAMA.replace("max_concurrency = 2", &format!("headers = {{ \"{framing}\" = \"3\" }}"));
        let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (7, 13), "{}", e[0]);
        assert!(e[0].message.contains("is written by the client for each request"), "{}", e[0]);
    }
    let text = OLLAMA.replace("qwen2.5:7b", "qwen\\u001b[31m");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert!(e[0].message.contains("model \"qwen\\u{1b}[31m\" holds a control character"), "{}", e[0]);
    let text = OLLAMA.replace("max_concurrency = 2", "headers = { \"X-Tenant\" = \"a\\tb\" }");
    let c = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap();
    assert_eq!(c.provider("ollama").unwrap().headers["X-Tenant"], "a\tb");
    let text = OLLAMA.replace("name = \"ollama\"", "name = \"p\\u001b[31mred\"");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (3, 8), "{}", e[0]);
    assert!(e[0].message.contains("control or invisible character"), "{}", e[0]);
    // Characters that show nothing: a zero-width space, a soft hyphen, a combining grapheme joiner,
    // a variation selector, a tag.
    for unseen in ["\\u200B", "\\u00AD", "\\u034F", "\\uFE0F", "\\U000E0041"] {
        let text = OLLAMA.replace("name = \"ollama\"", &format!("name = \"oll{unseen}ama\""));
        let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
        assert!(e[0].message.contains("control or invisible character"), "{unseen}: {}", e[0]);
    }
}

#[test]
fn openai_kind_needs_base_url_and_model() {
    let text = "[[providers]]\nname = \"x\"\nkind = \"openai\"\n";
    let e = Config::parse(Source::new("c.toml", text), false, &no_env).unwrap_err();
    assert!(e.iter().any(|d| d.message.contains("base_url is required")));
    assert!(e.iter().any(|d| d.message.contains("model is required")));
    let e = Config::parse(
        Source::new("c.toml", "[[providers]]\nname = \"x\"\nkind = \"gpt\"\n"),
        false,
        &no_env,
    )
    .unwrap_err();
    assert_eq!(e[0].line, 3);
}

#[test]
fn values_that_would_crash_or_show_a_key_are_refused_without_repeating_them() {
    let parse = |line: &str| {
        let text = OLLAMA.replace("max_concurrency = 2", line);
        Config::parse(Source::new("c.toml", &text), false, &no_env)
    };
    let refused = |line: &str, expect: &str| {
        let e = parse(line).unwrap_err();
        assert!(e.iter().any(|d| d.message.contains(expect)), "{line}: {e:?}");
        for d in &e {
            assert!(!d.to_string().contains("sk-SECRET"), "the key is never repeated: {d}");
        }
    };
    // Past what a semaphore or a Duration can hold: a panic, once a run began.
    refused("max_concurrency = 18446744073709551615", "1 to 1024");
    refused("timeout_connect_s = 1e300", "at most 86400");
    refused("timeout_idle_s = 1e30", "at most 86400");
    let e = Config::parse(Source::new("c.toml", "max_concurrency = 5000\n"), false, &no_env).unwrap_err();
    assert_eq!((e[0].line, e[0].column), (1, 19), "{}", e[0]);
    assert!(parse("max_concurrency = 1024").is_ok());
    // A key pasted where a variable's name goes, in a URL, or as a header line.
    refused("api_key_env = \"sk-SECRET123\"", "not the key itself");
    refused("api_key_env = \"A\\u001b[31m\"", "not the key itself");
    refused("api_key_env = \"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\"", "not the key itself");
    assert!(parse("api_key_env = \"_MY_KEY2\"").is_ok());
    // Located at the value, not at the provider's name.
    for line in ["api_key_env = \"\"", "api_key_env = \"sk-SECRET123\""] {
        let e = parse(line).unwrap_err();
        assert_eq!((e[0].line, e[0].column), (7, 15), "{line}: {}", e[0]);
    }
    let url = |u: &str| OLLAMA.replace("http://localhost:11434/v1/", u);
    for (u, expect) in [
        ("http://127.0.0.1:1/v1?key=sk-SECRET123", "no ?query or #fragment"),
        ("http://127.0.0.1:1/v1#sk-SECRET123", "no ?query or #fragment"),
        ("HTTP://user:sk-SECRET123@127.0.0.1:1/v1", "user name or password"),
        ("ftp://127.0.0.1/sk-SECRET123", "must start with http:// or https://"),
    ] {
        let e = Config::parse(Source::new("c.toml", &url(u)), false, &no_env).unwrap_err();
        assert!(e[0].message.contains(expect), "{u}: {}", e[0]);
        assert!(!e[0].to_string().contains("SECRET"), "{}", e[0]);
    }
    let upper = Config::parse(Source::new("c.toml", &url("HTTP://127.0.0.1:1/v1")), false, &no_env);
    assert!(upper.is_ok(), "a scheme in capitals is a scheme: {upper:?}");
    refused("headers = \"Authorization: Bearer sk-SECRET123\"", "invalid type: a string, expected a map");
    // A name no one could type back, and a model of spaces.
    let text = OLLAMA.replace("name = \"ollama\"", "name = \"f\\u202e\"");
    assert!(Config::parse(Source::new("c.toml", &text), false, &no_env).is_err());
    let text = OLLAMA.replace("name = \"ollama\"", "name = \"f\\u200b\"");
    assert!(Config::parse(Source::new("c.toml", &text), false, &no_env).is_err());
    let text = OLLAMA.replace("model = \"qwen2.5:7b\"", "model = \"   \"");
    let e = Config::parse(Source::new("c.toml", &text), false, &no_env).unwrap_err();
    assert!(e[0].message.contains("model is required"), "{}", e[0]);
}

#[test]
fn a_role_on_openai_without_its_key_says_where_the_provider_went() {
    let e = Config::parse(Source::new("c.toml", "[roles]\nrpa = \"openai\"\n"), false, &no_env).unwrap_err();
    assert!(e[0].message.contains("only while OPENAI_API_KEY is set"), "{}", e[0]);
    let with_key = |v: &str| (v == "OPENAI_API_KEY").then(|| "sk-x".to_string());
    assert!(Config::parse(Source::new("c.toml", "[roles]\nrpa = \"openai\"\n"), false, &with_key).is_ok());
}

#[test]
fn a_local_provider_takes_no_url_key_or_header_and_names_its_model() {
    let entry = |extra: &str| format!("[[providers]]\nname = \"mine\"\nkind = \"local\"\n{extra}\n");
    for (extra, expect) in [
        ("base_url = \"http://localhost:1/v1\"", "it has no base_url"),
        ("api_key_env = \"MY_KEY\"", "it takes no api_key_env or headers"),
        ("headers = { \"X-A\" = \"b\" }", "it takes no api_key_env or headers"),
    ] {
        let e = Config::parse(Source::new("c.toml", &entry(extra)), false, &no_env).unwrap_err();
        assert!(e[0].message.contains(expect), "{extra}: {}", e[0]);
    }
    // Without a model, the one it runs: the embedded default, as listings show it.
    let c = Config::parse(Source::new("c.toml", &entry("")), false, &no_env).unwrap();
    assert_eq!(c.provider("mine").unwrap().model, DEFAULT_LOCAL_MODEL);
}
