//! The AVX2/FMA kernels, and the K-quant kernels' AVX-512 VNNI twins (see the parent module): chosen
//! at run time, only where the CPU has them.

use super::interleaved::{Q4K_UNIT, Q6K_UNIT, Q8_UNIT, ROWS};
use super::{ActRow, BLOCK};
use std::arch::x86_64::*;

/// The eight lanes' sum: `(l0 + l4) + (l2 + l6)` plus `(l1 + l5) + (l3 + l7)`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn sum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// The sums of four adjacent byte products (`u` unsigned, `q` signed), as eight i32 lanes.
#[target_feature(enable = "avx2,fma")]
fn pairs(u: __m256i, q: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), _mm256_set1_epi16(1))
}

/// Q4 rows (see the module docs): nibbles unpacked once per block for all `N` activation
/// rows.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn q4<const N: usize>(d: &[f32], c: &[f32], qs: &[u8], a: [ActRow; N]) -> [f32; N] {
    debug_assert!(c.len() == d.len() && qs.len() == d.len() * 16);
    debug_assert!(a.iter().all(|a| a.d.len() == d.len() && a.q.len() == d.len() * BLOCK));
    let low = _mm256_set1_epi8(0x0F);
    let mut acc = [_mm256_setzero_ps(); N];
    let mut constant = [0f32; N];
    for b in 0..d.len() {
        // SAFETY (all loads): block b is in bounds of every slice (debug-asserted above).
        let raw = unsafe { _mm_loadu_si128(qs.as_ptr().add(b * 16).cast()) };
        let both = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(raw), _mm_srli_epi16::<4>(raw));
        let u = _mm256_and_si256(both, low);
        let (db, cb) = unsafe { (*d.get_unchecked(b), *c.get_unchecked(b)) };
        for n in 0..N {
            let q = unsafe { _mm256_loadu_si256(a[n].q.as_ptr().add(b * BLOCK).cast()) };
            let p = _mm256_cvtepi32_ps(pairs(u, q));
            let (ad, as_) = unsafe { (*a[n].d.get_unchecked(b), *a[n].s.get_unchecked(b)) };
            acc[n] = _mm256_fmadd_ps(_mm256_set1_ps(db * ad), p, acc[n]);
            constant[n] += cb * as_;
        }
    }
    let mut out = [0f32; N];
    for n in 0..N {
        out[n] = sum(acc[n]) + constant[n];
    }
    out
}

/// `e^y` lane by lane with the portable `exp`'s operations in its order (no fused steps), so every
/// lane has its bits, for one width of register (its float and integer intrinsics given).
macro_rules! exp_lanes {
    ($(#[$doc:meta])* $name:ident, $features:literal, $v:ty,
     [$mul:ident, $add:ident, $sub:ident, $set:ident, $max:ident, $min:ident],
     [$cvtt:ident, $add_i:ident, $set_i:ident, $shift:ident, $cast:ident]) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        fn $name(y: $v) -> $v {
            let (mul, add, sub, set) = ($mul, $add, $sub, $set);
            let y = $max($min(y, set(88.3)), set(-87.3));
            let magic = set(12_582_912.);
            let n = sub(add(mul(y, set(std::f32::consts::LOG2_E)), magic), magic);
            let r = add(sub(y, mul(n, set(0.693_359_4))), mul(n, set(2.121_944_4e-4)));
            let mut p = set(1.987_569_1e-4);
            for c in [1.398_2e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
                p = add(mul(p, r), set(c));
            }
            let e = add(add(mul(mul(p, r), r), r), set(1.));
            let two_n = $cast($shift::<23>($add_i($cvtt(n), $set_i(127))));
            mul(e, two_n)
        }
    };
}

exp_lanes!(
    /// `e^y` in eight lanes.
    exp8,
    "avx2,fma",
    __m256,
    [_mm256_mul_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_set1_ps, _mm256_max_ps, _mm256_min_ps],
    [_mm256_cvttps_epi32, _mm256_add_epi32, _mm256_set1_epi32, _mm256_slli_epi32, _mm256_castsi256_ps]
);

exp_lanes!(
    /// `e^y` in sixteen lanes.
    exp16,
    "avx2,fma,avx512f",
    __m512,
    [_mm512_mul_ps, _mm512_add_ps, _mm512_sub_ps, _mm512_set1_ps, _mm512_max_ps, _mm512_min_ps],
    [_mm512_cvttps_epi32, _mm512_add_epi32, _mm512_set1_epi32, _mm512_slli_epi32, _mm512_castsi512_ps]
);

/// `out[i] = x[i] / (1 + e^y[i])`, eight lanes at a time over the whole slice (the steps of
/// consecutive eights overlap in the processor), the rest as the portable loop: its bits.
#[target_feature(enable = "avx2,fma")]
pub(super) fn sigmoid_gates(x: &[f32], y: &[f32], out: &mut [f32]) {
    assert!(x.len() >= out.len() && y.len() >= out.len());
    let whole = out.len() / 8 * 8;
    for i in (0..whole).step_by(8) {
        // SAFETY: i + 8 ≤ out.len() ≤ x.len(), y.len() (asserted above).
        unsafe {
            let (xv, yv) = (_mm256_loadu_ps(x.as_ptr().add(i)), _mm256_loadu_ps(y.as_ptr().add(i)));
            let gated = _mm256_div_ps(xv, _mm256_add_ps(_mm256_set1_ps(1.), exp8(yv)));
            _mm256_storeu_ps(out.as_mut_ptr().add(i), gated);
        }
    }
    for i in whole..out.len() {
        out[i] = x[i] / (1. + super::exp(y[i]));
    }
}

