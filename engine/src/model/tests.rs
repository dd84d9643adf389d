use super::*;
use crate::kernels::Format;

fn matrix(rows: usize, cols: usize, seed: u32) -> QMatrix {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    let values: Vec<u8> = (0..rows * cols)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            ((x >> 8) as f32 / (1u32 << 24) as f32 - 0.5).to_le_bytes()
        })
        .collect();
    QMatrix::from_gguf(Format::F32, rows, cols, &values).unwrap()
}

/// A Q4_K matrix of random super-blocks (`cols` a multiple of 256).
fn q4k_matrix(rows: usize, cols: usize, seed: u32) -> QMatrix {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / 256 {
        bytes.extend(half::f16::from_f32(0.004).to_le_bytes());
        bytes.extend(half::f16::from_f32(0.002).to_le_bytes());
        bytes.extend((0..140).map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 11) as u8
        }));
    }
    QMatrix::from_gguf(Format::Q4K, rows, cols, &bytes).unwrap()
}

/// A one-layer model of random F32 weights, gemma3-shaped when `window` is set.
fn model(window: Option<usize>, threads: usize) -> Model {
    let (w, hd, ffn) = (64, 16, 64);
    let config = Config {
        width: w,
        heads: 4,
        kv_heads: 2,
        head_dim: hd,
        ffn,
        eps: 1e-6,
        rope_base: 10_000.,
        rope_base_local: window.map(|_| 1_000.),
        rope: if window.is_some() {
            Rope::Halves
        } else {
            Rope::Interleaved
        },
        activation: if window.is_some() {
            Activation::Gelu
        } else {
            Activation::Silu
        },
        embedding_scale: if window.is_some() { 8. } else { 1. },
        context: 64,
    };
    let layer = Layer {
        attn_norm: vec![1.; w],
        q: matrix(64, w, 1),
        k: matrix(32, w, 2),
        v: matrix(32, w, 3),
        o: matrix(w, 64, 4),
        qkv_bias: None,
        qk_norm: window.map(|_| [vec![1.; hd], vec![0.5; hd]]),
        post_norms: window.map(|_| [vec![1.; w], vec![1.; w]]),
        ffn_norm: vec![1.; w],
        gate: matrix(ffn, w, 5),
        up: matrix(ffn, w, 6),
        down: matrix(w, ffn, 7),
        window,
    };
    Model::new(config, matrix(40, w, 8), vec![layer], vec![1.; w], None)
        .unwrap()
        .with_threads(threads)
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-4 * (1. + y.abs()))
}

#[test]
fn a_prompt_at_once_equals_it_token_by_token_on_any_number_of_threads() {
    let ids = [3, 17, 5, 9, 30, 1, 22];
    for window in [None, Some(3)] {
        let whole = model(window, 1).forward(&mut Cache::default(), &ids, 0).unwrap();
        for threads in [1, 2, 3] {
            let m = model(window, threads);
            let mut cache = Cache::default();
            let mut last = Vec::new();
            for (p, id) in ids.iter().enumerate() {
                last = m.forward(&mut cache, &[*id], p).unwrap();
            }
            assert!(close(&last, &whole), "window {window:?}, {threads} threads");
            assert_eq!(cache.len(), ids.len());
        }
    }
}

#[test]
fn sequences_in_one_pass_get_the_logits_each_would_get_alone() {
    // Three conversations at different places: two decoding a token each after prompts of their
    // own, one still reading its prompt; and the same again with the batch in another order.
    let prompts: [&[u32]; 3] = [&[3, 17, 5], &[9, 30, 1, 22, 4], &[2, 8]];
    let next: [&[u32]; 3] = [&[11], &[6], &[7, 13, 19]];
    for window in [None, Some(3)] {
        for threads in [1, 2, 3] {
            let m = model(window, threads);
            let mut alone = Vec::new();
            let mut caches = Vec::new();
            for (prompt, more) in prompts.iter().zip(next) {
                let mut cache = Cache::default();
                m.forward(&mut cache, prompt, 0).unwrap();
                caches.push(cache.clone());
                alone.push(m.forward(&mut cache, more, prompt.len()).unwrap());
            }
            for order in [[0, 1, 2], [2, 0, 1]] {
                let mut copies: Vec<Cache> = order.iter().map(|&i| caches[i].clone()).collect();
                let mut steps: Vec<Step> = copies
                    .iter_mut()
                    .zip(order)
                    .map(|(cache, i)| Step {
                        cache,
                        tokens: next[i],
                        position: prompts[i].len(),
                    })
                    .collect();
                let together = m.forward_batch(&mut steps).unwrap();
                for (got, &i) in together.iter().zip(&order) {
                    assert_eq!(got, &alone[i], "window {window:?}, {threads} threads, sequence {i}");
                }
                for (cache, &i) in copies.iter().zip(&order) {
                    assert_eq!(cache.len(), prompts[i].len() + next[i].len());
                }
            }
        }
    }
}

