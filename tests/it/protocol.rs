//! Another protocol, word for word: a template set of our own (`tests/fixtures/protocol/templates/`)
//! that changes every text the method lays out — the ER exchange layout and separator, the rule and
//! result forms of range and two-pole scales, the JSON of items (other keys, indentation, the answer
//! quoted with the speaker's name, no statement), the option lists, the first alias, the
//! questionnaire's own instructions, the self-report stem inside the experimenter's line, the
//! structured-outputs-off instruction — on an InCharacter questionnaire of our own imported as a
//! scale. Every request the fake server receives equals a request written out by hand in
//! `tests/fixtures/protocol/*.txt`, byte for byte, with structured outputs on and off.

use std::path::{Path, PathBuf};

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer, ScriptRule};
use serde_json::Value;

use crate::common;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protocol")
}

type Request = Vec<(String, String)>;

/// Requests written as `=== shape`, then `--- role` and the message's text, each.
fn parse(text: &str) -> Vec<(String, Request)> {
    let mut out: Vec<(String, Request)> = Vec::new();
    let mut lines: Vec<&str> = Vec::new();
    let flush = |out: &mut Vec<(String, Request)>, lines: &mut Vec<&str>| {
        if let Some(last) = out.last_mut().and_then(|(_, r)| r.last_mut()) {
            last.1 = lines.join("\n");
        }
        lines.clear();
    };
    for line in text.lines() {
        if let Some(shape) = line.strip_prefix("=== ") {
            flush(&mut out, &mut lines);
            out.push((shape.to_string(), Vec::new()));
        } else if let Some(role) = line.strip_prefix("--- ") {
            flush(&mut out, &mut lines);
            out.last_mut().unwrap().1.push((role.to_string(), String::new()));
        } else {
            lines.push(line);
        }
    }
    flush(&mut out, &mut lines);
    out
}

/// The answers the agent gives, by what it is asked.
fn script() -> Vec<ScriptRule> {
    let rule = |contains: String, reply: &str| ScriptRule {
        contains,
        reply: reply.to_string(),
    };
    let items = [
        (
            "Do you greet strangers first?",
            "Greets strangers first.",
            "Always, and with tea.",
        ),
        (
            "Do you keep people at arm's length?",
            "Keeps people at arm's length.",
            "Rarely. Tam knows that.",
        ),
        (
            "Do you remember birthdays?",
            "Remembers birthdays.",
            "Wren: 「Every one, written on the lamp room wall.」",
        ),
        ("Do you forgive quickly?", "Forgives quickly.", "By the next tide."),
        (
            "Do you share your supper?",
            "Shares supper.",
            "Half of it, at least. \"Waste not,\" Mum said.",
        ),
        (
            "Do you check on neighbours?",
            "Checks on neighbours.",
            "When the storm bell rings.\nEven at night.",
        ),
        ("Do you set yourself goals?", "Sets goals.", "One a season."),
        (
            "Do you work past midnight?",
            "Works past midnight.",
            "Only when the lens needs it.",
        ),
    ];
    let mut rules = Vec::new();
    for (i, (question, statement, answer)) in items.iter().enumerate() {
        let (n, k) = (i + 1, (i + 1) % 5 + 1);
        rules.push(rule(format!("Tam turns to Wren: \"{question}\""), answer));
        rules.push(rule(
            format!("Reasons first. Tam: 「Does \"{statement}\" ring true of you?」"),
            &format!("Thinking of item {n}: yes.\n{k}"),
        ));
        rules.push(rule(
            format!("Tam: 「Does \"{statement}\" ring true of you? Answer"),
            &format!("About {k}, I suppose."),
        ));
    }
    rules.push(rule("\"Do you sing while you work?\"".into(), "Sea shanties, loudly."));
    rules.push(rule("\"Do you prefer silence?\"".into(), "Only after the foghorn."));
    rules
}

