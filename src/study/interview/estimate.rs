//! What a plan will take before it runs: requests, and tokens by role (approximate: prompts from the
//! descriptions and items, answers at about 120 tokens, judge replies at about 150); and what that
//! costs at the providers' prices. The Setup screen shows it; `run --max-cost` refuses a run
//! estimated above the cap.

use std::collections::BTreeSet;

use super::RunPlan;
use crate::catalog::Catalog;
use crate::config::Config;
use crate::method::{Method, expert};
use crate::text::approx_tokens;

/// Tokens one role's requests send and receive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub prompt: usize,
    pub completion: usize,
}

impl Tokens {
    pub fn total(&self) -> usize {
        self.prompt + self.completion
    }

    /// At a provider's prices (USD per million tokens).
    fn cost(&self, price_in_per_mtok: f64, price_out_per_mtok: f64) -> f64 {
        (self.prompt as f64 * price_in_per_mtok + self.completion as f64 * price_out_per_mtok) / 1_000_000.0
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    pub requests: usize,
    /// The role-playing agent's (none in a re-assessment).
    pub rpa: Tokens,
    pub judge: Tokens,
}

impl Estimate {
    pub fn tokens(&self) -> usize {
        self.rpa.total() + self.judge.total()
    }

    /// The cost at the prices of the plan's providers in `config` (0 for a provider without prices).
    pub fn cost(&self, plan: &RunPlan, config: &Config) -> f64 {
        let prices = |name: &str| {
            config
                .provider(name)
                .map_or((0.0, 0.0), |p| (p.price_in_per_mtok, p.price_out_per_mtok))
        };
        let (rpa_in, rpa_out) = prices(&plan.rpa);
        let (judge_in, judge_out) = prices(&plan.judge);
        self.rpa.cost(rpa_in, rpa_out) + self.judge.cost(judge_in, judge_out)
    }
}

/// The estimate of `plan`; conversion calls hold the plan's `items_per_call`. A re-assessment asks
/// the role-playing agent nothing.
pub fn estimate(plan: &RunPlan, catalog: &Catalog) -> Estimate {
    let mut e = Estimate::default();
    let per_call = (plan.items_per_call as usize).max(1);
    let styles: BTreeSet<_> = plan.methods.iter().map(|m| m.query_style()).collect();
    for c in plan.characters.iter().filter_map(|c| catalog.character(c)) {
        let profile = approx_tokens(&c.description);
        for s in plan.scales.iter().filter_map(|s| catalog.scale(s)) {
            let items = s.scored_items().count();
            if plan.parent.is_none() {
                let asked = items * styles.len();
                e.requests += asked;
                e.rpa.prompt += asked * (profile + 60);
                e.rpa.completion += asked * 120;
            }
            let per_dim: Vec<usize> = (0..s.dimensions.len()).map(|d| s.items_of(d).count()).collect();
            for m in &plan.methods {
                let calls = match m {
                    Method::ErBatch => per_dim.iter().map(|&n| expert::batches(n).len()).sum(),
                    Method::ErAll => s.dimensions.len(),
                    Method::DOc => per_dim.iter().map(|&n| n.div_ceil(per_call)).sum(),
                    Method::Oc | Method::Sr | Method::SrCot => items.div_ceil(per_call),
                };
                e.requests += calls;
                e.judge.prompt += items * 200 + calls * 250;
                e.judge.completion += calls * 150;
            }
        }
    }
    let repeats = plan.repeats.max(1) as usize;
    e.requests *= repeats;
    for t in [&mut e.rpa, &mut e.judge] {
        t.prompt *= repeats;
        t.completion *= repeats;
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ProviderConfig, ProviderKind};

    #[test]
    fn requests_tokens_and_cost_of_a_plan() {
        let catalog = Catalog::bundled().unwrap();
        let plan = RunPlan::new(
            vec!["hermione-en".into()],
            vec!["BFI".into()],
            vec![Method::ErBatch, Method::Oc],
            "cheap",
            "dear",
        );
        let e = estimate(&plan, &catalog);
        // 44 interview items; ER_batch batches of the five dimensions; OC calls of items_per_call.
        let er: usize = (0..5)
            .map(|d| expert::batches(catalog.scale("BFI").unwrap().items_of(d).count()).len())
            .sum();
        let oc = 44usize.div_ceil(plan.items_per_call as usize);
        assert_eq!(e.requests, 44 + er + oc);
        assert_eq!(e.rpa.completion, 44 * 120);
        assert_eq!(e.judge.completion, (er + oc) * 150);
        let mut config = Config::defaults(&|_| None);
        let mut cheap = ProviderConfig::new("cheap", ProviderKind::Openai, "http://x/v1", "m");
        cheap.price_in_per_mtok = 1.0;
        let mut dear = ProviderConfig::new("dear", ProviderKind::Openai, "http://y/v1", "n");
        dear.price_out_per_mtok = 10.0;
        config.providers = vec![cheap, dear];
        let cost = e.cost(&plan, &config);
        let expected = e.rpa.prompt as f64 / 1e6 + e.judge.completion as f64 * 10.0 / 1e6;
        assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
        let mut reassess = plan.clone();
        reassess.parent = Some("parent".into());
        let r = estimate(&reassess, &catalog);
        assert_eq!((r.rpa, r.judge), (Tokens::default(), e.judge), "a re-assessment asks no role-play");
    }
}
