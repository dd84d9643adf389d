//! An empty or whitespace-only reply is a failure, never an answer: a server that sends complete
//! replies with no text (as a llama.cpp server dropping requests under load does) makes `run` retry
//! them, journal the items whose every attempt was empty as `item_failed`, exit 1, and cache nothing
//! for them, so a rerun asks them again.

use std::path::{Path, PathBuf};

use incharacter_testkit::fake_openai::{FakeConfig, Fault, ScriptRule};
use serde_json::Value;

use crate::common;

/// Items 3 and 4 of GSE (10 items) by words only their questions hold.
const EMPTY: &str = "actually reach it";
const BLANK: &str = "deal with it quickly and well";

const RUN: [&str; 8] = [
    "run",
    "--characters",
    "hermione-en",
    "--scales",
    "GSE",
    "--methods",
    "er-batch",
    "--json",
];

/// Three attempts per request, one millisecond apart.
const RETRIES: &str = "max_retries = 2\nretry_base_ms = 1";

fn read_journal(data: &Path, id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(data.join("sessions").join(id).join("journal.jsonl")).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn events<'a>(journal: &'a [Value], kind: &str) -> Vec<&'a Value> {
    journal.iter().filter(|e| e["event"] == kind).collect()
}

/// Every cache entry under the data dir, as stored.
fn cache_entries(data: &Path) -> Vec<(PathBuf, Value)> {
    let mut files = Vec::new();
    common::all_bytes(&data.join("cache"), &mut files);
    files
        .into_iter()
        .map(|(path, bytes)| (PathBuf::from(path), serde_json::from_slice(&bytes).unwrap()))
        .collect()
}

fn text_of(entry: &Value) -> String {
    entry["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_answered_only_with_empty_replies_fail_and_are_asked_again() {
    let script = vec![
        ScriptRule {
            contains: EMPTY.into(),
            reply: String::new(),
        },
        ScriptRule {
            contains: BLANK.into(),
            reply: " \n\t ".into(),
        },
    ];
    let s = common::setup(
        FakeConfig {
            script,
            ..FakeConfig::default()
        },
        RETRIES,
    )
    .await;
    let out = common::output(&s.config, &s.data, &RUN).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("failed: 2 interview item(s)"), "{stderr}");
    assert!(stderr.contains("the replies were empty"), "{stderr}");
    let id = common::session_id(&out);

    let journal = read_journal(&s.data, &id);
    let failed = events(&journal, "item_failed");
    let mut failed_ids: Vec<u64> = failed.iter().map(|e| e["item_id"].as_u64().unwrap()).collect();
    failed_ids.sort();
    assert_eq!(failed_ids, [3, 4]);
    for e in &failed {
        assert_eq!(
            e["error"],
            "the replies were empty: 3 of 3 attempt(s) came back with no text \
             (the last ended with finish_reason \"stop\")"
        );
    }
    let answered = events(&journal, "item_answered");
    assert_eq!(answered.len(), 8);
    assert!(
        answered
            .iter()
            .all(|e| !e["response"].as_str().unwrap().trim().is_empty()),
        "no empty answer is journaled"
    );

    // Three attempts for each empty item, one for each answer; the dimension is not assessed with
    // items missing, so the judge is not asked.
    let requests = s.server.stats().requests;
    assert_eq!(requests, 2 * 3 + 8);
    // Nothing empty is cached: one entry per answer.
    let entries = cache_entries(&s.data);
    assert_eq!(entries.len(), 8, "{entries:?}");
    for (path, entry) in &entries {
        assert!(
            !text_of(entry).trim().is_empty(),
            "{} holds an empty reply",
            path.display()
        );
    }

    // A rerun takes the answers from the cache and asks the empty items again.
    let again = common::output(&s.config, &s.data, &RUN).await;
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        s.server.stats().requests,
        requests + 2 * 3,
        "only the empty items go out again"
    );
    let rerun = read_journal(&s.data, &common::session_id(&again));
    assert_eq!(events(&rerun, "item_failed").len(), 2);
    assert_eq!(events(&rerun, "item_answered").len(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_replies_before_a_real_one_are_retried_and_the_run_succeeds() {
    // Every request's first attempt is empty and its second only whitespace; the third answers.
    let s = common::setup(
        FakeConfig {
            fault_share: 1.0,
            faults_per_request: 2,
            faults: vec![Fault::Empty, Fault::Blank],
            ..FakeConfig::default()
        },
        RETRIES,
    )
    .await;
    let out = common::output(&s.config, &s.data, &RUN).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let journal = read_journal(&s.data, &common::session_id(&out));
    assert!(events(&journal, "item_failed").is_empty());
    let answered = events(&journal, "item_answered");
    assert_eq!(answered.len(), 10);
    assert!(
        answered
            .iter()
            .all(|e| !e["response"].as_str().unwrap().trim().is_empty())
    );
    // Every request (the interview's and the judge's) took three attempts, and only its answer is cached.
    let stats = s.server.stats();
    assert_eq!(stats.requests % 3, 0, "{stats:?}");
    let distinct = stats.requests / 3;
    assert!(distinct > 10, "the 10 items and the judge's calls: {stats:?}");
    assert_eq!(stats.faults, 2 * distinct);
    assert_eq!(cache_entries(&s.data).len() as u64, distinct);
}

/// The embedded model's reply with nothing in it (here a token cap of 0, the surest way to get one
/// from random weights) is a failure too, after the same retries.
#[cfg(feature = "local-model")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_reply_of_the_embedded_model_is_a_failure() {
    use std::sync::Arc;

    use incharacter::config::{CacheMode, ProviderConfig, ProviderKind};
    use incharacter::llm::client::{Shared, Transport};
    use incharacter::llm::local::{LocalModel, LocalTransport};
    use incharacter::llm::{ChatMessage, ChatRequest, Client, LlmError, complete};

    let dir = tempfile::tempdir().unwrap();
    let name = "tiny-llama-q8_0.gguf";
    let copy = dir.path().join(name);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/gguf")
            .join(name),
        &copy,
    )
    .unwrap();
    let model = Arc::new(LocalModel::load(name, &copy).unwrap());
    let transport: Arc<dyn Transport> = Arc::new(LocalTransport::new(model, "local"));
    let mut p = ProviderConfig::new("local", ProviderKind::Local, "", name);
    p.max_retries = 2;
    p.retry_base_ms = 1;
    let cache = incharacter::llm::cache::Cache::new(dir.path().join("cache"));
    let client = Client::new(transport, p, Shared::new(1, Some(cache), CacheMode::ReadWrite, 0));
    let mut r = ChatRequest::new(vec![ChatMessage::user("Hello?")]);
    r.sampling.max_tokens = Some(0);
    let error = complete(&client, r).await.unwrap_err();
    assert!(
        matches!(&error, LlmError::EmptyReplies { attempts: 3, empty: 3, finish_reason: Some(f) } if f == "length"),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("token cap ran out before any text"),
        "{error}"
    );
    assert!(!dir.path().join("cache").exists(), "nothing cached");
}
