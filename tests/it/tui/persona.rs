//! The persona screen: a character written from scratch (id, name, prompt, targets) is saved as the
//! usual character file and reads back with its targets; a bundled character is read-only and is
//! edited as a copy; a probe is the setup's run narrowed to the character.

use std::sync::Arc;

use incharacter::catalog::Catalog;
use incharacter::domain::character::{Label, LabelType};
use incharacter::tui::app::{Action, App, Effect, NotSaved, Screen};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{app, key, keys, render, sample, snap};

fn ctrl(app: &mut App, c: char) -> Vec<Effect> {
    app.update(Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)))
}

fn clear(app: &mut App, n: usize) {
    for _ in 0..n {
        key(app, KeyCode::Backspace);
    }
}

/// What the driver does with a save: writes the files into `data` and loads the catalog again.
fn saved(app: &mut App, effects: Vec<Effect>, data: &std::path::Path) {
    let saved = save(app, effects, data);
    if let Err((e, _)) = &saved {
        panic!("not saved: {e}");
    }
    app.update(Action::Saved(saved));
}

/// The driver's save of the one effect `effects` hold: the id saved and the catalog then, or why not.
fn save(app: &App, effects: Vec<Effect>, data: &std::path::Path) -> Result<(String, Arc<Catalog>), NotSaved> {
    let [
        Effect::SaveCharacter {
            character,
            was,
            copy_of,
        },
    ] = effects.as_slice()
    else {
        panic!("expected a save, got {effects:?}");
    };
    incharacter::tui::save_character(&app.catalog, data, character, was.as_deref(), copy_of.as_deref())
        .map(|catalog| (character.id.clone(), catalog))
}

/// The workbench once the embedded model is fetched: a probe can start.
fn fetched() -> App {
    let mut app = app();
    app.update(Action::Fetched(Ok(
        "/home/user/.local/share/incharacter/models/smollm2-135m/model.gguf".into(),
    )));
    app
}

/// Puts the persona list's cursor on character `id`.
fn on(app: &mut App, id: &str) {
    app.persona.cursor = incharacter::tui::screens::persona::listed(&app.catalog)
        .iter()
        .position(|e| e.value.id == id)
        .unwrap();
}

#[test]
fn a_character_written_here_is_saved_with_its_targets() {
    let data = tempfile::tempdir().unwrap();
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    assert_eq!(app.screen, Screen::Persona);
    snap("persona_browse", &app);

    keys(&mut app, "a");
    key(&mut app, KeyCode::BackTab);
    clear(&mut app, 30);
    keys(&mut app, "wren-en");
    key(&mut app, KeyCode::Tab);
    clear(&mut app, 30);
    keys(&mut app, "Wren");
    for _ in 0..4 {
        key(&mut app, KeyCode::Tab);
    }
    keys(&mut app, "You are Wren, a quiet lighthouse keeper.");
    key(&mut app, KeyCode::Tab);
    // Extraversion L, Neuroticism 2.5 (typed), Conscientiousness H; 9 is out of range: no target.
    keys(&mut app, "l");
    key(&mut app, KeyCode::Down);
    keys(&mut app, "2.5");
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Down);
    keys(&mut app, "h");
    key(&mut app, KeyCode::Down);
    keys(&mut app, "9");
    key(&mut app, KeyCode::Enter);
    assert!(
        app.flash
            .as_deref()
            .is_some_and(|f| f.contains("target 9 is outside [1, 5]")),
        "said, not dropped: {:?}",
        app.flash
    );
    snap("persona_edit", &app);

    let effects = ctrl(&mut app, 's');
    saved(&mut app, effects, data.path());
    assert!(app.persona.draft.is_none());
    assert_eq!(app.flash.as_deref(), Some("saved wren-en"));
    let text = std::fs::read_to_string(data.path().join("characters/wren-en.toml")).unwrap();
    let wren = app.catalog.character("wren-en").unwrap();
    assert_eq!(wren.description, "You are Wren, a quiet lighthouse keeper.");
    let bfi = &wren.labels.target["BFI"];
    assert_eq!(
        bfi["Extraversion"],
        Label {
            score: None,
            kind: LabelType::L
        }
    );
    assert_eq!(
        bfi["Neuroticism"],
        Label {
            score: Some(2.5),
            kind: LabelType::L
        }
    );
    assert_eq!(bfi["Conscientiousness"].kind, LabelType::H);
    assert!(!bfi.contains_key("Agreeableness"), "{text}");
    // The list shows the user's characters first, with the cursor on the one saved.
    assert_eq!(app.persona.cursor, 0);
    assert!(render(&app, (120, 40)).contains("✎ wren-en"));
}

