//! Statistics used to compare ratings: correlations (Pearson, Spearman, Kendall τ-b), quadratic-weighted
//! kappa, paired t-test, Cohen's d, and the interviewer-vs-human right/close/wrong accuracy. Each
//! function matches the scipy / sklearn definition named in its doc and returns `None` where that
//! library would return NaN (too few values, no variance).

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

pub fn mean(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| x.iter().sum::<f64>() / x.len() as f64)
}

/// Standard deviation with divisor n (numpy's default `ddof=0`).
pub fn population_std(x: &[f64]) -> Option<f64> {
    let m = mean(x)?;
    Some((x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / x.len() as f64).sqrt())
}

/// Standard deviation with divisor n − 1.
pub fn sample_std(x: &[f64]) -> Option<f64> {
    if x.len() < 2 {
        return None;
    }
    // Equal values have no spread, however their mean rounds (3.2 three times averages to
    // 3.2000000000000006, which would leave a spread of 5e-16).
    if x.iter().all(|v| *v == x[0]) {
        return Some(0.0);
    }
    let m = mean(x)?;
    Some((x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64).sqrt())
}

/// Whether a spread `sd` of `values` is no spread but rounding: below what the last bits of values
/// of their size can make (differences of ratings such as 3.2 − 3.1, equal on paper, differ there).
fn rounding_only(sd: f64, values: &[f64]) -> bool {
    let size = values.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    sd <= 64.0 * f64::EPSILON * size
}

/// Pearson's r (scipy.stats.pearsonr): `None` when either side is constant (no variance, however
/// the mean rounds). The values are divided by a power of two near their largest magnitude first,
/// so that sums of squares of large values do not overflow; r does not change with the scale.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let unit = |v: &[f64]| -> Option<Vec<f64>> {
        if v.iter().all(|a| *a == v[0]) {
            return None;
        }
        // A power of two, so that dividing by it is exact.
        let largest = v.iter().fold(0.0f64, |m, a| m.max(a.abs()));
        // (The exponent kept where 2^e is a normal, finite number.)
        let scale = 2f64.powi((largest.log2().ceil() as i32).clamp(-1022, 1023));
        Some(v.iter().map(|a| a / scale).collect())
    };
    let (x, y) = (unit(x)?, unit(y)?);
    let (mx, my) = (mean(&x)?, mean(&y)?);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(&y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    Some((sxy / (sxx.sqrt() * syy.sqrt())).clamp(-1.0, 1.0))
}

/// `v` as a tie sees it: rounded to 9 decimals (below a million in size; beyond, as it is), so values one
/// computation gives apart only in their last bits are one value (three observers' means of item
/// means, 44/15, come as 2.933333333333333 and 2.9333333333333336), and -0.0 is 0.0.
pub fn tie_key(v: f64) -> f64 {
    if v.abs() < 1e6 { (v * 1e9).round() / 1e9 + 0.0 } else { v + 0.0 }
}

/// Ranks starting at 1, ties given the average of the ranks they span (scipy.stats.rankdata
/// "average"); values are tied by their [`tie_key`].
pub fn average_ranks(x: &[f64]) -> Vec<f64> {
    let x: Vec<f64> = x.iter().map(|&v| tie_key(v)).collect();
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut ranks = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// Spearman's ρ: Pearson's r of the average ranks (scipy.stats.spearmanr).
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() {
        return None;
    }
    pearson(&average_ranks(x), &average_ranks(y))
}

