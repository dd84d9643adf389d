//! The workbench as a state machine: input and engine events come in as [`Action`]s, `update` hands
//! them to the screen they concern and returns [`Effect`]s (start a run, open a session, …) for the
//! driver to perform. `App` routes keys and clicks to the active screen, applies what a screen asks of
//! the others, and holds what belongs to none: the run shown, the flash message, the theme, the keymap
//! and the demo tour. Drawing (`ui`) is a pure function of this state, so tests drive it without a
//! terminal.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use ratatui::crossterm::event::KeyEvent;

use super::keys::{Command, Key, Keymap, Mode};
use super::run_view::RunView;
use super::screens::annotate::Annotate;
use super::screens::chat::Chat;
use super::screens::compare::Compare;
use super::screens::inspect::Inspect;
use super::screens::live::{BatchWritten, Live};
use super::screens::observers::Observers;
use super::screens::reassess::{Offer, Outcome, ReassessDialog};
use super::screens::rolebench::Rolebench;
use super::screens::sessions::Sessions;
use super::screens::setup::{Setup, SetupPane};
use super::screens::welcome::{FetchState, Welcome};
use super::screens::{Component, Ctx, Request};
use super::theme::Theme;
use crate::annotation::{Annotation, Case};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::doctor::Facts;
use crate::llm::{ChatMessage, ModelInfo, Role};
use crate::method::rolebench::Question;
use crate::rpa::memories::Memories;
use crate::study::Event;
use crate::study::interview::results::SummaryRow;

pub use super::screens::annotate::SAMPLE_READ_ONLY;
pub use super::screens::compare::RolebenchScore;
pub use super::vocab::{DEMO_STEPS, Demo, Effect, ProviderStatus, Replay, Screen};
pub use crate::session::SessionEntry;

/// Why a character was not saved, with the catalog read again when the file had changed since it
/// was read.
pub type NotSaved = (String, Option<Arc<Catalog>>);

pub enum Action {
    Key(KeyEvent),
    /// Text pasted into the terminal (bracketed paste): one piece, never keys.
    Paste(String),
    Engine(Event),
    Live(crate::study::live::Live),
    /// Milliseconds since the app started.
    Tick(u64),
    /// A session's events, loaded to browse (not to replay).
    SessionLoaded(Vec<Event>),
    /// The run task ended (`Err` says why it stopped early).
    RunEnded(Result<(), String>),
    /// How a run in batch mode is doing (a batch polled, results imported), as the command line
    /// says it.
    BatchNote(String),
    /// A run in batch files mode wrote its next phase's requests file and stopped: the session
    /// waits for their results (`incharacter batch import`).
    BatchWritten {
        session: String,
        requests: PathBuf,
    },
    /// The providers a rate limit now holds below their maximum (sent when it changes).
    Held(Vec<crate::llm::policy::Throttled>),
    /// The accounts of the run that goes: Live reads how many of its requests wait and fly.
    Accounting(Arc<crate::llm::accounting::Accounting>),
    Sessions(Vec<SessionEntry>),
    /// Session folders the listing left out, each with why (its journal cannot be read).
    Unlisted(Vec<(std::path::PathBuf, String)>),
    Compared(Vec<(String, Vec<SummaryRow>)>),
    /// Two marked sessions compared, paired (`Err`: why they cannot be).
    Paired(Box<Result<crate::analysis::compare::Comparison, String>>),
    /// A session read for the "re-assess with…" dialog.
    Reassess(Box<Offer>),
    /// The sessions that assess the shown interviews, compared (or why they cannot be).
    Judged(Result<crate::analysis::judges::Judges, String>),
    /// A provider's verdict on the method's requests (or why it could not be checked).
    Checked(String, Result<Vec<crate::study::check::Verdict>, String>),
    Fetched(Result<String, String>),
    Flash(String),
    Memories(BTreeMap<String, Arc<Memories>>),
    /// The folder of the session being shown.
    SessionDir(PathBuf),
    Annotations(BTreeMap<String, BTreeMap<Case, Annotation>>),
    /// An answer that was not written (its files could not be read): the cursor goes back to its case.
    AnnotationNotSaved(Case),
    /// The session's annotations read again while the screen is in use: the cursor stays.
    AnnotationsReread(BTreeMap<String, BTreeMap<Case, Annotation>>),
    /// The session's annotations could not be read (why).
    AnnotationsUnreadable(String),
    /// Interview (ER_batch, IPIP-50) results of characters, for the observers screen.
    InterviewScores(BTreeMap<String, (String, BTreeMap<String, f64>)>),
    /// Characters' newest RoleBench results, for the compare screen.
    RolebenchScores(BTreeMap<String, RolebenchScore>),
    /// Question files found for the RoleBench screen.
    RolebenchFiles(Vec<PathBuf>),
    /// A question file read (or why it could not be).
    RolebenchLoaded(PathBuf, Result<Vec<Question>, String>),
    /// The chat request as assembled (shown on the chat screen).
    ChatPrompt(Vec<ChatMessage>),
    ChatToken(String),
    /// The chat reply's attempt failed and is retried: what streamed so far is dropped.
    ChatRetry,
    /// The chat reply ended (`Err` says why it failed).
    ChatDone(Result<(), String>),
    /// The catalog as loaded again after a character was saved (`Err`: why it was not saved, and
    /// the catalog loaded again when the file had changed since it was read).
    Saved(Result<(String, Arc<Catalog>), NotSaved>),
    /// A probe measured against the session before it (`Err`: why there is no before/after).
    Probed(Box<Result<crate::tui::screens::persona::Probed, String>>),
    /// The characters' versions: recorded by sessions, and as they are now.
    Versions(Box<crate::tui::screens::persona::Versions>),
    /// The data folder's character and scale files changed (written outside the workbench): the
    /// catalog as read again.
    CatalogReread(Arc<Catalog>),
}

