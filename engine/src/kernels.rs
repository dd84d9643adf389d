//! Weight matrices in GGUF's block formats and the dot products over them.
//!
//! A row of weights is a run of 32-value blocks, each a scale and small integers. A row of
//! activations is quantized the same way to 8 bits (a scale `d` and the sum `s = d·Σq` per block,
//! rounded as llama.cpp rounds them), so a block's dot product is one integer sum times two scales:
//!
//! - Q4_0 holds `w = d·(u − 8)` and Q4_1 `w = d·u + m` with `u` in 0..16, both `w = d·u + c`: the
//!   block's product is `d_w·d_a·Σ u·q + c·s`, the same kernel for both;
//! - Q8_0 holds `w = d·q`: `d_w·d_a·Σ q·q`; Q5_0, Q5_1 and Q5_K are held so too (5 bits fit in 8),
//!   with Q5_1's and Q5_K's minimums as a constant term `c·s`;
//! - Q4_K and Q6_K keep the file's values and scales (256-value super-blocks, 4.5 and 6.5 bits a
//!   value, only Q4_K's packed 6-bit scales unpacked), interleaved eight rows at a time (see
//!   [`interleaved`]), and multiply the activations' other quantization, llama.cpp's Q8_K (one scale per
//!   256, the sum of each 16 beside): the sub-block scales multiply integer sums, so a super-block
//!   costs one float step per activation row, as in llama.cpp's `vec_dot_q4_K_q8_K`;
//! - F32 (and F16, widened at load) rows multiply the activations as floats;
//! - BF16, Q8_1, Q2_K, Q3_K and Q8_K have no kernel: they are widened to floats at load as llama.cpp
//!   dequantizes them and held as Q8_0, within a fraction of their own rounding step.
//!
//! Scales are widened to f32 once, at load, so no kernel converts halves. A kernel multiplies weight
//! rows with `N` activation rows at once (N = 1 when decoding one sequence, up to 8 when a prompt or
//! several sequences are computed: the weights are unpacked once for all of them): the K-quant and
//! 8-bit kernels eight weight rows at a time (see [`interleaved`]; Q4_K and Q6_K sixteen, two groups
//! to a 512-bit register, for up to four activation rows where the CPU has AVX-512 VNNI), the Q4 and
//! F32 ones one.
//! AVX2/FMA versions are chosen at run time ([`level`]); where the CPU has AVX-512 VNNI, the K-quant
//! and 8-bit kernels take its one-instruction byte and word multiply-adds (`vpdpbusd`, `vpdpwssd`),
//! which give the same integer sums: the same bits. Those portable kernels give the same bits too;
//! the Q4 ones the same sums up to float rounding (tested below).

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
    /// they are, eight rows interleaved.
    Q4K,
    /// 256-value super-blocks of sixteen 16-value groups, 6-bit values and an 8-bit scale per group:
    /// held as they are, eight rows interleaved.
    Q6K,
    /// bfloat16 (widened, held as Q8_0).
    BF16,
    /// Q8_0 with the block's sum beside its scale (widened, held as Q8_0).
    Q8_1,
    /// 256-value super-blocks of 2-bit values, a 4-bit scale and minimum per 16 (widened, held as Q8_0).
    Q2K,
    /// 256-value super-blocks of 3-bit values and a 6-bit scale per 16 (widened, held as Q8_0).
    Q3K,
    /// 256 signed bytes and one f32 scale (widened, held as Q8_0).
    Q8K,
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
            Format::BF16 => values * 2,
            Format::Q8_1 => values / BLOCK * 36,
            Format::Q2K => values / 256 * 84,
            Format::Q3K => values / 256 * 110,
            Format::Q8K => values / 256 * 292,
        }
    }

    /// Values per block: a row's length must be a multiple of it.
    pub fn block(self) -> usize {
        match self {
            Format::F32 | Format::F16 | Format::BF16 => 1,
            Format::Q2K | Format::Q3K | Format::Q4K | Format::Q5K | Format::Q6K | Format::Q8K => 256,
            Format::Q4_0 | Format::Q4_1 | Format::Q5_0 | Format::Q5_1 | Format::Q8_0 | Format::Q8_1 => BLOCK,
        }
    }

    /// The values of `bytes` (whole blocks of this format) as floats, as llama.cpp dequantizes them.
    /// For the formats with a kernel, the values the engine multiplies (equal up to float rounding).
    pub fn widen(self, bytes: &[u8]) -> Result<Vec<f32>, String> {
        let (block, size) = (self.block(), self.bytes(self.block()));
        if !bytes.len().is_multiple_of(size) {
            return Err(format!(
                "{} bytes are not whole {self:?} blocks of {size} bytes",
                bytes.len()
            ));
        }
        let values = bytes.len() / size * block;
        let mut out = Vec::with_capacity(values);
        let blocks = bytes.chunks_exact(size);
        match self {
            Format::F32 => out.extend(blocks.map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
            Format::F16 => out.extend(blocks.map(|b| half_at(b, 0))),
            Format::BF16 => {
                out.extend(blocks.map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16)))
            }
            Format::Q8_1 => {
                for b in blocks {
                    let d = half_at(b, 0);
                    out.extend(b[4..].iter().map(|&q| f32::from(q as i8) * d));
                }
            }
            Format::Q8K => {
                for b in blocks {
                    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    out.extend(b[4..260].iter().map(|&q| f32::from(q as i8) * d));
                }
            }
            Format::Q2K => blocks.for_each(|b| widen_q2k(b, &mut out)),
            Format::Q3K => blocks.for_each(|b| widen_q3k(b, &mut out)),
            Format::Q4_0
            | Format::Q4_1
            | Format::Q5_0
            | Format::Q5_1
            | Format::Q8_0
            | Format::Q4K
            | Format::Q5K
            | Format::Q6K => {
                out.resize(values, 0.);
                QMatrix::from_gguf(self, 1, values, bytes)?.dequantize_row(0, &mut out);
            }
        }
        Ok(out)
    }
}

