//! The personas against the servers' own words.
use super::*;
use crate::fake_openai::{FakeServer, ScriptRule};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(persona: Option<Persona>, config: FakeConfig) -> FakeServer {
    FakeServer::start(FakeConfig { persona, ..config }).await.unwrap()
}

/// Sends one HTTP/1.0 request (the server closes the connection after its reply).
async fn send(server: &FakeServer, method: &str, path: &str, body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.0\r\nhost: fake\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    stream
}

/// Reads until the connection ends, however it ends (closed, or reset by a dropped reply).
async fn read_rest(stream: &mut TcpStream, mut seen: Vec<u8>) -> String {
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stream.read(&mut buf).await {
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(seen).unwrap()
}

/// Reads until `needle` has arrived; what was read.
async fn read_until(stream: &mut TcpStream, needle: &str) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains(needle) {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the connection closed before {needle}");
        seen.extend_from_slice(&buf[..n]);
    }
    seen
}

/// The status, the content type and the body of a response.
fn parts(response: &str) -> (u16, String, String) {
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type: "))
        .unwrap_or_default()
        .to_string();
    (status, content_type, body.to_string())
}

async fn call(server: &FakeServer, method: &str, path: &str, body: &str) -> (u16, String, String) {
    let mut stream = send(server, method, path, body).await;
    parts(&read_rest(&mut stream, Vec::new()).await)
}

async fn call_json(server: &FakeServer, method: &str, path: &str, body: Value) -> (u16, Value) {
    let (status, _, body) = call(server, method, path, &body.to_string()).await;
    (
        status,
        serde_json::from_str(&body).unwrap_or_else(|_| panic!("not JSON: {body}")),
    )
}

/// A chat request whose user message is `words` one-token words (its prompt: words + 7 tokens).
fn chat(words: usize, stream: bool, max_tokens: Option<usize>) -> Value {
    let mut request = json!({"model": "fake-openai", "stream": stream,
        "messages": [{"role": "user", "content": "word ".repeat(words)}]});
    if let Some(m) = max_tokens {
        request["max_tokens"] = json!(m);
    }
    request
}

/// Every reply is `pieces` one-token pieces.
fn replying(pieces: usize) -> FakeConfig {
    FakeConfig {
        script: vec![ScriptRule {
            contains: String::new(),
            reply: "w ".repeat(pieces),
        }],
        ..FakeConfig::default()
    }
}

/// The data lines of an event stream, in order.
fn events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|e| e.trim().strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

/// The finish reasons a stream sent (null ones left out).
fn finish_reasons(events: &[String]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|e| e.pointer("/choices/0/finish_reason")?.as_str().map(str::to_string))
        .collect()
}

