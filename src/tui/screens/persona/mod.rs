//! The persona screen: write a character of one's own or edit an imported one — name, language,
//! experimenter, the role-play prompt (a multi-line editor), catchphrases — and state the personality
//! meant (targets per dimension: H, L, a number or none), then probe it (ctrl-r: a small run on the
//! setup's scales, methods and providers) and see what the probe measured against the one before.
//! Bundled characters are read-only: `d` makes an editable copy. It owns the draft being edited.

mod before_after;
mod draft;

use std::collections::BTreeMap;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::{Component, Ctx, Hits, ListId, Request, move_cursor};
use crate::catalog::{Catalog, Origin};
use crate::domain::character::{self, Character, Label, LabelType, Labels};
use crate::domain::scale::{Language, Scale};
use crate::tui::keys::{Command, Key, KeyName};
use crate::tui::vocab::Effect;
use crate::tui::widgets::{ListView, block, fit, pad};

pub use before_after::Probed;
pub use draft::{Draft, Field};
use draft::{FIELDS, add_alias};

#[derive(Default)]
pub struct Persona {
    pub cursor: usize,
    pub draft: Option<Draft>,
    /// The scale whose targets are shown and edited (index into the catalog's scales; BFI at first).
    pub scale: Option<usize>,
    /// The character a probe started from this screen measures.
    pub probe: Option<String>,
    /// The last probe's result, and whether it is shown (it opens when it arrives; esc hides it,
    /// `b` shows it again).
    pub probed: Option<Probed>,
    pub showing: bool,
    /// The characters' versions: which sessions measured which, and what each is now.
    pub versions: Versions,
    pub view: ListView,
}

/// Each character's versions the data dir's sessions recorded, with those sessions
/// ([`crate::session::store::CharacterVersions`]), and the version each character has now (its
/// prompt, memories, experimenter and language as a run would hash them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Versions {
    pub index: crate::session::store::CharacterVersions,
    pub current: BTreeMap<String, String>,
    /// Each character's greeting, which opens a chat with it (see [`crate::rpa::card::opening`]).
    pub greetings: BTreeMap<String, String>,
}

/// Characters as the list shows them: the user's own first (they are the ones edited), then the
/// bundled ones.
pub fn listed(catalog: &Catalog) -> Vec<&crate::catalog::Entry<Character>> {
    let mut out: Vec<_> = catalog.characters.iter().collect();
    out.sort_by_key(|e| (e.origin == Origin::Bundled, e.value.id.clone()));
    out
}

