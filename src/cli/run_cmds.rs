//! `run` (and `run --resume`), `sessions`, `export`: headless benchmark runs and their results.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;

use super::input_error;
use super::table::{Table, num};
use crate::catalog::Catalog;
use crate::engine::runner::{self, Start};
use crate::engine::{Event, Method, RunPlan, results};
use crate::llm::{self, Role};
use crate::rpa::prompt::RpaStyle;
use crate::text::terminal_safe as safe;

pub struct RunArgs {
    pub characters: Option<String>,
    pub scales: Option<String>,
    pub methods: Option<String>,
    pub repeats: u32,
    pub rpa: Option<String>,
    pub judge: Option<String>,
    pub concurrency: Option<usize>,
    pub seed: u64,
    pub name: Option<String>,
    pub resume: Option<String>,
    pub style: RpaStyle,
    pub json: bool,
}

fn data_dir() -> anyhow::Result<PathBuf> {
    crate::paths::data_dir().ok_or_else(|| input_error("no data dir: set INCHARACTER_DATA_DIR"))
}

/// A session by id (in the data dir or among the bundled samples), folder, or journal path.
fn session_dir(id: &str) -> anyhow::Result<PathBuf> {
    crate::tui::find_session(&data_dir()?, id).map_err(input_error)
}

fn load_events(dir: &Path) -> anyhow::Result<Vec<Event>> {
    runner::load_events(dir).map_err(input_error)
}

