//! Gemma 3 over quantized GGUF weights, as llama.cpp computes it.
//!
//! Derived from candle-transformers' `quantized_gemma3` (MIT OR Apache-2.0, the candle authors), with
//! three differences that make its logits llama.cpp's (`tests/it/gguf_logits.rs`): the feed-forward
//! gate is GELU (tanh approximation), not SiLU; a sliding-window layer attends to the last
//! `sliding_window` positions in decoding too, not only when a prompt is computed; and the rotary
//! tables cover the file's context length instead of 128K positions per layer (2.4 GB for the 270M
//! model).

use candle_core::quantized::{QMatMul, gguf_file};
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::Embedding;
use candle_transformers::quantized_nn::RmsNorm;

/// Every sixth layer attends globally, the others to a sliding window (llama.cpp's default pattern).
const SLIDING_WINDOW_PATTERN: usize = 6;
const ROPE_BASE: f32 = 1_000_000.;
const ROPE_BASE_SLIDING: f32 = 10_000.;

#[derive(Debug, Clone)]
struct Rotary {
    sin: Tensor,
    cos: Tensor,
}

impl Rotary {
    fn new(head_dim: usize, base: f32, positions: usize, device: &Device) -> Result<Self> {
        let theta: Vec<f32> = (0..head_dim)
            .step_by(2)
            .map(|i| 1f32 / base.powf(i as f32 / head_dim as f32))
            .collect();
        let theta = Tensor::new(theta.as_slice(), device)?;
        let angles = Tensor::arange(0, positions as u32, device)?
            .to_dtype(DType::F32)?
            .reshape((positions, 1))?
            .matmul(&theta.reshape((1, theta.elem_count()))?)?;
        Ok(Self {
            sin: angles.sin()?,
            cos: angles.cos()?,
        })
    }

    fn apply(&self, x: &Tensor, position: usize) -> Result<Tensor> {
        let (_, _, len, _) = x.dims4()?;
        let cos = self.cos.narrow(0, position, len)?;
        let sin = self.sin.narrow(0, position, len)?;
        candle_nn::rotary_emb::rope(&x.contiguous()?, &cos, &sin)
    }
}

#[derive(Debug, Clone)]
struct Layer {
    q: QMatMul,
    k: QMatMul,
    v: QMatMul,
    o: QMatMul,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    attn_norm: RmsNorm,
    post_attn_norm: RmsNorm,
    ffn_norm: RmsNorm,
    post_ffn_norm: RmsNorm,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    /// `Some(n)`: attends to the last n positions only.
    window: Option<usize>,
    rotary: Rotary,
    /// Keys and values so far; new tensors each step (never written in place), so a clone is a snapshot.
    cache: Option<(Tensor, Tensor)>,
}

impl Layer {
    /// Additive mask for `len` queries from `position` over `position + len` keys: causal, and within
    /// the window for a sliding layer (a key is seen when the query is fewer than `window` positions on).
    fn mask(&self, len: usize, position: usize, device: &Device) -> Result<Tensor> {
        let total = position + len;
        let values: Vec<f32> = (0..len)
            .flat_map(|i| {
                let q = position + i;
                (0..total).map(move |k| {
                    let seen = k <= q && self.window.is_none_or(|w| q - k < w);
                    if seen { 0. } else { f32::NEG_INFINITY }
                })
            })
            .collect();
        Tensor::from_vec(values, (1, 1, len, total), device)
    }

