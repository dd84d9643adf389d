//! When to retry and how long to wait: retryable failures (connect errors, 408, 409, 429, 5xx, streams
//! cut before `[DONE]`, timeouts), exponential backoff with seeded jitter, `Retry-After` and the
//! `x-ratelimit-*` headers honoured; the concurrency limits (an adaptive one per provider, one across
//! all providers); and each provider's pace (what its rate-limit headers say is left, and the
//! configured requests and tokens per minute).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::domain::rng::SplitMix64;

/// A `Retry-After` longer than this is treated as this (a run must not stall for hours on one header).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// HTTP statuses worth another attempt. 400/401/403/404 and other 4xx mean the request itself is wrong.
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// Parses `retry-after-ms` (OpenAI's, the more precise form of the same wait) or else `Retry-After`,
/// in seconds or as an HTTP date read against `now` (a date past is no wait); at most
/// [`MAX_RETRY_AFTER`].
pub fn retry_after(ms: Option<&str>, value: Option<&str>, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = ms.and_then(|v| seconds(v.trim().parse::<f64>().ok()? / 1000.0)) {
        return Some(ms.min(MAX_RETRY_AFTER));
    }
    let value = value?.trim();
    let wait = match value.parse::<f64>() {
        Ok(s) => seconds(s)?,
        Err(_) => {
            let date = httpdate::parse_http_date(value).ok()?;
            date.duration_since(now).unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// A non-negative, finite number of seconds as a duration.
fn seconds(s: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(s).ok()
}

/// A duration as rate-limit headers write it: Go's notation (`1s`, `6m0s`, `20ms`, `1m30.5s`, `2h`,
/// `250us`), as OpenAI's `x-ratelimit-reset-*` do, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(s) = text.parse::<f64>() {
        return seconds(s);
    }
    let number = |c: char| c.is_ascii_digit() || c == '.';
    let mut rest = text;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !number(c)).unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let letters = rest.find(number).unwrap_or(rest.len());
        let unit = match &rest[..letters] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * unit;
        rest = &rest[letters..];
    }
    if text.is_empty() { None } else { seconds(total) }
}

/// What one budget of a provider's rate limit has left, as its headers say.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    /// `x-ratelimit-remaining-*`: what may still be sent.
    pub remaining: Option<u64>,
    /// `x-ratelimit-reset-*`: until the budget is whole again (at most [`MAX_RETRY_AFTER`]).
    pub reset: Option<Duration>,
}

/// What a reply's rate-limit headers say, each when present: the wait a refusal asks for, and what is
/// left of the provider's request and token budgets (OpenAI's `x-ratelimit-*`, which other
/// OpenAI-compatible APIs copy).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RateHeaders {
    /// `retry-after-ms`, else `Retry-After` (see [`retry_after`]).
    pub retry_after: Option<Duration>,
    pub requests: Budget,
    pub tokens: Budget,
}

impl RateHeaders {
    /// Reads the headers through `header` (a header's value by lower-case name); HTTP dates are read
    /// against `now`.
    pub fn read<'a>(header: impl Fn(&str) -> Option<&'a str>, now: SystemTime) -> RateHeaders {
        let budget = |kind: &str| Budget {
            remaining: header(&format!("x-ratelimit-remaining-{kind}")).and_then(|v| v.trim().parse().ok()),
            reset: header(&format!("x-ratelimit-reset-{kind}"))
                .and_then(parse_duration)
                .map(|d| d.min(MAX_RETRY_AFTER)),
        };
        RateHeaders {
            retry_after: retry_after(header("retry-after-ms"), header("retry-after"), now),
            requests: budget("requests"),
            tokens: budget("tokens"),
        }
    }

    /// How long a refused request of about `tokens` tokens waits: the largest of `Retry-After` and the
    /// resets of the budgets it did not fit in (no request left; fewer tokens left than it asks).
    pub fn wait(&self, tokens: u64) -> Option<Duration> {
        let requests = self.requests.reset.filter(|_| self.requests.remaining == Some(0));
        let tokens = self
            .tokens
            .reset
            .filter(|_| self.tokens.remaining.is_some_and(|left| left < tokens.max(1)));
        [self.retry_after, requests, tokens].into_iter().flatten().max()
    }
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
    max: usize,
    state: std::sync::Mutex<Aimd>,
}

