//! The compare screen: a radar chart (Braille canvas) of the measured profile against the pdb and annotation
//! labels, bars per dimension, Acc_Dim / MAE for the character, and a Table-2-style table of every
//! character × scale × method of the session, sortable. Scales with many dimensions are paged.
//! It owns the character, method, page and sort shown, and the characters' RoleBench results. With the
//! assessments view open (`J`: the sessions that assess the same interviews, see [`JudgesView`]) it
//! shows that instead.

use std::collections::BTreeMap;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::widgets::canvas::{Canvas, Line as CLine};

use super::inspect::Unit;
use super::judges::JudgesView;
use super::{Component, Ctx, Hits, ListId, Request};
use crate::analysis::judges::Judges;
use crate::domain::character::{Character, LabelSource, LabelType};
use crate::domain::metrics::alignment;
use crate::domain::scale::Scale;
use crate::method::{Assessment, Method};
use crate::study::interview::results::rows;
use crate::study::interview::spread::Spread;
use crate::tui::keys::Command;
use crate::tui::run_view::RunView;
use crate::tui::theme::Theme;
use crate::tui::vocab::Effect;
use crate::tui::widgets::{ListView, block, first_fitting, fit, pad, score_text};

#[derive(Debug, Clone, Default)]
pub struct Compare {
    /// Character id → its newest RoleBench result, shown beside its personality.
    pub rolebench: BTreeMap<String, RolebenchScore>,
    pub unit: usize,
    pub method: usize,
    pub all_methods: bool,
    pub page: usize,
    pub sort: usize,
    pub cursor: usize,
    /// The assessments view, while it is open.
    pub judges: Option<JudgesView>,
    pub view: ListView,
}

/// A character's RoleBench result from one session.
#[derive(Debug, Clone, PartialEq)]
pub struct RolebenchScore {
    pub session: String,
    pub questions: usize,
    pub rouge_l_f: f64,
    pub win_rate: Option<f64>,
}

/// The session whose interviews the shown run holds: its parent for a re-assessment, else itself
/// by its folder's name (a copied folder's is not the id its journal was started under).
fn interviews_of(ctx: &Ctx) -> Option<String> {
    let plan = ctx.run.session.plan.as_ref()?;
    let own = || {
        ctx.session_dir
            .and_then(|dir| dir.file_name())
            .map_or_else(|| ctx.run.session.id.clone(), |n| n.to_string_lossy().into_owned())
    };
    Some(plan.parent.clone().unwrap_or_else(own))
}

impl Compare {
    /// The assessments view, if it shows the interviews of the run shown (another run may have been
    /// opened since).
    fn judges_view(&self, ctx: &Ctx) -> Option<&JudgesView> {
        self.judges
            .as_ref()
            .filter(|v| Some(&v.judges.interviews) == interviews_of(ctx).as_ref())
    }

    /// The sessions that assess the shown interviews, compared (or why they could not be): the
    /// assessments view opens on them. Returns the flash message.
    pub fn judged(&mut self, result: Result<Judges, String>) -> String {
        match result {
            Ok(judges) => {
                let message = format!(
                    "{} assessments of these interviews (esc: back to the profile)",
                    judges.sessions.len()
                );
                self.judges = Some(JudgesView::new(judges));
                message
            }
            Err(e) => e,
        }
    }

