//! Imports never replace anything unasked, the catalog never picks between two files of one id, and
//! what `validate` and the catalog read is a regular file of a stated size, all through the binary:
//! every importer refuses an id held by a user file or a bundled character or scale (exit 2, naming
//! the file and `--replace`) and writes nothing; `--replace` replaces and says what; two user files
//! of one id make `validate` exit 2 naming both and the catalog use neither; `/dev/zero`, a FIFO and
//! a file over 4 MiB are refused before they are read.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

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

/// The error of a run that must exit 2.
fn refused(out: Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// A character card of `name` whose description says `description`, written into `data`.
fn card(data: &Path, file: &str, name: &str, description: &str) -> String {
    let path = data.join(file);
    let card = json!({"spec": "chara_card_v2", "data": {
        "name": name, "description": description, "first_mes": "Hello, {{user}}."
    }});
    std::fs::write(&path, card.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

fn listed(data: &Path, what: &str, id: &str) -> Option<Value> {
    let list: Value = serde_json::from_str(&ok(run(data, &[what, "--json"]))).unwrap();
    list.as_array().unwrap().iter().find(|e| e["id"] == id).cloned()
}

#[test]
fn a_second_card_making_the_same_id_is_refused_and_the_first_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let first = card(data, "first.json", "Hermione Granger", "{{char}} is the first one.");
    let said = ok(run(data, &["import", "card", &first]));
    assert!(
        said.starts_with("imported card \"Hermione Granger\" as hermione-granger-en"),
        "{said}"
    );
    let before = crate::common::snapshot(&data.join("characters"));

    let second = card(data, "second.json", "Hermione Granger", "{{char}} is the second one.");
    let error = refused(run(data, &["import", "card", &second]));
    let file = data.join("characters/hermione-granger-en.toml");
    assert!(
        error.contains(&format!(
            "a character \"hermione-granger-en\" already exists: {}; pass --id to import under another id, or --replace to replace it",
            file.display()
        )),
        "{error}"
    );
    assert_eq!(
        crate::common::snapshot(&data.join("characters")),
        before,
        "nothing written"
    );
}

#[test]
fn two_imports_of_one_name_at_once_write_one_character_whole() {
    for round in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let (a, b) = (
            card(data, "a.json", "Twin", "{{char}} is card A."),
            card(data, "b.json", "Twin", "{{char}} is card B."),
        );
        let start = |file: &str| {
            crate::common::command(&data.join("no-config.toml"), data, &["import", "card", file])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (x, y) = (start(&a), start(&b));
        let (x, y) = (x.wait_with_output().unwrap(), y.wait_with_output().unwrap());
        let codes = [x.status.code(), y.status.code()];
        assert!(
            codes.contains(&Some(0)) && codes.contains(&Some(2)),
            "round {round}: exactly one imports: {codes:?}"
        );
        // The character and its kept card are both of the one that was imported.
        let which = if x.status.success() { "A" } else { "B" };
        let characters = data.join("characters");
        for file in ["twin-en.toml", "twin-en.card.json"] {
            let text = std::fs::read_to_string(characters.join(file)).unwrap();
            assert!(
                text.contains(&format!("is card {which}")),
                "round {round}: {file}: {text}"
            );
        }
    }
}

#[test]
fn replace_replaces_a_users_character_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let first = card(data, "first.json", "Hermione Granger", "{{char}} is the first one.");
    ok(run(data, &["import", "card", &first]));
    let second = card(data, "second.json", "Hermione Granger", "{{char}} is the second one.");
    let said = ok(run(data, &["import", "card", &second, "--replace"]));
    let file = data.join("characters/hermione-granger-en.toml");
    assert!(
        said.contains(&format!("replaced the character file {}", file.display())),
        "{said}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("is the second one") && !text.contains("is the first one"),
        "{text}"
    );

    let third = card(data, "third.json", "Hermione Granger", "{{char}} is the third one.");
    let said: Value = serde_json::from_str(&ok(run(data, &["import", "card", &third, "--replace", "--json"]))).unwrap();
    assert_eq!(
        said["replaced"],
        json!({"kind": "user", "path": file.to_str().unwrap()})
    );
}

#[test]
fn a_bundled_id_is_refused_then_overridden_with_replace() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let file = card(data, "h.json", "Hermione Granger", "{{char}}, as I see her.");
    let error = refused(run(data, &["import", "card", &file, "--id", "hermione-en"]));
    assert!(
        error.contains("a character \"hermione-en\" already exists: the bundled character hermione-en;"),
        "{error}"
    );
    assert!(error.contains("--replace"), "{error}");
    assert!(!data.join("characters").exists(), "nothing written");
    assert_eq!(
        listed(data, "characters", "hermione-en").unwrap()["origin"]["kind"],
        "bundled"
    );

    let said = ok(run(
        data,
        &["import", "card", &file, "--id", "hermione-en", "--replace"],
    ));
    assert!(
        said.contains("replaced the bundled character hermione-en: this user file overrides it"),
        "{said}"
    );
    let entry = listed(data, "characters", "hermione-en").unwrap();
    assert_eq!(entry["origin"]["overrides_bundled"], true, "{entry}");
    // The bundled character's labels stay with the override, and the import says so.
    assert!(entry["labels"]["pdb"]["BFI"].is_object(), "{entry}");
    assert!(
        said.contains("kept from the Hermione Granger it replaces: labels (") && said.contains("experimenter Harry"),
        "{said}"
    );
}

