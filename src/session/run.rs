//! The lifecycle every study goes through: [`Run::open`] makes a new session folder (or reopens one
//! to resume), connects the study's providers with one shared cache and limits, and writes the first
//! record (a resume's `Resumed` goes with the first record the sitting adds); [`Run::execute`] runs the study, journaling each record before anyone else
//! sees it, and ends a complete run with `RunFinished` and `results.json`. Dropping the execution
//! (cancel), a journal that cannot be written or a provider that cannot be reached leave a journal
//! that `--resume` finishes.

use std::path::PathBuf;
use std::sync::Arc;

use super::batch::{BatchMode, Batching, Import};
use super::{SessionError, Store, new_id, sessions_dir};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::journal::{self, Journal};
use crate::llm::batch::{Counted, Watched};
use crate::llm::cache::Cache;
use crate::llm::client::{Shared, Unreachable};
use crate::llm::{self, ChatModel};
use crate::study::live::{LiveSink, Observed, Pause};
use crate::study::{Env, Event, SessionHeader, Study, VersionChange, version_changes};
use tokio::sync::oneshot;

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
    /// A resume's `Resumed` record: journaled with the first record the sitting adds (not before, so
    /// a sitting that adds nothing leaves the journal as it was), and given here for a view that
    /// replays the journal before the run goes on.
    pub resumed: Option<Event>,
    journal: Journal,
    catalog: Arc<Catalog>,
    shared: Shared,
    /// Batch mode, when the run sends its phases as batches.
    batching: Option<Batching>,
    /// The most the run may spend (USD at the providers' prices) before it stops.
    max_cost: Option<f64>,
}