/// What arrives from a run, a journal, a model or another process, as the app keeps it: without
/// anything a terminal would act on (an escape sequence a model streamed, an OSC title in a journal
/// note, pip's coloured stderr). The one place the TUI cleans text; what it draws is gated again cell
/// by cell (`ui::inert_cells`). A RoleBench answer is kept as it came: it is scored (Rouge-L, as
/// `report` scores it), so the RoleBench screen makes it safe where it draws it; and so are a
/// session's recorded prompt templates, whose text is checked against its SHA-256.
fn inert(action: Action) -> Action {
    use crate::text::inert as clean;
    let scored = |e: &crate::study::Event| {
        matches!(
            e,
            crate::study::Event::Rolebench(crate::study::rolebench::Step::Answered { .. })
        )
    };
    let event = |e: &crate::study::Event| {
        if scored(e) {
            return e.clone();
        }
        let mut cleaned = clean(e);
        // The templates a session recorded are checked against their SHA-256 (a CRLF file's carriage
        // returns included) before the Inspector rebuilds prompts from them: kept as recorded, and
        // drawn through the cell gate like the rest.
        if let (crate::study::Event::RunStarted { plan, .. }, crate::study::Event::RunStarted { plan: kept, .. }) =
            (e, &mut cleaned)
        {
            kept.prompts = plan.prompts.clone();
        }
        cleaned
    };
    match action {
        Action::Engine(e) => Action::Engine(event(&e)),
        Action::Live(live) => Action::Live(clean(&live)),
        Action::SessionLoaded(events) => Action::SessionLoaded(events.iter().map(event).collect()),
        Action::ChatPrompt(messages) => Action::ChatPrompt(clean(&messages)),
        Action::ChatToken(text) => Action::ChatToken(clean(&text)),
        Action::ChatDone(result) => Action::ChatDone(clean(&result)),
        Action::Flash(text) => Action::Flash(clean(&text)),
        Action::AnnotationsUnreadable(why) => Action::AnnotationsUnreadable(clean(&why)),
        Action::BatchNote(text) => Action::BatchNote(clean(&text)),
        Action::RunEnded(result) => Action::RunEnded(clean(&result)),
        Action::Fetched(result) => Action::Fetched(clean(&result)),
        Action::Saved(Err((e, catalog))) => Action::Saved(Err((clean(&e), catalog))),
        Action::Held(held) => Action::Held(clean(&held)),
        other => other,
    }
}

pub struct App {
    pub catalog: Arc<Catalog>,
    /// Characters and scales whose file cannot be read for now (see `reread`).
    pub unreadable: crate::catalog::Unreadable,
    pub keymap: Keymap,
    pub themes: Vec<Theme>,
    pub theme: usize,
    pub screen: Screen,
    pub help: bool,
    /// How far the help overlay is scrolled (it scrolls when the keys do not fit).
    pub help_scroll: std::cell::Cell<u16>,
    pub quit: bool,
    /// Quit was asked once with a character's edits unsaved: asked again, the workbench quits.
    quit_asked: bool,
    /// The last frame was too small to show the screen: keys other than ctrl-c do nothing unseen.
    pub(super) too_small: bool,
    /// Session folders the last listing left out (said when the number changes).
    unlisted: usize,
    /// A start (its screen, kind and what exactly it starts) asked about once while a run goes: the
    /// same one asked again with the next key stops that run.
    pub(super) start_asked: Option<super::starts::Start>,
    /// The start the key being handled may confirm (the one asked about just before).
    pub(super) start_confirmed: Option<super::starts::Start>,
    /// A start was held back by the question (what the screen set up for it is taken back).
    start_held: bool,
    pub flash: Option<String>,
    pub now_ms: u64,
    pub providers: Vec<ProviderStatus>,
    /// Prices per million tokens (in, out) of the run's providers, for the cost gauge.
    pub prices: Vec<(String, f64, f64)>,
    /// The run shown: live, replayed or opened.
    pub run: RunView,
    /// Memories of the shown run's characters, to rebuild their prompts in the inspector.
    pub memories: BTreeMap<String, Arc<Memories>>,
    /// Folder of the session shown (for its annotations).
    pub session_dir: Option<PathBuf>,
    /// The guided tour of `incharacter demo`, if this is one.
    pub demo: Option<Demo>,
    pub welcome: Welcome,
    pub setup: Setup,
    pub live: Live,
    pub inspect: Inspect,
    pub compare: Compare,
    pub sessions: Sessions,
    pub chat: Chat,
    /// The character last put in focus on Persona or the Inspector (the chat follows it).
    pub focus: Option<String>,
    pub observers: Observers,
    pub annotate: Annotate,
    pub rolebench: Rolebench,
    pub persona: crate::tui::screens::persona::Persona,
    /// The "re-assess with…" dialog, when open: it takes the keys until it closes.
    pub reassess: Option<ReassessDialog>,
}

