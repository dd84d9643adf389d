//! The subject task, the annotate screen's task for an observer session: one subject at a time (or one
//! subject as one observer saw it), all its dialogues grouped by observer and scenario with each
//! observer's context and relationship, a rating per Big Five trait on the reports' 1–5 scale (type it,
//! decimals allowed, then enter; x = cannot tell), blind until the unit is rated (v reveals), and the
//! annotator's live agreement with the self-reports and the observers.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};
use serde_json::Value;

use super::{Annotate, Revealed, SAMPLE_READ_ONLY, answer_text};
use crate::annotation::subjects::{self, RANGE};
use crate::annotation::{Annotation, Answer, Case, Refusal};
use crate::observer::report::SubjectResult;
use crate::observer::{SCALE, Side};
use crate::tui::keys::{Command, Key, KeyName};
use crate::tui::screens::observers::subject_results;
use crate::tui::screens::{Ctx, Hits, Request};
use crate::tui::vocab::Effect;
use crate::tui::widgets::{block, fit, pad};
use crate::tui::wrap::wrap;

/// Where the annotator is in the subject task.
#[derive(Debug, Clone, Default)]
pub struct SubjectTask {
    /// The unit shown: a subject, or (per observer) a subject as one observer saw it, in seeded order.
    pub unit: usize,
    /// The trait being rated.
    pub trait_index: usize,
    /// Rate per observer instead of per subject.
    pub per_observer: bool,
    /// Lines scrolled down the dialogues.
    pub scroll: u16,
}

/// A unit of the task: the subject's id, and the observer's when rating per observer.
pub type Unit = (String, Option<String>);

impl Annotate {
    /// The units in the session's seeded order.
    fn units(&self, ctx: &Ctx) -> Vec<Unit> {
        let (Some(plan), Some(scale)) = (&ctx.run.observe, ctx.catalog.scale(SCALE)) else {
            return Vec::new();
        };
        let mut out: Vec<Unit> = Vec::new();
        for c in subjects::cases(plan, scale, self.subjects.per_observer) {
            let unit = (c.character, c.observer);
            if out.last() != Some(&unit) {
                out.push(unit);
            }
        }
        out
    }

    fn traits(ctx: &Ctx) -> Vec<String> {
        ctx.catalog.scale(SCALE).map(subjects::traits).unwrap_or_default()
    }

    fn unit_case(unit: &Unit, trait_: &str) -> Case {
        subjects::case(&unit.0, unit.1.as_deref(), trait_)
    }

    /// This annotator's answer to a case.
    fn mine(&self, case: &Case) -> Option<&Annotation> {
        self.answers.get(&self.annotator)?.get(case)
    }

    /// Whether every trait of `unit` has this annotator's answer ("x" included).
    fn rated(&self, unit: &Unit, traits: &[String]) -> bool {
        traits.iter().all(|t| self.mine(&Self::unit_case(unit, t)).is_some())
    }

    /// Puts the task on the first unit (from `from`, wrapping) with a trait not rated yet, on that trait.
    pub(super) fn subject_unrated_from(&mut self, from: usize, ctx: &Ctx) -> bool {
        let (units, traits) = (self.units(ctx), Self::traits(ctx));
        for k in 0..units.len() {
            let i = (from + k) % units.len();
            if let Some(t) = traits
                .iter()
                .position(|t| self.mine(&Self::unit_case(&units[i], t)).is_none())
            {
                self.subjects.unit = i;
                self.subjects.trait_index = t;
                self.subjects.scroll = 0;
                return true;
            }
        }
        false
    }

