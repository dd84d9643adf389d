//! The workbench as a state machine: input and engine events come in as [`Action`]s, `update` changes
//! the state and returns [`Effect`]s (start a run, open a session, …) for the driver to perform.
//! Rendering (`ui`) is a pure function of this state, so tests drive it without a terminal.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use ratatui::crossterm::event::{KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};

use super::keys::{Command, Key, KeyName, Keymap, Mode};
use super::run_view::RunView;
use super::theme::Theme;
use crate::catalog::Catalog;
use crate::domain::character::{Character, LabelSource};
use crate::llm::config::Config;
use crate::llm::{ModelInfo, Role};
use crate::method::Method;
use crate::rpa::prompt::RpaStyle;
use crate::study::interview::results::SummaryRow;
use crate::study::live::Live;
use crate::study::{Event, RunPlan};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    Welcome,
    Setup,
    Live,
    Inspector,
    Compare,
    Sessions,
    Chat,
    Observers,
    Annotate,
    Rolebench,
}

impl Screen {
    pub fn mode(self) -> Mode {
        match self {
            Screen::Welcome => Mode::Welcome,
            Screen::Setup => Mode::Setup,
            Screen::Live => Mode::Live,
            Screen::Inspector => Mode::Inspector,
            Screen::Compare => Mode::Compare,
            Screen::Sessions => Mode::Sessions,
            Screen::Chat => Mode::Chat,
            Screen::Observers => Mode::Observers,
            Screen::Annotate => Mode::Annotate,
            Screen::Rolebench => Mode::Rolebench,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Screen::Welcome => "Welcome",
            Screen::Setup => "Setup",
            Screen::Live => "Live",
            Screen::Inspector => "Inspector",
            Screen::Compare => "Compare",
            Screen::Sessions => "Sessions",
            Screen::Chat => "Chat",
            Screen::Observers => "Observers",
            Screen::Annotate => "Annotate",
            Screen::Rolebench => "RoleBench",
        }
    }

    /// The tab label on narrow terminals.
    pub fn short_title(self) -> &'static str {
        match self {
            Screen::Inspector => "Insp.",
            Screen::Compare => "Comp.",
            Screen::Sessions => "Sess.",
            Screen::Observers => "Obs.",
            Screen::Annotate => "Ann.",
            Screen::Rolebench => "RB",
            other => other.title(),
        }
    }

    pub const TABS: [Screen; 9] = [
        Screen::Setup,
        Screen::Live,
        Screen::Inspector,
        Screen::Compare,
        Screen::Sessions,
        Screen::Chat,
        Screen::Observers,
        Screen::Annotate,
        Screen::Rolebench,
    ];
}

/// Whether a provider can serve, as the welcome screen says it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderStatus {
    pub name: String,
    pub info: ModelInfo,
    pub roles: Vec<Role>,
    pub problem: Option<String>,
    /// The model's context as known before a run (config or the embedded model), for the estimate.
    pub context: Option<usize>,
}

pub use crate::session::SessionEntry;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupPane {
    Characters,
    Scales,
    Options,
}

/// Rows of the options pane.
pub const OPTION_ROWS: usize = Method::ALL.len() + 4;

#[derive(Debug, Clone)]
pub struct SetupState {
    pub filter: String,
    pub pane: SetupPane,
    pub char_cursor: usize,
    pub characters: BTreeSet<String>,
    pub scale_cursor: usize,
    pub scales: BTreeSet<String>,
    pub option_cursor: usize,
    pub methods: BTreeSet<Method>,
    pub repeats: u32,
    pub style: RpaStyle,
    pub rpa: String,
    pub judge: String,
    pub providers: Vec<String>,
    pub seed: u64,
}

impl SetupState {
    /// Shows a recorded run's plan as the selection (the demo's setup step).
    pub fn show_plan(&mut self, plan: &RunPlan) {
        self.characters = plan.characters.iter().cloned().collect();
        self.scales = plan.scales.iter().cloned().collect();
        self.methods = plan.methods.iter().copied().collect();
        self.repeats = plan.repeats;
        self.style = plan.style;
        self.seed = plan.seed;
        for (role, name) in [(&mut self.rpa, &plan.rpa), (&mut self.judge, &plan.judge)] {
            if self.providers.contains(name) {
                role.clone_from(name);
            }
        }
    }
}

/// The guided tour of `incharacter demo`: the step shown, and the observer sample its last step opens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Demo {
    pub step: usize,
    pub observers: Option<PathBuf>,
}

/// The tour's steps: the screen each shows and what the status line says about it.
pub const DEMO_STEPS: [(Screen, &str); 5] = [
    (
        Screen::Live,
        "demo 1/5: an interview recorded on the embedded model replays as it streamed (s: faster)",
    ),
    (
        Screen::Setup,
        "demo 2/5: the setup the recorded run was started from: characters, scales, methods",
    ),
    (
        Screen::Inspector,
        "demo 3/5: the inspector: every rating with its evidence (enter shows the exact prompts)",
    ),
    (
        Screen::Compare,
        "demo 4/5: the measured profile against the character's labels (m: method, →: next character)",
    ),
    (
        Screen::Observers,
        "demo 5/5: observers talk with a synthetic subject, then report on it. Tour over: 1–9 switch screens",
    ),
];

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Replay {
    Speed(f64),
    Instant,
}

impl Replay {
    pub fn label(self) -> String {
        match self {
            Replay::Speed(s) => format!("{s}×"),
            Replay::Instant => "instant".into(),
        }
    }

    pub fn next(self) -> Replay {
        match self {
            Replay::Speed(s) if s < 4.0 => Replay::Speed(4.0),
            Replay::Speed(_) => Replay::Instant,
            Replay::Instant => Replay::Speed(1.0),
        }
    }
}

/// How far a bottom-anchored text (a transcript, a dialogue) is scrolled up, and how far it can go: the
/// limit is learnt when the text is drawn, so scrolling stops at the first line instead of running on
/// into blank space.
#[derive(Debug, Clone)]
pub struct TailScroll {
    pub up: u16,
    limit: std::cell::Cell<u16>,
}

impl Default for TailScroll {
    fn default() -> Self {
        TailScroll {
            up: 0,
            limit: std::cell::Cell::new(u16::MAX),
        }
    }
}

impl TailScroll {
    pub fn scroll_up(&mut self, lines: u16) {
        self.up = self.up.saturating_add(lines).min(self.limit.get());
    }

    pub fn scroll_down(&mut self, lines: u16) {
        self.up = self.up.saturating_sub(lines);
    }

    pub fn reset(&mut self) {
        self.up = 0;
    }

    /// The lines `[start, end)` of `len` to draw in `height` rows. `complete`: `len` is the whole text
    /// (not just enough of its tail), so the top is known and recorded as the limit.
    pub fn window(&self, len: usize, height: usize, complete: bool) -> (usize, usize) {
        let top = len.saturating_sub(height);
        // Only the tail was laid out: the top is not known, so nothing limits the next scroll yet.
        self.limit.set(if complete {
            u16::try_from(top).unwrap_or(u16::MAX)
        } else {
            u16::MAX
        });
        let end = len - (self.up as usize).min(top);
        (end.saturating_sub(height), end)
    }
}

