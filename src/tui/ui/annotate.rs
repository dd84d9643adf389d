//! Annotate: one case at a time in large readable text (an item's question and answer, or a dimension's
//! description and all its exchanges), number keys to answer, x for "refuses / unrelated", the
//! interviewer's judgement hidden until answered (v reveals), a note, progress, and the live agreement
//! of this annotator with both methods of the task, overall and per dimension.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};

use super::{block, fit, pad};
use crate::method::interview::QueryStyle;
use crate::method::{Assessment, Method};
use crate::study::annotation::{self, Answer, Task};
use crate::tui::app::{App, SAMPLES};
use crate::tui::run_view::ItemKey;
use crate::tui::wrap::wrap;

fn answer_text(a: Option<Answer>) -> String {
    match a {
        Some(Answer::Value(v)) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(Answer::Value(v)) => format!("{v:.2}"),
        Some(Answer::Refused(_)) => "x".into(),
        None => "–".into(),
    }
}

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let a = &app.annotate;
    let cases = app.annotation_cases();
    let Some(case) = cases.get(a.cursor.min(cases.len().saturating_sub(1))) else {
        let b = block(" Annotate ", false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        frame.render_widget(
            Paragraph::new(vec![
                Line::raw("Nothing to annotate."),
                Line::styled(
                    "Open a session with interviews (5, then enter); tab switches between the item and the dimension task.",
                    theme.dim(),
                ),
            ]),
            inner,
        );
        return;
    };
    let mine = a.answers.get(&a.annotator);
    let done = cases
        .iter()
        .filter(|c| mine.is_some_and(|m| m.contains_key(*c)))
        .count();
    let [header, body, progress] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(8), Constraint::Length(1)]).areas(area);
    let task = match a.task {
        Task::Item => "item task: the option the answer gives",
        Task::Dimension => "dimension task: a score from all the exchanges",
    };
    let sample = SAMPLES[a.sample % SAMPLES.len()].map_or("all cases".to_string(), |n| format!("sample of {n}"));
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            if app.shown_session_is_sample() {
                Span::styled(" read-only sample ", theme.selected())
            } else {
                Span::styled(format!(" {} ", a.annotator), theme.selected())
            },
            Span::raw(format!(
                " {task} · {sample} · case {}/{} ",
                a.cursor.min(cases.len() - 1) + 1,
                cases.len()
            )),
            Span::styled("tab task · s sample · n note · u unanswered", theme.dim()),
        ])),
        header,
    );
    let [case_area, panel_area] = Layout::horizontal([Constraint::Min(40), Constraint::Length(46)]).areas(body);

    // The case.
    let character = app.catalog.character(&case.character);
    let scale = app.catalog.scale(&case.scale);
    let name = character.map_or(case.character.clone(), |c| c.name.clone());
    let title = match case.item_id {
        Some(id) => format!(" {name} · {} · {} · item {id} ", case.scale, case.dimension),
        None => format!(" {name} · {} · {} ", case.scale, case.dimension),
    };
    let b = block(title, true, theme);
    let inner = b.inner(case_area);
    frame.render_widget(b, case_area);
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
        if let Some(row) = app.run.item(&key) {
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

    // Panel: this case, then agreement.
    let b = block(" Your answer · agreement ", false, theme);
    let inner = b.inner(panel_area);
    frame.render_widget(b, panel_area);
    let methods: [Method; 2] = match a.task {
        Task::Item => [Method::Oc, Method::DOc],
        Task::Dimension => [Method::ErBatch, Method::ErAll],
    };
    let assessments: Vec<&Assessment> = app.run.assessments.iter().collect();
    let given = mine.and_then(|m| m.get(case));
    let mut lines = vec![Line::from(vec![
        Span::raw("yours: "),
        Span::styled(
            if a.typed.is_empty() {
                answer_text(given.map(|g| g.value))
            } else {
                format!("{}▏", a.typed)
            },
            theme.fg(theme.accent).add_modifier(Modifier::BOLD),
        ),
    ])];
    for m in methods {
        let shown = a.reveal || given.is_some();
        let value = annotation::machine(&assessments, case, m);
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
    let only_me: std::collections::BTreeMap<_, _> =
        mine.map(|m| (a.annotator.clone(), m.clone())).into_iter().collect();
    for m in methods {
        let r = annotation::report(&only_me, &assessments, m);
        let me = &r["annotators"][&a.annotator];
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
        for (d, v) in me["dimensions"].as_object().into_iter().flatten().take(6) {
            lines.push(Line::styled(
                format!("  {} n={} acc {}", pad(d, 20), v["n"], f(&v["accuracy"])),
                theme.dim(),
            ));
        }
    }
    let others = a.answers.len().saturating_sub(usize::from(mine.is_some()));
    if others > 0 {
        let qwk = annotation::inter_annotator(&a.answers, a.task);
        lines.push(Line::raw(format!(
            "QWK with {others} other annotator(s): {}",
            qwk["qwk"].as_f64().map_or("–".to_string(), |v| format!("{v:.3}"))
        )));
    }
    if a.editing_note {
        let [rest, note_area] = Layout::vertical([Constraint::Min(4), Constraint::Length(4)]).areas(inner);
        frame.render_widget(Paragraph::new(lines), rest);
        let mut note = a.note.clone();
        note.set_block(block(" note (enter keeps, esc closes) ", true, theme));
        frame.render_widget(&note, note_area);
    } else {
        frame.render_widget(Paragraph::new(lines), inner);
    }
    frame.render_widget(
        Gauge::default()
            .gauge_style(theme.fg(theme.positive))
            .ratio(done as f64 / cases.len().max(1) as f64)
            .label(format!("{done}/{} answered by {}", cases.len(), a.annotator)),
        progress,
    );
}
