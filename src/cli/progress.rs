//! The headless progress of a run: a bar per phase on a terminal (indicatif), a plain line every
//! [`EVERY`] things done otherwise; each says what is done, in flight and queued (from the run's
//! accounts) and an ETA from this sitting's rate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::drive::Progress;
use crate::llm::Role;
use crate::llm::accounting::{Accounting, Flight};
use crate::study::Event;
use crate::text::terminal_safe;

/// One phase of a run as its progress says it: how many it makes in all, how many were done before
/// this sitting (they are not made again), and how many this sitting has made so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Phase {
    total: usize,
    before: usize,
    sitting: usize,
}

impl Phase {
    pub(super) fn new(total: usize, before: usize) -> Phase {
        Phase {
            total,
            before,
            sitting: 0,
        }
    }

    fn done(&self) -> usize {
        self.before + self.sitting
    }
}

/// When the rest of a phase should be done, at the rate this sitting has gone: `None` until the
/// sitting has done something (no rate yet), zero when nothing remains.
fn eta(remaining: usize, sitting: usize, elapsed: Duration) -> Option<Duration> {
    if remaining == 0 {
        return Some(Duration::ZERO);
    }
    if sitting == 0 || elapsed.is_zero() {
        return None;
    }
    Some(elapsed.mul_f64(remaining as f64 / sitting as f64))
}

/// `42s`, `3m 05s`, `1h 02m`; a part of a second counts as one (what remains is never `0s`).
fn short(d: Duration) -> String {
    let s = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s / 60 % 60),
    }
}

/// `6/10 · 2 in flight · 3 queued · eta 40s`: what a phase has done of its total, its role's requests
/// holding a place and waiting for one now, and when it should end at this sitting's rate (`eta –`
/// until the sitting has done something). `role` names the requests where they are not what the
/// phase counts (`judge calls 7 in flight`: an OC dimension is one call per item, an ER_batch one per
/// batch), as the Live screen says them.
fn phase_line(done: usize, total: usize, role: Role, flight: Flight, sitting: usize, elapsed: Duration) -> String {
    let eta = eta(total.saturating_sub(done), sitting, elapsed).map_or("–".to_string(), short);
    let calls = match role {
        Role::Judge => "judge calls ",
        _ => "",
    };
    format!(
        "{done}/{total} · {calls}{} in flight · {} queued · eta {eta}",
        flight.in_flight, flight.queued
    )
}

/// The bars' template: the counts come from [`phase_line`] at each draw, so the requests in flight
/// and waiting move while nothing finishes.
const TEMPLATE: &str = "{prefix:>12} [{bar:32.cyan/blue}] {counts} ({elapsed}){msg}";

/// How often the bars are drawn again with nothing done.
const TICK: Duration = Duration::from_millis(250);

/// A phase's bar in `multi`, starting where the journal left it; its counts say the requests of
/// `role` at each draw.
fn bar(
    multi: &indicatif::MultiProgress,
    name: &'static str,
    phase: Phase,
    role: Role,
    accounting: &Arc<Accounting>,
) -> indicatif::ProgressBar {
    let accounting = accounting.clone();
    let before = phase.before;
    let counts = move |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
        let done = state.pos() as usize;
        let total = state.len().unwrap_or(0) as usize;
        let line = phase_line(
            done,
            total,
            role,
            accounting.flight(role),
            done.saturating_sub(before),
            state.elapsed(),
        );
        let _ = w.write_str(&line);
    };
    let style = indicatif::ProgressStyle::with_template(TEMPLATE)
        .expect("a valid template")
        .with_key("counts", counts)
        .progress_chars("=> ");
    let bar = multi.add(indicatif::ProgressBar::new(phase.total as u64).with_style(style));
    bar.set_prefix(name);
    bar.set_position(phase.done() as u64);
    bar
}

type BarSet = (indicatif::MultiProgress, indicatif::ProgressBar, indicatif::ProgressBar);

