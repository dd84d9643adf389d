//! Where a problem in a user-supplied file is: the file, the 1-based line and column, and what is wrong.
//! Every loader in the project reports through this type so that errors read `file:line:col: message`.

use std::fmt;
use std::ops::Range;

/// One problem found in a file, pointing at the exact place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
    }
}

impl std::error::Error for Diagnostic {}

/// A named text being parsed; turns byte offsets into line and column (columns count characters).
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

impl<'a> Source<'a> {
    pub fn new(name: &'a str, text: &'a str) -> Self {
        Self { name, text }
    }

    /// Line and column (both 1-based) of a byte offset; offsets past the end point after the last character.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    pub fn at(&self, span: Range<usize>, message: impl Into<String>) -> Diagnostic {
        let (line, column) = self.line_col(span.start);
        Diagnostic {
            file: self.name.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    /// A diagnostic for the whole file (no better place is known).
    pub fn whole(&self, message: impl Into<String>) -> Diagnostic {
        self.at(0..0, message)
    }

    /// Converts a TOML syntax or shape error into a located diagnostic.
    pub fn toml_error(&self, error: &toml::de::Error) -> Diagnostic {
        let message = error.message().trim().to_string();
        match error.span() {
            Some(span) => self.at(span, message),
            None => self.whole(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_and_count_characters() {
        let src = Source::new("f.toml", "ab\n钟离 = 1\n");
        assert_eq!(src.line_col(0), (1, 1));
        assert_eq!(src.line_col(3), (2, 1));
        // "钟离" is 6 bytes but two characters.
        assert_eq!(src.line_col(3 + 6 + 1), (2, 4));
        assert_eq!(src.line_col(999), (3, 1));
        // An offset inside a multi-byte character snaps back to its start.
        assert_eq!(src.line_col(4), (2, 1));
    }

    #[test]
    fn display_reads_file_line_col_message() {
        let d = Source::new("x.toml", "a\nb").at(2..3, "bad");
        assert_eq!(d.to_string(), "x.toml:2:1: bad");
    }
}