/// The shared context, borrowed field by field, so that a screen can change itself while it reads it.
macro_rules! ctx {
    ($app:expr) => {
        Ctx {
            catalog: &$app.catalog,
            // The tour's inspector and compare steps show the demo session whole while its replay
            // goes on (Live keeps the replay).
            run: match (&$app.demo, $app.screen) {
                (Some(d), Screen::Inspector | Screen::Compare) => d.ahead_of(&$app.run).unwrap_or(&$app.run),
                _ => &$app.run,
            },
            theme: &$app.themes[$app.theme % $app.themes.len()],
            keymap: &$app.keymap,
            mode: if $app.reassess.is_some() {
                Mode::Reassess
            } else {
                $app.screen.mode()
            },
            now_ms: $app.now_ms,
            providers: &$app.providers,
            prices: &$app.prices,
            memories: &$app.memories,
            setup: &$app.setup,
            sessions: &$app.sessions.list,
            session_dir: $app.session_dir.as_deref(),
            inspected: $app.inspect.unit,
            demo: $app.demo.as_ref(),
        }
    };
}

impl App {
    /// Whether printable keys are text here (Chat's input, a character being edited, an annotation
    /// note): the key bar then offers f1 for help, since `?` types a `?`.
    pub fn typing(&self) -> bool {
        match self.screen {
            Screen::Chat => true,
            Screen::Persona => self.persona.draft.is_some(),
            Screen::Annotate => self.annotate.editing_note,
            _ => false,
        }
    }

    /// `data_dir` is where fetched models are looked for (the welcome screen's checks).
    pub fn new(
        catalog: Arc<Catalog>,
        config: &Config,
        data_dir: Option<&std::path::Path>,
        keymap: Keymap,
        themes: Vec<Theme>,
        theme: usize,
    ) -> App {
        // What the doctor sees at once (no request, no model load): the welcome screen shows it.
        let facts = Facts::quick(
            crate::paths::config_file(),
            Ok(config.clone()),
            data_dir.map(std::path::Path::to_path_buf),
            &|k| std::env::var(k).ok(),
            None,
        );
        let providers: Vec<ProviderStatus> = config
            .providers
            .iter()
            .map(|p| ProviderStatus {
                name: p.name.clone(),
                info: ModelInfo {
                    provider: p.name.clone(),
                    kind: p.kind.name().into(),
                    model: p.model.clone(),
                    sha256: None,
                },
                roles: config
                    .roles
                    .iter()
                    .filter(|(_, n)| **n == p.name)
                    .map(|(r, _)| *r)
                    .collect(),
                problem: facts.problem(&p.name),
                context: p.known_context(),
            })
            .collect();
        let role = |r: Role| config.roles.get(&r).cloned().unwrap_or_default();
        let ready = [Role::Rpa, Role::Judge]
            .iter()
            .all(|r| providers.iter().any(|p| p.name == role(*r) && p.problem.is_none()));
        let prices = config
            .providers
            .iter()
            .map(|p| (p.name.clone(), p.price_in_per_mtok, p.price_out_per_mtok))
            .collect();
        App {
            catalog,
            unreadable: Default::default(),
            keymap,
            themes,
            theme,
            screen: if ready { Screen::Setup } else { Screen::Welcome },
            help: false,
            help_scroll: std::cell::Cell::new(0),
            quit: false,
            quit_asked: false,
            too_small: false,
            unlisted: 0,
            start_asked: None,
            start_confirmed: None,
            start_held: false,
            flash: None,
            now_ms: 0,
            setup: Setup::new(
                providers.iter().map(|p| p.name.clone()).collect(),
                role(Role::Rpa),
                role(Role::Judge),
            )
            .sampled(
                crate::study::interview::answer_sampling(config, None, None),
                crate::study::interview::judge_temperature(config, None),
            ),
            providers,
            prices,
            run: RunView::default(),
            memories: BTreeMap::new(),
            session_dir: None,
            demo: None,
            welcome: Welcome { fetch: None, facts },
            live: Live {
                follow: true,
                ..Live::default()
            },
            inspect: Inspect::default(),
            compare: Compare::default(),
            sessions: Sessions::default(),
            chat: Chat::default(),
            focus: None,
            observers: Observers::default(),
            annotate: Annotate::default(),
            rolebench: Rolebench::default(),
            persona: Default::default(),
            reassess: None,
        }
    }

