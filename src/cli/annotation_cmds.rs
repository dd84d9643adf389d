//! `incharacter annotations export|import` and `incharacter agreement --session`: the item and dimension
//! tasks of interview sessions, the subject task of observer sessions, and the human-ratings rows
//! (Tables 3 and 4) that `report` adds for the latter.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde_json::Value;

use super::metrics_cmds::{located, read_csv_with};
use super::table::{Table, num};
use super::{Ctx, input_error};
use crate::annotation::subjects::{self, Part, TableRow};
use crate::annotation::{self, Annotation, Answer, Case, Task};
use crate::domain::scale::Scale;
use crate::method::Method;
use crate::observer::ObservePlan;
use crate::observer::report::SubjectResult;
use crate::study::Event;
use crate::study::interview::results::{self, SafeCsv};

/// A session to write annotations into: only the data dir's (samples are read-only).
fn writable_session(ctx: &Ctx, id: &str) -> anyhow::Result<(std::path::PathBuf, Vec<Event>)> {
    let store = ctx.store()?;
    let id = &store.own_id(id)?;
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
                id,
                crate::session::sessions_dir(store.data()).display()
            )));
        }
    };
    let events = store.load(&dir)?;
    Ok((dir, events))
}

/// The largest annotations CSV `annotations import` reads: far above any sheet of human ratings (a
/// row is some 100 bytes), far below what would exhaust memory.
pub const MAX_IMPORT_BYTES: u64 = 64 * 1024 * 1024;

