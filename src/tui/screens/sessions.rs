//! The sessions screen: those in the data dir and the bundled samples; open, replay (1× / 4× /
//! instant), export, resume, and two or more marked side by side. It owns the list as last read.

use std::path::PathBuf;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{Component, Ctx, Hits, ListId, Request};
use crate::analysis::compare::{Comparison, Paired};
use crate::study::interview::results::{Interval, SummaryRow};
use crate::tui::keys::Command;
use crate::tui::vocab::Replay;
use crate::tui::vocab::{Effect, Screen};
use crate::tui::widgets::{ListView, block, fit, pad};

pub use crate::session::SessionEntry;

#[derive(Debug, Clone, Default)]
pub struct Sessions {
    pub list: Vec<SessionEntry>,
    pub cursor: usize,
    pub marked: Vec<usize>,
    pub speed: Option<Replay>,
    /// Side-by-side summaries of the marked sessions (with their 95% intervals).
    pub comparison: Vec<(String, Vec<SummaryRow>)>,
    /// Exactly two marked: the first against the second, paired (or why they cannot be).
    pub paired: Option<Result<Comparison, String>>,
    pub view: ListView,
    /// Session folders the listing left out, with why (a damaged journal, say: file:line:column).
    pub unlisted: Vec<(PathBuf, String)>,
}

impl Sessions {
    /// The list as read again: the cursor and the marks stay on the sessions they were on, wherever
    /// those are now (sessions made or removed since move the rows). A marked session that is gone
    /// is unmarked, and the side-by-side view of the marks is dropped with it.
    pub fn set_list(&mut self, list: Vec<SessionEntry>) {
        let at = |path: &PathBuf| list.iter().position(|e| &e.path == path);
        let cursor = self.list.get(self.cursor).and_then(|e| at(&e.path));
        let marked: Vec<usize> = self
            .marked
            .iter()
            .filter_map(|&m| self.list.get(m).and_then(|e| at(&e.path)))
            .collect();
        if marked.len() != self.marked.len() {
            self.comparison.clear();
            self.paired = None;
        }
        self.marked = marked;
        self.cursor = cursor.unwrap_or(self.cursor).min(list.len().saturating_sub(1));
        self.list = list;
    }

    /// A click on the list puts the cursor on the row.
    pub fn click(&mut self, row: Option<usize>) {
        if let Some(row) = row {
            self.cursor = row.min(self.list.len().saturating_sub(1));
        }
    }

    pub fn command(&mut self, cmd: Command) -> Vec<Request> {
        let len = self.list.len();
        match cmd {
            Command::Up => self.cursor = self.cursor.saturating_sub(1),
            Command::Down => self.cursor = (self.cursor + 1).min(len.saturating_sub(1)),
            Command::Top => self.cursor = 0,
            Command::Bottom => self.cursor = len.saturating_sub(1),
            Command::Mark => {
                if let Some(p) = self.marked.iter().position(|&m| m == self.cursor) {
                    self.marked.remove(p);
                } else if len > 0 {
                    self.marked.push(self.cursor);
                }
                let paths: Vec<PathBuf> = self.marked.iter().map(|&m| self.list[m].path.clone()).collect();
                self.paired = None;
                if paths.len() >= 2 {
                    return vec![Effect::Compare(paths).into()];
                }
                self.comparison.clear();
            }
            Command::Speed => {
                let next = self.speed.unwrap_or(Replay::Speed(1.0)).next();
                self.speed = Some(next);
                return vec![Request::Flash(format!("replay speed: {}", next.label()))];
            }
            Command::Select => {
                if let Some(e) = self.list.get(self.cursor) {
                    return vec![Effect::Open(e.path.clone()).into()];
                }
            }
            Command::Replay => {
                if let Some(e) = self.list.get(self.cursor) {
                    let speed = self.speed.unwrap_or(Replay::Speed(1.0));
                    return vec![
                        Request::Show(Screen::Live),
                        Request::Start {
                            replay: Some(speed),
                            follow: true,
                        },
                        Effect::Replay {
                            path: e.path.clone(),
                            speed,
                        }
                        .into(),
                    ];
                }
            }
            Command::Reassess => {
                if let Some(e) = self.list.get(self.cursor) {
                    return vec![Effect::OfferReassess(e.path.clone()).into()];
                }
            }
            Command::Export => {
                if let Some(e) = self.list.get(self.cursor) {
                    return vec![Effect::Export(e.path.clone()).into()];
                }
            }
            Command::Resume => {
                if let Some(e) = self.list.get(self.cursor) {
                    // Asked now, not as listed: another process may have started or ended since.
                    let writer = crate::journal::writer(&e.path.join("journal.jsonl"));
                    let refusal = if e.sample {
                        "sample sessions are read-only: replay them instead (r)".to_string()
                    } else if e.status == "complete" {
                        "this session is complete".to_string()
                    } else if let Some(w) = writer {
                        match w.pid == std::process::id() {
                            true => "this workbench is running this session: Live shows it, and stops it".to_string(),
                            false => format!(
                                "this session is being written by another incharacter (pid {}): wait for it to end, or stop it",
                                w.pid
                            ),
                        }
                    } else {
                        return vec![
                            Request::Show(Screen::Live),
                            Request::Start {
                                replay: None,
                                follow: false,
                            },
                            Effect::Resume { id: e.id.clone() }.into(),
                        ];
                    };
                    return vec![Request::Flash(refusal)];
                }
            }
            _ => {}
        }
        Vec::new()
    }
}