/// How an execution ended.
pub enum Ended {
    /// The run is complete: the session's records.
    Complete(Vec<Event>),
    /// Batch files mode: a phase's requests are written here, and the run waits for their results.
    Waiting(PathBuf),
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

/// Connects providers for batch mode: clients whose attempts park in the hub, with no limit on how
/// many may wait; with the Batch API, each provider's API is kept for the coordinator.
fn batch_connector<'a>(
    config: &'a Config,
    shared: &'a Shared,
    batching: &'a Batching,
) -> impl Fn(&str) -> Result<Arc<dyn ChatModel>, llm::LlmError> + 'a {
    use crate::config::ProviderKind;
    use crate::llm::batch::{BatchApi, BatchTransport, UNLIMITED};
    use crate::llm::client::Client;
    move |name: &str| {
        let provider = config
            .provider(name)
            .ok_or_else(|| llm::LlmError::Config(format!("unknown provider \"{name}\"")))?;
        if provider.kind != ProviderKind::Openai {
            return Err(llm::LlmError::Config(format!(
                "provider \"{name}\" is the embedded model: batch mode needs an OpenAI-compatible provider \
                 (the Batch API, or a model name for an offline engine's batch file)"
            )));
        }
        batching
            .prices
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(provider.name.clone(), (provider.price_in_per_mtok, provider.price_out_per_mtok));
        // A batch holds a whole phase; the provider's pace is for requests sent one by one.
        let mut provider = provider.clone();
        provider.max_concurrency = UNLIMITED;
        provider.requests_per_minute = None;
        provider.tokens_per_minute = None;
        if batching.mode == BatchMode::Api {
            let key = provider.resolve_key(&|k: &str| std::env::var(k).ok())?;
            let api = Arc::new(BatchApi::new(provider.clone(), key)?);
            batching
                .apis
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(provider.name.clone(), api);
        }
        let files = batching.mode != BatchMode::Api;
        let transport = Arc::new(BatchTransport::new(batching.hub.clone(), provider.clone(), files, shared.accounting.clone()));
        Ok(Arc::new(Client::new(transport, provider, shared.clone())) as Arc<dyn ChatModel>)
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
        Self::open_with(catalog, config, store, start, concurrency, None)
    }

    /// Opens the session to run in batch mode; `import` holds results checked against the phase the
    /// session waits for ([`super::batch::check_import`]).
    pub fn open_batch(
        catalog: Arc<Catalog>,
        config: &Config,
        store: &Store,
        start: Start<S::Plan>,
        mode: BatchMode,
        import: Option<Import>,
    ) -> Result<Run<S>, SessionError> {
        Self::open_with(catalog, config, store, start, None, Some((mode, import)))
    }

    fn open_with(
        catalog: Arc<Catalog>,
        config: &Config,
        store: &Store,
        start: Start<S::Plan>,
        concurrency: Option<usize>,
        batch: Option<(BatchMode, Option<Import>)>,
    ) -> Result<Run<S>, SessionError> {
        // A resume takes the journal before it reads it: what it reads is then what no one else
        // appends to, and a second writer is refused before it asks anything.
        let mut locked = None;
        let (id, dir, mut plan, name, prior) = match start {
            Start::Resume { id } => {
                let (dir, journal, plan, prior) = taken::<S>(store, &id, &catalog)?;
                locked = Some(journal);
                (id, dir, plan, None, prior)
            }
            Start::New { plan, name } => {
                let id = new_id(name.as_deref());
                let dir = sessions_dir(store.data()).join(&id);
                (id, dir, plan, name, Vec::new())
            }
        };
        // Results checked before the journal was taken must still be what the session waits for.
        if let Some((_, Some(import))) = &batch
            && !import.already
            && super::batch::History::of(&prior).waiting().map(|(phase, ..)| phase) != Some(import.phase)
        {
            return Err(SessionError::Batch {
                reason: format!(
                    "phase {}'s results were imported by another incharacter meanwhile; nothing was imported",
                    import.phase
                ),
                input: true,
            });
        }
        let batching = batch.map(|(mode, import)| Batching::new(mode, &prior, import, dir.clone(), id.clone()));
        // Before the study asks anything: a request kept results answer is not read from the cache.
        if let Some(b) = &batching {
            b.load_kept()?;
        }
        let concurrency = match &batching {
            Some(_) => Some(crate::llm::batch::UNLIMITED),
            None => concurrency,
        };
        let shared = Shared::new(
            concurrency.unwrap_or(config.max_concurrency),
            Some(Cache::new(store.data().join("cache"))),
            config.cache,
            S::seed(&plan),
        );
        let parent = parent_events(store, S::parent(&plan), &prior, &catalog)?;
        // A resume starts with what the providers already refused.
        shared.adapter.known(&crate::study::adaptations(&prior));
        // Checked before anything is connected (a local model loaded for nothing).
        same_scales(&id, &prior, &catalog)?;
        same_characters(&id, &prior, &catalog)?;
        let prepared = {
            let streaming = connector(config, store, &shared);
            let batched = batching.as_ref().map(|b| batch_connector(config, &shared, b));
            // A resume on another model is refused before that model is connected (or loaded).
            let changed = std::cell::Cell::new(None);
            // A re-assessment's answerer is read from its parent, never connected.
            let copied = S::parent(&plan).is_some();
            let connect = |name: &str| {
                if let Err(e) = same_model_configured(&id, config, &prior, name, copied) {
                    let said = e.to_string();
                    changed.set(Some(e));
                    return Err(llm::LlmError::Config(said));
                }
                match &batched {
                    Some(connect) => connect(name),
                    None => streaming(name),
                }
            };
            let env = Env {
                catalog: &catalog,
                data: store.data(),
                connect: &connect,
                parent: parent.as_deref(),
            };
            let prepared = S::prepare(&mut plan, &prior, &env);
            match changed.into_inner() {
                Some(refused) => return Err(refused),
                None => prepared?,
            }
        };
        same_models(&id, &prior, &prepared.providers)?;
        let path = dir.join("journal.jsonl");
        let unwritable = |source| SessionError::Unwritable {
            path: path.clone(),
            source,
        };
        let changed = version_changes(&prior, &prepared.character_versions);
        // A new journal is made with its first record in it (a kill leaves a session or nothing). A
        // resume is journaled with what it adds: a sitting that adds nothing (a batch export whose
        // file could not be written, a kill before any reply) leaves the journal as it was.
        let (journal, resumed) = match locked {
            None => {
                let header = SessionHeader {
                    session: id.clone(),
                    name,
                    created: journal::now_rfc3339(),
                    app_version: env!("CARGO_PKG_VERSION").into(),
                    character_versions: prepared.character_versions,
                    scale_versions: prepared.scale_versions,
                    batch: batching.as_ref().map(|b| b.mode.started()),
                };
                let started = S::started(header, plan.clone(), prepared.providers);
                (create_journal(&id, &dir, &started)?, None)
            }
            Some(mut journal) => {
                let resumed = Event::Resumed {
                    at: journal::now_rfc3339(),
                    items_per_call: prepared.items_per_call,
                    character_versions: prepared.character_versions,
                    masked: prepared.masked,
                };
                journal.defer(&resumed).map_err(unwritable)?;
                (journal, Some(resumed))
            }
        };
        Ok(Run {
            id,
            dir,
            plan,
            study: prepared.study,
            notes: prepared.notes,
            changed,
            resumed,
            journal,
            catalog,
            shared,
            batching,
            max_cost: None,
        })
    }

    /// Stops the run cleanly (resumable) once what it spent reaches `usd`.
    pub fn cap_cost(&mut self, usd: f64) {
        self.max_cost = Some(usd);
    }

    /// Runs what the session still lacks. Every record is journaled, then given to `on_event`; with
    /// `live`, model calls are also reported (and held while paused). Returns the session's records.
    pub async fn execute(
        self,
        live: Option<(LiveSink, Pause)>,
        on_event: impl FnMut(&Event) + Send,
    ) -> Result<Vec<Event>, SessionError> {
        match self.drive(live, on_event, &|_| {}).await? {
            Ended::Complete(events) => Ok(events),
            Ended::Waiting(path) => Err(SessionError::Batch {
                reason: format!("the run waits for the results of {}", path.display()),
                input: false,
            }),
        }
    }

    /// [`Run::execute`] in batch mode (a run opened by [`Run::open_batch`]): `note` hears how its
    /// batches are doing. Ends `Waiting` when a phase was written for an offline engine.
    pub async fn execute_batch(
        self,
        on_event: impl FnMut(&Event) + Send,
        note: &(dyn Fn(String) + Send + Sync),
    ) -> Result<Ended, SessionError> {
        self.drive(None, on_event, note).await
    }

    async fn drive(
        mut self,
        live: Option<(LiveSink, Pause)>,
        mut on_event: impl FnMut(&Event) + Send,
        note: &(dyn Fn(String) + Send + Sync),
    ) -> Result<Ended, SessionError> {
        if let Some((sink, pause)) = live {
            // Requests already waiting for their places when the run is paused wait too.
            let _ = self.shared.pause.set(pause.clone());
            self.study.wrap_models(&|inner| {
                Arc::new(Observed {
                    inner,
                    sink: sink.clone(),
                    pause: pause.clone(),
                }) as Arc<dyn ChatModel>
            });
        }
        let hub = self.watch();
        // Identical requests at once go one after the other: the second is read from the cache.
        // Outermost, so a waiting one is neither in flight nor parked (see `crate::llm::coalesce`).
        if self.shared.cache.is_some() && self.shared.cache_mode == crate::config::CacheMode::ReadWrite {
            let flights = Arc::new(crate::llm::coalesce::Flights::default());
            self.study.wrap_models(&|inner| {
                Arc::new(crate::llm::coalesce::Coalesced {
                    inner,
                    flights: flights.clone(),
                }) as Arc<dyn ChatModel>
            });
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<S::Step>();
        let (batch_tx, mut batch_rx) = tokio::sync::mpsc::unbounded_channel::<(Event, oneshot::Sender<bool>)>();
        let shared = self.shared.clone();
        let max_cost = self.max_cost;
        let path = self.journal.path.clone();
        let unwritable = |source| SessionError::Unwritable {
            path: path.clone(),
            source,
        };
        let stopped = {
            let Run {
                study,
                plan,
                journal,
                batching,
                ..
            } = &mut self;
            let work = async {
                study.run(plan, &tx).await;
                drop(tx);
            };
            let work: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> = match &hub {
                Some(hub) => Box::pin(Watched::new(hub.clone(), work)),
                None => Box::pin(work),
            };
            let adapter = shared.adapter.clone();
            let servers = shared.servers.clone();
            let record = async {
                loop {
                    tokio::select! {
                        biased;
                        Some((event, ack)) = batch_rx.recv() => {
                            let written = journal.append(&event);
                            let _ = ack.send(written.is_ok());
                            written?;
                            on_event(&event);
                        }
                        step = rx.recv() => {
                            let Some(step) = step else { break };
                            // What a provider refused is journaled before the step its adapted request made.
                            let learned = servers.take_fresh().into_iter().map(Event::Server);
                            for event in learned.chain(adapter.take_fresh().into_iter().map(Event::Adapted)).chain([step.into()]) {
                                journal.append(&event)?;
                                on_event(&event);
                            }
                        }
                    }
                }
                let learned = servers.take_fresh().into_iter().map(Event::Server);
                for event in learned.chain(adapter.take_fresh().into_iter().map(Event::Adapted)) {
                    journal.append(&event)?;
                    on_event(&event);
                }
                Ok::<_, std::io::Error>(())
            };
            let accounting = shared.accounting.clone();
            let batch_cap = (&*accounting, max_cost);
            let in_batches = batching.is_some();
            let coordinate = async {
                match batching {
                    // In batch mode the cap is held between phases (see `coordinate`).
                    Some(b) => b.coordinate(&batch_tx, note, batch_cap).await,
                    None => std::future::pending().await,
                }
            };
            let unreachable = shared.unreachable();
            let capped = async {
                match (max_cost, &hub) {
                    (Some(cap), Some(hub)) if !in_batches => {
                        accounting.reaching(cap).await;
                        // What is in flight comes back and is read; nothing more goes out.
                        hub.until_idle().await;
                        (accounting.cost(), cap)
                    }
                    _ => std::future::pending().await,
                }
            };
            tokio::pin!(work, record, unreachable, coordinate, capped);
            // A journal that cannot be written stops the work at once, so nothing more is asked that
            // could not be kept; so does a provider that no longer answers at all, and a batch
            // phase written for an offline engine.
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
                u = &mut unreachable => Some(Stop::Unreachable(u)),
                c = &mut coordinate => Some(Stop::Batch(c)),
                (spent, cap) = &mut capped => Some(Stop::Capped { spent, cap }),
            }
        };
        let stopped = match stopped {
            None => shared.unreachable_now().map(Stop::Unreachable),
            stopped => stopped,
        };
        if let Some(stop) = stopped {
            // The work is dropped; what it finished before that is kept, not asked again.
            while let Ok(step) = rx.try_recv() {
                let event: Event = step.into();
                self.journal.append(&event).map_err(unwritable)?;
                on_event(&event);
            }
            if let Some(stopped) = stop.record() {
                self.journal.append(&stopped).map_err(unwritable)?;
                on_event(&stopped);
            }
            return match stop {
                Stop::Unreachable(u) => Err(unreachable_error(u)),
                Stop::Batch(written) => written.map(Ended::Waiting),
                Stop::Capped { spent, cap } => Err(SessionError::CostCap { spent, cap, next: None }),
            };
        }
        self.finish().map(Ended::Complete)
    }

    /// The hub that sees the study's requests and when it is idle: batch mode's, or the cost cap's
    /// (attempts wait there once the cap is reached, and the run stops once what came back has been
    /// read and journaled). The study's models count their requests in it.
    fn watch(&mut self) -> Option<Arc<crate::llm::batch::Hub>> {
        let hub = match (&self.batching, self.max_cost) {
            (Some(b), _) => b.hub.clone(),
            (None, Some(cap)) => {
                let hub = Arc::new(crate::llm::batch::Hub::default());
                let _ = self.shared.cap.set((cap, hub.clone() as Arc<dyn crate::llm::accounting::Holder>));
                hub
            }
            (None, None) => return None,
        };
        self.study.wrap_models(&|inner| {
            Arc::new(Counted {
                inner,
                hub: hub.clone(),
            }) as Arc<dyn ChatModel>
        });
        Some(hub)
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
        journal::write_atomic(&path, &crate::study::export_in(&self.dir, S::export(&events, &self.catalog)))
            .map_err(|source| SessionError::Results { path, source })?;
        Ok(events)
    }

    /// The run's limits on requests in flight, to show which providers a rate limit holds back.
    pub fn limits(&self) -> Arc<crate::llm::policy::Limits> {
        self.shared.limits.clone()
    }

    /// The run's accounts: what was spent, and how many requests wait or are in flight now.
    pub fn accounting(&self) -> Arc<crate::llm::accounting::Accounting> {
        self.shared.accounting.clone()
    }
}

