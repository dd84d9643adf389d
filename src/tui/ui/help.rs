//! The help overlay: every key of the current screen, from the live keymap.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{centered, pad, popup};
use crate::tui::app::{App, Screen};

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let bindings = app.keymap.bindings(app.screen.mode());
    let height = (bindings.len() as u16 + 4).min(area.height);
    let inner = popup(frame, centered(area, 76, height), " Keys (any key closes) ", theme);
    let mut lines: Vec<Line> = bindings
        .iter()
        .map(|(keys, cmd)| {
            Line::from(vec![
                Span::styled(pad(keys, 22), theme.fg(theme.accent)),
                Span::raw(cmd.help()),
            ])
        })
        .collect();
    if app.screen == Screen::Setup {
        lines.push(Line::styled(
            "In the character list letters filter (q, j, k too): tab moves on, ctrl-c quits, esc clears.",
            theme.dim(),
        ));
    }
    lines.push(Line::styled(
        "Rebind in config.toml: [tui.keys.<screen>] \"ctrl-j\" = \"down\"",
        theme.dim(),
    ));
    frame.render_widget(Paragraph::new(lines), inner);
}
