//! What the screens show of a run, built only from the engine's events (journaled [`Event`]s and
//! [`Live`] call reports), so a live run, an opened session and a replay look the same.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::catalog::Catalog;
use crate::llm::{ModelInfo, Role};
use crate::method::Assessment;
use crate::method::interview::{QueryStyle, parse_purpose};
use crate::study::live::{Live, LiveKind};
use crate::study::{Event, RunPlan};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pending,
    Streaming,
    Retrying,
    Answered,
    Cached,
    Failed,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Streaming => "streaming",
            Status::Retrying => "retrying",
            Status::Answered => "answered",
            Status::Cached => "cached",
            Status::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemKey {
    pub character: String,
    pub scale: String,
    pub repeat: u32,
    pub style: QueryStyle,
    pub item_id: u32,
}

#[derive(Debug, Clone)]
pub struct ItemRow {
    pub key: ItemKey,
    pub status: Status,
    pub question: String,
    pub response: String,
    pub retrieved: Vec<usize>,
    /// The answer reached the answer cap (`finish_reason: length`).
    pub truncated: bool,
    pub error: Option<String>,
    /// Index of its answer in the transcript.
    pub message: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Speaker {
    Experimenter(String),
    Character(String),
}

#[derive(Debug, Clone)]
pub struct Message {
    pub speaker: Speaker,
    pub text: String,
    pub streaming: bool,
    /// Its reply was still streaming when the run stopped: what it shows is not kept.
    pub cut: bool,
    pub item: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct SessionInfo {
    pub id: String,
    pub name: Option<String>,
    pub created: String,
    pub plan: Option<RunPlan>,
    pub providers: BTreeMap<String, ModelInfo>,
    /// What the run adapted to its providers (it changes what the method did).
    pub adaptations: Vec<crate::llm::adapt::Adaptation>,
    /// Each character's versions the run recorded (at its start and at each resume), by id.
    pub character_versions: BTreeMap<String, std::collections::BTreeSet<String>>,
}

#[derive(Debug, Clone, Default)]
pub struct RunView {
    pub session: SessionInfo,
    pub items: Vec<ItemRow>,
    index: HashMap<ItemKey, usize>,
    pub transcript: Vec<Message>,
    pub assessments: Vec<Assessment>,
    pub judge_started: usize,
    pub judge_done: usize,
    pub judge_active: usize,
    pub tokens: u64,
    pub retries: usize,
    pub log: VecDeque<String>,
    pub finished: Option<String>,
    /// The plan of an observer run, and its steps so far.
    pub observe: Option<crate::observer::ObservePlan>,
    pub steps: Vec<crate::observer::Step>,
    /// The plan of a RoleBench run, and its steps so far.
    pub rolebench: Option<crate::study::rolebench::RolebenchPlan>,
    pub rolebench_steps: Vec<crate::study::rolebench::Step>,
    /// The dialogue turn (observers) or RoleBench answer being generated: (request purpose, text so far).
    pub streaming_turn: Option<(String, String)>,
    /// (prompt, completion) tokens per role, for the cost estimate.
    pub usage: BTreeMap<&'static str, (u64, u64)>,
    /// What the run had when this sitting began, and what the sitting has made since.
    pub sitting: Sitting,
}

/// A sitting: the run since it started, or since it was last resumed. What it had at its start is
/// not made again (a failed item or assessment is); what it makes gives the rate an ETA goes by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sitting {
    /// Items answered when the sitting began.
    pub items_before: usize,
    /// Dimensions assessed without failure when the sitting began.
    pub assessments_before: usize,
    /// Items answered or failed in the sitting.
    pub items: usize,
    /// Dimensions assessed (or failed) in the sitting.
    pub assessments: usize,
    /// Of `items`, those answered with no request of the sitting seen for them (copied from the
    /// session a re-assessment judges, or read from the cache at once): no part of its pace.
    pub free: usize,
}

impl Sitting {
    /// Items done: answered before, or answered or failed now.
    pub fn items_done(&self) -> usize {
        self.items_before + self.items
    }