/// Another character imported over an id starts afresh: scored against the old one's labels, with its
/// aliases masking answers and its experimenter asking, it would be measured as someone else.
#[test]
fn a_replace_by_another_character_carries_nothing_of_the_old_one_over() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let file = card(data, "alice.json", "Alice", "{{char}} is a test. {{user}} asks.");
    let said = ok(run(data, &["import", "card", &file, "--id", "luna-en", "--replace"]));
    assert!(
        said.contains("replaces Luna Lovegood, another name: its labels (") && said.contains("are not carried over"),
        "{said}"
    );
    let entry: Value = serde_json::from_str(&ok(run(data, &["characters", "show", "luna-en", "--json"]))).unwrap();
    assert_eq!(entry["experimenter"], "User", "{entry}");
    assert_eq!(entry["aliases"], json!(["Alice"]), "{entry}");
    let pdb = &entry["labels"]["pdb"];
    assert!(
        pdb.is_null() || pdb.as_object().is_some_and(|m| m.is_empty()),
        "{entry}"
    );
    assert!(entry["description"].as_str().unwrap().contains("User asks"), "{entry}");
}

#[test]
fn chatharuhi_and_rolebench_imports_refuse_an_id_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let ake = [
        "import",
        "chatharuhi",
        &fixture("ake.jsonl"),
        "--name",
        "阿珂",
        "--id",
        "ake",
    ];
    ok(run(data, &ake));
    let wren_profiles = fixture("profiles-eng-Wren Ashby.jsonl");
    let wren = [
        "import",
        "rolebench",
        "--desc",
        &fixture("desc.json"),
        "--profiles",
        &wren_profiles,
        "--role",
        "Wren Ashby",
    ];
    ok(run(data, &wren));
    // A user's own edit, which an import must not silently undo.
    let file = data.join("characters/ake.toml");
    let edited = std::fs::read_to_string(&file)
        .unwrap()
        .replace("守塔人", "守塔人（我改过）");
    std::fs::write(&file, &edited).unwrap();
    let before = crate::common::snapshot(&data.join("characters"));

    let error = refused(run(data, &ake));
    assert!(
        error.contains(&format!("already exists: {};", file.display())),
        "{error}"
    );
    assert!(error.contains("--replace"), "{error}");
    let error = refused(run(data, &[&wren[..], &["--id", "ake"]].concat()));
    assert!(
        error.contains(&format!("a character \"ake\" already exists: {};", file.display())),
        "{error}"
    );
    let error = refused(run(data, &wren));
    assert!(error.contains("wren-ashby-en.toml; pass --id"), "{error}");
    let error = refused(run(data, &[&ake[..5], &["--id", "zhongli-zh"]].concat()));
    assert!(error.contains("the bundled character zhongli-zh"), "{error}");
    assert_eq!(
        crate::common::snapshot(&data.join("characters")),
        before,
        "nothing written"
    );
}

