//! The one headless driver of a study (`run`, `observe`, `rolebench`): open or resume the session,
//! say what it will do, run it with progress on stderr, print the summary (a table, or JSON with
//! `--json`), and exit non-zero when anything failed. What differs per kind of study is
//! [`Headless`]: the intro line, the progress and the summary.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{Advised, Ctx};
use crate::catalog::Catalog;
use crate::config::Config;

use crate::session::batch::{BatchMode, Import};
use crate::session::resume::{self, Resume};
use crate::session::run::Ended;
use crate::session::{Run, SessionError, Start};
use crate::study::{Event, Failures, Interviews, Kind, Observers, Rolebench, Study};

/// Progress on stderr, fed every journaled record.
pub(super) trait Progress: Send {
    fn record(&mut self, event: &Event);
    /// The providers a rate limit now holds below their maximum, e.g. `fake 4/32 (rate limited)`
    /// (empty when none); given when it changes.
    fn held(&mut self, _providers: &str) {}
    fn finish(&mut self) {}
    /// Says a line (how a batch is doing) without breaking the progress display.
    fn sayer(&self) -> Arc<dyn Fn(String) + Send + Sync> {
        Arc::new(|line| crate::note!("{line}"))
    }
}

/// How a study shows itself headless.
pub(super) trait Headless: Study {
    /// What the run will do, after "session <id>: ".
    fn intro(run: &Run<Self>, catalog: &Catalog) -> String;
    /// The progress of a run (`live`: stderr is a terminal).
    fn progress(run: &Run<Self>, catalog: &Catalog, live: bool) -> Box<dyn Progress>;
    /// The summary: a table, and the fields `--json` prints beside `session` and `path`.
    fn summary(events: &[Event], catalog: &Catalog) -> anyhow::Result<(String, Map<String, Value>)>;
    /// What a new run of `plan` is estimated to cost (USD at the providers' prices), and what that
    /// is made of, when the kind of study estimates it.
    fn cost(_plan: &Self::Plan, _catalog: &Catalog, _config: &Config) -> Option<(f64, String)> {
        None
    }
}

/// `--max-cost USD` and `--yes`: the most a run may spend, and whether to start one estimated above it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CostArgs {
    /// Refuse to start a run estimated above USD (at the providers' prices; see `max_cost` in the
    /// config), and stop one cleanly, resumable, when what it spent reaches USD
    #[arg(long, value_name = "USD", value_parser = usd)]
    pub max_cost: Option<f64>,
    /// Start even when the estimate is above --max-cost (the run still stops at the cap)
    #[arg(long)]
    pub yes: bool,
}

pub(super) fn usd(text: &str) -> Result<f64, String> {
    match text.trim_start_matches('$').parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!("{text} is not an amount in USD > 0")),
    }
}

/// What the user can do about a session error, written here at the edge: `running` is the id of a
/// session whose run had begun (its journal keeps what was done), `None` while opening it.
pub(super) fn advise(error: SessionError, kind: Kind, running: Option<&str>) -> anyhow::Error {
    let advice = match (&error, running) {
        (SessionError::CostCap { .. }, Some(id)) => Some(format!(
            "the session is kept; to go on (the cap counts what each sitting spends): incharacter {} --resume {id} \
             --max-cost USD",
            kind.command()
        )),
        (e, Some(id)) if e.resumable() => Some(format!(
            "the session is kept; once that is fixed: incharacter {} --resume {id}",
            kind.command()
        )),
        (SessionError::Unwritable { source, .. }, None) if source.kind() != std::io::ErrorKind::InvalidInput => {
            Some("the data dir must be writable (INCHARACTER_DATA_DIR moves it); nothing was changed".into())
        }
        _ => None,
    };
    match advice {
        Some(advice) => anyhow::Error::new(Advised { error, advice }),
        None => anyhow::Error::new(error),
    }
}

/// [`advise`] for a sitting that failed: a `batch export` that could not write its file is done
/// again as one (its journal is as it was), not resumed.
fn advise_sitting(error: SessionError, kind: Kind, id: &str, exporting: Option<&std::path::Path>) -> anyhow::Error {
    match (&error, exporting) {
        (SessionError::Batch { .. }, Some(path)) => anyhow::Error::new(Advised {
            error,
            advice: format!(
                "the session is as it was; once that is fixed: incharacter batch export {id} -o {}",
                path.display()
            ),
        }),
        _ => advise(error, kind, Some(id)),
    }
}

