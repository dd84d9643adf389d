//! The annotate screen: one case at a time in large readable text (an item's question and answer, or a dimension's
//! description and all its exchanges), number keys to answer, x for "refuses / unrelated", the
//! interviewer's judgement hidden until answered (v reveals), a note, progress, and the live agreement
//! of this annotator with both methods of the task, overall and per dimension.
//! It owns the annotator's answers, the case shown and the note being written.

mod subjects;

use std::collections::BTreeMap;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};

use super::{Component, Ctx, Hits, Request};
use crate::annotation::{self, Annotation, Answer, Case, Refusal, Task};
use crate::catalog::Catalog;
use crate::method::interview::QueryStyle;
use crate::method::{Assessment, Method};
use crate::tui::keys::{Command, Key, KeyName};
use crate::tui::run_view::{ItemKey, RunView};
use crate::tui::vocab::Effect;
use crate::tui::widgets::{block, fit, pad};
use crate::tui::wrap::wrap;

/// Why a sample cannot be annotated, and what to do instead.
pub const SAMPLE_READ_ONLY: &str =
    "samples are read-only: copy its folder into <data dir>/sessions/ and open the copy to annotate it";

/// Sample sizes the screen cycles through (`None`: every case).
pub const SAMPLES: [Option<usize>; 4] = [None, Some(100), Some(50), Some(20)];

/// What `v` revealed: a case of the item or dimension task, or a unit of the subject task.
#[derive(Debug, Clone, PartialEq)]
pub enum Revealed {
    Case(Case),
    Unit(subjects::Unit),
}

pub struct Annotate {
    pub annotator: String,
    pub task: Task,
    pub sample: usize,
    pub cursor: usize,
    /// The case (or, rating subjects, the unit) whose judgements `v` showed before it was answered:
    /// that one only, so the next case is blind again.
    pub reveal: Option<Revealed>,
    /// Digits typed for a multi-digit answer (0–100 scales).
    pub typed: String,
    /// Every annotator's latest answers in the open session.
    pub answers: BTreeMap<String, BTreeMap<Case, Annotation>>,
    pub note: tui_textarea::TextArea<'static>,
    pub editing_note: bool,
    /// An observer session's task: rating its subjects.
    pub subjects: subjects::SubjectTask,
    /// Why the session's annotations could not be read: shown instead of the cases, and nothing is
    /// written until they are (an answer would be taken for the annotator's first, hiding the rest).
    pub unreadable: Option<String>,
    /// Why `INCHARACTER_ANNOTATOR` names no annotator, if it is set and cannot: nothing is written
    /// (under another name, one person's answers would replace another's).
    pub misnamed: Option<String>,
}

/// The annotator `INCHARACTER_ANNOTATOR` names (`given`), else the user, else `annotator`; and why
/// the one given cannot be, if so.
fn annotator_from(given: Option<String>, user: Option<String>) -> (String, Option<String>) {
    match given {
        Some(name) => match annotation::annotator_problem(&name) {
            None => (name, None),
            Some(problem) => (
                "annotator".into(),
                Some(format!(
                    "INCHARACTER_ANNOTATOR is {}, which cannot name an annotator ({problem}); set it to a name that can and start again",
                    crate::text::visible(&format!("{name:?}"))
                )),
            ),
        },
        // A user name that cannot name a file is no reason to write as "annotator", whose file
        // another such user would share.
        None => match user {
            Some(name) => match annotation::annotator_problem(&name) {
                None => (name, None),
                Some(problem) => (
                    "annotator".into(),
                    Some(format!(
                        "the user name {} cannot name an annotator ({problem}); set INCHARACTER_ANNOTATOR to a name that \
                         can and start again",
                        crate::text::visible(&format!("{name:?}"))
                    )),
                ),
            },
            None => ("annotator".into(), None),
        },
    }
}

impl Default for Annotate {
    /// The annotator is named by `INCHARACTER_ANNOTATOR`, else the user.
    fn default() -> Self {
        let (annotator, misnamed) =
            annotator_from(std::env::var("INCHARACTER_ANNOTATOR").ok(), std::env::var("USER").ok());
        Annotate {
            annotator,
            misnamed,
            task: Task::Item,
            sample: 0,
            cursor: 0,
            reveal: None,
            typed: String::new(),
            answers: BTreeMap::new(),
            note: tui_textarea::TextArea::default(),
            editing_note: false,
            subjects: subjects::SubjectTask::default(),
            unreadable: None,
        }
    }
}

