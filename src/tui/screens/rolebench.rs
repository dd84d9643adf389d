//! The RoleBench screen: pick a question file (from `<data dir>/rolebench/`) and roles, then watch the answers
//! stream; for the selected question, the answer beside its best reference with their longest common
//! subsequence highlighted, Rouge-L, the judge's verdicts, and per-role Rouge-L F and win-rate bars.
//! It owns the question file loaded, the roles picked and the question shown.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::{Component, Ctx, Hits, Request, move_cursor};
use crate::domain::rouge;
use crate::method::rolebench::Question;
use crate::study::rolebench::{self, Item, Step};
use crate::tui::keys::Command;
use crate::tui::run_view::RunView;
use crate::tui::theme::Theme;
use crate::tui::vocab::Effect;
use crate::tui::widgets::{block, fit, pad};

/// Question counts the screen cycles through (`None`: every question).
pub const RB_LIMITS: [Option<usize>; 4] = [Some(10), Some(20), Some(50), None];

/// A question file and roles to pick before a run; a session's questions after.
#[derive(Debug, Clone, Default)]
pub struct Rolebench {
    /// Question files found in `<data dir>/rolebench/`.
    pub files: Vec<PathBuf>,
    /// The file whose questions are loaded, and its questions.
    pub loaded: Option<(PathBuf, Vec<Question>)>,
    /// Roles of the loaded file with their question counts.
    pub roles: Vec<(String, usize)>,
    pub picked: BTreeSet<String>,
    /// Index into [`RB_LIMITS`].
    pub limit: usize,
    /// 0: files, 1: roles, 2: questions.
    pub pane: usize,
    pub file_cursor: usize,
    pub role_cursor: usize,
    pub item: usize,
    pub scroll: u16,
}

impl Rolebench {
    /// The view of a run about to start: its first item, on the answers' pane, no file's view.
    pub fn fresh(&mut self) {
        self.item = 0;
        self.pane = 2;
        self.loaded = None;
    }

    pub fn set_files(&mut self, files: Vec<PathBuf>) {
        self.files = files;
        self.file_cursor = self.file_cursor.min(self.files.len().saturating_sub(1));
    }

    /// A question file read: its roles are offered; returns what the status line says.
    pub fn loaded(&mut self, path: PathBuf, result: Result<Vec<Question>, String>) -> String {
        let questions = match result {
            Ok(questions) => questions,
            Err(e) => return e.to_string(),
        };
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for q in &questions {
            *counts.entry(q.role.clone()).or_default() += 1;
        }
        self.roles = counts.into_iter().collect();
        self.picked.clear();
        self.role_cursor = 0;
        self.pane = 1;
        let note = format!(
            "{} questions, {} roles: space picks roles, ctrl-r starts",
            questions.len(),
            self.roles.len()
        );
        self.loaded = Some((path, questions));
        note
    }

    pub fn command(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        let session = ctx.run.rolebench.as_ref().map_or(0, |p| p.questions.len());
        let (cursor, len) = match self.pane {
            0 => (&mut self.file_cursor, self.files.len()),
            1 => (&mut self.role_cursor, self.roles.len()),
            _ => (&mut self.item, session),
        };
        if move_cursor(cmd, cursor, len) {
            self.scroll = 0;
            return Vec::new();
        }
        match cmd {
            Command::ScrollUp => self.scroll = self.scroll.saturating_add(5),
            Command::ScrollDown => self.scroll = self.scroll.saturating_sub(5),
            Command::NextPane => self.pane = (self.pane + 1) % 3,
            Command::PrevPane => self.pane = (self.pane + 2) % 3,
            Command::Limit => {
                self.limit = (self.limit + 1) % RB_LIMITS.len();
                return vec![Request::Flash(match RB_LIMITS[self.limit] {
                    Some(n) => format!("a seeded sample of {n} questions"),
                    None => "every question of the picked roles".into(),
                })];
            }
            Command::Select if self.pane == 0 => {
                if let Some(path) = self.files.get(self.file_cursor) {
                    return vec![Effect::LoadRolebench(path.clone()).into()];
                }
            }
            Command::Toggle | Command::Select if self.pane == 1 => {
                if let Some((role, _)) = self.roles.get(self.role_cursor)
                    && !self.picked.remove(role)
                {
                    self.picked.insert(role.clone());
                }
            }
            Command::Select => self.scroll = 0,
            Command::Start => return self.start(ctx),
            _ => {}
        }
        Vec::new()
    }

