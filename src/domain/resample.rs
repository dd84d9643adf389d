//! Uncertainty by resampling, seeded so that a figure is reproducible: the percentile bootstrap over
//! units (the characters of a study: the sampling unit of the paper's tables) and the paired
//! sign-flip permutation test. Both take the statistic as a function of the units drawn.

use serde::Serialize;

use super::rng::{SplitMix64, mix};

/// How many resamples, from which seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bootstrap {
    pub resamples: usize,
    pub seed: u64,
}

impl Default for Bootstrap {
    fn default() -> Bootstrap {
        Bootstrap {
            resamples: 2000,
            seed: 1,
        }
    }
}

impl Bootstrap {
    /// The same settings on an independent stream (one per table row), so that rows do not share
    /// their draws yet each is reproducible on its own.
    pub fn stream(self, index: u64) -> Bootstrap {
        Bootstrap {
            seed: mix(self.seed ^ mix(index.wrapping_add(1))),
            ..self
        }
    }
}

/// The `q` quantile (0–1) of sorted values, interpolated linearly between order statistics (numpy's
/// default, `method="linear"`).
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let at = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64))
}

#[cfg(any(test, feature = "testing"))]
/// The 95% percentile bootstrap interval of `statistic` over `units` units drawn with replacement
/// (`statistic` gets the drawn unit indices, repeats included). `None` with fewer than two units
/// (nothing to resample), or when fewer than half the resamples give a value.
pub fn interval(units: usize, settings: Bootstrap, statistic: impl Fn(&[usize]) -> Option<f64>) -> Option<[f64; 2]> {
    let [ci] = intervals(units, settings, |drawn| [statistic(drawn)]);
    ci
}

/// [`interval`] of `K` statistics computed together from the same draws (one pass per resample).
pub fn intervals<const K: usize>(
    units: usize,
    settings: Bootstrap,
    statistic: impl Fn(&[usize]) -> [Option<f64>; K],
) -> [Option<[f64; 2]>; K] {
    if units < 2 || settings.resamples == 0 {
        return [None; K];
    }
    let mut rng = SplitMix64(settings.seed);
    let mut drawn = vec![0; units];
    let mut values: [Vec<f64>; K] = std::array::from_fn(|_| Vec::with_capacity(settings.resamples));
    for _ in 0..settings.resamples {
        for d in drawn.iter_mut() {
            *d = rng.below(units);
        }
        for (list, v) in values.iter_mut().zip(statistic(&drawn)) {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                list.push(v);
            }
        }
    }
    values.map(|mut list| {
        if list.len() * 2 < settings.resamples {
            return None;
        }
        list.sort_by(f64::total_cmp);
        Some([quantile(&list, 0.025)?, quantile(&list, 0.975)?])
    })
}

/// A permutation p-value and how it was reached.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Permutation {
    pub p: f64,
    /// Every sign pattern was counted (else `resamples` random ones, from `seed`).
    pub exact: bool,
    pub resamples: usize,
}

/// Up to this many units, every one of the 2^n sign patterns is counted.
pub const EXACT_UNITS: usize = 16;

