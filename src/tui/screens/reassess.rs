//! The "re-assess with…" dialog, opened over Sessions or the Inspector on a recorded interview
//! session: it picks what a re-assessment changes (the judge, the prompt set, the methods, the judge's
//! temperature, written or expected scores) and starts it as a new session in the data dir, which streams on Live like any run.
//! The parent, a sample included, is only read. Choices the parent cannot serve (a method whose
//! interviews it did not ask, a prompt folder with a bad file) are shown with the reason and never
//! started.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{Component, Ctx, Hits, Request, start_run};
use crate::method::Method;
use crate::study::interview::reassess::{self, Reassess, ReassessError};
use crate::study::{Event, RunPlan, Study};
use crate::templates::PromptSet;
use crate::tui::keys::Command;
use crate::tui::vocab::ProviderStatus;
use crate::tui::widgets::{centered, fit, pad, popup};
use crate::tui::wrap::wrap;

/// The judge temperatures offered (the config's own is added when it is none of them).
pub const TEMPERATURES: [f32; 4] = [0.0, 0.2, 0.7, 1.0];

/// What the dialog is opened on, as read from disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// The id the re-assessment records as its parent.
    pub parent: String,
    pub events: Vec<Event>,
    /// The prompt sets of `<data dir>/prompts/`, by folder name, or why each cannot be used.
    pub sets: Vec<(String, Result<PromptSet, String>)>,
}

/// A method as the dialog offers it.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodChoice {
    pub method: Method,
    /// Why it cannot be chosen (the parent did not ask its interviews).
    pub refused: Option<String>,
    pub chosen: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    Judge,
    Prompts,
    Temperature,
    Scores,
    Method(usize),
}

