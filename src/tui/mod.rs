//! The workbench TUI. The driver here owns the terminal and the tasks (runs, replays, loads); the
//! [`app::App`] state machine decides, [`ui`] draws. Input is handled as soon as it arrives; drawing
//! happens on a 60 Hz tick and only when something changed, so a fast token stream never queues keys
//! behind frames. The terminal is restored on quit, on panic and on SIGTERM.

pub mod app;
#[cfg(any(test, feature = "testing"))]
pub mod fixture;
pub mod keys;
pub mod run_view;
pub mod theme;
pub mod ui;
pub mod wrap;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ratatui::crossterm::event::{self as ct, DisableMouseCapture, EnableMouseCapture, Event as CtEvent};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio::sync::watch;

use crate::catalog::Catalog;
use crate::engine::live::{Live, LiveKind, Pause};
use crate::engine::runner::{self, Start};
use crate::engine::{Event, results};
use crate::llm::Role;
use crate::llm::config::Config;
use crate::method::interview;
use crate::rpa::memories::Memories;
use crate::session;
use app::{Action, App, Effect, Replay, SessionEntry};

#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Open on the replay of this session (an id in the data dir, a session folder or a journal).
    pub replay: Option<(String, Replay)>,
    /// A guided tour: the app says what to look at next as the replay goes.
    pub demo: bool,
}

/// The sample folders in id order, with the events of each readable journal.
fn samples(samples: &Path) -> Vec<(PathBuf, Vec<Event>)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(samples)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .filter_map(|dir| Some((dir.clone(), session::read::<Event>(&dir.join("journal.jsonl")).ok()?)))
        .collect()
}

/// The interview session a demo replays: the sample whose journal holds the most (a run with its
/// assessments beats a partial one), ties broken by id.
pub fn demo_session(dir: &Path) -> Option<PathBuf> {
    samples(dir)
        .into_iter()
        .filter(|(_, events)| matches!(events.first(), Some(Event::RunStarted { .. })))
        .rev()
        .max_by_key(|(_, events)| events.len())
        .map(|(dir, _)| dir)
}

/// The observer session the demo's last step opens: the first observer sample by id.
pub fn observer_sample(dir: &Path) -> Option<PathBuf> {
    samples(dir)
        .into_iter()
        .find(|(_, events)| matches!(events.first(), Some(Event::ObserveStarted { .. })))
        .map(|(dir, _)| dir)
}

/// The sample sessions (recorded runs for demos): `$INCHARACTER_SAMPLES`, else the checkout's
/// `sample-sessions/`, else (an installed binary) the copy built into the binary, unpacked once into
/// `<data dir>/samples/`.
pub fn samples_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("INCHARACTER_SAMPLES") {
        return Some(PathBuf::from(dir)).filter(|p| p.is_dir());
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    if checkout.is_dir() {
        return Some(checkout);
    }
    static UNPACKED: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    UNPACKED
        .get_or_init(|| {
            let root = crate::paths::data_dir()?.join("samples");
            unpack_samples(&root)
                .inspect_err(|e| tracing::warn!("cannot unpack the sample sessions into {}: {e}", root.display()))
                .ok()
        })
        .clone()
}

/// Writes the built-in samples under `root`, in a folder named by their content hash (an upgrade gets
/// a new folder, never a mix), completed by a rename so a reader never sees half of it.
fn unpack_samples(root: &Path) -> std::io::Result<PathBuf> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for (name, bytes) in crate::catalog::bundled::SAMPLES {
        hasher.update(name.as_bytes());
        hasher.update(bytes);
    }
    let hash: String = hasher.finalize()[..6].iter().map(|b| format!("{b:02x}")).collect();
    let dir = root.join(&hash);
    if dir.is_dir() {
        return Ok(dir);
    }
    std::fs::create_dir_all(root)?;
    let staging = tempfile::tempdir_in(root)?;
    for (name, bytes) in crate::catalog::bundled::SAMPLES {
        let path = staging.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    match std::fs::rename(staging.keep(), &dir) {
        Ok(()) => Ok(dir),
        // Another process unpacked the same samples first.
        Err(_) if dir.is_dir() => Ok(dir),
        Err(e) => Err(e),
    }
}

