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
/// base64 (standard or URL-safe, padded or not, wherever the value stands in what was encoded: `Bearer
/// <key>` in base64 holds it too). Of the key, and of a header whose name says it is a credential
/// (`api-key`, `Authorization`, a token, a cookie), any run of eight characters or more of it is taken
/// out as well (a run that mixes lower case, upper case and digits: a word of it could be any
/// text's): a server that shows "sk-proj-****abcd" or the key but its last character gives away
/// little more than four characters. Values shorter than eight characters are placeholders, not
/// secrets, and are left alone.
#[derive(Clone, Default)]
pub struct Secrets(Vec<Kept>);

#[derive(Clone)]
struct Kept {
    value: String,
    instead: &'static str,
    /// Runs of it are taken out too ([`FRAGMENT`] characters or more).
    fragments: bool,
}

/// The shortest run of a secret's characters taken out on its own.
const FRAGMENT: usize = 8;

/// Whether a header's name says its value is a credential: one of its words (between `-` and `_`)
/// is one a credential goes by (`api-key`, `Authorization`, `X-Auth-Token`; not `X-Author` or
/// `X-Tokenizer`).
pub(super) fn credential(name: &str) -> bool {
    const WORDS: [&str; 10] = [
        "key", "apikey", "auth", "authorization", "token", "secret", "cookie", "signature", "password", "credential",
    ];
    name.to_ascii_lowercase()
        .split(['-', '_'])
        .any(|w| WORDS.contains(&w))
}

impl Secrets {
    pub fn of(key: Option<&Secret>, headers: &BTreeMap<String, String>) -> Secrets {
        let mut found: Vec<Kept> = Vec::new();
        let mut add = |value: &str, instead: &'static str, fragments: bool| {
            if value.len() < FRAGMENT {
                return;
            }
            match found.iter_mut().find(|f| f.value == value) {
                Some(f) => f.fragments |= fragments,
                None => found.push(Kept {
                    value: value.to_string(),
                    instead,
                    fragments,
                }),
            }
        };
        if let Some(key) = key {
            add(&key.0, "[the key]", true);
        }
        for (name, value) in headers {
            add(value, "[a header's value]", credential(name));
        }
        // The longest first: a secret that holds another is taken out whole.
        found.sort_by_key(|f| std::cmp::Reverse(f.value.len()));
        Secrets(found)
    }

    /// `text` (a server's words) with every secret, in any of its forms, replaced by what it is.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for kept in &self.0 {
            let (secret, instead) = (&kept.value, kept.instead);
            out = replace_every_form(&out, secret.as_bytes(), instead);
            let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
            out = replace_caseless(&out, &hex, instead);
            for encoded in base64_forms(secret.as_bytes()) {
                if out.contains(&encoded) {
                    out = out.replace(&encoded, instead);
                }
            }
        }
        for kept in self.0.iter().filter(|k| k.fragments) {
            out = replace_fragments(&out, kept.value.as_bytes(), kept.instead);
        }
        replace_encoded(&out, &self.0)
    }
}

