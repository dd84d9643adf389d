//! The chat screen: a free conversation with a character's agent in the setup's style and provider,
//! the prompt as sent (ctrl-p), and re-asked interview items shown next to the answer the session
//! recorded. It talks to the character in focus (the one chosen last on Persona or the Inspector,
//! else the one found here with ctrl-o or ctrl-n/ctrl-b); each character's conversation opens on its
//! greeting and is kept while another is shown. It owns the conversations and the line being typed.

use std::collections::BTreeMap;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{Component, Ctx, Hits, Request, TailScroll};
use crate::domain::character::Character;
use crate::llm::ChatMessage;
use crate::tui::keys::{Command, Key, KeyName, Mode};
use crate::tui::vocab::Effect;
use crate::tui::widgets::block;
use crate::tui::wrap::wrap;

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

pub struct Chat {
    /// The character chosen here or in focus elsewhere; empty: the inspector's, else the first
    /// picked in setup.
    pub character: String,
    /// Each character's conversation, by id: showing another character keeps it.
    conversations: BTreeMap<String, Vec<ChatTurn>>,
    /// The character whose reply is streaming, if one is.
    pending: Option<String>,
    /// The message each character's conversation opens on (its card's greeting), by id.
    pub greetings: BTreeMap<String, String>,
    pub input: tui_textarea::TextArea<'static>,
    /// The messages of the last request, as sent.
    pub prompt: Vec<ChatMessage>,
    pub show_prompt: bool,
    pub scroll: TailScroll,
    /// The character finder (ctrl-o), while it is open.
    pub finder: Option<Finder>,
}

/// The character finder: a filter typed as in Setup's list (name, alias, id, work, language) and
/// the cursor among the characters it leaves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Finder {
    pub filter: String,
    pub cursor: usize,
    pub view: crate::tui::widgets::ListView,
}

fn empty_input() -> tui_textarea::TextArea<'static> {
    let mut input = tui_textarea::TextArea::default();
    input.set_placeholder_text("Ask the character something, in the experimenter's voice (enter sends)");
    input
}

impl Default for Chat {
    fn default() -> Self {
        Chat {
            character: String::new(),
            conversations: BTreeMap::new(),
            pending: None,
            greetings: BTreeMap::new(),
            input: empty_input(),
            prompt: Vec::new(),
            show_prompt: false,
            scroll: TailScroll::default(),
            finder: None,
        }
    }
}

