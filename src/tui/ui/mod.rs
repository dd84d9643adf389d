//! The frame around the screens (tabs, key bar, help overlay, the too-small notice) and the widgets
//! the screens share. Drawing is a pure function of the [`App`]; it returns what it drew where.

mod help;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

use super::app::{App, DEMO_STEPS, Screen};
use super::keys::Command;
use super::screens::{Component, Hits};

pub use super::widgets::{block, centered, fit, pad, popup, score_text};

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// Draws the app; returns what it drew where, for the mouse and the scrolling of tail-anchored text.
pub fn draw(frame: &mut Frame, app: &App) -> Hits {
    let hits = draw_screen(frame, app);
    inert_cells(frame.buffer_mut());
    hits
}

/// The TUI's gate: every cell of a drawn frame that holds a character a terminal would act on (a
/// control character, a bidirectional override) is blanked before the frame is sent. ratatui already
/// drops such graphemes when it sets text; this holds whatever drew the cell.
pub fn inert_cells(buffer: &mut ratatui::buffer::Buffer) {
    for cell in &mut buffer.content {
        if cell.symbol().chars().any(crate::text::acts_on_terminal) {
            // Such a character takes no column, so it is joined to the one before it in the same
            // cell: that one stays (a name with a bidi isolate in a title lost its last letter),
            // unless what is left would itself take no column.
            let kept: String = cell
                .symbol()
                .chars()
                .filter(|&c| !crate::text::acts_on_terminal(c))
                .collect();
            let shows = kept
                .chars()
                .next()
                .is_some_and(|c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0) > 0);
            cell.set_symbol(if shows { &kept } else { " " });
        } else if let Some(joined) = stray_joiners_dropped(cell.symbol()) {
            cell.set_symbol(if joined.is_empty() { " " } else { &joined });
        } else if let Some(letters) = flag_letters(cell.symbol()) {
            cell.set_symbol(&letters);
        }
    }
}

/// A flag (two regional indicators, 🇯🇵) as its two letters, JP (`None` for a cell without one). The
/// layout counts a flag two columns, as one character; terminals differ (tmux gives each indicator a
/// cell of its own), and then the line runs a column long and leaves stray halves behind. The
/// letters take the two columns everywhere.
fn flag_letters(symbol: &str) -> Option<String> {
    let indicator = |c: char| ('\u{1f1e6}'..='\u{1f1ff}').contains(&c);
    if !symbol.chars().any(indicator) {
        return None;
    }
    Some(
        symbol
            .chars()
            .map(|c| match indicator(c) {
                true => char::from(b'A' + (c as u32 - 0x1f1e6) as u8),
                false => c,
            })
            .collect(),
    )
}

/// A cell's text without the zero-width joiners that join no two pictographs (`None` when it has
/// none). A terminal joins such a joiner with the next cell's character, and then the two disagree
/// on columns: a border drawn one column off, stray glyphs left after a screen switch. An emoji's
/// own joiners (a family, a profession) stay: there terminals and the layout agree.
fn stray_joiners_dropped(symbol: &str) -> Option<String> {
    const ZWJ: char = '\u{200d}';
    if !symbol.contains(ZWJ) {
        return None;
    }
    // Emoji and the symbol blocks they come from (arrows to ⬛), © ® ™ and the like.
    let pictograph = |c: Option<&char>| {
        c.is_some_and(|&c| {
            c as u32 >= 0x1F000
                || ('\u{2190}'..='\u{2BFF}').contains(&c)
                || matches!(
                    c,
                    '\u{a9}'
                        | '\u{ae}'
                        | '\u{203c}'
                        | '\u{2049}'
                        | '\u{2122}'
                        | '\u{2139}'
                        | '\u{3030}'
                        | '\u{303d}'
                        | '\u{3297}'
                        | '\u{3299}'
                )
        })
    };
    // A joiner's left neighbour is the emoji before any presentation selector or skin tone.
    let modifier = |c: char| c == '\u{fe0f}' || ('\u{1f3fb}'..='\u{1f3ff}').contains(&c);
    let chars: Vec<char> = symbol.chars().collect();
    let before = |i: usize| chars[..i].iter().rev().find(|c| !modifier(**c));
    let stray = |i: usize| !(pictograph(before(i)) && pictograph(chars.get(i + 1)));
    let kept: String = chars
        .iter()
        .enumerate()
        .filter(|&(i, &c)| c != ZWJ || !stray(i))
        .map(|(_, &c)| c)
        .collect();
    (kept.len() != symbol.len()).then_some(kept)
}

