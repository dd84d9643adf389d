//! What a probe measured against the session before it: a before/after bar per dimension with the
//! target (or the label) marked, and, for one dimension, the answers that moved it, old beside new.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::analysis::diff::{Diff, DimensionDiff, EQUAL, ItemDiff, Reference};
use crate::domain::character::LabelSource;
use crate::tui::keys::Command;
use crate::tui::screens::Ctx;
use crate::tui::theme::Theme;
use crate::tui::widgets::{block, fit, pad};
use crate::tui::wrap::wrap;

/// A probe's result as the persona screen shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    /// Before (A: the newest earlier session that measured the character) and after (B: the probe).
    pub diff: Diff,
    /// No earlier session measured the character: A is the probe itself, and only it is shown.
    pub first: bool,
    /// The dimension under the cursor (an index into `diff.dimensions`).
    pub cursor: usize,
    /// Whether the answers of the dimension under the cursor are open.
    pub open: bool,
    /// The first line shown of the answers.
    pub scroll: usize,
}

impl Probed {
    pub fn new(diff: Diff, first: bool) -> Probed {
        Probed {
            diff,
            first,
            cursor: 0,
            open: false,
            scroll: 0,
        }
    }

    /// The status line's summary: how many dimensions moved toward what was meant.
    pub fn summary(&self) -> String {
        let d = &self.diff.dimensions;
        let on = |side: fn(&DimensionDiff) -> Option<bool>| d.iter().filter(|x| side(x) == Some(true)).count();
        let with_reference = d.iter().filter(|x| x.reference.is_some()).count();
        if self.first {
            return format!(
                "probe of {}: the first measurement of it, {} of {with_reference} dimension(s) on target",
                self.diff.character,
                on(|x| x.b_on)
            );
        }
        let toward = d.iter().filter(|x| x.toward_target == Some(true)).count();
        let away = d.iter().filter(|x| x.closer_by.is_some_and(|c| c < -EQUAL)).count();
        format!(
            "{}: {} of {with_reference} dimensions on target now, {} before; {toward} closer, {away} further",
            self.diff.character,
            on(|x| x.b_on),
            on(|x| x.a_on)
        )
    }

    fn dimension(&self) -> Option<&DimensionDiff> {
        self.diff.dimensions.get(self.cursor)
    }

    /// The items of the dimension under the cursor, the ones that changed most first.
    fn items(&self) -> Vec<&ItemDiff> {
        let Some(d) = self.dimension() else { return Vec::new() };
        self.diff
            .items
            .iter()
            .filter(|i| i.scale == d.scale && i.method == d.method && i.dimension == d.dimension)
            .collect()
    }

    /// A navigation command while the view is shown; `false`: it closes (the caller hides it).
    pub fn command(&mut self, cmd: Command) -> bool {
        let n = self.diff.dimensions.len();
        match (cmd, self.open) {
            (Command::Back, true) => {
                self.open = false;
                self.scroll = 0;
            }
            (Command::Back, false) => return false,
            (Command::Select, false) if n > 0 => self.open = true,
            (Command::Up, false) => self.cursor = self.cursor.saturating_sub(1),
            (Command::Down, false) => self.cursor = (self.cursor + 1).min(n.saturating_sub(1)),
            (Command::Top, false) => self.cursor = 0,
            (Command::Bottom, false) => self.cursor = n.saturating_sub(1),
            (Command::Up | Command::ScrollUp, true) => self.scroll = self.scroll.saturating_sub(1),
            (Command::Down | Command::ScrollDown, true) => self.scroll += 1,
            (Command::PageUp, true) => self.scroll = self.scroll.saturating_sub(10),
            (Command::PageDown, true) => self.scroll += 10,
            (Command::Top, true) => self.scroll = 0,
            _ => {}
        }
        true
    }