    fn start(&mut self, ctx: &Ctx) -> Vec<Request> {
        let Some((path, questions)) = &self.loaded else {
            return vec![Request::Flash("pick a question file first (enter on a file)".into())];
        };
        if self.picked.is_empty() {
            return vec![Request::Flash("pick at least one role (space)".into())];
        }
        let choice = crate::study::rolebench::Choice {
            data: &path.display().to_string(),
            roles: self.picked.iter().cloned().collect(),
            types: Vec::new(),
            limit: RB_LIMITS[self.limit],
            seed: 0,
            rpa: ctx.setup.rpa.clone(),
            style: ctx.setup.style,
            judge: None,
        };
        match crate::study::rolebench::plan(ctx.catalog, questions.clone(), choice) {
            Ok((plan, notes)) => {
                let mut requests = vec![
                    Request::Fresh(crate::tui::vocab::Screen::Rolebench),
                    Request::ClearRun,
                    Request::Start {
                        replay: None,
                        follow: false,
                    },
                ];
                requests.extend(notes.into_iter().next().map(Request::Flash));
                requests.push(Effect::StartRolebench { plan: Box::new(plan) }.into());
                requests
            }
            Err(e) => vec![Request::Flash(e)],
        }
    }
}

/// The session's questions with their answers and scores so far.
fn items(run: &RunView) -> Vec<Item> {
    match &run.rolebench {
        Some(plan) => rolebench::items_of(plan, run.rolebench_steps.iter().collect()),
        None => Vec::new(),
    }
}

impl Component for Rolebench {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        vec![
            (ctx.key(Command::Toggle), "role"),
            (ctx.key(Command::Limit), "limit"),
            (ctx.key(Command::Start), "start"),
            (ctx.key(Command::NextPane), "pane"),
        ]
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let [left, right] = Layout::horizontal([Constraint::Percentage(34), Constraint::Percentage(66)]).areas(area);
        let items = items(ctx.run);
        let [files, roles, questions] =
            Layout::vertical([Constraint::Length(5), Constraint::Length(8), Constraint::Min(3)]).areas(left);
        self.render_files(frame, ctx, files);
        self.render_roles(frame, ctx, roles);
        self.render_questions(frame, ctx, &items, questions);
        let [detail, bars] = Layout::vertical([Constraint::Min(8), Constraint::Length(8)]).areas(right);
        self.render_detail(frame, ctx, &items, detail);
        render_bars(frame, ctx.theme, &items, bars);
        Hits::default()
    }
}

impl Rolebench {
    fn render_files(&self, frame: &mut Frame, ctx: &Ctx, area: Rect) {
        let theme = ctx.theme;
        let b = block(" Question files (<data dir>/rolebench) ", self.pane == 0, theme);
        let width = area.width.saturating_sub(4) as usize;
        let lines: Vec<Line> = if self.files.is_empty() {
            vec![Line::styled(
                "no .jsonl yet: copy or link RoleBench question files into <data dir>/rolebench/",
                theme.dim(),
            )]
        } else {
            let loaded = self.loaded.as_ref().map(|(p, _)| p);
            self.files
                .iter()
                .enumerate()
                .skip(self.file_cursor.saturating_sub(2))
                .map(|(i, p)| {
                    let name = p
                        .file_name()
                        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
                    let parent = p
                        .parent()
                        .and_then(|d| d.file_name())
                        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
                    let mark = if Some(p) == loaded { "● " } else { "  " };
                    let text = fit(&format!("{mark}{parent}/{name}"), width);
                    if i == self.file_cursor && self.pane == 0 {
                        Line::styled(text, theme.selected())
                    } else {
                        Line::raw(text)
                    }
                })
                .collect()
        };
        // File rows are fitted already; only the hint needs wrapping.
        frame.render_widget(Paragraph::new(lines).block(b).wrap(Wrap { trim: false }), area);
    }

