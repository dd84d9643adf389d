//! A run as a session on disk, shared by the headless CLI and the TUI: [`prepare`] opens (or resumes)
//! the session, connects the providers and loads memories; [`Prepared::execute`] runs the engine,
//! journals every event as it comes, and writes `results.json` when the plan is complete. Dropping
//! the execution (cancel) leaves a journal that `--resume` finishes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::live::{LiveSink, Observed, Pause};
use super::{Done, Engine, Event, RunPlan, results};
use crate::catalog::Catalog;
use crate::llm::cache::Cache;
use crate::llm::client::Shared;
use crate::llm::config::Config;
use crate::llm::{self, ChatModel};
use crate::rpa::memories::Memories;
use crate::rpa::prompt::RpaStyle;
use crate::session::{self, Journal};
use crate::text::terminal_safe as safe;

pub enum Start {
    New { plan: RunPlan, name: Option<String> },
    Resume { id: String },
}

pub struct Prepared {
    pub id: String,
    pub dir: PathBuf,
    pub plan: RunPlan,
    pub engine: Engine,
    pub done: Done,
    pub journal: Journal,
    /// Things the user should know before the run (e.g. a character without memories).
    pub notes: Vec<String>,
    catalog: Arc<Catalog>,
}

/// The folder of session `id` in `data`, if it has a journal.
pub fn session_dir(data: &Path, id: &str) -> Result<PathBuf, String> {
    let dir = session::sessions_dir(data).join(id);
    if id.contains('/') || id.contains("..") || !dir.join("journal.jsonl").is_file() {
        return Err(format!(
            "no session \"{}\" (`incharacter sessions` lists them)",
            safe(id)
        ));
    }
    Ok(dir)
}

pub fn load_events(dir: &Path) -> Result<Vec<Event>, String> {
    session::read(&dir.join("journal.jsonl")).map_err(|e| safe(&e))
}

/// The plan a journal started with.
pub fn plan_of(events: &[Event]) -> Option<&RunPlan> {
    events.iter().find_map(|e| match e {
        Event::RunStarted { plan, .. } => Some(plan),
        _ => None,
    })
}

/// Opens the session (new or resumed) and everything its run needs. Errors are the user's to fix.
pub fn prepare(
    catalog: Arc<Catalog>,
    config: &Config,
    data: &Path,
    start: Start,
    concurrency: Option<usize>,
) -> Result<Prepared, String> {
    let (id, dir, plan, name, prior) = match start {
        Start::Resume { id } => {
            let dir = session_dir(data, &id)?;
            let events = load_events(&dir)?;
            let plan = plan_of(&events)
                .cloned()
                .ok_or_else(|| format!("session {} has no RunStarted event", safe(&id)))?;
            (id, dir, plan, None, events)
        }
        Start::New { plan, name } => {
            let id = session::new_id(name.as_deref());
            let dir = session::sessions_dir(data).join(&id);
            (id, dir, plan, name, Vec::new())
        }
    };
    let shared = Shared::new(
        concurrency.unwrap_or(config.max_concurrency),
        Some(Cache::new(data.join("cache"))),
        config.cache,
        plan.seed,
    );
    let env = |k: &str| std::env::var(k).ok();
    let connect = |name: &str| -> Result<Arc<dyn ChatModel>, String> {
        Ok(Arc::new(
            llm::connect(config, name, shared.clone(), &env, Some(data)).map_err(|e| e.to_string())?,
        ))
    };
    let rpa = connect(&plan.rpa)?;
    let judge = connect(&plan.judge)?;
    let mut notes = Vec::new();
    let mut memories = BTreeMap::new();
    for id in &plan.characters {
        let speaker = catalog.character(id).map_or(String::new(), |c| c.name.clone());
        match Memories::load(data, id, &speaker).map_err(|e| safe(&e))? {
            Some(m) => {
                memories.insert(id.clone(), Arc::new(m));
            }
            None if plan.style != RpaStyle::Description => notes.push(format!(
                "{id} has no memories (import it with `incharacter import chatharuhi`): no classic scenes in its prompts"
            )),
            None => {}
        }
    }
    let journal_path = dir.join("journal.jsonl");
    let mut journal = Journal::open(&journal_path).map_err(|e| format!("{}: {e}", journal_path.display()))?;
    let written = if prior.is_empty() {
        let providers = [("rpa".to_string(), rpa.info()), ("judge".to_string(), judge.info())]
            .into_iter()
            .collect();
        journal.append(&Event::RunStarted {
            session: id.clone(),
            name,
            created: session::now_rfc3339(),
            app_version: env!("CARGO_PKG_VERSION").into(),
            plan: plan.clone(),
            providers,
        })
    } else {
        journal.append(&Event::Resumed {
            at: session::now_rfc3339(),
        })
    };
    written.map_err(|e| format!("{}: {e}", journal_path.display()))?;
    Ok(Prepared {
        done: Done::from_events(&prior),
        engine: Engine {
            catalog: catalog.clone(),
            rpa,
            judge,
            memories,
        },
        id,
        dir,
        plan,
        journal,
        notes,
        catalog,
    })
}

impl Prepared {
    /// Interview items the plan asks in all (answered or not).
    pub fn total_items(&self) -> usize {
        let styles: std::collections::BTreeSet<_> = self.plan.methods.iter().map(|m| m.query_style()).collect();
        self.plan
            .scales
            .iter()
            .filter_map(|s| self.catalog.scale(s))
            .map(|s| s.scored_items().count())
            .sum::<usize>()
            * self.plan.characters.len()
            * self.plan.repeats as usize
            * styles.len()
    }

    /// Dimension assessments the plan makes in all.
    pub fn total_assessments(&self) -> usize {
        self.plan
            .scales
            .iter()
            .filter_map(|s| self.catalog.scale(s))
            .map(|s| s.dimensions.len())
            .sum::<usize>()
            * self.plan.characters.len()
            * self.plan.repeats as usize
            * self.plan.methods.len()
    }

    /// Runs what the session still lacks. Every event is journaled, then given to `on_event`; with
    /// `live`, model calls are also reported (and held while paused). Returns the session's events.
    pub async fn execute(
        mut self,
        live: Option<(LiveSink, Pause)>,
        mut on_event: impl FnMut(&Event) + Send,
    ) -> Result<Vec<Event>, String> {
        if let Some((sink, pause)) = live {
            let observe = |inner: Arc<dyn ChatModel>| -> Arc<dyn ChatModel> {
                Arc::new(Observed {
                    inner,
                    sink: sink.clone(),
                    pause: pause.clone(),
                })
            };
            self.engine.rpa = observe(self.engine.rpa.clone());
            self.engine.judge = observe(self.engine.judge.clone());
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let journal_path = self.journal.path.clone();
        let fail = |e: std::io::Error| format!("cannot write the journal {}: {e}", journal_path.display());
        let Prepared {
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
        let record = async {
            while let Some(event) = rx.recv().await {
                journal.append(&event)?;
                on_event(&event);
            }
            Ok::<_, std::io::Error>(())
        };
        let (_, recorded) = tokio::join!(work, record);
        recorded.map_err(fail)?;
        self.journal
            .append(&Event::RunFinished {
                status: "complete".into(),
                at: session::now_rfc3339(),
            })
            .map_err(fail)?;
        let events = load_events(&self.dir)?;
        session::write_atomic(&self.dir.join("results.json"), &results::export(&events, &self.catalog))
            .map_err(|e| format!("{}: {e}", self.dir.join("results.json").display()))?;
        Ok(events)
    }
}