/// One Q2_K super-block (84 bytes: 16 scale bytes, 64 bytes of 2-bit values, d, dmin), as llama.cpp's
/// `dequantize_row_q2_K`.
fn widen_q2k(block: &[u8], out: &mut Vec<f32>) {
    let (scales, qs) = (&block[..16], &block[16..80]);
    let (d, min) = (half_at(block, 80), half_at(block, 82));
    let mut scale = scales.iter();
    for q in qs.chunks_exact(32) {
        for shift in [0, 2, 4, 6] {
            for half in q.chunks_exact(16) {
                let sc = scale.next().copied().unwrap_or(0);
                let (dl, ml) = (d * f32::from(sc & 0xF), min * f32::from(sc >> 4));
                out.extend(half.iter().map(|&v| dl * f32::from((v >> shift) & 3) - ml));
            }
        }
    }
}

/// One Q3_K super-block (110 bytes: 32 bytes of high bits, 64 of low 2-bit values, 12 of packed 6-bit
/// scales, d), as llama.cpp's `dequantize_row_q3_K`.
fn widen_q3k(block: &[u8], out: &mut Vec<f32>) {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let (hmask, qs, packed) = (&block[..32], &block[32..96], &block[96..108]);
    let d = half_at(block, 108);
    let word = |i: usize| u32::from_le_bytes([packed[4 * i], packed[4 * i + 1], packed[4 * i + 2], packed[4 * i + 3]]);
    let (a0, a1, tmp) = (word(0), word(1), word(2));
    let aux = [
        (a0 & KMASK2) | ((tmp & KMASK1) << 4),
        (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
    ];
    let scales: Vec<i8> = aux.iter().flat_map(|w| w.to_le_bytes()).map(|b| b as i8).collect();
    let (mut is, mut m) = (0, 1u8);
    for q in qs.chunks_exact(32) {
        for shift in [0, 2, 4, 6] {
            for half in 0..2 {
                let dl = d * (f32::from(scales[is]) - 32.);
                is += 1;
                for i in 16 * half..16 * half + 16 {
                    let low = ((q[i] >> shift) & 3) as i8;
                    let high = if hmask[i] & m == 0 { 4 } else { 0 };
                    out.push(dl * f32::from(low - high));
                }
            }
            m <<= 1;
        }
    }
}

/// How a matrix is held in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    F32,
    /// Q4_0 or Q4_1: 16 bytes of nibbles per block (low nibble value j, high nibble value j + 16).
    Q4,
    /// 32-value blocks of bytes in units of eight rows ([`interleaved`]: the scales in `d`, the
    /// constant terms in `c` when the format has them (Q5_1, Q5_K), the values as `w + 128` in `qs`).
    Q8,
    /// Q4_K's super-blocks in units of eight rows ([`interleaved`]: `d` and `dmin` per row in `d`, the
    /// unpacked scales and minimums and the file's nibbles in `qs`). Multiplied with the
    /// activations' Q8_K quantization.
    Q4K,
    /// Q6_K's super-blocks in units of eight rows ([`interleaved`]: `d` per row in `d`, the scales and
    /// the file's 6-bit values in `qs`). Multiplied with the activations' Q8_K quantization.
    Q6K,
}

