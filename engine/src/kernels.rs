//! Weight matrices in GGUF's block formats and the dot products over them.
//!
//! A row of weights is a run of 32-value blocks, each a scale and small integers. A row of
//! activations is quantized the same way to 8 bits (a scale `d` and the sum `s = d·Σq` per block,
//! rounded as llama.cpp rounds them), so a block's dot product is one integer sum times two scales:
//!
//! - Q4_0 holds `w = d·(u − 8)` and Q4_1 `w = d·u + m` with `u` in 0..16, both `w = d·u + c`: the
//!   block's product is `d_w·d_a·Σ u·q + c·s`, the same kernel for both;
//! - Q4_K is held as eight such Q4 blocks per super-block (its 6-bit scales and minimums widened);
//! - Q8_0 holds `w = d·q`: `d_w·d_a·Σ q·q`; Q5_0, Q5_1 and Q5_K are held so too (5 bits fit in 8),
//!   with Q5_1's and Q5_K's minimums as a constant term `c·s`; Q6_K likewise, with a scale per 16;
//! - F32 (and F16, widened at load) rows multiply the activations as floats.
//!
//! Scales are widened to f32 once, at load, so no kernel converts halves. Each kernel multiplies one
//! weight row with `N` activation rows at once (N = 1 when decoding, 4 when a prompt is computed: the
//! weights are unpacked once for four tokens). AVX2/FMA versions are chosen at run time ([`level`]);
//! the portable versions give the same sums up to float rounding (tested below). (An AVX-512 VNNI
//! variant, one instruction for `maddubs` + `madd`, measured no faster on a Zen 4: not kept.)

use half::f16;

/// Values per block.
pub const BLOCK: usize = 32;

/// A tensor format as the file stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q8_0,
    /// Held as Q8_0 blocks (the same values: 5 bits fit in 8).
    Q5_0,
    /// Held as 8-bit blocks with Q5_1's minimum as the constant term.
    Q5_1,
    /// Q4_K's scales and minimums over 5-bit values: held as 8-bit blocks with a constant term.
    Q5K,
    /// 256-value super-blocks of eight 32-value blocks, each with a 6-bit scale and minimum: held as
    /// eight Q4_1-like blocks (the same values), so the Q4 kernel multiplies them.
    Q4K,
    /// 256-value super-blocks of sixteen 16-value groups, 6-bit values and an 8-bit scale per group:
    /// held as 32-value blocks of signed bytes with a scale per half.
    Q6K,
}

impl Format {
    /// Bytes of `values` values (a multiple of the block for the quantized formats).
    pub fn bytes(self, values: usize) -> usize {
        match self {
            Format::F32 => values * 4,
            Format::F16 => values * 2,
            Format::Q4_0 => values / BLOCK * 18,
            Format::Q4_1 => values / BLOCK * 20,
            Format::Q8_0 => values / BLOCK * 34,
            Format::Q5_0 => values / BLOCK * 22,
            Format::Q5_1 => values / BLOCK * 24,
            Format::Q5K => values / 256 * 176,
            Format::Q4K => values / 256 * 144,
            Format::Q6K => values / 256 * 210,
        }
    }
}

/// How a matrix is held in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    F32,
    /// Q4_0 or Q4_1: 16 bytes of nibbles per block (low nibble value j, high nibble value j + 16).
    Q4,
    /// 32 signed bytes per block, and a constant term per block when `c` is not empty (Q5_1, Q5_K).
    Q8,
    /// 32 signed bytes per block and a scale for each 16 (Q6_K).
    Q8Halves,
}

/// A `rows × cols` weight matrix, row-major.
#[derive(Debug, Clone)]
pub struct QMatrix {
    pub rows: usize,
    pub cols: usize,
    held: Held,
    /// Per block: the scale.
    d: Vec<f32>,
    /// Per block of Q4: the constant term (`−8d` for Q4_0, `m` for Q4_1).
    c: Vec<f32>,
    qs: Vec<u8>,
    /// F32 only.
    f: Vec<f32>,
}

fn half_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

