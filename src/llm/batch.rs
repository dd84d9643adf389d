//! Batch mode: the requests a run would stream, sent instead as the lines of a batch file, through
//! the OpenAI Batch API (`run --batch`) or an offline engine such as `vllm run-batch`
//! (`run --batch-files`).
//!
//! Nothing in a study knows about batches. Its models are [`Client`](super::Client)s over a
//! [`BatchTransport`], whose attempts park in a [`Hub`] instead of going on the wire. The hub also
//! counts the requests the study has started ([`Counted`]) and watches the study's future
//! ([`Watched`]): when the study cannot move (every request it started is parked, and nothing woke
//! it), the parked requests are a phase — the interviews, then the judge's calls, then the re-asks
//! of its bounded policy — and go out as one file. Their answers come back by `custom_id` in any
//! order, and each parked attempt returns as if it had streamed, so the client's cache, accounting
//! and retries, and the study's journal, work as they always do.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

use super::cache;
use super::accounting::Holder;
use super::client::{AttemptError, Came, Finished, Transport};
use super::{ChatEvent, ChatModel, ChatRequest, EventStream, LlmError, ModelInfo, openai};
use crate::config::{ProviderConfig, Secret};

mod results;
pub use results::{Answer, Refusal, Reply, parse_results};

/// The endpoint every line of a batch file names.
pub const ENDPOINT: &str = "/v1/chat/completions";

/// The permits a provider gets in batch mode: parked requests cost the server nothing, and a phase
/// must hold all of them at once.
pub const UNLIMITED: usize = 1 << 24;

/// A request's id in batch files: its cache key, shortened. The same request has the same id in
/// every run, so results match requests whatever order they come back in.
pub fn custom_id(base_url: &str, model: &str, request: &ChatRequest) -> String {
    format!("ic-{}", &cache::key(base_url, model, request)[..32])
}

/// A batch line's body: exactly the body the streaming path sends (schema included), without
/// `stream` and `stream_options`.
pub fn body(config: &ProviderConfig, request: &ChatRequest) -> Value {
    let mut body = openai::request_body_as(&config.model, request, config.structured_output, config.json_object);
    if let Some(map) = body.as_object_mut() {
        map.shift_remove("stream");
        map.shift_remove("stream_options");
    }
    body
}

/// One line of a batch file.
pub fn line(custom_id: &str, body: &Value) -> String {
    json!({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}).to_string()
}

/// A request waiting for its phase to come back.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub custom_id: String,
    pub provider: String,
    pub body: Value,
    /// Whose request it is, and how many attempts wait for it (each counted as a request).
    pub role: crate::config::Role,
    pub attempts: usize,
}

struct Waiting {
    provider: String,
    role: crate::config::Role,
    body: Value,
    waiters: Vec<oneshot::Sender<Answer>>,
    /// The attempts the request may make: empty replies as many as that end its asking.
    attempts: u32,
}

#[derive(Default)]
struct State {
    /// Requests the study started and has not seen end.
    outstanding: usize,
    /// Attempts parked in `waiting`.
    parked: usize,
    /// By id: a batch file's lines come out in id order, the same from run to run.
    waiting: BTreeMap<String, Waiting>,
    /// Replies already returned (by a phase, or by results kept from earlier sittings).
    answers: HashMap<String, Reply>,
    /// Failed attempts each request met (empty replies and refusals; this sitting's and those kept
    /// from earlier sittings of the run), with the last: asked again once it met as many as its
    /// attempts allow, or a refusal not worth retrying, it gets that one back at once, so the
    /// client's retries end within a sitting instead of going out in phase after phase.
    failures: HashMap<String, (u32, Answer)>,
    /// Failures that results imported, or a batch followed from an earlier sitting, returned and no
    /// request has been given yet: each is given once (an empty reply billed; a failed attempt its
    /// request retries) before it goes out again, as it would have been had the sitting that sent
    /// it lived to read it.
    unbilled: HashMap<String, Answer>,
    /// The study's future is being polled, or was woken since.
    polling: bool,
    woken: bool,
}

