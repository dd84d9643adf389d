//! `run` (and `run --resume`), `sessions`, `export`: headless benchmark runs and their results.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use super::drive::{self, Headless, Progress};
use super::errors::each_once;
use super::lookup::{character_id, ids, load_session, provider_for};
use super::progress::{Bars, Phase};
use super::table::{Table, num};
use super::{Ctx, input_error};
use crate::catalog::Catalog;
use crate::llm::Role;
use crate::method::Method;
use crate::rpa::prompt::RpaStyle;
use crate::session::{Run, Start};
use crate::study::interview::{self, reassess, results};
use crate::study::{Event, Interviews, Kind, RunPlan};

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
    pub rpa_temperature: Option<f32>,
    pub max_answer_tokens: Option<u32>,
    pub judge_temperature: Option<f32>,
    /// `--prompts DIR`.
    pub prompts: Option<PathBuf>,
    pub expected_scores: bool,
    pub batch: super::batch_cmds::BatchArgs,
    pub cost: drive::CostArgs,
    pub json: bool,
}

fn plan_from(catalog: &Catalog, config: &crate::config::Config, a: &RunArgs) -> anyhow::Result<RunPlan> {
    let characters = match a.characters.as_deref() {
        None => return Err(input_error("--characters is required (ids, or `all`)")),
        Some("all") => catalog.characters.iter().map(|e| e.value.id.clone()).collect(),
        Some(list) => ids("--characters", list, |n| character_id(catalog, n))?,
    };
    let scales = ids(
        "--scales",
        a.scales
            .as_deref()
            .ok_or_else(|| input_error("--scales is required, e.g. BFI,16Personalities"))?,
        |n| {
            catalog
                .scale(n)
                .map(|s| s.id.clone())
                .ok_or_else(|| input_error(format!("unknown scale \"{n}\"")))
        },
    )?;
    let methods = parse_methods(a.methods.as_deref().unwrap_or("er-batch"))?;
    let mut plan = RunPlan::new(
        characters,
        scales,
        methods,
        &provider_for(config, &a.rpa, Role::Rpa)?,
        &provider_for(config, &a.judge, Role::Judge)?,
    );
    plan.repeats = a.repeats;
    plan.style = a.style;
    plan.seed = a.seed;
    plan.answer_sampling = interview::answer_sampling(config, a.rpa_temperature, a.max_answer_tokens);
    plan.judge_temperature = interview::judge_temperature(config, a.judge_temperature);
    plan.prompts = super::prompts_cmds::load_prompts(a.prompts.as_deref())?;
    plan.expected_scores = a.expected_scores;
    Ok(plan)
}

#[derive(Debug, clap::Args)]
pub struct AssessArgs {
    /// The session whose interviews to assess (id, folder or journal; samples by id too)
    #[arg(required_unless_present = "resume")]
    pub session: Option<String>,
    /// Methods, comma-separated [default: the parent's]; a method needs the parent to have asked its
    /// interviews (open questions for er-batch, er-all, oc, d-oc; sr; sr-cot)
    #[arg(long)]
    pub methods: Option<String>,
    /// Provider of the judge [default: the config's judge role]
    #[arg(long)]
    pub judge: Option<String>,
    /// Temperature of the judge's first attempt [default: the config's [sampling.judge], else 0]
    #[arg(long, value_parser = super::temperature)]
    pub judge_temperature: Option<f32>,
    /// A folder of prompt templates (any of `incharacter prompts export`'s files) used instead of the
    /// bundled ones [default: the bundled set]
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Score expert ratings and option conversions by the judge's expected option (as `run
    /// --expected-scores`) [default: the written option, whatever the parent did]
    #[arg(long)]
    pub expected_scores: bool,
    /// Requests in flight across providers, 1 or more [default: the config's max_concurrency]
    #[arg(long, value_parser = super::concurrency)]
    pub concurrency: Option<usize>,
    /// A name for the session [default: "<the session's name or id>, re-assessed by <judge>"]
    #[arg(long)]
    pub name: Option<String>,
    /// Finish an interrupted re-assessment instead of starting one
    #[arg(long, conflicts_with_all = ["session", "methods", "judge", "judge_temperature", "prompts", "expected_scores", "name", "batch", "batch_files"])]
    pub resume: Option<String>,
    #[command(flatten)]
    pub batch: super::batch_cmds::BatchArgs,
    #[command(flatten)]
    pub cost: drive::CostArgs,
    /// Print one JSON object at the end (the shape of `run --json`)
    #[arg(long)]
    pub json: bool,
}