#[test]
fn scales_refuse_a_bundled_or_user_id_and_replace_says_what() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let tide = fixture("tide_incharacter.json");
    let error = refused(run(data, &["import", "scale", &tide, "--id", "bfi"]));
    assert!(
        error.contains("a scale \"bfi\" already exists: the bundled scale BFI;"),
        "{error}"
    );
    assert!(error.contains("--replace"), "{error}");
    assert!(!data.join("scales").exists(), "nothing written");

    ok(run(data, &["import", "scale", &tide]));
    let file = data.join("scales/Tide.toml");
    let before = std::fs::read(&file).unwrap();
    let error = refused(run(data, &["import", "scale", &tide, "--id", "TIDE"]));
    assert!(
        error.contains(&format!("already exists: {};", file.display())),
        "{error}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), before);

    let said = ok(run(data, &["import", "scale", &tide, "--replace"]));
    assert!(
        said.contains(&format!("replaced the scale file {}", file.display())),
        "{said}"
    );
    let said = ok(run(data, &["import", "scale", &tide, "--id", "BFI", "--replace"]));
    assert!(
        said.contains("replaced the bundled scale BFI: this user file overrides it"),
        "{said}"
    );
    assert_eq!(
        listed(data, "scales", "BFI").unwrap()["origin"]["overrides_bundled"],
        true
    );
}

/// Two files of `folder` in a fresh data dir holding `text` under different names.
fn twins(folder: &str, text: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join(folder);
    std::fs::create_dir_all(&folder).unwrap();
    let (a, b) = (folder.join("mine.toml"), folder.join("copy.toml"));
    std::fs::write(&a, text).unwrap();
    std::fs::write(&b, format!("# a copy\n{text}")).unwrap();
    (dir, a, b)
}

const WREN: &str = "id = \"wren-en\"\nname = \"Wren\"\nlanguage = \"en\"\nexperimenter = \"User\"\n\
                    description = \"You are Wren, a lighthouse keeper.\"\n";

#[test]
fn two_user_characters_of_one_id_fail_validate_and_neither_is_used() {
    let (dir, a, b) = twins("characters", WREN);
    let data = dir.path();
    let out = run(data, &["validate", data.join("characters").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!(
            "{}:2:1: character id \"wren-en\" is also the id of {}: neither file is used",
            b.display(),
            a.display()
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "{}:1:1: character id \"wren-en\" is also the id of {}",
            a.display(),
            b.display()
        )),
        "{said}"
    );
    // One file of the two, given alone, is named with its twin too.
    let out = run(data, &["validate", a.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));

    let out = run(data, &["characters", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        list.as_array().unwrap().iter().all(|c| c["id"] != "wren-en"),
        "neither is used"
    );
    let error = refused(run(data, &["characters", "show", "wren-en"]));
    assert!(
        error.contains(&format!(
            "character \"wren-en\" is not used: 2 files hold its id ({}, {})",
            b.display(),
            a.display()
        )),
        "{error}"
    );
    let warned = String::from_utf8_lossy(&out.stderr);
    assert!(
        warned.contains(&format!("warning: skipped {}", a.display())),
        "{warned}"
    );
    assert!(
        warned.contains(&format!("warning: skipped {}", b.display())),
        "{warned}"
    );

    // An import under that id is refused even with --replace: which file to replace is the user's choice.
    let file = card(data, "w.json", "Wren", "{{char}} keeps the light.");
    let error = refused(run(data, &["import", "card", &file]));
    assert!(error.contains(&format!("{}, {}", b.display(), a.display())), "{error}");
}

/// A skipped file's name is the user's to choose, escape sequences and all: the warning naming it
/// passes the terminal gate as everything else printed does.
#[test]
fn a_skipped_files_name_reaches_the_terminal_without_its_controls() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    for folder in ["characters", "scales"] {
        std::fs::create_dir_all(data.join(folder)).unwrap();
        let name = format!("\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}31m{folder}.toml");
        std::fs::write(data.join(folder).join(name), "id = \"x\"\nname = \n").unwrap();
    }
    let out = run(data, &["characters"]);
    let warned = String::from_utf8_lossy(&out.stderr);
    assert_eq!(warned.matches("warning: skipped").count(), 2, "{warned}");
    assert!(
        warned.contains("characters.toml:2:") && warned.contains("scales.toml:"),
        "{warned}"
    );
    assert!(!warned.contains(['\u{1b}', '\u{7}', '\u{9b}']), "{warned:?}");
    // Shown as it can be typed back, not as another file's name.
    assert!(
        warned.contains("\\u{1b}]52;c;ZXZpbA==\\u{7}\\u{9b}31mcharacters.toml"),
        "{warned}"
    );
}

