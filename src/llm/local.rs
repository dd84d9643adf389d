//! The embedded local model (the `incharacter-local` crate) as the client sees it: a `Transport` whose
//! attempts run on tokio's blocking pool, requests turned into the crate's (the schema described in the
//! system message, in the workbench's words), and the crate's errors told as `LlmError`s, with the
//! commands that fix them. One loaded model is shared and requests take turns.
//!
//! The default (smollm2-135m) makes the whole pipeline run offline; its ratings carry no meaning (README's
//! table says what each local model's are worth).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use incharacter_local as embedded;
/// The bundled default's name, for tests (the workbench names it by `config::DEFAULT_LOCAL_MODEL`).
#[cfg(any(test, feature = "testing"))]
pub use incharacter_local::DEFAULT_MODEL;
pub use incharacter_local::{Facts, KNOWN, Registered, Removed, models_dir, shown, verify};

use super::client::{AttemptError, Finished, Transport};
use super::{ChatRequest, LlmError, ModelInfo, Usage};

/// The crate's error as the workbench tells it: a name or file the user gave is a configuration error
/// (exit 2), with the command that helps; the rest is the model's.
impl From<embedded::Error> for LlmError {
    fn from(e: embedded::Error) -> Self {
        match e {
            embedded::Error::Input(message) => LlmError::Config(message),
            embedded::Error::Model(message) => LlmError::Model(message),
            embedded::Error::NotFetched { name } => LlmError::Config(format!(
                "the local model {name} is not downloaded yet: run `incharacter model fetch --name {name}`"
            )),
            // `model add` is advised with the name only when it would take it.
            embedded::Error::Unknown { name } if embedded::valid_name(&name) => LlmError::Config(format!(
                "no local model named {name:?}: `incharacter model list` shows them, `incharacter model add <PATH.gguf> --name {name}` registers one"
            )),
            embedded::Error::Unknown { name } => LlmError::Config(format!(
                "no local model named {name:?}: `incharacter model list` shows them, `incharacter model add <PATH.gguf> --name NAME` registers one"
            )),
            embedded::Error::Cancelled => LlmError::Cancelled,
        }
    }
}

/// Every model available locally: the fetched known ones and the user's.
pub fn list(models: &Path) -> Result<Vec<Registered>, LlmError> {
    Ok(embedded::list(models)?)
}

/// Registered files under a known model's name, which are not used.
pub fn shadowed(models: &Path) -> Result<Vec<Registered>, LlmError> {
    Ok(embedded::shadowed(models)?)
}

/// The GGUF file for `name`, or an error that says how to get it.
pub fn resolve(models: &Path, name: &str) -> Result<PathBuf, LlmError> {
    Ok(embedded::resolve(models, name)?)
}

/// The registered model `name` (its file, and what it was when registered), checked to be that file
/// still; an error that says how to get it otherwise.
pub fn resolve_entry(models: &Path, name: &str) -> Result<Registered, LlmError> {
    Ok(embedded::resolve_entry(models, name)?)
}

/// Registers a user's GGUF under `name` (a name registered for another file only with `replace`); with
/// the context it runs with, which is not always the file's (a llama file's is capped).
pub fn add(models: &Path, path: &Path, name: &str, replace: bool) -> Result<(Registered, Facts, usize), LlmError> {
    let context = usable(path)?;
    let (entry, facts) = embedded::add(models, path, name, replace)?;
    Ok((entry, facts, context))
}

/// The fewest positions a registered model must hold: a question and its answer.
const FEWEST_POSITIONS: usize = 256;

/// Whether the GGUF at `path` is a model this engine can run, checked before it is registered (a file
/// whose header reads but whose shapes or tokenizer do not, registered, failed every use): it loads,
/// its tokenizer reads a line of text in two scripts, and its context holds a question and an answer.
/// What stops it is the user's file's problem (exit 2). The context it runs with, when it is usable.
fn usable(path: &Path) -> Result<usize, LlmError> {
    let refuse = |why: String| LlmError::Config(format!("{} cannot be used as a model: {why}", embedded::shown(path)));
    let model = embedded::Model::load("checking", path, crate::config::LLAMA_CONTEXT).map_err(|e| match e {
        embedded::Error::Model(why) | embedded::Error::Input(why) => refuse(why),
        other => other.into(),
    })?;
    model
        .encode("Hello, Hermione: what would you do? 你好。")
        .map_err(|e| refuse(format!("its tokenizer cannot read text ({e})")))?;
    if model.context() < FEWEST_POSITIONS {
        return Err(refuse(format!(
            "its context is {} positions, fewer than the {FEWEST_POSITIONS} a question and its answer need",
            model.context()
        )));
    }
    Ok(model.context())
}

