//! The observers screen: for an observer run, the subject, its observers as cards (context, relationship, report
//! status), the selected observer's dialogues with the scenario above each (the turn being generated
//! streams in), and per trait the latent level, the self-report, each observer and their aggregate.
//! It owns the subject and observer shown, and the interview results shown beside them.

use std::collections::BTreeMap;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{Component, Ctx, Hits, Request, TailScroll};
use crate::observer::report::{self, SubjectResult};
use crate::observer::{Done, SCALE, Side};
use crate::tui::keys::Command;
use crate::tui::theme::Theme;
use crate::tui::vocab::{DEMO_STEPS, Effect};
use crate::tui::widgets::{block, fit, pad};
use crate::tui::wrap::{wrap, wrap_at_most};

#[derive(Debug, Clone, Default)]
pub struct Observers {
    pub subject: usize,
    pub observer: usize,
    pub scroll: TailScroll,
    /// Character id → (session id, IPIP-50 trait → ER_batch score) from the newest interview session
    /// that rated the character on IPIP-50, to show beside its observers.
    pub interviews: BTreeMap<String, (String, BTreeMap<String, f64>)>,
}

impl Observers {
    pub fn command(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        match cmd {
            Command::NextUnit => {
                self.subject += 1;
                self.observer = 0;
                self.scroll.reset();
            }
            Command::PrevUnit => {
                self.subject = self.subject.saturating_sub(1);
                self.observer = 0;
                self.scroll.reset();
            }
            Command::Down => {
                self.observer += 1;
                self.scroll.reset();
            }
            Command::Up => {
                self.observer = self.observer.saturating_sub(1);
                self.scroll.reset();
            }
            Command::ScrollUp => self.scroll.scroll_up(5),
            Command::ScrollDown => self.scroll.scroll_down(5),
            Command::StartSynthetic | Command::StartCharacter => return self.start(cmd, ctx),
            _ => {}
        }
        Vec::new()
    }

    /// An observer run of three observers, two scenarios each, on a synthetic subject or the character
    /// picked in setup.
    fn start(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        let setup = ctx.setup;
        let characters: Vec<String> = if cmd == Command::StartCharacter {
            match setup.characters.iter().next() {
                Some(c) => vec![c.clone()],
                None => return vec![Request::Flash("pick a character in Setup first (1, then space)".into())],
            }
        } else {
            Vec::new()
        };
        let subjects = crate::observer::draw(&crate::observer::Draw {
            characters: &characters,
            synthetic: usize::from(characters.is_empty()),
            latent: None,
            observers: &[
                (crate::observer::Context::Family, 1),
                (crate::observer::Context::Friend, 1),
                (crate::observer::Context::Workplace, 1),
            ],
            seed: setup.seed,
        });
        let plan = crate::observer::ObservePlan {
            subjects,
            scenarios: 2,
            turn_cap: 6,
            temperature: 1.0,
            subject_provider: setup.rpa.clone(),
            observer_provider: setup.rpa.clone(),
            self_report: crate::observer::SelfReportMode::Batched,
            seed: setup.seed,
            max_attempts: crate::method::judge::DEFAULT_ATTEMPTS,
        };
        vec![
            Request::Fresh(crate::tui::vocab::Screen::Observers),
            Request::Start {
                replay: None,
                follow: false,
            },
            Request::Flash("observer run started: 3 observers, 2 scenarios each".into()),
            Effect::StartObserve { plan }.into(),
        ]
    }
}

impl Observers {
    /// The view of a run about to start: its first subject and observer.
    pub fn fresh(&mut self) {
        self.subject = 0;
        self.observer = 0;
    }
}

/// The utterance of a turn's JSON while it streams (`{"utterance": "Hel` → `Hel`); the raw text
/// when it does not look like that JSON.
fn partial_utterance(text: &str) -> String {
    let Some(at) = text.find("\"utterance\"") else {
        return text.to_string();
    };
    let rest = &text[at + 11..];
    let Some(open) = rest.find('"') else {
        return String::new();
    };
    let mut out = String::new();
    let mut escaped = false;
    for c in rest[open + 1..].chars() {
        match (escaped, c) {
            (false, '\\') => escaped = true,
            (false, '"') => break,
            (true, 'n') => {
                out.push(' ');
                escaped = false;
            }
            (_, c) => {
                out.push(c);
                escaped = false;
            }
        }
    }
    out
}

