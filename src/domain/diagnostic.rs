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

    /// Where the value at `path` begins in JSON text (1-based line and column): `path` names object
    /// keys, or array indices as decimal numbers, from the root (an empty path is the root). Keys are
    /// compared as written, escapes undecoded; `None` when the text holds no such value.
    pub fn json_at(&self, path: &[&str]) -> Option<(usize, usize)> {
        /// An open container: an array's element index, or an object's latest key.
        enum Open<'t> {
            Array(usize),
            Object(Option<&'t str>),
        }
        let here = |stack: &[Open<'_>]| {
            stack.len() == path.len()
                && stack.iter().zip(path).all(|(open, want)| match open {
                    Open::Array(n) => want.parse() == Ok(*n),
                    Open::Object(key) => *key == Some(*want),
                })
        };
        let bytes = self.text.as_bytes();
        let mut stack: Vec<Open<'_>> = Vec::new();
        // The next non-blank character begins a value (the root, after `:`, `[` or an array's `,`).
        let mut value_next = true;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            if std::mem::take(&mut value_next) && b != b']' && here(&stack) {
                return Some(self.line_col(i));
            }
            match b {
                b'{' => stack.push(Open::Object(None)),
                b'[' => {
                    stack.push(Open::Array(0));
                    value_next = true;
                }
                b'}' | b']' => {
                    stack.pop();
                }
                b',' => {
                    if let Some(Open::Array(n)) = stack.last_mut() {
                        *n += 1;
                        value_next = true;
                    }
                }
                b':' => value_next = true,
                b'"' => {
                    let mut end = i + 1;
                    while end < bytes.len() && bytes[end] != b'"' {
                        end += if bytes[end] == b'\\' { 2 } else { 1 };
                    }
                    let is_key = self.text.get(end + 1..).is_some_and(|rest| rest.trim_start().starts_with(':'));
                    if let (true, Some(Open::Object(key))) = (is_key, stack.last_mut()) {
                        *key = self.text.get(i + 1..end);
                    }
                    i = end;
                }
                _ => {}
            }
            i += 1;
        }
        None
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
    fn a_json_value_is_found_by_its_path() {
        let text = "{\n  \"a\": {\"b\": [10, {\"c\": \"x:\\\"y\"}, []],\n  \"d\": 2},\n  \"b\": \"钟离\", \"e\": []\n}";
        let src = Source::new("f.json", text);
        assert_eq!(src.json_at(&[]), Some((1, 1)));
        assert_eq!(src.json_at(&["a"]), Some((2, 8)));
        assert_eq!(src.json_at(&["a", "b", "0"]), Some((2, 15)));
        assert_eq!(src.json_at(&["a", "b", "1", "c"]), Some((2, 25)));
        assert_eq!(src.json_at(&["a", "b", "1"]), Some((2, 19)));
        assert_eq!(src.json_at(&["a", "b", "2"]), Some((2, 35)));
        assert_eq!(src.json_at(&["a", "d"]), Some((3, 8)));
        // A key of the same name deeper, or text inside a string, is not the root's.
        assert_eq!(src.json_at(&["b"]), Some((4, 8)));
        assert_eq!(src.json_at(&["c"]), None);
        assert_eq!(src.json_at(&["a", "b", "3"]), None);
        // An empty array holds no element 0.
        assert_eq!(src.json_at(&["e", "0"]), None);
        assert_eq!(src.json_at(&["b", "x"]), None);
    }

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
