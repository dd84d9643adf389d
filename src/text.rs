//! Terminal-safe text. Text from models, imported files, journals and other processes is kept as it
//! came; what reaches a terminal passes one of two gates that let no escape sequence through: every
//! byte the command line writes goes through a [`Safe`] writer (stdout and stderr), and every cell the
//! TUI draws is checked before it is sent (`tui::ui::inert_cells`). So no text can move the cursor, recolour the screen, set
//! the window title or hide text, whichever path it took. Also: text fitted to a width in display
//! columns, which the CLI and the TUI both cut to; and text counted in approximate model tokens, which
//! prompt assembly, the run estimate and the pacing of requests share.

use std::io::{self, Write};

/// `text` with each character a terminal would act on (but a line break or a tab) written as its
/// escape, `\u{1b}`: a name that holds one is shown as it can be typed back, not as another name.
pub fn visible(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if acts_on_terminal(c) => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// Removes escape sequences (CSI, OSC, DCS and the other strings, in their ESC and their C1 forms;
/// a charset's designation; a lone ESC) and control characters other than newline and tab; tabs
/// become spaces. Bidirectional-override characters are removed too.
pub fn terminal_safe(text: &str) -> String {
    strip(text, false)
}

fn strip(text: &str, keep_tabs: bool) -> String {
    // A string (OSC, DCS, …) is one only when its terminator (BEL, ST, ESC \) is the next of those or
    // of any other ESC: else its opener goes alone and nothing after it is lost (a lone ESC before
    // "Please", UTF-8 read as Latin-1 before a sequence of its own).
    let stops: Vec<(usize, bool)> = text
        .char_indices()
        .filter(|&(_, c)| matches!(c, '\u{7}' | '\u{9c}' | '\u{1b}'))
        .map(|(i, c)| (i, c != '\u{1b}' || text[i + 1..].starts_with('\\')))
        .collect();
    let ends_later = |i: usize| {
        let next = stops.partition_point(|&(at, _)| at <= i);
        stops.get(next).is_some_and(|&(_, ends)| ends)
    };
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let string = match c {
            '\u{1b}' => match chars.peek().map(|&(_, n)| n) {
                Some('[') => {
                    chars.next();
                    csi(&mut chars, false);
                    false
                }
                Some(']' | 'P' | 'X' | '^' | '_') if ends_later(i) => {
                    chars.next();
                    true
                }
                // `ESC ( B` and the like: intermediates, then a final character (a space after ESC
                // is more likely text than the rare `ESC SP F`).
                Some(n) if ('!'..='/').contains(&n) => {
                    while chars.next_if(|&(_, c)| ('!'..='/').contains(&c)).is_some() {}
                    chars.next_if(|&(_, c)| ('0'..='~').contains(&c));
                    false
                }
                // A two-character escape (`ESC 7`, `ESC c`, `ESC M`); not an opener without an end.
                Some(n) if ('0'..='~').contains(&n) && !matches!(n, ']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    false
                }
                _ => false,
            },
            '\u{9b}' => {
                csi(&mut chars, true);
                false
            }
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => ends_later(i),
            // A line or paragraph separator is a line break: as one, not as a character a terminal
            // draws in a width of its own (it left the previous frame's characters behind).
            '\n' | '\u{2028}' | '\u{2029}' => {
                out.push('\n');
                false
            }
            '\t' => {
                out.push(if keep_tabs { '\t' } else { ' ' });
                false
            }
            c if acts_on_terminal(c) => false,
            c => {
                out.push(c);
                false
            }
        };
        // OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \ or its C1 form).
        if string {
            while let Some((_, c)) = chars.next() {
                if c == '\u{7}' || c == '\u{9c}' || c == '\u{1b}' && chars.next_if(|&(_, c)| c == '\\').is_some() {
                    break;
                }
            }
        }
    }
    out
}

/// After a CSI's introducer: its parameters and intermediates, and its final character if one
/// follows. The one-character C1 introducer (U+009B, also `›` read in the wrong encoding) takes
/// them only when there is a parameter and a final character: otherwise it goes alone.
fn csi(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>, c1: bool) {
    let mut ahead = chars.clone();
    let mut parameters = 0;
    while ahead.next_if(|&(_, c)| (' '..='?').contains(&c)).is_some() {
        parameters += 1;
    }
    let ended = ahead.next_if(|&(_, c)| ('@'..='~').contains(&c)).is_some();
    if !c1 || parameters > 0 && ended {
        *chars = ahead;
    }
}

