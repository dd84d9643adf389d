//! Studies: the kinds of run the workbench makes (interviews, observers, RoleBench). Each implements
//! [`Study`]: its plan, what its journal already holds, the engine that makes the missing model calls,
//! and the export of its results. A study never touches the terminal or a session's files: `session`
//! gives it connected models and journals what it sends (a study reads only the characters' imported
//! memories); the TUI and the CLI render what it concludes.
//!
//! [`Event`] is the journal's record, one JSON object per line. Its JSON is a contract: every recorded
//! session, the bundled samples included, must keep loading and exporting exactly as before.

pub mod check;
pub mod interview;
pub mod live;
pub mod observe;
pub mod rolebench;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedSender;

use crate::catalog::Catalog;
use crate::llm::{ChatModel, LlmError, ModelInfo};
use crate::method::Assessment;
use crate::method::interview::QueryStyle;
use crate::fault::{Classify, Fault};

pub use interview::{Interviews, RunPlan};
pub use observe::Observers;
pub use rolebench::Rolebench;

/// The model behind each role of a session (`rpa`, `judge`, `subject`, `observer`).
pub type Providers = BTreeMap<String, ModelInfo>;

/// What every session's first record says before its plan, whatever its kind. (Each start record
/// then has its `plan` and its `providers`, in that order, as journals always had.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    pub session: String,
    pub name: Option<String>,
    pub created: String,
    pub app_version: String,
    /// The version ([`crate::domain::character::Character::version`]) of each character the run
    /// gives a role-playing agent, by id. Sessions older than the field, and kinds that record none,
    /// have none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub character_versions: BTreeMap<String, String>,
    /// The version ([`crate::domain::scale::Scale::version`]) of each scale the run asks or scores
    /// with, by id. Sessions older than the field, and kinds that record none, have none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scale_versions: BTreeMap<String, String>,
    /// The batch mode the run was started in (`None`: it streams its requests). A resume goes on
    /// in it even when the run was stopped before it sent any batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchStart>,
}

/// The batch mode a run was started in, as its first record keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum BatchStart {
    /// The providers' Batch API (`run --batch`).
    Api,
    /// Requests files for an offline engine, written into `dir` (`run --batch-files DIR`).
    Files { dir: std::path::PathBuf },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        #[serde(flatten)]
        header: SessionHeader,
        /// Boxed: it is the largest record, and would make every event as large.
        plan: Box<RunPlan>,
        providers: Providers,
    },
    Resumed {
        at: String,
        /// Items per conversion call from here on, when the judge cannot hold the plan's number.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        items_per_call: Option<u32>,
        /// The characters' versions from here on, when the run records them (they may have been
        /// edited since the session started).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        character_versions: BTreeMap<String, String>,
        /// Interviews: the names masked from here on, when they are more than the plan records (a
        /// character renamed while its session was interrupted): later sittings and
        /// re-assessments mask them too.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        masked: BTreeMap<String, crate::study::interview::Masked>,
    },
    ItemAnswered {
        character: String,
        scale: String,
        repeat: u32,
        style: QueryStyle,
        item_id: u32,
        question: String,
        response: String,
        /// Memories retrieved into the prompt (chatharuhi style), by index.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        retrieved: Vec<usize>,
        /// The answer reached the answer cap (`finish_reason: length`): kept as the method's cap
        /// made it, and marked.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
    },
    ItemFailed {
        character: String,
        scale: String,
        repeat: u32,
        style: QueryStyle,
        item_id: u32,
        error: String,
    },
    DimensionAssessed(Assessment),
    /// The start of an observer run (instead of `RunStarted`).
    ObserveStarted {
        #[serde(flatten)]
        header: SessionHeader,
        plan: crate::observer::ObservePlan,
        providers: Providers,
    },
    /// One step of an observer run.
    Observed(crate::observer::Step),
    /// The start of a RoleBench run (instead of `RunStarted`).
    RolebenchStarted {
        #[serde(flatten)]
        header: SessionHeader,
        /// Boxed: it holds the questions, and would make every event as large.
        plan: Box<rolebench::RolebenchPlan>,
        providers: Providers,
    },
    /// One step of a RoleBench run.
    Rolebench(rolebench::Step),
    RunFinished {
        status: String,
        at: String,
    },
    /// The sitting stopped before the run was done, for a reason the session should show (its cost
    /// cap reached); a resume goes on from here.
    Stopped {
        reason: String,
        at: String,
    },
    /// A provider refused part of a request in a documented way; its requests go adapted from here.
    Adapted(crate::llm::adapt::Adaptation),
    /// What a provider's server said about itself on first contact (its context, its slots), and
    /// what the run used because of it.
    Server(crate::llm::server::Facts),
    /// A step of batch mode: a phase's requests written or submitted, a batch ended, results imported.
    Batch(crate::llm::batch::Step),
}