    /// Assessments done: made before, or made (or failed) now.
    pub fn assessments_done(&self) -> usize {
        self.assessments_before + self.assessments
    }

    /// What the sitting has made at its pace: not what it copied or read at once.
    pub fn made(&self) -> usize {
        self.items.saturating_sub(self.free) + self.assessments
    }
}

const LOG_LINES: usize = 200;

impl RunView {
    /// The run's calls ended with it (finished, cancelled, stopped): none streams or retries any
    /// more; an item they had not answered waits again.
    pub fn calls_ended(&mut self) {
        for item in &mut self.items {
            if matches!(item.status, Status::Streaming | Status::Retrying) {
                item.status = Status::Pending;
            }
        }
        for message in &mut self.transcript {
            message.cut |= message.streaming;
            message.streaming = false;
        }
        self.streaming_turn = None;
        self.judge_active = 0;
    }

    /// The run's adaptations in short, by role: `judge and rpa temperature: fixed by provider`.
    pub fn adapted(&self) -> Vec<String> {
        self.session
            .adaptations
            .iter()
            .map(|a| {
                let roles = crate::study::roles_of(&self.session.providers, &a.provider, &a.model);
                format!("{roles} {}", a.kind.describe())
            })
            .collect()
    }

    /// The item rows of a plan, in order: character, scale, repeat, style, item.
    pub fn plan_items(&mut self, plan: &RunPlan, catalog: &Catalog) {
        let styles: std::collections::BTreeSet<QueryStyle> = plan.methods.iter().map(|m| m.query_style()).collect();
        for c in &plan.characters {
            for s in &plan.scales {
                let Some(scale) = catalog.scale(s) else { continue };
                for repeat in 0..plan.repeats.max(1) {
                    for &style in &styles {
                        for item in scale.scored_items() {
                            let key = ItemKey {
                                character: c.clone(),
                                scale: s.clone(),
                                repeat,
                                style,
                                item_id: item.id,
                            };
                            if self.index.contains_key(&key) {
                                continue;
                            }
                            self.index.insert(key.clone(), self.items.len());
                            self.items.push(ItemRow {
                                key,
                                status: Status::Pending,
                                question: String::new(),
                                response: String::new(),
                                retrieved: Vec::new(),
                                truncated: false,
                                error: None,
                                message: None,
                            });
                        }
                    }
                }
            }
        }
    }

    pub fn item(&self, key: &ItemKey) -> Option<&ItemRow> {
        self.index.get(key).map(|&i| &self.items[i])
    }

    /// A line for the log that no journal record makes (how a batch is doing).
    pub fn note(&mut self, line: String) {
        self.log(line);
    }

    fn log(&mut self, line: String) {
        if self.log.len() == LOG_LINES {
            self.log.pop_front();
        }
        self.log.push_back(line);
    }

    /// Who asks and who answers: the character's names, or, for a character the catalog no longer
    /// holds (its file removed since the session was recorded), its role and id.
    fn names(&self, catalog: &Catalog, character: &str) -> (String, String) {
        catalog.character(character).map_or_else(
            || ("experimenter".into(), character.to_string()),
            |c| (c.experimenter.clone(), c.name.clone()),
        )
    }

    /// Starts the answer message of item `i` (and the question before it), unless it has one.
    fn open_message(&mut self, catalog: &Catalog, i: usize, question: &str) -> usize {
        if let Some(m) = self.items[i].message {
            return m;
        }
        let (experimenter, name) = self.names(catalog, &self.items[i].key.character);
        self.transcript.push(Message {
            speaker: Speaker::Experimenter(experimenter),
            text: question.to_string(),
            streaming: false,
            cut: false,
            item: Some(i),
        });
        self.transcript.push(Message {
            speaker: Speaker::Character(name),
            text: String::new(),
            streaming: true,
            cut: false,
            item: Some(i),
        });
        let m = self.transcript.len() - 1;
        self.items[i].message = Some(m);
        m
    }