impl Sessions {
    /// `shown` lines naming the folders the listing left out and why, the last one saying how many
    /// more there are when they do not all fit.
    fn unlisted_lines(&self, shown: usize, width: usize, ctx: &Ctx) -> Vec<Line<'static>> {
        let theme = ctx.theme;
        let more = self.unlisted.len() - shown;
        self.unlisted
            .iter()
            .take(shown)
            .enumerate()
            .map(|(i, (path, why))| {
                let text = if more > 0 && i + 1 == shown {
                    format!(
                        "   not listed: {} more folders whose journals cannot be read (`incharacter sessions` names each)",
                        more + 1
                    )
                } else {
                    // The reason names the journal by its whole path: the folder's is said once.
                    // Escaped, as the reason says it: a name with a sequence in it shows what it holds.
                    let folder = path.file_name().map(|n| crate::text::visible(&n.to_string_lossy())).unwrap_or_default();
                    let why = why.replace(&format!("{}/", path.display()), "");
                    format!("   not listed: {folder}: {why}")
                };
                Line::styled(fit(&text, width), theme.fg(theme.warning))
            })
            .collect()
    }
}

impl Component for Sessions {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        vec![
            (ctx.key(Command::Select), "open"),
            (ctx.key(Command::Replay), "replay"),
            (ctx.key(Command::Speed), "speed"),
            (ctx.key(Command::Mark), "mark"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let theme = ctx.theme;
        let compare_height = if self.comparison.is_empty() {
            0
        } else {
            (area.height / 2).max(8)
        };
        let [list_area, compare_area] =
            Layout::vertical([Constraint::Min(6), Constraint::Length(compare_height)]).areas(area);
        let speed = self.speed.unwrap_or(Replay::Speed(1.0)).label();
        let not_listed = match self.unlisted.len() {
            0 => String::new(),
            n => format!(" · {n} not listed"),
        };
        let b = block(
            format!(" Sessions ({}){not_listed} · replay speed {speed} ", self.list.len()),
            true,
            theme,
        );
        let inner = b.inner(list_area);
        frame.render_widget(b, list_area);
        // The folders left out, each with why, at the foot of the list (at most a third of it).
        let shown = self.unlisted.len().min((inner.height / 3) as usize);
        let [inner, foot] = Layout::vertical([Constraint::Min(1), Constraint::Length(shown as u16)]).areas(inner);
        frame.render_widget(
            Paragraph::new(self.unlisted_lines(shown, foot.width as usize, ctx)),
            foot,
        );
        if self.list.is_empty() {
            frame.render_widget(
                Paragraph::new(vec![
                    Line::raw("No sessions yet."),
                    Line::styled(
                        "Start a run from Setup (1), or `incharacter run …` headless.",
                        theme.dim(),
                    ),
                ]),
                inner,
            );
            return Hits::default();
        }
        let height = inner.height.saturating_sub(1) as usize;
        let first = self.view.first(self.list.len(), self.cursor, height);
        let rows_area = Rect {
            y: inner.y + 1,
            height: inner.height.saturating_sub(1),
            ..inner
        };
        let hits = Hits::list(rows_area, first, ListId::Sessions);
        let width = inner.width as usize;
        // Ids are what `report`, `export` and `replay` take: as wide as the longest, leaving the model 27.
        let longest = self.list.iter().map(|e| e.id.chars().count()).max().unwrap_or(2);
        let id_width = longest.min(width.saturating_sub(3 + 14 + 17 + 1 + 27)).max(20);
        let mut lines = vec![Line::styled(
            format!(
                "   {} {} {} model",
                pad("id", id_width),
                pad("status", 13),
                pad("created", 16)
            ),
            theme.dim(),
        )];
        for (i, e) in self.list.iter().enumerate().skip(first).take(height) {
            let marked = self.marked.contains(&i);
            let style = if i == self.cursor {
                theme.selected()
            } else {
                theme.base()
            };
            let status_style = match e.status.as_str() {
                "complete" => theme.fg(theme.positive),
                "interrupted" | "complete with failures" => theme.fg(theme.warning),
                _ => theme.dim(),
            };
            let tag = if e.sample { " sample" } else { "" };
            lines.push(Line::from(vec![
                Span::styled(if marked { " ● " } else { "   " }, theme.fg(theme.accent)),
                Span::styled(pad(&e.id, id_width), style),
                Span::raw(" "),
                Span::styled(pad(e.short_status(), 13), status_style),
                Span::raw(" "),
                // To the minute, in the journal's UTC: "2026-11-29 20:15".
                Span::raw(pad(
                    &e.created.replace('T', " ").chars().take(16).collect::<String>(),
                    16,
                )),
                Span::raw(" "),
                Span::raw(fit(&format!("{}{tag}", e.model), width.saturating_sub(id_width + 35))),
            ]));
        }
        frame.render_widget(Paragraph::new(lines), inner);

        if !self.comparison.is_empty() {
            render_comparison(frame, compare_area, &self.comparison, self.paired.as_ref(), ctx);
        }
        hits
    }
}

/// The marked sessions side by side: Acc_Dim and MAE per scale × method with their 95% intervals over
/// characters; with exactly two, their paired comparison below.
fn render_comparison(
    frame: &mut Frame,
    area: Rect,
    comparison: &[(String, Vec<SummaryRow>)],
    paired: Option<&Result<Comparison, String>>,
    ctx: &Ctx,
) {
    let theme = ctx.theme;
    let col = 24;
    // The sessions whose columns fit; the others said, not cut off without a word.
    let fit_columns = usize::from(area.width.saturating_sub(2)).saturating_sub(30) / col;
    let title = if comparison.len() > fit_columns {
        let (shown, of) = (fit_columns, comparison.len());
        crate::tui::widgets::first_fitting(
            [
                format!(
                    " Side by side (95% bootstrap interval over characters): {shown} of {of} shown, widen the terminal \
                     or mark fewer "
                ),
                format!(" Side by side (95% intervals): {shown} of {of} shown, widen the terminal or mark fewer "),
                format!(" Side by side: {shown} of {of} shown, widen the terminal or mark fewer "),
            ],
            usize::from(area.width.saturating_sub(2)),
        )
        .unwrap_or_else(|| {
            crate::text::fit(
                &format!(" Side by side: {shown} of {of} shown"),
                usize::from(area.width.saturating_sub(2)),
            )
        })
    } else {
        " Side by side (95% bootstrap interval over characters) ".to_string()
    };
    let b = block(title, false, theme);
    let inner = b.inner(area);
    frame.render_widget(b, area);
    let mut keys: Vec<(String, String)> = Vec::new();
    for (_, rows) in comparison {
        for r in rows {
            let k = (r.scale.clone(), r.method.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let mut header = format!("{} ", pad("scale × method", 30));
    for (id, _) in comparison {
        header.push_str(&pad(&fit(id, col - 1), col));
    }
    let mut lines = vec![Line::styled(header, theme.dim())];
    let cell = |i: Option<&Interval>, v: Option<f64>| match i {
        Some(i) => i.cell(),
        None => v.map_or("–".into(), |v| format!("{v:.3}")),
    };
    for (scale, method) in keys {
        for figure in ["Acc_Dim", "MAE"] {
            let name = if figure == "Acc_Dim" {
                format!("{scale} {method}")
            } else {
                String::new()
            };
            let mut line = format!("{} {:<8}", pad(&name, 21), figure);
            for (_, rows) in comparison {
                let text =
                    rows.iter()
                        .find(|r| r.scale == scale && r.method == method)
                        .map_or("–".to_string(), |r| {
                            let i = r.intervals.as_ref();
                            if figure == "Acc_Dim" {
                                cell(i.map(|i| &i.acc_dim), r.acc_dim)
                            } else {
                                cell(i.map(|i| &i.mae), r.mae)
                            }
                        });
                line.push_str(&pad(&text, col));
            }
            lines.push(Line::raw(line));
        }
    }
    match paired {
        Some(Ok(c)) => {
            let figure = |name: &str, p: &Paired| {
                let signed = |x| crate::text::decimals(x, 3, true);
                let ci =
                    p.ci.map_or("–".into(), |[lo, hi]| format!("[{}, {}]", signed(lo), signed(hi)));
                format!("{name} B − A {} {ci} p {:.3}", signed(p.diff), p.p)
            };
            lines.push(Line::styled(
                format!(
                    "paired, B − A over {} character × dimension pairs of {} character(s) (A: the first marked):",
                    c.n, c.characters
                ),
                theme.title(),
            ));
            lines.push(Line::raw(format!(
                "  {}  ·  {}",
                figure("MAE", &c.mean_abs_error),
                figure("Acc_Dim", &c.acc_dim)
            )));
        }
        Some(Err(e)) => lines.push(Line::styled(format!("paired: {e}"), theme.dim())),
        None => {}
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str) -> SessionEntry {
        SessionEntry {
            id: id.into(),
            name: None,
            created: String::new(),
            status: "complete".into(),
            model: String::new(),
            models: Default::default(),
            path: PathBuf::from("/data/sessions").join(id),
            sample: false,
        }
    }

    fn list(ids: &[&str]) -> Vec<SessionEntry> {
        ids.iter().map(|id| entry(id)).collect()
    }

    #[test]
    fn the_cursor_and_the_marks_follow_their_sessions_when_the_list_is_read_again() {
        let mut s = Sessions::default();
        s.set_list(list(&["c", "b", "a"]));
        s.cursor = 1; // b
        s.marked = vec![0, 2]; // c, a
        s.comparison = vec![("c".into(), Vec::new()), ("a".into(), Vec::new())];
        // Two sessions made since sort first; the rows move, the cursor and marks with them.
        s.set_list(list(&["e", "d", "c", "b", "a"]));
        assert_eq!(s.list[s.cursor].id, "b");
        let marked: Vec<&str> = s.marked.iter().map(|&m| s.list[m].id.as_str()).collect();
        assert_eq!(marked, ["c", "a"]);
        assert_eq!(s.comparison.len(), 2, "the same sessions are marked: their view stays");
        // A marked session removed: unmarked, and its side-by-side view dropped.
        s.set_list(list(&["e", "d", "b"]));
        assert_eq!(s.list[s.cursor].id, "b");
        assert!(s.marked.is_empty(), "c and a are gone");
        assert!(s.comparison.is_empty() && s.paired.is_none());
        // The cursor's own session removed: it stays in the list's bounds.
        s.cursor = 2;
        s.set_list(list(&["e"]));
        assert_eq!(s.cursor, 0);
    }

    /// `u` refuses a complete session, but one complete with failures resumes as `--resume` does
    /// (which asks its failed items again).
    #[test]
    fn a_session_complete_with_failures_resumes() {
        let mut s = Sessions::default();
        let mut failed = entry("f");
        failed.status = "complete with failures".into();
        s.set_list(vec![entry("c"), failed]);
        let refused = s.command(Command::Resume);
        assert!(
            matches!(refused.as_slice(), [Request::Flash(m)] if m == "this session is complete"),
            "{refused:?}"
        );
        s.cursor = 1;
        let resumed = s.command(Command::Resume);
        assert!(
            resumed
                .iter()
                .any(|r| matches!(r, Request::Effect(Effect::Resume { id }) if id == "f")),
            "{resumed:?}"
        );
    }
}