impl Persona {
    fn scale<'a>(&self, catalog: &'a Catalog) -> Option<&'a Scale> {
        let i = self
            .scale
            .or_else(|| catalog.scales.iter().position(|e| e.value.id == "BFI"))
            .unwrap_or(0);
        catalog.scales.get(i).map(|e| &e.value)
    }

    fn step_scale(&mut self, catalog: &Catalog, forward: bool) {
        let n = catalog.scales.len().max(1);
        let now = self
            .scale
            .or_else(|| catalog.scales.iter().position(|e| e.value.id == "BFI"))
            .unwrap_or(0);
        self.scale = Some(if forward { (now + 1) % n } else { (now + n - 1) % n });
        if let Some(d) = self.draft.as_mut() {
            d.target_cursor = 0;
            d.typed.clear();
        }
    }

    /// The character under the cursor.
    pub fn selected<'a>(&self, catalog: &'a Catalog) -> Option<&'a crate::catalog::Entry<Character>> {
        listed(catalog).get(self.cursor).copied()
    }

    /// Starts editing the selected character (a user one), a copy of it (`copy`), or a new one.
    fn edit(&mut self, catalog: &Catalog, how: Edit) -> Vec<Request> {
        let selected = self.selected(catalog);
        let draft = match (how, selected) {
            (Edit::New, _) => {
                let mut base = blank();
                base.id = free_id(catalog, "my-character-en");
                Draft::of(base, true)
            }
            (Edit::Copy, Some(e)) => {
                let mut base = e.value.clone();
                base.id = free_id(catalog, &format!("{}-copy", e.value.id));
                base.name = format!("{} (copy)", e.value.name);
                // Its answers still speak of the original by name: what judge prompts mask stays.
                add_alias(&mut base.aliases, &e.value.name);
                // A copy is a character of its own (it keeps the labels to compare an edit with).
                base.reference_id = None;
                let mut draft = Draft::of(base, true);
                draft.copy_of = Some(e.value.id.clone());
                draft
            }
            (Edit::Selected, Some(e)) if e.origin == Origin::Bundled => {
                return vec![Request::Flash(format!(
                    "{} is bundled and read-only: d duplicates it into a copy you can edit",
                    e.value.id
                ))];
            }
            (Edit::Selected, Some(e)) => Draft::of(e.value.clone(), false),
            (_, None) => return Vec::new(),
        };
        self.draft = Some(draft);
        vec![Request::Flash(
            "editing: tab moves between fields, ctrl-s saves, esc leaves without saving".into(),
        )]
    }

    /// Keys while a draft is open: typing goes to the field in focus; tab/shift-tab move between
    /// fields, ctrl-s saves, esc leaves. `None`: not taken (no draft, or a key left to the keymap).
    pub fn key(&mut self, event: KeyEvent, key: Key, ctx: &Ctx) -> Option<Vec<Request>> {
        let catalog = ctx.catalog;
        let scale = self.scale(catalog).cloned();
        let draft = self.draft.as_mut()?;
        let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
        // Keys that come before the save has answered would be lost with the draft it closes (or,
        // ctrl-s again, saved a second time): only quitting and the other screens' keys go on.
        if draft.saving && !matches!(key.code, KeyName::F(_)) && !(ctrl && key.code == KeyName::Char('c')) {
            return Some(vec![Request::Flash("saving: wait for it".into())]);
        }
        // A key that answers "esc again leaves" with anything but esc takes the question back and does
        // nothing else (ctrl-s, which the question offers, still saves).
        let saving = ctrl && key.code == KeyName::Char('s');
        if key.code != KeyName::Esc
            && std::mem::take(&mut draft.leaving)
            && !saving
            && !matches!(key.code, KeyName::F(_))
        {
            return Some(vec![Request::Flash(
                "still editing (that key only took the question back)".into(),
            )]);
        }
        match key.code {
            KeyName::F(_) => return None,
            KeyName::Esc if draft.unsaved() && !draft.leaving => {
                draft.leaving = true;
                return Some(vec![Request::Flash(
                    "unsaved changes: esc again leaves without saving, ctrl-s saves".into(),
                )]);
            }
            KeyName::Esc => {
                let said = if draft.unsaved() { "left without saving" } else { "left" };
                self.draft = None;
                return Some(vec![Request::Flash(said.into())]);
            }
            KeyName::Tab | KeyName::BackTab => {
                let i = FIELDS.iter().position(|f| *f == draft.field).unwrap_or(0);
                let n = FIELDS.len();
                let next = if key.code == KeyName::Tab {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                draft.field = FIELDS[next];
                if draft.field == Field::Id && !draft.new {
                    // An existing file keeps its id.
                    draft.field = if key.code == KeyName::Tab {
                        Field::Name
                    } else {
                        Field::Targets
                    };
                }
                return Some(Vec::new());
            }
            KeyName::Char('s') if ctrl => return Some(save(draft, catalog)),
            KeyName::Char('r') if ctrl => return Some(vec![Request::Flash("save first (ctrl-s), then probe".into())]),
            // Quit is quit wherever one types (asked about first, the edits being unsaved).
            KeyName::Char('c') if ctrl => return None,
            _ if ctrl && draft.field != Field::Prompt => return None,
            _ => {}
        }
        match draft.field {
            Field::Prompt => {
                if !by_grapheme(&mut draft.prompt, key) {
                    draft.prompt.input(event);
                }
            }
            Field::Language => {
                if matches!(key.code, KeyName::Left | KeyName::Right | KeyName::Space) {
                    draft.language = match draft.language {
                        Language::En => Language::Zh,
                        Language::Zh => Language::En,
                    };
                }
            }
            Field::Targets => {
                let Some(scale) = scale else { return Some(Vec::new()) };
                match target_key(draft, &scale, key, self_step(key)) {
                    Ok(Some(forward)) => self.step_scale(catalog, forward),
                    Ok(None) => {}
                    Err(refused) => return Some(vec![Request::Flash(refused)]),
                }
            }
            _ => {
                if let Some(line) = draft.line_mut() {
                    match key.code {
                        KeyName::Char(c) => line.push(c),
                        KeyName::Space => line.push(' '),
                        // What looks like one character goes as one (an emoji with its skin tone, a
                        // letter with its accents), never leaving a part of it behind.
                        KeyName::Backspace => {
                            let keep = line.grapheme_indices(true).next_back().map_or(0, |(at, _)| at);
                            line.truncate(keep);
                        }
                        _ => {}
                    }
                }
            }
        }
        Some(Vec::new())
    }

    /// Pasted text into the field being edited (newlines become spaces in a one-line field); false
    /// when no text field has the focus.
    pub fn paste(&mut self, text: &str) -> bool {
        let Some(draft) = self.draft.as_mut() else {
            return false;
        };
        if draft.field == Field::Prompt {
            draft.prompt.insert_str(text);
            return true;
        }
        match draft.line_mut() {
            Some(line) => {
                line.extend(text.chars().map(|c| if c == '\n' || c == '\t' { ' ' } else { c }));
                true
            }
            None => false,
        }
    }

    /// A probe's result arrived: it is shown at once.
    pub fn show(&mut self, probed: Probed) {
        self.probed = Some(probed);
        self.showing = true;
    }

    /// Whether the before/after view is what the right side shows.
    fn viewing(&self) -> bool {
        self.showing && self.draft.is_none() && self.probed.is_some()
    }

    pub fn command(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        let catalog = ctx.catalog;
        let len = catalog.characters.len();
        if cmd == Command::BeforeAfter {
            if self.probed.is_none() {
                return vec![Request::Flash("no probe yet: ctrl-r probes the character".into())];
            }
            self.showing = !self.showing;
            return Vec::new();
        }
        if self.viewing()
            && let Some(probed) = self.probed.as_mut()
            && matches!(
                cmd,
                Command::Up
                    | Command::Down
                    | Command::PageUp
                    | Command::PageDown
                    | Command::Top
                    | Command::Bottom
                    | Command::Select
                    | Command::Back
                    | Command::ScrollUp
                    | Command::ScrollDown
            )
        {
            if !probed.command(cmd) {
                self.showing = false;
            }
            return Vec::new();
        }
        if move_cursor(cmd, &mut self.cursor, len) {
            return Vec::new();
        }
        match cmd {
            Command::Select => self.edit(catalog, Edit::Selected),
            Command::Duplicate => self.edit(catalog, Edit::Copy),
            Command::NewCharacter => self.edit(catalog, Edit::New),
            Command::NextMethod => {
                self.step_scale(catalog, true);
                Vec::new()
            }
            Command::PrevMethod => {
                self.step_scale(catalog, false);
                Vec::new()
            }
            Command::Start => self.probe(ctx),
            _ => Vec::new(),
        }
    }

    /// A probe: the setup's plan narrowed to this character (on the targets' scale when the setup
    /// has no scale picked).
    fn probe(&mut self, ctx: &Ctx) -> Vec<Request> {
        let Some(entry) = self.selected(ctx.catalog) else {
            return Vec::new();
        };
        let id = entry.value.id.clone();
        let mut setup = ctx.setup.clone();
        setup.characters = [id.clone()].into();
        // The scale the targets pane shows, when the character has targets on it (or none at all);
        // else the first scale it has targets on.
        let targets = &entry.value.labels.target;
        let scale = (self.scale(ctx.catalog))
            .filter(|s| targets.is_empty() || targets.contains_key(&s.id))
            .map(|s| s.id.clone())
            .or_else(|| targets.keys().find(|id| ctx.catalog.scale(id).is_some()).cloned());
        if setup.scales.is_empty()
            && let Some(scale) = scale
        {
            setup.scales = [scale].into();
        }
        let plan = match setup.plan(ctx.catalog, ctx.providers) {
            Ok(plan) => plan,
            Err(e) => return vec![Request::Flash(format!("cannot probe: {e}"))],
        };
        // Named after what it measures, so the sessions list tells one probe from the next.
        let version = self.versions.current.get(&id).map_or("", |v| &v[..12.min(v.len())]);
        let name = format!("probe {} {version}", entry.value.name).trim_end().to_string();
        self.probe = Some(id);
        super::start_run(plan, Some(name))
    }
}

