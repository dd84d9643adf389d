//! `Client` turns a single-attempt `Transport` into a `ChatModel`: cache lookup first, then the
//! concurrency limits, then attempts with the retry policy, each sent when the provider's pace allows;
//! every step is accounted and every retry is announced in the event stream (its partial text
//! discarded). A reply with no text is a failed attempt here, for every caller: retried, never cached,
//! and a failure when every retry is empty too.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;

use super::accounting::Accounting;
use super::adapt::{self, Adapter};
use super::cache::{self, Cache, CacheEntry};
pub use super::policy::Unreachable;
use super::policy::{self, Backoff, Limits, Reachability};
use super::server::Facts;
use super::{ChatEvent, ChatModel, ChatRequest, EventStream, LlmError, ModelInfo, Usage};
use crate::config::{CacheMode, ProviderConfig};
use crate::text::approx_tokens;

mod attempt;
mod pause;
mod transport;
pub use attempt::AttemptError;
pub use pause::Pause;
pub use transport::{Came, Finished, Transport};

/// Rate-limit refusals one request rides out (with `Retry-After` or backoff up to 30 s each) before
/// it fails; they do not count against `max_retries`.
pub const RATE_LIMIT_RETRIES: u32 = 50;


/// What the run learned of each provider's server, and what is not yet journaled.
#[derive(Default)]
pub struct Servers {
    states: std::sync::Mutex<std::collections::HashMap<String, Arc<ServerState>>>,
    fresh: std::sync::Mutex<Vec<Facts>>,
}

/// One provider's server, as far as the run knows it.
#[derive(Default)]
struct ServerState {
    /// Asked once, by the first request to reach the provider.
    facts: tokio::sync::OnceCell<Option<Arc<Facts>>>,
    /// The smallest context the server named when it refused a request as too long (0: none).
    refused_at: std::sync::atomic::AtomicUsize,
}

impl Servers {
    fn state(&self, provider: &str) -> Arc<ServerState> {
        let mut states = self.states.lock().unwrap_or_else(|p| p.into_inner());
        states.entry(provider.to_string()).or_default().clone()
    }

    /// What was learned since the last call, for the session's journal.
    pub fn take_fresh(&self) -> Vec<Facts> {
        std::mem::take(&mut *self.fresh.lock().unwrap_or_else(|p| p.into_inner()))
    }

    #[cfg(any(test, feature = "testing"))]
    /// What was learned of `provider`'s server, if it has been asked.
    pub fn facts(&self, provider: &str) -> Option<Arc<Facts>> {
        self.state(provider).facts.get().cloned().flatten()
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
    /// What providers' servers said about themselves.
    pub servers: Arc<Servers>,
    /// The run's pause, once a live view holds one: a request that got its places while the run
    /// was paused waits before it is sent.
    pub pause: Arc<std::sync::OnceLock<Pause>>,
    /// The run's cost cap in USD, and where an attempt waits once the replies have cost it: nothing
    /// more is sent, what is in flight comes back and is read.
    pub cap: Arc<std::sync::OnceLock<(f64, Arc<dyn super::accounting::Holder>)>>,
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
            servers: Arc::default(),
            pause: Arc::default(),
            cap: Arc::default(),
        }
    }

    /// Waits until a provider of the run is found unreachable.
    pub fn unreachable(&self) -> impl std::future::Future<Output = Unreachable> + Send + 'static {
        let reach = self.reach.clone();
        reach.watched();
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
    /// The provider's server, shared the same way.
    server: Arc<ServerState>,
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
        let server = shared.servers.state(&config.name);
        Client {
            transport,
            config: Arc::new(config),
            own,
            pace,
            server,
            shared,
        }
    }

    /// What the provider's server says of itself: asked now if no request has asked yet.
    pub async fn server(&self) -> Option<Arc<Facts>> {
        self.learn().await
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

    /// Drops the reply from the cache under the key it was stored by: the request as the provider's
    /// adaptations shape it now, or as it was asked (an adaptation learned since it was stored).
    fn forget(&self, request: &ChatRequest, reply: &str) {
        let (Some(cache), CacheMode::ReadWrite) = (self.cache(), self.shared.cache_mode) else {
            return;
        };
        let adapted = self.shared.adapter.quirks(&self.config.name, &self.config.model).apply(request);
        for r in [&adapted, request] {
            cache.forget(&self.key(r), reply);
        }
    }

    fn context_tokens(&self) -> Option<usize> {
        let learned = self
            .server
            .facts
            .get()
            .and_then(Option::as_ref)
            .and_then(|f| f.used.context_tokens);
        // The config states a context; what the transport knows of its own (the embedded model's)
        // bounds it: a stated context past it sent prompts the model refused, unsplit.
        let stated = match (self.config.context_tokens, self.transport.context_tokens()) {
            (Some(stated), Some(own)) => Some(stated.min(own)),
            (stated, own) => stated.or(own),
        };
        let known = learned.or(stated);
        // A server that refused at a smaller context is believed over anything else.
        match (known, self.server.refused_at.load(std::sync::atomic::Ordering::Relaxed)) {
            (known, 0) => known,
            (Some(known), refused) => Some(known.min(refused)),
            (None, refused) => Some(refused),
        }
    }
}