/// An export with `session.adaptations`: what providers refused and how the run adapted (it changes
/// what the method did, e.g. a judge at the provider's fixed temperature).
pub fn with_adaptations(mut export: serde_json::Value, events: &[Event]) -> serde_json::Value {
    if let Some(session) = export.get_mut("session").and_then(serde_json::Value::as_object_mut) {
        session.insert("adaptations".into(), serde_json::json!(adaptations(events)));
        session.insert("servers".into(), serde_json::json!(servers(events)));
    }
    export
}

/// What the providers' servers said of themselves, as the journal records it (the latest per
/// provider: a resume asks again).
pub fn servers(events: &[Event]) -> Vec<crate::llm::server::Facts> {
    let mut latest: BTreeMap<String, crate::llm::server::Facts> = BTreeMap::new();
    for e in events {
        if let Event::Server(f) = e {
            latest.insert(f.provider.clone(), f.clone());
        }
    }
    latest.into_values().collect()
}

/// The adaptations a session's journal records.
pub fn adaptations(events: &[Event]) -> Vec<crate::llm::adapt::Adaptation> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Adapted(a) => Some(a.clone()),
            _ => None,
        })
        .collect()
}

/// The roles (`rpa`, `judge`, …) a session gave to a provider and model, joined: `judge and rpa`
/// (`provider` when none did).
pub fn roles_of(providers: &Providers, provider: &str, model: &str) -> String {
    let roles: Vec<&str> = providers
        .iter()
        .filter(|(_, m)| m.provider == provider && m.model == model)
        .map(|(role, _)| role.as_str())
        .collect();
    if roles.is_empty() {
        "provider".into()
    } else {
        roles.join(" and ")
    }
}

/// What a session adapted to its providers, by role: `judge temperature: fixed by provider (…): why`.
pub fn adaptation_lines(events: &[Event]) -> Vec<String> {
    let providers = events
        .iter()
        .find_map(|e| e.start().map(|s| s.providers.clone()))
        .unwrap_or_default();
    adaptations(events)
        .iter()
        .map(|a| {
            format!(
                "{} {} ({} {}): {}",
                roles_of(&providers, &a.provider, &a.model),
                a.kind.describe(),
                a.provider,
                a.model,
                a.detail
            )
        })
        .collect()
}

/// Whether the last sitting finished with every answer and score: nothing is left to resume.
pub fn complete(events: &[Event]) -> bool {
    finished(events) && !failures_any(events).any()
}

/// Whether the session's last sitting ended its run: a `RunFinished` after the last `Resumed` (a
/// resume that was stopped leaves the session unfinished, whatever an earlier sitting ended with).
pub fn finished(events: &[Event]) -> bool {
    events
        .iter()
        .rev()
        .take_while(|e| !matches!(e, Event::Resumed { .. }))
        .any(|e| matches!(e, Event::RunFinished { .. }))
}

/// The error most often recorded since the last resume, how many times, and the role whose
/// requests ended so where the record says (`rpa` for an answer, `judge` for an assessment or a
/// verdict, `subject` for a self-report, `observer` for an observer's relationship, scenarios or
/// report).
pub fn commonest_error(events: &[Event]) -> Option<(String, usize, Option<&'static str>)> {
    let since = events
        .iter()
        .rposition(|e| matches!(e, Event::Resumed { .. }))
        .unwrap_or(0);
    // Errors that differ only in their numbers (a prompt's tokens, an item's id) are one error,
    // said in the words of its first record.
    // One error of several roles (a provider down for subject and observer alike) is one error,
    // whose role is said only when it is one.
    let mut counts: BTreeMap<String, (usize, &str, Option<Option<&'static str>>)> = BTreeMap::new();
    for e in &events[since..] {
        let error = match e {
            Event::ItemFailed { error, .. } => Some((error.as_str(), Some("rpa"))),
            // Not assessed because its answers failed: those failures are counted, not this.
            Event::DimensionAssessed(a) => a
                .failure
                .as_deref()
                .filter(|f| !f.starts_with(interview::ITEMS_FAILED))
                .map(|f| (f, Some("judge"))),
            // A dialogue's turns are both sides': whose failed the record does not say.
            Event::Observed(crate::observer::Step::Failed { error, what, .. }) => Some((
                error.as_str(),
                match what.as_str() {
                    "self-report" => Some("subject"),
                    "relationship" | "scenarios" | "report" => Some("observer"),
                    _ => None,
                },
            )),
            Event::Rolebench(rolebench::Step::AnswerFailed { error, .. }) => Some((error.as_str(), Some("rpa"))),
            Event::Rolebench(rolebench::Step::Judged { failure, .. }) => failure.as_deref().map(|f| (f, Some("judge"))),
            _ => None,
        };
        if let Some((error, role)) = error {
            let shape: String = error
                .chars()
                .map(|c| if c.is_ascii_digit() { '0' } else { c })
                .collect();
            let seen = counts.entry(shape).or_insert((0, error, Some(role)));
            seen.0 += 1;
            if seen.2 != Some(role) {
                seen.2 = None;
            }
        }
    }
    // The most frequent; among equals, the first in text order (deterministic).
    let (_, (n, error, role)) = counts.into_iter().rev().max_by_key(|(_, (n, ..))| *n)?;
    Some((error.to_string(), n, role.flatten()))
}

/// The kinds of study, as sessions lists and exports name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Interviews,
    Observers,
    Rolebench,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Interviews => "interviews",
            Kind::Observers => "observers",
            Kind::Rolebench => "rolebench",
        }
    }

    /// The subcommand that starts (and resumes) this kind of study.
    pub fn command(self) -> &'static str {
        match self {
            Kind::Interviews => "run",
            Kind::Observers => "observe",
            Kind::Rolebench => "rolebench",
        }
    }
}

