//! What the models cost: requests, retries, failures, cache hits, tokens in and out and estimated cost,
//! per provider and role. The UI and the CLI read a `Snapshot`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Serialize;

use super::{Role, Usage};

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Counters {
    pub requests: u64,
    pub retries: u64,
    pub failures: u64,
    pub cache_hits: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
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
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.cost += o.cost;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Snapshot {
    /// (provider, role) → counters.
    pub by_provider_role: BTreeMap<(String, Role), Counters>,
}

impl Snapshot {
    #[cfg(any(test, feature = "testing"))]
    pub fn total(&self) -> Counters {
        let mut t = Counters::default();
        for c in self.by_provider_role.values() {
            t.add(c);
        }
        t
    }
}

#[derive(Debug, Default)]
pub struct Accounting {
    inner: Mutex<Snapshot>,
    /// Told whenever a reply's cost is counted.
    spent: tokio::sync::Notify,
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
    pub fn cache_hit(&self, provider: &str, role: Role) {
        self.with(provider, role, |c| c.cache_hits += 1);
    }
    pub fn usage(&self, provider: &str, role: Role, usage: Usage, price_in_per_mtok: f64, price_out_per_mtok: f64) {
        self.with(provider, role, |c| {
            c.prompt_tokens += usage.prompt_tokens;
            c.completion_tokens += usage.completion_tokens;
            c.cost += (usage.prompt_tokens as f64 * price_in_per_mtok
                + usage.completion_tokens as f64 * price_out_per_mtok)
                / 1_000_000.0;
        });
        self.spent.notify_waiters();
    }

    /// What the replies so far cost, in USD at the providers' prices.
    pub fn cost(&self) -> f64 {
        let snap = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        snap.by_provider_role.values().map(|c| c.cost).sum()
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

    #[cfg(any(test, feature = "testing"))]
    pub fn snapshot(&self) -> Snapshot {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            0.5,
            2.0,
        );
        a.cache_hit("q", Role::Rpa);
        let s = a.snapshot();
        let c = s.by_provider_role[&("p".to_string(), Role::Judge)];
        assert_eq!((c.requests, c.retries, c.prompt_tokens), (2, 1, 1_000_000));
        assert!((c.cost - 1.5).abs() < 1e-12);
        assert_eq!(s.total().cache_hits, 1);
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
        a.usage("p", Role::Rpa, usage, 1.0, 0.0);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "0.60 USD is below the cap");
        a.usage("p", Role::Judge, usage, 1.0, 0.0);
        let reached = waiting.await.unwrap();
        assert!((reached - 1.2).abs() < 1e-12, "{reached}");
    }
}