impl State {
    /// Whether the parked requests are a complete phase: the study started some, all are parked, and
    /// it is neither being polled nor woken since its last poll.
    fn complete(&self) -> bool {
        !self.polling && !self.woken && self.outstanding > 0 && self.parked >= self.outstanding
    }
}

/// Where batch-mode attempts park, and what tells a phase is complete. See the module's docs.
#[derive(Default)]
pub struct Hub {
    state: Mutex<State>,
    changed: Notify,
}

impl Hub {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answer to request `id`: at once if a phase already returned it, else once its phase has
    /// come back. `None` when the hub is gone (the run stopped).
    pub async fn ask(
        &self,
        (provider, role): (&str, crate::config::Role),
        id: String,
        body: Value,
        attempts: u32,
    ) -> Option<Answer> {
        let rx = {
            let mut state = self.state();
            if let Some(reply) = state.answers.get_mut(&id) {
                // Billed once, to the first that gets it.
                let came = std::mem::replace(&mut reply.came, Came::Kept);
                return Some(Ok(Reply { came, ..reply.clone() }));
            }
            if let Some(failure) = state.unbilled.remove(&id) {
                return Some(failure);
            }
            if let Some((n, last)) = state.failures.get(&id)
                && (*n >= attempts || final_refusal(last))
            {
                return Some(last.clone());
            }
            let (tx, rx) = oneshot::channel();
            state
                .waiting
                .entry(id.clone())
                .or_insert_with(|| Waiting {
                    provider: provider.to_string(),
                    role,
                    body,
                    waiters: Vec::new(),
                    attempts,
                })
                .waiters
                .push(tx);
            state.parked += 1;
            if state.complete() {
                self.changed.notify_one();
            }
            rx
        };
        let mut parked = Parked {
            hub: self,
            id,
            rx,
            answered: false,
        };
        let answer = (&mut parked.rx).await.ok();
        parked.answered = true;
        answer
    }

    /// The requests of a complete phase: `Some` when every request the study started is parked and
    /// the study was not woken since it last stopped.
    pub fn phase(&self) -> Option<Vec<Pending>> {
        let state = self.state();
        if !state.complete() {
            return None;
        }
        Some(
            state
                .waiting
                .iter()
                .map(|(id, w)| Pending {
                    custom_id: id.clone(),
                    provider: w.provider.clone(),
                    body: w.body.clone(),
                    role: w.role,
                    attempts: w.waiters.len(),
                })
                .collect(),
        )
    }

    /// Waits until something changed that may complete a phase.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Answers the requests `asked` (a phase's) with `answers`; one the batch did not answer fails
    /// with a status worth retrying (its retry parks in the next phase). Replies are kept for
    /// requests that ask again; refusals are not, so a retry goes out again.
    pub fn resolve(&self, asked: &[String], answers: &BTreeMap<String, Answer>) {
        self.answer(Some(asked), answers);
    }

    /// Replies that did not come from a phase of this sitting: the requests waiting for them are
    /// answered, and later ones at once when they ask. `came`: read from results kept in the
    /// session (not billed again), imported from the user's engine (its tokens counted), or
    /// returned by a batch followed from an earlier sitting (billed now, as a phase's are).
    pub fn load(&self, answers: &BTreeMap<String, Answer>, came: Came) {
        let answers: BTreeMap<String, Answer> = answers
            .iter()
            .map(|(id, answer)| {
                let answer = answer
                    .clone()
                    .map(|reply| Reply { came, ..reply })
                    .map_err(|refusal| Refusal { came, ..refusal });
                (id.clone(), answer)
            })
            .collect();
        if came != Came::Kept {
            let mut state = self.state();
            for (id, answer) in &answers {
                if !answer.as_ref().is_ok_and(Reply::usable) {
                    state.unbilled.insert(id.clone(), answer.clone());
                }
            }
        }
        self.answer(None, &answers);
    }