#[test]
fn a_bundled_character_is_read_only_and_duplicated_to_edit() {
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hermione-en");
    key(&mut app, KeyCode::Enter);
    assert!(app.persona.draft.is_none());
    assert!(
        app.flash.as_deref().unwrap().contains("bundled and read-only"),
        "{:?}",
        app.flash
    );
    keys(&mut app, "d");
    let draft = app.persona.draft.as_ref().unwrap();
    assert_eq!(draft.id, "hermione-en-copy");
    let copy = draft.character();
    assert_eq!(copy.reference_id, None);
    // Its answers speak of Hermione as hers do: judge prompts mask the same names (and Ron's copy,
    // whose name is not among his aliases, masks his name too).
    let original = app.catalog.character("hermione-en").unwrap();
    assert_eq!(copy.aliases, original.aliases, "{:?}", copy.aliases);
    assert!(copy.aliases.contains(&original.name));
    assert_eq!(
        copy.description,
        app.catalog.character("hermione-en").unwrap().description
    );
    // While a character is edited `?` is text: the key bar offers f1 for help (shown once the
    // editing hint has left the status line).
    app.flash = None;
    let screen = render(&app, (120, 40));
    assert!(screen.contains(" f1  help"), "{screen}");
    // Escape asks first (a copy is unsaved until saved); a second leaves without saving.
    key(&mut app, KeyCode::Esc);
    assert!(app.persona.draft.is_some());
    assert!(
        app.flash
            .as_deref()
            .unwrap_or_default()
            .contains("esc again leaves without saving")
    );
    key(&mut app, KeyCode::Esc);
    assert!(app.persona.draft.is_none());
    assert!(render(&app, (120, 40)).contains(" ?  help"));
}

#[test]
fn a_probe_is_the_setups_run_narrowed_to_the_character() {
    let mut app = fetched();
    app.setup.characters = ["zhongli-zh".to_string()].into();
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hermione-en");
    let effects = ctrl(&mut app, 'r');
    let Some(Effect::StartRun { plan, name }) = effects.first() else {
        panic!("{effects:?}")
    };
    let name = name.as_deref().unwrap_or_default();
    assert!(
        name.starts_with("probe Hermione Granger"),
        "named after what it measures: {name}"
    );
    assert_eq!(plan.characters, ["hermione-en"]);
    assert_eq!(plan.scales, ["BFI"], "the targets' scale when the setup has none");
    assert_eq!(app.screen, Screen::Live);
    assert_eq!(app.persona.probe.as_deref(), Some("hermione-en"));
}

/// A probe runs on the scale of the character's targets, whatever scale the targets pane was last
/// left on for another character.
#[test]
fn a_probe_runs_on_the_scale_of_the_characters_targets() {
    let data = tempfile::tempdir().unwrap();
    let mut app = fetched();
    app.catalog = with_targets(data.path());
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hermione-en");
    key(&mut app, KeyCode::Right);
    key(&mut app, KeyCode::Right);
    let effects = ctrl(&mut app, 'r');
    let Some(Effect::StartRun { plan, .. }) = effects.first() else {
        panic!("{effects:?}")
    };
    assert_eq!(plan.scales, ["BFI"]);
}

const BFI_1: &str = "20261129-233202-bfi-on-the-local-model-e80e";
const BFI_2: &str = "20261130-231918-bfi-and-16p-on-the-local-model-248f";

/// A catalog where Hermione carries BFI targets (a user file over the bundled one).
fn with_targets(data: &std::path::Path) -> Arc<Catalog> {
    let mut hermione = Catalog::load(None).unwrap().character("hermione-en").unwrap().clone();
    let bfi = hermione.labels.target.entry("BFI".into()).or_default();
    bfi.insert(
        "Extraversion".into(),
        Label {
            score: None,
            kind: LabelType::L,
        },
    );
    bfi.insert(
        "Openness".into(),
        Label {
            score: Some(4.5),
            kind: LabelType::H,
        },
    );
    std::fs::create_dir_all(data.join("characters")).unwrap();
    std::fs::write(data.join("characters/hermione-en.toml"), hermione.to_toml()).unwrap();
    Arc::new(Catalog::load(Some(data)).unwrap())
}

