//! Each provider's pace: what its rate-limit headers say (`Retry-After`, `retry-after-ms`, the
//! `x-ratelimit-*` budgets), and when its next requests may go, from what is left of those budgets and
//! from the configured requests and tokens per minute (`policy` decides retries and concurrency).

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

/// A `Retry-After` longer than this is treated as this (a run must not stall for hours on one header).
pub(super) const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

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
}
