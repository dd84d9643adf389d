//! The small drawing pieces every screen uses: a bordered block, a popup, a centred rectangle, the
//! window of a list, text padded or cut to a width or wrapped to it, the longest of some
//! texts that fits, a score as a cell shows it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Borders, Clear};

use super::theme::Theme;
pub use crate::text::fit;

pub fn block<'a>(title: impl Into<Line<'a>>, focused: bool, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Rounded
        })
        .border_style(theme.border(focused))
        .title(title.into().style(theme.title()))
}

/// Where a list's window stands: the first visible row, kept from frame to frame so the rows stay
/// put while the cursor moves inside the window (a click selects the row under the pointer, it
/// does not scroll it away); the window moves only as far as the cursor leaves it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListView(std::cell::Cell<usize>);

impl ListView {
    /// The first visible row of a list of `len` rows shown `height` at a time with `cursor` in view.
    pub fn first(&self, len: usize, cursor: usize, height: usize) -> usize {
        let first = if height == 0 || len <= height {
            0
        } else {
            let cursor = cursor.min(len - 1);
            let kept = self.0.get().min(len - height);
            if cursor < kept {
                cursor
            } else if cursor >= kept + height {
                cursor + 1 - height
            } else {
                kept
            }
        };
        self.0.set(first);
        first
    }
}

/// A centred rectangle of at most `w`×`h` inside `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(area.x + (area.width - w) / 2, area.y + (area.height - h) / 2, w, h)
}

/// Clears `area` and draws a bordered popup.
pub fn popup(frame: &mut Frame, area: Rect, title: &str, theme: &Theme) -> Rect {
    unstraddle(frame.buffer_mut(), area);
    frame.render_widget(Clear, area);
    let b = block(title, true, theme).style(theme.base());
    let inner = b.inner(area);
    frame.render_widget(b, area);
    inner
}

/// Blanks a wide character (a CJK name, an emoji) whose right half would lie under `area`'s left
/// edge: a terminal draws such a character whole, over the popup's border, and the frame's diff
/// never redraws the border cell it covers.
fn unstraddle(buf: &mut ratatui::buffer::Buffer, area: Rect) {
    use unicode_width::UnicodeWidthStr;
    let area = area.intersection(buf.area);
    if area.is_empty() || area.x <= buf.area.x {
        return;
    }
    for y in area.top()..area.bottom() {
        let cell = &mut buf[(area.x - 1, y)];
        if cell.symbol().width() > 1 {
            cell.set_symbol(" ");
        }
    }
}

/// `text` padded with spaces to `width` display columns (cut if longer).
pub fn pad(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthStr;
    let t = fit(text, width);
    let w = t.width();
    format!("{t}{}", " ".repeat(width.saturating_sub(w)))
}

pub fn score_text(score: Option<f64>) -> String {
    score.map_or("–".into(), |s| format!("{s:.2}"))
}

/// `text` wrapped at `width` columns, every line in `style`: reasons and notes are read whole, not cut.
pub fn wrapped(text: &str, width: usize, style: ratatui::style::Style) -> Vec<Line<'static>> {
    super::wrap::wrap(text, width.max(1))
        .into_iter()
        .map(|l| Line::styled(l, style))
        .collect()
}

/// The first of `texts` (longest first) that fits in `width` columns whole.
pub fn first_fitting(texts: impl IntoIterator<Item = String>, width: usize) -> Option<String> {
    texts
        .into_iter()
        .find(|t| unicode_width::UnicodeWidthStr::width(t.as_str()) <= width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_counts_cjk_as_two_columns() {
        assert_eq!(pad("abc", 5), "abc  ");
        assert_eq!(pad("钟离", 5), "钟离 ");
    }

    #[test]
    fn a_list_window_moves_only_as_far_as_the_cursor_leaves_it() {
        let view = ListView::default();
        assert_eq!(view.first(5, 3, 10), 0, "a list that fits starts at its top");
        assert_eq!(view.first(100, 4, 10), 0, "the cursor in view: the rows stay");
        assert_eq!(view.first(100, 9, 10), 0);
        assert_eq!(view.first(100, 10, 10), 1, "one row past the bottom: one row down");
        assert_eq!(view.first(100, 5, 10), 1, "a click inside the window moves nothing");
        assert_eq!(
            view.first(100, 0, 10),
            0,
            "past the top: the cursor becomes the top row"
        );
        assert_eq!(view.first(100, 99, 10), 90, "a jump to the end shows the last rows");
        assert_eq!(
            view.first(20, 15, 10),
            10,
            "a shorter list (a filter) keeps its window inside it"
        );
        assert_eq!(view.first(100, 50, 0), 0);
    }

    #[test]
    fn a_popup_border_is_not_hidden_under_a_wide_character() {
        use ratatui::Terminal;
        use ratatui::backend::TestBackend;
        use ratatui::widgets::Paragraph;
        let theme = crate::tui::theme::default_theme();
        let mut terminal = Terminal::new(TestBackend::new(12, 4)).unwrap();
        terminal
            .draw(|frame| {
                // "钟" fills columns 1 and 2, "离" 3 and 4: the popup's left edge is column 2.
                frame.render_widget(Paragraph::new(vec![Line::raw("a钟离bc"); 4]), frame.area());
                popup(frame, Rect::new(2, 0, 6, 4), "", &theme);
            })
            .unwrap();
        let buf = terminal.backend().buffer();
        for y in 0..4 {
            assert_eq!(
                buf[(1, y)].symbol(),
                " ",
                "row {y}: the straddling character is blanked"
            );
            assert_ne!(buf[(2, y)].symbol(), " ", "row {y}: the border is drawn");
            assert_eq!(buf[(0, y)].symbol(), "a");
        }
    }
}