#[test]
fn a_finished_probe_shows_before_and_after_and_the_answers_that_moved_a_dimension() {
    let data = tempfile::tempdir().unwrap();
    let mut app = fetched();
    app.catalog = with_targets(data.path());
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hermione-en");
    let effects = ctrl(&mut app, 'r');
    let Some(Effect::StartRun { plan, .. }) = effects.first() else {
        panic!("{effects:?}")
    };
    // The run streams (the driver's part); when it ends, the app asks for the before/after.
    app.run.session.id = BFI_2.into();
    app.run.session.plan = Some(plan.clone());
    let effects = app.update(Action::RunEnded(Ok(())));
    assert_eq!(
        effects,
        [
            Effect::ListSessions,
            Effect::ProbeDiff {
                character: "hermione-en".into(),
                session: BFI_2.into()
            }
        ]
    );
    assert_eq!(app.persona.probe, None, "asked once");

    // What the driver finds: the sample before it measured Hermione on BFI too.
    let diff = incharacter::analysis::diff::diff(
        (BFI_1, &sample(BFI_1)),
        (BFI_2, &sample(BFI_2)),
        &app.catalog,
        Some("hermione-en"),
    )
    .unwrap();
    // The samples predate character versions: here the character was edited between the two, and
    // the view says so in words (not "edited since").
    let mut diff = diff;
    diff.a.version = Some("3fa2c1e9b0d1".repeat(5));
    diff.b.version = Some("9b1e0d2a77c1".repeat(5));
    let versions = "the character was edited between the two sessions";
    let probed = incharacter::tui::screens::persona::Probed::new(diff, false);
    app.update(Action::Probed(Box::new(Ok(probed))));
    assert_eq!(app.screen, Screen::Persona, "from Live, where the probe streamed");
    assert!(render(&app, (120, 40)).contains(versions), "{versions}");
    assert!(
        app.flash
            .as_deref()
            .unwrap()
            .starts_with("hermione-en: 3 of 10 dimensions on target now, 2 before; 3 closer, 2 further"),
        "{:?}",
        app.flash
    );
    let screen = render(&app, (120, 40));
    assert!(screen.contains(BFI_1) && screen.contains(BFI_2), "{screen}");
    assert!(
        screen.contains("target L") && screen.contains("target 4.50"),
        "{screen}"
    );
    assert!(
        screen.contains("label "),
        "dimensions without a target are compared with the label"
    );
    assert!(
        screen.contains("✓ on target") && screen.contains("✗ "),
        "each after says if it is on target: {screen}"
    );
    snap("persona_before_after", &app);

    // Enter on Openness (the fifth dimension): its answers, old beside new.
    for _ in 0..4 {
        key(&mut app, KeyCode::Down);
    }
    key(&mut app, KeyCode::Enter);
    let screen = render(&app, (120, 40));
    assert!(screen.contains("Openness · BFI · er-batch: before"), "{screen}");
    assert!(screen.contains("before") && screen.contains(" │ "), "{screen}");
    snap("persona_before_after_answers", &app);

    // esc: back to the bars, then closed (the character's details); b shows it again.
    key(&mut app, KeyCode::Esc);
    assert!(render(&app, (120, 40)).contains("Before / after the probe"));
    key(&mut app, KeyCode::Esc);
    let screen = render(&app, (120, 40));
    assert!(
        !screen.contains("Before / after the probe") && screen.contains("experimenter"),
        "{screen}"
    );
    keys(&mut app, "b");
    assert!(render(&app, (120, 40)).contains("Before / after the probe"));
}

#[test]
fn a_probe_that_did_not_finish_asks_for_no_before_after() {
    let mut app = fetched();
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hermione-en");
    let effects = ctrl(&mut app, 'r');
    let Some(Effect::StartRun { plan, .. }) = effects.first() else {
        panic!("{effects:?}")
    };
    app.run.session.plan = Some(plan.clone());
    let effects = app.update(Action::RunEnded(Err("cancelled".into())));
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::ProbeDiff { .. })),
        "{effects:?}"
    );
    assert_eq!(app.persona.probe, None);
    keys(&mut app, "0b");
    assert_eq!(app.flash.as_deref(), Some("no probe yet: ctrl-r probes the character"));
}

#[test]
fn the_details_list_a_characters_versions_with_the_sessions_that_measured_them() {
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hermione-en");
    assert!(
        render(&app, (120, 40)).contains("(reading…)"),
        "until the driver has read them"
    );
    let owned = |v: &str, s: &[&str]| (v.to_string(), s.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let now = "9b1e0d2a77c1ffffffffffffffff".to_string();
    let versions = incharacter::tui::screens::persona::Versions {
        index: [(
            "hermione-en".to_string(),
            vec![
                owned("3fa2c1e9b0d1eeee", &["20261201-100000-a"]),
                owned(&now, &["20261202-090000-b", "20261202-093000-c"]),
            ],
        )]
        .into(),
        current: [("hermione-en".to_string(), now.clone())].into(),
        greetings: Default::default(),
    };
    app.update(Action::Versions(Box::new(versions)));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("9b1e0d2a77c1 (measured)"), "{screen}");
    assert!(
        screen.contains("9b1e0d2a77c1 ◀ now  20261202-093000-c, 20261202-090000-b"),
        "{screen}"
    );
    assert!(screen.contains("3fa2c1e9b0d1        20261201-100000-a"), "{screen}");
    snap("persona_versions", &app);
}

