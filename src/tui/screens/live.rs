//! The live screen: a run's items with their status, the transcript streaming, gauges, and the log of
//! retries and errors. It owns whether a run, a replay or a resumed run is going and how it is
//! followed. Only the visible tail of the transcript is wrapped, so long runs render in constant time.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};

use super::{Component, Ctx, Hits, ListId, Request, TailScroll};
use crate::llm::Role;
use crate::llm::accounting::{Accounting, Flight};
use crate::tui::keys::Command;
use crate::tui::run_view::{Message, RunView, Speaker, Status};
use crate::tui::theme::Theme;
use crate::tui::vocab::{Effect, Replay, Screen};
use crate::tui::widgets::{ListView, block, fit, pad, score_text};
use crate::tui::wrap::wrap;

#[derive(Debug, Clone, Default)]
pub struct Live {
    pub cursor: usize,
    pub follow: bool,
    /// Lines scrolled up from the bottom of the transcript.
    pub scroll: TailScroll,
    pub running: bool,
    pub replay: Option<Replay>,
    pub started_ms: u64,
    /// When the run shown ended (the clock stops there), while none goes.
    pub ended_ms: Option<u64>,
    /// When this sitting began (the run started, or was resumed): the ETA goes by its rate.
    pub sitting_ms: u64,
    /// Since when the run is paused (none while it goes), and how long it was paused before in this
    /// sitting: the clock stops meanwhile, and the ETA leaves that time out.
    pub paused_at: Option<u64>,
    pub paused_ms: u64,
    /// The accounts of the run going: how many of its requests wait for a place and hold one.
    pub accounting: Option<Arc<Accounting>>,
    /// The providers a rate limit holds below their maximum, while a run goes.
    pub held: Vec<crate::llm::policy::Throttled>,
    /// The requests file a run in batch files mode last wrote, while its session waits for the
    /// results.
    pub batch: Option<BatchWritten>,
    /// Why the last run stopped before it showed anything (a session another process writes, a
    /// journal that does not load): said where the run would have been, not only in the status line.
    pub refused: Option<String>,
    /// The items' window.
    pub view: ListView,
}

/// A phase's requests written for an offline engine: where they are, and the exact command that
/// imports their results (what the command line prints).
#[derive(Debug, Clone, PartialEq)]
pub struct BatchWritten {
    pub session: String,
    pub requests: std::path::PathBuf,
}

impl BatchWritten {
    pub fn new(session: &str, requests: &std::path::Path) -> BatchWritten {
        BatchWritten {
            session: session.to_string(),
            requests: requests.to_path_buf(),
        }
    }

    fn path(&self) -> String {
        self.requests.display().to_string()
    }

    /// The status line's message.
    pub fn flash(&self) -> String {
        // The command first: a narrow status line cuts the long path, which Live shows whole.
        format!(
            "next: `incharacter batch import {} results.jsonl` with the results of {}",
            self.session,
            self.path()
        )
    }

    /// What the live screen says, as the command line does.
    pub fn lines(&self) -> [String; 2] {
        [
            format!("session {}: the next requests are in {}", self.session, self.path()),
            crate::session::resume::next_step(&self.session, &self.requests),
        ]
    }
}

impl Live {
    /// A run (`replay`: a replay) starts; `follow`: the transcript follows its newest item.
    pub fn start(&mut self, replay: Option<Replay>, follow: bool) {
        self.running = true;
        self.ended_ms = None;
        (self.paused_at, self.paused_ms) = (None, 0);
        self.replay = replay;
        self.batch = None;
        self.refused = None;
        self.accounting = None;
        if follow {
            self.follow = true;
        }
    }

    /// The run stopped at `now_ms` (ended, or waits for a batch's results): not running, not
    /// paused, nothing held back, the clock stopped.
    pub fn stopped(&mut self, now_ms: u64) {
        self.running = false;
        self.go_on(now_ms);
        self.held.clear();
        self.ended_ms = Some(now_ms);
    }

    pub fn paused(&self) -> bool {
        self.paused_at.is_some()
    }

    /// Not paused from `now_ms`: the time paused is added to the sitting's.
    fn go_on(&mut self, now_ms: u64) {
        if let Some(at) = self.paused_at.take() {
            self.paused_ms += now_ms.saturating_sub(at);
        }
    }