/// Forgets a model: a registered file is unregistered (left where it is), a fetched model deleted.
pub fn remove(models: &Path, name: &str) -> Result<Removed, LlmError> {
    Ok(embedded::remove(models, name)?)
}

/// Downloads a known model and checks it; `progress` receives human-readable lines.
pub fn fetch(models: &Path, name: &str, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, LlmError> {
    Ok(embedded::fetch(models, name, progress)?)
}

/// What a GGUF file says of itself; an architecture the runner cannot run is refused, named (`model
/// add` has it through `add`; the tests of the engine against llama.cpp ask directly).
#[cfg(feature = "testing")]
pub fn facts(path: &Path) -> Result<Facts, LlmError> {
    Ok(embedded::facts(path)?)
}

/// A loaded model, taking the workbench's requests.
pub struct LocalModel(embedded::Model);

impl LocalModel {
    /// Loads a GGUF; a llama file's context is what the workbench budgets its prompts to
    /// (`config::LLAMA_CONTEXT`).
    pub fn load(name: &str, path: &Path) -> Result<LocalModel, LlmError> {
        Ok(LocalModel(embedded::Model::load(
            name,
            path,
            crate::config::LLAMA_CONTEXT,
        )?))
    }

    /// The same model computing every prompt whole (to check that the prefix cache changes nothing).
    pub fn without_prefix_cache(self) -> Self {
        LocalModel(self.0.without_prefix_cache())
    }

    /// Nanoseconds spent choosing tokens so far (sampling and schema matching), and tokens chosen.
    pub fn choosing(&self) -> (u64, u64) {
        self.0.choosing()
    }

    /// Lets at least `width` replies be decoded side by side (a provider's `max_concurrency`; several
    /// providers on one file share its widest).
    pub fn allow_batch(&self, width: usize) {
        let (now, _) = self.0.batch_width();
        self.0.set_batch_width(now.max(width));
    }

    /// How many prompts started from a cached system prompt so far.
    pub fn prefix_hits(&self) -> u64 {
        self.0.prefix_hits()
    }

    /// The logits after each of `ids[prefill - 1..]` (the fixtures of `tests/it/gguf_logits.rs`
    /// compare them with llama.cpp's).
    #[cfg(feature = "testing")]
    pub fn logits(&self, ids: &[u32], prefill: usize) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(self.0.logits(ids, prefill)?)
    }

    /// The `n` tokens greedy decoding puts after `prompt`: what `model continue` compares with another
    /// engine.
    pub fn greedy(&self, prompt: &[u32], n: usize) -> Result<Vec<u32>, LlmError> {
        Ok(self.0.greedy(prompt, n)?)
    }

    /// `prompts` decoded greedily side by side, one pass per step for all: what `bench local
    /// --parallel` measures.
    pub fn greedy_together(&self, prompts: &[Vec<u32>], n: usize) -> Result<incharacter_local::Together, LlmError> {
        Ok(self.0.greedy_together(prompts, n)?)
    }

    /// The text `ids` stand for (control tokens left out).
    pub fn text_of(&self, ids: &[u32]) -> String {
        self.0.text_of(ids)
    }

    /// Positions a prompt and its reply may take together.
    pub fn context(&self) -> usize {
        self.0.context()
    }

    /// Token ids of `text` (special tokens such as `<|im_start|>` recognised).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LlmError> {
        Ok(self.0.encode(text)?)
    }

    /// The prompt text for a conversation, from the model's own chat template.
    pub fn prompt(&self, request: &ChatRequest) -> String {
        self.0.prompt(&rendered(request))
    }

    /// The exact number of tokens `request`'s prompt takes, as [`LocalModel::generate`] reads it: the
    /// schema described, the chat template applied, then tokenized. A character-count estimate errs
    /// long by a third on English, and refused prompts that fit.
    pub fn prompt_tokens(&self, request: &ChatRequest) -> Result<usize, LlmError> {
        Ok(self.encode(&self.prompt(request))?.len())
    }

    /// Generates a reply, passing text pieces to `on_token` as soon as they are whole UTF-8.
    pub fn generate(
        &self,
        request: &ChatRequest,
        cancel: &AtomicBool,
        on_token: &mut dyn FnMut(String),
    ) -> Result<Finished, AttemptError> {
        generate(&self.0, &rendered(request), cancel, on_token)
    }
}