    fn render_roles(&self, frame: &mut Frame, ctx: &Ctx, area: Rect) {
        let theme = ctx.theme;
        let limit = match RB_LIMITS[self.limit] {
            Some(n) => format!("{n} questions"),
            None => "all questions".into(),
        };
        let b = block(format!(" Roles · {limit} (l) "), self.pane == 1, theme);
        let width = area.width.saturating_sub(4) as usize;
        let lines: Vec<Line> = if let (true, Some(plan)) = (self.roles.is_empty(), ctx.run.rolebench.as_ref()) {
            // The session shown, as it was planned: its file, roles, sample and seed.
            let file = Path::new(&plan.data)
                .file_name()
                .map_or(plan.data.clone(), |n| n.to_string_lossy().into_owned());
            let sample = match plan.limit {
                Some(n) => format!("a seeded sample of {n} (seed {})", plan.seed),
                None => "every question of its roles".into(),
            };
            [
                format!("this session: {file}"),
                format!("{} questions, {sample}", plan.questions.len()),
                if plan.roles.is_empty() {
                    "roles: every role of the file".into()
                } else {
                    format!("roles: {}", plan.roles.join(", "))
                },
                "enter on a file lists its roles for a new run".into(),
            ]
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                if i == 3 {
                    Line::styled(text, theme.dim())
                } else {
                    Line::raw(text)
                }
            })
            .collect()
        } else if self.roles.is_empty() {
            vec![Line::styled(fit("enter on a file lists its roles", width), theme.dim())]
        } else {
            let rows = area.height.saturating_sub(2) as usize;
            self.roles
                .iter()
                .enumerate()
                .skip(self.role_cursor.saturating_sub(rows.saturating_sub(1)))
                .map(|(i, (role, n))| {
                    let mark = if self.picked.contains(role) { "[x]" } else { "[ ]" };
                    // The role as the file names it (the plan asks it so), drawn without its escapes.
                    let role = crate::text::terminal_safe(role).replace('\n', " ");
                    let text = fit(&format!("{mark} {role} ({n})"), width);
                    if i == self.role_cursor && self.pane == 1 {
                        Line::styled(text, theme.selected())
                    } else {
                        Line::raw(text)
                    }
                })
                .collect()
        };
        // Role rows are fitted already; only the session's lines need wrapping.
        frame.render_widget(Paragraph::new(lines).block(b).wrap(Wrap { trim: false }), area);
    }

    fn render_questions(&self, frame: &mut Frame, ctx: &Ctx, items: &[Item], area: Rect) {
        let theme = ctx.theme;
        let answered = items.iter().filter(|i| i.response.is_some()).count();
        let b = block(format!(" Questions {answered}/{} ", items.len()), self.pane == 2, theme);
        let width = area.width.saturating_sub(4) as usize;
        let rows = area.height.saturating_sub(2) as usize;
        let streaming = ctx.run.streaming_turn.as_ref().map(|(p, _)| p.as_str());
        let lines: Vec<Line> = if items.is_empty() {
            vec![Line::styled(
                fit("pick roles, then ctrl-r starts a run with the setup's agent", width),
                theme.dim(),
            )]
        } else {
            items
                .iter()
                .enumerate()
                .skip(self.item.saturating_sub(rows.saturating_sub(1)))
                .take(rows)
                .map(|(i, item)| {
                    let (mark, style) = match (&item.best, &item.error) {
                        (Some((_, r)), _) => (format!("{:.2}", r.f), theme.fg(theme.positive)),
                        (None, Some(_)) => ("fail".into(), theme.fg(theme.error)),
                        _ if streaming.is_some_and(|p| p.ends_with(&format!(" line {}", item.line))) => {
                            ("  ▸ ".into(), theme.fg(theme.streaming))
                        }
                        _ => ("  · ".into(), theme.dim()),
                    };
                    let text = fit(&format!("{} {}", item.role, item.question), width.saturating_sub(6));
                    let line = Line::from(vec![
                        Span::styled(pad(&mark, 5), style),
                        Span::raw(" "),
                        Span::raw(text),
                    ]);
                    if i == self.item && self.pane == 2 {
                        line.style(theme.selected())
                    } else {
                        line
                    }
                })
                .collect()
        };
        frame.render_widget(Paragraph::new(lines).block(b), area);
    }
}

/// `text` as spans, the byte `ranges` in `hit` style.
fn highlighted<'a>(text: &str, ranges: &[Range<usize>], hit: Style) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    let mut at = 0;
    for r in ranges {
        if r.start < at || r.end > text.len() {
            continue;
        }
        if r.start > at {
            spans.push(Span::raw(text[at..r.start].to_string()));
        }
        spans.push(Span::styled(text[r.start..r.end].to_string(), hit));
        at = r.end;
    }
    if at < text.len() {
        spans.push(Span::raw(text[at..].to_string()));
    }
    spans
}

