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

/// A new session of `plan`, or one to resume. `P` is the plan of the kind of run.
pub enum Start<P = RunPlan> {
    New { plan: P, name: Option<String> },
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

/// A session folder to write: a new one named after `name`, or an existing one with its events.
/// The session folder to write, its plan and the events it already holds: a new folder named after
/// `name`, or an existing one whose plan `plan_of` finds in its journal.
pub(crate) struct Opened<P> {
    pub id: String,
    pub dir: PathBuf,
    pub plan: P,
    pub name: Option<String>,
    pub prior: Vec<Event>,
}

pub(crate) fn open_session<P: Clone>(
    data: &Path,
    start: Start<P>,
    plan_of: impl Fn(&[Event]) -> Option<&P>,
    kind: &str,
) -> Result<Opened<P>, String> {
    match start {
        Start::Resume { id } => {
            let dir = session_dir(data, &id)?;
            let prior = load_events(&dir)?;
            let plan = plan_of(&prior)
                .cloned()
                .ok_or_else(|| format!("session {} is not {kind}", safe(&id)))?;
            Ok(Opened {
                id,
                dir,
                plan,
                name: None,
                prior,
            })
        }
        Start::New { plan, name } => {
            let id = session::new_id(name.as_deref());
            let dir = session::sessions_dir(data).join(&id);
            Ok(Opened {
                id,
                dir,
                plan,
                name,
                prior: Vec::new(),
            })
        }
    }
}

/// Connects providers by name, sharing one cache, limit and seed.
pub(crate) fn connector<'a>(
    config: &'a Config,
    data: &'a Path,
    seed: u64,
    concurrency: Option<usize>,
) -> impl Fn(&str) -> Result<Arc<dyn ChatModel>, String> + 'a {
    let shared = Shared::new(
        concurrency.unwrap_or(config.max_concurrency),
        Some(Cache::new(data.join("cache"))),
        config.cache,
        seed,
    );
    move |name: &str| {
        let env = |k: &str| std::env::var(k).ok();
        Ok(
            Arc::new(llm::connect(config, name, shared.clone(), &env, Some(data)).map_err(|e| e.to_string())?)
                as Arc<dyn ChatModel>,
        )
    }
}

/// Journals each event `work` sends on `rx`, then hands it to `on_event`, until `work` is done. A
/// journal that cannot be written (disk full, read-only) stops the work at once, so nothing more is
/// asked that could not be kept; the error says how to resume with `incharacter <command> --resume`.
pub(crate) async fn journal_while<T: Into<Event>>(
    work: impl std::future::Future<Output = ()>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
    journal: &mut Journal,
    command: &str,
    id: &str,
    on_event: &mut (impl FnMut(&Event) + Send),
) -> Result<(), String> {
    let path = journal.path.clone();
    let record = async {
        while let Some(event) = rx.recv().await {
            let event = event.into();
            journal.append(&event)?;
            on_event(&event);
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::pin!(work, record);
    let recorded = tokio::select! {
        r = &mut record => r,
        () = &mut work => record.await,
    };
    recorded.map_err(|e| {
        format!(
            "cannot write the journal {}: {e}\nthe run stopped; everything journaled before is kept. \
             Once the data dir is writable again: incharacter {command} --resume {id}",
            path.display()
        )
    })
}

/// Opens the journal and writes `first` for a new session, or `Resumed` for an existing one.
pub(crate) fn open_journal(dir: &Path, resumed: bool, first: impl FnOnce() -> Event) -> Result<Journal, String> {
    open_journal_with(dir, resumed, first, None)
}

/// `open_journal`, with the conversion grouping a resumed run changes to.
fn open_journal_with(
    dir: &Path,
    resumed: bool,
    first: impl FnOnce() -> Event,
    items_per_call: Option<u32>,
) -> Result<Journal, String> {
    let path = dir.join("journal.jsonl");
    let unwritable = |e: std::io::Error| {
        format!(
            "cannot write the journal {}: {e}\nthe data dir must be writable (INCHARACTER_DATA_DIR moves it); \
             nothing was changed",
            path.display()
        )
    };
    let mut journal = Journal::open(&path).map_err(unwritable)?;
    let event = if resumed {
        Event::Resumed {
            at: session::now_rfc3339(),
            items_per_call,
        }
    } else {
        first()
    };
    journal.append(&event).map_err(unwritable)?;
    Ok(journal)
}

/// A model whose calls are reported live and held while paused.
pub(crate) fn observed(inner: Arc<dyn ChatModel>, sink: &LiveSink, pause: &Pause) -> Arc<dyn ChatModel> {
    Arc::new(Observed {
        inner,
        sink: sink.clone(),
        pause: pause.clone(),
    })
}

/// Ends a complete run: `RunFinished` in the journal, then `results.json` from the whole journal.
pub(crate) fn finish(
    journal: &mut Journal,
    dir: &Path,
    export: impl FnOnce(&[Event]) -> serde_json::Value,
) -> Result<Vec<Event>, String> {
    journal
        .append(&Event::RunFinished {
            status: "complete".into(),
            at: session::now_rfc3339(),
        })
        .map_err(|e| format!("cannot write the journal {}: {e}", journal.path.display()))?;
    let events = load_events(dir)?;
    let path = dir.join("results.json");
    session::write_atomic(&path, &export(&events)).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(events)
}

/// Opens the session (new or resumed) and everything its run needs. Errors are the user's to fix.
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
        mut plan,
        name,
        prior,
    } = open_session(data, start, plan_of, "an interview run (it has no RunStarted event)")?;
    let connect = connector(config, data, plan.seed, concurrency);
    let rpa = connect(&plan.rpa)?;
    let judge = connect(&plan.judge)?;
    // Conversion calls are fitted to the judge. A resumed session keeps its grouping unless this judge
    // cannot hold it; the change is journaled, and every assessment records its calls' items.
    let fits = crate::method::convert::items_per_call(judge.context_tokens()) as u32;
    let mut refit = None;
    for e in &prior {
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
        refit = (!prior.is_empty()).then_some(fits);
    }
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
    let journal = open_journal_with(
        &dir,
        !prior.is_empty(),
        || Event::RunStarted {
            session: id.clone(),
            name,
            created: session::now_rfc3339(),
            app_version: env!("CARGO_PKG_VERSION").into(),
            plan: plan.clone(),
            providers: [("rpa".to_string(), rpa.info()), ("judge".to_string(), judge.info())]
                .into_iter()
                .collect(),
        },
        refit,
    )?;
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
            self.engine.rpa = observed(self.engine.rpa.clone(), &sink, &pause);
            self.engine.judge = observed(self.engine.judge.clone(), &sink, &pause);
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
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
        journal_while(work, rx, journal, "run", id, &mut on_event).await?;
        let catalog = self.catalog.clone();
        finish(&mut self.journal, &self.dir, |events| results::export(events, &catalog))
    }
}