/// About how many tokens a request asks for, as rate limits count them: its prompt (see
/// [`approx_tokens`]) and its answer cap.
fn tokens_asked(request: &ChatRequest) -> u64 {
    prompt_tokens(request) + u64::from(request.sampling.max_tokens.unwrap_or(0))
}

/// About how many tokens a request's prompt holds (see [`approx_tokens`]).
fn prompt_tokens(request: &ChatRequest) -> u64 {
    request.messages.iter().map(|m| approx_tokens(&m.content) as u64).sum()
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
            let key = self.key(&adapted);
            if let Some(entry) = cache.and_then(|c| c.get(&key)) {
                self.replay(&adapted, entry, &tx);
                return;
            }
            // Until a request of this shape to this provider and model has come back, one at a time:
            // a refusal then costs one request, and the rest go out adapted.
            let gate = (!self.transport.batched() && self.transport.may_refuse_shapes())
                .then(|| adapter.gate(provider, model, &shape))
                .flatten();
            let mut _first = match &gate {
                // Waiting for the first of its shape, it is queued as a request waiting for its
                // places is (the progress counts it).
                Some(g) => {
                    let _queued = self.shared.accounting.queue(provider, request.meta.role);
                    Some(g.clone().lock_owned().await)
                }
                None => None,
            };
            if gate.is_some() && adapter.gate(provider, model, &shape).is_none() {
                // The first came back while this one waited: go in parallel.
                _first = None;
            }
            if gate.is_some() && adapter.quirks(provider, model).apply(&request) != adapted {
                continue;
            }
            match self.attempts(&adapted, &key, &tx, (_first.take(), &shape)).await {
                Outcome::Over => {
                    adapter.open(provider, model, &shape);
                    return;
                }
                Outcome::Adapted => {}
            }
        }
    }

    /// The cache key of `request` as sent. An embedded model's replies are its file's: a name pointed
    /// at another file is another model.
    fn key(&self, request: &ChatRequest) -> String {
        let model = match self.transport.info().sha256 {
            Some(sha) => format!("{}@{sha}", self.config.model),
            None => self.config.model.clone(),
        };
        cache::key(self.transport.base_url(), &model, request)
    }

    /// The cache, unless it is off.
    fn cache(&self) -> Option<&Cache> {
        self.shared
            .cache
            .as_ref()
            .filter(|_| self.shared.cache_mode != CacheMode::Off)
    }

    /// Counts a reply by where it came from: sent (a request, billed), kept from an earlier sitting
    /// (paid for then), or imported from the user's engine (no request, its tokens billed).
    fn count(&self, role: super::Role, tries: &Tries, finished: &Finished, reply: &[String]) {
        let provider = self.config.name.as_str();
        match finished.came {
            Came::Kept => self.shared.accounting.kept(provider, role),
            Came::Imported => {
                self.shared.accounting.imported(provider, role);
                self.bill(role, tries, finished.usage, reply);
            }
            Came::Sent => self.bill(role, tries, finished.usage, reply),
        }
    }

    /// What an attempt used: the provider's pace learns it, and the run's accounts count it at the
    /// provider's prices (an empty reply too), as the server said, or estimated from the prompt and
    /// the reply's text when it said nothing (it ignores `stream_options.include_usage`).
    fn bill(&self, role: super::Role, tries: &Tries, usage: Option<Usage>, reply: &[String]) {
        let used = usage.unwrap_or_else(|| Usage {
            prompt_tokens: tries.prompt_tokens,
            completion_tokens: approx_tokens(&reply.concat()) as u64,
        });
        self.pace.used(tries.tokens_asked, used.prompt_tokens + used.completion_tokens);
        self.shared.accounting.usage(
            &self.config.name,
            role,
            used,
            usage.is_none(),
            (self.config.price_in_per_mtok, self.config.price_out_per_mtok),
        );
    }

    /// What the provider's server says of itself, asked by the first request to reach it; what it
    /// says of its slots caps the provider's requests in flight (unless the config states them).
    async fn learn(&self) -> Option<Arc<Facts>> {
        self.server
            .facts
            .get_or_init(|| async {
                let facts = self.transport.learn().await?;
                if facts.used.max_concurrency < self.own.max() {
                    self.own.cap(facts.used.max_concurrency);
                }
                tracing::info!(provider = %self.config.name, facts = %facts.summary(), "server learned");
                self.shared
                    .servers
                    .fresh
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(facts.clone());
                Some(Arc::new(facts))
            })
            .await
            .clone()
    }

    /// Whether `request` fits the context with room for its reply: by the estimate when it clearly
    /// does, else by the model's own count (the embedded model's tokenizer) or the server's where it
    /// offers one, else by the estimate (which errs on the long side). `Err` says by how much it does not.
    async fn fits(&self, request: &ChatRequest, facts: Option<&Facts>) -> Result<(), LlmError> {
        let Some(context) = self.context_tokens() else {
            return Ok(());
        };
        let room = super::server::reply_room(request);
        let estimate = super::server::estimate(request);
        if estimate + room <= context {
            return Ok(());
        }
        let counted = match (self.transport.own_count(request), facts.and_then(|f| f.tokenize)) {
            (Some(n), _) => Some((n, "counted by the model's tokenizer")),
            (None, Some(how)) => self.transport.count_tokens(request, how).await.map(|n| (n, "counted by the server")),
            (None, None) => None,
        };
        let (prompt, how) = counted.unwrap_or((estimate, "estimated"));
        if prompt + room <= context {
            return Ok(());
        }
        Err(LlmError::Context {
            prompt_tokens: prompt,
            reply_tokens: room,
            context_tokens: context,
            how: how.into(),
        })
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
        if !entry.choices.is_empty() {
            let _ = tx.send(ChatEvent::Choices(entry.choices));
        }
        let _ = tx.send(ChatEvent::Done {
            finish_reason: entry.finish_reason,
            cached: true,
        });
    }

    /// The attempts of one request under the retry policy.
    async fn attempts(&self, request: &ChatRequest, key: &str, tx: &Sender, (first, shape): (First, &str)) -> Outcome {
        let provider = self.config.name.as_str();
        let role = request.meta.role;
        let mut tries = Tries {
            places: None,
            first,
            shape: shape.to_string(),
            backoff: Backoff {
                base: Duration::from_millis(self.config.retry_base_ms),
                seed: self.shared.seed,
            },
            key_seed: u64::from_str_radix(&key[..16], 16).unwrap_or(0),
            tokens_asked: tokens_asked(request),
            prompt_tokens: prompt_tokens(request),
            attempt: 0,
            throttles: 0,
            empties: 0,
            retrying: false,
        };
        let facts = self.learn().await;
        let mut measured = false;
        loop {
            if !self.take_places(&mut tries.places, role, tx).await {
                return Outcome::Over;
            }
            // Measured once, holding its place: a server that serves one request at a time counts
            // tokens between requests, not in the middle of one.
            if !measured {
                measured = true;
                if let Err(e) = self.fits(request, facts.as_deref()).await {
                    self.shared.accounting.too_long(provider, role);
                    tries.places = None;
                    let _ = tx.send(ChatEvent::Error(e));
                    return Outcome::Over;
                }
            }
            let Some((result, tokens)) = self.send_once(request, &mut tries, tx).await else {
                return Outcome::Over;
            };
            match result {
                Ok(finished) => {
                    self.answered(key, role, finished, tokens, &mut tries, tx);
                    return Outcome::Over;
                }
                Err(AttemptError::Cancelled) => return Outcome::Over,
                Err(error) => {
                    if let Some(outcome) = self.failed(request, error, &tokens, &mut tries, tx).await {
                        return outcome;
                    }
                }
            }
        }
    }

    /// Whether the request is to be sent now: after the run's pause, if any, is lifted, and only if
    /// someone still listens (a cancelled run's requests, held by a pause, are never sent).
    async fn may_send(&self, tx: &mpsc::UnboundedSender<ChatEvent>) -> bool {
        if let Some(pause) = self.shared.pause.get() {
            tokio::select! {
                () = pause.wait() => {}
                () = tx.closed() => return false,
            }
        }
        !tx.is_closed()
    }

    /// Takes the request's places unless it holds them. The provider's first, so a request waiting
    /// for a busy provider holds no global permit another provider could use. Queued until both are
    /// held, in flight after. False when the limits are closed.
    async fn take_places(
        &self,
        places: &mut Option<Places>,
        role: super::Role,
        tx: &mpsc::UnboundedSender<ChatEvent>,
    ) -> bool {
        if places.is_some() {
            // A retry holds its places; it too waits out a pause.
            return self.may_send(tx).await;
        }
        let queued = self.shared.accounting.queue(&self.config.name, role);
        let Some(own) = self.own.acquire().await else {
            return false;
        };
        let Ok(global) = self.shared.limits.global.clone().acquire_owned().await else {
            return false;
        };
        // Paused while it waited for its places: it waits on, still queued (nothing else starts).
        if !self.may_send(tx).await {
            return false;
        }
        *places = Some((own, global, queued.start()));
        true
    }

    /// One attempt, sent when the provider's pace allows: how it ended (a reply with no text made a
    /// failure) and the pieces that streamed. `None` when the provider is known unreachable: the
    /// request has failed and said so.
    async fn send_once(
        &self,
        request: &ChatRequest,
        tries: &mut Tries,
        tx: &mpsc::UnboundedSender<ChatEvent>,
    ) -> Option<(Result<Finished, AttemptError>, Vec<String>)> {
        let provider = self.config.name.as_str();
        let role = request.meta.role;
        let acc = &self.shared.accounting;
        let reach = &self.shared.reach;
        // At the cost cap nothing more goes out: the attempt waits until the run stops, its places
        // and its shape's lock given up so that the requests waiting for them come to wait here too.
        if let Some((cap, holder)) = self.shared.cap.get()
            && acc.cost() >= *cap
        {
            (tries.places, tries.first) = (None, None);
            tokio::select! {
                () = holder.hold() => {}
                () = tx.closed() => {}
            }
            return None;
        }
        // What the provider's headers said is spent, and its configured pace, it waits out before
        // the request goes.
        let ticket = self.pace.admit(tries.tokens_asked).await;
        if reach.is_unreachable(provider) {
            self.not_reached(request, tries, tx).await;
            return None;
        }
        // A streamed attempt is a request now; a batched one parks until its phase goes out, which a
        // phase held at the cost cap, written to a file, or stopped with its sitting never does: it
        // is counted by its transport once a batch of this sitting answers it, and so is its retry.
        let retrying = std::mem::take(&mut tries.retrying);
        let batched = self.transport.batched();
        if !batched {
            acc.request(provider, role);
        }
        if retrying && !batched {
            acc.retry(provider, role);
        }
        let mut tokens: Vec<String> = Vec::new();
        let mut on_token = |t: String| {
            tokens.push(t.clone());
            tx.send(ChatEvent::Token(t)).is_ok()
        };
        let result = self
            .transport
            .attempt(request, &mut on_token)
            .await
            .map_err(AttemptError::classified);
        if retrying
            && batched
            && match &result {
                Ok(finished) => finished.came == Came::Sent,
                Err(e) => !matches!(e, AttemptError::Cancelled),
            }
        {
            acc.retry(provider, role);
        }
        match &result {
            Err(AttemptError::NoConnection(e)) => {
                reach.connect_failed(provider, self.transport.base_url(), e);
            }
            Err(AttemptError::Cancelled | AttemptError::Connect(_)) => {}
            _ => reach.connected(provider),
        }
        // A reply came, whatever is in it: the server takes requests of this shape, and the others
        // waiting for the first need not wait for its retries.
        // Opened before the lock is given up, so that no waiter takes the lock while the shape is
        // still closed and goes alone as a second first.
        if result.is_ok() && tries.first.is_some() {
            self.shared.adapter.open(provider, &self.config.model, &tries.shape);
            tries.first = None;
        }
        match &result {
            Ok(Finished { rate, .. }) => self.pace.observe(rate, ticket),
            Err(AttemptError::Status { rate, .. }) => self.pace.observe(rate, ticket),
            Err(_) => {}
        }
        // A complete reply with nothing in it (or only a thought: see `thought_len`) is a failed
        // attempt, never an answer: it is neither
        // cached nor passed on, but what it cost is counted, as the provider bills it.
        let result = match result {
            Ok(finished) if {
                let text = tokens.concat();
                super::is_empty_reply(&text[super::thought_len(&text)..])
            } =>
            {
                // Counted as a reply is (see `answered`): a kept one was billed in the sitting that
                // got it, an imported one was no request of this run's.
                self.count(role, tries, &finished, &tokens);
                tries.empties += 1;
                Err(AttemptError::Empty {
                    finish_reason: finished.finish_reason,
                })
            }
            other => other,
        };
        Some((result, tokens))
    }

    /// A reply: the provider answers, its cost is counted, and it is cached (when the cache is
    /// written) and passed on, its places given back first: whoever counts it done no longer sees
    /// it in flight.
    fn answered(
        &self,
        key: &str,
        role: super::Role,
        finished: Finished,
        tokens: Vec<String>,
        tries: &mut Tries,
        tx: &mpsc::UnboundedSender<ChatEvent>,
    ) {
        let provider = self.config.name.as_str();
        self.shared.reach.answered(provider);
        if let Some((own, ..)) = &tries.places {
            own.succeeded();
        }
        self.count(role, tries, &finished, &tokens);
        if let Some(u) = finished.usage {
            let _ = tx.send(ChatEvent::Usage(u));
        }
        if let (Some(cache), CacheMode::ReadWrite) = (self.cache(), self.shared.cache_mode) {
            let entry = CacheEntry {
                tokens,
                usage: finished.usage,
                finish_reason: finished.finish_reason.clone(),
                model: self.config.model.clone(),
                created_unix: now_unix(),
                choices: finished.choices.clone(),
            };
            if let Err(e) = cache.put(key, &entry) {
                tracing::warn!(provider, error = %e, "could not write the cache entry");
                self.shared.accounting.not_cached(provider, role);
            }
        }
        tries.places = None;
        if !finished.choices.is_empty() {
            let _ = tx.send(ChatEvent::Choices(finished.choices));
        }
        let _ = tx.send(ChatEvent::Done {
            finish_reason: finished.finish_reason,
            cached: false,
        });
    }

    /// What follows a failed attempt: the request sent again adapted, a rate limit's wait, a
    /// retry after backoff, or giving up. `None`: attempt again.
    async fn failed(
        &self,
        request: &ChatRequest,
        error: AttemptError,
        tokens: &[String],
        tries: &mut Tries,
        tx: &mpsc::UnboundedSender<ChatEvent>,
    ) -> Option<Outcome> {
        let provider = self.config.name.as_str();
        let reason = error.describe(self.transport.answerer());
        let attempt = tries.attempt;
        tracing::info!(provider, attempt, purpose = %request.meta.purpose, %reason, "attempt failed");
        if self.adapt_to(request, &error) {
            return Some(Outcome::Adapted);
        }
        let discarded_chars = tokens.iter().map(|t| t.chars().count()).sum();
        // An interruption is another request's doing while the provider has more than one in
        // flight, ridden out as a 429 is; with one, none of this run's did it: a failure like any.
        let lone = matches!(error, AttemptError::Interrupted) && self.own.limit() <= 1;
        // A batch's 429 is a line of its results, not this run's pace: a failed attempt like any,
        // within the retry policy (ridden out, it would go out in phase after phase).
        if error.rate_limited() && !lone && !self.transport.batched() && tries.throttles < RATE_LIMIT_RETRIES {
            return self.ride_out(&error, reason, discarded_chars, tries, tx).await;
        }
        if !error.retryable() || tries.attempt >= self.config.max_retries {
            // Refused to the end: a server that is down stops the run rather than failing this
            // request (see `Reachability::outlast`).
            let reach = &self.shared.reach;
            if let AttemptError::NoConnection(e) = &error
                && reach.stops_a_run()
            {
                tokio::select! {
                    () = reach.outlast(provider, self.transport.base_url(), e) => {}
                    () = tx.closed() => return Some(Outcome::Over),
                }
                if reach.is_unreachable(provider) {
                    // Its attempts were sent and counted: neither a failure nor a request not sent.
                    (tries.places, tries.first) = (None, None);
                    tx.closed().await;
                    return Some(Outcome::Over);
                }
            }
            self.shared.accounting.failure(provider, request.meta.role);
            let final_error = self.give_up(request, error, reason, tries);
            tries.places = None;
            let _ = tx.send(ChatEvent::Error(final_error));
            return Some(Outcome::Over);
        }
        tries.attempt += 1;
        tries.retrying = true;
        let delay = tries
            .backoff
            .delay(tries.key_seed, tries.attempt, error.retry_after(tries.tokens_asked));
        let event = ChatEvent::Retry {
            attempt: tries.attempt,
            reason,
            discarded_chars,
            delay_ms: delay.as_millis() as u64,
        };
        announce_and_wait(tx, event, delay).await
    }

    /// Whether the failure is a refusal the provider is now adapted to, so that the request goes
    /// again in the adapted form.
    fn adapt_to(&self, request: &ChatRequest, error: &AttemptError) -> bool {
        // Refusals are 400s; llama-cpp-python words its validation error as a 500.
        if let AttemptError::Status {
            status: 400 | 422 | 500,
            message,
            param,
            code,
            ..
        } = error
            && let Some(kind) = adapt::recognise(request, param.as_deref(), code.as_deref(), message)
        {
            // Adapted once for the provider and model (or another request just did); a
            // request already sent that way fails as any 400 does.
            let adapter = &self.shared.adapter;
            let provider = self.config.name.as_str();
            adapter.adapt(provider, &self.config.model, kind, message);
            return adapter.quirks(provider, &self.config.model).apply(request) != *request;
        }
        false
    }

    /// A request not sent because its provider was found unreachable. In a run, which stops for
    /// it, the request waits for the run to drop it rather than ending as a failure the study
    /// would record (a resume asks it again); alone (`chat`), it fails saying so.
    async fn not_reached(&self, request: &ChatRequest, tries: &mut Tries, tx: &mpsc::UnboundedSender<ChatEvent>) {
        let (provider, reach) = (self.config.name.as_str(), &self.shared.reach);
        self.shared.accounting.not_reached(provider, request.meta.role);
        (tries.places, tries.first) = (None, None);
        if reach.stops_a_run() {
            tx.closed().await;
            return;
        }
        let _ = tx.send(ChatEvent::Error(LlmError::Unreachable {
            base_url: self.transport.base_url().to_string(),
        }));
    }

    /// Rides out a rate-limit refusal: the places are given back (and the provider's limit cut), the
    /// wait the server asked for (or a backoff) announced and waited out.
    async fn ride_out(
        &self,
        error: &AttemptError,
        reason: String,
        discarded_chars: usize,
        tries: &mut Tries,
        tx: &mpsc::UnboundedSender<ChatEvent>,
    ) -> Option<Outcome> {
        tries.throttles += 1;
        let now = tries
            .places
            .take()
            .map_or_else(|| self.own.limit(), |(own, ..)| own.throttled());
        tries.retrying = true;
        let delay = tries.backoff.delay(
            tries.key_seed,
            tries.throttles.min(6),
            error.retry_after(tries.tokens_asked),
        );
        let event = ChatEvent::Retry {
            attempt: tries.attempt + tries.throttles,
            reason: format!(
                "{reason} ({}: {now} in flight from now)",
                if matches!(error, AttemptError::Interrupted) {
                    "interrupted"
                } else {
                    "rate limited"
                }
            ),
            discarded_chars,
            delay_ms: delay.as_millis() as u64,
        };
        announce_and_wait(tx, event, delay).await
    }

    /// The error a request fails with when it gives up; a refusal that will not change is told to
    /// the reachability watch, and a context refusal teaches the server's context.
    fn give_up(&self, request: &ChatRequest, error: AttemptError, reason: String, tries: &Tries) -> LlmError {
        let provider = self.config.name.as_str();
        let reach = &self.shared.reach;
        // The same refusal, request after request, stops the run (see `REFUSED_AFTER`). A batch's
        // refusals are lines of its results, read back at every sitting: each fails its item, and
        // the run goes on to its end (a stop would come back at every resume).
        let batched = self.transport.batched();
        if let AttemptError::Status { status, message, .. } = &error
            && !error.retryable()
            && !batched
        {
            reach.refused(
                provider,
                self.transport.base_url(),
                &format!("HTTP {status}: {message}"),
            );
        } else if let AttemptError::Fatal(e @ LlmError::Unauthorized { .. }) = &error {
            reach.refused(provider, self.transport.base_url(), &e.to_string());
        } else if let AttemptError::NotAnApi(page) = &error
            && !batched
        {
            // Counted by what came (a page's text changes with its tokens and times), said whole.
            let kind = page.split(": ").next().unwrap_or(page);
            reach.refused(provider, self.transport.base_url(), kind);
        }
        // Servers built on llama.cpp (and older vLLM) refuse `json_schema`: say what fixes it.
        let hint = match &error {
            AttemptError::Status { message, .. }
                if request.schema.is_some() && self.config.structured_output && message.contains("response_format") =>
            {
                format!(
                    " (this server does not take response_format: set structured_output = false \
                     for provider \"{provider}\")"
                )
            }
            // A base URL that names the endpoint itself, or lacks the API's version: nothing there.
            AttemptError::Status { status: 404, .. } => format!(
                " (nothing answers at {}/chat/completions: base_url is the API's root, such as \
                 http://localhost:8080/v1, without /chat/completions)",
                self.transport.base_url().trim_end_matches('/')
            ),
            _ => String::new(),
        };
        match error {
            AttemptError::Fatal(e) => e,
            AttemptError::ContextRefused { message, refusal } => {
                if let Some(n) = refusal.context_tokens {
                    let was = &self.server.refused_at;
                    let _ = was.fetch_update(
                        std::sync::atomic::Ordering::Relaxed,
                        std::sync::atomic::Ordering::Relaxed,
                        |old| (old == 0 || n < old).then_some(n),
                    );
                }
                LlmError::ContextRefused {
                    message,
                    prompt_tokens: refusal.prompt_tokens,
                    context_tokens: refusal.context_tokens,
                }
            }
            AttemptError::Empty { finish_reason } => LlmError::EmptyReplies {
                attempts: tries.sent(),
                empty: tries.empties,
                finish_reason,
            },
            AttemptError::NotAnApi(_) => LlmError::Transport(reason),
            AttemptError::Status { status, message, .. } if !error.retryable() => LlmError::Http {
                base_url: self.transport.answerer().to_string(),
                status,
                message: match message.trim().is_empty() {
                    true => hint.trim_start().to_string(),
                    false => message + &hint,
                },
            },
            _ => LlmError::Exhausted {
                attempts: tries.sent(),
                throttled: tries.throttles,
                last: reason + &hint,
            },
        }
    }
}

