//! The persona screen: a character written from scratch (id, name, prompt, targets) is saved as the
//! usual character file and reads back with its targets; a bundled character is read-only and is
//! edited as a copy; a probe is the setup's run narrowed to the character.

use std::sync::Arc;

use incharacter::catalog::Catalog;
use incharacter::domain::character::{Label, LabelType};
use incharacter::tui::app::{Action, App, Effect, Screen};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{app, key, keys, render, snap};

fn ctrl(app: &mut App, c: char) -> Vec<Effect> {
    app.update(Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)))
}

fn clear(app: &mut App, n: usize) {
    for _ in 0..n {
        key(app, KeyCode::Backspace);
    }
}

/// What the driver does with a save: writes the file into `data` and loads the catalog again.
fn saved(app: &mut App, effects: Vec<Effect>, data: &std::path::Path) {
    let [Effect::SaveCharacter(c)] = effects.as_slice() else {
        panic!("expected a save, got {effects:?}");
    };
    app.catalog.save_character(data, c).unwrap();
    let catalog = Arc::new(Catalog::load(Some(data)).unwrap());
    app.update(Action::Saved(Ok((c.id.clone(), catalog))));
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
    assert_eq!(
        copy.description,
        app.catalog.character("hermione-en").unwrap().description
    );
    // Escape leaves without saving.
    key(&mut app, KeyCode::Esc);
    assert!(app.persona.draft.is_none());
}

#[test]
fn a_probe_is_the_setups_run_narrowed_to_the_character() {
    let mut app = app();
    app.setup.characters = ["zhongli-zh".to_string()].into();
    key(&mut app, KeyCode::Char('0'));
    on(&mut app, "hermione-en");
    let effects = ctrl(&mut app, 'r');
    let Some(Effect::StartRun { plan, .. }) = effects.first() else {
        panic!("{effects:?}")
    };
    assert_eq!(plan.characters, ["hermione-en"]);
    assert_eq!(plan.scales, ["BFI"], "the targets' scale when the setup has none");
    assert_eq!(app.screen, Screen::Live);
    assert_eq!(app.persona.probe.as_deref(), Some("hermione-en"));
}