/// Batch mode for a driven run: where its phases go, and results to import first.
pub(super) struct Batch {
    pub mode: BatchMode,
    pub import: Option<Import>,
}

impl Batch {
    /// The file a `batch export` writes.
    fn export_path(&self) -> Option<std::path::PathBuf> {
        match &self.mode {
            BatchMode::Files { output, .. } => output.clone(),
            BatchMode::Api => None,
        }
    }
}

/// How a driven run goes: its concurrency, batch mode and cost cap (from the command line; the config
/// fills in the rest), and whether it prints one JSON object at the end.
#[derive(Default)]
pub(super) struct Options {
    pub concurrency: Option<usize>,
    pub batch: Option<Batch>,
    pub cost: CostArgs,
    pub json: bool,
}

/// Runs a new study of kind `S`, or resumes a session. A session resumes as the kind of study it is,
/// whichever subcommand names it (as the workbench resumes it): `run --resume` of an observer session
/// goes on as `observe --resume` would, and says so.
pub(super) fn drive<S: Headless>(
    ctx: &Ctx,
    start: Start<S::Plan>,
    options: Options,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    match start {
        Start::Resume { id } => {
            let how = Resume::of(&ctx.store()?, &id)?;
            if how.kind != S::KIND {
                crate::note!(
                    "note: session {} is {}: it goes on as `{}` does",
                    id.to_string(),
                    how.what(),
                    how.command()
                );
            }
            resume(ctx, how, options, out)
        }
        start @ Start::New { .. } => go::<S>(ctx, start, options, out),
    }
}

/// Resumes a session as [`Resume`] says: as its kind of study, in the batch mode it last ran in
/// unless `options` names one (an open batch is polled, not submitted again; a batch files session
/// writes its next phase).
pub(super) fn resume(ctx: &Ctx, how: Resume, options: Options, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let options = Options {
        batch: options.batch.or(how.batch.map(|mode| Batch { mode, import: None })),
        ..options
    };
    let id = how.id;
    match how.kind {
        Kind::Interviews => go::<Interviews>(ctx, Start::Resume { id }, options, out),
        Kind::Observers => go::<Observers>(ctx, Start::Resume { id }, options, out),
        Kind::Rolebench => go::<Rolebench>(ctx, Start::Resume { id }, options, out),
    }
}

/// A new run's estimate against its cost cap: above it, nothing starts (unless `yes`).
fn estimate<S: Headless>(
    plan: &S::Plan,
    catalog: &Catalog,
    config: &Config,
    cap: f64,
    yes: bool,
) -> anyhow::Result<()> {
    let Some((estimate, what)) = S::cost(plan, catalog, config) else {
        return Ok(());
    };
    let shown = crate::text::usd(cap);
    // To the cent, but for an estimate below one (not "$0.00, above the cap of $0.003").
    let estimate_shown = if estimate >= 0.01 {
        format!("{estimate:.2}")
    } else {
        crate::text::usd(estimate)
    };
    if estimate > cap && !yes {
        return Err(super::input_error(format!(
            "the run is estimated at ${estimate_shown} ({what}), above the cap of ${shown}; nothing was \
             started (raise --max-cost, or pass --yes to start anyway: it still stops at the cap)"
        )));
    }
    crate::note!("estimate: ${estimate_shown} ({what}); the run stops if it spends ${shown}");
    Ok(())
}

