//! Chat: a free conversation with a character's agent in the setup's style and provider, the prompt as
//! sent (ctrl-p), and re-asked interview items shown next to the answer the session recorded.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::block;
use crate::llm::Speaker;
use crate::tui::app::App;
use crate::tui::wrap::wrap;

pub fn render(frame: &mut Frame, app: &App, area: Rect) {
    let theme = app.theme();
    let Some(c) = app.chat_character() else {
        let b = block(" Chat ", false, theme);
        let inner = b.inner(area);
        frame.render_widget(b, area);
        frame.render_widget(
            Paragraph::new(vec![
                Line::raw("No character yet."),
                Line::styled(
                    "Pick one in Setup (1), or press ctrl-n here to go through them.",
                    theme.dim(),
                ),
            ]),
            inner,
        );
        return;
    };
    let [main, input_area] = Layout::vertical([Constraint::Min(6), Constraint::Length(5)]).areas(area);
    let (talk_area, prompt_area) = if app.chat.show_prompt {
        let [a, b] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(main);
        (a, Some(b))
    } else {
        (main, None)
    };
    let title = format!(
        " Chat with {} · style {} · provider {} (ctrl-n/b character, ctrl-p prompt, ctrl-l clear) ",
        c.name,
        super::setup::style_name(app.setup.style),
        app.setup.rpa
    );
    let b = block(title, false, theme);
    let inner = b.inner(talk_area);
    frame.render_widget(b, talk_area);
    let width = inner.width as usize;
    let mut lines: Vec<Line> = Vec::new();
    for turn in &app.chat.turns {
        lines.push(Line::styled(
            c.experimenter.clone(),
            theme.fg(theme.experimenter).add_modifier(Modifier::BOLD),
        ));
        for l in wrap(&turn.user, width.saturating_sub(2)) {
            lines.push(Line::raw(format!("  {l}")));
        }
        let heading = if turn.recorded.is_some() {
            format!("{} (now)", c.name)
        } else {
            c.name.clone()
        };
        lines.push(Line::styled(
            heading,
            theme.fg(theme.character).add_modifier(Modifier::BOLD),
        ));
        let mut reply = turn.reply.clone();
        if !turn.done {
            reply.push('▌');
        }
        for l in wrap(&reply, width.saturating_sub(2)) {
            lines.push(Line::raw(format!("  {l}")));
        }
        if let Some(e) = &turn.error {
            lines.push(Line::styled(format!("  failed: {e}"), theme.fg(theme.error)));
        }
        if let Some(recorded) = &turn.recorded {
            lines.push(Line::styled(
                format!("{} (recorded in the session)", c.name),
                theme.fg(theme.label_pdb).add_modifier(Modifier::BOLD),
            ));
            for l in wrap(recorded, width.saturating_sub(2)) {
                lines.push(Line::raw(format!("  {l}")));
            }
        }
        lines.push(Line::raw(""));
    }
    let height = inner.height as usize;
    let (start, end) = app.chat.scroll.window(lines.len(), height, true);
    frame.render_widget(Paragraph::new(lines[start..end].to_vec()), inner);

    if let Some(prompt_area) = prompt_area {
        let b = block(" Prompt as sent ", false, theme);
        let inner = b.inner(prompt_area);
        frame.render_widget(b, prompt_area);
        let width = inner.width as usize;
        let mut lines = Vec::new();
        for m in &app.chat.prompt {
            let role = match m.role {
                Speaker::System => "system",
                Speaker::User => "user",
                Speaker::Assistant => "assistant",
            };
            lines.push(Line::styled(format!("[{role}]"), theme.fg(theme.accent)));
            for l in wrap(&m.content, width.saturating_sub(2)) {
                lines.push(Line::raw(format!("  {l}")));
            }
        }
        if lines.is_empty() {
            lines.push(Line::styled("nothing sent yet", theme.dim()));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }

    let mut input = app.chat.input.clone();
    input.set_block(block(
        Line::from(vec![Span::raw(format!(
            " {} says (enter sends, alt-enter new line) ",
            c.experimenter
        ))]),
        true,
        theme,
    ));
    input.set_cursor_line_style(theme.base());
    frame.render_widget(&input, input_area);
}
