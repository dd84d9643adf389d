//! Observers as a study: the journal holds `ObserveStarted`, then one `Observed` record per step; a
//! resume asks nothing twice; the export scores the reports on IPIP-50 and compares them.

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use super::{Env, Event, Failures, Kind, Prepared, Providers, SessionHeader, Study, StudyError};
use crate::catalog::Catalog;
use crate::llm::ChatModel;
use crate::observer::run::ObserveEngine;
use crate::observer::{Done, ObservePlan, SCALE, Step, report};

/// The observer study: the engine and what the journal holds.
pub struct Observers {
    pub engine: ObserveEngine,
    pub done: Done,
}

pub fn steps(events: &[Event]) -> impl Iterator<Item = &Step> {
    events.iter().filter_map(|e| match e {
        Event::Observed(s) => Some(s),
        _ => None,
    })
}

impl Study for Observers {
    type Plan = ObservePlan;
    type Step = Step;
    const KIND: Kind = Kind::Observers;

    fn plan_of(events: &[Event]) -> Option<&ObservePlan> {
        events.iter().find_map(|e| match e {
            Event::ObserveStarted { plan, .. } => Some(plan),
            _ => None,
        })
    }

    fn seed(plan: &ObservePlan) -> u64 {
        plan.seed
    }

    fn started(header: SessionHeader, plan: ObservePlan, providers: Providers) -> Event {
        Event::ObserveStarted {
            header,
            plan,
            providers,
        }
    }

    fn prepare(plan: &mut ObservePlan, prior: &[Event], env: &Env<'_>) -> Result<Prepared<Self>, StudyError> {
        let subject_model = (env.connect)(&plan.subject_provider)?;
        let observer_model = (env.connect)(&plan.observer_provider)?;
        let providers = [
            ("subject".to_string(), subject_model.info()),
            ("observer".to_string(), observer_model.info()),
        ]
        .into();
        // The characters whose prompts the subjects speak from: a resume is refused without one, and
        // says which were edited since. Versioned with their memories, as interviews version them,
        // so that one character has one version wherever it was measured.
        let mut character_versions = std::collections::BTreeMap::new();
        for c in plan.subjects.iter().filter_map(|s| s.character.as_deref()).filter_map(|id| env.catalog.character(id)) {
            let chunks = crate::rpa::memories::chunks(env.data, &c.id).map_err(StudyError::Memories)?.unwrap_or_default();
            character_versions.insert(c.id.clone(), c.version(&chunks));
        }
        Ok(Prepared {
            study: Observers {
                engine: ObserveEngine {
                    catalog: env.catalog.clone(),
                    subject_model,
                    observer_model,
                },
                done: Done::from_steps(steps(prior)),
            },
            providers,
            notes: Vec::new(),
            masked: Default::default(),
            items_per_call: None,
            character_versions,
            scale_versions: env
                .catalog
                .scale(crate::observer::SCALE)
                .map(|s| (crate::observer::SCALE.to_string(), s.version()))
                .into_iter()
                .collect(),
        })
    }

    fn wrap_models(&mut self, wrap: &dyn Fn(Arc<dyn ChatModel>) -> Arc<dyn ChatModel>) {
        self.engine.subject_model = wrap(self.engine.subject_model.clone());
        self.engine.observer_model = wrap(self.engine.observer_model.clone());
    }

    async fn run(&self, plan: &ObservePlan, sink: &UnboundedSender<Step>) {
        self.engine.run(plan, &self.done, sink).await;
    }

    fn export(events: &[Event], catalog: &Catalog) -> serde_json::Value {
        super::with_adaptations(export(events, catalog), events)
    }

    /// Reports the plan asks for and the journal lacks (self-reports and observer reports).
    fn failures(events: &[Event]) -> Failures {
        let Some(plan) = Self::plan_of(events) else {
            return Failures::default();
        };
        let done = Done::from_steps(steps(events));
        let missing = plan
            .subjects
            .iter()
            .map(|s| {
                usize::from(!done.self_reports.contains_key(&s.id))
                    + s.observers
                        .iter()
                        .filter(|o| !done.reports.contains_key(&(s.id.clone(), o.id.clone())))
                        .count()
            })
            .sum();
        Failures {
            items: 0,
            assessments: missing,
            left_out: 0,
        }
    }
}

/// Subjects' results of an observer session.
pub fn subjects(events: &[Event], catalog: &Catalog) -> Option<(ObservePlan, Vec<report::SubjectResult>)> {
    let plan = Observers::plan_of(events)?.clone();
    let scale = catalog.scale(SCALE)?;
    let done = Done::from_steps(steps(events));
    let name_of = |id: &str| catalog.character(id).map_or(id.to_string(), |c| c.name.clone());
    let subjects = report::results(&plan, &done, scale, name_of);
    Some((plan, subjects))
}