/// [`sigmoid_gates`] sixteen lanes at a time: the same bits.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn sigmoid_gates16(x: &[f32], y: &[f32], out: &mut [f32]) {
    assert!(x.len() >= out.len() && y.len() >= out.len());
    let whole = out.len() / 16 * 16;
    for i in (0..whole).step_by(16) {
        // SAFETY: i + 16 ≤ out.len() ≤ x.len(), y.len() (asserted above).
        unsafe {
            let (xv, yv) = (_mm512_loadu_ps(x.as_ptr().add(i)), _mm512_loadu_ps(y.as_ptr().add(i)));
            let gated = _mm512_div_ps(xv, _mm512_add_ps(_mm512_set1_ps(1.), exp16(yv)));
            _mm512_storeu_ps(out.as_mut_ptr().add(i), gated);
        }
    }
    sigmoid_gates(&x[whole..], &y[whole..], &mut out[whole..]);
}

/// `s ← e^(s − max)` eight at a time (the rest as the portable loop does): the same bits.
#[target_feature(enable = "avx2,fma")]
pub(super) fn exp_less(scores: &mut [f32], max: f32) {
    let m = _mm256_set1_ps(max);
    let mut chunks = scores.chunks_exact_mut(8);
    for chunk in &mut chunks {
        // SAFETY: eight floats.
        unsafe {
            let s = _mm256_loadu_ps(chunk.as_ptr());
            _mm256_storeu_ps(chunk.as_mut_ptr(), exp8(_mm256_sub_ps(s, m)));
        }
    }
    for s in chunks.into_remainder() {
        *s = super::exp(*s - max);
    }
}

/// [`exp_less`] sixteen at a time: the same bits.
#[target_feature(enable = "avx2,fma,avx512f")]
pub(super) fn exp_less16(scores: &mut [f32], max: f32) {
    let m = _mm512_set1_ps(max);
    let mut chunks = scores.chunks_exact_mut(16);
    for chunk in &mut chunks {
        // SAFETY: sixteen floats.
        unsafe {
            let s = _mm512_loadu_ps(chunk.as_ptr());
            _mm512_storeu_ps(chunk.as_mut_ptr(), exp16(_mm512_sub_ps(s, m)));
        }
    }
    exp_less(chunks.into_remainder(), max);
}

/// `quantize_row_k` (see the parent module) with the same roundings: the same bytes.
#[target_feature(enable = "avx2,fma")]
pub(super) fn quantize_k(x: &[f32], d: &mut [f32], q: &mut [i8], sums: &mut [i16]) {
    let magnitude = _mm256_set1_ps(-0.0);
    for (b, (block, qb)) in x.chunks_exact(256).zip(q.chunks_exact_mut(256)).enumerate() {
        let load = |i: usize| {
            // SAFETY: i + 8 ≤ 256.
            unsafe { _mm256_loadu_ps(block.as_ptr().add(i)) }
        };
        let mut m = _mm256_setzero_ps();
        for i in (0..256).step_by(8) {
            m = _mm256_max_ps(m, _mm256_andnot_ps(magnitude, load(i)));
        }
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
        if amax == 0. {
            d[b] = 0.;
            qb.fill(0);
            sums[b * 16..b * 16 + 16].fill(0);
            continue;
        }
        // The first value of that magnitude gives the scale its sign.
        let target = _mm256_set1_ps(amax);
        let max = (0..256)
            .step_by(8)
            .find_map(|i| {
                let mask = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(
                    _mm256_andnot_ps(magnitude, load(i)),
                    target,
                ));
                (mask != 0).then(|| block[i + mask.trailing_zeros() as usize])
            })
            .unwrap_or(amax);
        let iscale = -127. / max;
        let (scale, cap, ones) = (_mm256_set1_ps(iscale), _mm256_set1_epi32(127), _mm256_set1_epi16(1));
        for g in 0..16 {
            let round = |v: __m256| {
                let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(scale, v));
                _mm256_min_epi32(_mm256_cvtps_epi32(r), cap)
            };
            let words = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(
                round(load(16 * g)),
                round(load(16 * g + 8)),
            ));
            let bytes = _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256::<1>(words));
            // SAFETY: 16 bytes at 16g of a 256-byte block.
            unsafe { _mm_storeu_si128(qb.as_mut_ptr().add(16 * g).cast(), bytes) };
            let s = _mm256_madd_epi16(words, ones);
            let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
            sums[b * 16 + g] = _mm_cvtsi128_si32(s) as i16;
        }
        d[b] = 1. / iscale;
    }
}

