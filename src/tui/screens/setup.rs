//! The setup screen: characters (filter as you type), scales, methods and run options, the request and
//! token estimate, and the most recent sessions. It owns the choices every run starts from.

use std::collections::{BTreeMap, BTreeSet};

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use unicode_width::UnicodeWidthStr;

use super::{Component, Ctx, Hits, ListId, Request};
use crate::catalog::{Catalog, Origin};
use crate::domain::character::{Character, LabelSource};
use crate::method::Method;
use crate::rpa::prompt::RpaStyle;
use crate::study::RunPlan;
use crate::study::interview::estimate::estimate;
use crate::tui::keys::{Command, Key, KeyName};
use crate::tui::vocab::ProviderStatus;
use crate::tui::widgets::{ListView, block, fit, pad};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupPane {
    Characters,
    Scales,
    Options,
}

/// Rows of the options pane.
pub const OPTION_ROWS: usize = Method::ALL.len() + 4;

#[derive(Debug, Clone)]
pub struct Setup {
    pub filter: String,
    pub pane: SetupPane,
    pub char_cursor: usize,
    pub characters: BTreeSet<String>,
    pub scale_cursor: usize,
    pub scales: BTreeSet<String>,
    /// Characters and scales whose user file cannot be read now (a bundled one of the same id may
    /// stand in meanwhile): picked, they are not run.
    pub unreadable: BTreeSet<String>,
    pub option_cursor: usize,
    pub methods: BTreeSet<Method>,
    pub repeats: u32,
    pub style: RpaStyle,
    pub rpa: String,
    pub judge: String,
    pub providers: Vec<String>,
    /// A recorded plan shown (the tour's) whose providers this config lacks: each such role and the
    /// provider it was recorded with, said beside the selectors (which show this config's) until
    /// that role's selector is changed.
    pub recorded_providers: Vec<(&'static str, String)>,
    pub seed: u64,
    /// From the config's `[sampling]` (the setup does not edit them; the plan records them).
    pub answer_sampling: crate::method::interview::AnswerSampling,
    pub judge_temperature: f32,
    /// Each checked provider's verdict on the method's requests (`ctrl-k`); `None`: being checked.
    pub checks: BTreeMap<String, Option<Result<Vec<crate::study::check::Verdict>, String>>>,
    /// The characters' and the scales' windows.
    pub char_view: ListView,
    pub scale_view: ListView,
}

/// The catalog's characters that `filter` matches: part of the name, an alias, the id or the work
/// (any case), or the language code; all of them for an empty filter.
pub fn matching<'a>(catalog: &'a Catalog, filter: &str) -> Vec<&'a Character> {
    let f = filter.to_lowercase();
    catalog
        .characters
        .iter()
        .map(|e| &e.value)
        .filter(|c| {
            f.is_empty()
                || c.id.to_lowercase().contains(&f)
                || c.name.to_lowercase().contains(&f)
                || c.work.to_lowercase().contains(&f)
                || c.language.code() == f
                || c.aliases.iter().any(|a| a.to_lowercase().contains(&f))
        })
        .collect()
}

impl Setup {
    /// A setup with the configured role-play and judge providers, ER_batch and no pick yet.
    pub fn new(providers: Vec<String>, rpa: String, judge: String) -> Setup {
        Setup {
            filter: String::new(),
            pane: SetupPane::Characters,
            char_cursor: 0,
            characters: BTreeSet::new(),
            unreadable: BTreeSet::new(),
            scale_cursor: 0,
            scales: BTreeSet::new(),
            option_cursor: 0,
            methods: [Method::ErBatch].into_iter().collect(),
            repeats: 1,
            style: RpaStyle::Description,
            rpa,
            judge,
            providers,
            recorded_providers: Vec::new(),
            seed: 0,
            answer_sampling: Default::default(),
            judge_temperature: 0.0,
            checks: BTreeMap::new(),
            char_view: ListView::default(),
            scale_view: ListView::default(),
        }
    }

