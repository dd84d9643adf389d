//! Key bindings: each screen maps keys to [`Command`]s, over a global map; `[tui.keys.<screen>]` in
//! config.toml rebinds them (`"ctrl-j" = "down"`). The help overlay is generated from the same tables,
//! so it always lists what the keys really do.

use std::collections::BTreeMap;
use std::fmt;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::config::KeyBinding;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    Global,
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
    /// The "re-assess with…" dialog, over Sessions or the Inspector.
    Reassess,
}

impl Mode {
    /// Whether a global command does something on this screen (screen switches, quit, help and theme
    /// work everywhere; navigation only where the screen has something to navigate).
    pub fn uses(self, cmd: Command) -> bool {
        use Command::*;
        let navigation: &[Command] = match self {
            Mode::Global => return true,
            // A dialog: its own keys, and quitting; the screens wait until it closes.
            Mode::Reassess => return matches!(cmd, Quit | Help | Up | Down | Select | Back),
            Mode::Welcome => &[Select],
            Mode::Setup => &[
                Up, Down, PageUp, PageDown, Top, Bottom, NextPane, PrevPane, Select, Back,
            ],
            Mode::Live => &[Up, Down, PageUp, PageDown, Top, Bottom, Select],
            Mode::Inspector => &[
                Up, Down, PageUp, PageDown, Top, Bottom, NextPane, PrevPane, Select, Back,
            ],
            Mode::Compare => &[Up, Down, Select, Back],
            Mode::Sessions => &[Up, Down, Top, Bottom, Select],
            Mode::Chat => &[],
            Mode::Observers => &[Up, Down],
            Mode::Annotate => &[Up, Down, PageUp, PageDown, Top, Bottom, NextPane],
            Mode::Rolebench => &[Up, Down, PageUp, PageDown, Top, Bottom, NextPane, PrevPane, Select],
            Mode::Persona => &[Up, Down, PageUp, PageDown, Top, Bottom, Select, Back],
        };
        matches!(
            cmd,
            Quit | Help
                | Theme
                | GoSetup
                | GoLive
                | GoInspector
                | GoCompare
                | GoSessions
                | GoChat
                | GoObservers
                | GoAnnotate
                | GoRolebench
                | GoPersona
                | DemoNext
        ) || navigation.contains(&cmd)
    }

    /// Whether the screen takes `key` as text (chat input, annotation answers) before any binding.
    pub fn types(self, key: Key) -> bool {
        match (self, key.code) {
            (_, _) if key.ctrl || key.alt => false,
            (Mode::Chat, KeyName::Char(_) | KeyName::Space | KeyName::Enter | KeyName::Backspace) => true,
            (Mode::Chat, KeyName::Up | KeyName::Down | KeyName::Left | KeyName::Right) => true,
            (Mode::Chat, KeyName::Home | KeyName::End | KeyName::PageUp | KeyName::PageDown) => true,
            (Mode::Annotate, KeyName::Char(c)) => c.is_ascii_digit() || c == '.' || c.eq_ignore_ascii_case(&'x'),
            _ => false,
        }
    }

    /// Whether a key bound on this screen could be taken as text there before the keymap sees it:
    /// what [`Mode::types`] says, and more — alt keys in the chat's input, letters in Setup's
    /// character filter (its first pane).
    pub fn may_type(self, key: Key) -> bool {
        let letter = matches!(key.code, KeyName::Char(c) if !c.is_ascii_digit() && c != '?');
        self.types(key)
            || (!key.ctrl && self == Mode::Chat && self.types(Key { alt: false, ..key }))
            || (!key.ctrl && self == Mode::Setup && letter)
    }