impl Annotate {
    /// Another session is shown: its annotations are on their way.
    pub fn reset(&mut self) {
        self.answers.clear();
        self.unreadable = None;
        self.cursor = 0;
        self.subjects = subjects::SubjectTask::default();
        // Another session is blind again, even where its cases are named alike.
        self.reveal = None;
    }

    /// The session's annotations, read: carry on where this annotator stopped.
    pub fn set_answers(&mut self, all: BTreeMap<String, BTreeMap<Case, Annotation>>, ctx: &Ctx) {
        self.answers = all;
        self.unreadable = None;
        if ctx.run.observe.is_some() {
            self.subject_unrated_from(0, ctx);
            return;
        }
        if let Some(i) = self.unanswered_from(0, ctx) {
            self.cursor = i;
        }
    }

    /// The answers as read again (another window's, another annotator's): the cursor stays where
    /// the user put it.
    pub fn reread(&mut self, all: BTreeMap<String, BTreeMap<Case, Annotation>>) {
        self.answers = all;
        self.unreadable = None;
    }

    /// The cursor back on `case` (an answer to it was not written). Answers typed ahead were not
    /// written either: while the files cannot be read, the cursor goes back to the first of them.
    pub fn back_to(&mut self, case: &Case, ctx: &Ctx) {
        // (An observer session's subjects keep their own place.)
        if ctx.run.observe.is_some() {
            return;
        }
        if let Some(i) = self.cases(ctx.run, ctx.catalog).iter().position(|c| c == case)
            && (self.unreadable.is_none() || i < self.cursor)
        {
            self.cursor = i;
        }
    }

    /// The annotation cases of the shown session for the current task and sample.
    pub fn cases(&self, run: &RunView, catalog: &Catalog) -> Vec<Case> {
        let mut all: Vec<Case> = run
            .items
            .iter()
            .filter(|row| row.key.style == QueryStyle::Open && !row.response.is_empty())
            .filter_map(|row| {
                let k = &row.key;
                annotation::item_case(catalog, &k.character, &k.scale, k.repeat, k.item_id)
            })
            .collect();
        for case in run.assessments.iter().filter_map(annotation::dimension_case) {
            if !all.contains(&case) {
                all.push(case);
            }
        }
        let seed = run.session.plan.as_ref().map_or(0, |p| p.seed);
        annotation::sample(&all, self.task, SAMPLES[self.sample % SAMPLES.len()], seed)
    }

    /// Digits, x, backspace and enter answer; while a note is written every key goes to it. `None` if
    /// the key is left to its command.
    /// Pasted text into the note being edited; false when no note is.
    pub fn paste(&mut self, text: &str) -> bool {
        if self.editing_note {
            self.note.insert_str(text);
        }
        self.editing_note
    }

