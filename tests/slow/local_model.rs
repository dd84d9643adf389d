//! The embedded model for real (smollm2-135m): tokenizer ids equal llama.cpp's, role-play replies are
//! non-empty, and schema-constrained judge replies always parse and stay in range. Structure is asserted,
//! never exact text. The model must have been fetched (`incharacter model fetch`; `.ci/run` does it and
//! sets INCHARACTER_REQUIRE_MODEL=1, which turns a missing model into a failure instead of a skip).
#![cfg(feature = "local-model")]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use incharacter::config::{CacheMode, ProviderConfig, ProviderKind};
use incharacter::llm::client::{Shared, Transport};
use incharacter::llm::local::{self, LocalModel, LocalTransport};
use incharacter::llm::{ChatMessage, ChatRequest, Client, ResponseSchema, complete};
use serde_json::{Value, json};

fn model() -> Option<Arc<LocalModel>> {
    load().map(Arc::new)
}

fn load() -> Option<LocalModel> {
    let data = incharacter::paths::data_dir()?;
    match local::resolve(&local::models_dir(&data), local::DEFAULT_MODEL) {
        Ok(path) => Some(LocalModel::load(local::DEFAULT_MODEL, &path).expect("the fetched model loads")),
        Err(e) if std::env::var("INCHARACTER_REQUIRE_MODEL").as_deref() == Ok("1") => panic!("{e}"),
        Err(e) => {
            eprintln!("SKIPPED (no local model): {e}");
            None
        }
    }
}

fn client(model: Arc<LocalModel>) -> Client {
    let transport: Arc<dyn Transport> = Arc::new(LocalTransport::new(model, "local"));
    let mut p = ProviderConfig::new("local", ProviderKind::Local, "", local::DEFAULT_MODEL);
    p.max_concurrency = 1;
    Client::new(transport, p, Shared::new(4, None, CacheMode::Off, 0))
}