/// The shown observer session's subjects with their dialogues and reports, as far as they go.
pub(crate) fn subject_results(ctx: &Ctx) -> Vec<SubjectResult> {
    let (Some(plan), Some(scale)) = (&ctx.run.observe, ctx.catalog.scale(SCALE)) else {
        return Vec::new();
    };
    let done = Done::from_steps(&ctx.run.steps);
    let name_of = |id: &str| ctx.catalog.character(id).map_or(id.to_string(), |c| c.name.clone());
    report::results(plan, &done, scale, name_of)
}

impl Component for Observers {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        vec![
            (ctx.key(Command::StartSynthetic), "synthetic run"),
            (ctx.key(Command::StartCharacter), "character run"),
            (ctx.key(Command::NextUnit), "subject"),
            (ctx.key(Command::Down), "observer"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let theme = ctx.theme;
        let subjects = subject_results(ctx);
        let Some(s) = subjects.get(self.subject % subjects.len().max(1)) else {
            render_empty(frame, area, ctx);
            return Hits::default();
        };
        let [header, body, bars_area] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(8), Constraint::Length(9)]).areas(area);
        // The subject's own calls (its self-report) whose reply was usable only after a re-ask.
        let reasked_calls = crate::observer::reasked_calls(&ctx.run.steps);
        let reasked_of = |observer: Option<&str>| reasked_calls.get(&(s.id.as_str(), observer)).map_or(0, |c| c.len());
        let own_reasked = match reasked_of(None) {
            0 => String::new(),
            1 => "   self-report: 1 reply usable after a re-ask".to_string(),
            n => format!("   self-report: {n} replies usable after a re-ask"),
        };
        frame.render_widget(
            Paragraph::new(Line::from(vec![
                Span::styled(
                    format!(" {} ", s.name),
                    theme.fg(theme.character).add_modifier(Modifier::BOLD),
                ),
                Span::raw(format!(
                    "({}, {})",
                    s.id,
                    if s.latent.is_some() { "synthetic" } else { "character" }
                )),
                Span::styled(
                    format!(
                        "   subject {}/{} ←/→ · observer ↑/↓",
                        self.subject % subjects.len() + 1,
                        subjects.len()
                    ),
                    theme.dim(),
                ),
                Span::styled(own_reasked, theme.dim()),
            ])),
            header,
        );

        let [cards_area, dialogue_area] = Layout::horizontal([Constraint::Length(40), Constraint::Min(30)]).areas(body);
        let selected = self.observer % s.observers.len().max(1);
        // The observers whose last step is a failure (a resume asks again), and why.
        let mut failed: BTreeMap<&str, &str> = BTreeMap::new();
        for step in &ctx.run.steps {
            use crate::observer::Step;
            match step {
                Step::Failed {
                    subject,
                    observer: Some(o),
                    error,
                    ..
                } if *subject == s.id => {
                    failed.insert(o, error);
                }
                Step::Relationship { subject, observer, .. }
                | Step::Scenarios { subject, observer, .. }
                | Step::Turn { subject, observer, .. }
                | Step::Report { subject, observer, .. }
                    if *subject == s.id =>
                {
                    failed.remove(observer.as_str());
                }
                _ => {}
            }
        }
        // Each observer's calls whose reply was usable only after a re-ask.
        let reasked: BTreeMap<&str, usize> = s
            .observers
            .iter()
            .map(|o| (o.id.as_str(), reasked_of(Some(&o.id))))
            .filter(|(_, n)| *n > 0)
            .collect();
        render_cards(frame, cards_area, theme, s, selected, (&failed, &reasked));
        let top = self.render_dialogues(frame, dialogue_area, ctx, s, selected);
        self.render_traits(frame, bars_area, ctx, s);
        Hits {
            tail_top: Some(top),
            ..Hits::default()
        }
    }
}