/// `text` with every run of base64 or hexadecimal whose decoding holds a secret (or, of a key or a
/// credential, a run of [`FRAGMENT`] of its characters) replaced by what it is. A run is read across
/// what wraps or spaces an encoding (MIME wraps base64 at 76 columns; a dump writes hex in pairs apart
/// by spaces or colons), from each place a group can start at, in either base64 alphabet; so an
/// encoding cut short, or broken inside the key, gives nothing away either. The words of the run the
/// secret was read from are replaced whole.
fn replace_encoded(text: &str, kept: &[Kept]) -> String {
    if kept.is_empty() || text.len() < 2 * FRAGMENT {
        return text.to_string();
    }
    // Each secret's windows, found once for the whole text.
    let wanted: Vec<Wanted> = kept.iter().map(Wanted::of).collect();
    let mut spans = Vec::new();
    for encoding in [&BASE64, &BASE64_URL, &HEX] {
        spans.extend(encoded_spans(text.as_bytes(), &wanted, encoding));
    }
    if spans.is_empty() {
        return text.to_string();
    }
    spans.sort();
    let (mut out, mut copied) = (String::new(), 0);
    for (start, end, instead) in spans {
        if end <= copied {
            continue;
        }
        let start = start.max(copied);
        out.push_str(&text[copied..start]);
        if !out.ends_with(instead) || start > copied {
            out.push_str(instead);
        }
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// A text encoding of bytes a server may write a secret in.
struct Encoding {
    /// A character of an encoded word.
    symbol: fn(u8) -> bool,
    /// What may stand between two words of one run.
    between: fn(u8) -> bool,
    /// Bytes decoded from a group of characters, and the group's characters.
    group: (usize, usize),
    /// The readings of a run of whole groups (none that fail to decode).
    decode: fn(&[u8]) -> Vec<Vec<u8>>,
}

/// A run of base64 in one alphabet: a word of the other's (`auth-proxy` beside `+/`) breaks it.
const BASE64: Encoding = Encoding {
    symbol: |b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/'),
    between: |b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'='),
    group: (3, 4),
    decode: |run| base64_decoded(run, &base64::alphabet::STANDARD),
};

const BASE64_URL: Encoding = Encoding {
    symbol: |b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'),
    between: |b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'='),
    group: (3, 4),
    decode: |run| base64_decoded(run, &base64::alphabet::URL_SAFE),
};

fn base64_decoded(run: &[u8], alphabet: &base64::alphabet::Alphabet) -> Vec<Vec<u8>> {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let lenient = GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent);
    GeneralPurpose::new(alphabet, lenient).decode(run).into_iter().collect()
}

const HEX: Encoding = Encoding {
    symbol: |b| b.is_ascii_hexdigit(),
    between: |b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b':' | b'-' | b','),
    group: (1, 2),
    decode: |run| {
        let digit = |d: u8| (d as char).to_digit(16).unwrap_or(0) as u8;
        vec![run.chunks_exact(2).map(|p| digit(p[0]) << 4 | digit(p[1])).collect()]
    },
};

/// Where in `bytes` runs of `encoding` decode to one of `kept`: (start, end, what it is).
fn encoded_spans(bytes: &[u8], wanted: &[Wanted], encoding: &Encoding) -> Vec<(usize, usize, &'static str)> {
    let (per_group, chars) = encoding.group;
    // Words of symbols, then chains of words with only separators between them.
    let mut words: Vec<(usize, usize)> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        while at < bytes.len() && (encoding.symbol)(bytes[at]) {
            at += 1;
        }
        if at > start {
            words.push((start, at));
        } else {
            at += 1;
        }
    }
    let apart = |a: (usize, usize), b: (usize, usize)| bytes[a.1..b.0].iter().all(|&c| (encoding.between)(c));
    let mut spans = Vec::new();
    let mut first = 0;
    while first < words.len() {
        let mut last = first;
        while last + 1 < words.len() && apart(words[last], words[last + 1]) {
            last += 1;
        }
        // The chain's symbols joined, each with the word it came from.
        let (mut joined, mut word_of) = (Vec::new(), Vec::new());
        for (w, &(start, end)) in words[first..=last].iter().enumerate() {
            joined.extend_from_slice(&bytes[start..end]);
            word_of.extend(std::iter::repeat_n(first + w, end - start));
        }
        if joined.len() >= 2 * FRAGMENT {
            for offset in 0..chars.min(joined.len()) {
                let usable = (joined.len() - offset) / chars * chars;
                for decoded in (encoding.decode)(&joined[offset..offset + usable]) {
                    for k in wanted {
                        for (from, to) in k.found_in(&decoded) {
                            // Decoded bytes [from, to) came from the symbols of their groups.
                            let a = offset + from / per_group * chars;
                            let b = (offset + to.div_ceil(per_group) * chars).min(joined.len()) - 1;
                            spans.push((words[word_of[a]].0, words[word_of[b]].1, k.instead));
                        }
                    }
                }
            }
        }
        first = last + 1;
    }
    spans
}

/// A secret as [`encoded_spans`] looks for it: the whole of it, and, of a key or a credential, its
/// runs of [`FRAGMENT`] bytes that mix lower case, upper case and digits (as [`replace_fragments`]
/// takes them: a word of it could be any text's).
struct Wanted<'a> {
    whole: &'a [u8],
    windows: std::collections::HashSet<&'a [u8]>,
    instead: &'static str,
}