    /// Digits and '.' build a rating, enter gives it, x answers "cannot tell". `None`: the key is left
    /// to its command.
    pub(super) fn subject_key(&mut self, key: Key, ctx: &Ctx) -> Option<Vec<Request>> {
        match key.code {
            KeyName::Char(c) if c.is_ascii_digit() || (c == '.' && !self.typed.contains('.')) => {
                if self.typed.len() < 6 {
                    self.typed.push(c);
                }
                Some(Vec::new())
            }
            KeyName::Char('x') | KeyName::Char('X') => {
                self.typed.clear();
                Some(self.subject_answer(Answer::Refused(Refusal::X), ctx))
            }
            KeyName::Backspace => {
                self.typed.pop();
                Some(Vec::new())
            }
            KeyName::Enter if !self.typed.is_empty() => {
                let typed = std::mem::take(&mut self.typed);
                let (min, max) = RANGE;
                Some(match typed.parse::<f64>() {
                    Ok(v) if (min..=max).contains(&v) => self.subject_answer(Answer::Value(v), ctx),
                    _ => vec![Request::Flash(format!("{typed} is not a rating from {min} to {max}"))],
                })
            }
            _ => None,
        }
    }

    fn subject_answer(&mut self, value: Answer, ctx: &Ctx) -> Vec<Request> {
        let (units, traits) = (self.units(ctx), Self::traits(ctx));
        let (Some(unit), Some(t), Some(dir)) = (
            units.get(self.subjects.unit),
            traits.get(self.subjects.trait_index),
            ctx.session_dir,
        ) else {
            return vec![Request::Flash(
                "open an observer session to rate its subjects (5, then enter)".into(),
            )];
        };
        if ctx.shown_session_is_sample() {
            return vec![Request::Flash(SAMPLE_READ_ONLY.into())];
        }
        let annotation = Annotation {
            annotator: self.annotator.clone(),
            case: Self::unit_case(unit, t),
            value,
            note: None,
            at: crate::journal::now_rfc3339(),
        };
        self.answers
            .entry(annotation.annotator.clone())
            .or_default()
            .insert(annotation.case.clone(), annotation.clone());
        // On to the next trait this unit lacks; a rated unit stays, revealed, until → moves on.
        if let Some(next) = (0..traits.len())
            .map(|k| (self.subjects.trait_index + 1 + k) % traits.len())
            .find(|&i| self.mine(&Self::unit_case(unit, &traits[i])).is_none())
        {
            self.subjects.trait_index = next;
        }
        vec![
            Effect::Annotate {
                dir: dir.to_path_buf(),
                annotation,
            }
            .into(),
        ]
    }

    pub(super) fn subject_command(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        let (units, traits) = (self.units(ctx).len(), Self::traits(ctx).len());
        let task = &mut self.subjects;
        match cmd {
            Command::NextUnit => {
                task.unit = (task.unit + 1).min(units.saturating_sub(1));
                (task.trait_index, task.scroll) = (0, 0);
            }
            Command::PrevUnit => {
                task.unit = task.unit.saturating_sub(1);
                (task.trait_index, task.scroll) = (0, 0);
            }
            Command::Down => task.trait_index = (task.trait_index + 1).min(traits.saturating_sub(1)),
            Command::Up => task.trait_index = task.trait_index.saturating_sub(1),
            Command::PageDown | Command::ScrollDown => task.scroll = task.scroll.saturating_add(10),
            Command::PageUp | Command::ScrollUp => task.scroll = task.scroll.saturating_sub(10),
            Command::Top => task.scroll = 0,
            Command::Reveal => {
                let unit = self.units(ctx).get(self.subjects.unit).cloned().map(Revealed::Unit);
                self.reveal = if self.reveal == unit { None } else { unit };
            }
            Command::NextPane | Command::PrevPane => {
                task.per_observer = !task.per_observer;
                (task.unit, task.trait_index, task.scroll) = (0, 0, 0);
                let from = 0;
                self.subject_unrated_from(from, ctx);
                return vec![Request::Flash(
                    if self.subjects.per_observer {
                        "rating each subject as one observer saw it"
                    } else {
                        "rating each subject from all its dialogues"
                    }
                    .into(),
                )];
            }
            Command::Skip => {
                let from = self.subjects.unit + 1;
                if !self.subject_unrated_from(from, ctx) {
                    return vec![Request::Flash("every subject is rated".into())];
                }
            }
            _ => {}
        }
        Vec::new()
    }

