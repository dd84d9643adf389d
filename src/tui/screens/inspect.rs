//! The inspector, the persona debugger: per dimension the score of the chosen method against the label
//! (H/L/X, ✓/✗); the judge's batches with their analyses (ER) or the items' options with keying and
//! score (OC, d-OC, SR); and for one item everything: question, answer, each method's reading of it,
//! and the exact prompts (the agent's, with retrieved memories, and the judge's after anonymization),
//! rebuilt with the same functions and the session's prompt templates, each under the names and
//! origins of the templates it came from.
//! It owns which unit, method, dimension and item it shows.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{Component, Ctx, Hits, ListId, Request};
use crate::catalog::Catalog;
use crate::domain::character::{Character, LabelSource, LabelType};
use crate::domain::scale::{Item, Keying, Scale};
use crate::domain::scoring::ItemOption;
use crate::llm::ChatMessage;
use crate::method::anonymize::Masker;
use crate::method::convert;
use crate::method::expert::{self, Exchange};
use crate::method::interview::{self, QueryStyle};
use crate::method::{Assessment, Method};
use crate::rpa::prompt;
use crate::templates::{Template, Templates};
use crate::tui::keys::Command;
use crate::tui::run_view::{ItemKey, RunView};
use crate::tui::theme::Theme;
use crate::tui::vocab::Effect;
use crate::tui::widgets::{ListView, block, fit, pad, score_text, wrapped};
use crate::tui::wrap::wrap;
use batches::batch_lines;

mod batches;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InspectFocus {
    Dimensions,
    Items,
    Drill,
}

#[derive(Debug, Clone)]
pub struct Inspect {
    pub unit: usize,
    pub method: usize,
    pub dim: usize,
    pub item: usize,
    pub focus: InspectFocus,
    pub scroll: u16,
    /// The furthest the scrolled pane (the drill, or the judge's analysis) can go and still show
    /// its last row at the bottom, as last drawn.
    pub scroll_end: u16,
    /// Labels shown; `None`: those the metrics use for the scale (pdb for BFI and 16P, else annotation).
    pub labels: Option<LabelSource>,
    /// The dimensions' window.
    pub dims_view: ListView,
}

impl Default for Inspect {
    fn default() -> Self {
        Inspect {
            unit: 0,
            method: 0,
            dim: 0,
            item: 0,
            focus: InspectFocus::Dimensions,
            scroll: 0,
            scroll_end: 0,
            labels: None,
            dims_view: ListView::default(),
        }
    }
}

impl Inspect {
    /// Opens on one item of a unit.
    pub fn select_item(&mut self, run: &RunView, catalog: &Catalog, key: &ItemKey) {
        if let Some(u) = run
            .units()
            .iter()
            .position(|(c, s, r)| *c == key.character && *s == key.scale && *r == key.repeat)
        {
            self.unit = u;
        }
        if let Some(s) = catalog.scale(&key.scale)
            && let Some(item) = s.items.iter().find(|i| i.id == key.item_id)
            && let Some(d) = item.dimension()
        {
            self.dim = d;
            let ids: Vec<u32> = s
                .scored_items()
                .filter(|i| i.dimension() == Some(d))
                .map(|i| i.id)
                .collect();
            self.item = ids.iter().position(|&i| i == key.item_id).unwrap_or(0);
            self.focus = InspectFocus::Drill;
            self.scroll = 0;
        }
    }

    /// The labels shown for the current unit.
    pub fn labels(&self, ctx: &Ctx) -> LabelSource {
        self.labels.unwrap_or_else(|| {
            let units = ctx.run.units();
            units
                .get(self.unit % units.len().max(1))
                .and_then(|(c, s, _)| ctx.catalog.character(c).map(|c| c.labels.exclusion_source(s)))
                .unwrap_or(LabelSource::Pdb)
        })
    }