    /// The sampling the config asks for.
    pub fn sampled(mut self, answers: crate::method::interview::AnswerSampling, judge_temperature: f32) -> Setup {
        self.answer_sampling = answers;
        self.judge_temperature = judge_temperature;
        self
    }

    /// Shows a recorded run's plan as the selection (the demo's setup step).
    pub fn show_plan(&mut self, plan: &RunPlan) {
        self.characters = plan.characters.iter().cloned().collect();
        self.scales = plan.scales.iter().cloned().collect();
        self.methods = plan.methods.iter().copied().collect();
        self.repeats = plan.repeats;
        self.style = plan.style;
        self.seed = plan.seed;
        self.answer_sampling = plan.answer_sampling;
        self.judge_temperature = plan.judge_temperature;
        for (role, name) in [(&mut self.rpa, &plan.rpa), (&mut self.judge, &plan.judge)] {
            if self.providers.contains(name) {
                role.clone_from(name);
            }
        }
        self.recorded_providers = [("rpa", &plan.rpa), ("judge", &plan.judge)]
            .into_iter()
            .filter(|(_, name)| !self.providers.contains(name))
            .map(|(role, name)| (role, name.clone()))
            .collect();
    }

    /// Characters matching the filter (name, alias, id, work, language).
    pub fn filtered_characters<'a>(&self, catalog: &'a Catalog) -> Vec<&'a Character> {
        matching(catalog, &self.filter)
    }

    /// The setup as a plan, if it can start.
    pub fn plan(&self, catalog: &Catalog, providers: &[ProviderStatus]) -> Result<RunPlan, String> {
        if self.characters.is_empty() {
            return Err("pick at least one character (space)".into());
        }
        if self.scales.is_empty() {
            return Err("pick at least one scale (tab, then space)".into());
        }
        if self.methods.is_empty() {
            return Err("pick at least one method".into());
        }
        // A provider that cannot serve (the embedded model not fetched, a key missing) is said here,
        // before the run starts, not by a run that fails at once.
        for (role, name) in [("rpa", &self.rpa), ("judge", &self.judge)] {
            if let Some(problem) = providers
                .iter()
                .find(|p| &p.name == name)
                .and_then(|p| p.problem.as_ref())
            {
                return Err(format!("cannot start: the {role} provider {name}: {problem}"));
            }
        }
        let mut plan = RunPlan::new(
            catalog
                .characters
                .iter()
                .map(|e| e.value.id.clone())
                .filter(|id| self.characters.contains(id))
                .collect(),
            catalog
                .scales
                .iter()
                .map(|e| e.value.id.clone())
                .filter(|id| self.scales.contains(id))
                .collect(),
            Method::ALL.into_iter().filter(|m| self.methods.contains(m)).collect(),
            &self.rpa,
            &self.judge,
        );
        plan.repeats = self.repeats;
        plan.style = self.style;
        plan.seed = self.seed;
        plan.answer_sampling = self.answer_sampling;
        plan.judge_temperature = self.judge_temperature;
        // As the run will fit it (the loaded model may say less; the run then fits again).
        plan.items_per_call = crate::method::convert::items_per_call(
            providers.iter().find(|p| p.name == self.judge).and_then(|p| p.context),
            plan.answer_sampling.max_tokens,
        ) as u32;
        Ok(plan)
    }

    /// Letters typed into the character list filter it; true if the key was taken so.
    /// Pasted text into the character filter (its first line); false unless the character list
    /// has the focus.
    pub fn paste(&mut self, text: &str) -> bool {
        if self.pane != SetupPane::Characters {
            return false;
        }
        self.filter.push_str(text.lines().next().unwrap_or_default().trim());
        self.char_cursor = 0;
        true
    }

    pub fn type_key(&mut self, key: Key, event: &KeyEvent) -> bool {
        if self.pane != SetupPane::Characters || event.modifiers.contains(KeyModifiers::CONTROL) {
            return false;
        }
        match key.code {
            // Digits switch screens as everywhere else, `?` (in no name) opens the help; letters
            // and other signs filter.
            KeyName::Char(c) if !c.is_ascii_digit() && c != '?' => {
                self.filter.push(c);
                self.char_cursor = 0;
            }
            KeyName::Backspace => {
                self.filter.pop();
                self.char_cursor = 0;
            }
            KeyName::Esc if !self.filter.is_empty() => self.filter.clear(),
            _ => return false,
        }
        true
    }

    pub fn command(&mut self, cmd: Command, catalog: &Catalog, providers: &[ProviderStatus]) -> Vec<Request> {
        let filtered = self.filtered_characters(catalog).len();
        let step = |cursor: &mut usize, len: usize, delta: isize| {
            let max = len.saturating_sub(1) as isize;
            *cursor = (*cursor as isize + delta).clamp(0, max.max(0)) as usize;
        };
        let (cursor, len) = match self.pane {
            SetupPane::Characters => (&mut self.char_cursor, filtered),
            SetupPane::Scales => (&mut self.scale_cursor, catalog.scales.len()),
            SetupPane::Options => (&mut self.option_cursor, OPTION_ROWS),
        };
        match cmd {
            Command::Up => step(cursor, len, -1),
            Command::Down => step(cursor, len, 1),
            Command::PageUp => step(cursor, len, -10),
            Command::PageDown => step(cursor, len, 10),
            Command::Top => *cursor = 0,
            Command::Bottom => *cursor = len.saturating_sub(1),
            Command::NextPane | Command::PrevPane => {
                let order = [SetupPane::Characters, SetupPane::Scales, SetupPane::Options];
                let i = order.iter().position(|p| *p == self.pane).unwrap_or(0);
                let delta = if cmd == Command::NextPane { 1 } else { 2 };
                self.pane = order[(i + delta) % 3];
            }
            Command::Toggle | Command::NextMethod => self.toggle(1, catalog),
            Command::PrevMethod => self.toggle(-1, catalog),
            Command::Select | Command::Start => {
                // A pick kept while its file cannot be read (caught half-written, broken by an edit)
                // is not left out of the run without a word: said, and unpicked (it is not listed to
                // unpick), so the next start goes without it.
                let unreadable: Vec<String> = (self.characters.iter())
                    .filter(|id| catalog.character(id).is_none() || self.unreadable.contains(*id))
                    .chain(
                        (self.scales.iter()).filter(|id| catalog.scale(id).is_none() || self.unreadable.contains(*id)),
                    )
                    .cloned()
                    .collect();
                if !unreadable.is_empty() {
                    self.characters.retain(|id| !unreadable.contains(id));
                    self.scales.retain(|id| !unreadable.contains(id));
                    return vec![Request::Flash(format!(
                        "not started: {} cannot be read now (`incharacter validate` says why); unpicked: start \
                         again without it, or mend the file and pick it again",
                        crate::text::visible(&unreadable.join(", "))
                    ))];
                }
                return match self.plan(catalog, providers) {
                    Ok(plan) => super::start_run(plan, None),
                    Err(e) => vec![Request::Flash(e)],
                };
            }
            Command::Back => self.filter.clear(),
            Command::CheckProviders => {
                let mut names = vec![self.rpa.clone()];
                if self.judge != self.rpa {
                    names.push(self.judge.clone());
                }
                for n in &names {
                    self.checks.insert(n.clone(), None);
                }
                return vec![Request::Effect(crate::tui::Effect::CheckProviders(names))];
            }
            _ => {}
        }
        Vec::new()
    }

    /// Space / ← / → on the selected row.
    fn toggle(&mut self, delta: i32, catalog: &Catalog) {
        match self.pane {
            SetupPane::Characters => {
                let ids: Vec<String> = self.filtered_characters(catalog).iter().map(|c| c.id.clone()).collect();
                if let Some(id) = ids.get(self.char_cursor)
                    && !self.characters.remove(id)
                {
                    self.characters.insert(id.clone());
                }
            }
            SetupPane::Scales => {
                if let Some(e) = catalog.scales.get(self.scale_cursor) {
                    let id = e.value.id.clone();
                    if !self.scales.remove(&id) {
                        self.scales.insert(id);
                    }
                }
            }
            SetupPane::Options => {
                let row = self.option_cursor;
                let n = Method::ALL.len();
                let cycle = |list: &[String], current: &str| -> String {
                    let i = list.iter().position(|p| p == current).unwrap_or(0) as i32;
                    let len = list.len().max(1) as i32;
                    list.get(((i + delta).rem_euclid(len)) as usize)
                        .cloned()
                        .unwrap_or_default()
                };
                if row < n {
                    let m = Method::ALL[row];
                    if !self.methods.remove(&m) {
                        self.methods.insert(m);
                    }
                } else if row == n {
                    self.repeats = (self.repeats as i32 + delta).clamp(1, 10) as u32;
                } else if row == n + 1 {
                    let styles = [RpaStyle::Description, RpaStyle::Chatharuhi, RpaStyle::Rolegpt];
                    let i = styles.iter().position(|x| *x == self.style).unwrap_or(0) as i32;
                    self.style = styles[(i + delta).rem_euclid(3) as usize];
                } else if row == n + 2 {
                    self.rpa = cycle(&self.providers, &self.rpa);
                    self.recorded_providers.retain(|(role, _)| *role != "rpa");
                } else {
                    self.judge = cycle(&self.providers, &self.judge);
                    self.recorded_providers.retain(|(role, _)| *role != "judge");
                }
            }
        }
    }

    /// A click (or wheel) on one of the lists: it takes the focus, and a click its cursor.
    pub fn click(&mut self, list: ListId, row: Option<usize>, catalog: &Catalog) {
        let filtered = self.filtered_characters(catalog).len();
        let (pane, cursor, len) = match list {
            ListId::Characters => (SetupPane::Characters, &mut self.char_cursor, filtered),
            ListId::Scales => (SetupPane::Scales, &mut self.scale_cursor, catalog.scales.len()),
            _ => (SetupPane::Options, &mut self.option_cursor, OPTION_ROWS),
        };
        if let Some(row) = row {
            *cursor = row.min(len.saturating_sub(1));
        }
        self.pane = pane;
    }
}

