//! Content-addressed response cache: the key is a SHA-256 of the canonical JSON of everything that
//! changes an answer (base URL, model, messages, sampling, schema, repeat index) — never keys or
//! headers. One file per successful reply under `<data dir>/cache/`, written to a temporary file and
//! renamed, so a crash leaves either the whole entry or none. Entries keep the streamed pieces, so a hit
//! replays the same token events. An empty reply is never stored, and one that an older build stored is
//! never served: it is a miss, asked again and overwritten.

use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{ChatRequest, Usage};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The reply as it was streamed, piece by piece.
    pub tokens: Vec<String>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    pub model: String,
    pub created_unix: u64,
    /// The tokens' rivals, for a request that asked for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<super::TokenChoice>,
}

impl CacheEntry {
    #[cfg(any(test, feature = "testing"))]
    pub fn text(&self) -> String {
        self.tokens.concat()
    }

    /// Whether the stored reply holds no text ([`super::is_empty_reply`]): not an answer.
    pub fn is_empty(&self) -> bool {
        self.tokens.iter().all(|t| super::is_empty_reply(t))
    }
}

#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

/// The cache key of a request sent to `model` at `base_url`, in hex.
pub fn key(base_url: &str, model: &str, request: &ChatRequest) -> String {
    let material = json!({
        "base_url": base_url,
        "model": model,
        "messages": request.messages,
        "sampling": request.sampling,
        "schema": request.schema,
        "repeat": request.meta.repeat,
    });
    let digest = Sha256::digest(canonical(&material).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// JSON with every object's keys sorted, so equal content always hashes the same (maps keep
/// insertion order elsewhere, which matters for schemas: keys are generated in that order).
fn canonical(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&map[*k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

impl Cache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Cache { dir: dir.into() }
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2.min(key.len())]).join(format!("{key}.json"))
    }

    /// The entry for `key`; an unreadable or damaged entry, or an empty reply (stored by a build that
    /// took one for an answer), is a miss (it will be overwritten).
    pub fn get(&self, key: &str) -> Option<CacheEntry> {
        let text = std::fs::read_to_string(self.path(key)).ok()?;
        let entry: CacheEntry = serde_json::from_str(&text).ok()?;
        if entry.is_empty() {
            tracing::info!(key, "an empty reply in the cache is not served");
            return None;
        }
        Some(entry)
    }

    /// Stores an entry atomically (temporary file in the same directory, fsync, rename). An empty
    /// reply is refused: it is not an answer, and a rerun must ask again.
    pub fn put(&self, key: &str, entry: &CacheEntry) -> std::io::Result<()> {
        if entry.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "an empty reply is never cached",
            ));
        }
        let path = self.path(key);
        let dir = path.parent().expect("cache paths have a parent");
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(serde_json::to_string(entry)?.as_bytes())?;
        tmp.as_file().sync_all()?;
        tmp.persist(&path).map_err(|e| e.error)?;
        Ok(())
    }

    /// Drops the entry for `key` when it holds `reply` (as a caller read it: without a leading
    /// thought): that reply is not to be served again. An entry holding another reply (another
    /// process's, accepted, written since) is kept.
    pub fn forget(&self, key: &str, reply: &str) {
        let Some(entry) = self.get(key) else { return };
        let text = entry.tokens.concat();
        if text[super::thought_len(&text)..] != *reply {
            return;
        }
        match std::fs::remove_file(self.path(key)) {
            Ok(()) => tracing::info!(key, "a reply that could not be used is dropped from the cache"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(key, error = %e, "could not drop the cache entry"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ChatMessage, ResponseSchema};

    fn request() -> ChatRequest {
        ChatRequest::new(vec![ChatMessage::user("Are you talkative?")])
    }

    #[test]
    fn key_changes_with_everything_that_changes_the_answer() {
        let base = key("http://a/v1", "m", &request());
        assert_eq!(base, key("http://a/v1", "m", &request()));
        assert_ne!(base, key("http://b/v1", "m", &request()));
        assert_ne!(base, key("http://a/v1", "m2", &request()));
        let mut r = request();
        r.sampling.temperature = Some(0.2);
        assert_ne!(base, key("http://a/v1", "m", &r));
        let mut r = request();
        r.meta.repeat = 1;
        assert_ne!(base, key("http://a/v1", "m", &r));
        let mut r = request();
        r.schema = Some(ResponseSchema::new("s", serde_json::json!({})));
        assert_ne!(base, key("http://a/v1", "m", &r));
        // Key order inside a schema does not change the key.
        let mut a = request();
        a.schema = Some(ResponseSchema::new("s", serde_json::json!({"a": 1, "b": 2})));
        let mut b = request();
        b.schema = Some(ResponseSchema::new("s", serde_json::json!({"b": 2, "a": 1})));
        assert_eq!(key("u", "m", &a), key("u", "m", &b));
        // Purpose and role are bookkeeping: the same question is the same answer.
        let mut r = request();
        r.meta.purpose = "other".into();
        assert_eq!(base, key("http://a/v1", "m", &r));
    }

    #[test]
    fn round_trip_and_damaged_entries_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path());
        let entry = CacheEntry {
            tokens: vec!["Hel".into(), "lo".into()],
            usage: Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
            }),
            finish_reason: Some("stop".into()),
            model: "m".into(),
            created_unix: 1,
            choices: vec![super::super::TokenChoice {
                offset: 3,
                token: "lo".into(),
                top: vec![("lo".into(), -0.25), ("p".into(), -1.5)],
            }],
        };
        let k = key("u", "m", &request());
        assert_eq!(cache.get(&k), None);
        cache.put(&k, &entry).unwrap();
        assert_eq!(cache.get(&k).unwrap().text(), "Hello");
        assert_eq!(cache.get(&k).unwrap(), entry);
        // An entry written before choices were kept reads as one without them.
        let old = r#"{"tokens":["Hi"],"usage":null,"finish_reason":"stop","model":"m","created_unix":1}"#;
        std::fs::write(cache.path(&k), old).unwrap();
        assert!(cache.get(&k).unwrap().choices.is_empty());
        std::fs::write(cache.path(&k), "{ torn").unwrap();
        assert_eq!(cache.get(&k), None);
    }

    #[test]
    fn a_reply_is_forgotten_only_while_the_entry_still_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path());
        let k = key("u", "m", &request());
        let entry = |text: &str| CacheEntry {
            tokens: vec![text.into()],
            usage: None,
            finish_reason: Some("stop".into()),
            model: "m".into(),
            created_unix: 1,
            choices: Vec::new(),
        };
        cache.put(&k, &entry("ok")).unwrap();
        cache.forget(&k, "no");
        assert!(cache.get(&k).is_some(), "another reply, stored since, is kept");
        cache.put(&k, &entry("<think>hm</think>no")).unwrap();
        cache.forget(&k, "no");
        assert_eq!(cache.get(&k), None, "the reply as the caller read it, its thought left out");
    }

    #[test]
    fn empty_replies_are_never_stored_nor_served() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path());
        let k = key("u", "m", &request());
        for tokens in [
            vec![],
            vec![String::new()],
            vec![" ".into(), "\n\t".into()],
            vec!["\u{200B}".into()],
        ] {
            let entry = CacheEntry {
                tokens,
                usage: None,
                finish_reason: Some("stop".into()),
                model: "m".into(),
                created_unix: 1,
                choices: Vec::new(),
            };
            let refused = cache.put(&k, &entry).unwrap_err();
            assert!(refused.to_string().contains("never cached"), "{refused}");
            assert!(!cache.path(&k).exists(), "nothing written for {:?}", entry.tokens);
            // As an older build stored it: a miss, not an answer.
            std::fs::create_dir_all(cache.path(&k).parent().unwrap()).unwrap();
            std::fs::write(cache.path(&k), serde_json::to_string(&entry).unwrap()).unwrap();
            assert_eq!(cache.get(&k), None, "{:?} is served", entry.tokens);
            std::fs::remove_file(cache.path(&k)).unwrap();
        }
    }
}