/// `value` with every string in it (map keys too) as [`terminal_safe`] leaves it, tabs kept: a whole
/// event, from a journal or a run, made safe once where it enters a view that keeps it for display.
/// A value with nothing to remove (nearly every one) comes back as a clone, without the round trip.
pub fn inert<T: serde::Serialize + serde::de::DeserializeOwned + Clone>(value: &T) -> T {
    fn dirty(s: &str) -> bool {
        s.chars().any(|c| acts_on_terminal(c) && c != '\n' && c != '\t')
    }
    fn any_dirty(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::String(s) => dirty(s),
            serde_json::Value::Array(a) => a.iter().any(any_dirty),
            serde_json::Value::Object(o) => o.iter().any(|(k, v)| dirty(k) || any_dirty(v)),
            _ => false,
        }
    }
    fn clean(v: serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::String(s) => serde_json::Value::String(strip(&s, true)),
            serde_json::Value::Array(a) => a.into_iter().map(clean).collect(),
            serde_json::Value::Object(o) => o.into_iter().map(|(k, v)| (strip(&k, true), clean(v))).collect(),
            other => other,
        }
    }
    match serde_json::to_value(value) {
        Ok(v) if any_dirty(&v) => serde_json::from_value(clean(v)).unwrap_or_else(|_| value.clone()),
        _ => value.clone(),
    }
}

/// A control character, one that reorders the text around it (a bidirectional override or
/// isolate), or a line or paragraph separator: never shown as it is (the rule names follow too).
pub use crate::domain::acts_on_terminal;

/// A character that shows nothing where it stands (the rule lives with the names it keeps out).
pub use crate::domain::shows_nothing;

/// A writer whose output a terminal cannot act on: what is written reaches `inner` a line at a time,
/// each line as [`terminal_safe`] leaves it (tabs kept, and a line's end as written, `\n` or `\r\n`).
/// `flush` passes on a line not yet ended (a streamed reply), keeping back only a character whose
/// bytes have not all arrived. The command line's stdout and stderr are only ever written through one.
pub struct Safe<W: Write> {
    inner: W,
    pending: Vec<u8>,
    /// What `inner` is, for its errors (`cannot write to standard output: File too large`).
    name: Option<&'static str>,
}

impl<W: Write> Safe<W> {
    pub fn new(inner: W) -> Safe<W> {
        Safe {
            inner,
            pending: Vec::new(),
            name: None,
        }
    }

    /// A [`Safe`] writer whose errors say what failed (`name`), keeping their kind (a reader gone
    /// away is still a broken pipe).
    pub fn named(inner: W, name: &'static str) -> Safe<W> {
        let mut safe = Safe::new(inner);
        safe.name = Some(name);
        safe
    }

    fn named_error(&self, e: io::Error) -> io::Error {
        match self.name {
            Some(name) => io::Error::new(e.kind(), format!("cannot write to {name}: {e}")),
            None => e,
        }
    }

    /// Writes `pending` up to `end` (a line's end or the last whole character) and keeps the rest.
    fn pass_on(&mut self, end: usize) -> io::Result<()> {
        let chunk: Vec<u8> = self.pending.drain(..end).collect();
        let (body, ending): (&[u8], &[u8]) = match chunk.as_slice() {
            [body @ .., b'\r', b'\n'] => (body, b"\r\n"),
            [body @ .., b'\n'] => (body, b"\n"),
            body => (body, b""),
        };
        let clean = strip(&String::from_utf8_lossy(body), true);
        self.inner.write_all(clean.as_bytes())?;
        self.inner.write_all(ending)
    }
}

impl<W: Write> Write for Safe<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for piece in buf.split_inclusive(|b| *b == b'\n') {
            self.pending.extend_from_slice(piece);
            if piece.ends_with(b"\n") {
                self.pass_on(self.pending.len()).map_err(|e| self.named_error(e))?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let whole = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // A character cut between two writes waits for its other bytes; invalid bytes go on
            // (as U+FFFD).
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        self.pass_on(whole).map_err(|e| self.named_error(e))?;
        self.inner.flush().map_err(|e| self.named_error(e))
    }
}

impl<W: Write> Drop for Safe<W> {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.pass_on(self.pending.len());
        }
        let _ = self.inner.flush();
    }
}