/// The first event of a session, whichever kind of run it is.
pub struct SessionStart<'a> {
    pub session: &'a str,
    pub name: &'a Option<String>,
    pub created: &'a str,
    pub providers: &'a BTreeMap<String, ModelInfo>,
    pub kind: Kind,
    pub character_versions: &'a BTreeMap<String, String>,
    pub scale_versions: &'a BTreeMap<String, String>,
    pub batch: Option<&'a BatchStart>,
}

/// An observer step, as its journal records it.
impl From<crate::observer::Step> for Event {
    fn from(step: crate::observer::Step) -> Event {
        Event::Observed(step)
    }
}

impl Event {
    /// The start of a session, if this is its first record.
    pub fn start(&self) -> Option<SessionStart<'_>> {
        let (header, providers, kind) = match self {
            Event::RunStarted { header, providers, .. } => (header, providers, Kind::Interviews),
            Event::ObserveStarted { header, providers, .. } => (header, providers, Kind::Observers),
            Event::RolebenchStarted { header, providers, .. } => (header, providers, Kind::Rolebench),
            _ => return None,
        };
        Some(SessionStart {
            session: &header.session,
            name: &header.name,
            created: &header.created,
            providers,
            kind,
            character_versions: &header.character_versions,
            scale_versions: &header.scale_versions,
            batch: header.batch.as_ref(),
        })
    }
}

/// The kind of a session, from its first record.
pub fn kind_of(events: &[Event]) -> Option<Kind> {
    events.iter().find_map(|e| e.start().map(|s| s.kind))
}