#[test]
fn the_details_show_the_prompt_with_its_line_breaks() {
    let data = tempfile::tempdir().unwrap();
    let mut wren = Catalog::load(None).unwrap().character("hermione-en").unwrap().clone();
    wren.id = "wren-en".into();
    wren.reference_id = None;
    wren.description = "You are Wren.\n[Wren's Personality= quiet]\n<START>\nUser: Hello".into();
    std::fs::create_dir_all(data.path().join("characters")).unwrap();
    std::fs::write(data.path().join("characters/wren-en.toml"), wren.to_toml()).unwrap();
    let mut app = app();
    app.catalog = Arc::new(Catalog::load(Some(data.path())).unwrap());
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "wren-en");
    let screen = render(&app, (120, 40));
    assert!(!screen.contains("You are Wren.[Wren"), "{screen}");
    for line in ["You are Wren.", "[Wren's Personality= quiet]", "<START>", "User: Hello"] {
        assert!(screen.contains(line), "{line}: {screen}");
    }
    let at = |text: &str| screen.lines().position(|l| l.contains(text)).unwrap();
    assert_eq!(at("[Wren's Personality"), at("You are Wren.") + 1, "{screen}");
}

/// Pasted text goes whole into the field being edited: a tab or a newline in it is text, never a key
/// (a tab had moved the focus and the rest of the paste had set targets); escape sequences are left
/// out; a one-line field takes newlines as spaces.
#[test]
fn pasted_text_is_text_in_the_field_not_keys() {
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    keys(&mut app, "a");
    clear(&mut app, 30);
    app.update(Action::Paste("Wren\nof the\tcoast\u{1b}[2J".into()));
    for _ in 0..4 {
        key(&mut app, KeyCode::Tab);
    }
    let targets_before = app.persona.draft.as_ref().unwrap().targets.clone();
    app.update(Action::Paste(
        "She likes\tlists: high, low, 4 or 5.\r\nSecond line\u{1b}[31m red\u{1b}]0;title\u{7}.".into(),
    ));
    let draft = app.persona.draft.as_ref().unwrap();
    assert_eq!(draft.name, "Wren of the coast");
    assert_eq!(
        draft.prompt.lines().join("\n"),
        "She likes\tlists: high, low, 4 or 5.\nSecond line red.",
        "whole sequences go, not only their ESC"
    );
    assert_eq!(draft.targets, targets_before, "no target was set by the paste");
    // A long paste is one action, not thousands of keys.
    app.update(Action::Paste("word ".repeat(20_000)));
    assert!(app.persona.draft.as_ref().unwrap().prompt.lines().join("\n").len() > 100_000);
}

/// A long value in a field shows its end, where one types, measured in columns: a CJK name scrolls
/// as an ASCII one does, and what is typed at its end is in view.
#[test]
fn the_end_of_a_long_wide_value_is_in_view_as_it_is_typed() {
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    keys(&mut app, "a");
    clear(&mut app, 30);
    app.update(Action::Paste("赫敏".repeat(24)));
    keys(&mut app, "ABC");
    let screen = render(&app, (80, 24));
    let line = screen
        .lines()
        .find(|l| l.contains("name "))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(line.contains("…") && line.contains("ABC▏"), "{line}");
    assert!(unicode_width::UnicodeWidthStr::width(line) <= 80, "{line}");
}

/// Unsaved edits are not lost to one key: esc and quit ask first (any other key takes the question
/// back), an untouched character is left at once; a save that fails leaves the draft as it was.
#[test]
fn unsaved_edits_are_asked_about_before_they_are_left() {
    let data = tempfile::tempdir().unwrap();
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    keys(&mut app, "a");
    clear(&mut app, 30);
    keys(&mut app, "Wren");
    // Quit asks; typing takes the question back; asked twice in a row, it quits.
    assert!(ctrl(&mut app, 'c').is_empty(), "the first quit asks");
    assert!(app.flash.as_deref().unwrap_or_default().contains("not saved"));
    keys(&mut app, "s");
    assert!(ctrl(&mut app, 'c').is_empty(), "asked again after a key");
    assert_eq!(ctrl(&mut app, 'c'), [Effect::Quit]);

    // A save that fails keeps the draft new (its id still editable).
    let mut app = app_with_new();
    let effects = ctrl(&mut app, 's');
    assert!(
        matches!(effects.as_slice(), [Effect::SaveCharacter { .. }]),
        "{effects:?}"
    );
    // Keys before the save answers (a second ctrl-s, typing) are held off, not saved twice or lost.
    assert_eq!(ctrl(&mut app, 's'), []);
    keys(&mut app, "zz");
    assert_eq!(app.flash.as_deref(), Some("saving: wait for it"));
    app.update(Action::Saved(Err(("cannot write: Permission denied".into(), None))));
    assert!(!app.persona.draft.as_ref().unwrap().name.contains("zz"));
    let draft = app.persona.draft.as_ref().expect("still editing");
    assert!(draft.new && draft.unsaved(), "the failed save left it new");
    // Saved, then opened again untouched: esc leaves at once.
    let effects = ctrl(&mut app, 's');
    saved(&mut app, effects, data.path());
    on(&mut app, "wren-en");
    key(&mut app, KeyCode::Enter);
    assert!(!app.persona.draft.as_ref().unwrap().unsaved());
    key(&mut app, KeyCode::Esc);
    assert!(app.persona.draft.is_none());
}