#[derive(Debug, Clone, Default)]
pub struct LiveState {
    pub cursor: usize,
    pub follow: bool,
    /// Lines scrolled up from the bottom of the transcript.
    pub scroll: TailScroll,
    pub running: bool,
    pub paused: bool,
    pub replay: Option<Replay>,
    pub started_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InspectFocus {
    Dimensions,
    Items,
    Drill,
}

#[derive(Debug, Clone)]
pub struct InspectState {
    pub unit: usize,
    pub method: usize,
    pub dim: usize,
    pub item: usize,
    pub focus: InspectFocus,
    pub scroll: u16,
    /// Labels shown; `None`: those the metrics use for the scale (pdb for BFI and 16P, else annotation).
    pub labels: Option<LabelSource>,
}

#[derive(Debug, Clone)]
pub struct CompareState {
    /// Character id → its newest RoleBench result, shown beside its personality.
    pub rolebench: BTreeMap<String, RolebenchScore>,
    pub unit: usize,
    pub method: usize,
    pub all_methods: bool,
    pub page: usize,
    pub sort: usize,
    pub cursor: usize,
}

/// A character's RoleBench result from one session.
#[derive(Debug, Clone, PartialEq)]
pub struct RolebenchScore {
    pub session: String,
    pub questions: usize,
    pub rouge_l_f: f64,
    pub win_rate: Option<f64>,
}

#[derive(Debug, Clone, Default)]
pub struct SessionsState {
    pub list: Vec<SessionEntry>,
    pub cursor: usize,
    pub marked: Vec<usize>,
    pub speed: Option<Replay>,
    /// Side-by-side summaries of the marked sessions.
    pub comparison: Vec<(String, Vec<SummaryRow>)>,
}

#[derive(Debug, Clone, Default)]
pub struct ObserversState {
    pub subject: usize,
    pub observer: usize,
    pub scroll: TailScroll,
    /// Character id → (session id, IPIP-50 trait → ER_batch score) from the newest interview session
    /// that rated the character on IPIP-50, to show beside its observers.
    pub interviews: BTreeMap<String, (String, BTreeMap<String, f64>)>,
}

/// Moves a list cursor for the up/down/page/top/bottom commands; false for any other command.
fn move_cursor(cmd: Command, cursor: &mut usize, len: usize) -> bool {
    let last = len.saturating_sub(1);
    let step = |delta: isize| (*cursor as isize + delta).clamp(0, last as isize) as usize;
    *cursor = match cmd {
        Command::Up => step(-1),
        Command::Down => step(1),
        Command::PageUp => step(-10),
        Command::PageDown => step(10),
        Command::Top => 0,
        Command::Bottom => last,
        _ => return false,
    };
    true
}

/// Question counts the RoleBench screen cycles through (`None`: every question).
pub const RB_LIMITS: [Option<usize>; 4] = [Some(10), Some(20), Some(50), None];

/// The RoleBench screen: a question file and roles to pick before a run; a session's questions after.
#[derive(Debug, Clone, Default)]
pub struct RolebenchState {
    /// Question files found in `<data dir>/rolebench/`.
    pub files: Vec<PathBuf>,
    /// The file whose questions are loaded, and its questions.
    pub loaded: Option<(PathBuf, Vec<crate::method::rolebench::Question>)>,
    /// Roles of the loaded file with their question counts.
    pub roles: Vec<(String, usize)>,
    pub picked: BTreeSet<String>,
    /// Index into [`RB_LIMITS`].
    pub limit: usize,
    /// 0: files, 1: roles, 2: questions.
    pub pane: usize,
    pub file_cursor: usize,
    pub role_cursor: usize,
    pub item: usize,
    pub scroll: u16,
}

/// Why a sample cannot be annotated, and what to do instead.
pub const SAMPLE_READ_ONLY: &str =
    "samples are read-only: copy its folder into <data dir>/sessions/ and open the copy to annotate it";

/// Sample sizes the annotate screen cycles through (`None`: every case).
pub const SAMPLES: [Option<usize>; 4] = [None, Some(100), Some(50), Some(20)];

pub struct AnnotateState {
    pub annotator: String,
    pub task: crate::study::annotation::Task,
    pub sample: usize,
    pub cursor: usize,
    /// The interviewer's judgement is shown before answering.
    pub reveal: bool,
    /// Digits typed for a multi-digit answer (0–100 scales).
    pub typed: String,
    /// Every annotator's latest answers in the open session.
    pub answers: BTreeMap<String, BTreeMap<crate::study::annotation::Case, crate::study::annotation::Annotation>>,
    pub note: tui_textarea::TextArea<'static>,
    pub editing_note: bool,
}

/// One turn of the chat screen.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTurn {
    pub user: String,
    pub reply: String,
    pub done: bool,
    pub error: Option<String>,
    /// For a re-asked interview item: the answer recorded in the session.
    pub recorded: Option<String>,
}

