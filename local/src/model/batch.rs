//! Continuous batching: the replies asked for at one time are decoded side by side, one forward pass
//! per token for all of them (the engine's batched pass: matrix-matrix work where one reply alone is
//! matrix-vector), a request joining at the next step and leaving when it is done.
//!
//! Every caller of [`Model::generate`] submits its request to the model's hub and waits there. Whoever
//! finds no step running leads the next one: it admits waiting requests up to the batch width, chooses
//! each reply's next token from its logits, computes the next logits of all of them in one pass, and
//! leaves the text for each caller in its outbox. Callers pass their own pieces on (so a caller's
//! `on_token` runs on its own thread) and ask for cancellation through the hub.
//!
//! Prompts are read in the same passes, [`PASS_PROMPT_TOKENS`] at a time, the oldest first: a long
//! prompt (a judge's 7,000 tokens) no longer stops every other reply while it is read, and the replies
//! being decoded ride in passes that read the weights for the prompt anyway.
//!
//! A reply does not depend on the batch it ran in: each has its own attention cache, sampler and
//! seed, and a sequence's logits in a batched pass are the ones it would get alone (the engine's
//! kernels keep one accumulator per sequence; tested in `incharacter_engine` and below).

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::{Decoding, Finish, Generated, Model, Prefixes, Weights};
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

/// Prompt tokens one pass reads at most, over all the prompts being read. Smaller passes let the
/// replies being decoded go on between them; at 128 a prompt is read as fast as at 512 (the 1.5B
/// model, a 1,000-token prompt: 7.1–7.9 s against 7.9–8.9 s).
const PASS_PROMPT_TOKENS: usize = 128;

/// A request admitted to the hub, its prompt not read yet.
pub(super) struct Job {
    pub prompt: Vec<u32>,
    /// The length of its system part, when that may come from the prefix cache.
    pub split: Option<usize>,
    pub decoding: Decoding,
}

/// A reply being decoded, or its prompt being read.
struct Slot {
    id: u64,
    prompt: Vec<u32>,
    /// How much of the prompt is in `weights`' attention cache: all of it once the reply is decoded.
    read: usize,
    /// Where the prompt's system part ends, while it is being read to be kept in the prefix cache.
    keep_at: Option<usize>,
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
        self.follow(id, cancelled, on_token)
    }

    /// Takes part in decoding until the reply of the request submitted as `id` is done, passing its
    /// pieces on.
    fn follow(
        &self,
        id: u64,
        cancelled: &dyn Fn() -> bool,
        on_token: &mut dyn FnMut(&str),
    ) -> Result<Generated, Error> {
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
        let mut deferred = Vec::new();
        let super::State {
            weights: model,
            prefixes,
        } = &mut *state;
        for queued in admitted {
            if waits_for_prefix(&slots, &queued.job) {
                deferred.push(queued);
            } else {
                slots.push(admit(prefixes, model, queued));
            }
        }
        // A token for each reply from its logits; the ones that go on take part in the pass, and so
        // do the prompts being read.
        let mut going = Vec::new();
        for mut slot in slots {
            if slot.reading() {
                going.push(slot);
                continue;
            }
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
        let widest = going.iter().filter(|s| !s.reading()).count();
        let slots = match pass(&mut going, prefixes) {
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
        // Requests waiting for a system prompt another one is reading go first in the next step.
        for queued in deferred.into_iter().rev() {
            inner.pending.push_front(queued);
        }
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
}

impl Slot {
    /// Its prompt is still being read.
    fn reading(&self) -> bool {
        self.read < self.prompt.len()
    }

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
            prompt_tokens: self.prompt.len(),
            completion_tokens: self.generated,
            finish,
            choices: model.choices(&self.decoding.choices),
        };
        (rest, Ok(reply))
    }
}

/// Whether `job` is to wait: another slot is reading the same system part to keep it (so it is not
/// cached yet); `job` then continues from the cache rather than read it again.
fn waits_for_prefix(slots: &[Slot], job: &Job) -> bool {
    split(job).is_some_and(|p| {
        slots
            .iter()
            .any(|s| s.keep_at.is_some_and(|k| s.prompt[..k] == job.prompt[..p]))
    })
}