/// Which parts of a key move between scales (←/→) on the targets field.
fn self_step(key: Key) -> Option<bool> {
    match key.code {
        KeyName::Right => Some(true),
        KeyName::Left => Some(false),
        _ => None,
    }
}

/// A key on the targets field: ↑/↓ choose the dimension, h/l set H or L, a number typed then enter
/// sets a score, backspace/delete/x clear. Returns the scale step asked for (←/→), if any.
/// A key on the targets: `Ok(Some(forward))` steps to another scale, `Err` says why a typed target
/// was not taken.
fn target_key(draft: &mut Draft, scale: &Scale, key: Key, step: Option<bool>) -> Result<Option<bool>, String> {
    if step.is_some() {
        return Ok(step);
    }
    let n = scale.dimensions.len();
    let Some(dim) = scale.dimensions.get(draft.target_cursor.min(n.saturating_sub(1))) else {
        return Ok(None);
    };
    let dim = dim.name.clone();
    let set = |draft: &mut Draft, label: Option<Label>| {
        let entry = draft.targets.entry(scale.id.clone()).or_default();
        match label {
            Some(l) => {
                entry.insert(dim.clone(), l);
            }
            None => {
                entry.remove(&dim);
            }
        }
        if draft.targets.get(&scale.id).is_some_and(BTreeMap::is_empty) {
            draft.targets.remove(&scale.id);
        }
        draft.typed.clear();
    };
    match key.code {
        KeyName::Up => {
            draft.target_cursor = draft.target_cursor.saturating_sub(1);
            draft.typed.clear();
        }
        KeyName::Down => {
            draft.target_cursor = (draft.target_cursor + 1).min(n.saturating_sub(1));
            draft.typed.clear();
        }
        KeyName::Char(c) if c.eq_ignore_ascii_case(&'h') => set(
            draft,
            Some(Label {
                score: None,
                kind: LabelType::H,
            }),
        ),
        KeyName::Char(c) if c.eq_ignore_ascii_case(&'l') => set(
            draft,
            Some(Label {
                score: None,
                kind: LabelType::L,
            }),
        ),
        KeyName::Char(c) if c.is_ascii_digit() || c == '.' => draft.typed.push(c),
        KeyName::Enter if !draft.typed.is_empty() => match character::target(scale, &dim, &draft.typed) {
            Ok(label) => set(draft, Some(label)),
            Err(e) => {
                draft.typed.clear();
                return Err(e);
            }
        },
        KeyName::Backspace if !draft.typed.is_empty() => {
            draft.typed.pop();
        }
        KeyName::Backspace => set(draft, None),
        KeyName::Char(c) if c.eq_ignore_ascii_case(&'x') => set(draft, None),
        _ => {}
    }
    Ok(None)
}