/// A `rows × cols` weight matrix, row-major.
#[derive(Debug, Clone)]
pub struct QMatrix {
    pub rows: usize,
    pub cols: usize,
    held: Held,
    /// Per block: the scale (per unit of eight rows for the interleaved formats, see [`Held`]).
    d: Vec<f32>,
    /// Per block: the constant term (Q4: `−8d` for Q4_0, `m` for Q4_1; Q8: Q5_1's and Q5_K's).
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
        let block = format.block();
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
            Format::F32 | Format::F16 => m.f = format.widen(bytes)?,
            Format::BF16 | Format::Q8_1 | Format::Q2K | Format::Q3K | Format::Q8K => {
                return QMatrix::q8_0(rows, cols, &format.widen(bytes)?);
            }
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
                m.held = Held::Q4K;
                m.hold_units(bytes, 144, 16, interleaved::Q4K_UNIT, interleaved::put_q4k);
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
                m.held = Held::Q6K;
                m.hold_units(
                    bytes,
                    210,
                    interleaved::ROWS,
                    interleaved::Q6K_UNIT,
                    interleaved::put_q6k,
                );
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
        if m.held == Held::Q8 {
            m.interleave_q8();
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
        let mut sums = vec![0; blocks];
        quantize_row(values, &mut d, &mut s, &mut q, &mut sums);
        let mut m = QMatrix {
            rows,
            cols,
            held: Held::Q8,
            d,
            c: Vec::new(),
            qs: q.into_iter().map(|v| v as u8).collect(),
            f: Vec::new(),
        };
        m.interleave_q8();
        Ok(m)
    }

