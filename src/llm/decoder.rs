//! GGUF files of the llama, qwen2, qwen3, phi3 and gemma3 architectures on the project's own engine
//! (`incharacter_engine`): their tensors handed over as the file stores them, the hyper-parameters
//! read from the file's metadata.
//!
//! The engine multiplies F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K blocks with the
//! values stored; tensors of the other formats (Q2_K, Q3_K, BF16) are re-quantized to Q8_0 at load,
//! which keeps their values to within a fraction of their own rounding step.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::Device;
use super::LlmError;
use candle_core::quantized::{GgmlDType, QTensor, gguf_file};
use incharacter_engine::{Activation, Cache, Config, Format, Layer, Model, QMatrix, Rope};

/// A model and one conversation's attention cache; a clone shares the weights and copies the cache.
#[derive(Debug, Clone)]
pub struct Decoder {
    model: Arc<Model>,
    cache: Cache,
}

use super::gguf::ARCHITECTURES;

/// gemma3: every sixth layer attends globally, the others to a sliding window (llama.cpp's pattern).
const GEMMA3_GLOBAL_EVERY: usize = 6;

/// How a tensor goes to the engine: as stored (`Some`), or re-quantized to Q8_0 (`None`).
fn format(dtype: GgmlDType) -> Option<Format> {
    match dtype {
        GgmlDType::F32 => Some(Format::F32),
        GgmlDType::F16 => Some(Format::F16),
        GgmlDType::Q4_0 => Some(Format::Q4_0),
        GgmlDType::Q4_1 => Some(Format::Q4_1),
        GgmlDType::Q8_0 => Some(Format::Q8_0),
        GgmlDType::Q5_0 => Some(Format::Q5_0),
        GgmlDType::Q5_1 => Some(Format::Q5_1),
        GgmlDType::Q4K => Some(Format::Q4K),
        GgmlDType::Q5K => Some(Format::Q5K),
        GgmlDType::Q6K => Some(Format::Q6K),
        _ => None,
    }
}

fn matrix(t: &QTensor) -> candle_core::Result<QMatrix> {
    let dims = t.shape().dims();
    let (rows, cols) = match *dims {
        [rows, cols] => (rows, cols),
        [cols] => (1, cols),
        _ => candle_core::bail!("a tensor of shape {dims:?} is not a matrix"),
    };
    let made = match format(t.dtype()) {
        Some(f) => QMatrix::from_gguf(f, rows, cols, &t.data()?),
        None => {
            let values = t.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1::<f32>()?;
            QMatrix::q8_0(rows, cols, &values)
        }
    };
    made.map_err(candle_core::Error::Msg)
}

fn vector(t: &QTensor) -> candle_core::Result<Vec<f32>> {
    t.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1::<f32>()
}

/// Rows `from..to` of a fused matrix (phi3's `attn_qkv` and `ffn_up`).
fn rows(m: &QTensor, from: usize, to: usize) -> candle_core::Result<QMatrix> {
    let cols = m.shape().dims().get(1).copied().unwrap_or(0);
    let made = match format(m.dtype()) {
        Some(f) => {
            let row = f.bytes(cols);
            QMatrix::from_gguf(f, to - from, cols, &m.data()?[from * row..to * row])
        }
        _ => {
            let t = m.dequantize(&Device::Cpu)?.narrow(0, from, to - from)?;
            QMatrix::q8_0(to - from, cols, &t.flatten_all()?.to_vec1::<f32>()?)
        }
    };
    made.map_err(candle_core::Error::Msg)
}

