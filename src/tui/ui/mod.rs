//! Rendering: a pure function of the [`App`] state. Each screen has its module; this one draws the
//! frame (tabs, status bar, help overlay, the too-small notice) and holds shared helpers.

mod annotate;
mod chat;
mod compare;
mod help;
mod inspect;
mod live;
mod observers;
mod rolebench;
mod sessions;
mod setup;
mod welcome;

pub use compare::table_rows;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use super::app::{App, Screen};
use super::keys::Command;
use super::theme::Theme;

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

pub fn render(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let theme = app.theme();
    frame.render_widget(Block::default().style(theme.base()), area);
    app.hit.borrow_mut().lists.clear();
    app.hit.borrow_mut().tabs.clear();
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
        return;
    }
    let [tabs, main, status] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0), Constraint::Length(1)]).areas(area);
    render_tabs(frame, app, tabs);
    match app.screen {
        Screen::Welcome => welcome::render(frame, app, main),
        Screen::Setup => setup::render(frame, app, main),
        Screen::Live => live::render(frame, app, main),
        Screen::Inspector => inspect::render(frame, app, main),
        Screen::Compare => compare::render(frame, app, main),
        Screen::Sessions => sessions::render(frame, app, main),
        Screen::Chat => chat::render(frame, app, main),
        Screen::Observers => observers::render(frame, app, main),
        Screen::Annotate => annotate::render(frame, app, main),
        Screen::Rolebench => rolebench::render(frame, app, main),
    }
    render_status(frame, app, status);
    if app.help {
        help::render(frame, app, main);
    }
}

fn render_tabs(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    // Below 100 columns the product name gives way to the tabs.
    let narrow = area.width < 100;
    let mut spans = Vec::new();
    let mut x = area.x;
    if !narrow {
        spans.push(Span::styled(" incharacter ", theme.title()));
        x += 13;
    }
    for (i, s) in Screen::TABS.iter().enumerate() {
        let label = if narrow {
            format!(" {} {} ", i + 1, s.short_title())
        } else {
            format!(" {} {} ", i + 1, s.title())
        };
        let width = label.chars().count() as u16;
        let style = if *s == app.screen {
            theme.selected().add_modifier(Modifier::BOLD)
        } else {
            theme.dim()
        };
        app.hit
            .borrow_mut()
            .tabs
            .push((Rect::new(x, area.y, width.min(area.right().saturating_sub(x)), 1), i));
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
}

/// The keys that matter on this screen, then the flash message.
fn render_status(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let mode = app.screen.mode();
    let key = |c: Command| app.keymap.key_for(mode, c);
    let essentials: Vec<(String, &str)> = match app.screen {
        Screen::Welcome => vec![
            (key(Command::FetchModel), "fetch model"),
            (key(Command::GoSessions), "sessions"),
        ],
        Screen::Setup => {
            let mut keys = vec![
                (key(Command::Toggle), "pick"),
                (key(Command::NextPane), "pane"),
                (key(Command::Select), "start"),
            ];
            // Letters filter only the character list.
            if app.setup.pane == crate::tui::app::SetupPane::Characters {
                keys.insert(0, ("type".into(), "filter"));
            }
            keys
        }
        Screen::Live if app.live.running && app.live.replay.is_some() => vec![
            (key(Command::Speed), "faster"),
            (key(Command::Pause), if app.live.paused { "go on" } else { "pause" }),
            (key(Command::Cancel), "skip to end"),
            (key(Command::Select), "inspect"),
        ],
        Screen::Live => vec![
            (key(Command::Pause), "pause"),
            (key(Command::Cancel), "cancel"),
            (key(Command::Follow), "follow"),
            (key(Command::Select), "inspect"),
        ],
        Screen::Inspector => vec![
            (key(Command::NextUnit), "unit"),
            (key(Command::NextMethod), "method"),
            (key(Command::NextPane), "pane"),
            (key(Command::Select), "drill in"),
        ],
        Screen::Compare => vec![
            (key(Command::NextMethod), "method"),
            (key(Command::AllMethods), "all methods"),
            (key(Command::NextUnit), "character"),
            (key(Command::NextPage), "page"),
        ],
        Screen::Annotate => vec![
            ("digits".into(), "answer"),
            ("x".into(), "refuses"),
            (key(Command::NextUnit), "next"),
            (key(Command::Reveal), "reveal"),
            (key(Command::NextPane), "task"),
        ],
        Screen::Rolebench => vec![
            (key(Command::Toggle), "role"),
            (key(Command::Limit), "limit"),
            (key(Command::Start), "start"),
            (key(Command::NextPane), "pane"),
        ],
        Screen::Observers => vec![
            (key(Command::StartSynthetic), "synthetic run"),
            (key(Command::StartCharacter), "character run"),
            (key(Command::NextUnit), "subject"),
            (key(Command::Down), "observer"),
        ],
        Screen::Chat => vec![
            ("enter".into(), "send"),
            (key(Command::Prompt), "prompt"),
            (key(Command::NextUnit), "character"),
            (key(Command::Clear), "clear"),
        ],
        Screen::Sessions => vec![
            (key(Command::Select), "open"),
            (key(Command::Replay), "replay"),
            (key(Command::Speed), "speed"),
            (key(Command::Mark), "mark"),
        ],
    };
    let mut lead = Vec::new();
    if let Some(d) = &app.demo
        && d.step + 1 < crate::tui::app::DEMO_STEPS.len()
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

/// Text cut to `width` display columns (CJK counts two), with an ellipsis when cut.
pub fn fit(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let mut out = String::new();
    let mut used = 0;
    let total: usize = text.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return text.to_string();
    }
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
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
    fn fitting_counts_cjk_as_two_columns() {
        assert_eq!(fit("赫敏·格兰杰", 6), "赫敏·…");
        assert_eq!(fit("赫敏格兰杰", 6), "赫敏…");
        assert_eq!(pad("abc", 5), "abc  ");
        assert_eq!(pad("钟离", 5), "钟离 ");
        assert_eq!(window(100, 50, 10), 45);
        assert_eq!(window(100, 99, 10), 90);
        assert_eq!(window(5, 3, 10), 0);
    }
}