pub struct ChatState {
    pub character: String,
    pub input: tui_textarea::TextArea<'static>,
    pub turns: Vec<ChatTurn>,
    /// The messages of the last request, as sent.
    pub prompt: Vec<crate::llm::ChatMessage>,
    pub show_prompt: bool,
    pub scroll: TailScroll,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchState {
    Running,
    Done(String),
    Failed(String),
}

/// Screen areas from the last render, for mouse clicks.
#[derive(Debug, Clone, Default)]
pub struct Hitboxes {
    pub tabs: Vec<(Rect, usize)>,
    /// (area of a list, first visible row, which list)
    pub lists: Vec<(Rect, usize, ListId)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListId {
    Characters,
    Scales,
    Options,
    Items,
    Dimensions,
    InspectItems,
    Sessions,
    CompareTable,
}

pub enum Action {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Engine(Event),
    Live(Live),
    /// Milliseconds since the app started.
    Tick(u64),
    /// A session's events, loaded to browse (not to replay).
    SessionLoaded(Vec<Event>),
    /// The run task ended (`Err` says why it stopped early).
    RunEnded(Result<(), String>),
    Sessions(Vec<SessionEntry>),
    Compared(Vec<(String, Vec<SummaryRow>)>),
    Fetched(Result<String, String>),
    Flash(String),
    Memories(std::collections::BTreeMap<String, Arc<crate::rpa::memories::Memories>>),
    /// The folder of the session being shown.
    SessionDir(PathBuf),
    Annotations(BTreeMap<String, BTreeMap<crate::study::annotation::Case, crate::study::annotation::Annotation>>),
    /// Interview (ER_batch, IPIP-50) results of characters, for the observers screen.
    InterviewScores(BTreeMap<String, (String, BTreeMap<String, f64>)>),
    /// Characters' newest RoleBench results, for the compare screen.
    RolebenchScores(BTreeMap<String, RolebenchScore>),
    /// Question files found for the RoleBench screen.
    RolebenchFiles(Vec<PathBuf>),
    /// A question file read (or why it could not be).
    RolebenchLoaded(PathBuf, Result<Vec<crate::method::rolebench::Question>, String>),
    /// The chat request as assembled (shown on the chat screen).
    ChatPrompt(Vec<crate::llm::ChatMessage>),
    ChatToken(String),
    /// The chat reply's attempt failed and is retried: what streamed so far is dropped.
    ChatRetry,
    /// The chat reply ended (`Err` says why it failed).
    ChatDone(Result<(), String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    StartRun {
        plan: RunPlan,
        name: Option<String>,
    },
    Resume {
        id: String,
    },
    SetPause(bool),
    Cancel,
    Open(PathBuf),
    Replay {
        path: PathBuf,
        speed: Replay,
    },
    ReplaySpeed(Replay),
    Export(PathBuf),
    Compare(Vec<PathBuf>),
    FetchModel,
    ListSessions,
    StartObserve {
        plan: crate::observer::ObservePlan,
    },
    /// Append an annotation to the journal of its annotator in the session folder.
    Annotate {
        dir: PathBuf,
        annotation: crate::study::annotation::Annotation,
    },
    LoadAnnotations(PathBuf),
    /// List the question files in `<data dir>/rolebench/`.
    ListRolebenchFiles,
    LoadRolebench(PathBuf),
    StartRolebench {
        plan: Box<crate::study::rolebench::RolebenchPlan>,
    },
    /// One chat turn: the character answers `text` (with `history` as earlier turns) in the setup's
    /// style, on the setup's role-play provider.
    Chat {
        character: String,
        style: RpaStyle,
        provider: String,
        history: Vec<(String, String)>,
        text: String,
    },
    Quit,
}

pub struct App {
    pub catalog: Arc<Catalog>,
    pub keymap: Keymap,
    pub themes: Vec<Theme>,
    pub theme: usize,
    pub screen: Screen,
    pub help: bool,
    pub quit: bool,
    pub providers: Vec<ProviderStatus>,
    pub fetch: Option<FetchState>,
    pub config_path: Option<PathBuf>,
    pub setup: SetupState,
    pub run: RunView,
    pub live: LiveState,
    pub inspect: InspectState,
    pub compare: CompareState,
    pub sessions: SessionsState,
    pub flash: Option<String>,
    pub now_ms: u64,
    pub hit: std::cell::RefCell<Hitboxes>,
    /// Prices per million tokens (in, out) of the run's providers, for the cost gauge.
    pub prices: Vec<(String, f64, f64)>,
    /// Memories of the shown run's characters, to rebuild their prompts in the inspector.
    pub memories: std::collections::BTreeMap<String, Arc<crate::rpa::memories::Memories>>,
    pub chat: ChatState,
    pub observers: ObserversState,
    pub annotate: AnnotateState,
    pub rolebench: RolebenchState,
    /// The guided tour of `incharacter demo`, if this is one.
    pub demo: Option<Demo>,
    /// Folder of the session shown (for its annotations).
    pub session_dir: Option<PathBuf>,
}

fn chat_input() -> tui_textarea::TextArea<'static> {
    let mut input = tui_textarea::TextArea::default();
    input.set_placeholder_text("Ask the character something, in the experimenter's voice (enter sends)");
    input
}

fn provider_problem(config: &Config, name: &str, data_dir: Option<&std::path::Path>) -> Option<String> {
    let p = config.provider(name)?;
    match p.kind {
        crate::llm::config::ProviderKind::Local => {
            #[cfg(feature = "local-model")]
            let fetched = data_dir
                .is_some_and(|d| crate::llm::local::resolve(&crate::llm::local::models_dir(d), &p.model).is_ok());
            #[cfg(not(feature = "local-model"))]
            let fetched = {
                let _ = data_dir;
                false
            };
            (!fetched).then(|| format!("the local model {} is not fetched yet", p.model))
        }
        crate::llm::config::ProviderKind::Openai => match &p.api_key_env {
            Some(var) if std::env::var(var).map_or(true, |v| v.trim().is_empty()) => {
                Some(format!("the key variable {var} is not set"))
            }
            _ => None,
        },
    }
}

impl App {
    /// `data_dir` is where fetched models are looked for (the welcome screen's readiness check).
    pub fn new(
        catalog: Arc<Catalog>,
        config: &Config,
        data_dir: Option<&std::path::Path>,
        keymap: Keymap,
        themes: Vec<Theme>,
        theme: usize,
    ) -> App {
        let providers: Vec<ProviderStatus> = config
            .providers
            .iter()
            .map(|p| ProviderStatus {
                name: p.name.clone(),
                info: ModelInfo {
                    provider: p.name.clone(),
                    kind: p.kind.name().into(),
                    model: p.model.clone(),
                },
                roles: config
                    .roles
                    .iter()
                    .filter(|(_, n)| **n == p.name)
                    .map(|(r, _)| *r)
                    .collect(),
                problem: provider_problem(config, &p.name, data_dir),
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
            keymap,
            themes,
            theme,
            screen: if ready { Screen::Setup } else { Screen::Welcome },
            help: false,
            quit: false,
            fetch: None,
            config_path: crate::paths::config_file(),
            setup: SetupState {
                filter: String::new(),
                pane: SetupPane::Characters,
                char_cursor: 0,
                characters: BTreeSet::new(),
                scale_cursor: 0,
                scales: BTreeSet::new(),
                option_cursor: 0,
                methods: [Method::ErBatch].into_iter().collect(),
                repeats: 1,
                style: RpaStyle::Description,
                rpa: role(Role::Rpa),
                judge: role(Role::Judge),
                providers: providers.iter().map(|p| p.name.clone()).collect(),
                seed: 0,
            },
            providers,
            run: RunView::default(),
            live: LiveState {
                follow: true,
                ..LiveState::default()
            },
            inspect: InspectState {
                unit: 0,
                method: 0,
                dim: 0,
                item: 0,
                focus: InspectFocus::Dimensions,
                scroll: 0,
                labels: None,
            },
            compare: CompareState {
                rolebench: BTreeMap::new(),
                unit: 0,
                method: 0,
                all_methods: false,
                page: 0,
                sort: 0,
                cursor: 0,
            },
            sessions: SessionsState::default(),
            flash: None,
            now_ms: 0,
            hit: Default::default(),
            prices,
            memories: Default::default(),
            observers: ObserversState::default(),
            rolebench: RolebenchState::default(),
            demo: None,
            annotate: AnnotateState {
                annotator: std::env::var("INCHARACTER_ANNOTATOR")
                    .or_else(|_| std::env::var("USER"))
                    .ok()
                    .filter(|n| crate::study::annotation::valid_annotator(n))
                    .unwrap_or_else(|| "annotator".into()),
                task: crate::study::annotation::Task::Item,
                sample: 0,
                cursor: 0,
                reveal: false,
                typed: String::new(),
                answers: BTreeMap::new(),
                note: tui_textarea::TextArea::default(),
                editing_note: false,
            },
            session_dir: None,
            chat: ChatState {
                character: String::new(),
                input: chat_input(),
                turns: Vec::new(),
                prompt: Vec::new(),
                show_prompt: false,
                scroll: TailScroll::default(),
            },
        }
    }

    pub fn theme(&self) -> &Theme {
        &self.themes[self.theme % self.themes.len()]
    }

    /// Characters matching the setup filter (name, alias, id, work, language).
    pub fn filtered_characters(&self) -> Vec<&Character> {
        let f = self.setup.filter.to_lowercase();
        self.catalog
            .characters
            .iter()
            .map(|e| &e.value)
            .filter(|c| {
                f.is_empty()
                    || c.id.to_lowercase().contains(&f)
                    || c.name.to_lowercase().contains(&f)
                    || c.work.to_lowercase().contains(&f)
                    || c.language.code() == f
                    || c.aliases.iter().any(|a| a.to_lowercase().contains(&f))
            })
            .collect()
    }

    /// Methods of the shown run (or of the setup, before any run).
    pub fn methods(&self) -> Vec<Method> {
        match &self.run.session.plan {
            Some(p) => p.methods.clone(),
            None => self.setup.methods.iter().copied().collect(),
        }
    }

    /// The setup as a plan, if it can start.
    pub fn plan(&self) -> Result<RunPlan, String> {
        if self.setup.characters.is_empty() {
            return Err("pick at least one character (space)".into());
        }
        if self.setup.scales.is_empty() {
            return Err("pick at least one scale (tab, then space)".into());
        }
        if self.setup.methods.is_empty() {
            return Err("pick at least one method".into());
        }
        Ok(RunPlan {
            characters: self
                .catalog
                .characters
                .iter()
                .map(|e| e.value.id.clone())
                .filter(|id| self.setup.characters.contains(id))
                .collect(),
            scales: self
                .catalog
                .scales
                .iter()
                .map(|e| e.value.id.clone())
                .filter(|id| self.setup.scales.contains(id))
                .collect(),
            methods: Method::ALL
                .into_iter()
                .filter(|m| self.setup.methods.contains(m))
                .collect(),
            repeats: self.setup.repeats,
            rpa: self.setup.rpa.clone(),
            judge: self.setup.judge.clone(),
            style: self.setup.style,
            seed: self.setup.seed,
            max_attempts: crate::method::judge::DEFAULT_ATTEMPTS,
            // As the run will fit it (the loaded model may say less; the run then fits again).
            items_per_call: crate::method::convert::items_per_call(
                self.providers
                    .iter()
                    .find(|p| p.name == self.setup.judge)
                    .and_then(|p| p.context),
            ) as u32,
        })
    }

    fn typing(&self) -> bool {
        self.screen == Screen::Setup && self.setup.pane == SetupPane::Characters && !self.help
    }

    /// The character the chat talks to: the chosen one, else the inspector's, else the first picked.
    pub fn chat_character(&self) -> Option<&Character> {
        let id = if !self.chat.character.is_empty() {
            Some(self.chat.character.clone())
        } else {
            self.run
                .units()
                .get(self.inspect.unit)
                .map(|u| u.0.clone())
                .or_else(|| self.setup.characters.iter().next().cloned())
        };
        id.and_then(|id| self.catalog.character(&id))
    }

    /// Re-asks an interview item on the chat screen, next to the answer the session recorded.
    pub fn reask(&mut self, character: &str, question: &str, recorded: &str) -> Vec<Effect> {
        self.chat.character = character.to_string();
        self.screen = Screen::Chat;
        self.chat_send(question.to_string(), Some(recorded.to_string()), false)
    }

    fn chat_send(&mut self, text: String, recorded: Option<String>, with_history: bool) -> Vec<Effect> {
        let Some(c) = self.chat_character() else {
            self.flash = Some("pick a character in Setup first".into());
            return Vec::new();
        };
        if self.chat.turns.last().is_some_and(|t| !t.done) {
            self.flash = Some("wait for the answer first".into());
            return Vec::new();
        }
        let character = c.id.clone();
        let history = if with_history {
            self.chat
                .turns
                .iter()
                .filter(|t| t.done && t.error.is_none() && t.recorded.is_none())
                .map(|t| (t.user.clone(), t.reply.clone()))
                .collect()
        } else {
            Vec::new()
        };
        self.chat.character = character.clone();
        self.chat.turns.push(ChatTurn {
            user: text.clone(),
            reply: String::new(),
            done: false,
            error: None,
            recorded,
        });
        self.chat.scroll.reset();
        vec![Effect::Chat {
            character,
            style: self.setup.style,
            provider: self.setup.rpa.clone(),
            history,
            text,
        }]
    }

    pub fn update(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Key(key) => self.on_key(key),
            Action::Mouse(m) => {
                self.on_mouse(m);
                Vec::new()
            }
            Action::Engine(event) => {
                if let Event::RunStarted { .. } | Event::ObserveStarted { .. } = &event {
                    self.run = RunView::default();
                    self.live.cursor = 0;
                    self.live.started_ms = self.now_ms;
                }
                if let Event::RunStarted { plan, .. } = &event
                    && self.demo.is_some()
                {
                    self.setup.show_plan(plan);
                }
                // A replay opens on Live; an observer or RoleBench session plays on its own screen.
                if self.live.replay.is_some() && self.screen == Screen::Live {
                    match &event {
                        Event::ObserveStarted { .. } => self.screen = Screen::Observers,
                        Event::RolebenchStarted { .. } => self.screen = Screen::Rolebench,
                        _ => {}
                    }
                }
                self.run.apply_event(&event, &self.catalog);
                Vec::new()
            }
            Action::Live(live) => {
                self.run.apply_live(&live, &self.catalog);
                if self.live.follow
                    && let Some(i) = self
                        .run
                        .items
                        .iter()
                        .position(|r| r.status == super::run_view::Status::Streaming)
                {
                    self.live.cursor = i;
                }
                Vec::new()
            }
            Action::Tick(ms) => {
                self.now_ms = ms;
                Vec::new()
            }
            Action::SessionLoaded(events) => {
                self.run = RunView::default();
                for e in &events {
                    self.run.apply_event(e, &self.catalog);
                }
                self.inspect.unit = 0;
                self.compare.unit = 0;
                self.flash = Some(match self.demo.as_mut() {
                    // The last step's session: its hint once, then the tour is over.
                    Some(d) if d.step == DEMO_STEPS.len() - 1 => {
                        d.step = DEMO_STEPS.len();
                        DEMO_STEPS[DEMO_STEPS.len() - 1].1.to_string()
                    }
                    _ => format!("opened session {}", self.run.session.id),
                });
                self.screen = if self.run.observe.is_some() {
                    Screen::Observers
                } else if self.run.rolebench.is_some() {
                    Screen::Rolebench
                } else {
                    Screen::Compare
                };
                Vec::new()
            }
            Action::RunEnded(result) => {
                self.live.running = false;
                self.live.paused = false;
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
            Action::Sessions(list) => {
                self.sessions.list = list;
                self.sessions.cursor = self.sessions.cursor.min(self.sessions.list.len().saturating_sub(1));
                self.sessions.marked.retain(|&i| i < self.sessions.list.len());
                Vec::new()
            }
            Action::Compared(rows) => {
                self.sessions.comparison = rows;
                Vec::new()
            }
            Action::Fetched(result) => {
                self.fetch = Some(match result {
                    Ok(m) => {
                        for p in &mut self.providers {
                            if p.info.kind == "local" {
                                p.problem = None;
                            }
                        }
                        FetchState::Done(m)
                    }
                    Err(e) => FetchState::Failed(e),
                });
                Vec::new()
            }
            Action::Flash(text) => {
                self.flash = Some(text);
                Vec::new()
            }
            Action::RolebenchFiles(files) => {
                self.rolebench.files = files;
                self.rolebench.file_cursor = self
                    .rolebench
                    .file_cursor
                    .min(self.rolebench.files.len().saturating_sub(1));
                Vec::new()
            }
            Action::RolebenchLoaded(path, result) => {
                match result {
                    Ok(questions) => {
                        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
                        for q in &questions {
                            *counts.entry(q.role.clone()).or_default() += 1;
                        }
                        let rb = &mut self.rolebench;
                        rb.roles = counts.into_iter().collect();
                        rb.picked.clear();
                        rb.role_cursor = 0;
                        rb.pane = 1;
                        self.flash = Some(format!(
                            "{} questions, {} roles: space picks roles, ctrl-r starts",
                            questions.len(),
                            rb.roles.len()
                        ));
                        rb.loaded = Some((path, questions));
                    }
                    Err(e) => self.flash = Some(crate::text::terminal_safe(&e)),
                }
                Vec::new()
            }
            Action::Memories(m) => {
                self.memories = m;
                Vec::new()
            }
            Action::SessionDir(dir) => {
                self.session_dir = Some(dir.clone());
                self.annotate.answers.clear();
                self.annotate.cursor = 0;
                vec![Effect::LoadAnnotations(dir)]
            }
            Action::Annotations(all) => {
                self.annotate.answers = all;
                // Carry on where this annotator stopped: the first case not answered yet.
                if let Some(i) = self.unanswered_from(0) {
                    self.annotate.cursor = i;
                }
                Vec::new()
            }
            Action::InterviewScores(scores) => {
                self.observers.interviews = scores;
                Vec::new()
            }
            Action::RolebenchScores(scores) => {
                self.compare.rolebench = scores;
                Vec::new()
            }
            Action::ChatPrompt(messages) => {
                self.chat.prompt = messages
                    .into_iter()
                    .map(|mut m| {
                        m.content = crate::text::terminal_safe(&m.content);
                        m
                    })
                    .collect();
                Vec::new()
            }
            Action::ChatToken(t) => {
                if let Some(turn) = self.chat.turns.last_mut() {
                    turn.reply.push_str(&crate::text::terminal_safe(&t));
                }
                Vec::new()
            }
            Action::ChatRetry => {
                if let Some(turn) = self.chat.turns.last_mut() {
                    turn.reply.clear();
                }
                Vec::new()
            }
            Action::ChatDone(result) => {
                if let Some(turn) = self.chat.turns.last_mut() {
                    turn.done = true;
                    turn.error = result.err().map(|e| crate::text::terminal_safe(&e));
                }
                Vec::new()
            }
        }
    }

    fn on_mouse(&mut self, m: MouseEvent) {
        let at = Position::new(m.column, m.row);
        let hit = self.hit.borrow().clone();
        match m.kind {
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let down = m.kind == MouseEventKind::ScrollDown;
                if let Some((_, _, list)) = hit.lists.iter().find(|(r, _, _)| r.contains(at)) {
                    self.focus_list(*list);
                }
                self.command(if down { Command::Down } else { Command::Up });
            }
            MouseEventKind::Down(_) => {
                if let Some((_, tab)) = hit.tabs.iter().find(|(r, _)| r.contains(at)) {
                    self.screen = Screen::TABS[*tab];
                    return;
                }
                if let Some((r, first, list)) = hit.lists.iter().find(|(r, _, _)| r.contains(at)) {
                    let row = first + usize::from(m.row - r.y);
                    self.focus_list(*list);
                    self.set_cursor(*list, row);
                }
            }
            _ => {}
        }
    }