#[test]
fn tokenizer_ids_equal_llama_cpp() {
    let Some(model) = model() else { return };
    let fixture: Value = serde_json::from_str(include_str!("../fixtures/smollm2_token_ids.json")).unwrap();
    for case in fixture["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let want: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(model.encode(text).unwrap(), want, "{text:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_play_replies_are_non_empty() {
    let Some(model) = model() else { return };
    let c = client(model);
    let mut r = ChatRequest::new(vec![
        ChatMessage::system("You are Hermione Granger, a brilliant and studious witch at Hogwarts."),
        ChatMessage::user("Harry:「Do you value artistic, aesthetic experiences?」"),
    ]);
    r.sampling.temperature = Some(0.7);
    r.sampling.seed = Some(3);
    r.sampling.max_tokens = Some(48);
    let reply = complete(&c, r).await.unwrap();
    assert!(reply.text.split_whitespace().count() >= 3, "{:?}", reply.text);
    assert!(
        !reply.text.contains("<|im_"),
        "no chat-template tokens leak: {:?}",
        reply.text
    );
    assert!(reply.usage.unwrap().completion_tokens > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_constrained_judge_replies_parse_and_are_in_range() {
    let Some(model) = model() else { return };
    let c = client(model);
    let schema = json!({"type": "object", "properties": {
        "analysis": {"type": "string", "maxLength": 60},
        "result": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 5}, {"enum": ["x"]}]}},
        "required": ["analysis", "result"], "additionalProperties": false});
    let answers = [
        "I adore books more than parties.",
        "Parties? I'd rather not.",
        "I love meeting new people!",
        "Honestly, it depends.",
        "我喜欢和朋友聊天。",
    ];
    for i in 0..50u64 {
        let mut r = ChatRequest::new(vec![
            ChatMessage::system("You are a psychologist rating extraversion from 1 (introverted) to 5 (extraverted)."),
            ChatMessage::user(format!(
                "The participant said: \"{}\" Rate them.",
                answers[i as usize % answers.len()]
            )),
        ]);
        r.schema = Some(ResponseSchema::new("expert_rating", schema.clone()));
        r.sampling.temperature = Some(if i % 2 == 0 { 0.0 } else { 1.0 });
        r.sampling.seed = Some(i);
        let reply = complete(&c, r).await.unwrap_or_else(|e| panic!("reply {i}: {e}"));
        let v: Value =
            serde_json::from_str(&reply.text).unwrap_or_else(|e| panic!("reply {i} is not JSON ({e}): {}", reply.text));
        assert!(v["analysis"].as_str().is_some_and(|a| a.chars().count() <= 60), "{v}");
        let ok = v["result"] == "x" || v["result"].as_i64().is_some_and(|r| (1..=5).contains(&r));
        assert!(ok, "reply {i} out of range: {v}");
    }
}

#[test]
fn cancelled_generation_stops() {
    let Some(model) = model() else { return };
    let mut r = ChatRequest::new(vec![ChatMessage::user("Tell me a very long story.")]);
    r.sampling.max_tokens = Some(400);
    let cancel = AtomicBool::new(false);
    let mut pieces = 0;
    let result = model.generate(&r, &cancel, &mut |_| {
        pieces += 1;
        if pieces == 5 {
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(result.is_err(), "stopped early");
    assert!(pieces < 20, "{pieces}");
}

/// Greedy text of `request` straight from the model (no client, no response cache).
fn greedy(model: &LocalModel, request: &ChatRequest) -> String {
    let mut text = String::new();
    model
        .generate(request, &AtomicBool::new(false), &mut |t| text.push_str(&t))
        .expect("generation succeeds");
    text
}

#[test]
fn interview_items_compute_the_character_prompt_once_and_answer_the_same() {
    let (Some(cached), Some(whole)) = (load(), load()) else {
        return;
    };
    let whole = whole.without_prefix_cache();
    let system = "You are Hermione Granger, a brilliant and studious witch at Hogwarts who loves books, \
                  follows the rules, and stands by Harry and Ron. Answer as Hermione, in the first person.";
    let ask = |question: &str| {
        let mut r = ChatRequest::new(vec![
            ChatMessage::system(system),
            ChatMessage::user(format!("Harry:「{question}」")),
        ]);
        r.sampling.temperature = Some(0.0);
        r.sampling.max_tokens = Some(24);
        r
    };
    let questions = [
        "Do you enjoy parties?",
        "How do you handle stress before exams?",
        "Would you break a rule to help a friend?",
    ];
    let first: Vec<String> = questions.iter().map(|q| greedy(&cached, &ask(q))).collect();
    assert_eq!(
        cached.prefix_hits(),
        2,
        "the 2nd and 3rd questions reuse the first one's system prompt"
    );
    for (q, got) in questions.iter().zip(&first) {
        assert_eq!(
            got,
            &greedy(&whole, &ask(q)),
            "{q}: the same reply with the prompt computed whole"
        );
    }
    assert_eq!(whole.prefix_hits(), 0);
    // Another system prompt is computed for itself, not continued from the cached one.
    let mut other = ask(questions[0]);
    other.messages[0] = ChatMessage::system("You are Sherlock Holmes, a consulting detective in London.");
    assert_eq!(greedy(&cached, &other), greedy(&whole, &other));
    assert_eq!(cached.prefix_hits(), 2);
}

#[test]
fn the_benchmark_reads_a_prompt_as_long_as_asked_and_refuses_one_past_the_context() {
    if load().is_none() {
        return;
    }
    let bench = |at_least: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_incharacter"))
            .args(["bench", "local", "--tokens", "4", "--runs", "1", "--json"])
            .args(["--prompt-tokens", at_least])
            .output()
            .unwrap()
    };
    let out = bench("400");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let read = report["prompt_tokens"].as_u64().unwrap();
    // One sentence more than needed at most.
    assert!((400..430).contains(&read), "{read}");
    // Four tokens a run time no decoding: no speed is made up from them (and the fields stay).
    assert!(report["decode_tok_s"].is_null(), "{report}");
    assert!(report.get("constrained_decode_tok_s").is_some(), "{report}");
    assert!(
        report.get("constraint_overhead").is_some_and(Value::is_null),
        "{report}"
    );
    // Side by side, the same rule.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_incharacter"))
        .args([
            "bench",
            "local",
            "--tokens",
            "4",
            "--runs",
            "1",
            "--parallel",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let widths: Value = serde_json::from_slice::<Value>(&out.stdout).unwrap()["widths"].clone();
    assert!(
        widths[0]["decode_tok_s"].is_null() && widths[0]["per_sequence_ms"].is_null(),
        "{widths}"
    );
    assert!(widths[0]["prefill_tok_s"].as_f64().is_some_and(|s| s > 0.0), "{widths}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("decode:  not timed (fewer than 8 tokens a run"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bench("100000");
    assert_eq!(out.status.code(), Some(2));
    let out = bench(&usize::MAX.to_string());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("context of"));
    // What a run decoded is reported beside what it was to decode.
    let decoded = report["decoded_tokens"].as_u64().unwrap();
    assert!((1..=4).contains(&decoded), "{report}");
    // Side by side every sequence decodes all its tokens: past the context, refused before any run
    // (it ran for minutes, then failed with no report).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_incharacter"))
        .args([
            "bench",
            "local",
            "--tokens",
            "5000",
            "--runs",
            "1",
            "--parallel",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--parallel decodes all 5000 tokens of every sequence"),
        "{stderr}"
    );
    assert!(!stderr.contains("run 1"), "nothing timed first: {stderr}");
    // One sequence with more tokens to write than its context holds beside the prompt: refused too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_incharacter"))
        .args(["bench", "local", "--tokens", "5000", "--runs", "1", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("and 5000 more do not fit in the model's context of"),
        "{stderr}"
    );
    assert!(!stderr.contains("run 1"), "nothing timed first: {stderr}");
}