/// Checks what a journal's records claim against the catalog's scales, so that no figure is ever
/// computed from a record no run writes: a dimension the scale lacks, a score outside its range.
/// Records of scales this catalog does not know (a user scale since removed) are taken as written.
/// The error is (line, what is wrong).
pub fn check_records(records: &[(usize, Event)], catalog: &Catalog) -> Result<(), (usize, String)> {
    const SLACK: f64 = 1e-9;
    let within = |x: f64, (lo, hi): (f64, f64)| x.is_finite() && x >= lo - SLACK && x <= hi + SLACK;
    // An interview session's records are of the characters and scales its plan names.
    let (plan, versions) = records
        .iter()
        .find_map(|(_, e)| match e {
            Event::RunStarted { plan, header, .. } => Some((plan, &header.scale_versions)),
            _ => None,
        })
        .unzip();
    // An item id is checked against the scale the session was recorded on: a bundled one, or one's
    // own when its version is the one the session recorded (it may have changed since).
    // An assessment's items are of its dimension.
    let unknown_item = |scale: &str, id: u32, of: Option<&str>| {
        let known = catalog.scale(scale)?;
        let same = catalog.user_files(crate::catalog::Kind::Scale, &known.id).is_empty()
            || versions.and_then(|v| v.get(scale).or_else(|| v.get(&known.id))) == Some(&known.version());
        if !same {
            return None;
        }
        let Some(item) = known.item(id) else {
            return Some(format!("scale {scale} has no item {id}"));
        };
        let dimension = of?;
        (known.dimension_index(dimension).is_some() && item.dimension() != known.dimension_index(dimension))
            .then(|| format!("item {id} of {scale} is not of its dimension {dimension}"))
    };
    // An item is answered once: a second answer (a line copied by hand) would be exported twice and
    // one of the two taken by a re-assessment.
    let mut answered = std::collections::HashMap::new();
    for (line, event) in records {
        if let Event::ItemAnswered {
            character,
            scale,
            repeat,
            style,
            item_id,
            ..
        } = event
        {
            let key = (
                character.to_ascii_lowercase(),
                scale.to_ascii_lowercase(),
                *repeat,
                format!("{style:?}"),
                *item_id,
            );
            if let Some(first) = answered.insert(key, *line) {
                return Err((
                    *line,
                    format!(
                        "item {item_id} of {character} on {scale} (repeat {repeat}) is answered a second time \
                         (first on line {first})"
                    ),
                ));
            }
        }
        let named = match event {
            Event::ItemAnswered { character, scale, .. } | Event::ItemFailed { character, scale, .. } => {
                Some((character, scale))
            }
            Event::DimensionAssessed(a) => Some((&a.character, &a.scale)),
            _ => None,
        };
        // Ids compare as the catalog looks them up: without regard to ASCII case.
        let among = |list: &[String], id: &str| list.iter().any(|p| p.eq_ignore_ascii_case(id));
        if let (Some(plan), Some((character, scale))) = (plan, named) {
            if !among(&plan.characters, character) {
                return Err((*line, format!("character \"{character}\" is not in the session's plan")));
            }
            if !among(&plan.scales, scale) {
                return Err((*line, format!("scale \"{scale}\" is not in the session's plan")));
            }
            let repeat = match event {
                Event::ItemAnswered { repeat, .. } | Event::ItemFailed { repeat, .. } => *repeat,
                Event::DimensionAssessed(a) => a.repeat,
                _ => 0,
            };
            if repeat >= plan.repeats {
                return Err((
                    *line,
                    format!("repeat {repeat} is past the session's plan, which has {} repeat(s), counted from 0", plan.repeats),
                ));
            }
            if let Event::DimensionAssessed(a) = event
                && !plan.methods.contains(&a.method)
            {
                return Err((*line, format!("method {} is not in the session's plan", a.method.name())));
            }
        }
        let (items, of): (Vec<u32>, Option<&str>) = match event {
            Event::ItemAnswered { item_id, .. } | Event::ItemFailed { item_id, .. } => (vec![*item_id], None),
            Event::DimensionAssessed(a) => {
                let converted = a.items.iter().map(|i| i.item_id);
                let rated = a.batches.iter().flat_map(|b| b.item_ids.iter().copied());
                (converted.chain(rated).collect(), Some(a.dimension.as_str()))
            }
            _ => (Vec::new(), None),
        };
        if let Some((_, scale)) = named
            && let Some(wrong) = items.into_iter().find_map(|id| unknown_item(scale, id, of))
        {
            return Err((*line, wrong));
        }
        if let Event::DimensionAssessed(a) = event {
            let mut seen = std::collections::BTreeSet::new();
            if let Some(twice) = a.items.iter().find(|i| !seen.insert(i.item_id)) {
                return Err((
                    *line,
                    format!("{} {}: item {} is converted twice", a.scale, a.dimension, twice.item_id),
                ));
            }
        }
        let Event::DimensionAssessed(a) = event else { continue };
        let Some(scale) = catalog.scale(&a.scale) else { continue };
        let at = |what: String| (*line, format!("{} {}: {what}", a.scale, a.dimension));
        if scale.dimension_index(&a.dimension).is_none() {
            return Err(at(format!("no dimension of that name in scale {}", scale.id)));
        }
        let dimension = scale.dimension_range();
        let shown = |(lo, hi): (f64, f64)| format!("{lo}–{hi}");
        if let Some(score) = a.score.filter(|x| !within(*x, dimension)) {
            return Err(at(format!(
                "score {score} is outside the scale's range {}",
                shown(dimension)
            )));
        }
        for rating in &a.batches {
            if let Some(score) = rating.score.filter(|x| !within(*x, dimension)) {
                return Err(at(format!(
                    "a rating of {score} is outside the scale's range {}",
                    shown(dimension)
                )));
            }
        }
        let items = (f64::from(scale.range.min), f64::from(scale.range.max));
        for item in &a.items {
            if let Some(score) = item.score.filter(|x| !within(*x, items)) {
                return Err(at(format!(
                    "item {} scored {score}, outside the scale's options {}",
                    item.item_id,
                    shown(items)
                )));
            }
        }
    }
    Ok(())
}

