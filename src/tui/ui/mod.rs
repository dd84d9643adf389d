//! The frame around the screens (tabs, key bar, help overlay, the too-small notice) and the widgets
//! the screens share. Drawing is a pure function of the [`App`]; it returns what it drew where.

mod help;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use super::app::{App, DEMO_STEPS, Screen};
use super::keys::Command;
use super::screens::{Component, Hits};
use super::theme::Theme;

pub use crate::text::fit;

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// Draws the app; returns what it drew where, for the mouse and the scrolling of tail-anchored text.
pub fn draw(frame: &mut Frame, app: &App) -> Hits {
    let area = frame.area();
    let theme = app.theme();
    frame.render_widget(Block::default().style(theme.base()), area);
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = vec![
            Line::styled("incharacter", theme.title()),
            Line::raw(""),
            Line::raw(format!(
                "Please enlarge the terminal to at least {MIN_WIDTH}×{MIN_HEIGHT} (now {}×{}).",
                area.width, area.height
            )),
            Line::styled("ctrl-c quits", theme.dim()),
        ];
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return Hits::default();
    }
    let [tabs, main, status] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0), Constraint::Length(1)]).areas(area);
    let ctx = app.ctx();
    let screen = app.component();
    let mut hits = screen.render(frame, main, &ctx);
    hits.tabs = render_tabs(frame, app, tabs);
    let hints = match &app.reassess {
        Some(dialog) => {
            dialog.render(frame, main, &ctx);
            dialog.hints(&ctx)
        }
        None => screen.hints(&ctx),
    };
    render_status(frame, app, hints, status);
    if app.help {
        help::render(frame, app, main);
    }
    hits
}

/// Draws the app where what it drew does not matter (snapshots, benchmarks).
pub fn render(frame: &mut Frame, app: &App) {
    draw(frame, app);
}

fn render_tabs(frame: &mut Frame, app: &App, area: Rect) -> Vec<(Rect, Screen)> {
    let theme = app.theme();
    // The tabs take what they need: the product name goes first, then the long titles.
    // Titles: whole, short ("Insp."), or their first three letters on the narrowest terminals.
    let label = |i: usize, s: &Screen, size: u8| {
        // The tenth tab's key is 0.
        let key = (i + 1) % 10;
        match size {
            0 => format!(" {key} {} ", s.title()),
            1 => format!(" {key} {} ", s.short_title()),
            _ => format!(" {key} {} ", s.title().chars().take(3).collect::<String>()),
        }
    };
    let width = |size: u8| -> u16 {
        Screen::TABS
            .iter()
            .enumerate()
            .map(|(i, s)| label(i, s, size).chars().count() as u16 + 1)
            .sum()
    };
    let short = (0..2).find(|&size| width(size) <= area.width).unwrap_or(2);
    let named = width(short) + 13 <= area.width;
    let mut spans = Vec::new();
    let mut hits = Vec::new();
    let mut x = area.x;
    if named {
        spans.push(Span::styled(" incharacter ", theme.title()));
        x += 13;
    }
    for (i, s) in Screen::TABS.iter().enumerate() {
        let label = label(i, s, short);
        let width = label.chars().count() as u16;
        let style = if *s == app.screen {
            theme.selected().add_modifier(Modifier::BOLD)
        } else {
            theme.dim()
        };
        hits.push((Rect::new(x, area.y, width.min(area.right().saturating_sub(x)), 1), *s));
        x += width + 1;
        spans.push(Span::styled(label, style));
        spans.push(Span::raw(" "));
    }
    let session = &app.run.session;
    if !session.id.is_empty() {
        let model = session
            .providers
            .get("rpa")
            .or_else(|| session.providers.get("subject"))
            .map(|m| format!(" · {}", m.model))
            .unwrap_or_default();
        spans.push(Span::styled(format!(" session {}{model}", session.id), theme.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
    hits
}

/// The keys that matter on this screen, then the flash message.
fn render_status(frame: &mut Frame, app: &App, essentials: Vec<(String, &str)>, area: Rect) {
    let theme = app.theme();
    let key = |c: Command| app.keymap.key_for(app.screen.mode(), c);
    let mut lead = Vec::new();
    if let Some(d) = &app.demo
        && d.step + 1 < DEMO_STEPS.len()
    {
        lead.push(Span::styled(format!(" {} ", key(Command::DemoNext)), theme.selected()));
        lead.push(Span::styled(" next step  ", Style::default().fg(theme.accent)));
    }
    let mut spans = Vec::new();
    for (k, what) in essentials.iter().map(|(k, w)| (k.as_str(), *w)).chain(
        [
            (if app.screen == Screen::Chat { "f1" } else { "?" }, "help"),
            ("ctrl-c", "quit"),
        ]
        .iter()
        .copied(),
    ) {
        spans.push(Span::styled(format!(" {k} "), theme.selected()));
        spans.push(Span::styled(format!(" {what}  "), theme.dim()));
    }
    if let Some(f) = &app.flash {
        // A message that would be cut off takes the place of the key chips (? still lists them).
        let width = |spans: &[Span]| spans.iter().map(Span::width).sum::<usize>();
        if width(&lead) + width(&spans) + unicode_width::UnicodeWidthStr::width(f.as_str()) > usize::from(area.width) {
            spans.clear();
        }
        spans.push(Span::styled(f.clone(), Style::default().fg(theme.accent)));
    }
    lead.extend(spans);
    frame.render_widget(Paragraph::new(Line::from(lead)), area);
}

pub fn block<'a>(title: impl Into<Line<'a>>, focused: bool, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Rounded
        })
        .border_style(theme.border(focused))
        .title(title.into().style(theme.title()))
}

/// First visible row so that `cursor` stays in a window of `height` rows.
pub fn window(len: usize, cursor: usize, height: usize) -> usize {
    if height == 0 || len <= height {
        return 0;
    }
    let cursor = cursor.min(len - 1);
    cursor.saturating_sub(height / 2).min(len - height)
}

/// A centred rectangle of at most `w`×`h` inside `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(area.x + (area.width - w) / 2, area.y + (area.height - h) / 2, w, h)
}

/// Clears `area` and draws a bordered popup.
pub fn popup(frame: &mut Frame, area: Rect, title: &str, theme: &Theme) -> Rect {
    frame.render_widget(Clear, area);
    let b = block(title, true, theme).style(theme.base());
    let inner = b.inner(area);
    frame.render_widget(b, area);
    inner
}

/// `text` padded with spaces to `width` display columns (cut if longer).
pub fn pad(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthStr;
    let t = fit(text, width);
    let w = t.width();
    format!("{t}{}", " ".repeat(width.saturating_sub(w)))
}

pub fn score_text(score: Option<f64>) -> String {
    score.map_or("–".into(), |s| format!("{s:.2}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_counts_cjk_as_two_columns() {
        assert_eq!(pad("abc", 5), "abc  ");
        assert_eq!(pad("钟离", 5), "钟离 ");
        assert_eq!(window(100, 50, 10), 45);
        assert_eq!(window(100, 99, 10), 90);
        assert_eq!(window(5, 3, 10), 0);
    }
}