    /// Row-major 8-bit blocks (a scale, maybe a constant term, 32 signed bytes) into units of eight
    /// rows (see [`interleaved`]).
    fn interleave_q8(&mut self) {
        let nb = self.cols / BLOCK;
        let units = self.rows.div_ceil(interleaved::ROWS) * nb;
        let (mut d, mut c, mut qs) = (
            vec![0.; units * interleaved::ROWS],
            vec![
                0.;
                if self.c.is_empty() {
                    0
                } else {
                    units * interleaved::ROWS
                }
            ],
            vec![0x80; units * interleaved::Q8_UNIT],
        );
        for r in 0..self.rows {
            let lane = r % interleaved::ROWS;
            for b in 0..nb {
                let u = r / interleaved::ROWS * nb + b;
                let i = r * nb + b;
                d[u * interleaved::ROWS + lane] = self.d[i];
                if let Some(&ci) = self.c.get(i) {
                    c[u * interleaved::ROWS + lane] = ci;
                }
                interleaved::put_q8(
                    lane,
                    &self.qs[i * BLOCK..(i + 1) * BLOCK],
                    &mut qs[u * interleaved::Q8_UNIT..],
                );
            }
        }
        (self.d, self.c, self.qs) = (d, c, qs);
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
                let lane = r % interleaved::ROWS;
                for (b, block) in out.chunks_exact_mut(BLOCK).enumerate() {
                    let u = r / interleaved::ROWS * (n / BLOCK) + b;
                    let i = u * interleaved::ROWS + lane;
                    let c = self.c.get(i).copied().unwrap_or(0.);
                    let q = interleaved::get_q8(lane, &self.qs[u * interleaved::Q8_UNIT..]);
                    for (o, q) in block.iter_mut().zip(q) {
                        *o = self.d[i] * f32::from(q) + c;
                    }
                }
            }
            Held::Q4K => {
                for (b, out) in out.chunks_exact_mut(256).enumerate() {
                    let (d, qs) = self.unit(r, b);
                    let (d, dmin, block) = interleaved::get_q4k(r % interleaved::ROWS, d, qs);
                    for (j, (group, out)) in block[16..].chunks_exact(32).zip(out.chunks_exact_mut(64)).enumerate() {
                        let (d1, m1) = (d * f32::from(block[2 * j]), dmin * f32::from(block[8 + 2 * j]));
                        let (d2, m2) = (d * f32::from(block[2 * j + 1]), dmin * f32::from(block[9 + 2 * j]));
                        for (l, &byte) in group.iter().enumerate() {
                            out[l] = d1 * f32::from(byte & 15) - m1;
                            out[l + 32] = d2 * f32::from(byte >> 4) - m2;
                        }
                    }
                }
            }
            Held::Q6K => {
                for (b, out) in out.chunks_exact_mut(256).enumerate() {
                    let (d, qs) = self.unit(r, b);
                    let (d, u, scales) = interleaved::get_q6k(r % interleaved::ROWS, d, qs);
                    for (v, (o, u)) in out.iter_mut().zip(u).enumerate() {
                        *o = d * f32::from(scales[v / 16]) * f32::from(u as i8 - 32);
                    }
                }
            }
        }
    }

    /// The quantizations of an activation row this matrix's kernel reads.
    pub fn reads(&self) -> Reads {
        Reads {
            blocks: matches!(self.held, Held::Q4 | Held::Q8),
            super_blocks: matches!(self.held, Held::Q4K | Held::Q6K),
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
            Held::Q4K | Held::Q6K | Held::Q8 => {
                let group = self.dot8(r - r % interleaved::ROWS, a);
                std::array::from_fn(|n| group[n][r % interleaved::ROWS])
            }
            Held::Q4 => {
                let blocks = r * nb..(r + 1) * nb;
                let (d, c, qs) = (
                    &self.d[blocks.clone()],
                    &self.c[blocks],
                    &self.qs[r * nb * 16..(r + 1) * nb * 16],
                );
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the level says the CPU has the kernel's instructions; every slice holds
                // `nb` blocks (checked by the kernels' debug assertions, guaranteed by the shapes
                // above).
                match level() {
                    Level::Avx2 | Level::Vnni => return unsafe { x86::q4(d, c, qs, a) },
                    Level::Scalar => {}
                }
                scalar_q4(d, c, qs, a)
            }
        }
    }

    /// The dot products of rows `r..r + 8` (`r` a multiple of 8) with the activation rows `a`;
    /// rows past the last are zero. The K-quants' kernels compute the eight together (see
    /// [`interleaved`]); the other formats a row at a time.
    #[inline]
    pub fn dot8<const N: usize>(&self, r: usize, a: [ActRow; N]) -> [[f32; interleaved::ROWS]; N] {
        debug_assert!(r.is_multiple_of(interleaved::ROWS) && r < self.rows);
        if !matches!(self.held, Held::Q4K | Held::Q6K | Held::Q8) {
            let mut out = [[0.; interleaved::ROWS]; N];
            for i in 0..interleaved::ROWS.min(self.rows - r) {
                for (o, v) in out.iter_mut().zip(self.dot(r + i, a)) {
                    o[i] = v;
                }
            }
            return out;
        }
        if self.held == Held::Q8 {
            let nb = self.cols / BLOCK;
            let units = r / interleaved::ROWS * nb..(r / interleaved::ROWS + 1) * nb;
            let floats = units.start * interleaved::ROWS..units.end * interleaved::ROWS;
            let (d, c, qs) = (
                &self.d[floats.clone()],
                self.c.get(floats).unwrap_or(&[]),
                &self.qs[units.start * interleaved::Q8_UNIT..units.end * interleaved::Q8_UNIT],
            );
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as below.
            match level() {
                Level::Avx2 => return unsafe { x86::q8(d, c, qs, a) },
                Level::Vnni => return unsafe { x86::q8_vnni(d, c, qs, a) },
                Level::Scalar => {}
            }
            return interleaved::q8(d, c, qs, a);
        }
        let units = self.cols / 256;
        let (floats, bytes) = self.unit_sizes();
        let g = r / interleaved::ROWS * units;
        let (d, qs) = (
            &self.d[g * floats..(g + units) * floats],
            &self.qs[g * bytes..(g + units) * bytes],
        );
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level says the CPU has the kernel's instructions; `d` and `qs` hold whole units
        // and every activation row `units` super-blocks (debug-asserted by the kernels).
        match (level(), self.held == Held::Q4K) {
            (Level::Avx2, true) => return unsafe { x86::q4k(d, qs, a) },
            (Level::Vnni, true) => return unsafe { x86::q4k_vnni(d, qs, a) },
            (Level::Avx2, false) => return unsafe { x86::q6k(d, qs, a) },
            (Level::Vnni, false) => return unsafe { x86::q6k_vnni(d, qs, a) },
            (Level::Scalar, _) => {}
        }
        if self.held == Held::Q4K {
            interleaved::q4k(d, qs, a)
        } else {
            interleaved::q6k(d, qs, a)
        }
    }

    /// Whether [`QMatrix::dot16`] computes rows `r..r + 16` two groups at a time (Q4_K, Q6_K and the
    /// byte-held formats on a CPU with AVX-512 VNNI, both groups held).
    #[inline]
    pub fn pairs_rows(&self, r: usize) -> bool {
        matches!(self.held, Held::Q4K | Held::Q6K | Held::Q8)
            && level() == Level::Vnni
            && r + interleaved::ROWS < self.rows
    }

    /// The dot products of rows `r..r + 16` (`r` a multiple of 8) with at most four activation rows:
    /// the bits of two [`QMatrix::dot8`] calls, which it makes where [`QMatrix::pairs_rows`] says no
    /// (rows past the last are zero).
    #[inline]
    pub fn dot16<const N: usize>(&self, r: usize, a: [ActRow; N]) -> [[[f32; interleaved::ROWS]; N]; 2] {
        debug_assert!(r.is_multiple_of(interleaved::ROWS) && r < self.rows);
        if !self.pairs_rows(r) {
            let second = if r + interleaved::ROWS < self.rows {
                self.dot8(r + interleaved::ROWS, a)
            } else {
                [[0.; interleaved::ROWS]; N]
            };
            return [self.dot8(r, a), second];
        }
        if self.held == Held::Q8 {
            let nb = self.cols / BLOCK;
            let group = |g: usize| {
                let floats = g * nb * interleaved::ROWS..(g + 1) * nb * interleaved::ROWS;
                (
                    &self.d[floats.clone()],
                    self.c.get(floats).unwrap_or(&[]),
                    &self.qs[g * nb * interleaved::Q8_UNIT..(g + 1) * nb * interleaved::Q8_UNIT],
                )
            };
            let g = r / interleaved::ROWS;
            let (first, second) = (group(g), group(g + 1));
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `pairs_rows` says the CPU has AVX-512 VNNI; both groups hold whole units, a
            // constant term for both or neither, and every activation row `nb` blocks.
            return unsafe { x86::q8_pair([first.0, second.0], [first.1, second.1], [first.2, second.2], a) };
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("`pairs_rows` holds only on x86-64")
        }
        let units = self.cols / 256;
        let (floats, bytes) = self.unit_sizes();
        let g = r / interleaved::ROWS * units;
        let group = |g: usize| {
            (
                &self.d[g * floats..(g + units) * floats],
                &self.qs[g * bytes..(g + units) * bytes],
            )
        };
        let (first, second) = (group(g), group(g + units));
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `pairs_rows` says the CPU has AVX-512 VNNI; both groups hold whole units and every
        // activation row `units` super-blocks (debug-asserted by the kernel).
        return unsafe {
            if self.held == Held::Q4K {
                x86::q4k_pair([first.0, second.0], [first.1, second.1], a)
            } else {
                x86::q6k_pair([first.0, second.0], [first.1, second.1], a)
            }
        };
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("`pairs_rows` holds only on x86-64")
    }

    /// Floats and bytes of a K-quant unit (eight rows' super-block).
    fn unit_sizes(&self) -> (usize, usize) {
        if self.held == Held::Q4K {
            (16, interleaved::Q4K_UNIT)
        } else {
            (interleaved::ROWS, interleaved::Q6K_UNIT)
        }
    }

    /// The unit holding super-block `b` of row `r`.
    fn unit(&self, r: usize, b: usize) -> (&[f32], &[u8]) {
        let (floats, bytes) = self.unit_sizes();
        let u = r / interleaved::ROWS * (self.cols / 256) + b;
        (
            &self.d[u * floats..(u + 1) * floats],
            &self.qs[u * bytes..(u + 1) * bytes],
        )
    }

    /// Holds a K-quant tensor's `size`-byte super-blocks in units of eight rows (`floats` and
    /// `bytes` each), the rows past the last zero; `put` places one row's block in its unit.
    fn hold_units(
        &mut self,
        blocks: &[u8],
        size: usize,
        floats: usize,
        bytes: usize,
        put: fn(usize, &[u8], &mut [f32], &mut [u8]),
    ) {
        let units = self.cols / 256;
        let count = self.rows.div_ceil(interleaved::ROWS) * units;
        self.d = vec![0.; count * floats];
        self.qs = vec![0; count * bytes];
        for (i, block) in blocks.chunks_exact(size).enumerate() {
            let (r, b) = (i / units, i % units);
            let u = r / interleaved::ROWS * units + b;
            put(
                r % interleaved::ROWS,
                block,
                &mut self.d[u * floats..(u + 1) * floats],
                &mut self.qs[u * bytes..(u + 1) * bytes],
            );
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

/// One row of activations: as floats, and quantized (per block the scale and `d·Σq`, then the
/// values); where the row is whole 256-value super-blocks, also as llama.cpp's Q8_K (per 256 the
/// scale `kd`, the values `kq`, the sums `ks` of each 16), which the K-quant kernels take.
#[derive(Clone, Copy)]
pub struct ActRow<'a> {
    pub f: &'a [f32],
    pub d: &'a [f32],
    pub s: &'a [f32],
    /// Per block `Σq` (the 8-bit kernels hold weights offset by 128).
    pub sums: &'a [i32],
    pub q: &'a [i8],
    pub kd: &'a [f32],
    pub kq: &'a [i8],
    pub ks: &'a [i16],
}

/// Which quantizations of activation rows some matrices read: 32-value blocks ([`quantize_row`]),
/// 256-value super-blocks ([`quantize_row_k`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    pub blocks: bool,
    pub super_blocks: bool,
}

