//! The decoder: llama, qwen2, qwen3, phi3 and gemma3 as llama.cpp computes them.
//!
//! One forward pass takes a run of tokens continuing the attention cache and returns the logits after
//! the last one. Its threads go through the layers together ([`crate::team`]); every step below ends
//! at a barrier, and each thread takes its share of the step: rows of a weight matrix, tokens, or
//! (token, head) pairs.

use crate::kernels::{self, ActRow, BLOCK, QMatrix, ROWS, Reads, Strided};
use crate::team::{self, Member, Shared};

/// The most positions a model's rotary tables cover (a table of 64 pairs is then 32 MiB each of
/// cosines and sines): loaders cap what a file states.
pub const MOST_POSITIONS: usize = 131_072;

/// How rotary embeddings pair a head's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rope {
    /// Values 2i and 2i + 1 (llama: GGUF permutes its q and k rows so).
    Interleaved,
    /// Values i and i + d/2 (qwen2, qwen3; llama.cpp's "neox").
    Halves,
}

/// The feed-forward's gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Silu,
    /// GELU, tanh approximation (gemma3).
    Gelu,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub width: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// The feed-forward's inner width.
    pub ffn: usize,
    pub eps: f32,
    pub rope_base: f32,
    /// The base of the layers with a sliding window, when it differs (gemma3).
    pub rope_base_local: Option<f32>,
    pub rope: Rope,
    pub activation: Activation,
    /// Embeddings are multiplied by this (gemma3: √width).
    pub embedding_scale: f32,
    /// Positions the rotary tables cover; a longer run is refused.
    pub context: usize,
}

/// One transformer block's weights.
#[derive(Debug, Clone)]
pub struct Layer {
    pub attn_norm: Vec<f32>,
    pub q: QMatrix,
    pub k: QMatrix,
    pub v: QMatrix,
    pub o: QMatrix,
    /// qwen2's biases of q, k and v.
    pub qkv_bias: Option<[Vec<f32>; 3]>,
    /// qwen3's per-head norms of q and k (before the rotation).
    pub qk_norm: Option<[Vec<f32>; 2]>,
    /// gemma3's norms of the attention's and the feed-forward's outputs, before the residual sum.
    pub post_norms: Option<[Vec<f32>; 2]>,
    pub ffn_norm: Vec<f32>,
    pub gate: QMatrix,
    pub up: QMatrix,
    pub down: QMatrix,
    /// `Some(n)`: a query sees the last n positions only (gemma3's sliding layers, which also take
    /// the local rotary base).
    pub window: Option<usize>,
}

/// A model's weights; shared by every conversation (`Cache` holds one's state).
#[derive(Debug)]
pub struct Model {
    config: Config,
    embeddings: QMatrix,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    /// `None`: the embeddings, tied.
    output: Option<QMatrix>,
    /// `[position][pair]`, for the global base, and the local one where it differs.
    rotary: (Vec<f32>, Vec<f32>),
    rotary_local: Option<(Vec<f32>, Vec<f32>)>,
    threads: usize,
}

/// One sequence's share of a pass: `tokens` continue `cache` from `position`.
pub struct Step<'a> {
    pub cache: &'a mut Cache,
    pub tokens: &'a [u32],
    pub position: usize,
}

/// The keys and values of the positions so far, per layer (`[position][kv head][value]`). A clone is
/// a snapshot: the prefix cache keeps one per shared system prompt.
#[derive(Debug, Clone, Default)]
pub struct Cache {
    layers: Vec<(Vec<f32>, Vec<f32>)>,
    len: usize,
}

impl Cache {
    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Rows of activations that threads write (each its own rows) and then read.
struct Acts {
    cols: usize,
    /// Whether rows are quantized to 32-value blocks, and to Q8_K.
    blocks: bool,
    super_blocks: bool,
    f: Shared<f32>,
    d: Shared<f32>,
    s: Shared<f32>,
    sums: Shared<i32>,
    q: Shared<i8>,
    /// The Q8_K quantization (see [`ActRow`]); empty where a row is not whole super-blocks.
    kd: Shared<f32>,
    kq: Shared<i8>,
    ks: Shared<i16>,
}

impl Acts {
    /// `rows` rows of `cols` values, quantized as `reads` says (super-blocks only where a row is
    /// whole super-blocks).
    fn new(rows: usize, cols: usize, reads: Reads) -> Acts {
        let b = if reads.blocks { rows * cols } else { 0 };
        let k = if reads.super_blocks && cols.is_multiple_of(256) {
            rows * cols
        } else {
            0
        };
        Acts {
            cols,
            blocks: b > 0,
            super_blocks: k > 0,
            f: Shared::new(vec![0.; rows * cols]),
            d: Shared::new(vec![0.; b / BLOCK]),
            s: Shared::new(vec![0.; b / BLOCK]),
            sums: Shared::new(vec![0; b / BLOCK]),
            q: Shared::new(vec![0; b]),
            kd: Shared::new(vec![0.; k / 256]),
            kq: Shared::new(vec![0; k]),
            ks: Shared::new(vec![0; k / 16]),
        }
    }

