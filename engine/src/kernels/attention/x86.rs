//! The attention kernels on AVX2/FMA, and with AVX-512's 32 registers of sixteen floats (see the
//! parent module): chosen at run time, only where the CPU has them.

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

/// The tiles of both drivers, once for AVX2 (16 registers) and once where AVX-512VL gives 32: every
/// element the same bits (see `attention`).
macro_rules! attention_tiles {
    ($tile:ident, $features:literal) => {
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
                    *out = tail(total, &q[r * dim..(r + 1) * dim], keys.row(c, dim), full) * scale;
                }
            }
            out
        }
    };
}

attention_tiles!(score_tile, "avx2,fma");
attention_tiles!(score_tile_wide, "avx2,fma,avx512f,avx512vl");

/// `R` rows of `out` (`dim` apart), `V` vectors of `$lanes` from column `at`, each value row read
/// once for all of them: for AVX2 (eight floats to a register) and AVX-512 (sixteen).
macro_rules! weigh_rows {
    ($rows:ident, $features:literal, $v:ty, $lanes:literal, $load:ident, $store:ident, $set1:ident, $fmadd:ident) => {
        #[target_feature(enable = $features)]
        unsafe fn $rows<const R: usize, const V: usize>(
            out: &mut [f32],
            (dim, at): (usize, usize),
            weights: Strided,
            n: usize,
            values: Strided,
        ) {
            let (w, v) = (weights.data, values.data);
            debug_assert!(out.len() >= (R - 1) * dim + at + $lanes * V && w.len() >= (R - 1) * weights.stride + n);
            debug_assert!(n == 0 || v.len() >= (n - 1) * values.stride + at + $lanes * V);
            let o = out.as_mut_ptr();
            // SAFETY (every load and store): within the rows and columns debug-asserted above.
            let mut acc: [[$v; V]; R] =
                std::array::from_fn(|r| std::array::from_fn(|k| unsafe { $load(o.add(r * dim + at + $lanes * k)) }));
            for j in 0..n {
                let x: [$v; V] =
                    std::array::from_fn(|k| unsafe { $load(v.as_ptr().add(j * values.stride + at + $lanes * k)) });
                for (r, acc) in acc.iter_mut().enumerate() {
                    let w = $set1(unsafe { *w.get_unchecked(r * weights.stride + j) });
                    for (acc, x) in acc.iter_mut().zip(x) {
                        *acc = $fmadd(w, x, *acc);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                for (k, acc) in acc.iter().enumerate() {
                    unsafe { $store(o.add(r * dim + at + $lanes * k), *acc) };
                }
            }
        }
    };
}

weigh_rows!(
    weigh_rows,
    "avx2,fma",
    __m256,
    8,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps
);
weigh_rows!(
    weigh_rows_zmm,
    "avx2,fma,avx512f,avx512vl",
    __m512,
    16,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_set1_ps,
    _mm512_fmadd_ps
);

/// A score's lane sum `total` with the products of the values past `full` fused on in order.
#[inline]
fn tail(total: f32, q: &[f32], k: &[f32], full: usize) -> f32 {
    q[full..]
        .iter()
        .zip(&k[full..])
        .fold(total, |t, (x, y)| x.mul_add(*y, t))
}

/// See `attention::scores` (tiles of two queries by four keys).
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn scores(q: &[f32], dim: usize, keys: Strided, scale: f32, out: &mut [f32], out_stride: usize) {
    let (rows, n) = scores_shape(q, dim, keys, out, out_stride);
    let mut put = |i: usize, j: usize, s: &[f32]| out[i * out_stride + j..][..s.len()].copy_from_slice(s);
    let mut i = 0;
    while i < rows {
        let (q, mut j) = (&q[i * dim..], 0);
        // SAFETY (every tile): its queries and keys are within `q` and `keys` (checked by
        // `scores_shape`).
        if i + 2 <= rows {
            while j + 4 <= n {
                let tile = unsafe { score_tile::<2, 4>(q, dim, keys.from(j), scale) };
                tile.iter().enumerate().for_each(|(r, s)| put(i + r, j, s));
                j += 4;
            }
            while j < n {
                let tile = unsafe { score_tile::<2, 1>(q, dim, keys.from(j), scale) };
                tile.iter().enumerate().for_each(|(r, s)| put(i + r, j, s));
                j += 1;
            }
            i += 2;
        } else {
            while j + 4 <= n {
                let [s] = unsafe { score_tile::<1, 4>(q, dim, keys.from(j), scale) };
                put(i, j, &s);
                j += 4;
            }
            while j < n {
                let [s] = unsafe { score_tile::<1, 1>(q, dim, keys.from(j), scale) };
                put(i, j, &s);
                j += 1;
            }
            i += 1;
        }
    }
}

/// See `attention::weigh` (two rows by 32 columns at a time).
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn weigh(out: &mut [f32], dim: usize, weights: Strided, n: usize, values: Strided) {
    let rows = weigh_shape(out, dim, weights, n, values);
    let (wide, full) = (dim / 32 * 32, dim / 8 * 8);
    let mut i = 0;
    while i < rows {
        let r = if i + 2 <= rows { 2 } else { 1 };
        let out = &mut out[i * dim..];
        let row = |k: usize| weights.from(i + k);
        // SAFETY (every call): its rows, columns and values are within the slices (checked by
        // `weigh_shape`).
        for at in (0..wide).step_by(32) {
            if r == 2 {
                unsafe { weigh_rows::<2, 4>(out, (dim, at), row(0), n, values) };
            } else {
                unsafe { weigh_rows::<1, 4>(out, (dim, at), row(0), n, values) };
            }
        }
        for k in 0..r {
            let out = &mut out[k * dim..(k + 1) * dim];
            for at in (wide..full).step_by(8) {
                unsafe { weigh_rows::<1, 1>(out, (dim, at), row(k), n, values) };
            }
            if full < dim {
                weigh_tail(out, full, &row(k).data[..n], values);
            }
        }
        i += r;
    }
}

/// `$each!(R, i)` for rows `i..i + R` of `rows`, `R` four while four are left, then two, then one.
macro_rules! in_fours {
    ($rows:expr, $each:ident) => {{
        let (rows, mut i) = ($rows, 0);
        while i + 4 <= rows {
            $each!(4, i);
            i += 4;
        }
        if i + 2 <= rows {
            $each!(2, i);
            i += 2;
        }
        if i < rows {
            $each!(1, i);
        }
    }};
}

/// Eight floats from `p` in both halves of a register.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
#[inline]
unsafe fn twice(p: *const f32) -> __m512 {
    // SAFETY: the caller's eight floats.
    _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(unsafe { _mm256_loadu_ps(p) })))
}