fn save(draft: &mut Draft, catalog: &Catalog) -> Vec<Request> {
    let c = draft.character();
    if !crate::domain::is_id(&c.id) {
        return vec![Request::Flash(format!("id: {} (e.g. wren-en)", crate::domain::ID_RULE))];
    }
    if draft.new
        && let Some(e) = catalog.character_by_id(&c.id)
    {
        return vec![Request::Flash(format!(
            "{} exists already (as {}; ids are the same whatever their case): choose another id",
            c.id, e.value.id
        ))];
    }
    if c.name.is_empty() || c.experimenter.is_empty() || c.description.is_empty() {
        return vec![Request::Flash("name, experimenter and prompt must not be empty".into())];
    }
    // The draft stays as it is (new, if it was) until the save is done: a failed save leaves it
    // editable as before.
    draft.saving = true;
    vec![
        Effect::SaveCharacter {
            character: Box::new(c),
            was: (!draft.new).then(|| Box::new(draft.base.clone())),
            copy_of: draft.copy_of.clone(),
        }
        .into(),
    ]
}

#[derive(Clone, Copy)]
enum Edit {
    Selected,
    Copy,
    New,
}

fn blank() -> Character {
    Character {
        id: String::new(),
        reference_id: None,
        name: "My character".into(),
        aliases: Vec::new(),
        language: Language::En,
        experimenter: "User".into(),
        work: String::new(),
        description: String::new(),
        post_history: String::new(),
        catchphrases: Vec::new(),
        agents: BTreeMap::new(),
        labels: Labels::default(),
        card: None,
    }
}