impl QMatrix {
    /// A matrix from a GGUF tensor's bytes (`rows` rows of `cols` values).
    pub fn from_gguf(format: Format, rows: usize, cols: usize, bytes: &[u8]) -> Result<QMatrix, String> {
        let block = match format {
            Format::F32 | Format::F16 => 1,
            Format::Q4K | Format::Q5K | Format::Q6K => 256,
            _ => BLOCK,
        };
        if !cols.is_multiple_of(block) {
            return Err(format!("{format:?} rows of {cols} values are not whole blocks"));
        }
        let want = format.bytes(rows * cols);
        if bytes.len() != want {
            return Err(format!(
                "{format:?} {rows}×{cols} needs {want} bytes, found {}",
                bytes.len()
            ));
        }
        let blocks = rows * cols / BLOCK;
        let mut m = QMatrix {
            rows,
            cols,
            held: Held::F32,
            d: Vec::new(),
            c: Vec::new(),
            qs: Vec::new(),
            f: Vec::new(),
        };
        match format {
            Format::F32 => {
                m.f = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
            }
            Format::F16 => m.f = bytes.chunks_exact(2).map(|b| half_at(b, 0)).collect(),
            Format::Q4_0 | Format::Q4_1 => {
                m.held = Held::Q4;
                let size = if format == Format::Q4_0 { 18 } else { 20 };
                m.d.reserve(blocks);
                m.c.reserve(blocks);
                m.qs.reserve(blocks * 16);
                for block in bytes.chunks_exact(size) {
                    let d = half_at(block, 0);
                    m.d.push(d);
                    m.c.push(if format == Format::Q4_0 {
                        -8. * d
                    } else {
                        half_at(block, 2)
                    });
                    m.qs.extend_from_slice(&block[size - 16..]);
                }
            }
            Format::Q4K => {
                m.held = Held::Q4;
                m.d.reserve(blocks);
                m.c.reserve(blocks);
                m.qs.reserve(blocks * 16);
                for block in bytes.chunks_exact(144) {
                    let (d, dmin) = (half_at(block, 0), half_at(block, 2));
                    let (scales, q) = (&block[4..16], &block[16..]);
                    for j in 0..4 {
                        let group = &q[32 * j..32 * j + 32];
                        for (half, shift) in [(0, 0), (1, 4)] {
                            let (scale, min) = q4k_scale_min(2 * j + half, scales);
                            m.d.push(d * f32::from(scale));
                            m.c.push(-dmin * f32::from(min));
                            // The group's low nibbles are one block, its high nibbles the next.
                            m.qs.extend(
                                (0..16).map(|i| ((group[i] >> shift) & 15) | (((group[i + 16] >> shift) & 15) << 4)),
                            );
                        }
                    }
                }
            }
            Format::Q5_0 | Format::Q5_1 => {
                m.held = Held::Q8;
                let (size, offset) = if format == Format::Q5_0 { (22, 16) } else { (24, 0) };
                for block in bytes.chunks_exact(size) {
                    m.d.push(half_at(block, 0));
                    if format == Format::Q5_1 {
                        m.c.push(half_at(block, 2));
                    }
                    let high = u32::from_le_bytes(block[size - 20..size - 16].try_into().expect("4 bytes"));
                    let qs = &block[size - 16..];
                    let five = |low: u8, bit: usize| (i32::from(low) | (((high >> bit) & 1) as i32) << 4) - offset;
                    let mut values = [0u8; 32];
                    for j in 0..16 {
                        values[j] = five(qs[j] & 0xF, j) as i8 as u8;
                        values[j + 16] = five(qs[j] >> 4, j + 16) as i8 as u8;
                    }
                    m.qs.extend_from_slice(&values);
                }
            }
            Format::Q5K => {
                m.held = Held::Q8;
                for block in bytes.chunks_exact(176) {
                    let (d, dmin) = (half_at(block, 0), half_at(block, 2));
                    let (scales, qh, ql) = (&block[4..16], &block[16..48], &block[48..]);
                    for j in 0..4 {
                        let group = &ql[32 * j..32 * j + 32];
                        for (half, shift) in [(0, 0), (1, 4)] {
                            let (scale, min) = q4k_scale_min(2 * j + half, scales);
                            m.d.push(d * f32::from(scale));
                            m.c.push(-dmin * f32::from(min));
                            let bit = 2 * j + half;
                            m.qs.extend((0..32).map(|l| ((group[l] >> shift) & 0xF) | (((qh[l] >> bit) & 1) << 4)));
                        }
                    }
                }
            }
            Format::Q6K => {
                m.held = Held::Q8Halves;
                m.d.reserve(blocks * 2);
                m.qs.reserve(blocks * 32);
                for block in bytes.chunks_exact(210) {
                    let (ql, qh, scales) = (&block[..128], &block[128..192], &block[192..208]);
                    let d = half_at(block, 208);
                    let mut q = [0u8; 256];
                    for half in 0..2 {
                        let (ql, qh, y) = (&ql[64 * half..], &qh[32 * half..], &mut q[128 * half..]);
                        for l in 0..32 {
                            let six = |low: u8, high: u8| ((low | (high & 3) << 4) as i8 - 32) as u8;
                            y[l] = six(ql[l] & 0xF, qh[l]);
                            y[l + 32] = six(ql[l + 32] & 0xF, qh[l] >> 2);
                            y[l + 64] = six(ql[l] >> 4, qh[l] >> 4);
                            y[l + 96] = six(ql[l + 32] >> 4, qh[l] >> 6);
                        }
                    }
                    m.d.extend(scales.iter().map(|&sc| d * f32::from(sc as i8)));
                    m.qs.extend_from_slice(&q);
                }
            }
            Format::Q8_0 => {
                m.held = Held::Q8;
                m.d.reserve(blocks);
                m.qs.reserve(blocks * 32);
                for block in bytes.chunks_exact(34) {
                    m.d.push(half_at(block, 0));
                    m.qs.extend_from_slice(&block[2..]);
                }
            }
        }
        Ok(m)
    }