    /// Where row `t` is in the 32-value block buffers (empty if no one reads them).
    fn b_range(&self, t: usize) -> std::ops::Range<usize> {
        if self.blocks {
            t * self.cols..(t + 1) * self.cols
        } else {
            0..0
        }
    }

    /// Where row `t` is in the Q8_K buffers (empty if no one reads them).
    fn k_range(&self, t: usize) -> std::ops::Range<usize> {
        if self.super_blocks {
            t * self.cols..(t + 1) * self.cols
        } else {
            0..0
        }
    }

    /// Row `t`, to read.
    ///
    /// # Safety
    /// No one writes row `t` in this step.
    unsafe fn row(&self, t: usize) -> ActRow<'_> {
        let (n, b, k) = (self.cols, self.b_range(t), self.k_range(t));
        // SAFETY: the caller's.
        unsafe {
            ActRow {
                f: self.f.get(t * n..(t + 1) * n),
                d: self.d.get(b.start / BLOCK..b.end / BLOCK),
                s: self.s.get(b.start / BLOCK..b.end / BLOCK),
                sums: self.sums.get(b.start / BLOCK..b.end / BLOCK),
                q: self.q.get(b.clone()),
                kd: self.kd.get(k.start / 256..k.end / 256),
                kq: self.kq.get(k.clone()),
                ks: self.ks.get(k.start / 16..k.end / 16),
            }
        }
    }

    /// Rows `0..n`, to read (made once for a whole product: a matrix of short rows, such as an
    /// output matrix of 262,144 rows of 640 values, would otherwise make them once per weight row).
    ///
    /// # Safety
    /// No one writes those rows in this step.
    unsafe fn rows(&self, n: usize) -> Vec<ActRow<'_>> {
        // SAFETY: the caller's.
        (0..n).map(|t| unsafe { self.row(t) }).collect()
    }

    /// Row `t`'s floats, to write.
    ///
    /// # Safety
    /// No one else touches row `t` in this step.
    #[allow(clippy::mut_from_ref)]
    unsafe fn floats(&self, t: usize) -> &mut [f32] {
        // SAFETY: the caller's.
        unsafe { self.f.part(t * self.cols..(t + 1) * self.cols) }
    }

    /// Quantizes row `t` from its floats.
    ///
    /// # Safety
    /// No one else touches row `t` in this step.
    unsafe fn quantize(&self, t: usize) {
        let (b, k) = (self.b_range(t), self.k_range(t));
        // SAFETY: the caller's.
        unsafe {
            if !b.is_empty() {
                kernels::quantize_row(
                    self.f.get(b.clone()),
                    self.d.part(b.start / BLOCK..b.end / BLOCK),
                    self.s.part(b.start / BLOCK..b.end / BLOCK),
                    self.q.part(b.clone()),
                    self.sums.part(b.start / BLOCK..b.end / BLOCK),
                );
            }
            if !k.is_empty() {
                kernels::quantize_row_k(
                    self.f.get(k.clone()),
                    self.kd.part(k.start / 256..k.end / 256),
                    self.kq.part(k.clone()),
                    self.ks.part(k.start / 16..k.end / 16),
                );
            }
        }
    }
}

/// `out = x / rms(x) · weight`, the mean of squares summed in f64 as llama.cpp does.
fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let sum: f64 = x.iter().map(|v| f64::from(v * v)).sum();
    let scale = 1. / ((sum / x.len() as f64) as f32 + eps).sqrt();
    for ((o, v), w) in out.iter_mut().zip(x).zip(weight) {
        *o = v * scale * w;
    }
}

