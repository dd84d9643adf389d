//! The lifecycle every study goes through: [`Run::open`] makes a new session folder (or reopens one
//! to resume), connects the study's providers with one shared cache and limits, and writes the first
//! record (or `Resumed`); [`Run::execute`] runs the study, journaling each record before anyone else
//! sees it, and ends a complete run with `RunFinished` and `results.json`. Dropping the execution
//! (cancel), a journal that cannot be written or a provider that cannot be reached leave a journal
//! that `--resume` finishes.

use std::path::PathBuf;
use std::sync::Arc;

use super::{SessionError, Store, new_id, sessions_dir};
use crate::catalog::Catalog;
use crate::journal::{self, Journal};
use crate::llm::cache::Cache;
use crate::llm::client::{Shared, Unreachable};
use crate::llm::config::Config;
use crate::llm::{self, ChatModel};
use crate::study::live::{LiveSink, Observed, Pause};
use crate::study::{Env, Event, SessionHeader, Study, VersionChange, version_changes};

/// A new session of `plan`, or one to resume.
pub enum Start<P> {
    New { plan: P, name: Option<String> },
    Resume { id: String },
}

/// A session open for running.
pub struct Run<S: Study> {
    pub id: String,
    pub dir: PathBuf,
    pub plan: S::Plan,
    pub study: S,
    /// Things the user should know before the run (e.g. a character without memories).
    pub notes: Vec<String>,
    /// A resume: the characters edited since the session recorded them (the run goes on with the
    /// new versions, which `Resumed` records).
    pub changed: Vec<VersionChange>,
    journal: Journal,
    catalog: Arc<Catalog>,
    shared: Shared,
}

/// Connects providers by name, sharing one cache, one set of limits and one seed.
pub fn connector<'a>(
    config: &'a Config,
    store: &'a Store,
    shared: &'a Shared,
) -> impl Fn(&str) -> Result<Arc<dyn ChatModel>, llm::LlmError> + 'a {
    move |name: &str| {
        let env = |k: &str| std::env::var(k).ok();
        Ok(Arc::new(llm::connect(config, name, shared.clone(), &env, Some(store.data()))?) as Arc<dyn ChatModel>)
    }
}

impl<S: Study> Run<S> {
    /// Opens the session (new or resumed) and everything its run needs.
    pub fn open(
        catalog: Arc<Catalog>,
        config: &Config,
        store: &Store,
        start: Start<S::Plan>,
        concurrency: Option<usize>,
    ) -> Result<Run<S>, SessionError> {
        let (id, dir, mut plan, name, prior) = match start {
            Start::Resume { id } => {
                let dir = store.own(&id)?;
                let prior = store.load(&dir)?;
                let plan = S::plan_of(&prior).cloned().ok_or_else(|| SessionError::WrongKind {
                    id: id.clone(),
                    expected: S::KIND.name(),
                })?;
                (id, dir, plan, None, prior)
            }
            Start::New { plan, name } => {
                let id = new_id(name.as_deref());
                let dir = sessions_dir(store.data()).join(&id);
                (id, dir, plan, name, Vec::new())
            }
        };
        let shared = Shared::new(
            concurrency.unwrap_or(config.max_concurrency),
            Some(Cache::new(store.data().join("cache"))),
            config.cache,
            S::seed(&plan),
        );
        // A new re-assessment needs its parent; a resumed one has copied what it could read of it.
        let parent = match S::parent(&plan) {
            None => None,
            Some(parent) => match store.find(parent).and_then(|dir| store.load(&dir)) {
                Ok(events) => Some(events),
                Err(e) if prior.is_empty() => return Err(e),
                Err(_) => None,
            },
        };
        // A resume starts with what the providers already refused.
        shared.adapter.known(&crate::study::adaptations(&prior));
        let prepared = {
            let connect = connector(config, store, &shared);
            let env = Env {
                catalog: &catalog,
                data: store.data(),
                connect: &connect,
                parent: parent.as_deref(),
            };
            S::prepare(&mut plan, &prior, &env)?
        };
        let path = dir.join("journal.jsonl");
        let unwritable = |source| SessionError::Unwritable {
            path: path.clone(),
            source,
        };
        let mut journal = Journal::open(&path).map_err(unwritable)?;
        let changed = version_changes(&prior, &prepared.character_versions);
        let first = if prior.is_empty() {
            S::started(
                SessionHeader {
                    session: id.clone(),
                    name,
                    created: journal::now_rfc3339(),
                    app_version: env!("CARGO_PKG_VERSION").into(),
                    character_versions: prepared.character_versions,
                },
                plan.clone(),
                prepared.providers,
            )
        } else {
            Event::Resumed {
                at: journal::now_rfc3339(),
                items_per_call: prepared.items_per_call,
                character_versions: prepared.character_versions,
            }
        };
        journal.append(&first).map_err(unwritable)?;
        Ok(Run {
            id,
            dir,
            plan,
            study: prepared.study,
            notes: prepared.notes,
            changed,
            journal,
            catalog,
            shared,
        })
    }