    /// Following the run: the cursor is on the item streaming.
    pub fn follow_streaming(&mut self, run: &RunView) {
        if self.follow
            && let Some(i) = run.items.iter().position(|r| r.status == Status::Streaming)
        {
            self.cursor = i;
        }
    }

    /// A click (or wheel) on the items: the cursor stops following.
    pub fn click(&mut self, row: Option<usize>, len: usize) {
        self.follow = false;
        if let Some(row) = row {
            self.cursor = row.min(len.saturating_sub(1));
        }
    }

    pub fn command(&mut self, cmd: Command, ctx: &Ctx) -> Vec<Request> {
        let run = ctx.run;
        let len = run.items.len();
        let step = |c: usize, d: isize| (c as isize + d).clamp(0, len.saturating_sub(1) as isize) as usize;
        match cmd {
            Command::Up | Command::Down | Command::PageUp | Command::PageDown | Command::Top | Command::Bottom => {
                self.follow = false;
                self.scroll.reset();
                self.cursor = match cmd {
                    Command::Up => step(self.cursor, -1),
                    Command::Down => step(self.cursor, 1),
                    Command::PageUp => step(self.cursor, -20),
                    Command::PageDown => step(self.cursor, 20),
                    Command::Top => 0,
                    _ => len.saturating_sub(1),
                };
            }
            Command::Follow => {
                self.follow = true;
                self.scroll.reset();
            }
            Command::ScrollUp => self.scroll.scroll_up(5),
            Command::ScrollDown => self.scroll.scroll_down(5),
            Command::Pause if self.running => {
                if self.paused() {
                    self.go_on(ctx.now_ms);
                } else {
                    self.paused_at = Some(ctx.now_ms);
                }
                let note = match (self.paused(), self.replay.is_some()) {
                    (true, true) => "replay paused (p goes on)",
                    (true, false) => "paused: calls in flight finish, no new ones start",
                    (false, _) => "resumed",
                };
                return vec![Request::Flash(note.into()), Effect::SetPause(self.paused()).into()];
            }
            // A replay has nothing to cancel: x plays the rest at once, so every screen shows the whole session.
            Command::Cancel if self.running && self.replay.is_some() => {
                self.go_on(ctx.now_ms);
                self.replay = Some(Replay::Instant);
                return vec![
                    Request::Flash("replay: skipped to the end".into()),
                    Effect::SetPause(false).into(),
                    Effect::ReplaySpeed(Replay::Instant).into(),
                ];
            }
            Command::Cancel if self.running => {
                self.running = false;
                return vec![
                    Request::Flash(format!(
                        "cancelled: resume from Sessions (u) or `incharacter run --resume {}`",
                        run.session.id
                    )),
                    Effect::Cancel.into(),
                ];
            }
            // Nothing of this workbench's is going: a session opened is what its journal held.
            Command::Pause | Command::Cancel if !run.items.is_empty() => {
                return vec![Request::Flash(format!(
                    "no run or replay of this workbench is going: session {} is shown as its journal was when opened \
                     (open it again from Sessions to read it anew; u resumes one that is not running)",
                    run.session.id
                ))];
            }
            Command::Speed => {
                if let Some(r) = self.replay {
                    let next = r.next();
                    self.replay = Some(next);
                    return vec![Effect::ReplaySpeed(next).into()];
                }
            }
            Command::Select => {
                if let Some(row) = run.items.get(self.cursor) {
                    return vec![Request::Show(Screen::Inspector), Request::Inspect(row.key.clone())];
                }
            }
            _ => {}
        }
        Vec::new()
    }
}