    fn focus_list(&mut self, list: ListId) {
        match list {
            ListId::Characters => self.setup.pane = SetupPane::Characters,
            ListId::Scales => self.setup.pane = SetupPane::Scales,
            ListId::Options => self.setup.pane = SetupPane::Options,
            ListId::Dimensions => self.inspect.focus = InspectFocus::Dimensions,
            ListId::InspectItems => self.inspect.focus = InspectFocus::Items,
            ListId::Items => self.live.follow = false,
            ListId::Sessions | ListId::CompareTable => {}
        }
    }

    fn set_cursor(&mut self, list: ListId, row: usize) {
        match list {
            ListId::Characters => self.setup.char_cursor = row.min(self.filtered_characters().len().saturating_sub(1)),
            ListId::Scales => self.setup.scale_cursor = row.min(self.catalog.scales.len().saturating_sub(1)),
            ListId::Options => self.setup.option_cursor = row.min(OPTION_ROWS - 1),
            ListId::Items => self.live.cursor = row.min(self.run.items.len().saturating_sub(1)),
            ListId::Dimensions => self.inspect.dim = row,
            ListId::InspectItems => self.inspect.item = row,
            ListId::Sessions => self.sessions.cursor = row.min(self.sessions.list.len().saturating_sub(1)),
            ListId::CompareTable => self.compare.cursor = row,
        }
    }

