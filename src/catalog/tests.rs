//! The catalog: bundled and user files, what is refused, and saving.
use super::*;
use crate::domain::character::{Label, LabelSource, LabelType};
use crate::domain::diagnostic::Source;

#[test]
fn bundled_assets_load() {
    let c = Catalog::bundled()
        .unwrap_or_else(|e| panic!("{}", e.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")));
    assert_eq!(c.scales.len(), 15);
    assert_eq!(c.characters.len(), 32);
    assert!(c.scale("bfi").is_some());
    assert_eq!(
        c.character("Hermione Granger").map(|h| h.id.as_str()),
        Some("hermione-en")
    );
    assert_eq!(c.character("钟离").map(|h| h.id.as_str()), Some("zhongli-zh"));
}

#[test]
fn a_name_two_characters_answer_to_is_not_enough_and_every_bundled_name_is() {
    let mut c = Catalog::bundled().unwrap();
    // Every name, alias and id of the bundled characters names one of them.
    for e in &c.characters {
        let ch = &e.value;
        for name in [&ch.id, &ch.name].into_iter().chain(&ch.aliases) {
            assert_eq!(c.named_character(name).map(|x| x.id.as_str()), Ok(ch.id.as_str()), "{name}");
        }
    }
    let mut copy = c.character("hermione-en").unwrap().clone();
    copy.id = "con".into();
    c.characters.push(Entry {
        value: copy,
        origin: Origin::Bundled,
    });
    assert_eq!(
        c.named_character("Hermione Granger").map(|x| x.id.clone()),
        Err(vec!["hermione-en".to_string(), "con".to_string()])
    );
    assert_eq!(c.named_character("con").map(|x| x.id.as_str()), Ok("con"));
    assert_eq!(c.named_character("hermione-en").map(|x| x.id.as_str()), Ok("hermione-en"));
    assert_eq!(c.named_character("nobody").map(|x| x.id.clone()), Err(vec![]));
}

fn parse(c: &Catalog, text: &str) -> Result<Character, Vec<Diagnostic>> {
    Character::parse(Source::new("c.toml", text), |id| c.scale(id))
}

#[test]
fn every_bundled_character_writes_back_to_itself() {
    let c = Catalog::bundled().unwrap();
    for e in &c.characters {
        let text = e.value.to_toml();
        assert_eq!(parse(&c, &text).as_ref(), Ok(&e.value), "{}:\n{text}", e.value.id);
    }
}

const AUTHORED: &str = r#"id = "wren-en"
name = "Wren"
language = "en"
experimenter = "User"
description = "You are Wren, a lighthouse keeper."

[card]
tags = ["sea", "quiet"]
creator = "someone"
version = "1.2"

[targets]
16Personalities = "INFP"

[targets.BFI]
Extraversion = "L"
Agreeableness = 4.5
Neuroticism = "h"
"#;

#[test]
fn targets_are_codes_letters_or_numbers_and_write_back() {
    let c = Catalog::bundled().unwrap();
    let wren = parse(&c, AUTHORED).unwrap();
    let t = &wren.labels.target;
    assert_eq!(
        t["BFI"]["Extraversion"],
        Label {
            score: None,
            kind: LabelType::L
        }
    );
    assert_eq!(
        t["BFI"]["Agreeableness"],
        Label {
            score: Some(4.5),
            kind: LabelType::H
        }
    );
    assert_eq!(t["BFI"]["Neuroticism"].kind, LabelType::H);
    assert_eq!(t["BFI"].len(), 3, "dimensions without a target have none");
    let p16 = c.scale("16Personalities").unwrap();
    assert_eq!(wren.code(p16, LabelSource::Target).as_deref(), Some("INFP"));
    assert_eq!(wren.labels.exclusion_source("BFI"), LabelSource::Target);
    assert_eq!(wren.card.as_ref().unwrap().tags, ["sea", "quiet"]);
    assert_eq!(parse(&c, &wren.to_toml()), Ok(wren));
}

#[test]
fn bad_targets_are_located() {
    let c = Catalog::bundled().unwrap();
    let err = |from: &str, to: &str| {
        let e = parse(&c, &AUTHORED.replace(from, to)).unwrap_err();
        (e[0].line, e[0].message.clone())
    };
    let (line, m) = err("\"INFP\"", "\"INF\"");
    assert_eq!(line, 13);
    assert!(
        m.contains("one letter per dimension (E/I S/N T/F J/P)") || m.contains("one letter per dimension"),
        "{m}"
    );
    let (_, m) = err("\"INFP\"", "\"IQFP\"");
    assert!(m.contains("\"Q\""), "{m}");
    let (line, m) = err("4.5", "7");
    assert_eq!(line, 17);
    assert!(m.contains("outside [1, 5]"), "{m}");
    let (_, m) = err("Neuroticism = \"h\"", "Neuroticism = \"maybe\"");
    assert!(m.contains("\"H\", \"L\" or a number"), "{m}");
    let (line, m) = err("Agreeableness", "Kindness");
    assert_eq!(line, 17);
    assert!(m.contains("no dimension \"Kindness\""), "{m}");
    let (_, m) = err("[targets.BFI]", "[targets.NOPE]");
    assert!(m.contains("unknown scale \"NOPE\""), "{m}");
}

/// A data dir whose characters folder holds `files` (name, text).
fn data_with(folder: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(folder).join(name), text).unwrap();
    }
    dir
}

