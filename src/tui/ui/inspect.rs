//! Inspector, the persona debugger: per dimension the score of the chosen method against the label
//! (H/L/X, ✓/✗); the judge's batches with their analyses (ER) or the items' options with keying and
//! score (OC, d-OC, SR); and for one item everything: question, answer, each method's reading of it,
//! and the exact prompts (the agent's, with retrieved memories, and the judge's after anonymization),
//! rebuilt with the same functions the engine used.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{block, fit, pad, score_text, window};
use crate::domain::character::{Character, LabelSource, LabelType};
use crate::domain::scale::{Keying, Scale};
use crate::domain::scoring::ItemOption;
use crate::llm::{ChatMessage, Speaker};
use crate::method::anonymize::Masker;
use crate::method::convert;
use crate::method::expert::{self, Exchange};
use crate::method::interview::{self, QueryStyle};
use crate::method::{Assessment, Method};
use crate::rpa::prompt;
use crate::tui::app::{App, InspectFocus, ListId};
use crate::tui::run_view::ItemKey;
use crate::tui::wrap::wrap;

pub struct Unit<'a> {
    pub character: &'a Character,
    pub scale: &'a Scale,
    pub repeat: u32,
}

pub fn unit(app: &App, index: usize) -> Option<Unit<'_>> {
    let units = app.run.units();
    let (c, s, r) = units.get(index % units.len().max(1))?;
    Some(Unit {
        character: app.catalog.character(c)?,
        scale: app.catalog.scale(s)?,
        repeat: *r,
    })
}