#[derive(Debug)]
struct Aimd {
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
            max,
            state: std::sync::Mutex::new(Aimd {
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
        (s.round > 0 && s.limit < self.max).then_some(s.limit)
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
        if grows && s.limit < limit.max {
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Throttled {
    /// The provider's name, terminal-safe.
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
                    provider: crate::text::terminal_safe(name),
                    limit: l.held()?,
                    max: l.max,
                })
            })
            .collect();
        held.sort_by(|a, b| a.provider.cmp(&b.provider));
        held
    }
}

/// When a provider's next requests may go: not while a budget its headers reported is spent (until
/// that budget's reset), and no faster than its configured `requests_per_minute` and
/// `tokens_per_minute`. The configured rates are kept as evenly spaced slots (a token bucket that
/// holds no burst, so a server counting per second or per minute never sees more than the rate), a
/// request of n tokens taking n token slots. A request waits here before it is sent.
#[derive(Debug)]
pub struct Pace {
    /// How long one request, and one token, takes of the configured rates.
    per_request: Option<Duration>,
    per_token: Option<Duration>,
    state: std::sync::Mutex<Paced>,
}

#[derive(Debug, Default)]
struct Paced {
    /// Where the next free request slot, and token slot, begins (none taken yet: now).
    next_request: Option<Instant>,
    next_token: Option<Instant>,
    /// What the server said is left, and until when.
    requests_left: Option<Window>,
    tokens_left: Option<Window>,
    /// Requests and tokens admitted so far.
    sent: Ticket,
}

/// Where a request stands among those admitted to a provider: the requests and tokens admitted up to
/// and including it. What its reply says is left does not count the ones admitted after it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ticket {
    requests: u64,
    tokens: u64,
}

/// A budget the server reported: `left` until `until`, after which it is whole again (and unknown).
#[derive(Debug, Clone, Copy)]
struct Window {
    left: u64,
    until: Instant,
}

/// Replies whose resets fall this close together describe the same window (network and rounding).
const SAME_WINDOW: Duration = Duration::from_millis(50);

impl Window {
    /// Takes in what a reply said. Within one window the least `left` holds (replies arrive out of
    /// order, and one to an older request says more is left); a reset later than the one held is a
    /// new window.
    fn merge(slot: &mut Option<Window>, left: u64, until: Instant, now: Instant) {
        match slot {
            Some(w) if now < w.until && until <= w.until + SAME_WINDOW => {
                w.left = w.left.min(left);
                w.until = w.until.max(until);
            }
            _ => *slot = Some(Window { left, until }),
        }
    }

    /// Takes `cost` from the window, or says until when it is spent. A window past its reset is
    /// forgotten.
    fn take(slot: &mut Option<Window>, cost: u64, now: Instant) -> Result<(), Instant> {
        match slot {
            Some(w) if now >= w.until => *slot = None,
            Some(w) if w.left < cost.max(1) => return Err(w.until),
            Some(w) => w.left -= cost,
            None => {}
        }
        Ok(())
    }
}

