//! `Client` turns a single-attempt `Transport` into a `ChatModel`: cache lookup first, then the
//! concurrency limits, then attempts with the retry policy, each sent when the provider's pace allows;
//! every step is accounted and every retry is announced in the event stream (its partial text
//! discarded). A reply with no text is a failed attempt here, for every caller: retried, never cached,
//! and a failure when every retry is empty too.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::accounting::Accounting;
use super::adapt::{self, Adapter};
use super::cache::{self, Cache, CacheEntry};
use super::config::{CacheMode, ProviderConfig};
use super::pace::RateHeaders;
pub use super::policy::Unreachable;
use super::policy::{self, Backoff, Limits, Reachability};
use super::{ChatEvent, ChatModel, ChatRequest, EventStream, LlmError, ModelInfo, Usage};
use crate::text::approx_tokens;

/// Rate-limit refusals one request rides out (with `Retry-After` or backoff up to 30 s each) before
/// it fails; they do not count against `max_retries`.
pub const RATE_LIMIT_RETRIES: u32 = 50;

/// How one attempt ended well.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Finished {
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// What the reply's headers said of the provider's rate-limit budgets.
    pub rate: RateHeaders,
}

/// How one attempt failed.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptError {
    /// Could not send the request (a connection that broke, a pooled one the server had closed).
    Connect(String),
    /// Could not open a connection at all (refused, no route, no such host).
    NoConnection(String),
    /// A non-success status before any token.
    Status {
        status: u16,
        /// `Retry-After` and the rate-limit budgets, as the refusal's headers said (boxed: they are
        /// most of the error's size, and rare).
        rate: Box<RateHeaders>,
        message: String,
        /// The error body's `param` and `code` (OpenAI-style), which name what was refused.
        param: Option<String>,
        code: Option<String>,
    },
    /// The stream ended or broke before `[DONE]`.
    Cut(String),
    /// `[DONE]` came without a `finish_reason`: the server ended the request early to serve another
    /// (llama-cpp-python serves one at a time). Asked again, and taken as a sign of too many in
    /// flight, as a 429 is.
    Interrupted,
    /// An error object inside a 200 stream.
    InStream(String),
    FirstTokenTimeout,
    IdleTimeout,
    /// The reply was complete but held no text, or only whitespace ([`super::is_empty_reply`]): a
    /// server that dropped the request under load, an embedded model's immediate end of sequence.
    Empty {
        finish_reason: Option<String>,
    },
    /// Retrying cannot help (a rejected key, a missing model file).
    Fatal(LlmError),
    /// Nobody listens any more.
    Cancelled,
}

impl AttemptError {
    pub fn retryable(&self) -> bool {
        match self {
            AttemptError::Connect(_)
            | AttemptError::NoConnection(_)
            | AttemptError::Cut(_)
            | AttemptError::Interrupted
            | AttemptError::InStream(_)
            | AttemptError::FirstTokenTimeout
            | AttemptError::IdleTimeout
            | AttemptError::Empty { .. } => true,
            AttemptError::Status { status, .. } => policy::retryable_status(*status),
            AttemptError::Fatal(_) | AttemptError::Cancelled => false,
        }
    }

    /// The server refused for its rate (429, or 503 with a `Retry-After`): not the request's fault.
    fn rate_limited(&self) -> bool {
        match self {
            AttemptError::Status { status: 429, .. } | AttemptError::Interrupted => true,
            AttemptError::Status { status: 503, rate, .. } => rate.retry_after.is_some(),
            _ => false,
        }
    }

    /// The wait the server asked for before a request of about `tokens` tokens is sent again.
    fn retry_after(&self, tokens: u64) -> Option<Duration> {
        match self {
            AttemptError::Status { rate, .. } => rate.wait(tokens),
            _ => None,
        }
    }

    fn describe(&self, base_url: &str) -> String {
        match self {
            AttemptError::Connect(e) | AttemptError::NoConnection(e) => format!("cannot reach {base_url}: {e}"),
            AttemptError::Status { status, message, .. } => format!("HTTP {status} from {base_url}: {message}"),
            AttemptError::Cut(e) => e.clone(),
            AttemptError::Interrupted => {
                "the stream ended with [DONE] but no finish_reason: the server interrupted the request".into()
            }
            AttemptError::InStream(e) => format!("error inside the stream: {e}"),
            AttemptError::FirstTokenTimeout => "no first token in time".into(),
            AttemptError::IdleTimeout => "the stream stalled".into(),
            AttemptError::Empty { finish_reason: None } => "the reply was empty".into(),
            AttemptError::Empty {
                finish_reason: Some(reason),
            } => format!(
                "the reply was empty (finish_reason \"{}\")",
                crate::text::terminal_safe(reason)
            ),
            AttemptError::Fatal(e) => e.to_string(),
            AttemptError::Cancelled => "cancelled".into(),
        }
    }
}

