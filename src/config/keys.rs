//! A provider entry's key: named by `api_key_env`, or written as `api_key` in a private file, never both.

use toml::Spanned;

use super::raw::RawProvider;
use super::secrets::{Secret, header_value_ok};
use super::{ProviderConfig, Reader, env_var_name};

impl Reader<'_> {
    /// Checks and takes the key of entry `name` (`p`) into `c`.
    pub(super) fn keys(&mut self, c: &mut ProviderConfig, p: &RawProvider, name: &str) {
        let key_env = p.api_key_env.as_ref();
        let key_env_at = key_env.map_or(p.name.span(), Spanned::span);
        if key_env.is_some_and(|e| e.get_ref().trim().is_empty()) {
            self.error(
                key_env_at.clone(),
                format!("provider \"{name}\": api_key_env is empty: name the environment variable that holds the key"),
            );
        } else if key_env.is_some_and(|e| !env_var_name(e.get_ref())) {
            // Not repeated: what is there is often the key itself, pasted in the wrong place.
            self.error(
                key_env_at,
                format!(
                    "provider \"{name}\": api_key_env names the environment variable that holds the key (capitals, \
                     digits and _, not a digit first), not the key itself"
                ),
            );
        }
        c.api_key_env = p.api_key_env.as_ref().map(|e| e.get_ref().clone());
        if let (Some(key), Some(_)) = (&p.api_key, key_env) {
            // Which one would be sent is not for messages about the other to guess.
            self.error(
                key.span(),
                format!("provider \"{name}\" has both api_key and api_key_env: one key, from one place (remove one)"),
            );
        }
        if let Some(key) = &p.api_key {
            if !self.private {
                self.error(
                    key.span(),
                    "an api_key written in the config file is accepted only if the file is private (chmod 600); \
                 better: put the key in an environment variable and name it in api_key_env",
                );
            }
            if !header_value_ok(key.get_ref()) {
                self.error(
                    key.span(),
                    "a line break or another control character cannot go in a request header",
                );
            }
            c.api_key = Some(Secret::new(key.get_ref().clone()));
        }
    }
}