fn draw_screen(frame: &mut Frame, app: &App) -> Hits {
    let area = frame.area();
    let theme = app.theme();
    frame.render_widget(Block::default().style(theme.base()), area);
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = vec![
            Line::styled("incharacter", theme.title()),
            Line::raw(""),
            Line::raw(format!(
                "Please enlarge the terminal to at least {MIN_WIDTH}×{MIN_HEIGHT} (now {}×{}).",
                area.width, area.height
            )),
            Line::styled("ctrl-c quits", theme.dim()),
        ];
        // What the status line would say (a quit that would lose edits asks first): said here too.
        let mut text = text;
        if let Some(flash) = &app.flash {
            text.push(Line::raw(""));
            text.push(Line::styled(flash.clone(), theme.title()));
        }
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return Hits {
            too_small: true,
            ..Hits::default()
        };
    }
    let [tabs, main, status] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0), Constraint::Length(1)]).areas(area);
    let ctx = app.ctx();
    let screen = app.component();
    let mut hits = screen.render(frame, main, &ctx);
    hits.tabs = render_tabs(frame, app, tabs);
    let hints = match &app.reassess {
        Some(dialog) => {
            dialog.render(frame, main, &ctx);
            dialog.hints(&ctx)
        }
        None => screen.hints(&ctx),
    };
    hits.covered = render_status(frame, app, hints, status);
    if app.help {
        help::render(frame, app, main);
    }
    hits
}

/// Draws the app where what it drew does not matter (snapshots, benchmarks).
pub fn render(frame: &mut Frame, app: &App) {
    draw(frame, app);
}

