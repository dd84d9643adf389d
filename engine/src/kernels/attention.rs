//! Attention's kernels: a tile's scores, their softmax, and the values weighted by them. Each
//! query's numbers are the same bits whatever else its tile holds (so a sequence's do not depend on
//! its batch) and on every instruction set: the SIMD kernels take the portable ones' steps in their
//! order, only side by side.

use super::{Level, exp_less, level};

#[cfg(target_arch = "x86_64")]
mod x86;

/// Rows of floats `stride` apart in `data` (the last may end where its use ends).
#[derive(Debug, Clone, Copy)]
pub struct Strided<'a> {
    pub data: &'a [f32],
    pub stride: usize,
}

impl Strided<'_> {
    /// How many rows `width` wide `data` holds.
    fn rows(&self, width: usize) -> usize {
        if self.data.len() < width {
            0
        } else {
            (self.data.len() - width) / self.stride.max(1) + 1
        }
    }

    /// The rows from row `j` on.
    pub(super) fn from(&self, j: usize) -> Strided<'_> {
        Strided {
            data: &self.data[j * self.stride..],
            stride: self.stride,
        }
    }

    /// Row `j`'s first `width` values.
    pub(super) fn row(&self, j: usize, width: usize) -> &[f32] {
        &self.data[j * self.stride..j * self.stride + width]
    }
}

/// Attention's scores: `out[i·out_stride + j] = scale·(q_i·k_j)` for every query row `i` of `q`
/// (`dim` wide, one after another) and every key row `j` that `keys` holds. Each score: eight
/// lanes, lane `l` the fused products of the values `d ≡ l (mod 8)` in order, added in a fixed
/// tree (`((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`), the `dim mod 8` products after them
/// fused on in order, then scaled.
///
/// # Panics
/// When `q` holds no whole row, the keys' rows overlap, or `out` is too short for the scores.
pub fn scores(q: &[f32], dim: usize, keys: Strided, scale: f32, out: &mut [f32], out_stride: usize) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: AVX-512VL (part of the VNNI level), or AVX2 and FMA, are present.
        Level::Vnni => return unsafe { x86::scores_wide(q, dim, keys, scale, out, out_stride) },
        Level::Avx2 => return unsafe { x86::scores(q, dim, keys, scale, out, out_stride) },
        Level::Scalar => {}
    }
    let (rows, n) = scores_shape(q, dim, keys, out, out_stride);
    for i in 0..rows {
        for j in 0..n {
            out[i * out_stride + j] = score(&q[i * dim..(i + 1) * dim], keys.row(j, dim)) * scale;
        }
    }
}

/// One score's sum (see [`scores`]).
pub(super) fn score(q: &[f32], k: &[f32]) -> f32 {
    let full = q.len() / 8 * 8;
    let mut lanes = [0f32; 8];
    for (q, k) in q[..full].chunks_exact(8).zip(k.chunks_exact(8)) {
        for l in 0..8 {
            lanes[l] = q[l].mul_add(k[l], lanes[l]);
        }
    }
    let mut total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (x, y) in q[full..].iter().zip(&k[full..]) {
        total = x.mul_add(*y, total);
    }
    total
}

/// [`scores`]' query rows and keys, its bounds checked.
pub(super) fn scores_shape(q: &[f32], dim: usize, keys: Strided, out: &[f32], out_stride: usize) -> (usize, usize) {
    let (rows, n) = (q.len() / dim.max(1), keys.rows(dim));
    assert!(rows > 0 && keys.stride >= dim, "no query row, or keys overlapping");
    assert!(
        n == 0 || out.len() >= (rows - 1) * out_stride + n,
        "the scores reach past `out`"
    );
    (rows, n)
}

/// Attention's weighted sums: `out_i += Σ_j w_i[j]·v_j` for every row `i` of `out` (`dim` wide, one
/// after another), row `i`'s `n` weights at the start of `weights`' row `i`, value row `j` of
/// `values`. Each value: the products fused on one by one in the order of `j`, whatever is summed
/// beside it. A weight of zero adds nothing (to a sum that began at zero it can at most turn a
/// zero's sign, which no quantization sees).
///
/// # Panics
/// When `out` is not whole rows, or the weights or values are too short.
pub fn weigh(out: &mut [f32], dim: usize, weights: Strided, n: usize, values: Strided) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: AVX-512VL (part of the VNNI level), or AVX2 and FMA, are present.
        Level::Vnni => return unsafe { x86::weigh_wide(out, dim, weights, n, values) },
        Level::Avx2 => return unsafe { x86::weigh(out, dim, weights, n, values) },
        Level::Scalar => {}
    }
    let rows = weigh_shape(out, dim, weights, n, values);
    for i in 0..rows {
        weigh_tail(
            &mut out[i * dim..(i + 1) * dim],
            0,
            &weights.data[i * weights.stride..][..n],
            values,
        );
    }
}