/// The gates of a tile (its first `take` rows' first `size` values): SiLU `x·σ(x)`, or GELU's tanh
/// approximation (as llama.cpp's `ggml_gelu`) `½x(1 + tanh z) = x·σ(2z)` with
/// `z = √(2/π)(x + 0.044715x³)`; both `x / (1 + e^y)`, the whole tile in one call.
fn gates(activation: Activation, g: &[[f32; 2 * ROWS]; 8], take: usize, size: usize) -> [[f32; 2 * ROWS]; 8] {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let n = take * size;
    let mut x = [0f32; 8 * 2 * ROWS];
    for (k, row) in g.iter().take(take).enumerate() {
        x[k * size..(k + 1) * size].copy_from_slice(&row[..size]);
    }
    let mut y = [0f32; 8 * 2 * ROWS];
    for (y, &x) in y.iter_mut().zip(&x[..n]) {
        *y = match activation {
            Activation::Silu => -x,
            Activation::Gelu => -2. * SQRT_2_OVER_PI * x * (1. + 0.044_715 * x * x),
        };
    }
    let mut gated = [0f32; 8 * 2 * ROWS];
    kernels::sigmoid_gates(&x[..n], &y[..n], &mut gated[..n]);
    let mut out = [[0f32; 2 * ROWS]; 8];
    for (k, row) in out.iter_mut().take(take).enumerate() {
        row[..size].copy_from_slice(&gated[k * size..(k + 1) * size]);
    }
    out
}

impl Model {
    pub fn new(
        config: Config,
        embeddings: QMatrix,
        layers: Vec<Layer>,
        norm: Vec<f32>,
        output: Option<QMatrix>,
    ) -> Result<Model, String> {
        let c = &config;
        let (w, q, kv) = (c.width, c.heads * c.head_dim, c.kv_heads * c.head_dim);
        let shape = |name: &str, m: &QMatrix, rows: usize, cols: usize| {
            if (m.rows, m.cols) == (rows, cols) {
                Ok(())
            } else {
                Err(format!(
                    "{name} is {}×{}, the model needs {rows}×{cols}",
                    m.rows, m.cols
                ))
            }
        };
        if c.heads == 0 || c.kv_heads == 0 || !c.heads.is_multiple_of(c.kv_heads) || !c.head_dim.is_multiple_of(2) {
            return Err(format!(
                "{} heads over {} key/value heads of {} values cannot be computed",
                c.heads, c.kv_heads, c.head_dim
            ));
        }
        for (name, n) in [("width", w), ("attention width", q), ("feed-forward width", c.ffn)] {
            if !n.is_multiple_of(BLOCK) {
                return Err(format!("a {name} of {n} is not a multiple of {BLOCK}"));
            }
        }
        shape("token_embd", &embeddings, embeddings.rows, w)?;
        if let Some(o) = &output {
            shape("output", o, embeddings.rows, w)?;
        }
        if c.context > MOST_POSITIONS {
            return Err(format!(
                "a context of {} positions is more than the {MOST_POSITIONS} the rotary tables may cover",
                c.context
            ));
        }
        for (i, l) in layers.iter().enumerate() {
            let name = |n: &str| format!("blk.{i}.{n}");
            shape(&name("attn_q"), &l.q, q, w)?;
            shape(&name("attn_k"), &l.k, kv, w)?;
            shape(&name("attn_v"), &l.v, kv, w)?;
            shape(&name("attn_output"), &l.o, w, q)?;
            shape(&name("ffn_gate"), &l.gate, c.ffn, w)?;
            shape(&name("ffn_up"), &l.up, c.ffn, w)?;
            shape(&name("ffn_down"), &l.down, w, c.ffn)?;
            let post = l.post_norms.as_ref().map_or([w; 2], |[a, b]| [a.len(), b.len()]);
            let norms = [l.attn_norm.len(), l.ffn_norm.len(), post[0], post[1]];
            let heads = l.qk_norm.as_ref().map_or([c.head_dim; 2], |[a, b]| [a.len(), b.len()]);
            let biases = l
                .qkv_bias
                .as_ref()
                .map_or([q, kv, kv], |[a, b, c]| [a.len(), b.len(), c.len()]);
            if norms != [w; 4] || heads != [c.head_dim; 2] || biases != [q, kv, kv] {
                return Err(format!("{}: a norm or bias has the wrong length", name("*")));
            }
        }
        if norm.len() != w {
            return Err("output_norm has the wrong length".into());
        }
        let pairs = c.head_dim / 2;
        let table = |base: f32| {
            let theta: Vec<f32> = (0..pairs)
                .map(|i| 1. / base.powf((2 * i) as f32 / c.head_dim as f32))
                .collect();
            let mut cos = Vec::with_capacity(c.context * pairs);
            let mut sin = Vec::with_capacity(c.context * pairs);
            for p in 0..c.context {
                for t in &theta {
                    let angle = p as f32 * t;
                    cos.push(angle.cos());
                    sin.push(angle.sin());
                }
            }
            (cos, sin)
        };
        let global = table(c.rope_base);
        let local = c.rope_base_local.map(table);
        Ok(Model {
            config,
            embeddings,
            layers,
            norm,
            output,
            rotary: global,
            rotary_local: local,
            threads: team::threads(),
        })
    }