    pub fn key(&mut self, event: KeyEvent, key: Key, ctx: &Ctx) -> Option<Vec<Request>> {
        let blocked = match (&self.misnamed, &self.unreadable) {
            (Some(why), _) => Some(format!("nothing is written: {why}")),
            (None, Some(_)) => {
                Some("nothing is written while the session's annotations cannot be read (see the screen)".into())
            }
            (None, None) => None,
        };
        if let Some(why) = blocked
            && !event.modifiers.contains(KeyModifiers::CONTROL)
        {
            if let KeyName::Char(_) | KeyName::Enter | KeyName::Backspace = key.code {
                self.editing_note = false;
                return Some(vec![Request::Flash(why)]);
            }
            return None;
        }
        if self.editing_note {
            if key.code == KeyName::Enter || key.code == KeyName::Esc {
                self.editing_note = false;
                if key.code == KeyName::Enter {
                    return Some(self.save_note(ctx));
                }
                return Some(Vec::new());
            }
            self.note.input(event);
            return Some(Vec::new());
        }
        if event.modifiers.contains(KeyModifiers::CONTROL) {
            return None;
        }
        // Alt plus what answers (or Esc then it, read as one key) is no answer; other Alt keys go
        // to the key bindings.
        if event.modifiers.contains(KeyModifiers::ALT) {
            return matches!(key.code, KeyName::Char(c) if c.is_ascii_digit() || matches!(c, 'x' | 'X' | '.' | ','))
                .then(Vec::new);
        }
        if ctx.run.observe.is_some() {
            return self.subject_key(key, ctx);
        }
        match key.code {
            // A decimal comma is a point.
            KeyName::Char(c) if c.is_ascii_digit() || c == '.' || c == ',' => {
                Some(self.digit(if c == ',' { '.' } else { c }, ctx))
            }
            KeyName::Char('x') | KeyName::Char('X') => Some(self.answer(Answer::Refused(Refusal::X), ctx)),
            KeyName::Backspace => {
                self.typed.pop();
                Some(Vec::new())
            }
            KeyName::Enter if !self.typed.is_empty() => {
                let typed = std::mem::take(&mut self.typed);
                let range = self
                    .cases(ctx.run, ctx.catalog)
                    .get(self.cursor)
                    .map(|case| Self::answer_range(case, ctx.catalog));
                let item = self.task == Task::Item;
                Some(match (typed.parse::<f64>(), range) {
                    (Ok(v), Some((min, max))) if (min..=max).contains(&v) && !(item && v.fract() != 0.0) => {
                        self.answer(Answer::Value(v), ctx)
                    }
                    (_, Some((min, max))) => {
                        vec![Request::Flash(format!("{typed} is not an answer from {min} to {max}"))]
                    }
                    _ => Vec::new(),
                })
            }
            _ => None,
        }
    }

    /// The range an answer of the current task must fall in.
    fn answer_range(case: &Case, catalog: &Catalog) -> (f64, f64) {
        let Some(scale) = catalog.scale(&case.scale) else {
            return (0.0, 0.0);
        };
        match case.task {
            Task::Item => (f64::from(scale.range.min), f64::from(scale.range.max)),
            Task::Dimension => scale.dimension_range(),
            Task::Subject => annotation::subjects::RANGE,
        }
    }

    fn digit(&mut self, c: char, ctx: &Ctx) -> Vec<Request> {
        let cases = self.cases(ctx.run, ctx.catalog);
        let Some(case) = cases.get(self.cursor) else {
            return Vec::new();
        };
        let (min, max) = Self::answer_range(case, ctx.catalog);
        // A dimension's score may have decimals (3.5): typed, then enter. An item's answer is one
        // of its options, whole numbers.
        let decimals = case.task != Task::Item;
        if c == '.' && self.typed.contains('.') {
            return vec![Request::Flash(format!("{}. is not a number", self.typed))];
        }
        if c == '.' {
            // Kept where it shows, so that the digits after it answer nothing until enter (which
            // refuses a fraction of an option) or backspace: "3.5" is not 3, then 5 for the next.
            if !self.typed.contains('.') {
                self.typed.push('.');
            }
            return match decimals {
                true => Vec::new(),
                false => vec![Request::Flash(format!("the options are whole numbers, {min} to {max}"))],
            };
        }
        if self.typed.len() >= 8 {
            return Vec::new();
        }
        self.typed.push(c);
        let Ok(v) = self.typed.parse::<f64>() else {
            return Vec::new();
        };
        // An item's answer is taken at once when no further digit could make another option (1–5,
        // 1–7; a 0 grows into none); a dimension's waits for enter.
        if !decimals && !self.typed.contains('.') && (v * 10.0 > max || v == 0.0) {
            let typed = std::mem::take(&mut self.typed);
            if (min..=max).contains(&v) {
                return self.answer(Answer::Value(v), ctx);
            }
            return vec![Request::Flash(format!("{typed} is outside {min}–{max}"))];
        }
        Vec::new()
    }