/// The characters' versions a session's first record gives (none for sessions older than them).
pub fn character_versions(events: &[Event]) -> BTreeMap<String, String> {
    events
        .iter()
        .find_map(|e| e.start().map(|s| s.character_versions.clone()))
        .unwrap_or_default()
}

/// The versions of `character` a resume recorded after the first record's, in journal order (a
/// character edited while its session was interrupted); each one once.
pub fn later_versions(events: &[Event], character: &str) -> Vec<String> {
    let mut seen: Vec<String> = character_versions(events).get(character).cloned().into_iter().collect();
    let mut later = Vec::new();
    for e in events {
        if let Event::Resumed { character_versions, .. } = e
            && let Some(v) = character_versions.get(character)
            && !seen.contains(v)
        {
            seen.push(v.clone());
            later.push(v.clone());
        }
    }
    later
}

/// A character whose version changed between a session's start (or last resume) and its resume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionChange {
    pub character: String,
    pub recorded: String,
    pub current: String,
}

/// The first 12 hex digits of a version: enough to tell versions apart on a line.
pub fn short_version(version: &str) -> &str {
    version.get(..12).unwrap_or(version)
}

impl std::fmt::Display for VersionChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "character {} changed since the session recorded it (version {}, now {}): its remaining answers come from the new version",
            self.character,
            short_version(&self.recorded),
            short_version(&self.current)
        )
    }
}

