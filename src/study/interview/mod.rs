//! Interviews, the InCharacter study: every scored item of each scale asked in its own context, for
//! each character × scale × repeat at once (the providers' limits decide how many requests are in
//! flight), then assessed by each method. The open interview of a unit is shared by ER_batch, ER_all,
//! OC and d-OC. Given what a journal already holds, it asks and assesses only what is missing.

pub mod estimate;
mod masked;
pub mod reassess;
pub mod requests;
pub mod markdown;
pub mod results;
pub mod spread;

pub use masked::{Masked, fold_masked, merge_masked};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use super::{Env, Event, Failures, Kind, Prepared, Providers, SessionHeader, Study, StudyError};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::domain::character::Character;
use crate::domain::scale::Scale;
use crate::domain::scoring::ItemOption;
use crate::llm::{ChatModel, Role};
use crate::method::anonymize::Masker;
use crate::method::convert::{self, Conversion, ConversionCall, ConvertedItem};
use crate::method::expert::{self, Exchange, Grouping};
use crate::method::interview::{self, AnswerSampling, QueryStyle};
use crate::method::judge::Judge;
use crate::method::{Assessment, Method, judge_json};
use crate::rpa::memories::Memories;
use crate::rpa::prompt::RpaStyle;
use crate::templates::{PromptSet, TemplateError, Templates};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    pub characters: Vec<String>,
    pub scales: Vec<String>,
    pub methods: Vec<Method>,
    pub repeats: u32,
    pub rpa: String,
    pub judge: String,
    pub style: RpaStyle,
    pub seed: u64,
    pub max_attempts: u32,
    /// Items per option-conversion call (OC, d-OC, self-report): fewer than METHOD's 60 when the
    /// judge's context cannot hold them. Fixed when the session starts; sessions older than the field
    /// used 60.
    #[serde(default = "default_items_per_call")]
    pub items_per_call: u32,
    /// How interview answers are sampled. Sessions older than the field sent no temperature (the
    /// provider's default) and capped answers at 300 tokens.
    #[serde(default = "AnswerSampling::before_recorded")]
    pub answer_sampling: AnswerSampling,
    /// The temperature of a judge's first attempt (re-asks use it too, or 0.2 when it is 0).
    #[serde(default, serialize_with = "crate::domain::decimal::short")]
    pub judge_temperature: f32,
    /// A re-assessment: the session whose interviews this one assesses. Its answers are copied into
    /// this journal as they are, and no role-play request is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The prompt templates not taken from the bundle, with their text (sessions older than the field,
    /// and runs without `--prompts`, used the bundled ones).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: PromptSet,
    /// Expert ratings and option conversions are the judge's expected scores: each written option
    /// weighed by the probabilities of the options it could have written there (`--expected-scores`;
    /// [`crate::method::weigh`]). Sessions older than the field, and runs without it, took the
    /// written option.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expected_scores: bool,
    /// The names masked in each character's answers before the judge reads them: every name and
    /// experimenter the character had when a session of these answers ran (a re-assessment keeps
    /// its parent's), with the catalog's current ones added at each sitting. A character renamed
    /// since its answers were given keeps its old names hidden. Sessions older than the field mask
    /// the current names only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub masked: BTreeMap<String, Masked>,
    /// ER's repeats shuffle the answers as the original pipeline does, and both self-reports read
    /// a bare number as it does ([`expert::Order::Original`], [`judge_json::bare_option`]). Sessions
    /// older than the field go on as they started: their own shuffle, and SR alone reading a bare
    /// number ([`judge_json::bare_option_before`]), so a resume never mixes the two.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub original_reading: bool,
}


fn default_items_per_call() -> u32 {
    convert::MAX_ITEMS_PER_CALL as u32
}

/// Interview sampling: the command line, else `[sampling.rpa]`, else the original procedure's 0.7 and
/// 300 tokens.
pub fn answer_sampling(config: &Config, temperature: Option<f32>, max_tokens: Option<u32>) -> AnswerSampling {
    let configured = config.sampling.get(&Role::Rpa).copied().unwrap_or_default();
    let default = AnswerSampling::default();
    AnswerSampling {
        temperature: temperature.or(configured.temperature).or(default.temperature),
        max_tokens: max_tokens.or(configured.max_tokens).unwrap_or(default.max_tokens),
    }
}

