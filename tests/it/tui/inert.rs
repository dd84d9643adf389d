//! The screens' side of `tests/it/inert.rs`: the same hostile text, arriving as a model's reply (live
//! and in a loaded journal), a chat reply, a card's fields, pip's stderr and a flash message, leaves no
//! screen with anything a terminal would act on, nor an OSC payload shown as text.

use std::sync::Arc;

use incharacter::catalog::Catalog;
use incharacter::llm::Role;
use incharacter::study::Event;
use incharacter::study::live::{Live, LiveKind};

use super::{app, render, session_events};
use crate::inert::{HOSTILE, assert_inert, hostile_card};
use incharacter::tui::app::{Action, App, Screen};

fn every_screen(app: &mut App, what: &str) {
    for screen in [Screen::Welcome].into_iter().chain(Screen::TABS) {
        app.screen = screen;
        for size in super::SIZES {
            assert_inert(
                &format!("{what}: {} at {size:?}", screen.title()),
                render(app, size).as_bytes(),
            );
        }
    }
}

#[test]
fn escape_sequences_reach_no_screen() {
    // A card imported with hostile fields, in the data dir's catalog.
    let data = tempfile::tempdir().unwrap();
    let card = hostile_card(data.path());
    let out = crate::common::offline(
        data.path(),
        &["import", "card", card.to_str().unwrap(), "--id", "mira-en"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let catalog = Arc::new(Catalog::load(Some(data.path())).unwrap());
    let mut app = app();
    app.update(Action::Saved(Ok(("mira-en".into(), catalog))));
    // A model's replies, in a session loaded from its journal.
    let mut events = session_events(&app.catalog);
    for e in &mut events {
        if let Event::ItemAnswered { response, .. } = e {
            *response = HOSTILE.into();
        }
    }
    app.update(Action::SessionLoaded(events));
    // A reply streaming live, a chat reply, pip's stderr and a flash line.
    app.update(Action::Live(Live {
        role: Role::Rpa,
        purpose: "interview hermione-en BFI 1 open".into(),
        repeat: 0,
        kind: LiveKind::Token(HOSTILE.into()),
    }));
    app.update(Action::ChatToken(HOSTILE.into()));
    app.update(Action::Fetched(Err(format!("pip failed: {HOSTILE}"))));
    app.update(Action::Flash(HOSTILE.into()));
    every_screen(&mut app, "hostile text everywhere");
    // The text is shown, only without what would act on the terminal.
    app.screen = Screen::Chat;
    assert!(
        render(&app, (120, 40)).contains("I adore museums"),
        "{}",
        render(&app, (120, 40))
    );
}

/// A zero-width joiner that joins no two pictographs leaves its cell (a terminal would join it with
/// the next cell's character and draw the rest of the line a column off); an emoji's own stay.
#[test]
fn stray_joiners_leave_the_cells_and_an_emojis_own_stay() {
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    let mut buffer = Buffer::empty(Rect::new(0, 0, 40, 1));
    buffer.set_string(
        0,
        0,
        "a \u{200d}★ b\u{200d} 👨\u{200d}👩\u{200d}👧 🏳\u{fe0f}\u{200d}🌈 🐈\u{200d}⬛ c",
        ratatui::style::Style::default(),
    );
    incharacter::tui::ui::inert_cells(&mut buffer);
    let symbols: Vec<&str> = buffer.content.iter().map(|c| c.symbol()).collect();
    let text: String = symbols.concat();
    assert!(
        text.contains("👨\u{200d}👩\u{200d}👧"),
        "the family stays one emoji: {symbols:?}"
    );
    assert!(
        text.contains("🏳\u{fe0f}\u{200d}🌈") && text.contains("🐈\u{200d}⬛"),
        "{symbols:?}"
    );
    assert_eq!(
        text.matches('\u{200d}').count(),
        4,
        "only the emoji's joiners: {symbols:?}"
    );
    assert!(text.starts_with("a ★ b"), "{symbols:?}");
}

/// A flag takes its two columns as its letters: terminals differ on how wide its two regional
/// indicators are, and then a line ran a column long and left a stray half behind.
#[test]
fn a_flag_is_shown_as_its_letters_in_the_columns_it_takes() {
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    let mut buffer = Buffer::empty(Rect::new(0, 0, 20, 1));
    buffer.set_string(0, 0, "flag 🇯🇵 end|", ratatui::style::Style::default());
    incharacter::tui::ui::inert_cells(&mut buffer);
    let symbols: Vec<&str> = buffer.content.iter().map(|c| c.symbol()).collect();
    // Two columns, as the flag took: the cell after it, under its second column, is never drawn.
    assert_eq!(symbols[5], "JP", "{symbols:?}");
    assert_eq!(symbols[7..12].concat(), " end|", "{symbols:?}");
}

/// A character a terminal would act on takes no column, so it shares the cell of the one before it:
/// only it leaves, the character stays (a bidi isolate after a name blanked the name's last letter).
#[test]
fn what_acts_on_the_terminal_leaves_its_cell_and_the_character_before_it_stays() {
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    let mut buffer = Buffer::empty(Rect::new(0, 0, 30, 1));
    for (i, cell) in buffer.content.iter_mut().enumerate().take(4) {
        // As a cell holds them once ratatui has joined them to the character before.
        cell.set_symbol(["W\u{2066}", "r\u{202e}", "\u{1b}", "\u{2069}\u{301}"][i]);
    }
    incharacter::tui::ui::inert_cells(&mut buffer);
    let symbols: Vec<&str> = buffer.content.iter().take(4).map(|c| c.symbol()).collect();
    assert_eq!(symbols, ["W", "r", " ", " "]);
}
