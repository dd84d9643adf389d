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
/// headers (an Azure-style `api-key`), found in any form a server writes them back in: each byte as
/// written, percent-encoded (in either case, as a URL carries it, whatever an encoder leaves as it is)
/// or escaped as JSON escapes it (`\u002f`, `\/`); or the whole value in hexadecimal (either case) or
/// base64 (standard or URL-safe, padded or not). Values shorter than eight characters are
/// placeholders, not secrets, and are left alone.
#[derive(Clone, Default)]
pub struct Secrets(Vec<(String, &'static str)>);

impl Secrets {
    pub fn of(key: Option<&Secret>, headers: &BTreeMap<String, String>) -> Secrets {
        let mut found: Vec<(String, &'static str)> = Vec::new();
        let mut add = |value: &str, instead: &'static str| {
            if value.len() >= 8 && !found.iter().any(|(f, _)| f == value) {
                found.push((value.to_string(), instead));
            }
        };
        if let Some(key) = key {
            add(&key.0, "[the key]");
        }
        for value in headers.values() {
            add(value, "[a header's value]");
        }
        // The longest first: a secret that holds another is taken out whole.
        found.sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
        Secrets(found)
    }

    /// `text` (a server's words) with every secret, in any of its forms, replaced by what it is.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (secret, instead) in &self.0 {
            out = replace_every_form(&out, secret.as_bytes(), instead);
            let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
            out = replace_caseless(&out, &hex, instead);
            use base64::Engine;
            for engine in [
                base64::engine::general_purpose::STANDARD_NO_PAD,
                base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ] {
                let encoded = engine.encode(secret);
                if out.contains(&encoded) {
                    out = out.replace(&encoded, instead);
                }
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

/// `text` with every occurrence of the ASCII `needle` (lower case), in any case, replaced.
fn replace_caseless(text: &str, needle: &str, instead: &str) -> String {
    // ASCII case changes no byte's place, so positions found in the lowered text are the text's.
    let lowered = text.to_ascii_lowercase();
    let (mut out, mut copied) = (String::new(), 0);
    for (at, _) in lowered.match_indices(needle) {
        if at >= copied {
            out.push_str(&text[copied..at]);
            out.push_str(instead);
            copied = at + needle.len();
        }
    }
    if copied == 0 {
        return text.to_string();
    }
    out.push_str(&text[copied..]);
    out
}

/// `text` with every run of bytes that spells `secret`, each byte in any of its forms
/// ([`form_end`]), replaced by `instead`. A match starts at a character boundary (the secret's first
/// byte, or an ASCII `%` or backslash) and ends at one (after a whole character or an escape), so the
/// slicing stays on UTF-8 boundaries.
fn replace_every_form(text: &str, secret: &[u8], instead: &str) -> String {
    let bytes = text.as_bytes();
    let (mut out, mut copied, mut at) = (String::new(), 0, 0);
    while at < bytes.len() {
        match form_end(bytes, at, secret) {
            Some(end) if end > at => {
                out.push_str(&text[copied..at]);
                out.push_str(instead);
                (copied, at) = (end, end);
            }
            _ => at += 1,
        }
    }
    if copied == 0 {
        return text.to_string();
    }
    out.push_str(&text[copied..]);
    out
}

/// Where `secret` ends if `text` spells it from `at`: each byte as written, as `%XX` (hex in either
/// case), or, for an ASCII byte, as JSON writes it (`\u00XX`, `\/`, `\"`, `\\`). Every way of
/// reading is followed at once (a secret's own `%` may be written or encoded), byte after byte, so
/// the work is linear in the secret's length and a long header value needs no deep recursion; the
/// longest reading wins.
fn form_end(text: &[u8], at: usize, secret: &[u8]) -> Option<usize> {
    let hex = |from: usize, len: usize| {
        let digits = text.get(from..from + len)?;
        digits
            .iter()
            .all(u8::is_ascii_hexdigit)
            .then(|| digits.iter().fold(0, |n, &d| n * 16 + (d as char).to_digit(16).unwrap_or(0)))
    };
    let mut places = vec![at];
    for &byte in secret {
        let mut next: Vec<usize> = Vec::new();
        for &at in &places {
            let escaped = |c: u8| text.get(at..at + 2) == Some(&[b'\\', c][..]);
            let forms = [
                (text.get(at) == Some(&byte)).then_some(at + 1),
                (text.get(at) == Some(&b'%') && hex(at + 1, 2) == Some(u32::from(byte))).then_some(at + 3),
                (byte.is_ascii() && escaped(b'u') && hex(at + 2, 4) == Some(u32::from(byte))).then_some(at + 6),
                (matches!(byte, b'/' | b'"' | b'\\') && escaped(byte)).then_some(at + 2),
            ];
            for n in forms.into_iter().flatten() {
                if !next.contains(&n) {
                    next.push(n);
                }
            }
        }
        if next.is_empty() {
            return None;
        }
        places = next;
    }
    places.into_iter().max()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scrubbed(key: &str, text: &str) -> String {
        Secrets::of(Some(&Secret::new(key.into())), &BTreeMap::new()).scrub(text)
    }

    #[test]
    fn a_key_is_found_in_every_form_a_server_writes_it_back_in() {
        let key = "sk-ab+cd/ef=gh%zz";
        let encoded_all: String = key.bytes().map(|b| format!("%{b:02X}")).collect();
        let echoes = [
            key.to_string(),
            // As Python's urllib.parse.quote writes it: `/` and `-` left as they are.
            "sk-ab%2Bcd/ef%3Dgh%25zz".into(),
            // Every byte encoded, the hex in either case or both.
            encoded_all.clone(),
            encoded_all.to_lowercase(),
            "sk%2dab%2Bcd%2fef%3dgh%zz".into(),
            // As JSON escapes it, in a body shown as it came.
            "sk-ab\\u002bcd\\/ef\\u003Dgh%zz".into(),
        ];
        for echo in echoes {
            let text = format!("refused «{echo}», try again");
            assert_eq!(scrubbed(key, &text), "refused «[the key]», try again", "{echo}");
        }
        // The whole key in hexadecimal or base64, as some servers log what they were sent.
        let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
        use base64::Engine;
        for echo in [
            hex.clone(),
            hex.to_uppercase(),
            base64::engine::general_purpose::STANDARD.encode(key),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key),
        ] {
            let text = format!("refused «{echo}», try again");
            assert!(
                scrubbed(key, &text).starts_with("refused «[the key]"),
                "{echo}: {}",
                scrubbed(key, &text)
            );
        }
        // Twice, beside text in other scripts, and at the very ends.
        assert_eq!(
            scrubbed(key, &format!("{key}鍵{encoded_all}")),
            "[the key]鍵[the key]"
        );
        // Near misses stay as they are.
        for text in ["sk-ab+cd/ef=g", "sk-ab%2Ccd/ef=gh%zz", "sk-ab%+Bcd/ef=gh%zz", "%s%k"] {
            assert_eq!(scrubbed(key, text), text);
        }
        // JSON's quote and backslash, and a long value echoed whole (a token in a header).
        assert_eq!(scrubbed("ab\"cd\\ef=gh", "x ab\\\"cd\\\\ef=gh y"), "x [the key] y");
        let long: String = "eyJhbGciOi".repeat(2000);
        let text = format!("echo {}", long.replace('i', "%69"));
        assert_eq!(scrubbed(&long, &text), "echo [the key]");
        // A placeholder is no secret.
        assert_eq!(scrubbed("none", "none left"), "none left");
    }
}