/// A new character "wren-en" with a prompt, ready to save.
fn app_with_new() -> App {
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    keys(&mut app, "a");
    key(&mut app, KeyCode::BackTab);
    clear(&mut app, 30);
    keys(&mut app, "wren-en");
    key(&mut app, KeyCode::Tab);
    clear(&mut app, 30);
    keys(&mut app, "Wren");
    for _ in 0..4 {
        key(&mut app, KeyCode::Tab);
    }
    keys(&mut app, "You are Wren, a quiet lighthouse keeper.");
    app
}

/// A user's character, `wren-en`, with memories and a kept card, in the data dir `data`; the
/// workbench on that catalog, on the persona screen with the cursor on it.
fn with_wren(data: &std::path::Path) -> App {
    let folder = data.join("characters");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("wren-en.toml"),
        "id = \"wren-en\"\nname = \"Wren\"\nlanguage = \"en\"\nexperimenter = \"Sam\"\ncatchphrases = [\"Yes | no | maybe\", \"Onward!\"]\ndescription = \"You are Wren, a lighthouse keeper.\"\n",
    )
    .unwrap();
    std::fs::write(
        folder.join("wren-en.memories.json"),
        r#"["Sam:「Hello?」\nWren:「Mind the steps.」"]"#,
    )
    .unwrap();
    std::fs::write(folder.join("wren-en.card.json"), r#"{"name": "Wren"}"#).unwrap();
    let mut app = app();
    app.catalog = Arc::new(Catalog::load(Some(data)).unwrap());
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "wren-en");
    app
}

/// Ids are the same whatever their case: a new character whose id is another's in other letters
/// (a user's, a bundled one's) is refused, and the other's file is left as it was.
#[test]
fn a_new_character_never_takes_an_id_another_has_in_other_letters() {
    let data = tempfile::tempdir().unwrap();
    let before = {
        with_wren(data.path());
        std::fs::read(data.path().join("characters/wren-en.toml")).unwrap()
    };
    for id in ["WREN-en", "Hermione-EN"] {
        let mut app = with_wren(data.path());
        keys(&mut app, "a");
        key(&mut app, KeyCode::BackTab);
        clear(&mut app, 30);
        keys(&mut app, id);
        for _ in 0..5 {
            key(&mut app, KeyCode::Tab);
        }
        keys(&mut app, "Overwritten prompt.");
        assert!(ctrl(&mut app, 's').is_empty(), "refused before it is written: {id}");
        let flash = app.flash.clone().unwrap_or_default();
        assert!(
            flash.contains("exists already") && flash.contains("whatever their case"),
            "{flash}"
        );
        // The driver refuses it too, whatever the screen let through.
        let mut c = app.persona.draft.as_ref().unwrap().character();
        c.id = id.into();
        let e = incharacter::tui::save_character(&app.catalog, data.path(), &c, None, None)
            .unwrap_err()
            .0;
        assert!(e.contains("is taken by the character"), "{e}");
    }
    assert_eq!(
        std::fs::read(data.path().join("characters/wren-en.toml")).unwrap(),
        before
    );
    assert!(!data.path().join("characters/Hermione-EN.toml").exists());
}

/// A copy is the same agent under another id: its memories and kept card go with it.
#[test]
fn a_copy_takes_the_characters_memories_and_card_with_it() {
    let data = tempfile::tempdir().unwrap();
    let mut app = with_wren(data.path());
    keys(&mut app, "d");
    let effects = ctrl(&mut app, 's');
    saved(&mut app, effects, data.path());
    let folder = data.path().join("characters");
    for (from, to) in [
        ("wren-en.memories.json", "wren-en-copy.memories.json"),
        ("wren-en.card.json", "wren-en-copy.card.json"),
    ] {
        assert_eq!(
            std::fs::read(folder.join(to)).unwrap(),
            std::fs::read(folder.join(from)).unwrap(),
            "{to}"
        );
    }
    let catalog = Catalog::load(Some(data.path())).unwrap();
    let memories = |id: &str| incharacter::rpa::memories::chunks(data.path(), id).unwrap().unwrap();
    assert_eq!(memories("wren-en-copy"), memories("wren-en"));
    let (original, copy) = (
        catalog.character("wren-en").unwrap(),
        catalog.character("wren-en-copy").unwrap(),
    );
    assert_eq!(
        copy.version(&memories("wren-en-copy")),
        original.version(&memories("wren-en"))
    );

    // A second copy under an id whose memories are there already writes nothing.
    std::fs::write(folder.join("wren-en-copy-2.memories.json"), "[]").unwrap();
    let mut app = with_wren(data.path());
    keys(&mut app, "d");
    assert_eq!(app.persona.draft.as_ref().unwrap().id, "wren-en-copy-2");
    let effects = ctrl(&mut app, 's');
    let e = save(&app, effects, data.path()).unwrap_err().0;
    assert!(e.contains("wren-en-copy-2.memories.json is there already"), "{e}");
    assert!(!folder.join("wren-en-copy-2.toml").exists());
    assert!(!folder.join("wren-en-copy-2.card.json").exists());
}