/// Where `e` writes a session's export: `export.json` in its folder, or for a (read-only) sample
/// `<data dir>/exports/<id>.json`.
fn export_target(session: &Path, data: &Path) -> PathBuf {
    let id = session
        .file_name()
        .map_or_else(|| "session".into(), |n| n.to_string_lossy().into_owned());
    match samples_dir() {
        Some(samples) if session.starts_with(&samples) => data.join("exports").join(format!("{id}.json")),
        _ => session.join("export.json"),
    }
}

/// A session folder from an id (the data dir's, else a sample's), a folder or a journal path.
pub fn find_session(data: &Path, what: &str) -> Result<PathBuf, String> {
    let p = Path::new(what);
    if p.is_file() {
        return p
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| format!("{what}: no folder"));
    }
    if p.join("journal.jsonl").is_file() {
        return Ok(p.to_path_buf());
    }
    // The data dir's own session first (a copied sample may be annotated there), then the samples.
    runner::session_dir(data, what).or_else(|e| match samples_dir() {
        Some(samples) if !what.contains("..") && samples.join(what).join("journal.jsonl").is_file() => {
            Ok(samples.join(what))
        }
        _ => Err(e),
    })
}

/// The data dir's sessions, then the samples, each oldest first.
pub fn list_sessions(data: &Path) -> Vec<SessionEntry> {
    let mut out = list_sessions_in(&session::sessions_dir(data), false);
    if let Some(samples) = samples_dir() {
        out.extend(list_sessions_in(&samples, true));
    }
    out
}

fn list_sessions_in(dir: &Path, sample: bool) -> Vec<SessionEntry> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let Ok(timed) = session::read_timed::<Event>(&path.join("journal.jsonl")) else {
            continue;
        };
        // Two sessions can start within the same second: the first line's milliseconds order them.
        let started_ms = timed.first().and_then(|(ts, _)| *ts);
        let events: Vec<Event> = timed.into_iter().map(|(_, e)| e).collect();
        let Some((id, name, created, providers)) = events.iter().find_map(|e| e.start()).map(|s| {
            (
                s.session.to_string(),
                s.name.clone(),
                s.created.to_string(),
                s.providers.clone(),
            )
        }) else {
            continue;
        };
        let status = match events.iter().rev().find_map(|e| match e {
            Event::RunFinished { status, .. } => Some(status.clone()),
            _ => None,
        }) {
            Some(s) => s,
            None => "interrupted".into(),
        };
        let model = providers
            .get("rpa")
            .or_else(|| providers.get("subject"))
            .map(|m| format!("{} ({})", m.model, m.kind))
            .unwrap_or_default();
        found.push((
            started_ms,
            SessionEntry {
                id,
                name,
                created,
                status,
                model,
                path,
                sample,
            },
        ));
    }
    found.sort_by(|(ms_a, a), (ms_b, b)| a.created.cmp(&b.created).then(ms_a.cmp(ms_b)).then(a.id.cmp(&b.id)));
    found.into_iter().map(|(_, e)| e).collect()
}

/// For each character, ER_batch scores on IPIP-50 from the newest session that has them.
fn interview_scores(list: &[SessionEntry], catalog: &Catalog) -> BTreeMap<String, (String, BTreeMap<String, f64>)> {
    let mut out = BTreeMap::new();
    for e in list.iter().rev() {
        let Ok(events) = session::read::<Event>(&e.path.join("journal.jsonl")) else {
            continue;
        };
        for event in &events {
            if let Event::DimensionAssessed(a) = event
                && a.scale == crate::observer::SCALE
                && a.method == crate::engine::Method::ErBatch
                && let Some(score) = a.score
                && catalog.character(&a.character).is_some()
            {
                let entry = out
                    .entry(a.character.clone())
                    .or_insert_with(|| (e.id.clone(), BTreeMap::new()));
                if entry.0 == e.id {
                    entry.1.insert(a.dimension.clone(), score);
                }
            }
        }
    }
    out
}

/// For each character played in a RoleBench session (an imported character, or one whose name is the
/// role), its Rouge-L F and win rate from the newest such session.
fn rolebench_scores(list: &[SessionEntry], catalog: &Catalog) -> BTreeMap<String, app::RolebenchScore> {
    let mut out = BTreeMap::new();
    for e in list.iter().rev() {
        let Ok(events) = session::read::<Event>(&e.path.join("journal.jsonl")) else {
            continue;
        };
        let Some((plan, items)) = crate::engine::rolebench::items(&events) else {
            continue;
        };
        let totals = crate::engine::rolebench::totals(&items);
        for (role, mean) in &totals.rouge_l.by_role {
            let id = plan
                .characters
                .get(role)
                .cloned()
                .or_else(|| catalog.character(role).map(|c| c.id.clone()));
            if let Some(id) = id {
                out.entry(id).or_insert_with(|| app::RolebenchScore {
                    session: e.id.clone(),
                    questions: mean.count,
                    rouge_l_f: mean.f,
                    win_rate: totals.win_rate_by_role.get(role).copied(),
                });
            }
        }
    }
    out
}

