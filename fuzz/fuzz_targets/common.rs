//! Checks shared by the TOML targets.

use incharacter::domain::diagnostic::Diagnostic;

/// A diagnostic names the parsed file and points inside its text: a 1-based line that exists, and a
/// 1-based column at most one past that line's last character.
pub fn assert_within(d: &Diagnostic, name: &str, text: &str) {
    assert_eq!(d.file, name, "{d}");
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(d.line >= 1 && d.line <= lines.len(), "line out of the text: {d}");
    let width = lines[d.line - 1].chars().count();
    assert!(
        d.column >= 1 && d.column <= width + 1,
        "column out of line {}: {d}",
        d.line
    );
}