    fn attention(&mut self, x: &Tensor, position: usize) -> Result<Tensor> {
        let (b, len, _) = x.dims3()?;
        let split = |t: Tensor, heads: usize| t.reshape((b, len, heads, self.head_dim))?.transpose(1, 2);
        let q = split(self.q.forward(x)?, self.heads)?;
        let k = split(self.k.forward(x)?, self.kv_heads)?;
        let v = split(self.v.forward(x)?, self.kv_heads)?;
        let q = self.rotary.apply(&self.q_norm.forward(&q.contiguous()?)?, position)?;
        let k = self.rotary.apply(&self.k_norm.forward(&k.contiguous()?)?, position)?;
        let (k, v) = match (&self.cache, position) {
            (Some((ck, cv)), p) if p > 0 => (Tensor::cat(&[ck, &k], 2)?, Tensor::cat(&[cv, &v], 2)?),
            _ => (k, v.contiguous()?),
        };
        self.cache = Some((k.clone(), v.clone()));
        let total = position + len;
        let (k, v, mask) = if len == 1 {
            // One query: the window is the last `window` keys.
            match self.window {
                Some(w) if total > w => (k.narrow(2, total - w, w)?, v.narrow(2, total - w, w)?, None),
                _ => (k, v, None),
            }
        } else {
            (k, v, Some(self.mask(len, position, x.device())?))
        };
        let rep = self.heads / self.kv_heads;
        let k = candle_transformers::utils::repeat_kv(k, rep)?.contiguous()?;
        let v = candle_transformers::utils::repeat_kv(v, rep)?.contiguous()?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let mut scores = (q.matmul(&k.t()?)? * scale)?;
        if let Some(mask) = mask {
            scores = scores.broadcast_add(&mask)?;
        }
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let out = weights.matmul(&v)?.transpose(1, 2)?.reshape((b, len, self.heads * self.head_dim))?;
        self.o.forward(&out)
    }

    fn feed_forward(&self, x: &Tensor) -> Result<Tensor> {
        let gate = self.gate.forward(x)?.gelu()?;
        self.down.forward(&(gate * self.up.forward(x)?)?)
    }
}

#[derive(Debug, Clone)]
pub struct ModelWeights {
    embeddings: Embedding,
    width: usize,
    layers: Vec<Layer>,
    norm: RmsNorm,
    output: QMatMul,
}

impl ModelWeights {
    pub fn from_gguf<R: std::io::Seek + std::io::Read>(
        ct: gguf_file::Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let get = |key: &str| match ct.metadata.get(&format!("gemma3.{key}")) {
            None => candle_core::bail!("cannot find gemma3.{key} in metadata"),
            Some(v) => Ok(v),
        };
        let heads = get("attention.head_count")?.to_u32()? as usize;
        let kv_heads = get("attention.head_count_kv")?.to_u32()? as usize;
        let blocks = get("block_count")?.to_u32()? as usize;
        let width = get("embedding_length")?.to_u32()? as usize;
        let head_dim = get("attention.key_length")?.to_u32()? as usize;
        let eps = get("attention.layer_norm_rms_epsilon")?.to_f32()? as f64;
        let window = get("attention.sliding_window")?.to_u32()? as usize;
        let context = get("context_length")?.to_u32()? as usize;
        let base = get("rope.freq_base").and_then(|v| v.to_f32()).unwrap_or(ROPE_BASE);
        let base_sliding = get("rope.local_freq_base")
            .and_then(|v| v.to_f32())
            .unwrap_or(ROPE_BASE_SLIDING);
        let mut tensor = |name: &str| ct.tensor(reader, name, device);
        let embeddings = tensor("token_embd.weight")?;
        let output = match tensor("output.weight") {
            Ok(t) => t,
            Err(_) => tensor("token_embd.weight")?,
        };
        let embeddings = embeddings.dequantize(device)?;
        let norm = RmsNorm::from_qtensor(tensor("output_norm.weight")?, eps)?;
        let global = Rotary::new(head_dim, base, context, device)?;
        let sliding = Rotary::new(head_dim, base_sliding, context, device)?;
        let mut layers = Vec::with_capacity(blocks);
        for i in 0..blocks {
            let mut matmul = |n: &str| QMatMul::from_qtensor(tensor(&format!("blk.{i}.{n}.weight"))?);
            let (q, k, v, o) = (matmul("attn_q")?, matmul("attn_k")?, matmul("attn_v")?, matmul("attn_output")?);
            let (gate, up, down) = (matmul("ffn_gate")?, matmul("ffn_up")?, matmul("ffn_down")?);
            let mut rms = |n: &str| RmsNorm::from_qtensor(tensor(&format!("blk.{i}.{n}.weight"))?, eps);
            let is_sliding = (i + 1) % SLIDING_WINDOW_PATTERN > 0;
            layers.push(Layer {
                q,
                k,
                v,
                o,
                q_norm: rms("attn_q_norm")?,
                k_norm: rms("attn_k_norm")?,
                attn_norm: rms("attn_norm")?,
                post_attn_norm: rms("post_attention_norm")?,
                ffn_norm: rms("ffn_norm")?,
                post_ffn_norm: rms("post_ffw_norm")?,
                gate,
                up,
                down,
                heads,
                kv_heads,
                head_dim,
                window: is_sliding.then_some(window),
                rotary: if is_sliding { sliding.clone() } else { global.clone() },
                cache: None,
            });
        }
        Ok(Self {
            embeddings: Embedding::new(embeddings, width),
            width,
            layers,
            norm,
            output: QMatMul::from_qtensor(output)?,
        })
    }