/// What another program wrote to a character's file since the workbench read it is never saved
/// over: the save is refused, the draft stays, and the list shows the file as it is.
#[test]
fn a_save_never_undoes_what_another_program_wrote_since_the_read() {
    let data = tempfile::tempdir().unwrap();
    let mut app = with_wren(data.path());
    key(&mut app, KeyCode::Enter);
    assert!(app.persona.draft.is_some());
    let file = data.path().join("characters/wren-en.toml");
    let outside = format!(
        "post_history_instructions = \"Stay brief.\"\n{}",
        std::fs::read_to_string(&file).unwrap()
    );
    std::fs::write(&file, &outside).unwrap();
    keys(&mut app, "y");
    let effects = ctrl(&mut app, 's');
    let refused = save(&app, effects, data.path());
    let Err((e, Some(_))) = &refused else {
        panic!("refused with the catalog read again");
    };
    assert!(e.contains("wren-en.toml changed since it was read"), "{e}");
    app.update(Action::Saved(refused));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), outside);
    assert!(
        app.persona.draft.as_ref().is_some_and(|d| d.name == "Wreny"),
        "the edit stays"
    );
    assert_eq!(app.catalog.character("wren-en").unwrap().post_history, "Stay brief.");
    assert!(app.flash.as_deref().unwrap().starts_with("not saved: "));
    // Left and begun again, the edit keeps the other program's line.
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Enter);
    keys(&mut app, "y");
    let effects = ctrl(&mut app, 's');
    saved(&mut app, effects, data.path());
    let now = Catalog::load(Some(data.path()))
        .unwrap()
        .character("wren-en")
        .unwrap()
        .clone();
    assert_eq!((now.name.as_str(), now.post_history.as_str()), ("Wreny", "Stay brief."));
    assert_eq!(
        now.catchphrases,
        ["Yes | no | maybe", "Onward!"],
        "a catchphrase with a | stays one"
    );
}

/// A probe (or any start) while a run goes would stop it: asked first, it starts only when asked
/// again with the next key; meanwhile the run, its view and the probe going are left as they are.
#[test]
fn a_start_while_a_run_goes_is_asked_about_first() {
    let mut app = fetched();
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hermione-en");
    let effects = ctrl(&mut app, 'r');
    assert!(matches!(effects.first(), Some(Effect::StartRun { .. })), "{effects:?}");
    assert!(app.live.running);
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "sheldon-en");
    let effects = ctrl(&mut app, 'r');
    assert!(effects.is_empty(), "held back: {effects:?}");
    assert!(
        app.flash
            .as_deref()
            .unwrap_or_default()
            .contains("is going: the same again stops it"),
        "{:?}",
        app.flash
    );
    assert_eq!(app.screen, Screen::Persona, "the screen stays");
    assert_eq!(
        app.persona.probe.as_deref(),
        Some("hermione-en"),
        "the probe going is still the one"
    );
    // Another key takes the question back; asked again at once, it starts.
    key(&mut app, KeyCode::Down);
    on(&mut app, "sheldon-en");
    assert!(ctrl(&mut app, 'r').is_empty(), "asked again after another key");
    let effects = ctrl(&mut app, 'r');
    let Some(Effect::StartRun { plan, .. }) = effects.first() else {
        panic!("{effects:?}")
    };
    assert_eq!(plan.characters, ["sheldon-en"]);
    assert_eq!(app.persona.probe.as_deref(), Some("sheldon-en"));
    // What a screen sets up for its run is taken back with the start held: the observer shown
    // stays the one picked.
    key(&mut app, KeyCode::Char('7'));
    app.observers.observer = 2;
    assert!(key(&mut app, KeyCode::Char('s')).is_empty(), "held back");
    assert!(
        app.flash.as_deref().unwrap_or_default().contains("is going"),
        "{:?}",
        app.flash
    );
    assert_eq!(app.observers.observer, 2, "the view is as it was");
    // Once the run has ended, a start is not asked about.
    app.update(Action::RunEnded(Err("cancelled".into())));
    key(&mut app, KeyCode::Char('0'));
    assert!(matches!(ctrl(&mut app, 'r').first(), Some(Effect::StartRun { .. })));
}