    /// `values` (row-major) quantized to Q8_0, as llama.cpp quantizes it.
    pub fn q8_0(rows: usize, cols: usize, values: &[f32]) -> Result<QMatrix, String> {
        if !cols.is_multiple_of(BLOCK) || values.len() != rows * cols {
            return Err(format!(
                "cannot make {rows}×{cols} Q8_0 blocks of {} values",
                values.len()
            ));
        }
        let blocks = rows * cols / BLOCK;
        let mut d = vec![0.; blocks];
        let mut s = vec![0.; blocks];
        let mut q = vec![0i8; rows * cols];
        quantize_row(values, &mut d, &mut s, &mut q);
        Ok(QMatrix {
            rows,
            cols,
            held: Held::Q8,
            d,
            c: Vec::new(),
            qs: q.into_iter().map(|v| v as u8).collect(),
            f: Vec::new(),
        })
    }

    /// Row `r` as floats.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let n = self.cols;
        match self.held {
            Held::F32 => out.copy_from_slice(&self.f[r * n..(r + 1) * n]),
            Held::Q4 => {
                for (b, block) in out.chunks_exact_mut(BLOCK).enumerate() {
                    let i = r * n / BLOCK + b;
                    let (d, c) = (self.d[i], self.c[i]);
                    for (j, &byte) in self.qs[i * 16..i * 16 + 16].iter().enumerate() {
                        block[j] = d * f32::from(byte & 15) + c;
                        block[j + 16] = d * f32::from(byte >> 4) + c;
                    }
                }
            }
            Held::Q8 => {
                for (b, block) in out.chunks_exact_mut(BLOCK).enumerate() {
                    let i = r * n / BLOCK + b;
                    let c = self.c.get(i).copied().unwrap_or(0.);
                    for (o, &q) in block.iter_mut().zip(&self.qs[i * 32..i * 32 + 32]) {
                        *o = self.d[i] * f32::from(q as i8) + c;
                    }
                }
            }
            Held::Q8Halves => {
                for (v, o) in out.iter_mut().enumerate() {
                    let i = r * n + v;
                    *o = self.d[i / 16] * f32::from(self.qs[i] as i8);
                }
            }
        }
    }

    /// Bytes held (what a decoding step reads).
    pub fn size(&self) -> usize {
        self.d.len() * 4 + self.c.len() * 4 + self.qs.len() + self.f.len() * 4
    }

    /// The dot products of row `r` with the activation rows `a`.
    #[inline]
    pub fn dot<const N: usize>(&self, r: usize, a: [ActRow; N]) -> [f32; N] {
        let n = self.cols;
        let nb = n / BLOCK;
        match self.held {
            Held::F32 => {
                let w = &self.f[r * n..(r + 1) * n];
                a.map(|a| dot_f32(w, a.f))
            }
            Held::Q8Halves => {
                let (d, qs) = (&self.d[2 * r * nb..2 * (r + 1) * nb], &self.qs[r * n..(r + 1) * n]);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the level says the CPU has the kernel's instructions; as below.
                match level() {
                    Level::Avx2 => return unsafe { x86::q8_halves(d, qs, a) },
                    Level::Scalar => {}
                }
                scalar_q8_halves(d, qs, a)
            }
            Held::Q4 | Held::Q8 => {
                let blocks = r * nb..(r + 1) * nb;
                let d = &self.d[blocks.clone()];
                if self.held == Held::Q4 {
                    let (c, qs) = (&self.c[blocks], &self.qs[r * nb * 16..(r + 1) * nb * 16]);
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: the level says the CPU has the kernel's instructions; every slice holds
                    // `nb` blocks (checked by the kernels' debug assertions, guaranteed by the shapes
                    // above).
                    match level() {
                        Level::Avx2 => return unsafe { x86::q4(d, c, qs, a) },
                        Level::Scalar => {}
                    }
                    return scalar_q4(d, c, qs, a);
                }
                let qs = &self.qs[r * n..(r + 1) * n];
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                let mut out = match level() {
                    Level::Avx2 => unsafe { x86::q8(d, qs, a) },
                    Level::Scalar => scalar_q8(d, qs, a),
                };
                #[cfg(not(target_arch = "x86_64"))]
                let mut out = scalar_q8(d, qs, a);
                if !self.c.is_empty() {
                    // The constant terms: Σ c·s over the row's blocks.
                    for (o, a) in out.iter_mut().zip(a) {
                        *o += dot_f32(&self.c[blocks.clone()], a.s);
                    }
                }
                out
            }
        }
    }
}

/// Block `j`'s 6-bit scale and minimum in a Q4_K super-block's 12 packed bytes (llama.cpp's
/// `get_scale_min_k4`).
fn q4k_scale_min(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// One row of activations: as floats, and quantized (per block the scale and `d·Σq`, then the values).
#[derive(Clone, Copy)]
pub struct ActRow<'a> {
    pub f: &'a [f32],
    pub d: &'a [f32],
    pub s: &'a [f32],
    pub q: &'a [i8],
}

/// Rows of activations, as floats and quantized to 8 bits (the tests' own; a forward pass keeps
/// them in buffers its threads share).
#[cfg(test)]
#[derive(Debug, Clone, Default)]
pub struct Acts {
    pub cols: usize,
    pub f: Vec<f32>,
    d: Vec<f32>,
    s: Vec<f32>,
    q: Vec<i8>,
}