/// One request attempt against a model; no retries, no cache.
#[async_trait]
pub trait Transport: Send + Sync {
    /// Streams the reply's pieces to `on_token` (which returns false when nobody listens any more).
    async fn attempt(
        &self,
        request: &ChatRequest,
        on_token: &mut (dyn FnMut(String) -> bool + Send),
    ) -> Result<Finished, AttemptError>;

    fn info(&self) -> ModelInfo;

    /// The model's context in tokens, when the transport knows it.
    fn context_tokens(&self) -> Option<usize> {
        None
    }

    /// Where the model lives; part of the cache key.
    fn base_url(&self) -> &str;

    /// Whether attempts wait for a batch ([`super::batch`]) instead of going out one by one; then the
    /// first request of a shape is not sent alone (its batch holds every request of its phase).
    fn batched(&self) -> bool {
        false
    }
}

/// Shared by all clients of one run: the limits, the cache, the accounting and whether a provider
/// still answers.
#[derive(Clone)]
pub struct Shared {
    pub limits: Arc<Limits>,
    pub reach: Arc<Reachability>,
    pub cache: Option<Cache>,
    pub cache_mode: CacheMode,
    pub accounting: Arc<Accounting>,
    /// Seed of the retry jitter.
    pub seed: u64,
    /// What providers refused, and how their requests are adapted for it.
    pub adapter: Arc<Adapter>,
}

impl Shared {
    pub fn new(max_concurrency: usize, cache: Option<Cache>, cache_mode: CacheMode, seed: u64) -> Self {
        Shared {
            limits: Arc::new(Limits::new(max_concurrency)),
            reach: Arc::default(),
            cache,
            cache_mode,
            accounting: Arc::new(Accounting::default()),
            seed,
            adapter: Arc::default(),
        }
    }

    /// Waits until a provider of the run is found unreachable.
    pub fn unreachable(&self) -> impl std::future::Future<Output = Unreachable> + Send + 'static {
        let reach = self.reach.clone();
        async move { reach.wait().await }
    }

    /// The provider found unreachable, if any.
    pub fn unreachable_now(&self) -> Option<Unreachable> {
        self.reach.now()
    }
}

#[derive(Clone)]
pub struct Client {
    transport: Arc<dyn Transport>,
    config: Arc<ProviderConfig>,
    /// The provider's own (adaptive) limit, shared with every other client of the same provider.
    own: Arc<policy::AdaptiveLimit>,
    /// The provider's pace, shared the same way.
    pace: Arc<super::pace::Pace>,
    shared: Shared,
}

impl Client {
    pub fn new(transport: Arc<dyn Transport>, config: ProviderConfig, shared: Shared) -> Self {
        let own = if transport.batched() {
            shared.limits.open_provider(&config.name, config.max_concurrency)
        } else {
            shared.limits.provider(&config.name, config.max_concurrency)
        };
        let pace = shared
            .limits
            .pace(&config.name, config.requests_per_minute, config.tokens_per_minute);
        // What the config states is adapted to from the first request, and journaled like the rest.
        for &kind in &config.stated {
            shared
                .adapter
                .adapt(&config.name, &config.model, kind, "stated in the provider's config");
        }
        Client {
            transport,
            config: Arc::new(config),
            own,
            pace,
            shared,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn accounting(&self) -> &Arc<Accounting> {
        &self.shared.accounting
    }
}

impl ChatModel for Client {
    fn stream(&self, request: ChatRequest) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let this = self.clone();
        tokio::spawn(async move { this.run(request, tx).await });
        Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|e| (e, rx))
        }))
    }

    fn info(&self) -> ModelInfo {
        self.transport.info()
    }

    fn context_tokens(&self) -> Option<usize> {
        self.config.context_tokens.or_else(|| self.transport.context_tokens())
    }
}