/// The two-sided paired sign-flip permutation test of "the mean difference is 0": each unit's
/// difference (the sum of its pairs' differences, with its pair count) keeps or flips its sign; the
/// p-value is the share of sign patterns whose mean |difference| is at least the observed one. Exact up
/// to [`EXACT_UNITS`] units, else `monte_carlo` random patterns with the observed one counted in
/// (p = (k + 1) / (N + 1), never 0). `None` without units.
pub fn sign_flip(units: &[(f64, usize)], monte_carlo: usize, seed: u64) -> Option<Permutation> {
    let pairs: usize = units.iter().map(|(_, n)| n).sum();
    if units.is_empty() || pairs == 0 {
        return None;
    }
    let mean = |signs: &dyn Fn(usize) -> bool| {
        units
            .iter()
            .enumerate()
            .map(|(i, (sum, _))| if signs(i) { -sum } else { *sum })
            .sum::<f64>()
            / pairs as f64
    };
    let observed = mean(&|_| false).abs();
    // Sums of equal terms taken in another order may differ in their last bits.
    let tolerance = 1e-12 * (1.0 + observed);
    let at_least = |m: f64| m.abs() >= observed - tolerance;
    if units.len() <= EXACT_UNITS {
        let patterns = 1u64 << units.len();
        let k = (0..patterns)
            .filter(|bits| at_least(mean(&|i| bits >> i & 1 == 1)))
            .count();
        return Some(Permutation {
            p: k as f64 / patterns as f64,
            exact: true,
            resamples: patterns as usize,
        });
    }
    let mut rng = SplitMix64(seed);
    let mut k = 0usize;
    let mut flips = vec![false; units.len()];
    for _ in 0..monte_carlo {
        for f in flips.iter_mut() {
            *f = rng.next_u64() & 1 == 1;
        }
        k += usize::from(at_least(mean(&|i| flips[i])));
    }
    Some(Permutation {
        p: (k + 1) as f64 / (monte_carlo + 1) as f64,
        exact: false,
        resamples: monte_carlo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_as_numpy_does() {
        let x = [1.0, 2.0, 3.0, 4.0];
        // numpy.quantile([1, 2, 3, 4], [0, 0.025, 0.5, 0.975, 1])
        assert_eq!(quantile(&x, 0.0), Some(1.0));
        assert!((quantile(&x, 0.025).unwrap() - 1.075).abs() < 1e-12);
        assert_eq!(quantile(&x, 0.5), Some(2.5));
        assert!((quantile(&x, 0.975).unwrap() - 3.925).abs() < 1e-12);
        assert_eq!(quantile(&x, 1.0), Some(4.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn a_bootstrap_interval_is_reproducible_and_covers_the_mean() {
        let data = [0.2, 0.9, 0.4, 0.7, 0.5, 0.3, 0.8, 0.6];
        let mean = |drawn: &[usize]| Some(drawn.iter().map(|&i| data[i]).sum::<f64>() / drawn.len() as f64);
        let settings = Bootstrap::default();
        let ci = interval(data.len(), settings, mean).unwrap();
        assert_eq!(
            Some(ci),
            interval(data.len(), settings, mean),
            "same seed, same interval"
        );
        assert_ne!(
            Some(ci),
            interval(data.len(), settings.stream(1), mean),
            "another stream"
        );
        assert!(ci[0] < 0.55 && 0.55 < ci[1], "{ci:?}");
        // The standard error of the mean is 0.229 / √8 ≈ 0.081: the interval is about ±1.96 of it.
        assert!((ci[1] - ci[0] - 2.0 * 1.96 * 0.081).abs() < 0.06, "{ci:?}");
        assert_eq!(
            interval(1, settings, mean),
            None,
            "one unit: no interval, never a fake one"
        );
        assert_eq!(interval(5, settings, |_| None), None);
    }

    #[test]
    fn sign_flips_are_exact_for_few_units_and_seeded_for_many() {
        // No difference at all: every pattern is as extreme, p = 1.
        let zero = [(0.0, 5), (0.0, 5), (0.0, 5)];
        assert_eq!(sign_flip(&zero, 1000, 1).unwrap().p, 1.0);
        // Four units all +1: only the all-kept and all-flipped patterns reach |mean| = 1: p = 2/16.
        let same = [(1.0, 1); 4];
        let p = sign_flip(&same, 1000, 1).unwrap();
        assert_eq!((p.p, p.exact, p.resamples), (0.125, true, 16));
        // Twenty units: Monte Carlo, reproducible, close to the exact 2/2^20 ≈ 0 (never 0 itself).
        let many = [(1.0, 1); 20];
        let p = sign_flip(&many, 5000, 7).unwrap();
        assert!(!p.exact && p.p > 0.0 && p.p < 0.002, "{p:?}");
        assert_eq!(Some(p), sign_flip(&many, 5000, 7));
        assert_eq!(sign_flip(&[], 10, 1), None);
    }
}