/// Kendall's τ-b (scipy.stats.kendalltau, variant "b"; values tied by their [`tie_key`]): (concordant − discordant) /
/// √((pairs − pairs tied in x) · (pairs − pairs tied in y)), in O(n log n) (Knight's algorithm, as
/// scipy): sorted by x then y, the discordant pairs are the inversions of y.
pub fn kendall_tau_b(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let n = x.len();
    // Tied by their keys: -0.0 and 0.0 are one value (total_cmp orders them apart, which would leave
    // pairs tied in x unsorted in y and count them discordant), and so are values apart only in
    // their last bits.
    let (x, y): (Vec<f64>, Vec<f64>) = x.iter().zip(y).map(|(&a, &b)| (tie_key(a), tie_key(b))).unzip();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]).then(y[a].total_cmp(&y[b])));
    // Pairs within runs of equal keys.
    let tied = |same: &dyn Fn(usize, usize) -> bool, order: &[usize]| -> u64 {
        let (mut pairs, mut run) = (0u64, 1u64);
        for w in order.windows(2) {
            if same(w[0], w[1]) {
                run += 1;
            } else {
                pairs += run * (run - 1) / 2;
                run = 1;
            }
        }
        pairs + run * (run - 1) / 2
    };
    let tied_x = tied(&|a, b| x[a] == x[b], &order);
    let tied_xy = tied(&|a, b| x[a] == x[b] && y[a] == y[b], &order);
    let mut ys: Vec<f64> = order.iter().map(|&i| y[i]).collect();
    let discordant = inversions(&mut ys);
    // `ys` is now sorted: the ties of y.
    let by_y: Vec<usize> = (0..n).collect();
    let tied_y = tied(&|a, b| ys[a] == ys[b], &by_y);
    let total = (n as u64) * (n as u64 - 1) / 2;
    let difference = total as f64 - tied_x as f64 - tied_y as f64 + tied_xy as f64 - 2.0 * discordant as f64;
    let denominator = ((total - tied_x) as f64).sqrt() * ((total - tied_y) as f64).sqrt();
    if denominator == 0.0 {
        return None;
    }
    Some((difference / denominator).clamp(-1.0, 1.0))
}

/// Pairs i < j with v[i] > v[j] (equal values are not inversions), counted by a merge sort that
/// leaves `v` sorted.
fn inversions(v: &mut [f64]) -> u64 {
    let n = v.len();
    if n < 2 {
        return 0;
    }
    let mid = n / 2;
    let mut count = inversions(&mut v[..mid]) + inversions(&mut v[mid..]);
    let mut merged = Vec::with_capacity(n);
    let (mut i, mut j) = (0, mid);
    while i < mid && j < n {
        if v[j] < v[i] {
            // v[j] is smaller than every element left in the left half.
            count += (mid - i) as u64;
            merged.push(v[j]);
            j += 1;
        } else {
            merged.push(v[i]);
            i += 1;
        }
    }
    merged.extend_from_slice(&v[i..mid]);
    merged.extend_from_slice(&v[j..n]);
    v.copy_from_slice(&merged);
    count
}