    /// What the matrices `of` each layer (and the output matrix, with `output`) read of their
    /// activations.
    fn reads<'a, const K: usize>(&'a self, of: impl Fn(&'a Layer) -> [&'a QMatrix; K], output: bool) -> Reads {
        let last = output.then(|| self.output.as_ref().unwrap_or(&self.embeddings).reads());
        self.layers
            .iter()
            .flat_map(of)
            .map(QMatrix::reads)
            .chain(last)
            .fold(Reads::default(), Reads::or)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Rows of the output matrix: the vocabulary's size.
    pub fn vocab(&self) -> usize {
        self.output.as_ref().unwrap_or(&self.embeddings).rows
    }

    /// The same model on `n` threads (at least one).
    pub fn with_threads(mut self, n: usize) -> Model {
        self.threads = n.max(1);
        self
    }

    /// Bytes of weights a decoding step reads.
    pub fn size(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                [&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down]
                    .iter()
                    .map(|m| m.size())
                    .sum::<usize>()
            })
            .sum();
        layers + self.output.as_ref().unwrap_or(&self.embeddings).size()
    }

    /// `x += w·a` row by row, or `x += norm(w·a)` with a post-norm; ends at a barrier.
    ///
    /// # Safety
    /// As [`matmul`]: no one writes `a`, `x` or `post` but through this call, in this step.
    #[allow(clippy::too_many_arguments)]
    unsafe fn residual(
        &self,
        m: &Member,
        w: &QMatrix,
        a: &Acts,
        n: usize,
        norm: Option<&Vec<f32>>,
        x: &Shared<f32>,
        post: &Shared<f32>,
    ) {
        let width = self.config.width;
        // SAFETY: each member writes its own rows of `w`'s output, then its own tokens' rows.
        unsafe {
            match norm {
                None => matmul(m, w, a, n, |t, r, v| x.add(t * width + r, v)),
                Some(norm) => {
                    matmul(m, w, a, n, |t, r, v| post.set(t * width + r, v));
                    m.sync();
                    for t in m.share(n, 1) {
                        let row = t * width..(t + 1) * width;
                        let mut normed = vec![0f32; width];
                        rms_norm(post.get(row.clone()), norm, self.config.eps, &mut normed);
                        for (o, v) in x.part(row).iter_mut().zip(normed) {
                            *o += v;
                        }
                    }
                }
            }
        }
        m.sync();
    }

    /// The logits after `tokens`, which continue `cache` from `position` (earlier positions are kept,
    /// later ones dropped: position 0 starts over).
    pub fn forward(&self, cache: &mut Cache, tokens: &[u32], position: usize) -> Result<Vec<f32>, String> {
        let mut logits = self.forward_batch(&mut [Step {
            cache,
            tokens,
            position,
        }])?;
        Ok(logits.pop().unwrap_or_default())
    }

    /// Several sequences in one pass, each with its own cache: each [`Step`] continues its cache with
    /// its tokens, as [`Model::forward`] would; returns each one's logits after its last token. The
    /// weights are read once for all of them (matrix-matrix work where one sequence would be
    /// matrix-vector), and each row's arithmetic is the same whatever else is in the pass: a sequence
    /// gets the logits it would get alone.
    pub fn forward_batch(&self, steps: &mut [Step<'_>]) -> Result<Vec<Vec<f32>>, String> {
        let c = &self.config;
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        for step in steps.iter() {
            self.check(step)?;
        }
        let (w, hd, ffn) = (c.width, c.head_dim, c.ffn);
        let (qw, kvw) = (c.heads * hd, c.kv_heads * hd);
        let mut rows = Vec::new();
        let mut tokens = Vec::new();
        let mut last = Vec::new();
        for (s, step) in steps.iter().enumerate() {
            rows.extend((0..step.tokens.len()).map(|t| (s, step.position + t)));
            tokens.extend_from_slice(step.tokens);
            last.push(rows.len() - 1);
        }
        let n = rows.len();
        let seen = steps.iter().map(|s| s.position + s.tokens.len()).max().unwrap_or(0);
        // `[layer][sequence]`. Until the pass has finished a cache holds nothing it can vouch for:
        // should a thread panic, a later step from a position past 0 is refused instead of reading keys
        // that are not there.
        let mut kv: Vec<Vec<(Shared<f32>, Shared<f32>)>> = (0..self.layers.len()).map(|_| Vec::new()).collect();
        for step in steps.iter_mut() {
            let total = step.position + step.tokens.len();
            step.cache.layers.resize_with(self.layers.len(), Default::default);
            step.cache.len = 0;
            for (layer, (k, v)) in kv.iter_mut().zip(step.cache.layers.iter_mut()) {
                k.resize(total * kvw, 0.);
                v.resize(total * kvw, 0.);
                layer.push((Shared::new(std::mem::take(k)), Shared::new(std::mem::take(v))));
            }
        }
        let vocab = self.vocab();
        let p = Pass {
            tokens: &tokens,
            rows: &rows,
            last: &last,
            n,
            tiles: tiles(c, steps, self.threads),
            qw,
            kvw,
            x: Shared::new(vec![0f32; n * w]),
            // gemma3's outputs before their norm.
            post: Shared::new(vec![
                0f32;
                if self.layers.iter().any(|l| l.post_norms.is_some()) {
                    n * w
                } else {
                    0
                }
            ]),
            normed: Acts::new(n, w, self.reads(|l| [&l.q, &l.k, &l.v, &l.gate, &l.up], true)),
            q: Shared::new(vec![0f32; n * qw]),
            attended: Acts::new(n, qw, self.reads(|l| [&l.o], false)),
            inner: Acts::new(n, ffn, self.reads(|l| [&l.down], false)),
            logits: Shared::new(vec![0f32; last.len() * vocab]),
        };

        // SAFETY (every `unsafe` below): within a step each member writes only the rows, elements or
        // (token, head) slices of its own share, and reads only what the steps before the last
        // `sync` wrote.
        team::run(self.threads, |m| unsafe {
            self.embed(m, &p);
            let mut scratch = Scratch::new(p.tiles.iter().map(Tile::queries).max().unwrap_or(0), seen, c.head_dim);
            for (layer, kv) in self.layers.iter().zip(&kv) {
                self.project_qkv(m, &p, layer, kv);
                self.rotate(m, &p, layer, kv);
                self.attend(m, &p, layer, kv, &mut scratch);
                self.residual(
                    m,
                    &layer.o,
                    &p.attended,
                    n,
                    layer.post_norms.as_ref().map(|p| &p[0]),
                    &p.x,
                    &p.post,
                );
                self.feed_forward(m, &p, layer);
                self.residual(
                    m,
                    &layer.down,
                    &p.inner,
                    n,
                    layer.post_norms.as_ref().map(|p| &p[1]),
                    &p.x,
                    &p.post,
                );
            }
            self.output_logits(m, &p);
        });

        let mut kv: Vec<std::vec::IntoIter<(Shared<f32>, Shared<f32>)>> = kv.into_iter().map(Vec::into_iter).collect();
        for step in steps.iter_mut() {
            for (layer, (k, v)) in kv.iter_mut().zip(step.cache.layers.iter_mut()) {
                if let Some((sk, sv)) = layer.next() {
                    *k = sk.into_inner();
                    *v = sv.into_inner();
                }
            }
            step.cache.len = step.position + step.tokens.len();
        }
        let logits = p.logits.into_inner();
        Ok(logits.chunks(vocab).map(<[f32]>::to_vec).collect())
    }

    /// Refuses a step that cannot be computed, before anything is touched.
    fn check(&self, step: &Step<'_>) -> Result<(), String> {
        let c = &self.config;
        let n = step.tokens.len();
        if n == 0 {
            return Err("no tokens to compute".into());
        }
        if step.position > step.cache.len {
            return Err(format!(
                "position {} is past the {} cached",
                step.position, step.cache.len
            ));
        }
        if step.position + n > c.context {
            return Err(format!(
                "{} positions exceed the context of {}",
                step.position + n,
                c.context
            ));
        }
        if let Some(&id) = step.tokens.iter().find(|&&id| id as usize >= self.embeddings.rows) {
            return Err(format!(
                "token {id} is outside the vocabulary of {}",
                self.embeddings.rows
            ));
        }
        Ok(())
    }

    /// The tokens' embeddings, scaled, into `x`; ends at a barrier.
    ///
    /// # Safety
    /// As [`matmul`]: each member writes only its own tokens' rows.
    unsafe fn embed(&self, m: &Member, p: &Pass) {
        let (c, w) = (&self.config, self.config.width);
        for t in m.share(p.n, 1) {
            // SAFETY: row `t` is this member's.
            let row = unsafe { p.x.part(t * w..(t + 1) * w) };
            self.embeddings.dequantize_row(p.tokens[t] as usize, row);
            if c.embedding_scale != 1. {
                row.iter_mut().for_each(|v| *v *= c.embedding_scale);
            }
        }
        m.sync();
    }

    /// The attention norm, then the queries into `q` and the new keys and values into the cache;
    /// ends at a barrier.
    ///
    /// # Safety
    /// As [`matmul`]: each member writes only its own tokens' and rows' slices.
    unsafe fn project_qkv(&self, m: &Member, p: &Pass, layer: &Layer, kv: &[(Shared<f32>, Shared<f32>)]) {
        let (c, w) = (&self.config, self.config.width);
        let (n, qw, kvw) = (p.n, p.qw, p.kvw);
        // SAFETY: each member normalizes its own tokens' rows, then writes its own rows of each output.
        unsafe {
            for t in m.share(n, 1) {
                rms_norm(p.x.get(t * w..(t + 1) * w), &layer.attn_norm, c.eps, p.normed.floats(t));
                p.normed.quantize(t);
            }
            m.sync();
            let bias = |i: usize, r: usize| layer.qkv_bias.as_ref().map_or(0., |b| b[i][r]);
            matmul(m, &layer.q, &p.normed, n, |t, r, v| p.q.set(t * qw + r, v + bias(0, r)));
            matmul(m, &layer.k, &p.normed, n, |t, r, v| {
                let (s, position) = p.rows[t];
                kv[s].0.set(position * kvw + r, v + bias(1, r))
            });
            matmul(m, &layer.v, &p.normed, n, |t, r, v| {
                let (s, position) = p.rows[t];
                kv[s].1.set(position * kvw + r, v + bias(2, r))
            });
        }
        m.sync();
    }

    /// Per-head norms (qwen3) and the rotation, of queries and the new keys; ends at a barrier.
    ///
    /// # Safety
    /// Each member rewrites only the (token, head) slices of its own share.
    unsafe fn rotate(&self, m: &Member, p: &Pass, layer: &Layer, kv: &[(Shared<f32>, Shared<f32>)]) {
        let c = &self.config;
        let (hd, qw, kvw) = (c.head_dim, p.qw, p.kvw);
        let pairs = hd / 2;
        for unit in m.share(p.n * (c.heads + c.kv_heads), 1) {
            let (t, head) = (unit / (c.heads + c.kv_heads), unit % (c.heads + c.kv_heads));
            let (s, position) = p.rows[t];
            // SAFETY: the (token, head) slice is this member's.
            let (v, norm) = unsafe {
                if head < c.heads {
                    (
                        p.q.part(t * qw + head * hd..t * qw + (head + 1) * hd),
                        layer.qk_norm.as_ref().map(|n| &n[0]),
                    )
                } else {
                    let at = position * kvw + (head - c.heads) * hd;
                    (kv[s].0.part(at..at + hd), layer.qk_norm.as_ref().map(|n| &n[1]))
                }
            };
            if let Some(weight) = norm {
                let copy = v.to_vec();
                rms_norm(&copy, weight, c.eps, v);
            }
            let at = position * pairs;
            let (cos, sin) = match (&self.rotary_local, layer.window) {
                (Some(local), Some(_)) => local,
                _ => &self.rotary,
            };
            let (cos, sin) = (&cos[at..at + pairs], &sin[at..at + pairs]);
            for i in 0..pairs {
                let (a, b) = match c.rope {
                    Rope::Interleaved => (2 * i, 2 * i + 1),
                    Rope::Halves => (i, i + pairs),
                };
                let (x0, x1) = (v[a], v[b]);
                v[a] = x0 * cos[i] - x1 * sin[i];
                v[b] = x0 * sin[i] + x1 * cos[i];
            }
        }
        m.sync();
    }

    /// Each query head's attention over the keys it may see, into `attended` (then quantized), a
    /// [`Tile`] at a time: the keys and values of a tile's key/value head are read once, a block of
    /// positions at a time, for all its queries (the query heads of a group, and up to
    /// [`TILE_TOKENS`] tokens of a prompt), gathered side by side in `scratch`. Each query's sums are
    /// the same whatever else is in its tile ([`kernels::scores`], [`kernels::weigh`]); the
    /// positions a query may not see get a weight of zero. Ends at a barrier.
    ///
    /// # Safety
    /// Each member writes only the (token, head) slices of its tiles, then its own tokens' rows.
    unsafe fn attend(
        &self,
        m: &Member,
        p: &Pass,
        layer: &Layer,
        kv: &[(Shared<f32>, Shared<f32>)],
        scratch: &mut Scratch,
    ) {
        let c = &self.config;
        let (hd, qw, kvw) = (c.head_dim, p.qw, p.kvw);
        let scale = 1. / (hd as f32).sqrt();
        // Which positions token `k` of a tile sees: from `first` (a sliding window's start) to its own.
        let span = |row: usize| {
            let seen = p.rows[row].1 + 1;
            (layer.window.map_or(0, |window| seen.saturating_sub(window)), seen)
        };
        // SAFETY: the queries, keys and values read were written before the last barrier; the output
        // slices and rows written are this member's.
        unsafe {
            // Taken in turn, not in runs: a later token sees more keys, so runs would leave the
            // last member most of a prompt's attention.
            for unit in m.turns(p.tiles.len()) {
                let tile = &p.tiles[unit];
                let (keys, values) = &kv[p.rows[tile.row].0];
                let heads = tile.heads.0..tile.heads.1;
                let queries = tile.tokens * heads.len();
                // A later token's window starts no earlier and ends later.
                let (lo, hi) = (span(tile.row).0, span(tile.row + tile.tokens - 1).1);
                let width = hi - lo;
                let at = tile.kv * hd;
                let (keys, values) = (keys.get(0..hi * kvw), values.get(0..hi * kvw));
                // Query `i` is token `i / heads` of the tile in head `heads.start + i % heads`: its
                // range of `q` (and of `attended`), and the positions it sees.
                let query = |i: usize| {
                    let (t, head) = (tile.row + i / heads.len(), heads.start + i % heads.len());
                    (t * qw + head * hd..t * qw + (head + 1) * hd, span(t))
                };
                let (q, sums) = (&mut scratch.queries[..queries * hd], &mut scratch.sums[..queries * hd]);
                for (i, q) in q.chunks_exact_mut(hd).enumerate() {
                    q.copy_from_slice(p.q.get(query(i).0));
                }
                let scores = &mut scratch.scores[..queries * width];
                let blocks = || (lo..hi).step_by(KEY_BLOCK).map(|b| (b, (b + KEY_BLOCK).min(hi)));
                for (block, end) in blocks() {
                    let keys = &keys[block * kvw + at..(end - 1) * kvw + at + hd];
                    let keys = Strided {
                        data: keys,
                        stride: kvw,
                    };
                    kernels::scores(q, hd, keys, scale, &mut scores[block - lo..], width);
                }
                for (i, row) in scores.chunks_exact_mut(width).enumerate() {
                    let (first, seen) = query(i).1;
                    kernels::softmax(&mut row[first - lo..seen - lo]);
                    row[..first - lo].fill(0.);
                    row[seen - lo..].fill(0.);
                }
                sums.fill(0.);
                for (block, end) in blocks() {
                    let values = &values[block * kvw + at..(end - 1) * kvw + at + hd];
                    let (weights, values) = (
                        Strided {
                            data: &scores[block - lo..],
                            stride: width,
                        },
                        Strided {
                            data: values,
                            stride: kvw,
                        },
                    );
                    kernels::weigh(sums, hd, weights, end - block, values);
                }
                for (i, sums) in sums.chunks_exact(hd).enumerate() {
                    p.attended.f.part(query(i).0).copy_from_slice(sums);
                }
            }
            m.sync();
            for t in m.share(p.n, 1) {
                p.attended.quantize(t);
            }
        }
        m.sync();
    }

    /// The feed-forward norm, then `act(gate·x) ⊙ (up·x)` into `inner` (then quantized); ends at a
    /// barrier.
    ///
    /// # Safety
    /// As [`matmul`]: each member writes only its own tokens' rows, then its own columns of `inner`.
    unsafe fn feed_forward(&self, m: &Member, p: &Pass, layer: &Layer) {
        let c = &self.config;
        let (w, ffn, n) = (c.width, c.ffn, p.n);
        let (normed, inner) = (&p.normed, &p.inner);
        // SAFETY: see above.
        unsafe {
            for t in m.share(n, 1) {
                rms_norm(p.x.get(t * w..(t + 1) * w), &layer.ffn_norm, c.eps, normed.floats(t));
                normed.quantize(t);
            }
            m.sync();
            let rows = normed.rows(n);
            let share = m.share(ffn, GRAIN);
            each_block(&[&layer.gate, &layer.up], share.clone(), n, |r, size| {
                each_tile(size, n, |t, take| {
                    let (g, u) = (
                        block_tile(&layer.gate, (r, size), &rows, t, take),
                        block_tile(&layer.up, (r, size), &rows, t, take),
                    );
                    let gated = gates(c.activation, &g, take, size);
                    for k in 0..take {
                        for i in 0..size.min(share.end - r) {
                            inner.f.set((t + k) * ffn + r + i, gated[k][i] * u[k][i]);
                        }
                    }
                });
            });
            m.sync();
            for t in m.share(n, 1) {
                inner.quantize(t);
            }
        }
        m.sync();
    }

    /// The final norm of each sequence's last token, then the output matrix into `logits`
    /// (`[sequence][vocabulary]`).
    ///
    /// # Safety
    /// As [`matmul`]: each member normalizes its own sequences' rows, then writes its own rows.
    unsafe fn output_logits(&self, m: &Member, p: &Pass) {
        let w = self.config.width;
        let vocab = self.vocab();
        let output = self.output.as_ref().unwrap_or(&self.embeddings);
        // SAFETY: see above.
        unsafe {
            for i in m.share(p.last.len(), 1) {
                let row = p.last[i];
                rms_norm(
                    p.x.get(row * w..(row + 1) * w),
                    &self.norm,
                    self.config.eps,
                    p.normed.floats(i),
                );
                p.normed.quantize(i);
            }
            m.sync();
            matmul(m, output, &p.normed, p.last.len(), |t, r, v| {
                p.logits.set(t * vocab + r, v)
            });
        }
    }
}

