//! A loaded model answering requests: the conversation rendered with the file's chat template,
//! tokenized, computed (a system prompt seen recently continued from its cached attention state), and
//! the reply sampled token by token, within a JSON Schema when the request has one. One loaded model
//! is shared; the replies asked for at one time are decoded side by side ([`batch`]).

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Error;
use crate::constrain::{self, Matcher};
use crate::decoder::Decoder;
use crate::gguf::facts;
use crate::gguf_read::{Gguf, Value};
use crate::sample::{Rng, most_likely, penalize_repeats, sample};
use crate::template::{CHATML, render_template, template_problem};
use crate::vocab::Vocab;

mod batch;

/// One message of a conversation, with its role as chat templates name it (`system`, `user`,
/// `assistant`).
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// What to generate: the conversation as it should reach the model (any description of the schema
/// already written into it by the caller), and how to sample. `None` takes the model's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    pub messages: Vec<Message>,
    /// A JSON Schema the reply must follow, enforced token by token.
    pub schema: Option<serde_json::Value>,
    /// 0.7 when not given; 0 is greedy.
    pub temperature: Option<f32>,
    /// 1.0 (no nucleus cut) when not given.
    pub top_p: Option<f32>,
    /// When not given, a seed derived from the prompt: the same request draws the same reply.
    pub seed: Option<u64>,
    /// 512 when not given; a constrained reply may take at least 1,024 to finish its JSON.
    pub max_tokens: Option<u32>,
    /// When given, each chosen token comes with the `n` most likely tokens that could have come
    /// instead ([`Generated::choices`]).
    pub top_logprobs: Option<usize>,
}

/// Why a reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The model ended its turn, or the schema's JSON was complete.
    Stop,
    /// The token budget (or the context) ran out.
    Length,
}

impl Finish {
    /// The name OpenAI-compatible servers give it (`finish_reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// A finished reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The whole text, as it was passed on in pieces.
    pub text: String,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub finish: Finish,
    /// With [`Request::top_logprobs`]: one per token of the reply, in order.
    pub choices: Vec<Choice>,
}

/// One token of a reply and the tokens that could have taken its place, as OpenAI's `logprobs`
/// reports them: `logprob` is the natural log of the probability under the model at temperature 1,
/// among the tokens the schema allowed at that point (free text: all of them, before the repetition
/// penalty), over the 256 most likely.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// Where the token's bytes begin in the reply's text.
    pub offset: usize,
    pub token: String,
    /// The most likely tokens, most likely first (the chosen one among them when it is that likely).
    pub top: Vec<(String, f32)>,
}

/// Attention caches of recent system prompts, kept so that the items of one interview (the same
/// character description, a different question each) compute their shared prompt prefix once.
/// Bounded by tokens: SmolLM2-135M keeps 46 KiB per token (30 layers × keys and values × 3 heads ×
/// 64 floats), so the budget below holds at most ~370 MiB.
const PREFIX_CACHE_TOKENS: usize = 8192;

/// A model's weights and one conversation's attention cache (`decoder`); a clone shares the weights
/// and copies the cache, so later steps on either copy leave the other alone.
type Weights = Decoder;

#[derive(Default)]
struct Prefixes {
    /// Least recently used first.
    entries: Vec<(Vec<u32>, Weights)>,
    hits: u64,
}

impl Prefixes {
    fn take(&mut self, ids: &[u32]) -> Option<Weights> {
        let i = self.entries.iter().position(|(k, _)| k == ids)?;
        let entry = self.entries.remove(i);
        let copy = entry.1.clone();
        self.entries.push(entry);
        self.hits += 1;
        Some(copy)
    }

    fn keep(&mut self, ids: Vec<u32>, weights: Weights) {
        if ids.len() > PREFIX_CACHE_TOKENS {
            return;
        }
        while self.entries.iter().map(|(k, _)| k.len()).sum::<usize>() + ids.len() > PREFIX_CACHE_TOKENS {
            self.entries.remove(0);
        }
        self.entries.push((ids, weights));
    }
}