    fn recorded_versions(&mut self, versions: &BTreeMap<String, String>) {
        for (id, version) in versions {
            let known = self.session.character_versions.entry(id.clone()).or_default();
            known.insert(version.clone());
        }
    }

    pub fn apply_event(&mut self, event: &Event, catalog: &Catalog) {
        if let Some(start) = event.start() {
            self.session = SessionInfo {
                id: start.session.to_string(),
                name: start.name.clone(),
                created: start.created.to_string(),
                plan: None,
                providers: start.providers.clone(),
                adaptations: Vec::new(),
                character_versions: BTreeMap::new(),
            };
            self.recorded_versions(start.character_versions);
        }
        match event {
            Event::RunStarted { plan, .. } => {
                self.session.plan = Some(plan.as_ref().clone());
                self.plan_items(plan, catalog);
                self.sitting = Sitting::default();
            }
            Event::Resumed {
                at,
                items_per_call,
                character_versions,
                masked,
            } => {
                // The names the resume masked besides the plan's, as the Inspector shows prompts.
                if let Some(plan) = self.session.plan.as_mut() {
                    crate::study::interview::merge_masked(&mut plan.masked, masked);
                }
                self.recorded_versions(character_versions);
                self.sitting = Sitting {
                    items_before: self.answered(),
                    assessments_before: self.assessments.iter().filter(|a| !a.has_failures()).count(),
                    ..Sitting::default()
                };
                self.log(match items_per_call {
                    Some(n) => format!("resumed at {at}; {n} items per conversion call from here on"),
                    None => format!("resumed at {at}"),
                });
            }
            Event::ItemAnswered {
                character,
                scale,
                repeat,
                style,
                item_id,
                question,
                response,
                retrieved,
                truncated,
            } => {
                let key = ItemKey {
                    character: character.clone(),
                    scale: scale.clone(),
                    repeat: *repeat,
                    style: *style,
                    item_id: *item_id,
                };
                self.item_answered(catalog, &key, (question, response), retrieved, *truncated);
            }
            Event::ItemFailed {
                character,
                scale,
                repeat,
                style,
                item_id,
                error,
            } => {
                let key = ItemKey {
                    character: character.clone(),
                    scale: scale.clone(),
                    repeat: *repeat,
                    style: *style,
                    item_id: *item_id,
                };
                self.item_failed(&key, error);
            }
            Event::DimensionAssessed(a) => self.dimension_assessed(a),
            Event::ObserveStarted { plan, .. } => {
                self.observe = Some(plan.clone());
            }
            Event::Observed(step) => self.observed(step),
            Event::RolebenchStarted { plan, .. } => {
                self.rolebench = Some(plan.as_ref().clone());
            }
            Event::Batch(step) => self.log(step.describe().to_string()),
            Event::Rolebench(step) => self.rolebench_step(step),
            Event::RunFinished { status, .. } => self.finished = Some(status.clone()),
            Event::Stopped { reason, .. } => self.log(format!("stopped: {reason}")),
            Event::Adapted(a) => {
                self.log(format!(
                    "adapted to {} ({}): {}",
                    a.provider,
                    a.model,
                    a.kind.describe()
                ));
                self.session.adaptations.push(a.clone());
            }
            Event::Server(f) => {
                self.log(f.summary().to_string());
                for w in &f.warnings {
                    self.log(format!("warning: {}", w));
                }
            }
        }
    }

    /// An item's answer: its row and its turn of the transcript get the exchange.
    fn item_answered(
        &mut self,
        catalog: &Catalog,
        key: &ItemKey,
        (question, response): (&str, &str),
        retrieved: &[usize],
        truncated: bool,
    ) {
        let Some(&i) = self.index.get(key) else { return };
        self.sitting.items += 1;
        if !matches!(self.items[i].status, Status::Streaming | Status::Retrying) {
            self.sitting.free += 1;
        }
        let question = question.to_string();
        let response = response.to_string();
        let m = self.open_message(catalog, i, &question);
        self.transcript[m].text = response.clone();
        self.transcript[m].streaming = false;
        let row = &mut self.items[i];
        if row.status != Status::Cached {
            row.status = Status::Answered;
        }
        row.question = question;
        row.response = response;
        row.retrieved = retrieved.to_vec();
        row.truncated = truncated;
    }