/// `base`, or `base-2`, `base-3`, … whichever no character has.
fn free_id(catalog: &Catalog, base: &str) -> String {
    let taken = |id: &str| catalog.character_by_id(id).is_some();
    if !taken(base) {
        return base.to_string();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|id| !taken(id))
        .unwrap_or_default()
}

/// A target as the table shows it: "H", "L", a score, or "–".
fn target_text(label: Option<&Label>) -> String {
    match label {
        None => "–".into(),
        Some(Label { score: Some(s), kind }) => format!("{s:.2} ({kind:?})"),
        Some(Label { score: None, kind }) => format!("{kind:?}"),
    }
}

impl Component for Persona {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        if self.viewing() {
            let open = self.probed.as_ref().is_some_and(|p| p.open);
            return if open {
                vec![("↑/↓".into(), "scroll"), (ctx.key(Command::Back), "dimensions")]
            } else {
                vec![
                    ("↑/↓".into(), "dimension"),
                    (ctx.key(Command::Select), "answers"),
                    (ctx.key(Command::Back), "close"),
                    (ctx.key(Command::Start), "probe again"),
                ]
            };
        }
        if self.draft.is_some() {
            return vec![
                ("tab".into(), "next field"),
                ("ctrl-s".into(), "save"),
                ("esc".into(), "leave"),
            ];
        }
        vec![
            (ctx.key(Command::Select), "edit"),
            (ctx.key(Command::Duplicate), "duplicate"),
            (ctx.key(Command::NewCharacter), "new"),
            (ctx.key(Command::Start), "probe"),
            ("←/→".into(), "scale"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        // The before/after view has the focus and needs the width: it takes the whole screen.
        if self.viewing()
            && let Some(probed) = &self.probed
        {
            probed.render(frame, area, ctx);
            return Hits::default();
        }
        let theme = ctx.theme;
        let list_width = (area.width / 3).clamp(24, 40);
        let [list_area, right] = Layout::horizontal([Constraint::Length(list_width), Constraint::Min(20)]).areas(area);
        let entries = listed(ctx.catalog);
        let b = block(format!(" Characters ({}) ", entries.len()), self.draft.is_none(), theme);
        let inner = b.inner(list_area);
        frame.render_widget(b, list_area);
        let height = usize::from(inner.height);
        let first = self.view.first(entries.len(), self.cursor, height);
        let w = usize::from(inner.width);
        let lines: Vec<Line> = entries
            .iter()
            .enumerate()
            .skip(first)
            .take(height)
            .map(|(i, e)| {
                let mark = if e.origin == Origin::Bundled { "  " } else { "✎ " };
                let text = pad(&format!("{mark}{}", e.value.id), w);
                if i == self.cursor {
                    Line::styled(text, theme.selected())
                } else if e.origin == Origin::Bundled {
                    Line::styled(text, theme.dim())
                } else {
                    Line::raw(text)
                }
            })
            .collect();
        frame.render_widget(Paragraph::new(lines), inner);

        let scale = self.scale(ctx.catalog);
        match &self.draft {
            Some(draft) => render_draft(frame, right, draft, scale, ctx),
            None => {
                if let Some(e) = self.selected(ctx.catalog) {
                    render_character(frame, right, e, scale, &self.versions, ctx);
                }
            }
        }
        Hits::list(inner, first, ListId::PersonaCharacters)
    }
}

fn targets_lines<'a>(
    targets: &character::LabelSet,
    scale: Option<&Scale>,
    cursor: Option<(usize, &str)>,
    ctx: &Ctx,
) -> Vec<Line<'a>> {
    let theme = ctx.theme;
    let Some(scale) = scale else { return Vec::new() };
    let set = targets.get(&scale.id);
    let (min, max) = scale.dimension_range();
    let mut lines = vec![Line::styled(
        format!("targets on {} ({min}–{max}; ←/→ another scale)", scale.id),
        theme.title(),
    )];
    for (i, d) in scale.dimensions.iter().enumerate() {
        let label = set.and_then(|s| s.get(&d.name));
        let mut text = target_text(label);
        let selected = cursor.is_some_and(|(c, _)| c == i);
        if let Some((_, typed)) = cursor.filter(|_| selected).filter(|(_, t)| !t.is_empty()) {
            text = format!("{typed}▏");
        }
        let style = if selected {
            theme.selected()
        } else if label.is_some() {
            theme.fg(theme.label_target)
        } else {
            theme.dim()
        };
        lines.push(Line::from(vec![
            Span::raw("  "),
            Span::styled(format!("{} {}", pad(&fit(&d.name, 24), 24), text), style),
        ]));
    }
    lines
}

