//! When to retry and how long to wait: retryable failures (connect errors, 408, 409, 429, 5xx, streams
//! cut before `[DONE]`, timeouts, replies with no text), exponential backoff with seeded jitter; the
//! concurrency limits (an adaptive one per provider, one across all providers), and the [`Pace`] of each
//! provider (`pace`: its rate-limit headers and configured rates); whether a provider is reachable at all.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::pace::Pace;
use crate::domain::rng::SplitMix64;

const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// HTTP statuses worth another attempt. 400/401/403/404 and other 4xx mean the request itself is wrong.
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// Exponential backoff with jitter drawn from a seed, so a run's waits are reproducible.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub seed: u64,
}

impl Backoff {
    /// The wait before retry number `attempt` (1 = first retry) of the request identified by `key`:
    /// the server's `Retry-After` if it sent one, else base · 2^(attempt−1) scaled by a factor in [0.5, 1).
    pub fn delay(&self, key: u64, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait;
        }
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(MAX_BACKOFF);
        let jitter = 0.5 + 0.5 * SplitMix64(self.seed ^ key ^ u64::from(attempt).wrapping_mul(0x9E37_79B9)).unit();
        exp.mul_f64(jitter)
    }
}

/// A provider's limit on requests in flight that follows what the server accepts (AIMD): a rate-limit
/// refusal (429, or 503 with `Retry-After`) halves it, at most once per round of requests in flight
/// (a refusal of a request sent before the last cut does not cut again), down to 1; every `limit`
/// successes in a row of requests sent since the cut add 1 back, up to the configured maximum.
/// Until the first refusal the limit starts at [`FIRST_LIMIT`] and grows by one per success.
#[derive(Debug)]
pub struct AdaptiveLimit {
    sem: Arc<Semaphore>,
    state: std::sync::Mutex<Aimd>,
}

#[derive(Debug)]
struct Aimd {
    /// The most it may grow to: the configured maximum, or less once the server said how many it
    /// serves at once ([`AdaptiveLimit::cap`]).
    max: usize,
    limit: usize,
    /// Permits still to take out of circulation after a cut (held by requests in flight).
    debt: usize,
    successes: usize,
    /// Bumped at every cut: a request remembers the round it was sent in.
    round: u64,
}

/// A request's place under an [`AdaptiveLimit`]; dropping it gives the place back (or retires it,
/// when a cut is still owed).
#[derive(Debug)]
pub struct Place {
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    limit: Arc<AdaptiveLimit>,
    round: u64,
}

/// Where a provider's limit starts, if its maximum is higher; until the first rate-limit refusal,
/// each success adds a place, so the limit doubles per round of answers (TCP's slow start). A
/// maximum far above what a server takes then costs a few refusals, not waves of them halving it
/// round after round.
pub const FIRST_LIMIT: usize = 8;

impl AdaptiveLimit {
    pub fn new(max: usize) -> Arc<AdaptiveLimit> {
        Self::starting(max, FIRST_LIMIT)
    }

    /// A limit whose every place is open from the start: for a transport that sends nothing by itself
    /// (batch mode's attempts wait for their phase, and a phase must hold them all).
    pub fn open(max: usize) -> Arc<AdaptiveLimit> {
        Self::starting(max, max)
    }