/// Spans as the lines their text was written in: a line break (`\n`, `\r\n` or `\r`) starts a
/// new line (drawn as one line, the words on either side of it would run together).
fn broken<'a>(spans: Vec<Span<'a>>) -> Vec<Line<'a>> {
    let mut lines = vec![Line::default()];
    for span in spans {
        let text = span.content.replace("\r\n", "\n").replace('\r', "\n");
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                lines.push(Line::default());
            }
            if let (false, Some(line)) = (part.is_empty(), lines.last_mut()) {
                line.push_span(Span::styled(part.to_string(), span.style));
            }
        }
    }
    lines
}

/// `text` in `style`, as the lines it was written in (see [`broken`]).
fn text_lines<'a>(text: &str, style: Style) -> Vec<Line<'a>> {
    broken(vec![Span::styled(text.to_string(), style)])
}

impl Rolebench {
    fn render_detail(&self, frame: &mut Frame, ctx: &Ctx, items: &[Item], area: Rect) {
        let theme = ctx.theme;
        let Some(item) = items.get(self.item) else {
            let b = block(" Answer and references ", false, theme);
            let text = vec![
                Line::raw(
                    "RoleBench (RoleLLM): the agent answers role-specific and general questions; Rouge-L compares \
                 each answer with the reference answers (the best F is kept), and a judge can compare it with a \
                 baseline in both orders (`incharacter rolebench --judge`).",
                ),
                Line::raw(""),
                Line::styled(
                    "Common words of answer and reference are highlighted once a question is answered.",
                    theme.dim(),
                ),
            ];
            frame.render_widget(Paragraph::new(text).block(b).wrap(Wrap { trim: false }), area);
            return;
        };
        let hit = theme
            .fg(theme.accent)
            .add_modifier(Modifier::BOLD | Modifier::UNDERLINED);
        let mut lines = vec![
            Line::from(vec![
                Span::styled(format!("{} · line {} ", item.role, item.line), theme.title()),
                Span::styled(item.types.join(", "), theme.dim()),
            ]),
            Line::styled(format!("Q: {}", item.question), theme.fg(theme.experimenter)),
            Line::raw(""),
        ];
        let streaming = ctx
            .run
            .streaming_turn
            .as_ref()
            .filter(|(p, _)| p.ends_with(&format!(" line {}", item.line)))
            .map(|(_, t)| t.as_str());
        // The answer as it came is what was scored; drawn, it is made safe (see `app::inert`).
        let shown = item.response.as_deref().map(crate::text::terminal_safe);
        match (&shown, &item.best) {
            (Some(answer), Some((best, score))) => {
                let reference = &item.references[*best];
                let language = rouge::detect(reference);
                let h = rouge::highlight(reference, answer, language);
                lines.push(Line::styled(
                    format!(
                        "Answer — Rouge-L P {:.3}  R {:.3}  F {:.3} (against reference {} of {})",
                        score.p,
                        score.r,
                        score.f,
                        best + 1,
                        item.references.len()
                    ),
                    theme.fg(theme.character),
                ));
                lines.extend(broken(highlighted(answer, &h.candidate, hit)));
                lines.push(Line::raw(""));
                lines.push(Line::styled(
                    format!("Reference {} (common subsequence highlighted)", best + 1),
                    theme.fg(theme.character),
                ));
                lines.extend(broken(highlighted(reference, &h.reference, hit)));
                for (i, other) in item.references.iter().enumerate().filter(|(i, _)| i != best) {
                    lines.push(Line::raw(""));
                    lines.push(Line::styled(format!("Reference {}", i + 1), theme.dim()));
                    lines.extend(text_lines(other, theme.dim()));
                }
            }
            (Some(answer), None) => {
                lines.push(Line::styled("Answer", theme.fg(theme.character)));
                lines.extend(text_lines(answer, Style::default()));
            }
            (None, _) => {
                if let Some(e) = &item.error {
                    lines.push(Line::styled(format!("failed: {}", e), theme.fg(theme.error)));
                } else if let Some(text) = streaming {
                    lines.push(Line::styled("Answer (streaming)", theme.fg(theme.streaming)));
                    lines.extend(text_lines(text, Style::default()));
                } else {
                    lines.push(Line::styled("not answered yet", theme.dim()));
                }
                for (i, r) in item.references.iter().enumerate() {
                    lines.push(Line::raw(""));
                    lines.push(Line::styled(format!("Reference {}", i + 1), theme.dim()));
                    lines.extend(text_lines(r, Style::default()));
                }
            }
        }
        if let Some(Step::Judged {
            agent_as_a,
            agent_as_b,
            score,
            failure,
            ..
        }) = &item.judge
        {
            lines.push(Line::raw(""));
            let verdict = |v: &Option<crate::method::rolebench::Verdict>| {
                v.as_ref().map_or("—".to_string(), |v| format!("{:?}", v.winner))
            };
            lines.push(Line::styled(
                format!(
                    "Judge: agent as A → {}, agent as B → {}; score {}{}",
                    verdict(agent_as_a),
                    verdict(agent_as_b),
                    score.map_or("—".into(), |s| format!("{s:.2}")),
                    failure.as_ref().map_or(String::new(), |f| format!(" ({})", f))
                ),
                theme.fg(theme.accent),
            ));
        }
        let b = block(" Answer and references ", false, theme);
        frame.render_widget(
            Paragraph::new(lines)
                .block(b)
                .wrap(Wrap { trim: false })
                .scroll((self.scroll, 0)),
            area,
        );
    }
}