fn render_character(
    frame: &mut Frame,
    area: Rect,
    e: &crate::catalog::Entry<Character>,
    scale: Option<&Scale>,
    versions: &Versions,
    ctx: &Ctx,
) {
    let theme = ctx.theme;
    let c = &e.value;
    let b = block(format!(" {} ", c.name), false, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let origin = match &e.origin {
        Origin::Bundled => "bundled, read-only (d duplicates it)".to_string(),
        Origin::User { path, .. } => format!("yours: {}", path.display()),
    };
    let room = usize::from(inner.width).saturating_sub(13);
    let field = |name: &str, value: String| {
        Line::from(vec![
            Span::styled(format!("{name:<13}"), theme.dim()),
            Span::raw(fit(&value, room)),
        ])
    };
    let mut lines = vec![
        field("id", c.id.to_string()),
        field("file", origin),
        field("language", c.language.code().into()),
        field("experimenter", c.experimenter.to_string()),
    ];
    if !c.catchphrases.is_empty() {
        lines.push(field("catchphrases", c.catchphrases.join(" | ")));
    }
    lines.extend(version_lines(c, versions, room, ctx));
    lines.push(Line::raw(""));
    lines.extend(targets_lines(&c.labels.target, scale, None, ctx));
    lines.push(Line::raw(""));
    lines.push(Line::styled("prompt", theme.title()));
    // One line per line of the prompt: a Line shows a newline as nothing, gluing the lines together.
    lines.extend(c.description.lines().map(|l| Line::raw(l.to_string())));
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}

/// How many of a character's versions the details list (the newest).
const VERSIONS_SHOWN: usize = 4;

/// The character's version now, then the versions sessions measured, newest first, with those
/// sessions.
fn version_lines<'a>(c: &Character, versions: &Versions, room: usize, ctx: &Ctx) -> Vec<Line<'a>> {
    let theme = ctx.theme;
    let now = versions.current.get(&c.id);
    let recorded = versions.index.get(&c.id).map_or(&[][..], Vec::as_slice);
    let measured_now = now.is_some_and(|v| recorded.iter().any(|(r, _)| r == v));
    let head = match now {
        Some(v) if measured_now => format!("{} (measured)", &v[..12.min(v.len())]),
        Some(v) => format!("{} (not measured yet: ctrl-r probes it)", &v[..12.min(v.len())]),
        None => "(reading…)".into(),
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{:<13}", "version"), theme.dim()),
        Span::raw(fit(&head, room)),
    ])];
    for (version, sessions) in recorded.iter().rev().take(VERSIONS_SHOWN) {
        let style = if Some(version) == now {
            theme.fg(theme.measured)
        } else {
            theme.dim()
        };
        let mark = if Some(version) == now { "◀ now" } else { "     " };
        let list = sessions
            .iter()
            .rev()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!("{} {mark}  {list}", &version[..12.min(version.len())]);
        lines.push(Line::from(vec![
            Span::raw(" ".repeat(13)),
            Span::styled(fit(&text, room), style),
        ]));
    }
    if recorded.len() > VERSIONS_SHOWN {
        lines.push(Line::styled(
            format!(
                "{}… and {} older version(s)",
                " ".repeat(13),
                recorded.len() - VERSIONS_SHOWN
            ),
            theme.dim(),
        ));
    }
    lines
}