    /// The item under the cursor, asked again on the chat screen.
    fn reask(&self, ctx: &Ctx) -> Vec<Request> {
        let units = ctx.run.units();
        let Some((c, s, r)) = units.get(self.unit).cloned() else {
            return Vec::new();
        };
        let Some(scale) = ctx.catalog.scale(&s) else {
            return Vec::new();
        };
        let dim = self.dim.min(scale.dimensions.len().saturating_sub(1));
        let ids: Vec<u32> = scale.items_of(dim).map(|i| i.id).collect();
        let Some(&item_id) = ids.get(self.item.min(ids.len().saturating_sub(1))) else {
            return Vec::new();
        };
        let key = ItemKey {
            character: c.clone(),
            scale: s,
            repeat: r,
            style: QueryStyle::Open,
            item_id,
        };
        let Some(row) = ctx.run.item(&key).filter(|r| !r.response.is_empty()) else {
            return vec![Request::Flash(
                "this item has no recorded answer to compare with".into(),
            )];
        };
        vec![Request::Reask {
            character: c,
            question: row.question.clone(),
            recorded: row.response.clone(),
        }]
    }

    pub fn command(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        if cmd == Command::Reask {
            return self.reask(ctx);
        }
        if cmd == Command::Reassess {
            return vec![match ctx.session_dir {
                Some(dir) => Effect::OfferReassess(dir.to_path_buf()).into(),
                None => Request::Flash("no session is shown here: open one from Sessions (5) first".into()),
            }];
        }
        let units = ctx.run.units().len().max(1);
        let methods = ctx.methods().len().max(1);
        match cmd {
            Command::NextUnit => {
                self.unit = (self.unit + 1) % units;
                self.scroll = 0;
            }
            Command::PrevUnit => {
                self.unit = (self.unit + units - 1) % units;
                self.scroll = 0;
            }
            Command::NextMethod => self.method = (self.method + 1) % methods,
            Command::PrevMethod => self.method = (self.method + methods - 1) % methods,
            Command::NextPane => {
                self.focus = match self.focus {
                    InspectFocus::Dimensions => InspectFocus::Items,
                    _ => InspectFocus::Dimensions,
                };
                self.scroll = 0;
            }
            Command::PrevPane => {
                self.focus = match self.focus {
                    InspectFocus::Items => InspectFocus::Dimensions,
                    _ => InspectFocus::Items,
                };
            }
            Command::Select => {
                self.focus = InspectFocus::Drill;
                self.scroll = 0;
            }
            Command::Back => {
                self.focus = match self.focus {
                    InspectFocus::Drill => InspectFocus::Items,
                    _ => InspectFocus::Dimensions,
                };
                self.scroll = 0;
            }
            Command::Toggle => {
                self.labels = Some(match self.labels(ctx) {
                    LabelSource::Pdb => LabelSource::Annotation,
                    LabelSource::Annotation => LabelSource::Target,
                    LabelSource::Target => LabelSource::Pdb,
                });
            }
            Command::ScrollUp => self.scroll = self.scroll.saturating_sub(5),
            Command::ScrollDown => self.scroll = self.scroll.saturating_add(5).min(self.scroll_end),
            Command::Up | Command::Down | Command::PageUp | Command::PageDown | Command::Top | Command::Bottom => {
                let delta: isize = match cmd {
                    Command::Up => -1,
                    Command::Down => 1,
                    Command::PageUp => -10,
                    Command::PageDown => 10,
                    Command::Top => -10_000,
                    _ => 10_000,
                };
                // Each cursor stays on its list, so a move back from past the end is seen at once.
                let (dims, items) = unit(ctx, self.unit).map_or((1, 1), |u| {
                    let dim = self.dim.min(u.scale.dimensions.len().saturating_sub(1));
                    let items = u.scale.scored_items().filter(|i| i.dimension() == Some(dim)).count();
                    (u.scale.dimensions.len(), items)
                });
                let moved =
                    |at: usize, len: usize| (at as isize + delta).clamp(0, len.saturating_sub(1) as isize) as usize;
                match self.focus {
                    InspectFocus::Dimensions => {
                        self.dim = moved(self.dim, dims);
                        self.item = 0;
                        self.scroll = 0;
                    }
                    InspectFocus::Items => {
                        self.item = moved(self.item, items);
                        self.scroll = 0;
                    }
                    InspectFocus::Drill => {
                        // From where it shows (a resize may have moved its end), to no further than its end.
                        let from = self.scroll.min(self.scroll_end);
                        self.scroll = (from as isize + delta).clamp(0, self.scroll_end as isize) as u16;
                    }
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// A click (or wheel) on the dimensions or the items: it takes the focus, and a click its cursor.
    pub fn click(&mut self, list: ListId, row: Option<usize>) {
        if list == ListId::Dimensions {
            self.focus = InspectFocus::Dimensions;
            if let Some(row) = row {
                self.dim = row;
            }
        } else {
            self.focus = InspectFocus::Items;
            if let Some(row) = row {
                self.item = row;
            }
        }
    }
}

pub struct Unit<'a> {
    pub character: &'a Character,
    pub scale: &'a Scale,
    pub repeat: u32,
}

pub fn unit<'a>(ctx: &Ctx<'a>, index: usize) -> Option<Unit<'a>> {
    let units = ctx.run.units();
    let (c, s, r) = units.get(index % units.len().max(1))?;
    Some(Unit {
        character: ctx.catalog.character(c)?,
        scale: ctx.catalog.scale(s)?,
        repeat: *r,
    })
}

pub fn assessment<'a>(run: &'a RunView, u: &Unit, method: Method, dim: &str) -> Option<&'a Assessment> {
    run.assessments.iter().find(|a| {
        a.character == u.character.id
            && a.scale == u.scale.id
            && a.repeat == u.repeat
            && a.method == method
            && a.dimension == dim
    })
}