    /// Keeps the replies and answers the waiting requests in one hold of the lock, so no request can
    /// park between the two unanswered.
    /// An empty reply or a refusal is given to the requests that asked in this phase (a failed
    /// attempt, which they retry) but never kept as their answer: asked again, it goes out in the
    /// next phase, as streaming sends it again, instead of being read back. Each is counted
    /// against the request's attempts.
    fn answer(&self, asked: Option<&[String]>, answers: &BTreeMap<String, Answer>) {
        let mut state = self.state();
        for (id, answer) in answers {
            match answer {
                Ok(reply) if reply.usable() => {
                    state.answers.insert(id.clone(), reply.clone());
                }
                failure => {
                    // Given back later, it is not billed again.
                    let kept = failure
                        .clone()
                        .map(|empty| Reply {
                            came: Came::Kept,
                            ..empty
                        })
                        .map_err(|refusal| Refusal {
                            came: Came::Kept,
                            ..refusal
                        });
                    let seen = state.failures.entry(id.clone()).or_insert((0, kept.clone()));
                    *seen = (seen.0 + 1, kept);
                }
            }
        }
        // Kept replies answer the requests waiting for them: a usable one, or the last failure of
        // a request that met as many as its attempts allow, or one not worth retrying (it parked
        // before they were read). A failure not yet given is given too, once (see
        // `State::unbilled`).
        let settled = |id: &String, w: &Waiting| {
            state.unbilled.contains_key(id)
                || state
                    .failures
                    .get(id)
                    .is_some_and(|(n, last)| *n >= w.attempts || final_refusal(last))
        };
        let ids: Vec<String> = match asked {
            Some(asked) => asked.to_vec(),
            None => state
                .waiting
                .iter()
                .filter(|(id, w)| answers.get(*id).is_some_and(|a| a.as_ref().is_ok_and(Reply::usable)) || settled(id, w))
                .map(|(id, _)| id.clone())
                .collect(),
        };
        for id in ids {
            let Some(waiting) = state.waiting.remove(&id) else {
                continue;
            };
            let unbilled = if asked.is_none() { state.unbilled.remove(&id) } else { None };
            let answer = match (answers.get(&id), state.failures.get(&id)) {
                (Some(Ok(reply)), _) if reply.usable() => Ok(reply.clone()),
                _ if unbilled.is_some() => unbilled.expect("checked"),
                (_, Some((n, last))) if asked.is_none() && (*n >= waiting.attempts || final_refusal(last)) => last.clone(),
                (Some(answer), _) => answer.clone(),
                (None, _) => Err(Refusal {
                    status: 503,
                    message: "the batch returned no result for this request".into(),
                    param: None,
                    code: None,
                    came: Came::Sent,
                }),
            };
            state.parked -= waiting.waiters.len();
            // One line answered them all: billed once, to the first (the others asked the same).
            let kept = answer
                .clone()
                .map(|reply| Reply {
                    came: Came::Kept,
                    ..reply
                })
                .map_err(|refusal| Refusal {
                    came: Came::Kept,
                    ..refusal
                });
            if let Some(stored) = state.answers.get_mut(&id) {
                stored.came = Came::Kept;
            }
            for (i, tx) in waiting.waiters.into_iter().enumerate() {
                let _ = tx.send(if i == 0 { answer.clone() } else { kept.clone() });
            }
        }
        let ready = state.complete();
        drop(state);
        if ready {
            self.changed.notify_one();
        }
    }

    /// Changes the state; the coordinator hears of it only when a phase may be complete (a wake for
    /// anything else would only poll the study, which would change the state again, and so on).
    fn update(&self, f: impl FnOnce(&mut State)) {
        let ready = {
            let mut state = self.state();
            f(&mut state);
            state.complete()
        };
        if ready {
            self.changed.notify_one();
        }
    }
}