fn plan_from(catalog: &Catalog, config: &llm::config::Config, a: &RunArgs) -> anyhow::Result<RunPlan> {
    let characters = match a.characters.as_deref() {
        None => return Err(input_error("--characters is required (ids, or `all`)")),
        Some("all") => catalog.characters.iter().map(|e| e.value.id.clone()).collect(),
        Some(list) => list
            .split(',')
            .map(|n| {
                catalog
                    .character(n)
                    .map(|c| c.id.clone())
                    .ok_or_else(|| input_error(format!("unknown character \"{}\"", safe(n))))
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
    };
    let scales = a
        .scales
        .as_deref()
        .ok_or_else(|| input_error("--scales is required, e.g. BFI,16Personalities"))?
        .split(',')
        .map(|n| {
            catalog
                .scale(n)
                .map(|s| s.id.clone())
                .ok_or_else(|| input_error(format!("unknown scale \"{}\"", safe(n))))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let methods = a
        .methods
        .as_deref()
        .unwrap_or("er-batch")
        .split(',')
        .map(|m| {
            Method::parse(m).ok_or_else(|| {
                input_error(format!(
                    "unknown method \"{}\" (er-batch, er-all, oc, d-oc, sr, sr-cot)",
                    safe(m)
                ))
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(RunPlan {
        characters,
        scales,
        methods,
        repeats: a.repeats,
        rpa: provider_for(config, &a.rpa, Role::Rpa)?,
        judge: provider_for(config, &a.judge, Role::Judge)?,
        style: a.style,
        seed: a.seed,
        max_attempts: crate::method::judge::DEFAULT_ATTEMPTS,
        items_per_call: crate::method::convert::MAX_ITEMS_PER_CALL as u32,
    })
}

/// The provider named on the command line (which must exist), or the config's provider for `role`.
pub(super) fn provider_for(
    config: &crate::llm::config::Config,
    explicit: &Option<String>,
    role: Role,
) -> anyhow::Result<String> {
    match explicit {
        Some(p) if config.provider(p).is_some() => Ok(p.clone()),
        Some(p) => Err(input_error(format!(
            "unknown provider \"{}\" (`incharacter providers` lists them)",
            safe(p)
        ))),
        None => config
            .roles
            .get(&role)
            .cloned()
            .ok_or_else(|| input_error(format!("no provider for role {}", role.name()))),
    }
}

pub fn run(args: RunArgs, catalog: Catalog, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let config = super::llm_cmds::load_config()?;
    let data = data_dir()?;
    let start = match &args.resume {
        Some(id) => Start::Resume { id: id.clone() },
        None => Start::New {
            plan: plan_from(&catalog, &config, &args)?,
            name: args.name.clone(),
        },
    };
    let catalog = Arc::new(catalog);
    let prepared = runner::prepare(catalog.clone(), &config, &data, start, args.concurrency).map_err(input_error)?;
    for note in &prepared.notes {
        eprintln!("note: {note}");
    }
    let plan = &prepared.plan;
    eprintln!(
        "session {}: {} character(s) × {} scale(s) × {} method(s) × {} repeat(s)",
        prepared.id,
        plan.characters.len(),
        plan.scales.len(),
        plan.methods.len(),
        plan.repeats
    );
    let (id, dir) = (prepared.id.clone(), prepared.dir.clone());
    let progress = Progress::new(
        std::io::stderr().is_terminal(),
        prepared.total_items(),
        prepared.total_assessments(),
        prepared.done.answers.len(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let events = runtime
        .block_on(prepared.execute(None, |e| progress.record(e)))
        .map_err(|e| anyhow::anyhow!(e))?;
    progress.finish();
    let summary = results::summary(&events, &catalog);
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&json!({"session": id, "path": dir, "summary": summary}))?
        )?;
    } else {
        write!(out, "{}", summary_table(&summary))?;
        writeln!(out, "session {id}: {}", dir.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn summary_table(rows: &[results::SummaryRow]) -> String {
    let mut t = Table::new(&[
        "scale",
        "method",
        ">Acc_Dim",
        ">Acc_Full",
        ">MAE",
        ">Std_Item",
        ">Std_Dim",
        ">Std_Score",
        ">pairs",
        ">excl",
        ">refusals",
        ">failed",
    ]);
    for r in rows {
        t.row(vec![
            r.scale.clone(),
            r.method.clone(),
            num(r.acc_dim),
            num(r.acc_full),
            num(r.mae),
            num(r.std_item),
            num(r.std_dim),
            num(r.std_score),
            r.count.to_string(),
            r.excluded.to_string(),
            r.refusals.to_string(),
            r.failed_dimensions.to_string(),
        ]);
    }
    t.render()
}

pub fn sessions(json_output: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let list = crate::tui::list_sessions(&data_dir()?);
    if json_output {
        let rows: Vec<serde_json::Value> = list
            .iter()
            .map(|s| {
                json!({"id": s.id, "name": s.name, "created": s.created, "status": s.status,
                       "model": s.model, "sample": s.sample, "path": s.path})
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&["id", "name", "created", "status", "model", "where"]);
    for s in &list {
        t.row(vec![
            safe(&s.id),
            safe(s.name.as_deref().unwrap_or("")),
            s.created.clone(),
            safe(&s.status),
            safe(&s.model),
            if s.sample { "sample" } else { "data dir" }.into(),
        ]);
    }
    write!(out, "{}", t.render())?;
    Ok(ExitCode::SUCCESS)
}

pub fn export(
    catalog: &Catalog,
    id: &str,
    format: &str,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let events = load_events(&session_dir(id)?)?;
    if format == "json" {
        return write_export(
            &serde_json::to_string_pretty(&results::export_any(&events, catalog))?,
            output,
            out,
        );
    }
    if crate::engine::rolebench::plan_of(&events).is_some() {
        return export_rolebench(id, format, &events, output, out);
    }
    let observers = crate::engine::observe::subjects(&events, catalog);
    let text = match (format, observers) {
        ("csv", Some((_, subjects))) => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(["subject", "observer", "context", "trait", "score", "source"])?;
            for row in crate::observer::report::csv_rows(&subjects) {
                w.write_record(&row)?;
            }
            String::from_utf8(w.into_inner()?)?
        }
        ("md", Some((plan, subjects))) => {
            let scale = catalog
                .scale(crate::observer::SCALE)
                .ok_or_else(|| input_error("the IPIP-50 scale is missing"))?;
            let stats = crate::observer::report::statistics(&subjects, scale, plan.seed);
            format!(
                "# Session {id}\n\n```text\n{}```\n",
                crate::observer::report::tables(&subjects, &stats)
            )
        }
        (_, observers) => return export_interviews(catalog, id, format, &events, observers.is_some(), output, out),
    };
    write_export(&text, output, out)
}

fn export_rolebench(
    id: &str,
    format: &str,
    events: &[Event],
    output: Option<&Path>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    use crate::engine::rolebench;
    let (_, items) = rolebench::items(events).ok_or_else(|| input_error("no plan in the journal"))?;
    let text = match format {
        "csv" => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record([
                "line",
                "role",
                "type",
                "rouge_l_p",
                "rouge_l_r",
                "rouge_l_f",
                "judge_score",
            ])?;
            for i in &items {
                let score = match &i.judge {
                    Some(rolebench::Step::Judged { score: Some(s), .. }) => s.to_string(),
                    _ => String::new(),
                };
                let rouge = |f: fn(&crate::domain::rouge::RougeL) -> f64| {
                    i.best.map_or(String::new(), |(_, r)| f(&r).to_string())
                };
                w.write_record([
                    i.line.to_string(),
                    i.role.clone(),
                    i.types.join(","),
                    rouge(|r| r.p),
                    rouge(|r| r.r),
                    rouge(|r| r.f),
                    score,
                ])?;
            }
            String::from_utf8(w.into_inner()?)?
        }
        "md" => format!(
            "# Session {id} (RoleBench)\n\n```text\n{}```\n",
            super::rolebench_cmds::tables(&rolebench::totals(&items))
        ),
        other => {
            return Err(input_error(format!(
                "unknown format \"{}\" (json, csv, md)",
                safe(other)
            )));
        }
    };
    write_export(&text, output, out)
}

fn write_export(text: &str, output: Option<&Path>, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match output {
        Some(path) => {
            std::fs::write(path, text)?;
            writeln!(out, "wrote {}", path.display())?;
        }
        None => write!(out, "{text}")?,
    }
    Ok(ExitCode::SUCCESS)
}

fn export_interviews(
    catalog: &Catalog,
    id: &str,
    format: &str,
    events: &[Event],
    observers: bool,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    if observers {
        return Err(input_error(format!(
            "unknown format \"{}\" (json, csv, md)",
            safe(format)
        )));
    }
    let text = match format {
        "csv" => results::csv(events, catalog),
        "md" => {
            let mut md = Vec::new();
            report(catalog, &[id.to_string()], "md", &mut md)?;
            format!("# Session {id}\n\n{}", String::from_utf8_lossy(&md))
        }
        other => {
            return Err(input_error(format!(
                "unknown format \"{}\" (json, csv, md)",
                safe(other)
            )));
        }
    };
    write_export(&text, output, out)
}

/// Summary tables of one or more sessions, recomputed from their journals, side by side.
pub fn report(catalog: &Catalog, ids: &[String], format: &str, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if !matches!(format, "md" | "json") {
        return Err(input_error(format!("unknown format \"{}\" (md, json)", safe(format))));
    }
    let mut sessions = Vec::new();
    let mut observer_sessions = Vec::new();
    let mut rolebench_sessions = Vec::new();
    for id in ids {
        let events = load_events(&session_dir(id)?)?;
        if let Some((_, items)) = crate::engine::rolebench::items(&events) {
            rolebench_sessions.push((id.clone(), crate::engine::rolebench::totals(&items)));
            continue;
        }
        if let Some((plan, subjects)) = crate::engine::observe::subjects(&events, catalog) {
            let scale = catalog
                .scale(crate::observer::SCALE)
                .ok_or_else(|| input_error("the IPIP-50 scale is missing"))?;
            let stats = crate::observer::report::statistics(&subjects, scale, plan.seed);
            observer_sessions.push((id.clone(), subjects, stats));
            continue;
        }
        let providers = events.iter().find_map(|e| match e {
            Event::RunStarted { providers, .. } => Some(providers.clone()),
            _ => None,
        });
        let label = |role: &str| {
            providers
                .as_ref()
                .and_then(|p| p.get(role))
                .map_or("?".to_string(), |m| m.model.clone())
        };
        sessions.push((
            id.clone(),
            label("rpa"),
            label("judge"),
            results::summary(&events, catalog),
        ));
    }
    match format {
        "json" => {
            let list: Vec<_> = sessions
                .iter()
                .map(|(id, rpa, judge, summary)| json!({"session": id, "rpa": rpa, "judge": judge, "summary": summary}))
                .chain(
                    observer_sessions
                        .iter()
                        .map(|(id, _, stats)| json!({"session": id, "kind": "observers", "statistics": stats})),
                )
                .chain(
                    rolebench_sessions
                        .iter()
                        .map(|(id, totals)| json!({"session": id, "kind": "rolebench", "summary": totals})),
                )
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
        }
        _ => {
            for (id, totals) in &rolebench_sessions {
                writeln!(out, "## {id} (RoleBench)\n\n```text")?;
                write!(out, "{}", super::rolebench_cmds::tables(totals))?;
                writeln!(out, "```\n")?;
            }
            for (id, subjects, stats) in &observer_sessions {
                writeln!(out, "## {id} (observers)\n\n```text")?;
                write!(out, "{}", crate::observer::report::tables(subjects, stats))?;
                writeln!(out, "```\n")?;
            }
            if sessions.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            writeln!(
                out,
                "| session | rpa | judge | scale | method | Acc_Dim | Acc_Full | MAE | Std_Item | Std_Dim | Std_Score | refusals | failed |"
            )?;
            writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
            for (id, rpa, judge, summary) in &sessions {
                for r in summary {
                    writeln!(
                        out,
                        "| {id} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                        safe(rpa),
                        safe(judge),
                        r.scale,
                        r.method,
                        num(r.acc_dim),
                        num(r.acc_full),
                        num(r.mae),
                        num(r.std_item),
                        num(r.std_dim),
                        num(r.std_score),
                        r.refusals,
                        r.failed_dimensions
                    )?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Run progress on stderr: indicatif bars on a terminal, a plain line every 20 answers otherwise.
struct Progress {
    bars: Option<(indicatif::MultiProgress, indicatif::ProgressBar, indicatif::ProgressBar)>,
    counts: std::sync::Mutex<(usize, usize, usize)>,
    total_items: usize,
}

impl Progress {
    fn new(live: bool, total_items: usize, total_assessments: usize, answered: usize) -> Progress {
        let bars = live.then(|| {
            let multi = indicatif::MultiProgress::new();
            let style = indicatif::ProgressStyle::with_template(
                "{prefix:>12} [{bar:32.cyan/blue}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
            )
            .expect("a valid template")
            .progress_chars("=> ");
            let items = multi.add(indicatif::ProgressBar::new(total_items as u64).with_style(style.clone()));
            items.set_prefix("interviews");
            items.set_position(answered as u64);
            let dims = multi.add(indicatif::ProgressBar::new(total_assessments as u64).with_style(style));
            dims.set_prefix("assessments");
            (multi, items, dims)
        });
        Progress {
            bars,
            counts: std::sync::Mutex::new((answered, 0, 0)),
            total_items,
        }
    }

    fn say(&self, line: String) {
        match &self.bars {
            Some((multi, ..)) => {
                let _ = multi.println(line);
            }
            None => eprintln!("{line}"),
        }
    }

    fn record(&self, event: &Event) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let (answered, assessed, failed) = &mut *counts;
        match event {
            Event::ItemAnswered { .. } => *answered += 1,
            Event::ItemFailed {
                character,
                scale,
                item_id,
                error,
                ..
            } => {
                *failed += 1;
                self.say(format!("item failed: {character} {scale} {item_id}: {}", safe(error)));
            }
            Event::DimensionAssessed(a) => {
                *assessed += 1;
                if let Some(f) = &a.failure {
                    self.say(format!(
                        "not assessed: {} {} {} r{} {}: {}",
                        a.character,
                        a.scale,
                        a.method.name(),
                        a.repeat,
                        a.dimension,
                        safe(f)
                    ));
                }
            }
            _ => {}
        }
        match &self.bars {
            Some((_, items, dims)) => {
                items.set_position((*answered + *failed) as u64);
                items.set_message(if *failed > 0 {
                    format!("{failed} failed")
                } else {
                    String::new()
                });
                dims.set_position(*assessed as u64);
            }
            None if !matches!(event, Event::ItemAnswered { .. }) || *answered % 20 == 0 => eprintln!(
                "answered {answered}/{} items, {failed} failed; {assessed} dimension assessments",
                self.total_items
            ),
            None => {}
        }
    }

    fn finish(&self) {
        if let Some((_, items, dims)) = &self.bars {
            items.finish();
            dims.finish();
        }
    }
}