#[cfg(test)]
impl Acts {
    pub fn new(rows: usize, cols: usize) -> Acts {
        Acts {
            cols,
            f: vec![0.; rows * cols],
            d: vec![0.; rows * cols / BLOCK],
            s: vec![0.; rows * cols / BLOCK],
            q: vec![0; rows * cols],
        }
    }

    pub fn row(&self, t: usize) -> ActRow<'_> {
        let (n, nb) = (self.cols, self.cols / BLOCK);
        ActRow {
            f: &self.f[t * n..(t + 1) * n],
            d: &self.d[t * nb..(t + 1) * nb],
            s: &self.s[t * nb..(t + 1) * nb],
            q: &self.q[t * n..(t + 1) * n],
        }
    }
}

/// `x` rounded to the nearest integer, ties to even (as `_mm256_round_ps` does in llama.cpp's AVX2
/// quantizer), for |x| < 2²²: adding and taking away 1.5·2²³ leaves no fraction bits. Unlike
/// `f32::round` it is not a library call on baseline x86-64.
#[inline]
fn round(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.;
    (x + MAGIC) - MAGIC
}

/// `e^x` to within 2 ulp (Cephes' polynomial), inlined where libm's `expf` would be a call: the
/// feed-forward's gates and attention's softmax take one per value. Inputs are clamped to ±88.
#[inline]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.3);
    let n = round(x * std::f32::consts::LOG2_E);
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p =
        ((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 0.166_666_65) * r + 0.5;
    let y = p * r * r + r + 1.;
    y * f32::from_bits(((n as i32 + 127) << 23) as u32)
}

/// Quantizes `x` to 8-bit blocks as llama.cpp's `quantize_row_q8_1` does: the scale is `max|x|/127`
/// stored as a half, values rounded from `x / scale` before the scale is rounded; `s = d·Σq`.
pub fn quantize_row(x: &[f32], d: &mut [f32], s: &mut [f32], q: &mut [i8]) {
    for (b, (block, qb)) in x.chunks_exact(BLOCK).zip(q.chunks_exact_mut(BLOCK)).enumerate() {
        let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = amax / 127.;
        let inv = if scale == 0. { 0. } else { 1. / scale };
        let mut sum = 0i32;
        for (o, &v) in qb.iter_mut().zip(block) {
            let r = round(v * inv) as i32;
            *o = r as i8;
            sum += r;
        }
        d[b] = f16::from_f32(scale).to_f32();
        s[b] = d[b] * sum as f32;
    }
}

fn scalar_q4<const N: usize>(d: &[f32], c: &[f32], qs: &[u8], a: [ActRow; N]) -> [f32; N] {
    let mut out = [0f32; N];
    for (n, a) in a.iter().enumerate() {
        let mut acc = 0f32;
        for b in 0..d.len() {
            let q = &a.q[b * BLOCK..(b + 1) * BLOCK];
            let mut sum = 0i32;
            for (j, &byte) in qs[b * 16..b * 16 + 16].iter().enumerate() {
                sum += i32::from(byte & 15) * i32::from(q[j]) + i32::from(byte >> 4) * i32::from(q[j + 16]);
            }
            acc += d[b] * a.d[b] * sum as f32 + c[b] * a.s[b];
        }
        out[n] = acc;
    }
    out
}

fn scalar_q8<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [f32; N] {
    let mut out = [0f32; N];
    for (n, a) in a.iter().enumerate() {
        let mut acc = 0f32;
        for b in 0..d.len() {
            let sum: i32 = qs[b * BLOCK..(b + 1) * BLOCK]
                .iter()
                .zip(&a.q[b * BLOCK..(b + 1) * BLOCK])
                .map(|(&w, &q)| i32::from(w as i8) * i32::from(q))
                .sum();
            acc += d[b] * a.d[b] * sum as f32;
        }
        out[n] = acc;
    }
    out
}

fn scalar_q8_halves<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [f32; N] {
    let mut out = [0f32; N];
    for (n, a) in a.iter().enumerate() {
        let mut acc = 0f32;
        for (h, half) in qs.chunks_exact(16).enumerate() {
            let sum: i32 = half
                .iter()
                .zip(&a.q[h * 16..h * 16 + 16])
                .map(|(&w, &q)| i32::from(w as i8) * i32::from(q))
                .sum();
            acc += d[h] * a.d[h / 2] * sum as f32;
        }
        out[n] = acc;
    }
    out
}

/// The instruction sets the kernels use, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Portable Rust: any CPU.
    Scalar,
    /// AVX2 and FMA.
    Avx2,
}

/// The kernels this process runs: the best the CPU has, or the portable ones with
/// `INCHARACTER_KERNELS=scalar` (to compare the paths).
#[inline]
pub fn level() -> Level {
    use std::sync::OnceLock;
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| match std::env::var("INCHARACTER_KERNELS").as_deref() {
        Ok("scalar") => Level::Scalar,
        _ => detected(),
    })
}

