//! RoleBench sessions: the agent answers RoleBench questions (each in its own context), journaled,
//! resumable and cached like interviews; Rouge-L against the references is computed from the journal,
//! and an optional judge compares each answer with a baseline answer in both orders.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::{Env, Event, Failures, Kind, Prepared, Providers, SessionHeader, Study, StudyError};
use crate::catalog::Catalog;
use crate::templates::Templates;
use crate::domain::rouge::{self, RougeL};
use crate::domain::scale::Language;
use crate::llm::{ChatMessage, ChatModel, ChatRequest, Role, complete};
use crate::method::rolebench::{self, Question, Scored, Summary, Verdict};
use crate::method::{interview, judge};
use crate::rpa::memories::Memories;
use crate::rpa::prompt::{self, RpaStyle};

/// What a RoleBench session asks, frozen at its start: a resume never reads the files again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RolebenchPlan {
    /// The question file, as given.
    pub data: String,
    pub roles: Vec<String>,
    pub types: Vec<String>,
    pub limit: Option<usize>,
    pub seed: u64,
    pub rpa: String,
    pub style: RpaStyle,
    pub judge: Option<String>,
    /// The baseline file, as given.
    pub baseline: Option<String>,
    pub max_attempts: u32,
    pub questions: Vec<Question>,
    /// Baseline answers as (question line, answer), for the questions that have one. A list, not a
    /// map: the journal's tagged events cannot read numbers back from map keys.
    #[serde(default)]
    pub baseline_answers: Vec<(usize, String)>,
    /// Roles played from an imported character: role → character id. The others get a minimal
    /// role-play prompt built from the role's name.
    #[serde(default)]
    pub characters: BTreeMap<String, String>,
}

impl RolebenchPlan {
    pub fn baseline_for(&self, line: usize) -> Option<&str> {
        self.baseline_answers
            .iter()
            .find(|(l, _)| *l == line)
            .map(|(_, a)| a.as_str())
    }

    /// Roles with no imported character, which are played from their name alone.
    pub fn unprofiled(&self) -> Vec<&str> {
        let mut roles: Vec<&str> = self
            .questions
            .iter()
            .map(|q| q.role.as_str())
            .filter(|r| !self.characters.contains_key(*r))
            .collect();
        roles.sort_unstable();
        roles.dedup();
        roles
    }
}

/// What to ask, before the questions are chosen.
pub struct Choice<'a> {
    /// The question file, as the user named it.
    pub data: &'a str,
    pub roles: Vec<String>,
    pub types: Vec<String>,
    pub limit: Option<usize>,
    pub seed: u64,
    pub rpa: String,
    pub style: RpaStyle,
    /// The judge's provider and the baseline file's name and contents.
    pub judge: Option<(String, &'a str, &'a rolebench::Baseline)>,
}