/// Every annotator's latest answers as CSV or JSON. Notes and names come from imported sheets: on
/// stdout they pass the command's `text::Safe` gate (no escape sequences or control characters,
/// newlines kept; JSON with such characters escaped, so it means the same); into `output` the text is
/// written as it is, replacing the file whole or not at all. CSV cells are neutralised for
/// spreadsheets either way.
pub fn export(
    ctx: &Ctx,
    id: &str,
    format: Option<&str>,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let format = super::output_format(format, output, &["csv", "json"], "csv")?;
    let format = format.as_str();
    let (dir, _) = super::lookup::load_session(ctx, id)?;
    let all = annotation::load(&dir, &*ctx.catalog()?)?;
    say_stopped_imports(&dir);
    let list: Vec<&Annotation> = all.values().flat_map(|m| m.values()).collect();
    let text = match format {
        "json" => {
            let json = format!("{}\n", crate::text::json_pretty(&list)?);
            match output {
                Some(_) => json,
                None => results::json_for_terminal(&json),
            }
        }
        "csv" => {
            let mut w = SafeCsv::new();
            w.record([
                "annotator",
                "task",
                "character",
                "scale",
                "repeat",
                "dimension",
                "item_id",
                "value",
                "note",
                "observer",
            ])?;
            for a in list {
                w.record([
                    a.annotator.clone(),
                    a.case.task.name().to_string(),
                    a.case.character.clone(),
                    a.case.scale.clone(),
                    a.case.repeat.to_string(),
                    a.case.dimension.clone(),
                    a.case.item_id.map_or(String::new(), |i| i.to_string()),
                    a.value.value().map_or("x".to_string(), |v| v.to_string()),
                    a.note.clone().unwrap_or_default(),
                    a.case.observer.clone().unwrap_or_default(),
                ])?;
            }
            w.finish()?
        }
        other => return Err(input_error(format!("unknown format \"{}\" (csv, json)", other))),
    };
    // `-o -` is standard output, as it is for other tools (it made a file named "-").
    match output.filter(|p| *p != std::path::Path::new("-")) {
        Some(path) => {
            crate::files::write_output(path, text.as_bytes(), &crate::session::store::kept())?;
            writeln!(out, "wrote {}", path.display())?;
        }
        None => out.write_all(text.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The columns of an annotations CSV, in the order of its fields: the required, then the optional
/// (`repeat` and `note` an export has and a hand-made sheet may not; `observer` for a subject rated as
/// one observer saw it).
const REQUIRED: [&str; 7] = [
    "annotator",
    "task",
    "character",
    "scale",
    "dimension",
    "item_id",
    "value",
];
const OPTIONAL: [&str; 3] = ["repeat", "note", "observer"];
/// Where each column's field is in a row.
mod col {
    pub const ANNOTATOR: usize = 0;
    pub const TASK: usize = 1;
    pub const CHARACTER: usize = 2;
    pub const SCALE: usize = 3;
    pub const DIMENSION: usize = 4;
    pub const ITEM_ID: usize = 5;
    pub const VALUE: usize = 6;
    pub const REPEAT: usize = 7;
    pub const NOTE: usize = 8;
    pub const OBSERVER: usize = 9;
}

/// Checks every row against the session first; appends only when all rows are valid.
/// Says (on stderr) each import into the session in `dir` that a kill stopped part way.
fn say_stopped_imports(dir: &Path) {
    for from in annotation::stopped_imports(dir) {
        crate::note!(
            "warning: an import of {} into this session was stopped part way (killed): some of its annotations are \
             missing; import that file again to complete it",
            crate::text::visible(&from)
        );
    }
}

pub fn import(ctx: &Ctx, id: &str, csv_path: &Path, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    // Before anything is read: a device or a FIFO would never end, a runaway file would fill memory.
    crate::files::check_readable(csv_path, MAX_IMPORT_BYTES, "an annotations CSV")?;
    let catalog = &*ctx.catalog()?;
    let (dir, events) = writable_session(ctx, id)?;
    let session = match crate::study::observe::subjects(&events, catalog) {
        Some((plan, _)) => Session::Observers(plan, observer_scale(catalog)?),
        None => Session::Interviews(annotation::cases(&events, catalog)),
    };
    let observers = matches!(session, Session::Observers(..));
    let rows = read_csv_with(csv_path, &REQUIRED, &OPTIONAL, &["note"])?;
    let mut found = Vec::new();
    for row in &rows {
        let f = &row.fields;
        let err = |i: usize, m: String| located(csv_path, row, i, m);
        if let Some(problem) = annotation::annotator_problem(&f[col::ANNOTATOR]) {
            return Err(err(
                col::ANNOTATOR,
                // Escaped, so what makes it wrong shows (an escape sequence would be taken out).
                format!(
                    "annotator {}: {problem}",
                    crate::text::fit(&format!("{:?}", f[col::ANNOTATOR]), 82)
                ),
            ));
        }
        let task = Task::parse(&f[col::TASK]).ok_or_else(|| {
            err(
                col::TASK,
                format!("task {:?}: item, dimension or subject", f[col::TASK]),
            )
        })?;
        let repeat = match f[col::REPEAT].trim() {
            "" => 0,
            t => t
                .parse::<u32>()
                .map_err(|_| err(col::REPEAT, format!("repeat {:?} is not a number", t)))?,
        };
        if (task == Task::Subject) != observers {
            let why = if observers {
                "an observer session: its task is subject (item and dimension are an interview session's)"
            } else {
                "an interview session: its tasks are item and dimension (subject is an observer session's)"
            };
            return Err(err(col::TASK, format!("session {} is {why}", id)));
        }
        let item_id = match (task, f[col::ITEM_ID].trim()) {
            (Task::Item, t) => Some(
                t.parse::<u32>()
                    .map_err(|_| err(col::ITEM_ID, format!("item_id {:?} is not an item number", t)))?,
            ),
            (_, "") => None,
            (_, t) => {
                return Err(err(
                    col::ITEM_ID,
                    format!("a {} case has no item_id ({:?})", task.name(), t),
                ));
            }
        };
        let case = Case {
            task,
            character: f[col::CHARACTER].trim().to_string(),
            // Scale ids are the same whatever their case, as everywhere.
            scale: catalog
                .scale(&f[col::SCALE])
                .map_or_else(|| f[col::SCALE].clone(), |s| s.id.clone()),
            repeat,
            dimension: f[col::DIMENSION].clone(),
            item_id,
            observer: Some(f[col::OBSERVER].trim().to_string()).filter(|o| !o.is_empty()),
        };
        let case = match &session {
            Session::Interviews(cases) => interview_case(catalog, cases, id, case),
            Session::Observers(plan, scale) => subject_case(catalog, plan, scale, case),
        }
        .map_err(|(column, why)| err(column, why))?;
        let value = Answer::parse(&f[col::VALUE])
            .ok_or_else(|| err(col::VALUE, format!("value {:?} is not a number or x", f[col::VALUE])))?;
        if let (Some(v), Some((min, max))) = (value.value(), annotation::value_range(catalog, &case))
            && !(min..=max).contains(&v)
        {
            return Err(err(col::VALUE, format!("value {v} is outside [{min}, {max}]")));
        }
        found.push(Annotation {
            annotator: f[col::ANNOTATOR].clone(),
            case,
            value,
            // An export's guard against spreadsheet formulas is taken off again.
            note: Some(crate::text::from_csv_cell(&f[col::NOTE]).to_string()).filter(|n| !n.trim().is_empty()),
            at: crate::journal::now_rfc3339(),
        });
    }
    // One file however it is named (a link, `..`): its stopped import is completed by any of them.
    let from = std::fs::canonicalize(csv_path)
        .or_else(|_| std::path::absolute(csv_path))
        .unwrap_or_else(|_| csv_path.to_path_buf());
    annotation::append_all(&dir, &from, &found)?;
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

/// What the rows of an import are checked against: an interview session's item and dimension cases,
/// or an observer session's subjects and the traits of their scale.
enum Session<'a> {
    Interviews(Vec<Case>),
    Observers(ObservePlan, &'a Scale),
}

/// The scale observer reports (and subject ratings) are on.
fn observer_scale(catalog: &crate::catalog::Catalog) -> anyhow::Result<&Scale> {
    catalog
        .scale(crate::observer::SCALE)
        .ok_or_else(|| input_error(format!("the {} scale is missing", crate::observer::SCALE)))
}

/// The interview case a row names (its character also by name or alias), or the column that is wrong
/// and why.
fn interview_case(
    catalog: &crate::catalog::Catalog,
    cases: &[Case],
    id: &str,
    case: Case,
) -> Result<Case, (usize, String)> {
    if let Some(o) = &case.observer {
        return Err((
            col::OBSERVER,
            format!(
                "an interview case has no observer ({:?}): observers are an observer session's",
                o
            ),
        ));
    }
    let named = case.character.clone();
    // A name several characters answer to is the one of them the session has cases of.
    let character = catalog
        .named_character_among(&named, |id| cases.iter().any(|c| c.character == id))
        .unwrap_or_else(|_| named.clone());
    let case = Case { character, ..case };
    if cases.contains(&case) {
        return Ok(case);
    }
    // The first field, in the row's order, that no case of the session matches with those before it.
    let task: Vec<&Case> = cases.iter().filter(|c| c.task == case.task).collect();
    let character: Vec<&&Case> = task.iter().filter(|c| c.character == case.character).collect();
    let scale: Vec<&&&Case> = character.iter().filter(|c| c.scale == case.scale).collect();
    let dimension: Vec<&&&&Case> = scale.iter().filter(|c| c.dimension == case.dimension).collect();
    let item: Vec<&&&&&Case> = dimension.iter().filter(|c| c.item_id == case.item_id).collect();
    let (column, what) = if character.is_empty() {
        (col::CHARACTER, format!("character {named}"))
    } else if scale.is_empty() {
        (col::SCALE, format!("scale {} for {named}", case.scale))
    } else if dimension.is_empty() {
        (
            col::DIMENSION,
            format!("dimension \"{}\" of {}", case.dimension, case.scale),
        )
    } else if item.is_empty() {
        let item = case.item_id.map_or("no item".to_string(), |i| format!("item {i}"));
        (col::ITEM_ID, format!("{item} in {} {}", case.scale, case.dimension))
    } else {
        let mut repeats: Vec<u32> = item.iter().map(|c| c.repeat).collect();
        repeats.sort_unstable();
        repeats.dedup();
        let had = repeats.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        (col::REPEAT, format!("repeat {} (it has repeat {had})", case.repeat))
    };
    Err((
        column,
        format!(
            "no such {} case in session {id}: {what} ({named} {} {}{}{})",
            case.task.name(),
            case.scale,
            case.dimension,
            case.item_id.map_or(String::new(), |i| format!(" item {i}")),
            if case.repeat > 0 {
                format!(" repeat {}", case.repeat)
            } else {
                String::new()
            }
        ),
    ))
}

/// The subject case a row names (a character subject also by the character's name or alias), or the
/// column that is wrong and why.
fn subject_case(
    catalog: &crate::catalog::Catalog,
    plan: &ObservePlan,
    scale: &Scale,
    case: Case,
) -> Result<Case, (usize, String)> {
    let is_subject = |s: &str| plan.subjects.iter().any(|x| x.id == s);
    let case = if is_subject(&case.character) {
        case
    } else {
        Case {
            character: catalog
                .character(&case.character)
                .map(|c| c.id.clone())
                .filter(|c| is_subject(c))
                .unwrap_or(case.character.clone()),
            ..case
        }
    };
    subjects::mismatch(plan, scale, &case).map_err(|(part, why)| {
        let column = match part {
            Part::Task => col::TASK,
            Part::Subject => col::CHARACTER,
            Part::Scale => col::SCALE,
            Part::Trait => col::DIMENSION,
            Part::Item => col::ITEM_ID,
            Part::Repeat => col::REPEAT,
            Part::Observer => col::OBSERVER,
        };
        (column, why.to_string())
    })?;
    Ok(case)
}

/// The method whose judgments `agreement` compares with the annotations: one the session ran
/// (by default OC, else the first it ran that annotators can rate), or none for an observer session, which
/// has one task, the subject task.
fn agreed_method(id: &str, events: &[crate::study::Event], asked: Option<&str>) -> anyhow::Result<Option<Method>> {
    use crate::study::Study;
    if crate::study::kind_of(events) == Some(crate::study::Kind::Observers) {
        return match asked {
            Some(m) => Err(input_error(format!(
                "--method {m}: session {id} is an observer session, whose annotations are of one task (the subjects): leave --method out"
            ))),
            None => Ok(None),
        };
    }
    let ran: Vec<Method> = crate::study::interview::Interviews::plan_of(events)
        .map(|p| {
            p.methods
                .iter()
                .copied()
                .filter(|m| annotation::task_of(*m).is_some())
                .collect()
        })
        .unwrap_or_default();
    let names = || ran.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
    match asked {
        None => ran
            .iter()
            .find(|m| **m == Method::Oc)
            .or(ran.first())
            .copied()
            .map(Some)
            .ok_or_else(|| {
                input_error(format!(
                    "session {id} ran none of the methods annotators rate (oc, d-oc, er-batch, er-all)"
                ))
            }),
        Some(name) => {
            let method = Method::parse(name)
                .filter(|m| annotation::task_of(*m).is_some())
                .ok_or_else(|| input_error(format!("--method {name}: oc, d-oc, er-batch or er-all")))?;
            if !ran.contains(&method) {
                return Err(input_error(format!(
                    "--method {name}: session {id} did not run it; it ran {}",
                    if ran.is_empty() {
                        "none that annotators rate".to_string()
                    } else {
                        names()
                    }
                )));
            }
            Ok(Some(method))
        }
    }
}

pub fn agreement(
    ctx: &Ctx,
    id: &str,
    method: Option<&str>,
    json_output: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let (dir, events) = super::lookup::load_session(ctx, id)?;
    let method = agreed_method(id, &events, method)?;
    let all = annotation::load(&dir, &*ctx.catalog()?)?;
    say_stopped_imports(&dir);
    if all.is_empty() {
        return Err(input_error(format!(
            "session {} has no annotations yet (annotate it in the workbench, or `incharacter annotations import`)",
            id
        )));
    }
    let catalog = ctx.catalog()?;
    let Some(method) = method else {
        let scale = observer_scale(&catalog)?;
        let (_, subjects) = crate::study::observe::subjects(&events, &catalog)
            .ok_or_else(|| input_error(format!("session {} has no observer plan", id)))?;
        let report = subjects::report(&all, &subjects, scale);
        if json_output {
            writeln!(out, "{}", crate::text::json_pretty(&report)?)?;
        } else {
            write!(out, "{}", subject_tables(&report))?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    // What a resume assessed again supersedes what it replaced, as in `export` and `report`.
    let assessments = crate::study::interview::results::latest_assessments(&events);
    let report = annotation::report(&all, &assessments, method, &catalog);
    if json_output {
        writeln!(out, "{}", crate::text::json_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    // A value that rounds to zero is zero, never -0.000.
    let f = |v: &serde_json::Value| {
        v.as_f64()
            .map_or("–".to_string(), |x| crate::text::decimals(x, 3, false))
    };
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
    let mut pooled = false;
    for (name, a) in report["annotators"].as_object().into_iter().flatten() {
        let row = |label: &str, a: &serde_json::Value| {
            format!(
                "{:<16} {:>5} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6} {:>9}",
                label,
                // A JSON value's Display ignores width and alignment: pad its text.
                a["n"].to_string(),
                f(&a["pearson"]),
                f(&a["spearman"]),
                f(&a["kendall_tau_b"]),
                a["right"].to_string(),
                a["close"].to_string(),
                a["wrong"].to_string(),
                f(&a["accuracy"])
            )
        };
        writeln!(out, "{}", row(name, a))?;
        // Several scales: each on its own line below the pooled one.
        if a["pooled_scales"].as_u64().unwrap_or(0) > 1 {
            pooled = true;
            for s in a["scales"].as_array().into_iter().flatten() {
                writeln!(out, "{}", row(&format!("  {}", s["scale"].as_str().unwrap_or("")), s))?;
            }
        }
    }
    if pooled {
        writeln!(
            out,
            "(the first line of an annotator pools scales of different ranges: its correlations follow the scales' \
             means as much as the ratings, and right/close/wrong counts each scale's own points; read the lines per scale)"
        )?;
    }
    writeln!(
        out,
        "inter-annotator QWK (mean over scales and pairs): {}",
        f(&report["inter_annotator"]["qwk"])
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The subject task's agreement report as tables: per annotator a row per trait and a row per context
/// and trait (and per trait when they rated per observer), then the pairs of annotators.
fn subject_tables(report: &Value) -> String {
    let f = |v: &Value| num(v.as_f64());
    let count = |v: &Value| v.as_u64().map_or("–".to_string(), |n| n.to_string());
    let mut out = format!(
        "human ratings of the subjects ({} task, {}) against their self-reports and aggregated observer reports\n",
        report["task"].as_str().unwrap_or(""),
        report["scale"].as_str().unwrap_or("")
    );
    for (name, a) in report["annotators"].as_object().into_iter().flatten() {
        out.push_str(&format!("\n{}: {} subject(s) rated\n", name, count(&a["subjects"])));
        let traits = a["traits"].as_object();
        let latent = traits
            .into_iter()
            .flatten()
            .any(|(_, t)| t.get("spearman_latent").is_some());
        let mut header = vec!["trait", ">n", ">ρ self", ">ρ observers", ">|Δ| self", ">|Δ| observers"];
        if latent {
            header.push(">ρ latent");
        }
        let mut table = Table::new(&header);
        for (t, e) in traits.into_iter().flatten() {
            let mut row = vec![
                t.to_string(),
                count(&e["n"]),
                f(&e["spearman_self"]),
                f(&e["spearman_observers"]),
                f(&e["mean_abs_diff_self"]),
                f(&e["mean_abs_diff_observers"]),
            ];
            if latent {
                row.push(f(&e["spearman_latent"]));
            }
            table.row(row);
        }
        out.push_str(&table.render());
        let mut contexts = Table::new(&["context", "trait", ">n", ">ρ observers", ">|Δ| observers"]);
        for (context, per_trait) in a["contexts"].as_object().into_iter().flatten() {
            for (t, e) in per_trait.as_object().into_iter().flatten() {
                contexts.row(vec![
                    context.to_string(),
                    t.to_string(),
                    count(&e["n"]),
                    f(&e["spearman_observers"]),
                    f(&e["mean_abs_diff_observers"]),
                ]);
            }
        }
        out.push('\n');
        out.push_str(&contexts.render());
        if let Some(per_observer) = a.get("per_observer").and_then(Value::as_object) {
            let mut table = Table::new(&["as one observer saw it", ">n", ">ρ observer", ">|Δ| observer"]);
            for (t, e) in per_observer {
                table.row(vec![
                    t.to_string(),
                    count(&e["n"]),
                    f(&e["spearman"]),
                    f(&e["mean_abs_diff"]),
                ]);
            }
            out.push('\n');
            out.push_str(&table.render());
        }
    }
    let pairs = report["inter_annotator"]["pairs"].as_array();
    if pairs.is_some_and(|p| !p.is_empty()) {
        out.push_str("\ninter-annotator (whole subjects; QWK on ratings rounded to whole points)\n");
        let mut table = Table::new(&["a", "b", ">n", ">spearman", ">qwk"]);
        for p in pairs.into_iter().flatten() {
            table.row(vec![
                p["a"].as_str().unwrap_or("").to_string(),
                p["b"].as_str().unwrap_or("").to_string(),
                count(&p["n"]),
                f(&p["spearman"]),
                f(&p["qwk"]),
            ]);
        }
        out.push_str(&table.render());
    }
    out
}

/// An observer session's human ratings as the multi-observer paper's Tables 3 and 4 give them: the
/// model that played the subjects, and per trait the ratings (pooled over annotators) against the
/// self-reports and the aggregated observer reports.
pub(super) struct HumanRatings {
    pub subject_model: String,
    pub traits: BTreeMap<String, TableRow>,
}

/// The human ratings of an observer session, if it has any.
pub(super) fn human_ratings(
    dir: &Path,
    catalog: &crate::catalog::Catalog,
    events: &[Event],
    plan: &ObservePlan,
    subjects: &[SubjectResult],
    scale: &Scale,
) -> anyhow::Result<Option<HumanRatings>> {
    let traits = subjects::table(&annotation::load(dir, catalog)?, subjects, scale);
    if traits.is_empty() {
        return Ok(None);
    }
    let subject_model = events
        .iter()
        .find_map(|e| e.start()?.providers.get("subject").map(|m| m.model.clone()))
        .unwrap_or_else(|| plan.subject_provider.clone());
    Ok(Some(HumanRatings { subject_model, traits }))
}

impl HumanRatings {
    pub fn to_json(&self) -> Value {
        serde_json::json!({"subject_model": self.subject_model, "traits": self.traits})
    }
}

/// Tables 3 and 4: a row per session and trait with n, |H−S|, |H−O|, ρ(H,S) and ρ(H,O).
pub(super) fn human_ratings_table(sessions: &[(&str, &HumanRatings)]) -> String {
    let mut table = Table::new(&[
        "session",
        "subject model",
        "trait",
        ">n",
        ">|H−S|",
        ">|H−O|",
        ">ρ(H,S)",
        ">ρ(H,O)",
    ]);
    for (id, h) in sessions {
        for (t, r) in &h.traits {
            table.row(vec![
                id.to_string(),
                h.subject_model.to_string(),
                t.to_string(),
                r.n.to_string(),
                num(r.mean_abs_diff_self),
                num(r.mean_abs_diff_observers),
                num(r.spearman_self),
                num(r.spearman_observers),
            ]);
        }
    }
    table.render()
}