/// Standard error, through a [`Safe`] writer: notes, warnings and the binary's last word.
pub fn stderr() -> Safe<io::StderrLock<'static>> {
    Safe::new(io::stderr().lock())
}

/// A line on stderr through the [`Safe`] gate (`eprintln!` is not used: it would bypass it). A
/// stderr that cannot be written to has no one to tell.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::text::stderr(), $($arg)*);
    }};
}

/// JSON for a terminal: the characters that the terminal gate ([`Safe`]) would remove and that
/// serde_json leaves raw inside strings (C1 controls such as U+009B, which some terminals read as
/// ESC [, and bidirectional overrides) written as `\uXXXX` escapes. The JSON means the same; the
/// terminal shows it as text.
pub fn json_for_terminal(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        let hidden = c != '\n' && acts_on_terminal(c);
        if hidden {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `value` as pretty JSON that a terminal shows as it is: [`json_for_terminal`].
pub fn json_pretty<T: ?Sized + serde::Serialize>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string_pretty(value).map(|json| json_for_terminal(&json))
}

/// Text in a Markdown table cell: one line, and a `|` that does not end the cell.
pub fn md_cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// A CSV cell a spreadsheet will not run: text that begins with `=`, `+`, `-`, `@`, a tab or a
/// carriage return gets a leading `'` (OWASP's advice against CSV injection), unless it is a number,
/// which stays a number. Text that a terminal would show starting that way counts too.
pub fn csv_cell(text: &str) -> std::borrow::Cow<'_, str> {
    if guarded(text) {
        std::borrow::Cow::Owned(format!("'{text}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Whether [`csv_cell`] puts a `'` in front of `text`: it starts as a formula would, or it is such
/// text with `'`s in front already (so that [`from_csv_cell`] takes off exactly the one added).
fn guarded(text: &str) -> bool {
    // Judged as a terminal shows it too: an escape sequence in front of `=` must not hide it when a
    // printed CSV is saved from the terminal.
    let risky = |t: &str| t.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let formula = |t: &str| {
        let starts_risky = risky(t) || (t.starts_with(acts_on_terminal) && risky(&terminal_safe(t)));
        starts_risky && t.trim().parse::<f64>().map_or(true, |x| !x.is_finite())
    };
    formula(text) || (text.starts_with('\'') && formula(text.trim_start_matches('\'')))
}

/// A cell as [`csv_cell`] wrote it, read back: the `'` it put in front is taken off (only where
/// `csv_cell` would have put it), so an export imports back to the same text.
pub fn from_csv_cell(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if guarded(rest) => rest,
        _ => cell,
    }
}

/// Text cut to `width` display columns (CJK counts two), with an ellipsis when cut.
pub fn fit(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    // A tab takes a column like a space (a terminal cell or a table column has no tab stops).
    let text = &text.replace('\t', " ");
    let mut out = String::new();
    let mut used = 0;
    let total: usize = text.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return text.to_string();
    }
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// Chinese, Japanese and Korean characters: text written without spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}' | '\u{f900}'..='\u{faff}' | '\u{ac00}'..='\u{d7af}')
}

/// `x` with `decimals` decimals, and a sign when `signed` (`+0.120`, `-0.046`): a value that rounds to
/// zero is zero, never `-0.000` (which reads as below zero, e.g. the upper end of an interval).
pub fn decimals(x: f64, decimals: usize, signed: bool) -> String {
    let text = if signed {
        format!("{x:+.decimals$}")
    } else {
        format!("{x:.decimals$}")
    };
    match text.strip_prefix('-') {
        Some(rest) if rest.bytes().all(|b| b == b'0' || b == b'.') => {
            if signed {
                format!("+{rest}")
            } else {
                rest.to_string()
            }
        }
        _ => text,
    }
}

/// An amount of USD as it reads: to the cent, or with the decimals that cents would hide (as given,
/// up to eight; else rounded to six), so that a cap of $0.003 is not shown as $0.00.
pub fn usd(amount: f64) -> String {
    let cents = format!("{amount:.2}");
    if cents.parse::<f64>().is_ok_and(|c| (c - amount).abs() < 1e-9) {
        return cents;
    }
    // As given, where it was given in up to eight decimals (a cap of $0.0068375); a sum's float
    // noise (0.006837500000000001) is rounded to six.
    let given = format!("{amount}");
    if let Some((_, d)) = given.split_once('.')
        && (2..=8).contains(&d.len())
    {
        return given;
    }
    let fine = format!("{amount:.6}");
    let fine = fine.trim_end_matches('0');
    if fine.split_once('.').is_some_and(|(_, d)| d.len() >= 2) {
        fine.to_string()
    } else {
        cents
    }
}

/// A documented approximation of model tokens: one per CJK character, 1.3 per other word.
pub fn approx_tokens(text: &str) -> usize {
    let cjk = text.chars().filter(|c| is_cjk(*c)).count();
    let words = text
        .split(|c: char| c.is_whitespace() || is_cjk(c))
        .filter(|w| !w.is_empty())
        .count();
    cjk + (words as f64 * 1.3).ceil() as usize
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::{Safe, approx_tokens, csv_cell, decimals, fit, from_csv_cell, inert, terminal_safe, usd};

    #[test]
    fn a_value_that_rounds_to_zero_has_no_minus_sign() {
        assert_eq!(decimals(-0.0004, 3, true), "+0.000");
        assert_eq!(decimals(-0.0004, 3, false), "0.000");
        assert_eq!(decimals(-0.0, 2, false), "0.00");
        assert_eq!(decimals(-0.0456, 3, true), "-0.046");
        assert_eq!(decimals(0.12, 3, true), "+0.120");
        assert_eq!(decimals(4.666_666_666_666_667, 3, false), "4.667");
        assert_eq!(decimals(f64::NAN, 3, false), "NaN");
    }

    fn through_safe(writes: &[&[u8]], flush_after_each: bool) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut w = Safe::new(&mut out);
            for piece in writes {
                w.write_all(piece).unwrap();
                if flush_after_each {
                    w.flush().unwrap();
                }
            }
        }
        out
    }

    #[test]
    fn the_safe_writer_passes_lines_without_escape_sequences_whatever_the_writes() {
        let text = "a\u{1b}[31mred\u{1b}[0m\tb\r\nx\u{1b}]0;pwned\u{7}y\rz\n钟\u{202e}离";
        let want = b"ared\tb\r\nxyz\n\xe9\x92\x9f\xe7\xa6\xbb".to_vec();
        assert_eq!(through_safe(&[text.as_bytes()], false), want);
        // Cut anywhere (inside a sequence, inside a character), flushed or not: the same bytes.
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(through_safe(&[a, b], false), want, "cut at {cut}");
            let flushed = through_safe(&[a, b], true);
            assert!(!flushed.contains(&0x1b) && !flushed.contains(&0x07), "cut at {cut}");
            assert!(String::from_utf8(flushed).is_ok(), "a flush never splits a character");
        }
    }

    #[test]
    fn inert_cleans_every_string_of_a_value_and_keeps_the_rest() {
        let value = serde_json::json!({"a\u{1b}[2J": ["x\u{1b}]0;t\u{7}y", 3, {"n": "tab\tkept"}], "b": null});
        assert_eq!(
            inert(&value),
            serde_json::json!({"a": ["xy", 3, {"n": "tab\tkept"}], "b": null})
        );
        let clean = ("plain".to_string(), vec![1.5, 2.0]);
        assert_eq!(inert(&clean), clean);
    }

    #[test]
    fn csv_cells_that_a_spreadsheet_would_run_are_neutralised_and_numbers_kept() {
        for risky in [
            "=HYPERLINK(\"http://evil\",\"x\")",
            "=cmd|' /C calc'!A0",
            "@SUM(1+1)",
            "+1+1",
            "-2+3+cmd|' /C calc'!A0",
            "\t=1",
            "\r=1",
            "-inf",
            "-NaN",
        ] {
            assert_eq!(csv_cell(risky), format!("'{risky}"), "{risky}");
        }
        for kept in ["-1.5", "+3", "-0", "1e-3", "4.39", "hermione-en", "", "a=b", "'x"] {
            assert_eq!(csv_cell(kept), kept, "{kept}");
        }
        // Text that looks guarded already gets its own `'`, so that it reads back as it was.
        assert_eq!(csv_cell("'=x"), "''=x");
    }

    #[test]
    fn token_approximation() {
        assert_eq!(approx_tokens("你好 world"), 2 + 2);
        assert_eq!(approx_tokens("a b c d e f g h i j"), 13);
    }

    #[test]
    fn fitting_counts_cjk_as_two_columns() {
        assert_eq!(fit("赫敏·格兰杰", 6), "赫敏·…");
        assert_eq!(fit("赫敏格兰杰", 6), "赫敏…");
        assert_eq!(fit("abcde", 5), "abcde");
    }

    #[test]
    fn strips_escape_sequences_and_controls() {
        assert_eq!(terminal_safe("a\u{1b}[31mred\u{1b}[0m b"), "ared b");
        assert_eq!(terminal_safe("x\u{1b}]0;pwned\u{7}y"), "xy");
        assert_eq!(terminal_safe("x\u{1b}]8;;http://e\u{1b}\\link"), "xlink");
        assert_eq!(terminal_safe("a\rb\u{8}c\u{85}d\u{202e}e\tf\n钟离"), "abcde f\n钟离");
        // C1 introducers take their sequences with them, as their ESC forms do.
        assert_eq!(terminal_safe("\u{9b}31mred\u{9b}0m end"), "red end");
        assert_eq!(terminal_safe("a\u{9d}0;title\u{9c}b\u{90}+q\u{9c}c"), "abc");
        // DCS, SOS, PM and APC strings up to ST; a charset's designation; a cursor save.
        assert_eq!(terminal_safe("y \u{1b}P+q\u{1b}\\ z"), "y  z");
        assert_eq!(
            terminal_safe("a\u{1b}_apc\u{1b}\\b\u{1b}^pm\u{7}c\u{1b}Xsos\u{9c}d"),
            "abcd"
        );
        assert_eq!(
            terminal_safe("\u{1b}(Bplain \u{1b}7saved\u{1b}8 \u{1b}c"),
            "plain saved "
        );
        // An opener with no end goes alone, and what follows stays: a lone ESC before a word,
        // UTF-8 read as Latin-1 (ß as Ã and U+009F), `›` read the same way.
        assert_eq!(terminal_safe("\u{1b}Please read"), "Please read");
        assert_eq!(terminal_safe("StraÃ\u{9f}e in München"), "StraÃe in München");
        assert_eq!(terminal_safe("\u{9b}Hello \u{9d}there"), "Hello there");
        assert_eq!(terminal_safe("\u{1b} of \u{1b}(\nx \u{1b}\u{1b}[31my"), " of \nx y");
        assert_eq!(terminal_safe("\u{1b}[31"), "");
        // A sequence of its own after the mojibake is not the end of a string it opened.
        assert_eq!(
            terminal_safe("StraÃ\u{9f}e in München \u{1b}]0;t\u{7}ok"),
            "StraÃe in München ok"
        );
        assert_eq!(terminal_safe("a\u{1b}]0;t\u{1b}[31mb\u{7}c"), "a]0;tbc");
        // Directional marks too (a right-to-left mark reorders what stands around it).
        assert_eq!(terminal_safe("self-\u{200f}doubting\u{200e}\u{61c}"), "self-doubting");
        assert_eq!(
            terminal_safe("A\u{2028}B\u{2029}C"),
            "A\nB\nC",
            "separators are line breaks"
        );
        assert!(super::acts_on_terminal('\u{2028}') && super::acts_on_terminal('\u{2029}'));
        assert_eq!(terminal_safe("end\u{1b}"), "end");
    }

    #[test]
    fn amounts_read_to_the_cent_unless_cents_would_hide_them() {
        assert_eq!(usd(20.0), "20.00");
        assert_eq!(usd(11.5), "11.50");
        assert_eq!(usd(0.003), "0.003");
        assert_eq!(usd(0.005), "0.005");
        assert_eq!(usd(0.0051234567), "0.005123");
        assert_eq!(usd(0.0068375), "0.0068375", "a cap as given");
        assert_eq!(
            usd(0.0001 * 3.0),
            "0.0003",
            "a product's noise (0.00030000000000000003) rounded"
        );
        assert_eq!(usd(1.0000000001), "1.00");
        assert_eq!(usd(0.0), "0.00");
    }

    #[test]
    fn a_guarded_cell_reads_back_to_its_text_and_nothing_else_loses_an_apostrophe() {
        for text in [
            "=HYPERLINK(\"http://x\")",
            "-minus note",
            "+1 more",
            "@who",
            "'=already quoted",
            "''-twice",
            "plain",
            "'plain",
            "-3",
        ] {
            assert_eq!(from_csv_cell(&csv_cell(text)), text, "{text}");
        }
        // A hundred thousand apostrophes before a formula: read in one pass, not one call each.
        let many = format!("{}=x", "'".repeat(100_000));
        assert_eq!(from_csv_cell(&csv_cell(&many)), many);
    }
}