fn clock(ms: u64) -> String {
    let s = ms / 1000;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

impl Component for Live {
    fn hints(&self, ctx: &Ctx) -> Vec<(String, &'static str)> {
        // An observer or RoleBench session only opened: nothing here to pause, follow or inspect.
        if !self.running && ctx.run.items.is_empty() {
            if ctx.run.observe.is_some() {
                return vec![(ctx.key(Command::GoObservers), "observers")];
            }
            if ctx.run.rolebench.is_some() {
                return vec![(ctx.key(Command::GoRolebench), "RoleBench")];
            }
        }
        if self.running && self.replay.is_some() {
            vec![
                (ctx.key(Command::Speed), "faster"),
                (ctx.key(Command::Pause), if self.paused() { "go on" } else { "pause" }),
                (ctx.key(Command::Cancel), "skip to end"),
                (ctx.key(Command::Select), "inspect"),
            ]
        } else {
            vec![
                (ctx.key(Command::Pause), "pause"),
                (ctx.key(Command::Cancel), "cancel"),
                (ctx.key(Command::Follow), "follow"),
                (ctx.key(Command::Select), "inspect"),
            ]
        }
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Ctx) -> Hits {
        let theme = ctx.theme;
        let run = ctx.run;
        let area = match &self.batch {
            Some(written) => self.render_batch(frame, area, written, theme),
            None => area,
        };
        if run.items.is_empty() {
            let b = block(" Live run ", false, theme);
            let inner = b.inner(area);
            frame.render_widget(b, area);
            let mut lines = match &self.refused {
                Some(why) => vec![
                    Line::styled("The run did not start:", theme.fg(theme.error)),
                    Line::raw(why.clone()),
                    Line::raw(""),
                ],
                // An observer or RoleBench session has no interview items: it is shown on its own screen.
                None if run.observe.is_some() => vec![Line::raw(format!(
                    "This session is an observer run: its dialogues and reports are on Observers ({}).",
                    ctx.key(Command::GoObservers)
                ))],
                None if run.rolebench.is_some() => vec![Line::raw(format!(
                    "This session is a RoleBench run: its questions and scores are on RoleBench ({}).",
                    ctx.key(Command::GoRolebench)
                ))],
                None => vec![Line::raw("No run yet.")],
            };
            lines.push(Line::styled(
                "Start one from Setup (1), or open or replay a session (5).",
                theme.dim(),
            ));
            frame.render_widget(
                Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: false }),
                inner,
            );
            return Hits::default();
        }
        let left_width = if area.width >= 110 { 46 } else { 38 };
        let [left, right] = Layout::horizontal([Constraint::Length(left_width), Constraint::Min(30)]).areas(area);
        let styles: std::collections::BTreeSet<_> = run.items.iter().map(|r| r.key.style).collect();
        // The query style's column only when the run has more than one, as wide as the widest, so
        // every row's columns line up.
        let style_width =
            (styles.len() > 1).then(|| styles.iter().map(|s| s.name().chars().count()).max().unwrap_or(0));
        let [transcript_area, gauges_area, log_area] =
            Layout::vertical([Constraint::Min(6), Constraint::Length(6), Constraint::Length(4)]).areas(right);

        // Items.
        let title = format!(" Items {}/{} ", run.answered(), run.items.len());
        let b = block(title, !self.follow, theme);
        let inner = b.inner(left);
        frame.render_widget(b, left);
        let height = inner.height as usize;
        let first = self.view.first(run.items.len(), self.cursor, height);
        let mut hits = Hits::list(inner, first, ListId::Items);
        let lines: Vec<Line> = run
            .items
            .iter()
            .enumerate()
            .skip(first)
            .take(height)
            .map(|(i, row)| {
                let judging = matches!(row.status, Status::Answered | Status::Cached) && run.judging(&row.key);
                let (label, color) = if judging {
                    ("judging", theme.streaming)
                } else {
                    let color = match row.status {
                        Status::Pending => theme.dim,
                        Status::Streaming => theme.streaming,
                        Status::Retrying => theme.warning,
                        Status::Answered => theme.positive,
                        Status::Cached => theme.label_annotation,
                        Status::Failed => theme.error,
                    };
                    (row.status.label(), color)
                };
                let k = &row.key;
                let style_col = style_width.map_or_else(String::new, |w| format!(" {:<w$}", k.style.name()));
                // The character column gives way first, so the item number and status always show.
                let cw = (inner.width as usize)
                    .saturating_sub(26 + style_col.chars().count())
                    .clamp(6, 12);
                let text = format!(
                    "{} {} r{} {:>3}{style_col}",
                    pad(&fit(&k.character, cw), cw),
                    pad(&fit(&k.scale, 8), 8),
                    k.repeat,
                    k.item_id,
                );
                let style = if i == self.cursor {
                    theme.selected()
                } else {
                    theme.base()
                };
                Line::from(vec![
                    Span::styled(pad(&text, (inner.width as usize).saturating_sub(10)), style),
                    Span::styled(format!(" {label}"), theme.fg(color)),
                ])
            })
            .collect();
        frame.render_widget(Paragraph::new(lines), inner);

        // Transcript: the tail, or the part ending at the selected item's answer.
        let end = if self.follow {
            run.transcript.len()
        } else {
            run.items
                .get(self.cursor)
                .and_then(|r| r.message)
                .map_or(run.transcript.len(), |m| m + 1)
        };
        let status = if self.paused() {
            " · PAUSED".to_string()
        } else if let Some(r) = self.replay {
            if self.running {
                format!(" · replay {}", r.label())
            } else {
                " · replay finished".to_string()
            }
        } else if self.follow {
            " · following".to_string()
        } else {
            String::new()
        };
        hits.tail_top = Some(self.render_rest(frame, ctx, [transcript_area, gauges_area, log_area], end, &status));
        hits
    }
}