/// The session `id` to resume: its folder, its journal taken (before it is read: what is read is
/// then what no one else appends to), its plan and its records. A session of another kind, or one
/// complete (a resume elsewhere may just have completed it), is refused.
fn taken<S: Study>(
    store: &Store,
    id: &str,
    catalog: &Catalog,
) -> Result<(PathBuf, Journal, S::Plan, Vec<Event>), SessionError> {
    let dir = store.own(id)?;
    let journal = open_journal(id, &dir)?;
    let prior = store.load(&dir)?;
    let plan = S::plan_of(&prior).cloned().ok_or_else(|| SessionError::WrongKind {
        id: id.to_string(),
        expected: S::KIND.name(),
    })?;
    if crate::study::complete(&prior) {
        return Err(complete::<S>(id.to_string(), &dir, &prior, catalog));
    }
    Ok((dir, journal, plan, prior))
}

/// [`SessionError::Complete`] for the complete session `id` (its folder `dir`, its records
/// `events`), its `results.json` written first if the sitting that completed it could not (a full
/// disk, a kill between the last record and the file).
fn complete<S: Study>(id: String, dir: &std::path::Path, events: &[Event], catalog: &Catalog) -> SessionError {
    if results_current::<S>(dir, events, catalog) {
        return SessionError::Complete { id, wrote: None };
    }
    let path = dir.join("results.json");
    match journal::write_atomic(&path, &crate::study::export_in(dir, S::export(events, catalog))) {
        Ok(()) => SessionError::Complete { id, wrote: Some(path) },
        Err(source) => SessionError::Results { path, source },
    }
}

