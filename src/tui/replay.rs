//! Replaying a recorded session on the workbench: its events with their original timing, scaled by
//! the speed, and its answers streamed as they were.

use std::path::Path;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

use super::app::{Action, Replay};
use super::load_memories;
use crate::catalog::Catalog;
use crate::journal;
use crate::llm::Role;
use crate::method::interview;
use crate::study::Event;
use crate::study::live::{Live, LiveKind, Pause};

/// A recorded answer cut into the pieces a replay streams: words, and runs of a few characters in
/// text without spaces (Chinese), so that every answer streams rather than appearing at once.
pub(super) fn replay_pieces(response: &str) -> Vec<String> {
    const RUN: usize = 3;
    let mut pieces = Vec::new();
    for word in response.split_inclusive(' ') {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() <= 4 * RUN {
            pieces.push(word.to_string());
        } else {
            pieces.extend(chars.chunks(RUN).map(|c| c.iter().collect::<String>()));
        }
    }
    pieces
}

/// Replays a journal with its original timing scaled by the speed; answers stream as tokens spread
/// over the time they took, so a replay looks like the live run.
pub(super) async fn replay(
    dir: &Path,
    data: &Path,
    catalog: &Catalog,
    tx: &UnboundedSender<Action>,
    speed: watch::Receiver<Replay>,
    pause: &Pause,
) -> Result<(), String> {
    let timed: Vec<(Option<u64>, Event)> =
        journal::read_timed(&dir.join("journal.jsonl")).map_err(|e| e.to_string())?;
    let events: Vec<Event> = timed.iter().map(|(_, e)| e.clone()).collect();
    // Another process goes on writing it: what is replayed is what its journal held at the start.
    let writer = journal::writer(&dir.join("journal.jsonl"));
    let _ = tx.send(Action::Memories(load_memories(data, catalog, &events)));
    let wait = |ms: u64| {
        let factor = match *speed.borrow() {
            Replay::Speed(s) => 1.0 / s.max(super::options::MIN_SPEED),
            Replay::Instant => 0.0,
        };
        Duration::from_millis((ms as f64 * factor) as u64)
    };
    // A timer costs about a millisecond even when it waits for nothing: `instant` takes none.
    let sleep = |d: Duration| async move {
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    };
    let mut previous: Option<u64> = None;
    for (ts, event) in timed {
        let gap = match (previous, ts) {
            (Some(a), Some(b)) => b.saturating_sub(a).min(30_000),
            (_, None) => 50,
            (None, Some(_)) => 0,
        };
        previous = ts.or(previous);
        if let Event::ItemAnswered {
            character,
            scale,
            repeat,
            style,
            item_id,
            question,
            response,
            ..
        } = &event
        {
            let purpose = interview::purpose(character, scale, *item_id, *style);
            let live = |kind| Live {
                role: Role::Rpa,
                purpose: purpose.clone(),
                repeat: *repeat,
                kind,
            };
            let _ = tx.send(Action::Live(live(LiveKind::Started {
                prompt: question.clone(),
            })));
            let pieces = replay_pieces(response);
            let step = gap / pieces.len().max(1) as u64;
            for piece in pieces {
                pause.wait().await;
                sleep(wait(step)).await;
                let _ = tx.send(Action::Live(live(LiveKind::Token(piece))));
            }
        } else {
            pause.wait().await;
            sleep(wait(gap)).await;
        }
        if matches!(*speed.borrow(), Replay::Instant) {
            tokio::task::yield_now().await;
        }
        let _ = tx.send(Action::Engine(event));
    }
    if let Some(journal::Writer { pid, .. }) = writer {
        let _ = tx.send(Action::Flash(format!(
            "replayed as its journal was when the replay began: session {} is being written by another \
             incharacter (pid {pid}), unfinished; open it from Sessions to read it anew",
            dir.file_name().unwrap_or_default().to_string_lossy()
        )));
    }
    Ok(())
}
