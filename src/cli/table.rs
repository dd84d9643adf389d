//! Aligned plain-text tables for human output (CJK-aware widths; numbers right-aligned).

use unicode_width::UnicodeWidthStr;

/// The widest a name a user gave (a session's) is shown in a table, in display columns: one
/// name of thousands of characters would otherwise widen every row.
pub const NAME_WIDTH: usize = 48;

pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    right: Vec<bool>,
}

impl Table {
    /// Columns whose header starts with '>' are right-aligned (the '>' is not shown).
    pub fn new(header: &[&str]) -> Self {
        Table {
            right: header.iter().map(|h| h.starts_with('>')).collect(),
            header: header.iter().map(|h| h.trim_start_matches('>').to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// A row of cells, each made one line of text a terminal shows as written (escape sequences and
    /// control characters removed before the columns are measured, line breaks as spaces): a name
    /// from a journal or a file cannot misalign the rows. (A cell that may be any length, a name a
    /// user gave, is cut by the caller: [`NAME_WIDTH`].)
    pub fn row(&mut self, cells: Vec<String>) {
        let cell = |c: String| crate::text::terminal_safe(&c).replace('\n', " ");
        self.rows.push(cells.into_iter().map(cell).collect());
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.width()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(cell.width());
                }
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                let pad = " ".repeat(widths.get(i).copied().unwrap_or(0).saturating_sub(cell.width()));
                if i > 0 {
                    line.push_str("  ");
                }
                if self.right.get(i).copied().unwrap_or(false) {
                    line.push_str(&pad);
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.push_str(&pad);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A number with three decimals, or "–" when undefined.
pub fn num(x: Option<f64>) -> String {
    x.map_or("–".to_string(), |v| crate::text::decimals(v, 3, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_wide_characters_and_right_columns() {
        let mut t = Table::new(&["name", ">n"]);
        t.row(vec!["钟离".into(), "5".into()]);
        t.row(vec!["Harry".into(), "12".into()]);
        assert_eq!(t.render(), "name    n\n钟离    5\nHarry  12\n");
    }

    #[test]
    fn cells_are_measured_as_a_terminal_shows_them_and_cut() {
        let mut t = Table::new(&["name", ">n"]);
        t.row(vec!["evil\u{1b}[31mname\u{1b}]0;T\u{7}".into(), "5".into()]);
        t.row(vec!["two\nlines".into(), "12".into()]);
        assert_eq!(t.render(), "name        n\nevilname    5\ntwo lines  12\n");
    }
}