/// Whether the session's `results.json` (in `dir`) holds what its records `events` export: not when
/// it is missing, unreadable, or from before a sitting whose own could not be written.
pub fn results_current<S: Study>(dir: &std::path::Path, events: &[Event], catalog: &Catalog) -> bool {
    // Never larger than its journal, which a session's limits keep far below this.
    let written = crate::files::read_limited(&dir.join("results.json"), 1 << 30, "a session's results")
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
    written.is_some() && written == Some(crate::study::export_in(dir, S::export(events, catalog)))
}

/// The records of a re-assessment's parent (`parent`): a new re-assessment needs them, and refuses
/// a parent that has not ended or whose character is gone; a resumed one has copied what it could
/// read of them.
fn parent_events(
    store: &Store,
    parent: Option<&str>,
    prior: &[Event],
    catalog: &Catalog,
) -> Result<Option<Vec<Event>>, SessionError> {
    let Some(parent) = parent else { return Ok(None) };
    match store.find(parent).and_then(|dir| Ok((store.load(&dir)?, dir))) {
        Ok((events, dir)) => {
            if prior.is_empty() {
                finished_parent(parent, &dir, &events)?;
                // Its characters judged anew: one gone would be left out, unassessed.
                same_characters(parent, &events, catalog)?;
            }
            Ok(Some(events))
        }
        Err(e) if prior.is_empty() => Err(e),
        Err(_) => Ok(None),
    }
}

