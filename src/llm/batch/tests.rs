use super::*;
use crate::config::ProviderKind;
use crate::llm::{ChatMessage, Usage};

fn request(text: &str) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::system("You are Hermione."), ChatMessage::user(text)])
}

#[test]
fn a_line_is_the_streaming_body_without_stream() {
    let config = ProviderConfig::new("p", ProviderKind::Openai, "http://x/v1", "m");
    let r = request("Do you talk a lot?");
    let streaming = openai::request_body(&config.model, &r, true);
    let batch = body(&config, &r);
    let keys: Vec<&String> = batch.as_object().unwrap().keys().collect();
    let mut expected: Vec<&String> = streaming.as_object().unwrap().keys().collect();
    expected.retain(|k| *k != "stream" && *k != "stream_options");
    assert_eq!(keys, expected, "the same keys in the same order");
    let line: Value = serde_json::from_str(&line("ic-1", &batch)).unwrap();
    assert_eq!(line["url"], ENDPOINT);
    assert_eq!(line["body"]["messages"], streaming["messages"]);
    assert_eq!(custom_id("http://x/v1", "m", &r), custom_id("http://x/v1", "m", &r));
    assert_ne!(custom_id("http://x/v1", "m", &r), custom_id("http://x/v1", "m", &request("Other?")));
}

const OK: &str = r#"{"id":"r1","custom_id":"a","response":{"status_code":200,"body":{"choices":[{"index":0,"message":{"role":"assistant","content":"Yes."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2}}},"error":null}"#;
const REFUSED: &str = r#"{"id":"r2","custom_id":"b","response":{"status_code":400,"body":{"error":{"message":"bad temperature","param":"temperature"}}},"error":null}"#;
const EXPIRED: &str = r#"{"id":"r3","custom_id":"c","response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}"#;

#[test]
fn results_lines_give_replies_and_refusals_in_any_order() {
    let text = format!("{EXPIRED}\n\n{REFUSED}\n{OK}\n");
    let answers = parse_results("out.jsonl", &text, &|_| true).unwrap();
    assert_eq!(
        answers["a"],
        Ok(Reply {
            text: "Yes.".into(),
            usage: Some(Usage {
                prompt_tokens: 9,
                completion_tokens: 2
            }),
            finish_reason: Some("stop".into()),
            choices: Vec::new(),
            came: Came::Sent,
        })
    );
    let b = answers["b"].clone().unwrap_err();
    assert_eq!((b.status, b.param.as_deref()), (400, Some("temperature")));
    let c = answers["c"].clone().unwrap_err();
    assert_eq!((c.status, c.code.as_deref()), (503, Some("batch_expired")));
}

/// A count no reply can have (2^64 − 1 tokens, which would wrap a sum) is no usage: the reply's
/// tokens are estimated from its text.
#[test]
fn a_usage_no_reply_can_have_is_none() {
    let huge = OK.replace("\"prompt_tokens\":9", "\"prompt_tokens\":18446744073709551615");
    let answers = parse_results("out.jsonl", &huge, &|_| true).unwrap();
    assert_eq!(answers["a"].as_ref().unwrap().usage, None);
}

#[test]
fn a_bad_line_is_located_and_refuses_the_file() {
    let text = format!("{OK}\n{{\"custom_id\": \"b\", oops}}\n");
    let e = parse_results("out.jsonl", &text, &|_| true).unwrap_err();
    assert_eq!((e.line, e.column), (2, 20), "{e}");
    assert!(e.to_string().starts_with("out.jsonl:2:20: not JSON"), "{e}");
    let e = parse_results("out.jsonl", &format!("{REFUSED}\n{OK}"), &|id| id == "b").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("custom_id a is not a request of this batch"), "{e}");
    assert_eq!(e.column, OK.find("\"custom_id\"").unwrap() + 1);
    let e = parse_results("out.jsonl", &format!("{OK}\n{OK}"), &|_| true).unwrap_err();
    assert!(e.message.contains("answered twice"), "{e}");
    // Columns in characters, a byte order mark not one of them.
    let e = parse_results("out.jsonl", "\u{feff}{\"custom_id\": \"日本\", oops}", &|_| true).unwrap_err();
    assert_eq!((e.line, e.column), (1, 21), "{e}");
    assert_eq!(parse_results("out.jsonl", &format!("\u{feff}{OK}"), &|_| true).unwrap().len(), 1);
}