/// Where `job`'s system part ends, when it may come from the prefix cache.
fn split(job: &Job) -> Option<usize> {
    job.split.filter(|&p| p > 0 && p < job.prompt.len())
}

/// A slot for `queued`, its prompt to be read into a conversation of its own: continued from the
/// prefix cache when its system part is there, else read from the start (the system part kept in the
/// cache once read).
fn admit(prefixes: &mut Prefixes, model: &Weights, queued: Queued) -> Slot {
    let Queued { id, job } = queued;
    let (weights, read, keep_at) = match split(&job) {
        Some(p) => match prefixes.take(&job.prompt[..p]) {
            Some(cached) => (cached, p, None),
            None => (model.fresh(), 0, Some(p)),
        },
        None => (model.fresh(), 0, None),
    };
    Slot {
        id,
        prompt: job.prompt,
        read,
        keep_at,
        weights,
        logits: Vec::new(),
        decoding: job.decoding,
        recent: Vec::with_capacity(REPEAT_WINDOW),
        generated: 0,
        pieces: Utf8Pieces::default(),
        text: String::new(),
        fresh: String::new(),
    }
}

/// One pass for every slot in `going`: the last token of each reply being decoded, and the next part
/// of the prompts being read (at most [`PASS_PROMPT_TOKENS`] in all, the oldest prompt first, a part
/// ending where a system part is to be kept). A prompt read to its end leaves its slot the logits to
/// choose the reply's first token from.
fn pass(going: &mut [Slot], prefixes: &mut Prefixes) -> Result<(), Error> {
    let mut budget = PASS_PROMPT_TOKENS;
    // (index in `going`, tokens, position) of every slot in the pass.
    let mut parts: Vec<(usize, Vec<u32>, usize)> = Vec::new();
    for (i, slot) in going.iter().enumerate() {
        if slot.reading() {
            let end = slot.keep_at.filter(|&k| k > slot.read).unwrap_or(slot.prompt.len());
            let n = (end - slot.read).min(budget);
            if n > 0 {
                budget -= n;
                parts.push((i, slot.prompt[slot.read..slot.read + n].to_vec(), slot.read));
            }
        } else {
            let last = *slot.recent.last().expect("a token was chosen");
            parts.push((i, vec![last], slot.prompt.len() + slot.generated - 1));
        }
    }
    if parts.is_empty() {
        return Ok(());
    }
    let ids: Vec<&[u32]> = parts.iter().map(|(_, t, _)| t.as_slice()).collect();
    let positions: Vec<usize> = parts.iter().map(|&(_, _, at)| at).collect();
    let in_pass: Vec<usize> = parts.iter().map(|&(i, ..)| i).collect();
    let mut weights: Vec<&mut Weights> = going
        .iter_mut()
        .enumerate()
        .filter(|(i, _)| in_pass.contains(i))
        .map(|(_, s)| &mut s.weights)
        .collect();
    let logits = Weights::forward_many(&mut weights, &ids, &positions)?;
    for ((i, tokens, _), row) in parts.iter().zip(logits) {
        let slot = &mut going[*i];
        if slot.reading() {
            slot.read += tokens.len();
            if slot.keep_at == Some(slot.read) {
                prefixes.keep(slot.prompt[..slot.read].to_vec(), slot.weights.clone());
                slot.keep_at = None;
            }
        }
        slot.logits = row;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::tests::{request, tiny};
    use super::*;
    use crate::Request;

    fn job(model: &Model, r: &Request) -> Job {
        let prompt = model.encode(&model.prompt(r)).unwrap();
        Job {
            decoding: model.decoding(r, &prompt).unwrap(),
            split: model.system_prefix(r, &prompt),
            prompt,
        }
    }

    /// Each reply, and when (on a clock that ticks at every piece and every end) its first piece
    /// came and it ended: the jobs are all submitted before any is followed, so the first step
    /// admits them in this order.
    fn together(model: &Model, jobs: Vec<Job>) -> Vec<(Generated, usize, usize)> {
        let ids: Vec<u64> = jobs.into_iter().map(|j| model.hub.submit(j)).collect();
        let clock = AtomicUsize::new(0);
        std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .iter()
                .map(|&id| {
                    let clock = &clock;
                    s.spawn(move || {
                        let mut first = None;
                        let reply = model
                            .follow(id, &|| false, &mut |_| {
                                let now = clock.fetch_add(1, Ordering::SeqCst);
                                first.get_or_insert(now);
                            })
                            .unwrap();
                        let end = clock.fetch_add(1, Ordering::SeqCst);
                        (reply, first.unwrap_or(end), end)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn a_prompt_read_a_part_per_pass_gives_the_bits_of_one_read_whole() {
        let (_dir, model) = tiny("qwen2");
        let ids: Vec<u32> = (0..3 * PASS_PROMPT_TOKENS as u32 + 17)
            .map(|t| (t * 7) % 60 + 1)
            .collect();
        let state = model.state.lock().unwrap();
        let mut whole = state.weights.fresh();
        let want = whole.forward(&ids, 0).unwrap();
        let mut parts = state.weights.fresh();
        let mut got = Vec::new();
        for (k, part) in ids.chunks(PASS_PROMPT_TOKENS).enumerate() {
            got = parts.forward(part, k * PASS_PROMPT_TOKENS).unwrap();
        }
        assert_eq!(got, want);
    }

    /// A long prompt admitted behind short ones is read while their replies are decoded, and no reply
    /// is other than the one it gets alone.
    #[test]
    fn replies_go_on_while_a_long_prompt_is_read() {
        let (_dir, model) = tiny("qwen2");
        let mut requests: Vec<Request> = (0..3)
            .map(|i| {
                let mut r = request("Be brief.", &format!("Question {i}?"));
                r.max_tokens = Some(8);
                r
            })
            .collect();
        let mut long = request("Read this.", &"word and ".repeat(300));
        long.max_tokens = Some(4);
        requests.push(long);
        let alone: Vec<Generated> = requests
            .iter()
            .map(|r| model.generate(r, &|| false, &mut |_| {}).unwrap())
            .collect();
        let long_prompt = job(&model, &requests[3]).prompt.len();
        assert!(long_prompt > 10 * PASS_PROMPT_TOKENS, "{long_prompt} tokens");

        model.set_batch_width(4);
        let jobs = requests.iter().map(|r| job(&model, r)).collect();
        let got = together(&model, jobs);
        for (i, ((reply, ..), want)) in got.iter().zip(&alone).enumerate() {
            assert_eq!(reply, want, "request {i}");
        }
        let long_first = got[3].1;
        for (i, (reply, _, end)) in got[..3].iter().enumerate() {
            assert_eq!(reply.completion_tokens, 8, "request {i}");
            assert!(
                *end < long_first,
                "request {i} ended at {end}, the long reply began at {long_first}"
            );
        }
        assert_eq!(model.batch_width(), (4, 3));
    }

    /// Requests that share a system prompt not cached yet wait while the first of them reads it,
    /// and then continue from the cache: it is read once.
    #[test]
    fn a_system_prompt_asked_for_by_several_at_once_is_read_once() {
        let system = "You are a character with a long description. ".repeat(40);
        let requests: Vec<Request> = (0..3).map(|i| request(&system, &format!("Question {i}?"))).collect();
        let (_a, whole) = tiny("llama");
        let whole = whole.without_prefix_cache();
        let alone: Vec<Generated> = requests
            .iter()
            .map(|r| whole.generate(r, &|| false, &mut |_| {}).unwrap())
            .collect();
        let (_b, model) = tiny("llama");
        model.set_batch_width(4);
        let jobs: Vec<Job> = requests.iter().map(|r| job(&model, r)).collect();
        let split = jobs[0].split.expect("a system part to cache");
        assert!(split > 2 * PASS_PROMPT_TOKENS, "{split} tokens");
        let got = together(&model, jobs);
        for (i, ((reply, ..), want)) in got.iter().zip(&alone).enumerate() {
            assert_eq!(reply, want, "request {i}");
        }
        assert_eq!(model.prefix_hits(), 2, "the second and third continue from the cache");
    }
}