/// Refuses to start re-assessing `parent` (its folder `dir`, its records `events`) before it ended:
/// its missing answers would be recorded as failed items of the new session. Ended is its last
/// sitting's end, with no run writing it now (a resume journals nothing before its first answer).
fn finished_parent(parent: &str, dir: &std::path::Path, events: &[Event]) -> Result<(), SessionError> {
    let writer = journal::writer(&dir.join("journal.jsonl"));
    if crate::study::finished(events) && writer.is_none() {
        return Ok(());
    }
    Err(SessionError::ParentUnfinished {
        parent: parent.to_string(),
        writer: writer.map(|w| w.pid),
    })
}

/// Refuses a resume whose providers give a role another model than the session's first record
/// names (a new session, with no records yet, has nothing to match).
fn same_models(id: &str, prior: &[Event], now: &crate::study::Providers) -> Result<(), SessionError> {
    let Some(was) = prior.iter().find_map(Event::start).map(|s| s.providers) else {
        return Ok(());
    };
    for (role, was) in was {
        if let Some(now) = now.get(role)
            && now.differs_from(was)
        {
            // The same name for another file: said with the files.
            let (was, now) = match was.model == now.model {
                true => (was.with_file(), now.with_file()),
                false => (was.to_string(), now.to_string()),
            };
            return Err(SessionError::ModelChanged {
                id: id.to_string(),
                role: role.clone(),
                was,
                now,
            });
        }
    }
    Ok(())
}