/// Announces a retry and waits out its delay; `Some(Over)` when nobody listens any more.
async fn announce_and_wait(
    tx: &mpsc::UnboundedSender<ChatEvent>,
    event: ChatEvent,
    delay: Duration,
) -> Option<Outcome> {
    if tx.send(event).is_err() {
        return Some(Outcome::Over);
    }
    tokio::time::sleep(delay).await;
    None
}

/// The places a request holds while it is sent: the provider's, the run's, and its in-flight mark.
type Places = (
    policy::Place,
    tokio::sync::OwnedSemaphorePermit,
    super::accounting::Flying,
);

/// One request's way through its attempts: the places it holds and what the retry policy counted.
/// Where a request's events go.
type Sender = mpsc::UnboundedSender<ChatEvent>;

/// The lock of a request sent alone as the first of its shape (see `Client::run`).
type First = Option<tokio::sync::OwnedMutexGuard<()>>;

struct Tries {
    /// Both places are held for the whole request, retries included, but for the wait after a
    /// rate-limit refusal: the request then gives them back and queues again under the cut
    /// limit, so refused requests do not go on hammering the server as wide as before.
    places: Option<Places>,
    first: First,
    /// The request's shape (`adapt::shape`), whose lock `first` is.
    shape: String,
    backoff: Backoff,
    /// The jitter's seed for this request (from its cache key).
    key_seed: u64,
    /// About how many tokens the request asks for, as rate limits count them.
    tokens_asked: u64,
    /// About how many tokens its prompt holds.
    prompt_tokens: u64,
    /// Retries spent against `max_retries`.
    attempt: u32,
    /// Rate-limit refusals have their own, larger budget: they say "later", not "wrong".
    throttles: u32,
    /// Attempts that came back empty, for the final error's words.
    empties: u32,
    /// A retry is due: counted as one when it goes out (one held at the cost cap, or given up for
    /// an unreachable provider, never did).
    retrying: bool,
}

impl Tries {
    /// How many times the request was sent: the first time, its retries and its rate-limited tries.
    fn sent(&self) -> u32 {
        self.attempt + self.throttles + 1
    }
}

#[cfg(test)]
mod tests;
