//! `incharacter observe`: observer runs, headless.

use std::io::Write;
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use super::drive::{self, Headless, Progress};
use super::progress::Counter;
use super::{Ctx, input_error};
use crate::catalog::Catalog;
use crate::llm::Role;
use crate::observer::{Context, Draw, ObservePlan, SCALE, SelfReportMode, Step, draw, report};
use crate::session::{Run, Start};
use crate::study::observe;
use crate::study::{Event, Observers};

#[derive(Debug, clap::Args)]
pub struct ObserveArgs {
    /// A character id (or several, comma-separated), or `synthetic`
    #[arg(long)]
    pub subject: Option<String>,
    /// Latent levels 1–6 of a synthetic subject as O,C,E,A,N [default: drawn from the seed]
    #[arg(long)]
    pub latent: Option<String>,
    /// How many synthetic subjects [default: 1]
    #[arg(long)]
    pub subjects: Option<usize>,
    /// Observers per subject, spread over the contexts [default: 6]
    #[arg(long)]
    pub observers: Option<usize>,
    /// Relationship contexts: `family,friend,workplace` (--observers spread over them) or counts
    /// per context, `family:3,workplace:1`
    #[arg(long, default_value = "family,friend,workplace")]
    pub contexts: String,
    /// Scenarios (dialogues) per observer
    #[arg(long, default_value_t = 3)]
    pub scenarios: usize,
    /// Turn cap per dialogue
    #[arg(long, default_value_t = 10)]
    pub turns: usize,
    /// Provider for every role of the run (else the [roles] of config.toml)
    #[arg(long)]
    pub provider: Option<String>,
    #[arg(long)]
    pub subject_provider: Option<String>,
    #[arg(long)]
    pub observer_provider: Option<String>,
    /// Sampling temperature of the simulation, 0 to 2 (reports use 0)
    #[arg(long, default_value_t = 1.0, value_parser = super::temperature)]
    pub temperature: f32,
    /// The subject's self-report: batched (one request) or items (one per statement)
    #[arg(long, default_value = "batched")]
    pub self_report: String,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long)]
    pub name: Option<String>,
    /// Finish an interrupted observer session (with its own plan and providers: what would change
    /// them is refused)
    #[arg(long, conflicts_with_all = [
        "subject", "latent", "subjects", "observers", "contexts", "scenarios", "turns", "provider",
        "subject_provider", "observer_provider", "temperature", "self_report", "seed", "name",
    ])]
    pub resume: Option<String>,
    #[arg(long, value_parser = super::concurrency)]
    pub concurrency: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

/// `n` observers spread over the contexts as evenly as possible, earlier contexts first.
pub fn spread(n: usize, contexts: &[Context]) -> Vec<(Context, usize)> {
    let k = contexts.len().max(1);
    contexts
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, n / k + usize::from(i < n % k)))
        .filter(|(_, m)| *m > 0)
        .collect()
}

/// The largest observer session `observe` plans: sizes past them are typing slips, and would fill
/// memory (every subject's observers and dialogues are drawn up front) or send schemas no server
/// takes. The paper's design is 6 observers, 3 scenarios and 10 turns.
pub const MAX_SUBJECTS: usize = 10_000;
pub const MAX_OBSERVERS: usize = 64;
pub const MAX_SCENARIOS: usize = 32;
pub const MAX_TURNS: usize = 100;
/// Subjects × observers: the plan that lists them is one journal record.
pub const MAX_OBSERVERS_IN_ALL: usize = 50_000;

/// `value` of `flag` within `1..=max` (`min` its least).
fn bounded(flag: &str, value: usize, min: usize, max: usize) -> anyhow::Result<usize> {
    if (min..=max).contains(&value) {
        return Ok(value);
    }
    Err(input_error(format!("{flag} {value}: from {min} to {max}")))
}