impl Live {
    /// Above the run, where a batch files phase went and how to go on; returns the area left.
    fn render_batch(&self, frame: &mut Frame, area: Rect, written: &BatchWritten, theme: &Theme) -> Rect {
        let width = area.width.saturating_sub(2) as usize;
        let lines: Vec<Line> = written
            .lines()
            .iter()
            .flat_map(|l| wrap(l, width))
            .map(|l| Line::styled(l, theme.fg(theme.accent)))
            .collect();
        // The rest keeps room for the run; the box shows what fits.
        let height = (lines.len() as u16 + 2).min(area.height / 2);
        let [top, rest] = Layout::vertical([Constraint::Length(height), Constraint::Min(0)]).areas(area);
        let b = block(" Batch files: waiting for the results ", false, theme);
        let inner = b.inner(top);
        frame.render_widget(b, top);
        frame.render_widget(Paragraph::new(lines), inner);
        rest
    }

    /// The transcript, gauges and log; returns how far the transcript can scroll up.
    fn render_rest(&self, frame: &mut Frame, ctx: &Ctx, areas: [Rect; 3], end: usize, status: &str) -> u16 {
        let [transcript_area, gauges_area, log_area] = areas;
        let theme = ctx.theme;
        let run = ctx.run;
        let b = block(format!(" Transcript{status} "), false, theme);
        let inner = b.inner(transcript_area);
        frame.render_widget(b, transcript_area);
        let (lines, top) = self.transcript_tail(
            theme,
            &run.transcript[..end],
            inner.width as usize,
            inner.height as usize,
        );
        frame.render_widget(Paragraph::new(lines), inner);

        // Gauges, and in their title the providers a rate limit holds back.
        let held: Vec<String> = self.held.iter().map(ToString::to_string).collect();
        let title = match held.as_slice() {
            [] => " Progress ".to_string(),
            _ => format!(" Progress · {} ", held.join(", ")),
        };
        let b = block(title, false, theme);
        let inner = b.inner(gauges_area);
        frame.render_widget(b, gauges_area);
        let rows = Layout::vertical([Constraint::Length(1); 4]).split(inner);
        let flight = |role| {
            (self.accounting.as_ref())
                .filter(|_| self.running)
                .map_or(Flight::default(), |a| a.flight(role))
        };
        let sitting = run.sitting;
        let total = run.items.len();
        let done = sitting.items_done();
        let interviews = Gauge::default()
            .gauge_style(theme.fg(theme.measured))
            .ratio((done as f64 / total.max(1) as f64).min(1.0))
            .label(fitting(
                interviews_labels(done, total, flight(Role::Rpa), run.failed()),
                rows[0].width,
            ));
        frame.render_widget(interviews, rows[0]);
        let dims_total = run.session.plan.as_ref().map_or(0, |p| {
            p.characters.len()
                * p.repeats.max(1) as usize
                * p.methods.len()
                * p.scales
                    .iter()
                    .filter_map(|s| ctx.catalog.scale(s))
                    .map(|s| s.dimensions.len())
                    .sum::<usize>()
        });
        let assessed = sitting.assessments_done();
        let judge = Gauge::default()
            .gauge_style(theme.fg(theme.label_pdb))
            .ratio((assessed as f64 / dims_total.max(1) as f64).min(1.0))
            .label(fitting(
                assessments_labels(
                    assessed,
                    dims_total,
                    self.seen_live().then_some(run.judge_done),
                    flight(Role::Judge),
                ),
                rows[1].width,
            ));
        frame.render_widget(judge, rows[1]);
        // The time the run went (not paused); none for a session only opened here.
        let end = self.paused_at.or(self.ended_ms).unwrap_or(ctx.now_ms);
        let elapsed = if self.running || self.ended_ms.is_some() {
            clock(end.saturating_sub(self.started_ms).saturating_sub(self.paused_ms))
        } else {
            "–".into()
        };
        let remaining = (total + dims_total).saturating_sub(done + assessed);
        // A replay's pace is its speed's, not a rate of its own: no ETA; nor while paused.
        let went = ctx
            .now_ms
            .saturating_sub(self.sitting_ms)
            .saturating_sub(self.paused_ms);
        let eta = eta_ms(remaining, sitting.made(), went)
            .filter(|_| self.running && self.replay.is_none() && !self.paused())
            .map_or("–".into(), clock);
        // The figures that fit, whole, in this order: time first, then what the run used.
        let figures = [
            ("elapsed", elapsed),
            ("eta", eta),
            ("tokens", self.tokens(run)),
            ("cost", self.cost(ctx)),
            ("retries", run.retries.to_string()),
        ];
        let room = usize::from(rows[2].width);
        let widths: Vec<usize> = figures
            .iter()
            .enumerate()
            .map(|(i, (name, value))| {
                let sep = if i == 0 { 0 } else { 2 };
                sep + name.len() + 1 + unicode_width::UnicodeWidthStr::width(value.as_str())
            })
            .collect();
        // As many as fit whole; when some do not, fewer, so that a mark says so.
        let fit_in = |room: usize| {
            widths
                .iter()
                .scan(0, |used, w| {
                    *used += w;
                    Some(*used)
                })
                .take_while(|&u| u <= room)
                .count()
        };
        let shown = match fit_in(room) {
            all if all == figures.len() => all,
            _ => fit_in(room.saturating_sub(2)),
        };
        let mut spans = Vec::new();
        for (i, (name, value)) in figures.into_iter().take(shown).enumerate() {
            let sep = if i == 0 { "" } else { "  " };
            spans.push(Span::styled(format!("{sep}{name} "), theme.dim()));
            spans.push(Span::raw(value));
        }
        if shown < widths.len() {
            spans.push(Span::styled(if shown == 0 { "…" } else { " …" }, theme.dim()));
        }
        frame.render_widget(Paragraph::new(Line::from(spans)), rows[2]);
        frame.render_widget(Paragraph::new(latest(ctx, usize::from(rows[3].width))), rows[3]);

        // Log.
        let b = block(" Log ", false, theme);
        let inner = b.inner(log_area);
        frame.render_widget(b, log_area);
        let lines: Vec<Line> = run
            .log
            .iter()
            .rev()
            .take(inner.height as usize)
            .rev()
            .map(|l| Line::styled(fit(l, inner.width as usize), theme.fg(theme.warning)))
            .collect();
        frame.render_widget(Paragraph::new(lines), inner);
        top
    }
}