#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    // SAFETY (all loads): i + 32 ≤ n, then i + 8 ≤ n.
    while i + 32 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let x = unsafe { _mm256_loadu_ps(a.as_ptr().add(i + 8 * k)) };
            let y = unsafe { _mm256_loadu_ps(b.as_ptr().add(i + 8 * k)) };
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 32;
    }
    while i + 8 <= n {
        let x = unsafe { _mm256_loadu_ps(a.as_ptr().add(i)) };
        let y = unsafe { _mm256_loadu_ps(b.as_ptr().add(i)) };
        acc[0] = _mm256_fmadd_ps(x, y, acc[0]);
        i += 8;
    }
    let total = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    sum(total) + a[i..n].iter().zip(&b[i..n]).map(|(x, y)| x * y).sum::<f32>()
}

/// `sums + Σ` of four adjacent byte products (`u` unsigned, `q` signed) per 32-bit lane: AVX2's
/// three instructions (no pair of products reaches the 16-bit limit: `u` < 64, |q| ≤ 127).
macro_rules! busd_avx2 {
    ($sums:expr, $u:expr, $q:expr) => {
        _mm256_add_epi32($sums, pairs($u, $q))
    };
}

/// The same in one VNNI instruction (`vpdpbusd`): the same 32-bit sums.
macro_rules! busd_vnni {
    ($sums:expr, $u:expr, $q:expr) => {
        _mm256_dpbusd_epi32($sums, $u, $q)
    };
}

/// `sums + Σ` of two adjacent word products per 32-bit lane: AVX2's two instructions.
macro_rules! wssd_avx2 {
    ($sums:expr, $p:expr, $s:expr) => {
        _mm256_add_epi32($sums, _mm256_madd_epi16($p, $s))
    };
}

/// The same in one VNNI instruction (`vpdpwssd`).
macro_rules! wssd_vnni {
    ($sums:expr, $p:expr, $s:expr) => {
        _mm256_dpwssd_epi32($sums, $p, $s)
    };
}

/// The four bytes at `$p` (any alignment; readable) in every 32-bit lane.
macro_rules! quad {
    ($p:expr) => {
        _mm256_set1_epi32(unsafe { $p.cast::<i32>().read_unaligned() })
    };
}

/// The K-quant kernels over units of eight rows (see `interleaved`), once for AVX2 and once for AVX-512
/// VNNI (`$busd`, `$wssd`: how byte and word products are summed into 32-bit lanes). Lane `i` of
/// every vector is row `i`; both give the same integer sums and take the same fused float steps as
/// the portable kernels, so a row's product is the same bits on all three and whatever `N` is.
/// With several tokens to a unit, the `size` bytes `ahead` of `unit` asked into the first-level
/// cache: each unit then takes long enough to compute that the memory bus idles unless asked ahead
/// (eight side by side on the 1.5B model: 75–80 → 87–100 tok/s on an AVX2 machine; four units
/// ahead rather than two, alternating runs on an AVX-512 machine: 161–172 → 171–186 tok/s; its AVX2
/// kernels forced there with `INCHARACTER_KERNELS=avx2`, two rounds: none 81–83, two ahead 105–108,
/// four ahead 107–109 tok/s). One token's kernels stream fast enough for the hardware's own
/// prefetching, and are left alone.
#[inline(always)]
fn prefetch_ahead<const N: usize>(unit: *const u8, size: usize, ahead: usize) {
    if N > 1 {
        for line in (0..size).step_by(64) {
            // SAFETY: a prefetch never faults, and the address is only computed (wrapping), never read.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(unit.wrapping_add(ahead + line).cast()) };
        }
    }
}