    pub const ALL: [Mode; 13] = [
        Mode::Global,
        Mode::Welcome,
        Mode::Setup,
        Mode::Live,
        Mode::Inspector,
        Mode::Compare,
        Mode::Sessions,
        Mode::Chat,
        Mode::Observers,
        Mode::Annotate,
        Mode::Rolebench,
        Mode::Persona,
        Mode::Reassess,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Global => "global",
            Mode::Welcome => "welcome",
            Mode::Setup => "setup",
            Mode::Live => "live",
            Mode::Inspector => "inspector",
            Mode::Compare => "compare",
            Mode::Sessions => "sessions",
            Mode::Chat => "chat",
            Mode::Observers => "observers",
            Mode::Annotate => "annotate",
            Mode::Rolebench => "rolebench",
            Mode::Persona => "persona",
            Mode::Reassess => "reassess",
        }
    }
}

macro_rules! commands {
    ($($variant:ident => $name:literal, $help:literal;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Command { $($variant),* }

        impl Command {
            pub const ALL: &'static [Command] = &[$(Command::$variant),*];

            pub fn name(self) -> &'static str {
                match self { $(Command::$variant => $name),* }
            }

            pub fn help(self) -> &'static str {
                match self { $(Command::$variant => $help),* }
            }

            pub fn parse(name: &str) -> Option<Command> {
                Command::ALL.iter().copied().find(|c| c.name() == name)
            }
        }
    };
}

commands! {
    Quit => "quit", "quit (the run's journal keeps everything done)";
    Help => "help", "show or hide this help";
    Theme => "theme", "next theme";
    GoSetup => "go-setup", "setup screen";
    GoLive => "go-live", "live run screen";
    GoInspector => "go-inspector", "inspector screen";
    GoCompare => "go-compare", "compare screen";
    GoSessions => "go-sessions", "sessions screen";
    GoChat => "go-chat", "chat screen";
    GoObservers => "go-observers", "observers screen";
    GoAnnotate => "go-annotate", "annotate screen";
    GoRolebench => "go-rolebench", "RoleBench screen";
    GoPersona => "go-persona", "persona screen: write and edit characters, their targets, probes";
    Duplicate => "duplicate", "duplicate the character into a copy you can edit";
    NewCharacter => "new-character", "write a new character";
    BeforeAfter => "before-after", "show or hide the last probe against the session before it: a bar per dimension, the answers that moved it";
    Limit => "limit", "how many questions: 10, 20, 50 or all (a seeded sample)";
    Reveal => "reveal", "show or hide the interviewer's judgement before answering";
    Sample => "sample", "every case, or a seeded sample of 100 / 50 / 20";
    Note => "note", "write a note for this case (enter keeps it)";
    Skip => "skip", "jump to the next case not answered yet (wraps around)";
    StartSynthetic => "start-synthetic", "start an observer run on a synthetic subject (3 observers, 2 scenarios)";
    StartCharacter => "start-character", "start an observer run on the character picked in Setup";
    Prompt => "prompt", "show or hide the prompt as sent";
    Clear => "clear", "clear the conversation";
    Find => "find", "find a character by name, alias, work or language and talk to it (type to filter, enter picks)";
    Reask => "reask", "re-ask this item on the chat screen and compare the answers";
    Up => "up", "move up";
    Down => "down", "move down";
    PageUp => "page-up", "page up";
    PageDown => "page-down", "page down";
    Top => "top", "first row";
    Bottom => "bottom", "last row";
    NextPane => "next-pane", "next pane";
    PrevPane => "prev-pane", "previous pane";
    Select => "select", "open / start / drill in";
    Back => "back", "back / close";
    Toggle => "toggle", "toggle the selected entry";
    Start => "start", "start the run";
    Pause => "pause", "pause or resume the run";
    Cancel => "cancel", "cancel the run (resume it later from sessions)";
    Follow => "follow", "follow the newest answer";
    NextMethod => "next-method", "next method";
    PrevMethod => "prev-method", "previous method";
    AllMethods => "all-methods", "show every method at once";
    NextUnit => "next-unit", "next character / scale / repeat";
    PrevUnit => "prev-unit", "previous character / scale / repeat";
    Sort => "sort", "sort the table by the next column";
    NextPage => "next-page", "next page of dimensions";
    PrevPage => "prev-page", "previous page of dimensions";
    Replay => "replay", "replay the session with its original timing";
    Speed => "speed", "replay speed 1× → 4× → instant";
    Export => "export", "export the session (JSON) next to its journal";
    Mark => "mark", "mark a session for side-by-side comparison";
    Reassess => "reassess", "re-assess the session's interviews: pick the judge, prompt set, methods and temperature (only judge requests; a new session)";
    Judges => "judges", "every assessment of these interviews (the session, its parent, their re-assessments) side by side: profiles, agreement, sensitivity";
    FetchModel => "fetch-model", "fetch the embedded local model";
    CheckProviders => "check-providers", "send the method's own requests to the rpa and judge providers: works, adapted or fails, per request";
    Resume => "resume", "resume an interrupted session";
    ScrollUp => "scroll-up", "scroll the text up";
    ScrollDown => "scroll-down", "scroll the text down";
    DemoNext => "demo-next", "next step of the tour (`incharacter demo`)";
}