    /// An item that got no answer: logged, and its row marked failed.
    fn item_failed(&mut self, key: &ItemKey, error: &str) {
        let error = error.to_string();
        self.log(format!(
            "item failed: {} {} #{}: {error}",
            key.character, key.scale, key.item_id
        ));
        if let Some(&i) = self.index.get(key) {
            // (Counted once: its request's failure may have marked it already.)
            if self.items[i].status != Status::Failed {
                self.sitting.items += 1;
            }
            self.items[i].status = Status::Failed;
            self.items[i].error = Some(error);
            if let Some(m) = self.items[i].message {
                self.transcript[m].streaming = false;
            }
        }
    }

    /// A dimension's assessment replaces any earlier one of the same unit, method and dimension.
    fn dimension_assessed(&mut self, a: &Assessment) {
        self.sitting.assessments += 1;
        if let Some(f) = &a.failure {
            self.log(format!(
                "not assessed: {} {} {} {}: {}",
                a.character,
                a.scale,
                a.method.name(),
                a.dimension,
                f
            ));
        }
        let mut a = a.clone();
        for b in &mut a.batches {
            b.analysis = b.analysis.to_string();
        }
        self.assessments.retain(|x| {
            (&x.character, &x.scale, x.method, x.repeat, &x.dimension)
                != (&a.character, &a.scale, a.method, a.repeat, &a.dimension)
        });
        self.assessments.push(a);
    }

    /// A step of an observer run; a finished turn ends the one streaming.
    fn observed(&mut self, step: &crate::observer::Step) {
        if let Some(note) = step.note() {
            self.log(note);
        }
        if matches!(step, crate::observer::Step::Turn { .. }) {
            self.streaming_turn = None;
        }
        self.steps.push(step.clone());
    }

    /// A step of a RoleBench run; an answer ends the one streaming.
    fn rolebench_step(&mut self, step: &crate::study::rolebench::Step) {
        if let crate::study::rolebench::Step::AnswerFailed { line, error } = step {
            self.log(format!("failed: RoleBench line {line}: {}", error));
        }
        if matches!(step, crate::study::rolebench::Step::Answered { .. }) {
            self.streaming_turn = None;
        }
        self.rolebench_steps.push(step.clone());
    }

