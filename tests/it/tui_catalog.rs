//! Character files written outside the workbench (an editor, `characters import`, another
//! workbench) while it runs: its own event loop reads the data folder again and every screen sees the
//! new catalog, with what changed said on the status line; a selection of a character that is gone
//! is forgotten.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use incharacter::catalog::Catalog;
use incharacter::config::Config;
use incharacter::session::Store;
use incharacter::tui::app::{Action, App, Screen};
use incharacter::tui::keys::Keymap;
use incharacter::tui::{event_loop, theme, ui};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event as CtEvent, KeyCode, KeyEvent, KeyModifiers};
use tokio::sync::mpsc;

/// The bundled Hermione as a user's file with id `id`.
fn character_file(id: &str, name: &str) -> String {
    let bundled =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/characters/hermione-en.toml"))
            .unwrap();
    let mut lines: Vec<String> = bundled.lines().map(str::to_string).collect();
    for line in &mut lines {
        if line.starts_with("id = ") {
            *line = format!("id = \"{id}\"");
        } else if line.starts_with("name = ") {
            *line = format!("name = \"{name}\"");
        }
    }
    lines.join("\n") + "\n"
}

/// The workbench on the data folder `data`, its catalog read from there.
fn app_on(data: &Path) -> App {
    let config = Config::defaults(&|_| None);
    let (themes, _) = theme::load_all(None);
    let catalog = Arc::new(Catalog::load(Some(data)).unwrap());
    App::new(catalog, &config, Some(data), Keymap::default(), themes, 0)
}

/// The catalog read again from `data`, as the look every two seconds does it: what the app said.
fn look(app: &mut App, data: &Path) -> String {
    app.flash = None;
    app.update(Action::CatalogReread(Arc::new(Catalog::load(Some(data)).unwrap())));
    app.flash.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_file_written_while_the_workbench_runs_is_read_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("characters")).unwrap();
    let gone = data.join("characters/gone-en.toml");
    std::fs::write(&gone, character_file("gone-en", "Gone")).unwrap();
    // An editor's lock link (Emacs' `.#name`) is no character file, nor a broken one.
    std::os::unix::fs::symlink("someone@host.1234:1700000000", data.join("characters/.#gone-en.toml")).unwrap();
    let config = Config::defaults(&|_| None);
    let catalog = Arc::new(Catalog::load(Some(&data)).unwrap());
    assert!(catalog.character("gone-en").is_some());
    assert!(catalog.problems.is_empty(), "{:?}", catalog.problems);
    let (themes, _) = theme::load_all(None);
    let mut app = App::new(catalog, &config, Some(&data), Keymap::default(), themes, 0);
    app.screen = Screen::Setup;
    app.setup.characters.insert("gone-en".into());
    let (keys, rx) = mpsc::unbounded_channel::<CtEvent>();
    let input = Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok(e), rx))
    }));
    let mut keys = Some(keys);
    let (mut written, mut seen) = (false, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let mut draw = |app: &App| -> anyhow::Result<()> {
        terminal.draw(|f| ui::render(f, app))?;
        if !written {
            // Written after the workbench read the folder: one added, one removed.
            written = true;
            std::fs::write(
                data.join("characters/added-en.toml"),
                character_file("added-en", "Added"),
            )?;
            std::fs::remove_file(&gone)?;
        } else if seen.is_none()
            && app
                .flash
                .as_deref()
                .is_some_and(|f| f.starts_with("data folder read again"))
        {
            seen = Some((
                app.flash.clone().unwrap_or_default(),
                app.catalog.character("added-en").is_some(),
                app.setup.characters.clone(),
            ));
        }
        // The new character's version comes with the folder read again, not at a later listing.
        if seen.is_some() && app.persona.versions.current.contains_key("added-en") {
            // The input ends: so does the loop.
            keys = None;
        }
        Ok(())
    };
    let store = Store::with_samples(&data, None);
    let run = event_loop(input, app, config.clone(), store, Vec::new(), &mut draw);
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the change is seen, and the new character's version")
        .unwrap();
    let (flash, added, selected) = seen.expect("the folder was read again");
    assert_eq!(flash, "data folder read again: added added-en; removed gone-en");
    assert!(added, "the app's catalog has the new character");
    assert!(
        selected.is_empty(),
        "the removed character is no longer selected: {selected:?}"
    );
}

/// Only a change is said: the catalog read again with the same characters says nothing.
#[test]
fn a_catalog_read_again_unchanged_says_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = app_on(dir.path());
    assert_eq!(look(&mut app, dir.path()), "");
}