/// Label score, its type, and whether the measured score falls on the same side.
pub fn verdict(
    u: &Unit,
    dim: usize,
    score: Option<f64>,
    source: LabelSource,
) -> (String, Option<LabelType>, Option<bool>) {
    let d = &u.scale.dimensions[dim];
    let label = u
        .character
        .labels
        .source(source)
        .get(&u.scale.id)
        .and_then(|set| set.get(&d.name));
    let Some(label) = label else {
        return ("–".into(), None, None);
    };
    let range = u.scale.dimension_range();
    let correct = match (label.kind.is_high(), score) {
        (Some(high), Some(s)) => Some(crate::domain::metrics::is_high(s, range) == high),
        _ => None,
    };
    (
        // A letter target has no score: its letter says it all.
        match (label.score, label.kind) {
            (Some(s), _) => format!("{s:.2}"),
            (None, LabelType::X) => "X".into(),
            (None, _) => "–".into(),
        },
        Some(label.kind),
        correct,
    )
}

fn exchanges(run: &RunView, u: &Unit, style: QueryStyle) -> Vec<Exchange> {
    u.scale
        .scored_items()
        .filter_map(|item| {
            let row = run.item(&ItemKey {
                character: u.character.id.clone(),
                scale: u.scale.id.clone(),
                repeat: u.repeat,
                style,
                item_id: item.id,
            })?;
            (!row.response.is_empty()).then(|| Exchange {
                item_id: item.id,
                question: row.question.clone(),
                response: row.response.clone(),
            })
        })
        .collect()
}