    fn on_key(&mut self, event: KeyEvent) -> Vec<Effect> {
        let Some(key) = Key::from_event(&event) else {
            return Vec::new();
        };
        self.flash = None;
        if self.screen == Screen::Annotate && !self.help {
            if self.annotate.editing_note {
                if key.code == KeyName::Enter || key.code == KeyName::Esc {
                    self.annotate.editing_note = false;
                    if key.code == KeyName::Enter {
                        return self.save_note();
                    }
                    return Vec::new();
                }
                self.annotate.note.input(event);
                return Vec::new();
            }
            if !event.modifiers.contains(KeyModifiers::CONTROL) {
                match key.code {
                    KeyName::Char(c) if c.is_ascii_digit() => return self.annotate_digit(c),
                    KeyName::Char('x') | KeyName::Char('X') => {
                        return self.answer(crate::study::annotation::Answer::Refused(
                            crate::study::annotation::Refusal::X,
                        ));
                    }
                    KeyName::Backspace => {
                        self.annotate.typed.pop();
                        return Vec::new();
                    }
                    KeyName::Enter if !self.annotate.typed.is_empty() => {
                        let typed = std::mem::take(&mut self.annotate.typed);
                        return match typed.parse::<f64>() {
                            Ok(v) => self.answer(crate::study::annotation::Answer::Value(v)),
                            Err(_) => Vec::new(),
                        };
                    }
                    _ => {}
                }
            }
        }
        if self.screen == Screen::Chat && !self.help {
            let command = self.keymap.command(Mode::Chat, key);
            let plain = !event.modifiers.contains(KeyModifiers::CONTROL)
                && !matches!(key.code, KeyName::F(_) | KeyName::Esc | KeyName::Tab | KeyName::BackTab);
            if key.code == KeyName::Enter && !event.modifiers.contains(KeyModifiers::ALT) {
                let text = self.chat.input.lines().join("\n");
                if text.trim().is_empty() {
                    return Vec::new();
                }
                self.chat.input = chat_input();
                return self.chat_send(text, None, true);
            }
            if plain || command.is_none() {
                self.chat.input.input(event);
                return Vec::new();
            }
        }
        if self.typing() && !event.modifiers.contains(KeyModifiers::CONTROL) {
            match key.code {
                // Digits switch screens as everywhere else, `?` (in no name) opens the help; letters
                // and other signs filter.
                KeyName::Char(c) if !c.is_ascii_digit() && c != '?' => {
                    self.setup.filter.push(c);
                    self.setup.char_cursor = 0;
                    return Vec::new();
                }
                KeyName::Backspace => {
                    self.setup.filter.pop();
                    self.setup.char_cursor = 0;
                    return Vec::new();
                }
                KeyName::Esc if !self.setup.filter.is_empty() => {
                    self.setup.filter.clear();
                    return Vec::new();
                }
                _ => {}
            }
        }
        if self.help {
            // Any key closes help; the help key and esc only close it.
            let cmd = self.keymap.command(self.screen.mode(), key);
            self.help = false;
            if matches!(cmd, Some(Command::Help | Command::Back) | None) {
                return Vec::new();
            }
            return cmd.map(|c| self.command(c)).unwrap_or_default();
        }
        match self.keymap.command(self.screen.mode(), key) {
            Some(cmd) => self.command(cmd),
            None => Vec::new(),
        }
    }

    /// The tour's next step: its screen and its hint; the last one stops the replay (if still going)
    /// and opens the observer sample.
    fn demo_next(&mut self) -> Vec<Effect> {
        let Some(demo) = self.demo.as_mut() else {
            self.flash = Some("n steps through the tour of `incharacter demo`".into());
            return Vec::new();
        };
        if demo.step + 1 >= DEMO_STEPS.len() {
            self.flash = Some("the tour is over: 1–9 switch screens, 5 lists every sample".into());
            return Vec::new();
        }
        demo.step += 1;
        let (screen, hint) = DEMO_STEPS[demo.step];
        self.screen = screen;
        if screen == Screen::Setup {
            // Letters filter the character list; the options pane leaves n to the tour.
            self.setup.pane = SetupPane::Options;
        }
        self.flash = Some(hint.into());
        if screen != Screen::Observers {
            return Vec::new();
        }
        let Some(path) = demo.observers.clone() else {
            self.flash = Some("demo 5/5: this build has no observer sample; s starts a synthetic run".into());
            return vec![Effect::ListSessions];
        };
        let mut effects = Vec::new();
        if self.live.running {
            effects.push(Effect::Cancel);
        }
        effects.push(Effect::Open(path));
        effects
    }

    pub fn command(&mut self, cmd: Command) -> Vec<Effect> {
        match cmd {
            Command::Quit => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            Command::Help => self.help = !self.help,
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
            Command::GoAnnotate => self.screen = Screen::Annotate,
            Command::GoRolebench => {
                self.screen = Screen::Rolebench;
                return vec![Effect::ListRolebenchFiles];
            }
            Command::GoObservers => {
                self.screen = Screen::Observers;
                return vec![Effect::ListSessions];
            }
            Command::DemoNext => return self.demo_next(),
            _ => {
                return match self.screen {
                    Screen::Welcome => self.welcome_command(cmd),
                    Screen::Setup => self.setup_command(cmd),
                    Screen::Live => self.live_command(cmd),
                    Screen::Inspector => self.inspect_command(cmd),
                    Screen::Compare => {
                        self.compare_command(cmd);
                        Vec::new()
                    }
                    Screen::Sessions => self.sessions_command(cmd),
                    Screen::Chat => {
                        self.chat_command(cmd);
                        Vec::new()
                    }
                    Screen::Observers => self.observers_command(cmd),
                    Screen::Annotate => self.annotate_command(cmd),
                    Screen::Rolebench => self.rolebench_command(cmd),
                };
            }
        }
        Vec::new()
    }