impl Command {
    /// The help text on `mode`'s screen: where a command means something narrower there, that.
    pub fn help_on(self, mode: Mode) -> &'static str {
        match (mode, self) {
            (Mode::Live, Command::Pause) => "pause or go on (a run: calls in flight finish; a replay: it stops)",
            (Mode::Live, Command::Cancel) => {
                "cancel the run (resume it later from sessions); a replay: skip to its end"
            }
            (Mode::Compare, Command::NextUnit) => "next character × scale",
            (Mode::Compare, Command::PrevUnit) => "previous character × scale",
            (Mode::Compare, Command::Back) => "leave the assessments view",
            (Mode::Compare, Command::Up | Command::Down) => {
                "move in the session table (the pair table in the assessments view)"
            }
            (Mode::Persona, Command::Select) => {
                "edit the character (yours; a bundled one: d duplicates it); in the before/after view: the answers that moved the dimension"
            }
            (Mode::Persona, Command::Start) => {
                "probe: interview the character on the setup's scales and methods (the targets' scale if none)"
            }
            (Mode::Persona, Command::NextMethod) => "next scale for the targets",
            (Mode::Persona, Command::Back) => "close the before/after view (its answers first)",
            (Mode::Persona, Command::PrevMethod) => "previous scale for the targets",
            (Mode::Chat, Command::NextUnit) => "next character",
            (Mode::Chat, Command::PrevUnit) => "previous character",
            (Mode::Chat, Command::Cancel) => "stop the reply being written (what came stays, marked stopped)",
            (Mode::Observers, Command::NextUnit) => "next subject",
            (Mode::Observers, Command::PrevUnit) => "previous subject",
            (Mode::Observers, Command::Down) => "next observer",
            (Mode::Observers, Command::Up) => "previous observer",
            (Mode::Reassess, Command::Up | Command::Down) => "move between the rows",
            (Mode::Reassess, Command::Toggle | Command::NextUnit) => {
                "the row's next choice (judge, prompt set, temperature); a method on / off"
            }
            (Mode::Reassess, Command::PrevUnit) => "the row's previous choice",
            (Mode::Reassess, Command::Select) => "start the re-assessment (a new session, shown on Live)",
            (Mode::Reassess, Command::Back) => "cancel",
            (Mode::Annotate, Command::NextUnit | Command::Down) => "next case",
            (Mode::Annotate, Command::PrevUnit | Command::Up) => "previous case",
            (Mode::Annotate, Command::NextPane | Command::PrevPane) => {
                "switch between the item task and the dimension task (an observer session: rate per subject or per observer)"
            }
            _ => self.help(),
        }
    }
}

/// A key as written in config and help: "q", "ctrl-c", "enter", "f2", "shift-tab", "space".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub code: KeyName,
    pub ctrl: bool,
    pub alt: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyName {
    Char(char),
    F(u8),
    Enter,
    Esc,
    Tab,
    BackTab,
    Backspace,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Home,
    End,
    Space,
}