fn render_tabs(frame: &mut Frame, app: &App, area: Rect) -> Vec<(Rect, Screen)> {
    let theme = app.theme();
    // The tabs take what they need: the product name goes first, then the long titles.
    // Titles: whole, short ("Insp."), or their first three letters on the narrowest terminals.
    // Each tab's key on this screen: its digit, or its F-key where digits are typed (Chat, Annotate).
    let mode = app.screen.mode();
    let bindings = app.keymap.bindings(mode);
    let keys: Vec<String> = Screen::TABS
        .iter()
        .map(|s| {
            let bound = bindings.iter().find(|(_, c)| *c == s.go());
            // The shortest of its keys: `1` rather than `f2`, where both work.
            bound
                .and_then(|(k, _)| k.split(' ').min_by_key(|k| k.len()))
                .unwrap_or("–")
                .to_string()
        })
        .collect();
    let label = |i: usize, s: &Screen, size: u8| {
        let key = &keys[i];
        match size {
            0 => format!(" {key} {} ", s.title()),
            1 => format!(" {key} {} ", s.short_title()),
            2 => format!(" {key} {} ", s.title().chars().take(3).collect::<String>()),
            // F-keys at 80 columns: the key and two letters no other tab has, so all ten fit.
            _ => format!("{key} {} ", s.tiny_title()),
        }
    };
    let width = |size: u8| -> u16 {
        Screen::TABS
            .iter()
            .enumerate()
            .map(|(i, s)| label(i, s, size).chars().count() as u16 + 1)
            .sum()
    };
    let short = (0..3).find(|&size| width(size) <= area.width).unwrap_or(3);
    let named = width(short) + 13 <= area.width;
    let mut spans = Vec::new();
    let mut hits = Vec::new();
    let mut x = area.x;
    if named {
        spans.push(Span::styled(" incharacter ", theme.title()));
        x += 13;
    }
    for (i, s) in Screen::TABS.iter().enumerate() {
        let label = label(i, s, short);
        let width = label.chars().count() as u16;
        let style = if *s == app.screen {
            theme.selected().add_modifier(Modifier::BOLD)
        } else {
            theme.dim()
        };
        hits.push((Rect::new(x, area.y, width.min(area.right().saturating_sub(x)), 1), *s));
        x += width + 1;
        spans.push(Span::styled(label, style));
        spans.push(Span::raw(" "));
    }
    let session = &app.run.session;
    if !session.id.is_empty() {
        let model = session
            .providers
            .get("rpa")
            .or_else(|| session.providers.get("subject"))
            .map(|m| format!(" · {}", m.model))
            .unwrap_or_default();
        // What room the tabs leave: the model goes first, then the id is cut with an ellipsis.
        let room = usize::from(area.right().saturating_sub(x));
        let whole = format!(" session {}{model}", session.id);
        let shown = if whole.chars().count() <= room {
            whole
        } else {
            crate::text::fit(&format!(" session {}", session.id), room)
        };
        if room >= 12 {
            spans.push(Span::styled(shown, theme.dim()));
        }
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
    hits
}

/// The most rows a long flash message takes: it covers the bottom of the screen above the status line
/// until the next key, so that an error is read whole rather than cut at the terminal's edge.
const FLASH_ROWS: usize = 3;

/// The keys that matter on this screen, then the flash message.
/// The rows above the status line a long message covers, if it does.
fn render_status(frame: &mut Frame, app: &App, essentials: Vec<(String, &str)>, area: Rect) -> Option<Rect> {
    let theme = app.theme();
    let key = |c: Command| app.keymap.key_for(app.screen.mode(), c);
    let mut lead = Vec::new();
    if let Some(d) = &app.demo
        && d.step + 1 < DEMO_STEPS.len()
    {
        lead.push(Span::styled(format!(" {} ", key(Command::DemoNext)), theme.selected()));
        lead.push(Span::styled(" next step  ", Style::default().fg(theme.accent)));
    }
    if let Some(f) = &app.flash
        && let Some(over) = render_long_flash(frame, app, f, &lead, area)
    {
        return (over.height > 1).then_some(Rect {
            height: over.height - 1,
            ..over
        });
    }
    // Whole chips only: when they do not all fit, quit goes first, then the screen's own keys from the
    // last; help, which lists them all, stays.
    let chip_width = |(k, what): &(&str, &str)| {
        unicode_width::UnicodeWidthStr::width(*k) + unicode_width::UnicodeWidthStr::width(*what) + 5
    };
    let room = usize::from(area.width).saturating_sub(lead.iter().map(Span::width).sum::<usize>());
    let mut chips: Vec<(&str, &str)> = essentials.iter().map(|(k, w)| (k.as_str(), *w)).collect();
    let help = (if app.typing() { "f1" } else { "?" }, "help");
    let mut quit = true;
    loop {
        let fixed = chip_width(&help) + if quit { chip_width(&("ctrl-c", "quit")) } else { 0 };
        if chips.iter().map(chip_width).sum::<usize>() + fixed <= room || (chips.is_empty() && !quit) {
            break;
        }
        if quit {
            quit = false;
        } else {
            chips.pop();
        }
    }
    chips.push(help);
    if quit {
        chips.push(("ctrl-c", "quit"));
    }
    let mut spans = Vec::new();
    for (k, what) in chips {
        spans.push(Span::styled(format!(" {k} "), theme.selected()));
        spans.push(Span::styled(format!(" {what}  "), theme.dim()));
    }
    if let Some(f) = &app.flash {
        // A message that would be cut off takes the place of the key chips (? still lists them).
        let width = |spans: &[Span]| spans.iter().map(Span::width).sum::<usize>();
        if width(&lead) + width(&spans) + unicode_width::UnicodeWidthStr::width(f.as_str()) > usize::from(area.width) {
            spans.clear();
        }
        spans.push(Span::styled(f.clone(), Style::default().fg(theme.accent)));
    }
    lead.extend(spans);
    frame.render_widget(Paragraph::new(Line::from(lead)), area);
    None
}

/// A flash message longer than the status line's row beside `lead`: drawn wrapped on as many rows as
/// it needs (up to [`FLASH_ROWS`], the last ending with an ellipsis when more is left), the rows above
/// the status line cleared for it: the area drawn. `None` when it fits on the row (the chips may still
/// give way to it).
fn render_long_flash(frame: &mut Frame, app: &App, flash: &str, lead: &[Span], area: Rect) -> Option<Rect> {
    let lead_width: usize = lead.iter().map(Span::width).sum();
    let width = usize::from(area.width).saturating_sub(lead_width);
    if unicode_width::UnicodeWidthStr::width(flash) <= width || width < 2 {
        return None;
    }
    let mut rows = crate::tui::wrap::wrap(flash, width);
    let room = FLASH_ROWS.min(usize::from(area.y) + 1);
    if rows.len() > room {
        let rest = rows[room - 1..].join(" ");
        rows.truncate(room - 1);
        rows.push(crate::text::fit(&rest, width));
    }
    let accent = Style::default().fg(app.theme().accent);
    let indent = " ".repeat(lead_width);
    let lines: Vec<Line> = rows
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let mut spans = if i == 0 {
                lead.to_vec()
            } else {
                vec![Span::raw(indent.clone())]
            };
            spans.push(Span::styled(row, accent));
            Line::from(spans)
        })
        .collect();
    let height = lines.len() as u16;
    let over = Rect {
        y: area.y + 1 - height,
        height,
        ..area
    };
    frame.render_widget(ratatui::widgets::Clear, over);
    frame.render_widget(Paragraph::new(lines).style(app.theme().base()), over);
    Some(over)
}
