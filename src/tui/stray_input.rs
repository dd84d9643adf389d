//! Terminal replies the input parser does not know, dropped whole. crossterm reads a string sequence
//! (a terminal's answer to a colour query, `ESC ] 11 ; rgb:… BEL`; a DCS or APC string) as Alt plus
//! its second byte, then the rest as typed characters: `1`, `1`, `;`, … — keys that would switch
//! screens or record an annotation. A key that opens such a sequence starts swallowing the keys of
//! its body until its terminator (BEL, or `ESC \`), a key no such body holds, or a pause between keys
//! no terminal reply has (a person typing after a stray Alt-`]` loses nothing after the pause).
//! (`ESC [` goes to crossterm's CSI parser, never here: the parameters of a CSI it rejects arrive as
//! plain keys with no opener, which no filter can tell from typing.)

use std::time::{Duration, Instant};

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Keys of one reply arrive together; a person's next key comes later than this.
const BURST: Duration = Duration::from_millis(30);
/// The longest body swallowed: a sequence that long is a flood, and what follows is let through.
const MAX_BODY: usize = 4096;

/// The filter's state: inside the body of an OSC, DCS, APC, PM or SOS string (ended by BEL or ST,
/// `ESC \`) or not; when the last of its keys came, and how many.
#[derive(Debug, Default)]
pub struct StrayInput {
    inside: Option<(Instant, usize)>,
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
        if let Some((last, n)) = self.inside.take()
            && at.duration_since(last) <= BURST
            && n < MAX_BODY
        {
            let plain = key.modifiers.difference(KeyModifiers::SHIFT).is_empty();
            // BEL is ctrl-g; ST is ESC then `\` (Alt-`\`).
            let bel = key.code == KeyCode::Char('g') && key.modifiers == KeyModifiers::CONTROL;
            if bel || alt_char(key) == Some('\\') {
                return true;
            }
            if plain && matches!(key.code, KeyCode::Char(_)) {
                self.inside = Some((at, n + 1));
                return true;
            }
        }
        if matches!(alt_char(key), Some(']' | 'P' | '_' | '^' | 'X')) {
            self.inside = Some((at, 0));
            return true;
        }
        false
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
