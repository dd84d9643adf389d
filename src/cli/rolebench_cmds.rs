//! `rolebench`: the agent answers RoleBench questions; Rouge-L against the references, and an optional
//! pairwise judge against a baseline's answers.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use super::drive::{self, Headless, Progress};
use super::lookup::provider_for;
use super::progress::Counter;
use super::table::Table;
use super::{Ctx, input_error};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::llm::Role;
use crate::method::rolebench::{load_baseline, load_questions};
use crate::rpa::prompt::RpaStyle;
use crate::session::{Run, Start};
use crate::study::Event;
use crate::study::rolebench::{self, Rolebench, RolebenchPlan, Step, Totals};

#[derive(Debug, clap::Args)]
pub struct RolebenchArgs {
    /// RoleBench instruction file (jsonl rows: role, question, generated references, type)
    #[arg(long, required_unless_present = "resume")]
    pub data: Option<PathBuf>,
    /// Roles to ask, comma-separated (exact names) [default: every role in the file]
    #[arg(long)]
    pub roles: Option<String>,
    /// Only questions of these types, comma-separated (e.g. script_based, script_agnostic)
    #[arg(long = "type")]
    pub types: Option<String>,
    /// A seeded sample of at most N questions (file order kept)
    #[arg(long)]
    pub limit: Option<usize>,
    /// Provider of the role-playing agent [default: the config's rpa role]
    #[arg(long)]
    pub rpa: Option<String>,
    /// Prompt style for roles with an imported character: description, chatharuhi or rolegpt
    #[arg(long, default_value = "description")]
    pub style: String,
    /// Provider of the pairwise judge (needs --baseline)
    #[arg(long, requires = "baseline")]
    pub judge: Option<String>,
    /// Baseline answers to compare with (same jsonl shape; the first reference is the answer)
    #[arg(long, requires = "judge")]
    pub baseline: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Most requests in flight [default: the config's max_concurrency]
    #[arg(long, value_parser = super::concurrency)]
    pub concurrency: Option<usize>,
    /// A name for the session (part of its id)
    #[arg(long)]
    pub name: Option<String>,
    /// Resume an interrupted RoleBench session by id
    #[arg(long, conflicts_with_all = ["data", "roles", "types", "limit", "rpa", "judge", "baseline"])]
    pub resume: Option<String>,
    /// Print {"session", "path", "summary"} as JSON
    #[arg(long)]
    pub json: bool,
}

fn list(s: &Option<String>) -> Vec<String> {
    s.iter()
        .flat_map(|s| s.split(','))
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

/// Reads the files and resolves the providers, then lets the engine choose the questions.
pub fn plan(catalog: &Catalog, config: &Config, a: &RolebenchArgs) -> anyhow::Result<(RolebenchPlan, Vec<String>)> {
    let data = a.data.as_ref().ok_or_else(|| input_error("--data is required"))?;
    let style = RpaStyle::parse(&a.style).ok_or_else(|| {
        input_error(format!(
            "style \"{}\" is not available (description, chatharuhi, rolegpt)",
            a.style
        ))
    })?;
    let questions = load_questions(data).map_err(|e| input_error(e.to_string()))?;
    let baseline = match &a.baseline {
        Some(path) => Some((
            path.display().to_string(),
            load_baseline(path).map_err(|e| input_error(e.to_string()))?,
        )),
        None => None,
    };
    let judge = a
        .judge
        .as_ref()
        .map(|j| provider_for(config, &Some(j.clone()), Role::Judge))
        .transpose()?;
    let data_name = data.display().to_string();
    let choice = rolebench::Choice {
        data: &data_name,
        roles: list(&a.roles),
        types: list(&a.types),
        limit: a.limit,
        seed: a.seed,
        rpa: provider_for(config, &a.rpa, Role::Rpa)?,
        style,
        judge: judge.zip(baseline.as_ref()).map(|(j, (file, b))| (j, file.as_str(), b)),
    };
    rolebench::plan(catalog, questions, choice).map_err(input_error)
}

pub fn run(ctx: &Ctx, args: RolebenchArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let start = match &args.resume {
        Some(id) => Start::Resume { id: id.clone() },
        None => {
            let (plan, notes) = plan(&*ctx.catalog()?, ctx.config()?, &args)?;
            for note in notes {
                crate::note!("note: {note}");
            }
            Start::New {
                plan,
                name: args.name.clone(),
            }
        }
    };
    let options = drive::Options {
        concurrency: args.concurrency,
        json: args.json,
        ..Default::default()
    };
    drive::drive::<Rolebench>(ctx, start, options, out)
}

/// Answered, judged and failed questions so far.
struct Counts {
    line: Counter,
    total: usize,
    answered: usize,
    judged: usize,
    failed: usize,
}

impl Progress for Counts {
    fn record(&mut self, e: &Event) {
        let Event::Rolebench(step) = e else {
            return;
        };
        match step {
            Step::Answered { .. } => self.answered += 1,
            Step::Judged { .. } => self.judged += 1,
            Step::AnswerFailed { line, error } => {
                self.failed += 1;
                self.line.say(format!("failed: line {line}: {}", error));
            }
        }
        let counts = format!(
            "{}/{} answered, {} judged, {} failed",
            self.answered, self.total, self.judged, self.failed
        );
        let worth = self.answered.is_multiple_of(20) || !matches!(step, Step::Answered { .. });
        self.line.show(counts, worth);
    }

    fn finish(&mut self) {
        self.line.finish();
    }
}

impl Headless for Rolebench {
    fn intro(run: &Run<Self>, _: &Catalog) -> String {
        let plan = &run.plan;
        let roles: std::collections::BTreeSet<_> = plan.questions.iter().map(|q| &q.role).collect();
        format!(
            "{} question(s), {} role(s){}",
            plan.questions.len(),
            roles.len(),
            if plan.judge.is_some() {
                ", judged against the baseline"
            } else {
                ""
            }
        )
    }

    fn progress(run: &Run<Self>, _: &Catalog, live: bool) -> Box<dyn Progress> {
        Box::new(Counts {
            line: Counter::new(live, "rolebench"),
            total: run.plan.questions.len(),
            // What earlier sittings kept (a resume asks only the rest again).
            answered: run.study.done.answers.len(),
            judged: (run.study.done.judged.values())
                .filter(|s| matches!(s, Step::Judged { score: Some(_), .. }))
                .count(),
            failed: 0,
        })
    }

    fn summary(events: &[Event], _: &Catalog) -> anyhow::Result<(String, Map<String, Value>)> {
        let (_, items) = rolebench::items(events).ok_or_else(|| anyhow::anyhow!("no plan in the journal"))?;
        let totals = rolebench::totals(&items);
        Ok((
            tables(&totals),
            [("summary".to_string(), json!(totals))].into_iter().collect(),
        ))
    }
}

/// Rouge-L per role and per type, with the win rate where a judge ran.
pub fn tables(t: &Totals) -> String {
    let mut roles = Table::new(&["role", "questions", "Rouge-L P", "R", "F", "win rate"]);
    // Nothing answered has no Rouge-L, not one of 0.
    let shown = |m: &crate::method::rolebench::Mean, x: f64| m.of(x).map_or("—".into(), |x| format!("{x:.4}"));
    for (role, m) in &t.rouge_l.by_role {
        roles.row(vec![
            role.to_string(),
            m.count.to_string(),
            shown(m, m.p),
            shown(m, m.r),
            shown(m, m.f),
            t.win_rate_by_role
                .get(role)
                .map_or("—".into(), |w| format!("{:.1} %", w * 100.0)),
        ]);
    }
    let o = &t.rouge_l.overall;
    roles.row(vec![
        "all".into(),
        o.count.to_string(),
        shown(o, o.p),
        shown(o, o.r),
        shown(o, o.f),
        t.win_rate.map_or("—".into(), |w| format!("{:.1} %", w * 100.0)),
    ]);
    let mut text = roles.render();
    if !t.rouge_l.by_type.is_empty() {
        let mut types = Table::new(&["type", "questions", "Rouge-L F"]);
        for (kind, m) in &t.rouge_l.by_type {
            types.row(vec![kind.to_string(), m.count.to_string(), format!("{:.4}", m.f)]);
        }
        text.push('\n');
        text.push_str(&types.render());
    }
    text.push_str(&format!(
        "{} of {} answered, {} failed{}\n",
        t.answered,
        t.questions,
        t.failed,
        if t.judged > 0 {
            format!("; {} judged in both orders (ties count half)", t.judged)
        } else {
            String::new()
        }
    ));
    text
}

#[cfg(test)]
mod tests {
    /// A role with no answer shows dashes, not a Rouge-L of 0.
    #[test]
    fn a_role_with_no_answer_shows_dashes() {
        use crate::method::rolebench::{Mean, Summary};
        let answered = Mean {
            count: 1,
            p: 0.5,
            r: 0.5,
            f: 0.5,
        };
        let t = super::Totals {
            questions: 3,
            answered: 1,
            failed: 2,
            rouge_l: Summary {
                overall: answered,
                by_role: [("R1".to_string(), answered), ("R2".to_string(), Mean::default())]
                    .into_iter()
                    .collect(),
                by_type: Default::default(),
            },
            win_rate: None,
            judged: 0,
            win_rate_by_role: Default::default(),
        };
        let table = super::tables(&t);
        let r2 = table.lines().find(|l| l.starts_with("R2")).expect(&table);
        assert!(r2.contains('—') && !r2.contains("0.0000"), "{table}");
    }
}