impl<'a> Wanted<'a> {
    fn of(kept: &'a Kept) -> Wanted<'a> {
        let whole = kept.value.as_bytes();
        let windows = match kept.fragments {
            true => whole.windows(FRAGMENT).filter(|w| mixed(w)).collect(),
            false => std::collections::HashSet::new(),
        };
        Wanted {
            whole,
            windows,
            instead: kept.instead,
        }
    }

    /// Where in `decoded` it stands (runs merged where they touch).
    fn found_in(&self, decoded: &[u8]) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut add = |at: usize, width: usize| match runs.last_mut() {
            Some((_, end)) if *end >= at => *end = (*end).max(at + width),
            _ => runs.push((at, at + width)),
        };
        if !self.whole.is_empty() {
            for (at, window) in decoded.windows(self.whole.len()).enumerate() {
                if window == self.whole {
                    add(at, self.whole.len());
                }
            }
        }
        if !self.windows.is_empty() {
            for (at, window) in decoded.windows(FRAGMENT).enumerate() {
                if self.windows.contains(window) {
                    add(at, FRAGMENT);
                }
            }
        }
        runs.sort_unstable();
        runs
    }
}

/// What of `secret`'s base64 (standard and URL-safe) is the same wherever it stands in what was
/// encoded: the whole of it encoded alone, and for each of the three places it can start at in a
/// group of three bytes, the characters that depend on its bytes only (the first group and the last
/// left out). Those shorter than [`FRAGMENT`] are left out.
fn base64_forms(secret: &[u8]) -> Vec<String> {
    use base64::Engine;
    let mut forms = Vec::new();
    for engine in [
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        forms.push(engine.encode(secret));
        for before in 0..3 {
            let mut shifted = vec![0u8; before];
            shifted.extend_from_slice(secret);
            let encoded = engine.encode(&shifted);
            // The first group holds what came before, the last what comes after.
            let inner = encoded.get(4..encoded.len().saturating_sub(4)).unwrap_or_default();
            if inner.len() >= FRAGMENT {
                forms.push(inner.to_string());
            }
        }
    }
    // The longest first: one that holds another is taken out whole.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    forms
}

/// Whether a run of a secret's characters mixes lower case, upper case and digits: one of a single
/// kind (a word, "required" of "sk-no-key-required") could be any text's.
fn mixed(w: &[u8]) -> bool {
    let kinds = [u8::is_ascii_lowercase, u8::is_ascii_uppercase, u8::is_ascii_digit];
    kinds.iter().filter(|kind| w.iter().any(kind)).count() >= 2
}

/// `text` with every run of [`FRAGMENT`] bytes or more that also stands in `secret` replaced by
/// `instead` (widened to whole characters).
fn replace_fragments(text: &str, secret: &[u8], instead: &str) -> String {
    let bytes = text.as_bytes();
    if bytes.len() < FRAGMENT || secret.len() < FRAGMENT {
        return text.to_string();
    }
    // A run of one kind of character (a word, "required" of "sk-no-key-required") could be any
    // text's: only runs mixing lower case, upper case and digits are taken for the key's.
    let windows: std::collections::HashSet<&[u8]> = secret.windows(FRAGMENT).filter(|w| mixed(w)).collect();
    // Runs of the text covered by windows that stand in the secret.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (at, window) in bytes.windows(FRAGMENT).enumerate() {
        if windows.contains(window) {
            match runs.last_mut() {
                Some((_, end)) if *end >= at => *end = at + FRAGMENT,
                _ => runs.push((at, at + FRAGMENT)),
            }
        }
    }
    if runs.is_empty() {
        return text.to_string();
    }
    let (mut out, mut copied) = (String::new(), 0);
    for (start, end) in runs {
        let start = text.floor_char_boundary(start).max(copied);
        let end = text.ceil_char_boundary(end);
        out.push_str(&text[copied..start]);
        out.push_str(instead);
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
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

/// Whether only its owner can read the file at `path`: the one place a key may be written.
#[cfg(unix)]
pub(super) fn private_file(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 == 0)
}

