//! The workbench TUI. The driver here owns the terminal and the tasks (runs, replays, loads); the
//! [`app::App`] state machine routes to the [`screens`], [`ui`] draws. Input is handled as soon as it arrives; drawing
//! happens on a 60 Hz tick and only when something changed, so a fast token stream never queues keys
//! behind frames. The terminal is restored on quit, on panic and on SIGTERM.

pub mod app;
mod chat_task;
mod event_loop;
#[cfg(any(test, feature = "testing"))]
pub mod fixture;
pub mod keys;
mod options;
mod pointer;
mod replay;
mod reread;
pub mod run_view;
mod saving;
pub mod screens;
mod starts;
mod stray_input;
pub mod theme;
pub mod ui;
pub mod vocab;
pub mod widgets;
pub mod wrap;

use chat_task::{Said, chat};
use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ratatui::crossterm::cursor::Show;
use ratatui::crossterm::event::{
    self as ct, DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

use crate::catalog::Catalog;
use crate::config::Config;
use crate::domain::character::Character;

use crate::rpa::memories::Memories;
use crate::session::batch::BatchMode;
use crate::session::resume::Resume;
use crate::session::run::Ended;
use crate::session::{Run, SessionEntry, Start, Store};
use crate::study::interview::results;
use crate::study::live::{LiveSink, Pause};
use crate::study::{Event, Interviews, Kind, Observers, Rolebench, Study};
use app::{Action, App, Effect, Replay};
pub use event_loop::event_loop;
pub use options::{Options, OptionsError};
use replay::replay;
pub use saving::save_character;
use screens::Hits;

/// For each character, ER_batch scores on IPIP-50 from the newest session that has them.
fn interview_scores(
    sessions: &[(&SessionEntry, Vec<Event>)],
    catalog: &Catalog,
) -> BTreeMap<String, (String, BTreeMap<String, f64>)> {
    let mut out = BTreeMap::new();
    for (e, events) in sessions.iter().rev() {
        for event in events {
            if let Event::DimensionAssessed(a) = event
                && a.scale == crate::observer::SCALE
                && a.method == crate::method::Method::ErBatch
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
fn rolebench_scores(
    sessions: &[(&SessionEntry, Vec<Event>)],
    catalog: &Catalog,
) -> BTreeMap<String, app::RolebenchScore> {
    let mut out = BTreeMap::new();
    for (e, events) in sessions.iter().rev() {
        let Some((plan, items)) = crate::study::rolebench::items(events) else {
            continue;
        };
        let totals = crate::study::rolebench::totals(&items);
        // A role with no answer has no Rouge-L to show.
        for (role, mean) in totals.rouge_l.by_role.iter().filter(|(_, m)| m.count > 0) {
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

/// The sessions of the store that assess the interviews of session `interviews`, compared; fewer than
/// two is said as a message.
fn judged(store: &Store, catalog: &Catalog, interviews: &str) -> Result<crate::analysis::judges::Judges, String> {
    let found = store.sharing_interviews(interviews);
    if found.len() < 2 {
        return Err(format!(
            "no other assessment of these interviews: `incharacter assess {}` makes one",
            interviews
        ));
    }
    let sessions: Vec<(&str, &[Event])> = found
        .iter()
        .map(|(entry, events)| (entry.id.as_str(), events.as_slice()))
        .collect();
    let mut judges = crate::analysis::judges::compare(&sessions, catalog).map_err(|e| e.to_string())?;
    // Every one holds them by this id (the view shows while the run shown holds them so).
    judges.interviews = interviews.to_string();
    Ok(judges)
}

/// The probe `session` of `character` against the newest earlier session of the data dir that
/// measured the character on a scale and method the probe used too; with none, the probe alone.
fn probed(
    store: &Store,
    catalog: &Catalog,
    session: &str,
    character: &str,
) -> Result<screens::persona::Probed, String> {
    use crate::analysis::diff::diff;
    let own: Vec<SessionEntry> = store.list().into_iter().filter(|e| !e.sample).collect();
    let at = own
        .iter()
        .position(|e| e.id == session)
        .ok_or_else(|| format!("session {} is not in the data dir", session))?;
    let after = store.load(&own[at].path).map_err(|e| e.to_string())?;
    // The session before is one asked and judged as the probe was (models, style, prompts,
    // sampling, reading: `analysis::setup`), so what moved is the character's edit; only if none was, any with the same scale
    // and method.
    let compared = |entry: &SessionEntry, before: &[crate::study::Event]| {
        diff((&entry.id, before), (&own[at].id, &after), catalog, Some(character))
            .ok()
            .filter(|d| !d.dimensions.is_empty())
    };
    let mut unlike = Vec::new();
    for entry in own[..at].iter().rev() {
        let Ok(before) = store.load(&entry.path) else {
            continue;
        };
        if crate::analysis::setup::differences(&before, &after).is_empty() {
            if let Some(d) = compared(entry, &before) {
                return Ok(screens::persona::Probed::new(d, false));
            }
        } else {
            unlike.push((entry, before));
        }
    }
    if let Some(d) = unlike.iter().find_map(|(entry, before)| compared(entry, before)) {
        return Ok(screens::persona::Probed::new(d, false));
    }
    let alone = diff((session, &after), (session, &after), catalog, Some(character)).map_err(|e| e.to_string())?;
    Ok(screens::persona::Probed::new(alone, true))
}

/// The versions the data dir's sessions recorded, and each character's version now (with the
/// memories a run would give it).
fn versions(store: &Store, catalog: &Catalog) -> screens::persona::Versions {
    let mut current = BTreeMap::new();
    let mut greetings = BTreeMap::new();
    for e in &catalog.characters {
        let c = &e.value;
        let memories = crate::rpa::memories::chunks(store.data(), &c.id)
            .ok()
            .flatten()
            .unwrap_or_default();
        current.insert(c.id.clone(), c.version(&memories));
        if let Some(g) = crate::rpa::card::opening(store.data(), c, &memories) {
            greetings.insert(c.id.clone(), g);
        }
    }
    screens::persona::Versions {
        index: crate::session::store::character_versions(store.data()),
        current,
        greetings,
    }
}

/// What the "re-assess with…" dialog opens on: the session in `dir` and the prompt sets kept in
/// `prompts` (`<data dir>/prompts/`).
fn offer_reassess(
    store: &Store,
    dir: &Path,
    prompts: &Path,
) -> Result<screens::reassess::Offer, crate::session::SessionError> {
    let events = store.load(dir)?;
    let sets = crate::templates::sets_in(prompts)
        .into_iter()
        .map(|(name, set)| {
            let set = set.map_err(|e| e.to_string());
            (name.to_string(), set)
        })
        .collect();
    Ok(screens::reassess::Offer {
        parent: crate::study::interview::reassess::parent_id(dir, &events),
        events,
        sets,
    })
}

fn load_memories(data: &Path, catalog: &Catalog, events: &[Event]) -> BTreeMap<String, Arc<Memories>> {
    let mut out = BTreeMap::new();
    if let Some(plan) = Interviews::plan_of(events) {
        for id in &plan.characters {
            let speaker = catalog.character(id).map_or(String::new(), |c| c.name.clone());
            if let Ok(Some(m)) = Memories::load(data, id, &speaker) {
                out.insert(id.clone(), Arc::new(m));
            }
        }
    }
    out
}

/// The config's `[tui]` section read as the workbench reads it: the key map, the themes (bundled, then
/// the user's `themes/` beside the config file), and what the doctor reports of them.
fn read_tui_section(config: &Config) -> (keys::Keymap, Vec<theme::Theme>, crate::doctor::Workbench) {
    let (keymap, key_errors) = keys::Keymap::with_config(&config.tui.keys);
    let user_themes = crate::paths::config_file().and_then(|p| p.parent().map(|d| d.join("themes")));
    let (themes, theme_errors) = theme::load_all(user_themes.as_deref());
    let workbench = crate::doctor::Workbench {
        key_errors,
        theme_errors: theme_errors.iter().map(ToString::to_string).collect(),
        bindings: config.tui.keys.len(),
        theme: config.tui.theme.clone(),
        theme_found: config
            .tui
            .theme
            .as_ref()
            .is_some_and(|n| themes.iter().any(|t| &t.name == n)),
    };
    (keymap, themes, workbench)
}

/// What the workbench would say of the config's `[tui]` section (for `doctor`).
pub fn check_tui_section(config: &Config) -> crate::doctor::Workbench {
    read_tui_section(config).2
}

/// Runs the TUI until the user quits, on the process's runtime.
pub fn main(options: Options, runtime: &tokio::runtime::Handle) -> anyhow::Result<()> {
    let catalog = Catalog::load_user()?;
    let skipped: Vec<String> = catalog.problems.iter().map(|p| p.to_string()).collect();
    // (A file of several errors is one file.)
    let skipped_files = catalog.problems.iter().map(|p| &p.file).collect::<BTreeSet<_>>().len();
    let config = Config::load_user()?;
    let data = crate::paths::data_dir().ok_or_else(|| anyhow::anyhow!("no data dir: set INCHARACTER_DATA_DIR"))?;
    let catalog = Arc::new(catalog);
    // What the workbench opens is checked against the scales, as the CLI's loads are.
    let store = Store::new(&data).checked(catalog.clone());
    let (keymap, themes, workbench) = read_tui_section(&config);
    if !workbench.key_errors.is_empty() {
        anyhow::bail!("{}", workbench.key_errors.join("\n"));
    }
    for e in &workbench.theme_errors {
        tracing::warn!("{e}");
    }
    let theme = config
        .tui
        .theme
        .as_ref()
        .and_then(|name| themes.iter().position(|t| &t.name == name))
        .unwrap_or(0);
    let mut app = App::new(catalog, &config, Some(&data), keymap, themes, theme);
    app.welcome.facts.workbench = workbench;
    if let Some(name) = &config.tui.theme
        && !app.themes.iter().any(|t| &t.name == name)
    {
        let skipped = &app.welcome.facts.workbench.theme_errors;
        app.flash = Some(theme::not_found(name, &app.theme().name, skipped));
    }
    if !skipped.is_empty() {
        tracing::warn!("skipped: {}", skipped.join("; "));
        app.flash = Some(format!(
            "{} data file(s) skipped: `incharacter validate` says why",
            skipped_files
        ));
    } else if let Some(path) = crate::paths::named_config_missing() {
        app.flash = Some(crate::paths::config_missing_warning(&path));
    } else if let Some(note) = app.catalog.notes.first() {
        // Labels a replaced scale no longer fits: said, as `incharacter characters` says it.
        app.flash = Some(note.message.clone());
    }
    let mut first = vec![Effect::ListSessions];
    if let Some((what, speed)) = &options.replay {
        let path = store.find(what)?;
        // What is replayed is read before the terminal is taken: a file that is not a session's
        // journal is the user's mistake, said on the command line.
        let events = store.load(&path)?;
        if !events.iter().any(|e| e.start().is_some()) {
            return Err(crate::session::SessionError::NotAJournal(path.join("journal.jsonl")).into());
        }
        app.screen = app::Screen::Live;
        app.live.start(Some(*speed), false);
        if options.demo {
            let mut finished = run_view::RunView::default();
            for e in &events {
                finished.apply_event(e, &app.catalog);
            }
            app.demo = Some(app::Demo {
                step: 0,
                observers: store.observer_sample(),
                finished: Some(Box::new(finished)),
            });
            app.flash = Some(app::DEMO_STEPS[0].1.into());
        }
        first.push(Effect::Replay { path, speed: *speed });
    }
    // Without a terminal (a pipe, a CI job, `ssh host incharacter`) there is nothing to draw on.
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(OptionsError::NoTerminal.into());
    }
    let mut terminal = ratatui::init();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableMouseCapture, DisableBracketedPaste, Show);
        hook(info);
    }));
    // Pasted text arrives whole (bracketed), not as keys.
    let _ = execute!(std::io::stdout(), EnableMouseCapture, EnableBracketedPaste);
    let mut draw = |app: &App| -> anyhow::Result<Hits> {
        let _ = execute!(std::io::stdout(), BeginSynchronizedUpdate);
        let mut hits = Hits::default();
        terminal.draw(|f| hits = ui::draw(f, app))?;
        let _ = execute!(std::io::stdout(), EndSynchronizedUpdate);
        Ok(hits)
    };
    let result = runtime.block_on(event_loop(ct::EventStream::new(), app, config, store, first, &mut draw));
    // (The cursor too: an exit by a signal below leaves before the terminal's drop would show it.)
    let _ = execute!(std::io::stdout(), DisableMouseCapture, DisableBracketedPaste, Show);
    ratatui::restore();
    // Ended by a signal: the exit says so, as a shell reports a process the signal killed.
    if let Ok(Some(signal)) = result {
        std::process::exit(128 + signal);
    }
    result.map(|_| ())
}

struct Driver {
    tx: UnboundedSender<Action>,
    /// Models connected for the chat screen, by provider name.
    models: BTreeMap<String, Arc<dyn crate::llm::ChatModel>>,
    config: Arc<Config>,
    data: PathBuf,
    store: Store,
    catalog: Arc<Catalog>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The chat reply being written, if one is (ctrl-x stops it).
    chat: Option<tokio::task::JoinHandle<()>>,
    pause: Pause,
    speed: watch::Sender<Replay>,
    /// The data folder's character and scale files as the catalog last read them.
    catalog_files: reread::CatalogFiles,
}

impl Driver {
    /// Starts the chat turn `effect` asks for (an [`Effect::Chat`]): its reply streams to `tx`,
    /// and ctrl-x can stop it.
    fn start_chat(&mut self, effect: Effect, tx: UnboundedSender<Action>) {
        let Effect::Chat {
            character,
            style,
            provider,
            greeting,
            history,
            text,
            sampling,
        } = effect
        else {
            return;
        };
        let model = match self.model(&provider) {
            Ok(m) => m,
            Err(e) => {
                let _ = tx.send(Action::ChatDone(Err(e.to_string())));
                return;
            }
        };
        let (data, catalog) = (self.data.clone(), self.catalog.clone());
        let sampling = sampling.unwrap_or_else(|| crate::study::interview::answer_sampling(&self.config, None, None));
        self.chat = Some(tokio::spawn(async move {
            let said = Said {
                greeting: greeting.as_deref(),
                history: &history,
                text: &text,
                sampling,
            };
            let result = chat(model, &catalog, &data, &character, style, said, &tx).await;
            let _ = tx.send(Action::ChatDone(result));
        }));
    }

    /// A provider for the chat screen (no cache: asking again should give a fresh answer).
    fn model(&mut self, provider: &str) -> Result<Arc<dyn crate::llm::ChatModel>, crate::llm::LlmError> {
        if let Some(m) = self.models.get(provider) {
            return Ok(m.clone());
        }
        let shared =
            crate::llm::client::Shared::new(self.config.max_concurrency, None, crate::config::CacheMode::Off, 0);
        let env = |k: &str| std::env::var(k).ok();
        let model: Arc<dyn crate::llm::ChatModel> = Arc::new(crate::llm::connect(
            &self.config,
            provider,
            shared,
            &env,
            Some(&self.data),
        )?);
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
            Effect::StartRun { plan, name } => self.spawn::<Interviews>(Start::New { plan, name }),
            Effect::Resume { id } => self.resume(id),
            Effect::StartObserve { plan } => self.spawn::<Observers>(Start::New { plan, name: None }),
            Effect::StartRolebench { plan } => self.spawn::<Rolebench>(Start::New {
                plan: *plan,
                name: None,
            }),
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
            Effect::Replay { path, speed } => self.start_replay(path, speed),
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
                // The files are read (and so checked) first: one damaged since the session was
                // opened (edited by hand, by another program) is named and nothing is written
                // after its bad line, as at opening. Read again after, they bring what another
                // window or annotator wrote meanwhile.
                if let Err(e) = crate::annotation::load(&dir, &self.catalog) {
                    let why = e.to_string();
                    let _ = tx.send(Action::AnnotationNotSaved(annotation.case));
                    let _ = tx.send(Action::AnnotationsUnreadable(why.clone()));
                    let _ = tx.send(Action::Flash(format!("not saved: {why}")));
                    return;
                }
                match crate::annotation::append(&dir, &annotation) {
                    // The screen takes back what is on disk (its cursor then at the first case
                    // without an answer there).
                    Err(e) => {
                        let _ = tx.send(Action::Flash(format!("not saved: {e}")));
                        if let Ok(all) = crate::annotation::load(&dir, &self.catalog) {
                            let _ = tx.send(Action::Annotations(all));
                        }
                    }
                    Ok(()) => self.reread_annotations(&dir),
                }
            }
            Effect::RereadAnnotations(dir) => self.reread_annotations(&dir),
            Effect::LoadAnnotations(dir) => {
                let catalog = self.catalog.clone();
                tokio::task::spawn_blocking(move || match crate::annotation::load(&dir, &catalog) {
                    Ok(all) => {
                        let _ = tx.send(Action::Annotations(all));
                    }
                    Err(e) => {
                        let _ = tx.send(Action::AnnotationsUnreadable(e.to_string()));
                    }
                });
            }
            Effect::Open(path) => self.open(path),
            Effect::Export(path) => self.export(path),
            Effect::Compare(paths) => self.compare(paths),
            Effect::OfferReassess(path) => {
                let (store, prompts) = (self.store.clone(), self.data.join("prompts"));
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(match offer_reassess(&store, &path, &prompts) {
                        Ok(offer) => Action::Reassess(Box::new(offer)),
                        Err(e) => Action::Flash(e.to_string()),
                    });
                });
            }
            Effect::Judges { interviews } => {
                let (store, catalog) = (self.store.clone(), self.catalog.clone());
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(Action::Judged(judged(&store, &catalog, &interviews)));
                });
            }
            Effect::ListSessions => self.list_sessions(),
            Effect::CheckProviders(names) => self.check_providers(names),
            Effect::SaveCharacter {
                character,
                was,
                copy_of,
            } => self.save_character(&character, was.as_deref(), copy_of.as_deref()),
            Effect::ProbeDiff { character, session } => {
                let (store, catalog) = (self.store.clone(), self.catalog.clone());
                tokio::task::spawn_blocking(move || {
                    let result = probed(&store, &catalog, &session, &character);
                    let _ = tx.send(Action::Probed(Box::new(result)));
                });
            }
            chat @ Effect::Chat { .. } => self.start_chat(chat, tx),
            Effect::StopChat => {
                // Aborted before it said it was done, it is said stopped here; one that had
                // finished already said so.
                if let Some(task) = self.chat.take()
                    && !task.is_finished()
                {
                    task.abort();
                    let _ = tx.send(Action::ChatDone(Err(
                        "stopped (ctrl-x): the reply was not finished".into()
                    )));
                }
            }
            Effect::FetchModel => {
                let data = self.data.clone();
                tokio::task::spawn_blocking(move || {
                    let _ = tx.send(Action::Fetched(fetch_model(&data, &tx)));
                });
            }
        }
    }

    /// Replays the session at `path` in place of the task shown.
    fn start_replay(&mut self, path: PathBuf, speed: Replay) {
        let tx = self.tx.clone();
        self.stop();
        // The session shown is the one replayed: annotations and re-assessment go to it (a
        // sample's are refused), as after opening it.
        let _ = tx.send(Action::SessionDir(path.clone()));
        self.pause.set(false);
        self.speed.send_replace(speed);
        let speed = self.speed.subscribe();
        let (data, catalog, pause) = (self.data.clone(), self.catalog.clone(), self.pause.clone());
        self.task = Some(tokio::spawn(async move {
            let result = replay(&path, &data, &catalog, &tx, speed, &pause).await;
            let _ = tx.send(Action::RunEnded(result));
        }));
    }

    /// Reads the session at `path` to browse: its characters' memories, its events, its folder.
    fn open(&self, path: PathBuf) {
        let (tx, store, catalog) = (self.tx.clone(), self.store.clone(), self.catalog.clone());
        tokio::task::spawn_blocking(move || match store.load(&path) {
            Ok(events) => {
                let _ = tx.send(Action::Memories(load_memories(store.data(), &catalog, &events)));
                // Its folder first: the session is named by it (a copy's folder is not its journal's id).
                let _ = tx.send(Action::SessionDir(path.clone()));
                let _ = tx.send(Action::SessionLoaded(events));
                // Another process goes on writing it: what is shown is what its journal held.
                if let Some(writer) = crate::journal::writer(&path.join("journal.jsonl")) {
                    let _ = tx.send(Action::Flash(format!(
                        "session {} is being written by another incharacter (pid {}): shown as its journal was when \
                         opened; open it again from Sessions to read it anew",
                        path.file_name().unwrap_or_default().to_string_lossy(),
                        writer.pid
                    )));
                }
            }
            Err(e) => {
                let _ = tx.send(Action::Flash(e.to_string()));
            }
        });
    }

    /// Writes the export of the session at `path` beside the sessions, and says where.
    fn export(&self, path: PathBuf) {
        let (tx, store, catalog) = (self.tx.clone(), self.store.clone(), self.catalog.clone());
        let target = self.store.export_target(&path);
        tokio::task::spawn_blocking(move || {
            let message = match store.export(&path, &catalog) {
                Ok(export) => match serde_json::to_vec_pretty(&export)
                    .map_err(|e| e.to_string())
                    .and_then(|bytes| crate::files::write_atomic(&target, &bytes).map_err(|e| e.to_string()))
                {
                    Ok(()) => format!("exported to {}", target.display()),
                    Err(e) => e,
                },
                Err(e) => e.to_string(),
            };
            let _ = tx.send(Action::Flash(message.to_string()));
        });
    }

    /// Summarizes the marked sessions side by side, and pairs them when there are two.
    fn compare(&self, paths: Vec<PathBuf>) {
        let (tx, store, catalog) = (self.tx.clone(), self.store.clone(), self.catalog.clone());
        tokio::task::spawn_blocking(move || {
            let bootstrap = Some(crate::domain::resample::Bootstrap::default());
            let loaded: Vec<(String, Vec<Event>)> = paths
                .iter()
                .filter_map(|p| Some((p.file_name()?.to_string_lossy().into_owned(), store.load(p).ok()?)))
                .collect();
            let rows = loaded
                .iter()
                .map(|(id, events)| (id.clone(), results::summary_with(events, &catalog, None, bootstrap)))
                .collect();
            let _ = tx.send(Action::Compared(rows));
            if let [(a_id, a), (b_id, b)] = loaded.as_slice() {
                let options = crate::analysis::compare::Options::default();
                let paired = crate::analysis::compare::compare((a_id, a), (b_id, b), &catalog, &options)
                    .map_err(|e| e.to_string());
                let _ = tx.send(Action::Paired(Box::new(paired)));
            }
        });
    }

    /// Reads the session's annotations again for the Annotate screen, its cursor kept (or why they
    /// cannot be read). Read here, not on another thread, so rereads arrive in the order they were
    /// asked for (an answer's after the screen's opening); an annotator's file is small.
    fn reread_annotations(&self, dir: &Path) {
        let _ = self.tx.send(match crate::annotation::load(dir, &self.catalog) {
            Ok(all) => Action::AnnotationsReread(all),
            Err(e) => Action::AnnotationsUnreadable(e.to_string()),
        });
    }

    /// Lists the sessions, with the characters' versions and score tables read from their journals.
    fn list_sessions(&self) {
        let (tx, store, catalog) = (self.tx.clone(), self.store.clone(), self.catalog.clone());
        tokio::task::spawn_blocking(move || {
            let (list, unlisted) = store.list_with_unreadable();
            let _ = tx.send(Action::Unlisted(unlisted));
            // Each journal read once for both score tables.
            let sessions: Vec<(&SessionEntry, Vec<Event>)> = list
                .iter()
                .filter_map(|e| Some((e, store.load(&e.path).ok()?)))
                .collect();
            let _ = tx.send(Action::Versions(Box::new(versions(&store, &catalog))));
            let _ = tx.send(Action::InterviewScores(interview_scores(&sessions, &catalog)));
            let _ = tx.send(Action::RolebenchScores(rolebench_scores(&sessions, &catalog)));
            drop(sessions);
            let _ = tx.send(Action::Sessions(list));
        });
    }

    /// Checks how each provider named takes the method's requests, each on a fresh connection.
    fn check_providers(&self, names: Vec<String>) {
        for name in names {
            let (config, catalog, data, tx) = (
                self.config.clone(),
                self.catalog.clone(),
                self.data.clone(),
                self.tx.clone(),
            );
            tokio::spawn(async move {
                let fresh = || -> anyhow::Result<(Arc<dyn crate::llm::ChatModel>, crate::llm::client::Shared)> {
                    let shared =
                        crate::llm::client::Shared::new(config.max_concurrency, None, crate::config::CacheMode::Off, 0);
                    let env = |k: &str| std::env::var(k).ok();
                    let model = crate::llm::connect(&config, &name, shared.clone(), &env, Some(&data))?;
                    Ok((Arc::new(model), shared))
                };
                let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
                let verdict = crate::study::check::check(&fresh, &catalog, deadline, &|_| {})
                    .await
                    .map_err(|e| e.to_string());
                let _ = tx.send(Action::Checked(name, verdict));
            });
        }
    }

    /// Saves `character` (see [`save_character`]) and reads the versions anew.
    fn save_character(&mut self, character: &Character, was: Option<&Character>, copy_of: Option<&str>) {
        let tx = self.tx.clone();
        let saved = save_character(&self.catalog, &self.data, character, was, copy_of);
        match &saved {
            Ok(catalog) | Err((_, Some(catalog))) => {
                self.catalog = catalog.clone();
                self.store = self.store.clone().checked(catalog.clone());
            }
            Err(_) => {}
        }
        let _ = tx.send(Action::Saved(saved.map(|catalog| (character.id.clone(), catalog))));
        self.read_versions();
    }

    /// Reads the characters' versions (and greetings) anew, for the catalog now in use.
    fn read_versions(&self) {
        let (tx, store, catalog) = (self.tx.clone(), self.store.clone(), self.catalog.clone());
        tokio::task::spawn_blocking(move || {
            let _ = tx.send(Action::Versions(Box::new(versions(&store, &catalog))));
        });
    }

    /// What a run task takes from the driver; the task shown before it stops.
    fn task(&mut self) -> Task {
        self.stop();
        self.pause.set(false);
        Task {
            tx: self.tx.clone(),
            pause: self.pause.clone(),
            config: self.config.clone(),
            store: self.store.clone(),
            catalog: self.catalog.clone(),
        }
    }

    /// Starts a new session of kind `S`.
    fn spawn<S: Study>(&mut self, start: Start<S::Plan>) {
        let task = self.task();
        self.task = Some(tokio::spawn(task.run::<S>(start, None)));
    }

    /// Resumes session `id` as the command line does ([`Resume`]): as the kind of study it is, in
    /// the batch mode it last ran in.
    fn resume(&mut self, id: String) {
        let task = self.task();
        self.task = Some(tokio::spawn(async move {
            let store = task.store.clone();
            let how = match tokio::task::spawn_blocking(move || Resume::of(&store, &id)).await {
                Ok(Ok(how)) => how,
                Ok(Err(e)) => return task.ended(Err(e.to_string())),
                Err(e) => return task.ended(Err(e.to_string())),
            };
            let (id, batch) = (how.id, how.batch);
            match how.kind {
                Kind::Interviews => task.run::<Interviews>(Start::Resume { id }, batch).await,
                Kind::Observers => task.run::<Observers>(Start::Resume { id }, batch).await,
                Kind::Rolebench => task.run::<Rolebench>(Start::Resume { id }, batch).await,
            }
        }));
    }
}

