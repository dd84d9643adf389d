//! What a provider must keep to itself and what a request header can carry: the API key (never
//! printed), the values a server must not get to repeat, and the rules a header's name and value follow.

use std::collections::BTreeMap;
use std::fmt;

/// An API key. Never printed: `Debug` and `Display` show a placeholder.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(value)
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// What a provider sends that a server must not get to repeat (some servers and proxies repeat the
/// key they refused, into texts that reach journals, logs and the terminal): its key and the values of its extra
/// headers (an Azure-style `api-key`), each as written and percent-encoded (as a URL would carry it).
/// Values shorter than eight characters are placeholders, not secrets, and are left alone.
#[derive(Clone, Default)]
pub struct Secrets(Vec<(String, &'static str)>);

impl Secrets {
    pub fn of(key: Option<&Secret>, headers: &BTreeMap<String, String>) -> Secrets {
        let mut found = Vec::new();
        let mut add = |value: &str, instead: &'static str| {
            if value.len() < 8 {
                return;
            }
            // Percent-encoding's hex digits may be written in either case.
            let (upper, lower) = (percent_encoded(value, true), percent_encoded(value, false));
            for form in [value.to_string(), upper, lower] {
                if !found.iter().any(|(f, _)| *f == form) {
                    found.push((form, instead));
                }
            }
        };
        if let Some(key) = key {
            add(&key.0, "[the key]");
        }
        for value in headers.values() {
            add(value, "[a header's value]");
        }
        // The longest first: a secret that holds another is taken out whole.
        found.sort_by_key(|(form, _)| std::cmp::Reverse(form.len()));
        Secrets(found)
    }

    /// `text` (a server's words) with every secret replaced by what it is.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (secret, instead) in &self.0 {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), instead);
            }
        }
        out
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} kept out)", self.0.len())
    }
}

/// `value` with every byte but the unreserved ones (letters, digits, `-._~`) as `%XX`, in upper- or
/// lower-case hex.
fn percent_encoded(value: &str, upper: bool) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            other if upper => format!("%{other:02X}"),
            other => format!("%{other:02x}"),
        })
        .collect()
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A provider whose key the environment does not hold, or holds with a character no header can
/// carry (`unusable`): the user's to fix. (The model layer reports it as its own configuration error,
/// with these words.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "provider \"{provider}\" needs an API key: {}",
    if *unusable {
        format!("{var} holds a line break or another control character, which no request header can carry; set it again")
    } else {
        format!("set {var} or change api_key_env in the config")
    }
)]
pub struct MissingKey {
    pub provider: String,
    /// The environment variable the config names.
    pub var: String,
    pub unusable: bool,
}

/// Whether `name` can name an HTTP header: a token (letters, digits and ``!#$%&'*+-.^_`|~``).
pub(super) fn header_name_ok(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether a header can carry `value`: no control character but the tab (a line break would end the
/// header and start another).
pub(super) fn header_value_ok(value: &str) -> bool {
    value.chars().all(|c| c == '\t' || !c.is_control())
}