pub fn assessment<'a>(app: &'a App, u: &Unit, method: Method, dim: &str) -> Option<&'a Assessment> {
    app.run.assessments.iter().find(|a| {
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
    let (min, max) = u.scale.dimension_range();
    let mid = (min + max) / 2.0;
    let correct = match (label.kind.is_high(), score) {
        (Some(high), Some(s)) => Some((s > mid) == high || (s == mid && !high)),
        _ => None,
    };
    (
        label.score.map_or("X".into(), |s| format!("{s:.2}")),
        Some(label.kind),
        correct,
    )
}

fn exchanges(app: &App, u: &Unit, style: QueryStyle) -> Vec<Exchange> {
    u.scale
        .scored_items()
        .filter_map(|item| {
            let row = app.run.item(&ItemKey {
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

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let Some(u) = unit(app, app.inspect.unit) else {
        let b = block(" Inspector ", false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        frame.render_widget(
            Paragraph::new(vec![
                Line::raw("Nothing to inspect yet."),
                Line::styled("Run an interview (1) or open a session (5).", theme.dim()),
            ]),
            inner,
        );
        return;
    };
    let methods = app.methods();
    let method = methods[app.inspect.method % methods.len().max(1)];
    let [header, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let labels = match app.inspect_labels() {
        LabelSource::Pdb => "pdb",
        LabelSource::Annotation => "annotation",
    };
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                format!(" {} ", u.character.name),
                theme.fg(theme.character).add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!("· {} · repeat {} · ", u.scale.id, u.repeat)),
            Span::styled(method.name(), theme.fg(theme.measured).add_modifier(Modifier::BOLD)),
            Span::styled(format!(" · labels: {labels}"), theme.fg(theme.label_pdb)),
            Span::styled("   ←/→ unit · m method · space labels", theme.dim()),
        ])),
        header,
    );
    if app.inspect.focus == InspectFocus::Drill {
        return drill(frame, app, &u, body);
    }
    let [dims_area, detail_area] = Layout::horizontal([Constraint::Length(52), Constraint::Min(20)]).areas(body);
    let dim = app.inspect.dim.min(u.scale.dimensions.len().saturating_sub(1));

    // Dimensions.
    let b = block(" Dimensions ", app.inspect.focus == InspectFocus::Dimensions, theme);
    let inner = b.inner(dims_area);
    frame.render_widget(b, dims_area);
    let height = inner.height.saturating_sub(1) as usize;
    let first = window(u.scale.dimensions.len(), dim, height);
    let list_area = Rect {
        y: inner.y + 1,
        height: inner.height.saturating_sub(1),
        ..inner
    };
    app.hit.borrow_mut().lists.push((list_area, first, ListId::Dimensions));
    let mut lines = vec![Line::styled(
        format!("{} {:>6} {:>6}  type", pad("dimension", 26), "score", "label"),
        theme.dim(),
    )];
    for (i, d) in u.scale.dimensions.iter().enumerate().skip(first).take(height) {
        let a = assessment(app, &u, method, &d.name);
        let score = a.and_then(|a| a.score);
        let (label, kind, correct) = verdict(&u, i, score, app.inspect_labels());
        let mark = match (a.map(|a| a.failure.is_some()), correct) {
            (Some(true), _) => Span::styled(" failed", theme.fg(theme.error)),
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
        let row_style = if i == dim && app.inspect.focus == InspectFocus::Dimensions {
            theme.selected()
        } else {
            theme.base()
        };
        lines.push(Line::from(vec![
            Span::styled(
                format!("{} {:>6} {:>6}  {kind}", pad(&d.name, 26), score_text(score), label),
                row_style,
            ),
            mark,
        ]));
    }
    frame.render_widget(Paragraph::new(lines), inner);

    // Detail of the selected dimension.
    let d = &u.scale.dimensions[dim];
    let a = assessment(app, &u, method, &d.name);
    let b = block(
        format!(" {} · {} ", d.name, method.name()),
        app.inspect.focus == InspectFocus::Items,
        theme,
    );
    let inner = b.inner(detail_area);
    frame.render_widget(b, detail_area);
    let width = inner.width as usize;
    let mut lines: Vec<Line> = Vec::new();
    match a {
        None => lines.push(Line::styled("not assessed yet", theme.dim())),
        Some(a) if !method.item_level() => {
            if let Some(f) = &a.failure {
                lines.push(Line::styled(format!("failed: {f}"), theme.fg(theme.error)));
            }
            for (bi, batch) in a.batches.iter().enumerate() {
                lines.push(Line::from(vec![
                    Span::styled(format!("batch {} ", bi + 1), theme.title()),
                    Span::raw(format!(
                        "items {:?} → {} ({} attempt{})",
                        batch.item_ids,
                        score_text(batch.score),
                        batch.attempts.len(),
                        if batch.attempts.len() == 1 { "" } else { "s" }
                    )),
                ]));
                for l in wrap(&batch.analysis, width.saturating_sub(2)) {
                    lines.push(Line::raw(format!("  {l}")));
                }
                lines.push(Line::raw(""));
            }
        }
        Some(a) => {
            let items: Vec<_> = u.scale.items_of(dim).collect();
            let cursor = app.inspect.item.min(items.len().saturating_sub(1));
            lines.push(Line::styled(
                format!("{:>4} {:>4} {:>7} {:>6}  statement", "item", "key", "option", "score"),
                theme.dim(),
            ));
            let list_area = Rect {
                y: inner.y + 1,
                height: inner.height.saturating_sub(1),
                ..inner
            };
            app.hit.borrow_mut().lists.push((list_area, 0, ListId::InspectItems));
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
                    Some(c) => option_text(c.option),
                    None => "–".into(),
                };
                let style = if i == cursor && app.inspect.focus == InspectFocus::Items {
                    theme.selected()
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
            lines.push(Line::styled(
                format!(
                    "dimension score {} · x = refused (counts at the midpoint)",
                    score_text(a.score)
                ),
                theme.dim(),
            ));
        }
    }
    frame.render_widget(Paragraph::new(lines).scroll((app.inspect.scroll, 0)), inner);
}

fn option_text(option: Option<ItemOption>) -> String {
    match option {
        Some(ItemOption::Value(v)) => v.to_string(),
        Some(ItemOption::Refused) => "x".into(),
        None => "–".into(),
    }
}

fn messages_lines<'a>(title: String, messages: &[ChatMessage], app: &App, width: usize) -> Vec<Line<'a>> {
    let theme = app.theme();
    let mut lines = vec![Line::styled(title, theme.title())];
    for m in messages {
        let role = match m.role {
            Speaker::System => "system",
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
        };
        lines.push(Line::styled(format!("[{role}]"), theme.fg(theme.accent)));
        for l in wrap(&crate::text::terminal_safe(&m.content), width.saturating_sub(2)) {
            lines.push(Line::raw(format!("  {l}")));
        }
    }
    lines.push(Line::raw(""));
    lines
}

/// One item, everything about it.
fn drill(frame: &mut Frame, app: &App, u: &Unit, area: Rect) {
    let theme = app.theme();
    let dim = app.inspect.dim.min(u.scale.dimensions.len().saturating_sub(1));
    let items: Vec<_> = u.scale.items_of(dim).collect();
    let Some(item) = items.get(app.inspect.item.min(items.len().saturating_sub(1))) else {
        return;
    };
    let b = block(
        format!(" Item {} · {} (esc back) ", item.id, u.scale.dimensions[dim].name),
        true,
        theme,
    );
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let width = inner.width as usize;
    let lang = u.character.language;
    let mut lines: Vec<Line> = Vec::new();
    lines.push(Line::from(vec![
        Span::styled("statement ", theme.dim()),
        Span::raw(item.statement.get(lang).clone()),
    ]));
    let plan = app.run.session.plan.as_ref();
    let styles: std::collections::BTreeSet<QueryStyle> = app.methods().iter().map(|m| m.query_style()).collect();
    let masker = Masker::new(&u.character.aliases, &u.character.experimenter);
    for style in &styles {
        let key = ItemKey {
            character: u.character.id.clone(),
            scale: u.scale.id.clone(),
            repeat: u.repeat,
            style: *style,
            item_id: item.id,
        };
        let Some(row) = app.run.item(&key) else { continue };
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
        if let Some(e) = &row.error {
            lines.push(Line::styled(format!("  failed: {e}"), theme.fg(theme.error)));
        }
        // The agent's prompt, rebuilt exactly.
        if let Some(plan) = plan {
            let memories = app.memories.get(&u.character.id).map(Arc::as_ref);
            let query = interview::query(u.character, u.scale, item, *style);
            let assembled = prompt::assemble(u.character, plan.style, memories, item.question.get(lang), &query);
            let note =
                if assembled.retrieved == row.retrieved || row.retrieved.is_empty() && assembled.retrieved.is_empty() {
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
                &assembled.messages,
                app,
                width,
            ));
        }
    }
    // Each method's reading of the item, and its judge prompt.
    for method in app.methods() {
        let Some(a) = assessment(app, u, method, &u.scale.dimensions[dim].name) else {
            continue;
        };
        let ex = exchanges(app, u, method.query_style());
        lines.push(Line::styled(format!("── {} ──", method.name()), theme.title()));
        if method.item_level() {
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
            }
            // The call that converted this item: as journaled, or (older sessions) regrouped by the plan.
            let recorded = a.calls.iter().find(|ids| ids.contains(&item.id)).map(|ids| {
                let refs: Vec<&Exchange> = ex.iter().filter(|e| ids.contains(&e.item_id)).collect();
                match method {
                    Method::DOc => convert::doc_messages(u.scale, dim, &masker, &refs),
                    _ => convert::oc_messages(u.scale, &u.character.name, &refs),
                }
            });
            let messages = recorded.or_else(|| {
                let per_call = plan.map_or(convert::MAX_ITEMS_PER_CALL, |p| p.items_per_call as usize);
                let groups = match method {
                    Method::DOc => convert::doc_groups(u.scale, &masker, &ex, per_call),
                    _ => convert::oc_groups(u.scale, &u.character.name, &ex, per_call),
                };
                groups
                    .into_iter()
                    .find(|(_, ids)| ids.contains(&item.id))
                    .map(|(m, _)| m)
            });
            if method != Method::Sr
                && let Some(messages) = messages
            {
                lines.extend(messages_lines("judge prompt".into(), &messages, app, width));
            }
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
            let messages = expert::messages(u.scale, dim, lang, &masker, &refs);
            lines.extend(messages_lines(
                "judge prompt (anonymized)".into(),
                &messages,
                app,
                width,
            ));
        }
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((app.inspect.scroll, 0)),
        inner,
    );
}
