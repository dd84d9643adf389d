//! The fake Batch API's tests: its lines answered as the streaming path answers them, its statuses,
//! orders, validation and faults.

use super::*;
use crate::fake_openai::FakeServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.0 exchange: the server closes the connection after its reply, so the body is the rest.
async fn call(server: &FakeServer, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.0\r\nhost: fake\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += "\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let response = String::from_utf8(response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.split(' ').nth(1).unwrap().parse().unwrap(), body.to_string())
}

async fn get(server: &FakeServer, path: &str) -> Value {
    let (status, body) = call(server, "GET", path, &[], b"").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// `POST /v1/files` as OpenAI's clients send it (multipart/form-data): the status and the reply.
async fn upload_as(server: &FakeServer, purpose: &str, jsonl: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let form = format!(
        "--XyZ\r\ncontent-disposition: form-data; name=\"purpose\"\r\n\r\n{purpose}\r\n\
         --XyZ\r\ncontent-disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\
         content-type: application/jsonl\r\n\r\n{jsonl}\r\n--XyZ--\r\n"
    );
    let mut headers = headers.to_vec();
    headers.push(("content-type", "multipart/form-data; boundary=XyZ"));
    let (status, body) = call(server, "POST", "/v1/files", &headers, form.as_bytes()).await;
    (status, serde_json::from_str(&body).unwrap())
}

async fn upload(server: &FakeServer, jsonl: &str) -> String {
    let (status, file) = upload_as(server, "batch", jsonl, &[]).await;
    assert_eq!(status, 200, "{file}");
    file["id"].as_str().unwrap().to_string()
}

async fn create_as(server: &FakeServer, request: Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut headers = headers.to_vec();
    headers.push(("content-type", "application/json"));
    let (status, body) = call(server, "POST", "/v1/batches", &headers, request.to_string().as_bytes()).await;
    (status, serde_json::from_str(&body).unwrap())
}

async fn create(server: &FakeServer, file_id: &str) -> Value {
    let request = json!({"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h"});
    let (status, batch) = create_as(server, request, &[]).await;
    assert_eq!(status, 200, "{batch}");
    batch
}

async fn poll_once(server: &FakeServer, batch: &Value) -> Value {
    get(server, &format!("/v1/batches/{}", batch["id"].as_str().unwrap())).await
}

/// Polls until the batch is done; the batch then.
async fn finish(server: &FakeServer, batch: &Value) -> Value {
    for _ in 0..5 {
        let now = poll_once(server, batch).await;
        if matches!(now["status"].as_str(), Some("completed" | "failed")) {
            return now;
        }
    }
    panic!("the batch never finished");
}

async fn content(server: &FakeServer, file_id: &Value) -> String {
    let (status, body) = call(
        server,
        "GET",
        &format!("/v1/files/{}/content", file_id.as_str().unwrap()),
        &[],
        b"",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

fn lines_of(jsonl: &str) -> Vec<Value> {
    jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn request_line(custom_id: &str, body: Value) -> String {
    format!(
        "{}\n",
        json!({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body})
    )
}

fn question(text: &str) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": text}]})
}

/// The streaming reply's id, text and usage.
fn streamed(sse: &str) -> (Value, String, Value) {
    let (mut id, mut text, mut usage) = (Value::Null, String::new(), Value::Null);
    for data in sse.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        id = chunk["id"].clone();
        text += chunk["choices"][0]["delta"]["content"].as_str().unwrap_or("");
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
    }
    (id, text, usage)
}

#[tokio::test]
async fn a_batch_line_is_answered_as_its_streaming_twin() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let schema = json!({"type": "object", "properties": {"result": {"type": "integer", "minimum": 1, "maximum": 5}}});
    let streaming = [
        json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "temperature": 0.7, "seed": 3,
               "messages": [{"role": "system", "content": "You are Sherlock."}, {"role": "user", "content": "Do you like parties?"}]}),
        json!({"model": "judge", "stream": true, "stream_options": {"include_usage": true},
               "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema, "strict": true}},
               "messages": [{"role": "user", "content": "Rate it."}]}),
    ];
    let mut input = String::new();
    let mut replies = Vec::new();
    for (i, body) in streaming.iter().enumerate() {
        let headers = [("content-type", "application/json")];
        let (status, sse) = call(&server, "POST", ENDPOINT, &headers, body.to_string().as_bytes()).await;
        assert_eq!(status, 200, "{sse}");
        replies.push(streamed(&sse));
        // As the client builds a batch line: shift_remove keeps the other keys in their order
        // (with preserve_order, `remove` would move the last key into the gap).
        let mut line = body.as_object().unwrap().clone();
        line.shift_remove("stream");
        line.shift_remove("stream_options");
        input += &request_line(&format!("r{i}"), Value::Object(line));
    }
    let batch = finish(&server, &create(&server, &upload(&server, &input).await).await).await;
    let output = lines_of(&content(&server, &batch["output_file_id"]).await);
    for (i, (id, text, usage)) in replies.iter().enumerate() {
        let line = output.iter().find(|l| l["custom_id"] == format!("r{i}")).unwrap();
        assert_eq!(line["response"]["status_code"], 200);
        let body = &line["response"]["body"];
        assert_eq!(&body["id"], id);
        assert_eq!(body["choices"][0]["message"]["content"], *text);
        assert_eq!(&body["usage"], usage);
        assert_eq!(body["model"], streaming[i]["model"]);
    }
    assert!(serde_json::from_str::<Value>(&replies[1].1).unwrap()["result"].is_i64());
    let stats = server.stats();
    assert_eq!(
        (stats.requests, stats.batches, stats.batch_lines, stats.files),
        (2, 1, 2, 1)
    );
}

