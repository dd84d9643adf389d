//! What the models cost: requests, retries, failures, cache hits, tokens in and out and estimated cost,
//! per provider and role, and how many requests wait for a place under a provider's limit or hold one
//! now. The UI and the CLI read a `Snapshot` and [`Flight`]s.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::{Role, Usage};

/// Where an attempt waits once the run's cost cap is reached: for good (the run stops once the
/// study has read every reply that came back; batch mode's hub sees when that is).
#[async_trait::async_trait]
pub trait Holder: Send + Sync {
    /// Never returns; dropped when the run stops.
    async fn hold(&self);
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Counters {
    pub requests: u64,
    pub retries: u64,
    pub failures: u64,
    pub cache_hits: u64,
    /// Requests not sent because they would not fit the server's context (the study splits or
    /// shortens what it can): neither a request nor a failure of the server's.
    #[serde(default)]
    pub too_long: u64,
    /// Requests given up because the provider was found unreachable (the run stops for it).
    #[serde(default)]
    pub not_reached: u64,
    /// Requests of batch files mode written to a batch file for the user's engine: not sent by
    /// this run.
    #[serde(default)]
    pub in_batch_file: u64,
    /// Replies taken from batch results kept in the session (paid for when their batch ended, in an
    /// earlier sitting, or made by an offline engine): neither a request nor a cost now.
    pub kept: u64,
    /// Replies from a batch results file the user's engine made (`batch import`): not requests of
    /// this run's, but their tokens and cost are counted here.
    #[serde(default)]
    pub imported: u64,
    /// Replies the cache was to keep but could not be written to (a read-only folder, a full
    /// disk): asked again, they are paid for again.
    #[serde(default)]
    pub not_cached: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Replies whose server reported no usage: their tokens (and so their cost) are estimated
    /// from the text.
    pub estimated: u64,
    /// Estimated from the provider's prices per million tokens.
    pub cost: f64,
}

impl Counters {
    #[cfg(any(test, feature = "testing"))]
    fn add(&mut self, o: &Counters) {
        self.requests += o.requests;
        self.retries += o.retries;
        self.failures += o.failures;
        self.cache_hits += o.cache_hits;
        self.too_long += o.too_long;
        self.not_reached += o.not_reached;
        self.in_batch_file += o.in_batch_file;
        self.kept += o.kept;
        self.imported += o.imported;
        self.not_cached += o.not_cached;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.estimated += o.estimated;
        self.cost += o.cost;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Snapshot {
    /// (provider, role) → counters.
    pub by_provider_role: BTreeMap<(String, Role), Counters>,
}

impl Snapshot {
    /// What each provider and role used, one line each (for the end of a run): requests, tokens in
    /// and out, then retries, failures, cache hits and cost where there were any.
    pub fn lines(&self) -> Vec<String> {
        let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        self.by_provider_role
            .iter()
            // A provider and role that used nothing (a phase never sent) are not a line.
            .filter(|(_, c)| **c != Counters::default())
            .map(|((provider, role), c)| {
                let mut parts = vec![
                    plural(c.requests, "request", "requests"),
                    format!("{} tokens in, {} out", c.prompt_tokens, c.completion_tokens),
                ];
                if c.retries > 0 {
                    parts.push(plural(c.retries, "retry", "retries"));
                }
                if c.failures > 0 {
                    parts.push(format!("{} failed", c.failures));
                }
                if c.cache_hits > 0 {
                    parts.push(format!("{} from the cache", c.cache_hits));
                }
                if c.in_batch_file > 0 {
                    parts.push(format!("{} written to a batch file", c.in_batch_file));
                }
                if c.too_long > 0 {
                    parts.push(format!("{} not sent (longer than the context)", c.too_long));
                }
                if c.not_reached > 0 {
                    parts.push(format!("{} not sent (the server could not be reached)", c.not_reached));
                }
                if c.kept > 0 {
                    parts.push(format!("{} from kept batch results", c.kept));
                }
                if c.imported > 0 {
                    parts.push(format!("{} from imported batch results", c.imported));
                }
                if c.cost > 0.0 {
                    parts.push(format!("${:.4}", c.cost));
                }
                if c.not_cached > 0 {
                    parts.push(format!(
                        "{} not written to the cache, which could not be written (see the log)",
                        plural(c.not_cached, "reply", "replies")
                    ));
                }
                if c.estimated > 0 {
                    parts.push(format!(
                        "{} without usage from the server (tokens estimated from the text)",
                        plural(c.estimated, "reply", "replies")
                    ));
                }
                format!("{} {provider}: {}", role.name(), parts.join(", "))
            })
            .collect()
    }

    /// The counters as JSON rows: `provider`, `role` and each counter.
    pub fn rows(&self) -> Vec<serde_json::Value> {
        #[derive(Serialize)]
        struct Row<'a> {
            provider: &'a str,
            role: &'static str,
            #[serde(flatten)]
            counters: &'a Counters,
        }
        self.by_provider_role
            .iter()
            .map(|((provider, role), counters)| {
                serde_json::json!(Row {
                    provider,
                    role: role.name(),
                    counters
                })
            })
            .collect()
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn total(&self) -> Counters {
        let mut t = Counters::default();
        for c in self.by_provider_role.values() {
            t.add(c);
        }
        t
    }
}

/// Requests of one role (and provider) right now: waiting for a place under the provider's limit on
/// requests in flight, and holding one (being sent, streamed or retried). `in_flight` never exceeds
/// the limit, whatever else waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Flight {
    pub queued: usize,
    pub in_flight: usize,
}

#[derive(Debug, Default)]
pub struct Accounting {
    inner: Mutex<Snapshot>,
    /// Told whenever a reply's cost is counted.
    spent: tokio::sync::Notify,
    /// (provider, role) → requests waiting for a place and holding one, kept by [`Queued`] and
    /// [`Flying`].
    flights: Mutex<BTreeMap<(String, Role), Flight>>,
}

/// Which gauge a [`Queued`] or [`Flying`] request counts in.
#[derive(Debug)]
struct Place {
    accounting: Arc<Accounting>,
    provider: String,
    role: Role,
}

impl Place {
    fn gauge(&self, f: impl FnOnce(&mut Flight)) {
        let mut flights = self.accounting.flights.lock().unwrap_or_else(|p| p.into_inner());
        f(flights.entry((self.provider.clone(), self.role)).or_default());
    }
}

/// A request waiting for a place under its provider's limit: counted as queued until it
/// [starts](Queued::start) or is dropped (cancelled, refused before it went).
#[derive(Debug)]
#[must_use = "the request counts as queued only while this lives"]
pub struct Queued(Option<Place>);

/// A request holding a place (being sent or streamed, retries included): counted as in flight until
/// dropped.
#[derive(Debug)]
#[must_use = "the request counts as in flight only while this lives"]
pub struct Flying(Option<Place>);

impl Queued {
    /// The request got its place: from queued to in flight at once, so no one sees it in neither.
    pub fn start(mut self) -> Flying {
        let place = self.0.take();
        if let Some(place) = &place {
            place.gauge(|f| {
                f.queued = f.queued.saturating_sub(1);
                f.in_flight += 1;
            });
        }
        Flying(place)
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if let Some(place) = &self.0 {
            place.gauge(|f| f.queued = f.queued.saturating_sub(1));
        }
    }
}

impl Drop for Flying {
    fn drop(&mut self) {
        if let Some(place) = &self.0 {
            place.gauge(|f| f.in_flight = f.in_flight.saturating_sub(1));
        }
    }
}

impl Accounting {
    fn with(&self, provider: &str, role: Role, f: impl FnOnce(&mut Counters)) {
        let mut snap = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(snap.by_provider_role.entry((provider.to_string(), role)).or_default());
    }

