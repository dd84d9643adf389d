//! `incharacter annotations export|import` and `incharacter agreement --session`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::metrics_cmds::{located, read_csv_with};
use super::{Ctx, input_error};
use crate::method::{Assessment, Method};
use crate::study::Event;
use crate::study::annotation::{self, Annotation, Answer, Case, Task};
use crate::text::terminal_safe as safe;

/// A session to write annotations into: only the data dir's (samples are read-only).
fn writable_session(ctx: &Ctx, id: &str) -> anyhow::Result<(std::path::PathBuf, Vec<Event>)> {
    let store = ctx.store()?;
    let dir = match store.own(id) {
        Ok(dir) => dir,
        Err(e) => {
            let sample = store
                .samples()
                .is_some_and(|s| s.join(id).join("journal.jsonl").is_file());
            if !sample {
                return Err(e.into());
            }
            return Err(input_error(format!(
                "{} is a sample session, which is read-only: copy its folder into {} to annotate it",
                safe(id),
                crate::session::sessions_dir(store.data()).display()
            )));
        }
    };
    let events = store.load(&dir)?;
    Ok((dir, events))
}

pub fn export(ctx: &Ctx, id: &str, format: &str, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let (dir, _) = super::run_cmds::load_session(ctx, id)?;
    let all = annotation::load(&dir)?;
    let list: Vec<&Annotation> = all.values().flat_map(|m| m.values()).collect();
    match format {
        "json" => writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?,
        "csv" => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record([
                "annotator",
                "task",
                "character",
                "scale",
                "repeat",
                "dimension",
                "item_id",
                "value",
                "note",
            ])?;
            for a in list {
                w.write_record([
                    a.annotator.clone(),
                    a.case.task.name().to_string(),
                    a.case.character.clone(),
                    a.case.scale.clone(),
                    a.case.repeat.to_string(),
                    a.case.dimension.clone(),
                    a.case.item_id.map_or(String::new(), |i| i.to_string()),
                    a.value.value().map_or("x".to_string(), |v| v.to_string()),
                    a.note.clone().unwrap_or_default(),
                ])?;
            }
            out.write_all(&w.into_inner()?)?;
        }
        other => return Err(input_error(format!("unknown format \"{}\" (csv, json)", safe(other)))),
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks every row against the session first; appends only when all rows are valid.
pub fn import(ctx: &Ctx, id: &str, csv_path: &Path, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let catalog = &*ctx.catalog()?;
    let (dir, events) = writable_session(ctx, id)?;
    let cases = annotation::cases(&events, catalog);
    // `repeat` and `note` are optional (an export has them; a hand-made sheet may not).
    let rows = read_csv_with(
        csv_path,
        &[
            "annotator",
            "task",
            "character",
            "scale",
            "dimension",
            "item_id",
            "value",
        ],
        &["repeat", "note"],
    )?;
    let mut found = Vec::new();
    for row in &rows {
        let f = &row.fields;
        let err = |i: usize, m: String| located(csv_path, row, i, m);
        if !annotation::valid_annotator(&f[0]) {
            return Err(err(
                0,
                format!("annotator \"{}\": letters, digits, '-', '_' and '.' only", safe(&f[0])),
            ));
        }
        let task = Task::parse(&f[1]).ok_or_else(|| err(1, format!("task \"{}\": item or dimension", safe(&f[1]))))?;
        let item_id = match (task, f[5].trim()) {
            (Task::Item, t) => Some(
                t.parse::<u32>()
                    .map_err(|_| err(5, format!("item_id \"{}\" is not an item number", safe(t))))?,
            ),
            (Task::Dimension, "") => None,
            (Task::Dimension, t) => return Err(err(5, format!("a dimension case has no item_id (\"{}\")", safe(t)))),
            (Task::Subject, _) => {
                return Err(err(
                    1,
                    format!("session {id} is an interview session: its tasks are item and dimension"),
                ));
            }
        };
        let character = catalog.character(&f[2]).map_or(f[2].clone(), |c| c.id.clone());
        let repeat = match f[7].trim() {
            "" => 0,
            t => t
                .parse::<u32>()
                .map_err(|_| err(7, format!("repeat \"{}\" is not a number", safe(t))))?,
        };
        let case = Case {
            task,
            character,
            scale: f[3].clone(),
            repeat,
            dimension: f[4].clone(),
            item_id,
            observer: None,
        };
        if !cases.contains(&case) {
            return Err(err(
                2,
                format!(
                    "no such {} case in session {id}: {} {} {}{}",
                    f[1],
                    safe(&f[2]),
                    safe(&f[3]),
                    safe(&f[4]),
                    item_id.map_or(String::new(), |i| format!(" item {i}"))
                ),
            ));
        }
        let value =
            Answer::parse(&f[6]).ok_or_else(|| err(6, format!("value \"{}\" is not a number or x", safe(&f[6]))))?;
        if let (Some(v), Some(scale)) = (value.value(), catalog.scale(&case.scale)) {
            let (min, max) = if task == Task::Item {
                (f64::from(scale.range.min), f64::from(scale.range.max))
            } else {
                scale.dimension_range()
            };
            if !(min..=max).contains(&v) {
                return Err(err(6, format!("value {v} is outside [{min}, {max}]")));
            }
        }
        found.push(Annotation {
            annotator: f[0].clone(),
            case,
            value,
            note: Some(f[8].trim().to_string()).filter(|n| !n.is_empty()),
            at: crate::journal::now_rfc3339(),
        });
    }
    for a in &found {
        annotation::append(&dir, a)?;
    }
    let annotators: std::collections::BTreeSet<&str> = found.iter().map(|a| a.annotator.as_str()).collect();
    writeln!(
        out,
        "imported {} annotation(s) by {} into {}",
        found.len(),
        annotators.into_iter().collect::<Vec<_>>().join(", "),
        annotation::dir(&dir).display()
    )?;
    Ok(ExitCode::SUCCESS)
}

pub fn agreement(
    ctx: &Ctx,
    id: &str,
    method: &str,
    json_output: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let method = Method::parse(method)
        .filter(|m| annotation::task_of(*m).is_some())
        .ok_or_else(|| input_error(format!("--method {}: oc, d-oc, er-batch or er-all", safe(method))))?;
    let (dir, events) = super::run_cmds::load_session(ctx, id)?;
    let all = annotation::load(&dir)?;
    if all.is_empty() {
        return Err(input_error(format!(
            "session {id} has no annotations yet (annotate it in the workbench, or `incharacter annotations import`)"
        )));
    }
    let assessments: Vec<&Assessment> = events
        .iter()
        .filter_map(|e| match e {
            Event::DimensionAssessed(a) => Some(a),
            _ => None,
        })
        .collect();
    let report = annotation::report(&all, &assessments, method);
    if json_output {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let f = |v: &serde_json::Value| v.as_f64().map_or("–".to_string(), |x| format!("{x:.3}"));
    writeln!(
        out,
        "{} vs human annotators ({} task)",
        method.name(),
        report["task"].as_str().unwrap_or("")
    )?;
    writeln!(
        out,
        "{:<16} {:>5} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6} {:>9}",
        "annotator", "n", "pearson", "spearman", "kendall", "right", "close", "wrong", "accuracy"
    )?;
    for (name, a) in report["annotators"].as_object().into_iter().flatten() {
        writeln!(
            out,
            "{:<16} {:>5} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6} {:>9}",
            name,
            // A JSON value's Display ignores width and alignment: pad its text.
            a["n"].to_string(),
            f(&a["pearson"]),
            f(&a["spearman"]),
            f(&a["kendall_tau_b"]),
            a["right"].to_string(),
            a["close"].to_string(),
            a["wrong"].to_string(),
            f(&a["accuracy"])
        )?;
    }
    writeln!(
        out,
        "inter-annotator QWK (mean over scales and pairs): {}",
        f(&report["inter_annotator"]["qwk"])
    )?;
    Ok(ExitCode::SUCCESS)
}