fn render_draft(frame: &mut Frame, area: Rect, draft: &Draft, scale: Option<&Scale>, ctx: &Ctx) {
    let theme = ctx.theme;
    let title = if draft.new {
        " New character (unsaved) "
    } else {
        " Editing "
    };
    let b = block(title, true, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let targets_height = scale.map_or(0, |s| s.dimensions.len().min(12) as u16 + 1);
    let [fields_area, prompt_area, targets_area] = Layout::vertical([
        Constraint::Length(5),
        Constraint::Min(4),
        Constraint::Length(targets_height),
    ])
    .areas(inner);
    let focus = |f: Field| draft.field == f;
    let room = usize::from(inner.width).saturating_sub(14);
    let field = |f: Field, name: &str, value: String| {
        let style = if focus(f) { theme.selected() } else { theme.base() };
        // The end of a long line is where one types: show that end.
        let value = value.to_string();
        // (In display columns: a CJK character takes two.)
        let shown = if focus(f) && value.width() > room {
            let mut tail: Vec<char> = Vec::new();
            let mut used = 0;
            for c in value.chars().rev() {
                let w = c.width().unwrap_or(0);
                if used + w > room.saturating_sub(1) {
                    break;
                }
                used += w;
                tail.push(c);
            }
            format!("…{}▏", tail.iter().rev().collect::<String>())
        } else if focus(f) {
            format!("{value}▏")
        } else {
            fit(&value, room + 1)
        };
        Line::from(vec![
            Span::styled(format!("{name:<13}"), theme.dim()),
            Span::styled(shown, style),
        ])
    };
    let id = if draft.new {
        draft.id.clone()
    } else {
        format!("{} (its file's name)", draft.id)
    };
    let lines = vec![
        field(Field::Id, "id", id),
        field(Field::Name, "name", draft.name.clone()),
        field(Field::Language, "language", format!("‹ {} ›", draft.language.code())),
        field(Field::Experimenter, "experimenter", draft.experimenter.clone()),
        field(Field::Catchphrases, "catchphrases", draft.catchphrases.clone()),
    ];
    frame.render_widget(Paragraph::new(lines), fields_area);
    if focus(Field::Prompt) {
        // The editor does not wrap: long lines scroll sideways while it has the focus.
        let mut prompt = draft.prompt.clone();
        prompt.set_block(
            ratatui::widgets::Block::bordered()
                .title(" prompt (enter: new line; long lines scroll sideways) ")
                .border_style(theme.fg(theme.border_focus)),
        );
        prompt.set_cursor_line_style(theme.base());
        frame.render_widget(&prompt, prompt_area);
    } else {
        let text = draft.prompt.lines().join("\n");
        frame.render_widget(
            Paragraph::new(text).wrap(Wrap { trim: false }).block(
                ratatui::widgets::Block::bordered()
                    .title(" prompt ")
                    .border_style(theme.fg(theme.border)),
            ),
            prompt_area,
        );
    }
    let cursor = focus(Field::Targets).then_some((draft.target_cursor, draft.typed.as_str()));
    let mut lines = targets_lines(&draft.targets, scale, cursor, ctx);
    if focus(Field::Targets)
        && let Some(first) = lines.first_mut()
    {
        // The hint whole, or its short form where the pane is narrow (the help has it all).
        let room = usize::from(targets_area.width).saturating_sub(first.width());
        let hint = ["  h/l: H/L · a number, enter · x: none", "  h/l · n⏎ · x"]
            .into_iter()
            .find(|h| unicode_width::UnicodeWidthStr::width(*h) <= room);
        if let Some(hint) = hint {
            first
                .spans
                .push(Span::styled(hint, theme.dim().add_modifier(Modifier::ITALIC)));
        }
    }
    // More dimensions than rows: a window that holds the one under the cursor, the header kept.
    let rows = usize::from(targets_area.height).saturating_sub(1);
    let dims = lines.len().saturating_sub(1);
    if rows > 0 && dims > rows {
        let first = draft.target_cursor.saturating_sub(rows - 1).min(dims - rows);
        let mut window: Vec<Line> = lines.drain(..1).collect();
        window.extend(lines.drain(first..first + rows));
        if let Some(header) = window.first_mut() {
            header.spans.insert(
                1,
                Span::styled(format!(" {}–{} of {dims}", first + 1, first + rows), theme.dim()),
            );
        }
        lines = window;
    }
    frame.render_widget(Paragraph::new(lines), targets_area);
}

/// Backspace, left and right in the prompt by what looks like one character (a grapheme: an
/// emoji with its modifiers and joiners, a letter with its accents), where it is more than one code
/// point; false when the key is the text area's own to handle.
fn by_grapheme(prompt: &mut tui_textarea::TextArea<'static>, key: Key) -> bool {
    use tui_textarea::CursorMove;
    if key.ctrl || key.alt || prompt.is_selecting() {
        return false;
    }
    let tui_textarea::DataCursor(row, col) = prompt.cursor();
    let Some(line) = prompt.lines().get(row) else {
        return false;
    };
    let split = line.char_indices().nth(col).map_or(line.len(), |(at, _)| at);
    let (before, after) = line.split_at(split);
    let width = |g: Option<&str>| g.map_or(0, |g| g.chars().count());
    let (back, ahead) = (
        width(before.graphemes(true).next_back()),
        width(after.graphemes(true).next()),
    );
    match key.code {
        KeyName::Backspace if back > 1 => (0..back).for_each(|_| {
            prompt.delete_char();
        }),
        KeyName::Left if back > 1 => (0..back).for_each(|_| prompt.move_cursor(CursorMove::Back)),
        KeyName::Right if ahead > 1 => (0..ahead).for_each(|_| prompt.move_cursor(CursorMove::Forward)),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backspace or an arrow takes what looks like one character whole: an emoji with its skin
    /// tone, a family joined by zero-width joiners, a letter with two accents.
    #[test]
    fn the_prompt_edits_by_what_looks_like_one_character() {
        let key = |code| Key {
            code,
            ctrl: false,
            alt: false,
        };
        for (text, left, want) in [
            ("X👍🏽Y", 1, "XY"),
            ("A👩\u{200d}👩\u{200d}👧B", 1, "AB"),
            ("ée\u{301}\u{303}", 0, "é"),
        ] {
            let mut prompt = tui_textarea::TextArea::new(vec![text.to_string()]);
            prompt.move_cursor(tui_textarea::CursorMove::End);
            for _ in 0..left {
                if !by_grapheme(&mut prompt, key(KeyName::Left)) {
                    prompt.move_cursor(tui_textarea::CursorMove::Back);
                }
            }
            assert!(by_grapheme(&mut prompt, key(KeyName::Backspace)), "{text:?}");
            assert_eq!(prompt.lines(), [want], "{text:?}");
        }
        // One code point: the text area's own.
        let mut prompt = tui_textarea::TextArea::new(vec!["ab".to_string()]);
        prompt.move_cursor(tui_textarea::CursorMove::End);
        assert!(!by_grapheme(&mut prompt, key(KeyName::Backspace)));
    }
}