    fn starting(max: usize, first: usize) -> Arc<AdaptiveLimit> {
        let max = max.max(1);
        let first = max.min(first);
        Arc::new(AdaptiveLimit {
            sem: Arc::new(Semaphore::new(first)),
            state: std::sync::Mutex::new(Aimd {
                max,
                limit: first,
                debt: 0,
                successes: 0,
                round: 0,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Aimd> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The limit now.
    pub fn limit(&self) -> usize {
        self.state().limit
    }

    /// The limit now, if a rate-limit refusal has held it below the maximum (what the progress line
    /// and the Live screen show).
    fn held(&self) -> Option<usize> {
        let s = self.state();
        (s.round > 0 && s.limit < s.max).then_some(s.limit)
    }

    /// The most it may grow to now.
    pub fn max(&self) -> usize {
        self.state().max
    }

    /// Holds the limit at `n` or below from now on: what a server said it serves at once (its
    /// slots). Places held beyond it are retired as their requests end.
    pub fn cap(&self, n: usize) {
        let mut s = self.state();
        s.max = s.max.min(n.max(1));
        if s.limit > s.max {
            let less = s.limit - s.max;
            let retired = self.sem.forget_permits(less);
            s.debt += less - retired;
            s.limit = s.max;
        }
    }

    /// Waits for a place; `None` if the limit was closed.
    pub async fn acquire(self: &Arc<Self>) -> Option<Place> {
        let permit = self.sem.clone().acquire_owned().await.ok()?;
        let round = self.state().round;
        Some(Place {
            permit: Some(permit),
            limit: self.clone(),
            round,
        })
    }
}

impl Place {
    /// The server refused for its rate: halve the limit, unless a refusal of this round already did,
    /// and give the place back (the request queues again under the limit now). Returns the limit now.
    pub fn throttled(self) -> usize {
        let limit = &self.limit;
        let mut s = limit.state();
        if self.round == s.round {
            let cut = (s.limit / 2).max(1);
            let less = s.limit - cut;
            let retired = limit.sem.forget_permits(less);
            s.debt += less - retired;
            s.limit = cut;
            s.successes = 0;
            s.round += 1;
        }
        s.limit
    }

    /// A reply came back: after `limit` of them in a row (before the first refusal: each), one more
    /// place. Only replies to requests sent since the last cut count: those sent before say nothing
    /// of the limit now.
    pub fn succeeded(&self) {
        let limit = &self.limit;
        let mut s = limit.state();
        if self.round != s.round {
            return;
        }
        s.successes += 1;
        let grows = s.round == 0 || s.successes >= s.limit;
        if grows && s.limit < s.max {
            s.successes = 0;
            s.limit += 1;
            if s.debt > 0 {
                s.debt -= 1;
            } else {
                limit.sem.add_permits(1);
            }
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            let mut s = self.limit.state();
            if s.debt > 0 {
                s.debt -= 1;
                permit.forget();
            }
        }
    }
}

/// Requests in flight: at most `global` across the workbench and at most each provider's own
/// (adaptive) limit, however many roles (clients) the provider serves; and each provider's pace.
#[derive(Debug)]
pub struct Limits {
    pub global: Arc<Semaphore>,
    providers: std::sync::Mutex<std::collections::HashMap<String, Arc<AdaptiveLimit>>>,
    paces: std::sync::Mutex<std::collections::HashMap<String, Arc<Pace>>>,
}

/// A provider whose limit on requests in flight a rate-limit refusal holds below its maximum:
/// `fake 4/32 (rate limited)`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Throttled {
    pub provider: String,
    pub limit: usize,
    pub max: usize,
}

impl std::fmt::Display for Throttled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{} (rate limited)", self.provider, self.limit, self.max)
    }
}

impl Limits {
    pub fn new(global_max: usize) -> Self {
        Limits {
            global: Arc::new(Semaphore::new(global_max.max(1))),
            providers: Default::default(),
            paces: Default::default(),
        }
    }

    /// The provider's limit, made on first use with its maximum.
    pub fn provider(&self, name: &str, max: usize) -> Arc<AdaptiveLimit> {
        self.provider_with(name, || AdaptiveLimit::new(max))
    }

    /// The provider's limit, made open ([`AdaptiveLimit::open`]) on first use.
    pub fn open_provider(&self, name: &str, max: usize) -> Arc<AdaptiveLimit> {
        self.provider_with(name, || AdaptiveLimit::open(max))
    }

    fn provider_with(&self, name: &str, make: impl FnOnce() -> Arc<AdaptiveLimit>) -> Arc<AdaptiveLimit> {
        let mut providers = self.providers.lock().unwrap_or_else(|p| p.into_inner());
        providers.entry(name.to_string()).or_insert_with(make).clone()
    }

    /// The provider's pace, made on first use with its configured rates.
    pub fn pace(&self, name: &str, requests_per_minute: Option<u32>, tokens_per_minute: Option<u64>) -> Arc<Pace> {
        let mut paces = self.paces.lock().unwrap_or_else(|p| p.into_inner());
        paces
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(Pace::new(requests_per_minute, tokens_per_minute)))
            .clone()
    }

    /// The providers a rate-limit refusal holds below their maximum now, by name (what the progress
    /// line and the Live screen show).
    pub fn throttled(&self) -> Vec<Throttled> {
        let providers = self.providers.lock().unwrap_or_else(|p| p.into_inner());
        let mut held: Vec<Throttled> = providers
            .iter()
            .filter_map(|(name, l)| {
                Some(Throttled {
                    provider: name.to_string(),
                    limit: l.held()?,
                    max: l.max(),
                })
            })
            .collect();
        held.sort_by(|a, b| a.provider.cmp(&b.provider));
        held
    }
}

/// A provider counts as unreachable when this many attempts in a row could not open a connection to
/// it (refused, no route, no such host) over at least [`UNREACHABLE_FOR`]: a server that is down is not
/// worth retrying item after item for minutes, while a restart shorter than that is ridden through.
/// A server that answers, even with errors or broken streams, resets the count.
pub const UNREACHABLE_AFTER: u32 = 4;
pub const UNREACHABLE_FOR: Duration = Duration::from_secs(3);

/// A provider answers, but every request of a run is refused the same way this many times in a row
/// (the same status and message, nothing answered in between): the run stops, as for an unreachable
/// one. Refusals the client adapted to, and retryable statuses (429, 5xx), never count.
pub const REFUSED_AFTER: u32 = 8;

/// A provider that stopped answering at all, or that refuses every request the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreachable {
    pub provider: String,
    pub base_url: String,
    /// The last connection error, or the provider's words for the refusal.
    pub reason: String,
    /// It answers, refusing every request (fix the config, then resume).
    pub refused: bool,
}