macro_rules! k_quant_kernels {
    ($q4k:ident, $q6k:ident, $features:literal, $busd:ident, $wssd:ident) => {
        /// Q4_K units against Q8_K activation rows.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $q4k<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [[f32; ROWS]; N] {
            let units = d.len() / 16;
            debug_assert!(qs.len() == units * Q4K_UNIT);
            debug_assert!(a.iter().all(|a| a.kd.len() == units && a.kq.len() == units * 256));
            let low = _mm256_set1_epi8(0x0F);
            let mut acc = [_mm256_setzero_ps(); N];
            for b in 0..units {
                // SAFETY (all loads): unit b is in bounds of `d` and `qs`, super-block b of every
                // activation row (debug-asserted above).
                let unit = unsafe { qs.as_ptr().add(b * Q4K_UNIT) };
                prefetch_ahead::<N>(unit, Q4K_UNIT, 4 * Q4K_UNIT);
                let mut sums = [_mm256_setzero_si256(); N];
                for j in 0..4 {
                    let (mut lo, mut hi) = ([_mm256_setzero_si256(); N], [_mm256_setzero_si256(); N]);
                    for k in 0..8 {
                        let raw = unsafe { _mm256_loadu_si256(unit.add(128 + 256 * j + 32 * k).cast()) };
                        let (wl, wh) = (
                            _mm256_and_si256(raw, low),
                            _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low),
                        );
                        for n in 0..N {
                            let q = unsafe { a[n].kq.as_ptr().add(b * 256 + 64 * j + 4 * k) };
                            lo[n] = $busd!(lo[n], wl, quad!(q));
                            hi[n] = $busd!(hi[n], wh, quad!(q.add(32)));
                        }
                    }
                    let (s_lo, s_hi) = unsafe {
                        (
                            _mm256_cvtepu8_epi32(_mm_loadl_epi64(unit.add(16 * j).cast())),
                            _mm256_cvtepu8_epi32(_mm_loadl_epi64(unit.add(16 * j + 8).cast())),
                        )
                    };
                    for n in 0..N {
                        let scaled = _mm256_add_epi32(_mm256_mullo_epi32(lo[n], s_lo), _mm256_mullo_epi32(hi[n], s_hi));
                        sums[n] = _mm256_add_epi32(sums[n], scaled);
                    }
                }
                // The minimums against the sums of each 32 activations (llama.cpp's `bsums`).
                let mins: [__m256i; 4] = std::array::from_fn(|p| unsafe {
                    _mm256_cvtepu8_epi16(_mm_loadu_si128(unit.add(64 + 16 * p).cast()))
                });
                let (dv, dmin) = unsafe {
                    (
                        _mm256_loadu_ps(d.as_ptr().add(16 * b)),
                        _mm256_loadu_ps(d.as_ptr().add(16 * b + 8)),
                    )
                };
                for n in 0..N {
                    let (kd, sums32) = unsafe {
                        let ks = a[n].ks.as_ptr().add(b * 16);
                        (
                            *a[n].kd.get_unchecked(b),
                            _mm_hadd_epi16(_mm_loadu_si128(ks.cast()), _mm_loadu_si128(ks.add(8).cast())),
                        )
                    };
                    let mut m = _mm256_setzero_si256();
                    m = $wssd!(m, mins[0], _mm256_broadcastd_epi32(sums32));
                    m = $wssd!(
                        m,
                        mins[1],
                        _mm256_broadcastd_epi32(_mm_shuffle_epi32::<0x55>(sums32))
                    );
                    m = $wssd!(
                        m,
                        mins[2],
                        _mm256_broadcastd_epi32(_mm_shuffle_epi32::<0xAA>(sums32))
                    );
                    m = $wssd!(
                        m,
                        mins[3],
                        _mm256_broadcastd_epi32(_mm_shuffle_epi32::<0xFF>(sums32))
                    );
                    acc[n] = _mm256_fmadd_ps(
                        _mm256_mul_ps(dv, _mm256_set1_ps(kd)),
                        _mm256_cvtepi32_ps(sums[n]),
                        acc[n],
                    );
                    acc[n] = _mm256_fmadd_ps(
                        _mm256_mul_ps(dmin, _mm256_set1_ps(-kd)),
                        _mm256_cvtepi32_ps(m),
                        acc[n],
                    );
                }
            }
            lanes(acc)
        }

        /// Q6_K units against Q8_K activation rows: the values taken unsigned
        /// (`Σ s·(u − 32)·q = Σ s·u·q − 32·Σ s·Σq`, the sums of 16 activations beside them).
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $q6k<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [[f32; ROWS]; N] {
            let units = d.len() / ROWS;
            debug_assert!(qs.len() == units * Q6K_UNIT);
            debug_assert!(a.iter().all(|a| a.kd.len() == units && a.kq.len() == units * 256));
            let (m4, m2) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x30));
            let mut acc = [_mm256_setzero_ps(); N];
            for b in 0..units {
                // SAFETY (all loads): as in the Q4_K kernel.
                let unit = unsafe { qs.as_ptr().add(b * Q6K_UNIT) };
                prefetch_ahead::<N>(unit, Q6K_UNIT, 4 * Q6K_UNIT);
                // Lane i: the scales of sub-blocks 2p and 2p + 1 of row i, as two words.
                let scales: [__m256i; 8] =
                    std::array::from_fn(|p| unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(unit.add(16 * p).cast())) });
                let mut sums = [_mm256_setzero_si256(); N];
                for n in 0..N {
                    let ks = unsafe { a[n].ks.as_ptr().add(b * 16) };
                    let mut offset = _mm256_setzero_si256();
                    for (p, &s) in scales.iter().enumerate() {
                        let pair = _mm256_set1_epi32(unsafe { ks.add(2 * p).cast::<i32>().read_unaligned() });
                        offset = $wssd!(offset, s, pair);
                    }
                    sums[n] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<5>(offset));
                }
                for s in 0..16 {
                    let (x, y, high) = unsafe {
                        let at = unit.add(128 + 96 * s);
                        (
                            _mm256_loadu_si256(at.cast()),
                            _mm256_loadu_si256(at.add(32).cast()),
                            _mm256_loadu_si256(at.add(64).cast()),
                        )
                    };
                    let u = [
                        _mm256_or_si256(
                            _mm256_and_si256(x, m4),
                            _mm256_and_si256(_mm256_slli_epi16::<4>(high), m2),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4),
                            _mm256_and_si256(_mm256_slli_epi16::<2>(high), m2),
                        ),
                        _mm256_or_si256(_mm256_and_si256(y, m4), _mm256_and_si256(high, m2)),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(y), m4),
                            _mm256_and_si256(_mm256_srli_epi16::<2>(high), m2),
                        ),
                    ];
                    let pair = scales[s / 2];
                    let scale = if s % 2 == 0 {
                        _mm256_srai_epi32::<16>(_mm256_slli_epi32::<16>(pair))
                    } else {
                        _mm256_srai_epi32::<16>(pair)
                    };
                    for n in 0..N {
                        let q = unsafe { a[n].kq.as_ptr().add(b * 256 + 16 * s) };
                        let mut t = _mm256_setzero_si256();
                        for (k, &u) in u.iter().enumerate() {
                            t = $busd!(t, u, quad!(q.add(4 * k)));
                        }
                        sums[n] = _mm256_add_epi32(sums[n], _mm256_mullo_epi32(t, scale));
                    }
                }
                let dv = unsafe { _mm256_loadu_ps(d.as_ptr().add(ROWS * b)) };
                for n in 0..N {
                    let kd = unsafe { *a[n].kd.get_unchecked(b) };
                    acc[n] = _mm256_fmadd_ps(
                        _mm256_mul_ps(dv, _mm256_set1_ps(kd)),
                        _mm256_cvtepi32_ps(sums[n]),
                        acc[n],
                    );
                }
            }
            lanes(acc)
        }
    };
}