/// The observers screen without an observer run.
fn render_empty(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let theme = ctx.theme;
    let b = block(" Observers ", false, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    frame.render_widget(
        Paragraph::new(vec![
            // The tour's last step has asked for the observer sample; it is on its way.
            Line::raw(if ctx.demo.is_some_and(|d| d.step + 1 == DEMO_STEPS.len()) {
                "Opening the observer sample…"
            } else {
                "No observer run open."
            }),
            Line::styled(
                "s starts one with a synthetic subject, c with the character picked in Setup; \
                     sessions of `incharacter observe` open from Sessions (5).",
                theme.dim(),
            ),
        ])
        .wrap(Wrap { trim: false }),
        inner,
    );
}

/// The subject's observers as cards: who, in which context, how far, and their relationship.
fn render_cards(
    frame: &mut Frame,
    area: Rect,
    theme: &Theme,
    s: &SubjectResult,
    selected: usize,
    (failed, reasked): (&BTreeMap<&str, &str>, &BTreeMap<&str, usize>),
) {
    let b = block(format!(" Observers ({}) ", s.observers.len()), false, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let width = inner.width as usize;
    let mut lines = Vec::new();
    // The selected card's lines: kept in view when the cards are taller than the pane.
    let mut card = (0, 0);
    for (i, o) in s.observers.iter().enumerate() {
        if i == selected {
            card.0 = lines.len();
        }
        let status = if o.report.is_some() {
            Span::styled(" reported", theme.fg(theme.positive))
        } else if failed.contains_key(o.id.as_str()) {
            Span::styled(" failed", theme.fg(theme.error))
        } else {
            let turns: usize = o.scenarios.iter().map(|sc| sc.dialogue.len()).sum();
            let s = if turns == 1 { "" } else { "s" };
            Span::styled(format!(" {turns} turn{s}"), theme.fg(theme.streaming))
        };
        let style = if i == selected { theme.selected() } else { theme.base() };
        lines.push(Line::from(vec![
            Span::styled(
                pad(
                    &format!("{} {} · {}", o.id, o.profile.name, o.context.name()),
                    width.saturating_sub(10),
                ),
                style,
            ),
            status,
        ]));
        if let (None, Some(why)) = (&o.report, failed.get(o.id.as_str())) {
            // The last problem is the cause: "no usable reply after …; last problem: HTTP 500 …".
            let why = why.rsplit("last problem: ").next().unwrap_or(why);
            for l in wrap_at_most(&crate::text::terminal_safe(why), width.saturating_sub(2), 3) {
                lines.push(Line::styled(format!("  {l}"), theme.fg(theme.error)));
            }
        }
        if let Some(n) = reasked.get(o.id.as_str()) {
            let replies = if *n == 1 { "reply" } else { "replies" };
            lines.push(Line::styled(
                format!("  {n} {replies} usable after a re-ask"),
                theme.dim(),
            ));
        }
        if let Some(r) = &o.relationship {
            for l in wrap_at_most(r, width.saturating_sub(2), 2) {
                lines.push(Line::styled(format!("  {l}"), theme.dim()));
            }
        }
        if i == selected {
            card.1 = lines.len();
        }
    }
    frame.render_widget(
        Paragraph::new(lines).scroll((card_top(card, inner.height as usize), 0)),
        inner,
    );
}

/// The first line shown of a list of cards `height` lines high, so that the card on lines
/// `start..end` is in view (its top, when it is taller than the pane).
fn card_top((start, end): (usize, usize), height: usize) -> u16 {
    let top = end.saturating_sub(height).min(start);
    u16::try_from(top).unwrap_or(u16::MAX)
}

impl Observers {
    /// The selected observer's dialogues, newest at the bottom; returns the scroll's top.
    fn render_dialogues(&self, frame: &mut Frame, area: Rect, ctx: &Ctx, s: &SubjectResult, selected: usize) -> u16 {
        let theme = ctx.theme;
        let b = block(" Dialogues ", false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let width = inner.width as usize;
        let mut lines: Vec<Line> = Vec::new();
        if let Some(o) = s.observers.get(selected) {
            for (i, sc) in o.scenarios.iter().enumerate() {
                lines.push(Line::styled(format!("Scenario {}", i + 1), theme.title()));
                for l in wrap(&sc.text, width.saturating_sub(2)) {
                    lines.push(Line::styled(format!("  {l}"), theme.dim()));
                }
                for t in &sc.dialogue {
                    let (name, color) = match t.speaker {
                        Side::Observer => (o.profile.name.as_str(), theme.experimenter),
                        Side::Subject => (s.name.as_str(), theme.character),
                    };
                    let end = if t.end { " ⏎" } else { "" };
                    lines.push(Line::styled(
                        format!("{name}{end}"),
                        theme.fg(color).add_modifier(Modifier::BOLD),
                    ));
                    for l in wrap(&t.utterance, width.saturating_sub(2)) {
                        lines.push(Line::raw(format!("  {l}")));
                    }
                }
                lines.push(Line::raw(""));
            }
            if let Some((purpose, text)) = &ctx.run.streaming_turn
                && purpose.starts_with(&format!("dialogue {} {} ", s.id, o.id))
            {
                lines.push(Line::styled(
                    format!("… {}", fit(purpose, width)),
                    theme.fg(theme.streaming),
                ));
                for l in wrap(&format!("{}▌", partial_utterance(text)), width.saturating_sub(2)) {
                    lines.push(Line::raw(format!("  {l}")));
                }
            }
        }
        let height = inner.height as usize;
        let (start, end, top) = self.scroll.window(lines.len(), height, true);
        frame.render_widget(Paragraph::new(lines[start..end].to_vec()), inner);
        top
    }

    /// Traits: latent, self, observers, aggregate on 0–1.
    fn render_traits(&self, frame: &mut Frame, area: Rect, ctx: &Ctx, s: &SubjectResult) {
        let theme = ctx.theme;
        // A character subject's InCharacter interview on the same questionnaire, when a session has one.
        let interview = s.latent.is_none().then(|| self.interviews.get(&s.id)).flatten();
        let title = match interview {
            Some((session, _)) => {
                format!(" Traits (0–1): interview ER_batch ({session}) · self · each observer · aggregate ")
            }
            None if s.latent.is_some() => " Traits (0–1): latent · self · each observer · aggregate ".to_string(),
            None => " Traits (0–1): self · each observer · aggregate (no IPIP-50 interview of this character yet) "
                .to_string(),
        };
        // Cut where the box ends, with an ellipsis, rather than mid-word at the border.
        let b = block(fit(&title, usize::from(area.width.saturating_sub(2))), false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let scale = ctx.catalog.scale(SCALE).expect("IPIP-50 is bundled");
        let norm = |v: f64| ((v - 1.0) / 4.0).clamp(0.0, 1.0);
        let cell = |v: Option<f64>| v.map_or("   –".to_string(), |v| format!("{:>4.2}", v));
        let mut lines = vec![Line::styled(
            format!(
                "{} {:>6} {:>6} {} {:>9}",
                pad("trait", 22),
                if s.latent.is_some() { "latent" } else { "ER" },
                "self",
                pad(
                    &s.observers
                        .iter()
                        .map(|o| format!("{:>4}", o.id))
                        .collect::<Vec<_>>()
                        .join(" "),
                    s.observers.len() * 5
                ),
                "aggregate"
            ),
            theme.dim(),
        )];
        for d in &scale.dimensions {
            let latent = match (&s.latent, interview) {
                (Some(l), _) => l.get(&d.name).map(|v| (f64::from(*v) - 1.0) / 5.0),
                (None, Some((_, scores))) => scores.get(&d.name).map(|v| norm(*v)),
                (None, None) => None,
            };
            let own = s.self_report.as_ref().and_then(|r| r.1.get(&d.name)).map(|v| norm(*v));
            let each: Vec<String> = s
                .observers
                .iter()
                .map(|o| cell(o.report.as_ref().and_then(|r| r.1.get(&d.name)).map(|v| norm(*v))))
                .collect();
            let agg = s.aggregate.get(&d.name).map(|v| norm(*v));
            let bar = agg.map_or(String::new(), |v| "█".repeat((v * 12.0).round() as usize));
            lines.push(Line::from(vec![
                Span::raw(format!("{} ", pad(&d.name, 22))),
                Span::styled(format!("{:>6} ", cell(latent)), theme.fg(theme.label_annotation)),
                Span::styled(format!("{:>6} ", cell(own)), theme.fg(theme.label_pdb)),
                Span::raw(format!("{} ", pad(&each.join(" "), s.observers.len() * 5))),
                Span::styled(
                    format!("{:>9} ", cell(agg)),
                    theme.fg(theme.measured).add_modifier(Modifier::BOLD),
                ),
                Span::styled(bar, theme.fg(theme.measured)),
            ]));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_selected_card_is_kept_in_view() {
        use super::card_top;
        assert_eq!(card_top((0, 4), 20), 0, "all fit");
        assert_eq!(card_top((40, 44), 20), 24, "the last card at the bottom");
        assert_eq!(card_top((10, 40), 20), 10, "a card taller than the pane: its top");
    }

    use super::partial_utterance;

    #[test]
    fn the_streaming_utterance_is_read_out_of_its_json() {
        assert_eq!(partial_utterance("{\"utterance\": \"Noodles ag"), "Noodles ag");
        assert_eq!(
            partial_utterance("{\"utterance\": \"Say \\\"hi\\\"\", \"end\": tr"),
            "Say \"hi\""
        );
        assert_eq!(partial_utterance("{\"utter"), "{\"utter");
        assert_eq!(partial_utterance("{\"utterance\":"), "");
    }
}
