//! Character cards through the binary: a V2 JSON card and a V3 PNG card (built here chunk by chunk)
//! import into characters the catalog lists; malformed cards exit 2 naming the file and leave the
//! characters folder as it was; an exported card, JSON or PNG, imports back to the same prompt, bundled
//! characters included.

use std::io::Write;
use std::path::Path;
use std::process::Output;

use base64::Engine as _;
use incharacter::png::write_chunk as chunk;
use serde_json::{Value, json};
use tempfile::TempDir;

fn run(data: &Path, args: &[&str]) -> Output {
    crate::common::command(&data.join("no-config.toml"), data, args)
        .output()
        .unwrap()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn character(data: &Path, id: &str) -> Value {
    serde_json::from_str(&ok(run(data, &["characters", "show", id, "--json"]))).unwrap()
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(bytes).unwrap();
    z.finish().unwrap()
}

/// A 1×1 RGB PNG with `extra` chunks (kind, data) between its header and its pixels.
fn png(extra: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![137, 80, 78, 71, 13, 10, 26, 10];
    chunk(&mut out, b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0]);
    for (kind, data) in extra {
        chunk(&mut out, kind, data);
    }
    chunk(&mut out, b"IDAT", &zlib(&[0, 200, 80, 40]));
    chunk(&mut out, b"IEND", &[]);
    out
}

fn text(keyword: &str, value: &str) -> (&'static [u8; 4], Vec<u8>) {
    (b"tEXt", [keyword.as_bytes(), &[0], value.as_bytes()].concat())
}

fn ztext(keyword: &str, value: &str) -> (&'static [u8; 4], Vec<u8>) {
    (b"zTXt", [keyword.as_bytes(), &[0, 0], &zlib(value.as_bytes())].concat())
}

fn mira() -> Value {
    json!({
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Mira Vance",
            "description": "{{char}} keeps the lighthouse on Gull Rock and logs every ship for {{user}}.",
            "personality": "stubborn, dry-witted; {{Char}} never lies to <USER>",
            "scenario": "A storm night at the lighthouse.",
            "first_mes": "*Mira looks up from the log.* You're late, {{user}}.",
            "mes_example": "<START>\n{{user}}: Any ships tonight?\n{{char}}: One trawler. Wrong lights.\n<START>\n{{user}}: Are you afraid?\n{{char}}: Of the sea? Always.",
            "creator_notes": "Test card.",
            "system_prompt": "",
            "post_history_instructions": "",
            "alternate_greetings": [],
            "tags": ["maritime", "original"],
            "creator": "tester",
            "character_version": "1.0",
            "extensions": {}
        }
    })
}

fn oren() -> Value {
    json!({
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {
            "name": "Oren",
            "description": "A retired cartographer.",
            "personality": "curious and patient; {{char}} draws maps of everything",
            "scenario": "",
            "first_mes": "Ah, a visitor.",
            "mes_example": "",
            "creator_notes": "",
            "system_prompt": "Speak in short sentences.",
            "post_history_instructions": "",
            "alternate_greetings": ["Mind the ink."],
            "tags": [],
            "creator": "",
            "character_version": "",
            "extensions": {},
            "group_only_greetings": []
        }
    })
}

/// A data dir into which the V2 JSON card of Mira Vance was imported with `args`, and what it said.
fn with_mira(args: &[&str]) -> (TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mira.json");
    std::fs::write(&file, mira().to_string()).unwrap();
    let said = ok(run(
        dir.path(),
        &[&["import", "card", file.to_str().unwrap()], args].concat(),
    ));
    (dir, said)
}

#[test]
fn a_v2_json_card_and_a_v3_png_card_become_characters() {
    let (dir, said) = with_mira(&["--experimenter", "Captain"]);
    let data = dir.path();
    assert!(
        said.starts_with("imported card \"Mira Vance\" as mira-vance-en (3 memories)\n"),
        "{said}"
    );
    assert!(said.contains("mira-vance-en.toml"), "{said}");

    // A V3 PNG that also keeps a (different) V2 card in `chara`: the ccv3 chunk wins.
    let decoy = json!({"spec": "chara_card_v2", "data": {"name": "Decoy"}});
    let file = data.join("oren.png");
    std::fs::write(
        &file,
        png(&[
            text("chara", &b64(&decoy.to_string())),
            ztext("ccv3", &b64(&oren().to_string())),
        ]),
    )
    .unwrap();
    let said: Value =
        serde_json::from_str(&ok(run(data, &["import", "card", file.to_str().unwrap(), "--json"]))).unwrap();
    assert_eq!(said["id"], "oren-en");
    assert!(Path::new(said["path"].as_str().unwrap()).is_file(), "{said}");

    let list: Value = serde_json::from_str(&ok(run(data, &["characters", "--json"]))).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(names.contains(&"Mira Vance") && names.contains(&"Oren"), "{names:?}");
    assert!(!names.contains(&"Decoy"));

    let m = character(data, "mira-vance-en");
    let prompt = m["description"].as_str().unwrap();
    assert!(
        prompt.contains("Personality: stubborn, dry-witted; Mira Vance never lies to Captain"),
        "{prompt}"
    );
    assert!(
        prompt.contains("Mira Vance keeps the lighthouse") && !prompt.contains("{{"),
        "{prompt}"
    );
    assert_eq!((&m["experimenter"], &m["language"]), (&json!("Captain"), &json!("en")));
    assert_eq!(m["card"]["tags"], json!(["maritime", "original"]));
    let memories: Vec<String> =
        serde_json::from_slice(&std::fs::read(data.join("characters/mira-vance-en.memories.json")).unwrap()).unwrap();
    assert_eq!(
        memories[1],
        "Captain:「Any ships tonight?」\nMira Vance:「One trawler. Wrong lights.」"
    );

    let o = character(data, "oren");
    let prompt = o["description"].as_str().unwrap();
    assert!(
        prompt.starts_with("Speak in short sentences.\n\nYou are Oren."),
        "{prompt}"
    );
    assert!(prompt.contains("Oren draws maps of everything"), "{prompt}");
    assert_eq!(o["experimenter"], "User");
}