    pub fn apply_live(&mut self, live: &Live, catalog: &Catalog) {
        let item = parse_purpose(&live.purpose).and_then(|(character, scale, item_id, style)| {
            self.index
                .get(&ItemKey {
                    character: character.to_string(),
                    scale: scale.to_string(),
                    repeat: live.repeat,
                    style,
                    item_id,
                })
                .copied()
        });
        let role = match live.role {
            Role::Rpa => "rpa",
            Role::Judge => "judge",
            Role::Observer => "observer",
        };
        if live.purpose.starts_with("dialogue ") || live.purpose.starts_with("rolebench ") {
            match &live.kind {
                LiveKind::Token(t) => {
                    let entry = self
                        .streaming_turn
                        .get_or_insert_with(|| (live.purpose.clone(), String::new()));
                    if entry.0 != live.purpose {
                        *entry = (live.purpose.clone(), String::new());
                    }
                    entry.1.push_str(t);
                }
                LiveKind::Retry { .. } => self.streaming_turn = None,
                _ => {}
            }
        }
        match (&live.kind, item) {
            // A call may wait for a free slot of its provider after it starts: the item shows as
            // streaming, and enters the transcript, with its first token.
            (LiveKind::Started { prompt }, Some(i)) => {
                self.items[i].question = prompt.to_string();
            }
            // A token after the answer's event (cannot happen on one channel; kept harmless anyway).
            (LiveKind::Token(_), Some(i)) if matches!(self.items[i].status, Status::Answered | Status::Failed) => {}
            (LiveKind::Token(t), Some(i)) => {
                let question = self.items[i].question.clone();
                let m = self.open_message(catalog, i, &question);
                self.transcript[m].text.push_str(t);
                self.items[i].status = Status::Streaming;
            }
            (LiveKind::Retry { attempt, reason }, i) => {
                self.retries += 1;
                if let Some(i) = i {
                    self.items[i].status = Status::Retrying;
                    if let Some(m) = self.items[i].message {
                        self.transcript[m].text.clear();
                    }
                }
                self.log(format!("retry {attempt}: {}: {}", live.purpose, reason));
            }
            (LiveKind::Done { cached, usage }, i) => {
                // A reply read from the cache was paid for when it was made.
                if let Some(u) = usage.filter(|_| !*cached) {
                    self.tokens += u.prompt_tokens + u.completion_tokens;
                    let entry = self.usage.entry(role).or_default();
                    entry.0 += u.prompt_tokens;
                    entry.1 += u.completion_tokens;
                }
                if let Some(i) = i {
                    if *cached {
                        self.items[i].status = Status::Cached;
                    }
                } else if live.role == Role::Judge {
                    self.judge_done += 1;
                    self.judge_active = self.judge_active.saturating_sub(1);
                }
            }
            (LiveKind::Failed(e), i) => {
                // An item's request failed for good: the item failed, whether or not its journal
                // says so again (a resume that fails as the last sitting did records nothing new).
                if let Some(i) = i
                    && !matches!(self.items[i].status, Status::Answered | Status::Cached | Status::Failed)
                {
                    self.sitting.items += 1;
                    self.items[i].status = Status::Failed;
                    self.items[i].error.get_or_insert_with(|| e.clone());
                    if let Some(m) = self.items[i].message {
                        self.transcript[m].streaming = false;
                    }
                }
                if i.is_none() && live.role == Role::Judge {
                    self.judge_done += 1;
                    self.judge_active = self.judge_active.saturating_sub(1);
                }
                self.log(format!("failed: {}: {}", live.purpose, e));
            }
            (LiveKind::Started { .. }, None) if live.role == Role::Judge => {
                self.judge_started += 1;
                self.judge_active += 1;
            }
            _ => {}
        }
    }

    pub fn answered(&self) -> usize {
        self.items
            .iter()
            .filter(|r| matches!(r.status, Status::Answered | Status::Cached))
            .count()
    }

    pub fn failed(&self) -> usize {
        self.items.iter().filter(|r| r.status == Status::Failed).count()
    }

    /// Whether the judge is working on the unit of `key` (its answers are in, its dimensions are not).
    pub fn judging(&self, key: &ItemKey) -> bool {
        if self.judge_active == 0 || self.finished.is_some() {
            return false;
        }
        let Some(plan) = &self.session.plan else { return false };
        let done = self
            .assessments
            .iter()
            .filter(|a| a.character == key.character && a.scale == key.scale && a.repeat == key.repeat)
            .count();
        let all_answered = self
            .items
            .iter()
            .filter(|r| r.key.character == key.character && r.key.scale == key.scale && r.key.repeat == key.repeat)
            .all(|r| matches!(r.status, Status::Answered | Status::Cached | Status::Failed));
        all_answered && done < plan.methods.len()
    }

    /// Characters, scales and repeats present in the assessments, in plan order.
    pub fn units(&self) -> Vec<(String, String, u32)> {
        let mut out: Vec<(String, String, u32)> = Vec::new();
        if let Some(plan) = &self.session.plan {
            for c in &plan.characters {
                for s in &plan.scales {
                    for r in 0..plan.repeats.max(1) {
                        out.push((c.clone(), s.clone(), r));
                    }
                }
            }
        }
        out
    }
}