/// AVX2's 8-bit weights: signed again, and their magnitudes.
macro_rules! signed_avx2 {
    ($raw:expr) => {{
        let w = _mm256_xor_si256($raw, _mm256_set1_epi8(-128));
        (w, _mm256_sign_epi8(w, w))
    }};
}

/// VNNI's 8-bit weights: as held.
macro_rules! held_vnni {
    ($raw:expr) => {
        ($raw, $raw)
    };
}

/// AVX2's block sums start at zero and add `|w|·(q·sign w)` (no pair of products reaches the 16-bit
/// limit).
macro_rules! start_avx2 {
    ($sums:expr) => {
        _mm256_setzero_si256()
    };
}
macro_rules! step_avx2 {
    ($t:expr, $w:expr, $q:expr) => {
        _mm256_add_epi32($t, pairs($w.1, _mm256_sign_epi8($q, $w.0)))
    };
}

/// VNNI's start at `−128·Σq` and add `(w + 128)·q` in one instruction.
macro_rules! start_vnni {
    ($sums:expr) => {
        _mm256_set1_epi32(-128 * $sums)
    };
}
macro_rules! step_vnni {
    ($t:expr, $w:expr, $q:expr) => {
        _mm256_dpbusd_epi32($t, $w.0, $q)
    };
}

/// The 8-bit kernels over units of eight rows (see `interleaved`), once for AVX2 and once for VNNI:
/// the same integer sums, one fused float step per block and row, and one for the constant term.
macro_rules! q8_kernels {
    ($name:ident, $features:literal, $weights:ident, $start:ident, $step:ident) => {
        /// 8-bit units against 8-bit activation rows.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<const N: usize>(
            d: &[f32],
            c: &[f32],
            qs: &[u8],
            a: [ActRow; N],
        ) -> [[f32; ROWS]; N] {
            let units = d.len() / ROWS;
            debug_assert!(qs.len() == units * Q8_UNIT && (c.is_empty() || c.len() == d.len()));
            debug_assert!(
                a.iter()
                    .all(|a| a.d.len() == units && a.q.len() == units * BLOCK && a.sums.len() == units)
            );
            let mut acc = [_mm256_setzero_ps(); N];
            for b in 0..units {
                // SAFETY (all loads): unit b is in bounds of `d`, `c` and `qs`, block b of every
                // activation row (debug-asserted above).
                // Byte-held units are small: eight ahead.
                prefetch_ahead::<N>(qs.as_ptr().wrapping_add(b * Q8_UNIT), Q8_UNIT, 8 * Q8_UNIT);
                let w: [(__m256i, __m256i); 8] = std::array::from_fn(|k| {
                    $weights!(unsafe { _mm256_loadu_si256(qs.as_ptr().add(b * Q8_UNIT + 32 * k).cast()) })
                });
                let dv = unsafe { _mm256_loadu_ps(d.as_ptr().add(ROWS * b)) };
                for n in 0..N {
                    let q = unsafe { a[n].q.as_ptr().add(b * BLOCK) };
                    let mut t = $start!(unsafe { *a[n].sums.get_unchecked(b) });
                    for (k, w) in w.iter().enumerate() {
                        t = $step!(t, w, quad!(q.add(4 * k)));
                    }
                    let ad = unsafe { *a[n].d.get_unchecked(b) };
                    acc[n] = _mm256_fmadd_ps(
                        _mm256_mul_ps(dv, _mm256_set1_ps(ad)),
                        _mm256_cvtepi32_ps(t),
                        acc[n],
                    );
                    if !c.is_empty() {
                        let (cv, s) = unsafe {
                            (
                                _mm256_loadu_ps(c.as_ptr().add(ROWS * b)),
                                *a[n].s.get_unchecked(b),
                            )
                        };
                        acc[n] = _mm256_fmadd_ps(cv, _mm256_set1_ps(s), acc[n]);
                    }
                }
            }
            lanes(acc)
        }
    };
}

