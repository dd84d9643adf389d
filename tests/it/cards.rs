//! Character cards through the binary: a V2 JSON card and a V3 PNG card (built here chunk by chunk)
//! import into characters the catalog lists; malformed cards exit 2 naming the file and leave the
//! characters folder as it was; an exported card, JSON or PNG, imports back to the same prompt, bundled
//! characters included. Three cards of `tests/fixtures/cards` that use every V2 and V3 field between
//! them come back from import → export-card field for field, as JSON and as PNG (the image's chunks
//! byte for byte); the import says what it did with each field; targets travel in the extensions.

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

    // A bundled character, exported on stdout, has no memories; it imports back to the same prompt,
    // aliases (which mask answers), catchphrases and work.
    let card: Value = serde_json::from_str(&ok(run(data, &["export-card", "hermione-en"]))).unwrap();
    assert_eq!(card["spec"], "chara_card_v2");
    assert_eq!(card["data"]["name"], "Hermione Granger");
    let ours = &card["data"]["extensions"]["incharacter"];
    assert_eq!(
        [
            &ours["id"],
            &ours["language"],
            &ours["experimenter"],
            &ours["aliases"],
            &ours["work"]
        ],
        [
            &json!("hermione-en"),
            &json!("en"),
            &json!("Harry"),
            &json!(["Hermione", "Hermione Granger"]),
            &json!("Harry Potter (J. K. Rowling)")
        ]
    );
    let file = data.join("hermione.json");
    std::fs::write(&file, card.to_string()).unwrap();
    ok(run(
        data,
        &["import", "card", file.to_str().unwrap(), "--id", "hermione-copy-en"],
    ));
    let (copy, bundled) = (character(data, "hermione-copy-en"), character(data, "hermione-en"));
    for key in ["description", "experimenter", "catchphrases", "work"] {
        assert_eq!(copy[key], bundled[key], "{key}");
    }
    // In their order too: the first alias is the one prompts name.
    assert_eq!(copy["aliases"], bundled["aliases"]);
    // A card listing the name first, then one written without the name (by an earlier version),
    // imported over it: the order stays the character's.
    let mut named_first = card.clone();
    named_first["data"]["extensions"]["incharacter"]["aliases"] = json!(["Hermione Granger", "Hermione"]);
    std::fs::write(&file, named_first.to_string()).unwrap();
    let file_arg = file.to_str().unwrap();
    ok(run(data, &["import", "card", file_arg, "--id", "hermione-first-en"]));
    let first = json!(["Hermione Granger", "Hermione"]);
    assert_eq!(character(data, "hermione-first-en")["aliases"], first);
    let mut earlier = card.clone();
    earlier["data"]["extensions"]["incharacter"]["aliases"] = json!(["Hermione"]);
    std::fs::write(&file, earlier.to_string()).unwrap();
    ok(run(
        data,
        &["import", "card", file_arg, "--id", "hermione-first-en", "--replace"],
    ));
    assert_eq!(character(data, "hermione-first-en")["aliases"], first);
    // A character whose name is none of its aliases keeps its first alias.
    let jigsaw: Value = serde_json::from_str(&ok(run(data, &["export-card", "jigsaw-en"]))).unwrap();
    std::fs::write(&file, jigsaw.to_string()).unwrap();
    ok(run(data, &["import", "card", file_arg, "--id", "jigsaw-copy-en"]));
    assert_eq!(character(data, "jigsaw-copy-en")["aliases"][0], "Jigsaw");
    // A card's aliases that would mask more than a name are left out, and said so.
    let mut odd = card.clone();
    odd["data"]["extensions"]["incharacter"]["aliases"] = json!(["Hermione", "I", "Mi\u{202e}ne"]);
    std::fs::write(&file, odd.to_string()).unwrap();
    let said = ok(run(
        data,
        &["import", "card", file.to_str().unwrap(), "--id", "hermione-odd-en"],
    ));
    // (A card's text is made inert as it is read: the override goes, "Mine" stays.)
    assert!(
        said.contains("alias \"I\" left out") && said.contains("alias Mine;"),
        "{said}"
    );
    let odd = character(data, "hermione-odd-en");
    let kept = odd["aliases"].as_array().unwrap();
    assert!(
        kept.iter()
            .all(|a| a != "I" && !a.as_str().unwrap().contains('\u{202e}')),
        "{kept:?}"
    );

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