impl Key {
    pub fn parse(spec: &str) -> Option<Key> {
        let mut key = Key {
            code: KeyName::Space,
            ctrl: false,
            alt: false,
        };
        let mut rest = spec.trim();
        loop {
            if let Some(r) = rest.strip_prefix("ctrl-") {
                key.ctrl = true;
                rest = r;
            } else if let Some(r) = rest.strip_prefix("alt-") {
                key.alt = true;
                rest = r;
            } else {
                break;
            }
        }
        key.code = match rest {
            "enter" => KeyName::Enter,
            "esc" => KeyName::Esc,
            "tab" => KeyName::Tab,
            "shift-tab" | "backtab" => KeyName::BackTab,
            "backspace" => KeyName::Backspace,
            "up" => KeyName::Up,
            "down" => KeyName::Down,
            "left" => KeyName::Left,
            "right" => KeyName::Right,
            "pageup" => KeyName::PageUp,
            "pagedown" => KeyName::PageDown,
            "home" => KeyName::Home,
            "end" => KeyName::End,
            "space" => KeyName::Space,
            f if f.len() >= 2 && f.starts_with('f') && f[1..].chars().all(|c| c.is_ascii_digit()) => {
                KeyName::F(f[1..].parse().ok().filter(|n| (1..=12).contains(n))?)
            }
            // A terminal sends ctrl with a capital letter as ctrl with the small one.
            c if c.chars().count() == 1 && key.ctrl => KeyName::Char(c.chars().next()?.to_ascii_lowercase()),
            c if c.chars().count() == 1 => KeyName::Char(c.chars().next()?),
            _ => return None,
        };
        Some(key)
    }

    pub fn from_event(e: &KeyEvent) -> Option<Key> {
        let code = match e.code {
            KeyCode::Char(' ') => KeyName::Space,
            KeyCode::Char(c) => KeyName::Char(c),
            KeyCode::F(n) => KeyName::F(n),
            KeyCode::Enter => KeyName::Enter,
            KeyCode::Esc => KeyName::Esc,
            KeyCode::Tab => KeyName::Tab,
            KeyCode::BackTab => KeyName::BackTab,
            KeyCode::Backspace => KeyName::Backspace,
            KeyCode::Up => KeyName::Up,
            KeyCode::Down => KeyName::Down,
            KeyCode::Left => KeyName::Left,
            KeyCode::Right => KeyName::Right,
            KeyCode::PageUp => KeyName::PageUp,
            KeyCode::PageDown => KeyName::PageDown,
            KeyCode::Home => KeyName::Home,
            KeyCode::End => KeyName::End,
            _ => return None,
        };
        Some(Key {
            code,
            ctrl: e.modifiers.contains(KeyModifiers::CONTROL),
            alt: e.modifiers.contains(KeyModifiers::ALT),
        })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            write!(f, "ctrl-")?;
        }
        if self.alt {
            write!(f, "alt-")?;
        }
        match self.code {
            KeyName::Char(c) => write!(f, "{c}"),
            KeyName::F(n) => write!(f, "f{n}"),
            KeyName::Enter => write!(f, "enter"),
            KeyName::Esc => write!(f, "esc"),
            KeyName::Tab => write!(f, "tab"),
            KeyName::BackTab => write!(f, "shift-tab"),
            KeyName::Backspace => write!(f, "backspace"),
            KeyName::Up => write!(f, "↑"),
            KeyName::Down => write!(f, "↓"),
            KeyName::Left => write!(f, "←"),
            KeyName::Right => write!(f, "→"),
            KeyName::PageUp => write!(f, "pageup"),
            KeyName::PageDown => write!(f, "pagedown"),
            KeyName::Home => write!(f, "home"),
            KeyName::End => write!(f, "end"),
            KeyName::Space => write!(f, "space"),
        }
    }
}