/// The judge's first-attempt temperature: the command line, else `[sampling.judge]`, else 0.
pub fn judge_temperature(config: &Config, explicit: Option<f32>) -> f32 {
    explicit
        .or(config.sampling.get(&Role::Judge).and_then(|s| s.temperature))
        .unwrap_or(0.0)
}

impl RunPlan {
    /// A plan with the defaults: one repeat, the description style, seed 0, the bounded judge policy,
    /// the original procedure's sampling.
    pub fn new(characters: Vec<String>, scales: Vec<String>, methods: Vec<Method>, rpa: &str, judge: &str) -> RunPlan {
        RunPlan {
            characters,
            scales,
            methods,
            repeats: 1,
            rpa: rpa.to_string(),
            judge: judge.to_string(),
            style: RpaStyle::Description,
            seed: 0,
            max_attempts: crate::method::judge::DEFAULT_ATTEMPTS,
            items_per_call: convert::MAX_ITEMS_PER_CALL as u32,
            answer_sampling: AnswerSampling::default(),
            judge_temperature: 0.0,
            parent: None,
            prompts: PromptSet::new(),
            expected_scores: false,
            masked: BTreeMap::new(),
            original_reading: true,
        }
    }

    /// What hides character `c`'s names from the judge: the names the plan records for it and
    /// its current ones.
    pub fn masker(&self, c: &Character) -> Masker {
        let mut masked = self.masked.get(&c.id).cloned().unwrap_or_default();
        masked.add(c);
        masked.masker()
    }
}

pub type AnswerKey = (String, String, u32, QueryStyle, u32);
type AssessmentKey = (String, String, Method, u32, String);

/// The item an answer record answers, and the exchange it records.
pub fn answer(e: &Event) -> Option<(AnswerKey, Exchange)> {
    match e {
        Event::ItemAnswered {
            character,
            scale,
            repeat,
            style,
            item_id,
            question,
            response,
            ..
        } => Some((
            (character.clone(), scale.clone(), *repeat, *style, *item_id),
            Exchange {
                item_id: *item_id,
                question: question.clone(),
                response: response.clone(),
            },
        )),
        _ => None,
    }
}

/// How an assessment's failure begins when it was not assessed because interview items failed: the
/// consequence of the answerer's failures, not a judge's.
pub const ITEMS_FAILED: &str = "interview items";

/// What a journal already holds.
#[derive(Debug, Default, Clone)]
pub struct Done {
    pub answers: BTreeMap<AnswerKey, Exchange>,
    pub assessed: BTreeSet<AssessmentKey>,
    /// The last failure journaled for each item: a resume does not journal the same failure again
    /// (a re-assessment's parent still without the answer; a batch request failed for good).
    pub failed: BTreeMap<AnswerKey, String>,
    /// Assessments whose last record says interview items failed ([`ITEMS_FAILED`]), with that
    /// failure: a resume that finds the same items still failed has nothing new to assess or record.
    pub items_failed: BTreeMap<AssessmentKey, String>,
}

impl Done {
    pub fn from_events(events: &[Event]) -> Done {
        let mut done = Done::default();
        for e in events {
            if let Some((key, exchange)) = answer(e) {
                done.answers.insert(key, exchange);
            }
            match e {
                Event::ItemFailed {
                    character,
                    scale,
                    repeat,
                    style,
                    item_id,
                    error,
                } => {
                    let key = (character.clone(), scale.clone(), *repeat, *style, *item_id);
                    done.failed.insert(key, error.clone());
                }
                // A failed assessment, or one with failed items, is made again by a resume (its
                // interview may be whole by then, and the judge may answer).
                Event::DimensionAssessed(a) => {
                    let key = (
                        a.character.clone(),
                        a.scale.clone(),
                        a.method,
                        a.repeat,
                        a.dimension.clone(),
                    );
                    match &a.failure {
                        Some(why) if why.starts_with(ITEMS_FAILED) => {
                            done.items_failed.insert(key.clone(), why.clone());
                        }
                        _ => {
                            done.items_failed.remove(&key);
                        }
                    }
                    if !a.has_failures() {
                        done.assessed.insert(key);
                    }
                }
                _ => {}
            }
        }
        done
    }
}

/// One method's assessment of a character on a scale in one repeat, from that repeat's answers.
struct Assessing<'a> {
    plan: &'a RunPlan,
    sink: &'a UnboundedSender<Event>,
    c: &'a Character,
    s: &'a Scale,
    repeat: u32,
    method: Method,
    answers: &'a [(u32, Option<Exchange>)],
    masker: &'a Masker,
}