/// A file caught half-written (or broken by an edit) is not a removed character: said as unreadable,
/// its pick kept; once it reads again, and the skipped count goes back to none, that is said too.
#[test]
fn a_character_file_that_cannot_be_read_for_now_keeps_its_pick() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("characters")).unwrap();
    let file = data.join("characters/half-en.toml");
    let whole = character_file("half-en", "Half");
    std::fs::write(&file, &whole).unwrap();
    let mut app = app_on(&data);
    app.setup.characters.insert("half-en".into());
    std::fs::write(&file, &whole[..whole.len() / 3]).unwrap();
    assert_eq!(
        look(&mut app, &data),
        "data folder read again: unreadable now half-en; 1 file(s) skipped: `incharacter validate` says why"
    );
    assert!(app.setup.characters.contains("half-en"), "the pick is kept");
    // While it stays broken, another change does not say the skipped file again.
    std::fs::write(data.join("characters/two-en.toml"), character_file("two-en", "Two")).unwrap();
    assert_eq!(look(&mut app, &data), "data folder read again: added two-en");
    std::fs::write(&file, &whole).unwrap();
    assert_eq!(
        look(&mut app, &data),
        "data folder read again: readable again half-en; no file skipped now"
    );
    assert!(app.setup.characters.contains("half-en"));

    // Started while its file cannot be read, the run does not go without it silently: refused, the
    // pick (no longer listed, so not to be unpicked by hand) dropped.
    std::fs::write(&file, "id = ").unwrap();
    app.update(Action::CatalogReread(Arc::new(Catalog::load(Some(&data)).unwrap())));
    app.screen = Screen::Setup;
    app.setup.scales.insert("BFI".into());
    app.update(Action::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    let flash = app.flash.clone().unwrap_or_default();
    assert!(
        flash.starts_with("not started: half-en cannot be read now (`incharacter validate` says why); unpicked"),
        "{flash}"
    );
    assert!(!app.setup.characters.contains("half-en"));
    assert!(!app.live.running, "no run started");
}

/// A user's scale added, edited and deleted while the workbench runs is named, as characters are; its
/// pick goes with its file.
#[test]
fn a_scale_file_added_edited_and_removed_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("scales")).unwrap();
    let bundled =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scales/BFI.toml")).unwrap();
    let mine = bundled.replacen("id = \"BFI\"", "id = \"BFI-mine\"", 1);
    assert_ne!(mine, bundled);
    let mut app = app_on(&data);
    let file = data.join("scales/BFI-mine.toml");
    std::fs::write(&file, &mine).unwrap();
    assert_eq!(look(&mut app, &data), "data folder read again: scale added BFI-mine");
    app.setup.scales.insert("BFI-mine".into());
    let renamed = mine.replacen("name = \"", "name = \"Mine: ", 1);
    assert_ne!(renamed, mine);
    std::fs::write(&file, &renamed).unwrap();
    assert_eq!(look(&mut app, &data), "data folder read again: scale changed BFI-mine");
    assert!(app.setup.scales.contains("BFI-mine"));
    std::fs::remove_file(&file).unwrap();
    assert_eq!(look(&mut app, &data), "data folder read again: scale removed BFI-mine");
    assert!(!app.setup.scales.contains("BFI-mine"), "the pick went with the file");
}

/// A save reads the catalog again: what another program changed meanwhile is said after it, and a
/// character it removed is unpicked, as a look at the folder would have done; the saved character
/// itself is no news.
#[test]
fn a_save_says_what_else_changed_in_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("characters")).unwrap();
    for id in ["kept-en", "other-en"] {
        std::fs::write(data.join(format!("characters/{id}.toml")), character_file(id, id)).unwrap();
    }
    let mut app = app_on(&data);
    app.setup
        .characters
        .extend(["kept-en".to_string(), "other-en".to_string()]);
    // The save wrote kept-en anew while another program removed other-en.
    std::fs::write(
        data.join("characters/kept-en.toml"),
        character_file("kept-en", "Kept, edited"),
    )
    .unwrap();
    std::fs::remove_file(data.join("characters/other-en.toml")).unwrap();
    let after = Arc::new(Catalog::load(Some(&data)).unwrap());
    app.update(Action::Saved(Ok(("kept-en".into(), after))));
    assert_eq!(
        app.flash.as_deref(),
        Some("saved kept-en; data folder read again: removed other-en")
    );
    assert_eq!(app.setup.characters.iter().collect::<Vec<_>>(), ["kept-en"]);
}