const DEFAULTS: &[(Mode, &str, Command)] = &[
    (Mode::Global, "ctrl-c", Command::Quit),
    (Mode::Global, "q", Command::Quit),
    (Mode::Global, "?", Command::Help),
    (Mode::Global, "f1", Command::Help),
    (Mode::Global, "ctrl-t", Command::Theme),
    (Mode::Global, "f2", Command::GoSetup),
    (Mode::Global, "f3", Command::GoLive),
    (Mode::Global, "f4", Command::GoInspector),
    (Mode::Global, "f5", Command::GoCompare),
    (Mode::Global, "f6", Command::GoSessions),
    (Mode::Global, "f7", Command::GoChat),
    (Mode::Global, "f8", Command::GoObservers),
    (Mode::Global, "f9", Command::GoAnnotate),
    (Mode::Global, "1", Command::GoSetup),
    (Mode::Global, "2", Command::GoLive),
    (Mode::Global, "3", Command::GoInspector),
    (Mode::Global, "4", Command::GoCompare),
    (Mode::Global, "5", Command::GoSessions),
    (Mode::Global, "6", Command::GoChat),
    (Mode::Global, "7", Command::GoObservers),
    (Mode::Global, "8", Command::GoAnnotate),
    (Mode::Global, "9", Command::GoRolebench),
    (Mode::Global, "f10", Command::GoRolebench),
    (Mode::Global, "0", Command::GoPersona),
    (Mode::Global, "f11", Command::GoPersona),
    (Mode::Global, "up", Command::Up),
    (Mode::Global, "down", Command::Down),
    (Mode::Global, "k", Command::Up),
    (Mode::Global, "j", Command::Down),
    (Mode::Global, "pageup", Command::PageUp),
    (Mode::Global, "pagedown", Command::PageDown),
    (Mode::Global, "home", Command::Top),
    (Mode::Global, "end", Command::Bottom),
    (Mode::Global, "tab", Command::NextPane),
    (Mode::Global, "shift-tab", Command::PrevPane),
    (Mode::Global, "enter", Command::Select),
    (Mode::Global, "esc", Command::Back),
    (Mode::Global, "n", Command::DemoNext),
    (Mode::Welcome, "f", Command::FetchModel),
    (Mode::Welcome, "s", Command::GoSetup),
    (Mode::Welcome, "r", Command::GoSessions),
    (Mode::Setup, "space", Command::Toggle),
    (Mode::Setup, "ctrl-r", Command::Start),
    (Mode::Setup, "ctrl-k", Command::CheckProviders),
    (Mode::Setup, "left", Command::PrevMethod),
    (Mode::Setup, "right", Command::NextMethod),
    (Mode::Live, "p", Command::Pause),
    (Mode::Live, "x", Command::Cancel),
    (Mode::Live, "f", Command::Follow),
    (Mode::Live, "ctrl-u", Command::ScrollUp),
    (Mode::Live, "ctrl-d", Command::ScrollDown),
    (Mode::Live, "s", Command::Speed),
    (Mode::Inspector, "space", Command::Toggle),
    (Mode::Inspector, "m", Command::NextMethod),
    (Mode::Inspector, "M", Command::PrevMethod),
    (Mode::Inspector, "right", Command::NextUnit),
    (Mode::Inspector, "left", Command::PrevUnit),
    (Mode::Inspector, "c", Command::Reask),
    (Mode::Inspector, "ctrl-u", Command::ScrollUp),
    (Mode::Inspector, "ctrl-d", Command::ScrollDown),
    (Mode::Compare, "m", Command::NextMethod),
    (Mode::Compare, "M", Command::PrevMethod),
    (Mode::Compare, "a", Command::AllMethods),
    (Mode::Compare, "right", Command::NextUnit),
    (Mode::Compare, "left", Command::PrevUnit),
    (Mode::Compare, "o", Command::Sort),
    (Mode::Compare, "]", Command::NextPage),
    (Mode::Compare, "[", Command::PrevPage),
    (Mode::Compare, "J", Command::Judges),
    (Mode::Chat, "ctrl-p", Command::Prompt),
    (Mode::Chat, "ctrl-n", Command::NextUnit),
    (Mode::Chat, "ctrl-b", Command::PrevUnit),
    (Mode::Chat, "ctrl-u", Command::ScrollUp),
    (Mode::Chat, "ctrl-d", Command::ScrollDown),
    (Mode::Chat, "ctrl-l", Command::Clear),
    (Mode::Chat, "ctrl-o", Command::Find),
    (Mode::Chat, "ctrl-x", Command::Cancel),
    (Mode::Annotate, "right", Command::NextUnit),
    (Mode::Annotate, "left", Command::PrevUnit),
    (Mode::Annotate, "v", Command::Reveal),
    (Mode::Annotate, "s", Command::Sample),
    (Mode::Annotate, "n", Command::Note),
    (Mode::Annotate, "u", Command::Skip),
    (Mode::Annotate, "ctrl-u", Command::ScrollUp),
    (Mode::Annotate, "ctrl-d", Command::ScrollDown),
    (Mode::Observers, "right", Command::NextUnit),
    (Mode::Observers, "left", Command::PrevUnit),
    (Mode::Observers, "s", Command::StartSynthetic),
    (Mode::Observers, "c", Command::StartCharacter),
    (Mode::Observers, "ctrl-u", Command::ScrollUp),
    (Mode::Observers, "ctrl-d", Command::ScrollDown),
    (Mode::Persona, "d", Command::Duplicate),
    (Mode::Persona, "a", Command::NewCharacter),
    (Mode::Persona, "ctrl-r", Command::Start),
    (Mode::Persona, "right", Command::NextMethod),
    (Mode::Persona, "left", Command::PrevMethod),
    (Mode::Persona, "b", Command::BeforeAfter),
    (Mode::Rolebench, "space", Command::Toggle),
    (Mode::Rolebench, "l", Command::Limit),
    (Mode::Rolebench, "ctrl-r", Command::Start),
    (Mode::Rolebench, "ctrl-u", Command::ScrollUp),
    (Mode::Rolebench, "ctrl-d", Command::ScrollDown),
    (Mode::Sessions, "r", Command::Replay),
    (Mode::Sessions, "s", Command::Speed),
    (Mode::Sessions, "e", Command::Export),
    (Mode::Sessions, "space", Command::Mark),
    (Mode::Sessions, "u", Command::Resume),
    (Mode::Sessions, "a", Command::Reassess),
    (Mode::Inspector, "a", Command::Reassess),
    (Mode::Reassess, "space", Command::Toggle),
    (Mode::Reassess, "right", Command::NextUnit),
    (Mode::Reassess, "left", Command::PrevUnit),
];