    pub(super) fn subject_hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        vec![
            ("1–5 ⏎".into(), "rate"),
            ("x".into(), "can't tell"),
            (ctx.key(Command::NextUnit), "subject"),
            (ctx.key(Command::Reveal), "reveal"),
            (ctx.key(Command::NextPane), "per observer"),
        ]
    }

    pub(super) fn render_subjects(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let theme = ctx.theme;
        let (units, traits) = (self.units(ctx), Self::traits(ctx));
        let results = subject_results(ctx);
        let Some(unit) = units.get(self.subjects.unit.min(units.len().saturating_sub(1))) else {
            let b = block(" Annotate ", false, theme);
            let inner = b.inner(area);
            frame.render_widget(b, area);
            frame.render_widget(Paragraph::new("This observer session has no subjects yet."), inner);
            return Hits::default();
        };
        let Some(subject) = results.iter().find(|s| s.id == unit.0) else {
            return Hits::default();
        };
        let all: Vec<Case> = units
            .iter()
            .flat_map(|u| traits.iter().map(|t| Self::unit_case(u, t)))
            .collect();
        let done = all.iter().filter(|c| self.mine(c).is_some()).count();
        let [header, body, progress] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(8), Constraint::Length(1)]).areas(area);
        let index = self.subjects.unit.min(units.len() - 1);
        let mode = match &unit.1 {
            None => "per subject".to_string(),
            Some(o) => format!("per observer ({o})"),
        };
        frame.render_widget(
            Paragraph::new(Line::from(vec![
                self.badge(ctx),
                Span::raw(format!(
                    " subject task · {mode} · {} {}/{} ",
                    if unit.1.is_some() { "unit" } else { "subject" },
                    index + 1,
                    units.len()
                )),
                // The keys beyond the footer's, when they fit whole.
                Span::styled(
                    if area.width >= 120 {
                        "tab per subject/observer · u unrated · pgup/pgdn scroll"
                    } else {
                        ""
                    },
                    theme.dim(),
                ),
            ])),
            header,
        );
        // The panel keeps its 46 columns (every trait name and value whole); the dialogues take the rest.
        let [dialogue_area, panel_area] = Layout::horizontal([Constraint::Min(30), Constraint::Length(46)]).areas(body);
        self.render_dialogues(frame, dialogue_area, ctx, subject, unit.1.as_deref());
        let ratings = self.rating_lines(ctx, subject, unit, &traits, panel_area.width.saturating_sub(2) as usize);
        let [ratings_area, agreement_area] =
            Layout::vertical([Constraint::Length(ratings.len() as u16 + 2), Constraint::Min(4)]).areas(panel_area);
        let b = block(" Your ratings (1–5) ", false, theme);
        let inner = b.inner(ratings_area);
        frame.render_widget(b, ratings_area);
        frame.render_widget(Paragraph::new(ratings), inner);
        self.render_agreement(frame, agreement_area, ctx, &results);
        frame.render_widget(
            Gauge::default()
                .gauge_style(theme.fg(theme.positive))
                .ratio(done as f64 / all.len().max(1) as f64)
                .label(format!("{done}/{} ratings by {}", all.len(), self.annotator)),
            progress,
        );
        Hits::default()
    }

    /// The subject's dialogues, grouped by observer (context, relationship) and scenario.
    fn render_dialogues(&self, frame: &mut Frame, area: Rect, ctx: &Ctx, s: &SubjectResult, only: Option<&str>) {
        let theme = ctx.theme;
        let b = block(format!(" {} ({}) · dialogues ", s.name, s.id), true, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let width = inner.width as usize;
        let mut lines: Vec<Line> = Vec::new();
        for o in s.observers.iter().filter(|o| only.is_none_or(|id| id == o.id)) {
            lines.push(Line::styled(
                format!("{} · {} · {}", o.id, o.profile.name, o.context.name()),
                theme.title(),
            ));
            if let Some(r) = &o.relationship {
                for l in wrap(r, width.saturating_sub(2)) {
                    lines.push(Line::styled(format!("  {l}"), theme.dim()));
                }
            }
            for (i, sc) in o.scenarios.iter().enumerate() {
                lines.push(Line::styled(
                    format!("  Scenario {}", i + 1),
                    theme.fg(theme.accent).add_modifier(Modifier::BOLD),
                ));
                for l in wrap(&sc.text, width.saturating_sub(4)) {
                    lines.push(Line::styled(format!("    {l}"), theme.dim()));
                }
                for t in &sc.dialogue {
                    let (name, color) = match t.speaker {
                        Side::Observer => (o.profile.name.as_str(), theme.experimenter),
                        Side::Subject => (s.name.as_str(), theme.character),
                    };
                    lines.push(Line::styled(
                        format!("  {name}"),
                        theme.fg(color).add_modifier(Modifier::BOLD),
                    ));
                    for l in wrap(&t.utterance, width.saturating_sub(4)) {
                        lines.push(Line::raw(format!("    {l}")));
                    }
                }
            }
            lines.push(Line::raw(""));
        }
        let top = (self.subjects.scroll as usize).min(lines.len().saturating_sub(inner.height as usize));
        frame.render_widget(Paragraph::new(lines.split_off(top.min(lines.len()))), inner);
    }

    /// The unit's ratings, the one being typed, and once rated (or revealed) what the others said, as
    /// lines `width` wide.
    fn rating_lines(
        &self,
        ctx: &Ctx,
        s: &SubjectResult,
        unit: &Unit,
        traits: &[String],
        width: usize,
    ) -> Vec<Line<'static>> {
        let theme = ctx.theme;
        let shown = self.rated(unit, traits) || self.reveal.as_ref() == Some(&Revealed::Unit(unit.clone()));
        let observer = unit.1.as_ref().and_then(|o| s.observers.iter().find(|x| &x.id == o));
        // One column of the marker, 21 of trait (the longest, Intellect/Imagination), 6 for yours and 5
        // for each revealed value: 43 of the panel's 44.
        let header: Vec<&str> = match (shown, observer) {
            (false, _) => vec![],
            (true, Some(o)) => vec![o.id.as_str(), "self"],
            (true, None) if s.latent.is_some() => vec!["self", "obs", "lat"],
            (true, None) => vec!["self", "obs"],
        };
        let mut lines = vec![Line::styled(
            format!(
                " {} {:>5}{}",
                pad("trait", 21),
                "you",
                header.iter().map(|h| format!(" {h:>4}")).collect::<String>()
            ),
            theme.dim(),
        )];
        let cell = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.2}"));
        for (i, t) in traits.iter().enumerate() {
            let here = i == self.subjects.trait_index;
            let yours = if here && !self.typed.is_empty() {
                format!("{}▏", self.typed)
            } else {
                answer_text(self.mine(&Self::unit_case(unit, t)).map(|a| a.value))
            };
            let mut spans = vec![
                Span::styled(
                    format!("{}{}", if here { "▸" } else { " " }, pad(t, 21)),
                    if here { theme.selected() } else { theme.base() },
                ),
                Span::styled(
                    format!(" {yours:>5}"),
                    theme.fg(theme.accent).add_modifier(Modifier::BOLD),
                ),
            ];
            if shown {
                let own = s.self_report.as_ref().and_then(|r| r.1.get(t).copied());
                let others = match observer {
                    Some(o) => vec![o.report.as_ref().and_then(|r| r.1.get(t).copied()), own],
                    None => vec![own, s.aggregate.get(t).copied()],
                };
                let mut text: String = others.into_iter().map(|v| format!(" {:>4}", cell(v))).collect();
                if observer.is_none() && s.latent.is_some() {
                    // Latent levels are whole (1–6).
                    let level = s.latent.as_ref().and_then(|l| l.get(t));
                    text.push_str(&format!(" {:>4}", level.map_or("–".to_string(), u8::to_string)));
                }
                spans.push(Span::styled(text, theme.fg(theme.measured)));
            }
            lines.push(Line::from(spans));
        }
        lines.push(Line::raw(""));
        for l in wrap("type 1–5 (3.5 too), enter · x cannot tell · ↑/↓ trait", width) {
            lines.push(Line::styled(l, theme.dim()));
        }
        if !shown {
            for l in wrap(
                "The self-report, the observers' reports and the latent levels stay hidden until you have rated this subject (v reveals).",
                width,
            ) {
                lines.push(Line::styled(l, theme.dim()));
            }
        } else if s.latent.is_some() && observer.is_none() {
            for l in wrap("lat: the level the subject was built from (1–6)", width) {
                lines.push(Line::styled(l, theme.dim()));
            }
        }
        lines
    }

    /// This annotator's agreement so far, per trait and context, and with the other annotators.
    fn render_agreement(&self, frame: &mut Frame, area: Rect, ctx: &Ctx, results: &[SubjectResult]) {
        let theme = ctx.theme;
        let b = block(" Agreement so far ", false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let Some(scale) = ctx.catalog.scale(SCALE) else {
            return;
        };
        let report = subjects::report(&self.answers, results, scale);
        let me = &report["annotators"][&self.annotator];
        if me.is_null() {
            frame.render_widget(
                Paragraph::new(Line::styled("no ratings by you yet", theme.dim())),
                inner,
            );
            return;
        }
        let f = |v: &Value| v.as_f64().map_or("–".to_string(), |x| format!("{x:.2}"));
        let mut lines = vec![Line::styled(
            format!(
                "{} {:>2} {:>5} {:>5} {:>5} {:>5}",
                pad("trait", 13),
                "n",
                "ρself",
                "ρobs",
                "|Δ|s",
                "|Δ|o"
            ),
            theme.dim(),
        )];
        for (t, v) in me["traits"].as_object().into_iter().flatten() {
            lines.push(Line::raw(format!(
                "{} {:>2} {:>5} {:>5} {:>5} {:>5}",
                pad(&fit(t, 13), 13),
                v["n"].as_u64().unwrap_or(0),
                f(&v["spearman_self"]),
                f(&v["spearman_observers"]),
                f(&v["mean_abs_diff_self"]),
                f(&v["mean_abs_diff_observers"])
            )));
        }
        // Per context: the mean over traits of ρ with that context's observers.
        let contexts: Vec<String> = me["contexts"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(c, traits)| {
                let rhos: Vec<f64> = traits
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(_, v)| v["spearman_observers"].as_f64())
                    .collect();
                let mean = crate::domain::stats::mean(&rhos);
                format!("{c} {}", mean.map_or("–".to_string(), |m| format!("{m:.2}")))
            })
            .collect();
        if !contexts.is_empty() {
            for l in wrap(
                &format!("mean ρ by context: {}", contexts.join(" · ")),
                inner.width as usize,
            ) {
                lines.push(Line::styled(l, theme.dim()));
            }
        }
        if let Some(po) = me["per_observer"].as_object() {
            let n: u64 = po.values().filter_map(|v| v["n"].as_u64()).sum();
            let rhos: Vec<f64> = po.values().filter_map(|v| v["spearman"].as_f64()).collect();
            lines.push(Line::styled(
                format!(
                    "per observer: {n} ratings, mean ρ {}",
                    crate::domain::stats::mean(&rhos).map_or("–".to_string(), |m| format!("{m:.2}"))
                ),
                theme.dim(),
            ));
        }
        for pair in report["inter_annotator"]["pairs"].as_array().into_iter().flatten() {
            let other = if pair["a"] == self.annotator.as_str() {
                &pair["b"]
            } else {
                &pair["a"]
            };
            if pair["a"] != self.annotator.as_str() && pair["b"] != self.annotator.as_str() {
                continue;
            }
            lines.push(Line::raw(format!(
                "with {}: n={} ρ {} QWK {}",
                other.as_str().unwrap_or("?"),
                pair["n"],
                f(&pair["spearman"]),
                f(&pair["qwk"])
            )));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