/// About how many tokens a request asks for, as rate limits count them: its prompt (see
/// [`approx_tokens`]) and its answer cap.
fn tokens_asked(request: &ChatRequest) -> u64 {
    let prompt: usize = request.messages.iter().map(|m| approx_tokens(&m.content)).sum();
    prompt as u64 + u64::from(request.sampling.max_tokens.unwrap_or(0))
}

fn now_unix() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// How a request's attempts ended.
enum Outcome {
    /// Replied, failed for good, or nobody listens: nothing more to do.
    Over,
    /// The provider refused something it is now adapted to: send the request again, adapted.
    Adapted,
}

impl Client {
    async fn run(&self, request: ChatRequest, tx: mpsc::UnboundedSender<ChatEvent>) {
        let provider = self.config.name.as_str();
        let model = self.config.model.as_str();
        let adapter = &self.shared.adapter;
        let shape = adapt::shape(&request);
        let cache = self.cache();
        loop {
            let adapted = adapter.quirks(provider, model).apply(&request);
            let key = cache::key(self.transport.base_url(), model, &adapted);
            if let Some(entry) = cache.and_then(|c| c.get(&key)) {
                self.replay(&adapted, entry, &tx);
                return;
            }
            // Until a request of this shape to this provider and model has come back, one at a time:
            // a refusal then costs one request, and the rest go out adapted.
            let gate = (!self.transport.batched())
                .then(|| adapter.gate(provider, model, &shape))
                .flatten();
            let mut _first = match &gate {
                Some(g) => Some(g.clone().lock_owned().await),
                None => None,
            };
            if gate.is_some() && adapter.gate(provider, model, &shape).is_none() {
                // The first came back while this one waited: go in parallel.
                _first = None;
            }
            if gate.is_some() && adapter.quirks(provider, model).apply(&request) != adapted {
                continue;
            }
            match self.attempts(&adapted, &key, &tx).await {
                Outcome::Over => {
                    adapter.open(provider, model, &shape);
                    return;
                }
                Outcome::Adapted => {}
            }
        }
    }

    /// The cache, unless it is off.
    fn cache(&self) -> Option<&Cache> {
        self.shared
            .cache
            .as_ref()
            .filter(|_| self.shared.cache_mode != CacheMode::Off)
    }

    /// What an attempt of about `asked` tokens used: the provider's pace learns it, and the run's
    /// accounts count it at the provider's prices (an empty reply is billed too).
    fn bill(&self, role: super::Role, asked: u64, used: Usage) {
        self.pace.used(asked, used.prompt_tokens + used.completion_tokens);
        self.shared.accounting.usage(
            &self.config.name,
            role,
            used,
            self.config.price_in_per_mtok,
            self.config.price_out_per_mtok,
        );
    }

    /// A cached reply, replayed as if it streamed.
    fn replay(&self, request: &ChatRequest, entry: CacheEntry, tx: &mpsc::UnboundedSender<ChatEvent>) {
        self.shared.accounting.cache_hit(&self.config.name, request.meta.role);
        tracing::debug!(provider = %self.config.name, purpose = %request.meta.purpose, "cache hit");
        for token in entry.tokens {
            if tx.send(ChatEvent::Token(token)).is_err() {
                return;
            }
        }
        if let Some(u) = entry.usage {
            let _ = tx.send(ChatEvent::Usage(u));
        }
        let _ = tx.send(ChatEvent::Done {
            finish_reason: entry.finish_reason,
            cached: true,
        });
    }