/// The three cards of `tests/fixtures/cards`, written for these tests, that between them use every
/// field of V2 and V3: a V2 card with a lorebook and unknown extensions, a V3 card with every V3 field,
/// and a V2 card with a code-block greeting, a narration greeting and post-history instructions.
const ROUND_TRIP: [(&str, &str); 3] = [
    ("harbour-keeper.v2.json", "wenna-polgrain-en"),
    ("tidewright.v3.json", "ysolde-tidewright-en"),
    ("byte-sensei.v2.json", "byte-sensei-en"),
];

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cards")
        .join(name)
}

/// The chunks of a PNG, each as stored (length, type, data, CRC).
fn chunks_of(png: &[u8]) -> Vec<&[u8]> {
    assert_eq!(&png[..8], &[137, 80, 78, 71, 13, 10, 26, 10], "a PNG signature");
    let mut out = Vec::new();
    let mut at = 8;
    while at < png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        out.push(&png[at..at + 12 + len]);
        at += 12 + len;
    }
    out
}

/// The keyword of a chunk if it is a card's text chunk (tEXt or zTXt named chara or ccv3).
fn card_keyword(chunk: &[u8]) -> Option<&str> {
    let (kind, data) = (&chunk[4..8], &chunk[8..chunk.len() - 4]);
    if kind != b"tEXt" && kind != b"zTXt" {
        return None;
    }
    let nul = data.iter().position(|b| *b == 0)?;
    let keyword = std::str::from_utf8(&data[..nul]).ok()?;
    ["chara", "ccv3"].contains(&keyword).then_some(keyword)
}

/// The card in a PNG's tEXt chunk named `keyword`.
fn card_in(png: &[u8], keyword: &str) -> Value {
    let chunk = chunks_of(png)
        .into_iter()
        .find(|c| card_keyword(c) == Some(keyword))
        .unwrap_or_else(|| panic!("no {keyword} chunk"));
    assert_eq!(&chunk[4..8], b"tEXt");
    let text = &chunk[8 + keyword.len() + 1..chunk.len() - 4];
    let json = base64::engine::general_purpose::STANDARD.decode(text).unwrap();
    serde_json::from_slice(&json).unwrap()
}

/// `portrait.png` (an image with gAMA, pHYs and tIME chunks, no text) carrying `card` as SillyTavern
/// writes it: `chara` (for V3 a zTXt copy marked V2), and for V3 `ccv3`, just before IEND.
fn portrait_with(card: &Value) -> Vec<u8> {
    let image = std::fs::read(fixture("portrait.png")).unwrap();
    let chunks = chunks_of(&image);
    let mut out = image[..8].to_vec();
    let (iend, rest) = chunks.split_last().unwrap();
    for c in rest {
        out.extend_from_slice(c);
    }
    let mut texts = vec![];
    if card["spec"] == "chara_card_v3" {
        let mut v2 = card.clone();
        v2["spec"] = json!("chara_card_v2");
        let (kind, data) = ztext("chara", &b64(&v2.to_string()));
        chunk(&mut out, kind, &data);
        texts.push(text("ccv3", &b64(&card.to_string())));
    } else {
        texts.push(text("chara", &b64(&card.to_string())));
    }
    for (kind, data) in texts {
        chunk(&mut out, kind, &data);
    }
    out.extend_from_slice(iend);
    out
}

/// `exported` is `original`, field by field (a message naming the first that differs).
fn same_card(exported: &Value, original: &Value, what: &str) {
    for key in ["spec", "spec_version"] {
        assert_eq!(exported[key], original[key], "{what}: {key}");
    }
    let (got, want) = (
        exported["data"].as_object().unwrap(),
        original["data"].as_object().unwrap(),
    );
    for (key, value) in want {
        assert_eq!(got.get(key), Some(value), "{what}: data.{key}");
    }
    let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(extra.is_empty(), "{what}: fields the card did not have: {extra:?}");
    assert_eq!(exported, original, "{what}: the whole card");
}