impl Reads {
    /// What either reads.
    pub fn or(self, other: Reads) -> Reads {
        Reads {
            blocks: self.blocks || other.blocks,
            super_blocks: self.super_blocks || other.super_blocks,
        }
    }
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
    sums: Vec<i32>,
    q: Vec<i8>,
    kd: Vec<f32>,
    kq: Vec<i8>,
    ks: Vec<i16>,
}

#[cfg(test)]
impl Acts {
    /// `rows` rows of `values`, quantized both ways.
    pub fn of(rows: usize, cols: usize, values: Vec<f32>) -> Acts {
        let k = if cols.is_multiple_of(256) { rows * cols } else { 0 };
        let mut a = Acts {
            cols,
            f: values,
            d: vec![0.; rows * cols / BLOCK],
            s: vec![0.; rows * cols / BLOCK],
            sums: vec![0; rows * cols / BLOCK],
            q: vec![0; rows * cols],
            kd: vec![0.; k / 256],
            kq: vec![0; k],
            ks: vec![0; k / 16],
        };
        quantize_row(&a.f, &mut a.d, &mut a.s, &mut a.q, &mut a.sums);
        if k > 0 {
            quantize_row_k(&a.f, &mut a.kd, &mut a.kq, &mut a.ks);
        }
        a
    }

