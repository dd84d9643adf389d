//! What the app and its screens both speak: the screens, the effects a screen or the app asks of the
//! driver, the replay speeds, a provider's status and the guided tour. Below `app`, `screens` and
//! `ui`, so none of them needs another to name these.

use std::path::PathBuf;

use crate::llm::{ModelInfo, Role};
use crate::rpa::prompt::RpaStyle;
use crate::study::RunPlan;

use super::keys::Mode;
use super::run_view::RunView;

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
    Persona,
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
            Screen::Persona => Mode::Persona,
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
            Screen::Persona => "Persona",
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
            Screen::Persona => "Pers.",
            other => other.title(),
        }
    }

    /// Two letters, none the same as another tab's: the tabs' titles where F-keys name them on an
    /// 80-column terminal.
    pub fn tiny_title(self) -> &'static str {
        match self {
            Screen::Welcome | Screen::Setup => "Se",
            Screen::Live => "Li",
            Screen::Inspector => "In",
            Screen::Compare => "Co",
            Screen::Sessions => "Ss",
            Screen::Chat => "Ch",
            Screen::Observers => "Ob",
            Screen::Annotate => "An",
            Screen::Rolebench => "RB",
            Screen::Persona => "Pe",
        }
    }

    /// The command that shows this screen.
    pub fn go(self) -> super::keys::Command {
        use super::keys::Command::*;
        match self {
            Screen::Welcome | Screen::Setup => GoSetup,
            Screen::Live => GoLive,
            Screen::Inspector => GoInspector,
            Screen::Compare => GoCompare,
            Screen::Sessions => GoSessions,
            Screen::Chat => GoChat,
            Screen::Observers => GoObservers,
            Screen::Annotate => GoAnnotate,
            Screen::Rolebench => GoRolebench,
            Screen::Persona => GoPersona,
        }
    }

    pub const TABS: [Screen; 10] = [
        Screen::Setup,
        Screen::Live,
        Screen::Inspector,
        Screen::Compare,
        Screen::Sessions,
        Screen::Chat,
        Screen::Observers,
        Screen::Annotate,
        Screen::Rolebench,
        Screen::Persona,
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

/// The guided tour of `incharacter demo`: the step shown, and the observer sample its last step opens.
#[derive(Debug, Clone, Default)]
pub struct Demo {
    pub step: usize,
    pub observers: Option<PathBuf>,
    /// The replayed session as it ends, read before the replay starts: the inspector and compare
    /// steps show it while the replay still goes on in Live, so a step shows what it announces.
    pub finished: Option<Box<RunView>>,
}

impl Demo {
    /// The finished session, while `run` is its replay and has not reached its end.
    pub fn ahead_of<'a>(&'a self, run: &RunView) -> Option<&'a RunView> {
        self.finished
            .as_deref()
            .filter(|f| run.finished.is_none() && f.session.id == run.session.id)
    }
}

/// The tour's steps: the screen each shows and what the status line says about it (short enough for
/// an 80-column status line after " n  next step ").
pub const DEMO_STEPS: [(Screen, &str); 5] = [
    (
        Screen::Live,
        "demo 1/5: a recorded interview replays as it streamed (s: faster)",
    ),
    (Screen::Setup, "demo 2/5: the setup the recorded run was started from"),
    (
        Screen::Inspector,
        "demo 3/5: each rating with its evidence (enter: the prompts)",
    ),
    (
        Screen::Compare,
        "demo 4/5: the measured profile against the labels (m: method)",
    ),
    (
        Screen::Observers,
        "demo 5/5: observers talk with a subject, then rate it · 0–9: screens",
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
    /// Check these providers with the method's own requests.
    CheckProviders(Vec<String>),
    Cancel,
    Open(PathBuf),
    Replay {
        path: PathBuf,
        speed: Replay,
    },
    ReplaySpeed(Replay),
    Export(PathBuf),
    Compare(Vec<PathBuf>),
    /// Read the session in this folder and the prompt sets in `<data dir>/prompts/` for the
    /// "re-assess with…" dialog.
    OfferReassess(PathBuf),
    /// Compare the sessions that assess the interviews of session `interviews` (it and its
    /// re-assessments).
    Judges {
        interviews: String,
    },
    FetchModel,
    ListSessions,
    StartObserve {
        plan: crate::observer::ObservePlan,
    },
    /// Append an annotation to the journal of its annotator in the session folder.
    Annotate {
        dir: PathBuf,
        annotation: crate::annotation::Annotation,
    },
    LoadAnnotations(PathBuf),
    /// Read the session's annotations again (what another window or annotator wrote since), the
    /// cursor left where it is.
    RereadAnnotations(PathBuf),
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
        /// The character's greeting, the conversation's opening message.
        greeting: Option<String>,
        history: Vec<(String, String)>,
        text: String,
        /// How the reply is sampled when it is not the config's `[sampling.rpa]`: an item asked
        /// again, as the session recorded its answers.
        sampling: Option<crate::method::interview::AnswerSampling>,
    },
    /// Stop the chat reply being written (what streamed stays, marked stopped).
    StopChat,
    /// Write a character to the data dir and load the catalog again. `was`: the character as the
    /// edit began (`None`: a new one); `copy_of`: the character a copy was made from, whose memories
    /// and card go with it.
    SaveCharacter {
        character: Box<crate::domain::character::Character>,
        was: Option<Box<crate::domain::character::Character>>,
        copy_of: Option<String>,
    },
    /// Diff the probe `session` of `character` with the newest earlier session that measured it.
    ProbeDiff {
        character: String,
        session: String,
    },
    Quit,
}