impl Component for Inspect {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        vec![
            (ctx.key(Command::NextUnit), "unit"),
            (ctx.key(Command::NextMethod), "method"),
            (ctx.key(Command::NextPane), "pane"),
            (ctx.key(Command::Select), "drill in"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let mut hits = Hits::default();
        let Some(u) = unit(ctx, self.unit) else {
            render_empty(frame, area, ctx);
            return hits;
        };
        let methods = ctx.methods();
        let method = methods[self.method % methods.len().max(1)];
        let [header, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
        self.render_header(frame, header, ctx, &u, method);
        if self.focus == InspectFocus::Drill {
            hits.scroll_end = Some(self.drill(frame, ctx, &u, body));
            return hits;
        }
        // The dimensions pane is as wide as its rows (the longest name, score, label, type and mark),
        // never more than half the screen: the judge's analysis beside it gets the rest.
        let name_width = u
            .scale
            .dimensions
            .iter()
            .map(|d| d.name.chars().count())
            .max()
            .unwrap_or(9)
            .max(9);
        // A row: name, " score label  T" (17), then " ✓ !" or " fail" (at most 5), and the borders (2).
        let wanted = name_width as u16 + 24;
        let dims_width = wanted.min(body.width * 11 / 20).max(30.min(body.width));
        let name_width = (dims_width as usize).saturating_sub(24).max(6);
        let [dims_area, detail_area] =
            Layout::horizontal([Constraint::Length(dims_width), Constraint::Min(20)]).areas(body);
        hits.lists
            .push(self.render_dimensions(frame, dims_area, ctx, &u, method, name_width));
        let (list, end) = self.render_detail(frame, detail_area, ctx, &u, method);
        hits.lists.extend(list);
        hits.scroll_end = Some(end);
        hits
    }
}

/// The inspector before there is a unit to inspect.
fn render_empty(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let theme = ctx.theme;
    let b = block(" Inspector ", false, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let text = match ctx.missing() {
        Some(missing) => vec![
            Line::raw(format!(
                "The session's {missing} is no longer in the catalog: its prompts cannot be shown."
            )),
            Line::styled(
                "Put its file back to inspect it; the session's answers and scores are kept (export has them).",
                theme.dim(),
            ),
        ],
        None => vec![
            Line::raw("Nothing to inspect yet."),
            Line::styled("Run an interview (1) or open a session (5).", theme.dim()),
        ],
    };
    frame.render_widget(Paragraph::new(text).wrap(ratatui::widgets::Wrap { trim: true }), inner);
}

impl Inspect {
    /// The unit, method and labels shown, and what the run adapted.
    fn render_header(&self, frame: &mut Frame, area: Rect, ctx: &Ctx, u: &Unit, method: Method) {
        let theme = ctx.theme;
        let labels = self.labels(ctx).name();
        let mut line = Line::from(vec![
            Span::styled(
                format!(" {} ", u.character.name),
                theme.fg(theme.character).add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!("· {} · repeat {} · ", u.scale.id, u.repeat)),
            Span::styled(method.name(), theme.fg(theme.measured).add_modifier(Modifier::BOLD)),
            Span::styled(format!(" · labels: {labels}"), theme.fg(theme.label_pdb)),
            // What the run adapted to its providers changes what the method did: say so here too.
            Span::styled(
                match ctx.run.adapted().as_slice() {
                    [] => String::new(),
                    all => format!("   adapted: {}", all.join("; ")),
                },
                theme.fg(theme.marginal),
            ),
        ]);
        // The moves, where the line has room for them whole (the key bar names them too).
        let hint = "   ←/→ unit · m method · space labels";
        if line.width() + hint.chars().count() <= usize::from(area.width) {
            line.push_span(Span::styled(hint, theme.dim()));
        }
        frame.render_widget(Paragraph::new(line), area);
    }

    /// Per dimension the method's score against the label; returns the clickable list.
    fn render_dimensions(
        &self,
        frame: &mut Frame,
        area: Rect,
        ctx: &Ctx,
        u: &Unit,
        method: Method,
        name_width: usize,
    ) -> (Rect, usize, ListId) {
        let theme = ctx.theme;
        let dim = self.dim.min(u.scale.dimensions.len().saturating_sub(1));
        let b = block(" Dimensions ", self.focus == InspectFocus::Dimensions, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let height = inner.height.saturating_sub(1) as usize;
        let first = self.dims_view.first(u.scale.dimensions.len(), dim, height);
        let list_area = Rect {
            y: inner.y + 1,
            height: inner.height.saturating_sub(1),
            ..inner
        };
        let mut lines = vec![Line::styled(
            format!("{} {:>6} {:>6}  type", pad("dimension", name_width), "score", "label"),
            theme.dim(),
        )];
        for (i, d) in u.scale.dimensions.iter().enumerate().skip(first).take(height) {
            let a = assessment(ctx.run, u, method, &d.name);
            let score = a.and_then(|a| a.score);
            let (label, kind, correct) = verdict(u, i, score, self.labels(ctx));
            let mark = match (a.map(|a| a.failure.is_some()), correct) {
                (Some(true), _) => Span::styled(" fail", theme.fg(theme.error)),
                (_, Some(true)) => Span::styled(" ✓", theme.fg(theme.positive)),
                (_, Some(false)) => Span::styled(" ✗", theme.fg(theme.negative)),
                _ => Span::raw(""),
            };
            let kind = match kind {
                Some(LabelType::H) => "H",
                Some(LabelType::L) => "L",
                Some(LabelType::X) => "X",
                None => "–",
            };
            let row_style = if i == dim && self.focus == InspectFocus::Dimensions {
                theme.selected()
            } else {
                theme.base()
            };
            lines.push(Line::from(vec![
                Span::styled(
                    format!(
                        "{} {:>6} {:>6}  {kind}",
                        pad(&fit(&d.name, name_width), name_width),
                        score_text(score),
                        label
                    ),
                    row_style,
                ),
                mark,
                match a.map(|a| a.score.is_some() && !a.failed_items().is_empty()) {
                    Some(true) => Span::styled(" !", theme.fg(theme.error)),
                    _ => Span::raw(""),
                },
            ]));
        }
        frame.render_widget(Paragraph::new(lines), inner);
        (list_area, first, ListId::Dimensions)
    }

    /// The selected dimension: the judge's batches, or the items with their options; returns the item
    /// list when it shows one.
    fn render_detail(
        &self,
        frame: &mut Frame,
        area: Rect,
        ctx: &Ctx,
        u: &Unit,
        method: Method,
    ) -> (Option<(Rect, usize, ListId)>, u16) {
        let theme = ctx.theme;
        let dim = self.dim.min(u.scale.dimensions.len().saturating_sub(1));
        let d = &u.scale.dimensions[dim];
        let a = assessment(ctx.run, u, method, &d.name);
        let b = block(
            format!(" {} · {} ", d.name, method.name()),
            self.focus == InspectFocus::Items,
            theme,
        );
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let width = inner.width as usize;
        let mut list = None;
        let lines = match a {
            None => vec![Line::styled("not assessed yet", theme.dim())],
            Some(a) if !method.item_level() => {
                // The item ↑/↓ choose (enter opens it, c asks it again): said above the batches.
                let items: Vec<_> = u.scale.items_of(dim).collect();
                let cursor = self.item.min(items.len().saturating_sub(1));
                let mut lines = Vec::new();
                if let Some(item) = items.get(cursor) {
                    let at = format!(
                        "▸ item {} ({} of {}): {}",
                        item.id,
                        cursor + 1,
                        items.len(),
                        item.statement.get(u.character.language)
                    );
                    lines.extend(wrapped(&at, width, theme.selected()));
                    let which = a.batches.iter().position(|b| b.item_ids.contains(&item.id));
                    let hint = match which {
                        Some(b) => format!("  in batch {}; ↑/↓ another, enter opens it, c asks it again", b + 1),
                        None => "  ↑/↓ another, enter opens it, c asks it again".to_string(),
                    };
                    lines.extend(wrapped(&hint, width, theme.dim()));
                    lines.push(Line::raw(""));
                }
                // After why the dimension failed, if it did; before the batches.
                let mut all = batch_lines(a, theme, width);
                let failure = a
                    .failure
                    .as_ref()
                    .map_or(0, |f| wrapped(&format!("failed: {f}"), width, theme.base()).len());
                all.splice(failure..failure, lines);
                all
            }
            Some(a) => {
                let list_area = Rect {
                    y: inner.y + 1,
                    height: inner.height.saturating_sub(1),
                    ..inner
                };
                list = Some((list_area, 0, ListId::InspectItems));
                self.item_lines(a, u, dim, theme, width)
            }
        };
        let paragraph = Paragraph::new(lines);
        let end = ends_at(paragraph.line_count(inner.width), inner.height);
        let top = self.scroll.min(end);
        frame.render_widget(paragraph.scroll((top, 0)), inner);
        // The item rows scroll with the pane: a click counts from the first one shown.
        let list = list.map(|(area, first, id): (Rect, usize, ListId)| (area, first + usize::from(top), id));
        (list, end)
    }

    /// The items of dimension `dim` with the option each answer gave and its score, then the dimension's.
    fn item_lines(&self, a: &Assessment, u: &Unit, dim: usize, theme: &Theme, width: usize) -> Vec<Line<'static>> {
        let items: Vec<_> = u.scale.items_of(dim).collect();
        let cursor = self.item.min(items.len().saturating_sub(1));
        let mut lines = vec![Line::styled(
            format!("{:>4} {:>4} {:>7} {:>6}  statement", "item", "key", "option", "score"),
            theme.dim(),
        )];
        for (i, item) in items.iter().enumerate() {
            let c = a.items.iter().find(|c| c.item_id == item.id);
            let keying = match item.keying() {
                Some(Keying::Positive) => "+".to_string(),
                Some(Keying::Negative) => "−".to_string(),
                Some(Keying::Pole { letter, .. }) => letter.clone(),
                None => "".into(),
            };
            let option = match c {
                Some(c) if c.refused => "x".to_string(),
                Some(c) if c.option.is_none() => "failed".to_string(),
                Some(c) => option_text(c.option),
                None => "–".into(),
            };
            let style = if i == cursor && self.focus == InspectFocus::Items {
                theme.selected()
            } else if c.is_some_and(|c| c.option.is_none()) {
                theme.fg(theme.error)
            } else if c.is_some_and(|c| c.refused) {
                theme.fg(theme.marginal)
            } else {
                theme.base()
            };
            let statement = item.statement.get(u.character.language);
            lines.push(Line::styled(
                format!(
                    "{:>4} {:>4} {:>7} {:>6}  {}",
                    item.id,
                    keying,
                    option,
                    score_text(c.and_then(|c| c.score)),
                    fit(statement, width.saturating_sub(27))
                ),
                style,
            ));
        }
        lines.push(Line::raw(""));
        if let Some(f) = &a.failure {
            lines.extend(wrapped(&format!("failed: {f}"), width, theme.fg(theme.error)));
        }
        lines.extend(wrapped(
            &format!(
                "dimension score {} · x = refused (counts at the midpoint)",
                score_text(a.score)
            ),
            width,
            theme.dim(),
        ));
        if a.items.iter().any(|c| c.weighed.is_some()) {
            lines.extend(wrapped(
                "expected scores: each option written, weighed by the probabilities of the options that could have been",
                width,
                theme.dim(),
            ));
        }
        let failed = a.failed_items().len();
        if failed > 0 {
            lines.push(Line::styled(
                format!("{failed} failed, left out (scored while at least half remain)"),
                theme.fg(theme.error),
            ));
        }
        lines
    }
}

fn option_text(option: Option<ItemOption>) -> String {
    match option {
        Some(ItemOption::Value(v)) => v.to_string(),
        Some(ItemOption::Refused) => "x".into(),
        None => "–".into(),
    }
}

/// A prompt as sent, under its title and the templates it was built from (`used`, with their origins).
fn messages_lines<'a>(
    title: String,
    (templates, used): (&Templates, &[Template]),
    messages: &[ChatMessage],
    theme: &Theme,
    width: usize,
) -> Vec<Line<'a>> {
    let each: Vec<String> = used
        .iter()
        .map(|t| format!("{} ({})", t.name(), templates.origin(*t)))
        .collect();
    let label = if used.len() == 1 { "template" } else { "templates" };
    let mut lines = vec![
        Line::styled(title, theme.title()),
        Line::styled(format!("{label}: {}", each.join(" · ")), theme.dim()),
    ];
    for m in messages {
        let role = m.role.name();
        lines.push(Line::styled(format!("[{role}]"), theme.fg(theme.accent)));
        // Rebuilt from the catalog (a user's files), not from the journal the app keeps inert.
        for l in wrap(&crate::text::terminal_safe(&m.content), width.saturating_sub(2)) {
            lines.push(Line::raw(format!("  {l}")));
        }
    }
    lines.push(Line::raw(""));
    lines
}

impl Inspect {
    /// One item, everything about it.
    /// The drill into one item; how far it can scroll (see [`Hits::scroll_end`]).
    fn drill(&self, frame: &mut Frame, ctx: &Ctx, u: &Unit, area: Rect) -> u16 {
        let theme = ctx.theme;
        let dim = self.dim.min(u.scale.dimensions.len().saturating_sub(1));
        let items: Vec<_> = u.scale.items_of(dim).collect();
        let Some(item) = items.get(self.item.min(items.len().saturating_sub(1))) else {
            return 0;
        };
        let b = block(
            format!(" Item {} · {} (esc back) ", item.id, u.scale.dimensions[dim].name),
            true,
            theme,
        );
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let width = inner.width as usize;
        let mut lines: Vec<Line> = Vec::new();
        lines.push(Line::from(vec![
            Span::styled("statement ", theme.dim()),
            Span::raw(item.statement.get(u.character.language).clone()),
        ]));
        let templates = match ctx
            .run
            .session
            .plan
            .as_ref()
            .map(|p| Templates::from_record(&p.prompts))
        {
            Some(Err(e)) => {
                lines.push(Line::styled(
                    format!("{e}; the prompts below use the bundled templates"),
                    theme.fg(theme.error),
                ));
                Templates::default()
            }
            Some(Ok(t)) => t,
            None => Templates::default(),
        };
        let drilled = Drilled {
            ctx,
            u,
            item,
            dim,
            templates: &templates,
            width,
        };
        lines.extend(drilled.interviews());
        lines.extend(drilled.readings());
        let paragraph = Paragraph::new(lines).wrap(Wrap { trim: false });
        let end = ends_at(paragraph.line_count(inner.width), inner.height);
        frame.render_widget(paragraph.scroll((self.scroll.min(end), 0)), inner);
        end
    }
}

/// The furthest scroll of `rows` rows in a pane `height` rows high that still fills it.
fn ends_at(rows: usize, height: u16) -> u16 {
    u16::try_from(rows.saturating_sub(usize::from(height))).unwrap_or(u16::MAX)
}

/// The item the inspector drills into, with what rebuilding its prompts takes.
struct Drilled<'a> {
    ctx: &'a Ctx<'a>,
    u: &'a Unit<'a>,
    item: &'a Item,
    dim: usize,
    /// The session's prompt templates (the bundled ones when they cannot be read).
    templates: &'a Templates,
    width: usize,
}

