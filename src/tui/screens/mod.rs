//! The screens, one module each. A screen owns its state, turns commands into [`Request`]s, and draws
//! itself from its state and the [`Ctx`] it shares with the others, returning what it drew where
//! ([`Hits`]). What concerns more than one screen (switching, the flash message, a run starting) goes
//! back to `App` as a request.

pub mod annotate;
pub mod chat;
pub mod compare;
pub mod inspect;
pub mod judges;
pub mod live;
pub mod observers;
pub mod persona;
pub mod reassess;
pub mod rolebench;
pub mod sessions;
pub mod setup;
pub mod welcome;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::Rect;

use super::keys::{Command, Keymap, Mode};
use super::run_view::{ItemKey, RunView};
use super::theme::Theme;
use super::vocab::Replay;
use super::vocab::{Demo, Effect, ProviderStatus, Screen};
use crate::catalog::Catalog;
use crate::method::Method;
use crate::rpa::memories::Memories;
use sessions::SessionEntry;
use setup::Setup;

/// What the screens share and none of them owns, as the app holds it at the moment.
pub struct Ctx<'a> {
    pub catalog: &'a Catalog,
    /// The run shown: live, replayed or opened.
    pub run: &'a RunView,
    pub theme: &'a Theme,
    pub keymap: &'a Keymap,
    pub mode: Mode,
    /// Milliseconds since the app started.
    pub now_ms: u64,
    pub providers: &'a [ProviderStatus],
    /// Prices per million tokens (in, out) of the run's providers, for the cost gauge.
    pub prices: &'a [(String, f64, f64)],
    /// Memories of the shown run's characters, to rebuild their prompts in the inspector.
    pub memories: &'a BTreeMap<String, Arc<Memories>>,
    /// Every run starts from the setup's choices (role-play provider, style, characters, seed).
    pub setup: &'a Setup,
    pub sessions: &'a [SessionEntry],
    /// Folder of the session shown (for its annotations).
    pub session_dir: Option<&'a Path>,
    /// The unit the inspector shows: the chat talks to its character unless told otherwise.
    pub inspected: usize,
    pub demo: Option<&'a Demo>,
}

impl Ctx<'_> {
    /// Methods of the shown run (or of the setup, before any run).
    pub fn methods(&self) -> Vec<Method> {
        match &self.run.session.plan {
            Some(p) => p.methods.clone(),
            None => self.setup.methods.iter().copied().collect(),
        }
    }

    /// What the shown run's plan names that the catalog no longer holds ("character wren-en"), as
    /// the screens that need it say instead of showing nothing.
    pub fn missing(&self) -> Option<String> {
        let plan = self.run.session.plan.as_ref()?;
        let character = plan.characters.iter().find(|c| self.catalog.character(c).is_none());
        let scale = plan.scales.iter().find(|s| self.catalog.scale(s).is_none());
        character
            .map(|c| format!("character {}", crate::text::visible(c)))
            .or_else(|| scale.map(|s| format!("scale {}", crate::text::visible(s))))
    }

    /// The key bound to `cmd` on the current screen, as the key bar shows it.
    pub fn key(&self, cmd: Command) -> String {
        self.keymap.key_for(self.mode, cmd)
    }

    /// Whether the session shown is a bundled sample, which is never written to.
    pub fn shown_session_is_sample(&self) -> bool {
        self.session_dir
            .is_some_and(|dir| self.sessions.iter().any(|e| e.sample && e.path == dir))
    }
}

/// A screen as the frame sees it: it draws itself and names its keys.
pub trait Component {
    /// Draws into `area`; returns what it drew where, for the mouse.
    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits;
    /// The keys that matter on this screen now, for the key bar: (key, what it does).
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)>;
}

/// What a screen asks of the app beyond its own state; applied in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// For the driver.
    Effect(Effect),
    Show(Screen),
    Flash(String),
    /// A run, replay or resumed run starts; the live screen shows it (`follow`: at its newest item).
    Start {
        replay: Option<Replay>,
        follow: bool,
    },
    /// The run shown gives way to one about to start.
    ClearRun,
    /// The screen's view starts over for the run about to start (applied only if it starts).
    Fresh(Screen),
    /// The inspector, opened on one item.
    Inspect(ItemKey),
    /// An interview item asked again on the chat screen, next to the answer the session recorded.
    Reask {
        character: String,
        question: String,
        recorded: String,
    },
}

/// What starting an interview run asks of the app: Live shows it from its first item.
pub fn start_run(plan: crate::study::RunPlan, name: Option<String>) -> Vec<Request> {
    vec![
        Request::Show(Screen::Live),
        Request::Start {
            replay: None,
            follow: true,
        },
        Effect::StartRun { plan, name }.into(),
    ]
}