    /// The attempts of one request under the retry policy.
    async fn attempts(&self, request: &ChatRequest, key: &str, tx: &mpsc::UnboundedSender<ChatEvent>) -> Outcome {
        let provider = self.config.name.as_str();
        let role = request.meta.role;
        let acc = &self.shared.accounting;
        let cache = self.cache();
        // Both places are held for the whole request, retries included, but for the wait after a
        // rate-limit refusal: the request then gives them back and queues again under the cut
        // limit, so refused requests do not go on hammering the server as wide as before.
        let mut places = None;
        let backoff = Backoff {
            base: Duration::from_millis(self.config.retry_base_ms),
            seed: self.shared.seed,
        };
        let key_seed = u64::from_str_radix(&key[..16], 16).unwrap_or(0);
        let tokens_asked = tokens_asked(request);
        let mut attempt = 0u32;
        // Rate-limit refusals have their own, larger budget: they say "later", not "wrong".
        let mut throttles = 0u32;
        // Attempts that came back empty, for the final error's words.
        let mut empties = 0u32;
        let reach = &self.shared.reach;
        loop {
            let (own, _global) = match &mut places {
                Some(held) => held,
                // The provider's first, so a request waiting for a busy provider holds no global
                // permit another provider could use.
                None => {
                    let Some(own) = self.own.acquire().await else {
                        return Outcome::Over;
                    };
                    let Ok(global) = self.shared.limits.global.clone().acquire_owned().await else {
                        return Outcome::Over;
                    };
                    places.insert((own, global))
                }
            };
            // What the provider's headers said is spent, and its configured pace, it waits out before
            // the request goes.
            let ticket = self.pace.admit(tokens_asked).await;
            if reach.is_unreachable(provider) {
                acc.failure(provider, role);
                let _ = tx.send(ChatEvent::Error(LlmError::Unreachable {
                    base_url: self.transport.base_url().to_string(),
                }));
                return Outcome::Over;
            }
            acc.request(provider, role);
            let mut tokens: Vec<String> = Vec::new();
            let mut on_token = |t: String| {
                tokens.push(t.clone());
                tx.send(ChatEvent::Token(t)).is_ok()
            };
            let result = self.transport.attempt(request, &mut on_token).await;
            match &result {
                Err(AttemptError::NoConnection(e)) => {
                    reach.connect_failed(provider, self.transport.base_url(), e);
                }
                Err(AttemptError::Cancelled | AttemptError::Connect(_)) => {}
                _ => reach.connected(provider),
            }
            match &result {
                Ok(Finished { rate, .. }) => self.pace.observe(rate, ticket),
                Err(AttemptError::Status { rate, .. }) => self.pace.observe(rate, ticket),
                Err(_) => {}
            }
            // A complete reply with nothing in it is a failed attempt, never an answer: it is neither
            // cached nor passed on, but what it cost is counted, as the provider bills it.
            let result = match result {
                Ok(finished) if tokens.iter().all(|t| super::is_empty_reply(t)) => {
                    if let Some(u) = finished.usage {
                        self.bill(role, tokens_asked, u);
                    }
                    empties += 1;
                    Err(AttemptError::Empty {
                        finish_reason: finished.finish_reason,
                    })
                }
                other => other,
            };
            match result {
                Ok(finished) => {
                    reach.answered(provider);
                    own.succeeded();
                    if let Some(u) = finished.usage {
                        self.bill(role, tokens_asked, u);
                        let _ = tx.send(ChatEvent::Usage(u));
                    }
                    if let (Some(cache), CacheMode::ReadWrite) = (cache, self.shared.cache_mode) {
                        let entry = CacheEntry {
                            tokens,
                            usage: finished.usage,
                            finish_reason: finished.finish_reason.clone(),
                            model: self.config.model.clone(),
                            created_unix: now_unix(),
                        };
                        if let Err(e) = cache.put(key, &entry) {
                            tracing::warn!(provider, error = %e, "could not write the cache entry");
                        }
                    }
                    let _ = tx.send(ChatEvent::Done {
                        finish_reason: finished.finish_reason,
                        cached: false,
                    });
                    return Outcome::Over;
                }
                Err(AttemptError::Cancelled) => return Outcome::Over,
                Err(error) => {
                    let reason = error.describe(self.transport.base_url());
                    tracing::info!(provider, attempt, purpose = %request.meta.purpose, %reason, "attempt failed");
                    if let AttemptError::Status {
                        status: 400,
                        message,
                        param,
                        code,
                        ..
                    } = &error
                        && let Some(kind) = adapt::recognise(request, param.as_deref(), code.as_deref(), message)
                    {
                        // Adapted once for the provider and model (or another request just did); a
                        // request already sent that way fails as any 400 does.
                        let adapter = &self.shared.adapter;
                        adapter.adapt(provider, &self.config.model, kind, message);
                        if adapter.quirks(provider, &self.config.model).apply(request) != *request {
                            return Outcome::Adapted;
                        }
                    }
                    if error.rate_limited() && throttles < RATE_LIMIT_RETRIES {
                        throttles += 1;
                        let now = places
                            .take()
                            .map_or_else(|| self.own.limit(), |(own, _)| own.throttled());
                        acc.retry(provider, role);
                        let delay = backoff.delay(key_seed, throttles.min(6), error.retry_after(tokens_asked));
                        let event = ChatEvent::Retry {
                            attempt: attempt + throttles,
                            reason: format!(
                                "{reason} ({}: {now} in flight from now)",
                                if matches!(error, AttemptError::Interrupted) {
                                    "interrupted"
                                } else {
                                    "rate limited"
                                }
                            ),
                            discarded_chars: tokens.iter().map(|t| t.chars().count()).sum(),
                            delay_ms: delay.as_millis() as u64,
                        };
                        if tx.send(event).is_err() {
                            return Outcome::Over;
                        }
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                    // A batch's reply is stored: asking again would read the same empty one.
                    let settled = matches!(error, AttemptError::Empty { .. }) && self.transport.batched();
                    if !error.retryable() || attempt >= self.config.max_retries || settled {
                        acc.failure(provider, role);
                        // The same refusal, request after request, stops the run (see `REFUSED_AFTER`).
                        if let AttemptError::Status { status, message, .. } = &error
                            && !error.retryable()
                        {
                            reach.refused(
                                provider,
                                self.transport.base_url(),
                                &format!("HTTP {status}: {message}"),
                            );
                        } else if let AttemptError::Fatal(e @ LlmError::Unauthorized { .. }) = &error {
                            reach.refused(provider, self.transport.base_url(), &e.to_string());
                        }
                        // Servers built on llama.cpp (and older vLLM) refuse `json_schema`: say what fixes it.
                        let hint = match &error {
                            AttemptError::Status { message, .. }
                                if request.schema.is_some()
                                    && self.config.structured_output
                                    && message.contains("response_format") =>
                            {
                                format!(
                                    " (this server does not take response_format: set structured_output = false \
                                     for provider \"{provider}\")"
                                )
                            }
                            _ => String::new(),
                        };
                        let final_error = match error {
                            AttemptError::Fatal(e) => e,
                            AttemptError::Empty { finish_reason } => LlmError::EmptyReplies {
                                attempts: attempt + 1,
                                empty: empties,
                                finish_reason,
                            },
                            AttemptError::Status { status, message, .. } if !error.retryable() => LlmError::Http {
                                base_url: self.transport.base_url().to_string(),
                                status,
                                message: message + &hint,
                            },
                            _ => LlmError::Exhausted {
                                attempts: attempt + 1,
                                last: reason + &hint,
                            },
                        };
                        let _ = tx.send(ChatEvent::Error(final_error));
                        return Outcome::Over;
                    }
                    attempt += 1;
                    acc.retry(provider, role);
                    let delay = backoff.delay(key_seed, attempt, error.retry_after(tokens_asked));
                    let discarded_chars = tokens.iter().map(|t| t.chars().count()).sum();
                    let event = ChatEvent::Retry {
                        attempt,
                        reason,
                        discarded_chars,
                        delay_ms: delay.as_millis() as u64,
                    };
                    if tx.send(event).is_err() {
                        return Outcome::Over;
                    }
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures_util::StreamExt;

    use super::*;
    use crate::llm::config::ProviderKind;
    use crate::llm::{ChatMessage, Completion, ResponseSchema, Role, complete};

    /// A transport that replies from a script, one reply per attempt (the last one again once the
    /// script is spent), each split into word pieces as a server streams them.
    struct Scripted {
        replies: Mutex<Vec<&'static str>>,
        attempts: Mutex<u32>,
        finish_reason: &'static str,
        batched: bool,
        /// The first this many attempts end as a server ends a request it interrupted.
        interrupted: Mutex<u32>,
    }

    impl Scripted {
        fn new(replies: &[&'static str]) -> Scripted {
            Scripted {
                replies: Mutex::new(replies.iter().rev().copied().collect()),
                attempts: Mutex::new(0),
                finish_reason: "stop",
                batched: false,
                interrupted: Mutex::new(0),
            }
        }

        fn attempts(&self) -> u32 {
            *self.attempts.lock().unwrap()
        }
    }

    #[async_trait]
    impl Transport for Scripted {
        async fn attempt(
            &self,
            _: &ChatRequest,
            on_token: &mut (dyn FnMut(String) -> bool + Send),
        ) -> Result<Finished, AttemptError> {
            *self.attempts.lock().unwrap() += 1;
            {
                let mut interrupted = self.interrupted.lock().unwrap();
                if *interrupted > 0 {
                    *interrupted -= 1;
                    on_token("Half an ans".into());
                    return Err(AttemptError::Interrupted);
                }
            }
            let reply = {
                let mut replies = self.replies.lock().unwrap();
                if replies.len() > 1 {
                    replies.pop().unwrap()
                } else {
                    replies[0]
                }
            };
            for piece in reply.split_inclusive(' ') {
                if !on_token(piece.to_string()) {
                    return Err(AttemptError::Cancelled);
                }
            }
            Ok(Finished {
                usage: Some(Usage {
                    prompt_tokens: 5,
                    completion_tokens: reply.split_inclusive(' ').count() as u64,
                }),
                finish_reason: Some(self.finish_reason.into()),
                rate: RateHeaders::default(),
            })
        }

        fn info(&self) -> ModelInfo {
            ModelInfo {
                provider: "scripted".into(),
                kind: "test".into(),
                model: "m".into(),
            }
        }

        fn base_url(&self) -> &str {
            "http://scripted"
        }

        fn batched(&self) -> bool {
            self.batched
        }
    }

    fn client(transport: Arc<Scripted>, cache: &std::path::Path) -> Client {
        let mut config = ProviderConfig::new("scripted", ProviderKind::Openai, "http://scripted", "m");
        config.retry_base_ms = 1;
        config.max_retries = 3;
        let shared = Shared::new(4, Some(Cache::new(cache)), CacheMode::ReadWrite, 1);
        Client::new(transport, config, shared)
    }

    fn request(role: Role) -> ChatRequest {
        let mut r = ChatRequest::new(vec![ChatMessage::user("Are you talkative?")]);
        r.meta.role = role;
        r
    }

    fn cached(dir: &std::path::Path, request: &ChatRequest) -> Option<CacheEntry> {
        Cache::new(dir).get(&cache::key("http://scripted", "m", request))
    }

    /// Every file under `dir` (the cache's entries).
    fn files(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| if e.path().is_dir() { files(&e.path()) } else { 1 })
            .sum()
    }

    #[tokio::test]
    async fn interrupted_requests_are_asked_again_with_fewer_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let transport = Arc::new(Scripted::new(&["A whole answer."]));
        *transport.interrupted.lock().unwrap() = 2;
        let c = client(transport.clone(), dir.path());
        let before = c.own.limit();
        let mut events = c.stream(request(Role::Rpa));
        let (mut text, mut retries) = (String::new(), Vec::new());
        while let Some(e) = events.next().await {
            match e {
                ChatEvent::Token(t) => text.push_str(&t),
                ChatEvent::Retry { reason, .. } => {
                    text.clear();
                    retries.push(reason);
                }
                ChatEvent::Error(e) => panic!("{e}"),
                _ => {}
            }
        }
        assert_eq!(text, "A whole answer.", "the cut reply is discarded, never an answer");
        assert_eq!(transport.attempts(), 3);
        assert_eq!(retries.len(), 2);
        assert!(retries[0].contains("no finish_reason") && retries[0].contains("(interrupted: "), "{retries:?}");
        assert!(c.own.limit() < before, "{} of {before} in flight", c.own.limit());
        assert_eq!(files(dir.path()), 1, "only the whole answer is cached");
    }

    #[tokio::test]
    async fn empty_and_blank_replies_are_retried_until_a_real_one() {
        let dir = tempfile::tempdir().unwrap();
        let transport = Arc::new(Scripted::new(&["", " \n\t ", "\u{200B}", "Only when it matters."]));
        let c = client(transport.clone(), dir.path());
        let mut events = c.stream(request(Role::Rpa));
        let (mut text, mut retries, mut usages) = (String::new(), Vec::new(), 0);
        while let Some(e) = events.next().await {
            match e {
                ChatEvent::Token(t) => text.push_str(&t),
                ChatEvent::Retry {
                    reason,
                    discarded_chars,
                    ..
                } => {
                    assert_eq!(discarded_chars, text.chars().count());
                    text.clear();
                    retries.push(reason);
                }
                ChatEvent::Usage(_) => usages += 1,
                ChatEvent::Done { cached, .. } => assert!(!cached),
                ChatEvent::Error(e) => panic!("{e}"),
            }
        }
        assert_eq!(text, "Only when it matters.");
        assert_eq!(transport.attempts(), 4);
        assert_eq!(retries.len(), 3);
        assert!(retries.iter().all(|r| r.contains("the reply was empty")), "{retries:?}");
        assert_eq!(usages, 1, "only the answer's usage goes to the caller");
        let counted = c.accounting().snapshot().total();
        assert_eq!((counted.requests, counted.retries, counted.failures), (4, 3, 0));
        assert_eq!(counted.prompt_tokens, 20, "every attempt's cost is counted");
        // Only the answer is cached, and a second ask is served from it.
        assert_eq!(files(dir.path()), 1);
        assert_eq!(
            cached(dir.path(), &request(Role::Rpa)).unwrap().text(),
            "Only when it matters."
        );
        let again = complete(&c, request(Role::Rpa)).await.unwrap();
        assert!(again.cached && again.text == "Only when it matters.");
        assert_eq!(transport.attempts(), 4);
    }

    #[tokio::test]
    async fn a_model_that_only_replies_empty_fails_for_every_role_and_caches_nothing() {
        for role in Role::ALL {
            for reply in ["", "  \n  "] {
                let dir = tempfile::tempdir().unwrap();
                let transport = Arc::new(Scripted::new(&[reply]));
                let c = client(transport.clone(), dir.path());
                let error = complete(&c, request(role)).await.unwrap_err();
                assert_eq!(
                    error,
                    LlmError::EmptyReplies {
                        attempts: 4,
                        empty: 4,
                        finish_reason: Some("stop".into())
                    }
                );
                assert_eq!(
                    error.to_string(),
                    "the replies were empty: 4 of 4 attempt(s) came back with no text \
                     (the last ended with finish_reason \"stop\")"
                );
                assert!(!error.is_input(), "the model's fault, not the user's: exit 1");
                assert_eq!(transport.attempts(), 4, "bounded by max_retries");
                assert_eq!(files(dir.path()), 0, "nothing cached for {role:?} {reply:?}");
                let counted = c.accounting().snapshot().total();
                assert_eq!((counted.requests, counted.failures), (4, 1));
            }
        }
    }

    #[tokio::test]
    async fn an_empty_reply_to_a_json_request_is_a_failure_too() {
        let dir = tempfile::tempdir().unwrap();
        let transport = Arc::new(Scripted {
            finish_reason: "length",
            ..Scripted::new(&[""])
        });
        let c = client(transport.clone(), dir.path());
        let mut r = request(Role::Judge);
        r.schema = Some(ResponseSchema {
            name: "rating".into(),
            schema: serde_json::json!({"type": "object"}),
            strict: true,
        });
        let error = complete(&c, r).await.unwrap_err().to_string();
        assert!(error.starts_with("the replies were empty: 4 of 4"), "{error}");
        assert!(error.contains("token cap ran out before any text"), "{error}");
        assert_eq!(files(dir.path()), 0);
    }

    #[tokio::test]
    async fn an_empty_reply_an_older_build_cached_is_asked_again_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let r = request(Role::Rpa);
        let path = {
            let key = cache::key("http://scripted", "m", &r);
            dir.path().join(&key[..2]).join(format!("{key}.json"))
        };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let stale =
            serde_json::json!({"tokens": [], "usage": null, "finish_reason": "stop", "model": "m", "created_unix": 1});
        std::fs::write(&path, stale.to_string()).unwrap();
        let transport = Arc::new(Scripted::new(&["I do like a good talk."]));
        let c = client(transport.clone(), dir.path());
        let reply: Completion = complete(&c, r.clone()).await.unwrap();
        assert!(!reply.cached, "the empty entry is not served");
        assert_eq!(transport.attempts(), 1);
        assert_eq!(cached(dir.path(), &r).unwrap().text(), "I do like a good talk.");
    }

    #[tokio::test]
    async fn an_empty_reply_from_a_batch_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let transport = Arc::new(Scripted {
            batched: true,
            ..Scripted::new(&[""])
        });
        let c = client(transport.clone(), dir.path());
        let error = complete(&c, request(Role::Rpa)).await.unwrap_err();
        assert!(
            matches!(
                error,
                LlmError::EmptyReplies {
                    attempts: 1,
                    empty: 1,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            transport.attempts(),
            1,
            "the batch's stored reply would come back the same"
        );
    }

    #[test]
    fn whitespace_and_invisible_marks_are_empty_but_any_text_is_not() {
        for empty in ["", " ", "\n\r\t", "\u{3000}", "\u{200B}\u{FEFF}", " \u{2060} "] {
            assert!(crate::llm::is_empty_reply(empty), "{empty:?}");
        }
        for text in [".", " 1 ", "{}", "嗯"] {
            assert!(!crate::llm::is_empty_reply(text), "{text:?}");
        }
    }
}