struct State {
    /// The model, and the conversation of `logits`, `greedy` and the like.
    weights: Weights,
    prefixes: Prefixes,
}

/// The token of the highest logit (the last of equal ones, as `max_by` keeps).
fn argmax(row: &[f32]) -> u32 {
    row.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i as u32)
}

/// What [`Model::greedy_together`] decoded, and how long its two phases took.
#[derive(Debug, Clone, PartialEq)]
pub struct Together {
    pub tokens: Vec<Vec<u32>>,
    /// Reading every prompt (one pass), then the `n - 1` steps after the first token.
    pub prefill_s: f64,
    pub decode_s: f64,
}

/// A GGUF loaded onto the engine, with its vocabulary and chat template.
pub struct Model {
    name: String,
    state: Mutex<State>,
    /// Whether shared system prompts are computed once (`without_prefix_cache` turns it off).
    prefix_cache: bool,
    vocab: Vocab,
    /// The vocabulary's bytes as a trie, for constrained decoding's every-allowed-token fallback.
    trie: constrain::TokenTrie,
    template: String,
    context: usize,
    /// Time spent choosing tokens (sampling, and matching the schema when there is one), and how many
    /// were chosen: a benchmark compares constrained with free decoding by it.
    choosing: Choosing,
    /// The replies being generated (see [`batch`]).
    hub: batch::Hub,
}

#[derive(Default)]
struct Choosing {
    nanos: AtomicU64,
    tokens: AtomicU64,
}

impl Model {
    /// Loads the GGUF at `path` onto the project's engine (`decoder`), known as `name`. A llama file's
    /// context is capped at `llama_context` positions, whatever the file says (the caller budgets its
    /// prompts to that many); other architectures keep the file's own (4,096 when it says none) up to
    /// the engine's [`incharacter_engine::MOST_POSITIONS`].
    pub fn load(name: &str, path: &Path, llama_context: usize) -> Result<Model, Error> {
        let fail = |e: String| Error::Model(format!("cannot load {}: {e}", crate::shown(path)));
        let arch = facts(path)?.architecture;
        let open = |p: &Path| File::open(p).map_err(|e| Error::Model(format!("{}: {e}", crate::shown(p))));
        let mut file = BufReader::new(open(path)?);
        let content = Gguf::read(&mut file).map_err(|e| fail(e.to_string()))?;
        let meta_str = |k: &str| content.get(k).and_then(Value::as_str).map(str::to_string);
        let meta_u32 = |k: &str| content.get(k).and_then(Value::as_u32);
        let template = meta_str("tokenizer.chat_template")
            .filter(|t| template_problem(t).is_none())
            .unwrap_or_else(|| CHATML.to_string());
        let mut context = (meta_u32(&format!("{arch}.context_length")).unwrap_or(4096) as usize)
            .min(incharacter_engine::MOST_POSITIONS);
        if arch == "llama" {
            // SmolLM2 says 8,192; the engine's rotary tables cover as many as the cap.
            context = context.min(llama_context);
        }
        let vocab = Vocab::from_gguf(&content).map_err(|e| Error::Input(format!("{}: {e}", crate::shown(path))))?;
        // An embedding padded past the vocabulary is common (to a multiple of 64 or so); one of far
        // more rows is not this vocabulary's, and is refused before its bytes are read (a crafted
        // one asked for hundreds of gigabytes).
        const PADDING: usize = 8192;
        for tensor in ["token_embd.weight", "output.weight"] {
            if let Some(rows) = content.tensor(tensor).and_then(|t| t.shape.first())
                && *rows > vocab.token_bytes.len() + PADDING
            {
                return Err(fail(format!(
                    "{tensor} has {rows} rows for a vocabulary of {} tokens",
                    vocab.token_bytes.len()
                )));
            }
        }
        let weights = Weights::load(&arch, &content, &mut file, context).map_err(fail)?;
        // Every token the vocabulary can write needs its logit (a constrained reply indexes them).
        if vocab.token_bytes.len() > weights.vocab() {
            return Err(fail(format!(
                "its vocabulary has {} tokens, its output matrix logits for {}",
                vocab.token_bytes.len(),
                weights.vocab()
            )));
        }
        Ok(Model {
            name: name.into(),
            state: Mutex::new(State {
                weights,
                prefixes: Prefixes::default(),
            }),
            prefix_cache: true,
            trie: constrain::TokenTrie::new(&vocab.token_bytes),
            vocab,
            template,
            context,
            choosing: Choosing::default(),
            hub: batch::Hub::default(),
        })
    }

