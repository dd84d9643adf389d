use super::*;

/// A deterministic spread of values (xorshift), some large, some zero blocks.
pub(super) fn values(n: usize, seed: u64) -> Vec<f32> {
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
            Format::Q4K | Format::Q5K | Format::Q6K | Format::Q2K | Format::Q3K | Format::Q8K => {
                unreachable!("the tests build K-quant blocks from bytes")
            }
            Format::BF16 | Format::Q8_1 => unreachable!("not a format the tests quantize to"),
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
    Acts::of(rows, cols, values(rows * cols, seed))
}

/// The float product of the dequantized row with the dequantized activations: what the integer
/// kernels must compute, up to the order of float additions.
fn reference(m: &QMatrix, r: usize, a: &Acts, t: usize) -> f32 {
    let mut w = vec![0.; m.cols];
    m.dequantize_row(r, &mut w);
    let mut x = vec![0.; m.cols];
    let row = a.row(t);
    if matches!(m.held, Held::Q4K | Held::Q6K) {
        // The K-quant kernels take the activations' Q8_K quantization.
        for (b, block) in x.chunks_exact_mut(256).enumerate() {
            for (o, &q) in block.iter_mut().zip(&row.kq[b * 256..]) {
                *o = row.kd[b] * f32::from(q);
            }
        }
    } else {
        for (b, block) in x.chunks_exact_mut(BLOCK).enumerate() {
            for (o, &q) in block.iter_mut().zip(&row.q[b * BLOCK..]) {
                *o = row.d[b] * f32::from(q);
            }
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
                        let units = r / 8 * cols / BLOCK..(r / 8 + 1) * cols / BLOCK;
                        let floats = units.start * 8..units.end * 8;
                        let c = m.c.get(floats.clone()).unwrap_or(&[]);
                        let qs = &m.qs[units.start * interleaved::Q8_UNIT..units.end * interleaved::Q8_UNIT];
                        interleaved::q8(&m.d[floats], c, qs, [a.row(t)])[0][r % 8]
                    }
                    Held::Q4K | Held::Q6K => unreachable!("no K-quant among these formats"),
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
    let (mut d, mut s, mut q, mut sums) = ([0.; 1], [0.; 1], [0i8; BLOCK], [0; 1]);
    quantize_row(&x, &mut d, &mut s, &mut q, &mut sums);
    assert_eq!(q[0], -127);
    assert_eq!(q[31], 127);
    assert_eq!(d[0], f16::from_f32(15.5 / 127.).to_f32());
    assert_eq!(sums[0], q.iter().map(|&v| i32::from(v)).sum::<i32>());
    assert_eq!(s[0], d[0] * sums[0] as f32);
    let zero = [0f32; BLOCK];
    quantize_row(&zero, &mut d, &mut s, &mut q, &mut sums);
    assert_eq!((d[0], s[0], q, sums[0]), (0., 0., [0; BLOCK], 0));
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

/// Rows `8g..8g + 8` of `m` against the eight activation rows of `a` are the float products of what
/// the blocks hold (zero past the last row).
fn near_reference(m: &QMatrix, g: usize, a: &Acts, got: &[[f32; 8]; 8]) {
    for (t, row) in got.iter().enumerate() {
        for (i, &got) in row.iter().enumerate() {
            let r = 8 * g + i;
            let want = if r < m.rows { reference(m, r, a, t) } else { 0. };
            assert!(
                (got - want).abs() <= 1e-4 * (1. + want.abs()),
                "{:?} row {r} token {t}: {got} vs {want}",
                m.held
            );
        }
    }
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
    let m = QMatrix::from_gguf(Format::Q4_1, 1, cols, &gguf_bytes(Format::Q4_1, &values(cols, 43))).unwrap();
    let scalar = scalar_q4(&m.d, &m.c, &m.qs, rows);
    if avx2 {
        // SAFETY: AVX2 and FMA are present.
        let fast = unsafe { x86::q4(&m.d, &m.c, &m.qs, rows) };
        assert!(close(fast, scalar), "Q4_1 avx2: {fast:?} vs {scalar:?}");
    }
    // The 8-bit kernels over eight rows at a time (11 rows: 3 zero rows in the second unit), with
    // and without a constant term: the same bits on every instruction set and for any tile.
    let a = acts(8, cols, 47);
    for format in [Format::Q8_0, Format::Q5_0, Format::Q5_1] {
        let m = QMatrix::from_gguf(format, 11, cols, &gguf_bytes(format, &values(11 * cols, 43))).unwrap();
        let eight: [ActRow; 8] = std::array::from_fn(|t| a.row(t));
        let nb = cols / BLOCK;
        for g in 0..2 {
            let floats = g * nb * 8..(g + 1) * nb * 8;
            let (d, c) = (&m.d[floats.clone()], m.c.get(floats).unwrap_or(&[]));
            let qs = &m.qs[g * nb * interleaved::Q8_UNIT..(g + 1) * nb * interleaved::Q8_UNIT];
            let scalar = interleaved::q8(d, c, qs, eight);
            assert_eq!(interleaved::q8(d, c, qs, [a.row(5)])[0], scalar[5], "{format:?}");
            near_reference(&m, g, &a, &scalar);
            if avx2 {
                // SAFETY: AVX2 and FMA are present.
                let fast = unsafe { x86::q8(d, c, qs, eight) };
                assert_eq!(fast, scalar, "{format:?}: AVX2 gives the portable kernel's bits");
                if has!("avx512f") && has!("avx512vl") && has!("avx512vnni") {
                    // SAFETY: the CPU has VNNI (checked above).
                    let vnni = unsafe { x86::q8_vnni(d, c, qs, eight) };
                    assert_eq!(vnni, fast, "{format:?}: VNNI gives AVX2's bits");
                }
            }
        }
    }
    // The K-quant kernels over eight rows at a time (11 rows: the second unit holds 5 and 3 zero
    // rows), one to eight activation rows, against the portable ones: the same bits.
    let a = acts(8, 512, 53);
    for (format, size, scales_first) in [(Format::Q4K, 144, true), (Format::Q6K, 210, false)] {
        let m = QMatrix::from_gguf(format, 11, 512, &super_blocks(22, size, 59, scales_first)).unwrap();
        let rows: [ActRow; 8] = std::array::from_fn(|t| a.row(t));
        let four = [a.row(4), a.row(5), a.row(6), a.row(7)];
        let units = 2;
        let (floats, bytes) = m.unit_sizes();
        for g in 0..2 {
            let (d, qs) = (
                &m.d[g * units * floats..(g + 1) * units * floats],
                &m.qs[g * units * bytes..(g + 1) * units * bytes],
            );
            let (scalar, scalar_four) = if format == Format::Q4K {
                (interleaved::q4k(d, qs, rows), interleaved::q4k(d, qs, four))
            } else {
                (interleaved::q6k(d, qs, rows), interleaved::q6k(d, qs, four))
            };
            assert_eq!(
                scalar_four,
                scalar[4..],
                "{format:?}: a row's sum does not depend on its neighbours"
            );
            near_reference(&m, g, &a, &scalar);
            if avx2 {
                // SAFETY: AVX2 and FMA are present.
                let (fast, one) = unsafe {
                    if format == Format::Q4K {
                        (x86::q4k(d, qs, rows), x86::q4k(d, qs, [a.row(3)]))
                    } else {
                        (x86::q6k(d, qs, rows), x86::q6k(d, qs, [a.row(3)]))
                    }
                };
                assert_eq!(fast, scalar, "{format:?}: AVX2 gives the portable kernel's bits");
                assert_eq!(one[0], fast[3], "{format:?}: one activation row as in eight");
                if has!("avx512f") && has!("avx512vl") && has!("avx512vnni") {
                    // SAFETY: the CPU has VNNI (checked above).
                    let vnni = unsafe {
                        if format == Format::Q4K {
                            x86::q4k_vnni(d, qs, rows)
                        } else {
                            x86::q6k_vnni(d, qs, rows)
                        }
                    };
                    assert_eq!(vnni, fast, "{format:?}: VNNI gives AVX2's bits");
                }
            }
        }
    }
}

/// Q4_K and Q6_K sixteen rows at a time, two groups of eight to a register, against each group's
/// eight-row kernel: the same bits in every lane (19 rows: two whole groups, and a third with three).
#[cfg(target_arch = "x86_64")]
#[test]
fn two_groups_of_k_quant_rows_give_each_groups_bits() {
    use std::arch::is_x86_feature_detected as has;
    if !(has!("avx2") && has!("fma") && has!("avx512f") && has!("avx512vl") && has!("avx512vnni")) {
        return;
    }
    type Pair<const N: usize> = unsafe fn([&[f32]; 2], [&[u8]; 2], [ActRow; N]) -> [[[f32; ROWS]; N]; 2];
    type Group<const N: usize> = unsafe fn(&[f32], &[u8], [ActRow; N]) -> [[f32; ROWS]; N];
    type Kernels = (Pair<4>, Pair<1>, Group<4>);
    let a = acts(4, 512, 71);
    let formats: [(Format, usize, bool, Kernels); 2] = [
        (Format::Q4K, 144, true, (x86::q4k_pair, x86::q4k_pair, x86::q4k_vnni)),
        (Format::Q6K, 210, false, (x86::q6k_pair, x86::q6k_pair, x86::q6k_vnni)),
    ];
    for (format, size, scales_first, (pair4, pair1, group)) in formats {
        let m = QMatrix::from_gguf(format, 19, 512, &super_blocks(38, size, 67, scales_first)).unwrap();
        let (floats, bytes) = m.unit_sizes();
        let at = |g: usize| {
            (
                &m.d[g * 2 * floats..(g + 1) * 2 * floats],
                &m.qs[g * 2 * bytes..(g + 1) * 2 * bytes],
            )
        };
        for (first, second) in [(0, 1), (1, 2)] {
            let ((d0, qs0), (d1, qs1)) = (at(first), at(second));
            let four: [ActRow; 4] = std::array::from_fn(|t| a.row(t));
            // SAFETY: the CPU has AVX-512 VNNI (checked above).
            let (pair, one, alone) = unsafe {
                (
                    pair4([d0, d1], [qs0, qs1], four),
                    pair1([d0, d1], [qs0, qs1], [a.row(2)]),
                    [group(d0, qs0, four), group(d1, qs1, four)],
                )
            };
            let bits = |x: &[[f32; ROWS]]| x.iter().flatten().map(|v| v.to_bits()).collect::<Vec<_>>();
            for h in 0..2 {
                assert_eq!(
                    bits(&pair[h]),
                    bits(&alone[h]),
                    "{format:?} groups {first}, {second}: half {h}"
                );
                assert_eq!(
                    bits(&one[h]),
                    bits(&alone[h][2..3]),
                    "{format:?}: one activation row, half {h}"
                );
            }
            assert!(
                pair[1].iter().flatten().any(|v| *v != 0.),
                "the high half holds products"
            );
        }
    }
}

/// The byte-held formats sixteen rows at a time, against each group's eight-row kernel: the same
/// bits in every lane, with a constant term (Q5_1) and without (19 rows: a third group of three).
#[cfg(target_arch = "x86_64")]
#[test]
fn two_groups_of_byte_held_rows_give_each_groups_bits() {
    use std::arch::is_x86_feature_detected as has;
    if !(has!("avx2") && has!("fma") && has!("avx512f") && has!("avx512vl") && has!("avx512vnni")) {
        return;
    }
    let cols = 96;
    let nb = cols / BLOCK;
    let a = acts(4, cols, 73);
    for format in [Format::Q8_0, Format::Q5_0, Format::Q5_1] {
        let m = QMatrix::from_gguf(format, 19, cols, &gguf_bytes(format, &values(19 * cols, 79))).unwrap();
        let at = |g: usize| {
            let floats = g * nb * ROWS..(g + 1) * nb * ROWS;
            (
                &m.d[floats.clone()],
                m.c.get(floats).unwrap_or(&[]),
                &m.qs[g * nb * interleaved::Q8_UNIT..(g + 1) * nb * interleaved::Q8_UNIT],
            )
        };
        assert_eq!(
            at(0).1.is_empty(),
            format != Format::Q5_1,
            "{format:?}: its constant term"
        );
        for (first, second) in [(0, 1), (1, 2)] {
            let ((d0, c0, qs0), (d1, c1, qs1)) = (at(first), at(second));
            let four: [ActRow; 4] = std::array::from_fn(|t| a.row(t));
            // SAFETY: the CPU has AVX-512 VNNI (checked above).
            let (pair, one, alone) = unsafe {
                (
                    x86::q8_pair([d0, d1], [c0, c1], [qs0, qs1], four),
                    x86::q8_pair([d0, d1], [c0, c1], [qs0, qs1], [a.row(2)]),
                    [x86::q8_vnni(d0, c0, qs0, four), x86::q8_vnni(d1, c1, qs1, four)],
                )
            };
            let bits = |x: &[[f32; ROWS]]| x.iter().flatten().map(|v| v.to_bits()).collect::<Vec<_>>();
            for h in 0..2 {
                assert_eq!(
                    bits(&pair[h]),
                    bits(&alone[h]),
                    "{format:?} groups {first}, {second}: half {h}"
                );
                assert_eq!(
                    bits(&one[h]),
                    bits(&alone[h][2..3]),
                    "{format:?}: one activation row, half {h}"
                );
            }
            assert!(
                pair[1].iter().flatten().any(|v| *v != 0.),
                "the high half holds products"
            );
        }
        // Through the matrix: sixteen rows at a time give the eight-row products' bits.
        for r in [0, 8] {
            let [low, high] = m.dot16(r, [a.row(0), a.row(3)]);
            assert_eq!(low, m.dot8(r, [a.row(0), a.row(3)]), "{format:?} rows {r}..");
            assert_eq!(high, m.dot8(r + 8, [a.row(0), a.row(3)]), "{format:?} rows {}..", r + 8);
        }
    }
}

#[test]
fn super_block_activations_round_as_llama_cpp_does() {
    // The value largest in magnitude becomes −127 whatever its sign (the scale takes the sign).
    let mut x: Vec<f32> = (0..256).map(|i| (i as f32 - 100.) / 50.).collect();
    x[7] = -4.;
    let (mut d, mut q, mut sums) = ([0.; 1], [0i8; 256], [0i16; 16]);
    quantize_row_k(&x, &mut d, &mut q, &mut sums);
    assert_eq!(q[7], -127);
    assert_eq!(d[0], 1. / (-127. / -4.));
    x[7] = 4.;
    let mut positive = [0i8; 256];
    quantize_row_k(&x, &mut d, &mut positive, &mut sums);
    assert_eq!((positive[7], d[0]), (-127, 1. / (-127. / 4.)));
    x[7] = -4.;
    quantize_row_k(&x, &mut d, &mut q, &mut sums);
    for (i, (&v, &q)) in x.iter().zip(&q).enumerate() {
        assert_eq!(q, ((-127. / -4.) * v).round_ties_even() as i8, "value {i}");
    }
    for (g, s) in sums.iter().enumerate() {
        assert_eq!(*s, q[16 * g..16 * g + 16].iter().map(|&v| i16::from(v)).sum::<i16>());
    }
    quantize_row_k(&[0.; 256], &mut d, &mut q, &mut sums);
    assert_eq!((d[0], q, sums), (0., [0; 256], [0; 16]));
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
/// (`dequantize`, transcribed) and multiplies four tokens as the float product of those values (three
/// rows: a unit of eight holding five zero rows).
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
}

/// A deterministic run of bytes.
fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed).rotate_left(3))
        .collect()
}