#[test]
fn two_user_scales_of_one_id_fail_validate_and_neither_is_used() {
    let text = include_str!("../../assets/scales/GSE.toml").replace("id = \"GSE\"", "id = \"MyGSE\"");
    let (dir, a, b) = twins("scales", &text);
    let data = dir.path();
    let out = run(data, &["validate", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("scale id \"MyGSE\" is also the id of {}", b.display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("scale id \"MyGSE\" is also the id of {}", a.display())),
        "{said}"
    );
    let out = run(data, &["scales", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(list.as_array().unwrap().iter().all(|s| s["id"] != "MyGSE"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("neither file is used"));
    let error = refused(run(
        data,
        &[
            "import",
            "scale",
            &fixture("tide_incharacter.json"),
            "--id",
            "MyGSE",
            "--replace",
        ],
    ));
    assert!(error.contains("--replace cannot choose"), "{error}");
}

#[cfg(unix)]
#[test]
fn validate_refuses_devices_fifos_and_oversized_files_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let error = String::from_utf8(run(data, &["validate", "/dev/zero"]).stdout).unwrap();
    assert!(error.contains("/dev/zero:1:1: not a regular file"), "{error}");
    assert_eq!(run(data, &["validate", "/dev/zero"]).status.code(), Some(2));

    let fifo = data.join("pipe.toml");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // With no writer, opening the FIFO would block: it is refused before it is opened.
    let out = run(data, &["validate", fifo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("pipe.toml:1:1: not a regular file"));

    let big = data.join("big.toml");
    std::fs::write(&big, format!("{WREN}# {}\n", "x".repeat(4 << 20))).unwrap();
    let out = run(data, &["validate", big.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("big.toml:1:1: larger than the 4 MiB allowed for a scale or character file"),
        "{said}"
    );
}

/// Something in the import lock's place is said, not waited on (a FIFO would block its open), and a
/// link given to import is named as one, with where it points.
#[cfg(unix)]
#[test]
fn an_import_names_a_fifo_in_its_locks_place_and_a_link_given_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let card = data.join("wren.json");
    std::fs::write(&card, r#"{"name": "Wren", "description": "{{char}} keeps bees."}"#).unwrap();
    let link = data.join("link.json");
    std::os::unix::fs::symlink(&card, &link).unwrap();
    let out = run(data, &["import", "card", link.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("link.json: a symbolic link (to {})", card.display())),
        "{said}"
    );
    // An option that shows nothing is refused as the option it is.
    for option in ["--experimenter", "--name"] {
        let out = run(data, &["import", "card", card.to_str().unwrap(), option, " \u{200b}"]);
        assert_eq!(out.status.code(), Some(2));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains(&format!("{option} is empty (or shows nothing)")),
            "{said}"
        );
    }
    let lock = data.join(".import.lock");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&lock)
            .status()
            .unwrap()
            .success()
    );
    let out = run(data, &["import", "card", card.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(".import.lock: not a regular file"), "{said}");
    assert!(!data.join("characters").join("wren.toml").exists());
}

/// A `desc.json` an editor saved with a byte order mark reads as the same file without it (as the
/// profiles, question files and annotation CSVs do); an error in it is then located as the editor
/// shows it.
#[test]
fn a_rolebench_desc_with_a_byte_order_mark_imports() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let desc = dir.path().join("desc.json");
    let text = std::fs::read_to_string(fixture("desc.json")).unwrap();
    std::fs::write(&desc, format!("\u{feff}{text}")).unwrap();
    let profiles = fixture("profiles-eng-Wren Ashby.jsonl");
    let args = |desc: &std::path::Path| {
        let desc = desc.display().to_string();
        vec![
            "import".to_string(),
            "rolebench".into(),
            "--desc".into(),
            desc,
            "--profiles".into(),
            profiles.clone(),
            "--role".into(),
            "Wren Ashby".into(),
        ]
    };
    let owned = args(&desc);
    ok(run(&data, &owned.iter().map(String::as_str).collect::<Vec<_>>()));
    std::fs::write(&desc, "\u{feff}{\"Wren Ashby\": oops}").unwrap();
    let owned = args(&desc);
    let error = refused(run(&data, &owned.iter().map(String::as_str).collect::<Vec<_>>()));
    assert!(error.contains("desc.json:1:16:"), "{error}");
}

/// A character whose file the catalog skipped (labels on a scale whose own file has errors) is not
/// "unknown" to a command that names it: the error says its file was skipped, and why.
#[test]
fn a_character_skipped_for_an_error_is_named_as_skipped() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path();
    std::fs::create_dir_all(dir.join("characters")).unwrap();
    std::fs::create_dir_all(dir.join("scales")).unwrap();
    std::fs::write(dir.join("scales").join("ODD.toml"), "id = \"ODD\"\nname = [\n").unwrap();
    std::fs::write(
        dir.join("characters").join("lab-en.toml"),
        "id = \"lab-en\"\nname = \"Lab\"\nlanguage = \"en\"\nexperimenter = \"Bo\"\ndescription = \"You are Lab.\"\n\n[labels.pdb.ODD]\nA = { score = 4.0, type = \"H\" }\n",
    )
    .unwrap();
    let e = refused(run(
        dir,
        &[
            "run",
            "--characters",
            "lab-en",
            "--scales",
            "GSE",
            "--methods",
            "er-batch",
        ],
    ));
    assert!(
        e.contains("character \"lab-en\" is not in the catalog: its file was skipped for an error")
            && e.contains("unknown scale \"ODD\""),
        "{e}"
    );
    let e = refused(run(
        dir,
        &[
            "run",
            "--characters",
            "nobody",
            "--scales",
            "GSE",
            "--methods",
            "er-batch",
        ],
    ));
    assert!(e.contains("unknown character \"nobody\""), "{e}");
}

/// A character's work is what prompts name it by: a replace by the same character keeps it, where the
/// import alone knows only where the text came from.
#[test]
fn a_replace_by_the_same_character_keeps_its_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let ake = [
        "import",
        "chatharuhi",
        &fixture("ake.jsonl"),
        "--name",
        "阿珂",
        "--id",
        "ake",
    ];
    ok(run(data, &ake));
    let file = data.join("characters/ake.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("work ="), "not known: {text}");
    std::fs::write(
        &file,
        text.replace("experimenter = ", "work = \"天涯明月刀\"\nexperimenter = "),
    )
    .unwrap();
    let said = ok(run(data, &[&ake[..], &["--replace"]].concat()));
    assert!(
        said.contains("experimenter ") && said.contains(", work 天涯明月刀"),
        "{said}"
    );
    let entry: Value = serde_json::from_str(&ok(run(data, &["characters", "show", "ake", "--json"]))).unwrap();
    assert_eq!(entry["work"], "天涯明月刀", "{entry}");
}
