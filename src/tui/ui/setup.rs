//! Setup: characters (filter as you type), scales, methods and run options, the request and token
//! estimate, and the most recent sessions.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{block, fit, pad, window};
use crate::catalog::{Catalog, Origin};
use crate::domain::character::LabelSource;
use crate::method::Method;
use crate::method::expert::batches;
use crate::rpa::retrieval::approx_tokens;
use crate::study::RunPlan;
use crate::tui::app::{App, ListId, OPTION_ROWS, SetupPane};

/// Requests and tokens a plan will take (tokens approximate: prompts from the descriptions and items,
/// answers at about 120 tokens, judge replies at about 150); conversion calls hold the plan's
/// `items_per_call`.
pub fn estimate(plan: &RunPlan, catalog: &Catalog) -> (usize, usize) {
    let (mut requests, mut tokens) = (0usize, 0usize);
    let per_call = (plan.items_per_call as usize).max(1);
    let styles: std::collections::BTreeSet<_> = plan.methods.iter().map(|m| m.query_style()).collect();
    for c in plan.characters.iter().filter_map(|c| catalog.character(c)) {
        let profile = approx_tokens(&c.description);
        for s in plan.scales.iter().filter_map(|s| catalog.scale(s)) {
            let items = s.scored_items().count();
            let asked = items * styles.len();
            requests += asked;
            tokens += asked * (profile + 60 + 120);
            let per_dim: Vec<usize> = (0..s.dimensions.len()).map(|d| s.items_of(d).count()).collect();
            for m in &plan.methods {
                let calls = match m {
                    Method::ErBatch => per_dim.iter().map(|&n| batches(n).len()).sum(),
                    Method::ErAll => s.dimensions.len(),
                    Method::DOc => per_dim.iter().map(|&n| n.div_ceil(per_call)).sum(),
                    Method::Oc | Method::Sr | Method::SrCot => items.div_ceil(per_call),
                };
                requests += calls;
                tokens += calls * 150 + items * 200 + calls * 250;
            }
        }
    }
    let repeats = plan.repeats.max(1) as usize;
    (requests * repeats, tokens * repeats)
}

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let recent_rows = if area.height >= 34 { 7 } else { 4 };
    let [top, recent] = Layout::vertical([Constraint::Min(10), Constraint::Length(recent_rows)]).areas(area);
    let [chars, scales, options] = Layout::horizontal([
        Constraint::Percentage(46),
        Constraint::Percentage(24),
        Constraint::Percentage(30),
    ])
    .areas(top);
    let s = &app.setup;

    // Characters.
    let list = app.filtered_characters();
    let focused = s.pane == SetupPane::Characters;
    let title = if s.filter.is_empty() {
        format!(" Characters ({}) · type to filter ", list.len())
    } else {
        format!(" Characters ({}) · filter: {}▏", list.len(), s.filter)
    };
    let b = block(title, focused, theme);
    let inner = b.inner(chars);
    frame.render_widget(b, chars);
    let height = inner.height as usize;
    let first = window(list.len(), s.char_cursor, height);
    app.hit.borrow_mut().lists.push((inner, first, ListId::Characters));
    let (bfi, p16) = (app.catalog.scale("BFI"), app.catalog.scale("16Personalities"));
    let width = inner.width as usize;
    let lines: Vec<Line> = list
        .iter()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(i, c)| {
            let picked = s.characters.contains(&c.id);
            let code = |scale: Option<&crate::domain::scale::Scale>| {
                scale
                    .and_then(|sc| c.code(sc, LabelSource::Pdb))
                    .unwrap_or_else(|| "–".into())
            };
            let origin = app
                .catalog
                .characters
                .iter()
                .find(|e| e.value.id == c.id)
                .map_or("", |e| if e.origin == Origin::Bundled { "" } else { " user" });
            let text = format!(
                "{} {} {} {} {} {}{}",
                if picked { "[x]" } else { "[ ]" },
                pad(&c.name, 18),
                c.language.code(),
                pad(&code(bfi), 5),
                pad(&code(p16), 4),
                fit(&c.work, width.saturating_sub(40)),
                origin
            );
            let style = if i == s.char_cursor && focused {
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

    // Scales.
    let focused = s.pane == SetupPane::Scales;
    let b = block(" Scales ", focused, theme);
    let inner = b.inner(scales);
    frame.render_widget(b, scales);
    let height = inner.height as usize;
    let first = window(app.catalog.scales.len(), s.scale_cursor, height);
    app.hit.borrow_mut().lists.push((inner, first, ListId::Scales));
    let lines: Vec<Line> = app
        .catalog
        .scales
        .iter()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(i, e)| {
            let sc = &e.value;
            let picked = s.scales.contains(&sc.id);
            let mark = if picked { "[x]" } else { "[ ]" };
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
            let style = if i == s.scale_cursor && focused {
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

    // Options and estimate.
    let focused = s.pane == SetupPane::Options;
    let b = block(" Run ", focused, theme);
    let inner = b.inner(options);
    frame.render_widget(b, options);
    app.hit.borrow_mut().lists.push((inner, 0, ListId::Options));
    let mut lines = Vec::new();
    let label = |m: Method| match m {
        Method::ErBatch => "ER_batch",
        Method::ErAll => "ER_all",
        Method::Oc => "OC",
        Method::DOc => "d-OC",
        Method::Sr => "SR",
        Method::SrCot => "SR-CoT",
    };
    let n = Method::ALL.len();
    for row in 0..OPTION_ROWS {
        let text = if row < n {
            let m = Method::ALL[row];
            format!("{} {}", if s.methods.contains(&m) { "[x]" } else { "[ ]" }, label(m))
        } else if row == n {
            format!("repeats ‹ {} ›", s.repeats)
        } else if row == n + 1 {
            format!("style ‹ {} ›", style_name(s.style))
        } else if row == n + 2 {
            format!("rpa ‹ {} ›", s.rpa)
        } else {
            format!("judge ‹ {} ›", s.judge)
        };
        let style = if row == s.option_cursor && focused {
            theme.selected()
        } else {
            theme.base()
        };
        lines.push(Line::styled(pad(&text, inner.width as usize), style));
    }
    lines.push(Line::raw(""));
    match app.plan() {
        Ok(plan) => {
            let (requests, tokens) = estimate(&plan, &app.catalog);
            lines.push(Line::styled("Estimate", theme.title()));
            lines.push(Line::raw(format!(
                "{}×{}×{}×{} runs",
                plan.characters.len(),
                plan.scales.len(),
                plan.methods.len(),
                plan.repeats
            )));
            lines.push(Line::raw(format!("≈ {requests} requests")));
            lines.push(Line::raw(format!("≈ {}k tokens", tokens.div_ceil(1000))));
            lines.push(Line::styled(
                "enter starts",
                theme.fg(theme.positive).add_modifier(Modifier::BOLD),
            ));
        }
        Err(e) => lines.push(Line::styled(e, theme.dim())),
    }
    frame.render_widget(Paragraph::new(lines), inner);

    // Recent sessions.
    let b = block(" Recent sessions (5 opens the list) ", false, theme);
    let inner = b.inner(recent);
    frame.render_widget(b, recent);
    let lines: Vec<Line> = if app.sessions.list.is_empty() {
        vec![Line::styled("no sessions yet", theme.dim())]
    } else {
        app.sessions
            .list
            .iter()
            .rev()
            .take(inner.height as usize)
            .map(|e| {
                let width = inner.width as usize;
                let id_width = e.id.chars().count().min(width.saturating_sub(13 + 16)).max(20);
                Line::from(vec![
                    Span::raw(pad(&e.id, id_width)),
                    Span::raw(" "),
                    Span::styled(pad(&e.status, 12), theme.dim()),
                    Span::raw(fit(&e.model, width.saturating_sub(id_width + 13))),
                ])
            })
            .collect()
    };
    frame.render_widget(Paragraph::new(lines), inner);
}

pub fn style_name(style: crate::rpa::prompt::RpaStyle) -> &'static str {
    match style {
        crate::rpa::prompt::RpaStyle::Description => "description",
        crate::rpa::prompt::RpaStyle::Chatharuhi => "chatharuhi",
        crate::rpa::prompt::RpaStyle::Rolegpt => "rolegpt",
    }
}