/// Eight floats from `a` in the low half of a register, eight from `b` in the high.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
#[inline]
unsafe fn halves(a: *const f32, b: *const f32) -> __m512 {
    // SAFETY: the caller's eight floats at each.
    unsafe { super::super::x86::pair_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b)) }
}

/// `_mm256_hadd_ps` on all four quarters: `[a0 + a1, a2 + a3, b0 + b1, b2 + b3]` in each.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
#[inline]
fn hadd(a: __m512, b: __m512) -> __m512 {
    _mm512_add_ps(
        _mm512_shuffle_ps::<0b10_00_10_00>(a, b),
        _mm512_shuffle_ps::<0b11_01_11_01>(a, b),
    )
}

/// Eight keys' scores from four registers of two each (key `2p` in the low half of `acc[p]`, key
/// `2p + 1` in the high): each half's eight lanes added in the portable `score`'s tree, scaled.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
#[inline]
fn pair_sums(acc: [__m512; 4], scale: f32) -> __m256 {
    // Quarter 0 of `h`: `(l0 + l1) + (l2 + l3)` of the low keys of the four registers; quarter 1
    // their `(l4 + l5) + (l6 + l7)`; quarters 2 and 3 the same for the high keys.
    let h = hadd(hadd(acc[0], acc[1]), hadd(acc[2], acc[3]));
    let t = _mm512_add_ps(h, _mm512_shuffle_f32x4::<0b10_11_00_01>(h, h));
    let (even, odd) = (_mm512_castps512_ps128(t), _mm512_extractf32x4_ps::<2>(t));
    let keys = _mm256_set_m128(_mm_unpackhi_ps(even, odd), _mm_unpacklo_ps(even, odd));
    _mm256_mul_ps(keys, _mm256_set1_ps(scale))
}

