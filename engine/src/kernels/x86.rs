//! The AVX2/FMA kernels, and the K-quant kernels' AVX-512 VNNI twins (see the parent module): chosen
//! at run time, only where the CPU has them.

use super::{ActRow, BLOCK};
use std::arch::x86_64::*;

#[target_feature(enable = "avx2,fma")]
fn sum(v: __m256) -> f32 {
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

/// 8-bit rows: `|w|·(q·sign w)` keeps the first operand unsigned.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn q8<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [f32; N] {
    debug_assert!(qs.len() == d.len() * BLOCK);
    debug_assert!(a.iter().all(|a| a.d.len() == d.len() && a.q.len() == d.len() * BLOCK));
    let mut acc = [_mm256_setzero_ps(); N];
    for b in 0..d.len() {
        // SAFETY (all loads): block b is in bounds of every slice (debug-asserted above).
        let w = unsafe { _mm256_loadu_si256(qs.as_ptr().add(b * BLOCK).cast()) };
        let abs = _mm256_sign_epi8(w, w);
        let db = unsafe { *d.get_unchecked(b) };
        for n in 0..N {
            let q = unsafe { _mm256_loadu_si256(a[n].q.as_ptr().add(b * BLOCK).cast()) };
            let p = _mm256_cvtepi32_ps(pairs(abs, _mm256_sign_epi8(q, w)));
            let ad = unsafe { *a[n].d.get_unchecked(b) };
            acc[n] = _mm256_fmadd_ps(_mm256_set1_ps(db * ad), p, acc[n]);
        }
    }
    let mut out = [0f32; N];
    for n in 0..N {
        out[n] = sum(acc[n]);
    }
    out
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

#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn axpy(out: &mut [f32], w: f32, v: &[f32]) {
    let n = out.len().min(v.len());
    let wv = _mm256_set1_ps(w);
    let mut i = 0;
    // SAFETY: i + 8 ≤ n for every load and store.
    while i + 8 <= n {
        unsafe {
            let o = _mm256_loadu_ps(out.as_ptr().add(i));
            let x = _mm256_loadu_ps(v.as_ptr().add(i));
            _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_fmadd_ps(wv, x, o));
        }
        i += 8;
    }
    for (o, x) in out[i..n].iter_mut().zip(&v[i..n]) {
        *o += w * x;
    }
}

/// `sums + madd(p, s)`: AVX2's two instructions.
macro_rules! madd_add {
    ($sums:expr, $p:expr, $s:expr) => {
        _mm256_add_epi32($sums, _mm256_madd_epi16($p, $s))
    };
}

/// `sums + madd(p, s)` in one VNNI instruction (`vpdpwssd`): the same 32-bit sums.
macro_rules! dpwssd {
    ($sums:expr, $p:expr, $s:expr) => {
        _mm256_dpwssd_epi32($sums, $p, $s)
    };
}