fn load_memories(data: &Path, catalog: &Catalog, events: &[Event]) -> BTreeMap<String, Arc<Memories>> {
    let mut out = BTreeMap::new();
    if let Some(plan) = runner::plan_of(events) {
        for id in &plan.characters {
            let speaker = catalog.character(id).map_or(String::new(), |c| c.name.clone());
            if let Ok(Some(m)) = Memories::load(data, id, &speaker) {
                out.insert(id.clone(), Arc::new(m));
            }
        }
    }
    out
}

/// Runs the TUI until the user quits.
pub fn main(options: Options) -> anyhow::Result<()> {
    let mut skipped = Vec::new();
    let catalog = crate::cli::load_catalog(&mut skipped)?;
    let config = crate::cli::load_config()?;
    let data = crate::paths::data_dir().ok_or_else(|| anyhow::anyhow!("no data dir: set INCHARACTER_DATA_DIR"))?;
    let (keymap, key_errors) = keys::Keymap::with_config(&config.tui.keys);
    if !key_errors.is_empty() {
        anyhow::bail!("{}", key_errors.join("\n"));
    }
    let user_themes = crate::paths::config_file().and_then(|p| p.parent().map(|d| d.join("themes")));
    let (themes, theme_errors) = theme::load_all(user_themes.as_deref());
    for e in &theme_errors {
        tracing::warn!("{e}");
    }
    let theme = config
        .tui
        .theme
        .as_ref()
        .and_then(|name| themes.iter().position(|t| &t.name == name))
        .unwrap_or(0);
    let mut app = App::new(Arc::new(catalog), &config, Some(&data), keymap, themes, theme);
    if let Some(name) = &config.tui.theme
        && themes_missing(&app, name)
    {
        app.flash = Some(format!("no theme \"{name}\": using {}", app.theme().name));
    }
    if !skipped.is_empty() {
        let text = String::from_utf8_lossy(&skipped);
        tracing::warn!("{text}");
        app.flash = Some(format!(
            "{} data file(s) skipped: `incharacter validate` says why",
            text.lines().count()
        ));
    }
    let mut first = vec![Effect::ListSessions];
    if let Some((what, speed)) = &options.replay {
        let path = find_session(&data, what).map_err(crate::cli::input_error)?;
        app.screen = app::Screen::Live;
        app.live.replay = Some(*speed);
        app.live.running = true;
        if options.demo {
            app.demo = Some(app::Demo {
                step: 0,
                observers: samples_dir().and_then(|s| observer_sample(&s)),
            });
            app.flash = Some(app::DEMO_STEPS[0].1.into());
        }
        first.push(Effect::Replay { path, speed: *speed });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;

    let mut terminal = ratatui::init();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableMouseCapture);
        hook(info);
    }));
    let _ = execute!(std::io::stdout(), EnableMouseCapture);
    let mut draw = |app: &App| -> anyhow::Result<()> {
        let _ = execute!(std::io::stdout(), BeginSynchronizedUpdate);
        terminal.draw(|f| ui::render(f, app))?;
        let _ = execute!(std::io::stdout(), EndSynchronizedUpdate);
        Ok(())
    };
    let result = runtime.block_on(event_loop(ct::EventStream::new(), app, config, data, first, &mut draw));
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::restore();
    runtime.shutdown_timeout(Duration::from_millis(200));
    result
}

fn themes_missing(app: &App, name: &str) -> bool {
    !app.themes.iter().any(|t| t.name == name)
}

struct Driver {
    tx: UnboundedSender<Action>,
    /// Models connected for the chat screen, by provider name.
    models: BTreeMap<String, Arc<dyn crate::llm::ChatModel>>,
    config: Arc<Config>,
    data: PathBuf,
    catalog: Arc<Catalog>,
    task: Option<tokio::task::JoinHandle<()>>,
    pause: Pause,
    speed: watch::Sender<Replay>,
}