#[derive(Debug, Clone)]
pub struct Keymap {
    map: BTreeMap<(Mode, Key), Command>,
}

impl Default for Keymap {
    fn default() -> Self {
        let map = DEFAULTS
            .iter()
            .map(|(mode, spec, cmd)| ((*mode, Key::parse(spec).expect("default keys parse")), *cmd))
            .collect();
        Keymap { map }
    }
}

fn ctrl_c() -> Key {
    Key::parse("ctrl-c").expect("ctrl-c parses")
}

impl Keymap {
    /// The defaults with the config's bindings applied; bad entries are returned as located errors.
    pub fn with_config(bindings: &[KeyBinding]) -> (Keymap, Vec<String>) {
        let mut keymap = Keymap::default();
        let defaults = Keymap::default();
        let mut errors = Vec::new();
        for b in bindings {
            let at = format!("{}:{}:{}", b.at.file, b.at.line, b.at.column);
            let Some(mode) = Mode::ALL.iter().copied().find(|m| m.name() == b.screen) else {
                let at = format!("{}:{}:{}", b.screen_at.file, b.screen_at.line, b.screen_at.column);
                let screens: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
                errors.push(format!(
                    "{at}: unknown screen \"{}\" in [tui.keys] (the screens: {})",
                    b.screen.escape_debug(),
                    screens.join(", ")
                ));
                continue;
            };
            let Some(key) = Key::parse(&b.key) else {
                errors.push(format!(
                    "{at}: cannot read the key \"{}\" (e.g. \"ctrl-j\", \"f2\", \"x\")",
                    b.key.escape_debug()
                ));
                continue;
            };
            let Some(cmd) = Command::parse(&b.action) else {
                // The names to bind are said nowhere else (the help shows what each does).
                let mut names: Vec<&str> = Command::ALL
                    .iter()
                    .filter(|c| defaults.map.iter().any(|((m, _), d)| *m == mode && d == *c) || mode.uses(**c))
                    .map(|c| c.name())
                    .collect();
                names.dedup();
                errors.push(format!(
                    "{at}: unknown action \"{}\" (the {} screen's: {})",
                    b.action.escape_debug(),
                    mode.name(),
                    names.join(", ")
                ));
                continue;
            };
            // The way out that every screen and the key bar promise, whatever else is bound.
            if key == ctrl_c() && cmd != Command::Quit {
                errors.push(format!(
                    "{at}: ctrl-c always quits (the key bar says so on every screen): bind \"{}\" to another key",
                    b.action
                ));
                continue;
            }
            if mode.may_type(key) {
                errors.push(format!(
                    "{at}: \"{}\" is typed as text on the {} screen: bind it with ctrl, or an f-key",
                    b.key,
                    mode.name()
                ));
                continue;
            }
            // An action of its own screen (its default keys say which), or a global one it uses.
            let its_own = defaults.map.iter().any(|((m, _), c)| *m == mode && *c == cmd);
            if mode != Mode::Global && !its_own && !mode.uses(cmd) {
                errors.push(format!(
                    "{at}: \"{}\" does nothing on the {} screen",
                    b.action,
                    mode.name()
                ));
                continue;
            }
            keymap.map.insert((mode, key), cmd);
        }
        (keymap, errors)
    }

