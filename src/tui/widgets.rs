//! The small drawing pieces every screen uses: a bordered block, a popup, a centred rectangle, the
//! first visible row of a list, text padded or cut to a width or wrapped to it, the longest of some
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

/// First visible row so that `cursor` stays in a window of `height` rows.
pub fn window(len: usize, cursor: usize, height: usize) -> usize {
    if height == 0 || len <= height {
        return 0;
    }
    let cursor = cursor.min(len - 1);
    cursor.saturating_sub(height / 2).min(len - height)
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
        assert_eq!(window(100, 50, 10), 45);
        assert_eq!(window(100, 99, 10), 90);
        assert_eq!(window(5, 3, 10), 0);
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