#[test]
fn two_user_characters_with_one_id_are_both_refused_naming_each_other() {
    let wren = AUTHORED;
    let other = wren
        .replace("name = \"Wren\"", "name = \"Wren the Second\"")
        .replace("id = \"wren-en\"", "id = \"Wren-EN\"");
    let data = data_with(
        "characters",
        &[
            ("a.toml", wren),
            ("b.toml", &other),
            ("c.toml", &AUTHORED.replace("wren-en", "solo-en")),
        ],
    );
    let c = Catalog::load(Some(data.path())).unwrap();
    assert!(c.character("wren-en").is_none(), "neither file is used");
    assert!(c.character("Wren the Second").is_none());
    assert!(c.character("solo-en").is_some());
    let (a, b) = (
        data.path().join("characters/a.toml"),
        data.path().join("characters/b.toml"),
    );
    assert_eq!(
        c.duplicates,
        [Duplicate {
            kind: Kind::Character,
            id: "wren-en".into(),
            files: vec![a.clone(), b.clone()]
        }]
    );
    let problems: Vec<String> = c.problems.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        problems,
        [
            format!(
                "{}:1:1: character id \"wren-en\" is also the id of {}: neither file is used until one of them has another id",
                a.display(),
                b.display()
            ),
            format!(
                "{}:1:1: character id \"Wren-EN\" is also the id of {}: neither file is used until one of them has another id",
                b.display(),
                a.display()
            ),
        ]
    );
    assert_eq!(c.user_files(Kind::Character, "WREN-en"), [a, b]);
    assert_eq!(c.bundled_id(Kind::Character, "wren-en"), None);
}

#[test]
fn duplicates_of_a_bundled_id_leave_the_bundled_one_in_use_and_say_so() {
    let bundled = Catalog::bundled().unwrap();
    let text = bundled.character("hermione-en").unwrap().to_toml();
    let data = data_with(
        "characters",
        &[("h1.toml", &text), ("h2.toml", &format!("# a copy\n{text}"))],
    );
    let c = Catalog::load(Some(data.path())).unwrap();
    assert_eq!(c.character_entry("hermione-en").unwrap().origin, Origin::Bundled);
    assert_eq!(
        c.bundled_id(Kind::Character, "Hermione-EN").as_deref(),
        Some("hermione-en")
    );
    assert_eq!(c.problems.len(), 2);
    assert!(
        c.problems[1].to_string().contains("h2.toml:2:1: character id"),
        "{}",
        c.problems[1]
    );
    assert!(
        c.problems[0]
            .message
            .ends_with("; meanwhile the bundled character hermione-en is used"),
        "{}",
        c.problems[0]
    );
}