    pub fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) {
        let theme = ctx.theme;
        let title = if self.open {
            if self.first {
                " Answers (esc: back) "
            } else {
                " Answers that moved it (esc: back) "
            }
        } else {
            " Before / after the probe (esc: close) "
        };
        let b = block(title, true, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        let width = usize::from(inner.width);
        let lines = if self.open {
            self.answer_lines(width, ctx)
        } else {
            self.bar_lines(width, usize::from(inner.height), ctx)
        };
        frame.render_widget(Paragraph::new(lines), inner);
    }

    fn sides(&self, theme: &Theme) -> Vec<Line<'static>> {
        let short = |v: &Option<String>| v.as_deref().map_or("(unrecorded)".to_string(), |v| fit(v, 12));
        let (a, b) = (&self.diff.a, &self.diff.b);
        let mut lines = Vec::new();
        if self.first {
            lines.push(Line::styled(
                format!("probe   version {}  {}", short(&b.version), b.session),
                theme.base(),
            ));
            lines.push(Line::styled(
                "the first measurement of this character: probe again after an edit to see what it changed",
                theme.dim(),
            ));
        } else {
            let edited = match (&a.version, &b.version) {
                (Some(x), Some(y)) if x == y => "same version: the difference is the model's",
                (Some(_), Some(_)) => "the character was edited between the two sessions",
                _ => "",
            };
            lines.push(Line::from(vec![
                Span::styled("before  ", theme.dim()),
                Span::raw(format!("version {}  {}", short(&a.version), a.session)),
            ]));
            lines.push(Line::from(vec![
                Span::styled("after   ", theme.fg(theme.measured)),
                Span::raw(format!("version {}  {}", short(&b.version), b.session)),
            ]));
            if !edited.is_empty() {
                lines.push(Line::styled(format!("        {edited}"), theme.dim()));
            }
            // No earlier session was asked and judged alike: what moved may be the setup's doing.
            if !self.diff.setup.is_empty() {
                let what: Vec<&str> = self.diff.setup.iter().map(|d| d.what.as_str()).collect();
                lines.push(Line::styled(
                    format!(
                        "        asked or judged otherwise: {} (`incharacter diff` lists how)",
                        what.join(", ")
                    ),
                    theme.fg(theme.warning),
                ));
            }
        }
        lines
    }

    fn bar_lines(&self, width: usize, height: usize, ctx: &Ctx) -> Vec<Line<'static>> {
        let theme = ctx.theme;
        let mut head = self.sides(theme);
        let mut legend = if self.first {
            vec![Span::styled("█ now  ", theme.fg(theme.measured))]
        } else {
            vec![
                Span::styled("█ before  ", theme.dim()),
                Span::styled("█ after  ", theme.fg(theme.measured)),
            ]
        };
        legend.extend([
            Span::styled("┃ target", theme.fg(theme.label_target)),
            Span::styled("  (┃ label when there is none)", theme.dim()),
        ]);
        head.push(Line::from(legend));
        if self.diff.dimensions.is_empty() {
            head.push(Line::styled(
                "no dimension was assessed in both sessions",
                theme.fg(theme.warning),
            ));
            return head;
        }
        // The body: a header per scale × method, then a row (or two) per dimension; the cursor's rows
        // stay in view.
        let name_w = 20.min(width / 3);
        // " 1.71  +0.65 further  ✗ 2.73 below": the value, the change, the verdict and where it is.
        let value_w = 36;
        let bar_w = width.saturating_sub(name_w + 10 + value_w).clamp(8, 40);
        let mut body: Vec<Line<'static>> = Vec::new();
        let mut cursor_at = (0, 0);
        let mut group: Option<(&str, crate::method::Method)> = None;
        for (i, d) in self.diff.dimensions.iter().enumerate() {
            let range = ctx.catalog.scale(&d.scale).map_or((0.0, 1.0), |s| s.dimension_range());
            if group != Some((d.scale.as_str(), d.method)) {
                group = Some((d.scale.as_str(), d.method));
                body.push(Line::styled(
                    format!("{} · {}  ({}–{})", d.scale, d.method.name(), range.0, range.1),
                    theme.title(),
                ));
            }
            let start = body.len();
            let selected = i == self.cursor;
            let name_style = if selected { theme.selected() } else { theme.base() };
            let reference = reference_text(d);
            let mark = d.reference.map(|r| mark_at(r, range, bar_w));
            let mark_style = if d.label_source == Some(LabelSource::Target) {
                theme.fg(theme.label_target)
            } else {
                theme.dim()
            };
            let marker = if selected { "▸ " } else { "  " };
            let row = |marker: &'static str,
                       name: String,
                       which: &'static str,
                       value: Option<f64>,
                       bar_style: Style,
                       tail: Vec<Span<'static>>| {
                let mut spans = vec![
                    Span::styled(marker, name_style),
                    Span::styled(pad(&name, name_w), name_style),
                    Span::styled(format!(" {which:<7}"), theme.dim()),
                ];
                spans.extend(bar_spans(value, range, bar_w, mark, bar_style, mark_style));
                spans.push(Span::raw(value.map_or("   –".into(), |v| format!(" {v:>5.2}"))));
                spans.extend(tail);
                Line::from(spans)
            };
            let on_style = match d.b_on {
                Some(true) => theme.fg(theme.positive),
                _ => theme.fg(theme.negative),
            };
            if self.first {
                let tail = vec![
                    Span::styled(format!("  {reference}"), mark_style),
                    Span::styled(format!("  {}", d.on_text()), on_style),
                ];
                body.push(row(
                    marker,
                    d.dimension.to_string(),
                    "now",
                    d.b,
                    theme.fg(theme.measured),
                    tail,
                ));
            } else {
                body.push(row(
                    marker,
                    d.dimension.to_string(),
                    "before",
                    d.a,
                    theme.dim(),
                    Vec::new(),
                ));
                let (verdict, style) = verdict(d, theme);
                let delta = d
                    .delta
                    .map_or(String::new(), |x| format!("  {}", crate::text::decimals(x, 2, true)));
                let tail = vec![
                    Span::raw(delta),
                    Span::styled(format!(" {verdict}").trim_end().to_string(), style),
                    Span::styled(format!("  {}", d.on_text()), on_style),
                ];
                body.push(row(
                    "  ",
                    format!("  {reference}"),
                    "after",
                    d.b,
                    theme.fg(theme.measured),
                    tail,
                ));
            }
            if selected {
                cursor_at = (start, body.len());
            }
        }
        let room = height.saturating_sub(head.len());
        let skip = cursor_at.1.saturating_sub(room);
        // A dimension's rows keep their group header in view when they can.
        let skip = if skip > 0 && skip == cursor_at.0 {
            skip - 1
        } else {
            skip
        };
        head.extend(body.into_iter().skip(skip));
        head
    }

    fn answer_lines(&self, width: usize, ctx: &Ctx) -> Vec<Line<'static>> {
        let theme = ctx.theme;
        let Some(d) = self.dimension() else { return Vec::new() };
        let score = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.2}"));
        let scores = if self.first {
            format!("now {}", score(d.b))
        } else {
            format!("before {} → after {}", score(d.a), score(d.b))
        };
        let mut lines = vec![Line::styled(
            format!(
                "{} · {} · {}: {scores}  {}",
                d.dimension,
                d.scale,
                d.method.name(),
                reference_text(d)
            ),
            theme.title(),
        )];
        let items = self.items();
        if items.is_empty() {
            lines.push(Line::styled("no answers recorded for this dimension", theme.dim()));
            return lines;
        }
        if !d.method.item_level() {
            lines.push(Line::styled(
                "this method rates the dimension as a whole: the answers in item order",
                theme.dim(),
            ));
        }
        let col = width.saturating_sub(3) / 2;
        let mut body = Vec::new();
        for item in items {
            let change = match (item.a_score, item.b_score, item.change) {
                (Some(a), Some(b), Some(c)) => {
                    format!("  item score {a:.2} → {b:.2} ({})", crate::text::decimals(c, 2, true))
                }
                _ => String::new(),
            };
            body.push(Line::raw(""));
            body.push(Line::from(vec![
                Span::styled(format!("item {}", item.item_id), theme.title()),
                Span::styled(change, theme.fg(theme.accent)),
            ]));
            for l in wrap(&item.question.to_string(), width) {
                body.push(Line::styled(l, theme.dim()));
            }
            let text = |t: &Option<String>| t.as_deref().map_or("(no answer)".into(), str::to_string);
            if self.first {
                // One measurement: its answer across the whole width.
                body.extend(wrap(&text(&item.b_answer), width).into_iter().map(Line::raw));
                continue;
            }
            body.push(Line::from(vec![
                Span::styled(pad("before", col), theme.dim()),
                Span::styled(" │ ", theme.dim()),
                Span::styled(pad("after", col), theme.fg(theme.measured)),
            ]));
            let left = wrap(&text(&item.a_answer), col);
            let right = wrap(&text(&item.b_answer), col);
            for k in 0..left.len().max(right.len()) {
                let l = left.get(k).map_or("", String::as_str);
                let r = right.get(k).map_or("", String::as_str);
                body.push(Line::from(vec![
                    Span::raw(pad(l, col)),
                    Span::styled(" │ ", theme.dim()),
                    Span::raw(r.to_string()),
                ]));
            }
        }
        let skip = self.scroll.min(body.len().saturating_sub(1));
        lines.extend(body.into_iter().skip(skip));
        lines
    }
}

