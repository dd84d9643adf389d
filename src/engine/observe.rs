//! An observer run as a session: the same journal as interviews (`ObserveStarted`, then one `Observed`
//! event per step), resumable without asking anything twice, `results.json` written when complete.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Event;
use super::live::{LiveSink, Pause};
use super::runner::{Opened, connector, finish, journal_while, observed, open_journal, open_session};
use crate::catalog::Catalog;
use crate::llm::config::Config;
use crate::observer::run::ObserveEngine;
use crate::observer::{Done, ObservePlan, SCALE, Step, report};
use crate::session::{self, Journal};

pub type Start = super::runner::Start<ObservePlan>;

pub struct Prepared {
    pub id: String,
    pub dir: PathBuf,
    pub plan: ObservePlan,
    pub engine: ObserveEngine,
    pub done: Done,
    pub journal: Journal,
    catalog: Arc<Catalog>,
}

pub fn plan_of(events: &[Event]) -> Option<&ObservePlan> {
    events.iter().find_map(|e| match e {
        Event::ObserveStarted { plan, .. } => Some(plan),
        _ => None,
    })
}

pub fn steps(events: &[Event]) -> impl Iterator<Item = &Step> {
    events.iter().filter_map(|e| match e {
        Event::Observed(s) => Some(s),
        _ => None,
    })
}

pub fn prepare(
    catalog: Arc<Catalog>,
    config: &Config,
    data: &Path,
    start: Start,
    concurrency: Option<usize>,
) -> Result<Prepared, String> {
    let Opened {
        id,
        dir,
        plan,
        name,
        prior,
    } = open_session(data, start, plan_of, "an observer run")?;
    let connect = connector(config, data, plan.seed, concurrency);
    let subject_model = connect(&plan.subject_provider)?;
    let observer_model = connect(&plan.observer_provider)?;
    let journal = open_journal(&dir, !prior.is_empty(), || Event::ObserveStarted {
        session: id.clone(),
        name,
        created: session::now_rfc3339(),
        app_version: env!("CARGO_PKG_VERSION").into(),
        plan: plan.clone(),
        providers: [
            ("subject".to_string(), subject_model.info()),
            ("observer".to_string(), observer_model.info()),
        ]
        .into_iter()
        .collect(),
    })?;
    Ok(Prepared {
        done: Done::from_steps(steps(&prior)),
        engine: ObserveEngine {
            catalog: catalog.clone(),
            subject_model,
            observer_model,
        },
        id,
        dir,
        plan,
        journal,
        catalog,
    })
}

impl Prepared {
    /// Runs what the session lacks, journaling each step before handing it to `on_event`.
    pub async fn execute(
        mut self,
        live: Option<(LiveSink, Pause)>,
        mut on_event: impl FnMut(&Event) + Send,
    ) -> Result<Vec<Event>, String> {
        if let Some((sink, pause)) = live {
            self.engine.subject_model = observed(self.engine.subject_model.clone(), &sink, &pause);
            self.engine.observer_model = observed(self.engine.observer_model.clone(), &sink, &pause);
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Step>();
        let Prepared {
            id,
            engine,
            plan,
            done,
            journal,
            ..
        } = &mut self;
        let work = async {
            engine.run(plan, done, &tx).await;
            drop(tx);
        };
        journal_while(work, rx, journal, "observe", id, &mut on_event).await?;
        let catalog = self.catalog.clone();
        finish(&mut self.journal, &self.dir, |events| export(events, &catalog))
    }
}

/// Subjects' results of an observer session.
pub fn subjects(events: &[Event], catalog: &Catalog) -> Option<(ObservePlan, Vec<report::SubjectResult>)> {
    let plan = plan_of(events)?.clone();
    let scale = catalog.scale(SCALE)?;
    let done = Done::from_steps(steps(events));
    let name_of = |id: &str| catalog.character(id).map_or(id.to_string(), |c| c.name.clone());
    let subjects = report::results(&plan, &done, scale, name_of);
    Some((plan, subjects))
}

/// `export --format json` (and results.json) of an observer session.
pub fn export(events: &[Event], catalog: &Catalog) -> serde_json::Value {
    let Some((plan, subjects)) = subjects(events, catalog) else {
        return serde_json::Value::Null;
    };
    let scale = catalog.scale(SCALE).expect("checked by subjects");
    let stats = report::statistics(&subjects, scale, plan.seed);
    let session = events
        .iter()
        .find_map(|e| match e {
            Event::ObserveStarted {
                session,
                created,
                app_version,
                plan,
                providers,
                name,
            } => Some(serde_json::json!({
                "id": session, "name": name, "created": created, "app_version": app_version,
                "plan": plan, "providers": providers, "seed": plan.seed, "kind": "observers",
            })),
            _ => None,
        })
        .unwrap_or_default();
    report::export(session, &subjects, &stats)
}