/// The workbench's event loop: `input` (the terminal's events, or synthetic ones in a benchmark),
/// engine reports on the action channel, and a 60 Hz tick. Input is handled on arrival and its frame
/// drawn at once; everything else marks the screen dirty and is drawn on the next tick, so a burst of
/// tokens costs one frame. `draw` renders a frame (into the terminal, or a TestBackend).
pub async fn event_loop<S>(
    mut input: S,
    mut app: App,
    config: Config,
    data: PathBuf,
    first: Vec<Effect>,
    draw: &mut dyn FnMut(&App) -> anyhow::Result<()>,
) -> anyhow::Result<()>
where
    S: futures_util::Stream<Item = std::io::Result<CtEvent>> + Unpin,
{
    let (tx, mut rx) = unbounded_channel::<Action>();
    let mut driver = Driver {
        tx: tx.clone(),
        models: BTreeMap::new(),
        config: Arc::new(config),
        data,
        catalog: app.catalog.clone(),
        task: None,
        pause: Pause::default(),
        speed: watch::channel(Replay::Speed(1.0)).0,
    };
    for e in first {
        driver.perform(e);
    }
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(16));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut dirty = true;
    let mut last_second = 0;
    loop {
        let mut effects = Vec::new();
        let mut now = false;
        tokio::select! {
            biased;
            event = input.next() => match event {
                Some(Ok(CtEvent::Key(key))) if key.kind != ct::KeyEventKind::Release => {
                    effects = app.update(Action::Key(key));
                    now = true;
                }
                Some(Ok(CtEvent::Mouse(m))) => {
                    effects = app.update(Action::Mouse(m));
                    now = true;
                }
                Some(Ok(CtEvent::Resize(..))) => now = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => break,
            },
            _ = sigterm.recv() => break,
            Some(action) = rx.recv() => {
                effects.extend(app.update(action));
                // Take everything already waiting, so a burst of tokens costs one frame.
                while let Ok(action) = rx.try_recv() {
                    effects.extend(app.update(action));
                }
                dirty = true;
            }
            _ = tick.tick() => {
                let ms = started.elapsed().as_millis() as u64;
                app.update(Action::Tick(ms));
                if ms / 1000 != last_second && app.live.running {
                    last_second = ms / 1000;
                    dirty = true;
                }
                now = dirty;
            }
        }
        for e in effects {
            if e == Effect::Quit {
                driver.stop();
                return Ok(());
            }
            driver.perform(e);
        }
        if app.quit {
            break;
        }
        if now {
            draw(&app)?;
            dirty = false;
        }
    }
    driver.stop();
    Ok(())
}

impl Driver {
    /// A provider for the chat screen (no cache: asking again should give a fresh answer).
    fn model(&mut self, provider: &str) -> Result<Arc<dyn crate::llm::ChatModel>, String> {
        if let Some(m) = self.models.get(provider) {
            return Ok(m.clone());
        }
        let shared =
            crate::llm::client::Shared::new(self.config.max_concurrency, None, crate::llm::config::CacheMode::Off, 0);
        let env = |k: &str| std::env::var(k).ok();
        let model: Arc<dyn crate::llm::ChatModel> = Arc::new(
            crate::llm::connect(&self.config, provider, shared, &env, Some(&self.data)).map_err(|e| e.to_string())?,
        );
        self.models.insert(provider.to_string(), model.clone());
        Ok(model)
    }

    fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }

    fn perform(&mut self, effect: Effect) {
        let tx = self.tx.clone();
        match effect {
            Effect::Quit => {}
            Effect::StartRun { plan, name } => self.run(Start::New { plan, name }),
            Effect::Resume { id } => self.run(Start::Resume { id }),
            Effect::StartObserve { plan } => self.observe(plan),
            Effect::StartRolebench { plan } => {
                let (config, data, catalog) = (self.config.clone(), self.data.clone(), self.catalog.clone());
                let start = crate::engine::rolebench::Start::New {
                    plan: *plan,
                    name: None,
                };
                self.spawn(move || crate::engine::rolebench::prepare(catalog, &config, &data, start, None));
            }
            Effect::ListRolebenchFiles => {
                let dir = self.data.join("rolebench");
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(Action::RolebenchFiles(rolebench_files(&dir)));
                });
            }
            Effect::LoadRolebench(path) => {
                tokio::task::spawn_blocking(move || {
                    let result = crate::method::rolebench::load_questions(&path).map_err(|e| e.to_string());
                    let _ = tx.send(Action::RolebenchLoaded(path, result));
                });
            }
            Effect::Annotate { dir, annotation } => {
                // One small flushed append; done here so the answer is on disk before the next key.
                if let Err(e) = crate::method::annotation::append(&dir, &annotation) {
                    let _ = tx.send(Action::Flash(crate::text::terminal_safe(&e)));
                }
            }
            Effect::LoadAnnotations(dir) => {
                tokio::task::spawn_blocking(move || match crate::method::annotation::load(&dir) {
                    Ok(all) => {
                        let _ = tx.send(Action::Annotations(all));
                    }
                    Err(e) => {
                        let _ = tx.send(Action::Flash(crate::text::terminal_safe(&e)));
                    }
                });
            }
            Effect::SetPause(p) => self.pause.set(p),
            Effect::Cancel => {
                self.stop();
                self.pause.set(false);
                let _ = tx.send(Action::RunEnded(Err(
                    "cancelled: the session keeps what was done".into()
                )));
            }
            Effect::ReplaySpeed(s) => {
                self.speed.send_replace(s);
            }
            Effect::Replay { path, speed } => {
                self.stop();
                self.pause.set(false);
                self.speed.send_replace(speed);
                let speed = self.speed.subscribe();
                let (data, catalog, pause) = (self.data.clone(), self.catalog.clone(), self.pause.clone());
                self.task = Some(tokio::spawn(async move {
                    let result = replay(&path, &data, &catalog, &tx, speed, &pause).await;
                    let _ = tx.send(Action::RunEnded(result));
                }));
            }
            Effect::Open(path) => {
                let (data, catalog) = (self.data.clone(), self.catalog.clone());
                tokio::task::spawn_blocking(move || match session::read::<Event>(&path.join("journal.jsonl")) {
                    Ok(events) => {
                        let _ = tx.send(Action::Memories(load_memories(&data, &catalog, &events)));
                        let _ = tx.send(Action::SessionLoaded(events));
                        let _ = tx.send(Action::SessionDir(path.clone()));
                    }
                    Err(e) => {
                        let _ = tx.send(Action::Flash(crate::text::terminal_safe(&e)));
                    }
                });
            }
            Effect::Export(path) => {
                let catalog = self.catalog.clone();
                let target = export_target(&path, &self.data);
                tokio::task::spawn_blocking(move || {
                    let message = match session::read::<Event>(&path.join("journal.jsonl")) {
                        Ok(events) => match session::write_atomic(&target, &results::export_any(&events, &catalog)) {
                            Ok(()) => format!("exported to {}", target.display()),
                            Err(e) => format!("{}: {e}", target.display()),
                        },
                        Err(e) => e,
                    };
                    let _ = tx.send(Action::Flash(crate::text::terminal_safe(&message)));
                });
            }
            Effect::Compare(paths) => {
                let catalog = self.catalog.clone();
                tokio::task::spawn_blocking(move || {
                    let rows = paths
                        .iter()
                        .filter_map(|p| {
                            let events = session::read::<Event>(&p.join("journal.jsonl")).ok()?;
                            let id = p.file_name()?.to_string_lossy().into_owned();
                            Some((id, results::summary(&events, &catalog)))
                        })
                        .collect();
                    let _ = tx.send(Action::Compared(rows));
                });
            }
            Effect::ListSessions => {
                let (data, catalog) = (self.data.clone(), self.catalog.clone());
                tokio::task::spawn_blocking(move || {
                    let list = list_sessions(&data);
                    let _ = tx.send(Action::InterviewScores(interview_scores(&list, &catalog)));
                    let _ = tx.send(Action::RolebenchScores(rolebench_scores(&list, &catalog)));
                    let _ = tx.send(Action::Sessions(list));
                });
            }
            Effect::Chat {
                character,
                style,
                provider,
                history,
                text,
            } => {
                let model = match self.model(&provider) {
                    Ok(m) => m,
                    Err(e) => {
                        let _ = tx.send(Action::ChatDone(Err(e)));
                        return;
                    }
                };
                let (data, catalog) = (self.data.clone(), self.catalog.clone());
                tokio::spawn(async move {
                    let result = chat(model, &catalog, &data, &character, style, &history, &text, &tx).await;
                    let _ = tx.send(Action::ChatDone(result));
                });
            }
            Effect::FetchModel => {
                let data = self.data.clone();
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(Action::Fetched(fetch_model(&data, &tx)));
                });
            }
        }
    }

    fn observe(&mut self, plan: crate::observer::ObservePlan) {
        let (config, data, catalog) = (self.config.clone(), self.data.clone(), self.catalog.clone());
        self.spawn(move || {
            crate::engine::observe::prepare(
                catalog,
                &config,
                &data,
                crate::engine::observe::Start::New { plan, name: None },
                None,
            )
        });
    }

    fn run(&mut self, start: Start) {
        let (config, data, catalog) = (self.config.clone(), self.data.clone(), self.catalog.clone());
        self.spawn(move || runner::prepare(catalog, &config, &data, start, None));
    }

    /// Prepares a session off the async threads (connecting may load a model), shows what its journal
    /// holds, then runs it with live reports on the action channel, journaling as it goes.
    fn spawn<P: Session>(&mut self, prepare: impl FnOnce() -> Result<P, String> + Send + 'static) {
        self.stop();
        self.pause.set(false);
        let (tx, pause) = (self.tx.clone(), self.pause.clone());
        self.task = Some(tokio::spawn(async move {
            let prepared = match tokio::task::spawn_blocking(prepare).await {
                Ok(Ok(p)) => p,
                Ok(Err(e)) => {
                    let _ = tx.send(Action::RunEnded(Err(crate::text::terminal_safe(&e))));
                    return;
                }
                Err(e) => {
                    let _ = tx.send(Action::RunEnded(Err(e.to_string())));
                    return;
                }
            };
            prepared.before(&tx);
            let _ = tx.send(Action::SessionDir(prepared.dir().to_path_buf()));
            // What the journal holds so far (the start event, and for a resume everything before).
            if let Ok(events) = runner::load_events(prepared.dir()) {
                for e in events {
                    let _ = tx.send(Action::Engine(e));
                }
            }
            // Live reports share the action channel with the events, so an answer's tokens always
            // arrive before the event that completes it.
            let live_tx = tx.clone();
            let sink: crate::engine::live::LiveSink = Arc::new(move |l| {
                let _ = live_tx.send(Action::Live(l));
            });
            let events_tx = tx.clone();
            let result = prepared
                .execute(Some((sink, pause)), move |e| {
                    let _ = events_tx.send(Action::Engine(e.clone()));
                })
                .await;
            if let Ok(events) = &result
                && let Some(last @ Event::RunFinished { .. }) = events.last()
            {
                let _ = tx.send(Action::Engine(last.clone()));
            }
            let _ = tx.send(Action::RunEnded(result.map(|_| ())));
        }));
    }
}