    /// An HTTP attempt was sent (retries count as requests too).
    pub fn request(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.requests += 1);
    }
    pub fn retry(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.retries += 1);
    }
    pub fn failure(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.failures += 1);
    }
    /// A request given up because its provider was found unreachable: not a failure of one request.
    pub fn not_reached(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.not_reached += 1);
    }
    /// A batch line written to a batch file for the user's engine instead of being sent.
    pub fn in_batch_file(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.in_batch_file += 1);
    }
    /// A request kept back because it would not fit the server's context.
    pub fn too_long(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.too_long += 1);
    }
    /// A reply the cache could not keep.
    pub fn not_cached(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.not_cached += 1);
    }
    pub fn cache_hit(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.cache_hits += 1);
    }
    /// An attempt answered from kept batch results (see [`Counters::kept`]): not a request (a
    /// batch's attempt is a request only once a batch of this sitting answers it).
    pub fn kept(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.kept += 1);
    }
    /// An attempt answered from an imported results file (see [`Counters::imported`]): not a
    /// request; its tokens are counted as a reply's.
    pub fn imported(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.imported += 1);
    }
    /// Counts a reply's tokens and their cost at `(in, out)` USD per million; `estimated` when the
    /// server did not report them.
    pub fn usage(&self, provider: &str, role: Role, usage: Usage, estimated: bool, (price_in_per_mtok, price_out_per_mtok): (f64, f64)) {
        self.with(provider, role, |c| {
            c.prompt_tokens = c.prompt_tokens.saturating_add(usage.prompt_tokens);
            c.completion_tokens = c.completion_tokens.saturating_add(usage.completion_tokens);
            c.estimated += u64::from(estimated);
            c.cost += (usage.prompt_tokens as f64 * price_in_per_mtok
                + usage.completion_tokens as f64 * price_out_per_mtok)
                / 1_000_000.0;
        });
        self.spent.notify_waiters();
    }

    /// What the replies so far cost, in USD at the providers' prices.
    pub fn cost(&self) -> f64 {
        let snap = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        // From +0 (a float sum starts at −0, which prints as "-0.00").
        snap.by_provider_role.values().fold(0.0, |sum, c| sum + c.cost)
    }

    /// Waits until the replies' cost reaches `cap` USD; the cost then.
    pub async fn reaching(&self, cap: f64) -> f64 {
        loop {
            // Registered before the check, so no count between the check and the wait is missed.
            let counted = self.spent.notified();
            let cost = self.cost();
            if cost >= cap {
                return cost;
            }
            counted.await;
        }
    }

    /// A request of `role` to `provider` starts waiting for its place: it counts as queued while the
    /// guard lives, then as in flight once [`Queued::start`] says it has the place.
    pub fn queue(self: &Arc<Self>, provider: &str, role: Role) -> Queued {
        let place = Place {
            accounting: self.clone(),
            provider: provider.to_string(),
            role,
        };
        place.gauge(|f| f.queued += 1);
        Queued(Some(place))
    }

    /// Requests of `role` waiting and in flight now, over all providers.
    pub fn flight(&self, role: Role) -> Flight {
        let flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
        flights
            .iter()
            .filter(|((_, r), _)| *r == role)
            .fold(Flight::default(), |sum, (_, f)| Flight {
                queued: sum.queued + f.queued,
                in_flight: sum.in_flight + f.in_flight,
            })
    }

    /// Requests waiting and in flight now, per provider and role (those with none left out).
    pub fn flights(&self) -> BTreeMap<(String, Role), Flight> {
        let flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
        flights
            .iter()
            .filter(|(_, f)| **f != Flight::default())
            .map(|(k, f)| (k.clone(), *f))
            .collect()
    }

    pub fn snapshot(&self) -> Snapshot {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_spent_is_a_plain_zero() {
        // Not −0, which a cap's message would print as "$-0.00".
        assert!(Accounting::default().cost().is_sign_positive());
        assert_eq!(crate::text::usd(Accounting::default().cost()), "0.00");
    }

    #[test]
    fn counts_and_costs_per_provider_and_role() {
        let a = Accounting::default();
        a.request("p", Role::Judge);
        a.retry("p", Role::Judge);
        a.request("p", Role::Judge);
        a.usage(
            "p",
            Role::Judge,
            Usage {
                prompt_tokens: 1_000_000,
                completion_tokens: 500_000,
            },
            false,
            (0.5, 2.0),
        );
        a.cache_hit("q", Role::Rpa);
        let s = a.snapshot();
        let c = s.by_provider_role[&("p".to_string(), Role::Judge)];
        assert_eq!((c.requests, c.retries, c.prompt_tokens), (2, 1, 1_000_000));
        assert!((c.cost - 1.5).abs() < 1e-12);
        assert_eq!(s.total().cache_hits, 1);
        assert_eq!(
            s.lines(),
            [
                "judge p: 2 requests, 1000000 tokens in, 500000 out, 1 retry, $1.5000",
                "rpa q: 0 requests, 0 tokens in, 0 out, 1 from the cache",
            ]
        );
        let rows = s.rows();
        assert_eq!(rows[0]["provider"], "p");
        assert_eq!(rows[0]["role"], "judge");
        assert_eq!(rows[0]["completion_tokens"], 500_000);
        assert_eq!(rows[1]["cache_hits"], 1);
    }

    #[test]
    fn a_request_counts_as_queued_then_in_flight_then_not_at_all() {
        let a = Arc::new(Accounting::default());
        let queued = a.queue("p", Role::Judge);
        assert_eq!(
            a.flight(Role::Judge),
            Flight {
                queued: 1,
                in_flight: 0
            }
        );
        let flying = queued.start();
        assert_eq!(
            a.flight(Role::Judge),
            Flight {
                queued: 0,
                in_flight: 1
            }
        );
        assert_eq!(a.flight(Role::Rpa), Flight::default(), "another role's gauge");
        drop(flying);
        assert_eq!(a.flight(Role::Judge), Flight::default());
        assert!(a.flights().is_empty(), "nothing left waiting or in flight");
    }

    #[test]
    fn a_request_dropped_while_it_waits_leaves_the_queue() {
        let a = Arc::new(Accounting::default());
        let first = a.queue("p", Role::Rpa);
        let second = a.queue("p", Role::Rpa);
        drop(first);
        assert_eq!(a.flight(Role::Rpa).queued, 1);
        drop(second);
        assert_eq!(a.flight(Role::Rpa), Flight::default());
    }

    #[test]
    fn flights_are_summed_over_providers_and_kept_per_provider() {
        let a = Arc::new(Accounting::default());
        let _p = a.queue("p", Role::Judge).start();
        let _q = a.queue("q", Role::Judge).start();
        let _q_waits = a.queue("q", Role::Judge);
        let _rpa = a.queue("q", Role::Rpa);
        assert_eq!(
            a.flight(Role::Judge),
            Flight {
                queued: 1,
                in_flight: 2
            }
        );
        let per = a.flights();
        assert_eq!(
            per[&("q".to_string(), Role::Judge)],
            Flight {
                queued: 1,
                in_flight: 1
            }
        );
        assert_eq!(per[&("q".to_string(), Role::Rpa)].queued, 1);
        assert_eq!(per.len(), 3);
    }

    /// One place under a provider's limit: however many requests ask, one is in flight and the rest
    /// are queued, and a cancelled run leaves nothing counted.
    #[tokio::test]
    async fn under_a_limit_of_one_one_request_flies_and_the_rest_wait() {
        let a = Arc::new(Accounting::default());
        let limit = Arc::new(tokio::sync::Semaphore::new(1));
        let (go_on, hold) = tokio::sync::watch::channel(false);
        let mut requests = tokio::task::JoinSet::new();
        for _ in 0..5 {
            let (a, limit, mut hold) = (a.clone(), limit.clone(), hold.clone());
            requests.spawn(async move {
                let queued = a.queue("slow", Role::Judge);
                let Ok(_place) = limit.acquire().await else { return };
                let _flying = queued.start();
                let _ = hold.wait_for(|go| *go).await;
            });
        }
        while a.flight(Role::Judge).queued + a.flight(Role::Judge).in_flight < 5 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            a.flight(Role::Judge),
            Flight {
                queued: 4,
                in_flight: 1
            }
        );
        requests.abort_all();
        while requests.join_next().await.is_some() {}
        assert_eq!(
            a.flight(Role::Judge),
            Flight::default(),
            "cancelled: nothing waits, nothing flies"
        );
        drop(go_on);
    }

    #[tokio::test]
    async fn a_cap_is_reached_when_the_cost_counted_reaches_it() {
        let a = std::sync::Arc::new(Accounting::default());
        let waiting = tokio::spawn({
            let a = a.clone();
            async move { a.reaching(1.0).await }
        });
        let usage = Usage {
            prompt_tokens: 600_000,
            completion_tokens: 0,
        };
        a.usage("p", Role::Rpa, usage, false, (1.0, 0.0));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "0.60 USD is below the cap");
        a.usage("p", Role::Judge, usage, false, (1.0, 0.0));
        let reached = waiting.await.unwrap();
        assert!((reached - 1.2).abs() < 1e-12, "{reached}");
    }
}