    /// The same model computing every prompt whole (to check that the prefix cache changes nothing).
    pub fn without_prefix_cache(mut self) -> Self {
        self.prefix_cache = false;
        self
    }

    /// The name it was loaded as.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Positions a prompt and its reply may take together.
    pub fn context(&self) -> usize {
        self.context
    }

    /// Nanoseconds spent choosing tokens so far (sampling and schema matching), and tokens chosen.
    pub fn choosing(&self) -> (u64, u64) {
        (
            self.choosing.nanos.load(Ordering::Relaxed),
            self.choosing.tokens.load(Ordering::Relaxed),
        )
    }

    /// How many prompts started from a cached system prompt so far.
    pub fn prefix_hits(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).prefixes.hits
    }

    /// The logits after each of `ids[prefill - 1..]`: the first `prefill` ids in one forward pass,
    /// the rest one at a time through the attention cache, as a prompt and its reply go (to compare
    /// with another engine's).
    pub fn logits(&self, ids: &[u32], prefill: usize) -> Result<Vec<Vec<f32>>, Error> {
        self.decode(ids, prefill, ids.len() - prefill, |_| None)
    }

    /// The `n` tokens greedy decoding puts after `prompt` (the highest logit each step; no penalty,
    /// no stop), to compare with another engine.
    pub fn greedy(&self, prompt: &[u32], n: usize) -> Result<Vec<u32>, Error> {
        let mut out = Vec::with_capacity(n);
        self.decode(prompt, prompt.len(), n, |row| {
            let next = argmax(row);
            out.push(next);
            Some(next)
        })?;
        Ok(out)
    }

    /// `prompts` decoded greedily side by side, `n` tokens each: their prompts read in one pass, then
    /// one pass per step for all of them (the engine's batched forward). What `bench local --parallel`
    /// measures; each sequence's tokens are the ones [`Model::greedy`] gives it alone.
    pub fn greedy_together(&self, prompts: &[Vec<u32>], n: usize) -> Result<Together, Error> {
        let guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let weights = &guard.weights;
        let mut caches = vec![crate::decoder::Cache::default(); prompts.len()];
        let started = std::time::Instant::now();
        let whole: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
        let logits = weights.forward_batch(&mut caches, &whole, &vec![0; prompts.len()])?;
        let prefill = started.elapsed();
        let mut tokens: Vec<Vec<u32>> = logits.iter().map(|row| vec![argmax(row)]).collect();
        let started = std::time::Instant::now();
        for step in 1..n {
            let last: Vec<[u32; 1]> = tokens.iter().map(|t| [t[step - 1]]).collect();
            let ids: Vec<&[u32]> = last.iter().map(|t| t.as_slice()).collect();
            let positions: Vec<usize> = prompts.iter().map(|p| p.len() + step - 1).collect();
            let logits = weights.forward_batch(&mut caches, &ids, &positions)?;
            for (t, row) in tokens.iter_mut().zip(&logits) {
                t.push(argmax(row));
            }
        }
        Ok(Together {
            tokens,
            prefill_s: prefill.as_secs_f64(),
            decode_s: started.elapsed().as_secs_f64(),
        })
    }

    /// Runs `ids[..prefill]` in one pass, then `steps` more tokens one at a time: `ids[prefill..]`
    /// while they last, else what `choose` picks from the last logits. Returns every step's logits.
    fn decode(
        &self,
        ids: &[u32],
        prefill: usize,
        steps: usize,
        mut choose: impl FnMut(&[f32]) -> Option<u32>,
    ) -> Result<Vec<Vec<f32>>, Error> {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let weights = &mut guard.weights;
        let mut step = |chunk: &[u32], position: usize| weights.forward(chunk, position);
        let mut rows = vec![step(&ids[..prefill], 0)?];
        for position in prefill..prefill + steps {
            let last = rows.last().map_or(&[][..], Vec::as_slice);
            let chosen = choose(last);
            let Some(next) = ids.get(position).copied().or(chosen) else {
                break;
            };
            if position + 1 == prefill + steps && ids.get(position).is_none() {
                break; // the last choice needs no logits after it
            }
            rows.push(step(&[next], position)?);
        }
        Ok(rows)
    }

    /// The text `ids` stand for (control tokens left out).
    pub fn text_of(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .filter_map(|&id| self.vocab.token_bytes.get(id as usize).cloned().flatten())
            .flatten()
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The prompt text for a conversation, from the model's own chat template.
    pub fn prompt(&self, request: &Request) -> String {
        self.render(&messages(request), true)
    }

    /// The prompt text of `messages` by the file's template, or by ChatML where it fails on them (its
    /// failures on an ordinary conversation are found when the file is loaded: [`template_problem`]).
    fn render(&self, messages: &[serde_json::Value], add_generation_prompt: bool) -> String {
        let (bos, eos) = (&self.vocab.bos, &self.vocab.eos);
        render_template(&self.template, messages, add_generation_prompt, (bos, eos))
            .or_else(|_| render_template(CHATML, messages, add_generation_prompt, (bos, eos)))
            .unwrap_or_default()
    }

    /// How many leading tokens of `prompt` are the system messages alone, when the conversation goes
    /// on after them and the system part tokenizes the same on its own (checked, not assumed).
    fn system_prefix(&self, request: &Request, prompt: &[u32]) -> Option<usize> {
        let messages = messages(request);
        let system = messages.iter().take_while(|m| m["role"] == "system").count();
        if system == 0 || system == messages.len() {
            return None;
        }
        let ids = self.encode(&self.render(&messages[..system], false)).ok()?;
        (!ids.is_empty() && ids.len() < prompt.len() && prompt.starts_with(&ids)).then_some(ids.len())
    }

    /// Token ids of `text` (special tokens such as `<|im_start|>` recognised).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, Error> {
        self.vocab
            .tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| Error::Input(format!("tokenizer: {e}")))
    }

    /// Generates a reply, passing text pieces to `on_token` as soon as they are whole UTF-8, and
    /// stopping with [`Error::Cancelled`] once `cancelled` says so (asked before every token).
    pub fn generate(
        &self,
        request: &Request,
        cancelled: &dyn Fn() -> bool,
        on_token: &mut dyn FnMut(&str),
    ) -> Result<Generated, Error> {
        let prompt = self.encode(&self.prompt(request))?;
        let decoding = self.decoding(request, &prompt)?;
        let split = if self.prefix_cache {
            self.system_prefix(request, &prompt)
        } else {
            None
        };
        self.generate_in_batch(
            batch::Job {
                prompt,
                split,
                decoding,
            },
            cancelled,
            on_token,
        )
    }

    /// How `request` is decoded after `prompt`: the schema's matcher, the token budget (within the
    /// context) and the seeded sampler.
    fn decoding(&self, request: &Request, prompt: &[u32]) -> Result<Decoding, Error> {
        let matcher = match &request.schema {
            Some(s) => Some(Matcher::new(
                &constrain::compile(s).map_err(|e| Error::Input(e.to_string()))?,
            )),
            None => None,
        };
        let requested = request.max_tokens.map_or(512, |n| n as usize);
        // A constrained reply must be allowed to finish its JSON.
        let max_new = if matcher.is_some() {
            requested.max(1024)
        } else {
            requested
        };
        if prompt.len() + 8 > self.context {
            return Err(Error::Input(format!(
                "the prompt has {} tokens; the model's context is {}",
                prompt.len(),
                self.context
            )));
        }
        let seed = request.seed.unwrap_or_else(|| {
            prompt
                .iter()
                .fold(17u64, |h, &t| h.wrapping_mul(31).wrapping_add(u64::from(t)))
        });
        Ok(Decoding {
            matcher,
            max_new: max_new.min(self.context - prompt.len()),
            temperature: request.temperature.unwrap_or(0.7).max(0.0),
            top_p: request.top_p.unwrap_or(1.0).clamp(0.0, 1.0),
            rng: Rng(seed),
            top_logprobs: request.top_logprobs.unwrap_or(0),
            choices: Vec::new(),
        })
    }

    /// The next token: sampled from `logits` (free text penalized for repeats), among the tokens the
    /// schema allows when there is one, which is then fed the token's bytes. The time it takes is
    /// counted in `choosing`.
    fn choose(&self, logits: &mut [f32], decoding: &mut Decoding, recent: &[u32]) -> Result<u32, Error> {
        let choosing = std::time::Instant::now();
        let Decoding {
            matcher,
            temperature,
            top_p,
            rng,
            top_logprobs,
            choices,
            ..
        } = decoding;
        let next = match matcher {
            None => {
                let rivals = (*top_logprobs > 0).then(|| most_likely(logits, *top_logprobs, |_| true, Vec::new));
                penalize_repeats(logits, recent);
                let next = sample(logits, *temperature, *top_p, rng, |_| true, Vec::new);
                if let (Some(next), Some(rivals)) = (next, rivals) {
                    choices.push((next, rivals));
                }
                next
            }
            Some(m) => {
                let allowed = |id: u32| match self.vocab.token_bytes.get(id as usize) {
                    Some(Some(bytes)) => !bytes.is_empty() && m.accepts(bytes),
                    _ => self.vocab.stop.contains(&id) && m.is_complete(),
                };
                let every_allowed = || {
                    let mut ids = self.trie.accepted(m);
                    if m.is_complete() {
                        ids.extend_from_slice(&self.vocab.stop);
                    }
                    ids
                };
                let rivals = (*top_logprobs > 0).then(|| most_likely(logits, *top_logprobs, allowed, every_allowed));
                let next = sample(logits, *temperature, *top_p, rng, allowed, every_allowed);
                if let (Some(next), Some(rivals)) = (next, rivals) {
                    choices.push((next, rivals));
                }
                next
            }
        };
        let Some(next) = next else {
            return Err(Error::Model("no token can continue the constrained reply".into()));
        };
        if let Some(Some(bytes)) = self.vocab.token_bytes.get(next as usize)
            && let Some(m) = matcher.as_mut()
        {
            m.feed(bytes);
        }
        let nanos = u64::try_from(choosing.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.choosing.nanos.fetch_add(nanos, Ordering::Relaxed);
        self.choosing.tokens.fetch_add(1, Ordering::Relaxed);
        Ok(next)
    }
}