/// Each accumulator's eight lanes: eight rows' products.
#[target_feature(enable = "avx2,fma")]
fn lanes<const N: usize>(acc: [__m256; N]) -> [[f32; ROWS]; N] {
    let mut out = [[0f32; ROWS]; N];
    for (o, acc) in out.iter_mut().zip(acc) {
        // SAFETY: eight floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), acc) };
    }
    out
}

q8_kernels!(q8, "avx2,fma", signed_avx2, start_avx2, step_avx2);
q8_kernels!(
    q8_vnni,
    "avx2,fma,avx512f,avx512vl,avx512vnni",
    held_vnni,
    start_vnni,
    step_vnni
);

k_quant_kernels!(q4k, q6k, "avx2,fma", busd_avx2, wssd_avx2);
k_quant_kernels!(
    q4k_vnni,
    q6k_vnni,
    "avx2,fma,avx512f,avx512vl,avx512vnni",
    busd_vnni,
    wssd_vnni
);

/// `a` in the low half of a register, `b` in the high.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
#[inline]
fn pair_i(a: __m256i, b: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b)
}

/// `a` in the low half of a register, `b` in the high (floats).
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
#[inline]
pub(super) fn pair_ps(a: __m256, b: __m256) -> __m512 {
    _mm512_castpd_ps(_mm512_insertf64x4::<1>(
        _mm512_castpd256_pd512(_mm256_castps_pd(a)),
        _mm256_castps_pd(b),
    ))
}

/// Two 256-bit loads, from `a` into the low half and from `b` into the high.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
#[inline]
unsafe fn join(a: *const u8, b: *const u8) -> __m512i {
    // SAFETY: the caller's 32 bytes at each.
    unsafe { pair_i(_mm256_loadu_si256(a.cast()), _mm256_loadu_si256(b.cast())) }
}

/// Q4_K units of two groups of eight rows (`d[0]` and `qs[0]` rows 0–7, `d[1]` and `qs[1]` rows
/// 8–15) against `N` activation rows, a group to each half of a 512-bit register: every lane takes
/// the steps of its lane in `q4k_vnni`, so each row gets the same bits, with half the instructions
/// where the CPU computes 512 bits at a time. At most four activation rows (the sixteen
/// accumulators fit the 32 registers).
#[target_feature(enable = "avx2,fma,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn q4k_pair<const N: usize>(d: [&[f32]; 2], qs: [&[u8]; 2], a: [ActRow; N]) -> [[[f32; ROWS]; N]; 2] {
    const { assert!(N <= 4) };
    let units = d[0].len() / 16;
    debug_assert!(d[1].len() == d[0].len() && qs.iter().all(|q| q.len() == units * Q4K_UNIT));
    debug_assert!(a.iter().all(|a| a.kd.len() == units && a.kq.len() == units * 256));
    let low = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); N];
    for b in 0..units {
        // SAFETY (all loads): unit b of both groups is in bounds of `d` and `qs`, super-block b of
        // every activation row (debug-asserted above).
        let unit = unsafe { [qs[0].as_ptr().add(b * Q4K_UNIT), qs[1].as_ptr().add(b * Q4K_UNIT)] };
        for u in unit {
            prefetch_ahead::<N>(u, Q4K_UNIT, 4 * Q4K_UNIT);
        }
        let both = |at: usize| unsafe { join(unit[0].add(at), unit[1].add(at)) };
        let mut sums = [_mm512_setzero_si512(); N];
        for j in 0..4 {
            let (mut lo, mut hi) = ([_mm512_setzero_si512(); N], [_mm512_setzero_si512(); N]);
            for k in 0..8 {
                let raw = both(128 + 256 * j + 32 * k);
                // A 32-bit shift moves the same high nibbles down as a 16-bit one; the mask drops
                // what came from the byte above.
                let (wl, wh) = (
                    _mm512_and_si512(raw, low),
                    _mm512_and_si512(_mm512_srli_epi32::<4>(raw), low),
                );
                for n in 0..N {
                    let q = unsafe { a[n].kq.as_ptr().add(b * 256 + 64 * j + 4 * k) };
                    let quad = |p: *const i8| _mm512_set1_epi32(unsafe { p.cast::<i32>().read_unaligned() });
                    lo[n] = _mm512_dpbusd_epi32(lo[n], wl, quad(q));
                    hi[n] = _mm512_dpbusd_epi32(hi[n], wh, quad(unsafe { q.add(32) }));
                }
            }
            let scales = |at: usize| unsafe {
                _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(
                    _mm_loadl_epi64(unit[0].add(at).cast()),
                    _mm_loadl_epi64(unit[1].add(at).cast()),
                ))
            };
            let (s_lo, s_hi) = (scales(16 * j), scales(16 * j + 8));
            for n in 0..N {
                let scaled = _mm512_add_epi32(_mm512_mullo_epi32(lo[n], s_lo), _mm512_mullo_epi32(hi[n], s_hi));
                sums[n] = _mm512_add_epi32(sums[n], scaled);
            }
        }
        // The minimums against the sums of each 32 activations (llama.cpp's `bsums`).
        let mins: [__m512i; 4] = std::array::from_fn(|p| unsafe {
            let widen = |u: *const u8| _mm256_cvtepu8_epi16(_mm_loadu_si128(u.add(64 + 16 * p).cast()));
            pair_i(widen(unit[0]), widen(unit[1]))
        });
        let floats = |at: usize| unsafe {
            let half = |d: &[f32]| _mm256_loadu_ps(d.as_ptr().add(16 * b + at));
            pair_ps(half(d[0]), half(d[1]))
        };
        let (dv, dmin) = (floats(0), floats(8));
        for n in 0..N {
            let (kd, sums32) = unsafe {
                let ks = a[n].ks.as_ptr().add(b * 16);
                (
                    *a[n].kd.get_unchecked(b),
                    _mm_hadd_epi16(_mm_loadu_si128(ks.cast()), _mm_loadu_si128(ks.add(8).cast())),
                )
            };
            let mut m = _mm512_setzero_si512();
            m = _mm512_dpwssd_epi32(m, mins[0], _mm512_broadcastd_epi32(sums32));
            m = _mm512_dpwssd_epi32(m, mins[1], _mm512_broadcastd_epi32(_mm_shuffle_epi32::<0x55>(sums32)));
            m = _mm512_dpwssd_epi32(m, mins[2], _mm512_broadcastd_epi32(_mm_shuffle_epi32::<0xAA>(sums32)));
            m = _mm512_dpwssd_epi32(m, mins[3], _mm512_broadcastd_epi32(_mm_shuffle_epi32::<0xFF>(sums32)));
            acc[n] = _mm512_fmadd_ps(
                _mm512_mul_ps(dv, _mm512_set1_ps(kd)),
                _mm512_cvtepi32_ps(sums[n]),
                acc[n],
            );
            acc[n] = _mm512_fmadd_ps(_mm512_mul_ps(dmin, _mm512_set1_ps(-kd)), _mm512_cvtepi32_ps(m), acc[n]);
        }
    }
    halves_of(acc)
}

