//! Matrices held eight rows at a time (Q4_K, Q6_K, and the 8-bit blocks), and the portable kernels
//! over them.
//!
//! A *unit* is the same 256-value super-block of eight consecutive rows, its bytes interleaved so
//! that 32 adjacent bytes hold four values of each of the eight rows: one multiply-add of 32 byte
//! pairs (`vpdpbusd`, or AVX2's two-instruction equivalent) against four activation values
//! broadcast to every lane gives the eight rows' partial sums side by side, and a unit's scales sit
//! in lanes beside them. The activations are read once for eight rows and the weights once for
//! every activation row of a tile, with no horizontal sum until a whole row is done (llama.cpp's
//! repacked `q4_K_8x8` layout works the same way). A matrix whose row count is not a multiple of
//! eight is held with zero rows after its last (their products are never read).
//!
//! Q4_K unit (`d`: 16 floats, the eight rows' `d` then their `dmin`; `qs`: [`Q4K_UNIT`] bytes):
//! - `[0, 64)`: the 6-bit scale of 32-value sub-block `j` of row `i` at `8j + i`;
//! - `[64, 128)`: the minimums of sub-blocks `2p` and `2p + 1` of row `i` at `64 + 16p + 2i` and
//!   the byte after (so that sixteen bytes widen to the pairs a word multiply-add takes);
//! - `[128, 1152)`: the file's nibbles; for value pair-group `j` (values `64j..64j + 64`) and quad
//!   `k`, 32 bytes at `128 + 256j + 32k`, row `i`'s at `+ 4i`: its file bytes `32j + 4k..+ 4`, whose
//!   low nibbles are values `64j + 4k..` and high nibbles values `64j + 32 + 4k..`.
//!
//! Q6_K unit (`d`: 8 floats; `qs`: [`Q6K_UNIT`] bytes):
//! - `[0, 128)`: the signed scale of 16-value sub-block `2p + k` of row `i` at `16p + 2i + k`;
//! - then per sub-block `s` 96 bytes at `128 + 96s`: 32 bytes whose low nibbles are the low four
//!   bits of values `16s..16s + 4` of row `i` (at `4i`) and high nibbles those of values
//!   `16s + 4..16s + 8`; 32 bytes the same for values `16s + 8..16s + 16`; 32 bytes of the top two
//!   bits of values `16s + 4q + x`, quad `q` at bits `2q`. The values are held unsigned (`u`,
//!   the weight is `d·scale·(u − 32)`), as in the file.
//!
//! 8-bit unit (32-value block `b` of eight rows; `d`: 8 scales, and `c`: 8 constant terms where the
//! format has them; `qs`: [`Q8_UNIT`] bytes): quad `k` of row `i` at `32k + 4i`, each value held
//! as `w + 128` (unsigned, so a byte multiply-add takes it as it is; the products are corrected by
//! `128·Σq` of the activation block).

use super::ActRow;

/// Rows held together.
pub const ROWS: usize = 8;
/// Bytes of a Q4_K unit (eight rows' 144 bytes).
pub const Q4K_UNIT: usize = ROWS * 144;
/// Bytes of a Q6_K unit (eight rows' 208 bytes of values and scales).
pub const Q6K_UNIT: usize = ROWS * 208;
/// Bytes of an 8-bit unit (eight rows' 32 values).
pub const Q8_UNIT: usize = ROWS * 32;

/// Row `lane` of an 8-bit unit from its 32 signed values (held as `w + 128`).
pub fn put_q8(lane: usize, values: &[u8], qs: &mut [u8]) {
    for k in 0..8 {
        for x in 0..4 {
            qs[32 * k + 4 * lane + x] = values[4 * k + x] ^ 0x80;
        }
    }
}

/// Row `lane` of an 8-bit unit: its 32 signed values.
pub fn get_q8(lane: usize, qs: &[u8]) -> [i8; 32] {
    std::array::from_fn(|v| (qs[32 * (v / 4) + 4 * lane + v % 4] ^ 0x80) as i8)
}

/// 8-bit units against `N` activation rows: per block the integer sum exactly, then one fused
/// float step, and one more for the constant term (as the SIMD kernels: the same bits).
pub fn q8<const N: usize>(d: &[f32], c: &[f32], qs: &[u8], a: [ActRow; N]) -> [[f32; ROWS]; N] {
    let mut out = [[0f32; ROWS]; N];
    for (b, unit) in qs.chunks_exact(Q8_UNIT).enumerate() {
        for lane in 0..ROWS {
            let w = get_q8(lane, unit);
            for (o, a) in out.iter_mut().zip(&a) {
                let q = &a.q[b * 32..(b + 1) * 32];
                let sum: i32 = w.iter().zip(q).map(|(&w, &q)| i32::from(w) * i32::from(q)).sum();
                o[lane] = (d[ROWS * b + lane] * a.d[b]).mul_add(sum as f32, o[lane]);
                if !c.is_empty() {
                    o[lane] = c[ROWS * b + lane].mul_add(a.s[b], o[lane]);
                }
            }
        }
    }
    out
}

/// Row `lane` of a Q4_K unit from the file's 144-byte block (`d`, `dmin`, 12 bytes of packed
/// scales, 128 of nibbles).
pub fn put_q4k(lane: usize, block: &[u8], d: &mut [f32], qs: &mut [u8]) {
    d[lane] = super::half_at(block, 0);
    d[ROWS + lane] = super::half_at(block, 2);
    for j in 0..8 {
        let (scale, min) = super::q4k_scale_min(j, &block[4..16]);
        qs[8 * j + lane] = scale;
        qs[64 + 16 * (j / 2) + 2 * lane + j % 2] = min;
    }
    for j in 0..4 {
        for k in 0..8 {
            let at = 128 + 256 * j + 32 * k + 4 * lane;
            qs[at..at + 4].copy_from_slice(&block[16 + 32 * j + 4 * k..][..4]);
        }
    }
}