/// Refuses a resume whose scale is gone from the catalog, or is not the version the session started
/// with (sessions that recorded it): a file of one's own edited since, or the bundled scale where the
/// session had a file of one's own since removed (or another build's wording).
fn same_scales(id: &str, prior: &[Event], catalog: &Catalog) -> Result<(), SessionError> {
    let Some(start) = prior.iter().find_map(Event::start) else {
        return Ok(());
    };
    let mut asked: Vec<&str> = start.scale_versions.keys().map(String::as_str).collect();
    if let Some(plan) = prior.iter().find_map(|e| match e {
        Event::RunStarted { plan, .. } => Some(plan),
        _ => None,
    }) {
        asked.extend(plan.scales.iter().map(String::as_str));
    }
    for scale in asked {
        let Some(entry) = catalog.scale_entry(scale) else {
            return Err(SessionError::ScaleMissing {
                id: id.to_string(),
                scale: scale.to_string(),
            });
        };
        let Some(was) = start.scale_versions.get(scale) else { continue };
        if entry.value.version() == *was {
            continue;
        }
        // Whether a file of one's own now, or the bundled scale (the file the session started with
        // removed since, or another build's wording): the rest would be asked, and scored, otherwise.
        let where_ = match catalog.user_files(crate::catalog::Kind::Scale, scale).first() {
            Some(file) => format!(" ({})", file.display()),
            None => " (it is the bundled one now: a file of one's own it started with was removed, or the \
                      workbench was built with another)"
                .to_string(),
        };
        return Err(SessionError::ScaleChanged {
            id: id.to_string(),
            scale: scale.to_string(),
            where_,
        });
    }
    Ok(())
}

/// Refuses a resume whose character is gone from the catalog: its items would be left out, unasked,
/// and the session would end complete without them.
fn same_characters(id: &str, prior: &[Event], catalog: &Catalog) -> Result<(), SessionError> {
    let Some(start) = prior.iter().find_map(Event::start) else {
        return Ok(());
    };
    let mut asked: Vec<&str> = start.character_versions.keys().map(String::as_str).collect();
    if let Some(plan) = prior.iter().find_map(|e| match e {
        Event::RunStarted { plan, .. } => Some(plan),
        _ => None,
    }) {
        asked.extend(plan.characters.iter().map(String::as_str));
    }
    // An observer session recorded no versions before it kept its subjects' characters.
    if let Some(plan) = prior.iter().find_map(|e| match e {
        Event::ObserveStarted { plan, .. } => Some(plan),
        _ => None,
    }) {
        asked.extend(plan.subjects.iter().filter_map(|s| s.character.as_deref()));
    }
    match asked.into_iter().find(|c| catalog.character(c).is_none()) {
        Some(character) => Err(SessionError::CharacterMissing {
            id: id.to_string(),
            character: character.to_string(),
        }),
        None => Ok(()),
    }
}

/// Refuses, before provider `name` is connected, a resume for which the configuration now gives it
/// another model than any role of the session had on it. In a re-assessment (`copied`), the
/// answerer's record is its parent's and is never connected, so only the other roles count: a judge
/// that shared its provider name with the parent's answerer is refused before it is connected.
/// [`same_models`], role by role once all are prepared, refuses the rest.
fn same_model_configured(
    id: &str,
    config: &Config,
    prior: &[Event],
    name: &str,
    copied: bool,
) -> Result<(), SessionError> {
    let Some(start) = prior.iter().find_map(Event::start) else {
        return Ok(());
    };
    let connected = |role: &str| !(copied && role == crate::config::Role::Rpa.name());
    let ran: Vec<_> = start
        .providers
        .iter()
        .filter(|(role, was)| was.provider == name && connected(role))
        .collect();
    let Some(now) = llm::describe(config, name) else {
        return match ran.first() {
            Some((role, was)) => Err(SessionError::ProviderGone {
                id: id.to_string(),
                role: role.to_string(),
                was: was.to_string(),
                provider: name.to_string(),
            }),
            None => Ok(()),
        };
    };
    match ran.first() {
        Some((role, was)) if ran.iter().all(|(_, was)| was.model != now.model) => Err(SessionError::ModelChanged {
            id: id.to_string(),
            role: role.to_string(),
            was: was.to_string(),
            now: now.to_string(),
        }),
        _ => Ok(()),
    }
}