impl Component for Setup {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        let mut keys = vec![
            (ctx.key(Command::Toggle), "pick"),
            (ctx.key(Command::NextPane), "pane"),
            (ctx.key(Command::Select), "start"),
        ];
        // Letters filter only the character list.
        if self.pane == SetupPane::Characters {
            keys.insert(0, ("type".into(), "filter"));
        }
        keys
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let mut hits = Hits::default();
        // Where the screen is short, the providers' checks take the place of the recent sessions
        // (Sessions lists them too), across the screen, so that every verdict is read whole.
        let below = area.height < 34 && !self.checks.is_empty();
        let recent_rows = if area.height >= 34 {
            7
        } else if below {
            let lines = self
                .check_lines(ctx, usize::from(area.width.saturating_sub(2)), false)
                .len();
            (lines as u16 + 2).min(area.height / 2)
        } else {
            4
        };
        let [top, recent] = Layout::vertical([Constraint::Min(10), Constraint::Length(recent_rows)]).areas(area);
        let [chars, scales, options] = Layout::horizontal([
            Constraint::Percentage(46),
            Constraint::Percentage(24),
            Constraint::Percentage(30),
        ])
        .areas(top);
        hits.lists.push(self.render_characters(frame, chars, ctx));
        hits.lists.push(self.render_scales(frame, scales, ctx));
        hits.lists.push(self.render_options(frame, options, ctx, below));
        if below {
            self.render_checks(frame, recent, ctx);
        } else {
            render_recent(frame, recent, ctx);
        }
        hits
    }
}