/// A refusal the client does not retry (a 400): asked again, a request gets it at once, as a
/// streamed request would get it again.
fn final_refusal(answer: &Answer) -> bool {
    answer
        .as_ref()
        .is_err_and(|refusal| !crate::llm::policy::retryable_status(refusal.status))
}

/// A cost cap's hold: the attempt counts as parked for good, so the hub is [idle](Hub::until_idle)
/// once everything else the study started has ended and it has read it.
#[async_trait]
impl Holder for Hub {
    async fn hold(&self) {
        struct Held<'a>(&'a Hub);
        impl Drop for Held<'_> {
            fn drop(&mut self) {
                self.0.update(|state| state.parked -= 1);
            }
        }
        self.update(|state| state.parked += 1);
        let _held = Held(self);
        std::future::pending::<()>().await;
    }
}

impl Hub {
    /// Returns once every request the study started is parked (or held) and the study is idle: what
    /// came back has been read.
    pub async fn until_idle(&self) {
        loop {
            // A wake stored by `notify_one` before this waits is not lost.
            if self.state().complete() {
                return;
            }
            self.changed.notified().await;
        }
    }
}

/// A parked attempt; dropped before its answer (the run stopped), it leaves the hub's count right.
struct Parked<'a> {
    hub: &'a Hub,
    id: String,
    rx: oneshot::Receiver<Answer>,
    answered: bool,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        self.rx.close();
        self.hub.update(|state| {
            if let Some(waiting) = state.waiting.get_mut(&self.id) {
                let before = waiting.waiters.len();
                waiting.waiters.retain(|tx| !tx.is_closed());
                state.parked -= before - waiting.waiters.len();
                if waiting.waiters.is_empty() {
                    state.waiting.remove(&self.id);
                }
            }
        });
    }
}

/// The transport of batch mode: an attempt parks in the hub until its phase returns.
pub struct BatchTransport {
    hub: Arc<Hub>,
    config: ProviderConfig,
    /// Who answers, as a refusal says it: the provider's server (the Batch API), or the results
    /// file an offline engine wrote.
    answerer: String,
    /// The run's accounts: a refusal read from results (kept or imported) is no request.
    accounting: Arc<crate::llm::accounting::Accounting>,
}

impl BatchTransport {
    /// `files`: the phases' results come from files an offline engine wrote, not from the
    /// provider's server.
    pub fn new(
        hub: Arc<Hub>,
        config: ProviderConfig,
        files: bool,
        accounting: Arc<crate::llm::accounting::Accounting>,
    ) -> Self {
        let answerer = if files {
            "the batch results file".to_string()
        } else {
            config.base_url.clone()
        };
        BatchTransport {
            hub,
            config,
            answerer,
            accounting,
        }
    }
}

#[async_trait]
impl Transport for BatchTransport {
    async fn attempt(
        &self,
        request: &ChatRequest,
        on_token: &mut (dyn FnMut(String) -> bool + Send),
    ) -> Result<Finished, AttemptError> {
        let id = custom_id(&self.config.base_url, &self.config.model, request);
        let asker = (self.config.name.as_str(), request.meta.role);
        // Every attempt the client may make: a request answered empty that often is answered so.
        let attempts = self.config.max_retries.saturating_add(1);
        let answer = self.hub.ask(asker, id, body(&self.config, request), attempts).await;
        // A request once a batch of this sitting answered it (see `Client::send_once`).
        let came = match &answer {
            Some(Ok(reply)) => Some(reply.came),
            Some(Err(refusal)) => Some(refusal.came),
            None => None,
        };
        if came == Some(Came::Sent) {
            self.accounting.request(asker.0, asker.1);
        }
        match answer {
            None => Err(AttemptError::Cancelled),
            Some(Ok(reply)) => {
                if !reply.text.is_empty() && !on_token(reply.text) {
                    return Err(AttemptError::Cancelled);
                }
                Ok(Finished {
                    usage: reply.usage,
                    finish_reason: reply.finish_reason,
                    rate: Default::default(),
                    choices: reply.choices,
                    came: reply.came,
                })
            }
            Some(Err(refusal)) => {
                // Counted as a reply from results is (see `Client::count`).
                let (provider, role) = asker;
                match refusal.came {
                    Came::Kept => self.accounting.kept(provider, role),
                    Came::Imported => self.accounting.imported(provider, role),
                    Came::Sent => {}
                }
                Err(AttemptError::Status {
                    status: refusal.status,
                    rate: Box::default(),
                    message: refusal.message,
                    param: refusal.param,
                    code: refusal.code,
                })
            }
        }
    }