/// The same model 256 wide with Q4_K projections of whole groups of rows (the width a super-block
/// needs), whose products take sixteen rows at a time when a pass has more than eight tokens.
fn k_quant_model(threads: usize) -> Model {
    let f32_model = model(None, threads);
    let (w, ffn) = (256, 64);
    let config = Config {
        width: w,
        ffn,
        ..f32_model.config.clone()
    };
    let layer = Layer {
        attn_norm: vec![1.; w],
        q: q4k_matrix(64, w, 1),
        k: q4k_matrix(32, w, 2),
        v: q4k_matrix(32, w, 3),
        o: matrix(w, 64, 4),
        qkv_bias: None,
        qk_norm: None,
        post_norms: None,
        ffn_norm: vec![1.; w],
        gate: q4k_matrix(ffn, w, 5),
        up: q4k_matrix(ffn, w, 6),
        down: matrix(w, ffn, 7),
        window: None,
    };
    Model::new(config, matrix(40, w, 8), vec![layer], vec![1.; w], None)
        .unwrap()
        .with_threads(threads)
}

#[test]
fn a_pass_of_many_tokens_gives_each_the_bits_of_a_pass_of_few() {
    // Thirteen tokens in one pass (sixteen rows at a time on AVX-512 VNNI: tiles of four tokens,
    // then one), against each sequence's few alone (eight rows at a time).
    let steps: [&[u32]; 3] = [&[3, 17, 5, 9], &[30, 1, 22, 13], &[2, 8, 11, 6, 7]];
    for threads in [1, 2, 3] {
        let m = k_quant_model(threads);
        let alone: Vec<Vec<f32>> = steps
            .iter()
            .map(|ids| m.forward(&mut Cache::default(), ids, 0).unwrap())
            .collect();
        let mut caches = [Cache::default(), Cache::default(), Cache::default()];
        let mut batch: Vec<Step> = caches
            .iter_mut()
            .zip(steps)
            .map(|(cache, tokens)| Step {
                cache,
                tokens,
                position: 0,
            })
            .collect();
        assert_eq!(m.forward_batch(&mut batch).unwrap(), alone, "{threads} threads");
    }
}

#[test]
fn blocks_take_sixteen_rows_only_for_many_tokens_and_whole_pairs() {
    let blocks = |w: &QMatrix, rows: std::ops::Range<usize>, tokens: usize| {
        let mut out = Vec::new();
        each_block(&[w], rows, tokens, |r, size| out.push((r, size)));
        out
    };
    let (q4k, f32) = (q4k_matrix(40, 256, 9), matrix(40, 256, 9));
    let eights = |rows: std::ops::Range<usize>| rows.step_by(8).map(|r| (r, 8)).collect::<Vec<_>>();
    assert_eq!(blocks(&f32, 0..40, 13), eights(0..40), "F32 rows eight at a time");
    assert_eq!(blocks(&q4k, 0..40, 8), eights(0..40), "eight tokens: eight rows");
    if kernels::level() == kernels::Level::Vnni {
        assert_eq!(blocks(&q4k, 0..40, 9), [(0, 16), (16, 16), (32, 8)]);
        assert_eq!(blocks(&q4k, 16..40, 13), [(16, 16), (32, 8)]);
        assert_eq!(blocks(&q4k, 0..24, 13), [(0, 16), (16, 8)], "a share ending mid-pair");
    } else {
        assert_eq!(blocks(&q4k, 0..40, 13), eights(0..40), "without AVX-512 VNNI");
    }
    let mut tiles = Vec::new();
    each_tile(16, 13, |t, take| tiles.push((t, take)));
    assert_eq!(tiles, [(0, 4), (4, 4), (8, 4), (12, 1)]);
    tiles.clear();
    each_tile(8, 13, |t, take| tiles.push((t, take)));
    assert_eq!(tiles, [(0, 8), (8, 4), (12, 1)]);
}