    /// The command of `key` on `mode`'s screen (its own bindings first, then the global ones).
    pub fn command(&self, mode: Mode, key: Key) -> Option<Command> {
        self.map
            .get(&(mode, key))
            .or_else(|| self.map.get(&(Mode::Global, key)))
            .copied()
    }

    /// (keys, command) of a screen for the help overlay: its own bindings, then the global ones it
    /// does not shadow.
    pub fn bindings(&self, mode: Mode) -> Vec<(String, Command)> {
        let mut by_cmd: BTreeMap<Command, Vec<String>> = BTreeMap::new();
        for ((m, key), cmd) in &self.map {
            let shadowed = *m == Mode::Global && self.map.contains_key(&(mode, *key));
            let global_here = *m == Mode::Global && mode.uses(*cmd) && !mode.types(*key);
            if (*m == mode || global_here) && !shadowed {
                by_cmd.entry(*cmd).or_default().push(key.to_string());
            }
        }
        by_cmd.into_iter().map(|(cmd, keys)| (keys.join(" "), cmd)).collect()
    }

    /// The first key bound to `cmd` on `mode`'s screen, for status bars.
    pub fn key_for(&self, mode: Mode, cmd: Command) -> String {
        self.bindings(mode)
            .into_iter()
            .find(|(_, c)| *c == cmd)
            .map(|(k, _)| k.split(' ').next().unwrap_or_default().to_string())
            .unwrap_or_else(|| "–".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::diagnostic::Source;

    #[test]
    fn keys_parse_and_print() {
        for spec in ["q", "ctrl-c", "f2", "shift-tab", "space", "enter", "alt-x", "?", "["] {
            let key = Key::parse(spec).unwrap();
            assert_eq!(Key::parse(&key.to_string().replace('↑', "up")), Some(key), "{spec}");
        }
        assert_eq!(Key::parse("f13"), None);
        assert_eq!(Key::parse("hyper-q"), None);
    }

    /// A `[tui.keys]` entry as the config gives it.
    fn binding(screen: &str, key: &str, action: &str) -> KeyBinding {
        let at = Source::new("config.toml", "x").whole("");
        KeyBinding {
            screen: screen.into(),
            screen_at: at.clone(),
            key: key.into(),
            action: action.into(),
            at,
        }
    }

    #[test]
    fn ctrl_c_quits_whatever_the_config_binds() {
        let bind = binding;
        let (keymap, errors) = Keymap::with_config(&[
            bind("global", "ctrl-c", "help"),
            bind("live", "ctrl-c", "pause"),
            bind("global", "q", "help"),
            // As a terminal sends it: ctrl with the small letter.
            bind("setup", "ctrl-C", "start"),
        ]);
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors.iter().all(|e| e.contains("ctrl-c always quits")), "{errors:?}");
        for mode in Mode::ALL {
            assert_eq!(keymap.command(mode, ctrl_c()), Some(Command::Quit), "{mode:?}");
        }
        assert_eq!(Key::parse("ctrl-J"), Key::parse("ctrl-j"));
        assert_ne!(Key::parse("J"), Key::parse("j"), "a capital alone is its own key");
    }

    #[test]
    fn screen_bindings_shadow_global_ones_and_config_rebinds() {
        let keymap = Keymap::default();
        let p = Key::parse("p").unwrap();
        assert_eq!(keymap.command(Mode::Live, p), Some(Command::Pause));
        assert_eq!(keymap.command(Mode::Setup, p), None);
        assert_eq!(
            keymap.command(Mode::Live, Key::parse("q").unwrap()),
            Some(Command::Quit)
        );
        let bind = binding;
        let (keymap, errors) = Keymap::with_config(&[
            bind("live", "ctrl-p", "pause"),
            bind("live", "ctrl-q", "fly"),
            bind("nowhere", "a", "quit"),
            // A key typed as text there, and an action of another screen: refused, never listed.
            bind("chat", "x", "clear"),
            bind("chat", "alt-l", "clear"),
            bind("setup", "r", "start"),
            bind("chat", "ctrl-j", "pause"),
            bind("chat", "ctrl-k", "clear"),
        ]);
        assert_eq!(
            keymap.command(Mode::Chat, Key::parse("ctrl-k").unwrap()),
            Some(Command::Clear)
        );
        assert_eq!(keymap.command(Mode::Chat, Key::parse("ctrl-j").unwrap()), None);
        assert!(
            errors[2].contains("\"x\" is typed as text on the chat screen")
                && errors[3].contains("\"alt-l\" is typed as text on the chat screen")
                && errors[4].contains("\"r\" is typed as text on the setup screen")
                && errors[5].contains("\"pause\" does nothing on the chat screen"),
            "{errors:?}"
        );
        assert_eq!(errors.len(), 6, "{errors:?}");
        let errors = &errors[..2];
        assert_eq!(
            keymap.command(Mode::Live, Key::parse("ctrl-p").unwrap()),
            Some(Command::Pause)
        );
        assert!(
            errors[0].starts_with("config.toml:1:1: unknown action \"fly\""),
            "{errors:?}"
        );
        // The names that could have been meant are listed (they are written nowhere else).
        assert!(
            errors[0].contains("(the live screen's: ") && errors[0].contains("pause") && errors[0].contains("quit"),
            "{errors:?}"
        );
        // An unknown screen is named where its name is written.
        let text = "cache = \"off\"\n[tui.keys.livee]\n\"ctrl-p\" = \"pause\"\n";
        let config = crate::config::Config::parse(Source::new("c.toml", text), true, &|_| None).unwrap();
        let (_, errors) = Keymap::with_config(&config.tui.keys);
        assert!(
            errors[0].starts_with("c.toml:2:11: unknown screen \"livee\" in [tui.keys] (the screens: global, "),
            "{errors:?}"
        );
        let help = keymap.bindings(Mode::Live);
        assert!(
            help.iter()
                .any(|(k, c)| *c == Command::Pause && k.contains("ctrl-p") && k.contains('p'))
        );
    }
}