#[test]
fn two_user_scales_with_one_id_are_both_refused() {
    let text = include_str!("../../assets/scales/GSE.toml").replace("id = \"GSE\"", "id = \"MyGSE\"");
    assert!(text.contains("id = \"MyGSE\""), "the test renames the scale");
    let data = data_with(
        "scales",
        &[("one.toml", &text), ("two.toml", &text.replace("MyGSE", "mygse"))],
    );
    let c = Catalog::load(Some(data.path())).unwrap();
    assert!(c.scale("MyGSE").is_none());
    assert_eq!(c.duplicates.len(), 1);
    assert_eq!(c.duplicates[0].kind, Kind::Scale);
    assert!(
        c.problems[0].message.contains("scale id \"MyGSE\" is also the id of"),
        "{}",
        c.problems[0]
    );
    assert!(c.problems[0].message.contains("two.toml"), "{}", c.problems[0]);
}

#[test]
fn validate_names_both_files_of_one_id_but_not_one_file_named_twice() {
    let c = Catalog::bundled().unwrap();
    let data = data_with("characters", &[("a.toml", AUTHORED), ("b.toml", AUTHORED)]);
    let folder = data.path().join("characters");
    let v = c.validate_files(std::slice::from_ref(&folder));
    assert_eq!(v.checked, 2);
    let errors: Vec<String> = v.errors.iter().map(|d| d.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("a.toml:1:1: character id \"wren-en\" is also the id of")
            && errors[0].contains("b.toml")
    );
    assert!(errors[1].contains("b.toml:1:1:") && errors[1].contains("a.toml"));
    let once = c.validate_files(&[folder.join("a.toml"), folder.clone().join(".").join("a.toml")]);
    assert!(once.errors.is_empty(), "{:?}", once.errors);
}

#[test]
fn validate_names_a_twin_the_catalog_refused_even_when_only_one_file_is_given() {
    let data = data_with("characters", &[("a.toml", AUTHORED), ("b.toml", AUTHORED)]);
    let c = Catalog::load(Some(data.path())).unwrap();
    let a = data.path().join("characters/a.toml");
    let v = c.validate_files(std::slice::from_ref(&a));
    assert_eq!(v.errors.len(), 1, "{:?}", v.errors);
    assert!(
        v.errors[0].to_string().contains("b.toml: neither file is used"),
        "{}",
        v.errors[0]
    );
}

#[cfg(unix)]
#[test]
fn devices_fifos_and_oversized_files_are_refused_before_reading() {
    let c = Catalog::bundled().unwrap();
    let v = c.validate_files(&[PathBuf::from("/dev/zero")]);
    assert_eq!(v.errors.len(), 1);
    assert!(
        v.errors[0].to_string().starts_with("/dev/zero:1:1: not a regular file"),
        "{}",
        v.errors[0]
    );
    let data = data_with("characters", &[("ok.toml", AUTHORED)]);
    let folder = data.path().join("characters");
    let made = std::process::Command::new("mkfifo")
        .arg(folder.join("pipe.toml"))
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::write(folder.join("big.toml"), vec![b'#'; MAX_FILE as usize + 1]).unwrap();
    // Reading the FIFO would block forever (no writer): it is refused before it is opened.
    let loaded = Catalog::load(Some(data.path())).unwrap();
    assert!(loaded.character("wren-en").is_some());
    let problems: Vec<String> = loaded.problems.iter().map(|d| d.to_string()).collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].ends_with("big.toml:1:1: larger than the 4 MiB allowed for a scale or character file"),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("pipe.toml:1:1: not a regular file"),
        "{problems:?}"
    );
    let v = c.validate_files(std::slice::from_ref(&folder));
    assert_eq!(v.errors.len(), 2);
}