#[tokio::test]
async fn a_batch_moves_one_status_per_poll_and_its_output_is_the_offline_answer() {
    let config = FakeConfig::default();
    let server = FakeServer::start(config.clone()).await.unwrap();
    let input = request_line("a", question("Do you like parties?")) + &request_line("b", question("Are you tidy?"));
    let file_id = upload(&server, &input).await;
    let batch = create(&server, &file_id).await;
    assert_eq!(batch["status"], "validating");
    assert_eq!(batch["object"], "batch");
    assert_eq!(batch["endpoint"], ENDPOINT);
    assert_eq!(batch["input_file_id"], file_id.as_str());
    assert_eq!(batch["completion_window"], "24h");
    assert!(batch["id"].as_str().unwrap().starts_with("batch_"));
    let running = poll_once(&server, &batch).await;
    assert_eq!(running["status"], "in_progress");
    assert_eq!(
        running["request_counts"],
        json!({"total": 2, "completed": 0, "failed": 0})
    );
    assert!(running["output_file_id"].is_null());
    let done = poll_once(&server, &batch).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["request_counts"], json!({"total": 2, "completed": 2, "failed": 0}));
    assert!(done["error_file_id"].is_null());
    assert!(done["errors"].is_null());
    assert_eq!(
        poll_once(&server, &batch).await,
        done,
        "a finished batch stays as it is"
    );
    let output = content(&server, &done["output_file_id"]).await;
    assert_eq!(output, batch_output_for(&config, &input).unwrap());
    for line in lines_of(&output) {
        assert!(line["id"].as_str().unwrap().starts_with("batch_req_"));
        assert!(line["error"].is_null());
        assert_eq!(line["response"]["body"]["object"], "chat.completion");
    }
    let stats = server.stats();
    assert_eq!(
        (stats.requests, stats.batches, stats.batch_lines, stats.files),
        (0, 1, 2, 1)
    );
}

#[test]
fn results_come_back_in_reverse_unless_asked_otherwise() {
    let input: String = ["a", "b", "c"]
        .iter()
        .map(|id| request_line(id, question(id)))
        .collect();
    let order = |config: &FakeConfig| -> Vec<Value> {
        lines_of(&batch_output_for(config, &input).unwrap())
            .iter()
            .map(|l| l["custom_id"].clone())
            .collect()
    };
    assert_eq!(order(&FakeConfig::default()), ["c", "b", "a"]);
    let forward = FakeConfig {
        batch_order: BatchOrder::Forward,
        ..FakeConfig::default()
    };
    assert_eq!(order(&forward), ["a", "b", "c"]);
}