    pub fn row(&self, t: usize) -> ActRow<'_> {
        let (n, nb) = (self.cols, self.cols / BLOCK);
        let k = if self.kd.is_empty() { 0..0 } else { t * n..(t + 1) * n };
        ActRow {
            f: &self.f[t * n..(t + 1) * n],
            d: &self.d[t * nb..(t + 1) * nb],
            s: &self.s[t * nb..(t + 1) * nb],
            sums: &self.sums[t * nb..(t + 1) * nb],
            q: &self.q[t * n..(t + 1) * n],
            kd: &self.kd[k.start / 256..k.end / 256],
            kq: &self.kq[k.clone()],
            ks: &self.ks[k.start / 16..k.end / 16],
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

/// `out[i] = x[i] / (1 + e^y[i])` for every value of `out` ([`exp`]'s arithmetic: the same bits on
/// every instruction set). Give it many values at once: the vector steps of one group then overlap
/// with the next's.
#[inline]
pub fn sigmoid_gates(x: &[f32], y: &[f32], out: &mut [f32]) {
    assert!(x.len() >= out.len() && y.len() >= out.len());
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: AVX-512F (part of the VNNI level), AVX2 and FMA are present.
        Level::Vnni => return unsafe { x86::sigmoid_gates16(x, y, out) },
        // SAFETY: AVX2 and FMA are present.
        Level::Avx2 => return unsafe { x86::sigmoid_gates(x, y, out) },
        Level::Scalar => {}
    }
    for ((o, x), y) in out.iter_mut().zip(x).zip(y) {
        *o = x / (1. + exp(*y));
    }
}

/// `s ← e^(s − max)` for every score ([`exp`]'s arithmetic: the same bits on every instruction set).
#[inline]
pub fn exp_less(scores: &mut [f32], max: f32) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: AVX-512F (part of the VNNI level), AVX2 and FMA are present.
        Level::Vnni => return unsafe { x86::exp_less16(scores, max) },
        // SAFETY: AVX2 and FMA are present.
        Level::Avx2 => return unsafe { x86::exp_less(scores, max) },
        Level::Scalar => {}
    }
    for s in scores {
        *s = exp(*s - max);
    }
}