/// Counts consecutive connection failures per provider, and when the streak began; any answer resets
/// it.
#[derive(Debug)]
pub struct Reachability {
    failures: std::sync::Mutex<std::collections::HashMap<String, (u32, std::time::Instant)>>,
    /// Per provider: the same refusal, how many times in a row.
    refusals: std::sync::Mutex<std::collections::HashMap<String, (u32, String)>>,
    unreachable: tokio::sync::watch::Sender<Option<Unreachable>>,
    /// A run waits for a provider to be found unreachable, and stops then (see [`Self::watched`]).
    watched: std::sync::atomic::AtomicBool,
    /// How long a streak must last (shorter in tests).
    window: Duration,
}

impl Default for Reachability {
    fn default() -> Self {
        Reachability {
            failures: Default::default(),
            refusals: Default::default(),
            unreachable: tokio::sync::watch::channel(None).0,
            watched: Default::default(),
            window: UNREACHABLE_FOR,
        }
    }
}

impl Reachability {
    /// A run watches for an unreachable provider and stops its work when one is found: requests to
    /// it then wait to be dropped instead of failing.
    pub fn watched(&self) {
        self.watched.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a run stops when a provider is found unreachable ([`Self::watched`]).
    pub fn stops_a_run(&self) -> bool {
        self.watched.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn connected(&self, provider: &str) {
        self.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(provider);
    }

    /// A request was answered (a reply, or an error the client retries or adapts to).
    pub fn answered(&self, provider: &str) {
        self.refusals.lock().unwrap_or_else(|p| p.into_inner()).remove(provider);
    }

    /// A request failed for good with a refusal (`what`: the status and the provider's words).
    pub fn refused(&self, provider: &str, base_url: &str, what: &str) {
        let mut refusals = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
        let entry = refusals
            .entry(provider.to_string())
            .or_insert_with(|| (0, what.to_string()));
        if entry.1 != what {
            *entry = (0, what.to_string());
        }
        entry.0 += 1;
        if entry.0 >= REFUSED_AFTER && self.unreachable.borrow().is_none() {
            self.unreachable.send_replace(Some(Unreachable {
                provider: provider.into(),
                base_url: base_url.into(),
                reason: what.into(),
                refused: true,
            }));
        }
    }

    pub fn connect_failed(&self, provider: &str, base_url: &str, reason: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let (n, since) = failures
            .entry(provider.to_string())
            .or_insert((0, std::time::Instant::now()));
        *n += 1;
        if *n >= UNREACHABLE_AFTER && since.elapsed() >= self.window && self.unreachable.borrow().is_none() {
            self.unreachable.send_replace(Some(Unreachable {
                provider: provider.into(),
                base_url: base_url.into(),
                reason: reason.into(),
                refused: false,
            }));
        }
    }

    /// A request is about to fail for good on a refused connection while the provider's streak of
    /// them has not lasted [`UNREACHABLE_FOR`] yet (short backoffs spend every retry in a second):
    /// it waits out the rest of that time, and the provider counts as unreachable if nothing
    /// answered meanwhile. So a server that is down stops the run whatever the backoff, instead of
    /// failing item after item.
    pub async fn outlast(&self, provider: &str, base_url: &str, reason: &str) {
        let rest = {
            let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
            match failures.get(provider) {
                Some((n, since)) if *n >= UNREACHABLE_AFTER => self.window.saturating_sub(since.elapsed()),
                _ => return,
            }
        };
        tokio::time::sleep(rest).await;
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let streak = failures.get(provider).is_some_and(|(n, since)| {
            *n >= UNREACHABLE_AFTER && since.elapsed() >= self.window
        });
        if streak && self.unreachable.borrow().is_none() {
            self.unreachable.send_replace(Some(Unreachable {
                provider: provider.into(),
                base_url: base_url.into(),
                reason: reason.into(),
                refused: false,
            }));
        }
    }

    /// The provider that was found unreachable, if any.
    pub fn now(&self) -> Option<Unreachable> {
        self.unreachable.borrow().clone()
    }

    /// Whether `provider` is the one found unreachable.
    pub fn is_unreachable(&self, provider: &str) -> bool {
        self.unreachable
            .borrow()
            .as_ref()
            .is_some_and(|u| u.provider == provider)
    }

    /// Waits until a provider is found unreachable.
    pub async fn wait(&self) -> Unreachable {
        let mut rx = self.unreachable.subscribe();
        loop {
            let now = rx.borrow_and_update().clone();
            if let Some(u) = now {
                return u;
            }
            if rx.changed().await.is_err() {
                // The sender lives as long as `self`: nothing will ever be found unreachable.
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {

    #[tokio::test]
    async fn a_rate_limit_halves_the_limit_once_per_round_and_successes_grow_it_back() {
        let limit = AdaptiveLimit::new(8);
        let mut places = Vec::new();
        for _ in 0..8 {
            places.push(limit.acquire().await.unwrap());
        }
        // Eight in flight; the first refusal halves, the others of the same round do not.
        for refused in places.drain(..3) {
            assert_eq!(refused.throttled(), 4);
        }
        // The cut is paid as places come back: the three refused are retired, then one more.
        assert_eq!(limit.sem.available_permits(), 0);
        // Replies to requests sent before the cut do not grow the limit.
        for p in places.drain(..) {
            p.succeeded();
        }
        assert_eq!(limit.limit(), 4);
        assert_eq!(limit.sem.available_permits(), 4);
        // A request sent in the new round, refused, halves again.
        assert_eq!(limit.acquire().await.unwrap().throttled(), 2);
        assert_eq!(limit.sem.available_permits(), 2);
        // Never below 1.
        assert_eq!(limit.acquire().await.unwrap().throttled(), 1);
        assert_eq!(limit.acquire().await.unwrap().throttled(), 1);
        assert_eq!(limit.sem.available_permits(), 1);
        // `limit` successes in a row add one place, up to the maximum.
        for expected in [2, 3, 4, 5, 6, 7, 8, 8] {
            for _ in 0..limit.limit() {
                limit.acquire().await.unwrap().succeeded();
            }
            assert_eq!(limit.limit(), expected);
            assert_eq!(limit.sem.available_permits(), expected);
        }
    }

    #[tokio::test]
    async fn a_high_maximum_is_reached_by_doubling_until_the_first_refusal() {
        let limit = AdaptiveLimit::new(32);
        let limits = Limits::new(64);
        assert_eq!(limit.limit(), FIRST_LIMIT);
        assert_eq!(limit.sem.available_permits(), FIRST_LIMIT);
        // Each success adds a place: 8 answers make 16, 16 more make 32, and no more.
        for expected in [16, 32, 32] {
            let places: Vec<Place> = futures_util::future::join_all((0..limit.limit()).map(|_| limit.acquire()))
                .await
                .into_iter()
                .flatten()
                .collect();
            for p in places {
                p.succeeded();
            }
            assert_eq!(limit.limit(), expected);
        }
        assert!(limit.held().is_none(), "at its maximum");
        // Starting is not being held: only a refusal shows.
        let fresh = limits.provider("fake", 32);
        assert_eq!(fresh.limit(), FIRST_LIMIT);
        assert_eq!(limits.throttled(), []);
        fresh.acquire().await.unwrap().throttled();
        let held = limits.throttled();
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].to_string(), "fake 4/32 (rate limited)");
        // A provider's name is kept as configured (what shows it passes a terminal gate).
        limits
            .provider("x\u{1b}]0;pwned\u{7}y", 2)
            .acquire()
            .await
            .unwrap()
            .throttled();
        assert_eq!(limits.throttled()[1].to_string(), "x\u{1b}]0;pwned\u{7}y 1/2 (rate limited)");
        // After a refusal, growth is additive: `limit` answers for one place.
        for _ in 0..3 {
            fresh.acquire().await.unwrap().succeeded();
        }
        assert_eq!(fresh.limit(), 4);
        fresh.acquire().await.unwrap().succeeded();
        assert_eq!(fresh.limit(), 5);
    }

    use super::*;

    #[test]
    fn a_provider_refusing_every_request_the_same_way_stops_the_run() {
        let r = Reachability::default();
        for _ in 0..REFUSED_AFTER - 1 {
            r.refused("p", "http://x", "HTTP 400: no such model");
        }
        r.answered("p");
        for _ in 0..REFUSED_AFTER - 1 {
            r.refused("p", "http://x", "HTTP 400: no such model");
        }
        r.refused("p", "http://x", "HTTP 400: another problem");
        assert_eq!(r.now(), None, "an answer, or another refusal, starts the count again");
        for _ in 0..REFUSED_AFTER - 1 {
            r.refused("p", "http://x", "HTTP 400: another problem");
        }
        let stopped = r.now().unwrap();
        assert!(stopped.refused && stopped.reason.contains("another problem"));
    }

    #[test]
    fn a_provider_is_unreachable_only_after_consecutive_connection_failures() {
        let r = Reachability {
            window: Duration::ZERO,
            ..Reachability::default()
        };
        for _ in 0..UNREACHABLE_AFTER - 1 {
            r.connect_failed("p", "http://x", "refused");
        }
        r.connected("p");
        for _ in 0..UNREACHABLE_AFTER - 1 {
            r.connect_failed("p", "http://x", "refused");
        }
        assert_eq!(r.now(), None, "an answer in between resets the count");
        r.connect_failed("q", "http://y", "refused");
        r.connect_failed("p", "http://x", "refused");
        assert!(r.is_unreachable("p") && !r.is_unreachable("q"));
        assert_eq!(r.now().unwrap().base_url, "http://x");
    }

    #[tokio::test]
    async fn a_request_refused_to_the_end_outlasts_the_window_and_the_provider_is_then_unreachable() {
        let r = Reachability {
            window: Duration::from_millis(50),
            ..Reachability::default()
        };
        // Fewer refusals than a streak needs: nothing to wait for.
        for _ in 0..UNREACHABLE_AFTER - 1 {
            r.connect_failed("p", "http://x", "refused");
        }
        let started = std::time::Instant::now();
        r.outlast("p", "http://x", "refused").await;
        assert!(started.elapsed() < Duration::from_millis(50) && r.now().is_none());
        // A streak spent faster than the window: waited out, then the provider is unreachable.
        r.connect_failed("p", "http://x", "refused");
        assert_eq!(r.now(), None, "too soon");
        r.outlast("p", "http://x", "refused").await;
        assert!(r.is_unreachable("p"), "{:?}", r.now());
        // Another provider that answered meanwhile is not.
        let r = Reachability {
            window: Duration::from_millis(50),
            ..Reachability::default()
        };
        for _ in 0..UNREACHABLE_AFTER {
            r.connect_failed("q", "http://y", "refused");
        }
        let (_, ()) = tokio::join!(r.outlast("q", "http://y", "refused"), async { r.connected("q") });
        assert_eq!(r.now(), None, "an answer in between resets the streak");
    }

    #[test]
    fn a_burst_of_refusals_shorter_than_the_window_is_ridden_through() {
        let r = Reachability::default();
        for _ in 0..10 * UNREACHABLE_AFTER {
            r.connect_failed("p", "http://x", "refused");
        }
        assert_eq!(r.now(), None, "a restart is not an outage");
    }

    #[test]
    fn roles_on_one_provider_share_its_limit() {
        let limits = Limits::new(16);
        let a = limits.provider("local", 4);
        let b = limits.provider("local", 4);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &limits.provider("openai", 4)));
    }

    #[test]
    fn only_transient_statuses_are_retried() {
        for s in [408, 409, 429, 500, 502, 503, 504] {
            assert!(retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!retryable_status(s), "{s}");
        }
    }

    #[test]
    fn backoff_doubles_with_reproducible_jitter() {
        let b = Backoff {
            base: Duration::from_millis(100),
            seed: 7,
        };
        let d1 = b.delay(1, 1, None);
        let d3 = b.delay(1, 3, None);
        assert!(
            d1 >= Duration::from_millis(50) && d1 < Duration::from_millis(100),
            "{d1:?}"
        );
        assert!(
            d3 >= Duration::from_millis(200) && d3 < Duration::from_millis(400),
            "{d3:?}"
        );
        assert_eq!(d1, b.delay(1, 1, None));
        assert_ne!(b.delay(1, 1, None), b.delay(2, 1, None));
        assert_eq!(b.delay(1, 1, Some(Duration::from_millis(7))), Duration::from_millis(7));
        assert!(b.delay(1, 40, None) <= MAX_BACKOFF);
    }
}