/// One row of [`weigh`] from column `from` on.
pub(super) fn weigh_tail(out: &mut [f32], from: usize, weights: &[f32], values: Strided) {
    for (j, &w) in weights.iter().enumerate() {
        let v = values.row(j, out.len());
        for (o, x) in out[from..].iter_mut().zip(&v[from..]) {
            *o = w.mul_add(*x, *o);
        }
    }
}

/// [`weigh`]'s rows, its bounds checked.
pub(super) fn weigh_shape(out: &[f32], dim: usize, weights: Strided, n: usize, values: Strided) -> usize {
    let rows = out.len() / dim.max(1);
    assert!(rows > 0 && out.len() == rows * dim, "`out` is not whole rows");
    assert!(
        weights.data.len() >= (rows - 1) * weights.stride + n,
        "the weights reach past their slice"
    );
    assert!(n == 0 || values.rows(dim) >= n, "the values reach past their slice");
    rows
}

/// `x ← e^(x − max x) / Σ e^(x − max x)`, the sum taken in f64 (eight lanes of the values
/// `≡ lane (mod 8)` in order, added as `(l0 + l4) + (l2 + l6)` plus `(l1 + l5) + (l3 + l7)`, then
/// the rest in order).
pub fn softmax(x: &mut [f32]) {
    let max = max_f32(x);
    exp_less(x, max);
    let inv = (1. / total(x)) as f32;
    x.iter_mut().for_each(|s| *s *= inv);
}