#[tokio::test]
async fn a_phase_is_complete_when_every_started_request_is_parked() {
    let hub = Arc::new(Hub::default());
    assert_eq!(hub.phase(), None, "nothing started");
    hub.update(|s| s.outstanding = 2);
    let first = tokio::spawn({
        let hub = hub.clone();
        async move { hub.ask(("p", crate::config::Role::Rpa), "x".into(), json!({"n": 1}), 5).await }
    });
    while hub.state().parked < 1 {
        tokio::task::yield_now().await;
    }
    assert_eq!(hub.phase(), None, "one of two started requests is not parked yet");
    let second = tokio::spawn({
        let hub = hub.clone();
        async move { hub.ask(("p", crate::config::Role::Rpa), "y".into(), json!({"n": 2}), 5).await }
    });
    let phase = loop {
        if let Some(p) = hub.phase() {
            break p;
        }
        hub.changed().await;
    };
    let ids: Vec<&str> = phase.iter().map(|p| p.custom_id.as_str()).collect();
    assert_eq!(ids, ["x", "y"]);
    hub.update(|s| s.woken = true);
    assert_eq!(hub.phase(), None, "a woken study may still start requests");
    let reply = Reply {
        text: "hi".into(),
        usage: None,
        finish_reason: None,
        choices: Vec::new(),
        came: Came::Sent,
    };
    let answers = BTreeMap::from([("y".to_string(), Ok(reply.clone()))]);
    hub.resolve(&["x".into(), "y".into()], &answers);
    assert_eq!(second.await.unwrap(), Some(Ok(reply.clone())));
    let missing = first.await.unwrap().unwrap().unwrap_err();
    assert_eq!(missing.status, 503, "no result: asked again in the next phase");
    assert_eq!(hub.state().parked, 0);
    let again = Reply {
        came: Came::Kept,
        ..reply
    };
    assert_eq!(
        hub.ask(("p", crate::config::Role::Rpa), "y".into(), json!({}), 5).await,
        Some(Ok(again)),
        "kept for a second asking, and not billed again"
    );
}

/// Refusals that results brought (imported, or kept from the run's earlier sittings) count
/// against a request's attempts as empty replies do: one not yet given is given once, one past
/// the attempts or not worth retrying (a 400) at once; a reply answers everyone once, billed to
/// the first.
#[tokio::test]
async fn refusals_from_results_count_against_the_attempts_and_a_400_ends_at_once() {
    let refusal = |status: u16| -> Answer {
        Err(Refusal {
            status,
            message: format!("status {status}"),
            param: None,
            code: None,
            came: Came::Sent,
        })
    };
    async fn ask(hub: &Hub, id: &str) -> Result<Option<Answer>, tokio::time::error::Elapsed> {
        let asking = hub.ask(("p", crate::config::Role::Rpa), id.to_string(), json!({}), 3);
        tokio::time::timeout(std::time::Duration::from_millis(50), asking).await
    }
    let hub = Hub::default();
    hub.update(|s| s.outstanding = 9);
    let kept = BTreeMap::from([("a".to_string(), refusal(500)), ("b".to_string(), refusal(500))]);
    hub.load(&kept, Came::Kept);
    hub.load(&kept, Came::Kept);
    let imported = BTreeMap::from([("a".to_string(), refusal(500)), ("c".to_string(), refusal(400))]);
    hub.load(&imported, Came::Imported);
    // Given as it came (imported: its tokens this sitting's), then as kept (counted already).
    let came = |status: u16, came: Came| Some(refusal(status).map_err(|r| Refusal { came, ..r }));
    // a: imported, given once, then met its three attempts: at once from then on.
    assert_eq!(ask(&hub, "a").await.unwrap(), came(500, Came::Imported));
    assert_eq!(ask(&hub, "a").await.unwrap(), came(500, Came::Kept));
    // b: two of three attempts spent in earlier sittings: asked again, it waits for a phase.
    assert!(ask(&hub, "b").await.is_err(), "parked for the next phase");
    // c: a 400 is not asked again.
    assert_eq!(ask(&hub, "c").await.unwrap(), came(400, Came::Imported));
    assert_eq!(ask(&hub, "c").await.unwrap(), came(400, Came::Kept));
}

#[tokio::test]
async fn a_parked_attempt_dropped_leaves_the_count_right() {
    let hub = Arc::new(Hub::default());
    let task = tokio::spawn({
        let hub = hub.clone();
        async move { hub.ask(("p", crate::config::Role::Rpa), "x".into(), json!({}), 5).await }
    });
    while hub.state().parked < 1 {
        tokio::task::yield_now().await;
    }
    task.abort();
    let _ = task.await;
    assert_eq!(hub.state().parked, 0);
    assert!(hub.state().waiting.is_empty());
}