/// One forward pass's sizes and buffers, shared by the team: each stage reads what the stages
/// before the last barrier wrote, and writes its own share.
struct Pass<'a> {
    /// The tokens of every sequence, one after the other; `rows[t]` is token `t`'s sequence and
    /// position in it; `last[s]` the row of sequence `s`'s last token.
    tokens: &'a [u32],
    rows: &'a [(usize, usize)],
    last: &'a [usize],
    n: usize,
    /// Attention's work, in the order members take turns at it.
    tiles: Vec<Tile>,
    /// Widths of all query heads and of all key (or value) heads.
    qw: usize,
    kvw: usize,
    /// The residual stream, `[token][width]`.
    x: Shared<f32>,
    /// gemma3's outputs before their norm.
    post: Shared<f32>,
    normed: Acts,
    q: Shared<f32>,
    attended: Acts,
    inner: Acts,
    logits: Shared<f32>,
}

/// A member's scratch for [`Model::attend`]: a tile's scores (a row per query), its queries side by
/// side, and their weighted sums.
struct Scratch {
    scores: Vec<f32>,
    queries: Vec<f32>,
    sums: Vec<f32>,
}

impl Scratch {
    fn new(queries: usize, seen: usize, head_dim: usize) -> Scratch {
        Scratch {
            scores: vec![0.; queries * seen],
            queries: vec![0.; queries * head_dim],
            sums: vec![0.; queries * head_dim],
        }
    }
}