impl Drilled<'_> {
    /// The item's interview in each query style of the shown methods, with the agent's prompt rebuilt
    /// exactly.
    fn interviews(&self) -> Vec<Line<'static>> {
        let (ctx, u, item, width) = (self.ctx, self.u, self.item, self.width);
        let theme = ctx.theme;
        let lang = u.character.language;
        let plan = ctx.run.session.plan.as_ref();
        let styles: std::collections::BTreeSet<QueryStyle> = ctx.methods().iter().map(|m| m.query_style()).collect();
        let mut lines = Vec::new();
        for style in &styles {
            let key = ItemKey {
                character: u.character.id.clone(),
                scale: u.scale.id.clone(),
                repeat: u.repeat,
                style: *style,
                item_id: item.id,
            };
            let Some(row) = ctx.run.item(&key) else { continue };
            lines.push(Line::raw(""));
            lines.push(Line::styled(
                format!("── {} interview ({}) ──", style.name(), row.status.label()),
                theme.title(),
            ));
            lines.push(Line::styled(
                u.character.experimenter.clone(),
                theme.fg(theme.experimenter),
            ));
            for l in wrap(&row.question, width.saturating_sub(2)) {
                lines.push(Line::raw(format!("  {l}")));
            }
            lines.push(Line::styled(u.character.name.clone(), theme.fg(theme.character)));
            for l in wrap(&row.response, width.saturating_sub(2)) {
                lines.push(Line::raw(format!("  {l}")));
            }
            if row.truncated {
                lines.push(Line::styled(
                    "  (cut at the answer cap: finish_reason \"length\")",
                    theme.fg(theme.warning),
                ));
            }
            if let Some(e) = &row.error {
                for l in wrap(&format!("failed: {e}"), width.saturating_sub(2)) {
                    lines.push(Line::styled(format!("  {l}"), theme.fg(theme.error)));
                }
            }
            // The agent's prompt, rebuilt exactly.
            if let Some(plan) = plan {
                let memories = ctx.memories.get(&u.character.id).map(Arc::as_ref);
                let query = interview::query(self.templates, u.character, u.scale, item, *style);
                let assembled = prompt::assemble(
                    self.templates,
                    u.character,
                    plan.style,
                    memories,
                    item.question.get(lang),
                    &query,
                );
                // Rebuilt from the character as it is now: said when that is not what the run had.
                let now = u.character.version(memories.map_or(&[][..], |m| &m.chunks));
                let changed = ctx
                    .run
                    .session
                    .character_versions
                    .get(&u.character.id)
                    .is_some_and(|had| had.len() > 1 || !had.contains(&now));
                let note = if changed {
                    " (rebuilt from the character as it is now: it was edited since, or during, the run)".into()
                } else if assembled.retrieved == row.retrieved
                    || row.retrieved.is_empty() && assembled.retrieved.is_empty()
                {
                    String::new()
                } else {
                    " (memories differ from the journal's: they changed since the run)".into()
                };
                lines.push(Line::raw(""));
                lines.extend(messages_lines(
                    format!(
                        "prompt sent to the agent · style {} · retrieved {:?}{note}",
                        super::setup::style_name(plan.style),
                        row.retrieved
                    ),
                    (self.templates, &[interview::query_template(*style, lang)]),
                    &assembled.messages,
                    theme,
                    width,
                ));
            }
        }
        lines
    }

    /// Each method's reading of the item, and its judge prompt.
    fn readings(&self) -> Vec<Line<'static>> {
        let (ctx, u, item, dim) = (self.ctx, self.u, self.item, self.dim);
        let theme = ctx.theme;
        // What the session's judge read: its recorded names hidden too.
        let masker = match &ctx.run.session.plan {
            Some(plan) => plan.masker(u.character),
            None => Masker::new(&u.character.aliases, &u.character.experimenter),
        };
        let mut lines = Vec::new();
        for method in ctx.methods() {
            let Some(a) = assessment(ctx.run, u, method, &u.scale.dimensions[dim].name) else {
                continue;
            };
            let ex = exchanges(ctx.run, u, method.query_style());
            lines.push(Line::styled(format!("── {} ──", method.name()), theme.title()));
            if method.item_level() {
                lines.extend(self.conversion(method, a, &ex, &masker));
            } else if let Some((bi, batch)) = a
                .batches
                .iter()
                .enumerate()
                .find(|(_, b)| b.item_ids.contains(&item.id))
            {
                lines.push(Line::raw(format!(
                    "in batch {} of {} → {}",
                    bi + 1,
                    a.batches.len(),
                    score_text(batch.score)
                )));
                let refs: Vec<&Exchange> = batch
                    .item_ids
                    .iter()
                    .filter_map(|id| ex.iter().find(|e| e.item_id == *id))
                    .collect();
                let messages = expert::messages(self.templates, u.scale, dim, u.character.language, &masker, &refs);
                lines.extend(messages_lines(
                    "judge prompt (anonymized)".into(),
                    (self.templates, &[Template::ExpertRating, Template::ExpertConversation]),
                    &messages,
                    theme,
                    self.width,
                ));
            }
        }
        lines
    }

    /// An item-level method's reading of the item: the option and its score, and the call that
    /// converted it.
    fn conversion(&self, method: Method, a: &Assessment, ex: &[Exchange], masker: &Masker) -> Vec<Line<'static>> {
        let (ctx, u, item, dim, templates) = (self.ctx, self.u, self.item, self.dim, self.templates);
        let mut lines = Vec::new();
        if let Some(c) = a.items.iter().find(|c| c.item_id == item.id) {
            let option = if c.refused {
                "x (refused)".into()
            } else {
                option_text(c.option)
            };
            lines.push(Line::raw(format!(
                "option {option} → item score {}",
                score_text(c.score)
            )));
            if let Some(e) = &c.error {
                for l in wrap(&format!("no option: {e}"), self.width.saturating_sub(2)) {
                    lines.push(Line::styled(format!("  {l}"), ctx.theme.fg(ctx.theme.error)));
                }
            }
        }
        // The call that converted this item: as journaled, or (older sessions) regrouped by the plan.
        let recorded = a.calls.iter().find(|ids| ids.contains(&item.id)).map(|ids| {
            let refs: Vec<&Exchange> = ex.iter().filter(|e| ids.contains(&e.item_id)).collect();
            match method {
                Method::DOc => convert::doc_messages(templates, u.scale, dim, masker, &refs),
                _ => convert::oc_messages(templates, u.scale, u.character, &refs),
            }
        });
        let messages = recorded.or_else(|| {
            let plan = ctx.run.session.plan.as_ref();
            let per_call = plan.map_or(convert::MAX_ITEMS_PER_CALL, |p| p.items_per_call as usize);
            let groups = match method {
                Method::DOc => convert::doc_groups(templates, u.scale, masker, ex, per_call),
                _ => convert::oc_groups(templates, u.scale, u.character, ex, per_call),
            };
            groups
                .into_iter()
                .find(|(_, ids)| ids.contains(&item.id))
                .map(|(m, _)| m)
        });
        if method != Method::Sr
            && let Some(messages) = messages
        {
            let template = match method {
                Method::DOc => Template::DimensionConversion,
                _ => Template::OptionConversion,
            };
            lines.extend(messages_lines(
                "judge prompt".into(),
                (templates, &[template]),
                &messages,
                ctx.theme,
                self.width,
            ));
        }
        lines
    }
}