/// What a look at the folder says of files that break and mend, as a person editing them sees it:
/// a scale caught broken keeps its pick as a character does; a file that never read, once it does,
/// is new; a broken file deleted is a removed character, its pick dropped.
#[test]
fn files_that_break_mend_and_go_are_said_for_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("characters")).unwrap();
    std::fs::create_dir_all(data.join("scales")).unwrap();
    let scale = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scales/LOT-R.toml"))
        .unwrap()
        .replacen("id = \"LOT-R\"", "id = \"MYLOT\"", 1);
    let scale_file = data.join("scales/mylot.toml");
    std::fs::write(&scale_file, &scale).unwrap();
    let alpha = data.join("characters/alpha.toml");
    std::fs::write(&alpha, character_file("alpha-en", "Alpha")).unwrap();
    let mut app = app_on(&data);
    app.setup.scales.insert("MYLOT".into());
    app.setup.characters.insert("alpha-en".into());

    std::fs::write(&scale_file, format!("{scale}\nrange = [")).unwrap();
    assert!(look(&mut app, &data).starts_with("data folder read again: scale unreadable now MYLOT; 1 file(s) skipped"));
    assert!(app.setup.scales.contains("MYLOT"), "the pick is kept");
    std::fs::write(&scale_file, &scale).unwrap();
    assert_eq!(
        look(&mut app, &data),
        "data folder read again: scale readable again MYLOT; no file skipped now"
    );
    assert!(app.setup.scales.contains("MYLOT"));

    // A file that never read, then reads: a new character, not one readable again.
    let omega = data.join("characters/omega.toml");
    std::fs::write(&omega, "id = \"omega-en\"\nname = \"Om").unwrap();
    assert_eq!(
        look(&mut app, &data),
        "data folder read again: 1 file(s) skipped: `incharacter validate` says why"
    );
    std::fs::write(&omega, character_file("omega-en", "Omega")).unwrap();
    assert_eq!(
        look(&mut app, &data),
        "data folder read again: added omega-en; no file skipped now"
    );

    // Broken, then deleted: removed, and its pick goes with it.
    std::fs::write(&alpha, "id = \"alpha-en\"\nname = ").unwrap();
    assert!(look(&mut app, &data).starts_with("data folder read again: unreadable now alpha-en"));
    assert!(app.setup.characters.contains("alpha-en"));
    std::fs::remove_file(&alpha).unwrap();
    assert_eq!(
        look(&mut app, &data),
        "data folder read again: removed alpha-en; no file skipped now"
    );
    assert!(
        !app.setup.characters.contains("alpha-en"),
        "the pick went with the file"
    );
}

/// A user's file that overrides a bundled character, caught broken, is unreadable, not "changed" to
/// the bundled one standing in: a run would measure another character. Two files of one id: the
/// one picked deleted, the other is news, and the pick goes.
#[test]
fn an_override_caught_broken_and_a_second_file_of_an_id_are_not_taken_for_the_pick() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("characters")).unwrap();
    let mine = data.join("characters/hermione-en.toml");
    let whole = character_file("hermione-en", "Hermione Mine");
    std::fs::write(&mine, &whole).unwrap();
    let mut app = app_on(&data);
    app.setup.characters.insert("hermione-en".into());
    std::fs::write(&mine, format!("{whole}x = [\n")).unwrap();
    assert!(look(&mut app, &data).starts_with("data folder read again: unreadable now hermione-en; 1 file(s) skipped"));
    app.screen = Screen::Setup;
    // The row shows the bundled Hermione standing in; its box says the pick cannot be run.
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    terminal.draw(|f| ui::render(f, &app)).unwrap();
    let screen: String = terminal
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    assert!(screen.contains("[!] Hermione Granger"), "{screen}");
    app.setup.scales.insert("BFI".into());
    app.update(Action::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    let flash = app.flash.clone().unwrap_or_default();
    assert!(
        flash.starts_with("not started: hermione-en cannot be read now"),
        "{flash}"
    );
    assert!(!app.live.running, "the bundled Hermione is not run in the user's place");
    app.setup.characters.insert("hermione-en".into());
    std::fs::write(&mine, &whole).unwrap();
    assert_eq!(
        look(&mut app, &data),
        "data folder read again: readable again hermione-en; no file skipped now"
    );

    let (one, two) = (data.join("characters/dup1.toml"), data.join("characters/dup2.toml"));
    std::fs::write(&one, character_file("dup-en", "Dup One")).unwrap();
    look(&mut app, &data);
    app.setup.characters.insert("dup-en".into());
    std::fs::write(&two, character_file("dup-en", "Dup Two")).unwrap();
    assert!(look(&mut app, &data).starts_with("data folder read again: unreadable now dup-en; 2 file(s) skipped"));
    std::fs::remove_file(&one).unwrap();
    assert_eq!(
        look(&mut app, &data),
        "data folder read again: added dup-en; removed dup-en; no file skipped now"
    );
    assert!(!app.setup.characters.contains("dup-en"), "Dup Two is not the pick");
    assert!(app.setup.characters.contains("hermione-en"));
}