/// ctrl-c quits wherever one types, the prompt's editor too (asked first, the edits unsaved).
#[test]
fn quit_is_quit_in_the_prompt_too() {
    let mut app = app_with_new();
    assert_eq!(
        app.persona.draft.as_ref().unwrap().field,
        incharacter::tui::screens::persona::Field::Prompt
    );
    assert!(ctrl(&mut app, 'c').is_empty(), "the first quit asks");
    assert!(
        app.flash.as_deref().unwrap_or_default().contains("not saved"),
        "{:?}",
        app.flash
    );
    assert_eq!(ctrl(&mut app, 'c'), [Effect::Quit]);
}

/// The help while a character is edited lists the editor's keys, not the list's.
#[test]
fn the_help_in_the_editor_lists_the_editors_keys() {
    let mut app = app_with_new();
    key(&mut app, KeyCode::F(1));
    let screen = render(&app, (120, 40));
    for said in [
        "save the character",
        "the next or the previous field",
        "targets: the dimension's target is H or L",
    ] {
        assert!(screen.contains(said), "{said}: {screen}");
    }
    assert!(!screen.contains("probe"), "{screen}");
    assert!(app.persona.draft.is_some());
}

/// A scale with more dimensions than the targets pane has rows: the pane follows the cursor.
#[test]
fn the_targets_pane_follows_the_cursor_past_its_rows() {
    let mut app = app_with_new();
    key(&mut app, KeyCode::Tab);
    assert_eq!(
        app.persona.draft.as_ref().unwrap().field,
        incharacter::tui::screens::persona::Field::Targets
    );
    let cabin = app.catalog.scale("CABIN").unwrap().clone();
    for _ in 0..app.catalog.scales.len() {
        if render(&app, (120, 50)).contains("targets on CABIN") {
            break;
        }
        key(&mut app, KeyCode::Right);
    }
    for _ in 0..20 {
        key(&mut app, KeyCode::Down);
    }
    keys(&mut app, "h");
    let screen = render(&app, (120, 50));
    let at = &cabin.dimensions[20].name;
    assert!(screen.contains(at.as_str()), "{at}: {screen}");
    assert!(screen.contains(&format!(" of {}", cabin.dimensions.len())), "{screen}");
    assert!(
        !screen.contains(cabin.dimensions[0].name.as_str()),
        "scrolled past the first: {screen}"
    );
    let targets = app.persona.draft.as_ref().unwrap().targets["CABIN"].clone();
    assert_eq!(targets.keys().collect::<Vec<_>>(), [at]);
}

#[test]
fn a_copy_keeps_the_names_judge_prompts_mask_and_a_name_typed_is_masked_too() {
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "ron-en");
    keys(&mut app, "d");
    let ron = app.catalog.character("ron-en").unwrap().clone();
    let copy = app.persona.draft.as_ref().unwrap().character();
    let mut expected = ron.aliases.clone();
    expected.push(ron.name.clone());
    assert_eq!(copy.aliases, expected);
    // Renamed: the new name joins the names before it.
    let name_len = app.persona.draft.as_ref().unwrap().name.chars().count();
    clear(&mut app, name_len);
    keys(&mut app, "Ronnie");
    let renamed = app.persona.draft.as_ref().unwrap().character();
    assert_eq!(renamed.name, "Ronnie");
    assert!(renamed.aliases.contains(&ron.name));
    // Questions address the character by its first alias: "Ron" is not a word of "Ronnie".
    assert_eq!(renamed.first_alias(), "Ronnie", "{:?}", renamed.aliases);
    assert_eq!(renamed.aliases.iter().filter(|a| *a == "Ronnie").count(), 1);
    // A name the first alias still stands in keeps it first.
    clear(&mut app, "Ronnie".len());
    keys(&mut app, "Ron Bilius Weasley");
    let renamed = app.persona.draft.as_ref().unwrap().character();
    assert_eq!(renamed.first_alias(), ron.first_alias(), "{:?}", renamed.aliases);
    assert_eq!(renamed.aliases.last().map(String::as_str), Some("Ron Bilius Weasley"));
}