#[test]
fn three_cards_come_back_field_for_field_from_json_and_png_with_their_image() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let portrait = std::fs::read(fixture("portrait.png")).unwrap();
    for (name, id) in ROUND_TRIP {
        let original: Value = serde_json::from_slice(&std::fs::read(fixture(name)).unwrap()).unwrap();

        // JSON in, JSON out.
        let said = ok(run(data, &["import", "card", fixture(name).to_str().unwrap()]));
        assert!(
            said.starts_with(&format!(
                "imported card \"{}\" as {id} (",
                original["data"]["name"].as_str().unwrap()
            )),
            "{said}"
        );
        assert!(said.contains("kept for export-card: the card as written"), "{said}");
        let out = data.join(format!("{id}.json"));
        ok(run(data, &["export-card", id, "-o", out.to_str().unwrap()]));
        let exported: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        same_card(&exported, &original, &format!("{name} as JSON"));
        let stdout: Value = serde_json::from_str(&ok(run(data, &["export-card", id]))).unwrap();
        same_card(&stdout, &original, &format!("{name} on stdout"));

        // PNG in, PNG out: the card's chunks replaced, every other chunk byte for byte.
        let png_id = format!("{id}-png");
        let file = data.join(format!("{id}.png"));
        std::fs::write(&file, portrait_with(&original)).unwrap();
        let said = ok(run(data, &["import", "card", file.to_str().unwrap(), "--id", &png_id]));
        assert!(
            said.contains("kept for export-card: the card as written, and its PNG image"),
            "{said}"
        );
        let out = data.join(format!("{id}.out.png"));
        ok(run(data, &["export-card", &png_id, "-o", out.to_str().unwrap()]));
        let written = std::fs::read(&out).unwrap();
        let image: Vec<&[u8]> = chunks_of(&written)
            .into_iter()
            .filter(|c| card_keyword(c).is_none())
            .collect();
        assert_eq!(
            image,
            chunks_of(&portrait),
            "{name}: the image's chunks, byte for byte, in order"
        );
        let v3 = original["spec"] == "chara_card_v3";
        same_card(
            &card_in(&written, if v3 { "ccv3" } else { "chara" }),
            &original,
            &format!("{name} as PNG"),
        );
        if v3 {
            let v2 = card_in(&written, "chara");
            assert_eq!((&v2["spec"], &v2["data"]), (&json!("chara_card_v2"), &original["data"]));
        }
    }
}

#[test]
fn an_imported_card_keeps_its_final_instruction_code_and_narration() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let said = ok(run(
        data,
        &["import", "card", fixture("byte-sensei.v2.json").to_str().unwrap()],
    ));
    for line in [
        "imported card \"Byte Sensei\" as byte-sensei-en (4 memories)\n",
        "  prompt: system_prompt, description, personality, scenario ({{char}} → Byte Sensei, {{user}} → User)\n",
        "  post_history_instructions: sent after each question, as the final instruction\n",
        "  greetings: first_mes and 1 alternate greeting → 2 memories (1 in the character's words, 1 as narration)\n",
        "  mes_example: 2 example dialogues → 2 memories\n",
        "  card info: tags, creator, character_version, creator_notes\n",
        "  kept for export-card: the card as written\n",
    ] {
        assert!(said.contains(line), "{line:?} not in\n{said}");
    }
    let c = character(data, "byte-sensei-en");
    assert_eq!(
        c["post_history_instructions"],
        "[System note: Byte Sensei never gives the answer outright; end every reply with a question for User.]"
    );
    let memories: Vec<String> =
        serde_json::from_slice(&std::fs::read(data.join("characters/byte-sensei-en.memories.json")).unwrap()).unwrap();
    assert!(
        memories[0].starts_with("Byte Sensei:「Today's warm-up.")
            && memories[0].contains("```python\ndef count(n):\n    if n == 0:\n        return []\n"),
        "{}",
        memories[0]
    );
    assert!(
        memories[1].starts_with("The video call connects."),
        "narration as it is: {}",
        memories[1]
    );
    assert!(
        memories[2].contains("```c\nwhile (i < 10) {\n    printf"),
        "{}",
        memories[2]
    );

    // One memory is one memory.
    let file = data.join("one.json");
    std::fs::write(
        &file,
        json!({"name": "Solo", "description": "d", "first_mes": "Hello."}).to_string(),
    )
    .unwrap();
    let said = ok(run(data, &["import", "card", file.to_str().unwrap()]));
    assert!(
        said.starts_with("imported card \"Solo\" as solo-en (1 memory)\n"),
        "{said}"
    );

    // A chat with the character opens on the card's greeting, its lines and code block as written;
    // without a kept card, on the first memory when it is the character's own words.
    let catalog = incharacter::catalog::Catalog::load(Some(data)).unwrap();
    let sensei = catalog.character("byte-sensei-en").unwrap();
    let opening = incharacter::rpa::card::opening(data, sensei, &memories).unwrap();
    assert!(
        opening.starts_with("Today's warm-up.") && opening.contains("```python\ndef count(n):\n"),
        "{opening}"
    );
    std::fs::remove_file(data.join("characters/byte-sensei-en.card.json")).unwrap();
    let opening = incharacter::rpa::card::opening(data, sensei, &memories).unwrap();
    assert!(opening.starts_with("Today's warm-up."), "{opening}");
    let narration_first = [memories[1].clone(), memories[0].clone()];
    assert_eq!(incharacter::rpa::card::opening(data, sensei, &narration_first), None);
}