/// Row `lane` of a Q4_K unit: `d`, `dmin`, and 144 bytes (the eight scales, the eight minimums,
/// the file's 128 bytes of nibbles).
pub fn get_q4k(lane: usize, d: &[f32], qs: &[u8]) -> (f32, f32, [u8; 144]) {
    let mut block = [0u8; 144];
    for j in 0..8 {
        block[j] = qs[8 * j + lane];
        block[8 + j] = qs[64 + 16 * (j / 2) + 2 * lane + j % 2];
    }
    for j in 0..4 {
        for k in 0..8 {
            let at = 128 + 256 * j + 32 * k + 4 * lane;
            block[16 + 32 * j + 4 * k..][..4].copy_from_slice(&qs[at..at + 4]);
        }
    }
    (d[lane], d[ROWS + lane], block)
}

/// Row `lane` of a Q6_K unit from the file's 210-byte block (128 bytes of low nibbles, 64 of high
/// bits, 16 scales, `d`).
pub fn put_q6k(lane: usize, block: &[u8], d: &mut [f32], qs: &mut [u8]) {
    d[lane] = super::half_at(block, 208);
    let u = super::q6k_values(block).map(|v| (v + 32) as u8);
    for s in 0..16 {
        qs[16 * (s / 2) + 2 * lane + s % 2] = block[192 + s];
        let at = 128 + 96 * s + 4 * lane;
        for x in 0..4 {
            let v = |q: usize| u[16 * s + 4 * q + x];
            qs[at + x] = (v(0) & 15) | (v(1) & 15) << 4;
            qs[at + 32 + x] = (v(2) & 15) | (v(3) & 15) << 4;
            qs[at + 64 + x] = (0..4).fold(0, |h, q| h | (v(q) >> 4) << (2 * q));
        }
    }
}

/// Row `lane` of a Q6_K unit: `d`, the 256 unsigned values and the 16 scales.
pub fn get_q6k(lane: usize, d: &[f32], qs: &[u8]) -> (f32, [u8; 256], [i8; 16]) {
    let mut u = [0u8; 256];
    let scales = std::array::from_fn(|s| qs[16 * (s / 2) + 2 * lane + s % 2] as i8);
    for s in 0..16 {
        let at = 128 + 96 * s + 4 * lane;
        for x in 0..4 {
            let (a, b, h) = (qs[at + x], qs[at + 32 + x], qs[at + 64 + x]);
            let low = [a & 15, a >> 4, b & 15, b >> 4];
            for (q, low) in low.into_iter().enumerate() {
                u[16 * s + 4 * q + x] = low | ((h >> (2 * q)) & 3) << 4;
            }
        }
    }
    (d[lane], u, scales)
}

/// Q4_K units against `N` activation rows: each row's integer sum and its minimums' sum exactly,
/// then the same two fused float steps per super-block as the SIMD kernels (so the same bits).
pub fn q4k<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [[f32; ROWS]; N] {
    let mut out = [[0f32; ROWS]; N];
    for (b, (d, unit)) in d.chunks_exact(16).zip(qs.chunks_exact(Q4K_UNIT)).enumerate() {
        for lane in 0..ROWS {
            let (dd, dmin, block) = get_q4k(lane, d, unit);
            let (scales, mins, nibbles) = (&block[..8], &block[8..16], &block[16..]);
            for (o, a) in out.iter_mut().zip(&a) {
                let kq = &a.kq[b * 256..(b + 1) * 256];
                let mut sum = 0i32;
                for (j, group) in nibbles.chunks_exact(32).enumerate() {
                    let (lo, hi) = group.iter().enumerate().fold((0i32, 0i32), |(lo, hi), (l, &byte)| {
                        (
                            lo + i32::from(byte & 15) * i32::from(kq[64 * j + l]),
                            hi + i32::from(byte >> 4) * i32::from(kq[64 * j + 32 + l]),
                        )
                    });
                    sum += i32::from(scales[2 * j]) * lo + i32::from(scales[2 * j + 1]) * hi;
                }
                let ks = &a.ks[b * 16..(b + 1) * 16];
                let m: i32 = (0..8)
                    .map(|j| i32::from(mins[j]) * (i32::from(ks[2 * j]) + i32::from(ks[2 * j + 1])))
                    .sum();
                let kd = a.kd[b];
                o[lane] = (dd * kd).mul_add(sum as f32, o[lane]);
                o[lane] = (dmin * -kd).mul_add(m as f32, o[lane]);
            }
        }
    }
    out
}

/// Q6_K units against `N` activation rows (as [`q4k`]).
pub fn q6k<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [[f32; ROWS]; N] {
    let mut out = [[0f32; ROWS]; N];
    for (b, (d, unit)) in d.chunks_exact(ROWS).zip(qs.chunks_exact(Q6K_UNIT)).enumerate() {
        for lane in 0..ROWS {
            let (dd, u, scales) = get_q6k(lane, d, unit);
            for (o, a) in out.iter_mut().zip(&a) {
                let kq = &a.kq[b * 256..(b + 1) * 256];
                let sum: i32 = (0..16)
                    .map(|s| {
                        let dot: i32 = (16 * s..16 * s + 16)
                            .map(|i| (i32::from(u[i]) - 32) * i32::from(kq[i]))
                            .sum();
                        i32::from(scales[s]) * dot
                    })
                    .sum();
                o[lane] = (dd * a.kd[b]).mul_add(sum as f32, o[lane]);
            }
        }
    }
    out
}