#[tokio::test]
async fn invalid_lines_fail_the_batch_with_their_line_numbers() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let mut streaming = question("Hi");
    streaming["stream"] = json!(true);
    let input = [
        request_line("a", question("Hi")),
        request_line("b", streaming),
        request_line("a", question("Hello")),
        "{not json\n".into(),
        "\n".into(),
        format!(
            "{}\n",
            json!({"custom_id": "e", "method": "POST", "url": "/v1/embeddings", "body": {}})
        ),
        format!(
            "{}\n",
            json!({"custom_id": "f", "method": "GET", "url": ENDPOINT, "body": {}})
        ),
        format!("{}\n", json!({"method": "POST", "url": ENDPOINT, "body": {}})),
    ]
    .concat();
    let expected = [
        ("invalid_body", 2),
        ("duplicate_custom_id", 3),
        ("invalid_json_line", 4),
        ("invalid_url", 6),
        ("invalid_method", 7),
        ("missing_custom_id", 8),
    ];
    let batch = create(&server, &upload(&server, &input).await).await;
    assert_eq!(batch["status"], "validating");
    assert!(batch["errors"].is_null());
    let failed = poll_once(&server, &batch).await;
    assert_eq!(failed["status"], "failed");
    let errors: Vec<(&str, u64)> = failed["errors"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["code"].as_str().unwrap(), e["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(errors, expected.map(|(code, line)| (code, line as u64)));
    assert!(failed["output_file_id"].is_null());
    assert_eq!(poll_once(&server, &batch).await["status"], "failed");
    let offline = batch_output_for(&FakeConfig::default(), &input).unwrap_err();
    let offline: Vec<_> = offline.0.iter().map(|e| (e.code, e.line.unwrap())).collect();
    assert_eq!(offline, expected);
    assert_eq!(server.stats().batch_lines, 0);
}

#[tokio::test]
async fn the_list_finds_a_batch_by_its_input_file() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let first_file = upload(&server, &request_line("a", question("One?"))).await;
    let second_file = upload(&server, &request_line("a", question("Two?"))).await;
    let first = create(&server, &first_file).await;
    let second = create(&server, &second_file).await;
    let list = get(&server, "/v1/batches").await;
    assert_eq!(list["object"], "list");
    assert_eq!(list["has_more"], false);
    let ids: Vec<&Value> = list["data"].as_array().unwrap().iter().map(|b| &b["id"]).collect();
    assert_eq!(ids, [&second["id"], &first["id"]], "newest first");
    let found = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["input_file_id"] == first_file.as_str())
        .unwrap();
    assert_eq!(found["id"], first["id"]);
    assert_eq!(found["status"], "validating", "listing moves no batch on");
}

#[tokio::test]
async fn files_round_trip_and_bad_requests_are_refused() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let input = request_line("a", question("Do you like parties? 你好"));
    let (status, file) = upload_as(&server, "batch", &input, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(file["object"], "file");
    assert_eq!(file["purpose"], "batch");
    assert_eq!(file["filename"], "in.jsonl");
    assert_eq!(file["bytes"], input.len());
    assert!(file["id"].as_str().unwrap().starts_with("file-"));
    assert_eq!(content(&server, &file["id"]).await, input);

    let (status, _) = upload_as(&server, "fine-tune", &input, &[]).await;
    assert_eq!(status, 400, "a purpose other than batch");
    let (status, _) = call(&server, "GET", "/v1/files/file-none/content", &[], b"").await;
    assert_eq!(status, 404);
    let (status, _) = call(&server, "GET", "/v1/batches/batch_none", &[], b"").await;
    assert_eq!(status, 404);
    let with = |key: &str, value: &str| {
        let mut request = json!({"input_file_id": file["id"], "endpoint": ENDPOINT, "completion_window": "24h"});
        request[key] = json!(value);
        request
    };
    for (request, param) in [
        (with("input_file_id", "file-none"), "input_file_id"),
        (with("endpoint", "/v1/embeddings"), "endpoint"),
        (with("completion_window", "1h"), "completion_window"),
    ] {
        let (status, error) = create_as(&server, request, &[]).await;
        assert_eq!(status, 400);
        assert_eq!(error["error"]["param"], param);
    }
    assert_eq!(server.stats().files, 1);
}