/// `R` queries against eight keys, two to a register, written to `out` (rows `out_stride` apart):
/// the scores of `score_tile_wide` when `dim` is a multiple of eight.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
unsafe fn pair_tile<const R: usize>(
    q: &[f32],
    dim: usize,
    keys: Strided,
    scale: f32,
    out: &mut [f32],
    out_stride: usize,
) {
    let (k, stride) = (keys.data, keys.stride);
    debug_assert!(dim.is_multiple_of(8) && q.len() >= R * dim && k.len() >= 7 * stride + dim);
    debug_assert!(out.len() >= (R - 1) * out_stride + 8);
    // SAFETY (all loads and stores): within every query and key row, and within `out`
    // (debug-asserted).
    let (kp, qp) = (k.as_ptr(), q.as_ptr());
    let rows: [*const f32; 8] = std::array::from_fn(|c| unsafe { kp.add(c * stride) });
    let mut acc = [[_mm512_setzero_ps(); 4]; R];
    for d in (0..dim).step_by(8) {
        let k: [__m512; 4] = std::array::from_fn(|p| unsafe { halves(rows[2 * p].add(d), rows[2 * p + 1].add(d)) });
        for (r, acc) in acc.iter_mut().enumerate() {
            let x = unsafe { twice(qp.add(r * dim + d)) };
            for (acc, k) in acc.iter_mut().zip(k) {
                *acc = _mm512_fmadd_ps(x, k, *acc);
            }
        }
    }
    for (r, acc) in acc.into_iter().enumerate() {
        unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(r * out_stride), pair_sums(acc, scale)) };
    }
}

/// See `attention::scores` (tiles of up to four queries by eight keys, two to a register).
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
pub(super) unsafe fn scores_wide(q: &[f32], dim: usize, keys: Strided, scale: f32, out: &mut [f32], out_stride: usize) {
    let (rows, n) = scores_shape(q, dim, keys, out, out_stride);
    // Eight keys at a time two to a register where the head is whole groups of eight, then four,
    // then one.
    let pairs = if dim.is_multiple_of(8) { n / 8 * 8 } else { 0 };
    // Up to four query rows from `i`.
    // SAFETY (every tile): its queries, keys and scores are within `q`, `keys` and `out` (checked
    // by `scores_shape`).
    macro_rules! row_of_tiles {
        ($r:literal, $i:expr) => {{
            let (i, q) = ($i, &q[$i * dim..]);
            for j in (0..pairs).step_by(8) {
                unsafe { pair_tile::<$r>(q, dim, keys.from(j), scale, &mut out[i * out_stride + j..], out_stride) };
            }
            let mut put = |j: usize, s: &[f32]| out[i * out_stride + j..][..s.len()].copy_from_slice(s);
            let mut j = pairs;
            while j + 4 <= n {
                let tile = unsafe { score_tile_wide::<$r, 4>(q, dim, keys.from(j), scale) };
                tile.iter().enumerate().for_each(|(r, s)| put(j + r * out_stride, s));
                j += 4;
            }
            while j < n {
                let tile = unsafe { score_tile_wide::<$r, 1>(q, dim, keys.from(j), scale) };
                tile.iter().enumerate().for_each(|(r, s)| put(j + r * out_stride, s));
                j += 1;
            }
        }};
    }
    in_fours!(rows, row_of_tiles);
}

/// See `attention::weigh` (up to four rows by 64 columns at a time).
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
pub(super) unsafe fn weigh_wide(out: &mut [f32], dim: usize, weights: Strided, n: usize, values: Strided) {
    let rows = weigh_shape(out, dim, weights, n, values);
    let (wide, sixteens, full) = (dim / 64 * 64, dim / 16 * 16, dim / 8 * 8);
    // Rows `i..i + R`: 64 columns at a time, then sixteen, then eight, then one.
    // SAFETY (every call): its rows, columns and values are within the slices (checked by
    // `weigh_shape`).
    macro_rules! rows_of {
        ($r:literal, $i:expr) => {{
            let i = $i;
            let out = &mut out[i * dim..];
            let row = |k: usize| weights.from(i + k);
            for at in (0..wide).step_by(64) {
                unsafe { weigh_rows_zmm::<$r, 4>(out, (dim, at), row(0), n, values) };
            }
            for at in (wide..sixteens).step_by(16) {
                unsafe { weigh_rows_zmm::<$r, 1>(out, (dim, at), row(0), n, values) };
            }
            for k in 0..$r {
                let out = &mut out[k * dim..(k + 1) * dim];
                for at in (sixteens..full).step_by(8) {
                    unsafe { weigh_rows::<1, 1>(out, (dim, at), row(k), n, values) };
                }
                if full < dim {
                    weigh_tail(out, full, &row(k).data[..n], values);
                }
            }
        }};
    }
    in_fours!(rows, rows_of);
}

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