impl Model {
    /// The recorded alternatives as text, each token placed at its byte offset in the reply (a stop
    /// token is empty text).
    fn choices(&self, recorded: &[(u32, Vec<(u32, f32)>)]) -> Vec<Choice> {
        let bytes = |id: u32| match self.vocab.token_bytes.get(id as usize) {
            Some(Some(b)) if !self.vocab.stop.contains(&id) => b.as_slice(),
            _ => &[],
        };
        let text = |id: u32| String::from_utf8_lossy(bytes(id)).into_owned();
        let mut offset = 0;
        recorded
            .iter()
            .map(|(id, top)| {
                let choice = Choice {
                    offset,
                    token: text(*id),
                    top: top.iter().map(|&(t, l)| (text(t), l)).collect(),
                };
                offset += bytes(*id).len();
                choice
            })
            .collect()
    }
}

/// The conversation as the chat template sees it.
fn messages(request: &Request) -> Vec<serde_json::Value> {
    request
        .messages
        .iter()
        .map(|m| serde_json::json!({"role": m.role, "content": m.content}))
        .collect()
}

/// A reply's decoding settings and state besides the tokens.
struct Decoding {
    /// The schema's matcher, for a constrained reply.
    matcher: Option<Matcher>,
    /// Tokens that may be generated.
    max_new: usize,
    temperature: f32,
    top_p: f32,
    rng: Rng,
    /// How many alternatives to record for each token (0: none).
    top_logprobs: usize,
    /// The alternatives recorded so far: each token's id and its most likely rivals with their
    /// log-probabilities.
    choices: Vec<(u32, Vec<(u32, f32)>)>,
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A tiny random-weight GGUF of the workspace's fixtures (`tests/fixtures/gguf`), loaded from a
    /// copy: its replies mean nothing, but they are made the way a real model's are.
    pub(super) fn tiny(arch: &str) -> (tempfile::TempDir, Model) {
        let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf");
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("tiny.gguf");
        std::fs::copy(fixtures.join(format!("tiny-{arch}-q8_0.gguf")), &copy).unwrap();
        let model = Model::load(&format!("tiny-{arch}"), &copy, 4096).unwrap();
        (dir, model)
    }