/// `request` as the model takes it: a schema is followed token by token, and also described in the
/// system message, which helps the model fill the shape sensibly.
fn rendered(request: &ChatRequest) -> embedded::Request {
    let described = match &request.schema {
        Some(schema) => super::described(&request.messages, schema),
        None => request.messages.clone(),
    };
    let messages: Vec<embedded::Message> = described
        .iter()
        .map(|m| embedded::Message::new(m.role.name(), m.content.clone()))
        .collect();
    let sampling = &request.sampling;
    embedded::Request {
        messages,
        schema: request.schema.as_ref().map(|s| s.schema.clone()),
        temperature: sampling.temperature,
        top_p: sampling.top_p,
        seed: sampling.seed,
        max_tokens: sampling.max_tokens,
        top_logprobs: sampling.top_logprobs.map(usize::from),
    }
}

/// One attempt on `model`: a cancelled reply is `Cancelled`, any other failure fatal (asking again
/// would fail the same way).
fn generate(
    model: &embedded::Model,
    request: &embedded::Request,
    cancel: &AtomicBool,
    on_token: &mut dyn FnMut(String),
) -> Result<Finished, AttemptError> {
    let cancelled = || cancel.load(Ordering::Relaxed);
    match model.generate(request, &cancelled, &mut |piece| on_token(piece.to_string())) {
        Ok(reply) => Ok(Finished {
            usage: Some(Usage {
                prompt_tokens: reply.prompt_tokens as u64,
                completion_tokens: reply.completion_tokens as u64,
            }),
            finish_reason: Some(reply.finish.as_str().into()),
            rate: Default::default(),
            choices: reply
                .choices
                .into_iter()
                .map(|c| super::TokenChoice {
                    offset: c.offset,
                    token: c.token,
                    top: c.top,
                })
                .collect(),
            came: crate::llm::client::Came::Sent,
        }),
        Err(embedded::Error::Cancelled) => Err(AttemptError::Cancelled),
        Err(e) => Err(AttemptError::Fatal(LlmError::Config(e.to_string()))),
    }
}

/// The embedded model as a `Transport`: each attempt runs on the blocking pool.
pub struct LocalTransport {
    model: Arc<LocalModel>,
    provider: String,
    /// The model's name in what sessions record: the name it was loaded under, or the provider's.
    name: String,
    /// Its file's SHA-256, when the registry knows it.
    sha256: Option<String>,
}

impl LocalTransport {
    pub fn new(model: Arc<LocalModel>, provider: &str) -> Self {
        LocalTransport {
            name: model.0.name().to_string(),
            model,
            provider: provider.into(),
            sha256: None,
        }
    }

    /// Records the SHA-256 of the model's file with its name.
    pub fn identified(mut self, sha256: Option<String>) -> Self {
        self.sha256 = sha256;
        self
    }

    /// Records the model under the name the provider gives it: a file is loaded once per process,
    /// under the first name asked for, and may be registered under two.
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.into();
        self
    }
}

#[async_trait]
impl Transport for LocalTransport {
    fn own_count(&self, request: &ChatRequest) -> Option<usize> {
        self.model.prompt_tokens(request).ok()
    }