/// Takes the session's journal as its one writer.
fn open_journal(id: &str, dir: &std::path::Path) -> Result<Journal, SessionError> {
    let path = dir.join("journal.jsonl");
    Journal::open_exclusive(&path).map_err(|e| journal_error(id, path, e))
}

/// The new session `id`'s journal in `dir`, made with its first record.
fn create_journal(id: &str, dir: &std::path::Path, first: &Event) -> Result<Journal, SessionError> {
    let path = dir.join("journal.jsonl");
    Journal::create_exclusive(&path, first).map_err(|e| journal_error(id, path, e))
}

fn journal_error(id: &str, path: std::path::PathBuf, e: journal::OpenError) -> SessionError {
    match e {
        journal::OpenError::Busy { pid, .. } => SessionError::Busy {
            id: id.to_string(),
            pid,
        },
        journal::OpenError::Io(source) => SessionError::Unwritable { path, source },
    }
}

/// Why a run stopped before its work was done.
enum Stop {
    Unreachable(Unreachable),
    /// Batch files mode wrote a phase (or could not go on).
    Batch(Result<PathBuf, SessionError>),
    Capped {
        spent: f64,
        cap: f64,
    },
}

impl Stop {
    /// What the journal keeps of a stop the session should show: one at the cost cap (`sessions`:
    /// stopped at its cost cap).
    fn record(&self) -> Option<Event> {
        let reason = match self {
            Stop::Capped { spent, cap } | Stop::Batch(Err(SessionError::CostCap { spent, cap, next: None })) => format!(
                "the sitting spent ${}, reaching its cost cap of ${}",
                crate::text::usd(*spent),
                crate::text::usd(*cap)
            ),
            Stop::Batch(Err(SessionError::CostCap { spent, cap, next: Some(next) })) => format!(
                "batch phase {} was estimated at ${}, past the sitting's cost cap of ${} with the ${} spent",
                next.phase,
                crate::text::usd(next.estimate),
                crate::text::usd(*cap),
                crate::text::usd(*spent)
            ),
            _ => return None,
        };
        Some(Event::Stopped {
            reason,
            at: journal::now_rfc3339(),
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ModelInfo;

    fn local(sha256: Option<&str>) -> ModelInfo {
        ModelInfo {
            provider: "local".into(),
            kind: "local".into(),
            model: "mine".into(),
            sha256: sha256.map(str::to_string),
        }
    }

    const START: &str = r#"{"event":"run_started","session":"s","name":null,"created":"2026-01-01T00:00:00Z","app_version":"0.1.0","plan":{"characters":["anna"],"scales":["GSE"],"methods":["er-batch"],"repeats":1,"rpa":"local","judge":"local","style":"description","seed":1,"max_attempts":5},"providers":{}}"#;

    fn started(rpa: ModelInfo) -> Vec<Event> {
        let mut record: serde_json::Value = serde_json::from_str(START).unwrap();
        record["providers"]["rpa"] = serde_json::to_value(rpa).unwrap();
        vec![serde_json::from_value(record).unwrap()]
    }

    /// The same name for another file is another model; a record without the file's SHA-256 (an
    /// older session, or a file registered before it was kept) is matched by the name alone.
    #[test]
    fn a_resume_on_another_file_under_the_same_name_is_refused_with_both_files() {
        let now = |info: ModelInfo| [("rpa".to_string(), info)].into();
        let prior = started(local(Some("aaaaaaaaaaaaaaaa")));
        assert!(same_models("s", &prior, &now(local(Some("aaaaaaaaaaaaaaaa")))).is_ok());
        let e = same_models("s", &prior, &now(local(Some("bbbbbbbbbbbbbbbb")))).unwrap_err();
        let said = e.to_string();
        assert!(
            said.contains(
                "ran its rpa on local (local: mine), the file of sha256 aaaaaaaaaaaaaaaa; the config now gives local \
                 (local: mine), the file of sha256 bbbbbbbbbbbbbbbb"
            ),
            "{said}"
        );
        assert!(same_models("s", &prior, &now(local(None))).is_ok());
        assert!(same_models("s", &started(local(None)), &now(local(Some("bbbb")))).is_ok());
        // The journal keeps the file's SHA-256 only where it is known.
        let line = serde_json::to_string(&local(None)).unwrap();
        assert!(!line.contains("sha256"), "{line}");
    }
}