    /// A copy of the qwen2 fixture whose bytes after the first `key` are replaced, from `skip` bytes
    /// on, by `with` (after a metadata key its type then its value; after a tensor's name its
    /// dimension count then its dimensions).
    fn patched(key: &str, skip: usize, with: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf");
        let mut bytes = std::fs::read(fixtures.join("tiny-qwen2-q8_0.gguf")).unwrap();
        let at = bytes.windows(key.len()).position(|w| w == key.as_bytes()).unwrap() + key.len() + skip;
        bytes[at..at + with.len()].copy_from_slice(with);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("patched.gguf");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    /// What a file states is checked before it is believed: a context of four billion positions is
    /// capped (its rotary tables would take terabytes), a block count the file cannot hold and an
    /// output matrix without a row for every token are refused by name.
    #[test]
    fn a_files_sizes_are_capped_or_refused_before_memory_is_reserved_for_them() {
        // Metadata: the key, its type (u32, 4 bytes), its value.
        let (_dir, path) = patched("qwen2.context_length", 4, &u32::MAX.to_le_bytes());
        let model = Model::load("huge-context", &path, 4096).unwrap();
        assert_eq!(model.context(), incharacter_engine::MOST_POSITIONS);
        let (_dir, path) = patched("qwen2.block_count", 4, &u32::MAX.to_le_bytes());
        let e = Model::load("blocks", &path, 4096).err().unwrap().to_string();
        assert!(e.contains("block_count says 4294967295 blocks"), "{e}");
        // A tensor: the name, its dimension count (4 bytes), then columns and rows (8 bytes each).
        let (_dir, path) = patched("output.weight", 4 + 8, &64u64.to_le_bytes());
        let e = Model::load("short-output", &path, 4096).err().unwrap().to_string();
        assert!(e.contains("cannot load") && e.contains("output is 64×"), "{e}");
    }

    pub(super) fn request(system: &str, user: &str) -> Request {
        Request {
            messages: vec![Message::new("system", system), Message::new("user", user)],
            temperature: Some(0.0),
            max_tokens: Some(6),
            ..Request::default()
        }
    }

    #[test]
    fn a_constrained_reply_is_json_of_the_schema_and_streams_whole() {
        let (_dir, model) = tiny("qwen3");
        let mut r = request("You rate.", "Rate it.");
        r.schema = Some(serde_json::json!({"type": "object", "properties": {
            "result": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["result"], "additionalProperties": false}));
        for seed in 0..4 {
            r.seed = Some(seed);
            r.temperature = Some(1.0);
            let mut streamed = String::new();
            let reply = model.generate(&r, &|| false, &mut |p| streamed.push_str(p)).unwrap();
            assert_eq!(reply.text, streamed);
            assert_eq!(reply.finish, Finish::Stop);
            let v: serde_json::Value = serde_json::from_str(&reply.text).unwrap();
            assert!((1..=5).contains(&v["result"].as_i64().unwrap()), "{v}");
            assert!(reply.prompt_tokens > 0 && reply.completion_tokens > 0);
        }
        let (nanos, tokens) = model.choosing();
        assert!(nanos > 0 && tokens > 0);
    }

    /// Asked for, each token of a reply comes with its likeliest rivals among what the schema allows,
    /// placed where its bytes begin; asking changes no token.
    #[test]
    fn alternatives_are_what_the_schema_allowed_and_change_nothing() {
        let (_dir, model) = tiny("qwen2");
        let mut r = request("You rate.", "Rate it.");
        r.schema = Some(serde_json::json!({"type": "object", "properties": {
            "result": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["result"], "additionalProperties": false}));
        r.temperature = Some(0.8);
        r.seed = Some(3);
        let plain = model.generate(&r, &|| false, &mut |_| {}).unwrap();
        assert!(plain.choices.is_empty());
        r.top_logprobs = Some(10);
        let reply = model.generate(&r, &|| false, &mut |_| {}).unwrap();
        assert_eq!(reply.text, plain.text);
        assert_eq!(reply.choices.len(), reply.completion_tokens);
        let mut text = String::new();
        for c in &reply.choices {
            assert_eq!(c.offset, text.len());
            text.push_str(&c.token);
            assert!(!c.top.is_empty() && c.top.len() <= 10);
            let mass: f32 = c.top.iter().map(|t| t.1.exp()).sum();
            assert!(mass <= 1.0 + 1e-4, "{mass}");
            assert!(c.top.windows(2).all(|w| w[0].1 >= w[1].1));
        }
        assert_eq!(text, reply.text);
        // Where the score goes, only the digits 1 to 5 could have come, and they hold all the mass.
        let at = reply.text.find(|c: char| c.is_ascii_digit()).unwrap();
        let score = reply.choices.iter().find(|c| c.offset == at).unwrap();
        assert!(
            score
                .top
                .iter()
                .all(|t| matches!(t.0.as_str(), "1" | "2" | "3" | "4" | "5")),
            "{score:?}"
        );
        let mass: f32 = score.top.iter().map(|t| t.1.exp()).sum();
        assert!((mass - 1.0).abs() < 1e-4, "{mass}");
    }

    #[test]
    fn sequences_decoded_together_get_the_tokens_each_gets_alone_in_every_format() {
        let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&fixtures)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
            .collect();
        files.sort();
        assert!(files.len() >= 8, "{files:?}");
        // Five prompts of different lengths: rows of four and a single one in every matrix product.
        let prompts: Vec<Vec<u32>> = (0..5u32)
            .map(|i| (1..4 + 2 * i).map(|t| (t * 7 + i) % 60 + 1).collect())
            .collect();
        for file in files {
            let model = Model::load("tiny", &file, 4096).unwrap();
            let together = model.greedy_together(&prompts, 5).unwrap();
            for (prompt, got) in prompts.iter().zip(&together.tokens) {
                assert_eq!(got, &model.greedy(prompt, 5).unwrap(), "{}", file.display());
            }
        }
    }

    /// Replies asked for at one time, from several threads, decoded side by side: each the reply it
    /// gets alone (free and constrained, sampled with its seed), streamed whole to its own caller.
    #[test]
    fn replies_decoded_side_by_side_are_the_replies_each_gets_alone() {
        let (_dir, model) = tiny("qwen2");
        let requests: Vec<Request> = (0..6u64)
            .map(|i| {
                let mut r = request(
                    "You are a character with a long description.",
                    &"Question? ".repeat(1 + i as usize),
                );
                r.temperature = Some(0.9);
                r.seed = Some(i);
                r.max_tokens = Some(3 + i as u32);
                if i % 3 == 2 {
                    r.schema = Some(serde_json::json!({"type": "object", "properties": {
                        "result": {"type": "integer", "minimum": 1, "maximum": 5}},
                        "required": ["result"], "additionalProperties": false}));
                }
                r
            })
            .collect();
        let alone: Vec<Generated> = requests
            .iter()
            .map(|r| model.generate(r, &|| false, &mut |_| {}).unwrap())
            .collect();
        model.set_batch_width(4);
        assert_eq!(model.batch_width(), (4, 1));
        let start = std::sync::Barrier::new(requests.len());
        let together: Vec<(Generated, String)> = std::thread::scope(|s| {
            let handles: Vec<_> = requests
                .iter()
                .map(|r| {
                    let (model, start) = (&model, &start);
                    s.spawn(move || {
                        start.wait();
                        let mut streamed = String::new();
                        let reply = model.generate(r, &|| false, &mut |p| streamed.push_str(p)).unwrap();
                        (reply, streamed)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (i, ((reply, streamed), want)) in together.iter().zip(&alone).enumerate() {
            assert_eq!(reply, want, "request {i}");
            assert_eq!(&reply.text, streamed, "request {i}");
        }
        let (_, widest) = model.batch_width();
        assert!((2..=4).contains(&widest), "{widest} side by side");
        // A caller that cancels gets Cancelled; the others go on.
        let reply = std::thread::scope(|s| {
            let other = s.spawn(|| model.generate(&requests[5], &|| false, &mut |_| {}));
            assert_eq!(
                model.generate(&requests[4], &|| true, &mut |_| {}),
                Err(Error::Cancelled)
            );
            other.join().unwrap()
        });
        assert_eq!(reply.unwrap(), alone[5]);
    }

    #[test]
    fn a_cached_system_prompt_changes_no_reply() {
        let (_a, cached) = tiny("llama");
        let (_b, whole) = tiny("llama");
        let whole = whole.without_prefix_cache();
        for question in ["First question?", "Second question, longer than the first?"] {
            let r = request("You are a character with a long description.", question);
            let a = cached.generate(&r, &|| false, &mut |_| {}).unwrap();
            let b = whole.generate(&r, &|| false, &mut |_| {}).unwrap();
            assert_eq!(a, b, "{question}");
            assert_eq!(a.finish, Finish::Length);
        }
        assert_eq!((cached.prefix_hits(), whole.prefix_hits()), (1, 0));
        assert!(cached.prompt(&request("SYS", "USER")).contains("SYS"));
    }

    #[test]
    fn cancellation_and_a_prompt_beyond_the_context_end_the_reply() {
        let (_dir, model) = tiny("phi3");
        let r = request("Be brief.", "Hello.");
        assert_eq!(model.generate(&r, &|| true, &mut |_| {}), Err(Error::Cancelled));
        let long = request("word ".repeat(5000).as_str(), "Hello.");
        let e = model.generate(&long, &|| false, &mut |_| {}).unwrap_err();
        assert!(
            matches!(&e, Error::Input(m) if m.contains("the model's context is 4096")),
            "{e}"
        );
        assert_eq!(model.greedy(&model.encode("Hello").unwrap(), 3).unwrap().len(), 3);
    }
}