#[cfg(target_arch = "x86_64")]
fn detected() -> Level {
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        Level::Avx2
    } else {
        Level::Scalar
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detected() -> Level {
    Level::Scalar
}

#[inline]
fn avx2() -> bool {
    level() >= Level::Avx2
}

/// `Σ a·b`.
#[inline]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: AVX2 and FMA are present.
        return unsafe { x86::dot_f32(a, b) };
    }
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `out += w·v`.
#[inline]
pub fn axpy(out: &mut [f32], w: f32, v: &[f32]) {
    debug_assert_eq!(out.len(), v.len());
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: AVX2 and FMA are present.
        return unsafe { x86::axpy(out, w, v) };
    }
    for (o, x) in out.iter_mut().zip(v) {
        *o += w * x;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
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
        acc.map(|v| sum(v))
    }

    /// Q6_K rows: as 8-bit rows, with the block's two scales side by side (the first four
    /// lanes of the integer sums are its first 16 values).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn q8_halves<const N: usize>(d: &[f32], qs: &[u8], a: [ActRow; N]) -> [f32; N] {
        debug_assert!(qs.len() == d.len() * 16);
        debug_assert!(a.iter().all(|a| a.d.len() * 2 == d.len() && a.q.len() == qs.len()));
        let mut acc = [_mm256_setzero_ps(); N];
        for b in 0..d.len() / 2 {
            // SAFETY (all loads): block b is in bounds of every slice (debug-asserted above).
            let w = unsafe { _mm256_loadu_si256(qs.as_ptr().add(b * BLOCK).cast()) };
            let abs = _mm256_sign_epi8(w, w);
            let scales = unsafe {
                _mm256_set_m128(
                    _mm_set1_ps(*d.get_unchecked(2 * b + 1)),
                    _mm_set1_ps(*d.get_unchecked(2 * b)),
                )
            };
            for n in 0..N {
                let q = unsafe { _mm256_loadu_si256(a[n].q.as_ptr().add(b * BLOCK).cast()) };
                let p = _mm256_cvtepi32_ps(pairs(abs, _mm256_sign_epi8(q, w)));
                let ad = unsafe { *a[n].d.get_unchecked(b) };
                acc[n] = _mm256_fmadd_ps(_mm256_mul_ps(scales, _mm256_set1_ps(ad)), p, acc[n]);
            }
        }
        acc.map(|v| sum(v))
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic spread of values (xorshift), some large, some zero blocks.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if (i / BLOCK) % 7 == 3 {
                    0.
                } else {
                    ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.
                }
            })
            .collect()
    }

    fn gguf_bytes(format: Format, v: &[f32]) -> Vec<u8> {
        let mut out = Vec::new();
        for block in v.chunks_exact(BLOCK) {
            let (lo, hi) = block
                .iter()
                .fold((f32::MAX, f32::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            match format {
                Format::Q4_0 => {
                    let max = block.iter().fold(0f32, |m, &x| if x.abs() > m.abs() { x } else { m });
                    let d = max / -8.;
                    let id = if d == 0. { 0. } else { 1. / d };
                    out.extend(f16::from_f32(d).to_le_bytes());
                    for j in 0..16 {
                        let q = |x: f32| ((x * id + 8.5) as u8).min(15);
                        out.push(q(block[j]) | (q(block[j + 16]) << 4));
                    }
                }
                Format::Q4_1 => {
                    let d = (hi - lo) / 15.;
                    let id = if d == 0. { 0. } else { 1. / d };
                    out.extend(f16::from_f32(d).to_le_bytes());
                    out.extend(f16::from_f32(lo).to_le_bytes());
                    for j in 0..16 {
                        let q = |x: f32| (((x - lo) * id + 0.5) as u8).min(15);
                        out.push(q(block[j]) | (q(block[j + 16]) << 4));
                    }
                }
                Format::Q8_0 => {
                    let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
                    let d = amax / 127.;
                    let id = if d == 0. { 0. } else { 1. / d };
                    out.extend(f16::from_f32(d).to_le_bytes());
                    out.extend(block.iter().map(|x| (x * id).round() as i8 as u8));
                }
                Format::Q4K | Format::Q5K | Format::Q6K => unreachable!("the tests build K-quant blocks from bytes"),
                Format::Q5_0 | Format::Q5_1 => {
                    let (lo, step) = if format == Format::Q5_0 {
                        let max = block.iter().fold(0f32, |m, &x| if x.abs() > m.abs() { x } else { m });
                        (0., max / -16.)
                    } else {
                        (lo, (hi - lo) / 31.)
                    };
                    let id = if step == 0. { 0. } else { 1. / step };
                    out.extend(f16::from_f32(step).to_le_bytes());
                    if format == Format::Q5_1 {
                        out.extend(f16::from_f32(lo).to_le_bytes());
                    }
                    let q: Vec<u32> = block
                        .iter()
                        .map(|&x| {
                            if format == Format::Q5_0 {
                                ((x * id + 16.5) as u32).min(31)
                            } else {
                                (((x - lo) * id + 0.5) as u32).min(31)
                            }
                        })
                        .collect();
                    let high = (0..32).fold(0u32, |h, j| h | ((q[j] >> 4) << j));
                    out.extend(high.to_le_bytes());
                    out.extend((0..16).map(|j| (q[j] & 0xF) as u8 | (((q[j + 16] & 0xF) as u8) << 4)));
                }
                Format::F32 => out.extend(block.iter().flat_map(|x| x.to_le_bytes())),
                Format::F16 => out.extend(block.iter().flat_map(|x| f16::from_f32(*x).to_le_bytes())),
            }
        }
        out
    }

    fn acts(rows: usize, cols: usize, seed: u64) -> Acts {
        let mut a = Acts::new(rows, cols);
        a.f = values(rows * cols, seed);
        quantize_row(&a.f, &mut a.d, &mut a.s, &mut a.q);
        a
    }

    /// The float product of the dequantized row with the dequantized activations: what the integer
    /// kernels must compute, up to the order of float additions.
    fn reference(m: &QMatrix, r: usize, a: &Acts, t: usize) -> f32 {
        let mut w = vec![0.; m.cols];
        m.dequantize_row(r, &mut w);
        let mut x = vec![0.; m.cols];
        let row = a.row(t);
        for (b, block) in x.chunks_exact_mut(BLOCK).enumerate() {
            for (o, &q) in block.iter_mut().zip(&row.q[b * BLOCK..]) {
                *o = row.d[b] * f32::from(q);
            }
        }
        if m.held == Held::F32 {
            x.copy_from_slice(&a.f[t * m.cols..(t + 1) * m.cols]);
        }
        w.iter()
            .zip(&x)
            .map(|(a, b)| f64::from(*a) * f64::from(*b))
            .sum::<f64>() as f32
    }

    #[test]
    fn every_kernel_equals_the_float_product_of_what_the_blocks_hold() {
        let (rows, cols) = (6, 8 * BLOCK);
        let a = acts(5, cols, 7);
        for format in [
            Format::F32,
            Format::F16,
            Format::Q4_0,
            Format::Q4_1,
            Format::Q8_0,
            Format::Q5_0,
            Format::Q5_1,
        ] {
            let w = values(rows * cols, 3);
            let m = QMatrix::from_gguf(format, rows, cols, &gguf_bytes(format, &w)).unwrap();
            for r in 0..rows {
                let four = m.dot(r, [a.row(0), a.row(1), a.row(2), a.row(3)]);
                let one = m.dot(r, [a.row(4)]);
                for (t, got) in four.iter().chain(&one).enumerate() {
                    let want = reference(&m, r, &a, t);
                    assert!(
                        (got - want).abs() <= 1e-4 * (1. + want.abs()),
                        "{format:?} row {r} token {t}: {got} vs {want}"
                    );
                    let scalar = match m.held {
                        Held::Q4 => {
                            let nb = cols / BLOCK;
                            scalar_q4(
                                &m.d[r * nb..(r + 1) * nb],
                                &m.c[r * nb..(r + 1) * nb],
                                &m.qs[r * nb * 16..(r + 1) * nb * 16],
                                [a.row(t)],
                            )[0]
                        }
                        Held::Q8 => {
                            let blocks = r * cols / BLOCK..(r + 1) * cols / BLOCK;
                            let constant: f32 =
                                m.c.get(blocks.clone())
                                    .map_or(0., |c| c.iter().zip(a.row(t).s).map(|(c, s)| c * s).sum());
                            scalar_q8(&m.d[blocks], &m.qs[r * cols..(r + 1) * cols], [a.row(t)])[0] + constant
                        }
                        Held::Q8Halves => unreachable!("no Q6_K among these formats"),
                        Held::F32 => a.f[t * cols..(t + 1) * cols]
                            .iter()
                            .zip(&m.f[r * cols..])
                            .map(|(x, y)| x * y)
                            .sum(),
                    };
                    assert!(
                        (got - scalar).abs() <= 1e-4 * (1. + scalar.abs()),
                        "{format:?}: fast {got} vs scalar {scalar}"
                    );
                }
            }
        }
    }

    #[test]
    fn quantized_rows_dequantize_close_to_what_was_quantized() {
        let v = values(4 * BLOCK, 11);
        for (format, tolerance) in [
            (Format::Q8_0, 0.02),
            (Format::Q4_0, 0.3),
            (Format::Q4_1, 0.15),
            (Format::Q5_0, 0.15),
            (Format::Q5_1, 0.07),
        ] {
            let m = QMatrix::from_gguf(format, 1, v.len(), &gguf_bytes(format, &v)).unwrap();
            let mut out = vec![0.; v.len()];
            m.dequantize_row(0, &mut out);
            let worst = out.iter().zip(&v).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst <= tolerance, "{format:?}: {worst}");
        }
        let m = QMatrix::q8_0(2, 2 * BLOCK, &v[..4 * BLOCK]).unwrap();
        let mut out = vec![0.; 2 * BLOCK];
        m.dequantize_row(1, &mut out);
        assert!(out.iter().zip(&v[2 * BLOCK..]).all(|(a, b)| (a - b).abs() <= 0.02));
    }

    #[test]
    fn activations_round_as_llama_cpp_does() {
        let x: Vec<f32> = (0..BLOCK).map(|i| i as f32 - 15.5).collect();
        let (mut d, mut s, mut q) = ([0.; 1], [0.; 1], [0i8; BLOCK]);
        quantize_row(&x, &mut d, &mut s, &mut q);
        assert_eq!(q[0], -127);
        assert_eq!(q[31], 127);
        assert_eq!(d[0], f16::from_f32(15.5 / 127.).to_f32());
        assert_eq!(s[0], d[0] * q.iter().map(|&v| i32::from(v)).sum::<i32>() as f32);
        let zero = [0f32; BLOCK];
        quantize_row(&zero, &mut d, &mut s, &mut q);
        assert_eq!((d[0], s[0], q), (0., 0., [0; BLOCK]));
    }

    /// llama.cpp's `dequantize_row_q4_K`, transcribed.
    fn q4k_reference(block: &[u8]) -> Vec<f32> {
        let (d, min) = (half_at(block, 0), half_at(block, 2));
        let (scales, mut q) = (&block[4..16], &block[16..]);
        let mut y = Vec::new();
        for j in (0..256).step_by(64) {
            let is = j / 32;
            let (sc, m) = q4k_scale_min(is, scales);
            let (d1, m1) = (d * f32::from(sc), min * f32::from(m));
            let (sc, m) = q4k_scale_min(is + 1, scales);
            let (d2, m2) = (d * f32::from(sc), min * f32::from(m));
            y.extend(q[..32].iter().map(|&b| d1 * f32::from(b & 0xF) - m1));
            y.extend(q[..32].iter().map(|&b| d2 * f32::from(b >> 4) - m2));
            q = &q[32..];
        }
        y
    }

    /// Every kernel this CPU can run, called directly (whatever `level` chose), against the scalar one.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_instruction_set_gives_the_scalar_sums() {
        use std::arch::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("fma");
        let cols = 8 * BLOCK;
        let a = acts(2, cols, 41);
        let rows = [a.row(0), a.row(1)];
        let close = |x: [f32; 2], y: [f32; 2]| x.iter().zip(&y).all(|(x, y)| (x - y).abs() <= 1e-4 * (1. + y.abs()));
        for format in [Format::Q4_1, Format::Q8_0] {
            let m = QMatrix::from_gguf(format, 1, cols, &gguf_bytes(format, &values(cols, 43))).unwrap();
            let (d, c, qs) = (&m.d[..], &m.c[..], &m.qs[..]);
            let scalar = if format == Format::Q4_1 {
                scalar_q4(d, c, qs, rows)
            } else {
                scalar_q8(d, qs, rows)
            };
            // SAFETY: each kernel runs only where the CPU has its instructions.
            if avx2 {
                let fast = unsafe {
                    if format == Format::Q4_1 {
                        x86::q4(d, c, qs, rows)
                    } else {
                        x86::q8(d, qs, rows)
                    }
                };
                assert!(close(fast, scalar), "{format:?} avx2: {fast:?} vs {scalar:?}");
            }
        }
        let halves: Vec<f32> = (0..cols / 16).map(|i| 0.01 + i as f32 * 1e-3).collect();
        let qs: Vec<u8> = values(cols, 47).iter().map(|v| (v * 20.) as i8 as u8).collect();
        let scalar = scalar_q8_halves(&halves, &qs, rows);
        if avx2 {
            assert!(close(unsafe { x86::q8_halves(&halves, &qs, rows) }, scalar));
        }
    }

    /// `count` random super-blocks of `size` bytes, their half-float scale(s) set to sane values:
    /// `d` and `dmin` first (Q4_K, Q5_K) or `d` last (Q6_K).
    fn super_blocks(count: usize, size: usize, seed: u64, scales_first: bool) -> Vec<u8> {
        let noise = values(count * size, seed);
        let mut bytes = Vec::new();
        for (i, block) in noise.chunks_exact(size).enumerate() {
            let d = f16::from_f32(0.002 + i as f32 * 0.001).to_le_bytes();
            if scales_first {
                bytes.extend(d);
                bytes.extend(f16::from_f32(0.03).to_le_bytes());
            }
            let body = if scales_first { &block[4..] } else { &block[..size - 2] };
            bytes.extend(body.iter().map(|v| (v.to_bits() >> 7) as u8));
            if !scales_first {
                bytes.extend(d);
            }
        }
        bytes
    }

    /// A K-quant matrix of two super-blocks per row holds the values of llama.cpp's dequantizer
    /// (`dequantize`, transcribed) and multiplies four tokens as the float product of those values.
    fn holds_llama_cpps_values(format: Format, size: usize, scales_first: bool, dequantize: fn(&[u8]) -> Vec<f32>) {
        let rows = 3;
        let bytes = super_blocks(rows * 2, size, size as u64, scales_first);
        let m = QMatrix::from_gguf(format, rows, 512, &bytes).unwrap();
        let a = acts(4, 512, 17);
        for r in 0..rows {
            let mut got = vec![0.; 512];
            m.dequantize_row(r, &mut got);
            let want: Vec<f32> = bytes[r * 2 * size..(r + 1) * 2 * size]
                .chunks_exact(size)
                .flat_map(dequantize)
                .collect();
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(g, w)| (g - w).abs() <= 1e-6 * (1. + w.abs())),
                "{format:?} row {r}"
            );
            let four = m.dot(r, [a.row(0), a.row(1), a.row(2), a.row(3)]);
            for (t, got) in four.into_iter().enumerate() {
                let want = reference(&m, r, &a, t);
                assert!(
                    (got - want).abs() <= 1e-4 * (1. + want.abs()),
                    "{format:?} row {r} token {t}: {got} vs {want}"
                );
            }
        }
        let short = format.bytes(256) - 1;
        assert!(
            QMatrix::from_gguf(format, 1, 288, &vec![0; short])
                .unwrap_err()
                .contains("not whole blocks")
        );
    }

    #[test]
    fn k_quant_blocks_hold_llama_cpps_values_and_multiply_like_them() {
        holds_llama_cpps_values(Format::Q4K, 144, true, q4k_reference);
        holds_llama_cpps_values(Format::Q5K, 176, true, q5k_reference);
        holds_llama_cpps_values(Format::Q6K, 210, false, q6k_reference);
    }

    /// llama.cpp's `dequantize_row_q6_K`, transcribed.
    fn q6k_reference(block: &[u8]) -> Vec<f32> {
        let d = half_at(block, 208);
        let mut y = vec![0f32; 256];
        for n in 0..2 {
            let (ql, qh, sc) = (&block[64 * n..], &block[128 + 32 * n..], &block[192 + 8 * n..]);
            for l in 0..32 {
                let is = l / 16;
                let q = |low: u8, high: u8| i32::from(low | ((high & 3) << 4)) - 32;
                let s = |k: usize| d * f32::from(sc[k] as i8);
                y[128 * n + l] = s(is) * q(ql[l] & 0xF, qh[l]) as f32;
                y[128 * n + l + 32] = s(is + 2) * q(ql[l + 32] & 0xF, qh[l] >> 2) as f32;
                y[128 * n + l + 64] = s(is + 4) * q(ql[l] >> 4, qh[l] >> 4) as f32;
                y[128 * n + l + 96] = s(is + 6) * q(ql[l + 32] >> 4, qh[l] >> 6) as f32;
            }
        }
        y
    }

    /// llama.cpp's `dequantize_row_q5_K`, transcribed.
    fn q5k_reference(block: &[u8]) -> Vec<f32> {
        let (d, min) = (half_at(block, 0), half_at(block, 2));
        let (scales, qh, mut ql) = (&block[4..16], &block[16..48], &block[48..]);
        let (mut u1, mut u2) = (1u8, 2u8);
        let mut y = Vec::new();
        for j in (0..256).step_by(64) {
            let is = j / 32;
            let (sc, m) = q4k_scale_min(is, scales);
            let (d1, m1) = (d * f32::from(sc), min * f32::from(m));
            let (sc, m) = q4k_scale_min(is + 1, scales);
            let (d2, m2) = (d * f32::from(sc), min * f32::from(m));
            y.extend((0..32).map(|l| d1 * f32::from((ql[l] & 0xF) + if qh[l] & u1 != 0 { 16 } else { 0 }) - m1));
            y.extend((0..32).map(|l| d2 * f32::from((ql[l] >> 4) + if qh[l] & u2 != 0 { 16 } else { 0 }) - m2));
            ql = &ql[32..];
            u1 <<= 2;
            u2 <<= 2;
        }
        y
    }

    #[test]
    fn a_matrix_of_the_wrong_size_is_refused_with_its_shape() {
        let e = QMatrix::from_gguf(Format::Q4_0, 2, 64, &[0; 10]).unwrap_err();
        assert!(e.contains("Q4_0 2×64 needs 72 bytes, found 10"), "{e}");
        let e = QMatrix::from_gguf(Format::Q8_0, 1, 48, &[0; 51]).unwrap_err();
        assert!(e.contains("not whole blocks"), "{e}");
    }

    #[test]
    fn the_inlined_exp_is_within_two_ulp_of_libms() {
        let mut worst = 0f32;
        for i in -87_000..88_000 {
            let x = i as f32 / 1000. + 0.000_37;
            let (got, want) = (exp(x), x.exp());
            worst = worst.max((got - want).abs() / want);
        }
        assert!(worst < 2.5e-7, "{worst}");
        assert_eq!(exp(0.), 1.);
        assert!(exp(-1e30) < 1e-37 && exp(f32::NEG_INFINITY) < 1e-37);
        assert_eq!((round(2.5), round(3.5), round(-2.5), round(-0.4)), (2., 4., -2., -0.));
    }

    #[test]
    fn float_helpers_agree_with_plain_loops() {
        let a = values(77, 5);
        let b = values(77, 6);
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot_f32(&a, &b) - plain).abs() < 1e-4 * (1. + plain.abs()));
        let mut out = a.clone();
        axpy(&mut out, 0.5, &b);
        assert!(
            out.iter()
                .zip(a.iter().zip(&b))
                .all(|(o, (x, y))| (o - (x + 0.5 * y)).abs() < 1e-6)
        );
    }
}