#[test]
fn q2_k_and_q3_k_widen_as_their_layout_says() {
    // Q2_K: value l of a super-block is 2 bits of byte 32·(l/128) + l%32, shifted by 2·((l%128)/32), and
    // its 16-value group g = l/16 has scale byte g: d·(low nibble)·q − dmin·(high nibble).
    let mut block = bytes(84, 5);
    block[80..82].copy_from_slice(&f16::from_f32(0.25).to_le_bytes());
    block[82..84].copy_from_slice(&f16::from_f32(0.125).to_le_bytes());
    let got = Format::Q2K.widen(&block).unwrap();
    for (l, &v) in got.iter().enumerate() {
        let q = (block[16 + 32 * (l / 128) + l % 32] >> (2 * ((l % 128) / 32))) & 3;
        let sc = block[l / 16];
        let want = 0.25 * f32::from(sc & 15) * f32::from(q) - 0.125 * f32::from(sc >> 4);
        assert!((v - want).abs() < 1e-6, "Q2_K value {l}: {v} ≠ {want}");
    }
    // Q3_K: the same 2 low bits from 64 bytes after 32 bytes of high bits (bit (l%128)/32 + 4·(l/128)
    // of byte l%32; a clear bit subtracts 4), and 6-bit scales minus 32 packed in 12 bytes.
    let mut block = bytes(110, 9);
    block[108..110].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
    let got = Format::Q3K.widen(&block).unwrap();
    let (hmask, qs, packed) = (&block[..32], &block[32..96], &block[96..108]);
    for (l, &v) in got.iter().enumerate() {
        let low = (qs[32 * (l / 128) + l % 32] >> (2 * ((l % 128) / 32))) & 3;
        let high = hmask[l % 32] >> ((l % 128) / 32 + 4 * (l / 128)) & 1;
        let g = l / 16;
        let nibble = if g < 8 { packed[g] & 15 } else { packed[g - 8] >> 4 };
        let scale = i32::from(nibble | (((packed[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
        let want = 0.5 * scale as f32 * (f32::from(low) - if high == 0 { 4. } else { 0. });
        assert!((v - want).abs() < 1e-6, "Q3_K value {l}: {v} ≠ {want}");
    }
}

#[test]
fn formats_without_a_kernel_are_held_as_q8_0_of_their_values() {
    let half = |x: f32| f16::from_f32(x).to_le_bytes();
    // BF16 is the high half of an f32; Q8_1 and Q8_K scale signed bytes.
    let bf16: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|x| x.to_bits().to_le_bytes()[2..].to_vec())
        .collect();
    assert_eq!(Format::BF16.widen(&bf16).unwrap(), vec![1.5, -2.0]);
    let mut q8_1 = [half(0.5), half(99.)].concat();
    q8_1.extend((0..32).map(|i: i8| (i - 16) as u8));
    assert_eq!(Format::Q8_1.widen(&q8_1).unwrap()[..3], [-8., -7.5, -7.]);
    let mut q8_k = 2f32.to_le_bytes().to_vec();
    q8_k.extend((0..256).map(|i| (i as i8) as u8));
    q8_k.extend([0; 32]);
    assert_eq!(Format::Q8K.widen(&q8_k).unwrap()[126..130], [252., 254., -256., -254.]);
    // A matrix of them is their values quantized to Q8_0.
    let rows = [bytes(110, 1), bytes(110, 2)].concat();
    let m = QMatrix::from_gguf(Format::Q3K, 2, 256, &rows).unwrap();
    let q = QMatrix::q8_0(2, 256, &Format::Q3K.widen(&rows).unwrap()).unwrap();
    let (mut a, mut b) = (vec![0.; 256], vec![0.; 256]);
    m.dequantize_row(1, &mut a);
    q.dequantize_row(1, &mut b);
    assert_eq!(a, b);
    assert!(
        Format::Q2K
            .widen(&[0; 83])
            .unwrap_err()
            .contains("not whole Q2K blocks")
    );
}

/// The SIMD Q8_K quantizer gives the portable one's bytes, sums and scales: random rows, a row whose
/// largest magnitude comes first negative then positive, a row of zeros, values that round to ties.
#[test]
fn super_block_quantization_is_the_same_on_every_instruction_set() {
    let mut x = values(4 * 256, 61);
    x[256 + 40] = -9.;
    x[256 + 200] = 9.;
    x[512..768].fill(0.);
    for (i, v) in x[768..].iter_mut().enumerate() {
        *v = (i as f32 - 128.) / 2.;
    }
    type Quantizer = fn(&[f32], &mut [f32], &mut [i8], &mut [i16]);
    let run = |f: Quantizer| {
        let (mut d, mut q, mut s) = (vec![0.; 4], vec![0i8; 1024], vec![0i16; 64]);
        f(&x, &mut d, &mut q, &mut s);
        (d, q, s)
    };
    let scalar = run(scalar_quantize_k);
    assert_eq!(
        scalar.0[1],
        1. / (-127. / -9.),
        "the first of two equal magnitudes gives the sign"
    );
    assert_eq!(run(quantize_row_k), scalar);
}

/// The gates and the softmax's exponentials give the portable arithmetic's bits on every instruction
/// set the CPU has, across `exp`'s whole clamped range and for any length (remainders after the
/// sixteens and the eights).
#[test]
fn the_gate_and_the_softmax_are_the_same_on_every_instruction_set() {
    type Gates = fn(&[f32], &[f32], &mut [f32]);
    type Exps = fn(&mut [f32], f32);
    let mut paths: Vec<(&str, Gates, Exps)> = vec![("dispatched", sigmoid_gates, exp_less)];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            // SAFETY (both): AVX2 and FMA are present.
            paths.push((
                "avx2",
                |x, y, o| unsafe { x86::sigmoid_gates(x, y, o) },
                |s, m| unsafe { x86::exp_less(s, m) },
            ));
            if has!("avx512f") {
                // SAFETY (both): AVX-512F, AVX2 and FMA are present.
                paths.push((
                    "avx512",
                    |x, y, o| unsafe { x86::sigmoid_gates16(x, y, o) },
                    |s, m| unsafe { x86::exp_less16(s, m) },
                ));
            }
        }
    }
    let x: Vec<f32> = (-9600..9600).map(|i| i as f32 / 97.).collect();
    let y: Vec<f32> = x.iter().map(|x| -x * 1.3).collect();
    let want: Vec<u32> = x.iter().zip(&y).map(|(x, y)| (x / (1. + exp(*y))).to_bits()).collect();
    let scores: Vec<f32> = (0..1001).map(|i| (i as f32 - 700.) / 7.).collect();
    let exps: Vec<u32> = scores.iter().map(|&s| exp(s - 3.5).to_bits()).collect();
    for (name, gates, exp_less) in paths {
        for n in [x.len(), 16 * 5 + 8 + 3, 16 + 7, 5, 0] {
            let mut got = vec![0f32; n];
            gates(&x, &y, &mut got);
            assert!(
                got.iter().map(|g| g.to_bits()).eq(want[..n].iter().copied()),
                "{name}, {n} gates"
            );
        }
        for n in [scores.len(), 16 * 3 + 8 + 1, 9, 0] {
            let mut got = scores[..n].to_vec();
            exp_less(&mut got, 3.5);
            assert!(
                got.iter().map(|s| s.to_bits()).eq(exps[..n].iter().copied()),
                "{name}, {n} exponentials"
            );
        }
    }
}