    /// Runs what the session still lacks. Every record is journaled, then given to `on_event`; with
    /// `live`, model calls are also reported (and held while paused). Returns the session's records.
    pub async fn execute(
        mut self,
        live: Option<(LiveSink, Pause)>,
        mut on_event: impl FnMut(&Event) + Send,
    ) -> Result<Vec<Event>, SessionError> {
        if let Some((sink, pause)) = live {
            self.study.wrap_models(&|inner| {
                Arc::new(Observed {
                    inner,
                    sink: sink.clone(),
                    pause: pause.clone(),
                }) as Arc<dyn ChatModel>
            });
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<S::Step>();
        let shared = self.shared.clone();
        let path = self.journal.path.clone();
        let unwritable = |source| SessionError::Unwritable {
            path: path.clone(),
            source,
        };
        let stopped = {
            let Run {
                study, plan, journal, ..
            } = &mut self;
            let work = async {
                study.run(plan, &tx).await;
                drop(tx);
            };
            let adapter = shared.adapter.clone();
            let record = async {
                while let Some(step) = rx.recv().await {
                    // What a provider refused is journaled before the step its adapted request made.
                    for event in adapter.take_fresh().into_iter().map(Event::Adapted).chain([step.into()]) {
                        journal.append(&event)?;
                        on_event(&event);
                    }
                }
                for event in adapter.take_fresh().into_iter().map(Event::Adapted) {
                    journal.append(&event)?;
                    on_event(&event);
                }
                Ok::<_, std::io::Error>(())
            };
            let unreachable = shared.unreachable();
            tokio::pin!(work, record, unreachable);
            // A journal that cannot be written stops the work at once, so nothing more is asked that
            // could not be kept; so does a provider that no longer answers at all.
            tokio::select! {
                biased;
                r = &mut record => {
                    r.map_err(unwritable)?;
                    None
                }
                () = &mut work => {
                    record.await.map_err(unwritable)?;
                    None
                }
                u = &mut unreachable => Some(u),
            }
        };
        if let Some(u) = stopped.or_else(|| shared.unreachable_now()) {
            // The work is dropped; what it finished before that is kept, not asked again.
            while let Ok(step) = rx.try_recv() {
                let event: Event = step.into();
                self.journal.append(&event).map_err(unwritable)?;
                on_event(&event);
            }
            return Err(unreachable_error(u));
        }
        self.finish()
    }

    /// Ends a complete run: `RunFinished` in the journal, then `results.json` from the whole journal.
    fn finish(mut self) -> Result<Vec<Event>, SessionError> {
        self.journal
            .append(&Event::RunFinished {
                status: "complete".into(),
                at: journal::now_rfc3339(),
            })
            .map_err(|source| SessionError::Unwritable {
                path: self.journal.path.clone(),
                source,
            })?;
        let events: Vec<Event> = journal::read(&self.journal.path)?;
        let path = self.dir.join("results.json");
        journal::write_atomic(&path, &S::export(&events, &self.catalog))
            .map_err(|source| SessionError::Results { path, source })?;
        Ok(events)
    }
}

fn unreachable_error(u: Unreachable) -> SessionError {
    if u.refused {
        return SessionError::Refused {
            provider: u.provider,
            base_url: u.base_url,
            reason: u.reason,
            n: crate::llm::policy::REFUSED_AFTER,
        };
    }
    SessionError::Unreachable {
        provider: u.provider,
        base_url: u.base_url,
        reason: u.reason,
    }
}