#[cfg(not(unix))]
pub(super) fn private_file(_: &std::path::Path) -> bool {
    false
}

/// Headers that frame a request (its length, encoding, host and connection), which the HTTP client
/// writes for each request: one set in the config would contradict the body it sends.
pub(super) const FRAMING: [&str; 7] =
    ["Content-Length", "Transfer-Encoding", "Host", "Connection", "Content-Encoding", "Keep-Alive", "Upgrade"];

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
        // Near misses stay as they are: no run of eight of its characters.
        for text in ["sk-ab+c", "sk-ab%2Ccd/e", "sk-ab%+Bcd/ef=", "%s%k"] {
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

    /// A server that writes what it was sent in base64 wrapped at 76 columns (as MIME and debug dumps
    /// do), or cut short: the key read across the break, or its first part, is taken out.
    #[test]
    fn a_key_in_wrapped_or_cut_base64_is_taken_out() {
        use base64::Engine;
        let key = "sk-proj-Zx9Qw7Er5Ty3Ui1Op+As/Df8Gh";
        let headers = format!("{{\"host\": \"127.0.0.1:18218\", \"authorization\": \"Bearer {key}\"}}");
        let encoded = base64::engine::general_purpose::STANDARD.encode(&headers);
        for wrap in [76, 60, 7] {
            let wrapped: Vec<String> = encoded.as_bytes().chunks(wrap).map(|c| String::from_utf8_lossy(c).into()).collect();
            for joint in ["\n", "\r\n", " "] {
                let out = scrubbed(key, &format!("debug: {}", wrapped.join(joint)));
                assert!(out.contains("[the key]"), "{wrap} {joint:?}: {out}");
                for part in [&key[..10], &key[8..18], &key[20..]] {
                    assert!(!decoded_text(&out).contains(part), "{wrap} {joint:?}: {out}");
                }
            }
        }
        // Cut short inside the key, and from either alphabet.
        // Cut ten characters into the key (its byte offset in the headers, as base64 characters).
        let at = headers.find(key).unwrap() + 10;
        let cut = &encoded[..at / 3 * 4];
        assert!(decoded_text(cut).contains(&key[..8]), "the cut holds the key's start");
        let out = scrubbed(key, &format!("digest {cut}…"));
        assert!(out.contains("[the key]") && !decoded_text(&out).contains(&key[..8]), "{out}");
        // A word of the other alphabet beside it (a proxy's name) does not hide it.
        let with_url = format!("{{\"model\": \"gpt-4o/mini\", \"authorization\": \"Bearer {key}\"}}");
        let wrapped = base64::engine::general_purpose::STANDARD
            .encode(&with_url)
            .as_bytes()
            .chunks(76)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join("\n");
        let out = scrubbed(key, &format!("rejected by auth-proxy\n{wrapped}"));
        assert!(!decoded_text(&out).contains(&key[8..16]), "{out}");
        // Not a key's words: llama.cpp's placeholder key in an error's base64 is left alone.
        let error = base64::engine::general_purpose::STANDARD.encode("{\"error\": \"field messages is required\"}");
        assert_eq!(scrubbed("sk-no-key-required", &format!("trace {error}")), format!("trace {error}"));
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("Bearer {key}"));
        assert!(scrubbed(key, &url[..url.len() - 6]).contains("[the key]"));
        // Words around it stay; text with no key in it is as it was.
        // In hexadecimal, pairs apart by spaces, colons or line breaks, as dumps write them.
        let hex: Vec<String> = headers.bytes().map(|b| format!("{b:02x}")).collect();
        for joint in [" ", ":", "\n"] {
            let out = scrubbed(key, &format!("dump: {}", hex.join(joint)));
            assert!(out.contains("[the key]"), "{joint:?}: {out}");
            let left: String = out.split(|c: char| !c.is_ascii_hexdigit()).filter(|w| w.len() == 2).collect();
            let bytes: Vec<u8> = (0..left.len() / 2).map(|i| u8::from_str_radix(&left[2 * i..2 * i + 2], 16).unwrap()).collect();
            assert!(!String::from_utf8_lossy(&bytes).contains(&key[..8]), "{joint:?}: {out}");
        }
        let wrapped = hex.concat().as_bytes().chunks(32).map(|c| String::from_utf8_lossy(c).into_owned()).collect::<Vec<_>>().join("\n");
        assert!(scrubbed(key, &wrapped).contains("[the key]"));
        let out = scrubbed(key, &format!("before {encoded} after"));
        assert!(out.starts_with("before ") && out.ends_with(" after") && out.contains("[the key]"), "{out}");
        let plain = "The quick brown fox jumps over the lazy dog again and again 0123456789";
        assert_eq!(scrubbed(key, plain), plain);
    }

    /// What each base64 word of `text` decodes to, joined (for asserting nothing of the key is left).
    fn decoded_text(text: &str) -> String {
        use base64::Engine;
        let joined: String = text.chars().filter(|c| c.is_ascii_alphanumeric() || "+/".contains(*c)).collect();
        (0..4)
            .filter_map(|o| {
                let part = joined.get(o..)?;
                let part = &part[..part.len() / 4 * 4];
                base64::engine::general_purpose::STANDARD_NO_PAD.decode(part).ok()
            })
            .map(|d| String::from_utf8_lossy(&d).into_owned())
            .collect::<Vec<_>>()
            .join("|")
    }

    /// What servers write back of a key they refused: its start and end around stars (OpenAI's
    /// "sk-proj-****abcd"), all of it but its last character, or `Bearer <key>` in base64.
    #[test]
    fn a_part_of_the_key_or_the_key_encoded_with_more_is_taken_out() {
        let key = "sk-SECRET-abc123";
        let head = &key[..8];
        let text = format!("Incorrect API key provided: {head}*****{} head={}", &key[12..], &key[..15]);
        assert_eq!(scrubbed(key, &text), "Incorrect API key provided: [the key]*****c123 head=[the key]");
        // Runs shorter than eight are not the key's alone.
        assert_eq!(scrubbed(key, "sk-SECR and abc123"), "sk-SECR and abc123");
        // Nor is a word the key holds: llama.cpp's placeholder key and a server's words.
        let placeholder = "sk-no-key-required";
        assert_eq!(
            scrubbed(placeholder, "field 'model' is required"),
            "field 'model' is required"
        );
        assert_eq!(scrubbed(placeholder, "got sk-no-key-required"), "got [the key]");
        // Beside other letters: the run is taken out, and nothing around it.
        assert_eq!(scrubbed(key, "xxSECRET-abc1yy"), "xx[the key]yy");
        use base64::Engine;
        for before in ["Bearer ", "user:", "x", ""] {
            for after in ["", "\n", ":pass"] {
                for engine in [
                    base64::engine::general_purpose::STANDARD,
                    base64::engine::general_purpose::URL_SAFE_NO_PAD,
                ] {
                    let encoded = engine.encode(format!("{before}{key}{after}"));
                    let out = scrubbed(key, &format!("sent {encoded}."));
                    assert!(out.contains("[the key]"), "{before:?} {after:?}: {out}");
                    // What is left of the key is what shares a group of three bytes with what
                    // stands around it: a few characters either side, as servers show anyway.
                    let left = out.replace("[the key]", "").len() - "sent .".len();
                    let around = encoded.len() - engine.encode(key).len();
                    assert!(left <= around + 12, "{before:?} {after:?}: {out}");
                }
            }
        }
        // A header named as a credential is taken out in parts too; another header's value only whole.
        let headers = BTreeMap::from([
            ("api-key".to_string(), "azure-4f9Qx2Lm7Rt1".to_string()),
            ("Content-Type".to_string(), "application/json".to_string()),
        ]);
        let secrets = Secrets::of(None, &headers);
        assert_eq!(secrets.scrub("bad key azure-4f9Qx2Lm7Rt"), "bad key [a header's value]");
        assert_eq!(secrets.scrub("an application error"), "an application error");
        assert_eq!(secrets.scrub("application/json"), "[a header's value]");
        for (name, is) in [("X-Auth-Token", true), ("Ocp-Apim-Subscription-Key", true), ("X-Author", false), ("X-Tokenizer", false)] {
            assert_eq!(credential(name), is, "{name}");
        }
    }
}