/// A run task's share of the driver.
struct Task {
    tx: UnboundedSender<Action>,
    pause: Pause,
    config: Arc<Config>,
    store: Store,
    catalog: Arc<Catalog>,
}

impl Task {
    fn ended(&self, result: Result<(), String>) {
        let _ = self.tx.send(Action::RunEnded(result));
    }

    /// Opens a session off the async threads (connecting may load a model), shows what its journal
    /// holds, then runs it, journaling as it goes: streaming, with live reports on the action
    /// channel; or in `batch` mode, as the command line does (a Batch API batch polled, a batch
    /// files phase written for an offline engine).
    async fn run<S: Study>(self, start: Start<S::Plan>, batch: Option<BatchMode>) {
        let Task {
            tx,
            pause,
            config,
            store,
            catalog,
        } = self;
        let open = {
            let (catalog, store, batch) = (catalog.clone(), store.clone(), batch.clone());
            move || match batch {
                Some(mode) => Run::<S>::open_batch(catalog, &config, &store, start, mode, None),
                None => Run::<S>::open(catalog, &config, &store, start, None),
            }
        };
        let run = match tokio::task::spawn_blocking(open).await {
            Ok(Ok(run)) => run,
            // Complete (another incharacter completed it since it was listed): opened to browse, as
            // a session is, with what the resume found.
            Ok(Err(complete @ crate::session::SessionError::Complete { .. })) => {
                let _ = tx.send(Action::RunEnded(Ok(())));
                if let crate::session::SessionError::Complete { id, .. } = &complete
                    && let Ok(dir) = store.own(id)
                    && let Ok(events) = store.load(&dir)
                {
                    let _ = tx.send(Action::Memories(load_memories(store.data(), &catalog, &events)));
                    let _ = tx.send(Action::SessionDir(dir));
                    let _ = tx.send(Action::SessionLoaded(events));
                }
                let _ = tx.send(Action::Flash(complete.to_string()));
                return;
            }
            Ok(Err(e)) => {
                let _ = tx.send(Action::RunEnded(Err(e.to_string())));
                return;
            }
            Err(e) => {
                let _ = tx.send(Action::RunEnded(Err(e.to_string())));
                return;
            }
        };
        for note in &run.notes {
            let _ = tx.send(Action::Flash(note.clone()));
        }
        for change in &run.changed {
            let _ = tx.send(Action::Flash(change.to_string()));
        }
        let _ = tx.send(Action::Accounting(run.accounting()));
        let _ = tx.send(Action::Memories(run.study.memories()));
        let _ = tx.send(Action::SessionDir(run.dir.clone()));
        // What the journal holds so far (the start record, and for a resume everything before), then
        // a resume's own record, which the journal gets with the sitting's first.
        if let Ok(events) = store.load(&run.dir) {
            for e in events {
                let _ = tx.send(Action::Engine(e));
            }
        }
        if let Some(resumed) = &run.resumed {
            let _ = tx.send(Action::Engine(resumed.clone()));
        }
        // The providers a rate limit holds back change with every few replies: a look four times
        // a second is enough for a person, and sends nothing while nothing changes.
        let limits = run.limits();
        let held_tx = tx.clone();
        let watch = tokio::spawn(async move {
            let mut shown = Vec::new();
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
            loop {
                tick.tick().await;
                let held = limits.throttled();
                if held != shown {
                    shown = held.clone();
                    if held_tx.send(Action::Held(held)).is_err() {
                        return;
                    }
                }
            }
        });
        let id = run.id.clone();
        let events_tx = tx.clone();
        let on_event = move |e: &Event| {
            let _ = events_tx.send(Action::Engine(e.clone()));
        };
        let result = match batch {
            None => {
                // Live reports share the action channel with the records, so an answer's tokens
                // always arrive before the record that completes it.
                let live_tx = tx.clone();
                let sink: LiveSink = Arc::new(move |l| {
                    let _ = live_tx.send(Action::Live(l));
                });
                run.execute(Some((sink, pause)), on_event).await.map(Ended::Complete)
            }
            // Nothing streams in batch mode: a phase goes out whole, and how it does is said.
            Some(_) => {
                let note_tx = tx.clone();
                let note = move |line: String| {
                    let _ = note_tx.send(Action::BatchNote(line));
                };
                run.execute_batch(on_event, &note).await
            }
        };
        watch.abort();
        let result = match result {
            Ok(Ended::Waiting(requests)) => {
                let _ = tx.send(Action::BatchWritten { session: id, requests });
                return;
            }
            Ok(Ended::Complete(events)) => {
                if let Some(last @ Event::RunFinished { .. }) = events.last() {
                    let _ = tx.send(Action::Engine(last.clone()));
                }
                let failures = crate::study::failures_any(&events);
                if failures.any() {
                    let kind = crate::study::kind_of(&events).unwrap_or(crate::study::Kind::Interviews);
                    let _ = tx.send(Action::RunEnded(Ok(())));
                    let _ = tx.send(Action::Flash(format!(
                        "run finished with failures: {} (the journal says why; Sessions u asks them again)",
                        failures.describe(kind)
                    )));
                    return;
                }
                Ok(())
            }
            Err(e) => {
                let advice = if e.resumable() {
                    "; the session is kept: resume it from Sessions (u) once that is fixed"
                } else {
                    ""
                };
                Err(format!("{e}{advice}"))
            }
        };
        let _ = tx.send(Action::RunEnded(result));
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

fn fetch_model(data: &Path, tx: &UnboundedSender<Action>) -> Result<String, String> {
    #[cfg(feature = "local-model")]
    {
        let models = crate::llm::local::models_dir(data);
        crate::llm::local::fetch(&models, crate::config::DEFAULT_LOCAL_MODEL, &mut |line| {
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

#[cfg(test)]
mod tests;