/// Filters and samples `questions`, finds each role's character and baseline answer, and returns the
/// plan with notes for the user (roles played from their name, questions without a baseline).
pub fn plan(
    catalog: &Catalog,
    questions: Vec<Question>,
    c: Choice<'_>,
) -> Result<(RolebenchPlan, Vec<String>), String> {
    let filter = rolebench::Filter {
        roles: c.roles,
        types: c.types,
    };
    let mut questions = filter.apply(questions).map_err(|e| e.to_string())?;
    if let Some(n) = c.limit {
        questions = rolebench::sample(questions, n, c.seed);
    }
    if questions.is_empty() {
        return Err("no question matches the filters".into());
    }
    let mut notes = Vec::new();
    let mut characters = BTreeMap::new();
    let mut roles: Vec<&str> = questions.iter().map(|q| q.role.as_str()).collect();
    roles.sort_unstable();
    roles.dedup();
    for role in roles {
        match catalog.named_character(role) {
            Ok(ch) => {
                characters.insert(role.to_string(), ch.id.clone());
            }
            Err(several) if several.is_empty() => notes.push(format!(
                "{role}: no imported character (`incharacter import rolebench` adds one); played from a \
                 minimal role-play prompt built from the name"
            )),
            // One of the user's own beside bundled ones (`import rolebench` of a bundled
            // character's role) plays it; which of several of the user's is not for the run to guess.
            Err(several) => {
                let own: Vec<&String> = several
                    .iter()
                    .filter(|id| {
                        catalog
                            .character_by_id(id)
                            .is_some_and(|e| matches!(e.origin, crate::catalog::Origin::User { .. }))
                    })
                    .collect();
                if let [own] = own.as_slice() {
                    notes.push(format!(
                        "{role}: played by your {own}, not the bundled {}",
                        several.iter().filter(|id| id != own).cloned().collect::<Vec<_>>().join(", ")
                    ));
                    characters.insert(role.to_string(), (*own).clone());
                    continue;
                }
                let named: Vec<&String> = if own.is_empty() { several.iter().collect() } else { own };
                return Err(format!(
                    "the role \"{role}\" names {} characters ({}): give all but one another name and \
                     aliases, or leave the role out (--roles)",
                    named.len(),
                    named.iter().map(|id| id.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    let mut baseline_answers = Vec::new();
    if let Some((_, file, baseline)) = &c.judge {
        let mut missing = 0;
        for q in &questions {
            match baseline.get(&q.role, &q.question) {
                Some(answer) => baseline_answers.push((q.line, answer.to_string())),
                None => missing += 1,
            }
        }
        if missing > 0 {
            notes.push(format!(
                "{missing} question(s) have no baseline answer in {file} and are not judged"
            ));
        }
    }
    let plan = RolebenchPlan {
        data: c.data.to_string(),
        roles: filter.roles,
        types: filter.types,
        limit: c.limit,
        seed: c.seed,
        rpa: c.rpa,
        style: c.style,
        judge: c.judge.as_ref().map(|(j, ..)| j.clone()),
        baseline: c.judge.as_ref().map(|(_, f, _)| f.to_string()),
        max_attempts: judge::DEFAULT_ATTEMPTS,
        questions,
        baseline_answers,
        characters,
    };
    // The plan is the session's first journal record, which must stay a line the journal reads
    // back: what is chosen is measured, after the filters and the sample (less room for the rest).
    let room = crate::journal::MAX_LINE - (1 << 20);
    let size = serde_json::to_vec(&plan).map_or(0, |v| v.len()) as u64;
    if size > room {
        return Err(format!(
            "{}: the {} question(s) chosen, with their baseline answers, take {}, more than the {} a \
             session keeps of them; choose fewer (--roles, --type, --limit)",
            plan.data,
            plan.questions.len(),
            crate::files::size(size),
            crate::files::size(room)
        ));
    }
    Ok((plan, notes))
}

/// One journaled step of a RoleBench session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    Answered {
        line: usize,
        response: String,
    },
    AnswerFailed {
        line: usize,
        error: String,
    },
    /// The judge's verdicts with the agent's answer as A, then as B; `score` is
    /// [`rolebench::pair_score`] when both were read.
    Judged {
        line: usize,
        agent_as_a: Option<Verdict>,
        agent_as_b: Option<Verdict>,
        score: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
    },
}

impl From<Step> for Event {
    fn from(step: Step) -> Event {
        Event::Rolebench(step)
    }
}

/// What a session's journal already holds, by question line.
#[derive(Debug, Clone, Default)]
pub struct Done {
    pub answers: BTreeMap<usize, String>,
    pub judged: BTreeMap<usize, Step>,
}

impl Done {
    pub fn from_events(events: &[Event]) -> Done {
        Done::from_steps(steps(events))
    }

    pub fn from_steps<'a>(steps: impl IntoIterator<Item = &'a Step>) -> Done {
        let mut done = Done::default();
        for step in steps {
            match step {
                Step::Answered { line, response } => {
                    done.answers.insert(*line, response.clone());
                }
                Step::Judged { line, .. } => {
                    done.judged.insert(*line, step.clone());
                }
                Step::AnswerFailed { .. } => {}
            }
        }
        done
    }
}

pub fn steps(events: &[Event]) -> impl Iterator<Item = &Step> {
    events.iter().filter_map(|e| match e {
        Event::Rolebench(s) => Some(s),
        _ => None,
    })
}


/// The prompt for one question: the imported character's prompt in the plan's style, or a minimal
/// role-play instruction built from the role's name.
pub fn messages(
    plan: &RolebenchPlan,
    catalog: &Catalog,
    memories: Option<&Memories>,
    q: &Question,
) -> Vec<ChatMessage> {
    if let Some(c) = plan.characters.get(&q.role).and_then(|id| catalog.character(id)) {
        return prompt::assemble(Templates::bundled(), c, plan.style, memories, &q.question, &q.question).messages;
    }
    let system = match q.language() {
        Language::Zh => format!(
            "你是{role}。请以{role}的身份、语气和说话方式回答，始终保持角色，不要提到自己是AI。",
            role = q.role
        ),
        Language::En => format!(
            "You are {role}. Answer as {role} would, in {role}'s own voice, manner and vocabulary. Stay in \
             character and never mention being an AI.",
            role = q.role
        ),
    };
    vec![ChatMessage::system(system), ChatMessage::user(q.question.clone())]
}

/// The RoleBench study: its models, the imported characters' memories and what the journal holds.
pub struct Rolebench {
    pub catalog: Arc<Catalog>,
    pub rpa: Arc<dyn ChatModel>,
    pub judge: Option<Arc<dyn ChatModel>>,
    pub memories: BTreeMap<String, Arc<Memories>>,
    pub done: Done,
}

impl Rolebench {
    async fn run_plan(&self, plan: &RolebenchPlan, sink: &UnboundedSender<Step>) {
        let asks = plan.questions.iter().map(|q| self.question(plan, &self.done, sink, q));
        join_all(asks).await;
    }

    async fn question(&self, plan: &RolebenchPlan, done: &Done, sink: &UnboundedSender<Step>, q: &Question) {
        let answer = match done.answers.get(&q.line) {
            Some(a) => a.clone(),
            None => {
                let memories = plan
                    .characters
                    .get(&q.role)
                    .and_then(|id| self.memories.get(id))
                    .map(Arc::as_ref);
                let mut request = ChatRequest::new(messages(plan, &self.catalog, memories, q));
                request.meta.role = Role::Rpa;
                request.meta.purpose = purpose(q);
                request.sampling.seed = Some(plan.seed.wrapping_add(q.line as u64));
                request.sampling.max_tokens = Some(interview::MAX_ANSWER_TOKENS);
                match complete(self.rpa.as_ref(), request).await {
                    Ok(reply) => {
                        let response = reply.text.trim().to_string();
                        let _ = sink.send(Step::Answered {
                            line: q.line,
                            response: response.clone(),
                        });
                        response
                    }
                    Err(e) => {
                        let _ = sink.send(Step::AnswerFailed {
                            line: q.line,
                            error: e.to_string(),
                        });
                        return;
                    }
                }
            }
        };
        let (Some(judge), Some(baseline)) = (&self.judge, plan.baseline_for(q.line)) else {
            return;
        };
        // A verdict the judge could not give is asked again.
        if matches!(done.judged.get(&q.line), Some(Step::Judged { score: Some(_), .. })) {
            return;
        }
        let ask = |a: &str, b: &str| {
            let request = rolebench::pairwise_request(q, a, b);
            async move {
                judge::ask(judge.as_ref(), &request, plan.max_attempts, rolebench::parse_verdict)
                    .await
                    .0
            }
        };
        let (first, second) = tokio::join!(ask(&answer, baseline), ask(baseline, &answer));
        let failure = [&first, &second]
            .iter()
            .find_map(|r| r.as_ref().err().map(|e| e.to_string()));
        let (agent_as_a, agent_as_b) = (first.ok(), second.ok());
        let score = match (&agent_as_a, &agent_as_b) {
            (Some(a), Some(b)) => Some(rolebench::pair_score(a.winner, b.winner)),
            _ => None,
        };
        let _ = sink.send(Step::Judged {
            line: q.line,
            agent_as_a,
            agent_as_b,
            score,
            failure,
        });
    }
}

/// The purpose string of a question's request (the live view keys its transcript on it).
pub fn purpose(q: &Question) -> String {
    format!("rolebench {} line {}", q.role, q.line)
}

impl Study for Rolebench {
    type Plan = RolebenchPlan;
    type Step = Step;
    const KIND: Kind = Kind::Rolebench;

    fn plan_of(events: &[Event]) -> Option<&RolebenchPlan> {
        events.iter().find_map(|e| match e {
            Event::RolebenchStarted { plan, .. } => Some(plan.as_ref()),
            _ => None,
        })
    }

    fn seed(plan: &RolebenchPlan) -> u64 {
        plan.seed
    }

    fn started(header: SessionHeader, plan: RolebenchPlan, providers: Providers) -> Event {
        Event::RolebenchStarted {
            header,
            plan: Box::new(plan),
            providers,
        }
    }

    fn prepare(plan: &mut RolebenchPlan, prior: &[Event], env: &Env<'_>) -> Result<Prepared<Self>, StudyError> {
        let rpa = (env.connect)(&plan.rpa)?;
        let judge = plan.judge.as_deref().map(env.connect).transpose()?;
        let mut providers = BTreeMap::from([("rpa".to_string(), rpa.info())]);
        if let Some(j) = &judge {
            providers.insert("judge".into(), j.info());
        }
        let mut memories = BTreeMap::new();
        for cid in plan.characters.values() {
            if let Some(c) = env.catalog.character(cid)
                && let Ok(Some(m)) = Memories::load(env.data, &c.id, &c.name)
            {
                memories.insert(c.id.clone(), Arc::new(m));
            }
        }
        Ok(Prepared {
            masked: BTreeMap::new(),
            study: Rolebench {
                catalog: env.catalog.clone(),
                rpa,
                judge,
                memories,
                done: Done::from_events(prior),
            },
            providers,
            notes: Vec::new(),
            items_per_call: None,
            character_versions: BTreeMap::new(),
            scale_versions: BTreeMap::new(),
        })
    }

    fn wrap_models(&mut self, wrap: &dyn Fn(Arc<dyn ChatModel>) -> Arc<dyn ChatModel>) {
        self.rpa = wrap(self.rpa.clone());
        self.judge = self.judge.clone().map(wrap);
    }

    async fn run(&self, plan: &RolebenchPlan, sink: &UnboundedSender<Step>) {
        self.run_plan(plan, sink).await;
    }

    fn export(events: &[Event], _: &Catalog) -> Value {
        super::with_adaptations(export(events), events)
    }

    /// Questions left unanswered, and verdicts the judge could not give.
    fn failures(events: &[Event]) -> Failures {
        let Some((_, items)) = items(events) else {
            return Failures::default();
        };
        Failures {
            items: items.iter().filter(|i| i.response.is_none()).count(),
            assessments: items
                .iter()
                .filter(|i| matches!(&i.judge, Some(Step::Judged { score: None, .. })))
                .count(),
            left_out: 0,
        }
    }
}

/// One question's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    pub line: usize,
    pub role: String,
    pub question: String,
    pub types: Vec<String>,
    pub references: Vec<String>,
    pub response: Option<String>,
    pub error: Option<String>,
    /// The best reference (by F) and its Rouge-L.
    pub best: Option<(usize, RougeL)>,
    pub judge: Option<Step>,
}

/// Every question of the plan with its answer, Rouge-L and verdicts, in plan order.
pub fn items(events: &[Event]) -> Option<(RolebenchPlan, Vec<Item>)> {
    let plan = Rolebench::plan_of(events)?.clone();
    let steps: Vec<&Step> = steps(events).collect();
    let items = items_of(&plan, steps);
    Some((plan, items))
}

/// [`items`] from a plan and its steps so far.
pub fn items_of(plan: &RolebenchPlan, steps: Vec<&Step>) -> Vec<Item> {
    let done = Done::from_steps(steps.iter().copied());
    let errors: BTreeMap<usize, String> = steps
        .into_iter()
        .filter_map(|s| match s {
            Step::AnswerFailed { line, error } => Some((*line, error.clone())),
            _ => None,
        })
        .collect();
    plan.questions
        .iter()
        .map(|q| {
            let response = done.answers.get(&q.line).cloned();
            let best = response
                .as_deref()
                .and_then(|r| rouge::best(&q.references, r, q.language()));
            Item {
                line: q.line,
                role: q.role.clone(),
                question: q.question.clone(),
                types: q.types.clone(),
                references: q.references.clone(),
                error: (response.is_none()).then(|| errors.get(&q.line).cloned()).flatten(),
                response,
                best,
                judge: done.judged.get(&q.line).cloned(),
            }
        })
        .collect()
}

/// The Rouge-L means of the answered questions, and the judge's win rate where it ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    pub questions: usize,
    pub answered: usize,
    pub failed: usize,
    #[serde(flatten)]
    pub rouge_l: Summary,
    /// Mean pair score (ties count half), over the questions both orders were read for.
    pub win_rate: Option<f64>,
    pub judged: usize,
    /// Win rate per role.
    pub win_rate_by_role: BTreeMap<String, f64>,
}

pub fn totals(items: &[Item]) -> Totals {
    let scored = items.iter().filter_map(|i| {
        i.best.map(|(_, r)| Scored {
            role: &i.role,
            types: &i.types,
            rouge: r,
        })
    });
    let mut rouge_l = rolebench::summarize(scored);
    // A role none of whose questions was answered is a row without means, not a row missing.
    for i in items {
        rouge_l.by_role.entry(i.role.clone()).or_default();
    }
    let score_of = |i: &Item| match &i.judge {
        Some(Step::Judged { score, .. }) => *score,
        _ => None,
    };
    let scores: Vec<f64> = items.iter().filter_map(score_of).collect();
    let mut by_role: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for i in items {
        if let Some(s) = score_of(i) {
            by_role.entry(i.role.clone()).or_default().push(s);
        }
    }
    Totals {
        questions: items.len(),
        answered: items.iter().filter(|i| i.response.is_some()).count(),
        failed: items.iter().filter(|i| i.error.is_some()).count(),
        rouge_l,
        win_rate: rolebench::win_rate(&scores),
        judged: scores.len(),
        win_rate_by_role: by_role
            .into_iter()
            .filter_map(|(r, s)| rolebench::win_rate(&s).map(|w| (r, w)))
            .collect(),
    }
}

/// `export --format json` (and results.json) of a RoleBench session.
fn export(events: &[Event]) -> Value {
    let Some((plan, items)) = items(events) else {
        return Value::Null;
    };
    let session = events
        .iter()
        .find_map(|e| match e {
            Event::RolebenchStarted {
                header: h, providers, ..
            } => Some(json!({
                "id": h.session, "name": h.name, "created": h.created, "app_version": h.app_version,
                "providers": providers, "seed": plan.seed, "kind": "rolebench", "data": plan.data,
                "style": plan.style, "unprofiled_roles": plan.unprofiled(),
            })),
            _ => None,
        })
        .unwrap_or_default();
    let rows: Vec<Value> = items
        .iter()
        .map(|i| {
            let judge = match &i.judge {
                Some(Step::Judged {
                    agent_as_a,
                    agent_as_b,
                    score,
                    failure,
                    ..
                }) => json!({
                    "baseline": plan.baseline_for(i.line),
                    "agent_as_a": agent_as_a, "agent_as_b": agent_as_b, "score": score, "failure": failure,
                }),
                _ => Value::Null,
            };
            json!({
                "line": i.line,
                "role": i.role,
                "question": i.question,
                "type": match i.types.as_slice() {
                    [one] => json!(one),
                    many => json!(many),
                },
                "references": i.references,
                "response": i.response,
                "error": i.error,
                "rouge_l": i.best.map(|(best, r)| json!({"p": r.p, "r": r.r, "f": r.f, "best_reference": best})),
                "judge": judge,
            })
        })
        .collect();
    json!({"session": session, "rolebench": rows, "summary": totals(&items)})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(role: &str, rouge: Option<f64>) -> Item {
        Item {
            line: 1,
            role: role.into(),
            question: "q".into(),
            types: Vec::new(),
            references: vec!["r".into()],
            response: rouge.map(|_| "a".into()),
            error: rouge.is_none().then(|| "HTTP 500".into()),
            best: rouge.map(|f| (0, RougeL { p: f, r: f, f })),
            judge: None,
        }
    }

    /// A role none of whose questions was answered is a row without means (null in JSON), not a
    /// role missing from the table.
    #[test]
    fn a_role_with_no_answer_is_a_row_without_means() {
        let totals = totals(&[item("R1", Some(0.5)), item("R2", None), item("R2", None)]);
        let r2 = &totals.rouge_l.by_role["R2"];
        assert_eq!(r2.count, 0);
        assert_eq!(serde_json::to_value(r2).unwrap()["f"], serde_json::Value::Null);
        assert_eq!(totals.rouge_l.by_role["R1"].count, 1);
    }
}