#[test]
fn targets_travel_in_the_cards_extensions_and_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    ok(run(
        data,
        &["import", "card", fixture("harbour-keeper.v2.json").to_str().unwrap()],
    ));
    let file = data.join("characters/wenna-polgrain-en.toml");
    let mut toml = std::fs::read_to_string(&file).unwrap();
    toml.push_str("\n[targets.BFI]\nOpenness = \"L\"\nAgreeableness = 4.0\n");
    std::fs::write(&file, toml).unwrap();
    let card: Value = serde_json::from_str(&ok(run(data, &["export-card", "wenna-polgrain-en"]))).unwrap();
    let original: Value = serde_json::from_slice(&std::fs::read(fixture("harbour-keeper.v2.json")).unwrap()).unwrap();
    let extensions = &card["data"]["extensions"];
    assert_eq!(
        extensions["incharacter"],
        json!({"targets": {"BFI": {"Agreeableness": 4.0, "Openness": "L"}}})
    );
    for (key, value) in original["data"]["extensions"].as_object().unwrap() {
        assert_eq!(&extensions[key], value, "extensions.{key} kept");
    }
    assert_eq!(card["data"]["description"], original["data"]["description"]);

    let again = data.join("again.json");
    std::fs::write(&again, card.to_string()).unwrap();
    let said = ok(run(
        data,
        &["import", "card", again.to_str().unwrap(), "--id", "wenna-again-en"],
    ));
    assert!(
        said.contains("targets: 2 dimensions from extensions.incharacter"),
        "{said}"
    );
    let (a, b) = (character(data, "wenna-again-en"), character(data, "wenna-polgrain-en"));
    assert_eq!(a["labels"]["target"], b["labels"]["target"]);
    assert_eq!(a["description"], b["description"]);
}

/// A memory holding one of a card's own markers cannot come back as it is: the export says so.
#[test]
fn an_export_names_the_memories_a_card_cannot_carry_back() {
    let dir = TempDir::new().unwrap();
    let data = dir.path();
    let file = data.join("wren.json");
    std::fs::write(&file, json!({"name": "Wren", "description": "A keeper."}).to_string()).unwrap();
    ok(run(data, &["import", "card", file.to_str().unwrap()]));
    std::fs::write(
        data.join("characters/wren-en.memories.json"),
        json!([
            "Wren:「Logs first.」",
            "Wren:「Use <START> to begin.」",
            "Wren:「Hello, {{user}}.」"
        ])
        .to_string(),
    )
    .unwrap();
    let out = run(data, &["export-card", "wren-en"]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    ok(out);
    assert!(
        stderr.contains("memory 2 holds <start>, which a card reads as the start of another example"),
        "{stderr}"
    );
    assert!(
        stderr.contains("memory 3 holds {{user}}, which a card reads as a name"),
        "{stderr}"
    );
    assert!(!stderr.contains("memory 1 "), "{stderr}");
}

/// A RoleBench role that names a character of the user's beside a bundled one is played by the
/// user's (the one `import rolebench` or a card made for it); one that names two of the user's is
/// refused rather than played by whichever comes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolebench_role_is_played_by_the_users_character_and_two_of_them_are_refused() {
    let s = crate::common::setup(incharacter_testkit::fake_openai::FakeConfig::default(), "").await;
    let card = s.dir.path().join("h.json");
    std::fs::write(
        &card,
        json!({"name": "Hermione Granger", "description": "A witch."}).to_string(),
    )
    .unwrap();
    let import = |id: &str| {
        crate::common::command(
            &s.config,
            &s.data,
            &["import", "card", card.to_str().unwrap(), "--id", id],
        )
        .output()
        .unwrap()
    };
    ok(import("hermione-granger-en"));
    let questions = s.dir.path().join("q.jsonl");
    std::fs::write(
        &questions,
        "{\"role\":\"Hermione Granger\",\"question\":\"Hi?\",\"generated\":[\"Hello.\"]}\n",
    )
    .unwrap();
    let rolebench = ["rolebench", "--data", questions.to_str().unwrap(), "--json"];
    let out = crate::common::output(&s.config, &s.data, &rolebench).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("Hermione Granger: played by your hermione-granger-en, not the bundled hermione-en"),
        "{stderr}"
    );
    let session = serde_json::from_slice::<Value>(&out.stdout).unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();
    let journal = std::fs::read_to_string(s.data.join("sessions").join(&session).join("journal.jsonl")).unwrap();
    assert!(
        journal.contains(r#""Hermione Granger":"hermione-granger-en""#),
        "{journal}"
    );

    ok(import("hermione-again-en"));
    let out = crate::common::output(&s.config, &s.data, &rolebench).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the role \"Hermione Granger\" names 2 characters (hermione-again-en, hermione-granger-en)"),
        "{stderr}"
    );
}