    async fn attempt(
        &self,
        request: &ChatRequest,
        on_token: &mut (dyn FnMut(String) -> bool + Send),
    ) -> Result<Finished, AttemptError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let (model, request, flag) = (self.model.clone(), rendered(request), cancel.clone());
        let job = tokio::task::spawn_blocking(move || {
            generate(&model.0, &request, &flag, &mut |t| {
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
            model: self.name.clone(),
            sha256: self.sha256.clone(),
        }
    }

    fn context_tokens(&self) -> Option<usize> {
        Some(self.model.0.context())
    }

    fn base_url(&self) -> &str {
        "local"
    }

    fn may_refuse_shapes(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ChatMessage, ResponseSchema};

    /// What a session records of a local provider naming no model (`llm::describe`, from the config
    /// alone) is the model the engine loads for it.
    #[test]
    fn the_default_model_is_the_engines_default() {
        assert_eq!(crate::config::DEFAULT_LOCAL_MODEL, DEFAULT_MODEL);
    }

    fn schema() -> Option<ResponseSchema> {
        Some(ResponseSchema::new("rating", serde_json::json!({"type": "integer"})))
    }

    #[test]
    fn a_schema_is_described_in_the_system_message_and_enforced() {
        let mut request = ChatRequest::new(vec![ChatMessage::system("Be brief."), ChatMessage::user("Rate it.")]);
        request.sampling.seed = Some(7);
        assert_eq!(
            rendered(&request).messages,
            [
                embedded::Message::new("system", "Be brief."),
                embedded::Message::new("user", "Rate it.")
            ]
        );
        request.schema = schema();
        let model = rendered(&request);
        let instruction = crate::llm::schema_instruction(&serde_json::json!({"type": "integer"}));
        assert_eq!(model.messages[0].content, format!("Be brief.\n\n{instruction}"));
        assert_eq!(
            (model.schema, model.seed),
            (Some(serde_json::json!({"type": "integer"})), Some(7))
        );
        // Without a system message, the description is one.
        let mut request = ChatRequest::new(vec![ChatMessage::user("Rate it.")]);
        request.schema = schema();
        let messages = rendered(&request).messages;
        assert_eq!(messages[0], embedded::Message::new("system", instruction));
        assert_eq!(messages.len(), 2);
    }

    /// The local model counts a prompt exactly, its chat template and schema included, as it reads
    /// it: a prompt the character estimate puts past the context, whose tokens fit, is one it takes.
    #[test]
    fn a_prompt_is_counted_by_the_models_own_tokenizer() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf/tiny-llama-q8_0.gguf");
        let model = LocalModel::load("tiny-llama", &fixture).unwrap();
        let mut request = ChatRequest::new(vec![
            ChatMessage::system("You rate."),
            ChatMessage::user("the ".repeat(3500)),
        ]);
        let counted = model.prompt_tokens(&request).unwrap();
        assert_eq!(counted, model.encode(&model.prompt(&request)).unwrap().len());
        let room = crate::llm::server::reply_room(&request);
        assert!(
            crate::llm::server::estimate(&request) + room > model.context(),
            "the estimate fits: the test shows nothing"
        );
        assert!(counted + room <= model.context(), "{counted} tokens");
        // The template's tokens are counted: more than the messages' own.
        let contents = model.encode("You rate.").unwrap().len() + model.encode(&"the ".repeat(3500)).unwrap().len();
        assert!(counted > contents, "{counted} of {contents}");
        // So is the schema's description in the system message.
        request.schema = schema();
        assert!(model.prompt_tokens(&request).unwrap() > counted);
    }

    /// A name `model add` would refuse is not what its advice suggests.
    #[test]
    fn an_unknown_name_is_quoted_and_advised_only_as_a_name_add_takes() {
        let e = LlmError::from(embedded::Error::Unknown {
            name: "x\u{1b}[31mY".into(),
        })
        .to_string();
        assert!(e.contains(r#"no local model named "x\u{1b}[31mY""#), "{e}");
        assert!(e.contains("--name NAME"), "{e}");
    }

    #[test]
    fn a_missing_model_error_says_how_to_get_it() {
        let e = LlmError::from(embedded::Error::NotFetched {
            name: "smollm2-135m".into(),
        });
        assert!(matches!(&e, LlmError::Config(m) if m.ends_with("run `incharacter model fetch --name smollm2-135m`")));
        let e = LlmError::from(embedded::Error::Unknown { name: "mine".into() });
        assert!(
            e.to_string()
                .contains("`incharacter model add <PATH.gguf> --name mine` registers one")
        );
        assert!(matches!(LlmError::from(embedded::Error::Model("disk".into())), LlmError::Model(m) if m == "disk"));
    }
}
