//! The mouse on the screens' lists, as the event loop gives it: tested against the hits of the
//! frame last drawn.

use incharacter::tui::app::Screen;
use incharacter::tui::screens::inspect::InspectFocus;
use incharacter::tui::screens::{Hits, ListId};
use ratatui::crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

use super::*;

/// Draws the app as the event loop does; returns the screen's text and what it drew where.
fn draw(app: &mut App, (w, h): (u16, u16)) -> (String, Hits) {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut hits = None;
    terminal.draw(|f| hits = Some(ui::draw(f, app))).unwrap();
    let hits = hits.unwrap();
    app.laid_out(&hits);
    (render(app, (w, h)), hits)
}

fn list(hits: &Hits, id: ListId) -> (ratatui::layout::Rect, usize) {
    let (area, first, _) = hits.lists.iter().find(|(_, _, l)| *l == id).expect("the list is drawn");
    (*area, *first)
}

fn at(kind: MouseEventKind, column: u16, row: u16) -> MouseEvent {
    MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }
}

#[test]
fn a_click_selects_the_row_under_the_pointer_and_the_rows_stay_put() {
    let mut app = app();
    key(&mut app, KeyCode::Char('s'));
    assert_eq!(app.screen, Screen::Setup);
    let size = (80, 24);
    let characters = app.setup.filtered_characters(&app.catalog).len();
    let (_, hits) = draw(&mut app, size);
    let (area, first) = list(&hits, ListId::Characters);
    let height = usize::from(area.height);
    assert!(
        characters > height + 5,
        "the list must scroll: {characters} rows, {height} shown"
    );
    // Down past the bottom of the window: it follows the cursor a row at a time.
    for _ in 0..height + 3 {
        key(&mut app, KeyCode::Down);
    }
    let (before, hits) = draw(&mut app, size);
    let (area, first_before) = list(&hits, ListId::Characters);
    assert_eq!(first, 0);
    assert_eq!(first_before, 4, "the cursor on the window's last row");
    // A click on the window's third row selects that character, and the rows do not move.
    let row = area.y + 2;
    app.mouse(at(MouseEventKind::Down(MouseButton::Left), area.x + 3, row), &hits);
    assert_eq!(app.setup.char_cursor, first_before + 2);
    let (after, hits) = draw(&mut app, size);
    assert_eq!(list(&hits, ListId::Characters).1, first_before, "the window stayed");
    let line = |screen: &str| screen.lines().nth(usize::from(row)).unwrap().to_string();
    assert_eq!(line(&before), line(&after), "{before}\n{after}");
    let name = &app.setup.filtered_characters(&app.catalog)[app.setup.char_cursor].name;
    assert!(
        line(&after).contains(name.as_str()),
        "{name} under the pointer:\n{after}"
    );
    // The wheel moves the cursor; the window only when the cursor leaves it.
    app.mouse(at(MouseEventKind::ScrollUp, area.x + 3, row), &hits);
    let (_, hits) = draw(&mut app, size);
    assert_eq!(list(&hits, ListId::Characters).1, first_before);
}

#[test]
fn a_click_on_the_inspectors_items_counts_from_the_first_item_shown() {
    // BSRI: more items in a dimension than a 24-row terminal's pane holds.
    let mut app = app();
    let plan = fixture::plan(&["hermione-en"], &["BSRI"], &[Method::Oc]);
    let events = fixture::session(&app.catalog, &plan);
    app.update(Action::SessionLoaded(events));
    app.screen = Screen::Inspector;
    app.inspect.focus = InspectFocus::Items;
    let size = (80, 24);
    // The method whose items are listed (OC), in a pane too short for them all.
    let (area, first, hits) = (0..3)
        .find_map(|m| {
            app.inspect.method = m;
            let (_, hits) = draw(&mut app, size);
            let (area, first, _) = *hits.lists.iter().find(|(_, _, l)| *l == ListId::InspectItems)?;
            Some((area, first, hits))
        })
        .expect("an item-level method lists its items");
    assert_eq!(first, 0);
    app.mouse(
        at(MouseEventKind::Down(MouseButton::Left), area.x + 3, area.y + 1),
        &hits,
    );
    assert_eq!(app.inspect.item, 1, "the second row is the second item");
    // Scrolled down, the rows shown start further on, and so does a click.
    app.inspect.scroll = 2;
    let (screen, hits) = draw(&mut app, size);
    let (area, first, _) = *hits.lists.iter().find(|(_, _, l)| *l == ListId::InspectItems).unwrap();
    assert_eq!(first, 2, "{screen}");
    app.mouse(
        at(MouseEventKind::Down(MouseButton::Left), area.x + 3, area.y + 1),
        &hits,
    );
    assert_eq!(app.inspect.item, 3, "{screen}");
}

/// A long status message covers the rows above the status line: a click there clears it and does not
/// reach the list it hides.
#[test]
fn a_click_on_a_long_message_clears_it_and_reaches_nothing_beneath() {
    let mut app = app();
    key(&mut app, KeyCode::Char('s'));
    app.flash = Some("word ".repeat(40));
    let (_, mut hits) = draw(&mut app, (80, 24));
    let covered = hits.covered.expect("the message covers rows");
    assert_eq!((covered.y, covered.height), (21, 2), "{covered:?}");
    // A screen whose list reaches those rows (a taller one would): its rows lie beneath.
    hits.lists
        .push((ratatui::layout::Rect::new(0, 19, 80, 4), 0, ListId::Characters));
    let cursor = app.setup.char_cursor;
    app.mouse(at(MouseEventKind::Down(MouseButton::Left), 5, 21), &hits);
    assert!(app.flash.is_none());
    assert_eq!(app.setup.char_cursor, cursor, "the list beneath was not clicked");
    // Once the message is gone (the next frame covers nothing), a click reaches the list.
    hits.covered = None;
    app.mouse(at(MouseEventKind::Down(MouseButton::Left), 5, 22), &hits);
    assert_eq!(app.setup.char_cursor, 3);
    // A message on one row covers nothing.
    app.flash = Some("saved".into());
    let (_, hits) = draw(&mut app, (80, 24));
    assert!(hits.covered.is_none());
}

/// A click takes back a start's question as another key does: the next Enter asks again.
#[test]
fn a_click_takes_back_a_starts_question() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = with_session();
    app.live.start(None, true);
    app.update(Action::Sessions(vec![super::interrupted(
        dir.path().join("20261129-130000-b-0002"),
    )]));
    key(&mut app, KeyCode::Char('5'));
    assert!(key(&mut app, KeyCode::Enter).is_empty(), "asked");
    app.mouse(at(MouseEventKind::ScrollDown, 0, 0), &Hits::default());
    assert_eq!(app.screen, Screen::Sessions);
    assert!(key(&mut app, KeyCode::Enter).is_empty(), "asked again after the click");
    assert!(
        app.flash.as_deref().unwrap_or_default().ends_with("opens this session"),
        "{:?}",
        app.flash
    );
}
