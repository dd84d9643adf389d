//! The method's vocabulary, free of I/O: scales, characters and labels, scoring, metrics, statistics.

pub mod character;
pub mod decimal;
pub mod diagnostic;
pub mod metrics;
pub mod resample;
pub mod rng;
pub mod rouge;
pub mod scale;
pub mod scoring;
pub mod stats;

/// Whether `id` can name a scale or a character everywhere: on the command line (in comma-separated
/// lists), as a file and a folder name, in a terminal. At most 64 ASCII letters, digits, `-` and `_`,
/// not starting with `-` (it would read as an option).
pub fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !id.starts_with('-')
}

/// Whether a terminal would act on `c` rather than draw it: a control character, a bidirectional
/// override, isolate or mark, a line or paragraph separator. A name (one line, drawn as it is) holds none.
pub fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}' | '\u{2028}' | '\u{2029}'
        )
}

/// A character that shows nothing where it stands (Unicode's default-ignorable code points, such as
/// zero-width spaces and joiners, the soft hyphen, variation selectors and tags): a name holding one
/// looks like a name without it, and cannot be typed back from what is seen.
pub fn shows_nothing(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{34f}'
            | '\u{61c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fff8}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// Refuses, at `span`, text shown as one line (a name, an alias, a pole) that holds a character a
/// terminal would act on, or that shows nothing; `what` names it in the error ("an alias").
pub(crate) fn one_line(
    src: diagnostic::Source<'_>,
    (what, text, span): (&str, &str, std::ops::Range<usize>),
    errors: &mut Vec<diagnostic::Diagnostic>,
) {
    if text.chars().any(acts_on_terminal) {
        errors.push(src.at(
            span,
            format!("{what} is one line: no line break, other control character or bidirectional override"),
        ));
    } else if text.chars().any(shows_nothing) && text.chars().all(|c| c.is_whitespace() || shows_nothing(c)) {
        errors.push(src.at(span, format!("{what} shows nothing: it holds only invisible characters")));
    }
}

/// Refuses, at `span`, text of several lines (a description, an instruction) that holds a control
/// character other than a line break, a tab or a carriage return (a file saved with CRLF): an escape
/// sequence would reach the model. (Direction marks, which an earlier import kept, are shown inert.)
pub(crate) fn prose(
    src: diagnostic::Source<'_>,
    (what, text, span): (&str, &str, std::ops::Range<usize>),
    errors: &mut Vec<diagnostic::Diagnostic>,
) {
    if let Some(c) = text.chars().find(|&c| c.is_control() && !matches!(c, '\n' | '\t' | '\r')) {
        errors.push(src.at(
            span,
            format!(
                "{what} holds {}, a control character (an escape sequence's, say) that would reach the model: \
                 take it out",
                c.escape_unicode()
            ),
        ));
    }
}

/// What [`is_id`] asks, said in an error.
pub const ID_RULE: &str = "at most 64 ASCII letters, digits, '-' and '_', not starting with '-'";