    fn info(&self) -> ModelInfo {
        openai::info(&self.config)
    }

    fn base_url(&self) -> &str {
        &self.config.base_url
    }

    fn answerer(&self) -> &str {
        &self.answerer
    }

    fn batched(&self) -> bool {
        true
    }
}

/// A study's model that tells the hub when a request starts and ends.
pub struct Counted {
    pub inner: Arc<dyn ChatModel>,
    pub hub: Arc<Hub>,
}

/// One started request; its end (a last event, or the stream dropped) is counted once.
struct Started(Arc<Hub>);

impl Drop for Started {
    fn drop(&mut self) {
        self.0.update(|state| state.outstanding -= 1);
    }
}

impl ChatModel for Counted {
    fn stream(&self, request: ChatRequest) -> EventStream {
        self.hub.update(|state| state.outstanding += 1);
        let started = Started(self.hub.clone());
        let inner = self.inner.stream(request);
        Box::pin(futures_util::stream::unfold(
            (inner, Some(started)),
            |(mut inner, mut started)| async move {
                let event = inner.next().await?;
                if matches!(event, ChatEvent::Done { .. } | ChatEvent::Error(_)) {
                    started.take();
                }
                Some((event, (inner, started)))
            },
        ))
    }

    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn context_tokens(&self) -> Option<usize> {
        self.inner.context_tokens()
    }

    fn forget(&self, request: &ChatRequest, reply: &str) {
        self.inner.forget(request, reply);
    }
}

/// The study's future, watched: the hub knows when it is being polled and when it was woken.
pub struct Watched<F> {
    inner: Pin<Box<F>>,
    hub: Arc<Hub>,
}

impl<F: Future> Watched<F> {
    pub fn new(hub: Arc<Hub>, inner: F) -> Self {
        Watched {
            inner: Box::pin(inner),
            hub,
        }
    }
}

struct WatchWaker {
    hub: Arc<Hub>,
    inner: Waker,
}

impl Wake for WatchWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.hub.update(|state| state.woken = true);
        self.inner.wake_by_ref();
    }
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.hub.update(|state| {
            state.polling = true;
            state.woken = false;
        });
        let waker = Waker::from(Arc::new(WatchWaker {
            hub: self.hub.clone(),
            inner: cx.waker().clone(),
        }));
        let result = self.inner.as_mut().poll(&mut Context::from_waker(&waker));
        self.hub.update(|state| state.polling = false);
        result
    }
}

/// A batch as the Batch API reports it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Batch {
    pub id: String,
    pub status: String,
    #[serde(default)]
    pub input_file_id: String,
    #[serde(default)]
    pub output_file_id: Option<String>,
    #[serde(default)]
    pub error_file_id: Option<String>,
    #[serde(default)]
    pub request_counts: Counts,
    #[serde(default)]
    pub errors: Option<Value>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
pub struct Counts {
    #[serde(default)]
    pub total: u64,
    #[serde(default)]
    pub completed: u64,
    #[serde(default)]
    pub failed: u64,
}

impl Counts {
    /// `87/88 done, 1 failed`.
    pub fn describe(&self) -> String {
        format!("{}/{} done, {} failed", self.completed, self.total, self.failed)
    }
}

impl Batch {
    /// Whether the batch will change no more.
    pub fn ended(&self) -> bool {
        matches!(self.status.as_str(), "completed" | "failed" | "expired" | "cancelled")
    }