#[test]
fn an_import_that_fails_on_any_of_its_files_changes_none_of_them() {
    // A replace whose character file turns out unwritable (a link: refused, never followed) keeps the
    // character's memories and card as they were.
    let (dir, _) = with_mira(&[]);
    let data = dir.path();
    let characters = data.join("characters");
    let real = data.join("elsewhere.toml");
    std::fs::rename(characters.join("mira-vance-en.toml"), &real).unwrap();
    std::os::unix::fs::symlink(&real, characters.join("mira-vance-en.toml")).unwrap();
    let before = crate::common::snapshot(&characters);
    let mut card = mira();
    card["data"]["first_mes"] = json!("A new greeting that must not land.");
    let file = data.join("mira2.json");
    std::fs::write(&file, card.to_string()).unwrap();
    let out = run(data, &["import", "card", file.to_str().unwrap(), "--replace"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
    assert_eq!(
        crate::common::snapshot(&characters),
        before,
        "nothing changed, no temporary left"
    );

    // A first import whose card file cannot be written leaves no memories behind.
    std::fs::create_dir(characters.join("oren-en.card.json")).unwrap();
    let before = crate::common::snapshot(&characters);
    let file = data.join("oren.json");
    std::fs::write(&file, oren().to_string()).unwrap();
    let out = run(data, &["import", "card", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(crate::common::snapshot(&characters), before);
}

#[test]
fn a_cards_bad_target_is_located_in_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    // A letter no target takes, and a dimension the scale does not have.
    for (dimension, value, said) in [
        ("Openness", "Q", ""),
        ("Opennes", "L", "scale BFI has no dimension \"Opennes\""),
    ] {
        let mut card = mira();
        card["data"]["extensions"] = json!({"incharacter": {"targets": {"BFI": {dimension: value}}}});
        let text = serde_json::to_string_pretty(&card).unwrap();
        let file = data.join("bad-target.json");
        std::fs::write(&file, &text).unwrap();
        let out = run(data, &["import", "card", file.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        let pair = format!("\"{dimension}\": \"{value}\"");
        let line = text.lines().position(|l| l.contains(&pair)).unwrap() + 1;
        let column = text
            .lines()
            .nth(line - 1)
            .unwrap()
            .find(&format!("\"{value}\""))
            .unwrap()
            + 1;
        assert!(err.contains(&format!("bad-target.json:{line}:{column}: ")), "{err}");
        assert!(err.contains(said), "{err}");
        assert!(!data.join("characters").exists(), "nothing written");
    }
}

/// A replace under the id spelled in another case replaces the character's files, leaving no second
/// set beside them; targets under a scale id in small letters are the scale's.
#[test]
fn a_replace_under_the_id_in_another_case_keeps_one_set_of_files() {
    let (dir, _) = with_mira(&[]);
    let data = dir.path();
    let mut card = mira();
    card["data"]["first_mes"] = json!("A new greeting.");
    card["data"]["extensions"] = json!({"incharacter": {"targets": {"bfi": {"Openness": "L"}}}});
    let file = data.join("mira2.json");
    std::fs::write(&file, card.to_string()).unwrap();
    ok(run(
        data,
        &[
            "import",
            "card",
            file.to_str().unwrap(),
            "--id",
            "MIRA-VANCE-EN",
            "--replace",
        ],
    ));
    let mut names: Vec<String> = std::fs::read_dir(data.join("characters"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "mira-vance-en.card.json",
            "mira-vance-en.memories.json",
            "mira-vance-en.toml"
        ]
    );
    let memories = std::fs::read_to_string(data.join("characters/mira-vance-en.memories.json")).unwrap();
    assert!(memories.contains("A new greeting."), "{memories}");
    let shown = ok(run(data, &["characters", "show", "mira-vance-en", "--json"]));
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["labels"]["target"]["BFI"]["Openness"]["type"], "L", "{shown}");
}

/// A ChatHaruhi character's memories come back from its exported card as they were, narration
/// lines (`:The lamp turned…`) included: they were folded into the utterance before them.
#[test]
fn a_chatharuhi_characters_card_imports_back_to_the_same_memories() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let wren = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chatharuhi/Wren");
    ok(run(data, &["import", "chatharuhi", wren.to_str().unwrap()]));
    let card = data.join("wren.json");
    ok(run(data, &["export-card", "wren-en", "-o", card.to_str().unwrap()]));
    ok(run(
        data,
        &["import", "card", card.to_str().unwrap(), "--id", "wren-again-en"],
    ));
    let memories = |id: &str| incharacter::rpa::memories::chunks(data, id).unwrap().unwrap();
    let (before, after) = (memories("wren-en"), memories("wren-again-en"));
    assert!(
        before
            .iter()
            .any(|m| m.contains("\n:The lamp turned slowly above them")),
        "{before:?}"
    );
    assert_eq!(after, before);
}

/// A card near the size a card may have is kept so that export-card reads it back: pretty-printed,
/// its lore book's 6,000 entries would pass the limit, so it is kept compact.
#[test]
fn a_card_near_the_size_limit_is_kept_so_that_it_exports() {
    let mut card = mira();
    let entries: Vec<Value> = (0..6000)
        .map(|i| json!({"keys": ["a", "b", "c", "d", format!("k{i}")], "content": "x".repeat(200), "enabled": true}))
        .collect();
    card["data"]["character_book"] = json!({"entries": entries});
    let compact = card.to_string();
    assert!(compact.len() < 2 << 20 && serde_json::to_vec_pretty(&card).unwrap().len() > 2 << 20);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lore.json");
    std::fs::write(&file, &compact).unwrap();
    ok(run(
        dir.path(),
        &["import", "card", file.to_str().unwrap(), "--id", "lore"],
    ));
    let out = dir.path().join("back.json");
    ok(run(dir.path(), &["export-card", "lore", "-o", out.to_str().unwrap()]));
    let back: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(
        back["data"]["character_book"]["entries"].as_array().map(Vec::len),
        Some(6000)
    );
}

/// Memories whose lines a card's `{{char}}:`/`{{user}}:` messages would swallow come back whole:
/// narration named as a speaker (`旁白: …`), an utterance with an action after it, empty utterances
/// and someone's utterance over two lines are written as memories write them.
#[test]
fn memories_a_cards_messages_would_swallow_come_back_from_its_card() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let folder = data.join("H");
    std::fs::create_dir_all(folder.join("texts")).unwrap();
    std::fs::write(folder.join("system_prompt.txt"), "You are Haruhi.").unwrap();
    let texts = [
        "Kyon:「I am up.」\n旁白: Kyon strikes out\nHaruhi:「Idiot!」",
        "Kyon:「We leave.」\nHaruhi:「Fine」(points the bat)",
        "Kyon:「」\nHaruhi:「Good evening.」",
        "Kyon:「」\nHaruhi:「」",
        "Haruhi:「Listen.」\nMikuru:「I was\nlate again」\nHaruhi:「Again!」",
        "Kyon:「Plain?」\nHaruhi:「Plain.」",
    ];
    for (i, text) in texts.iter().enumerate() {
        std::fs::write(folder.join("texts").join(format!("text_{i}.txt")), text).unwrap();
    }
    let args = [
        "import",
        "chatharuhi",
        folder.to_str().unwrap(),
        "--name",
        "Haruhi",
        "--id",
        "h1",
    ];
    ok(run(data, &args));
    let card = data.join("h1.json");
    ok(run(data, &["export-card", "h1", "-o", card.to_str().unwrap()]));
    let exported: Value = serde_json::from_slice(&std::fs::read(&card).unwrap()).unwrap();
    let examples = exported["data"]["mes_example"].as_str().unwrap();
    assert!(
        examples.contains("{{user}}: Plain?\n{{char}}: Plain."),
        "still messages where they come back: {examples}"
    );
    ok(run(data, &["import", "card", card.to_str().unwrap(), "--id", "h2"]));
    let memories = |id: &str| incharacter::rpa::memories::chunks(data, id).unwrap().unwrap();
    let (before, after) = (memories("h1"), memories("h2"));
    assert_eq!(before.len(), texts.len(), "{before:?}");
    assert_eq!(after, before);
}
