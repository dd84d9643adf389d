//! Line wrapping by display width: breaks at spaces in alphabetic text, between any two characters of
//! CJK text, and never inside a grapheme cluster (an emoji with modifiers, a letter with accents).

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

fn is_wide(g: &str) -> bool {
    g.width() >= 2
}

/// `text` wrapped to `width` columns; explicit newlines are kept. Every returned line fits.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(2);
    let mut out = Vec::new();
    for paragraph in text.split('\n') {
        let mut line = String::new();
        let mut line_width = 0;
        // Byte offset in `line` just after the last space, and the width before it.
        let mut last_space: Option<(usize, usize)> = None;
        for g in paragraph.graphemes(true) {
            // A tab is a space here: the terminal's cells have no tab stops to honour.
            let g = if g == "\t" { " " } else { g };
            let w = g.width();
            if line_width + w > width && !line.is_empty() {
                match last_space {
                    Some((at, before)) if !is_wide(g) && at < line.len() => {
                        let rest = line.split_off(at);
                        out.push(line.trim_end().to_string());
                        line = rest;
                        line_width -= before;
                    }
                    _ => {
                        out.push(std::mem::take(&mut line).trim_end().to_string());
                        line_width = 0;
                    }
                }
                last_space = None;
                if g == " " && line.is_empty() {
                    continue;
                }
            }
            line.push_str(g);
            line_width += w;
            if g.chars().all(char::is_whitespace) {
                last_space = Some((line.len(), line_width));
            } else if is_wide(g) {
                last_space = None;
            }
        }
        out.push(line.trim_end().to_string());
    }
    out
}

/// [`wrap`] kept to `lines` lines, the last ending in `…` when text was left out.
pub fn wrap_at_most(text: &str, width: usize, lines: usize) -> Vec<String> {
    let mut out = wrap(text, width);
    if out.len() > lines {
        out.truncate(lines);
        if let Some(last) = out.pop() {
            out.push(crate::text::fit(&format!("{last} …"), width.max(2)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn text_kept_to_some_lines_says_that_more_was_left_out() {
        let text = "I suppose I do enjoy a good conversation, though I pick my moments.";
        assert_eq!(
            super::wrap_at_most(text, 30, 2),
            ["I suppose I do enjoy a good", "conversation, though I pick …"]
        );
        assert_eq!(super::wrap_at_most(text, 28, 2)[1], "conversation, though I pick…");
        assert_eq!(super::wrap_at_most("short", 30, 2), ["short"]);
    }

    use super::*;

    #[test]
    fn a_tab_is_a_space_that_lines_break_at() {
        assert_eq!(wrap("alpha\tbeta\tgamma", 40), ["alpha beta gamma"]);
        assert_eq!(wrap("alpha\tbeta", 7), ["alpha", "beta"]);
    }

    #[test]
    fn breaks_at_spaces_and_between_cjk_characters() {
        assert_eq!(wrap("the quick brown fox", 10), ["the quick", "brown fox"]);
        assert_eq!(wrap("我是钟离，往生堂客卿。", 8), ["我是钟离", "，往生堂", "客卿。"]);
        assert_eq!(wrap("a\nb", 10), ["a", "b"]);
        assert_eq!(wrap("abcdefghijkl", 5), ["abcde", "fghij", "kl"]);
    }

    #[test]
    fn never_splits_a_grapheme_and_every_line_fits() {
        let text = "family 👨‍👩‍👧‍👦 and flags 🇨🇳🇬🇧 with e\u{301}\u{301} accents 你好世界 mixed";
        for width in 2..30 {
            for line in wrap(text, width) {
                assert!(line.width() <= width, "{line:?} at {width}");
                assert!(!line.starts_with('\u{301}'), "combining mark split at {width}");
            }
        }
        let joined: String = wrap(text, 7).concat();
        assert!(joined.contains("👨‍👩‍👧‍👦") && joined.contains("🇨🇳"));
    }
}
