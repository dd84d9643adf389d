//! Continuous batching: the replies asked for at one time are decoded side by side, one forward pass
//! per token for all of them (the engine's batched pass: matrix-matrix work where one reply alone is
//! matrix-vector), a request joining at the next step and leaving when it is done.
//!
//! Every caller of [`Model::generate`] submits its request to the model's hub and waits there. Whoever
//! finds no step running leads the next one: it admits waiting requests up to the batch width (reading
//! their prompts), chooses each reply's next token from its logits, computes the next logits of all of
//! them in one pass, and leaves the text for each caller in its outbox. Callers pass their own pieces on
//! (so a caller's `on_token` runs on its own thread) and ask for cancellation through the hub.
//!
//! A reply does not depend on the batch it ran in: each has its own attention cache, sampler and
//! seed, and a sequence's logits in a batched pass are the ones it would get alone (the engine's
//! kernels keep one accumulator per sequence; tested in `incharacter_engine` and below).

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::{Decoding, Finish, Generated, Model, State, Weights, prefill};
use crate::Error;
use crate::constrain::Matcher;
use crate::sample::{REPEAT_WINDOW, Utf8Pieces};

/// Requests waiting, replies being decoded between steps, and what each caller has not taken yet.
#[derive(Default)]
pub(super) struct Hub {
    inner: Mutex<Inner>,
    /// Notified after every step and whenever a step may be led.
    changed: Condvar,
}

struct Inner {
    pending: VecDeque<Queued>,
    active: Vec<Slot>,
    outboxes: HashMap<u64, Outbox>,
    /// A step is running.
    leading: bool,
    next_id: u64,
    /// Replies decoded side by side at most.
    width: usize,
    /// The most replies one pass has decoded so far.
    widest: usize,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            pending: VecDeque::new(),
            active: Vec::new(),
            outboxes: HashMap::new(),
            leading: false,
            next_id: 0,
            width: 1,
            widest: 0,
        }
    }
}

#[derive(Default)]
struct Outbox {
    pieces: Vec<String>,
    done: Option<Result<Generated, Error>>,
    cancel: bool,
}

/// A request admitted to the hub, its prompt not read yet.
pub(super) struct Job {
    pub prompt: Vec<u32>,
    /// The length of its system part, when that may come from the prefix cache.
    pub split: Option<usize>,
    pub decoding: Decoding,
}

/// A reply being decoded.
struct Slot {
    id: u64,
    prompt_len: usize,
    weights: Weights,
    logits: Vec<f32>,
    decoding: Decoding,
    recent: Vec<u32>,
    generated: usize,
    pieces: Utf8Pieces,
    /// The whole text so far.
    text: String,
    /// The text of this step, for the caller.
    fresh: String,
}

/// What a waiting caller is to do next.
enum Turn {
    /// Pass these pieces on; `done` ends the reply.
    Mine {
        pieces: Vec<String>,
        done: Option<Result<Generated, Error>>,
    },
    /// Lead the next step.
    Lead,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_width(&self, width: usize) {
        self.lock().width = width.max(1);
    }