#[test]
fn saving_writes_where_the_character_came_from_and_never_over_another_file() {
    let data = data_with("characters", &[("my-wren.toml", AUTHORED), ("other-en.toml", "id = ")]);
    let c = Catalog::load(Some(data.path())).unwrap();
    let mut wren = c.character("wren-en").unwrap().clone();
    let read = wren.clone();
    wren.description.push_str(" Edited.");
    let path = c.save_character(data.path(), &wren, Some(&read)).unwrap();
    assert_eq!(
        path,
        data.path().join("characters/my-wren.toml"),
        "no second file for one id"
    );
    assert!(!data.path().join("characters/wren-en.toml").exists());
    let before = std::fs::read(data.path().join("characters/other-en.toml")).unwrap();
    let other = Character {
        id: "other-en".into(),
        ..wren.clone()
    };
    let e = c.save_character(data.path(), &other, None).unwrap_err().to_string();
    assert!(
        e.contains("other-en.toml is there already and is not this character's file"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(data.path().join("characters/other-en.toml")).unwrap(),
        before
    );
    let twins = data_with("characters", &[("a.toml", AUTHORED), ("b.toml", AUTHORED)]);
    let c = Catalog::load(Some(twins.path())).unwrap();
    let e = c.save_character(twins.path(), &wren, Some(&read)).unwrap_err().to_string();
    assert!(e.starts_with("2 files hold the id \"wren-en\""), "{e}");
}

/// Ids are the same whatever their case: a new character never takes another's file, a bundled
/// one's included; and a file another program changed since it was read is not written over.
#[test]
fn a_save_never_replaces_another_character_or_a_change_made_since_the_read() {
    let data = data_with("characters", &[("my-wren.toml", AUTHORED)]);
    let c = Catalog::load(Some(data.path())).unwrap();
    let wren = c.character("wren-en").unwrap().clone();
    let before = std::fs::read(data.path().join("characters/my-wren.toml")).unwrap();
    for id in ["WREN-en", "wren-en", "Hermione-EN"] {
        let twin = Character {
            id: id.into(),
            description: "Someone else.".into(),
            ..wren.clone()
        };
        let e = c.save_character(data.path(), &twin, None).unwrap_err().to_string();
        assert!(e.contains(&format!("the id \"{id}\" is taken by the character")), "{e}");
        if id != "wren-en" {
            let e = c.save_character(data.path(), &twin, Some(&wren)).unwrap_err().to_string();
            assert!(e.contains("is taken by the character"), "an edit cannot change the case: {e}");
        }
    }
    assert_eq!(std::fs::read(data.path().join("characters/my-wren.toml")).unwrap(), before);
    assert!(!data.path().join("characters/Hermione-EN.toml").exists());

    // Another program adds a comment, which reads back the same: still its change, kept.
    let commented = format!("{}# kept by hand\n", String::from_utf8(before.clone()).unwrap());
    std::fs::write(data.path().join("characters/my-wren.toml"), &commented).unwrap();
    let e = c.save_character(data.path(), &wren, Some(&wren)).unwrap_err();
    assert!(matches!(e, SaveError::Changed(_)), "{e}");
    assert_eq!(std::fs::read_to_string(data.path().join("characters/my-wren.toml")).unwrap(), commented);

    // Another program adds a line while the character is being edited.
    let outside = format!("post_history_instructions = \"Stay brief.\"\n{}", String::from_utf8(before).unwrap());
    std::fs::write(data.path().join("characters/my-wren.toml"), &outside).unwrap();
    let mut edited = wren.clone();
    edited.name = "Wren B.".into();
    let e = c.save_character(data.path(), &edited, Some(&wren)).unwrap_err();
    assert!(matches!(e, SaveError::Changed(_)), "{e}");
    assert!(e.to_string().contains("my-wren.toml changed since it was read"), "{e}");
    assert_eq!(std::fs::read_to_string(data.path().join("characters/my-wren.toml")).unwrap(), outside);
    // Read again, the edit goes through.
    let c = Catalog::load(Some(data.path())).unwrap();
    let now = c.character("wren-en").unwrap().clone();
    assert_eq!(now.post_history, "Stay brief.");
    let edited = Character {
        name: "Wren B.".into(),
        ..now.clone()
    };
    c.save_character(data.path(), &edited, Some(&now)).unwrap();

    // Another program removes the file while the character is being edited: not written anew.
    let c = Catalog::load(Some(data.path())).unwrap();
    let now = c.character("wren-en").unwrap().clone();
    std::fs::remove_file(data.path().join("characters/my-wren.toml")).unwrap();
    let e = c.save_character(data.path(), &now, Some(&now)).unwrap_err();
    assert!(matches!(e, SaveError::Removed(_)), "{e}");
    assert!(e.to_string().contains("my-wren.toml was removed since it was read"), "{e}");
    assert!(!data.path().join("characters/my-wren.toml").exists());

    // The catalog read again meanwhile (the workbench looks every two seconds) no longer holds it:
    // said by id, not as `characters/wren-en.toml`, a file it never had; nor is that file written.
    let c = Catalog::load(Some(data.path())).unwrap();
    let e = c.save_character(data.path(), &now, Some(&now)).unwrap_err();
    assert!(matches!(e, SaveError::Gone(_)), "{e}");
    assert!(e.to_string().starts_with("character wren-en is no longer in the data folder"), "{e}");
    assert!(!data.path().join("characters/wren-en.toml").exists());
}

#[test]
fn the_version_follows_what_the_agent_is_given() {
    let c = Catalog::bundled().unwrap();
    let h = c.character("hermione-en").unwrap().clone();
    let v = h.version(&[]);
    assert_eq!(v.len(), 64);
    assert!(v.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    let mut renamed = h.clone();
    renamed.name = "H. Granger".into();
    renamed.labels.target.clear();
    assert_eq!(renamed.version(&[]), v, "names and labels do not change it");
    let mut edited = h.clone();
    edited.description.push('!');
    assert_ne!(edited.version(&[]), v);
    assert_ne!(h.version(&["Harry:「Hi」".into()]), v);
    let mut asked_by_ron = h.clone();
    asked_by_ron.experimenter = "Ron".into();
    assert_ne!(asked_by_ron.version(&[]), v);
}

#[test]
fn a_layout_is_kept_but_for_the_keys_that_changed() {
    let old = "# a note\nid = \"a-en\"   # spaced\nname = 'A'\n\n[targets.BFI]\n# why these\nExtraversion = \"H\"\nOpenness = 2.0\n";
    let new = "id = \"a-en\"\nname = \"A\"\n\n[targets.BFI]\nExtraversion = \"L\"\n";
    let kept = super::keep_layout(old, new).unwrap();
    assert_eq!(
        kept,
        "# a note\nid = \"a-en\"   # spaced\nname = 'A'\n\n[targets.BFI]\n# why these\nExtraversion = \"L\"\n"
    );
    // What does not parse is not merged.
    assert_eq!(super::keep_layout("id = ", new), None);
}

/// A user scale that replaces a bundled one: the bundled characters' labels on it keep their
/// meaning only if it keeps the range and the dimensions. GSE made 1–9 leaves them out (every
/// character's, also one whose label types happen to fit the new range), and so do 16
/// Personalities' poles swapped; it is said once, at the user's file; the other scales' labels stay,
/// and a replacement that changes only wording keeps them.
#[test]
fn bundled_labels_on_a_users_replacement_scale_that_changes_their_meaning_are_left_out_and_said() {
    let gse = include_str!("../../assets/scales/GSE.toml");
    let nine = gse.replace("range = [1, 4]", "range = [1, 9]").replace(
        "[\"Not at all true\", \"Hardly true\", \"Moderately true\", \"Exactly true\"]",
        "[\"1\", \"2\", \"3\", \"4\", \"5\", \"6\", \"7\", \"8\", \"9\"]",
    );
    let nine = nine.replace(
        "[\"完全不符合\", \"几乎不符合\", \"大体符合\", \"完全符合\"]",
        "[\"1\", \"2\", \"3\", \"4\", \"5\", \"6\", \"7\", \"8\", \"9\"]",
    );
    assert!(nine.contains("range = [1, 9]") && nine.contains("\"9\"]"), "the test changes the range");
    let bundled = Catalog::bundled().unwrap();
    let had = bundled.character("hermione-en").unwrap();
    assert!(!had.labels.annotation["GSE"].is_empty(), "Hermione has GSE labels");

    let data = data_with("scales", &[("GSE9.toml", &nine)]);
    let c = Catalog::load(Some(data.path())).unwrap();
    for entry in c.characters.iter().filter(|e| e.origin == Origin::Bundled) {
        for source in LabelSource::ALL {
            assert!(entry.value.labels.source(source).get("GSE").is_none(), "{}", entry.value.id);
        }
    }
    let hermione = c.character("hermione-en").unwrap();
    assert_eq!(hermione.labels.annotation.get("BFI"), had.labels.annotation.get("BFI"), "the rest stays");
    assert!(c.problems.is_empty(), "nothing was skipped: {:?}", c.problems);
    let said: Vec<String> = c.notes.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 1, "once: {said:?}");
    assert!(said[0].contains("GSE9.toml:1:1: scale GSE changes the range ([1, 4] to [1, 9])"), "{said:?}");
    assert!(said[0].contains("the bundled characters' labels on it are left out ("), "{said:?}");

    // 16 Personalities with its first dimension's poles swapped: a % of E would be read as one of I.
    let p16 = include_str!("../../assets/scales/16Personalities.toml");
    let swapped = p16.replacen("poles = [\"E\", \"I\"]", "poles = [\"I\", \"E\"]", 1);
    assert_ne!(swapped, p16, "the test swaps the poles");
    let data = data_with("scales", &[("16p.toml", &swapped)]);
    let c = Catalog::load(Some(data.path())).unwrap();
    assert!(!c.character("hermione-en").unwrap().labels.pdb.contains_key("16Personalities"));
    let said: Vec<String> = c.notes.iter().map(ToString::to_string).collect();
    assert!(said.iter().any(|p| p.contains("16p.toml:1:1: scale 16Personalities changes the poles or letters")), "{said:?}");

    // The same scale with only its name changed: every label keeps its meaning, nothing said.
    let renamed = gse.replacen("name = \"", "name = \"My ", 1);
    let data = data_with("scales", &[("GSE.toml", &renamed)]);
    let c = Catalog::load(Some(data.path())).unwrap();
    assert_eq!(c.character("hermione-en").unwrap().labels, had.labels);
    assert!(c.problems.is_empty() && c.notes.is_empty(), "{:?} {:?}", c.problems, c.notes);

    // Its id spelled in another case: the labels keep their meaning and are found under it.
    let lower = gse.replacen("id = \"GSE\"", "id = \"gse\"", 1);
    assert_ne!(lower, gse);
    let data = data_with("scales", &[("gse.toml", &lower)]);
    let c = Catalog::load(Some(data.path())).unwrap();
    let scale = c.scale("GSE").unwrap();
    assert_eq!(scale.id, "gse");
    let hermione = c.character("hermione-en").unwrap();
    assert_eq!(hermione.labels.annotation.get("gse"), had.labels.annotation.get("GSE"));
    assert!(c.notes.is_empty(), "{:?}", c.notes);
}

/// An edit of the user's file that overrides a bundled character, the file broken since: the bundled
/// one stands in, but the refusal says the edited file is gone, not that the character is bundled.
#[test]
fn an_override_broken_during_its_edit_is_said_gone() {
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("characters")).unwrap();
    let bundled = Catalog::load(None).unwrap().character("hermione-en").unwrap().clone();
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/characters/hermione-en.toml"))
        .unwrap()
        .replacen("name = \"", "name = \"Mine: ", 1);
    let file = data.path().join("characters/hermione-en.toml");
    std::fs::write(&file, &text).unwrap();
    let now = Catalog::load(Some(data.path())).unwrap().character("hermione-en").unwrap().clone();
    assert_ne!(now, bundled);
    std::fs::write(&file, format!("{text}x = [\n")).unwrap();
    let c = Catalog::load(Some(data.path())).unwrap();
    let e = c.save_character(data.path(), &now, Some(&now)).unwrap_err();
    assert!(matches!(e, SaveError::Gone(_)), "{e}");
    // Editing the bundled one itself is still refused as bundled.
    let e = c.save_character(data.path(), &bundled, Some(&bundled)).unwrap_err();
    assert!(matches!(e, SaveError::Bundled(_)), "{e}");
}