/// The K-quant kernels, once for AVX2 and once for AVX-512 VNNI (`$acc`: how a 16-bit product is
/// multiplied by its scale and added). Both give the same integer sums and take the same float
/// steps, so a row's product is the same bits on either.
macro_rules! k_quant_kernels {
    ($q4k:ident, $q6k:ident, $features:literal, $acc:ident) => {
        /// Q4_K rows held as their super-blocks (see `Held::Q4K`) against Q8_K activations: the sub-block
        /// scales multiply in the integer domain, one float step per 256 values and activation row.
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $q4k<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [f32; N] {
            let blocks = d.len() / 2;
            debug_assert!(qs.len() == blocks * 144);
            debug_assert!(
                a.iter()
                    .all(|a| a.kd.len() == blocks && a.kq.len() == blocks * 256)
            );
            let low = _mm256_set1_epi8(0x0F);
            let mut acc = [_mm256_setzero_ps(); N];
            for b in 0..blocks {
                // SAFETY (all loads): super-block b is in bounds of every slice (debug-asserted above).
                let block = unsafe { qs.as_ptr().add(b * 144) };
                let (db, dmin) = unsafe { (*d.get_unchecked(2 * b), *d.get_unchecked(2 * b + 1)) };
                let mut sums = [_mm256_setzero_si256(); N];
                for j in 0..4 {
                    let raw = unsafe { _mm256_loadu_si256(block.add(16 + 32 * j).cast()) };
                    let lo = _mm256_and_si256(raw, low);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), low);
                    let (s_lo, s_hi) = unsafe {
                        (
                            _mm256_set1_epi16(i16::from(*block.add(2 * j))),
                            _mm256_set1_epi16(i16::from(*block.add(2 * j + 1))),
                        )
                    };
                    for n in 0..N {
                        let q = unsafe { a[n].kq.as_ptr().add(b * 256 + 64 * j) };
                        let (q_lo, q_hi) =
                            unsafe { (_mm256_loadu_si256(q.cast()), _mm256_loadu_si256(q.add(32).cast())) };
                        sums[n] = $acc!(sums[n], _mm256_maddubs_epi16(lo, q_lo), s_lo);
                        sums[n] = $acc!(sums[n], _mm256_maddubs_epi16(hi, q_hi), s_hi);
                    }
                }
                // The minimums against the sums of each 32 activations (llama.cpp's `bsums`).
                let mins = unsafe { _mm_cvtepu8_epi16(_mm_loadl_epi64(block.add(8).cast())) };
                for n in 0..N {
                    let (kd, pairs) = unsafe {
                        let ks = a[n].ks.as_ptr().add(b * 16);
                        (
                            *a[n].kd.get_unchecked(b),
                            _mm_hadd_epi16(_mm_loadu_si128(ks.cast()), _mm_loadu_si128(ks.add(8).cast())),
                        )
                    };
                    let m = _mm256_cvtepi32_ps(_mm256_zextsi128_si256(_mm_madd_epi16(mins, pairs)));
                    acc[n] = _mm256_fmadd_ps(_mm256_set1_ps(db * kd), _mm256_cvtepi32_ps(sums[n]), acc[n]);
                    acc[n] = _mm256_fmadd_ps(_mm256_set1_ps(-dmin * kd), m, acc[n]);
                }
            }
            let mut out = [0f32; N];
            for n in 0..N {
                out[n] = sum(acc[n]);
            }
            out
        }

        /// Q6_K rows held as their super-blocks (see `Held::Q6K`) against Q8_K activations: the 6-bit
        /// values unpacked once for all `N` rows, taken unsigned (`Σ s·(u − 32)·q = Σ s·u·q − 32·Σ s·Σq`,
        /// the sums of 16 activations beside them).
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $q6k<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [f32; N] {
            let blocks = d.len();
            debug_assert!(qs.len() == blocks * 208);
            debug_assert!(
                a.iter()
                    .all(|a| a.kd.len() == blocks && a.kq.len() == blocks * 256)
            );
            let (m4, m2) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x30));
            let mut acc = [_mm256_setzero_ps(); N];
            for b in 0..blocks {
                // SAFETY (all loads): super-block b is in bounds of every slice (debug-asserted above).
                let block = unsafe { qs.as_ptr().add(b * 208) };
                let scales = unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(block.add(192).cast())) };
                let mut sums = [_mm256_setzero_si256(); N];
                for n in 0..N {
                    // The offset of 32: Σ over the 16-value groups of scale × activation sum, times 32.
                    let ks = unsafe { _mm256_loadu_si256(a[n].ks.as_ptr().add(b * 16).cast()) };
                    sums[n] = _mm256_slli_epi32::<5>(_mm256_madd_epi16(scales, ks));
                    sums[n] = _mm256_sub_epi32(_mm256_setzero_si256(), sums[n]);
                }
                for h in 0..2 {
                    let (x, y, high) = unsafe {
                        (
                            _mm256_loadu_si256(block.add(64 * h).cast()),
                            _mm256_loadu_si256(block.add(64 * h + 32).cast()),
                            _mm256_loadu_si256(block.add(128 + 32 * h).cast()),
                        )
                    };
                    let u = [
                        _mm256_or_si256(
                            _mm256_and_si256(x, m4),
                            _mm256_and_si256(_mm256_slli_epi16::<4>(high), m2),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(y, m4),
                            _mm256_and_si256(_mm256_slli_epi16::<2>(high), m2),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4),
                            _mm256_and_si256(high, m2),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(y), m4),
                            _mm256_and_si256(_mm256_srli_epi16::<2>(high), m2),
                        ),
                    ];
                    for (k, u) in u.into_iter().enumerate() {
                        let g = 8 * h + 2 * k;
                        let s = unsafe {
                            _mm256_set_m128i(
                                _mm_set1_epi16(i16::from(*block.add(192 + g + 1) as i8)),
                                _mm_set1_epi16(i16::from(*block.add(192 + g) as i8)),
                            )
                        };
                        for n in 0..N {
                            let q =
                                unsafe { _mm256_loadu_si256(a[n].kq.as_ptr().add(b * 256 + 128 * h + 32 * k).cast()) };
                            sums[n] = $acc!(sums[n], _mm256_maddubs_epi16(u, q), s);
                        }
                    }
                }
                let db = unsafe { *d.get_unchecked(b) };
                for n in 0..N {
                    let kd = unsafe { *a[n].kd.get_unchecked(b) };
                    acc[n] = _mm256_fmadd_ps(_mm256_set1_ps(db * kd), _mm256_cvtepi32_ps(sums[n]), acc[n]);
                }
            }
            let mut out = [0f32; N];
            for n in 0..N {
                out[n] = sum(acc[n]);
            }
            out
        }
    };
}

k_quant_kernels!(q4k, q6k, "avx2,fma", madd_add);
k_quant_kernels!(q4k_vnni, q6k_vnni, "avx2,fma,avx512f,avx512vl,avx512vnni", dpwssd);