/// What the dimension is compared with, as its row says it: "target H", "label 3.20", or nothing.
fn reference_text(d: &DimensionDiff) -> String {
    let Some(r) = d.reference else { return String::new() };
    let source = if d.label_source == Some(LabelSource::Target) {
        "target"
    } else {
        "label"
    };
    match r {
        Reference::Score(x) => format!("{source} {x:.2}"),
        other => format!("{source} {other}"),
    }
}

/// Whether the after moved toward the reference, and in which colour to say it (nothing when it
/// did not move: the on-target mark beside it says where it is).
fn verdict(d: &DimensionDiff, theme: &Theme) -> (&'static str, Style) {
    match d.closer_by {
        Some(c) if c > EQUAL => ("closer", theme.fg(theme.positive)),
        Some(c) if c < -EQUAL => ("further", theme.fg(theme.negative)),
        _ => ("", theme.dim()),
    }
}

/// The column of the reference's mark in a bar of `width` cells: a score's place, or where a letter's
/// band begins (H: 0.6 of the range, L: 0.4).
fn mark_at(r: Reference, (min, max): (f64, f64), width: usize) -> usize {
    let fraction = (r.position((min, max)) - min) / (max - min);
    ((fraction.clamp(0.0, 1.0) * width as f64).round() as usize).min(width.saturating_sub(1))
}