impl Assessing<'_> {
    /// Dimension `d` with nothing assessed: what every outcome is written over.
    fn blank(&self, d: usize) -> Assessment {
        Assessment {
            character: self.c.id.clone(),
            scale: self.s.id.clone(),
            method: self.method,
            repeat: self.repeat,
            dimension: self.s.dimensions[d].name.clone(),
            score: None,
            batches: Vec::new(),
            calls: Vec::new(),
            items: Vec::new(),
            failure: None,
            fitted: None,
            conversions: Vec::new(),
        }
    }

    fn emit(&self, assessment: Assessment) {
        let _ = self.sink.send(Event::DimensionAssessed(assessment));
    }

    /// Dimension `d`'s answers, or which of its interview items failed ([`ITEMS_FAILED`]).
    fn answers_of(&self, d: usize) -> Result<Vec<Exchange>, String> {
        let mine: Vec<&(u32, Option<Exchange>)> = self
            .answers
            .iter()
            .filter(|(id, _)| self.s.item(*id).and_then(|i| i.dimension()) == Some(d))
            .collect();
        let failed: Vec<u32> = mine.iter().filter(|(_, e)| e.is_none()).map(|(id, _)| *id).collect();
        if !failed.is_empty() {
            return Err(format!("{ITEMS_FAILED} {failed:?} failed"));
        }
        Ok(mine.iter().filter_map(|(_, e)| e.clone()).collect())
    }

    /// Dimension `d` from the converted items: its `score` unless its interview or too many of its
    /// conversions failed, with the calls that converted its items.
    /// Dimension `d`'s assessment from a conversion's `items` and `calls`, of which `pending` (the
    /// dimensions this sitting records) are all emitted.
    fn converted(
        &self,
        d: usize,
        pending: &[usize],
        items: &[ConvertedItem],
        calls: &[ConversionCall],
        score: Option<f64>,
    ) -> Assessment {
        let s = self.s;
        let mine: Vec<ConvertedItem> = items
            .iter()
            .filter(|i| s.item(i.item_id).and_then(|it| it.dimension()) == Some(d))
            .cloned()
            .collect();
        let unconverted = mine.iter().filter(|i| i.option.is_none()).count();
        let failure = match self.answers_of(d) {
            Err(why) => Some(why),
            Ok(_) if score.is_none() => {
                // The last problem of a call on this dimension's items: the provider's
                // words, or why its replies were rejected. A call split for the context (or
                // itemized after its replies were all rejected) was asked again in parts: what
                // those parts met is the reason, not what replaced it.
                let touches = |call: &&ConversionCall| call.item_ids.iter().any(|id| mine.iter().any(|i| i.item_id == *id));
                let last_problem = |split: bool| {
                    calls
                        .iter()
                        .rev()
                        .filter(touches)
                        .filter(|call| call.replaced() == split)
                        .flat_map(|call| call.attempts.iter().rev())
                        .find_map(|a| a.error.clone())
                };
                let why = last_problem(false)
                    .or_else(|| last_problem(true))
                    .map_or(String::new(), |why| format!(": {why}"));
                Some(format!(
                    "the judge gave no usable conversion for {unconverted} of {} items (fewer than half remain){why}",
                    mine.len()
                ))
            }
            Ok(_) => None,
        };
        let score = if failure.is_none() { score } else { None };
        let of_this: Vec<Vec<u32>> = calls
            .iter()
            .filter(|call| !call.replaced())
            .filter(|call| call.item_ids.iter().any(|id| mine.iter().any(|i| i.item_id == *id)))
            .map(|call| call.item_ids.clone())
            .collect();
        let ids: Vec<u32> = mine.iter().map(|i| i.item_id).collect();
        let fitted = convert::fitted(calls, &ids);
        // Each call (replies included) once, with the first dimension among its items that this
        // sitting records (a resume converts a scored dimension's answers again, unrecorded), else
        // with the first of those.
        let owner = |call: &ConversionCall| {
            call.item_ids
                .iter()
                .filter_map(|id| s.item(*id).and_then(|it| it.dimension()))
                .filter(|dim| pending.contains(dim))
                .min()
                .or_else(|| pending.iter().copied().min())
        };
        let conversions = calls.iter().filter(|call| owner(call) == Some(d)).cloned().collect();
        Assessment {
            score,
            items: mine,
            calls: of_this,
            failure,
            fitted,
            conversions,
            ..self.blank(d)
        }
    }
}