/// When the rest should be done, in ms, at the rate of the sitting: `None` until it has made
/// something in some time, and when nothing remains.
fn eta_ms(remaining: usize, made: usize, sitting_ms: u64) -> Option<u64> {
    (remaining > 0 && made > 0 && sitting_ms > 0).then(|| (sitting_ms as f64 * remaining as f64 / made as f64) as u64)
}

/// The interviews gauge's label, from the longest to the shortest: items done of all, the role-play
/// requests holding a place and waiting for one, and the items failed.
fn interviews_labels(done: usize, total: usize, flight: Flight, failed: usize) -> Vec<String> {
    let (flying, queued) = (flight.in_flight, flight.queued);
    let mut labels = Vec::new();
    if failed > 0 {
        labels.push(format!(
            "interviews {done}/{total} · {flying} in flight · {queued} queued · {failed} failed"
        ));
    }
    labels.extend([
        format!("interviews {done}/{total} · {flying} in flight · {queued} queued"),
        format!("interviews {done}/{total} · {flying} flying · {queued} queued"),
        format!("{done}/{total} · {flying} in flight · {queued} queued"),
    ]);
    labels
}

/// The assessments gauge's label, from the longest to the shortest: dimensions assessed of all, the
/// judge's calls done, holding a place and waiting for one.
/// `calls_done` is `None` where the calls were not seen (a replay, a session opened here: the journal
/// records assessments, not each call as it ended).
fn assessments_labels(assessed: usize, total: usize, calls_done: Option<usize>, flight: Flight) -> Vec<String> {
    let (flying, queued) = (flight.in_flight, flight.queued);
    let mut labels = Vec::new();
    if let Some(calls_done) = calls_done {
        labels.extend([
            format!(
                "assessments {assessed}/{total} · judge calls {calls_done} done · {flying} in flight · {queued} queued"
            ),
            format!("assessments {assessed}/{total} · judge {calls_done} done · {flying} in flight · {queued} queued"),
        ]);
    }
    labels.extend([
        format!("assessments {assessed}/{total} · {flying} in flight · {queued} queued"),
        format!("assessments {assessed}/{total} · {flying} flying · {queued} queued"),
        format!("{assessed}/{total} · {flying} in flight · {queued} queued"),
    ]);
    labels
}