    /// Why a batch that failed as a whole failed (its validation errors).
    pub fn failure(&self) -> String {
        let errors = self
            .errors
            .as_ref()
            .and_then(|e| e.get("data"))
            .and_then(Value::as_array)
            .map(|data| {
                data.iter()
                    .map(|e| {
                        let line = e.get("line").and_then(Value::as_u64).map_or(String::new(), |l| format!("line {l}: "));
                        format!("{line}{}", e.get("message").and_then(Value::as_str).unwrap_or("?"))
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        if errors.is_empty() {
            format!("batch {} {}", self.id, self.status)
        } else {
            format!("batch {} {}: {errors}", self.id, self.status)
        }
    }
}

/// The OpenAI Batch API of a provider: files up, a batch created, its status, its results down.
pub struct BatchApi {
    http: reqwest::Client,
    config: ProviderConfig,
    key: Option<Secret>,
    /// The key and the header values, kept out of what a server writes back.
    secrets: crate::config::Secrets,
}

impl BatchApi {
    pub fn new(config: ProviderConfig, key: Option<Secret>) -> Result<Self, LlmError> {
        openai::install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs_f64(config.timeout_connect_s))
            .timeout(Duration::from_secs(300))
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build an HTTP client: {e}")))?;
        let secrets = crate::config::Secrets::of(key.as_ref(), &config.headers);
        Ok(BatchApi {
            http,
            config,
            key,
            secrets,
        })
    }

    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.config.batch_poll_ms)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.config.base_url)
    }

    /// One call, with the provider's retries for what retrying can fix.
    async fn call(&self, what: &str, build: &(dyn Fn() -> reqwest::RequestBuilder + Send + Sync)) -> Result<String, LlmError> {
        let base_url = &self.config.base_url;
        let mut attempt = 0;
        loop {
            let mut request = build();
            if let Some(key) = &self.key {
                request = request.bearer_auth(key.expose());
            }
            for (name, value) in &self.config.headers {
                request = request.header(name, value);
            }
            let failure = match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let text = response.text().await.unwrap_or_default();
                    if (200..300).contains(&status) {
                        return Ok(text);
                    }
                    // A server may repeat the key it refused: never passed on.
                    let text = self.secrets.scrub(&text);
                    let message = openai::error_message(&text);
                    if status == 401 || status == 403 {
                        return Err(LlmError::Unauthorized {
                            env: super::key_source(&self.config),
                            base_url: base_url.clone(),
                            status,
                            message,
                        });
                    }
                    if status == 404 && what == "upload the batch file" {
                        return Err(LlmError::Config(format!(
                            "{base_url} has no Batch API (POST /files answered 404): run without --batch, or write the \
                             requests with --batch-files DIR for an offline engine"
                        )));
                    }
                    let error = LlmError::Http {
                        base_url: base_url.clone(),
                        status,
                        message: format!("{what}: {message}"),
                    };
                    if !super::policy::retryable_status(status) {
                        return Err(error);
                    }
                    error
                }
                Err(e) => LlmError::Transport(format!("{what}: cannot reach {base_url}: {}", openai::without_url(&e))),
            };
            if attempt >= self.config.max_retries {
                return Err(failure);
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(self.config.retry_base_ms << attempt.min(6))).await;
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(&self, what: &str, build: &(dyn Fn() -> reqwest::RequestBuilder + Send + Sync)) -> Result<T, LlmError> {
        let text = self.call(what, build).await?;
        serde_json::from_str(&text).map_err(|e| LlmError::Transport(format!("{what}: an answer that is not the API's: {e}")))
    }