#[test]
fn the_tokenizer_counts_runs_of_four_and_every_other_character() {
    assert_eq!(count_tokens(""), 0);
    assert_eq!(count_tokens("Hello, world!"), 6);
    assert_eq!(count_tokens("a1b2c"), 2);
    assert_eq!(count_tokens("  \n\t "), 0);
    assert_eq!(count_tokens("你好。"), 3);
    assert_eq!(count_tokens("naïve"), 3);
    assert_eq!(chat_prompt_tokens(&[]), 3);
    let messages = [
        json!({"role": "system", "content": "Be brief."}),
        json!({"role": "user", "content": "Hi"}),
    ];
    assert_eq!(chat_prompt_tokens(&messages), (4 + 4) + (1 + 4) + 3);
    let parts = [json!({"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "you"}]})];
    assert_eq!(chat_prompt_tokens(&parts), 2 + 4 + 3);
}

#[test]
fn personas_are_parsed_by_their_names() {
    for (name, persona) in [
        ("llama.cpp", Persona::LlamaCpp),
        ("llamacpp", Persona::LlamaCpp),
        ("llama-server", Persona::LlamaCpp),
        ("llama-cpp-python", Persona::LlamaCppPython),
        ("vllm", Persona::Vllm),
        ("ollama", Persona::Ollama),
        ("lmstudio", Persona::LmStudio),
        ("lm-studio", Persona::LmStudio),
    ] {
        assert_eq!(Persona::parse(name), Some(persona), "{name}");
    }
    assert_eq!(Persona::parse("openai"), None);
}

#[tokio::test]
async fn llama_cpp_serves_its_routes() {
    let config = FakeConfig {
        context: 4096,
        slots: 2,
        ..FakeConfig::default()
    };
    let server = start(Some(Persona::LlamaCpp), config).await;
    let (status, props) = call_json(&server, "GET", "/props", Value::Null).await;
    assert_eq!(status, 200);
    let template = props["chat_template"].as_str().unwrap().to_string();
    assert!(template.starts_with("{% for message in messages %}"), "{template}");
    assert_eq!(
        props,
        json!({"default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": 4096, "speculative": false,
            "is_processing": false, "params": {"n_predict": -1, "temperature": 0.8, "top_p": 0.95}},
            "total_slots": 2, "model_path": "models/fake-openai.gguf", "chat_template": template,
            "modalities": {"vision": false, "audio": false}, "build_info": "b5600-fake"})
    );
    let (_, _, slots) = call(&server, "GET", "/slots", "").await;
    assert_eq!(
        slots,
        r#"[{"id":0,"n_ctx":4096,"is_processing":false},{"id":1,"n_ctx":4096,"is_processing":false}]"#
    );
    let (status, tokens) = call_json(&server, "POST", "/tokenize", json!({"content": "Hello, world!"})).await;
    assert_eq!(status, 200);
    assert_eq!(tokens["tokens"].as_array().unwrap().len(), 6);
    assert_eq!(call(&server, "GET", "/health", "").await.2, r#"{"status":"ok"}"#);
    assert_eq!(
        call(&server, "GET", "/v1/models", "").await.2,
        r#"{"object":"list","data":[{"id":"fake-openai","object":"model","owned_by":"llamacpp","meta":{"n_ctx_train":8192}}]}"#
    );
    for (method, path) in [
        ("POST", "/api/show"),
        ("GET", "/api/v0/models"),
        ("POST", "/v1/batches"),
    ] {
        let (status, content_type, body) = call(&server, method, path, "{}").await;
        assert_eq!((status, body.as_str()), (404, "Not Found"), "{path}");
        assert!(content_type.starts_with("text/plain"), "{content_type}");
    }
    assert_eq!(server.stats().probes, 8);
    assert_eq!(server.stats().requests, 0);
}

#[tokio::test]
async fn llama_cpp_refuses_a_prompt_its_slot_cannot_hold_and_stops_a_reply_at_the_full_context() {
    let config = FakeConfig {
        context: 40,
        ..replying(50)
    };
    let server = start(Some(Persona::LlamaCpp), config).await;
    let (status, _, body) = call(
        &server,
        "POST",
        "/v1/chat/completions",
        &chat(33, false, None).to_string(),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        r#"{"error":{"code":400,"message":"request (40 tokens) exceeds the available context size (40 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":40,"n_ctx":40}}"#
    );
    let (status, reply) = call_json(&server, "POST", "/v1/chat/completions", chat(13, false, Some(100))).await;
    assert_eq!(status, 200);
    assert_eq!(reply["choices"][0]["finish_reason"], "length");
    assert_eq!(reply["usage"]["prompt_tokens"], 20);
    assert_eq!(reply["usage"]["completion_tokens"], 20);
    assert_eq!(reply["choices"][0]["message"]["content"], "w ".repeat(20));
    let (_, _, body) = call(
        &server,
        "POST",
        "/v1/chat/completions",
        &chat(13, true, Some(100)).to_string(),
    )
    .await;
    let events = events(&body);
    assert_eq!(finish_reasons(&events), ["length"]);
    assert_eq!(events.last().unwrap(), "[DONE]");
    let (_, fitting) = call_json(&server, "POST", "/v1/chat/completions", chat(13, false, Some(5))).await;
    assert_eq!(fitting["usage"]["completion_tokens"], 5);
    let stats = server.stats();
    assert_eq!(
        (stats.context_refusals, stats.max_prompt_tokens, stats.requests),
        (1, 40, 4)
    );
}

#[tokio::test]
async fn llama_cpp_queues_requests_beyond_its_slots() {
    let config = FakeConfig {
        tokens_per_s: 500.0,
        ..replying(300)
    };
    let server = start(Some(Persona::LlamaCpp), config).await;
    let body = chat(3, true, None).to_string();
    let mut first = send(&server, "POST", "/v1/chat/completions", &body).await;
    let first_seen = read_until(&mut first, "\"role\":\"assistant\"").await;
    let (_, busy) = call_json(&server, "GET", "/slots", Value::Null).await;
    assert_eq!(busy, json!([{"id": 0, "n_ctx": 2048, "is_processing": true}]));
    let mut second = send(&server, "POST", "/v1/chat/completions", &body).await;
    server.wait_for_requests(2).await;
    let (first, second) = tokio::join!(read_rest(&mut first, first_seen), read_rest(&mut second, Vec::new()));
    for reply in [first, second] {
        let events = events(&parts(&reply).2);
        assert_eq!(finish_reasons(&events), ["stop"]);
        assert_eq!(events.last().unwrap(), "[DONE]");
    }
    let stats = server.stats();
    assert_eq!(
        (stats.max_in_flight, stats.max_processing, stats.interrupted),
        (2, 1, 0)
    );
}

#[tokio::test]
async fn llama_cpp_python_serves_its_routes() {
    let server = start(Some(Persona::LlamaCppPython), FakeConfig::default()).await;
    for (method, path) in [
        ("GET", "/props"),
        ("GET", "/slots"),
        ("POST", "/tokenize"),
        ("POST", "/api/show"),
    ] {
        let (status, content_type, body) = call(&server, method, path, "{}").await;
        assert_eq!((status, body.as_str()), (404, r#"{"detail":"Not Found"}"#), "{path}");
        assert!(content_type.starts_with("application/json"), "{content_type}");
    }
    let input = json!({"input": "Hello, world!"});
    let (status, tokens) = call_json(&server, "POST", "/extras/tokenize", input.clone()).await;
    assert_eq!((status, tokens["tokens"].as_array().unwrap().len()), (200, 6));
    assert_eq!(
        call(&server, "POST", "/extras/tokenize/count", &input.to_string())
            .await
            .2,
        r#"{"count":6}"#
    );
    assert_eq!(call(&server, "POST", "/extras/tokenize", "{}").await.0, 422);
    assert_eq!(
        call(&server, "GET", "/v1/models", "").await.2,
        r#"{"object":"list","data":[{"id":"fake-openai","object":"model","owned_by":"me","permissions":[]}]}"#
    );
    assert_eq!(server.stats().probes, 8);
}

/// Starts a long, slow stream on llama-cpp-python, waits for its first chunk, then sends `second`
/// to `path`: the stream's whole text and the second reply.
async fn interrupted_by(path: &str, second: Value) -> (FakeServer, String, (u16, String, String)) {
    let config = FakeConfig {
        tokens_per_s: 100.0,
        ..replying(2000)
    };
    let server = start(Some(Persona::LlamaCppPython), config).await;
    let mut first = send(
        &server,
        "POST",
        "/v1/chat/completions",
        &chat(3, true, None).to_string(),
    )
    .await;
    let seen = read_until(&mut first, "\"role\":\"assistant\"").await;
    let second = second.to_string();
    let (first, second) = tokio::join!(read_rest(&mut first, seen), call(&server, "POST", path, &second));
    (server, first, second)
}

#[tokio::test]
async fn llama_cpp_python_ends_a_running_stream_when_another_request_waits() {
    let (server, first, (status, _, second)) = interrupted_by("/v1/chat/completions", chat(3, false, None)).await;
    let events = events(&parts(&first).2);
    assert_eq!(events.last().unwrap(), "[DONE]");
    assert!(finish_reasons(&events).is_empty(), "{events:?}");
    assert!(events.len() < 100, "the stream ran on: {} events", events.len());
    assert_eq!(status, 200);
    let second: Value = serde_json::from_str(&second).unwrap();
    assert_eq!(second["choices"][0]["finish_reason"], "stop");
    let stats = server.stats();
    assert_eq!((stats.interrupted, stats.max_processing, stats.requests), (1, 1, 2));
}

#[tokio::test]
async fn llama_cpp_python_tokenize_takes_the_lock_and_so_ends_a_stream() {
    let (server, first, (status, _, count)) = interrupted_by("/extras/tokenize/count", json!({"input": "Hello"})).await;
    let events = events(&parts(&first).2);
    assert_eq!(events.last().unwrap(), "[DONE]");
    assert!(finish_reasons(&events).is_empty(), "{events:?}");
    assert_eq!((status, count.as_str()), (200, r#"{"count":2}"#));
    assert_eq!((server.stats().interrupted, server.stats().probes), (1, 1));
}

#[tokio::test]
async fn llama_cpp_python_fails_an_overflowing_prompt_its_own_two_ways() {
    let config = FakeConfig {
        context: 40,
        ..replying(50)
    };
    let server = start(Some(Persona::LlamaCppPython), config).await;
    let (status, _, body) = call(
        &server,
        "POST",
        "/v1/chat/completions",
        &chat(33, true, None).to_string(),
    )
    .await;
    assert_eq!(status, 200);
    assert!(events(&body).is_empty(), "no event at all: {body:?}");
    let (status, _, body) = call(
        &server,
        "POST",
        "/v1/chat/completions",
        &chat(33, false, Some(10)).to_string(),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        r#"{"error":{"message":"This model's maximum context length is 40 tokens. However, you requested 50 tokens (40 in the messages, 10 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#
    );
    let (_, _, body) = call(
        &server,
        "POST",
        "/v1/chat/completions",
        &chat(33, false, None).to_string(),
    )
    .await;
    assert!(body.contains("(40 in the messages, None in the completion)"), "{body}");
    let (_, reply) = call_json(&server, "POST", "/v1/chat/completions", chat(13, false, Some(100))).await;
    assert_eq!(reply["choices"][0]["finish_reason"], "length");
    assert_eq!(reply["usage"]["completion_tokens"], 20);
    assert_eq!(server.stats().context_refusals, 3);
}

#[tokio::test]
async fn vllm_serves_its_routes_and_refuses_what_exceeds_max_model_len() {
    let config = FakeConfig {
        context: 40,
        ..replying(50)
    };
    let server = start(Some(Persona::Vllm), config).await;
    assert_eq!(
        call(&server, "GET", "/v1/models", "").await.2,
        r#"{"object":"list","data":[{"id":"fake-openai","object":"model","created":1700000000,"owned_by":"vllm","root":"fake-openai","parent":null,"max_model_len":40,"permission":[]}]}"#
    );
    let (_, counted) = call_json(
        &server,
        "POST",
        "/tokenize",
        json!({"model": "m", "messages": chat(13, false, None)["messages"]}),
    )
    .await;
    assert_eq!(
        (counted["count"].clone(), counted["max_model_len"].clone()),
        (json!(20), json!(40))
    );
    assert_eq!(counted["tokens"].as_array().unwrap().len(), 20);
    let (_, counted) = call_json(
        &server,
        "POST",
        "/tokenize",
        json!({"model": "m", "prompt": "Hello, world!"}),
    )
    .await;
    assert_eq!(counted["count"], 6);
    assert_eq!(call(&server, "GET", "/props", "").await.2, r#"{"detail":"Not Found"}"#);

    let (status, _, body) = call(
        &server,
        "POST",
        "/v1/chat/completions",
        &chat(13, false, Some(30)).to_string(),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        r#"{"object":"error","message":"This model's maximum context length is 40 tokens. However, you requested 50 tokens (20 in the messages, 30 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#
    );
    let (status, refusal) = call_json(&server, "POST", "/v1/chat/completions", chat(33, false, None)).await;
    assert_eq!(status, 400);
    assert_eq!(
        refusal["message"],
        "This model's maximum context length is 40 tokens. However, you requested 40 tokens in the messages, Please reduce the length of the messages."
    );
    let (_, reply) = call_json(&server, "POST", "/v1/chat/completions", chat(13, false, Some(20))).await;
    assert_eq!(reply["usage"]["completion_tokens"], 20);
    let (_, reply) = call_json(&server, "POST", "/v1/chat/completions", chat(13, false, None)).await;
    assert_eq!(reply["choices"][0]["finish_reason"], "length");
    let stats = server.stats();
    assert_eq!((stats.context_refusals, stats.probes, stats.requests), (2, 4, 4));
}

#[tokio::test]
async fn vllm_has_no_slot_limit() {
    let config = FakeConfig {
        tokens_per_s: 100.0,
        ..replying(2000)
    };
    let server = start(Some(Persona::Vllm), config).await;
    let body = chat(3, true, None).to_string();
    // Both streams under way at once; the client then hangs up on both.
    let mut first = send(&server, "POST", "/v1/chat/completions", &body).await;
    read_until(&mut first, "\"role\":\"assistant\"").await;
    let mut second = send(&server, "POST", "/v1/chat/completions", &body).await;
    read_until(&mut second, "\"role\":\"assistant\"").await;
    assert_eq!(server.stats().max_processing, 2);
}

#[tokio::test]
async fn ollama_states_num_ctx_and_silently_truncates_a_long_prompt() {
    let config = FakeConfig {
        context: 40,
        ..FakeConfig::default()
    };
    let server = start(Some(Persona::Ollama), config.clone()).await;
    let (status, _, show) = call(&server, "POST", "/api/show", r#"{"model":"qwen2.5:0.5b"}"#).await;
    assert_eq!(status, 200);
    assert_eq!(
        show,
        r##"{"modelfile":"# Modelfile generated by \"ollama show\"\nFROM /root/.ollama/models/blobs/sha256-fake\n","parameters":"num_ctx                        40\nstop                           \"<|im_end|>\"","template":"{{ .Prompt }}","details":{"format":"gguf","family":"qwen2","parameter_size":"494.03M","quantization_level":"Q4_K_M"},"model_info":{"general.architecture":"qwen2","qwen2.context_length":32768},"capabilities":["completion"]}"##
    );
    assert_eq!(
        call(&server, "GET", "/api/version", "").await.2,
        r#"{"version":"0.9.0"}"#
    );
    assert_eq!(
        call(&server, "GET", "/v1/models", "").await.2,
        r#"{"object":"list","data":[{"id":"fake-openai","object":"model","created":1700000000,"owned_by":"library"}]}"#
    );
    assert_eq!(call(&server, "GET", "/props", "").await.2, "Not Found");
    let (status, reply) = call_json(&server, "POST", "/v1/chat/completions", chat(43, false, None)).await;
    assert_eq!(status, 200);
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    assert_eq!(reply["usage"]["prompt_tokens"], 40);
    let stats = server.stats();
    assert_eq!(
        (stats.truncated, stats.context_refusals, stats.max_prompt_tokens),
        (1, 0, 50)
    );

    let default_context = FakeConfig {
        ollama_modelfile_ctx: false,
        ..config
    };
    let server = start(Some(Persona::Ollama), default_context).await;
    let (_, show) = call_json(&server, "POST", "/api/show", json!({"name": "qwen2.5:0.5b"})).await;
    assert_eq!(show["parameters"], "stop                           \"<|im_end|>\"");
}

#[tokio::test]
async fn lm_studio_reports_its_loaded_context_and_refuses_a_prompt_over_it() {
    let config = FakeConfig {
        context: 40,
        ..FakeConfig::default()
    };
    let server = start(Some(Persona::LmStudio), config).await;
    let entry = r#"{"id":"fake-openai","object":"model","type":"llm","publisher":"lmstudio-community","arch":"qwen2","compatibility_type":"gguf","quantization":"Q4_K_M","state":"loaded","max_context_length":32768,"loaded_context_length":40}"#;
    assert_eq!(
        call(&server, "GET", "/api/v0/models", "").await.2,
        format!(r#"{{"object":"list","data":[{entry}]}}"#)
    );
    assert_eq!(call(&server, "GET", "/api/v0/models/fake-openai", "").await.2, entry);
    let (status, _, body) = call(&server, "GET", "/api/v0/models/other/model", "").await;
    assert_eq!((status, body.as_str()), (404, r#"{"error":"Model not found"}"#));
    let (status, _, body) = call(
        &server,
        "POST",
        "/v1/chat/completions",
        &chat(34, false, None).to_string(),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        r#"{"error":"Trying to keep the first 41 tokens when context the overflows. However, the model is loaded with context length of only 40 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}"#
    );
    let (status, _) = call_json(&server, "POST", "/v1/chat/completions", chat(13, false, None)).await;
    assert_eq!(status, 200);
    assert_eq!(server.stats().context_refusals, 1);
}

#[tokio::test]
async fn fail_all_answers_every_route_with_a_traceback() {
    for persona in [None, Some(Persona::LlamaCpp), Some(Persona::Ollama)] {
        let config = FakeConfig {
            fail_all: true,
            ..FakeConfig::default()
        };
        let server = start(persona, config).await;
        let routes = [
            ("POST", "/v1/chat/completions"),
            ("GET", "/v1/models"),
            ("GET", "/props"),
            ("GET", "/slots"),
            ("POST", "/api/show"),
            ("POST", "/tokenize"),
            ("POST", "/extras/tokenize"),
            ("POST", "/extras/tokenize/count"),
            ("GET", "/api/v0/models"),
            ("GET", "/v1/_stats"),
        ];
        for (method, path) in routes {
            let (status, content_type, body) = call(&server, method, path, &chat(3, false, None).to_string()).await;
            assert_eq!((status, body.as_str()), (500, TRACEBACK), "{persona:?} {path}");
            assert!(content_type.starts_with("text/plain"), "{content_type}");
        }
        let stats = server.stats();
        assert_eq!((stats.requests, stats.probes, stats.max_prompt_tokens), (1, 8, 10));
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn without_a_persona_the_server_is_unchanged() {
    let server = start(None, replying(50)).await;
    assert_eq!(call(&server, "GET", "/props", "").await.0, 404);
    let (_, reply) = call_json(&server, "POST", "/v1/chat/completions", chat(3000, false, Some(5))).await;
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    assert_eq!(reply["usage"]["prompt_tokens"], 3000);
    let stats = server.stats();
    assert_eq!(
        (stats.probes, stats.context_refusals, stats.max_prompt_tokens),
        (0, 0, 3007)
    );
}