/// What a command did to the dialog.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Open,
    /// The dialog is done (cancelled, or a run started): the app applies these and closes it.
    Closed(Vec<Request>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReassessDialog {
    pub parent: String,
    /// The session whose interviews these are (the parent's own parent, for a re-assessment).
    interviews: String,
    events: Vec<Event>,
    /// Provider names, each with the problem that keeps it from serving.
    pub judges: Vec<(String, Option<String>)>,
    pub judge: usize,
    /// `bundled` first, then the folders.
    pub sets: Vec<(String, Result<PromptSet, String>)>,
    pub set: usize,
    pub temperatures: Vec<f32>,
    pub temperature: usize,
    /// Score by the judge's expected options (`assess --expected-scores`).
    pub expected: bool,
    pub methods: Vec<MethodChoice>,
    cursor: usize,
    /// Why the last start was refused.
    pub error: Option<String>,
}

impl ReassessDialog {
    /// The dialog on `offer`, with the judge `judge` and the temperature `temperature` chosen (the
    /// config's) and the parent's methods; a session that cannot be re-assessed is refused.
    pub fn open(
        offer: Offer,
        providers: &[ProviderStatus],
        judge: &str,
        temperature: f32,
    ) -> Result<ReassessDialog, String> {
        let (own, available) = reassess::methods(&offer.parent, &offer.events).map_err(|e| match e {
            // Said short: the flash line has no room for the session's id.
            ReassessError::NotInterviews { kind, .. } => {
                format!("only interview sessions can be re-assessed (this one: {kind})")
            }
            e => e.to_string(),
        })?;
        let interviews = crate::study::Interviews::plan_of(&offer.events)
            .and_then(|p| p.parent.clone())
            .unwrap_or_else(|| offer.parent.clone());
        if providers.is_empty() {
            return Err("no provider is configured to judge with (config.toml [[providers]])".into());
        }
        let methods = Method::ALL
            .into_iter()
            .map(|method| MethodChoice {
                method,
                refused: (!available.contains(&method)).then(|| {
                    format!(
                        "not asked: the parent has no {} interviews",
                        method.query_style().name()
                    )
                }),
                chosen: own.contains(&method),
            })
            .collect();
        let mut temperatures = TEMPERATURES.to_vec();
        if !temperatures.contains(&temperature) {
            temperatures.push(temperature);
            temperatures.sort_by(f32::total_cmp);
        }
        let mut sets = vec![(crate::templates::BUNDLED.to_string(), Ok(PromptSet::new()))];
        sets.extend(offer.sets);
        Ok(ReassessDialog {
            interviews,
            parent: offer.parent,
            events: offer.events,
            judges: providers.iter().map(|p| (p.name.clone(), p.problem.clone())).collect(),
            judge: providers.iter().position(|p| p.name == judge).unwrap_or(0),
            sets,
            set: 0,
            temperature: temperatures.iter().position(|t| *t == temperature).unwrap_or(0),
            temperatures,
            expected: false,
            methods,
            cursor: 0,
            error: None,
        })
    }

    fn rows(&self) -> Vec<Row> {
        let mut rows = vec![Row::Judge, Row::Prompts, Row::Temperature, Row::Scores];
        rows.extend((0..self.methods.len()).map(Row::Method));
        rows
    }

    /// The methods chosen, in the method's order.
    pub fn chosen(&self) -> Vec<Method> {
        self.methods.iter().filter(|m| m.chosen).map(|m| m.method).collect()
    }

    /// The re-assessment as chosen, and notes on what of the prompt set it does not use.
    pub fn plan(&self) -> Result<(RunPlan, Vec<String>), String> {
        let (name, set) = &self.sets[self.set];
        let folder = set
            .clone()
            .map_err(|e| format!("the prompt set {} cannot be used: {e}", name))?;
        let methods = self.chosen();
        if methods.is_empty() {
            return Err("choose at least one method (space)".into());
        }
        let change = Reassess {
            methods: Some(methods),
            judge: self.judges[self.judge].0.clone(),
            judge_temperature: self.temperatures[self.temperature],
            expected_scores: self.expected,
        };
        let mut plan = reassess::plan(&self.parent, &self.events, &change).map_err(|e| e.to_string())?;
        let notes = reassess::with_prompts(&mut plan, folder);
        Ok((plan, notes))
    }

    /// Up/down move between the rows, left/right (and space) change the row's choice, enter starts,
    /// esc cancels.
    pub fn command(&mut self, cmd: Command) -> Outcome {
        let rows = self.rows();
        let step = |i: &mut usize, len: usize, delta: isize| {
            *i = (*i as isize + delta).rem_euclid(len.max(1) as isize) as usize;
        };
        let delta = match cmd {
            Command::Up => {
                self.cursor = self.cursor.saturating_sub(1);
                return Outcome::Open;
            }
            Command::Down => {
                self.cursor = (self.cursor + 1).min(rows.len() - 1);
                return Outcome::Open;
            }
            Command::Back => return Outcome::Closed(vec![Request::Flash("re-assessment cancelled".into())]),
            Command::Select | Command::Start => return self.start(),
            Command::Toggle | Command::NextUnit => 1,
            Command::PrevUnit => -1,
            _ => return Outcome::Open,
        };
        self.error = None;
        match rows[self.cursor] {
            Row::Judge => step(&mut self.judge, self.judges.len(), delta),
            Row::Prompts => step(&mut self.set, self.sets.len(), delta),
            Row::Temperature => step(&mut self.temperature, self.temperatures.len(), delta),
            Row::Scores => self.expected = !self.expected,
            Row::Method(i) => {
                let m = &mut self.methods[i];
                match &m.refused {
                    Some(reason) => self.error = Some(format!("{}: {reason}", m.method.name())),
                    None => m.chosen = !m.chosen,
                }
            }
        }
        Outcome::Open
    }

    fn start(&mut self) -> Outcome {
        match self.plan() {
            Ok((plan, notes)) => {
                let name = reassess::default_name(&self.parent, &self.events, &plan.judge);
                let mut requests = start_run(plan, Some(name));
                requests.extend(notes.into_iter().map(Request::Flash));
                Outcome::Closed(requests)
            }
            Err(e) => {
                self.error = Some(e);
                Outcome::Open
            }
        }
    }
}

impl Component for ReassessDialog {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        vec![
            (ctx.key(Command::Select), "start"),
            (ctx.key(Command::Back), "cancel"),
            (ctx.key(Command::Toggle), "change"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let theme = ctx.theme;
        let width = area.width.saturating_sub(4).min(76);
        let text_width = usize::from(width.saturating_sub(2));
        let value_width = text_width.saturating_sub(18);
        let mut lines = vec![
            Line::raw(fit(&format!(" the interviews of {}", self.interviews), text_width)),
            Line::styled(
                " only judge requests are sent; the answers stay the parent's",
                theme.dim(),
            ),
            Line::raw(""),
        ];
        let rows = self.rows();
        for (i, row) in rows.iter().enumerate() {
            let mark = if i == self.cursor { "›" } else { " " };
            let cursor_style = if i == self.cursor {
                theme.selected()
            } else {
                theme.base()
            };
            let (label, value, note) = match *row {
                Row::Judge => {
                    let (name, problem) = &self.judges[self.judge];
                    ("judge", format!("‹ {} ›", name), problem.clone())
                }
                Row::Prompts => {
                    let (name, set) = &self.sets[self.set];
                    let note = match set {
                        Ok(s) if s.is_empty() => None,
                        Ok(s) => Some(format!("{} file(s)", s.len())),
                        Err(_) => Some("cannot be used".into()),
                    };
                    ("prompt set", format!("‹ {name} ›"), note)
                }
                Row::Temperature => (
                    "temperature",
                    format!("‹ {} ›", self.temperatures[self.temperature]),
                    None,
                ),
                Row::Scores => (
                    "scores",
                    format!("‹ {} ›", if self.expected { "expected" } else { "written" }),
                    Some(
                        if self.expected {
                            "each option weighed by its probability"
                        } else {
                            "the option the judge wrote"
                        }
                        .into(),
                    ),
                ),
                Row::Method(m) => {
                    let choice = &self.methods[m];
                    let label = if m == 0 { "methods" } else { "" };
                    let boxed = match (&choice.refused, choice.chosen) {
                        (Some(_), _) => " – ",
                        (None, true) => "[x]",
                        (None, false) => "[ ]",
                    };
                    (
                        label,
                        format!("{boxed} {:<6}", choice.method.name()),
                        choice.refused.clone(),
                    )
                }
            };
            let refused = matches!(row, Row::Method(m) if self.methods[*m].refused.is_some());
            let value_style = if refused { theme.dim() } else { cursor_style };
            let value = fit(&value, value_width);
            let shown = unicode_width::UnicodeWidthStr::width(value.as_str());
            let rest = value_width.saturating_sub(shown + 2);
            // A note is read whole: wrapped under itself, not cut.
            let mut notes = note.map_or_else(Vec::new, |n| wrap(&n, rest.max(8))).into_iter();
            lines.push(Line::from(vec![
                Span::styled(format!(" {mark} "), theme.fg(theme.accent)),
                Span::styled(pad(label, 13), theme.dim()),
                Span::styled(value, value_style),
                Span::styled(notes.next().map(|n| format!("  {n}")).unwrap_or_default(), theme.dim()),
            ]));
            for more in notes {
                lines.push(Line::styled(
                    format!("{}{more}", " ".repeat(3 + 13 + shown + 2)),
                    theme.dim(),
                ));
            }
        }
        // Why the start was refused, else why the prompt set shown cannot be used.
        let problem = self.error.clone().or_else(|| match &self.sets[self.set] {
            (name, Err(e)) => Some(format!("{name}: {e}")),
            (_, Ok(_)) => None,
        });
        if let Some(text) = problem {
            lines.push(Line::raw(""));
            for part in wrap(&text, text_width.saturating_sub(1)) {
                lines.push(Line::styled(format!(" {part}"), theme.fg(theme.error)));
            }
            // On a short terminal the problem is what must be read: the three lines introducing the
            // dialog give way first, the blank one first and what it re-assesses last.
            let spare = (lines.len() + 2).saturating_sub(usize::from(area.height));
            lines.drain(3 - spare.min(3)..3);
        }
        let height = (lines.len() as u16 + 2).min(area.height);
        let inner = popup(frame, centered(area, width, height), " Re-assess with… ", theme);
        frame.render_widget(Paragraph::new(lines), inner);
        Hits::default()
    }
}