    /// Uploads a batch file; its file id.
    pub async fn upload(&self, name: &str, jsonl: &str) -> Result<String, LlmError> {
        // multipart/form-data by hand: two fields do not justify reqwest's multipart feature. The
        // delimiter starts with CR LF, which a JSONL file never holds (JSON escapes it in strings).
        let boundary = "incharacter-batch-file";
        let mut form = String::new();
        form.push_str(&format!("--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"));
        form.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        ));
        form.push_str(jsonl);
        form.push_str(&format!("\r\n--{boundary}--\r\n"));
        let url = self.url("/files");
        let file: Value = self
            .json("upload the batch file", &|| {
                self.http
                    .post(&url)
                    .header("content-type", format!("multipart/form-data; boundary={boundary}"))
                    .body(form.clone())
            })
            .await?;
        file.get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| LlmError::Transport("upload the batch file: no file id in the answer".into()))
    }

    /// Creates the batch of an uploaded file.
    pub async fn create(&self, input_file: &str) -> Result<Batch, LlmError> {
        let url = self.url("/batches");
        let body = json!({"input_file_id": input_file, "endpoint": ENDPOINT, "completion_window": "24h"});
        self.json("create the batch", &|| self.http.post(&url).json(&body)).await
    }

    pub async fn get(&self, id: &str) -> Result<Batch, LlmError> {
        let url = self.url(&format!("/batches/{id}"));
        self.json("ask how the batch is doing", &|| self.http.get(&url)).await
    }

    /// The batch made of `input_file`, if one was (a run killed between creating a batch and
    /// journaling it).
    pub async fn find(&self, input_file: &str) -> Result<Option<Batch>, LlmError> {
        #[derive(Deserialize)]
        struct List {
            data: Vec<Batch>,
        }
        let url = self.url("/batches?limit=100");
        let list: List = self.json("list the batches", &|| self.http.get(&url)).await?;
        Ok(list.data.into_iter().find(|b| b.input_file_id == input_file))
    }

    pub async fn content(&self, file: &str) -> Result<String, LlmError> {
        let url = self.url(&format!("/files/{file}/content"));
        self.call("download the batch's results", &|| self.http.get(&url)).await
    }
}

/// What a session's journal records of its batches, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// A phase's requests written to a file for an offline engine (`--batch-files`, `batch export`).
    Written { phase: u32, path: String, requests: Vec<String> },
    /// A phase's batch file uploaded to a provider.
    Uploaded { phase: u32, provider: String, file: String, requests: usize },
    /// The batch of an uploaded file created: a resumed run polls it instead of submitting again.
    Submitted { phase: u32, provider: String, batch: String, file: String },
    /// A batch ended; its results are kept in the session's folder (`results`, relative to it).
    Ended {
        phase: u32,
        provider: String,
        batch: String,
        status: String,
        counts: Counts,
        results: String,
    },
    /// A results file imported (`batch import`), kept in the session's folder; `modified_ms`, when
    /// the file was last written then (milliseconds since 1970; none in older journals), tells it
    /// given again untouched from one rewritten.
    Imported {
        phase: u32,
        from: String,
        results: String,
        lines: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        modified_ms: Option<u64>,
    },
}

impl Step {
    /// The step on a line, as the progress and the Live screen's log say it.
    pub fn describe(&self) -> String {
        match self {
            Step::Written { phase, path, requests } => {
                format!("batch phase {phase}: {} requests written to {path}", requests.len())
            }
            Step::Uploaded {
                phase,
                provider,
                file,
                requests,
            } => format!("batch phase {phase}: {requests} requests uploaded to {provider} as {file}"),
            Step::Submitted { phase, provider, batch, .. } => {
                format!("batch phase {phase}: {provider} {batch} submitted")
            }
            Step::Ended {
                phase,
                provider,
                batch,
                status,
                counts,
                ..
            } => format!("batch phase {phase}: {provider} {batch} {status}: {}", counts.describe()),
            Step::Imported { phase, from, lines, .. } => {
                format!("batch phase {phase}: {lines} results imported from {from}")
            }
        }
    }

    pub fn phase(&self) -> u32 {
        match self {
            Step::Written { phase, .. }
            | Step::Uploaded { phase, .. }
            | Step::Submitted { phase, .. }
            | Step::Ended { phase, .. }
            | Step::Imported { phase, .. } => *phase,
        }
    }
}

#[cfg(test)]
mod tests;