/// The `.jsonl` files under `dir` (two levels deep), sorted.
fn rolebench_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && depth < 2 {
                stack.push((path, depth + 1));
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A prepared run the TUI can start: interviews, observers or RoleBench.
trait Session: Send + 'static {
    fn dir(&self) -> &Path;
    /// Tells the app what it needs before the run (memories, notes).
    fn before(&self, _tx: &UnboundedSender<Action>) {}
    fn execute(
        self,
        live: Option<(crate::engine::live::LiveSink, Pause)>,
        on_event: impl FnMut(&Event) + Send + 'static,
    ) -> impl std::future::Future<Output = Result<Vec<Event>, String>> + Send;
}

impl Session for runner::Prepared {
    fn dir(&self) -> &Path {
        &self.dir
    }

    fn before(&self, tx: &UnboundedSender<Action>) {
        for note in &self.notes {
            let _ = tx.send(Action::Flash(note.clone()));
        }
        let _ = tx.send(Action::Memories(self.engine.memories.clone()));
    }

    fn execute(
        self,
        live: Option<(crate::engine::live::LiveSink, Pause)>,
        on_event: impl FnMut(&Event) + Send + 'static,
    ) -> impl std::future::Future<Output = Result<Vec<Event>, String>> + Send {
        runner::Prepared::execute(self, live, on_event)
    }
}

/// Observer and RoleBench sessions run as they are (no memories to send first).
macro_rules! session {
    ($prepared:path) => {
        impl Session for $prepared {
            fn dir(&self) -> &Path {
                &self.dir
            }

            fn execute(
                self,
                live: Option<(crate::engine::live::LiveSink, Pause)>,
                on_event: impl FnMut(&Event) + Send + 'static,
            ) -> impl std::future::Future<Output = Result<Vec<Event>, String>> + Send {
                <$prepared>::execute(self, live, on_event)
            }
        }
    };
}