    fn answer(&mut self, value: Answer, ctx: &Ctx) -> Vec<Request> {
        let cases = self.cases(ctx.run, ctx.catalog);
        let (Some(case), Some(dir)) = (cases.get(self.cursor).cloned(), ctx.session_dir) else {
            return vec![Request::Flash("open a session to annotate (5, then enter)".into())];
        };
        if ctx.shown_session_is_sample() {
            return vec![Request::Flash(SAMPLE_READ_ONLY.into())];
        }
        let note = self.note.lines().join("\n");
        let annotation = Annotation {
            annotator: self.annotator.clone(),
            case: case.clone(),
            value,
            note: (!note.trim().is_empty()).then_some(note),
            at: crate::journal::now_rfc3339(),
        };
        self.answers
            .entry(annotation.annotator.clone())
            .or_default()
            .insert(case, annotation.clone());
        self.note = tui_textarea::TextArea::default();
        if self.cursor + 1 < cases.len() {
            self.cursor += 1;
        }
        vec![
            Effect::Annotate {
                dir: dir.to_path_buf(),
                annotation,
            }
            .into(),
        ]
    }

    fn save_note(&mut self, ctx: &Ctx) -> Vec<Request> {
        let cases = self.cases(ctx.run, ctx.catalog);
        let Some(case) = cases.get(self.cursor) else {
            return Vec::new();
        };
        let answered = self
            .answers
            .get(&self.annotator)
            .and_then(|m| m.get(case))
            .map(|a| a.value);
        match answered {
            // Re-record the answer with its note; the note of an unanswered case waits for the answer.
            Some(value) => {
                let cursor = self.cursor;
                let requests = self.answer(value, ctx);
                self.cursor = cursor;
                requests
            }
            None => vec![Request::Flash("note kept: it is saved with the answer".into())],
        }
    }

    pub fn command(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        let typed = std::mem::take(&mut self.typed);
        let at = self.position(ctx);
        let requests = if ctx.run.observe.is_some() {
            self.subject_command(cmd, ctx)
        } else {
            let len = self.cases(ctx.run, ctx.catalog).len();
            self.case_command(cmd, ctx, len)
        };
        if at == self.position(ctx) {
            // Still on the same case: what was typed waits for its enter.
            self.typed = typed;
            return requests;
        }
        if typed.is_empty() {
            return requests;
        }
        // Moving on does not answer: what was typed for the case left is said to be dropped.
        let mut requests = requests;
        requests.push(Request::Flash(format!("{typed} was not recorded (typed, then enter)")));
        requests
    }

    /// Where the answer being typed goes: the case under the cursor (another sample lists other
    /// cases at the same place), or the subject unit and trait.
    fn position(&self, ctx: &Ctx) -> (Option<Case>, Task, usize, usize, bool) {
        let s = &self.subjects;
        let case = self.cases(ctx.run, ctx.catalog).get(self.cursor).cloned();
        (case, self.task, s.unit, s.trait_index, s.per_observer)
    }

