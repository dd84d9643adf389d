//! Terminal-safe text. Anything that came from a model or a user/imported file passes through
//! `terminal_safe` before it is printed or drawn, so it can never move the cursor, recolour the
//! screen, set the window title or hide text. And text fitted to a width in display columns, which
//! the CLI and the TUI both cut to; and text counted in approximate model tokens, which prompt
//! assembly, the run estimate and the pacing of requests share.

/// Removes escape sequences (CSI, OSC and lone ESC) and control characters other than newline and
/// tab; tabs become spaces. Bidirectional-override characters are removed too.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.peek() {
                Some('[') => {
                    chars.next();
                    // CSI: parameters and intermediates up to a final byte in '@'..='~'.
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    chars.next();
                    // OSC: up to BEL or ST (ESC \).
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            '\n' => out.push('\n'),
            '\t' => out.push(' '),
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A CSV cell a spreadsheet will not run: text that begins with `=`, `+`, `-`, `@`, a tab or a
/// carriage return gets a leading `'` (OWASP's advice against CSV injection), unless it is a number,
/// which stays a number.
pub fn csv_cell(text: &str) -> std::borrow::Cow<'_, str> {
    let risky = text.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if risky && text.trim().parse::<f64>().map_or(true, |x| !x.is_finite()) {
        std::borrow::Cow::Owned(format!("'{text}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Text cut to `width` display columns (CJK counts two), with an ellipsis when cut.
pub fn fit(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
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
    use super::{approx_tokens, csv_cell, fit, terminal_safe};

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
        for kept in ["-1.5", "+3", "-0", "1e-3", "4.39", "hermione-en", "", "a=b", "'=x"] {
            assert_eq!(csv_cell(kept), kept, "{kept}");
        }
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
        assert_eq!(terminal_safe("a\rb\u{8}c\u{9b}d\u{202e}e\tf\n钟离"), "abcde f\n钟离");
        assert_eq!(terminal_safe("end\u{1b}"), "end");
    }
}