/// Quantizes `x` to 8-bit blocks as llama.cpp's `quantize_row_q8_1` does: the scale is `max|x|/127`
/// stored as a half, values rounded from `x / scale` before the scale is rounded; `s = d·Σq`, and
/// `Σq` itself in `sums`.
pub fn quantize_row(x: &[f32], d: &mut [f32], s: &mut [f32], q: &mut [i8], sums: &mut [i32]) {
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
        sums[b] = sum;
    }
}

/// Quantizes `x` (whole 256-value super-blocks) to Q8_K as llama.cpp's `quantize_row_q8_K_ref`
/// does: per super-block the scale `max/−127` of the value largest in magnitude, kept as an f32,
/// values rounded to nearest (ties to even) and capped at 127, and the sum of each 16.
pub fn quantize_row_k(x: &[f32], d: &mut [f32], q: &mut [i8], sums: &mut [i16]) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: AVX2 and FMA are present.
        return unsafe { x86::quantize_k(x, d, q, sums) };
    }
    scalar_quantize_k(x, d, q, sums);
}

/// [`quantize_row_k`] in portable Rust.
fn scalar_quantize_k(x: &[f32], d: &mut [f32], q: &mut [i8], sums: &mut [i16]) {
    for (b, (block, qb)) in x.chunks_exact(256).zip(q.chunks_exact_mut(256)).enumerate() {
        let (mut amax, mut max) = (0f32, 0f32);
        for &v in block {
            if v.abs() > amax {
                (amax, max) = (v.abs(), v);
            }
        }
        if amax == 0. {
            d[b] = 0.;
            qb.fill(0);
            sums[b * 16..b * 16 + 16].fill(0);
            continue;
        }
        let iscale = -127. / max;
        for (o, &v) in qb.iter_mut().zip(block) {
            *o = (round(iscale * v) as i32).min(127) as i8;
        }
        for (s, group) in sums[b * 16..b * 16 + 16].iter_mut().zip(qb.chunks_exact(16)) {
            *s = group.iter().map(|&v| i16::from(v)).sum();
        }
        d[b] = 1. / iscale;
    }
}