impl From<Effect> for Request {
    fn from(effect: Effect) -> Request {
        Request::Effect(effect)
    }
}

/// What a frame drew where: the mouse is tested against the last frame's hits.
#[derive(Debug, Clone, Default)]
pub struct Hits {
    pub tabs: Vec<(Rect, Screen)>,
    /// (area of a list, first visible row, which list)
    pub lists: Vec<(Rect, usize, ListId)>,
    /// How far the bottom-anchored text drawn (a transcript, a dialogue) can scroll up; `u16::MAX`
    /// when only its tail was laid out; `None` when no such text was drawn.
    pub tail_top: Option<u16>,
    /// How far the top-anchored text drawn (the inspector's drill or analysis) can scroll down and
    /// still fill its pane; `None` when no such text was drawn.
    pub scroll_end: Option<u16>,
    /// The rows a long status message covers above the status line (a click there only clears it).
    pub covered: Option<Rect>,
    /// The terminal was too small to draw the screen: only its request to enlarge it was drawn.
    pub too_small: bool,
}

impl Hits {
    pub fn list(area: Rect, first: usize, list: ListId) -> Hits {
        Hits {
            lists: vec![(area, first, list)],
            ..Hits::default()
        }
    }
}

/// A frame drawn without its hits (a benchmark's) leaves the mouse nothing to hit.
impl From<()> for Hits {
    fn from((): ()) -> Hits {
        Hits::default()
    }
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
    PersonaCharacters,
}

/// Moves a list cursor for the up/down/page/top/bottom commands; false for any other command.
pub fn move_cursor(cmd: Command, cursor: &mut usize, len: usize) -> bool {
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

/// How far a bottom-anchored text (a transcript, a dialogue) is scrolled up, and how far it can go: the
/// limit is learnt from the last frame that drew the text, so scrolling stops at the first line instead
/// of running on into blank space.
#[derive(Debug, Clone)]
pub struct TailScroll {
    pub up: u16,
    limit: u16,
}

impl Default for TailScroll {
    fn default() -> Self {
        TailScroll { up: 0, limit: u16::MAX }
    }
}

impl TailScroll {
    pub fn scroll_up(&mut self, lines: u16) {
        self.up = self.up.saturating_add(lines).min(self.limit);
    }

    pub fn scroll_down(&mut self, lines: u16) {
        self.up = self.up.saturating_sub(lines);
    }

    pub fn reset(&mut self) {
        self.up = 0;
    }

    /// The limit a frame reported ([`Hits::tail_top`]).
    pub fn set_limit(&mut self, top: u16) {
        self.limit = top;
    }

    /// The lines `[start, end)` of `len` to draw in `height` rows, and the limit to report.
    /// `complete`: `len` is the whole text (not just enough of its tail), so its top is known.
    pub fn window(&self, len: usize, height: usize, complete: bool) -> (usize, usize, u16) {
        let top = len.saturating_sub(height);
        // Only the tail was laid out: the top is not known, so nothing limits the next scroll yet.
        let limit = if complete {
            u16::try_from(top).unwrap_or(u16::MAX)
        } else {
            u16::MAX
        };
        let end = len - (self.up as usize).min(top);
        (end.saturating_sub(height), end, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::TailScroll;

    #[test]
    fn a_tail_scroll_stops_at_the_first_line_and_comes_straight_back() {
        let mut s = TailScroll::default();
        // 30 lines in 10 rows: the bottom ten first.
        let (start, end, top) = s.window(30, 10, true);
        assert_eq!((start, end), (20, 30));
        s.set_limit(top);
        for _ in 0..10 {
            s.scroll_up(5);
        }
        assert_eq!(s.up, 20, "never past the top");
        assert_eq!(s.window(30, 10, true), (0, 10, 20), "a full page at the top");
        s.scroll_down(5);
        assert_eq!(s.window(30, 10, true), (5, 15, 20), "one key brings it back down");
        // Text shorter than the pane does not scroll.
        let mut short = TailScroll::default();
        let (start, end, top) = short.window(4, 10, true);
        assert_eq!((start, end), (0, 4));
        short.set_limit(top);
        short.scroll_up(5);
        assert_eq!(short.up, 0);
        // Only a tail laid out: the limit is unknown, scrolling goes on.
        let mut tail = TailScroll::default();
        let (_, _, top) = tail.window(15, 10, false);
        tail.set_limit(top);
        tail.scroll_up(5);
        tail.scroll_up(5);
        assert_eq!(tail.up, 10);
    }
}