/// `incharacter assess`: a new session that assesses a recorded session's interviews again, sending
/// only judge requests.
pub fn assess(ctx: &Ctx, args: AssessArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let start = match (&args.resume, &args.session) {
        (Some(id), _) => Start::Resume { id: id.clone() },
        (None, Some(parent)) => {
            let (dir, events) = load_session(ctx, parent)?;
            let id = reassess::parent_id(&dir, &events);
            let config = ctx.config()?;
            let change = reassess::Reassess {
                methods: args.methods.as_deref().map(parse_methods).transpose()?,
                judge: provider_for(config, &args.judge, Role::Judge)?,
                judge_temperature: interview::judge_temperature(config, args.judge_temperature),
                expected_scores: args.expected_scores,
            };
            let mut plan = reassess::plan(&id, &events, &change).map_err(|e| input_error(e.to_string()))?;
            let folder = super::prompts_cmds::load_prompts(args.prompts.as_deref())?;
            for note in reassess::with_prompts(&mut plan, folder) {
                crate::note!("note: {note}");
            }
            let name = (args.name.clone()).unwrap_or_else(|| reassess::default_name(&id, &events, &plan.judge));
            Start::New { plan, name: Some(name) }
        }
        (None, None) => return Err(input_error("name the session to re-assess, or --resume <ID>")),
    };
    drive::drive::<Interviews>(
        ctx,
        start,
        options(args.concurrency, &args.batch, &args.cost, args.json)?,
        out,
    )
}

fn options(
    concurrency: Option<usize>,
    batch: &super::batch_cmds::BatchArgs,
    cost: &drive::CostArgs,
    json: bool,
) -> anyhow::Result<drive::Options> {
    Ok(drive::Options {
        concurrency,
        batch: batch.batch()?,
        cost: cost.clone(),
        json,
    })
}