/// The first label that fits `width` columns, else the shortest.
fn fitting(labels: Vec<String>, width: u16) -> String {
    let fits = |l: &String| unicode_width::UnicodeWidthStr::width(l.as_str()) <= width as usize;
    let last = labels.last().cloned().unwrap_or_default();
    labels.into_iter().find(fits).unwrap_or(last)
}

/// The newest dimension result against its label, e.g. "latest: Hermione Granger GSE er-batch
/// Self-efficacy 3.40 · pdb 4.10 H ✓", in `width` columns: what was assessed is cut (with an
/// ellipsis) before the score and the verdict are.
fn latest<'a>(ctx: &Ctx, width: usize) -> Line<'a> {
    let mut line = latest_whole(ctx);
    let used = |spans: &[Span]| spans.iter().map(Span::width).sum::<usize>();
    if used(&line.spans) <= width || line.spans.len() < 2 {
        return line;
    }
    let rest = used(&line.spans) - line.spans[1].width();
    let what = line.spans[1].content.trim_end().to_string();
    if width > rest + 4 {
        line.spans[1].content = format!("{} ", fit(&what, width - rest - 1)).into();
        return line;
    }
    // Too narrow for the score beside it: the line as it fits, ending in an ellipsis.
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    Line::raw(fit(&text, width))
}

fn latest_whole<'a>(ctx: &Ctx) -> Line<'a> {
    let theme = ctx.theme;
    let Some(a) = ctx.run.assessments.last() else {
        return Line::styled("latest: no dimension assessed yet", theme.dim());
    };
    let (Some(c), Some(s)) = (ctx.catalog.character(&a.character), ctx.catalog.scale(&a.scale)) else {
        return Line::raw("");
    };
    let mut spans = vec![
        Span::styled("latest: ", theme.dim()),
        Span::raw(format!("{} {} {} {} ", c.name, a.scale, a.method.name(), a.dimension)),
        Span::styled(
            score_text(a.score),
            theme.fg(theme.measured).add_modifier(Modifier::BOLD),
        ),
    ];
    if let Some(d) = s.dimension_index(&a.dimension) {
        let source = c.labels.exclusion_source(&s.id);
        let unit = super::inspect::Unit {
            character: c,
            scale: s,
            repeat: a.repeat,
        };
        let (label, kind, correct) = super::inspect::verdict(&unit, d, a.score, source);
        let kind = kind.map_or("", |k| match k {
            crate::domain::character::LabelType::H => " H",
            crate::domain::character::LabelType::L => " L",
            crate::domain::character::LabelType::X => " X",
        });
        let source = source.name();
        spans.push(Span::styled(
            format!(" · {source} {label}{kind}"),
            theme.fg(theme.label_pdb),
        ));
        spans.push(match correct {
            Some(true) => Span::styled(" ✓", theme.fg(theme.positive)),
            Some(false) => Span::styled(" ✗", theme.fg(theme.negative)),
            None => Span::raw(""),
        });
    }
    if let Some(f) = &a.failure {
        spans.push(Span::styled(format!(" failed: {}", fit(f, 60)), theme.fg(theme.error)));
    }
    Line::from(spans)
}

impl Live {
    /// Whether this screen saw the run's requests as they went (run here, not replayed or opened):
    /// else what they used and how many there were is not known here ("–").
    fn seen_live(&self) -> bool {
        self.accounting.is_some() || (self.replay.is_none() && (self.running || self.ended_ms.is_some()))
    }

    /// The tokens this sitting used: the run's accounts while it runs here (a reply from the cache
    /// or kept batch results costs nothing now), else what the replies it saw reported; "–" for a
    /// run it did not see.
    fn tokens(&self, run: &RunView) -> String {
        match &self.accounting {
            Some(a) => a
                .snapshot()
                .by_provider_role
                .values()
                .map(|c| c.prompt_tokens + c.completion_tokens)
                .sum::<u64>()
                .to_string(),
            None if self.seen_live() => run.tokens.to_string(),
            None => "–".into(),
        }
    }