/// The largest of `x` (`-∞` for none).
fn max_f32(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if level() >= Level::Avx2 {
        // SAFETY: AVX2 and FMA are present.
        return unsafe { x86::max_f32(x) };
    }
    x.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

/// [`softmax`]'s sum, on the best instruction set.
fn total(x: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if level() >= Level::Avx2 {
        // SAFETY: AVX2 and FMA are present.
        return unsafe { x86::sum_f64(x) };
    }
    sum_f64(x)
}

/// [`softmax`]'s sum, portable.
pub(super) fn sum_f64(x: &[f32]) -> f64 {
    let full = x.len() / 8 * 8;
    let mut lanes = [0f64; 8];
    for c in x[..full].chunks_exact(8) {
        for l in 0..8 {
            lanes[l] += f64::from(c[l]);
        }
    }
    let s: [f64; 4] = std::array::from_fn(|l| lanes[l] + lanes[l + 4]);
    let mut total = (s[0] + s[2]) + (s[1] + s[3]);
    for &v in &x[full..] {
        total += f64::from(v);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::super::tests::values;
    use super::*;

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// `n` key (or value) rows `stride` apart, the last ending where its `dim` values end.
    fn rows(kv: &[f32], n: usize, dim: usize, stride: usize) -> Strided<'_> {
        Strided {
            data: &kv[..if n == 0 { 0 } else { (n - 1) * stride + dim }],
            stride,
        }
    }

    #[test]
    fn each_query_gets_the_bits_it_gets_alone_and_plain_loops_agree() {
        // Head widths with and without whole groups of 8, 16, 32 and 64 values, and ragged tails;
        // tiles and leftovers.
        for dim in [8, 13, 64, 72, 88, 128, 200, 256] {
            let stride = dim + 24;
            for (n_q, n) in [(1, 1), (6, 5), (24, 32), (3, 9), (5, 0)] {
                let (q, kv, start) = (values(n_q * dim, 1), values(n.max(1) * stride, 2), values(n_q * dim, 3));
                let width = n + 3;
                let mut scores = vec![f32::NAN; n_q * width];
                super::scores(&q, dim, rows(&kv, n, dim, stride), 0.125, &mut scores, width);
                let weights: Vec<f32> = scores.iter().map(|s| s.abs()).collect();
                let mut sums = start.clone();
                weigh(
                    &mut sums,
                    dim,
                    Strided {
                        data: &weights,
                        stride: width,
                    },
                    n,
                    rows(&kv, n, dim, stride),
                );
                for i in 0..n_q {
                    let q = &q[i * dim..(i + 1) * dim];
                    for j in 0..n {
                        let k = &kv[j * stride..j * stride + dim];
                        let plain = q.iter().zip(k).map(|(x, y)| x * y).sum::<f32>() * 0.125;
                        let got = scores[i * width + j];
                        assert!(
                            (got - plain).abs() < 1e-5 * (1. + plain.abs()),
                            "{dim} {n_q} {n}: {got} {plain}"
                        );
                        let mut alone = [0f32];
                        super::scores(q, dim, Strided { data: k, stride }, 0.125, &mut alone, 1);
                        assert_eq!(got.to_bits(), alone[0].to_bits(), "{dim} {n_q} {n}");
                    }
                    assert!(
                        scores[i * width + n..(i + 1) * width].iter().all(|s| s.is_nan()),
                        "past the keys"
                    );
                    // Weight by weight, in the order of the keys.
                    let mut alone = start[i * dim..(i + 1) * dim].to_vec();
                    for j in 0..n {
                        let (w, v) = ([weights[i * width + j]], &kv[j * stride..j * stride + dim]);
                        weigh(
                            &mut alone,
                            dim,
                            Strided { data: &w, stride: 1 },
                            1,
                            Strided { data: v, stride },
                        );
                    }
                    let got = &sums[i * dim..(i + 1) * dim];
                    assert_eq!(bits(got), bits(&alone), "{dim} {n_q} {n}");
                    let plain = (0..dim).map(|d| {
                        start[i * dim + d] + (0..n).map(|j| weights[i * width + j] * kv[j * stride + d]).sum::<f32>()
                    });
                    assert!(
                        got.iter()
                            .zip(plain)
                            .all(|(g, p)| (g - p).abs() < 1e-4 * (1. + p.abs()))
                    );
                }
            }
        }
    }

    /// The portable kernels, and every SIMD one this CPU can run called directly: the same bits.
    #[test]
    fn the_kernels_are_the_same_on_every_instruction_set() {
        for dim in [8, 13, 64, 88, 128, 200] {
            // Eight keys two to a register, then four, then one; four query rows, then two, then one.
            let (n_q, n, stride) = (7, 13, dim + 8);
            let (q, kv, start) = (values(n_q * dim, 1), values(n * stride, 2), values(n_q * dim, 3));
            let keys = rows(&kv, n, dim, stride);
            let mut portable = vec![0f32; n_q * n];
            for i in 0..n_q {
                for j in 0..n {
                    portable[i * n + j] = score(&q[i * dim..(i + 1) * dim], keys.row(j, dim)) * 0.5;
                }
            }
            let weights: Vec<f32> = portable.iter().map(|s| s.abs()).collect();
            let mut portable_sums = start.clone();
            for (i, out) in portable_sums.chunks_exact_mut(dim).enumerate() {
                weigh_tail(out, 0, &weights[i * n..(i + 1) * n], keys);
            }
            let mut totals = vec![sum_f64(&weights)];
            #[cfg(target_arch = "x86_64")]
            {
                use super::x86;
                use std::arch::is_x86_feature_detected as has;
                type Scores = unsafe fn(&[f32], usize, Strided, f32, &mut [f32], usize);
                type Weigh = unsafe fn(&mut [f32], usize, Strided, usize, Strided);
                let mut sets: Vec<(Scores, Weigh)> = Vec::new();
                if has!("avx2") && has!("fma") {
                    sets.push((x86::scores, x86::weigh));
                    // SAFETY: AVX2 and FMA are present.
                    totals.push(unsafe { x86::sum_f64(&weights) });
                }
                if has!("avx2") && has!("fma") && has!("avx512f") && has!("avx512vl") {
                    sets.push((x86::scores_wide, x86::weigh_wide));
                }
                for (scores, weigh) in sets {
                    let mut got = vec![0f32; n_q * n];
                    // SAFETY: the instruction sets are present.
                    unsafe { scores(&q, dim, keys, 0.5, &mut got, n) };
                    assert_eq!(bits(&got), bits(&portable), "{dim}");
                    let mut sums = start.clone();
                    // SAFETY: as above.
                    unsafe {
                        weigh(
                            &mut sums,
                            dim,
                            Strided {
                                data: &weights,
                                stride: n,
                            },
                            n,
                            keys,
                        )
                    };
                    assert_eq!(bits(&sums), bits(&portable_sums), "{dim}");
                }
            }
            assert!(totals.iter().all(|s| s.to_bits() == totals[0].to_bits()));
        }
    }

    #[test]
    fn a_softmax_sums_to_one_whatever_its_length() {
        for n in [1, 7, 8, 9, 100, 1001] {
            let mut x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 9.).collect();
            let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let want: Vec<f64> = x.iter().map(|&v| f64::from(v - max).exp()).collect();
            let total: f64 = want.iter().sum();
            softmax(&mut x);
            let sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
            assert!((sum - 1.).abs() < 1e-5, "{n}: {sum}");
            assert!(
                x.iter()
                    .zip(&want)
                    .all(|(&g, w)| (f64::from(g) - w / total).abs() < 1e-6),
                "{n}"
            );
        }
    }
}