    pub fn command(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        if self.judges_view(ctx).is_some() {
            match cmd {
                Command::Back | Command::Judges => self.judges = None,
                other => {
                    if let Some(view) = self.judges.as_mut() {
                        view.command(other);
                    }
                }
            }
            return Vec::new();
        }
        if cmd == Command::Judges {
            return match interviews_of(ctx) {
                Some(interviews) => vec![
                    Request::Effect(Effect::Judges { interviews }),
                    Request::Flash("looking for other assessments of these interviews…".into()),
                ],
                None => vec![Request::Flash("open an interview session first (5)".into())],
            };
        }
        let characters = ctx
            .run
            .session
            .plan
            .as_ref()
            .map_or(1, |p| p.characters.len() * p.scales.len())
            .max(1);
        let methods = ctx.methods();
        let count = methods.len().max(1);
        if browse(
            cmd,
            (&mut self.unit, &mut self.method, &mut self.page),
            characters,
            count,
        ) {
            return Vec::new();
        }
        match cmd {
            Command::AllMethods => self.all_methods = !self.all_methods,
            Command::Sort => self.sort = (self.sort + 1) % 4,
            Command::Up => self.cursor = self.cursor.saturating_sub(1),
            Command::Down => self.cursor += 1,
            Command::Select => {
                let rows = self.table_rows(ctx);
                if let Some(row) = rows.get(self.cursor.min(rows.len().saturating_sub(1))) {
                    self.unit = row.4;
                    self.method = methods.iter().position(|m| *m == row.2).unwrap_or(0);
                    self.all_methods = false;
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// A click on the session table puts its cursor on the row.
    pub fn click(&mut self, row: Option<usize>) {
        if let Some(row) = row {
            self.cursor = row;
        }
    }
}

/// Radar axes per page; more dimensions (CABIN's 41) are paged.
pub const PAGE: usize = 12;

/// (character, scale) pairs of the shown session, in plan order.
fn pairs(run: &RunView) -> Vec<(String, String)> {
    run.session.plan.as_ref().map_or_else(Vec::new, |p| {
        p.characters
            .iter()
            .flat_map(|c| p.scales.iter().map(move |s| (c.clone(), s.clone())))
            .collect()
    })
}

/// Mean score over repeats of one dimension.
fn measured(run: &RunView, character: &str, scale: &str, method: Method, dim: &str) -> Option<f64> {
    let scores: Vec<f64> = run
        .assessments
        .iter()
        .filter(|a| a.character == character && a.scale == scale && a.method == method && a.dimension == dim)
        .filter_map(|a| a.score)
        .collect();
    (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64)
}

/// The spread of a dimension's score across its repeats (else its batches), for the error bars.
fn spread(run: &RunView, character: &str, scale: &str, method: Method, dim: &str) -> Option<Spread> {
    let list: Vec<&Assessment> = run
        .assessments
        .iter()
        .filter(|a| a.character == character && a.scale == scale && a.method == method && a.dimension == dim)
        .collect();
    crate::study::interview::spread::spread(&list)
}

/// `bar` with an error bar over it: `├` and `┤` at `value ∓ sd` (0–1), `┼` where they meet.
fn whiskers(bar: &str, value: f64, sd: f64) -> String {
    let mut cells: Vec<char> = bar.chars().collect();
    let width = cells.len();
    if width == 0 {
        return String::new();
    }
    let at = |x: f64| ((x.clamp(0.0, 1.0) * width as f64).round() as usize).min(width - 1);
    let (lo, hi) = (at(value - sd), at(value + sd));
    if lo == hi {
        cells[lo] = '┼';
    } else {
        cells[lo] = '├';
        cells[hi] = '┤';
    }
    cells.into_iter().collect()
}

/// (Acc_Dim, MAE) of one character × scale × method against the labels the metrics use.
pub fn accuracy(ctx: &Ctx, character: &str, scale: &str, method: Method) -> Option<(f64, f64)> {
    let s = ctx.catalog.scale(scale)?;
    let list: Vec<&Assessment> = ctx
        .run
        .assessments
        .iter()
        .filter(|a| a.character == character && a.scale == scale && a.method == method)
        .collect();
    let order: Vec<String> = s.dimensions.iter().map(|d| d.name.clone()).collect();
    let a = alignment(s.dimension_range(), &order, &rows(ctx.catalog, scale, &list, None))?;
    Some((a.overall.acc_dim, a.overall.mae))
}

/// Rows of the session table in the chosen order: (character, scale, method, (Acc_Dim, MAE), pair index).
pub type TableRow = (String, String, Method, Option<(f64, f64)>, usize);

impl Compare {
    /// The session table's rows in the chosen order.
    pub fn table_rows(&self, ctx: &Ctx) -> Vec<TableRow> {
        let methods = ctx.methods();
        let mut rows: Vec<TableRow> = Vec::new();
        for (pi, (pc, ps)) in pairs(ctx.run).iter().enumerate() {
            for m in &methods {
                rows.push((pc.clone(), ps.clone(), *m, accuracy(ctx, pc, ps, *m), pi));
            }
        }
        let key = |r: &TableRow, i: usize| r.3.map(|x| if i == 0 { x.0 } else { x.1 }).filter(|v| !v.is_nan());
        // Rows without a value (not assessed yet, or failed) go last in either direction.
        let by = |a: Option<f64>, b: Option<f64>, descending: bool| match (a, b) {
            (Some(a), Some(b)) if descending => b.total_cmp(&a),
            (Some(a), Some(b)) => a.total_cmp(&b),
            (a, b) => b.is_some().cmp(&a.is_some()),
        };
        match self.sort % 4 {
            1 => rows.sort_by(|a, b| by(key(a, 0), key(b, 0), true)),
            2 => rows.sort_by(|a, b| by(key(a, 1), key(b, 1), false)),
            3 => rows.sort_by_key(|r| r.2),
            _ => {}
        }
        rows
    }
}

/// The moves of a profile view among `units` character × scale pairs, `methods` methods and the pages
/// of a scale's dimensions (a new unit starts on its first page); false for any other command.
pub(super) fn browse(
    cmd: Command,
    (unit, method, page): (&mut usize, &mut usize, &mut usize),
    units: usize,
    methods: usize,
) -> bool {
    match cmd {
        Command::NextUnit | Command::PrevUnit => {
            let step = if cmd == Command::NextUnit { 1 } else { units - 1 };
            *unit = (*unit + step) % units;
            *page = 0;
        }
        Command::NextMethod => *method = (*method + 1) % methods,
        Command::PrevMethod => *method = (*method + methods - 1) % methods,
        Command::NextPage => *page += 1,
        Command::PrevPage => *page = page.saturating_sub(1),
        _ => return false,
    }
    true
}

/// " · page 2/3 ([ ])" in a pane's title when it has pages.
pub(super) fn page_note(page: usize, pages: usize) -> String {
    if pages > 1 {
        format!(" · page {}/{} ([ ])", page + 1, pages)
    } else {
        String::new()
    }
}

/// The colour of the i-th series (a method, a session).
pub(super) fn series_color(t: &Theme, i: usize) -> Color {
    [t.measured, t.streaming, t.warning, t.positive, t.accent, t.negative][i % 6]
}

impl Component for Compare {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        if let Some(view) = self.judges_view(ctx) {
            return view.hints(ctx);
        }
        vec![
            (ctx.key(Command::NextMethod), "method"),
            (ctx.key(Command::AllMethods), "all methods"),
            (ctx.key(Command::NextUnit), "character"),
            (ctx.key(Command::NextPage), "page"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        if let Some(view) = self.judges_view(ctx) {
            return view.render(frame, area, ctx);
        }
        let pairs = pairs(ctx.run);
        let methods = ctx.methods();
        let (Some((c, s)), false) = (pairs.get(self.unit % pairs.len().max(1)), methods.is_empty()) else {
            render_empty(frame, area, ctx);
            return Hits::default();
        };
        let (Some(character), Some(scale)) = (ctx.catalog.character(c), ctx.catalog.scale(s)) else {
            render_empty(frame, area, ctx);
            return Hits::default();
        };
        let shown: Vec<(usize, Method)> = if self.all_methods {
            methods.iter().copied().enumerate().collect()
        } else {
            let i = self.method % methods.len();
            vec![(i, methods[i])]
        };
        let table_height = (pairs.len() * methods.len()).min(8) as u16 + 3;
        let [header, top, table_area] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(10),
            Constraint::Length(table_height),
        ])
        .areas(area);
        let profile = Profile {
            ctx,
            c,
            s,
            character,
            scale,
            shown,
        };
        self.render_header(frame, header, &profile);

        // A radar needs three axes to be a shape: a scale of one or two dimensions (GSE) gets bars only.
        let (radar_area, bars_area) = if scale.dimensions.len() >= 3 {
            let [radar, bars] = Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(top);
            (Some(radar), bars)
        } else {
            (None, top)
        };
        // A page is as many dimensions as the bars pane shows whole (a title, a bar per method shown and
        // up to two labels each, under the legend); the radar draws the PAGE axes around them.
        let per_dimension = 1 + profile.shown.len() + 2;
        let fit = (usize::from(bars_area.height.saturating_sub(3)) / per_dimension).clamp(1, PAGE);
        let dims = scale.dimensions.len();
        let pages = dims.div_ceil(fit).max(1);
        let page = self.page.min(pages - 1);
        let bars_range: Vec<usize> = (page * fit..((page + 1) * fit).min(dims)).collect();
        let first_axis = page * fit / PAGE * PAGE;
        let range: Vec<usize> = (first_axis..(first_axis + PAGE).min(dims)).collect();
        if let Some(radar_area) = radar_area {
            profile.render_radar(frame, radar_area, first_axis, &range);
        }
        profile.render_bars(frame, bars_area, &bars_range, &page_note(page, pages));
        self.render_table(frame, table_area, ctx)
    }
}

/// The compare screen before there is anything to compare.
fn render_empty(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let theme = ctx.theme;
    let b = block(" Compare ", false, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let text = match ctx.missing() {
        Some(missing) => vec![
            Line::raw(format!(
                "The session's {missing} is no longer in the catalog: nothing to compare it with."
            )),
            Line::styled(
                "Put its file back to see it here; the session's answers and scores are kept (export has them).",
                theme.dim(),
            ),
        ],
        None => vec![
            Line::raw("No results to compare yet."),
            Line::styled("Finish a run, or open a session (5).", theme.dim()),
        ],
    };
    frame.render_widget(Paragraph::new(text).wrap(ratatui::widgets::Wrap { trim: true }), inner);
}

impl Compare {
    /// Header: who, what, how well.
    fn render_header(&self, frame: &mut Frame, area: Rect, p: &Profile) {
        let (ctx, theme) = (p.ctx, p.ctx.theme);
        let mut spans = vec![
            Span::styled(
                format!(" {} ", p.character.name),
                theme.fg(theme.character).add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!("· {} · ", p.scale.id)),
        ];
        for (i, m) in &p.shown {
            let acc = accuracy(ctx, p.c, p.s, *m);
            spans.push(Span::styled(
                m.name().to_string(),
                theme.fg(series_color(theme, *i)).add_modifier(Modifier::BOLD),
            ));
            spans.push(Span::raw(match acc {
                Some((a, e)) => format!(" Acc_Dim {a:.2} MAE {e:.3}  "),
                None => " –  ".into(),
            }));
        }
        if let Some(rb) = self.rolebench.get(&p.character.id) {
            spans.push(Span::styled(
                format!(
                    "RoleBench Rouge-L F {:.3}{} ({} q.)  ",
                    rb.rouge_l_f,
                    rb.win_rate
                        .map_or(String::new(), |w| format!(" · win {:.0} %", w * 100.0)),
                    rb.questions
                ),
                theme.fg(theme.accent),
            ));
        }
        // The moves, where the line has room for them whole (the key bar names them too).
        let hint = "m method · a all · ←/→ character";
        let used: usize = spans.iter().map(|s| s.width()).sum();
        if used + hint.chars().count() <= usize::from(area.width) {
            spans.push(Span::styled(hint, theme.dim()));
        }
        frame.render_widget(Paragraph::new(Line::from(spans)), area);
    }

    /// Table 2: every character × scale × method, with a cursor; its rows are clickable.
    fn render_table(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let theme = ctx.theme;
        let b = block(" Session table (o sorts · enter shows the row) ", false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let rows = self.table_rows(ctx);
        let sort = ["plan order", "Acc_Dim ↓", "MAE ↑", "method"][self.sort % 4];
        let columns = format!(
            "{} {} {:<9} {:>7} {:>7}",
            pad("character", 22),
            pad("scale", 16),
            "method",
            "Acc_Dim",
            "MAE"
        );
        // The order said in full, else its name alone, else cut with an ellipsis.
        let width = usize::from(inner.width);
        let (full, short) = (format!("{columns}   sorted by {sort}"), format!("{columns}  {sort}"));
        let header = first_fitting([full, short.clone()], width).unwrap_or_else(|| fit(&short, width));
        let mut lines = vec![Line::styled(header, theme.dim())];
        let height = inner.height.saturating_sub(1) as usize;
        let cursor = self.cursor.min(rows.len().saturating_sub(1));
        let first = self.view.first(rows.len(), cursor, height);
        let list_area = Rect {
            y: inner.y + 1,
            height: inner.height.saturating_sub(1),
            ..inner
        };
        let hits = Hits::list(list_area, first, ListId::CompareTable);
        for (i, (rc, rs, m, acc, _)) in rows.iter().enumerate().skip(first).take(height) {
            let name = ctx.catalog.character(rc).map_or(rc.clone(), |x| x.name.clone());
            let (a, e) = acc.map_or(("–".to_string(), "–".to_string()), |(a, e)| {
                (format!("{a:.3}"), format!("{e:.3}"))
            });
            let style = if i == cursor { theme.selected() } else { theme.base() };
            lines.push(Line::styled(
                format!("{} {} {:<9} {a:>7} {e:>7}", pad(&name, 22), pad(rs, 16), m.name()),
                style,
            ));
        }
        frame.render_widget(Paragraph::new(lines), inner);
        hits
    }
}

/// The profile of one character on one scale, as the radar and the bars draw it: the methods shown
/// (with their series index) against the character's labels.
struct Profile<'a> {
    ctx: &'a Ctx<'a>,
    /// The character's and the scale's ids, as the plan names them.
    c: &'a str,
    s: &'a str,
    character: &'a Character,
    scale: &'a Scale,
    shown: Vec<(usize, Method)>,
}

impl Profile<'_> {
    /// A score on the scale's range as 0–1.
    fn norm(&self, v: f64) -> f64 {
        let (min, max) = self.scale.dimension_range();
        ((v - min) / (max - min)).clamp(0.0, 1.0)
    }

    /// The label of dimension `d` from `source` on the scale's range. A letter target has no score: it
    /// is drawn where its band begins (0.6 / 0.4 of the range).
    fn label(&self, source: LabelSource, d: usize) -> Option<f64> {
        let l = self
            .character
            .labels
            .get(source, &self.scale.id, &self.scale.dimensions[d].name)?;
        Some(crate::analysis::diff::Reference::of(l)?.position(self.scale.dimension_range()))
    }

    /// Mean score of method `m` on dimension `dim` over repeats.
    fn measured(&self, m: Method, dim: &str) -> Option<f64> {
        measured(self.ctx.run, self.c, self.s, m, dim)
    }

    /// Whether the character has target labels on the scale (they get a series of their own).
    fn targets(&self) -> bool {
        self.character.labels.target.contains_key(&self.scale.id)
    }

    /// The radar's series on the dimensions of `range`: each method shown, then the labels, 0–1.
    fn radar_series(&self, range: &[usize]) -> Vec<(Color, Vec<Option<f64>>)> {
        let theme = self.ctx.theme;
        let mut series: Vec<(Color, Vec<Option<f64>>)> = Vec::new();
        for (i, m) in &self.shown {
            let v = range
                .iter()
                .map(|&d| self.measured(*m, &self.scale.dimensions[d].name).map(|v| self.norm(v)))
                .collect();
            series.push((series_color(theme, *i), v));
        }
        let labels = |source: LabelSource| -> Vec<Option<f64>> {
            range
                .iter()
                .map(|&d| self.label(source, d).map(|v| self.norm(v)))
                .collect()
        };
        series.push((theme.label_pdb, labels(LabelSource::Pdb)));
        series.push((theme.label_annotation, labels(LabelSource::Annotation)));
        if self.targets() {
            series.push((theme.label_target, labels(LabelSource::Target)));
        }
        series
    }

    /// The radar (Braille canvas) of the dimensions of `range`, the page of axes from `first_axis`.
    fn render_radar(&self, frame: &mut Frame, area: Rect, first_axis: usize, range: &[usize]) {
        let (theme, scale) = (self.ctx.theme, self.scale);
        let dims = scale.dimensions.len();
        let axes_note = if dims > PAGE {
            format!(
                " · dimensions {}–{} of {dims}",
                first_axis + 1,
                first_axis + range.len()
            )
        } else {
            String::new()
        };
        let b = block(format!(" Profile{axes_note} "), false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);

        let n = range.len().max(3);
        let angle = |k: usize| std::f64::consts::FRAC_PI_2 - 2.0 * std::f64::consts::PI * k as f64 / n as f64;
        let point = |k: usize, r: f64| (r * angle(k).cos(), r * angle(k).sin());
        let series = self.radar_series(range);
        let grid = theme.border;
        // Axis names as wide as the radar leaves room for beside it: whole, else each shortened to
        // where the names still differ (the bars beside it spell them out).
        let label_width = (usize::from(inner.width) / 4).clamp(6, 14);
        let names: Vec<String> = range
            .iter()
            .map(|&d| {
                let dim = &scale.dimensions[d];
                match &dim.poles {
                    Some([a, b]) => format!("{a}/{b}"),
                    None => dim.name.clone(),
                }
            })
            .collect();
        let names = axis_names(&names, label_width);
        let aspect = f64::from(inner.width) / (2.0 * f64::from(inner.height.max(1)));
        let axes = range.len();
        let canvas = Canvas::default()
            .marker(Marker::Braille)
            .x_bounds([-1.45 * aspect.max(1.0), 1.45 * aspect.max(1.0)])
            .y_bounds([-1.25, 1.25])
            .paint(move |ctx| {
                for ring in [0.5, 1.0] {
                    for k in 0..n {
                        let (x1, y1) = point(k, ring);
                        let (x2, y2) = point((k + 1) % n, ring);
                        ctx.draw(&CLine::new(x1, y1, x2, y2, grid));
                    }
                }
                for k in 0..axes {
                    let (x, y) = point(k, 1.0);
                    ctx.draw(&CLine::new(0.0, 0.0, x, y, grid));
                }
                ctx.layer();
                for (color, values) in &series {
                    let pts: Vec<(f64, f64)> = values
                        .iter()
                        .enumerate()
                        .filter_map(|(k, v)| v.map(|v| point(k, v)))
                        .collect();
                    if pts.len() >= 2 {
                        for w in 0..pts.len() {
                            let (a, b) = (pts[w], pts[(w + 1) % pts.len()]);
                            ctx.draw(&CLine::new(a.0, a.1, b.0, b.1, *color));
                        }
                    }
                }
                for (k, name) in names.iter().enumerate() {
                    let (x, y) = point(k, 1.12);
                    ctx.print(x - 0.05 * name.chars().count() as f64 / 2.0, y, name.clone());
                }
            });
        frame.render_widget(canvas, inner);
    }

    /// The bars of the dimensions of `range`: per dimension each method shown (with its error bar) and
    /// each label (✓/✗ whether the first method shown falls on its side).
    fn render_bars(&self, frame: &mut Frame, area: Rect, range: &[usize], page_note: &str) {
        let theme = self.ctx.theme;
        // The longest title that fits the pane's top border whole.
        let title = first_fitting(
            [
                format!(" Measured vs labels{page_note} (marginal labels dimmed) "),
                format!(" Measured vs labels{page_note} "),
                format!(" Measured vs labels{} ", page_note.replace(" ([ ])", "")),
            ],
            usize::from(area.width.saturating_sub(2)),
        )
        .unwrap_or_else(|| " Measured vs labels ".into());
        let b = block(title, false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        // The bars take what the row leaves: "  er-batch " before, a value with its spread or a label's
        // letter and mark after (" 4.39 ±0.25", " 4.39 X marginal ✓").
        let bar_width = (inner.width as usize).saturating_sub(11 + 18).clamp(4, 40);
        let mut lines = vec![self.legend()];
        for &d in range {
            let dim = &self.scale.dimensions[d];
            lines.push(Line::styled(
                format!(" {}", pad(&dim.name, (inner.width as usize).saturating_sub(2))),
                theme.title(),
            ));
            let (min, max) = self.scale.dimension_range();
            let span = max - min;
            for (i, m) in &self.shown {
                let v = self.measured(*m, &dim.name);
                let spread = spread(self.ctx.run, self.c, self.s, *m, &dim.name);
                let (drawn, sd_text) = match (v, spread.as_ref().and_then(|x| x.sd)) {
                    (Some(v), Some(sd)) => (
                        whiskers(&bar(Some(self.norm(v)), bar_width), self.norm(v), sd / span),
                        format!(" ±{sd:.2}"),
                    ),
                    _ => (bar(v.map(|v| self.norm(v)), bar_width), String::new()),
                };
                lines.push(Line::from(vec![
                    Span::styled(format!("  {:<9}", m.name()), theme.dim()),
                    Span::styled(drawn, theme.fg(series_color(theme, *i))),
                    Span::raw(format!(" {}", score_text(v))),
                    Span::styled(sd_text, theme.dim()),
                ]));
            }
            lines.extend(self.label_bars(d, bar_width));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }

    /// The colours of the bars: each method shown, then the labels.
    fn legend(&self) -> Line<'static> {
        let theme = self.ctx.theme;
        let mut legend = vec![Span::raw(" ")];
        for (i, m) in &self.shown {
            legend.push(Span::styled(
                format!("■ {} ", m.name()),
                theme.fg(series_color(theme, *i)),
            ));
        }
        // The labels the character has on this scale, and only those.
        for (source, color, name) in [
            (LabelSource::Pdb, theme.label_pdb, "pdb"),
            (LabelSource::Annotation, theme.label_annotation, "annotation"),
            (LabelSource::Target, theme.label_target, "target"),
        ] {
            if self.character.labels.source(source).contains_key(&self.scale.id) {
                legend.push(Span::styled(format!("■ {name} "), theme.fg(color)));
            }
        }
        Line::from(legend)
    }

    /// A bar per label of dimension `d` the character has, marginal ones dimmed.
    fn label_bars(&self, d: usize, bar_width: usize) -> Vec<Line<'static>> {
        let (theme, scale) = (self.ctx.theme, self.scale);
        let dim = &scale.dimensions[d];
        let u = Unit {
            character: self.character,
            scale,
            repeat: 0,
        };
        let mut lines = Vec::new();
        for (source, color, name) in [
            (LabelSource::Pdb, theme.label_pdb, "pdb"),
            (LabelSource::Annotation, theme.label_annotation, "annot."),
            (LabelSource::Target, theme.label_target, "target"),
        ] {
            let l = self.character.labels.get(source, &scale.id, &dim.name);
            let Some(l) = l else { continue };
            let marginal = l.kind == LabelType::X;
            let style = if marginal {
                theme.fg(theme.marginal).add_modifier(Modifier::DIM)
            } else {
                theme.fg(color)
            };
            let kind = match l.kind {
                LabelType::H => "H",
                LabelType::L => "L",
                LabelType::X => "X marginal",
            };
            let (_, _, correct) = super::inspect::verdict(
                &u,
                d,
                self.shown.first().and_then(|(_, m)| self.measured(*m, &dim.name)),
                source,
            );
            let mark = match correct {
                Some(true) => Span::styled(" ✓", theme.fg(theme.positive)),
                Some(false) => Span::styled(" ✗", theme.fg(theme.negative)),
                None => Span::raw(""),
            };
            lines.push(Line::from(vec![
                Span::styled(format!("  {name:<9}"), theme.dim()),
                Span::styled(
                    if marginal {
                        bar(l.score.map(|v| self.norm(v)), bar_width).replace('█', "▒")
                    } else {
                        bar(self.label(source, d).map(|v| self.norm(v)), bar_width)
                    },
                    style,
                ),
                Span::raw(format!(" {} {kind}", score_text(l.score))),
                mark,
            ]));
        }
        lines
    }
}

/// The radar's axis names: whole where every one fits in `width` columns; cut with an ellipsis
/// where `width` leaves a word recognisable (12 columns up); in a narrow radar each cut to the
/// shortest prefix (at least three characters) that still tells the names apart, without an ellipsis
/// (two cut names side by side at the bottom of a radar read as one word); a name no prefix within
/// `width` tells apart is cut with an ellipsis.
fn axis_names(names: &[String], width: usize) -> Vec<String> {
    use unicode_width::UnicodeWidthStr;
    if names.iter().all(|n| n.width() <= width) {
        return names.to_vec();
    }
    if width >= 12 {
        return names.iter().map(|n| crate::tui::widgets::fit(n, width)).collect();
    }
    let prefix = |n: &str, k: usize| n.chars().take(k).collect::<String>();
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    for k in 3..=longest {
        let cut: Vec<String> = names.iter().map(|n| prefix(n, k)).collect();
        if cut.iter().any(|c| c.width() > width) {
            break;
        }
        let distinct: std::collections::BTreeSet<&String> = cut.iter().collect();
        if distinct.len() == names.len() {
            return cut;
        }
    }
    names.iter().map(|n| crate::tui::widgets::fit(n, width)).collect()
}

/// A bar `width` cells wide filled to `v` (0–1); blank without a value.
fn bar(v: Option<f64>, width: usize) -> String {
    match v {
        Some(v) => {
            let filled = (v * width as f64).round() as usize;
            format!("{}{}", "█".repeat(filled), "░".repeat(width - filled.min(width)))
        }
        None => " ".repeat(width),
    }
}

#[cfg(test)]
mod tests {
    use super::axis_names;

    fn owned(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn axis_names_are_whole_cut_or_told_apart_by_their_shortest_prefix() {
        let bfi = owned(&[
            "Extraversion",
            "Neuroticism",
            "Conscientiousness",
            "Agreeableness",
            "Openness",
        ]);
        assert_eq!(axis_names(&bfi, 17), bfi);
        assert_eq!(axis_names(&bfi, 13)[2], "Conscientiou…");
        assert_eq!(axis_names(&bfi, 8), owned(&["Ext", "Neu", "Con", "Agr", "Ope"]));
        // Names that share three letters keep as many as tell them apart.
        assert_eq!(
            axis_names(&owned(&["Machiavellianism", "Machismo", "Psychopathy"]), 8),
            owned(&["Machia", "Machis", "Psycho"])
        );
        // No prefix within the width tells them apart: each cut with an ellipsis.
        assert_eq!(
            axis_names(&owned(&["Self-efficacy one", "Self-efficacy two"]), 8),
            owned(&["Self-ef…", "Self-ef…"])
        );
    }
}