impl Setup {
    /// The characters the filter keeps, with their pdb codes; returns the clickable list.
    fn render_characters(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> (Rect, usize, ListId) {
        let theme = ctx.theme;
        let list = self.filtered_characters(ctx.catalog);
        let focused = self.pane == SetupPane::Characters;
        let title = if self.filter.is_empty() {
            format!(" Characters ({}) · type to filter ", list.len())
        } else {
            format!(" Characters ({}) · filter: {}▏", list.len(), self.filter)
        };
        let b = block(title, focused, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let height = inner.height as usize;
        let first = self.char_view.first(list.len(), self.char_cursor, height);
        let (bfi, p16) = (ctx.catalog.scale("BFI"), ctx.catalog.scale("16Personalities"));
        let width = inner.width as usize;
        let lines: Vec<Line> = list
            .iter()
            .enumerate()
            .skip(first)
            .take(height)
            .map(|(i, c)| {
                let picked = self.characters.contains(&c.id);
                let code = |scale: Option<&crate::domain::scale::Scale>| {
                    scale
                        .and_then(|sc| c.code(sc, LabelSource::Pdb))
                        .unwrap_or_else(|| "–".into())
                };
                let origin = ctx
                    .catalog
                    .characters
                    .iter()
                    .find(|e| e.value.id == c.id)
                    .map_or("", |e| if e.origin == Origin::Bundled { "" } else { " user" });
                let text = format!(
                    "{} {} {} {} {} {}{}",
                    mark(picked, self.unreadable.contains(&c.id)),
                    pad(&c.name, 18),
                    c.language.code(),
                    pad(&code(bfi), 5),
                    pad(&code(p16), 4),
                    fit(&c.work, width.saturating_sub(40)),
                    origin
                );
                let style = if i == self.char_cursor && focused {
                    theme.selected()
                } else if picked {
                    theme.fg(theme.accent)
                } else {
                    theme.base()
                };
                Line::styled(pad(&text, width), style)
            })
            .collect();
        frame.render_widget(Paragraph::new(lines), inner);
        (inner, first, ListId::Characters)
    }

    /// The scales with their item and dimension counts; returns the clickable list.
    fn render_scales(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> (Rect, usize, ListId) {
        let theme = ctx.theme;
        let focused = self.pane == SetupPane::Scales;
        let b = block(" Scales ", focused, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let height = inner.height as usize;
        let first = self
            .scale_view
            .first(ctx.catalog.scales.len(), self.scale_cursor, height);
        let lines: Vec<Line> = ctx
            .catalog
            .scales
            .iter()
            .enumerate()
            .skip(first)
            .take(height)
            .map(|(i, e)| {
                let sc = &e.value;
                let picked = self.scales.contains(&sc.id);
                let mark = mark(picked, self.unreadable.contains(&sc.id));
                let width = inner.width as usize;
                // Counts when there is room for them next to the full id.
                let text = if width >= 30 {
                    format!(
                        "{mark} {} {:>3}i {:>2}d",
                        pad(&sc.id, width - 13),
                        sc.scored_items().count(),
                        sc.dimensions.len()
                    )
                } else {
                    format!("{mark} {}", fit(&sc.id, width.saturating_sub(4)))
                };
                let style = if i == self.scale_cursor && focused {
                    theme.selected()
                } else if picked {
                    theme.fg(theme.accent)
                } else {
                    theme.base()
                };
                Line::styled(text, style)
            })
            .collect();
        frame.render_widget(Paragraph::new(lines), inner);
        (inner, first, ListId::Scales)
    }

    /// The run's options, its estimate and the providers' checks; returns the clickable list.
    fn render_options(&self, frame: &mut Frame, area: Rect, ctx: &Ctx, below: bool) -> (Rect, usize, ListId) {
        let theme = ctx.theme;
        let focused = self.pane == SetupPane::Options;
        let b = block(" Run ", focused, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let label = |m: Method| match m {
            Method::ErBatch => "ER_batch",
            Method::ErAll => "ER_all",
            Method::Oc => "OC",
            Method::DOc => "d-OC",
            Method::Sr => "SR",
            Method::SrCot => "SR-CoT",
        };
        let n = Method::ALL.len();
        let mut lines = Vec::new();
        for row in 0..OPTION_ROWS {
            let text = if row < n {
                let m = Method::ALL[row];
                format!("{} {}", if self.methods.contains(&m) { "[x]" } else { "[ ]" }, label(m))
            } else if row == n {
                format!("repeats ‹ {} ›", self.repeats)
            } else if row == n + 1 {
                format!("style ‹ {} ›", style_name(self.style))
            } else if row == n + 2 {
                format!("rpa ‹ {} ›", self.rpa)
            } else {
                format!("judge ‹ {} ›", self.judge)
            };
            let style = if row == self.option_cursor && focused {
                theme.selected()
            } else {
                theme.base()
            };
            lines.push(Line::styled(pad(&text, inner.width as usize), style));
        }
        if !self.recorded_providers.is_empty() {
            let roles: Vec<String> = self
                .recorded_providers
                .iter()
                .map(|(role, name)| format!("{role} {name}"))
                .collect();
            let said = format!("recorded with {}, which this config does not have", roles.join(" · "));
            for part in crate::tui::wrap::wrap(&crate::text::terminal_safe(&said), inner.width as usize) {
                lines.push(Line::styled(part, theme.dim()));
            }
        }
        lines.push(Line::raw(""));
        lines.extend(self.estimate_lines(ctx, inner.width as usize));
        if !below {
            lines.extend(self.check_lines(ctx, inner.width as usize, true));
        }
        frame.render_widget(Paragraph::new(lines), inner);
        (inner, 0, ListId::Options)
    }

    /// The providers' checks in a box of their own across the screen, where the run pane is too
    /// short to hold them.
    fn render_checks(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) {
        let b = block(format!(" {CHECKS} "), false, ctx.theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        frame.render_widget(
            Paragraph::new(self.check_lines(ctx, inner.width as usize, false)),
            inner,
        );
    }

    /// What the run would cost in requests and tokens, or why it cannot start.
    fn estimate_lines(&self, ctx: &Ctx, width: usize) -> Vec<Line<'static>> {
        let theme = ctx.theme;
        match self.plan(ctx.catalog, ctx.providers) {
            Ok(plan) => {
                let e = estimate(&plan, ctx.catalog);
                let (requests, tokens) = (e.requests, e.tokens());
                vec![
                    Line::styled("Estimate", theme.title()),
                    Line::raw(format!(
                        "{}×{}×{}×{} runs",
                        plan.characters.len(),
                        plan.scales.len(),
                        plan.methods.len(),
                        plan.repeats
                    )),
                    Line::raw(format!("≈ {requests} requests")),
                    Line::raw(format!("≈ {}k tokens", tokens.div_ceil(1000))),
                    Line::styled("enter starts", theme.fg(theme.positive).add_modifier(Modifier::BOLD)),
                ]
            }
            // Wrapped: a reason is read whole, not cut at the pane's edge.
            Err(e) => crate::tui::widgets::wrapped(&e, width, theme.dim()),
        }
    }

    /// How each provider checked takes the method's requests.
    fn check_lines(&self, ctx: &Ctx, width: usize, heading: bool) -> Vec<Line<'static>> {
        let theme = ctx.theme;
        let mut lines = Vec::new();
        if heading && !self.checks.is_empty() {
            lines.push(Line::raw(""));
            lines.push(Line::styled(CHECKS, theme.title()));
        }
        for (name, verdict) in &self.checks {
            match verdict {
                None => lines.push(Line::styled(format!("{name}: checking…"), theme.dim())),
                Some(Err(e)) => lines.extend(crate::tui::widgets::wrapped(
                    &format!("{name}: {e}"),
                    width,
                    theme.fg(theme.error),
                )),
                Some(Ok(shapes)) => {
                    lines.push(Line::raw(name.clone()));
                    for v in shapes {
                        let color = match v.status {
                            "works" => theme.positive,
                            "adapted" => theme.marginal,
                            _ => theme.error,
                        };
                        lines.push(Line::styled(format!("  {:<17} {}", v.shape, v.status), theme.fg(color)));
                    }
                }
            }
        }
        lines
    }
}

/// What the providers' checks are headed by.
const CHECKS: &str = "The method's requests";

/// The most recent sessions.
fn render_recent(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let theme = ctx.theme;
    let b = block(" Recent sessions (5 opens the list) ", false, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let lines: Vec<Line> = if ctx.sessions.is_empty() {
        vec![Line::styled("no sessions yet", theme.dim())]
    } else {
        recent_rows(ctx.sessions, inner.width as usize, inner.height as usize)
            .into_iter()
            .map(|[id, status, model]| {
                Line::from(vec![
                    Span::raw(id),
                    Span::raw(" "),
                    Span::styled(status, theme.dim()),
                    Span::raw(" "),
                    Span::raw(model),
                ])
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The `rows` newest of `sessions` (data dir and samples alike: the list holds the data dir's
/// sessions, then the samples) in `width` columns: id, status and model, each column as wide in
/// every row (the ids as the longest shown) so that they line up.
fn recent_rows(sessions: &[crate::session::SessionEntry], width: usize, rows: usize) -> Vec<[String; 3]> {
    let mut newest: Vec<_> = sessions.iter().collect();
    newest.sort_by(|a, b| b.created.cmp(&a.created));
    newest.truncate(rows);
    let longest = newest.iter().map(|e| e.id.width()).max().unwrap_or(0);
    let id_width = longest.min(width.saturating_sub(14 + 16)).max(20);
    newest
        .iter()
        .map(|e| {
            [
                pad(&e.id, id_width),
                pad(e.short_status(), 13),
                fit(&e.model, width.saturating_sub(id_width + 15)),
            ]
        })
        .collect()
}

pub fn style_name(style: crate::rpa::prompt::RpaStyle) -> &'static str {
    match style {
        crate::rpa::prompt::RpaStyle::Description => "description",
        crate::rpa::prompt::RpaStyle::Chatharuhi => "chatharuhi",
        crate::rpa::prompt::RpaStyle::Rolegpt => "rolegpt",
    }
}

/// A row's pick box: `[!]` for a pick whose own file cannot be read now (the row shown may be the
/// bundled one of its id, standing in), which a start refuses.
fn mark(picked: bool, unreadable: bool) -> &'static str {
    match (picked, unreadable) {
        (true, true) => "[!]",
        (true, false) => "[x]",
        (false, _) => "[ ]",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionEntry;

    fn entry(id: &str, created: &str, status: &str, sample: bool) -> SessionEntry {
        SessionEntry {
            id: id.into(),
            name: None,
            created: created.into(),
            status: status.into(),
            model: "qwen2.5-coder-1.5b (local)".into(),
            models: Default::default(),
            path: id.into(),
            sample,
        }
    }

    #[test]
    fn recent_sessions_are_the_newest_in_aligned_columns() {
        // As the store lists them: the data dir's sessions, then the samples (older).
        let sessions = vec![
            entry("20261204-121637-0e36", "2026-12-04T12:16:43Z", "complete", false),
            entry(
                "20261204-134223-59d4",
                "2026-12-04T13:42:25Z",
                "complete with failures",
                false,
            ),
            entry(
                "20261129-233202-bfi-on-the-local-model-e80e",
                "2026-11-29T23:32:03Z",
                "complete",
                true,
            ),
            entry(
                "20261203-093314-five-characters-bfi-051e",
                "2026-12-03T09:33:25Z",
                "interrupted",
                true,
            ),
        ];
        let rows = recent_rows(&sessions, 120, 3);
        let ids: Vec<&str> = rows.iter().map(|r| r[0].trim_end()).collect();
        assert_eq!(
            ids,
            [
                "20261204-134223-59d4",
                "20261204-121637-0e36",
                "20261203-093314-five-characters-bfi-051e"
            ]
        );
        for row in &rows {
            assert_eq!(
                row[0].width(),
                "20261203-093314-five-characters-bfi-051e".len(),
                "{row:?}"
            );
            assert_eq!(row[1].width(), 13, "{row:?}");
        }
        assert_eq!(rows[0][1], "with failures");
    }
}