#[test]
fn malformed_cards_exit_2_naming_the_file_and_change_nothing() {
    let (dir, _) = with_mira(&[]);
    let data = dir.path();
    let before = crate::common::snapshot(&data.join("characters"));
    let mut damaged_crc = png(&[text("chara", &b64(&mira().to_string()))]);
    damaged_crc[41] ^= 0x20; // a byte of the tEXt chunk's keyword
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "no-card.png",
            png(&[text("Comment", "just a picture")]),
            "no character card in it",
        ),
        (
            "bad-base64.png",
            png(&[text("chara", "eyJuYW1lIjogIk1pcmEifQ==!!")]),
            "the chara chunk is not base64",
        ),
        ("damaged.png", damaged_crc, "CRC mismatch"),
        ("not-a.png", b"GIF89a".to_vec(), "not a PNG file"),
        (
            "broken-json.png",
            png(&[text("chara", &b64("{\"name\": \"Mira\",\n  \"description\": }"))]),
            "the card in its chara chunk: broken JSON at 2:18",
        ),
        (
            "broken.json",
            b"{\"name\": \"Mira\"\n\"x\": 1}".to_vec(),
            "broken.json:2:1: broken JSON",
        ),
        (
            "no-name.json",
            b"{\"description\": \"nobody\"}".to_vec(),
            "not a character card: no \"name\"",
        ),
    ];
    for (name, bytes, expect) in cases {
        let file = data.join(name);
        std::fs::write(&file, bytes).unwrap();
        let out = run(
            data,
            &["import", "card", file.to_str().unwrap(), "--id", "mira-vance-en"],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&format!("{}:", file.display())), "{name}: {stderr}");
        assert!(stderr.contains(expect), "{name}: expected {expect:?} in {stderr}");
        assert_eq!(
            crate::common::snapshot(&data.join("characters")),
            before,
            "{name} changed the characters folder"
        );
    }
}

#[test]
fn exported_cards_import_back_to_the_same_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let file = data.join("mira.json");
    std::fs::write(&file, mira().to_string()).unwrap();
    ok(run(
        data,
        &["import", "card", file.to_str().unwrap(), "--experimenter", "Captain"],
    ));
    let original = character(data, "mira-vance-en");
    let memories = |id: &str| std::fs::read(data.join(format!("characters/{id}.memories.json"))).unwrap();
    for (ext, id) in [("json", "mira-json-en"), ("png", "mira-png-en")] {
        let card = data.join(format!("export.{ext}"));
        let said = ok(run(
            data,
            &["export-card", "mira-vance-en", "-o", card.to_str().unwrap()],
        ));
        assert!(said.contains("wrote"), "{said}");
        ok(run(data, &["import", "card", card.to_str().unwrap(), "--id", id]));
        let again = character(data, id);
        for key in ["description", "experimenter", "language", "card"] {
            assert_eq!(again[key], original[key], "{ext}: {key}");
        }
        assert_eq!(memories(id), memories("mira-vance-en"), "{ext}: memories");
    }

    // A bundled character, exported on stdout, has no memories; it imports back to the same prompt.
    let card: Value = serde_json::from_str(&ok(run(data, &["export-card", "hermione-en"]))).unwrap();
    assert_eq!(card["spec"], "chara_card_v2");
    assert_eq!(card["data"]["name"], "Hermione Granger");
    assert_eq!(
        card["data"]["extensions"]["incharacter"],
        json!({"id": "hermione-en", "language": "en", "experimenter": "Harry"})
    );
    let file = data.join("hermione.json");
    std::fs::write(&file, card.to_string()).unwrap();
    ok(run(
        data,
        &["import", "card", file.to_str().unwrap(), "--id", "hermione-copy-en"],
    ));
    let (copy, bundled) = (character(data, "hermione-copy-en"), character(data, "hermione-en"));
    assert_eq!(copy["description"], bundled["description"]);
    assert_eq!(copy["experimenter"], "Harry");

    let out = run(data, &["export-card", "nobody-en"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown character \"nobody-en\""));
    let out = run(
        data,
        &[
            "export-card",
            "hermione-en",
            "-o",
            data.join("card.txt").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
}