/// A Q6_K super-block's 256 values (`u − 32`), from its 128 bytes of low nibbles and 64 of high bits.
fn q6k_values(block: &[u8]) -> [i8; 256] {
    let (ql, qh) = (&block[..128], &block[128..192]);
    let mut q = [0i8; 256];
    for half in 0..2 {
        let (ql, qh, y) = (&ql[64 * half..], &qh[32 * half..], &mut q[128 * half..]);
        for l in 0..32 {
            let six = |low: u8, high: u8| (low | (high & 3) << 4) as i8 - 32;
            y[l] = six(ql[l] & 0xF, qh[l]);
            y[l + 32] = six(ql[l + 32] & 0xF, qh[l] >> 2);
            y[l + 64] = six(ql[l] >> 4, qh[l] >> 4);
            y[l + 96] = six(ql[l + 32] >> 4, qh[l] >> 6);
        }
    }
    q
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

/// The instruction sets the kernels use, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Portable Rust: any CPU.
    Scalar,
    /// AVX2 and FMA.
    Avx2,
    /// AVX2 and FMA, and AVX-512 (F, VL and VNNI): the 8-bit and K-quant kernels' one-instruction
    /// multiply-adds, Q4_K and Q6_K sixteen rows at a time, attention, the feed-forward's gates and
    /// the softmax's exponentials sixteen floats to a register.
    Vnni,
}

/// The kernels this process runs: the best the CPU has, or the portable ones with
/// `INCHARACTER_KERNELS=scalar`, or AVX2 without VNNI with `INCHARACTER_KERNELS=avx2` (to compare the
/// paths).
#[inline]
pub fn level() -> Level {
    use std::sync::OnceLock;
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| match std::env::var("INCHARACTER_KERNELS").as_deref() {
        Ok("scalar") => Level::Scalar,
        Ok("avx2") => detected().min(Level::Avx2),
        _ => detected(),
    })
}

#[cfg(target_arch = "x86_64")]
fn detected() -> Level {
    use std::arch::is_x86_feature_detected as has;
    if !(has!("avx2") && has!("fma")) {
        Level::Scalar
    } else if has!("avx512f") && has!("avx512vl") && has!("avx512vnni") {
        Level::Vnni
    } else {
        Level::Avx2
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

mod attention;
pub use attention::{Strided, scores, softmax, weigh};
mod interleaved;
pub use interleaved::ROWS;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;