session!(crate::engine::observe::Prepared);
session!(crate::engine::rolebench::Prepared);

/// One chat turn: the prompt as the engine would build it for an interview, with the earlier turns
/// replayed before the new line, streamed back as actions.
#[allow(clippy::too_many_arguments)]
async fn chat(
    model: Arc<dyn crate::llm::ChatModel>,
    catalog: &Catalog,
    data: &Path,
    character: &str,
    style: crate::rpa::prompt::RpaStyle,
    history: &[(String, String)],
    text: &str,
    tx: &UnboundedSender<Action>,
) -> Result<(), String> {
    use crate::llm::{ChatEvent, ChatMessage, ChatRequest};
    use crate::rpa::prompt;
    let c = catalog
        .character(character)
        .ok_or_else(|| format!("unknown character {character}"))?;
    let memories = Memories::load(data, &c.id, &c.name).ok().flatten();
    let mut assembled = prompt::assemble(c, style, memories.as_ref(), text, &prompt::experimenter_line(c, text));
    let last = assembled.messages.pop();
    for (user, reply) in history {
        assembled
            .messages
            .push(ChatMessage::user(prompt::experimenter_line(c, user)));
        assembled.messages.push(ChatMessage::assistant(reply.clone()));
    }
    assembled.messages.extend(last);
    let _ = tx.send(Action::ChatPrompt(assembled.messages.clone()));
    let mut request = ChatRequest::new(assembled.messages);
    request.meta.role = Role::Rpa;
    request.meta.purpose = format!("chat {}", c.id);
    request.sampling.max_tokens = Some(interview::MAX_ANSWER_TOKENS);
    let mut events = model.stream(request);
    while let Some(event) = events.next().await {
        match event {
            ChatEvent::Token(t) => {
                let _ = tx.send(Action::ChatToken(t));
            }
            ChatEvent::Retry { .. } => {
                let _ = tx.send(Action::ChatRetry);
            }
            ChatEvent::Usage(_) => {}
            ChatEvent::Done { .. } => return Ok(()),
            ChatEvent::Error(e) => return Err(e.to_string()),
        }
    }
    Err("the reply ended without finishing".into())
}

fn fetch_model(data: &Path, tx: &UnboundedSender<Action>) -> Result<String, String> {
    #[cfg(feature = "local-model")]
    {
        let models = crate::llm::local::models_dir(data);
        crate::llm::local::fetch(&models, crate::llm::config::DEFAULT_LOCAL_MODEL, &mut |line| {
            let _ = tx.send(Action::Flash(line.to_string()));
        })
        .map(|p| p.display().to_string())
        .map_err(|e| e.to_string())
    }
    #[cfg(not(feature = "local-model"))]
    {
        let _ = (data, tx);
        Err("this build has no local model (feature local-model)".into())
    }
}

/// A recorded answer cut into the pieces a replay streams: words, and runs of a few characters in
/// text without spaces (Chinese), so that every answer streams rather than appearing at once.
fn replay_pieces(response: &str) -> Vec<String> {
    const RUN: usize = 3;
    let mut pieces = Vec::new();
    for word in response.split_inclusive(' ') {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() <= 4 * RUN {
            pieces.push(word.to_string());
        } else {
            pieces.extend(chars.chunks(RUN).map(|c| c.iter().collect::<String>()));
        }
    }
    pieces
}

