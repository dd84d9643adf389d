//! The attention kernels on AVX2/FMA, and with AVX-512VL's 32 registers (see the parent module):
//! chosen at run time, only where the CPU has them.

use super::{Strided, scores_shape, weigh_shape, weigh_tail};
use std::arch::x86_64::*;

/// Each of `C` (one or four) scores' eight lanes added in the portable `score`'s tree, side by side:
/// `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn lane_sums<const C: usize>(acc: [__m256; C]) -> [f32; C] {
    const { assert!(C == 1 || C == 4) };
    let at = |c: usize| acc[c.min(C - 1)];
    let h = _mm256_hadd_ps(_mm256_hadd_ps(at(0), at(1)), _mm256_hadd_ps(at(2), at(3)));
    let s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
    let mut out = [0f32; 4];
    // SAFETY: four floats.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), s) };
    std::array::from_fn(|c| out[c])
}

/// The attention kernels, once for AVX2 (16 registers: tiles of two queries or rows) and once where
/// AVX-512VL gives 32 (tiles of four): every element the same bits (see `attention`).
macro_rules! attention_kernels {
    ($scores:ident, $weigh:ident, $tile:ident, $rows:ident, $features:literal, $r:literal) => {
        /// `R` queries against `C` keys: each score's eight lanes side by side.
        #[target_feature(enable = $features)]
        unsafe fn $tile<const R: usize, const C: usize>(
            q: &[f32],
            dim: usize,
            keys: Strided,
            scale: f32,
        ) -> [[f32; C]; R] {
            let (k, stride) = (keys.data, keys.stride);
            debug_assert!(q.len() >= R * dim && k.len() >= (C - 1) * stride + dim);
            let full = dim / 8 * 8;
            let mut acc = [[_mm256_setzero_ps(); C]; R];
            for d in (0..full).step_by(8) {
                // SAFETY (all loads): d + 8 ≤ dim, within every query and key row (debug-asserted).
                let k: [__m256; C] =
                    std::array::from_fn(|c| unsafe { _mm256_loadu_ps(k.as_ptr().add(c * stride + d)) });
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = unsafe { _mm256_loadu_ps(q.as_ptr().add(r * dim + d)) };
                    for (acc, k) in acc.iter_mut().zip(k) {
                        *acc = _mm256_fmadd_ps(x, k, *acc);
                    }
                }
            }
            let mut out = [[0f32; C]; R];
            for (r, (out, acc)) in out.iter_mut().zip(acc).enumerate() {
                for (c, (out, total)) in out.iter_mut().zip(lane_sums(acc)).enumerate() {
                    let (q, k) = (&q[r * dim + full..(r + 1) * dim], &keys.row(c, dim)[full..]);
                    *out = q.iter().zip(k).fold(total, |t, (x, y)| x.mul_add(*y, t)) * scale;
                }
            }
            out
        }

        /// See `attention::scores`.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $scores(
            q: &[f32],
            dim: usize,
            keys: Strided,
            scale: f32,
            out: &mut [f32],
            out_stride: usize,
        ) {
            let (rows, n) = scores_shape(q, dim, keys, out, out_stride);
            let mut put = |i: usize, j: usize, s: &[f32]| out[i * out_stride + j..][..s.len()].copy_from_slice(s);
            let mut i = 0;
            while i < rows {
                let (q, mut j) = (&q[i * dim..], 0);
                // SAFETY (every tile): its queries and keys are within `q` and `keys` (checked by
                // `scores_shape`).
                if i + $r <= rows {
                    while j + 4 <= n {
                        let tile = unsafe { $tile::<$r, 4>(q, dim, keys.from(j), scale) };
                        tile.iter().enumerate().for_each(|(r, s)| put(i + r, j, s));
                        j += 4;
                    }
                    while j < n {
                        let tile = unsafe { $tile::<$r, 1>(q, dim, keys.from(j), scale) };
                        tile.iter().enumerate().for_each(|(r, s)| put(i + r, j, s));
                        j += 1;
                    }
                    i += $r;
                } else {
                    while j + 4 <= n {
                        let [s] = unsafe { $tile::<1, 4>(q, dim, keys.from(j), scale) };
                        put(i, j, &s);
                        j += 4;
                    }
                    while j < n {
                        let [s] = unsafe { $tile::<1, 1>(q, dim, keys.from(j), scale) };
                        put(i, j, &s);
                        j += 1;
                    }
                    i += 1;
                }
            }
        }

        /// `R` rows of `out` (`dim` apart), `V` vectors from column `at`: each value row read once
        /// for all of them.
        #[target_feature(enable = $features)]
        unsafe fn $rows<const R: usize, const V: usize>(
            out: &mut [f32],
            (dim, at): (usize, usize),
            weights: Strided,
            n: usize,
            values: Strided,
        ) {
            let (w, v) = (weights.data, values.data);
            debug_assert!(out.len() >= (R - 1) * dim + at + 8 * V && w.len() >= (R - 1) * weights.stride + n);
            debug_assert!(n == 0 || v.len() >= (n - 1) * values.stride + at + 8 * V);
            let o = out.as_mut_ptr();
            // SAFETY (every load and store): within the rows and columns debug-asserted above.
            let mut acc: [[__m256; V]; R] = std::array::from_fn(|r| {
                std::array::from_fn(|k| unsafe { _mm256_loadu_ps(o.add(r * dim + at + 8 * k)) })
            });
            for j in 0..n {
                let x: [__m256; V] =
                    std::array::from_fn(|k| unsafe { _mm256_loadu_ps(v.as_ptr().add(j * values.stride + at + 8 * k)) });
                for (r, acc) in acc.iter_mut().enumerate() {
                    let w = _mm256_set1_ps(unsafe { *w.get_unchecked(r * weights.stride + j) });
                    for (acc, x) in acc.iter_mut().zip(x) {
                        *acc = _mm256_fmadd_ps(w, x, *acc);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                for (k, acc) in acc.iter().enumerate() {
                    unsafe { _mm256_storeu_ps(o.add(r * dim + at + 8 * k), *acc) };
                }
            }
        }

        /// See `attention::weigh`.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $weigh(out: &mut [f32], dim: usize, weights: Strided, n: usize, values: Strided) {
            let rows = weigh_shape(out, dim, weights, n, values);
            let (wide, full) = (dim / 32 * 32, dim / 8 * 8);
            let mut i = 0;
            while i < rows {
                let r = if i + $r <= rows { $r } else { 1 };
                let out = &mut out[i * dim..];
                let row = |k: usize| weights.from(i + k);
                // SAFETY (every call): its rows, columns and values are within the slices (checked by
                // `weigh_shape`).
                for at in (0..wide).step_by(32) {
                    if r == $r {
                        unsafe { $rows::<$r, 4>(out, (dim, at), row(0), n, values) };
                    } else {
                        unsafe { $rows::<1, 4>(out, (dim, at), row(0), n, values) };
                    }
                }
                for k in 0..r {
                    let out = &mut out[k * dim..(k + 1) * dim];
                    for at in (wide..full).step_by(8) {
                        unsafe { $rows::<1, 1>(out, (dim, at), row(k), n, values) };
                    }
                    if full < dim {
                        weigh_tail(out, full, &row(k).data[..n], values);
                    }
                }
                i += r;
            }
        }
    };
}

