//! Sessions: those in the data dir and the bundled samples; open, replay (1× / 4× / instant), export,
//! resume, and two or more marked side by side.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{block, fit, pad, window};
use crate::tui::app::{App, ListId, Replay};

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let s = &app.sessions;
    let compare_height = if s.comparison.is_empty() {
        0
    } else {
        (area.height / 2).max(8)
    };
    let [list_area, compare_area] =
        Layout::vertical([Constraint::Min(6), Constraint::Length(compare_height)]).areas(area);
    let speed = s.speed.unwrap_or(Replay::Speed(1.0)).label();
    let b = block(
        format!(" Sessions ({}) · replay speed {speed} ", s.list.len()),
        true,
        theme,
    );
    let inner = b.inner(list_area);
    frame.render_widget(b, list_area);
    if s.list.is_empty() {
        frame.render_widget(
            Paragraph::new(vec![
                Line::raw("No sessions yet."),
                Line::styled(
                    "Start a run from Setup (1), or `incharacter run …` headless.",
                    theme.dim(),
                ),
            ]),
            inner,
        );
        return;
    }
    let height = inner.height.saturating_sub(1) as usize;
    let first = window(s.list.len(), s.cursor, height);
    let rows_area = Rect {
        y: inner.y + 1,
        height: inner.height.saturating_sub(1),
        ..inner
    };
    app.hit.borrow_mut().lists.push((rows_area, first, ListId::Sessions));
    let width = inner.width as usize;
    // Ids are what `report`, `export` and `replay` take: as wide as the longest, leaving the model 27.
    let longest = s.list.iter().map(|e| e.id.chars().count()).max().unwrap_or(2);
    let id_width = longest.min(width.saturating_sub(3 + 13 + 17 + 1 + 27)).max(20);
    let mut lines = vec![Line::styled(
        format!(
            "   {} {} {} model",
            pad("id", id_width),
            pad("status", 12),
            pad("created", 16)
        ),
        theme.dim(),
    )];
    for (i, e) in s.list.iter().enumerate().skip(first).take(height) {
        let marked = s.marked.contains(&i);
        let style = if i == s.cursor { theme.selected() } else { theme.base() };
        let status_style = match e.status.as_str() {
            "complete" => theme.fg(theme.positive),
            "interrupted" => theme.fg(theme.warning),
            _ => theme.dim(),
        };
        let tag = if e.sample { " sample" } else { "" };
        lines.push(Line::from(vec![
            Span::styled(if marked { " ● " } else { "   " }, theme.fg(theme.accent)),
            Span::styled(pad(&e.id, id_width), style),
            Span::raw(" "),
            Span::styled(pad(&e.status, 12), status_style),
            Span::raw(" "),
            // To the minute, in the journal's UTC: "2026-11-29 20:15".
            Span::raw(pad(
                &e.created.replace('T', " ").chars().take(16).collect::<String>(),
                16,
            )),
            Span::raw(" "),
            Span::raw(fit(&format!("{}{tag}", e.model), width.saturating_sub(id_width + 34))),
        ]));
    }
    frame.render_widget(Paragraph::new(lines), inner);

    if !s.comparison.is_empty() {
        let b = block(" Side by side (Acc_Dim / MAE per scale × method) ", false, theme);
        let inner = b.inner(compare_area);
        frame.render_widget(b, compare_area);
        let mut keys: Vec<(String, String)> = Vec::new();
        for (_, rows) in &s.comparison {
            for r in rows {
                let k = (r.scale.clone(), r.method.clone());
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        let col = 24;
        let mut header = format!("{} ", pad("scale × method", 28));
        for (id, _) in &s.comparison {
            header.push_str(&pad(&fit(id, col - 1), col));
        }
        let mut lines = vec![Line::styled(header, theme.dim())];
        for (scale, method) in keys {
            let mut line = format!("{} ", pad(&format!("{scale} {method}"), 28));
            for (_, rows) in &s.comparison {
                let cell =
                    rows.iter()
                        .find(|r| r.scale == scale && r.method == method)
                        .map_or("–".to_string(), |r| {
                            format!(
                                "{} / {}",
                                r.acc_dim.map_or("–".into(), |v| format!("{v:.3}")),
                                r.mae.map_or("–".into(), |v| format!("{v:.3}"))
                            )
                        });
                line.push_str(&pad(&cell, col));
            }
            lines.push(Line::raw(line));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
