//! The assessments view of the Compare screen: the sessions that assess the shown session's
//! interviews (it, its parent, their re-assessments), side by side. Each session is a marker and a
//! colour: its judge and Acc_Dim / MAE, a dot plot per dimension of the profile it measured on 0–1 (the
//! label the metrics use marked on the same axis), and the agreement of every pair of sessions on the
//! method shown, with the scale's sensitivity to the judge. It owns the comparison and what it shows.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::compare::{browse, page_note, series_color};
use super::{Component, Ctx, Hits, move_cursor};
use crate::analysis::judges::{Judges, Pair};
use crate::domain::character::LabelSource;
use crate::method::Method;
use crate::tui::keys::Command;
use crate::tui::widgets::{ListView, block, pad, score_text};

/// One marker per session, in session order (colours repeat every six, markers do not until eight).
const MARKERS: [char; 8] = ['●', '■', '▲', '◆', '★', '✚', '▼', '✖'];
/// Where sessions fall on the same cell.
const SEVERAL: char = '◎';
/// The character's label on the axis.
const LABEL: char = '◇';

#[derive(Debug, Clone, PartialEq)]
pub struct JudgesView {
    pub judges: Judges,
    /// Index into the (character, scale) pairs the sessions scored.
    pub unit: usize,
    /// Index into the methods the sessions scored.
    pub method: usize,
    pub page: usize,
    /// Row of the pairs table.
    pub cursor: usize,
    pub view: ListView,
}

fn marker(i: usize) -> char {
    MARKERS[i % MARKERS.len()]
}

impl JudgesView {
    pub fn new(judges: Judges) -> JudgesView {
        JudgesView {
            judges,
            unit: 0,
            method: 0,
            page: 0,
            cursor: 0,
            view: ListView::default(),
        }
    }

    /// (character, scale) pairs, in row order.
    fn units(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (c, s, _) in self.judges.units() {
            if !out.iter().any(|(oc, os)| *oc == c && *os == s) {
                out.push((c, s));
            }
        }
        out
    }

    fn methods(&self) -> Vec<Method> {
        let mut out: Vec<Method> = self.judges.scores.iter().map(|r| r.method).collect();
        out.sort();
        out.dedup();
        out
    }

    pub fn command(&mut self, cmd: Command) {
        let units = self.units().len().max(1);
        let methods = self.methods().len().max(1);
        let pairs = self.judges.sessions.len() * self.judges.sessions.len().saturating_sub(1) / 2;
        let position = (&mut self.unit, &mut self.method, &mut self.page);
        if !browse(cmd, position, units, methods) {
            move_cursor(cmd, &mut self.cursor, pairs);
        }
    }
}

impl Component for JudgesView {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        vec![
            (ctx.key(Command::NextMethod), "method"),
            (ctx.key(Command::NextUnit), "character"),
            (ctx.key(Command::NextPage), "page"),
            (ctx.key(Command::Back), "profile"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let theme = ctx.theme;
        let units = self.units();
        let methods = self.methods();
        let (Some((c, s)), Some(&method)) = (
            units.get(self.unit % units.len().max(1)),
            methods.get(self.method % methods.len().max(1)),
        ) else {
            let b = block(" Assessments of these interviews ", false, theme);
            let inner = b.inner(area);
            frame.render_widget(b, area);
            frame.render_widget(Paragraph::new("No dimension was scored by these sessions."), inner);
            return Hits::default();
        };
        let sessions = &self.judges.sessions;
        let pairs: Vec<_> = self.judges.pairs.iter().filter(|p| p.method == method).collect();
        // At least four rows of pairs, more on a tall terminal.
        let rows = usize::from(area.height / 4).max(4);
        let pairs_height = pairs.len().clamp(1, rows) as u16 + 4;
        let [header, list_area, dots_area, pairs_area] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(sessions.len() as u16 + 3),
            Constraint::Min(4),
            Constraint::Length(pairs_height),
        ])
        .areas(area);

        let name = ctx
            .catalog
            .character(c)
            .map_or_else(|| c.to_string(), |x| x.name.clone());
        frame.render_widget(
            Paragraph::new(Line::from(vec![
                Span::styled(
                    format!(" {name} "),
                    theme.fg(theme.character).add_modifier(Modifier::BOLD),
                ),
                Span::raw(format!("· {} · ", s)),
                Span::styled(method.name(), theme.fg(theme.accent).add_modifier(Modifier::BOLD)),
                Span::styled("  m method · ←/→ character · esc back", theme.dim()),
            ])),
            header,
        );