fn bar(value: f64, width: usize) -> String {
    let filled = (value.clamp(0.0, 1.0) * width as f64).round() as usize;
    format!("{}{}", "█".repeat(filled), "░".repeat(width.saturating_sub(filled)))
}

fn render_bars(frame: &mut Frame, theme: &Theme, items: &[Item], area: Rect) {
    let totals = rolebench::totals(items);
    let b = block(" Per role: Rouge-L F · win rate ", false, theme);
    let width = area.width.saturating_sub(4) as usize;
    let name_width = (width / 4).clamp(8, 24);
    let bar_width = width.saturating_sub(name_width + 24) / 2;
    let mut lines: Vec<Line> = totals
        .rouge_l
        .by_role
        .iter()
        .map(|(role, m)| {
            let win = totals.win_rate_by_role.get(role);
            Line::from(vec![
                Span::raw(pad(&fit(&role.to_string(), name_width), name_width + 1)),
                Span::styled(bar(m.f, bar_width), theme.fg(theme.measured)),
                // A role with no answer yet has no F.
                Span::raw(m.of(m.f).map_or(" –     ".to_string(), |f| format!(" {f:.3} "))),
                Span::styled(
                    win.map_or(" ".repeat(bar_width), |w| bar(*w, bar_width)),
                    theme.fg(theme.label_pdb),
                ),
                Span::raw(win.map_or(String::new(), |w| format!(" {:.0} %", w * 100.0))),
            ])
        })
        .collect();
    if totals.rouge_l.overall.count == 0 {
        lines = vec![Line::styled("no answers yet", theme.dim())];
    } else {
        lines.push(Line::styled(
            format!(
                "all: F {:.3} over {} answered{}",
                totals.rouge_l.overall.f,
                totals.answered,
                totals.win_rate.map_or(String::new(), |w| format!(
                    "; win rate {:.1} % ({} judged)",
                    w * 100.0,
                    totals.judged
                ))
            ),
            theme.dim(),
        ));
    }
    frame.render_widget(Paragraph::new(lines).block(b), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paragraphs and CRLF lines of an answer stay lines, highlights kept where they were.
    #[test]
    fn an_answers_line_breaks_start_lines() {
        let hit = Style::default().add_modifier(ratatui::style::Modifier::BOLD);
        let text = "para one.\n\npara two.\r\nline three";
        let lines = broken(highlighted(text, &[5..8, 16..19], hit));
        let shown: Vec<String> = lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(shown, ["para one.", "", "para two.", "line three"]);
        let bold: Vec<&str> = lines
            .iter()
            .flat_map(|l| &l.spans)
            .filter(|s| s.style == hit)
            .map(|s| s.content.as_ref())
            .collect();
        assert_eq!(bold, ["one", "two"]);
        let crlf: Vec<usize> = text_lines("crlf one\r\ncrlf two\rthree", Style::default())
            .iter()
            .map(Line::width)
            .collect();
        assert_eq!(crlf, [8, 8, 5]);
    }
}