/// Cohen's kappa with quadratic weights (sklearn.metrics.cohen_kappa_score(weights="quadratic")):
/// categories are the sorted distinct values of both raters; a disagreement between the i-th and the
/// j-th category weighs (i − j)². Undefined (`None`) for fewer than two pairs or a rater who gave one
/// value throughout: then the chance agreement is all there is to measure (sklearn says 0 for a
/// constant rater who disagrees and NaN for one who agrees, which says nothing either way).
pub fn quadratic_weighted_kappa(a: &[i64], b: &[i64]) -> Option<f64> {
    let constant = |v: &[i64]| v.windows(2).all(|w| w[0] == w[1]);
    if a.len() != b.len() || a.len() < 2 || constant(a) || constant(b) {
        return None;
    }
    let mut labels: Vec<i64> = a.iter().chain(b).copied().collect();
    labels.sort_unstable();
    labels.dedup();
    let k = labels.len();
    let index = |v: i64| labels.binary_search(&v).unwrap_or(0);
    let mut observed = vec![vec![0.0; k]; k];
    for (&x, &y) in a.iter().zip(b) {
        observed[index(x)][index(y)] += 1.0;
    }
    let n = a.len() as f64;
    let row: Vec<f64> = observed.iter().map(|r| r.iter().sum()).collect();
    let col: Vec<f64> = (0..k).map(|j| observed.iter().map(|r| r[j]).sum()).collect();
    let (mut num, mut den) = (0.0, 0.0);
    for i in 0..k {
        for j in 0..k {
            let w = ((i as f64) - (j as f64)).powi(2);
            num += w * observed[i][j];
            den += w * row[i] * col[j] / n;
        }
    }
    if den == 0.0 {
        return None;
    }
    Some(1.0 - num / den)
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TTest {
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Paired t-test of a − b (scipy.stats.ttest_rel): t = mean(d) / (sd(d) / √n), df = n − 1.
pub fn paired_t_test(a: &[f64], b: &[f64]) -> Option<TTest> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let sd = sample_std(&d)?;
    if rounding_only(sd, a) || rounding_only(sd, b) {
        return None;
    }
    let n = d.len() as f64;
    let t = mean(&d)? / (sd / n.sqrt());
    let df = n - 1.0;
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p = (2.0 * dist.sf(t.abs())).min(1.0);
    Some(TTest { t, df, p })
}

/// Cohen's d between two sets of ratings of the same subjects: (mean(a) − mean(b)) divided by the
/// root mean of their sample variances, √((s_a² + s_b²) / 2).
pub fn cohens_d(a: &[f64], b: &[f64]) -> Option<f64> {
    let pooled = ((sample_std(a)?.powi(2) + sample_std(b)?.powi(2)) / 2.0).sqrt();
    if rounding_only(pooled, a) || rounding_only(pooled, b) {
        return None;
    }
    Some((mean(a)? - mean(b)?) / pooled)
}

/// Mean of a − b (e.g. observer − self).
pub fn mean_deviation(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() {
        return None;
    }
    mean(&a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<_>>())
}

/// Interviewer-vs-human agreement of the InCharacter paper: right if |a − b| < 1, close if = 1,
/// wrong if > 1; accuracy = (right + close / 2) / n.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Closeness {
    pub right: usize,
    pub close: usize,
    pub wrong: usize,
    pub accuracy: f64,
}