/// Each register's two groups of eight rows.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl")]
fn halves_of<const N: usize>(acc: [__m512; N]) -> [[[f32; ROWS]; N]; 2] {
    let mut out = [[[0f32; ROWS]; N]; 2];
    for (n, acc) in acc.into_iter().enumerate() {
        let mut all = [0f32; 2 * ROWS];
        // SAFETY: sixteen floats.
        unsafe { _mm512_storeu_ps(all.as_mut_ptr(), acc) };
        out[0][n].copy_from_slice(&all[..ROWS]);
        out[1][n].copy_from_slice(&all[ROWS..]);
    }
    out
}

/// Q6_K units of two groups of eight rows (as [`q4k_pair`]: group 0 in the low half of each
/// register, group 1 in the high) against at most four activation rows: every lane the steps of its
/// lane in `q6k_vnni`, so each row keeps its bits.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn q6k_pair<const N: usize>(d: [&[f32]; 2], qs: [&[u8]; 2], a: [ActRow; N]) -> [[[f32; ROWS]; N]; 2] {
    const { assert!(N <= 4) };
    let units = d[0].len() / ROWS;
    debug_assert!(d[1].len() == d[0].len() && qs.iter().all(|q| q.len() == units * Q6K_UNIT));
    debug_assert!(a.iter().all(|a| a.kd.len() == units && a.kq.len() == units * 256));
    let (m4, m2) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x30));
    let mut acc = [_mm512_setzero_ps(); N];
    for b in 0..units {
        // SAFETY (all loads): as in `q4k_pair`.
        let unit = unsafe { [qs[0].as_ptr().add(b * Q6K_UNIT), qs[1].as_ptr().add(b * Q6K_UNIT)] };
        for u in unit {
            prefetch_ahead::<N>(u, Q6K_UNIT, 4 * Q6K_UNIT);
        }
        let both = |at: usize| unsafe { join(unit[0].add(at), unit[1].add(at)) };
        // Lane i: the scales of sub-blocks 2p and 2p + 1 of its row, as two words.
        let scales: [__m512i; 8] = std::array::from_fn(|p| unsafe {
            let widen = |u: *const u8| _mm256_cvtepi8_epi16(_mm_loadu_si128(u.add(16 * p).cast()));
            pair_i(widen(unit[0]), widen(unit[1]))
        });
        let mut sums = [_mm512_setzero_si512(); N];
        for n in 0..N {
            let ks = unsafe { a[n].ks.as_ptr().add(b * 16) };
            let mut offset = _mm512_setzero_si512();
            for (p, &s) in scales.iter().enumerate() {
                let pair = _mm512_set1_epi32(unsafe { ks.add(2 * p).cast::<i32>().read_unaligned() });
                offset = _mm512_dpwssd_epi32(offset, s, pair);
            }
            sums[n] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<5>(offset));
        }
        for s in 0..16 {
            let (x, y, high) = (both(128 + 96 * s), both(128 + 96 * s + 32), both(128 + 96 * s + 64));
            // 32-bit shifts where `q6k_vnni` shifts 16 bits: what crosses a byte is masked off.
            let (and, or) = (_mm512_and_si512, _mm512_or_si512);
            let u = [
                or(and(x, m4), and(_mm512_slli_epi32::<4>(high), m2)),
                or(
                    and(_mm512_srli_epi32::<4>(x), m4),
                    and(_mm512_slli_epi32::<2>(high), m2),
                ),
                or(and(y, m4), and(high, m2)),
                or(
                    and(_mm512_srli_epi32::<4>(y), m4),
                    and(_mm512_srli_epi32::<2>(high), m2),
                ),
            ];
            let pair = scales[s / 2];
            let scale = if s % 2 == 0 {
                _mm512_srai_epi32::<16>(_mm512_slli_epi32::<16>(pair))
            } else {
                _mm512_srai_epi32::<16>(pair)
            };
            for n in 0..N {
                let q = unsafe { a[n].kq.as_ptr().add(b * 256 + 16 * s) };
                let mut t = _mm512_setzero_si512();
                for (k, &u) in u.iter().enumerate() {
                    let quad = _mm512_set1_epi32(unsafe { q.add(4 * k).cast::<i32>().read_unaligned() });
                    t = _mm512_dpbusd_epi32(t, u, quad);
                }
                sums[n] = _mm512_add_epi32(sums[n], _mm512_mullo_epi32(t, scale));
            }
        }
        let dv = unsafe {
            let half = |d: &[f32]| _mm256_loadu_ps(d.as_ptr().add(ROWS * b));
            pair_ps(half(d[0]), half(d[1]))
        };
        for n in 0..N {
            let kd = unsafe { *a[n].kd.get_unchecked(b) };
            acc[n] = _mm512_fmadd_ps(
                _mm512_mul_ps(dv, _mm512_set1_ps(kd)),
                _mm512_cvtepi32_ps(sums[n]),
                acc[n],
            );
        }
    }
    halves_of(acc)
}