/// Replays a journal with its original timing scaled by the speed; answers stream as tokens spread
/// over the time they took, so a replay looks like the live run.
async fn replay(
    dir: &Path,
    data: &Path,
    catalog: &Catalog,
    tx: &UnboundedSender<Action>,
    speed: watch::Receiver<Replay>,
    pause: &Pause,
) -> Result<(), String> {
    let timed: Vec<(Option<u64>, Event)> = session::read_timed(&dir.join("journal.jsonl"))?;
    let events: Vec<Event> = timed.iter().map(|(_, e)| e.clone()).collect();
    let _ = tx.send(Action::Memories(load_memories(data, catalog, &events)));
    let wait = |ms: u64| {
        let factor = match *speed.borrow() {
            Replay::Speed(s) => 1.0 / s.max(0.01),
            Replay::Instant => 0.0,
        };
        Duration::from_millis((ms as f64 * factor) as u64)
    };
    let mut previous: Option<u64> = None;
    for (ts, event) in timed {
        let gap = match (previous, ts) {
            (Some(a), Some(b)) => b.saturating_sub(a).min(30_000),
            (_, None) => 50,
            (None, Some(_)) => 0,
        };
        previous = ts.or(previous);
        if let Event::ItemAnswered {
            character,
            scale,
            repeat,
            style,
            item_id,
            question,
            response,
            ..
        } = &event
        {
            let purpose = interview::purpose(character, scale, *item_id, *style);
            let live = |kind| Live {
                role: Role::Rpa,
                purpose: purpose.clone(),
                repeat: *repeat,
                kind,
            };
            let _ = tx.send(Action::Live(live(LiveKind::Started {
                prompt: question.clone(),
            })));
            let pieces = replay_pieces(response);
            let step = gap / pieces.len().max(1) as u64;
            for piece in pieces {
                pause.wait().await;
                tokio::time::sleep(wait(step)).await;
                let _ = tx.send(Action::Live(live(LiveKind::Token(piece))));
            }
        } else {
            pause.wait().await;
            tokio::time::sleep(wait(gap)).await;
        }
        if matches!(*speed.borrow(), Replay::Instant) {
            tokio::task::yield_now().await;
        }
        let _ = tx.send(Action::Engine(event));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installed_binary_unpacks_the_samples_it_was_built_with() {
        let root = tempfile::tempdir().unwrap();
        let dir = unpack_samples(root.path()).unwrap();
        assert_eq!(unpack_samples(root.path()).unwrap(), dir, "once per build");
        let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
        let ids: Vec<String> = list_sessions_in(&dir, true).into_iter().map(|e| e.id).collect();
        assert_eq!(
            ids,
            list_sessions_in(&checkout, true)
                .into_iter()
                .map(|e| e.id)
                .collect::<Vec<_>>()
        );
        assert!(ids.len() >= 4, "{ids:?}");
        for id in &ids {
            assert_eq!(
                std::fs::read(dir.join(id).join("journal.jsonl")).unwrap(),
                std::fs::read(checkout.join(id).join("journal.jsonl")).unwrap()
            );
        }
    }

    #[test]
    fn exports_of_samples_go_to_the_data_dir_and_others_next_to_their_journal() {
        let data = Path::new("/data");
        let samples = samples_dir().expect("the checkout has sample-sessions/");
        assert_eq!(
            export_target(&samples.join("20261129-201520-gse-on-the-local-model-e700"), data),
            data.join("exports/20261129-201520-gse-on-the-local-model-e700.json")
        );
        let own = data.join("sessions/20261201-000000-x");
        assert_eq!(export_target(&own, data), own.join("export.json"));
    }

    #[test]
    fn replayed_answers_stream_in_words_or_short_runs_of_characters() {
        assert_eq!(replay_pieces("I like books. "), vec!["I ", "like ", "books. "]);
        let zh = "日行者：「见到一个人时，你多快能看出他此刻的心情？」";
        let pieces = replay_pieces(zh);
        assert_eq!(pieces.concat(), zh, "nothing lost or reordered");
        assert!(
            pieces.len() >= 8 && pieces.iter().all(|p| p.chars().count() <= 3),
            "{pieces:?}"
        );
        assert!(replay_pieces("").is_empty());
    }

    #[test]
    fn sessions_started_in_the_same_second_are_listed_in_start_order() {
        let data = tempfile::tempdir().unwrap();
        // The later session has the id that sorts first.
        for (id, ms) in [("20261130-000000-zzzz", 1_000), ("20261130-000000-aaaa", 1_400)] {
            let dir = session::sessions_dir(data.path()).join(id);
            std::fs::create_dir_all(&dir).unwrap();
            let line = format!(
                r#"{{"event":"run_started","session":"{id}","name":null,"created":"2026-11-30T00:00:00Z","app_version":"0.1.0","plan":{{"characters":["hermione-en"],"scales":["GSE"],"methods":["er-batch"],"repeats":1,"rpa":"p","judge":"p","style":"description","seed":1,"max_attempts":5}},"providers":{{}},"ts_ms":{ms}}}"#
            );
            std::fs::write(dir.join("journal.jsonl"), line + "\n").unwrap();
        }
        let ids: Vec<String> = list_sessions(data.path())
            .into_iter()
            .filter(|e| !e.sample)
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, ["20261130-000000-zzzz", "20261130-000000-aaaa"]);
    }
}