#[tokio::test]
async fn faulty_lines_go_to_the_error_file_and_a_later_batch_retries_them() {
    let config = FakeConfig {
        fault_share: 1.0,
        faults_per_request: 1,
        faults: vec![Fault::Unavailable],
        ..FakeConfig::default()
    };
    let server = FakeServer::start(config).await.unwrap();
    let input = request_line("a", question("One?")) + &request_line("b", question("Two?"));
    let file_id = upload(&server, &input).await;
    let first = finish(&server, &create(&server, &file_id).await).await;
    assert_eq!(first["status"], "completed");
    assert_eq!(
        first["request_counts"],
        json!({"total": 2, "completed": 0, "failed": 2})
    );
    assert_eq!(content(&server, &first["output_file_id"]).await, "");
    for line in lines_of(&content(&server, &first["error_file_id"]).await) {
        assert_eq!(line["response"]["status_code"], 503);
        assert!(line["response"]["body"]["error"]["message"].is_string());
    }
    let retry = finish(&server, &create(&server, &file_id).await).await;
    assert_eq!(
        retry["request_counts"],
        json!({"total": 2, "completed": 2, "failed": 0})
    );
    assert!(retry["error_file_id"].is_null());
    let stats = server.stats();
    assert_eq!((stats.faults, stats.requests, stats.batch_lines), (2, 0, 4));
}

#[tokio::test]
async fn a_batch_line_faults_exactly_when_its_streaming_twin_does() {
    let config = FakeConfig {
        seed: 7,
        fault_share: 0.5,
        faults_per_request: 1,
        faults: vec![Fault::ServerError],
        ..FakeConfig::default()
    };
    let streaming_server = FakeServer::start(config.clone()).await.unwrap();
    let mut streamed_failures = Vec::new();
    let mut input = String::new();
    for i in 0..12 {
        let body = question(&format!("Question {i}?"));
        let mut streaming = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}});
        streaming["messages"] = body["messages"].clone();
        let headers = [("content-type", "application/json")];
        let (status, _) = call(
            &streaming_server,
            "POST",
            ENDPOINT,
            &headers,
            streaming.to_string().as_bytes(),
        )
        .await;
        if status != 200 {
            streamed_failures.push(format!("q{i}"));
        }
        input += &request_line(&format!("q{i}"), body);
    }
    assert!(
        !streamed_failures.is_empty() && streamed_failures.len() < 12,
        "{streamed_failures:?}"
    );
    let mut batch_failures: Vec<String> = lines_of(&batch_output_for(&config, &input).unwrap())
        .iter()
        .filter(|l| l["response"]["status_code"] != 200)
        .map(|l| l["custom_id"].as_str().unwrap().to_string())
        .collect();
    batch_failures.sort_by_key(|id| id[1..].parse::<u32>().unwrap());
    assert_eq!(batch_failures, streamed_failures);
}

#[tokio::test]
async fn the_key_and_documented_refusals_apply_to_batches() {
    let config = FakeConfig {
        require_key: Some("sk-test".into()),
        reasoning: true,
        ..FakeConfig::default()
    };
    let server = FakeServer::start(config).await.unwrap();
    let mut capped = question("Short?");
    capped["max_tokens"] = json!(5);
    let input = request_line("plain", question("Long?")) + &request_line("capped", capped);
    let (status, _) = upload_as(&server, "batch", &input, &[]).await;
    assert_eq!(status, 401);
    for path in [
        "/v1/batches",
        "/v1/batches/batch_fake_1",
        "/v1/files/file-fake-1/content",
    ] {
        assert_eq!(call(&server, "GET", path, &[], b"").await.0, 401, "{path}");
    }
    let key = [("authorization", "Bearer sk-test")];
    let (status, file) = upload_as(&server, "batch", &input, &key).await;
    assert_eq!(status, 200);
    let request = json!({"input_file_id": file["id"], "endpoint": ENDPOINT, "completion_window": "24h"});
    assert_eq!(create_as(&server, request.clone(), &[]).await.0, 401);
    let (_, batch) = create_as(&server, request, &key).await;
    let path = format!("/v1/batches/{}", batch["id"].as_str().unwrap());
    call(&server, "GET", &path, &key, b"").await;
    let (_, done) = call(&server, "GET", &path, &key, b"").await;
    let done: Value = serde_json::from_str(&done).unwrap();
    assert_eq!(done["request_counts"], json!({"total": 2, "completed": 1, "failed": 1}));
    let errors_path = format!("/v1/files/{}/content", done["error_file_id"].as_str().unwrap());
    let (_, errors) = call(&server, "GET", &errors_path, &key, b"").await;
    let errors = lines_of(&errors);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["custom_id"], "capped");
    assert_eq!(errors[0]["response"]["status_code"], 400);
    assert_eq!(errors[0]["response"]["body"]["error"]["param"], "max_tokens");
}