/// The interview study: its models, the characters' memories and what the journal holds.
pub struct Interviews {
    pub catalog: Arc<Catalog>,
    /// `None` in a re-assessment, which never asks the role-playing agent.
    pub rpa: Option<Arc<dyn ChatModel>>,
    pub judge: Arc<dyn ChatModel>,
    /// A re-assessment: the parent's answers this journal has not copied yet.
    pub inherited: BTreeMap<AnswerKey, Event>,
    /// Memories of the characters that have them (for the chatharuhi style).
    pub memories: BTreeMap<String, Arc<Memories>>,
    pub done: Done,
    /// The plan's prompt templates.
    pub templates: Templates,
}

impl Interviews {
    /// The judge with the plan's policy.
    fn judge<'a>(&'a self, plan: &RunPlan) -> Judge<'a> {
        Judge {
            model: self.judge.as_ref(),
            attempts: plan.max_attempts,
            temperature: plan.judge_temperature,
            templates: &self.templates,
            expected: plan.expected_scores,
        }
    }

    /// Runs the plan, skipping what `done` holds, and sends every new event to `sink`.
    pub async fn run_plan(&self, plan: &RunPlan, sink: &UnboundedSender<Event>) {
        let done = &self.done;
        let mut units = Vec::new();
        for character in &plan.characters {
            for scale in &plan.scales {
                for repeat in 0..plan.repeats.max(1) {
                    units.push(self.unit(plan, done, sink, character, scale, repeat));
                }
            }
        }
        join_all(units).await;
    }

    async fn unit(
        &self,
        plan: &RunPlan,
        done: &Done,
        sink: &UnboundedSender<Event>,
        character: &str,
        scale: &str,
        repeat: u32,
    ) {
        let (Some(c), Some(s)) = (self.catalog.character(character), self.catalog.scale(scale)) else {
            return;
        };
        let styles: BTreeSet<QueryStyle> = plan.methods.iter().map(|m| m.query_style()).collect();
        // The query styles' interviews are independent; they share the client's limits.
        let asks = styles
            .into_iter()
            .map(|style| async move { (style, self.interview(plan, done, sink, c, s, repeat, style).await) });
        let interviews: BTreeMap<QueryStyle, _> = join_all(asks).await.into_iter().collect();
        let masker = plan.masker(c);
        let assessments = plan.methods.iter().map(|&method| {
            let exchanges = &interviews[&method.query_style()];
            self.assess(plan, done, sink, c, s, repeat, method, exchanges, &masker)
        });
        join_all(assessments).await;
    }

    /// All scored items of a scale in one style; `None` for items that failed.
    #[allow(clippy::too_many_arguments)]
    async fn interview(
        &self,
        plan: &RunPlan,
        done: &Done,
        sink: &UnboundedSender<Event>,
        c: &Character,
        s: &Scale,
        repeat: u32,
        style: QueryStyle,
    ) -> Vec<(u32, Option<Exchange>)> {
        let asks = s.scored_items().map(|item| async move {
            let key = (c.id.clone(), s.id.clone(), repeat, style, item.id);
            if let Some(e) = done.answers.get(&key) {
                return (item.id, Some(e.clone()));
            }
            let Some(rpa) = &self.rpa else {
                return (item.id, self.copy(plan, done, sink, key));
            };
            let seed = plan
                .seed
                .wrapping_add(u64::from(repeat) * 1_000_003)
                .wrapping_add(u64::from(item.id));
            let memories = self.memories.get(&c.id).map(Arc::as_ref);
            let sampling = plan.answer_sampling;
            match interview::ask(
                rpa.as_ref(),
                &self.templates,
                c,
                s,
                item,
                style,
                plan.style,
                memories,
                repeat,
                seed,
                sampling,
            )
            .await
            {
                Ok(asked) => {
                    let e = asked.exchange;
                    let _ = sink.send(Event::ItemAnswered {
                        character: c.id.clone(),
                        scale: s.id.clone(),
                        repeat,
                        style,
                        item_id: item.id,
                        question: e.question.clone(),
                        response: e.response.clone(),
                        retrieved: asked.retrieved,
                        truncated: asked.truncated,
                    });
                    (item.id, Some(e))
                }
                Err(err) => {
                    // The same failure as the journal's last for the item (a batch run's imports
                    // give a request that failed for good its failure again at once) is not news.
                    let error = err.to_string();
                    if done.failed.get(&key) != Some(&error) {
                        let _ = sink.send(Event::ItemFailed {
                            character: c.id.clone(),
                            scale: s.id.clone(),
                            repeat,
                            style,
                            item_id: item.id,
                            error,
                        });
                    }
                    (item.id, None)
                }
            }
        });
        join_all(asks).await
    }

    /// A re-assessment's answer: the parent's, copied into this journal as it was recorded (or a failed
    /// item, saying the parent has none, unless the journal says so already).
    fn copy(&self, plan: &RunPlan, done: &Done, sink: &UnboundedSender<Event>, key: AnswerKey) -> Option<Exchange> {
        match self.inherited.get(&key).and_then(|e| Some((e, answer(e)?.1))) {
            Some((answered, exchange)) => {
                let _ = sink.send(answered.clone());
                Some(exchange)
            }
            None => {
                let error = format!(
                    "the parent session {} has no answer to this item",
                    plan.parent.as_deref().unwrap_or("?")
                );
                if done.failed.get(&key) != Some(&error) {
                    let (character, scale, repeat, style, item_id) = key;
                    let _ = sink.send(Event::ItemFailed {
                        character,
                        scale,
                        repeat,
                        style,
                        item_id,
                        error,
                    });
                }
                None
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn assess(
        &self,
        plan: &RunPlan,
        done: &Done,
        sink: &UnboundedSender<Event>,
        c: &Character,
        s: &Scale,
        repeat: u32,
        method: Method,
        answers: &[(u32, Option<Exchange>)],
        masker: &Masker,
    ) {
        let a = Assessing {
            plan,
            sink,
            c,
            s,
            repeat,
            method,
            answers,
            masker,
        };
        // Not assessed yet, unless the last assessment failed on the very items that are still
        // without an answer: assessing it again would record the same failure.
        let pending: Vec<usize> = (0..s.dimensions.len())
            .filter(|&d| {
                let key = (c.id.clone(), s.id.clone(), method, repeat, s.dimensions[d].name.clone());
                !done.assessed.contains(&key)
                    && !matches!((a.answers_of(d), done.items_failed.get(&key)), (Err(now), Some(then)) if &now == then)
            })
            .collect();
        if pending.is_empty() {
            return;
        }
        match method {
            Method::ErBatch | Method::ErAll => self.assess_by_rating(&a, &pending).await,
            Method::Oc | Method::DOc | Method::Sr | Method::SrCot => self.assess_by_conversion(&a, &pending).await,
        }
    }

    /// ER_batch and ER_all: the judge rates each pending dimension from its answers.
    async fn assess_by_rating(&self, a: &Assessing<'_>, pending: &[usize]) {
        let grouping = if a.method == Method::ErBatch {
            Grouping::Batch
        } else {
            Grouping::All
        };
        let rates = pending.iter().map(|&d| async move {
            match a.answers_of(d) {
                Err(why) => (d, None, Some(why)),
                Ok(ex) => {
                    let r = expert::rate(
                        self.judge(a.plan),
                        a.s,
                        d,
                        a.c.language,
                        a.masker,
                        &ex,
                        grouping,
                        (a.repeat, expert::Order::of(a.plan.original_reading)),
                    )
                    .await;
                    // The last problem of a failed batch: the provider's words, or why its
                    // replies were rejected.
                    let failure = r.score.is_none().then(|| {
                        let last = r
                            .batches
                            .iter()
                            .filter(|b| b.score.is_none())
                            .find_map(|b| b.attempts.iter().rev().find_map(|a| a.error.clone()));
                        match last {
                            Some(why) => format!("the judge gave no usable rating for a batch: {why}"),
                            None => "the judge gave no usable rating for a batch".to_string(),
                        }
                    });
                    (d, Some(r), failure)
                }
            }
        });
        for (d, rating, failure) in join_all(rates).await {
            match rating {
                Some(r) => a.emit(Assessment {
                    score: r.score,
                    batches: r.batches,
                    failure,
                    fitted: r.fitted,
                    ..a.blank(d)
                }),
                None => a.emit(Assessment { failure, ..a.blank(d) }),
            }
        }
    }

    /// OC, d-OC, SR and SR_CoT: the judge converts the answers to options, which score each pending
    /// dimension.
    async fn assess_by_conversion(&self, a: &Assessing<'_>, pending: &[usize]) {
        let (items, calls) = self.convert_answers(a).await;
        let scores = convert::dimension_scores(a.s, &items);
        for &d in pending {
            a.emit(a.converted(d, pending, &items, &calls, scores[d].map(|x| x.value)));
        }
    }

    /// The usable answers converted to options in the method's calls: the items and the calls made.
    async fn convert_answers(&self, a: &Assessing<'_>) -> (Vec<ConvertedItem>, Vec<ConversionCall>) {
        let (plan, c, s, masker) = (a.plan, a.c, a.s, a.masker);
        let usable: Vec<Exchange> = a.answers.iter().filter_map(|(_, e)| e.clone()).collect();
        let some = |ids: &[u32]| usable.iter().filter(|e| ids.contains(&e.item_id)).collect::<Vec<_>>();
        match a.method {
            Method::Oc => {
                convert::convert(
                    self.judge(plan),
                    s,
                    convert::oc_groups(&self.templates, s, c, &usable, plan.items_per_call as usize),
                    &|ids| convert::oc_messages(&self.templates, s, c, &some(ids)),
                    Conversion::Statement,
                    a.repeat,
                )
                .await
            }
            Method::DOc => {
                convert::convert(
                    self.judge(plan),
                    s,
                    convert::doc_groups(&self.templates, s, masker, &usable, plan.items_per_call as usize),
                    &|ids| {
                        let first = ids.first().copied().unwrap_or_default();
                        let d = s.item(first).and_then(|i| i.dimension()).unwrap_or(0);
                        convert::doc_messages(&self.templates, s, d, masker, &some(ids))
                    },
                    Conversion::Dimension,
                    a.repeat,
                )
                .await
            }
            _ => self.self_report(plan, c, s, a.repeat, a.method, &usable).await,
        }
    }

    /// Self-report options: a bare number is taken as is; anything else is converted by the judge.
    async fn self_report(
        &self,
        plan: &RunPlan,
        c: &Character,
        s: &Scale,
        repeat: u32,
        method: Method,
        answers: &[Exchange],
    ) -> (Vec<ConvertedItem>, Vec<ConversionCall>) {
        let mut items = Vec::new();
        let mut calls = Vec::new();
        let mut unparsed = Vec::new();
        for e in answers {
            // Both self-reports end with the number: a reply that is only that is read, as the
            // original reads both (SR-CoT's reasons, when given, go to the judge), taking out the
            // name it takes out (the first alias). Sessions before that read SR's alone.
            let bare = match (plan.original_reading, method) {
                (true, Method::Sr | Method::SrCot) => {
                    let name = c.aliases.first().unwrap_or(&c.name);
                    judge_json::bare_option(&e.response, s.range, &[name.as_str()])
                }
                (false, Method::Sr) => {
                    let speakers: Vec<&str> = std::iter::once(c.name.as_str())
                        .chain(c.aliases.iter().map(String::as_str))
                        .collect();
                    judge_json::bare_option_before(&e.response, s.range, &speakers)
                }
                _ => None,
            };
            match bare.and_then(|o| convert::score(s, e.item_id, o, Conversion::Statement).map(|sc| (o, sc))) {
                Some((option, sc)) => items.push(ConvertedItem {
                    item_id: e.item_id,
                    option: Some(option),
                    score: Some(sc.value),
                    refused: option == ItemOption::Refused,
                    weighed: None,
                    error: None,
                }),
                None => unparsed.push(e.clone()),
            }
        }
        if !unparsed.is_empty() {
            let groups = convert::oc_groups(&self.templates, s, c, &unparsed, plan.items_per_call as usize);
            let some = |ids: &[u32]| {
                convert::oc_messages(
                    &self.templates,
                    s,
                    c,
                    &unparsed.iter().filter(|e| ids.contains(&e.item_id)).collect::<Vec<_>>(),
                )
            };
            let (converted, asked) =
                convert::convert(self.judge(plan), s, groups, &some, Conversion::Statement, repeat).await;
            items.extend(converted);
            calls = asked;
        }
        items.sort_by_key(|i| i.item_id);
        (items, calls)
    }
}

impl RunPlan {
    /// The query styles the plan's methods read (one interview each).
    fn styles(&self) -> BTreeSet<QueryStyle> {
        self.methods.iter().map(|m| m.query_style()).collect()
    }

    /// Interview items the plan asks in all (answered or not).
    pub fn total_items(&self, catalog: &Catalog) -> usize {
        self.scales
            .iter()
            .filter_map(|s| catalog.scale(s))
            .map(|s| s.scored_items().count())
            .sum::<usize>()
            * self.characters.len()
            * self.repeats as usize
            * self.styles().len()
    }

    /// Dimension assessments the plan makes in all.
    pub fn total_assessments(&self, catalog: &Catalog) -> usize {
        self.scales
            .iter()
            .filter_map(|s| catalog.scale(s))
            .map(|s| s.dimensions.len())
            .sum::<usize>()
            * self.characters.len()
            * self.repeats as usize
            * self.methods.len()
    }
}

impl Study for Interviews {
    type Plan = RunPlan;
    type Step = Event;
    const KIND: Kind = Kind::Interviews;

    fn plan_of(events: &[Event]) -> Option<&RunPlan> {
        events.iter().find_map(|e| match e {
            Event::RunStarted { plan, .. } => Some(plan.as_ref()),
            _ => None,
        })
    }

    fn seed(plan: &RunPlan) -> u64 {
        plan.seed
    }

    fn started(header: SessionHeader, plan: RunPlan, providers: Providers) -> Event {
        Event::RunStarted {
            header,
            plan: Box::new(plan),
            providers,
        }
    }

    fn parent(plan: &RunPlan) -> Option<&str> {
        plan.parent.as_deref()
    }

    fn prepare(plan: &mut RunPlan, prior: &[Event], env: &Env<'_>) -> Result<Prepared<Self>, StudyError> {
        let templates = Templates::from_record(&plan.prompts)?;
        // Before anything is connected: conversion templates that would give the judge no options.
        let oc = plan.methods.iter().any(|m| matches!(m, Method::Oc | Method::Sr | Method::SrCot));
        let doc = plan.methods.contains(&Method::DOc);
        for scale in plan.scales.iter().filter_map(|id| env.catalog.scale(id)) {
            for c in plan.characters.iter().filter_map(|id| env.catalog.character(id)) {
                convert::templates_fill(&templates, scale, c, oc, doc).map_err(TemplateError::Invalid)?;
            }
        }
        let done = Done::from_events(prior);
        // A re-assessment reads its answers from the parent and connects only the judge.
        let (rpa, rpa_info, inherited) = match &plan.parent {
            None => {
                let rpa = (env.connect)(&plan.rpa)?;
                let info = rpa.info();
                (Some(rpa), info, BTreeMap::new())
            }
            Some(parent) => {
                let inherited = match env.parent {
                    Some(events) => reassess::answers(events, &done),
                    None if prior.is_empty() => {
                        return Err(StudyError::Parent(format!(
                            "the parent session {parent} cannot be read"
                        )));
                    }
                    None => BTreeMap::new(),
                };
                let info = env
                    .parent
                    .and_then(|events| events.iter().find_map(|e| e.start()?.providers.get("rpa").cloned()))
                    .or_else(|| prior.iter().find_map(|e| e.start()?.providers.get("rpa").cloned()))
                    .ok_or_else(|| StudyError::Parent(format!("the parent session {parent} names no rpa model")))?;
                (None, info, inherited)
            }
        };
        let judge = (env.connect)(&plan.judge)?;
        // Conversion calls are fitted to the judge. A resumed session keeps its grouping unless this
        // judge cannot hold it; the change is journaled, and every assessment records its calls' items.
        let fits = convert::items_per_call(judge.context_tokens(), plan.answer_sampling.max_tokens) as u32;
        let mut items_per_call = None;
        for e in prior {
            if let Event::Resumed {
                items_per_call: Some(n),
                ..
            } = e
            {
                plan.items_per_call = *n;
            }
        }
        if fits < plan.items_per_call {
            plan.items_per_call = fits;
            items_per_call = (!prior.is_empty()).then_some(fits);
        }
        // The names hidden from the judge: those recorded (the session's start and its resumes, or
        // the parent's), and the current ones; those the records lack are journaled with the resume.
        fold_masked(&mut plan.masked, prior);
        let recorded = plan.masked.clone();
        for id in &plan.characters {
            if let Some(c) = env.catalog.character(id) {
                plan.masked.entry(id.clone()).or_default().add(c);
            }
        }
        let masked: BTreeMap<String, Masked> = match prior.is_empty() {
            true => BTreeMap::new(),
            false => plan
                .masked
                .iter()
                .filter(|(id, m)| recorded.get(*id) != Some(*m))
                .map(|(id, m)| (id.clone(), m.clone()))
                .collect(),
        };
        let mut notes = Vec::new();
        let mut memories = BTreeMap::new();
        for id in &plan.characters {
            let speaker = env.catalog.character(id).map_or(String::new(), |c| c.name.clone());
            match Memories::load(env.data, id, &speaker).map_err(StudyError::Memories)? {
                Some(m) => {
                    memories.insert(id.clone(), Arc::new(m));
                }
                None if plan.style != RpaStyle::Description && plan.parent.is_none() => notes.push(format!(
                    "{id} has no memories (import it with `incharacter import chatharuhi`): no classic scenes in its prompts"
                )),
                None => {}
            }
        }
        // A re-assessment asks no one: its answers are the parent's, given by the parent's versions.
        let character_versions = match (&plan.parent, env.parent) {
            (None, _) => plan
                .characters
                .iter()
                .filter_map(|id| {
                    let c = env.catalog.character(id)?;
                    let chunks = memories.get(id).map_or(&[][..], |m: &Arc<Memories>| &m.chunks[..]);
                    Some((id.clone(), c.version(chunks)))
                })
                .collect(),
            (Some(_), Some(parent)) => super::character_versions(parent),
            (Some(_), None) => BTreeMap::new(),
        };
        let scale_versions: BTreeMap<String, String> = plan
            .scales
            .iter()
            .filter_map(|id| Some((id.clone(), env.catalog.scale(id)?.version())))
            .collect();
        // A re-assessment scores its parent's answers with the scales as they are now: said when
        // they are not what the parent asked with.
        if let (Some(parent), Some(events), true) = (&plan.parent, env.parent, prior.is_empty()) {
            let asked = events.iter().find_map(Event::start).map(|s| s.scale_versions.clone()).unwrap_or_default();
            for (scale, was) in &asked {
                if scale_versions.get(scale).is_some_and(|now| now != was) {
                    notes.push(format!(
                        "scale {scale} has changed since session {parent} asked with it: its answers are scored \
                         with the scale as it is now"
                    ));
                }
            }
        }
        let providers = [("rpa".to_string(), rpa_info), ("judge".to_string(), judge.info())].into();
        Ok(Prepared {
            study: Interviews {
                catalog: env.catalog.clone(),
                rpa,
                judge,
                inherited,
                memories,
                done,
                templates,
            },
            providers,
            notes,
            items_per_call,
            character_versions,
            scale_versions,
            masked,
        })
    }

    fn memories(&self) -> BTreeMap<String, Arc<Memories>> {
        self.memories.clone()
    }

    fn wrap_models(&mut self, wrap: &dyn Fn(Arc<dyn ChatModel>) -> Arc<dyn ChatModel>) {
        self.rpa = self.rpa.take().map(wrap);
        self.judge = wrap(self.judge.clone());
    }

    async fn run(&self, plan: &RunPlan, sink: &UnboundedSender<Event>) {
        self.run_plan(plan, sink).await;
    }

    fn export(events: &[Event], catalog: &Catalog) -> serde_json::Value {
        super::with_adaptations(results::export(events, catalog), events)
    }

    fn failures(events: &[Event]) -> Failures {
        // An item counts as failed while no later answer took its place.
        let items = |answered: bool| -> BTreeSet<_> {
            events
                .iter()
                .filter_map(|e| match e {
                    Event::ItemAnswered {
                        character,
                        scale,
                        repeat,
                        style,
                        item_id,
                        ..
                    } if answered => Some((character, scale, repeat, style, item_id)),
                    Event::ItemFailed {
                        character,
                        scale,
                        repeat,
                        style,
                        item_id,
                        ..
                    } if !answered => Some((character, scale, repeat, style, item_id)),
                    _ => None,
                })
                .collect()
        };
        let failed_items = items(false).difference(&items(true)).count();
        let latest = results::latest_assessments(events);
        Failures {
            items: failed_items,
            assessments: latest.iter().filter(|a| a.score.is_none()).count(),
            left_out: latest
                .iter()
                .filter(|a| a.score.is_some())
                .map(|a| a.failed_items().len())
                .sum(),
        }
    }
}