/// The characters whose `current` version differs from the last one `prior` (a journal) records:
/// the first record's, updated by every resume's.
pub fn version_changes(prior: &[Event], current: &BTreeMap<String, String>) -> Vec<VersionChange> {
    let mut recorded = character_versions(prior);
    for e in prior {
        if let Event::Resumed { character_versions, .. } = e {
            recorded.extend(character_versions.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    current
        .iter()
        .filter_map(|(character, now)| {
            let then = recorded.get(character)?;
            (then != now).then(|| VersionChange {
                character: character.clone(),
                recorded: then.clone(),
                current: now.clone(),
            })
        })
        .collect()
}

/// Connects a provider by name.
pub type Connect<'a> = dyn Fn(&str) -> Result<Arc<dyn ChatModel>, LlmError> + 'a;

/// What a study needs from the session that runs it.
pub struct Env<'a> {
    pub catalog: &'a Arc<Catalog>,
    /// The data dir (imported memories live there).
    pub data: &'a Path,
    /// Connects a provider by name, sharing the run's cache and limits.
    pub connect: &'a Connect<'a>,
    /// The records of the session the plan names as its parent ([`Study::parent`]), when it can be read.
    pub parent: Option<&'a [Event]>,
}

/// A study ready to run, and what its session records about it.
pub struct Prepared<S> {
    pub study: S,
    /// The model behind each role, recorded in a new session's first record.
    pub providers: Providers,
    /// Things the user should know before the run (e.g. a character without memories).
    pub notes: Vec<String>,
    /// Interviews: the items per conversion call a resume changes to (journaled in `Resumed`).
    pub items_per_call: Option<u32>,
    /// The versions of the characters the study role-plays, by id (recorded in the first record, and
    /// in `Resumed`).
    pub character_versions: BTreeMap<String, String>,
    /// The versions of the scales the study asks or scores with, by id (recorded in the first
    /// record; a resume on another version is refused).
    pub scale_versions: BTreeMap<String, String>,
    /// Interviews: names a resume masks beyond what its records hold (journaled in `Resumed`).
    pub masked: BTreeMap<String, crate::study::interview::Masked>,
}

/// Why a study could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error(transparent)]
    Provider(#[from] LlmError),
    /// A character's imported memories cannot be read.
    #[error("{0}")]
    Memories(String),
    /// A re-assessment whose parent session cannot be used.
    #[error("{0}")]
    Parent(String),
    /// The plan's prompt templates cannot be used.
    #[error(transparent)]
    Prompts(#[from] crate::templates::TemplateError),
}

impl Classify for StudyError {
    /// The user's input (config, files) or the machine.
    fn fault(&self) -> Fault {
        let input = match self {
            StudyError::Provider(e) => e.is_input(),
            StudyError::Memories(_) | StudyError::Parent(_) | StudyError::Prompts(_) => true,
        };
        if input { Fault::Input } else { Fault::Machine }
    }
}

/// What failed in a finished run: interview items (or answers, dialogues) and assessments (or reports,
/// verdicts), and the items an assessment that did score left out (an option conversion that could not
/// read an item's option). A run with failures exits non-zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failures {
    pub items: usize,
    pub assessments: usize,
    pub left_out: usize,
}

impl Failures {
    pub fn any(self) -> bool {
        self.items + self.assessments + self.left_out > 0
    }

    /// What failed in a session of `kind`, in words: "2 interview item(s), 1 dimension assessment(s)".
    pub fn describe(self, kind: Kind) -> String {
        let (items, assessments) = match kind {
            Kind::Interviews => ("interview item(s)", "dimension assessment(s)"),
            Kind::Observers => ("dialogue step(s)", "report(s)"),
            Kind::Rolebench => ("question(s) unanswered", "verdict(s)"),
        };
        let mut parts = Vec::new();
        if self.items > 0 {
            parts.push(format!("{} {items}", self.items));
        }
        if self.assessments > 0 {
            parts.push(format!("{} {assessments}", self.assessments));
        }
        if self.left_out > 0 {
            parts.push(format!("{} item(s) left out of scored dimensions", self.left_out));
        }
        parts.join(", ")
    }
}

/// One kind of run. The session lifecycle (open → journal → execute → finish → resume) is generic over
/// it; so are the CLI driver and the TUI's run task.
pub trait Study: Sized + Send + Sync + 'static {
    type Plan: Clone + Send + Sync + 'static;
    /// What the engine reports as it goes; each becomes one journal record.
    type Step: Into<Event> + Send + 'static;
    const KIND: Kind;

    /// The plan a journal started with (`None`: the journal is of another kind).
    fn plan_of(events: &[Event]) -> Option<&Self::Plan>;

    /// The session whose records the plan builds on (a re-assessment's parent): the session reads it
    /// and gives it to [`Study::prepare`].
    fn parent(_plan: &Self::Plan) -> Option<&str> {
        None
    }

    /// The seed every random choice of the run derives from (retry jitter included).
    fn seed(plan: &Self::Plan) -> u64;

    /// The first record of a new session.
    fn started(header: SessionHeader, plan: Self::Plan, providers: Providers) -> Event;

    /// Connects the plan's providers and reads what `prior` (the journal so far) already holds. May
    /// adapt the plan to the models (a judge with a small context).
    fn prepare(plan: &mut Self::Plan, prior: &[Event], env: &Env<'_>) -> Result<Prepared<Self>, StudyError>;

    /// The characters' imported memories the study's prompts draw on (the inspector shows them).
    fn memories(&self) -> BTreeMap<String, Arc<crate::rpa::memories::Memories>> {
        BTreeMap::new()
    }

    /// Wraps every model the study calls (live reporting and pausing).
    fn wrap_models(&mut self, wrap: &dyn Fn(Arc<dyn ChatModel>) -> Arc<dyn ChatModel>);

    /// Makes every call the journal lacks, sending each step to `sink` as it completes.
    fn run(
        &self,
        plan: &Self::Plan,
        sink: &UnboundedSender<Self::Step>,
    ) -> impl std::future::Future<Output = ()> + Send;

    /// `export --format json` and `results.json`.
    fn export(events: &[Event], catalog: &Catalog) -> serde_json::Value;

    /// What failed, as the journal ends.
    fn failures(events: &[Event]) -> Failures;
}

/// The JSON export of any session, by the kind its journal is of.
/// A session's export as kept in the folder `dir`: its `session.id` is the folder's name, which every
/// command finds it by (a copied or renamed folder is a session of that name); the id its journal
/// was started under, when another, is `session.started_as`.
pub fn export_in(dir: &std::path::Path, export: serde_json::Value) -> serde_json::Value {
    let mut export = export;
    let folder = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    if let (Some(folder), Some(session)) = (folder, export.get_mut("session").and_then(|s| s.as_object_mut()))
        && session.get("id").and_then(|id| id.as_str()).is_some_and(|id| id != folder)
        && let Some(was) = session.insert("id".into(), folder.into())
    {
        session.insert("started_as".into(), was);
    }
    export
}

pub fn export_any(events: &[Event], catalog: &Catalog) -> serde_json::Value {
    match kind_of(events) {
        Some(Kind::Rolebench) => Rolebench::export(events, catalog),
        Some(Kind::Observers) => Observers::export(events, catalog),
        _ => Interviews::export(events, catalog),
    }
}

/// What a session's journal leaves failed, by the kind it is of.
pub fn failures_any(events: &[Event]) -> Failures {
    match kind_of(events) {
        Some(Kind::Rolebench) => Rolebench::failures(events),
        Some(Kind::Observers) => Observers::failures(events),
        _ => Interviews::failures(events),
    }
}

/// The models a session gave its roles, in one phrase: `m (kind)` when every role had the same one,
/// else each distinct one with the roles it served (`rpa m (openai) · judge n (local)`), the role
/// that speaks first (rpa, subject, agent) first.
pub fn models_phrase(providers: &Providers) -> String {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    let first = ["rpa", "subject", "agent"];
    let mut roles: Vec<(&String, &ModelInfo)> = providers.iter().collect();
    roles.sort_by_key(|(role, _)| !first.contains(&role.as_str()));
    for (role, m) in roles {
        let model = format!("{} ({})", m.model, m.kind);
        match groups.iter_mut().find(|(g, _)| *g == model) {
            Some((_, rs)) => rs.push(role),
            None => groups.push((model, vec![role])),
        }
    }
    match groups.as_slice() {
        [] => String::new(),
        [(model, _)] => model.clone(),
        _ => groups
            .iter()
            .map(|(model, rs)| format!("{} {model}", rs.join("+")))
            .collect::<Vec<_>>()
            .join(" · "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An observer session's failures name whose requests they were, where the record says.
    #[test]
    fn the_commonest_failure_of_an_observer_run_names_its_role() {
        let failed = |what: &str| {
            Event::Observed(crate::observer::Step::Failed {
                subject: "s".into(),
                observer: None,
                what: what.into(),
                error: "no usable reply".into(),
            })
        };
        for (what, role) in [
            ("self-report", Some("subject")),
            ("report", Some("observer")),
            ("scenarios", Some("observer")),
            ("dialogue 2", None),
        ] {
            assert_eq!(
                commonest_error(&[failed(what), failed(what)]),
                Some(("no usable reply".to_string(), 2, role)),
                "{what}"
            );
        }
        // One provider down for subject and observer alike: one error, counted whole, whose role
        // is not one (before: 1× the subject's, as often as the observer's).
        let both = [failed("self-report"), failed("relationship"), failed("dialogue 1")];
        assert_eq!(commonest_error(&both), Some(("no usable reply".to_string(), 3, None)));
    }

    /// Items refused as too long for the context (each with its own token count) are the run's
    /// commonest error, the answerer's; the dimensions they left unassessed are not the judge's.
    #[test]
    fn the_commonest_failure_groups_numbers_and_leaves_out_what_failed_items_caused() {
        let item = |id: u32, tokens: u32| Event::ItemFailed {
            character: "c".into(),
            scale: "GSE".into(),
            repeat: 0,
            style: QueryStyle::Open,
            item_id: id,
            error: format!("the prompt has {tokens} tokens; the model's context is 500"),
        };
        let unassessed = |dimension: &str| {
            let mut a: crate::method::Assessment = serde_json::from_value(serde_json::json!({
                "character": "c", "scale": "GSE", "method": "er-batch", "repeat": 0,
                "dimension": dimension, "score": null
            }))
            .unwrap();
            a.failure = Some("interview items [1, 2] failed".into());
            Event::DimensionAssessed(a)
        };
        let events = [item(1, 612), item(2, 587), unassessed("GSE"), unassessed("GSE"), unassessed("GSE")];
        assert_eq!(
            commonest_error(&events),
            Some((
                "the prompt has 612 tokens; the model's context is 500".to_string(),
                2,
                Some("rpa")
            ))
        );
    }

    #[test]
    fn one_model_is_named_once_and_different_ones_with_their_roles() {
        let info = |model: &str, kind: &str| ModelInfo {
            provider: kind.into(),
            kind: kind.into(),
            model: model.into(),
            sha256: None,
        };
        let same: Providers = [("judge", info("m", "local")), ("rpa", info("m", "local"))]
            .map(|(r, m)| (r.to_string(), m))
            .into();
        assert_eq!(models_phrase(&same), "m (local)");
        let two: Providers = [("judge", info("smollm2-135m", "local")), ("rpa", info("smollm2", "openai"))]
            .map(|(r, m)| (r.to_string(), m))
            .into();
        assert_eq!(models_phrase(&two), "rpa smollm2 (openai) · judge smollm2-135m (local)");
        let observers: Providers = [
            ("observer", info("a", "local")),
            ("subject", info("b", "local")),
            ("reporter", info("a", "local")),
        ]
        .map(|(r, m)| (r.to_string(), m))
        .into();
        assert_eq!(models_phrase(&observers), "subject b (local) · observer+reporter a (local)");
        assert_eq!(models_phrase(&Providers::new()), "");
    }

    /// The header is flattened into the first record: the same keys in the same order as before it
    /// was shared, so a new journal's first line reads like an old one's.
    #[test]
    fn a_start_record_keeps_its_keys_in_order_and_reads_back() {
        let line = r#"{"event":"observe_started","session":"s","name":null,"created":"2026-01-01T00:00:00Z","app_version":"0.1.0","plan":{"subjects":[],"scenarios":1,"turn_cap":2,"temperature":1.0,"subject_provider":"local","observer_provider":"local","self_report":"batched","seed":3,"max_attempts":5},"providers":{"subject":{"provider":"local","kind":"local","model":"m"}},"ts_ms":1}"#;
        let event: Event = serde_json::from_str(line).unwrap();
        let start = event.start().unwrap();
        assert_eq!((start.session, start.kind), ("s", Kind::Observers));
        let back = serde_json::to_value(&event).unwrap();
        let keys: Vec<&str> = back.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "event",
                "session",
                "name",
                "created",
                "app_version",
                "plan",
                "providers"
            ]
        );
        assert_eq!(serde_json::from_value::<Event>(back).unwrap(), event);
    }

    /// A resume compares with the last versions the journal records, and a journal older than
    /// versions compares with nothing.
    #[test]
    fn an_export_names_the_session_by_its_folder_and_keeps_the_id_it_started_under() {
        let export = serde_json::json!({"session": {"id": "20261207-1", "name": "x"}, "interviews": []});
        let copied = export_in(std::path::Path::new("/data/sessions/my-copy"), export.clone());
        assert_eq!(copied["session"]["id"], "my-copy");
        assert_eq!(copied["session"]["started_as"], "20261207-1");
        assert_eq!(copied["interviews"], export["interviews"]);
        let same = export_in(std::path::Path::new("/data/sessions/20261207-1"), export.clone());
        assert_eq!(same, export, "a folder of its own id: as it was");
    }

    #[test]
    fn a_resume_finds_the_characters_edited_since_the_last_record() {
        let versions = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(c, v)| (c.to_string(), v.to_string())).collect()
        };
        let line = r#"{"event":"run_started","session":"s","name":null,"created":"2026-01-01T00:00:00Z","app_version":"0.1.0","character_versions":{"anna":"a1","bo":"b1"},"plan":{"characters":["anna","bo"],"scales":["GSE"],"methods":["er-batch"],"repeats":1,"rpa":"p","judge":"p","style":"description","seed":1,"max_attempts":5},"providers":{}}"#;
        let mut journal: Vec<Event> = vec![serde_json::from_str(line).unwrap()];
        assert_eq!(character_versions(&journal), versions(&[("anna", "a1"), ("bo", "b1")]));
        let now = versions(&[("anna", "a2"), ("bo", "b1"), ("cy", "c1")]);
        let changes = version_changes(&journal, &now);
        let [change] = &changes[..] else { panic!("{changes:?}") };
        assert_eq!(
            (
                change.character.as_str(),
                change.recorded.as_str(),
                change.current.as_str()
            ),
            ("anna", "a1", "a2")
        );
        journal.push(Event::Resumed {
            at: "later".into(),
            items_per_call: None,
            character_versions: now.clone(),
            masked: BTreeMap::new(),
        });
        assert!(version_changes(&journal, &now).is_empty(), "the resume recorded them");
        assert_eq!(later_versions(&journal, "anna"), ["a2"]);
        assert!(later_versions(&journal, "bo").is_empty());
        let old: Event =
            serde_json::from_str(&line.replace(r#""character_versions":{"anna":"a1","bo":"b1"},"#, "")).unwrap();
        assert!(version_changes(std::slice::from_ref(&old), &now).is_empty());
        assert!(
            !serde_json::to_string(&old).unwrap().contains("character_versions"),
            "an old record writes back as it was"
        );
        let change = VersionChange {
            character: "anna".into(),
            recorded: "0123456789abcdef".into(),
            current: "fedcba9876543210".into(),
        };
        assert_eq!(
            change.to_string(),
            "character anna changed since the session recorded it (version 0123456789ab, now fedcba987654): its remaining answers come from the new version"
        );
    }

    /// Observer steps sit inside the tagged record; their item maps keep numeric keys through it.
    #[test]
    fn an_observer_report_reads_back_from_its_record() {
        use crate::domain::scoring::ItemOption;
        let event = Event::Observed(crate::observer::Step::Report {
            left_out: Vec::new(),
            asked_again: Vec::new(),
            subject: "s1".into(),
            observer: "o1".into(),
            items: [(1, ItemOption::Value(4)), (2, ItemOption::Refused)]
                .into_iter()
                .collect(),
        });
        let json = serde_json::to_string(&event).unwrap();
        assert!(json.contains("\"items\":{\"1\":4,\"2\":\"x\"}"), "{json}");
        assert_eq!(serde_json::from_str::<Event>(&json).unwrap(), event);
    }
}