impl Chat {
    /// The character the chat talks to: the chosen one, else the inspector's, else the first picked.
    pub fn character<'a>(&self, ctx: &Ctx<'a>) -> Option<&'a Character> {
        let id = if !self.character.is_empty() {
            Some(self.character.clone())
        } else {
            ctx.run
                .units()
                .get(ctx.inspected)
                .map(|u| u.0.clone())
                .or_else(|| ctx.setup.characters.iter().next().cloned())
        };
        id.and_then(|id| ctx.catalog.character(&id))
    }

    /// The conversation with the character `id` so far.
    pub fn turns(&self, id: &str) -> &[ChatTurn] {
        self.conversations.get(id).map_or(&[], Vec::as_slice)
    }

    /// Another screen put the character `id` in focus: the chat talks to it from now on.
    pub fn follow(&mut self, id: String) {
        if self.character != id {
            self.character = id;
            self.scroll.reset();
        }
    }

    /// Shows the character `id`'s conversation.
    fn show(&mut self, id: String) {
        self.follow(id);
        self.finder = None;
    }

    /// Sends `text` (`recorded`: a re-asked item's answer in the session; `with_history`: the earlier
    /// turns, after the greeting, go with it).
    pub fn send(&mut self, text: String, recorded: Option<String>, with_history: bool, ctx: &Ctx) -> Vec<Request> {
        let Some(c) = self.character(ctx) else {
            return vec![Request::Flash("pick a character in Setup first".into())];
        };
        if let Some(waiting) = &self.pending {
            let name = ctx
                .catalog
                .character(waiting)
                .map_or(waiting.clone(), |c| c.name.clone());
            return vec![Request::Flash(format!(
                "wait for {name}'s answer first, or stop it ({})",
                ctx.key(Command::Cancel)
            ))];
        }
        let character = c.id.clone();
        let turns = self.conversations.entry(character.clone()).or_default();
        let (greeting, history) = if with_history {
            let history = turns
                .iter()
                .filter(|t| t.done && t.error.is_none() && t.recorded.is_none())
                .map(|t| (t.user.clone(), t.reply.clone()))
                .collect();
            (self.greetings.get(&character).cloned(), history)
        } else {
            (None, Vec::new())
        };
        let turns_recorded = recorded.is_some();
        turns.push(ChatTurn {
            user: text.clone(),
            reply: String::new(),
            done: false,
            error: None,
            recorded,
        });
        self.character = character.clone();
        self.pending = Some(character.clone());
        self.scroll.reset();
        // An item asked again is sampled as the session sampled its recorded answer.
        let sampling = turns_recorded
            .then(|| ctx.run.session.plan.as_ref().map(|p| p.answer_sampling))
            .flatten();
        vec![
            Effect::Chat {
                character,
                style: ctx.setup.style,
                provider: ctx.setup.rpa.clone(),
                greeting,
                history,
                text,
                sampling,
            }
            .into(),
        ]
    }

    /// A key while the finder is open: letters filter, ↑/↓ move, enter talks to the character under
    /// the cursor, esc closes.
    fn find(&mut self, event: KeyEvent, ctx: &Ctx) -> Vec<Request> {
        use ratatui::crossterm::event::KeyCode;
        let Some(finder) = self.finder.as_mut() else {
            return Vec::new();
        };
        let found = super::setup::matching(ctx.catalog, &finder.filter);
        match event.code {
            KeyCode::Esc => self.finder = None,
            KeyCode::Enter => {
                if let Some(c) = found.get(finder.cursor.min(found.len().saturating_sub(1))) {
                    self.show(c.id.clone());
                }
            }
            KeyCode::Up => finder.cursor = finder.cursor.saturating_sub(1),
            KeyCode::Down => finder.cursor = (finder.cursor + 1).min(found.len().saturating_sub(1)),
            KeyCode::Backspace => {
                finder.filter.pop();
                finder.cursor = 0;
            }
            KeyCode::Char(ch) if !event.modifiers.contains(KeyModifiers::CONTROL) => {
                finder.filter.push(ch);
                finder.cursor = 0;
            }
            _ => {}
        }
        Vec::new()
    }

    /// Keys go to the line being typed, except the bound ones that are not plain typing; `None` if the
    /// key is left to its command.
    pub fn key(&mut self, event: KeyEvent, key: Key, ctx: &Ctx) -> Option<Vec<Request>> {
        let command = ctx.keymap.command(Mode::Chat, key);
        if self.finder.is_some() && !matches!(key.code, KeyName::F(_)) {
            return Some(self.find(event, ctx));
        }
        let plain = !event.modifiers.contains(KeyModifiers::CONTROL)
            && !matches!(key.code, KeyName::F(_) | KeyName::Esc | KeyName::Tab | KeyName::BackTab);
        // With no character shown, nothing is typed where it could not be seen (and later sent to
        // whichever character comes next).
        if self.character(ctx).is_none() && (plain || command.is_none()) {
            return Some(vec![Request::Flash(self.nobody(ctx))]);
        }
        if key.code == KeyName::Enter && !event.modifiers.contains(KeyModifiers::ALT) {
            let text = self.input.lines().join("\n");
            if text.trim().is_empty() {
                return Some(Vec::new());
            }
            // A message that cannot go yet stays where it was typed.
            let requests = self.send(text, None, true, ctx);
            if requests
                .iter()
                .any(|r| matches!(r, Request::Effect(Effect::Chat { .. })))
            {
                self.input = empty_input();
            }
            return Some(requests);
        }
        if plain || command.is_none() {
            self.input.input(event);
            return Some(Vec::new());
        }
        None
    }

    /// Pasted text into the message being written (sent with enter, as typed text is); none while
    /// no character is shown.
    pub fn paste(&mut self, text: &str, ctx: &Ctx) -> bool {
        if self.finder.is_some() || self.character(ctx).is_none() {
            return false;
        }
        self.input.insert_str(text);
        true
    }

    /// Why there is no one to talk to: no character picked yet, or the one in focus gone from the
    /// catalog (its file removed).
    fn nobody(&self, ctx: &Ctx) -> String {
        let pick = format!(
            "pick one in Setup ({}), or press {} here to go through them",
            ctx.key(Command::GoSetup),
            ctx.key(Command::NextUnit)
        );
        match self.character.is_empty() {
            true => format!("no character to talk to yet: {pick}"),
            false => format!(
                "the character {} is no longer in the catalog (its file was removed): {pick}",
                crate::text::visible(&self.character)
            ),
        }
    }

    pub fn command(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        match cmd {
            Command::Prompt => self.show_prompt = !self.show_prompt,
            Command::ScrollUp => self.scroll.scroll_up(5),
            Command::ScrollDown => self.scroll.scroll_down(5),
            Command::NextUnit | Command::PrevUnit => {
                let ids: Vec<String> = ctx.catalog.characters.iter().map(|e| e.value.id.clone()).collect();
                let current = self.character(ctx).map(|c| c.id.clone()).unwrap_or_default();
                let n = ids.len().max(1);
                // With no character in focus, the first goes next (the last before).
                let next = match (ids.iter().position(|id| *id == current), cmd == Command::NextUnit) {
                    (Some(i), true) => (i + 1) % n,
                    (Some(i), false) => (i + n - 1) % n,
                    (None, true) => 0,
                    (None, false) => n - 1,
                };
                self.show(ids.get(next).cloned().unwrap_or_default());
            }
            Command::Find => self.finder = Some(Finder::default()),
            Command::Cancel => {
                return match self.pending {
                    Some(_) => vec![Effect::StopChat.into()],
                    None => vec![Request::Flash("no reply is being written".into())],
                };
            }
            Command::Clear => {
                let Some(c) = self.character(ctx) else {
                    return Vec::new();
                };
                if self.pending.as_ref() == Some(&c.id) {
                    return vec![Request::Flash("wait for the answer first".into())];
                }
                self.conversations.remove(&c.id);
                self.prompt.clear();
                return vec![Request::Flash("conversation cleared".into())];
            }
            _ => {}
        }
        Vec::new()
    }

    /// The request as assembled, shown beside the conversation.
    pub fn set_prompt(&mut self, messages: Vec<ChatMessage>) {
        self.prompt = messages
            .into_iter()
            .map(|mut m| {
                m.content = m.content.to_string();
                m
            })
            .collect();
    }

    /// The turn whose reply is streaming.
    fn streaming(&mut self) -> Option<&mut ChatTurn> {
        let id = self.pending.as_ref()?;
        self.conversations.get_mut(id)?.last_mut()
    }

    pub fn token(&mut self, text: &str) {
        if let Some(turn) = self.streaming() {
            turn.reply.push_str(text);
        }
    }

    /// The reply's attempt failed and is retried: what streamed so far is dropped.
    pub fn retry(&mut self) {
        if let Some(turn) = self.streaming() {
            turn.reply.clear();
        }
    }

    pub fn done(&mut self, result: Result<(), String>) {
        if let Some(turn) = self.streaming() {
            // A reasoning model's thought is not the reply (nor history for the next turn).
            let thought = crate::llm::thought_len(&turn.reply);
            turn.reply.drain(..thought);
            turn.done = true;
            turn.error = result.err().map(|e| e.to_string());
        }
        self.pending = None;
    }
}