/// A bar of `width` cells filled to `value` in `range`, the reference's mark drawn over it.
fn bar_spans(
    value: Option<f64>,
    (min, max): (f64, f64),
    width: usize,
    mark: Option<usize>,
    style: Style,
    mark_style: Style,
) -> Vec<Span<'static>> {
    let filled = value.map_or(0, |v| {
        (((v - min) / (max - min)).clamp(0.0, 1.0) * width as f64).round() as usize
    });
    let cell = |i: usize| if i < filled { '█' } else { '░' };
    let text = |from: usize, to: usize| (from..to).map(cell).collect::<String>();
    match mark {
        Some(m) => vec![
            Span::styled(text(0, m), style),
            Span::styled("┃", mark_style),
            Span::styled(text(m + 1, width), style),
        ],
        None => vec![Span::styled(text(0, width), style)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_sits_where_its_reference_is_on_the_bar() {
        assert_eq!(mark_at(Reference::Score(1.0), (1.0, 5.0), 20), 0);
        assert_eq!(mark_at(Reference::Score(3.0), (1.0, 5.0), 20), 10);
        assert_eq!(
            mark_at(Reference::Score(5.0), (1.0, 5.0), 20),
            19,
            "the last cell, not past it"
        );
        assert_eq!(mark_at(Reference::High, (1.0, 5.0), 20), 12);
        assert_eq!(mark_at(Reference::Low, (1.0, 5.0), 20), 8);
    }

    #[test]
    fn a_bar_is_as_wide_as_asked_with_or_without_a_mark() {
        let plain = Style::default();
        let text = |spans: Vec<Span>| spans.iter().map(|s| s.content.to_string()).collect::<String>();
        assert_eq!(
            text(bar_spans(Some(3.0), (1.0, 5.0), 10, None, plain, plain)),
            "█████░░░░░"
        );
        assert_eq!(
            text(bar_spans(Some(3.0), (1.0, 5.0), 10, Some(2), plain, plain)),
            "██┃██░░░░░"
        );
        assert_eq!(text(bar_spans(None, (1.0, 5.0), 4, Some(3), plain, plain)), "░░░┃");
    }
}
