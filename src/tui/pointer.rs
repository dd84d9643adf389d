//! The pointer: clicks and the wheel on what the last frame drew, and what that frame learnt.

use ratatui::crossterm::event::{MouseEvent, MouseEventKind};
use ratatui::layout::Position;

use super::app::{App, Effect};
use super::keys::Command;
use super::screens::{Hits, ListId};
use super::vocab::Screen;

impl App {
    /// A mouse event, tested against what the last frame drew (`hits`).
    pub fn mouse(&mut self, m: MouseEvent, hits: &Hits) -> Vec<Effect> {
        // Nothing the pointer could aim at is drawn while the terminal is too small.
        if self.reassess.is_some() || self.too_small {
            return Vec::new();
        }
        // A click takes a start's question back, as another key does; it confirms none.
        (self.start_asked, self.start_confirmed) = (None, None);
        let at = Position::new(m.column, m.row);
        let list = hits.lists.iter().find(|(r, _, _)| r.contains(at));
        match m.kind {
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                if let Some((_, _, list)) = list {
                    self.click(*list, None);
                }
                let down = m.kind == MouseEventKind::ScrollDown;
                self.command(if down { Command::Down } else { Command::Up })
            }
            MouseEventKind::Down(_) => {
                if let Some((_, screen)) = hits.tabs.iter().find(|(r, _)| r.contains(at)) {
                    // As its key does: a screen that reads what it shows when entered reads it.
                    return self.command(screen.go());
                } else if hits.covered.is_some_and(|r| r.contains(at)) {
                    // What a long message covers is not clicked through: the click clears it.
                    self.flash = None;
                } else if let Some((r, first, list)) = list {
                    self.click(*list, Some(first + usize::from(m.row - r.y)));
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// A click (`row`) or the wheel (`None`) on a list: the list takes the focus, a click its cursor.
    fn click(&mut self, list: ListId, row: Option<usize>) {
        match list {
            ListId::Characters | ListId::Scales | ListId::Options => self.setup.click(list, row, &self.catalog),
            ListId::Items => self.live.click(row, self.run.items.len()),
            ListId::Dimensions | ListId::InspectItems => self.inspect.click(list, row),
            ListId::Sessions => self.sessions.click(row),
            ListId::CompareTable => self.compare.click(row),
            ListId::PersonaCharacters => {
                if let Some(row) = row {
                    self.persona.cursor = row.min(self.catalog.characters.len().saturating_sub(1));
                }
            }
        }
    }

    /// What the last frame learnt that keys need: how far its tail-anchored text can scroll up, and
    /// its top-anchored text down.
    pub fn laid_out(&mut self, hits: &Hits) {
        self.too_small = hits.too_small;
        if let (Some(end), Screen::Inspector) = (hits.scroll_end, self.screen) {
            self.inspect.scroll_end = end;
        }
        let Some(top) = hits.tail_top else { return };
        match self.screen {
            Screen::Live => self.live.scroll.set_limit(top),
            Screen::Observers => self.observers.scroll.set_limit(top),
            Screen::Chat => self.chat.scroll.set_limit(top),
            _ => {}
        }
    }
}