impl Chat {
    /// Chat with no character to show: how to pick one, and the finder when it is open.
    fn render_no_character(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) {
        let theme = ctx.theme;
        let b = block(" Chat ", false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        // The keys of this screen: digits are typed here, so Setup is its F-key.
        let first = match self.character.is_empty() {
            true => "No character yet.".to_string(),
            false => format!(
                "The character {} is no longer in the catalog (its file was removed).",
                crate::text::visible(&self.character)
            ),
        };
        frame.render_widget(
            Paragraph::new(vec![
                Line::raw(first),
                Line::styled(
                    format!(
                        "Pick one in Setup ({}), press {} here to find one, or {} to go through them.",
                        ctx.key(Command::GoSetup),
                        ctx.key(Command::Find),
                        ctx.key(Command::NextUnit)
                    ),
                    theme.dim(),
                ),
            ])
            .wrap(ratatui::widgets::Wrap { trim: true }),
            inner,
        );
        // ctrl-o's finder opens here too: the way to a first character.
        if let Some(finder) = &self.finder {
            render_finder(frame, area, finder, ctx);
        }
    }
}

impl Component for Chat {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        if self.finder.is_some() {
            return vec![
                ("enter".into(), "talk to"),
                ("↑/↓".into(), "move"),
                ("esc".into(), "close"),
            ];
        }
        if self.pending.is_some() {
            return vec![
                (ctx.key(Command::Cancel), "stop the reply"),
                (ctx.key(Command::NextUnit), "next"),
                (ctx.key(Command::Prompt), "prompt"),
            ];
        }
        vec![
            ("enter".into(), "send"),
            (ctx.key(Command::Find), "find"),
            (ctx.key(Command::NextUnit), "next"),
            (ctx.key(Command::Prompt), "prompt"),
            (ctx.key(Command::Clear), "clear"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let theme = ctx.theme;
        let Some(c) = self.character(ctx) else {
            self.render_no_character(frame, area, ctx);
            return Hits::default();
        };
        let [main, input_area] = Layout::vertical([Constraint::Min(6), Constraint::Length(5)]).areas(area);
        let (talk_area, prompt_area) = if self.show_prompt {
            let [a, b] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(main);
            (a, Some(b))
        } else {
            (main, None)
        };
        // The longest title that fits the border whole (the key bar has the keys).
        let title = crate::tui::widgets::first_fitting(
            [
                format!(
                    " Chat with {} · style {} · provider {} ",
                    c.name,
                    super::setup::style_name(ctx.setup.style),
                    ctx.setup.rpa
                ),
                format!(" Chat with {} · {} ", c.name, ctx.setup.rpa),
            ],
            usize::from(talk_area.width.saturating_sub(2)),
        )
        .unwrap_or_else(|| format!(" {} ", c.name));
        let b = block(title, false, theme);
        let inner = b.inner(talk_area);
        frame.render_widget(b, talk_area);
        let width = inner.width as usize;
        let mut lines: Vec<Line> = Vec::new();
        if let Some(greeting) = self.greetings.get(&c.id) {
            lines.push(Line::from(vec![
                Span::styled(c.name.clone(), theme.fg(theme.character).add_modifier(Modifier::BOLD)),
                Span::styled(" (greeting)", theme.dim()),
            ]));
            for l in wrap(greeting, width.saturating_sub(2)) {
                lines.push(Line::raw(format!("  {l}")));
            }
            lines.push(Line::raw(""));
        }
        for turn in self.turns(&c.id) {
            lines.push(Line::styled(
                c.experimenter.clone(),
                theme.fg(theme.experimenter).add_modifier(Modifier::BOLD),
            ));
            for l in wrap(&turn.user, width.saturating_sub(2)) {
                lines.push(Line::raw(format!("  {l}")));
            }
            let heading = if turn.recorded.is_some() {
                format!("{} (now)", c.name)
            } else {
                c.name.clone()
            };
            lines.push(Line::styled(
                heading,
                theme.fg(theme.character).add_modifier(Modifier::BOLD),
            ));
            let mut reply = turn.reply.clone();
            if !turn.done {
                reply.push('▌');
            }
            for l in wrap(&reply, width.saturating_sub(2)) {
                lines.push(Line::raw(format!("  {l}")));
            }
            if let Some(e) = &turn.error {
                for l in wrap(&format!("failed: {e}"), width.saturating_sub(2)) {
                    lines.push(Line::styled(format!("  {l}"), theme.fg(theme.error)));
                }
            }
            if let Some(recorded) = &turn.recorded {
                lines.push(Line::styled(
                    format!("{} (recorded in the session)", c.name),
                    theme.fg(theme.label_pdb).add_modifier(Modifier::BOLD),
                ));
                for l in wrap(recorded, width.saturating_sub(2)) {
                    lines.push(Line::raw(format!("  {l}")));
                }
            }
            lines.push(Line::raw(""));
        }
        let height = inner.height as usize;
        let (start, end, top) = self.scroll.window(lines.len(), height, true);
        frame.render_widget(Paragraph::new(lines[start..end].to_vec()), inner);

        if let Some(prompt_area) = prompt_area {
            let b = block(" Prompt as sent ", false, theme);
            let inner = b.inner(prompt_area);
            frame.render_widget(b, prompt_area);
            let width = inner.width as usize;
            let mut lines = Vec::new();
            for m in &self.prompt {
                let role = m.role.name();
                lines.push(Line::styled(format!("[{role}]"), theme.fg(theme.accent)));
                for l in wrap(&m.content, width.saturating_sub(2)) {
                    lines.push(Line::raw(format!("  {l}")));
                }
            }
            if lines.is_empty() {
                lines.push(Line::styled("nothing sent yet", theme.dim()));
            }
            frame.render_widget(Paragraph::new(lines), inner);
        }

        let mut input = self.input.clone();
        input.set_block(block(
            Line::from(vec![Span::raw(format!(
                " {} says (enter sends, alt-enter new line) ",
                c.experimenter
            ))]),
            true,
            theme,
        ));
        input.set_cursor_line_style(theme.base());
        frame.render_widget(&input, input_area);
        if let Some(finder) = &self.finder {
            render_finder(frame, area, finder, ctx);
        }
        Hits {
            tail_top: Some(top),
            ..Hits::default()
        }
    }
}

/// The finder over the chat: the filter typed and the characters it leaves, the cursor's marked.
fn render_finder(frame: &mut Frame, area: Rect, finder: &Finder, ctx: &Ctx) {
    let theme = ctx.theme;
    let found = super::setup::matching(ctx.catalog, &finder.filter);
    let height = (found.len() as u16 + 4).clamp(6, area.height.saturating_sub(2).max(6));
    let width = area.width.saturating_sub(4).min(60);
    let inner = crate::tui::widgets::popup(
        frame,
        crate::tui::widgets::centered(area, width, height),
        " Talk to… (type to filter) ",
        theme,
    );
    let mut lines = vec![Line::from(vec![
        Span::styled("filter ", theme.dim()),
        Span::raw(finder.filter.clone()),
        Span::styled("▌", theme.fg(theme.accent)),
    ])];
    let rows = usize::from(inner.height.saturating_sub(1));
    let cursor = finder.cursor.min(found.len().saturating_sub(1));
    let first = finder.view.first(found.len(), cursor, rows);
    for (i, c) in found.iter().enumerate().skip(first).take(rows) {
        let style = if i == cursor { theme.selected() } else { theme.base() };
        let text = format!("{} · {} ({})", c.name, c.work, c.id);
        lines.push(Line::styled(
            crate::tui::widgets::fit(&text, usize::from(inner.width)),
            style,
        ));
    }
    if found.is_empty() {
        lines.push(Line::styled("no character matches", theme.dim()));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}