fn go<S: Headless>(
    ctx: &Ctx,
    start: Start<S::Plan>,
    options: Options,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let Options {
        concurrency,
        batch,
        cost,
        json: json_output,
    } = options;
    let catalog = ctx.catalog()?;
    let config = ctx.config()?;
    let store = ctx.store()?;
    // A session that finished with every answer and score has nothing to resume: said, its summary
    // printed, and nothing appended to its journal (nor a batch file written, nor results imported
    // again). Read without taking the journal (a read-only disk is fine); a missing results.json is
    // written by the open below, which takes it.
    if let Start::Resume { id } = &start {
        let dir = store.own(id).map_err(|e| advise(e, S::KIND, None))?;
        let events = store.load(&dir).map_err(|e| advise(e, S::KIND, None))?;
        if crate::study::complete(&events) && crate::session::run::results_current::<S>(&dir, &events, &catalog) {
            let complete = SessionError::Complete {
                id: id.clone(),
                wrote: None,
            };
            let (exporting, importing) = (
                batch.as_ref().and_then(Batch::export_path).is_some(),
                batch.as_ref().is_some_and(|b| b.import.is_some()),
            );
            return nothing_to_resume::<S>(ctx, id, &complete, exporting, importing, json_output, out);
        }
    }
    let max_cost = cost.max_cost.or(config.max_cost);
    if let (Some(cap), Start::New { plan, .. }) = (max_cost, &start) {
        estimate::<S>(plan, &catalog, config, cap, cost.yes)?;
    }
    let exporting = batch.as_ref().and_then(Batch::export_path);
    let batched = batch.is_some();
    let importing = batch.as_ref().is_some_and(|b| b.import.is_some());
    let opened = match batch {
        Some(Batch { mode, import }) => Run::<S>::open_batch(catalog.clone(), config, &store, start, mode, import),
        None => Run::<S>::open(catalog.clone(), config, &store, start, concurrency),
    };
    // Found complete once its journal was taken (a resume elsewhere completed it meanwhile, or its
    // results.json was missing and is written now).
    if let Err(complete @ SessionError::Complete { id, .. }) = &opened {
        return nothing_to_resume::<S>(ctx, id, complete, exporting.is_some(), importing, json_output, out);
    }
    let run = opened.map_err(|e| advise(e, S::KIND, None))?;
    let mut run = run;
    if let Some(cap) = max_cost {
        run.cap_cost(cap);
    }
    for note in &run.notes {
        crate::note!("note: {note}");
    }
    for change in &run.changed {
        crate::note!("warning: {change}");
    }
    crate::note!("session {}: {}", run.id, S::intro(&run, &catalog));
    let (id, dir) = (run.id.clone(), run.dir.clone());
    let mut progress = S::progress(&run, &catalog, std::io::stderr().is_terminal());
    let say = progress.sayer();
    let limits = run.limits();
    let accounting = run.accounting();
    let mut held = String::new();
    let result = ctx.block_on(until_interrupted(run.execute_batch(
        |e| {
            progress.record(e);
            // What a server said of itself, on first contact: said once, above the progress.
            if let Event::Server(facts) = e {
                say(format!("server: {}", facts.summary()));
                for w in &facts.warnings {
                    say(format!("warning: {w}"));
                }
            }
            let now = limits
                .throttled()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            if now != held {
                progress.held(&now);
                held = now;
            }
        },
        &*say,
    )));
    progress.finish();
    // What this sitting sent (a resume counts only its own requests), on stderr with the notes; said
    // too when the run stopped early (at the cost cap, a provider gone), where it matters most.
    let used = accounting.snapshot();
    let say_used = || {
        for line in used.lines() {
            crate::note!("used: {line}");
        }
    };
    let result = match result {
        Ok(result) => result,
        Err(signal) => {
            say_used();
            if json_output {
                // Best effort: a closed pipe (ctrl-c ends `| jq` too) must not hide how to resume.
                let _ = stopped_json(
                    &id,
                    json!({"reason": "interrupted", "signal": signal_name(signal)}),
                    used.rows(),
                    out,
                );
            }
            return Ok(interrupted(ctx, S::KIND, &id, signal));
        }
    };
    let ended = match result {
        Ok(ended) => ended,
        Err(e) => {
            say_used();
            if json_output {
                let _ = stopped_json(&id, stopped(&e), used.rows(), out);
            }
            return Err(advise_sitting(e, S::KIND, &id, exporting.as_deref()));
        }
    };
    let events = match ended {
        Ended::Complete(events) => events,
        Ended::Waiting(requests) => {
            // What the sitting wrote for the user's engine, and what the results it imported cost.
            say_used();
            say_waiting(&id, &requests, used.rows(), json_output, out)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    summarize::<S>(&events, &catalog, &id, &dir, used.rows(), json_output, out)?;
    say_used();
    let over_cap = batched && said_over_cap(max_cost, accounting.cost());
    for line in crate::study::adaptation_lines(&events) {
        crate::note!("adapted: {line}");
    }
    let failures = S::failures(&events);
    if failures.any() {
        say_failures::<S>(ctx, &events, failures, &id);
        return Ok(ExitCode::FAILURE);
    }
    Ok(if over_cap { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// A sitting that wrote its next phase's requests for the user's engine: where, and what next.
fn say_waiting(
    id: &str,
    requests: &std::path::Path,
    usage: Vec<serde_json::Value>,
    json_output: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if json_output {
        writeln!(
            out,
            "{}",
            crate::text::json_pretty(&json!({"session": id, "requests": requests, "usage": usage}))?
        )?;
    } else {
        writeln!(out, "session {id}: the next requests are in {}", requests.display())?;
        writeln!(out, "{}", resume::next_step(id, requests))?;
    }
    Ok(())
}

/// The name of a signal [`until_interrupted`] reports.
fn signal_name(signal: u8) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        _ => "SIGTERM",
    }
}

/// Why a sitting stopped (`error`), for a script: the cost cap with what was spent and what comes
/// next, a provider gone or refusing, or another error, each with the message said on stderr.
fn stopped(error: &SessionError) -> serde_json::Value {
    let message = error.to_string();
    match error {
        SessionError::CostCap { spent, cap, next } => json!({
            "reason": "cost cap",
            "spent_usd": spent,
            "cap_usd": cap,
            "next_phase": next.map(|n| json!({"phase": n.phase, "requests": n.requests, "estimate_usd": n.estimate})),
            "message": message,
        }),
        SessionError::Unreachable { .. } => json!({"reason": "unreachable", "message": message}),
        SessionError::Refused { .. } => json!({"reason": "refused", "message": message}),
        SessionError::Batch { .. } => json!({"reason": "batch", "message": message}),
        _ => json!({"reason": "error", "message": message}),
    }
}

/// A sitting of session `id` that stopped before its end, as one JSON object on `out` (what `--json`
/// promises): why, and what the sitting used (the error goes to stderr as ever).
fn stopped_json(
    id: &str,
    stopped: serde_json::Value,
    usage: Vec<serde_json::Value>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "{}",
        crate::text::json_pretty(&json!({"session": id, "stopped": stopped, "usage": usage}))?
    )?;
    Ok(())
}

/// Whether a batch-mode sitting that `spent` ended above its cap, said if so: a batch is paid
/// whole, and the cap, held between phases, can be passed by the last one.
fn said_over_cap(cap: Option<f64>, spent: f64) -> bool {
    let Some(cap) = cap.filter(|cap| spent > *cap) else {
        return false;
    };
    crate::note!(
        "warning: this sitting spent ${}, above its cap of ${}: in batch mode the cap is held between phases, \
         and a phase once submitted is paid whole",
        crate::text::usd(spent),
        crate::text::usd(cap)
    );
    true
}

/// The closing lines of a run of session `id` that ended with `failures`: the commonest error and
/// whose request it was, how to go on, and what a read-only response cache does with unusable replies.
fn say_failures<S: Headless>(ctx: &Ctx, events: &[Event], failures: Failures, id: &str) {
    if let Some((error, n, role)) = crate::study::commonest_error(events) {
        // Which provider it came from, where the record says whose request it was.
        let providers = events.iter().find_map(Event::start).map(|s| s.providers);
        let from = role
            .and_then(|role| Some((role, providers?.get(role)?)))
            .map_or(String::new(), |(role, m)| format!(", {role} {m}"));
        crate::note!("most often ({n}×{from}): {error}");
    }
    let parent = S::plan_of(events).and_then(S::parent);
    crate::note!("{}", failed(failures, S::KIND, id, parent));
    // A batch session's kept results answer its resume before any cache: a judge's reply that came
    // back but could not be read answers it again. (Failed requests and empty replies are asked
    // again; only a failed assessment can be such a reply.)
    if S::KIND == crate::study::Kind::Interviews
        && failures.assessments > 0
        && events.iter().any(|e| matches!(e, Event::Batch(_)))
    {
        crate::note!(
            "a resume asks the failed requests again, but a judge's reply the batch returned that could not be read is kept and answers it the same: `incharacter assess {id}` judges the answers again"
        );
    }
    // A read-write cache forgets the replies of a failed judgment; a read-only one cannot.
    if ctx
        .config()
        .is_ok_and(|c| c.cache == crate::config::CacheMode::ReadOnly)
    {
        crate::note!(
            "the response cache is read-only: a reply in it that could not be used is read back by a resume as it came; with `cache = \"off\"` in the config a resume asks anew"
        );
    }
}

/// Says how to go on after `signal` stopped the run of session `id`, by the command that made it
/// (`assess` for a re-assessment): what was answered is journaled (every record is written whole as
/// it comes); the replies still coming are not waited for, and a resume asks them again. The exit
/// code is the shell's for that signal.
fn interrupted(ctx: &Ctx, kind: Kind, id: &str, signal: u8) -> ExitCode {
    let command = ctx
        .store()
        .ok()
        .and_then(|store| Resume::of(&store, id).ok())
        .map_or_else(
            || format!("incharacter {} --resume {id}", kind.command()),
            |r| r.command(),
        );
    crate::note!("interrupted: the session is kept; to go on: {command}");
    ExitCode::from(128 + signal)
}

/// `work`'s output, or the number of the signal (SIGINT 2, SIGTERM 15, SIGHUP 1: the terminal
/// closed) that came first: a headless run stopped by ctrl-c, a `kill` or a closed terminal says how
/// to go on (where it still can) instead of vanishing.
async fn until_interrupted<T>(work: impl std::future::Future<Output = T>) -> Result<T, u8> {
    // A handler that cannot be installed never fires (rather than firing at once).
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let on = |kind: tokio::signal::unix::SignalKind| async move {
        match tokio::signal::unix::signal(kind) {
            Ok(mut s) => s.recv().await,
            Err(_) => std::future::pending().await,
        }
    };
    // Under `nohup` a closed terminal is to be ignored, as it was before a handler would catch it.
    let hangup_heard = !crate::process::ignored(1);
    #[cfg(unix)]
    let (terminate, hangup) = (on(tokio::signal::unix::SignalKind::terminate()), async move {
        match hangup_heard {
            true => on(tokio::signal::unix::SignalKind::hangup()).await,
            false => std::future::pending().await,
        }
    });
    #[cfg(not(unix))]
    let (terminate, hangup) = (
        std::future::pending::<Option<()>>(),
        std::future::pending::<Option<()>>(),
    );
    tokio::select! {
        done = work => Ok(done),
        _ = interrupt => Err(2),
        _ = terminate => Err(15),
        _ = hangup => Err(1),
    }
}

/// What a resume of the complete session `id` says ([`SessionError::Complete`]): refused when it was
/// to export a batch file, else a note and the session's summary (exit 0).
fn nothing_to_resume<S: Headless>(
    ctx: &Ctx,
    id: &str,
    complete: &SessionError,
    exporting: bool,
    importing: bool,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    if exporting {
        let wrote = match complete {
            SessionError::Complete { wrote: Some(path), .. } => {
                format!(" ({} written, which was missing or out of date)", path.display())
            }
            _ => String::new(),
        };
        return Err(super::input_error(format!(
            "session {id} is complete: no request is left to export{wrote}"
        )));
    }
    match complete {
        SessionError::Complete { wrote: None, .. } if importing => crate::note!(
            "session {id} is complete: nothing of the results file is needed (nothing imported, nothing written)"
        ),
        _ => crate::note!("{complete}"),
    }
    let store = ctx.store()?;
    let dir = store.own(id).map_err(|e| advise(e, S::KIND, None))?;
    let events = store.load(&dir).map_err(|e| advise(e, S::KIND, None))?;
    summarize::<S>(&events, &*ctx.catalog()?, id, &dir, Vec::new(), json, out)?;
    Ok(ExitCode::SUCCESS)
}

/// A session's summary on stdout: its table, or with `json` one object (`session`, `path`, the
/// summary's fields, what this sitting used).
fn summarize<S: Headless>(
    events: &[Event],
    catalog: &Catalog,
    id: &str,
    dir: &std::path::Path,
    usage: Vec<Value>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let (table, fields) = S::summary(events, catalog)?;
    if json {
        let mut object = Map::new();
        object.insert("session".into(), json!(id));
        // JSON holds Unicode: a path that is not is written with its stray bytes replaced.
        object.insert("path".into(), json!(dir.to_string_lossy()));
        object.extend(fields);
        object.insert("usage".into(), Value::Array(usage));
        writeln!(out, "{}", crate::text::json_pretty(&Value::Object(object))?)?;
    } else {
        write!(out, "{table}")?;
        writeln!(out, "session {id}: {}", dir.display())?;
    }
    Ok(())
}

/// The closing line of a run with failures (exit 1). A re-assessment (`parent`) sends no interview
/// request: the items its parent has no answer to are the parent's to ask again.
fn failed(f: Failures, kind: Kind, id: &str, parent: Option<&str>) -> String {
    let again = match parent {
        Some(parent) if f.items > 0 => format!(
            "the parent session has no answer to the items: `incharacter run --resume {parent}` asks them, \
             then `incharacter assess --resume {id}` assesses them"
        ),
        Some(_) => format!("`incharacter assess --resume {id}` asks what has no answer again"),
        None => format!(
            "`incharacter {} --resume {id}` asks what has no answer again",
            kind.command()
        ),
    };
    format!("failed: {} (the journal says why; {again})", f.describe(kind))
}