    fn welcome_command(&mut self, cmd: Command) -> Vec<Effect> {
        match cmd {
            Command::FetchModel if self.fetch != Some(FetchState::Running) => {
                self.fetch = Some(FetchState::Running);
                vec![Effect::FetchModel]
            }
            Command::Select => {
                self.screen = Screen::Setup;
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn setup_command(&mut self, cmd: Command) -> Vec<Effect> {
        let filtered = self.filtered_characters().len();
        let s = &mut self.setup;
        let step = |cursor: &mut usize, len: usize, delta: isize| {
            let max = len.saturating_sub(1) as isize;
            *cursor = (*cursor as isize + delta).clamp(0, max.max(0)) as usize;
        };
        let (cursor, len) = match s.pane {
            SetupPane::Characters => (&mut s.char_cursor, filtered),
            SetupPane::Scales => (&mut s.scale_cursor, self.catalog.scales.len()),
            SetupPane::Options => (&mut s.option_cursor, OPTION_ROWS),
        };
        match cmd {
            Command::Up => step(cursor, len, -1),
            Command::Down => step(cursor, len, 1),
            Command::PageUp => step(cursor, len, -10),
            Command::PageDown => step(cursor, len, 10),
            Command::Top => *cursor = 0,
            Command::Bottom => *cursor = len.saturating_sub(1),
            Command::NextPane | Command::PrevPane => {
                let order = [SetupPane::Characters, SetupPane::Scales, SetupPane::Options];
                let i = order.iter().position(|p| *p == s.pane).unwrap_or(0);
                let delta = if cmd == Command::NextPane { 1 } else { 2 };
                s.pane = order[(i + delta) % 3];
            }
            Command::Toggle => self.setup_toggle(1),
            Command::NextMethod => self.setup_toggle(1),
            Command::PrevMethod => self.setup_toggle(-1),
            Command::Select | Command::Start => {
                return match self.plan() {
                    Ok(plan) => {
                        self.screen = Screen::Live;
                        self.live.running = true;
                        self.live.paused = false;
                        self.live.replay = None;
                        self.live.follow = true;
                        vec![Effect::StartRun { plan, name: None }]
                    }
                    Err(e) => {
                        self.flash = Some(e);
                        Vec::new()
                    }
                };
            }
            Command::Back => self.setup.filter.clear(),
            _ => {}
        }
        Vec::new()
    }

    /// Space / ← / → on the selected setup row.
    fn setup_toggle(&mut self, delta: i32) {
        let s = &mut self.setup;
        match s.pane {
            SetupPane::Characters => {
                let ids: Vec<String> = self.filtered_characters().iter().map(|c| c.id.clone()).collect();
                let s = &mut self.setup;
                if let Some(id) = ids.get(s.char_cursor)
                    && !s.characters.remove(id)
                {
                    s.characters.insert(id.clone());
                }
            }
            SetupPane::Scales => {
                if let Some(e) = self.catalog.scales.get(s.scale_cursor) {
                    let id = e.value.id.clone();
                    if !s.scales.remove(&id) {
                        s.scales.insert(id);
                    }
                }
            }
            SetupPane::Options => {
                let row = s.option_cursor;
                let n = Method::ALL.len();
                let cycle = |list: &[String], current: &str| -> String {
                    let i = list.iter().position(|p| p == current).unwrap_or(0) as i32;
                    let len = list.len().max(1) as i32;
                    list.get(((i + delta).rem_euclid(len)) as usize)
                        .cloned()
                        .unwrap_or_default()
                };
                if row < n {
                    let m = Method::ALL[row];
                    if !s.methods.remove(&m) {
                        s.methods.insert(m);
                    }
                } else if row == n {
                    s.repeats = (s.repeats as i32 + delta).clamp(1, 10) as u32;
                } else if row == n + 1 {
                    let styles = [RpaStyle::Description, RpaStyle::Chatharuhi, RpaStyle::Rolegpt];
                    let i = styles.iter().position(|x| *x == s.style).unwrap_or(0) as i32;
                    s.style = styles[(i + delta).rem_euclid(3) as usize];
                } else if row == n + 2 {
                    s.rpa = cycle(&s.providers, &s.rpa);
                } else {
                    s.judge = cycle(&s.providers, &s.judge);
                }
            }
        }
    }

    fn live_command(&mut self, cmd: Command) -> Vec<Effect> {
        let len = self.run.items.len();
        let step = |c: usize, d: isize| (c as isize + d).clamp(0, len.saturating_sub(1) as isize) as usize;
        match cmd {
            Command::Up | Command::Down | Command::PageUp | Command::PageDown | Command::Top | Command::Bottom => {
                self.live.follow = false;
                self.live.scroll.reset();
                self.live.cursor = match cmd {
                    Command::Up => step(self.live.cursor, -1),
                    Command::Down => step(self.live.cursor, 1),
                    Command::PageUp => step(self.live.cursor, -20),
                    Command::PageDown => step(self.live.cursor, 20),
                    Command::Top => 0,
                    _ => len.saturating_sub(1),
                };
            }
            Command::Follow => {
                self.live.follow = true;
                self.live.scroll.reset();
            }
            Command::ScrollUp => self.live.scroll.scroll_up(5),
            Command::ScrollDown => self.live.scroll.scroll_down(5),
            Command::Pause if self.live.running => {
                self.live.paused = !self.live.paused;
                self.flash = Some(match (self.live.paused, self.live.replay.is_some()) {
                    (true, true) => "replay paused (p goes on)".into(),
                    (true, false) => "paused: calls in flight finish, no new ones start".into(),
                    (false, _) => "resumed".into(),
                });
                return vec![Effect::SetPause(self.live.paused)];
            }
            // A replay has nothing to cancel: x plays the rest at once, so every screen shows the whole session.
            Command::Cancel if self.live.running && self.live.replay.is_some() => {
                self.live.paused = false;
                self.live.replay = Some(Replay::Instant);
                self.flash = Some("replay: skipped to the end".into());
                return vec![Effect::SetPause(false), Effect::ReplaySpeed(Replay::Instant)];
            }
            Command::Cancel if self.live.running => {
                self.live.running = false;
                self.flash = Some(format!(
                    "cancelled: resume from Sessions (u) or `incharacter run --resume {}`",
                    self.run.session.id
                ));
                return vec![Effect::Cancel];
            }
            Command::Speed => {
                if let Some(r) = self.live.replay {
                    let next = r.next();
                    self.live.replay = Some(next);
                    return vec![Effect::ReplaySpeed(next)];
                }
            }
            Command::Select => {
                if let Some(row) = self.run.items.get(self.live.cursor) {
                    let key = row.key.clone();
                    self.screen = Screen::Inspector;
                    self.inspect_select_item(&key.character, &key.scale, key.repeat, key.item_id);
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// Opens the inspector on one item of a unit.
    pub fn inspect_select_item(&mut self, character: &str, scale: &str, repeat: u32, item_id: u32) {
        let units = self.run.units();
        if let Some(u) = units
            .iter()
            .position(|(c, s, r)| c == character && s == scale && *r == repeat)
        {
            self.inspect.unit = u;
        }
        if let Some(s) = self.catalog.scale(scale)
            && let Some(item) = s.items.iter().find(|i| i.id == item_id)
            && let Some(d) = item.dimension()
        {
            self.inspect.dim = d;
            let ids: Vec<u32> = s
                .scored_items()
                .filter(|i| i.dimension() == Some(d))
                .map(|i| i.id)
                .collect();
            self.inspect.item = ids.iter().position(|&i| i == item_id).unwrap_or(0);
            self.inspect.focus = InspectFocus::Drill;
            self.inspect.scroll = 0;
        }
    }

    /// The labels the inspector shows for its current unit.
    pub fn inspect_labels(&self) -> LabelSource {
        self.inspect.labels.unwrap_or_else(|| {
            let units = self.run.units();
            units
                .get(self.inspect.unit % units.len().max(1))
                .and_then(|(c, s, _)| self.catalog.character(c).map(|c| c.labels.exclusion_source(s)))
                .unwrap_or(LabelSource::Pdb)
        })
    }

    /// The item under the cursor, re-asked on the chat screen.
    fn inspect_reask(&mut self) -> Vec<Effect> {
        let units = self.run.units();
        let Some((c, s, r)) = units.get(self.inspect.unit).cloned() else {
            return Vec::new();
        };
        let Some(scale) = self.catalog.scale(&s) else {
            return Vec::new();
        };
        let dim = self.inspect.dim.min(scale.dimensions.len().saturating_sub(1));
        let ids: Vec<u32> = scale.items_of(dim).map(|i| i.id).collect();
        let Some(&item_id) = ids.get(self.inspect.item.min(ids.len().saturating_sub(1))) else {
            return Vec::new();
        };
        let key = super::run_view::ItemKey {
            character: c.clone(),
            scale: s,
            repeat: r,
            style: crate::method::interview::QueryStyle::Open,
            item_id,
        };
        let Some(row) = self.run.item(&key).filter(|r| !r.response.is_empty()) else {
            self.flash = Some("this item has no recorded answer to compare with".into());
            return Vec::new();
        };
        let (question, response) = (row.question.clone(), row.response.clone());
        self.reask(&c, &question, &response)
    }

    fn inspect_command(&mut self, cmd: Command) -> Vec<Effect> {
        if cmd == Command::Reask {
            return self.inspect_reask();
        }
        let units = self.run.units().len().max(1);
        let methods = self.methods().len().max(1);
        let i = &mut self.inspect;
        match cmd {
            Command::NextUnit => {
                i.unit = (i.unit + 1) % units;
                i.scroll = 0;
            }
            Command::PrevUnit => {
                i.unit = (i.unit + units - 1) % units;
                i.scroll = 0;
            }
            Command::NextMethod => i.method = (i.method + 1) % methods,
            Command::PrevMethod => i.method = (i.method + methods - 1) % methods,
            Command::NextPane => {
                i.focus = match i.focus {
                    InspectFocus::Dimensions => InspectFocus::Items,
                    _ => InspectFocus::Dimensions,
                };
                i.scroll = 0;
            }
            Command::PrevPane => {
                i.focus = match i.focus {
                    InspectFocus::Items => InspectFocus::Dimensions,
                    _ => InspectFocus::Items,
                };
            }
            Command::Select => {
                i.focus = InspectFocus::Drill;
                i.scroll = 0;
            }
            Command::Back => {
                i.focus = match i.focus {
                    InspectFocus::Drill => InspectFocus::Items,
                    _ => InspectFocus::Dimensions,
                };
                i.scroll = 0;
            }
            Command::Toggle => {
                let shown = self.inspect_labels();
                self.inspect.labels = Some(match shown {
                    LabelSource::Pdb => LabelSource::Annotation,
                    LabelSource::Annotation => LabelSource::Pdb,
                });
            }
            Command::ScrollUp => i.scroll = i.scroll.saturating_sub(5),
            Command::ScrollDown => i.scroll = i.scroll.saturating_add(5),
            Command::Up | Command::Down | Command::PageUp | Command::PageDown | Command::Top | Command::Bottom => {
                let delta: isize = match cmd {
                    Command::Up => -1,
                    Command::Down => 1,
                    Command::PageUp => -10,
                    Command::PageDown => 10,
                    Command::Top => -10_000,
                    _ => 10_000,
                };
                match i.focus {
                    InspectFocus::Dimensions => {
                        i.dim = (i.dim as isize + delta).max(0) as usize;
                        i.item = 0;
                        i.scroll = 0;
                    }
                    InspectFocus::Items => {
                        i.item = (i.item as isize + delta).max(0) as usize;
                        i.scroll = 0;
                    }
                    InspectFocus::Drill => {
                        i.scroll = (i.scroll as isize + delta).clamp(0, u16::MAX as isize) as u16;
                    }
                }
            }
            _ => {}
        }
        Vec::new()
    }

    fn compare_command(&mut self, cmd: Command) {
        let characters = self
            .run
            .session
            .plan
            .as_ref()
            .map_or(1, |p| p.characters.len() * p.scales.len())
            .max(1);
        let methods = self.methods().len().max(1);
        let c = &mut self.compare;
        match cmd {
            Command::NextUnit => {
                c.unit = (c.unit + 1) % characters;
                c.page = 0;
            }
            Command::PrevUnit => {
                c.unit = (c.unit + characters - 1) % characters;
                c.page = 0;
            }
            Command::NextMethod => c.method = (c.method + 1) % methods,
            Command::PrevMethod => c.method = (c.method + methods - 1) % methods,
            Command::AllMethods => c.all_methods = !c.all_methods,
            Command::NextPage => c.page += 1,
            Command::PrevPage => c.page = c.page.saturating_sub(1),
            Command::Sort => c.sort = (c.sort + 1) % 4,
            Command::Up => c.cursor = c.cursor.saturating_sub(1),
            Command::Down => c.cursor += 1,
            Command::Select => {
                let rows = super::ui::table_rows(self);
                if let Some(row) = rows.get(self.compare.cursor.min(rows.len().saturating_sub(1))) {
                    let methods = self.methods();
                    self.compare.unit = row.4;
                    self.compare.method = methods.iter().position(|m| *m == row.2).unwrap_or(0);
                    self.compare.all_methods = false;
                }
            }
            _ => {}
        }
    }

    /// The annotation cases of the shown session for the current task and sample.
    pub fn annotation_cases(&self) -> Vec<crate::study::annotation::Case> {
        use crate::study::annotation::{dimension_case, item_case, sample};
        let mut all: Vec<crate::study::annotation::Case> = self
            .run
            .items
            .iter()
            .filter(|row| row.key.style == crate::method::interview::QueryStyle::Open && !row.response.is_empty())
            .filter_map(|row| {
                let k = &row.key;
                item_case(&self.catalog, &k.character, &k.scale, k.repeat, k.item_id)
            })
            .collect();
        for case in self.run.assessments.iter().filter_map(dimension_case) {
            if !all.contains(&case) {
                all.push(case);
            }
        }
        let seed = self.run.session.plan.as_ref().map_or(0, |p| p.seed);
        sample(
            &all,
            self.annotate.task,
            SAMPLES[self.annotate.sample % SAMPLES.len()],
            seed,
        )
    }

    /// The range an answer of the current task must fall in.
    fn answer_range(&self, case: &crate::study::annotation::Case) -> (f64, f64) {
        let Some(scale) = self.catalog.scale(&case.scale) else {
            return (0.0, 0.0);
        };
        match case.task {
            crate::study::annotation::Task::Item => (f64::from(scale.range.min), f64::from(scale.range.max)),
            crate::study::annotation::Task::Dimension => scale.dimension_range(),
        }
    }

    fn annotate_digit(&mut self, c: char) -> Vec<Effect> {
        let cases = self.annotation_cases();
        let Some(case) = cases.get(self.annotate.cursor) else {
            return Vec::new();
        };
        let (min, max) = self.answer_range(case);
        self.annotate.typed.push(c);
        let Ok(v) = self.annotate.typed.parse::<f64>() else {
            return Vec::new();
        };
        // Answer at once when no further digit could make a valid answer (1–5, 1–7 …).
        if v * 10.0 > max {
            let typed = std::mem::take(&mut self.annotate.typed);
            if (min..=max).contains(&v) {
                return self.answer(crate::study::annotation::Answer::Value(v));
            }
            self.flash = Some(format!("{typed} is outside {min}–{max}"));
        }
        Vec::new()
    }

    fn answer(&mut self, value: crate::study::annotation::Answer) -> Vec<Effect> {
        let cases = self.annotation_cases();
        let (Some(case), Some(dir)) = (cases.get(self.annotate.cursor).cloned(), self.session_dir.clone()) else {
            self.flash = Some("open a session to annotate (5, then enter)".into());
            return Vec::new();
        };
        if self.shown_session_is_sample() {
            self.flash = Some(SAMPLE_READ_ONLY.into());
            return Vec::new();
        }
        let note = self.annotate.note.lines().join("\n");
        let annotation = crate::study::annotation::Annotation {
            annotator: self.annotate.annotator.clone(),
            case: case.clone(),
            value,
            note: (!note.trim().is_empty()).then_some(note),
            at: crate::journal::now_rfc3339(),
        };
        self.annotate
            .answers
            .entry(annotation.annotator.clone())
            .or_default()
            .insert(case, annotation.clone());
        self.annotate.note = tui_textarea::TextArea::default();
        if self.annotate.cursor + 1 < cases.len() {
            self.annotate.cursor += 1;
        }
        vec![Effect::Annotate { dir, annotation }]
    }

    /// Whether the session shown is a bundled sample, which is never written to.
    pub fn shown_session_is_sample(&self) -> bool {
        self.session_dir
            .as_ref()
            .is_some_and(|dir| self.sessions.list.iter().any(|e| e.sample && &e.path == dir))
    }

    fn save_note(&mut self) -> Vec<Effect> {
        let cases = self.annotation_cases();
        let Some(case) = cases.get(self.annotate.cursor) else {
            return Vec::new();
        };
        let answered = self
            .annotate
            .answers
            .get(&self.annotate.annotator)
            .and_then(|m| m.get(case))
            .map(|a| a.value);
        match answered {
            // Re-record the answer with its note; the note of an unanswered case waits for the answer.
            Some(value) => {
                let cursor = self.annotate.cursor;
                let effects = self.answer(value);
                self.annotate.cursor = cursor;
                effects
            }
            None => {
                self.flash = Some("note kept: it is saved with the answer".into());
                Vec::new()
            }
        }
    }

    fn annotate_command(&mut self, cmd: Command) -> Vec<Effect> {
        let len = self.annotation_cases().len();
        let a = &mut self.annotate;
        a.typed.clear();
        match cmd {
            Command::NextUnit | Command::Down => a.cursor = (a.cursor + 1).min(len.saturating_sub(1)),
            Command::PrevUnit | Command::Up => a.cursor = a.cursor.saturating_sub(1),
            Command::PageDown => a.cursor = (a.cursor + 10).min(len.saturating_sub(1)),
            Command::PageUp => a.cursor = a.cursor.saturating_sub(10),
            Command::Top => a.cursor = 0,
            Command::Bottom => a.cursor = len.saturating_sub(1),
            Command::Reveal => a.reveal = !a.reveal,
            Command::NextPane => {
                a.task = match a.task {
                    crate::study::annotation::Task::Item => crate::study::annotation::Task::Dimension,
                    crate::study::annotation::Task::Dimension => crate::study::annotation::Task::Item,
                };
                a.cursor = 0;
            }
            Command::Sample => {
                a.sample = (a.sample + 1) % SAMPLES.len();
                a.cursor = 0;
                self.flash = Some(match SAMPLES[a.sample] {
                    None => "every case".into(),
                    Some(n) => format!("a seeded sample of {n} cases, stratified by dimension"),
                });
            }
            Command::Note => a.editing_note = true,
            Command::Skip => {
                if let Some(i) = self.unanswered_from(self.annotate.cursor + 1) {
                    self.annotate.cursor = i;
                }
            }
            _ => {}
        }
        Vec::new()
    }

    /// The first case from `from` on (wrapping around) this annotator has not answered.
    fn unanswered_from(&self, from: usize) -> Option<usize> {
        let cases = self.annotation_cases();
        let done = self.annotate.answers.get(&self.annotate.annotator);
        (0..cases.len())
            .map(|k| (from + k) % cases.len())
            .find(|&i| done.is_none_or(|d| !d.contains_key(&cases[i])))
    }

    fn rolebench_command(&mut self, cmd: Command) -> Vec<Effect> {
        let session = self.run.rolebench.as_ref().map_or(0, |p| p.questions.len());
        let rb = &mut self.rolebench;
        let (cursor, len) = match rb.pane {
            0 => (&mut rb.file_cursor, rb.files.len()),
            1 => (&mut rb.role_cursor, rb.roles.len()),
            _ => (&mut rb.item, session),
        };
        if move_cursor(cmd, cursor, len) {
            rb.scroll = 0;
            return Vec::new();
        }
        match cmd {
            Command::ScrollUp => rb.scroll = rb.scroll.saturating_add(5),
            Command::ScrollDown => rb.scroll = rb.scroll.saturating_sub(5),
            Command::NextPane => rb.pane = (rb.pane + 1) % 3,
            Command::PrevPane => rb.pane = (rb.pane + 2) % 3,
            Command::Limit => {
                rb.limit = (rb.limit + 1) % RB_LIMITS.len();
                self.flash = Some(match RB_LIMITS[rb.limit] {
                    Some(n) => format!("a seeded sample of {n} questions"),
                    None => "every question of the picked roles".into(),
                });
            }
            Command::Select if rb.pane == 0 => {
                if let Some(path) = rb.files.get(rb.file_cursor) {
                    return vec![Effect::LoadRolebench(path.clone())];
                }
            }
            Command::Toggle | Command::Select if rb.pane == 1 => {
                if let Some((role, _)) = rb.roles.get(rb.role_cursor)
                    && !rb.picked.remove(role)
                {
                    rb.picked.insert(role.clone());
                }
            }
            Command::Select => rb.scroll = 0,
            Command::Start => return self.rolebench_start(),
            _ => {}
        }
        Vec::new()
    }

    fn rolebench_start(&mut self) -> Vec<Effect> {
        let rb = &self.rolebench;
        let Some((path, questions)) = &rb.loaded else {
            self.flash = Some("pick a question file first (enter on a file)".into());
            return Vec::new();
        };
        if rb.picked.is_empty() {
            self.flash = Some("pick at least one role (space)".into());
            return Vec::new();
        }
        let choice = crate::study::rolebench::Choice {
            data: &path.display().to_string(),
            roles: rb.picked.iter().cloned().collect(),
            types: Vec::new(),
            limit: RB_LIMITS[rb.limit],
            seed: 0,
            rpa: self.setup.rpa.clone(),
            style: self.setup.style,
            judge: None,
        };
        match crate::study::rolebench::plan(&self.catalog, questions.clone(), choice) {
            Ok((plan, notes)) => {
                self.run = RunView::default();
                self.rolebench.item = 0;
                self.rolebench.pane = 2;
                self.rolebench.loaded = None;
                self.live.running = true;
                self.live.paused = false;
                self.live.replay = None;
                self.flash = notes.into_iter().next();
                vec![Effect::StartRolebench { plan: Box::new(plan) }]
            }
            Err(e) => {
                self.flash = Some(e);
                Vec::new()
            }
        }
    }

    fn observers_command(&mut self, cmd: Command) -> Vec<Effect> {
        let o = &mut self.observers;
        match cmd {
            Command::NextUnit => {
                o.subject += 1;
                o.observer = 0;
                o.scroll.reset();
            }
            Command::PrevUnit => {
                o.subject = o.subject.saturating_sub(1);
                o.observer = 0;
                o.scroll.reset();
            }
            Command::Down => {
                o.observer += 1;
                o.scroll.reset();
            }
            Command::Up => {
                o.observer = o.observer.saturating_sub(1);
                o.scroll.reset();
            }
            Command::ScrollUp => o.scroll.scroll_up(5),
            Command::ScrollDown => o.scroll.scroll_down(5),
            Command::StartSynthetic | Command::StartCharacter => {
                let characters: Vec<String> = if cmd == Command::StartCharacter {
                    match self.setup.characters.iter().next() {
                        Some(c) => vec![c.clone()],
                        None => {
                            self.flash = Some("pick a character in Setup first (1, then space)".into());
                            return Vec::new();
                        }
                    }
                } else {
                    Vec::new()
                };
                let subjects = crate::observer::draw(&crate::observer::Draw {
                    characters: &characters,
                    synthetic: usize::from(characters.is_empty()),
                    latent: None,
                    observers: &[
                        (crate::observer::Context::Family, 1),
                        (crate::observer::Context::Friend, 1),
                        (crate::observer::Context::Workplace, 1),
                    ],
                    seed: self.setup.seed,
                });
                let plan = crate::observer::ObservePlan {
                    subjects,
                    scenarios: 2,
                    turn_cap: 6,
                    temperature: 1.0,
                    subject_provider: self.setup.rpa.clone(),
                    observer_provider: self.setup.rpa.clone(),
                    self_report: crate::observer::SelfReportMode::Batched,
                    seed: self.setup.seed,
                    max_attempts: crate::method::judge::DEFAULT_ATTEMPTS,
                };
                self.observers.subject = 0;
                self.observers.observer = 0;
                self.live.running = true;
                self.live.replay = None;
                self.flash = Some("observer run started: 3 observers, 2 scenarios each".into());
                return vec![Effect::StartObserve { plan }];
            }
            _ => {}
        }
        Vec::new()
    }

    fn chat_command(&mut self, cmd: Command) {
        match cmd {
            Command::Prompt => self.chat.show_prompt = !self.chat.show_prompt,
            Command::ScrollUp => self.chat.scroll.scroll_up(5),
            Command::ScrollDown => self.chat.scroll.scroll_down(5),
            Command::NextUnit | Command::PrevUnit => {
                let ids: Vec<String> = self.catalog.characters.iter().map(|e| e.value.id.clone()).collect();
                let current = self.chat_character().map(|c| c.id.clone()).unwrap_or_default();
                let i = ids.iter().position(|id| *id == current).unwrap_or(0);
                let n = ids.len().max(1);
                let next = if cmd == Command::NextUnit {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.chat.character = ids.get(next).cloned().unwrap_or_default();
                self.chat.turns.clear();
                self.chat.prompt.clear();
            }
            Command::Clear => {
                self.chat.turns.clear();
                self.chat.prompt.clear();
                self.flash = Some("conversation cleared".into());
            }
            _ => {}
        }
    }

    fn sessions_command(&mut self, cmd: Command) -> Vec<Effect> {
        let s = &mut self.sessions;
        let len = s.list.len();
        match cmd {
            Command::Up => s.cursor = s.cursor.saturating_sub(1),
            Command::Down => s.cursor = (s.cursor + 1).min(len.saturating_sub(1)),
            Command::Top => s.cursor = 0,
            Command::Bottom => s.cursor = len.saturating_sub(1),
            Command::Mark => {
                if let Some(p) = s.marked.iter().position(|&m| m == s.cursor) {
                    s.marked.remove(p);
                } else if len > 0 {
                    s.marked.push(s.cursor);
                }
                let paths: Vec<PathBuf> = s.marked.iter().map(|&m| s.list[m].path.clone()).collect();
                if paths.len() >= 2 {
                    return vec![Effect::Compare(paths)];
                }
                s.comparison.clear();
            }
            Command::Speed => {
                let next = s.speed.unwrap_or(Replay::Speed(1.0)).next();
                s.speed = Some(next);
                self.flash = Some(format!("replay speed: {}", next.label()));
            }
            Command::Select => {
                if let Some(e) = s.list.get(s.cursor) {
                    return vec![Effect::Open(e.path.clone())];
                }
            }
            Command::Replay => {
                if let Some(e) = s.list.get(s.cursor) {
                    let speed = s.speed.unwrap_or(Replay::Speed(1.0));
                    let path = e.path.clone();
                    self.screen = Screen::Live;
                    self.live.replay = Some(speed);
                    self.live.running = true;
                    self.live.follow = true;
                    self.live.paused = false;
                    return vec![Effect::Replay { path, speed }];
                }
            }
            Command::Export => {
                if let Some(e) = s.list.get(s.cursor) {
                    return vec![Effect::Export(e.path.clone())];
                }
            }
            Command::Resume => {
                if let Some(e) = s.list.get(s.cursor) {
                    if e.sample {
                        self.flash = Some("sample sessions are read-only: replay them instead (r)".into());
                    } else if e.status == "complete" {
                        self.flash = Some("this session is complete".into());
                    } else {
                        let id = e.id.clone();
                        self.screen = Screen::Live;
                        self.live.running = true;
                        self.live.replay = None;
                        return vec![Effect::Resume { id }];
                    }
                }
            }
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::TailScroll;

    #[test]
    fn a_tail_scroll_stops_at_the_first_line_and_comes_straight_back() {
        let mut s = TailScroll::default();
        // 30 lines in 10 rows: the bottom ten first.
        assert_eq!(s.window(30, 10, true), (20, 30));
        for _ in 0..10 {
            s.scroll_up(5);
        }
        assert_eq!(s.up, 20, "never past the top");
        assert_eq!(s.window(30, 10, true), (0, 10), "a full page at the top");
        s.scroll_down(5);
        assert_eq!(s.window(30, 10, true), (5, 15), "one key brings it back down");
        // Text shorter than the pane does not scroll.
        let mut short = TailScroll::default();
        assert_eq!(short.window(4, 10, true), (0, 4));
        short.scroll_up(5);
        assert_eq!(short.up, 0);
        // Only a tail laid out: the limit is unknown, scrolling goes on.
        let mut tail = TailScroll::default();
        tail.window(15, 10, false);
        tail.scroll_up(5);
        tail.scroll_up(5);
        assert_eq!(tail.up, 10);
    }
}