    /// "$0.0123" at the providers' prices, from the run's accounts or else the replies' usage; "–"
    /// without prices, or for a run not seen here (its usage is not in a replay).
    fn cost(&self, ctx: &Ctx) -> String {
        let Some(plan) = &ctx.run.session.plan else {
            return "–".into();
        };
        if !self.seen_live() {
            return "–".into();
        }
        let price = |name: &str| ctx.prices.iter().find(|(n, _, _)| n == name).map(|(_, i, o)| (*i, *o));
        let mut total = 0.0;
        let mut priced = false;
        for (role, provider) in [("rpa", &plan.rpa), ("judge", &plan.judge)] {
            if let Some((pin, pout)) = price(provider)
                && (pin > 0.0 || pout > 0.0)
            {
                priced = true;
                if self.accounting.is_none()
                    && let Some((tin, tout)) = ctx.run.usage.get(role)
                {
                    total += (*tin as f64 * pin + *tout as f64 * pout) / 1e6;
                }
            }
        }
        if let Some(a) = &self.accounting {
            total = a.cost();
        }
        if priced { format!("${total:.4}") } else { "–".into() }
    }

    /// The last `height` wrapped lines of `messages` (less the scroll offset).
    fn transcript_tail<'a>(
        &self,
        theme: &Theme,
        messages: &[Message],
        width: usize,
        height: usize,
    ) -> (Vec<Line<'a>>, u16) {
        let mut lines: Vec<Line> = Vec::new();
        let want = height + self.scroll.up as usize;
        let mut complete = true;
        for m in messages.iter().rev() {
            let (name, color) = match &m.speaker {
                Speaker::Experimenter(n) => (n.as_str(), theme.experimenter),
                Speaker::Character(n) => (n.as_str(), theme.character),
            };
            let mut text = m.text.clone();
            if m.streaming {
                text.push('▌');
            }
            let mut block: Vec<Line> = vec![Line::styled(
                name.to_string(),
                theme.fg(color).add_modifier(Modifier::BOLD),
            )];
            block.extend(
                wrap(&text, width.saturating_sub(2))
                    .into_iter()
                    .map(|l| Line::raw(format!("  {l}"))),
            );
            if m.cut {
                block.push(Line::styled("  [cut off when the run stopped: not kept]", theme.dim()));
            }
            block.push(Line::raw(""));
            for l in block.into_iter().rev() {
                lines.push(l);
            }
            if lines.len() >= want {
                complete = false;
                break;
            }
        }
        lines.reverse();
        let (start, end, top) = self.scroll.window(lines.len(), height, complete);
        (lines.drain(start..end).collect(), top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_is_an_eta_once_the_sitting_has_made_something() {
        assert_eq!(eta_ms(10, 0, 60_000), None, "nothing made yet: no rate");
        assert_eq!(eta_ms(10, 5, 0), None);
        assert_eq!(eta_ms(0, 5, 60_000), None, "nothing remains");
        assert_eq!(eta_ms(10, 5, 60_000), Some(120_000), "5 in a minute, 10 to go");
    }

    #[test]
    fn a_label_gives_way_to_a_shorter_one_where_it_does_not_fit() {
        let flight = Flight {
            queued: 12,
            in_flight: 1,
        };
        let labels = assessments_labels(3, 20, Some(1), flight);
        assert_eq!(
            fitting(labels.clone(), 200),
            "assessments 3/20 · judge calls 1 done · 1 in flight · 12 queued"
        );
        // Calls not seen (a replay) are not said to be none.
        let unseen = assessments_labels(3, 20, None, flight);
        assert_eq!(fitting(unseen, 200), "assessments 3/20 · 1 in flight · 12 queued");
        assert_eq!(fitting(labels.clone(), 40), "assessments 3/20 · 1 flying · 12 queued");
        assert_eq!(fitting(labels, 10), "3/20 · 1 in flight · 12 queued", "the shortest");
        let labels = interviews_labels(6, 10, Flight::default(), 2);
        assert_eq!(labels[0], "interviews 6/10 · 0 in flight · 0 queued · 2 failed");
        assert_eq!(fitting(labels, 45), "interviews 6/10 · 0 in flight · 0 queued");
    }
}