attention_kernels!(scores, weigh, score_tile, weigh_rows, "avx2,fma", 2);
attention_kernels!(
    scores_wide,
    weigh_wide,
    score_tile_wide,
    weigh_rows_wide,
    "avx2,fma,avx512f,avx512vl",
    4
);

/// `Σ x` in f64: eight lanes of the values `≡ lane (mod 8)` in order, added as the portable
/// `sum_f64` adds them, then the rest in order.
#[target_feature(enable = "avx2,fma")]
pub(super) fn sum_f64(x: &[f32]) -> f64 {
    let (mut lo, mut hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        // SAFETY: eight floats.
        let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)));
    }
    let s = _mm256_add_pd(lo, hi);
    let t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd::<1>(s));
    let mut total = _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
    for &v in chunks.remainder() {
        total += f64::from(v);
    }
    total
}

/// The largest of `x` (`-∞` for none).
#[target_feature(enable = "avx2,fma")]
pub(super) fn max_f32(x: &[f32]) -> f32 {
    let mut m = _mm256_set1_ps(f32::NEG_INFINITY);
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        // SAFETY: eight floats.
        m = _mm256_max_ps(m, unsafe { _mm256_loadu_ps(c.as_ptr()) });
    }
    let mut lanes = [0f32; 8];
    // SAFETY: eight floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
    lanes
        .into_iter()
        .chain(chunks.remainder().iter().copied())
        .fold(f32::NEG_INFINITY, f32::max)
}