/// `export --format json` (and results.json) of an observer session.
fn export(events: &[Event], catalog: &Catalog) -> serde_json::Value {
    let Some((plan, subjects)) = subjects(events, catalog) else {
        return serde_json::Value::Null;
    };
    let Some(scale) = catalog.scale(SCALE) else {
        return serde_json::Value::Null;
    };
    let stats = report::statistics(&subjects, scale, plan.seed);
    let session = events
        .iter()
        .find_map(|e| match e {
            Event::ObserveStarted {
                header: h,
                plan,
                providers,
            } => Some(serde_json::json!({
                "id": h.session, "name": h.name, "created": h.created, "app_version": h.app_version,
                "plan": plan, "providers": providers, "seed": plan.seed, "kind": "observers",
            })),
            _ => None,
        })
        .unwrap_or_default();
    let mut export = report::export(session, &subjects, &stats);
    if let Some(object) = export.as_object_mut() {
        object.insert("left_out".into(), serde_json::json!(left_out(events)));
        object.insert("failed".into(), serde_json::json!(failed(events)));
        object.insert("reasked".into(), serde_json::json!(reasked(events)));
    }
    export
}

/// A questionnaire the session lacks, and the failure that ended it (the last journaled).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Failure {
    pub subject: String,
    /// `None` for the subject's self-report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observer: Option<String>,
    /// The step that failed: "self-report", "relationship", "scenarios", "dialogue N", "report".
    pub what: String,
    pub error: String,
}

/// The self-reports and observer reports the plan asks for and the journal lacks, each with the
/// failure that left it out (one whose run was only interrupted has none and is not listed).
pub fn failed(events: &[Event]) -> Vec<Failure> {
    use crate::observer::Step;
    let Some(plan) = Observers::plan_of(events) else {
        return Vec::new();
    };
    let done = Done::from_steps(steps(events));
    let missing = |subject: &str, observer: Option<&str>| match observer {
        None => !done.self_reports.contains_key(subject),
        Some(o) => !done.reports.contains_key(&(subject.to_string(), o.to_string())),
    };
    let mut out: Vec<Failure> = Vec::new();
    for step in steps(events) {
        let (subject, observer) = match step {
            Step::Relationship { subject, observer, .. }
            | Step::Scenarios { subject, observer, .. }
            | Step::Turn { subject, observer, .. }
            | Step::Report { subject, observer, .. } => (subject, Some(observer)),
            Step::SelfReport { subject, .. } => (subject, None),
            Step::Failed { subject, observer, .. } | Step::Reasked { subject, observer, .. } => {
                (subject, observer.as_ref())
            }
        };
        // A later step of the same questionnaire's run (a resume that got past the failure) makes
        // the failure history: only the last one that ended it counts.
        out.retain(|f| (&f.subject, f.observer.as_ref()) != (subject, observer));
        if let Step::Failed { what, error, .. } = step
            && plan.subjects.iter().any(|s| s.id == *subject)
            && missing(subject, observer.map(String::as_str))
        {
            out.push(Failure {
                subject: subject.clone(),
                observer: observer.cloned(),
                what: what.clone(),
                error: error.clone(),
            });
        }
    }
    out
}

/// How many calls took a reply only after a re-ask (each a `reasked` record with its attempts),
/// each once ([`crate::observer::reasked_calls`]).
pub fn reasked(events: &[Event]) -> usize {
    let steps = events.iter().filter_map(|e| match e {
        Event::Observed(step) => Some(step),
        _ => None,
    });
    crate::observer::reasked_calls(steps).values().map(|calls| calls.len()).sum()
}

/// What one questionnaire left out (no usable answer after each item's own re-ask).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LeftOut {
    pub subject: String,
    /// `None` for the subject's self-report.
    pub observer: Option<String>,
    pub items: Vec<u32>,
}

impl LeftOut {
    /// Whose questionnaire it is, in words.
    pub fn whose(&self) -> String {
        match &self.observer {
            Some(o) => format!("{o}'s report on {}", self.subject),
            None => format!("{}'s self-report", self.subject),
        }
    }
}

/// The items each questionnaire left out, in journal order (the newest report of each subject and
/// observer, as the results keep it).
pub fn left_out(events: &[Event]) -> Vec<LeftOut> {
    use crate::observer::Step;
    let mut newest: Vec<(&String, Option<&String>, &Vec<u32>)> = Vec::new();
    for e in events {
        let report = match e {
            Event::Observed(Step::SelfReport { subject, left_out, .. }) => (subject, None, left_out),
            Event::Observed(Step::Report {
                subject,
                observer,
                left_out,
                ..
            }) => (subject, Some(observer), left_out),
            _ => continue,
        };
        newest.retain(|r| (r.0, r.1) != (report.0, report.1));
        newest.push(report);
    }
    newest
        .into_iter()
        .filter(|(_, _, items)| !items.is_empty())
        .map(|(subject, observer, items)| LeftOut {
            subject: subject.clone(),
            observer: observer.cloned(),
            items: items.clone(),
        })
        .collect()
}