    pub fn theme(&self) -> &Theme {
        &self.themes[self.theme % self.themes.len()]
    }

    /// What the screens share, as it is now.
    pub fn ctx(&self) -> Ctx<'_> {
        ctx!(self)
    }

    /// The screen shown.
    pub fn component(&self) -> &dyn Component {
        match self.screen {
            Screen::Welcome => &self.welcome,
            Screen::Setup => &self.setup,
            Screen::Live => &self.live,
            Screen::Inspector => &self.inspect,
            Screen::Compare => &self.compare,
            Screen::Sessions => &self.sessions,
            Screen::Chat => &self.chat,
            Screen::Observers => &self.observers,
            Screen::Annotate => &self.annotate,
            Screen::Rolebench => &self.rolebench,
            Screen::Persona => &self.persona,
        }
    }

    pub fn update(&mut self, action: Action) -> Vec<Effect> {
        let probe = self.persona.probe.clone();
        let before = self.screen;
        let mut effects = self.handle(action);
        // However the RoleBench screen comes up (its key, a session opened or started there), its
        // question files are listed as they are now.
        if self.screen == Screen::Rolebench
            && before != Screen::Rolebench
            && !effects.contains(&Effect::ListRolebenchFiles)
        {
            effects.push(Effect::ListRolebenchFiles);
        }
        if std::mem::take(&mut self.start_held) {
            // The probe held back is not the one going.
            self.persona.probe = probe;
        }
        self.follow_focus();
        effects
    }

    /// The character in focus on the screen shown, if it is one that chooses characters (Persona's
    /// cursor, the Inspector's unit): when it changes, the chat talks to it.
    fn follow_focus(&mut self) {
        let focused = match self.screen {
            Screen::Persona => self.persona.selected(&self.catalog).map(|e| e.value.id.clone()),
            Screen::Inspector => self.run.units().get(self.inspect.unit).map(|u| u.0.clone()),
            _ => None,
        };
        if let Some(id) = focused.filter(|id| self.focus.as_ref() != Some(id)) {
            self.focus = Some(id.clone());
            self.chat.follow(id);
        }
    }

    fn handle(&mut self, action: Action) -> Vec<Effect> {
        match inert(action) {
            Action::Key(key) => return self.on_key(key),
            Action::Paste(text) => return self.on_paste(&text),
            Action::Engine(event) => {
                self.engine(&event);
                // A run that begins is a session from now on: listed (Setup's recent sessions,
                // Sessions) before it ends.
                if let Event::RunStarted { .. } | Event::ObserveStarted { .. } | Event::RolebenchStarted { .. } = event
                {
                    return vec![Effect::ListSessions];
                }
            }
            Action::Live(live) => {
                self.run.apply_live(&live, &self.catalog);
                self.live.follow_streaming(&self.run);
            }
            Action::Tick(ms) => self.now_ms = ms,
            Action::SessionLoaded(events) => self.session_loaded(&events),
            Action::Held(held) => self.live.held = held,
            Action::Accounting(accounting) => self.live.accounting = Some(accounting),
            Action::RunEnded(result) => return self.run_ended(result),
            Action::BatchNote(line) => {
                self.run.note(line.clone());
                self.flash = Some(line);
            }
            Action::BatchWritten { session, requests } => {
                self.live.stopped(self.now_ms);
                let written = BatchWritten::new(&session, &requests);
                self.flash = Some(written.flash());
                self.live.batch = Some(written);
                return vec![Effect::ListSessions];
            }
            Action::Sessions(list) => self.sessions.set_list(list),
            Action::Unlisted(unlisted) => {
                // Said when it changes, not at every listing; the Sessions screen names each below its list.
                let n = unlisted.len();
                if n != self.unlisted && n > 0 {
                    self.flash = Some(format!(
                        "{n} session folder(s) not listed: their journals cannot be read (Sessions (5) says why)"
                    ));
                }
                self.unlisted = n;
                self.sessions.unlisted = unlisted;
            }
            Action::Compared(rows) => self.sessions.comparison = rows,
            Action::Paired(result) => self.sessions.paired = Some(*result),
            Action::Reassess(offer) => {
                let (judge, temperature) = (&self.setup.judge, self.setup.judge_temperature);
                match ReassessDialog::open(*offer, &self.providers, judge, temperature) {
                    Ok(dialog) => self.reassess = Some(dialog),
                    Err(e) => self.flash = Some(e),
                }
            }
            Action::Judged(result) => self.flash = Some(self.compare.judged(result)),
            Action::Checked(name, verdict) => {
                self.setup.checks.insert(name, Some(verdict));
            }
            Action::Fetched(result) => self.fetched(result),
            Action::Flash(text) => self.flash = Some(text),
            Action::RolebenchFiles(files) => self.rolebench.set_files(files),
            Action::RolebenchLoaded(path, result) => self.flash = Some(self.rolebench.loaded(path, result)),
            Action::Memories(m) => self.memories = m,
            Action::SessionDir(dir) => {
                self.session_dir = Some(dir.clone());
                self.annotate.reset();
                return vec![Effect::LoadAnnotations(dir)];
            }
            Action::Annotations(all) => self.annotate.set_answers(all, &ctx!(self)),
            Action::AnnotationsReread(all) => self.annotate.reread(all),
            Action::AnnotationNotSaved(case) => self.annotate.back_to(&case, &ctx!(self)),
            Action::AnnotationsUnreadable(why) => {
                self.flash = Some(format!("annotations not read: {why}"));
                self.annotate.unreadable = Some(why);
            }
            Action::InterviewScores(scores) => self.observers.interviews = scores,
            Action::RolebenchScores(scores) => self.compare.rolebench = scores,
            Action::ChatPrompt(messages) => self.chat.set_prompt(messages),
            Action::ChatToken(t) => self.chat.token(&t),
            Action::ChatRetry => self.chat.retry(),
            Action::ChatDone(result) => self.chat.done(result),
            Action::Saved(Ok((id, catalog))) => self.saved(&id, catalog),
            Action::Saved(Err((e, catalog))) => self.not_saved(&e.to_string(), catalog),
            Action::Probed(result) => self.probed(*result),
            Action::CatalogReread(catalog) => self.reread(catalog),
            Action::Versions(versions) => {
                self.chat.greetings = versions.greetings.clone();
                self.persona.versions = *versions;
            }
        }
        Vec::new()
    }

    /// An event of the run that goes: a new session starts afresh on the screen of its kind.
    fn engine(&mut self, event: &Event) {
        if let Event::RunStarted { .. } | Event::ObserveStarted { .. } | Event::RolebenchStarted { .. } = event {
            self.run = RunView::default();
            self.live.cursor = 0;
            self.live.started_ms = self.now_ms;
            self.live.ended_ms = None;
        }
        if let Event::RunStarted { .. } | Event::Resumed { .. } = event {
            self.live.sitting_ms = self.now_ms;
        }
        if let Event::RunStarted { plan, .. } = event
            && self.demo.is_some()
        {
            self.setup.show_plan(plan);
        }
        // A replay or a resume opens on Live; an observer or RoleBench session plays on its
        // own screen.
        if self.live.running && self.screen == Screen::Live {
            match event {
                Event::ObserveStarted { .. } => self.screen = Screen::Observers,
                Event::RolebenchStarted { .. } => self.screen = Screen::Rolebench,
                _ => {}
            }
        }
        self.run.apply_event(event, &self.catalog);
    }

    /// The run task ended: say how, and list the sessions again (a finished probe is measured first).
    fn run_ended(&mut self, result: Result<(), String>) -> Vec<Effect> {
        // (Its accounts stay: what the run spent, failed attempts too; nothing is in flight once it
        // has ended, whatever their last counts said.)
        self.live.stopped(self.now_ms);
        self.run.calls_ended();
        // A probe that finished is measured against the session before it.
        let probe = self.persona.probe.take().filter(|c| {
            result.is_ok()
                && self.live.replay.is_none()
                && self
                    .run
                    .session
                    .plan
                    .as_ref()
                    .is_some_and(|p| p.characters == [c.clone()])
        });
        if let Some(character) = probe {
            self.flash = Some(format!(
                "probe finished: measuring {character} against the session before…"
            ));
            let session = self.run.session.id.clone();
            return vec![Effect::ListSessions, Effect::ProbeDiff { character, session }];
        }
        if let Err(why) = &result
            && self.run.items.is_empty()
        {
            self.live.refused = Some(why.clone());
        }
        self.flash = Some(match result {
            Ok(()) if self.demo.as_ref().is_some_and(|d| d.step < DEMO_STEPS.len() - 1) => {
                "demo: the replay has finished · n: the next step of the tour".into()
            }
            Ok(()) if self.live.replay.is_some() => "replay finished".into(),
            Ok(()) => "run finished".into(),
            Err(e) => e,
        });
        vec![Effect::ListSessions]
    }

    /// The local model fetched (its path) or why not: the providers' problems are looked at again.
    fn fetched(&mut self, result: Result<String, String>) {
        // The status line said the download's progress: it now says how the download ended.
        self.flash = Some(match &result {
            Ok(m) => format!("model fetched: {m}"),
            Err(e) => format!("fetch failed: {e}"),
        });
        self.welcome.fetch = Some(match result {
            Ok(m) => {
                self.welcome.facts.fetched(PathBuf::from(&m));
                for p in &mut self.providers {
                    p.problem = self.welcome.facts.problem(&p.name);
                }
                FetchState::Done(m)
            }
            Err(e) => FetchState::Failed(e),
        });
    }

    /// A probe measured against the session before it, or why there is no before/after.
    fn probed(&mut self, result: Result<crate::tui::screens::persona::Probed, String>) {
        match result {
            Ok(probed) => {
                self.flash = Some(probed.summary());
                self.persona.show(probed);
                // Watching the probe stream: its result is the next thing to see.
                if self.screen == Screen::Live {
                    self.screen = Screen::Persona;
                }
            }
            Err(e) => self.flash = Some(format!("no before/after: {e}")),
        }
    }

    /// A session opened to browse: it shows on the screen of its kind.
    fn session_loaded(&mut self, events: &[Event]) {
        self.run = RunView::default();
        // A session opened, not run here: no clock of its own.
        if !self.live.running {
            self.live.ended_ms = None;
        }
        for e in events {
            self.run.apply_event(e, &self.catalog);
        }
        self.inspect.unit = 0;
        self.compare.unit = 0;
        self.flash = Some(match self.demo.as_mut() {
            // The last step's session: its hint once, then the tour is over.
            // (as the step said it, with the replay it stopped, if it stopped one).
            Some(d) if d.step == DEMO_STEPS.len() - 1 => {
                d.step = DEMO_STEPS.len();
                let hint = DEMO_STEPS[DEMO_STEPS.len() - 1].1;
                match self.flash.take() {
                    Some(said) if said.starts_with(hint) => said,
                    _ => hint.to_string(),
                }
            }
            _ => format!(
                "opened session {}",
                self.session_dir
                    .as_deref()
                    .and_then(|d| d.file_name())
                    .map_or(self.run.session.id.clone(), |n| n.to_string_lossy().into_owned())
            ),
        });
        self.screen = if self.run.observe.is_some() {
            Screen::Observers
        } else if self.run.rolebench.is_some() {
            Screen::Rolebench
        } else {
            Screen::Compare
        };
    }

    fn on_key(&mut self, event: KeyEvent) -> Vec<Effect> {
        let Some(key) = Key::from_event(&event) else {
            return Vec::new();
        };
        let ctrl_c = event
            .modifiers
            .contains(ratatui::crossterm::event::KeyModifiers::CONTROL)
            && event.code == ratatui::crossterm::event::KeyCode::Char('c');
        if self.too_small && !ctrl_c {
            self.flash =
                Some("the terminal is too small to show what a key would do: enlarge it (ctrl-c quits)".into());
            return Vec::new();
        }
        self.flash = None;
        // A quit or a start asked about stays asked only until the next key.
        let quit_asked = std::mem::take(&mut self.quit_asked);
        self.start_confirmed = std::mem::take(&mut self.start_asked);
        // Answered with another key, the question about unsaved edits is taken back, and the key
        // does nothing else where it would be typed into the draft (ctrl-s, offered, still saves).
        let saving = event
            .modifiers
            .contains(ratatui::crossterm::event::KeyModifiers::CONTROL)
            && event.code == ratatui::crossterm::event::KeyCode::Char('s');
        // Where keys are typed, only ctrl-c quits (`q` is a letter there).
        let quits = match self.typing() {
            true => ctrl_c,
            false => self.keymap.command(self.ctx().mode, key) == Some(Command::Quit),
        };
        if quit_asked
            && self.screen == Screen::Persona
            && !saving
            && !quits
            && !matches!(event.code, ratatui::crossterm::event::KeyCode::F(_))
        {
            self.flash = Some("still editing (that key only took the question back)".into());
            return Vec::new();
        }
        if !self.help {
            // Screens that take typing see the key before the keymap does.
            let typed = match self.screen {
                Screen::Annotate => self.annotate.key(event, key, &ctx!(self)),
                Screen::Chat => self.chat.key(event, key, &ctx!(self)),
                Screen::Setup => self.setup.type_key(key, &event).then(Vec::new),
                Screen::Persona => self.persona.key(event, key, &ctx!(self)),
                _ => None,
            };
            if let Some(requests) = typed {
                return self.apply(requests);
            }
        }
        let cmd = self.keymap.command(self.ctx().mode, key);
        if cmd == Some(Command::Quit) && !quit_asked && self.persona.draft.as_ref().is_some_and(|d| d.unsaved()) {
            self.quit_asked = true;
            self.flash = Some("a character's edits are not saved: quit again to leave them, ctrl-s saves".into());
            return Vec::new();
        }
        if self.help {
            // The arrows and page keys scroll a help that does not fit (drawing clamps it).
            let step = match cmd {
                Some(Command::Down | Command::ScrollDown) => Some(1),
                Some(Command::Up | Command::ScrollUp) => Some(-1),
                Some(Command::PageDown) => Some(10),
                Some(Command::PageUp) => Some(-10),
                _ => None,
            };
            if let Some(step) = step {
                // (Drawing stores back the scroll clamped to what the help holds.)
                self.help_scroll.set(self.help_scroll.get().saturating_add_signed(step));
                return Vec::new();
            }
            // Any other key closes help; the help key and esc only close it.
            self.help = false;
            self.help_scroll.set(0);
            if matches!(cmd, Some(Command::Help | Command::Back) | None) {
                return Vec::new();
            }
        }
        cmd.map(|c| self.command(c)).unwrap_or_default()
    }

    /// Pasted text goes whole into the text being edited (a persona's field, the chat's message,
    /// an annotation's note), its line ends made `\n` and other control characters left out; it is
    /// never read as keys (a tab would move focus, a newline send a message).
    fn on_paste(&mut self, text: &str) -> Vec<Effect> {
        if self.too_small {
            self.flash =
                Some("the terminal is too small to show where a paste would go: enlarge it and paste again".into());
            return Vec::new();
        }
        // Like a key, a paste takes back a question about leaving unsaved edits, and does nothing
        // else then.
        let quit = std::mem::take(&mut self.quit_asked);
        let leave = self
            .persona
            .draft
            .as_mut()
            .is_some_and(|d| std::mem::take(&mut d.leaving));
        if (quit || leave) && self.screen == Screen::Persona {
            self.flash = Some("still editing (the paste only took the question back)".into());
            return Vec::new();
        }
        // Whole escape sequences go, not only their ESC: a pasted "ESC[2J" leaves nothing behind.
        let text: String = crate::text::inert(&text.replace("\r\n", "\n").replace('\r', "\n"));
        let took = !self.help
            && match self.screen {
                Screen::Persona => self.persona.paste(&text),
                Screen::Chat => self.chat.paste(&text, &ctx!(self)),
                Screen::Annotate => self.annotate.paste(&text),
                Screen::Setup => self.setup.paste(&text),
                _ => false,
            };
        if !took {
            self.flash = Some("nothing here takes pasted text".into());
        }
        Vec::new()
    }

    /// The tour's next step: its screen and its hint; the last one stops the replay (if still going)
    /// and opens the observer sample.
    fn demo_next(&mut self) -> Vec<Effect> {
        let Some(demo) = self.demo.as_mut() else {
            self.flash = Some("n steps through the tour of `incharacter demo`".into());
            return Vec::new();
        };
        if demo.step + 1 >= DEMO_STEPS.len() {
            self.flash = Some("the tour is over: 0–9 switch screens, 5 lists every sample".into());
            return Vec::new();
        }
        demo.step += 1;
        let (screen, hint) = DEMO_STEPS[demo.step];
        self.screen = screen;
        if screen == Screen::Setup {
            // Letters filter the character list; the options pane leaves n to the tour.
            self.setup.pane = SetupPane::Options;
        }
        self.flash = Some(match screen {
            Screen::Inspector if demo.ahead_of(&self.run).is_some() => {
                "demo 3/5: the whole session's ratings; its replay goes on in 2".into()
            }
            Screen::Compare if demo.ahead_of(&self.run).is_some() => {
                "demo 4/5: the whole session vs the labels; replay goes on in 2".into()
            }
            _ => hint.into(),
        });
        if screen != Screen::Observers {
            return Vec::new();
        }
        let Some(path) = demo.observers.clone() else {
            self.flash = Some("demo 5/5: this build has no observer sample; s starts a synthetic run".into());
            return vec![Effect::ListSessions];
        };
        let mut effects = Vec::new();
        if self.live.running {
            // One replay at a time: the interview's stops for the observers', and that is said.
            effects.push(Effect::Cancel);
            self.flash = Some(format!(
                "{hint} (the interview's replay stopped: 5 lists the samples to replay it)"
            ));
        }
        effects.push(Effect::Open(path));
        effects
    }

    pub fn command(&mut self, cmd: Command) -> Vec<Effect> {
        if let Some(dialog) = self.reassess.as_mut()
            && !matches!(cmd, Command::Quit | Command::Help)
        {
            return match dialog.command(cmd) {
                Outcome::Open => Vec::new(),
                Outcome::Closed(requests) => {
                    // A start held by "a run is going" keeps the dialog, so the same key again confirms.
                    let dialog = self.reassess.take();
                    let effects = self.apply(requests);
                    if self.start_held {
                        self.reassess = dialog;
                    }
                    effects
                }
            };
        }
        match cmd {
            Command::Quit => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            Command::Help => {
                self.help = !self.help;
                self.help_scroll.set(0);
            }
            Command::Theme => {
                self.theme = (self.theme + 1) % self.themes.len();
                self.flash = Some(format!("theme: {}", self.theme().name));
            }
            Command::GoSetup => self.screen = Screen::Setup,
            Command::GoLive => self.screen = Screen::Live,
            Command::GoInspector => self.screen = Screen::Inspector,
            Command::GoCompare => self.screen = Screen::Compare,
            Command::GoSessions => {
                self.screen = Screen::Sessions;
                return vec![Effect::ListSessions];
            }
            Command::GoChat => self.screen = Screen::Chat,
            Command::GoAnnotate => {
                self.screen = Screen::Annotate;
                // What another window or annotator wrote meanwhile, or a file damaged since.
                if let Some(dir) = &self.session_dir {
                    return vec![Effect::RereadAnnotations(dir.clone())];
                }
            }
            Command::GoRolebench => {
                self.screen = Screen::Rolebench;
                return vec![Effect::ListRolebenchFiles];
            }
            Command::GoObservers => {
                self.screen = Screen::Observers;
                return vec![Effect::ListSessions];
            }
            Command::GoPersona => self.screen = Screen::Persona,
            Command::DemoNext => return self.demo_next(),
            _ => {
                let requests = match self.screen {
                    Screen::Welcome => self.welcome.command(cmd),
                    Screen::Setup => self.setup.command(cmd, &self.catalog, &self.providers),
                    Screen::Sessions => self.sessions.command(cmd),
                    Screen::Live => self.live.command(cmd, &ctx!(self)),
                    Screen::Inspector => self.inspect.command(cmd, &ctx!(self)),
                    Screen::Compare => self.compare.command(cmd, &ctx!(self)),
                    Screen::Chat => self.chat.command(cmd, &ctx!(self)),
                    Screen::Observers => self.observers.command(cmd, &ctx!(self)),
                    Screen::Annotate => self.annotate.command(cmd, &ctx!(self)),
                    Screen::Rolebench => self.rolebench.command(cmd, &ctx!(self)),
                    Screen::Persona => self.persona.command(cmd, &ctx!(self)),
                };
                return self.apply(requests);
            }
        }
        Vec::new()
    }

    /// Does what the screens asked of the app; returns what is left for the driver. What starts a
    /// task while a run goes (a run, a probe, a resume, a replay) or opens another session in its
    /// place is asked about first: it would stop that run. A replay going is stopped without asking
    /// by another replay or session opened, but a run (which may cost) is asked about over it too.
    fn apply(&mut self, requests: Vec<Request>) -> Vec<Effect> {
        // The session of the run going, opened: it is on Live already, as it goes.
        if self.live.running
            && self.live.replay.is_none()
            && requests.iter().any(
                |r| matches!(r, Request::Effect(Effect::Open(p)) if super::starts::is_session(p, &self.run.session.id)),
            )
        {
            self.screen = Screen::Live;
            self.flash = Some("this is the run going: shown here as it goes".into());
            return Vec::new();
        }
        // Which start, from which screen: only the same one again confirms it.
        let start = super::starts::kind(&requests).map(|(kind, what)| (self.screen, kind, what));
        let confirmed = std::mem::take(&mut self.start_confirmed);
        let replaying = self.live.replay.is_some();
        if let Some((_, kind, _)) = start
            && self.live.running
            && confirmed != start
            && super::starts::asked(replaying, kind)
        {
            self.start_asked = start;
            self.start_held = true;
            self.flash = Some(super::starts::question(replaying, &self.run.session.id, kind));
            return Vec::new();
        }
        let mut effects = Vec::new();
        // The session opened takes the run's place on every screen: the run stops first, as the
        // question said (a session opened after a run has ended has nothing to stop).
        if self.live.running && start.as_ref().is_some_and(|(_, kind, _)| *kind == "open") {
            effects.push(Effect::Cancel);
        }
        for request in requests {
            match request {
                Request::Effect(effect) => effects.push(effect),
                Request::Show(screen) => self.screen = screen,
                Request::Flash(text) => self.flash = Some(text),
                Request::Start { replay, follow } => self.live.start(replay, follow),
                Request::ClearRun => self.run = RunView::default(),
                Request::Fresh(Screen::Observers) => self.observers.fresh(),
                Request::Fresh(Screen::Rolebench) => self.rolebench.fresh(),
                Request::Fresh(_) => {}
                Request::Inspect(key) => self.inspect.select_item(&self.run, &self.catalog, &key),
                Request::Reask {
                    character,
                    question,
                    recorded,
                } => {
                    self.chat.character = character;
                    self.screen = Screen::Chat;
                    let sent = self.chat.send(question, Some(recorded), false, &ctx!(self));
                    effects.extend(self.apply(sent));
                }
            }
        }
        effects
    }
}