fn plan(catalog: &Catalog, config: &crate::config::Config, a: &ObserveArgs) -> anyhow::Result<ObservePlan> {
    let subject = a
        .subject
        .as_deref()
        .ok_or_else(|| input_error("--subject is required: a character id, or `synthetic`"))?;
    let latent = match &a.latent {
        None => None,
        Some(text) => {
            let levels: Vec<u8> = text
                .split(',')
                .map(|p| p.trim().parse::<u8>().ok().filter(|l| (1..=6).contains(l)))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| input_error(format!("--latent {}: five levels 1–6 as O,C,E,A,N", text)))?;
            Some(
                <[u8; 5]>::try_from(levels)
                    .map_err(|_| input_error(format!("--latent {}: five levels 1–6 as O,C,E,A,N", text)))?,
            )
        }
    };
    let (characters, synthetic) = if subject == "synthetic" {
        (
            Vec::new(),
            bounded("--subjects", a.subjects.unwrap_or(1), 1, MAX_SUBJECTS)?,
        )
    } else {
        if latent.is_some() {
            return Err(input_error("--latent is for synthetic subjects"));
        }
        if a.subjects.is_some() {
            return Err(input_error(
                "--subjects is for synthetic subjects: characters are named in --subject, comma-separated",
            ));
        }
        let ids = super::lookup::ids("--subject", subject, |n| super::lookup::character_id(catalog, n))?;
        (ids, 0)
    };
    // "family,friend" spreads --observers over them; "family:3,workplace:1" fixes the counts.
    let mut contexts = Vec::new();
    let mut counts = Vec::new();
    for part in a.contexts.split(',') {
        let (name, count) =
            match part.split_once(':') {
                Some((n, c)) => (
                    n,
                    Some(c.trim().parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        input_error(format!(
                            "--contexts {}: a count after ':' must be a number of at least 1 (a context without observers is left out)",
                            part
                        ))
                    })?),
                ),
                None => (part, None),
            };
        let context = Context::parse(name)
            .ok_or_else(|| input_error(format!("unknown context \"{}\" (family, friend, workplace)", name)))?;
        if contexts.contains(&context) {
            return Err(input_error(format!(
                "--contexts {}: {} is named twice",
                a.contexts,
                context.name()
            )));
        }
        contexts.push(context);
        counts.push((context, count));
    }
    if counts.iter().any(|(_, c)| c.is_some()) && counts.iter().any(|(_, c)| c.is_none()) {
        return Err(input_error(format!(
            "--contexts {}: give every context a count (family:3,friend:1) or none",
            a.contexts
        )));
    }
    let observers: Vec<(Context, usize)> = if counts.iter().any(|(_, c)| c.is_some()) {
        let counted: Vec<(Context, usize)> = counts
            .into_iter()
            .map(|(c, n)| (c, n.unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let total: usize = counted.iter().map(|(_, n)| n).sum();
        if let Some(n) = a.observers.filter(|n| *n != total) {
            return Err(input_error(format!(
                "--observers {n} and --contexts {} ({total} observers) say two things: give one of them",
                a.contexts
            )));
        }
        counted
    } else {
        spread(a.observers.unwrap_or(6), &contexts)
    };
    if observers.is_empty() || a.scenarios == 0 || a.turns < 2 {
        return Err(input_error(
            "--observers and --scenarios must be at least 1, --turns at least 2",
        ));
    }
    let per_subject = bounded("--observers", observers.iter().map(|(_, n)| n).sum(), 1, MAX_OBSERVERS)?;
    // The plan, every subject's observers in it, is the session's first record.
    let subjects = characters.len().max(synthetic);
    if subjects * per_subject > MAX_OBSERVERS_IN_ALL {
        return Err(input_error(format!(
            "{subjects} subject(s) × {per_subject} observer(s) is more than the {MAX_OBSERVERS_IN_ALL} observers a session holds: \
             split it into sessions"
        )));
    }
    bounded("--scenarios", a.scenarios, 1, MAX_SCENARIOS)?;
    bounded("--turns", a.turns, 2, MAX_TURNS)?;
    let self_report = match a.self_report.as_str() {
        "batched" => SelfReportMode::Batched,
        "items" => SelfReportMode::Items,
        other => return Err(input_error(format!("--self-report {}: batched or items", other))),
    };
    let provider = |explicit: &Option<String>, role: Role| -> anyhow::Result<String> {
        match explicit.as_ref().or(a.provider.as_ref()) {
            Some(p) if config.provider(p).is_some() => Ok(p.clone()),
            Some(p) => Err(input_error(format!("unknown provider \"{}\"", p))),
            None => config
                .roles
                .get(&role)
                .cloned()
                .ok_or_else(|| input_error(format!("no provider for role {}", role.name()))),
        }
    };
    Ok(ObservePlan {
        subjects: draw(&Draw {
            characters: &characters,
            synthetic,
            latent,
            observers: &observers,
            seed: a.seed,
        }),
        scenarios: a.scenarios,
        turn_cap: a.turns,
        temperature: a.temperature,
        subject_provider: provider(&a.subject_provider, Role::Rpa)?,
        observer_provider: provider(&a.observer_provider, Role::Observer)?,
        self_report,
        seed: a.seed,
        max_attempts: crate::method::judge::DEFAULT_ATTEMPTS,
    })
}

pub fn observe(ctx: &Ctx, args: ObserveArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let catalog = ctx.catalog()?;
    if catalog.scale(SCALE).is_none() {
        return Err(input_error("the IPIP-50 scale is missing from the catalog"));
    }
    let start = match &args.resume {
        Some(id) => Start::Resume { id: id.clone() },
        None => Start::New {
            plan: plan(&catalog, ctx.config()?, &args)?,
            name: args.name.clone(),
        },
    };
    let options = drive::Options {
        concurrency: args.concurrency,
        json: args.json,
        ..Default::default()
    };
    drive::drive::<Observers>(ctx, start, options, out)
}

/// Turns, reports, replies re-asked and failures so far.
struct Counts {
    line: Counter,
    turns: usize,
    reports: usize,
    /// Calls usable only after a re-ask, each once (as the summary counts them).
    reasked: std::collections::BTreeSet<(String, Option<String>, String)>,
    failures: usize,
}

impl Progress for Counts {
    fn record(&mut self, e: &Event) {
        let Event::Observed(step) = e else {
            return;
        };
        match step {
            Step::Turn { .. } => self.turns += 1,
            Step::Report { .. } | Step::SelfReport { .. } => self.reports += 1,
            Step::Reasked {
                subject,
                observer,
                purpose,
                ..
            } => {
                self.reasked
                    .insert((subject.clone(), observer.clone(), purpose.clone()));
            }
            Step::Failed { .. } => {
                self.failures += 1;
                if let Some(note) = step.note() {
                    self.line.say(note);
                }
            }
            _ => {}
        }
        let counts = format!(
            "{} turns, {} reports, {} re-asked, {} failures",
            self.turns,
            self.reports,
            self.reasked.len(),
            self.failures
        );
        self.line.show(counts, !matches!(step, Step::Turn { .. }));
    }

    fn finish(&mut self) {
        self.line.finish();
    }
}

impl Headless for Observers {
    fn intro(run: &Run<Self>, _: &Catalog) -> String {
        let observers: usize = run.plan.subjects.iter().map(|s| s.observers.len()).sum();
        format!(
            "{} subject(s), {observers} observer(s), {} scenario(s) each",
            run.plan.subjects.len(),
            run.plan.scenarios
        )
    }

    fn progress(_: &Run<Self>, _: &Catalog, live: bool) -> Box<dyn Progress> {
        Box::new(Counts {
            line: Counter::new(live, "observers"),
            turns: 0,
            reports: 0,
            reasked: Default::default(),
            failures: 0,
        })
    }

    fn summary(events: &[Event], catalog: &Catalog) -> anyhow::Result<(String, Map<String, Value>)> {
        let (plan, subjects) =
            observe::subjects(events, catalog).ok_or_else(|| anyhow::anyhow!("no plan in the journal"))?;
        let scale = catalog
            .scale(SCALE)
            .ok_or_else(|| input_error("the IPIP-50 scale is missing from the catalog"))?;
        let stats = report::statistics(&subjects, scale, plan.seed);
        let summary: Vec<_> = subjects
            .iter()
            .map(|s| {
                json!({"id": s.id, "kind": s.kind, "latent": s.latent, "self": s.self_report.as_ref().map(|r| &r.1),
                       "aggregate": s.aggregate, "observers": s.observers.iter().filter(|o| o.report.is_some()).count()})
            })
            .collect();
        let mut table = report::tables(&subjects, &stats);
        let (notes, what) = questionnaire_notes(events);
        table.push_str(&notes);
        let mut fields: Map<String, Value> = [
            ("subjects".to_string(), json!(summary)),
            ("statistics".to_string(), json!(stats)),
        ]
        .into_iter()
        .collect();
        fields.extend(what);
        Ok((table, fields))
    }
}

/// What an observer session's tables alone would not say, as lines below them and as JSON fields
/// (`left_out`, `failed`, `reasked`): items left out (their traits scored from the rest), the
/// questionnaires missing for a failure and why, and the replies used only after a re-ask.
pub(super) fn questionnaire_notes(events: &[Event]) -> (String, Map<String, Value>) {
    let mut text = String::new();
    let left_out = observe::left_out(events);
    for l in &left_out {
        let items: Vec<String> = l.items.iter().map(u32::to_string).collect();
        text.push_str(&format!(
            "left out of {}: item(s) {} (no usable answer; its traits scored from the rest)\n",
            l.whose(),
            items.join(", ")
        ));
    }
    let failed = observe::failed(events);
    for f in &failed {
        let whose = match &f.observer {
            Some(o) => format!("{}'s report on {}", o, f.subject),
            None => format!("{}'s self-report", f.subject),
        };
        text.push_str(&format!(
            "failed: {whose} ({}): {}\n",
            f.what,
            crate::text::terminal_safe(&f.error)
        ));
    }
    let reasked = observe::reasked(events);
    if reasked > 0 {
        text.push_str(&format!(
            "re-asked: {reasked} {} not be used at first and {} asked again until one could (every attempt is in the journal)\n",
            if reasked == 1 { "reply could" } else { "replies could" },
            if reasked == 1 { "was" } else { "were" }
        ));
    }
    let fields = [
        ("left_out".to_string(), json!(left_out)),
        ("failed".to_string(), json!(failed)),
        ("reasked".to_string(), json!(reasked)),
    ];
    (text, fields.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observers_spread_evenly_over_contexts() {
        let all = Context::ALL;
        assert_eq!(
            spread(6, &all),
            [(Context::Family, 2), (Context::Friend, 2), (Context::Workplace, 2)]
        );
        assert_eq!(
            spread(4, &all),
            [(Context::Family, 2), (Context::Friend, 1), (Context::Workplace, 1)]
        );
        assert_eq!(spread(1, &all), [(Context::Family, 1)]);
    }
}