/// A line above the bars, or on its own without them. indicatif writes to the terminal itself, so
/// what it is given is made safe here (a plain line passes the `note!` gate).
fn say(bars: &Option<BarSet>, line: String) {
    match bars {
        Some((multi, ..)) => {
            let _ = multi.println(terminal_safe(&line));
        }
        None => crate::note!("{line}"),
    }
}

/// Things done between two plain lines.
const EVERY: usize = 20;

/// Run progress on stderr: indicatif bars on a terminal, otherwise a plain line every [`EVERY`]
/// things done and one at the end, saying the same counts.
pub(super) struct Bars {
    bars: Option<BarSet>,
    interviews: Phase,
    assessments: Phase,
    /// Interview items that failed in this sitting.
    failed: usize,
    /// The requests waiting and in flight, by role.
    accounting: Arc<Accounting>,
    /// When this sitting began.
    started: Instant,
    /// The providers a rate limit holds back (see [`Progress::held`]).
    held: String,
}

impl Bars {
    /// Progress of `interviews` and `assessments`, drawn on `target` (none: plain lines).
    pub(super) fn new(
        target: Option<indicatif::ProgressDrawTarget>,
        accounting: Arc<Accounting>,
        interviews: Phase,
        assessments: Phase,
    ) -> Bars {
        let bars = target.map(|target| {
            let multi = indicatif::MultiProgress::with_draw_target(target);
            let items = bar(&multi, "interviews", interviews, Role::Rpa, &accounting);
            let dims = bar(&multi, "assessments", assessments, Role::Judge, &accounting);
            // Each bar draws itself again on a steady tick: an update drawn too soon after the one
            // before is skipped, and a bar nothing updates would show it until the end.
            for (bar, phase) in [(&items, interviews), (&dims, assessments)] {
                if phase.done() >= phase.total {
                    bar.abandon();
                } else {
                    bar.enable_steady_tick(TICK);
                }
            }
            (multi, items, dims)
        });
        Bars {
            bars,
            interviews,
            assessments,
            failed: 0,
            accounting,
            started: Instant::now(),
            held: String::new(),
        }
    }

    /// The interviews bar's message: failures, and the providers a rate limit holds back.
    fn message(&self) -> String {
        let parts: Vec<String> = [
            (self.failed > 0).then(|| format!("{} failed", self.failed)),
            (!self.held.is_empty()).then(|| self.held.clone()),
        ]
        .into_iter()
        .flatten()
        .collect();
        match parts.as_slice() {
            [] => String::new(),
            parts => format!(" · {}", parts.join("; ")),
        }
    }

    /// The plain line: both phases as the bars say them.
    fn line(&self) -> String {
        let elapsed = self.started.elapsed();
        let phase = |p: &Phase, role| {
            phase_line(
                p.done(),
                p.total,
                role,
                self.accounting.flight(role),
                p.sitting,
                elapsed,
            )
        };
        format!(
            "interviews {}{}; assessments {} ({})",
            phase(&self.interviews, Role::Rpa),
            self.message(),
            phase(&self.assessments, Role::Judge),
            short(elapsed)
        )
    }

    fn done(&self) -> usize {
        self.interviews.sitting + self.assessments.sitting
    }
}

impl Progress for Bars {
    fn record(&mut self, event: &Event) {
        let before = self.done();
        match event {
            Event::ItemAnswered { .. } => self.interviews.sitting += 1,
            Event::ItemFailed {
                character,
                scale,
                item_id,
                error,
                style,
                repeat,
            } => {
                self.interviews.sitting += 1;
                self.failed += 1;
                // Which interview: an item is asked open, as a self-report, and in each repeat.
                say(
                    &self.bars,
                    format!(
                        "item failed: {character} {scale} {item_id} ({}, r{repeat}): {error}",
                        style.name()
                    ),
                );
            }
            Event::DimensionAssessed(a) => {
                self.assessments.sitting += 1;
                if let Some(f) = &a.failure {
                    say(
                        &self.bars,
                        format!(
                            "not assessed: {} {} {} r{} {}: {}",
                            a.character,
                            a.scale,
                            a.method.name(),
                            a.repeat,
                            a.dimension,
                            f
                        ),
                    );
                }
            }
            _ => return,
        }
        match &self.bars {
            Some((_, items, dims)) => {
                for (bar, phase) in [(items, self.interviews), (dims, self.assessments)] {
                    bar.set_position(phase.done() as u64);
                    // A phase done is drawn as it ends, its time kept.
                    if phase.done() >= phase.total && !bar.is_finished() {
                        bar.abandon();
                    }
                }
                items.set_message(self.message());
            }
            None if self.done() / EVERY > before / EVERY => crate::note!("{}", self.line()),
            None => {}
        }
    }