    /// The logits after `x` (a batch of id rows) continuing from `position`; position 0 starts over.
    pub fn forward(&mut self, x: &Tensor, position: usize) -> Result<Tensor> {
        let (_, len) = x.dims2()?;
        let mut h = (self.embeddings.forward(x)? * (self.width as f64).sqrt())?;
        for layer in &mut self.layers {
            let a = layer.attention(&layer.attn_norm.forward(&h)?, position)?;
            h = (layer.post_attn_norm.forward(&a)? + &h)?;
            let f = layer.feed_forward(&layer.ffn_norm.forward(&h)?)?;
            h = (layer.post_ffn_norm.forward(&f)? + &h)?;
        }
        let last = h.i((.., len - 1, ..))?;
        self.output.forward(&self.norm.forward(&last)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sliding_layer_sees_fewer_than_window_positions_back() {
        let layer_window = |window: Option<usize>| {
            let device = Device::Cpu;
            let rotary = Rotary::new(4, 10_000., 8, &device).unwrap();
            let q = QMatMul::from_qtensor(
                candle_core::quantized::QTensor::quantize(
                    &Tensor::zeros((32, 32), DType::F32, &device).unwrap(),
                    candle_core::quantized::GgmlDType::F32,
                )
                .unwrap(),
            )
            .unwrap();
            let norm = RmsNorm::from_qtensor(
                candle_core::quantized::QTensor::quantize(
                    &Tensor::ones(4, DType::F32, &device).unwrap(),
                    candle_core::quantized::GgmlDType::F32,
                )
                .unwrap(),
                1e-6,
            )
            .unwrap();
            Layer {
                q: q.clone(),
                k: q.clone(),
                v: q.clone(),
                o: q.clone(),
                q_norm: norm.clone(),
                k_norm: norm.clone(),
                attn_norm: norm.clone(),
                post_attn_norm: norm.clone(),
                ffn_norm: norm.clone(),
                post_ffn_norm: norm,
                gate: q.clone(),
                up: q.clone(),
                down: q,
                heads: 1,
                kv_heads: 1,
                head_dim: 4,
                window,
                rotary,
                cache: None,
            }
        };
        let seen = |m: &Tensor| -> Vec<Vec<u8>> {
            m.squeeze(0)
                .unwrap()
                .squeeze(0)
                .unwrap()
                .to_vec2::<f32>()
                .unwrap()
                .iter()
                .map(|r| r.iter().map(|v| u8::from(v.is_finite())).collect())
                .collect()
        };
        // Queries at positions 2, 3, 4 over keys 0..=4, window 2: each sees itself and the one before.
        let m = layer_window(Some(2)).mask(3, 2, &Device::Cpu).unwrap();
        assert_eq!(seen(&m), vec![vec![0, 1, 1, 0, 0], vec![0, 0, 1, 1, 0], vec![0, 0, 0, 1, 1]]);
        let m = layer_window(None).mask(2, 1, &Device::Cpu).unwrap();
        assert_eq!(seen(&m), vec![vec![1, 1, 0], vec![1, 1, 1]]);
    }
}
