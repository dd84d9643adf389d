//! `config.toml`: providers, roles and key bindings. Errors are expected; each must point inside the text.

#![no_main]

mod common;

use incharacter::config::Config;
use incharacter::domain::diagnostic::Source;
use libfuzzer_sys::fuzz_target;

const NAME: &str = "config.toml";

fn no_env(_: &str) -> Option<String> {
    None
}

fn with_key(name: &str) -> Option<String> {
    (name == "OPENAI_API_KEY").then(|| "sk-fuzz".to_string())
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // A shared file without an environment key, and a private (0600) one with it.
    for (private, env) in [(false, no_env as fn(&str) -> Option<String>), (true, with_key)] {
        match Config::parse(Source::new(NAME, text), private, &env) {
            Ok(config) => {
                for binding in &config.tui.keys {
                    common::assert_within(&binding.at, NAME, text);
                }
                assert!(config.max_concurrency >= 1);
                assert!(config.providers.iter().all(|p| p.max_concurrency >= 1));
            }
            Err(diagnostics) => {
                assert!(!diagnostics.is_empty(), "an error without a diagnostic");
                for d in &diagnostics {
                    common::assert_within(d, NAME, text);
                }
            }
        }
    }
});