/// 8-bit units of two groups of eight rows (as [`q4k_pair`]: group 0 in the low half of each
/// register, group 1 in the high; `c` empty for both or neither) against at most four activation
/// rows: every lane the steps of its lane in `q8_vnni`, so each row keeps its bits.
#[target_feature(enable = "avx2,fma,avx512f,avx512vl,avx512vnni")]
pub(super) unsafe fn q8_pair<const N: usize>(
    d: [&[f32]; 2],
    c: [&[f32]; 2],
    qs: [&[u8]; 2],
    a: [ActRow; N],
) -> [[[f32; ROWS]; N]; 2] {
    const { assert!(N <= 4) };
    let units = d[0].len() / ROWS;
    debug_assert!(d[1].len() == d[0].len() && qs.iter().all(|q| q.len() == units * Q8_UNIT));
    debug_assert!(c[0].len() == c[1].len() && (c[0].is_empty() || c[0].len() == d[0].len()));
    debug_assert!(
        a.iter()
            .all(|a| a.d.len() == units && a.q.len() == units * BLOCK && a.sums.len() == units)
    );
    let constant = !c[0].is_empty();
    let floats = |f: [&[f32]; 2], b: usize| unsafe {
        let half = |f: &[f32]| _mm256_loadu_ps(f.as_ptr().add(ROWS * b));
        pair_ps(half(f[0]), half(f[1]))
    };
    let mut acc = [_mm512_setzero_ps(); N];
    for b in 0..units {
        // SAFETY (all loads): unit b of both groups is in bounds of `d`, `c` and `qs`, block b of
        // every activation row (debug-asserted above).
        let unit = unsafe { [qs[0].as_ptr().add(b * Q8_UNIT), qs[1].as_ptr().add(b * Q8_UNIT)] };
        for u in unit {
            prefetch_ahead::<N>(u, Q8_UNIT, 8 * Q8_UNIT);
        }
        let w: [__m512i; 8] = std::array::from_fn(|k| unsafe { join(unit[0].add(32 * k), unit[1].add(32 * k)) });
        let dv = floats(d, b);
        for n in 0..N {
            let q = unsafe { a[n].q.as_ptr().add(b * BLOCK) };
            let mut t = _mm512_set1_epi32(-128 * unsafe { *a[n].sums.get_unchecked(b) });
            for (k, &w) in w.iter().enumerate() {
                let quad = _mm512_set1_epi32(unsafe { q.add(4 * k).cast::<i32>().read_unaligned() });
                t = _mm512_dpbusd_epi32(t, w, quad);
            }
            let ad = unsafe { *a[n].d.get_unchecked(b) };
            acc[n] = _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_set1_ps(ad)), _mm512_cvtepi32_ps(t), acc[n]);
            if constant {
                let s = unsafe { *a[n].s.get_unchecked(b) };
                acc[n] = _mm512_fmadd_ps(floats(c, b), _mm512_set1_ps(s), acc[n]);
            }
        }
    }
    halves_of(acc)
}