    fn held(&mut self, providers: &str) {
        self.held = terminal_safe(providers);
        if let Some((_, items, _)) = &self.bars {
            items.set_message(self.message());
        }
    }

    /// The last draw says the real counts: a bar left short of its total stays short (indicatif's
    /// `finish` would fill it).
    fn finish(&mut self) {
        match &self.bars {
            Some((_, items, dims)) => {
                for bar in [items, dims] {
                    if !bar.is_finished() {
                        bar.abandon();
                    }
                }
            }
            None => crate::note!("{}", self.line()),
        }
    }
}

/// A run's counts on one line of stderr (observers, RoleBench): on a terminal an indicatif line,
/// drawn again on a steady tick, with failures said above it; otherwise the line itself when it is
/// worth a line, and once more at the end.
pub(super) struct Counter {
    line: Option<indicatif::ProgressBar>,
    last: String,
    /// The counts a plain stderr last heard (the end says them only if they changed since).
    printed: String,
}

impl Counter {
    /// `live`: stderr is a terminal.
    pub(super) fn new(live: bool, prefix: &'static str) -> Counter {
        let line = live.then(|| {
            let style = indicatif::ProgressStyle::with_template("{prefix:>12} {spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
            let line = indicatif::ProgressBar::new_spinner().with_style(style);
            line.set_prefix(prefix);
            line.enable_steady_tick(TICK);
            line
        });
        Counter {
            line,
            last: String::new(),
            printed: String::new(),
        }
    }

    /// The counts now; `worth_a_line` says whether a plain stderr hears them now.
    pub(super) fn show(&mut self, counts: String, worth_a_line: bool) {
        match &self.line {
            Some(line) => line.set_message(terminal_safe(&counts)),
            None if worth_a_line => {
                crate::note!("{counts}");
                self.printed = counts.clone();
            }
            None => {}
        }
        self.last = counts;
    }

    /// A line of its own (a failure), above the counts.
    pub(super) fn say(&self, text: String) {
        match &self.line {
            Some(line) => line.println(terminal_safe(&text)),
            None => crate::note!("{text}"),
        }
    }

    /// The last counts stay: on the terminal's line, or as a last plain line.
    pub(super) fn finish(&self) {
        match &self.line {
            Some(line) => line.abandon(),
            None if !self.last.is_empty() && self.last != self.printed => crate::note!("{}", self.last),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::Catalog;
    use crate::method::Method;
    use crate::method::interview::QueryStyle;
    use crate::study::RunPlan;

    fn flight(in_flight: usize, queued: usize) -> Flight {
        Flight { queued, in_flight }
    }

    #[test]
    fn a_phase_says_its_counts_the_requests_now_and_an_eta_from_this_sittings_rate() {
        assert_eq!(
            phase_line(6, 10, Role::Rpa, flight(1, 4), 2, Duration::from_secs(20)),
            "6/10 · 1 in flight · 4 queued · eta 40s",
            "2 done in 20s, 4 to go"
        );
        assert_eq!(
            phase_line(3, 500, Role::Rpa, flight(0, 0), 3, Duration::from_secs(9)),
            "3/500 · 0 in flight · 0 queued · eta 24m 51s"
        );
        assert_eq!(
            phase_line(1, 3601, Role::Rpa, flight(0, 0), 1, Duration::from_secs(1)),
            "1/3601 · 0 in flight · 0 queued · eta 1h 00m"
        );
    }

    #[test]
    fn the_judges_requests_are_called_so_beside_the_dimensions_done() {
        // A resume of OC: 5 dimensions of 10 done, their items' calls in flight and queued.
        assert_eq!(
            phase_line(5, 10, Role::Judge, flight(7, 5), 0, Duration::from_secs(3)),
            "5/10 · judge calls 7 in flight · 5 queued · eta –"
        );
    }

    #[test]
    fn there_is_no_eta_before_this_sitting_has_done_something() {
        // A resume: 6 were done before; the sitting has done nothing yet.
        assert_eq!(
            phase_line(6, 10, Role::Rpa, flight(1, 3), 0, Duration::from_secs(120)),
            "6/10 · 1 in flight · 3 queued · eta –"
        );
        assert_eq!(
            phase_line(0, 10, Role::Rpa, flight(0, 0), 0, Duration::ZERO),
            "0/10 · 0 in flight · 0 queued · eta –"
        );
        assert_eq!(
            phase_line(10, 10, Role::Rpa, flight(0, 0), 0, Duration::from_secs(3)),
            "10/10 · 0 in flight · 0 queued · eta 0s",
            "nothing remains"
        );
    }

    /// Every record a run of `plan` journals, as the study makes them: each item of each unit in
    /// each query style (one failed), then each dimension by each method.
    fn every_event(catalog: &Catalog, plan: &RunPlan) -> Vec<Event> {
        let styles: std::collections::BTreeSet<QueryStyle> = plan.methods.iter().map(|m| m.query_style()).collect();
        let mut events = Vec::new();
        for c in &plan.characters {
            for s in &plan.scales {
                let scale = catalog.scale(s).expect("a bundled scale");
                for repeat in 0..plan.repeats {
                    for &style in &styles {
                        for item in scale.scored_items() {
                            events.push(if item.id == 3 {
                                Event::ItemFailed {
                                    character: c.clone(),
                                    scale: s.clone(),
                                    repeat,
                                    style,
                                    item_id: item.id,
                                    error: "HTTP 500".into(),
                                }
                            } else {
                                Event::ItemAnswered {
                                    character: c.clone(),
                                    scale: s.clone(),
                                    repeat,
                                    style,
                                    item_id: item.id,
                                    question: "?".into(),
                                    response: "!".into(),
                                    retrieved: vec![],
                                    truncated: false,
                                }
                            });
                        }
                    }
                    for &method in &plan.methods {
                        for d in &scale.dimensions {
                            events.push(Event::DimensionAssessed(
                                serde_json::from_value(json!({
                                    "character": c,
                                    "scale": s,
                                    "method": method,
                                    "repeat": repeat,
                                    "dimension": d.name,
                                    "failure": "interview items [3] failed",
                                }))
                                .expect("an assessment"),
                            ));
                        }
                    }
                }
            }
        }
        events
    }

    fn plan(catalog: &Catalog) -> RunPlan {
        let mut plan = RunPlan::new(
            vec![
                catalog.characters[0].value.id.clone(),
                catalog.characters[1].value.id.clone(),
            ],
            vec!["BFI".into()],
            vec![Method::ErBatch, Method::Oc, Method::Sr],
            "p",
            "p",
        );
        plan.repeats = 2;
        plan
    }

    #[test]
    fn after_every_record_of_a_run_the_bars_stand_at_their_totals() {
        let catalog = Catalog::load(None).expect("the bundled catalog");
        let plan = plan(&catalog);
        let (items, dims) = (plan.total_items(&catalog), plan.total_assessments(&catalog));
        let mut bars = Bars::new(
            Some(indicatif::ProgressDrawTarget::hidden()),
            Arc::new(Accounting::default()),
            Phase::new(items, 0),
            Phase::new(dims, 0),
        );
        let events = every_event(&catalog, &plan);
        let (first, rest) = events.split_at(10);
        for e in first {
            bars.record(e);
        }
        let Some((_, item_bar, dim_bar)) = bars.bars.clone() else {
            panic!("bars were asked for")
        };
        assert_eq!(item_bar.position(), 10);
        assert!(!item_bar.is_finished());
        for e in rest {
            bars.record(e);
        }
        bars.finish();
        assert_eq!(
            (item_bar.position(), item_bar.length()),
            (items as u64, Some(items as u64))
        );
        assert_eq!((dim_bar.position(), dim_bar.length()), (dims as u64, Some(dims as u64)));
        assert!(item_bar.is_finished() && dim_bar.is_finished());
        assert_eq!(bars.interviews.done(), items);
        assert_eq!(bars.assessments.done(), dims);
        assert!(bars.line().starts_with(&format!(
            "interviews {items}/{items} · 0 in flight · 0 queued · eta 0s · {} failed; assessments {dims}/{dims} · judge \
             calls 0 in flight · 0 queued · eta 0s",
            2 * 2 * 2
        )));
    }

    #[test]
    fn a_resumed_run_starts_from_what_it_had_and_ends_at_its_totals() {
        let catalog = Catalog::load(None).expect("the bundled catalog");
        let plan = plan(&catalog);
        let (items, dims) = (plan.total_items(&catalog), plan.total_assessments(&catalog));
        let events = every_event(&catalog, &plan);
        // The journal held the first 30 answers (none of them failed) and 4 assessments.
        let answered: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::ItemAnswered { .. }))
            .take(30)
            .collect();
        let assessed: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::DimensionAssessed(_)))
            .take(4)
            .collect();
        let mut bars = Bars::new(
            Some(indicatif::ProgressDrawTarget::hidden()),
            Arc::new(Accounting::default()),
            Phase::new(items, answered.len()),
            Phase::new(dims, assessed.len()),
        );
        let Some((_, item_bar, dim_bar)) = bars.bars.clone() else {
            panic!("bars were asked for")
        };
        assert_eq!((item_bar.position(), dim_bar.position()), (30, 4));
        assert!(
            bars.line().contains("eta –"),
            "no rate before the sitting did something"
        );
        for e in events
            .iter()
            .filter(|e| !answered.iter().chain(&assessed).any(|had| std::ptr::eq(*had, *e)))
        {
            bars.record(e);
        }
        bars.finish();
        assert_eq!((item_bar.position(), dim_bar.position()), (items as u64, dims as u64));
        assert_eq!(bars.interviews.sitting, items - 30);
    }

    #[test]
    fn the_last_draw_keeps_a_phase_short_of_its_total_when_it_is() {
        let accounting = Arc::new(Accounting::default());
        let mut bars = Bars::new(
            Some(indicatif::ProgressDrawTarget::hidden()),
            accounting,
            Phase::new(10, 0),
            Phase::new(5, 0),
        );
        let answered = Event::ItemAnswered {
            character: "c".into(),
            scale: "s".into(),
            repeat: 0,
            style: QueryStyle::Open,
            item_id: 1,
            question: "?".into(),
            response: "!".into(),
            retrieved: vec![],
            truncated: false,
        };
        for _ in 0..6 {
            bars.record(&answered);
        }
        bars.finish();
        let Some((_, items, dims)) = &bars.bars else {
            panic!("bars were asked for")
        };
        assert_eq!(
            (items.position(), dims.position()),
            (6, 0),
            "a stopped run: 6 of 10, not 10"
        );
        assert!(items.is_finished());
    }

    #[test]
    fn the_plain_line_says_the_requests_in_flight_and_waiting_of_each_phase() {
        let accounting = Arc::new(Accounting::default());
        let bars = Bars::new(None, accounting.clone(), Phase::new(10, 6), Phase::new(5, 0));
        let _rpa = accounting.queue("p", Role::Rpa).start();
        let _judge = [accounting.queue("p", Role::Judge), accounting.queue("p", Role::Judge)];
        let line = bars.line();
        assert!(
            line.starts_with(
                "interviews 6/10 · 1 in flight · 0 queued · eta –; assessments 0/5 · judge calls 0 in flight · 2 queued · eta –"
            ),
            "{line}"
        );
    }
}
