//! Terminal replies and sequences the input parser does not know, dropped whole. crossterm reads an
//! escape sequence it cannot parse (a terminal's answer to a colour query, `ESC ] 11 ; rgb:… BEL`; a
//! DCS or APC string; a long CSI) as Alt plus its second byte, then the rest as typed characters:
//! `1`, `1`, `;`, … — keys that would switch screens or record an annotation. A key that opens such a
//! sequence starts swallowing the keys of its body until its terminator (BEL or `ESC \` for the
//! string kinds, a final byte for CSI), a key no sequence holds, or a pause between keys no terminal
//! reply has (a person typing after a stray Alt-`]` loses nothing after the pause).

use std::time::{Duration, Instant};

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Keys of one reply arrive together; a person's next key comes later than this.
const BURST: Duration = Duration::from_millis(30);
/// The longest body swallowed: a sequence that long is a flood, and what follows is let through.
const MAX_BODY: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// OSC, DCS, APC, PM, SOS: a string ended by BEL or ST (`ESC \`).
    String,
    /// A control sequence: parameter and intermediate bytes, then one final byte.
    Csi,
}

/// The filter's state: inside a sequence's body or not.
#[derive(Debug, Default)]
pub struct StrayInput {
    inside: Option<(Kind, Instant, usize)>,
}

fn alt_char(key: &KeyEvent) -> Option<char> {
    match key.code {
        KeyCode::Char(c) if key.modifiers.contains(KeyModifiers::ALT) => Some(c),
        _ => None,
    }
}

impl StrayInput {
    /// Whether `key`, arrived at `at`, is to be dropped as part of a sequence.
    pub fn drops(&mut self, key: &KeyEvent, at: Instant) -> bool {
        if let Some((kind, last, n)) = self.inside {
            let close = at.duration_since(last) <= BURST && n < MAX_BODY;
            if close {
                let plain = key.modifiers.difference(KeyModifiers::SHIFT).is_empty();
                match (kind, key.code) {
                    // BEL is ctrl-g; ST is ESC then `\` (Alt-`\`).
                    (Kind::String, KeyCode::Char('g')) if key.modifiers == KeyModifiers::CONTROL => {
                        self.inside = None;
                        return true;
                    }
                    (Kind::String, _) if alt_char(key) == Some('\\') => {
                        self.inside = None;
                        return true;
                    }
                    (Kind::String, KeyCode::Char(_)) if plain => {
                        self.inside = Some((kind, at, n + 1));
                        return true;
                    }
                    (Kind::Csi, KeyCode::Char(c)) if plain && (' '..='?').contains(&c) => {
                        self.inside = Some((kind, at, n + 1));
                        return true;
                    }
                    (Kind::Csi, KeyCode::Char(c)) if plain && ('@'..='~').contains(&c) => {
                        self.inside = None;
                        return true;
                    }
                    _ => {}
                }
            }
            self.inside = None;
        }
        let kind = match alt_char(key) {
            Some(']' | 'P' | '_' | '^' | 'X') => Kind::String,
            Some('[') => Kind::Csi,
            _ => return false,
        };
        self.inside = Some((kind, at, 0));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<KeyEvent> {
        // As crossterm reads an unparsed `ESC x…`: Alt-x, then the rest as characters (BEL as ctrl-g).
        let mut out = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            out.push(match c {
                '\u{1b}' => KeyEvent::new(KeyCode::Char(chars.next().unwrap()), KeyModifiers::ALT),
                '\u{7}' => KeyEvent::new(KeyCode::Char('g'), KeyModifiers::CONTROL),
                c => KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE),
            });
        }
        out
    }

    fn kept(filter: &mut StrayInput, text: &str, at: Instant) -> String {
        keys(text)
            .iter()
            .filter(|k| !filter.drops(k, at))
            .map(|k| match k.code {
                KeyCode::Char(c) => c,
                _ => '?',
            })
            .collect()
    }

    #[test]
    fn a_terminal_reply_is_dropped_whole_and_what_follows_is_kept() {
        let mut f = StrayInput::default();
        let now = Instant::now();
        assert_eq!(kept(&mut f, "\u{1b}]11;rgb:0000/0000/0000\u{7}3", now), "3");
        assert_eq!(kept(&mut f, "\u{1b}P1$r0m\u{1b}\\4", now), "4", "a DCS ended by ST");
        assert_eq!(
            kept(&mut f, "\u{1b}[?1;2;4;6;9999999c5", now),
            "5",
            "a CSI ended by its final byte"
        );
        assert_eq!(kept(&mut f, "12x", now), "12x", "plain keys pass");
    }

    #[test]
    fn a_pause_ends_a_sequence_so_a_person_loses_nothing() {
        let mut f = StrayInput::default();
        let now = Instant::now();
        assert_eq!(kept(&mut f, "\u{1b}]", now), "");
        assert_eq!(kept(&mut f, "34", now + Duration::from_millis(500)), "34");
        // A flood longer than any reply stops being swallowed.
        let flood = format!("\u{1b}]{}", "1".repeat(MAX_BODY + 10));
        assert_eq!(kept(&mut f, &flood, now).len(), 10);
    }
}