    fn case_command(&mut self, cmd: Command, ctx: &Ctx, len: usize) -> Vec<Request> {
        match cmd {
            Command::NextUnit | Command::Down => self.cursor = (self.cursor + 1).min(len.saturating_sub(1)),
            Command::PrevUnit | Command::Up => self.cursor = self.cursor.saturating_sub(1),
            Command::PageDown => self.cursor = (self.cursor + 10).min(len.saturating_sub(1)),
            Command::PageUp => self.cursor = self.cursor.saturating_sub(10),
            Command::Top => self.cursor = 0,
            Command::Bottom => self.cursor = len.saturating_sub(1),
            Command::Reveal => {
                let case = self
                    .cases(ctx.run, ctx.catalog)
                    .get(self.cursor)
                    .cloned()
                    .map(Revealed::Case);
                self.reveal = if self.reveal == case { None } else { case };
            }
            Command::NextPane => {
                self.task = match self.task {
                    Task::Item => Task::Dimension,
                    // (The subject task is an observer session's, which another component shows.)
                    Task::Dimension | Task::Subject => Task::Item,
                };
                self.cursor = 0;
            }
            Command::Sample => {
                self.sample = (self.sample + 1) % SAMPLES.len();
                self.cursor = 0;
                return vec![Request::Flash(match SAMPLES[self.sample] {
                    None => "every case".into(),
                    Some(n) => format!("a seeded sample of {n} cases, stratified by dimension"),
                })];
            }
            Command::Note => self.editing_note = true,
            Command::Skip => {
                if let Some(i) = self.unanswered_from(self.cursor + 1, ctx) {
                    self.cursor = i;
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// The first case from `from` on (wrapping around) this annotator has not answered.
    fn unanswered_from(&self, from: usize, ctx: &Ctx) -> Option<usize> {
        let cases = self.cases(ctx.run, ctx.catalog);
        let done = self.answers.get(&self.annotator);
        (0..cases.len())
            .map(|k| (from + k) % cases.len())
            .find(|&i| done.is_none_or(|d| !d.contains_key(&cases[i])))
    }
}

impl Annotate {
    /// Who answers, or that nobody can (a sample).
    fn badge(&self, ctx: &Ctx) -> Span<'static> {
        if ctx.shown_session_is_sample() {
            Span::styled(" read-only sample ", ctx.theme.selected())
        } else {
            Span::styled(format!(" {} ", self.annotator), ctx.theme.selected())
        }
    }
}

fn answer_text(a: Option<Answer>) -> String {
    match a {
        Some(Answer::Value(v)) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(Answer::Value(v)) => format!("{v:.2}"),
        Some(Answer::Refused(_)) => "x".into(),
        None => "–".into(),
    }
}

impl Component for Annotate {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        if ctx.run.observe.is_some() {
            return self.subject_hints(ctx);
        }
        vec![
            ("digits".into(), "answer"),
            ("x".into(), "refuses"),
            (ctx.key(Command::NextUnit), "next"),
            (ctx.key(Command::Reveal), "reveal"),
            (ctx.key(Command::NextPane), "task"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        if let Some(why) = &self.misnamed {
            let theme = ctx.theme;
            let lines = vec![
                Line::styled("No annotator to write as:", theme.fg(theme.error)),
                Line::raw(why.clone()),
                Line::raw(""),
                Line::styled(
                    "Letters, digits, '-', '_' and '.' make a name (its file is annotations/<name>.jsonl).",
                    theme.dim(),
                ),
            ];
            render_message(frame, area, ctx, lines);
            return Hits::default();
        }
        if let Some(why) = &self.unreadable {
            render_unreadable(frame, area, ctx, why);
            return Hits::default();
        }
        if ctx.run.observe.is_some() {
            return self.render_subjects(frame, area, ctx);
        }
        let theme = ctx.theme;
        let cases = self.cases(ctx.run, ctx.catalog);
        let Some(case) = cases.get(self.cursor.min(cases.len().saturating_sub(1))) else {
            render_empty(frame, area, ctx);
            return Hits::default();
        };
        let mine = self.answers.get(&self.annotator);
        let done = cases
            .iter()
            .filter(|c| mine.is_some_and(|m| m.contains_key(*c)))
            .count();
        let [header, body, progress] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(8), Constraint::Length(1)]).areas(area);
        self.render_header(frame, header, ctx, cases.len());
        let [case_area, panel_area] = Layout::horizontal([Constraint::Min(40), Constraint::Length(46)]).areas(body);
        render_case(frame, case_area, ctx, case);
        self.render_panel(frame, panel_area, ctx, case, mine);
        frame.render_widget(
            Gauge::default()
                .gauge_style(theme.fg(theme.positive))
                .ratio(done as f64 / cases.len().max(1) as f64)
                .label(format!("{done}/{} answered by {}", cases.len(), self.annotator)),
            progress,
        );
        Hits::default()
    }
}

/// The annotate screen when the session's annotations could not be read.
fn render_unreadable(frame: &mut Frame, area: Rect, ctx: &Ctx, why: &str) {
    let theme = ctx.theme;
    render_message(
        frame,
        area,
        ctx,
        vec![
            Line::styled("The session's annotations could not be read:", theme.fg(theme.error)),
            Line::raw(why.to_string()),
            Line::raw(""),
            Line::styled(
                "Nothing is written until they are: correct or remove that line (`incharacter agreement` \
                 says the same), then come back to this screen.",
                theme.dim(),
            ),
        ],
    );
}

/// The annotate screen without a case to annotate.
fn render_empty(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    render_message(
        frame,
        area,
        ctx,
        vec![
            Line::raw("Nothing to annotate."),
            Line::styled(
                "Open a session with interviews (5, then enter); tab switches between the item and the dimension task.",
                ctx.theme.dim(),
            ),
        ],
    );
}

/// The screen's frame with a few wrapped lines in it instead of a case.
fn render_message(frame: &mut Frame, area: Rect, ctx: &Ctx, lines: Vec<Line<'_>>) {
    let b = block(" Annotate ", false, ctx.theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    frame.render_widget(Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: true }), inner);
}

/// The case in large readable text: the statement or the dimension's description, the exchanges, and
/// how to answer.
fn render_case(frame: &mut Frame, area: Rect, ctx: &Ctx, case: &Case) {
    let theme = ctx.theme;
    let character = ctx.catalog.character(&case.character);
    let scale = ctx.catalog.scale(&case.scale);
    let name = character.map_or(case.character.clone(), |c| c.name.clone());
    // The whole title, else without the character's name (the exchanges say it), else cut with an
    // ellipsis: never cut at the border.
    let item = case.item_id.map(|id| format!(" · item {id}")).unwrap_or_default();
    let room = usize::from(area.width.saturating_sub(2));
    let title = crate::tui::widgets::first_fitting(
        [
            format!(" {name} · {} · {}{item} ", case.scale, case.dimension),
            format!(" {} · {}{item} ", case.scale, case.dimension),
        ],
        room,
    )
    .unwrap_or_else(|| fit(&format!(" {}{item} · {}", case.scale, case.dimension), room));
    let b = block(title, true, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let width = inner.width as usize;
    let mut lines: Vec<Line> = Vec::new();
    let experimenter = character.map_or("?".to_string(), |c| c.experimenter.clone());
    let exchange = |lines: &mut Vec<Line>, item_id: u32| {
        let key = ItemKey {
            character: case.character.clone(),
            scale: case.scale.clone(),
            repeat: case.repeat,
            style: QueryStyle::Open,
            item_id,
        };
        if let Some(row) = ctx.run.item(&key) {
            lines.push(Line::styled(
                experimenter.clone(),
                theme.fg(theme.experimenter).add_modifier(Modifier::BOLD),
            ));
            for l in wrap(&row.question, width.saturating_sub(2)) {
                lines.push(Line::raw(format!("  {l}")));
            }
            lines.push(Line::styled(
                name.clone(),
                theme.fg(theme.character).add_modifier(Modifier::BOLD),
            ));
            for l in wrap(&row.response, width.saturating_sub(2)) {
                lines.push(Line::raw(format!("  {l}")));
            }
            lines.push(Line::raw(""));
        }
    };
    let options = scale.map_or(String::new(), |s| {
        let lang = character.map_or(crate::domain::scale::Language::En, |c| c.language);
        s.options
            .get(lang)
            .iter()
            .enumerate()
            .map(|(i, o)| format!("{} {o}", s.range.min + i as i32))
            .collect::<Vec<_>>()
            .join(" · ")
    });
    match case.item_id {
        Some(id) => {
            if let Some(item) = scale.and_then(|s| s.item(id)) {
                for l in wrap(&format!("Statement: {}", item.statement.en), width) {
                    lines.push(Line::styled(l, theme.title()));
                }
                lines.push(Line::raw(""));
            }
            exchange(&mut lines, id);
            for l in wrap(&format!("Options: {options} · x refuses / unrelated"), width) {
                lines.push(Line::styled(l, theme.dim()));
            }
        }
        None => {
            if let Some((s, d)) = scale.and_then(|s| Some((s, s.dimension_index(&case.dimension)?))) {
                for l in wrap(&s.dimensions[d].description.en, width) {
                    lines.push(Line::styled(l, theme.dim()));
                }
                lines.push(Line::raw(""));
                let ids: Vec<u32> = s.items_of(d).map(|i| i.id).collect();
                for id in ids {
                    exchange(&mut lines, id);
                }
                let (min, max) = s.dimension_range();
                lines.push(Line::styled(
                    format!("Score {min}–{max}: type it, then enter"),
                    theme.dim(),
                ));
            }
        }
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

impl Annotate {
    /// The task, the sample and where in it the case is.
    fn render_header(&self, frame: &mut Frame, area: Rect, ctx: &Ctx, cases: usize) {
        let task = match self.task {
            Task::Item => "item task: the option the answer gives",
            Task::Dimension => "dimension task: a score from all the exchanges",
            Task::Subject => "subject task: a rating per trait from all the dialogues",
        };
        let sample = SAMPLES[self.sample % SAMPLES.len()].map_or("all cases".to_string(), |n| format!("sample of {n}"));
        let badge = self.badge(ctx);
        let at = format!(
            " {task} · {sample} · case {}/{} ",
            self.cursor.min(cases - 1) + 1,
            cases
        );
        // The hints go first when the row is short, then the rest is cut with an ellipsis.
        let room = usize::from(area.width).saturating_sub(badge.width());
        let hints = "tab task · s sample · n note · u unanswered";
        let used = unicode_width::UnicodeWidthStr::width(at.as_str());
        let line = if used + hints.len() <= room {
            Line::from(vec![badge, Span::raw(at), Span::styled(hints, ctx.theme.dim())])
        } else {
            Line::from(vec![badge, Span::raw(fit(&at, room))])
        };
        frame.render_widget(Paragraph::new(line), area);
    }

    /// Panel: this case (the answer, the methods' judgements once answered, the note), then agreement.
    fn render_panel(
        &self,
        frame: &mut Frame,
        area: Rect,
        ctx: &Ctx,
        case: &Case,
        mine: Option<&BTreeMap<Case, Annotation>>,
    ) {
        let theme = ctx.theme;
        let b = block(" Your answer · agreement ", false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        // The methods of the task's kind that the interview session ran (one that never ran d-OC
        // shows none).
        let ran = ctx.run.session.plan.as_ref().map(|p| &p.methods);
        let methods: Vec<Method> = match self.task {
            Task::Item => [Method::Oc, Method::DOc],
            Task::Dimension | Task::Subject => [Method::ErBatch, Method::ErAll],
        }
        .into_iter()
        .filter(|m| self.task == Task::Subject || ran.is_none_or(|ran| ran.contains(m)))
        .collect();
        let assessments: Vec<&Assessment> = ctx.run.assessments.iter().collect();
        let given = mine.and_then(|m| m.get(case));
        let mut lines = vec![Line::from(vec![
            Span::raw("yours: "),
            Span::styled(
                if self.typed.is_empty() {
                    answer_text(given.map(|g| g.value))
                } else {
                    format!("{}▏", self.typed)
                },
                theme.fg(theme.accent).add_modifier(Modifier::BOLD),
            ),
        ])];
        for &m in &methods {
            let shown = self.reveal.as_ref() == Some(&Revealed::Case(case.clone())) || given.is_some();
            let value = annotation::machine(&assessments, case, m, ctx.catalog);
            lines.push(Line::from(vec![
                Span::raw(format!("{:<9}", m.name())),
                Span::styled(
                    if shown {
                        answer_text(value)
                    } else {
                        "hidden (v reveals)".into()
                    },
                    theme.fg(theme.measured),
                ),
            ]));
        }
        if let Some(note) = given.and_then(|g| g.note.as_ref()) {
            lines.push(Line::styled(
                format!("note: {}", fit(note, inner.width as usize - 6)),
                theme.dim(),
            ));
        }
        lines.push(Line::raw(""));
        lines.extend(self.agreement_lines(ctx, &methods, &assessments, mine, &case.scale));
        if self.editing_note {
            let [rest, note_area] = Layout::vertical([Constraint::Min(4), Constraint::Length(4)]).areas(inner);
            frame.render_widget(Paragraph::new(lines), rest);
            let mut note = self.note.clone();
            note.set_block(block(" note (enter keeps, esc closes) ", true, theme));
            frame.render_widget(&note, note_area);
        } else {
            frame.render_widget(Paragraph::new(lines), inner);
        }
    }

    /// This annotator's agreement with each method on the shown case's scale, overall and per
    /// dimension, and with the others. Scales of different ranges are not pooled into one
    /// correlation (`agreement` keeps them apart the same way).
    fn agreement_lines(
        &self,
        ctx: &Ctx,
        methods: &[Method],
        assessments: &[&Assessment],
        mine: Option<&BTreeMap<Case, Annotation>>,
        scale: &str,
    ) -> Vec<Line<'static>> {
        let theme = ctx.theme;
        let mut lines = Vec::new();
        let this_scale = |m: &BTreeMap<Case, Annotation>| -> BTreeMap<Case, Annotation> {
            m.iter()
                .filter(|(c, _)| c.scale == scale)
                .map(|(c, a)| (c.clone(), a.clone()))
                .collect()
        };
        let only_me: std::collections::BTreeMap<_, _> = mine
            .map(|m| (self.annotator.clone(), this_scale(m)))
            .into_iter()
            .collect();
        let scales: std::collections::BTreeSet<&str> = self
            .answers
            .values()
            .flat_map(|m| m.keys().map(|c| c.scale.as_str()))
            .chain(ctx.run.assessments.iter().map(|a| a.scale.as_str()))
            .collect();
        if scales.len() > 1 {
            lines.push(Line::styled(
                format!("on {scale} (its own range; the others apart)"),
                theme.dim(),
            ));
        }
        for &m in methods {
            let r = annotation::report(&only_me, assessments, m, ctx.catalog);
            let me = &r["annotators"][&self.annotator];
            let f = |v: &serde_json::Value| v.as_f64().map_or("–".to_string(), |x| format!("{x:.2}"));
            lines.push(Line::styled(m.name().to_string(), theme.title()));
            lines.push(Line::raw(format!(
                "n={} right {} close {} wrong {} acc {}",
                me["n"].as_u64().unwrap_or(0),
                me["right"].as_u64().unwrap_or(0),
                me["close"].as_u64().unwrap_or(0),
                me["wrong"].as_u64().unwrap_or(0),
                f(&me["accuracy"])
            )));
            lines.push(Line::raw(format!(
                "r {} ρ {} τ {}",
                f(&me["pearson"]),
                f(&me["spearman"]),
                f(&me["kendall_tau_b"])
            )));
            let dimensions = me["dimensions"].as_array().map_or(&[][..], Vec::as_slice);
            for v in dimensions.iter().take(6) {
                let d = v["dimension"].as_str().unwrap_or_default();
                lines.push(Line::styled(
                    format!("  {} n={} acc {}", pad(d, 20), v["n"], f(&v["accuracy"])),
                    theme.dim(),
                ));
            }
        }
        let others = self.answers.len().saturating_sub(usize::from(mine.is_some()));
        if others > 0 {
            // Yours with each of them: the pairs you are in, not the others' among themselves.
            let all = annotation::inter_annotator(&self.answers, self.task);
            let yours: Vec<f64> = all["pairs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["a"] == self.annotator.as_str() || p["b"] == self.annotator.as_str())
                .filter(|p| p["scale"].as_str().is_none_or(|s| s == scale))
                .filter_map(|p| p["qwk"].as_f64())
                .collect();
            let mean = (!yours.is_empty()).then(|| yours.iter().sum::<f64>() / yours.len() as f64);
            lines.push(Line::raw(format!(
                "QWK with {others} other annotator(s): {}",
                mean.map_or("–".to_string(), |v| format!("{v:.3}"))
            )));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_annotator_name_that_cannot_be_one_writes_nothing_under_another() {
        use super::annotator_from;
        assert_eq!(
            annotator_from(Some("zoe".into()), Some("root".into())),
            ("zoe".into(), None)
        );
        assert_eq!(annotator_from(None, Some("root".into())), ("root".into(), None));
        assert_eq!(annotator_from(None, None), ("annotator".into(), None));
        let (_, why) = annotator_from(None, Some("Zo R.".into()));
        assert!(why.expect("refused").contains("INCHARACTER_ANNOTATOR"));
        let (_, why) = annotator_from(Some("Zoë R.".into()), Some("root".into()));
        let why = why.expect("refused");
        assert!(why.contains("\"Zoë R.\"") && why.contains("letters, digits"), "{why}");
    }
}
