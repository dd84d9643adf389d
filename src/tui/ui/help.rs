//! The help overlay: every key of the current screen, from the live keymap.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{centered, pad, popup};
use crate::tui::app::{App, Screen};
use crate::tui::wrap::wrap;

const KEYS: usize = 22;

/// The keys of the persona editor (what is typed goes into the field in focus).
const EDITOR: [(&str, &str); 11] = [
    ("tab shift-tab", "the next or the previous field"),
    ("ctrl-s", "save the character"),
    (
        "esc",
        "leave the editor (asked again first when the edits are not saved)",
    ),
    ("ctrl-c", "quit (asked again first when the edits are not saved)"),
    ("f1", "this help; f2–f11 switch screens, the draft kept"),
    ("← → space", "language: English or Chinese"),
    ("|", "catchphrases: between two of them (\\| is a | within one)"),
    ("↑ ↓", "targets: the dimension"),
    ("h l", "targets: the dimension's target is H or L"),
    ("0–9 . enter", "targets: a score, typed then taken"),
    ("x backspace", "targets: no target for the dimension; ← → another scale"),
];

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let mode = app.ctx().mode;
    let width = area.width.saturating_sub(4).min(100);
    let text = usize::from(width.saturating_sub(2)).saturating_sub(KEYS).max(10);
    let mut lines: Vec<Line> = Vec::new();
    // A long description wraps under itself, so nothing is cut at any width.
    let row = |keys: &str, what: &str, lines: &mut Vec<Line>| {
        for (i, part) in wrap(what, text).into_iter().enumerate() {
            let keys = if i == 0 { keys } else { "" };
            lines.push(Line::from(vec![
                Span::styled(pad(keys, KEYS), theme.fg(theme.accent)),
                Span::raw(part),
            ]));
        }
    };
    if app.screen == Screen::Annotate {
        row(
            "0–9",
            "answer: an item's option, taken at once when no further digit fits (else enter); a dimension's score, decimals allowed (. or ,), then enter",
            &mut lines,
        );
        row("x", "refuses: the answer is unrelated or gives no option", &mut lines);
    }
    if app.screen == Screen::Persona && app.persona.draft.is_some() {
        // Editing a character: typing goes to the field, so the screen's keys are the editor's.
        for (keys, what) in EDITOR {
            row(keys, what, &mut lines);
        }
    } else {
        for (keys, cmd) in app.keymap.bindings(mode) {
            row(&keys, cmd.help_on(mode), &mut lines);
        }
    }
    let setup_note = (app.screen == Screen::Setup)
        .then_some("In the character list letters filter (q, j, k too): tab moves on, ctrl-c quits, esc clears.");
    for note in setup_note
        .into_iter()
        .chain(["Rebind in config.toml: [tui.keys.<screen>] \"ctrl-j\" = \"down\""])
    {
        for part in wrap(note, usize::from(width.saturating_sub(2))) {
            lines.push(Line::styled(part, theme.dim()));
        }
    }
    let height = (lines.len() as u16 + 2).min(area.height);
    // What does not fit scrolls (↑/↓, page keys), and the title says so and how far.
    let shown = height.saturating_sub(2);
    let hidden = (lines.len() as u16).saturating_sub(shown);
    let scroll = app.help_scroll.get().min(hidden);
    // Kept clamped, so a key back up moves the text at once however far down was asked.
    app.help_scroll.set(scroll);
    let title = if hidden == 0 {
        " Keys (any key closes) ".to_string()
    } else {
        format!(
            " Keys {}–{} of {} (↑/↓ scroll, any other key closes) ",
            scroll + 1,
            scroll + shown,
            lines.len()
        )
    };
    let inner = popup(frame, centered(area, width, height), &title, theme);
    frame.render_widget(Paragraph::new(lines).scroll((scroll, 0)), inner);
}