/// An edit of one field leaves every other field exactly as the file had it: catchphrases with
/// spaces or an empty one, a prompt ending in a newline, a name with spaces around it.
#[test]
fn fields_not_edited_are_saved_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let mut mine = Catalog::load(None).unwrap().character("hermione-en").unwrap().clone();
    mine.id = "odd-en".into();
    mine.reference_id = None;
    mine.catchphrases = vec!["ends with \\".into(), "  spaced  ".into(), String::new(), "c|d".into()];
    mine.description = "You are Odd.\n\nYou speak plainly.\n".into();
    mine.experimenter = " Tom ".into();
    let mut app = app();
    let path = dir.path().join("characters");
    std::fs::create_dir_all(&path).unwrap();
    std::fs::write(path.join("odd-en.toml"), mine.to_toml()).unwrap();
    app.catalog = Arc::new(Catalog::load(Some(dir.path())).unwrap());
    let loaded = app.catalog.character("odd-en").unwrap().clone();
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "odd-en");
    key(&mut app, KeyCode::Enter);
    assert!(!app.persona.draft.as_ref().unwrap().unsaved(), "opened, not edited");
    // Only the name changes.
    keys(&mut app, "x");
    let edited = app.persona.draft.as_ref().unwrap().character();
    assert_eq!(edited.name, format!("{}x", loaded.name));
    assert!(
        edited.aliases.contains(&loaded.name) && edited.aliases.contains(&edited.name),
        "{:?}",
        edited.aliases
    );
    assert_eq!(edited.catchphrases, loaded.catchphrases);
    assert_eq!(edited.description, loaded.description);
    assert_eq!(edited.experimenter, loaded.experimenter);
    // The prompt edited keeps its final newline.
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Tab);
    assert_eq!(
        app.persona.draft.as_ref().unwrap().field,
        incharacter::tui::screens::persona::Field::Prompt
    );
    keys(&mut app, "Z");
    let edited = app.persona.draft.as_ref().unwrap().character();
    assert_ne!(edited.description, loaded.description);
    assert!(edited.description.ends_with(".\n"), "{:?}", edited.description);
}

/// "esc again leaves" answered with another key: the question is taken back and the key is not
/// typed into the draft; ctrl-s, which the question offers, saves.
#[test]
fn a_key_that_takes_the_leave_question_back_is_not_typed() {
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hermione-en");
    keys(&mut app, "d");
    let before = app.persona.draft.as_ref().unwrap().character();
    key(&mut app, KeyCode::Esc);
    keys(&mut app, "a");
    let draft = app.persona.draft.as_ref().expect("still editing");
    assert_eq!(draft.character(), before, "the a was not typed");
    assert!(
        app.flash.as_deref().unwrap_or_default().contains("still editing"),
        "{:?}",
        app.flash
    );
    keys(&mut app, "a");
    assert_ne!(app.persona.draft.as_ref().unwrap().character(), before, "typed now");
    // The same after a quit asked about.
    let before = app.persona.draft.as_ref().unwrap().character();
    ctrl(&mut app, 'c');
    assert!(
        app.flash.as_deref().unwrap_or_default().contains("quit again"),
        "{:?}",
        app.flash
    );
    keys(&mut app, "b");
    assert_eq!(app.persona.draft.as_ref().unwrap().character(), before);
    // `q` is a letter where keys are typed: it too only takes the question back.
    ctrl(&mut app, 'c');
    keys(&mut app, "q");
    assert!(!app.quit);
    assert_eq!(app.persona.draft.as_ref().unwrap().character(), before);
    ctrl(&mut app, 'c');
    let effects = ctrl(&mut app, 's');
    assert!(
        matches!(effects.as_slice(), [Effect::SaveCharacter { .. }]),
        "{effects:?}"
    );
}

/// A hand-written character file saved from the editor keeps its author's comments, blank lines and
/// ways of writing values; only what was edited changes.
#[test]
fn a_save_keeps_the_files_comments_and_layout() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("characters");
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("hand-en.toml");
    let written = "# my note: keep this\n\
                   id = \"hand-en\"\n\
                   name = \"Hand\" # the short name\n\
                   aliases = [\"Hand\"]\n\
                   language = \"en\"\n\
                   experimenter = \"Tom\"\n\
                   \n\
                   # the prompt, in a long string\n\
                   description = \"\"\"\n\
                   You are Hand.\n\
                   \n\
                   You speak plainly. \\u00E9\"\"\"\n\
                   catchphrases = ['ends with \\', \"  spaced  \"]\n";
    std::fs::write(&file, written).unwrap();
    let mut app = app();
    app.catalog = Arc::new(Catalog::load(Some(dir.path())).unwrap());
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hand-en");
    key(&mut app, KeyCode::Enter);
    keys(&mut app, "y");
    let effects = ctrl(&mut app, 's');
    saved(&mut app, effects, dir.path());
    let now = std::fs::read_to_string(&file).unwrap();
    let expected = written
        .replace("name = \"Hand\" # the short name", "name = \"Handy\" # the short name")
        // The new name addresses the character first ("Hand" is not a word of it); the old stays.
        .replace("aliases = [\"Hand\"]", "aliases = [\"Handy\", \"Hand\"]");
    assert_eq!(now, expected);
    assert_eq!(app.catalog.character("hand-en").unwrap().name, "Handy");
}