/// What the judge requests read with structured outputs off: the system message ends in the
/// description of the request's schema (`off.txt`, in the order of `judge.txt`).
fn described(judge: Vec<(String, Request)>) -> Vec<(String, Request)> {
    let schemas = std::fs::read_to_string(fixtures().join("off.txt")).unwrap();
    let schemas: Vec<&str> = schemas.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(schemas.len(), judge.len());
    judge
        .into_iter()
        .zip(schemas)
        .map(|((shape, mut request), schema)| {
            request[0].1 = format!(
                "{}\n\nAnswer in JSON alone; it must validate against this JSON Schema:\n{schema}",
                request[0].1
            );
            (shape, request)
        })
        .collect()
}

/// Imports the questionnaires, adds a note to one dimension and takes the own option wording from the
/// other (so the `doc_label_*` templates name its options), and brings in the character.
async fn prepare(config: &Path, data: &Path) {
    for file in ["Tiny.json", "TinyPoles.json"] {
        let path = fixtures().join(file);
        let out = common::output(config, data, &["import", "scale", path.to_str().unwrap()]).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let scale = data.join("scales/Tiny.toml");
    let text = std::fs::read_to_string(&scale).unwrap();
    assert!(
        text.contains("[self_report_instruction]"),
        "the questionnaire's own texts are kept:\n{text}"
    );
    let text = text.replacen(
        "name = \"Warmth\"\n",
        "name = \"Warmth\"\nnote = \"Count small kindnesses, not grand gestures.\"\n",
        1,
    );
    let drive = text.find("name = \"Drive\"").unwrap();
    let labels = drive + text[drive..].find("option_labels = ").unwrap();
    let end = labels + text[labels..].find('\n').unwrap() + 1;
    std::fs::write(&scale, format!("{}{}", &text[..labels], &text[end..])).unwrap();
    std::fs::create_dir_all(data.join("characters")).unwrap();
    std::fs::copy(fixtures().join("wren-en.toml"), data.join("characters/wren-en.toml")).unwrap();
}

/// A request's (or a rendering's) messages as roles and texts.
fn messages(request: &Value) -> Request {
    let role_and_text = |m: &Value| {
        (
            m["role"].as_str().unwrap().to_string(),
            m["content"].as_str().unwrap().to_string(),
        )
    };
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(role_and_text)
        .collect()
}

/// Every request `server` received, as roles and texts, with whether it carried a `response_format`.
fn received(server: &FakeServer) -> Vec<(Request, bool)> {
    server
        .requests()
        .iter()
        .map(|r| (messages(r), r.get("response_format").is_some_and(|f| !f.is_null())))
        .collect()
}

async fn protocol(structured: bool) {
    let server = FakeServer::start(FakeConfig {
        script: script(),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "cache = \"off\"\n\n[[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\nstructured_output = {structured}\n\n[roles]\nrpa = \"fake\"\njudge = \"fake\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    prepare(&config, &data).await;
    let templates = fixtures().join("templates");
    let templates = templates.to_str().unwrap();
    let run = |scale: &'static str, methods: &'static str| {
        let (config, data) = (config.clone(), data.clone());
        async move {
            let args = [
                "run",
                "--characters",
                "wren-en",
                "--scales",
                scale,
                "--methods",
                methods,
                "--prompts",
                templates,
                "--json",
            ];
            let out = common::output(&config, &data, &args).await;
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            common::session_id(&out)
        }
    };
    let session = run("Tiny", "er-batch,er-all,oc,d-oc,sr,sr-cot").await;
    run("TinyPoles", "er-batch").await;

    let interview = parse(&std::fs::read_to_string(fixtures().join("interview.txt")).unwrap());
    let mut judge = parse(&std::fs::read_to_string(fixtures().join("judge.txt")).unwrap());
    if !structured {
        judge = described(judge);
    }
    let mut sent = received(&server);
    let total = sent.len();
    let mut missing = Vec::new();
    for (shape, expected) in interview.iter().chain(&judge) {
        let judged = !interview.iter().any(|(_, r)| r == expected);
        match sent.iter().position(|(r, _)| r == expected) {
            Some(at) => {
                let (_, format) = sent.remove(at);
                assert_eq!(
                    format,
                    judged && structured,
                    "{shape}: response_format only for a judge with structured outputs"
                );
            }
            None => missing.push((shape.clone(), expected.clone())),
        }
    }
    assert!(
        missing.is_empty(),
        "requests written in the fixtures and not sent:\n{missing:#?}\nsent and not written:\n{sent:#?}"
    );
    assert_eq!(total, interview.len() + judge.len(), "every request, once: {sent:#?}");

    // `prompts check` renders the same texts from the session without sending anything.
    let mode = if structured { "on" } else { "off" };
    let args = [
        "prompts",
        "check",
        templates,
        "--scale",
        "Tiny",
        "--session",
        &session,
        "--shapes",
        "d-oc",
        "--structured",
        mode,
        "--json",
    ];
    let out = common::output(&config, &data, &args).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rendered: Value = serde_json::from_slice(&out.stdout).unwrap();
    let doc: Vec<&(String, Request)> = judge.iter().filter(|(s, _)| s == "d-oc").collect();
    assert_eq!(rendered.as_array().unwrap().len(), doc.len());
    for (r, (_, expected)) in rendered.as_array().unwrap().iter().zip(doc) {
        assert_eq!(&messages(r), expected);
    }
    assert_eq!(
        server.requests().len(),
        interview.len() + judge.len(),
        "the check sent nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_protocols_templates_send_its_requests_word_for_word_with_structured_outputs_on() {
    protocol(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_protocols_templates_send_its_requests_word_for_word_with_structured_outputs_off() {
    protocol(false).await;
}

/// InCharacter's own 16Personalities questionnaire keeps its self-report prefix, its instructions and
/// each dimension's option wording when imported, in the scale file's own names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incharacter_questionnaire_keeps_its_own_wording_when_imported() {
    let dir = tempfile::tempdir().unwrap();
    let (config, data) = (dir.path().join("config.toml"), dir.path().join("data"));
    std::fs::write(&config, "").unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/reference/incharacter/data/questionnaires/16Personalities.json");
    if !source.exists() {
        // As `reference.rs`: the original projects' data sits beside the checkout, not in it.
        eprintln!("../shared/reference not present: the questionnaire of our own in `protocol` covers the import");
        return;
    }
    let args = ["import", "scale", source.to_str().unwrap(), "--id", "P16"];
    let out = common::output(&config, &data, &args).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let scale: toml::Value = toml::from_str(&std::fs::read_to_string(data.join("scales/P16.toml")).unwrap()).unwrap();
    assert_eq!(
        scale["self_report_stem"]["en"].as_str(),
        Some("Do you think that the statement \"{statement}\" applies to you?")
    );
    assert!(
        scale["self_report_instruction"]["en"]
            .as_str()
            .unwrap()
            .starts_with("Reply a number from 1 to 7")
    );
    assert!(
        scale["conversion_instruction"]
            .as_str()
            .unwrap()
            .contains("Please evaluate {character} based on")
    );
    assert!(
        scale["questionnaire_prompt"]
            .as_str()
            .unwrap()
            .starts_with("Score each statement on a scale of 1 to 7")
    );
    let ei = &scale["dimensions"][0];
    assert_eq!(ei["name"].as_str(), Some("E/I"));
    let labels: Vec<&str> = ei["option_labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(labels[0], "strongly introverted");
    assert_eq!(labels[3], "neutral");
    assert_eq!(labels[6], "strongly extraverted");
    assert!(
        ei["conversion_instruction"]
            .as_str()
            .unwrap()
            .contains("'moderately introverted'")
    );
}