/// Tokens of one sequence whose queries share a [`Tile`]: each key a tile reads serves them all.
const TILE_TOKENS: usize = 4;
/// Positions of keys (or values) a tile reads for all its queries before the next: 32 positions of
/// a 128-wide head are 16 KiB, which stay in the first-level cache.
const KEY_BLOCK: usize = 32;

/// A share of attention's work: the query heads `heads` (of key/value head `kv`) of `tokens`
/// consecutive tokens of one sequence, from `row`.
#[derive(Debug, Clone, PartialEq)]
struct Tile {
    row: usize,
    tokens: usize,
    kv: usize,
    heads: (usize, usize),
}

impl Tile {
    fn queries(&self) -> usize {
        self.tokens * (self.heads.1 - self.heads.0)
    }
}

/// The tiles of a pass: per sequence, blocks of [`TILE_TOKENS`] tokens × key/value heads, the
/// last block first (it sees the most keys, and turns go round the members); when there are fewer
/// tiles than `threads` (one sequence's next token, one key/value head), a group's query heads are
/// split between tiles so that every thread has some.
fn tiles(c: &Config, steps: &[Step<'_>], threads: usize) -> Vec<Tile> {
    let group = c.heads / c.kv_heads;
    let blocks: usize = steps.iter().map(|s| s.tokens.len().div_ceil(TILE_TOKENS)).sum();
    let parts = threads.div_ceil(blocks * c.kv_heads).clamp(1, group);
    let mut out = Vec::with_capacity(blocks * c.kv_heads * parts);
    let mut row = 0;
    for step in steps {
        let n = step.tokens.len();
        for start in (0..n).step_by(TILE_TOKENS).rev() {
            for kv in 0..c.kv_heads {
                for part in 0..parts {
                    let base = kv * group;
                    out.push(Tile {
                        row: row + start,
                        tokens: TILE_TOKENS.min(n - start),
                        kv,
                        heads: (base + part * group / parts, base + (part + 1) * group / parts),
                    });
                }
            }
        }
        row += n;
    }
    out
}

mod blocks;
use blocks::{GRAIN, block_tile, each_block, each_tile, matmul};

#[cfg(test)]
mod tests;