#[test]
fn a_snapshot_of_the_cache_continues_like_the_original() {
    let m = model(None, 2);
    let mut cache = Cache::default();
    m.forward(&mut cache, &[1, 2, 3], 0).unwrap();
    let mut copy = cache.clone();
    let a = m.forward(&mut cache, &[4], 3).unwrap();
    let b = m.forward(&mut copy, &[4], 3).unwrap();
    assert_eq!(a, b);
    // Position 0 starts over; a position past the cache is refused.
    assert_eq!(
        m.forward(&mut cache, &[4], 0).unwrap(),
        m.forward(&mut Cache::default(), &[4], 0).unwrap()
    );
    assert!(
        m.forward(&mut cache, &[4], 5)
            .unwrap_err()
            .contains("past the 1 cached")
    );
    assert!(
        m.forward(&mut cache, &[99], 1)
            .unwrap_err()
            .contains("outside the vocabulary")
    );
}

#[test]
fn the_gates_equal_their_textbook_forms() {
    for i in -2000..2000 {
        let x = i as f32 / 100.;
        let g = [[x; 2 * ROWS]; 8];
        let tanh = 0.5 * x * (1. + (0.797_884_6 * x * (1. + 0.044_715 * x * x)).tanh());
        let gelu = gates(Activation::Gelu, &g, 3, 2 * ROWS);
        assert!((gelu[2][13] - tanh).abs() <= 1e-6 * (1. + tanh.abs()), "gelu({x})");
        let silu = x / (1. + (-x).exp());
        let got = gates(Activation::Silu, &g, 5, ROWS);
        assert!((got[4][5] - silu).abs() <= 1e-6 * (1. + silu.abs()), "silu({x})");
        // The tile's values, and nothing outside it.
        for (k, row) in got.iter().enumerate() {
            for (i, &v) in row.iter().enumerate() {
                let inside = k < 5 && i < ROWS;
                assert_eq!(
                    v.to_bits(),
                    if inside { got[0][0] } else { 0. }.to_bits(),
                    "silu({x}) [{k}][{i}]"
                );
            }
        }
    }
}

#[test]
fn a_pass_that_panics_leaves_a_cache_that_refuses_to_be_continued() {
    let m = model(None, 2);
    let mut cache = Cache::default();
    m.forward(&mut cache, &[1, 2, 3], 0).unwrap();
    // Past the rotary tables: refused before anything is touched, the cache intact.
    assert!(
        m.forward(&mut cache, &[1; 70], 3)
            .unwrap_err()
            .contains("exceed the context")
    );
    assert_eq!(cache.len(), 3);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut broken = model(None, 2);
        // A bug inside the pass: the rotation indexes past its tables.
        broken.rotary = (Vec::new(), Vec::new());
        broken.forward(&mut cache, &[4], 3)
    }));
    assert!(caught.is_err());
    assert!(
        m.forward(&mut cache, &[4], 3)
            .unwrap_err()
            .contains("past the 0 cached")
    );
    assert_eq!(
        m.forward(&mut cache, &[1], 0).unwrap(),
        m.forward(&mut Cache::default(), &[1], 0).unwrap()
    );
}

#[test]
fn a_sliding_layer_sees_fewer_than_window_positions_back() {
    // Window 2: the query at position 3 sees positions 2 and 3 only, so what came before does not
    // matter; without a window it does.
    for (window, same) in [(Some(2), true), (None, false)] {
        let m = model(window, 2);
        let a = m.forward(&mut Cache::default(), &[1, 2, 3, 4], 0).unwrap();
        let b = m.forward(&mut Cache::default(), &[7, 8, 3, 4], 0).unwrap();
        assert_eq!(close(&a, &b), same, "window {window:?}");
    }
}