fn parse_methods(list: &str) -> anyhow::Result<Vec<Method>> {
    let given: Vec<&str> = list.split(',').collect();
    let methods = given
        .iter()
        .map(|m| {
            Method::parse(m).ok_or_else(|| {
                input_error(format!(
                    "unknown method \"{}\" (er-batch, er-all, oc, d-oc, sr, sr-cot)",
                    m
                ))
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    each_once("--methods", &given, methods, |m| m.name().to_string())
}

pub fn run(ctx: &Ctx, args: RunArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let start = match &args.resume {
        Some(id) => Start::Resume { id: id.clone() },
        None => Start::New {
            plan: plan_from(&*ctx.catalog()?, ctx.config()?, &args)?,
            name: args.name.clone(),
        },
    };
    drive::drive::<Interviews>(
        ctx,
        start,
        options(args.concurrency, &args.batch, &args.cost, args.json)?,
        out,
    )
}

impl Headless for Interviews {
    fn intro(run: &Run<Self>, _: &Catalog) -> String {
        let plan = &run.plan;
        if let Some(parent) = &plan.parent {
            return format!(
                "re-assessing the interviews of {parent} with {} ({} method(s); no role-play request)",
                plan.judge,
                plan.methods.len()
            );
        }
        format!(
            "{} character(s) × {} scale(s) × {} method(s) × {} repeat(s)",
            plan.characters.len(),
            plan.scales.len(),
            plan.methods.len(),
            plan.repeats
        )
    }

    fn progress(run: &Run<Self>, catalog: &Catalog, live: bool) -> Box<dyn Progress> {
        // What the journal holds is not made again: the bars start there.
        let done = &run.study.done;
        Box::new(Bars::new(
            live.then(indicatif::ProgressDrawTarget::stderr),
            run.accounting(),
            Phase::new(run.plan.total_items(catalog), done.answers.len()),
            Phase::new(run.plan.total_assessments(catalog), done.assessed.len()),
        ))
    }

    fn cost(plan: &RunPlan, catalog: &Catalog, config: &crate::config::Config) -> Option<(f64, String)> {
        let e = interview::estimate::estimate(plan, catalog);
        let unpriced: Vec<&str> = [plan.rpa.as_str(), plan.judge.as_str()]
            .into_iter()
            .filter(|name| {
                config
                    .provider(name)
                    .is_some_and(|p| p.price_in_per_mtok == 0.0 && p.price_out_per_mtok == 0.0)
            })
            .collect();
        let mut what = format!(
            "{} requests, ≈ {}k tokens: role-play {}k in, {}k out; judge {}k in, {}k out",
            e.requests,
            e.tokens().div_ceil(1000),
            e.rpa.prompt.div_ceil(1000),
            e.rpa.completion.div_ceil(1000),
            e.judge.prompt.div_ceil(1000),
            e.judge.completion.div_ceil(1000)
        );
        if !unpriced.is_empty() {
            what.push_str(&format!("; no prices configured for {}", unpriced.join(", ")));
        }
        Some((e.cost(plan, config), what))
    }

    fn summary(events: &[Event], catalog: &Catalog) -> anyhow::Result<(String, Map<String, Value>)> {
        let summary = results::summary(events, catalog);
        let table = summary_table(&summary);
        Ok((table, [("summary".to_string(), json!(summary))].into_iter().collect()))
    }
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
            r.failed_cell(),
        ]);
    }
    t.render()
}

pub fn sessions(ctx: &Ctx, json_output: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let (list, unreadable) = ctx.store()?.list_with_unreadable();
    for (path, why) in &unreadable {
        crate::note!(
            "warning: {} is not listed: {why}",
            crate::text::visible(&path.display().to_string())
        );
    }
    if json_output {
        let rows: Vec<serde_json::Value> = list
            .iter()
            .map(|s| {
                json!({"id": s.id, "name": s.name, "created": s.created, "status": s.status,
                       "model": s.model, "models": s.models, "sample": s.sample, "path": s.path.to_string_lossy()})
            })
            .collect();
        writeln!(out, "{}", crate::text::json_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&["id", "name", "created", "status", "model", "where"]);
    for s in &list {
        t.row(vec![
            s.id.to_string(),
            crate::text::fit(s.name.as_deref().unwrap_or(""), super::table::NAME_WIDTH),
            s.created.clone(),
            s.status.to_string(),
            s.model.to_string(),
            if s.sample { "sample" } else { "data dir" }.into(),
        ]);
    }
    write!(out, "{}", t.render())?;
    Ok(ExitCode::SUCCESS)
}

/// `export`: to `output` whole or not at all (see [`crate::files::write_atomic`]), or to stdout made
/// safe for a terminal. Every CSV cell is neutralised for spreadsheets ([`results::SafeCsv`]).
pub fn export(
    ctx: &Ctx,
    id: &str,
    format: Option<&str>,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let format = super::output_format(format, output, &["json", "csv", "md"], "json")?;
    let format = format.as_str();
    let catalog = &*ctx.catalog()?;
    let store = ctx.store()?;
    let dir = store.find(id)?;
    // Markdown is the report's, which says it.
    if format != "md" {
        let events = store.load(&dir)?;
        super::lookup::say_changed_scales(ctx, &dir, &events)?;
        let name = dir
            .file_name()
            .map_or_else(|| id.to_string(), |n| n.to_string_lossy().into_owned());
        super::lookup::say_unfinished(&name, &dir, &events);
    }
    if format == "json" {
        return write_export(
            &crate::text::json_pretty(&store.export(&dir, catalog)?)?,
            format,
            output,
            out,
        );
    }
    let events = store.load(&dir)?;
    if crate::study::kind_of(&events) == Some(Kind::Rolebench) {
        return export_rolebench(id, format, &events, output, out);
    }
    let observers = crate::study::observe::subjects(&events, catalog);
    let text = match (format, observers) {
        ("csv", Some((_, subjects))) => {
            let mut w = results::SafeCsv::new();
            w.record(["subject", "observer", "context", "trait", "score", "source"])?;
            for row in crate::observer::report::csv_rows(&subjects) {
                w.record(&row)?;
            }
            // A questionnaire that failed for good has no scores: a row says so (its score empty).
            let context = |subject: &str, observer: &str| {
                subjects
                    .iter()
                    .filter(|s| s.id == subject)
                    .flat_map(|s| &s.observers)
                    .find(|o| o.id == observer)
                    .map_or("", |o| o.context.name())
            };
            for f in crate::study::observe::failed(&events) {
                let observer = f.observer.as_deref().unwrap_or("");
                w.record([&f.subject, observer, context(&f.subject, observer), "", "", "failed"])?;
            }
            w.finish()?
        }
        ("md", Some((plan, subjects))) => {
            let scale = catalog
                .scale(crate::observer::SCALE)
                .ok_or_else(|| input_error("the IPIP-50 scale is missing"))?;
            let stats = crate::observer::report::statistics(&subjects, scale, plan.seed);
            format!(
                "# Session {id}\n\n```text\n{}{}```\n",
                crate::observer::report::tables(&subjects, &stats),
                super::observe_cmds::questionnaire_notes(&events).0
            )
        }
        (_, observers) => return export_interviews(ctx, id, format, &events, observers.is_some(), output, out),
    };
    write_export(&text, format, output, out)
}

fn export_rolebench(
    id: &str,
    format: &str,
    events: &[Event],
    output: Option<&Path>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    use crate::study::rolebench;
    let (_, items) = rolebench::items(events).ok_or_else(|| input_error("no plan in the journal"))?;
    let text = match format {
        "csv" => {
            let mut w = results::SafeCsv::new();
            w.record([
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
                w.record([
                    i.line.to_string(),
                    i.role.clone(),
                    i.types.join(","),
                    rouge(|r| r.p),
                    rouge(|r| r.r),
                    rouge(|r| r.f),
                    score,
                ])?;
            }
            w.finish()?
        }
        "md" => format!(
            "# Session {id} (RoleBench)\n\n```text\n{}```\n",
            super::rolebench_cmds::tables(&rolebench::totals(&items))
        ),
        other => {
            return Err(input_error(format!("unknown format \"{}\" (json, csv, md)", other)));
        }
    };
    write_export(&text, format, output, out)
}

/// Writes an export to `output` as it is, replacing the file whole or not at all (a link is refused,
/// exit 2; a full disk leaves the old file and exits 1, naming the path), or prints it through the
/// command's `text::Safe` stdout; JSON first gets escapes for what the gate would remove, so it
/// still means the same.
fn write_export(text: &str, format: &str, output: Option<&Path>, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    // `-o -` is standard output, as it is for other tools (it made a file named "-").
    match output.filter(|p| *p != Path::new("-")) {
        Some(path) => {
            crate::files::write_output(path, text.as_bytes(), &crate::session::store::kept())?;
            writeln!(out, "wrote {}", path.display())?;
        }
        None if format == "json" => write!(out, "{}", results::json_for_terminal(text))?,
        None => write!(out, "{text}")?,
    }
    Ok(ExitCode::SUCCESS)
}

fn export_interviews(
    ctx: &Ctx,
    id: &str,
    format: &str,
    events: &[Event],
    observers: bool,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    if observers {
        return Err(input_error(format!("unknown format \"{}\" (json, csv, md)", format)));
    }
    let text = match format {
        "csv" => results::csv(events, &*ctx.catalog()?)?,
        "md" => {
            let mut md = Vec::new();
            let bootstrap = crate::domain::resample::Bootstrap::default();
            super::report_cmds::report(ctx, &[id.to_string()], "md", None, bootstrap, &mut md)?;
            let details = crate::study::interview::markdown::details(&results::export(events, &*ctx.catalog()?));
            format!("# Session {id}\n\n{}\n{details}", String::from_utf8_lossy(&md))
        }
        other => {
            return Err(input_error(format!("unknown format \"{}\" (json, csv, md)", other)));
        }
    };
    write_export(&text, format, output, out)
}