impl Decoder {
    /// The model in `content` (an architecture of [`ARCHITECTURES`]) on the engine.
    pub fn load<R: Read + Seek>(
        arch: &str,
        content: &gguf_file::Content,
        reader: &mut R,
        context: usize,
    ) -> candle_core::Result<Decoder> {
        if !ARCHITECTURES.contains(&arch) {
            candle_core::bail!("the {arch} architecture is not supported");
        }
        let get = |key: &str| {
            content
                .metadata
                .get(&format!("{arch}.{key}"))
                .ok_or_else(|| candle_core::Error::Msg(format!("cannot find {arch}.{key} in metadata")))
        };
        let heads = get("attention.head_count")?.to_u32()? as usize;
        let width = get("embedding_length")?.to_u32()? as usize;
        let head_dim = match get("attention.key_length") {
            Ok(v) => v.to_u32()? as usize,
            Err(_) => width / heads.max(1),
        };
        if let Ok(d) = get("rope.dimension_count").and_then(|v| Ok(v.to_u32()? as usize))
            && d != head_dim
        {
            candle_core::bail!("rotary embeddings over {d} of a head's {head_dim} values are not supported");
        }
        let gemma = arch == "gemma3";
        let window = if gemma { Some(get("attention.sliding_window")?.to_u32()? as usize) } else { None };
        let base = |key: &str, default: f32| get(key).and_then(|v| v.to_f32()).unwrap_or(default);
        let config = Config {
            width,
            heads,
            kv_heads: get("attention.head_count_kv")?.to_u32()? as usize,
            head_dim,
            ffn: get("feed_forward_length")?.to_u32()? as usize,
            eps: get("attention.layer_norm_rms_epsilon")?.to_f32()?,
            rope_base: base("rope.freq_base", if gemma { 1_000_000. } else { 10_000. }),
            rope_base_local: gemma.then(|| base("rope.local_freq_base", 10_000.)),
            rope: if arch == "llama" { Rope::Interleaved } else { Rope::Halves },
            activation: if gemma { Activation::Gelu } else { Activation::Silu },
            embedding_scale: if gemma { (width as f32).sqrt() } else { 1. },
            context,
        };
        let blocks = get("block_count")?.to_u32()? as usize;
        let mut tensor = |name: &str| content.tensor(reader, name, &Device::Cpu);
        let embeddings = tensor("token_embd.weight")?;
        let output = match tensor("output.weight") {
            Ok(t) => Some(matrix(&t)?),
            Err(_) => None,
        };
        let norm = vector(&tensor("output_norm.weight")?)?;
        let (q, kv) = (heads * head_dim, config.kv_heads * head_dim);
        let mut layers = Vec::with_capacity(blocks);
        for i in 0..blocks {
            let mut t = |n: &str| tensor(&format!("blk.{i}.{n}.weight"));
            let (q_, k, v, gate, up) = if arch == "phi3" {
                let qkv = t("attn_qkv")?;
                let up = t("ffn_up")?;
                let ffn = config.ffn;
                (rows(&qkv, 0, q)?, rows(&qkv, q, q + kv)?, rows(&qkv, q + kv, q + 2 * kv)?, rows(&up, 0, ffn)?, rows(&up, ffn, 2 * ffn)?)
            } else {
                (matrix(&t("attn_q")?)?, matrix(&t("attn_k")?)?, matrix(&t("attn_v")?)?, matrix(&t("ffn_gate")?)?, matrix(&t("ffn_up")?)?)
            };
            let qkv_bias = if arch == "qwen2" {
                let mut b = |n: &str| tensor(&format!("blk.{i}.{n}.bias")).and_then(|t| vector(&t));
                Some([b("attn_q")?, b("attn_k")?, b("attn_v")?])
            } else {
                None
            };
            let mut t = |n: &str| tensor(&format!("blk.{i}.{n}.weight"));
            let qk_norm = if arch == "qwen3" || gemma {
                Some([vector(&t("attn_q_norm")?)?, vector(&t("attn_k_norm")?)?])
            } else {
                None
            };
            let post_norms = if gemma {
                Some([vector(&t("post_attention_norm")?)?, vector(&t("post_ffw_norm")?)?])
            } else {
                None
            };
            layers.push(Layer {
                attn_norm: vector(&t("attn_norm")?)?,
                q: q_,
                k,
                v,
                o: matrix(&t("attn_output")?)?,
                qkv_bias,
                qk_norm,
                post_norms,
                ffn_norm: vector(&t("ffn_norm")?)?,
                gate,
                up,
                down: matrix(&t("ffn_down")?)?,
                window: window.filter(|_| (i + 1) % GEMMA3_GLOBAL_EVERY > 0),
            });
        }
        let model = Model::new(config, matrix(&embeddings)?, layers, norm, output).map_err(candle_core::Error::Msg)?;
        Ok(Decoder {
            model: Arc::new(model),
            cache: Cache::default(),
        })
    }

    /// The logits after `ids`, continuing from `position` (0 starts over).
    pub fn forward(&mut self, ids: &[u32], position: usize) -> Result<Vec<f32>, LlmError> {
        self.model.forward(&mut self.cache, ids, position).map_err(LlmError::Model)
    }
}