        // The sessions, each with its marker: judge, temperature, accuracy on this scale × method.
        let b = block(
            format!(" Assessments of the interviews of {} ", self.judges.interviews),
            false,
            theme,
        );
        let inner = b.inner(list_area);
        frame.render_widget(b, list_area);
        // Each session id whole when it fits (it names the session), the judge in what is left.
        let longest_id = sessions.iter().map(|x| x.id.chars().count()).max().unwrap_or(0);
        let longest_judge = sessions
            .iter()
            .map(|x| x.judge.as_deref().unwrap_or("?").to_string().chars().count())
            .max()
            .unwrap_or(0);
        let room = usize::from(inner.width).saturating_sub(2 + 6 + 16 + 4);
        let id_width = longest_id.clamp(12, room.saturating_sub(8).max(12));
        let judge_width = room.saturating_sub(id_width).clamp(8, longest_judge.clamp(8, 40));
        let mut lines = vec![Line::styled(
            format!(
                "  {} {} {:>5} {:>7} {:>6}",
                pad("session", id_width),
                pad("judge", judge_width),
                "T",
                "Acc_Dim",
                "MAE"
            ),
            theme.dim(),
        )];
        for (i, x) in sessions.iter().enumerate() {
            let acc = self
                .judges
                .summary
                .iter()
                .find(|r| r.session == x.id && r.scale == *s && r.method == method.name());
            let cell = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.3}"));
            lines.push(Line::from(vec![
                Span::styled(format!("{} ", marker(i)), theme.fg(series_color(theme, i))),
                Span::raw(format!(
                    "{} {} {:>5} {:>7} {:>6}",
                    pad(&x.id.to_string(), id_width),
                    pad(x.judge.as_deref().unwrap_or("?"), judge_width),
                    x.judge_temperature,
                    cell(acc.and_then(|a| a.acc_dim)),
                    cell(acc.and_then(|a| a.mae))
                )),
            ]));
        }
        frame.render_widget(Paragraph::new(lines), inner);

        render_dots(self, frame, dots_area, ctx, (c, s, method));

        self.render_pairs(frame, pairs_area, ctx, (&pairs, s, method));
        Hits::default()
    }
}