    pub fn width(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.width, inner.widest)
    }

    fn submit(&self, job: Job) -> u64 {
        let mut inner = self.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.outboxes.insert(id, Outbox::default());
        inner.pending.push_back(Queued { id, job });
        drop(inner);
        self.changed.notify_all();
        id
    }

    /// Waits until caller `id` has something to pass on, or may lead a step.
    fn wait(&self, id: u64, cancel: bool) -> Turn {
        let mut inner = self.lock();
        loop {
            let outbox = inner
                .outboxes
                .get_mut(&id)
                .expect("a caller's outbox lives until it is done");
            outbox.cancel |= cancel;
            if !outbox.pieces.is_empty() || outbox.done.is_some() {
                let pieces = std::mem::take(&mut outbox.pieces);
                let done = outbox.done.take();
                if done.is_some() {
                    inner.outboxes.remove(&id);
                }
                return Turn::Mine { pieces, done };
            }
            if !inner.leading && (!inner.pending.is_empty() || !inner.active.is_empty()) {
                inner.leading = true;
                return Turn::Lead;
            }
            inner = self.changed.wait(inner).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A waiting job with the id its caller waits under.
struct Queued {
    id: u64,
    job: Job,
}

impl Model {
    /// Replies decoded side by side at most (the local provider's `max_concurrency`); 1 decodes them
    /// one after another.
    pub fn set_batch_width(&self, width: usize) {
        self.hub.set_width(width);
    }

    /// Replies decoded side by side at most, and the most one pass has decoded so far.
    pub fn batch_width(&self) -> (usize, usize) {
        self.hub.width()
    }

    /// Submits `job` and takes part in decoding until its reply is done.
    pub(super) fn generate_in_batch(
        &self,
        job: Job,
        cancelled: &dyn Fn() -> bool,
        on_token: &mut dyn FnMut(&str),
    ) -> Result<Generated, Error> {
        let id = self.hub.submit(job);
        loop {
            match self.hub.wait(id, cancelled()) {
                Turn::Mine { pieces, done } => {
                    pieces.iter().for_each(|p| on_token(p));
                    if let Some(done) = done {
                        return done;
                    }
                }
                Turn::Lead => self.step(),
            }
        }
    }

    /// One step for every reply in the hub: waiting ones admitted (their prompts read), then a token
    /// for each and one pass for all.
    fn step(&self) {
        let mut inner = self.hub.lock();
        let mut slots = std::mem::take(&mut inner.active);
        let cancelled: Vec<u64> = inner
            .outboxes
            .iter()
            .filter(|(_, o)| o.cancel)
            .map(|(&id, _)| id)
            .collect();
        // A request cancelled while it waits for room is answered now, not when room comes.
        let mut done: Vec<(u64, Result<Generated, Error>)> = Vec::new();
        inner.pending.retain(|q| {
            let keep = !cancelled.contains(&q.id);
            if !keep {
                done.push((q.id, Err(Error::Cancelled)));
            }
            keep
        });
        let room = inner.width.saturating_sub(slots.len());
        let admitted: Vec<Queued> = (0..room).map_while(|_| inner.pending.pop_front()).collect();
        drop(inner);
        // Whatever happens in the pass, the callers of these replies are answered and the hub led again.
        let mut guard = Unanswered {
            hub: &self.hub,
            ids: slots
                .iter()
                .map(|s| s.id)
                .chain(admitted.iter().map(|q| q.id))
                .collect(),
        };
        let mut pieces: Vec<(u64, String)> = Vec::new();
        slots.retain(|s| {
            let keep = !cancelled.contains(&s.id);
            if !keep {
                done.push((s.id, Err(Error::Cancelled)));
            }
            keep
        });
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for Queued { id, job } in admitted {
            match read_prompt(&mut state, &job.prompt, job.split) {
                Ok((weights, logits)) => slots.push(Slot {
                    id,
                    prompt_len: job.prompt.len(),
                    weights,
                    logits,
                    decoding: job.decoding,
                    recent: Vec::with_capacity(REPEAT_WINDOW),
                    generated: 0,
                    pieces: Utf8Pieces::default(),
                    text: String::new(),
                    fresh: String::new(),
                }),
                Err(e) => done.push((id, Err(e))),
            }
        }
        // A token for each reply from its logits; the ones that go on take part in the pass.
        let mut going = Vec::new();
        for mut slot in slots {
            let advanced = self.advance(&mut slot);
            if !slot.fresh.is_empty() {
                pieces.push((slot.id, std::mem::take(&mut slot.fresh)));
            }
            match advanced {
                Ok(Some(finish)) => {
                    let (id, (rest, reply)) = (slot.id, slot.finish(self, finish));
                    pieces.extend(rest.map(|r| (id, r)));
                    done.push((id, reply));
                }
                Ok(None) => going.push(slot),
                Err(e) => done.push((slot.id, Err(e))),
            }
        }
        let widest = going.len();
        let slots = match self.pass(&mut going) {
            Ok(()) => going,
            Err(e) => {
                done.extend(going.iter().map(|s| (s.id, Err(e.clone()))));
                Vec::new()
            }
        };
        drop(state);
        guard.ids.clear();
        let mut inner = self.hub.lock();
        for (id, piece) in pieces {
            if let Some(o) = inner.outboxes.get_mut(&id) {
                o.pieces.push(piece);
            }
        }
        for (id, result) in done {
            if let Some(o) = inner.outboxes.get_mut(&id) {
                o.done = Some(result);
            }
        }
        inner.widest = inner.widest.max(widest);
        inner.active = slots;
        inner.leading = false;
        drop(inner);
        self.hub.changed.notify_all();
    }

    /// Chooses `slot`'s next token; `Some` when the reply ends here (its text then complete).
    fn advance(&self, slot: &mut Slot) -> Result<Option<Finish>, Error> {
        if slot.generated >= slot.decoding.max_new {
            return Ok(Some(Finish::Length));
        }
        let next = self.choose(&mut slot.logits, &mut slot.decoding, &slot.recent)?;
        slot.generated += 1;
        if slot.recent.len() == REPEAT_WINDOW {
            slot.recent.remove(0);
        }
        slot.recent.push(next);
        if self.vocab.stop.contains(&next) {
            return Ok(Some(Finish::Stop));
        }
        if let Some(Some(bytes)) = self.vocab.token_bytes.get(next as usize)
            && let Some(piece) = slot.pieces.push(bytes)
        {
            slot.text.push_str(&piece);
            slot.fresh.push_str(&piece);
        }
        if slot.decoding.matcher.as_ref().is_some_and(Matcher::is_finished) {
            return Ok(Some(Finish::Stop));
        }
        if slot.generated >= slot.decoding.max_new {
            return Ok(Some(Finish::Length));
        }
        Ok(None)
    }

    /// The next logits of every reply in `going`, its last token read, in one pass.
    fn pass(&self, going: &mut [Slot]) -> Result<(), Error> {
        if going.is_empty() {
            return Ok(());
        }
        let last: Vec<[u32; 1]> = going
            .iter()
            .map(|s| [*s.recent.last().expect("a token was chosen")])
            .collect();
        let ids: Vec<&[u32]> = last.iter().map(|t| t.as_slice()).collect();
        let positions: Vec<usize> = going.iter().map(|s| s.prompt_len + s.generated - 1).collect();
        let mut weights: Vec<&mut Weights> = going.iter_mut().map(|s| &mut s.weights).collect();
        let logits = Weights::forward_many(&mut weights, &ids, &positions)?;
        for (slot, row) in going.iter_mut().zip(logits) {
            slot.logits = row;
        }
        Ok(())
    }
}

impl Slot {
    /// The finished reply, and the end of its text not passed on yet (bytes that were not whole
    /// UTF-8 until now).
    fn finish(mut self, model: &Model, finish: Finish) -> (Option<String>, Result<Generated, Error>) {
        let rest = self.pieces.rest();
        if let Some(rest) = &rest {
            self.text.push_str(rest);
        }
        if let Some(m) = &self.decoding.matcher
            && !m.is_complete()
        {
            let e = Error::Model(format!(
                "the constrained reply stopped after {} tokens before its JSON was complete",
                self.generated
            ));
            return (rest, Err(e));
        }
        let reply = Generated {
            text: self.text,
            prompt_tokens: self.prompt_len,
            completion_tokens: self.generated,
            finish,
            choices: model.choices(&self.decoding.choices),
        };
        (rest, Ok(reply))
    }
}

/// Reads `prompt` into a conversation of its own and returns it with the logits after it; `split` is
/// the length of its system part, when that may be cached (continued from the cache when it is there,
/// kept in it when not).
fn read_prompt(state: &mut State, prompt: &[u32], split: Option<usize>) -> Result<(Weights, Vec<f32>), Error> {
    let State { weights, prefixes } = state;
    let cached = split.and_then(|p| prefixes.take(&prompt[..p]).map(|w| (p, w)));
    let (own, logits) = match (split, cached) {
        (_, Some((p, mut w))) => {
            let logits = prefill(&mut w, &prompt[p..], p)?;
            (w, logits)
        }
        (Some(p), None) => {
            let mut w = weights.fresh();
            prefill(&mut w, &prompt[..p], 0)?;
            prefixes.keep(prompt[..p].to_vec(), w.clone());
            let logits = prefill(&mut w, &prompt[p..], p)?;
            (w, logits)
        }
        (None, None) => {
            let mut w = weights.fresh();
            let logits = prefill(&mut w, prompt, 0)?;
            (w, logits)
        }
    };
    Ok((own, logits))
}

/// The callers of the replies in a step, answered with an error if the step does not end (a panic in
/// the pass), and the hub freed for the next leader.
struct Unanswered<'a> {
    hub: &'a Hub,
    ids: Vec<u64>,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.ids.is_empty() {
            return;
        }
        let mut inner = self.hub.lock();
        for id in &self.ids {
            if let Some(o) = inner.outboxes.get_mut(id) {
                o.done = Some(Err(Error::Model("the local model failed during a batched step".into())));
            }
        }
        inner.leading = false;
        drop(inner);
        self.hub.changed.notify_all();
    }
}