pub fn closeness(a: &[f64], b: &[f64]) -> Option<Closeness> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut right, mut close, mut wrong) = (0, 0, 0);
    for (x, y) in a.iter().zip(b) {
        let gap = (x - y).abs();
        if (gap - 1.0).abs() <= 1e-9 {
            close += 1;
        } else if gap < 1.0 {
            right += 1;
        } else {
            wrong += 1;
        }
    }
    let accuracy = (right as f64 + 0.5 * close as f64) / a.len() as f64;
    Some(Closeness {
        right,
        close,
        wrong,
        accuracy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    /// Ratings with no spread have no effect size and no t, however their means round: before, 3.2
    /// three times against 3.0 three times gave d = 5.2e14.
    #[test]
    fn constant_ratings_have_no_effect_size_however_their_means_round() {
        assert_eq!(sample_std(&[3.2, 3.2, 3.2]), Some(0.0));
        assert_eq!(cohens_d(&[3.2, 3.2, 3.2], &[3.0, 3.0, 3.0]), None);
        // Differences equal on paper, apart in their last bits.
        let (a, b) = ([3.2, 3.3, 3.4], [3.1, 3.2, 3.3]);
        assert_eq!(paired_t_test(&a, &b), None);
        assert!(cohens_d(&[3.2, 3.4, 3.0], &[3.0, 3.0, 3.0]).is_some_and(f64::is_finite));
        assert!(paired_t_test(&[3.2, 3.4, 3.0], &[3.0, 3.1, 3.0]).is_some());
    }

    #[test]
    fn ranks_average_ties() {
        assert_eq!(average_ranks(&[10.0, 20.0, 10.0, 30.0]), vec![1.5, 3.0, 1.5, 4.0]);
    }

    /// One value that two computations give apart in its last bits is one value to a tie.
    #[test]
    fn values_apart_only_in_their_last_bits_are_tied() {
        let (a, b) = (0.1 + 0.2, 0.3);
        assert_ne!(a, b);
        assert_eq!(average_ranks(&[a, b, 1.0]), vec![1.5, 1.5, 3.0]);
        assert_eq!(average_ranks(&[-0.0, 0.0, 1e-7]), vec![1.5, 1.5, 3.0], "a 1e-7 difference is not a tie");
        // scipy.stats.kendalltau([0.3, 0.3, 1], [1, 2, 3]) = 2/√6; spearmanr = √3/2.
        assert!(close(kendall_tau_b(&[a, b, 1.0], &[1.0, 2.0, 3.0]).unwrap(), 2.0 / 6f64.sqrt()));
        assert!(close(spearman(&[a, b, 1.0], &[1.0, 2.0, 3.0]).unwrap(), 3f64.sqrt() / 2.0));
        let next = f64::from_bits(2e7f64.to_bits() + 1);
        assert_eq!(average_ranks(&[2e7, next]), vec![1.0, 2.0], "large values as they are");
    }

    #[test]
    fn pearson_and_spearman_by_hand() {
        let x = [1.0, 2.0, 3.0, 4.0];
        let y = [2.0, 4.0, 6.0, 9.0];
        // Σdx·dy = 11.5, Σdx² = 5, Σdy² = 26.75
        assert!(close(
            pearson(&x, &y).unwrap(),
            11.5 / (5.0f64.sqrt() * 26.75f64.sqrt())
        ));
        assert!(close(spearman(&x, &y).unwrap(), 1.0));
        assert_eq!(pearson(&[1.0, 1.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn pearson_of_a_constant_side_is_undefined_and_large_values_do_not_overflow() {
        // 0.1's mean is not exactly 0.1: the deviations are not zero, but there is no variance.
        assert_eq!(pearson(&[0.1, 0.1, 0.1], &[1.0, 2.0, 3.0]), None);
        assert_eq!(spearman(&[0.1, 0.1, 0.1], &[1.0, 2.0, 3.0]), None);
        let big = [1e200, 2e200, 3e200];
        assert!(close(pearson(&big, &[1.0, 2.0, 3.0]).unwrap(), 1.0));
        assert!(close(pearson(&[-1e300, 0.0, 1e300], &[3.0, 2.0, 1.0]).unwrap(), -1.0));
        assert!(close(pearson(&[f64::MAX, 0.0, -f64::MAX], &[3.0, 2.0, 1.0]).unwrap(), 1.0));
        assert!(close(pearson(&[1e-310, 2e-310, 3e-310], &[1.0, 2.0, 3.0]).unwrap(), 1.0));
    }

    /// τ-b by its definition, pair by pair.
    fn kendall_by_pairs(x: &[f64], y: &[f64]) -> Option<f64> {
        let n = x.len();
        let (mut c, mut d, mut tx, mut ty) = (0i64, 0i64, 0i64, 0i64);
        for i in 0..n {
            for j in i + 1..n {
                let (dx, dy) = (x[i] - x[j], y[i] - y[j]);
                tx += i64::from(dx == 0.0);
                ty += i64::from(dy == 0.0);
                if dx != 0.0 && dy != 0.0 {
                    if (dx > 0.0) == (dy > 0.0) {
                        c += 1;
                    } else {
                        d += 1;
                    }
                }
            }
        }
        let total = (n * (n - 1) / 2) as i64;
        let den = (((total - tx) as f64) * ((total - ty) as f64)).sqrt();
        (den != 0.0).then(|| (c - d) as f64 / den)
    }

    #[test]
    fn kendall_tau_b_equals_its_definition_on_data_with_many_ties() {
        // A fixed pseudo-random sequence (SplitMix64) of ratings 1–5 and 1–3.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |k: u64| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % k) as f64 + 1.0
        };
        for n in [2, 3, 7, 40, 257] {
            let x: Vec<f64> = (0..n).map(|_| next(5)).collect();
            let y: Vec<f64> = x.iter().map(|v| if next(3) == 1.0 { *v } else { next(3) }).collect();
            let (fast, slow) = (kendall_tau_b(&x, &y), kendall_by_pairs(&x, &y));
            assert_eq!(fast.is_some(), slow.is_some(), "n {n}");
            if let (Some(f), Some(s)) = (fast, slow) {
                assert!((f - s).abs() < 1e-12, "n {n}: {f} vs {s}");
            }
        }
        // -0.0 is 0.0: tied with it, not below it.
        let signed_zero = kendall_tau_b(&[0.0, -0.0, 1.0], &[1.0, 2.0, 3.0]).unwrap();
        assert!(close(signed_zero, 2.0 / 6f64.sqrt()), "{signed_zero}");
        let rising: Vec<f64> = (0..1000).map(f64::from).collect();
        let falling: Vec<f64> = rising.iter().rev().copied().collect();
        assert!(close(kendall_tau_b(&rising, &falling).unwrap(), -1.0));
        assert!(close(kendall_tau_b(&rising, &rising).unwrap(), 1.0));
    }

    #[test]
    fn kendall_tau_b_with_ties_by_hand() {
        // pairs: (1,2) x-tie; (1,3) c; (2,3) c; x ties 1, y ties 0, total 3.
        let t = kendall_tau_b(&[1.0, 1.0, 2.0], &[1.0, 2.0, 3.0]).unwrap();
        assert!(close(t, 2.0 / (2.0f64 * 3.0).sqrt()));
        assert_eq!(kendall_tau_b(&[1.0, 1.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn qwk_uses_category_indices() {
        assert!(close(quadratic_weighted_kappa(&[1, 2, 3], &[1, 2, 3]).unwrap(), 1.0));
        // Categories {1, 5}: index distance 1, not 4. observed off-diagonal 2 of 2 → num 2;
        // rows [1,1], cols [1,1] → den = (1·1 + 1·1)/2 = 1 → κ = −1.
        assert!(close(quadratic_weighted_kappa(&[1, 5], &[5, 1]).unwrap(), -1.0));
        assert_eq!(quadratic_weighted_kappa(&[2, 2], &[2, 2]), None);
        // One pair, or one rater constant: undefined whether they agree or not.
        assert_eq!(quadratic_weighted_kappa(&[5], &[3]), None);
        assert_eq!(quadratic_weighted_kappa(&[5], &[5]), None);
        assert_eq!(quadratic_weighted_kappa(&[5, 5, 5, 5], &[3, 4, 5, 2]), None);
        assert_eq!(quadratic_weighted_kappa(&[3, 4, 5, 2], &[1, 1, 1, 1]), None);
    }

    #[test]
    fn paired_t_and_effect_size() {
        let a = [5.0, 6.0, 7.0, 9.0];
        let b = [4.0, 6.0, 5.0, 6.0];
        // d = [1, 0, 2, 3]: mean 1.5, sd √(5/3), t = 1.5 / (√(5/3)/2) ≈ 2.3238
        let t = paired_t_test(&a, &b).unwrap();
        assert!(close(t.t, 1.5 / ((5.0f64 / 3.0).sqrt() / 2.0)));
        assert_eq!(t.df, 3.0);
        // scipy.stats.ttest_rel gives p = 0.10270 for this data.
        assert!((t.p - 0.102_70).abs() < 1e-4, "{}", t.p);
        assert!(close(mean_deviation(&a, &b).unwrap(), 1.5));
        let d = cohens_d(&a, &b).unwrap();
        let (va, vb) = (sample_std(&a).unwrap().powi(2), sample_std(&b).unwrap().powi(2));
        assert!(close(d, 1.5 / ((va + vb) / 2.0).sqrt()));
    }

    #[test]
    fn right_close_wrong() {
        let c = closeness(&[1.0, 2.0, 3.0, 4.5], &[1.0, 3.0, 5.0, 4.0]).unwrap();
        assert_eq!((c.right, c.close, c.wrong), (2, 1, 1));
        assert!(close(c.accuracy, 2.5 / 4.0));
    }
}