impl JudgesView {
    /// The agreement of every pair of sessions on `method`, and the scale's sensitivity to the judge.
    fn render_pairs(
        &self,
        frame: &mut Frame,
        pairs_area: Rect,
        ctx: &Ctx,
        (pairs, s, method): (&[&Pair], &str, Method),
    ) {
        let theme = ctx.theme;
        let sessions = &self.judges.sessions;
        // Agreement of every pair on this method, and the scale's sensitivity.
        let b = block(
            format!(" Agreement on {} (all characters and scales, 0–1) ", method.name()),
            false,
            theme,
        );
        let inner = b.inner(pairs_area);
        frame.render_widget(b, pairs_area);
        let mut lines = vec![Line::styled(
            format!(
                "  {:<5} {:>4} {:>8} {:>9} {:>9}",
                "pair", "n", "Pearson", "Spearman", "mean |Δ|"
            ),
            theme.dim(),
        )];
        let height = usize::from(inner.height.saturating_sub(2));
        let cursor = self.cursor.min(pairs.len().saturating_sub(1));
        let first = self.view.first(pairs.len(), cursor, height);
        // More pairs than rows: which are shown, and that ↑/↓ bring the others.
        if pairs.len() > height && height > 0 {
            let last = (first + height).min(pairs.len());
            lines[0].push_span(Span::styled(
                format!("   {}–{last} of {} (↑/↓)", first + 1, pairs.len()),
                theme.dim(),
            ));
        }
        let index = |id: &str| sessions.iter().position(|x| x.id == id).unwrap_or(0);
        let cell = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.3}"));
        for (row, p) in pairs.iter().enumerate().skip(first).take(height) {
            let (a, b) = (index(&p.a), index(&p.b));
            let style = if row == cursor { theme.selected() } else { theme.base() };
            lines.push(Line::from(vec![
                Span::raw("  "),
                Span::styled(marker(a).to_string(), theme.fg(series_color(theme, a))),
                Span::raw(" "),
                Span::styled(marker(b).to_string(), theme.fg(series_color(theme, b))),
                Span::styled(
                    format!(
                        "   {:>4} {:>8} {:>9} {:>9}",
                        p.n,
                        cell(p.pearson),
                        cell(p.spearman),
                        cell(p.mean_abs_diff)
                    ),
                    style,
                ),
            ]));
        }
        if pairs.is_empty() {
            lines.push(Line::styled("  no two sessions assessed with this method", theme.dim()));
        }
        let sensitivity = self.judges.scales.get(s);
        lines.push(Line::styled(
            format!(
                "  {} sensitivity to the judge {} (mean sd across sessions on 0–1, n {})",
                s,
                cell(sensitivity.and_then(|x| x.sensitivity)),
                sensitivity.map_or(0, |x| x.n)
            ),
            theme.fg(theme.accent),
        ));
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

/// The dot plot: a 0–1 axis per dimension, a marker per session where it scored the dimension (its
/// mean over repeats), the label the metrics compare with as ◇ beneath them.
fn render_dots(view: &JudgesView, frame: &mut Frame, area: Rect, ctx: &Ctx, (c, s, method): (&str, &str, Method)) {
    let theme = ctx.theme;
    let profile = view.judges.profile(s, method, c);
    let scale = ctx.catalog.scale(s);
    let character = ctx.catalog.character(c);
    // A line of values under each dimension's axis when every dimension has room for two.
    let rows = usize::from(area.height.saturating_sub(3));
    let detailed = profile.len() * 2 <= rows;
    let fit_rows = (if detailed { rows / 2 } else { rows }).max(1);
    let pages = profile.len().div_ceil(fit_rows).max(1);
    let page = view.page.min(pages - 1);
    let b = block(
        format!(
            " Measured profiles on 0–1{} ({LABEL} label, {SEVERAL} several) ",
            page_note(page, pages)
        ),
        false,
        theme,
    );
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let name_width = (usize::from(inner.width) / 4).clamp(8, 20);
    let axis = usize::from(inner.width).saturating_sub(name_width + 3).max(3);
    let position = |v: f64| (v.clamp(0.0, 1.0) * (axis - 1) as f64).round() as usize;
    let middle = position(0.5);
    let mut lines = vec![Line::styled(
        format!(
            " {} {}{}1",
            pad("", name_width),
            pad("0", middle - 1),
            pad("0.5", axis - middle)
        ),
        theme.dim(),
    )];
    for (dimension, values) in profile.iter().skip(page * fit_rows).take(fit_rows) {
        let mut cells: Vec<(char, Color)> = (0..axis)
            .map(|x| (if x == middle { '┊' } else { '·' }, theme.border))
            .collect();
        // The label the metrics compare with: PDb where the character has it, else the annotation.
        let label = scale.zip(character).and_then(|(scale, character)| {
            let source = character.labels.exclusion_source(&scale.id);
            let (min, max) = scale.dimension_range();
            let score = character.labels.get(source, &scale.id, dimension)?.score?;
            let color = match source {
                LabelSource::Pdb => theme.label_pdb,
                LabelSource::Annotation => theme.label_annotation,
                LabelSource::Target => theme.label_target,
            };
            Some(((score - min) / (max - min), color))
        });
        if let Some((v, color)) = label {
            cells[position(v)] = (LABEL, color);
        }
        let mut taken = vec![false; axis];
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v else { continue };
            let x = position(*v);
            cells[x] = if taken[x] {
                (SEVERAL, theme.accent)
            } else {
                (marker(i), series_color(theme, i))
            };
            taken[x] = true;
        }
        let mut spans = vec![Span::styled(format!(" {} ", pad(dimension, name_width)), theme.title())];
        spans.extend(
            cells
                .into_iter()
                .map(|(ch, color)| Span::styled(ch.to_string(), theme.fg(color))),
        );
        lines.push(Line::from(spans));
        if detailed {
            let mut spans = vec![Span::raw(format!(" {} ", pad("", name_width)))];
            for (i, v) in values.iter().enumerate() {
                spans.push(Span::styled(
                    format!("{} {}  ", marker(i), score_text(*v)),
                    theme.fg(series_color(theme, i)),
                ));
            }
            if let Some((v, color)) = label {
                spans.push(Span::styled(
                    format!("{LABEL} {}", score_text(Some(v))),
                    theme.fg(color),
                ));
            }
            lines.push(Line::from(spans));
        }
    }
    if profile.is_empty() {
        lines.push(Line::styled(
            " no session scored this character with this method",
            theme.dim(),
        ));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}