impl Pace {
    pub fn new(requests_per_minute: Option<u32>, tokens_per_minute: Option<u64>) -> Pace {
        let per = |n: f64| Duration::from_secs(60).div_f64(n.max(1.0));
        Pace {
            per_request: requests_per_minute.map(|n| per(f64::from(n))),
            per_token: tokens_per_minute.map(|n| per(n as f64)),
            state: Default::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Paced> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until a request of about `tokens` tokens may be sent: takes its part of the budgets and
    /// its slots, and waits for them.
    pub async fn admit(&self, tokens: u64) -> Ticket {
        loop {
            match self.reserve(tokens, Instant::now()) {
                Ok((ticket, at)) => {
                    tokio::time::sleep_until(at).await;
                    return ticket;
                }
                Err(spent_until) => tokio::time::sleep_until(spent_until).await,
            }
        }
    }

    /// Takes a request of `tokens` tokens asked at `now` out of the budgets the server reported and
    /// says when its slots begin, or until when one of the budgets is spent.
    fn reserve(&self, tokens: u64, now: Instant) -> Result<(Ticket, Instant), Instant> {
        let mut s = self.state();
        Window::take(&mut s.requests_left, 1, now)?;
        if let Err(until) = Window::take(&mut s.tokens_left, tokens, now) {
            // The request waits: what it took of the other budget is not spent.
            if let Some(w) = &mut s.requests_left {
                w.left += 1;
            }
            return Err(until);
        }
        s.sent.requests += 1;
        s.sent.tokens += tokens;
        // Both slots begin when the later of them is free, so a request waiting for its tokens does
        // not leave a request slot behind for the next one to burst into.
        let at = [s.next_request, s.next_token].into_iter().flatten().fold(now, Instant::max);
        if let Some(per) = self.per_request {
            s.next_request = Some(at + per);
        }
        if let Some(per) = self.per_token {
            s.next_token = Some(at + per.mul_f64(tokens as f64));
        }
        Ok((s.sent, at))
    }

    /// A request admitted for `asked` tokens used `used` (its usage): the token slots it did not use
    /// are given back, or the ones it used beyond are taken.
    pub fn used(&self, asked: u64, used: u64) {
        let Some(per) = self.per_token else {
            return;
        };
        let mut s = self.state();
        if let Some(next) = &mut s.next_token {
            if used >= asked {
                *next += per.mul_f64((used - asked) as f64);
            } else if let Some(earlier) = next.checked_sub(per.mul_f64((asked - used) as f64)) {
                *next = earlier;
            }
        }
    }

    /// The reply (or refusal) to the request admitted with `ticket` said what is left of the
    /// provider's budgets; less what was admitted after it.
    pub fn observe(&self, headers: &RateHeaders, ticket: Ticket) {
        let now = Instant::now();
        let mut s = self.state();
        let later = Ticket {
            requests: s.sent.requests.saturating_sub(ticket.requests),
            tokens: s.sent.tokens.saturating_sub(ticket.tokens),
        };
        if let Budget {
            remaining: Some(left),
            reset: Some(reset),
        } = headers.requests
        {
            Window::merge(&mut s.requests_left, left.saturating_sub(later.requests), now + reset, now);
        }
        if let Budget {
            remaining: Some(left),
            reset: Some(reset),
        } = headers.tokens
        {
            Window::merge(&mut s.tokens_left, left.saturating_sub(later.tokens), now + reset, now);
        }
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
    /// How long a streak must last (shorter in tests).
    window: Duration,
}

impl Default for Reachability {
    fn default() -> Self {
        Reachability {
            failures: Default::default(),
            refusals: Default::default(),
            unreachable: tokio::sync::watch::channel(None).0,
            window: UNREACHABLE_FOR,
        }
    }
}

impl Reachability {
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
        // A provider's name is shown terminal-safe.
        limits.provider("x\u{1b}]0;pwned\u{7}y", 2).acquire().await.unwrap().throttled();
        assert_eq!(limits.throttled()[1].to_string(), "xy 1/2 (rate limited)");
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

    #[test]
    fn a_burst_of_refusals_shorter_than_the_window_is_ridden_through() {
        let r = Reachability::default();
        for _ in 0..10 * UNREACHABLE_AFTER {
            r.connect_failed("p", "http://x", "refused");
        }
        assert_eq!(r.now(), None, "a restart is not an outage");
    }

    #[tokio::test(start_paused = true)]
    async fn configured_rates_space_requests_evenly_without_bursts() {
        let ms = Duration::from_millis;
        // 120 requests a minute: one every 500 ms, the first at once.
        let pace = Pace::new(Some(120), None);
        let start = Instant::now();
        for i in 0..4 {
            pace.admit(10).await;
            assert_eq!(Instant::now(), start + ms(500) * i);
        }
        // Time unused is not saved up: after a quiet spell the requests are spaced again at once.
        tokio::time::advance(Duration::from_secs(10)).await;
        let quiet = Instant::now();
        pace.admit(10).await;
        pace.admit(10).await;
        assert_eq!(Instant::now(), quiet + ms(500));
        // Requests waiting together each take their own slot.
        let pace = Arc::new(Pace::new(Some(600), None));
        let start = Instant::now();
        let waiting: Vec<_> = (0..5)
            .map(|_| {
                let pace = pace.clone();
                tokio::spawn(async move {
                    pace.admit(1).await;
                    Instant::now()
                })
            })
            .collect();
        let mut at = Vec::new();
        for w in waiting {
            at.push(w.await.unwrap() - start);
        }
        at.sort();
        assert_eq!(at, [ms(0), ms(100), ms(200), ms(300), ms(400)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_requests_tokens_take_their_slots_and_its_usage_corrects_them() {
        let ms = Duration::from_millis;
        // 6,000 tokens a minute: 10 ms a token, so a request of 100 tokens holds the next one 1 s.
        let pace = Pace::new(None, Some(6000));
        let start = Instant::now();
        pace.admit(100).await;
        assert_eq!(Instant::now(), start);
        pace.admit(50).await;
        assert_eq!(Instant::now(), start + ms(1000));
        // It used 20 of its 50: 300 ms come back.
        pace.used(50, 20);
        pace.admit(10).await;
        assert_eq!(Instant::now(), start + ms(1200));
        // One that used more than it asked for takes the slots it overran.
        pace.used(10, 30);
        pace.admit(1).await;
        assert_eq!(Instant::now(), start + ms(1500));
        // Both rates: the later of the two slots.
        let pace = Pace::new(Some(60), Some(60_000));
        let start = Instant::now();
        pace.admit(3000).await;
        pace.admit(1).await;
        assert_eq!(Instant::now(), start + ms(3000), "the tokens' slot");
        pace.admit(1).await;
        assert_eq!(Instant::now(), start + ms(4000), "the request's slot");
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
    fn retry_after_prefers_milliseconds_reads_dates_and_is_capped() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(retry_after(Some("250"), Some("3"), now), Some(Duration::from_millis(250)));
        assert_eq!(retry_after(None, Some("2"), now), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(None, Some("99999"), now), Some(MAX_RETRY_AFTER));
        // An HTTP date, in each of HTTP's three formats; one already past asks for no wait.
        for date in [
            "Wed, 21 Oct 2015 07:28:30 GMT",
            "Wednesday, 21-Oct-15 07:28:30 GMT",
            "Wed Oct 21 07:28:30 2015",
        ] {
            assert_eq!(retry_after(None, Some(date), now), Some(Duration::from_secs(30)), "{date}");
        }
        assert_eq!(retry_after(None, Some("Wed, 21 Oct 2015 07:00:00 GMT"), now), Some(Duration::ZERO));
        assert_eq!(retry_after(None, Some("Wed, 21 Oct 2015 09:00:00 GMT"), now), Some(MAX_RETRY_AFTER));
        for junk in ["soon", "-3", "NaN", ""] {
            assert_eq!(retry_after(Some(junk), Some(junk), now), None, "{junk:?}");
        }
    }

    #[test]
    fn rate_limit_durations_are_read_in_gos_notation() {
        let ms = Duration::from_millis;
        for (text, expected) in [
            ("1s", ms(1000)),
            ("20ms", ms(20)),
            ("6m0s", ms(360_000)),
            ("1m30.5s", ms(90_500)),
            ("2h", ms(7_200_000)),
            ("0.5s", ms(500)),
            ("1.5", ms(1500)),
            (" 7 ", ms(7000)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("3ns", Duration::from_nanos(3)),
            ("1h2m3s4ms", ms(3_723_004)),
        ] {
            assert_eq!(parse_duration(text), Some(expected), "{text}");
        }
        for junk in ["", "s", "1x", "1.2.3s", "-1s", "-1", "1 s", "m5", "inf", "5d"] {
            assert_eq!(parse_duration(junk), None, "{junk:?}");
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> RateHeaders {
        RateHeaders::read(
            |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v),
            SystemTime::UNIX_EPOCH,
        )
    }

    #[test]
    fn a_refusal_waits_for_the_largest_of_retry_after_and_the_spent_budgets_reset() {
        let h = headers(&[
            ("retry-after", "1"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "2.5s"),
            ("x-ratelimit-remaining-tokens", "900"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]);
        assert_eq!(h.requests.remaining, Some(0));
        assert_eq!(h.tokens.reset, Some(MAX_RETRY_AFTER), "capped");
        // No request left: its reset; the tokens are enough for a small request, not for a large one.
        assert_eq!(h.wait(500), Some(Duration::from_millis(2500)));
        assert_eq!(h.wait(1000), Some(MAX_RETRY_AFTER));
        // A budget with something left is no reason to wait for its reset.
        let h = headers(&[
            ("retry-after-ms", "40"),
            ("x-ratelimit-remaining-requests", "3"),
            ("x-ratelimit-reset-requests", "20s"),
        ]);
        assert_eq!(h.wait(10), Some(Duration::from_millis(40)));
        assert_eq!(headers(&[]), RateHeaders::default());
        assert_eq!(headers(&[]).wait(10), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_spent_budget_holds_the_providers_requests_until_its_reset() {
        let pace = Pace::new(None, None);
        let start = Instant::now();
        let requests = |left: &str, reset: &str| {
            headers(&[
                ("x-ratelimit-remaining-requests", left),
                ("x-ratelimit-reset-requests", reset),
            ])
        };
        // Nothing reported: requests go at once.
        let first = pace.admit(100).await;
        assert_eq!(Instant::now(), start);
        // Three requests left for a second: three go, the fourth waits for the reset.
        pace.observe(&requests("3", "1s"), first);
        let second = pace.admit(100).await;
        pace.admit(100).await;
        pace.admit(100).await;
        assert_eq!(Instant::now(), start);
        // A reply in the same window that counts fewer requests changes nothing: the least holds.
        pace.observe(&requests("5", "1s"), second);
        let fourth = pace.admit(100).await;
        assert_eq!(Instant::now(), start + Duration::from_secs(1));
        // The budget is unknown after its reset; a reply counts only the requests admitted before it:
        // four left, three sent since, so one more goes.
        for _ in 0..3 {
            pace.admit(100).await;
        }
        pace.observe(&requests("4", "1s"), fourth);
        pace.admit(100).await;
        assert_eq!(Instant::now(), start + Duration::from_secs(1));
        pace.admit(100).await;
        assert_eq!(Instant::now(), start + Duration::from_secs(2));
        // Tokens: 500 left for 2 s; a request of 400 goes, one of 200 waits.
        let now = Instant::now();
        let ticket = pace.admit(1).await;
        pace.observe(
            &headers(&[
                ("x-ratelimit-remaining-tokens", "500"),
                ("x-ratelimit-reset-tokens", "2s"),
            ]),
            ticket,
        );
        pace.admit(400).await;
        assert_eq!(Instant::now(), now);
        let ticket = pace.admit(200).await;
        assert_eq!(Instant::now(), now + Duration::from_secs(2));
        // A refusal's headers hold everyone too.
        pace.observe(&requests("0", "300ms"), ticket);
        let now = Instant::now();
        pace.admit(1).await;
        assert_eq!(Instant::now(), now + Duration::from_millis(300));
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
