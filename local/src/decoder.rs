//! GGUF files of the llama, qwen2, qwen3, phi3 and gemma3 architectures on the project's own engine
//! (`incharacter_engine`): their tensors handed over as the file stores them, the hyper-parameters
//! read from the file's metadata.
//!
//! The engine multiplies F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K blocks with the
//! values stored; it re-quantizes tensors of the other formats (Q2_K, Q3_K, BF16, …) to Q8_0 at load,
//! which keeps their values to within a fraction of their own rounding step.

use std::io::{Read, Seek};
use std::sync::Arc;

pub use incharacter_engine::Cache;
use incharacter_engine::{Activation, Config, Layer, Model, QMatrix, Rope, Step};

use crate::Error;
use crate::gguf::ARCHITECTURES;
use crate::gguf_read::{Gguf, TensorInfo};

/// A model and one conversation's attention cache; a clone shares the weights and copies the cache.
#[derive(Debug, Clone)]
pub struct Decoder {
    model: Arc<Model>,
    cache: Cache,
}

/// gemma3: every sixth layer attends globally, the others to a sliding window (llama.cpp's pattern).
const GEMMA3_GLOBAL_EVERY: usize = 6;

/// A tensor's description and bytes, as the file stores them.
struct Tensor {
    info: TensorInfo,
    bytes: Vec<u8>,
}

impl Tensor {
    /// The whole tensor as a matrix (a vector is one row).
    fn matrix(&self) -> Result<QMatrix, String> {
        let shape = &self.info.shape;
        let (rows, cols) = match *shape.as_slice() {
            [rows, cols] => (rows, cols),
            [cols] => (1, cols),
            _ => {
                return Err(format!(
                    "{}: a tensor of shape {shape:?} is not a matrix",
                    self.info.name
                ));
            }
        };
        QMatrix::from_gguf(self.info.format, rows, cols, &self.bytes)
    }

    /// Its values as floats (norms and biases).
    fn vector(&self) -> Result<Vec<f32>, String> {
        self.info.format.widen(&self.bytes)
    }

    /// Rows `from..to` of a fused matrix (phi3's `attn_qkv` and `ffn_up`).
    fn rows(&self, from: usize, to: usize) -> Result<QMatrix, String> {
        let cols = self.info.shape.get(1).copied().unwrap_or(0);
        let row = self.info.format.bytes(cols);
        let bytes = self
            .bytes
            .get(from * row..to * row)
            .ok_or_else(|| format!("{} has no rows {from}..{to}", self.info.name))?;
        QMatrix::from_gguf(self.info.format, to - from, cols, bytes)
    }
}

impl Decoder {
    /// The model in `content` (an architecture of [`ARCHITECTURES`]) on the engine.
    pub fn load<R: Read + Seek>(arch: &str, content: &Gguf, reader: &mut R, context: usize) -> Result<Decoder, String> {
        if !ARCHITECTURES.contains(&arch) {
            return Err(format!("the {arch} architecture is not supported"));
        }
        let get = |key: &str| {
            content
                .get(&format!("{arch}.{key}"))
                .ok_or_else(|| format!("cannot find {arch}.{key} in metadata"))
        };
        let count = |key: &str| -> Result<usize, String> {
            let n = get(key)?
                .as_u32()
                .ok_or_else(|| format!("{arch}.{key} in metadata is not a count"))?;
            Ok(n as usize)
        };
        // Every such number is a scale (an epsilon, a rotary base): not a number, infinite, 0 or
        // less would make every logit NaN or junk, and an answer of junk would be recorded as one.
        let float = |key: &str| -> Result<f32, String> {
            let x = get(key)?
                .as_f32()
                .ok_or_else(|| format!("{arch}.{key} in metadata is not a number"))?;
            if !(x.is_finite() && x > 0.0) {
                return Err(format!("{arch}.{key} in metadata is {x}: it must be a number above 0"));
            }
            Ok(x)
        };
        let heads = count("attention.head_count")?;
        let width = count("embedding_length")?;
        let head_dim = match get("attention.key_length") {
            Ok(_) => count("attention.key_length")?,
            Err(_) => width / heads.max(1),
        };
        if let Ok(d) = count("rope.dimension_count")
            && d != head_dim
        {
            return Err(format!(
                "rotary embeddings over {d} of a head's {head_dim} values are not supported"
            ));
        }
        let gemma = arch == "gemma3";
        let window = if gemma {
            Some(count("attention.sliding_window")?)
        } else {
            None
        };
        let base = |key: &str, default: f32| match get(key) {
            Ok(_) => float(key),
            Err(_) => Ok(default),
        };
        let config = Config {
            width,
            heads,
            kv_heads: count("attention.head_count_kv")?,
            head_dim,
            ffn: count("feed_forward_length")?,
            eps: float("attention.layer_norm_rms_epsilon")?,
            rope_base: base("rope.freq_base", if gemma { 1_000_000. } else { 10_000. })?,
            rope_base_local: if gemma {
                Some(base("rope.local_freq_base", 10_000.)?)
            } else {
                None
            },
            rope: if arch == "llama" {
                Rope::Interleaved
            } else {
                Rope::Halves
            },
            activation: if gemma { Activation::Gelu } else { Activation::Silu },
            embedding_scale: if gemma { (width as f32).sqrt() } else { 1. },
            context,
        };
        let blocks = count("block_count")?;
        // Each block has several tensors: a count the file cannot hold is refused before anything
        // is reserved for it.
        if blocks > content.tensors.len() {
            return Err(format!(
                "{arch}.block_count says {blocks} blocks, the file holds {} tensors",
                content.tensors.len()
            ));
        }
        let mut tensor = |name: &str| -> Result<Tensor, String> {
            let (info, bytes) = content.tensor_bytes(reader, name).map_err(|e| format!("{name}: {e}"))?;
            Ok(Tensor { info, bytes })
        };
        let embeddings = tensor("token_embd.weight")?;
        let output = match content.tensor("output.weight") {
            Some(_) => Some(tensor("output.weight")?.matrix()?),
            None => None,
        };
        let norm = tensor("output_norm.weight")?.vector()?;
        let (q, kv) = (heads * head_dim, config.kv_heads * head_dim);
        let mut layers = Vec::with_capacity(blocks);
        for i in 0..blocks {
            let mut t = |n: &str| tensor(&format!("blk.{i}.{n}.weight"));
            let (q_, k, v, gate, up) = if arch == "phi3" {
                let (qkv, up, ffn) = (t("attn_qkv")?, t("ffn_up")?, config.ffn);
                let (q_, k, v) = (qkv.rows(0, q)?, qkv.rows(q, q + kv)?, qkv.rows(q + kv, q + 2 * kv)?);
                (q_, k, v, up.rows(0, ffn)?, up.rows(ffn, 2 * ffn)?)
            } else {
                let (q_, k, v) = (t("attn_q")?.matrix()?, t("attn_k")?.matrix()?, t("attn_v")?.matrix()?);
                (q_, k, v, t("ffn_gate")?.matrix()?, t("ffn_up")?.matrix()?)
            };
            let qkv_bias = if arch == "qwen2" {
                let mut b = |n: &str| tensor(&format!("blk.{i}.{n}.bias"))?.vector();
                Some([b("attn_q")?, b("attn_k")?, b("attn_v")?])
            } else {
                None
            };
            let mut t = |n: &str| tensor(&format!("blk.{i}.{n}.weight"));
            let qk_norm = if arch == "qwen3" || gemma {
                Some([t("attn_q_norm")?.vector()?, t("attn_k_norm")?.vector()?])
            } else {
                None
            };
            let post_norms = if gemma {
                Some([t("post_attention_norm")?.vector()?, t("post_ffw_norm")?.vector()?])
            } else {
                None
            };
            layers.push(Layer {
                attn_norm: t("attn_norm")?.vector()?,
                q: q_,
                k,
                v,
                o: t("attn_output")?.matrix()?,
                qkv_bias,
                qk_norm,
                post_norms,
                ffn_norm: t("ffn_norm")?.vector()?,
                gate,
                up,
                down: t("ffn_down")?.matrix()?,
                window: window.filter(|_| (i + 1) % GEMMA3_GLOBAL_EVERY > 0),
            });
        }
        let model = Model::new(config, embeddings.matrix()?, layers, norm, output)?;
        Ok(Decoder {
            model: Arc::new(model),
            cache: Cache::default(),
        })
    }

    /// Logits a step gives: the rows of the output matrix.
    pub fn vocab(&self) -> usize {
        self.model.vocab()
    }

    /// The logits after `ids`, continuing from `position` (0 starts over).
    pub fn forward(&mut self, ids: &[u32], position: usize) -> Result<Vec<f32>, Error> {
        self.model.forward(&mut self.cache, ids, position).map_err(Error::Model)
    }

    /// The same model with an empty conversation.
    pub fn fresh(&self) -> Decoder {
        Decoder {
            model: self.model.clone(),
            cache: Cache::default(),
        }
    }

    /// Several conversations of one model in one pass (`decoders[i]` continues with `ids[i]` from
    /// `positions[i]`): each one's logits after its last token, the ones it would get alone.
    pub fn forward_many(
        decoders: &mut [&mut Decoder],
        ids: &[&[u32]],
        positions: &[usize],
    ) -> Result<Vec<Vec<f32>>, Error> {
        let Some(first) = decoders.first() else {
            return Ok(Vec::new());
        };
        let model = first.model.clone();
        if decoders.iter().any(|d| !Arc::ptr_eq(&d.model, &model)) {
            return Err(Error::Model(
                "conversations of different models cannot share a pass".into(),
            ));
        }
        let mut steps: Vec<Step> = decoders
            .iter_mut()
            .zip(ids)
            .zip(positions)
            .map(|((d, tokens), &position)| Step {
                cache: &mut d.cache,
                tokens,
                position,
            })
            .collect();
        model.forward_batch(&mut steps).map_err(Error::Model)
    }

    /// Several conversations in one pass, each with its own cache (`caches[i]` continues with
    /// `ids[i]` from `positions[i]`): each one's logits after its last token, the ones it would get
    /// alone.
    pub fn forward_batch(
        &self,
        caches: &mut [Cache],
        ids: &[&[u32]],
        positions: &[usize],
    ) -> Result<Vec<Vec<f32>>, Error> {
        let mut steps: Vec<Step> = caches
            .iter_mut()
            .zip(ids)
            .zip(positions)
            .map(|((cache, tokens), &position)| Step {
                cache,
                tokens,
                position,
            })
            .collect();
        self.model.forward_batch(&mut steps).map_err(Error::Model)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::gguf_read::Value;

    #[test]
    fn a_scale_that_is_not_a_number_above_zero_is_refused_by_name() {
        let load = |key: &str, x: f32| {
            let mut metadata: HashMap<String, Value> = [
                ("general.architecture", Value::String("qwen2".into())),
                ("qwen2.attention.head_count", Value::U32(2)),
                ("qwen2.attention.head_count_kv", Value::U32(1)),
                ("qwen2.embedding_length", Value::U32(8)),
                ("qwen2.feed_forward_length", Value::U32(16)),
                ("qwen2.attention.layer_norm_rms_epsilon", Value::F32(1e-6)),
                ("qwen2.block_count", Value::U32(0)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            metadata.insert(format!("qwen2.{key}"), Value::F32(x));
            let content = Gguf {
                metadata,
                tensors: Vec::new(),
                data_offset: 0,
            };
            Decoder::load("qwen2", &content, &mut std::io::Cursor::new(Vec::new()), 64).err()
        };
        // Each made every logit NaN, or fluent junk, recorded as answers.
        for (key, x) in [
            ("attention.layer_norm_rms_epsilon", f32::NAN),
            ("attention.layer_norm_rms_epsilon", -1e-6),
            ("rope.freq_base", f32::NAN),
            ("rope.freq_base", 0.0),
            ("rope.freq_base", f32::INFINITY),
        ] {
            let e = load(key, x).unwrap_or_default();
            assert!(
                e.contains(&format!("qwen2.{key} in metadata is {x}: it must be a number above 0")),
                "{e}"
            );
        }
        // A sound file gets past them (to what it lacks).
        let e = load("rope.freq_base", 1e6).unwrap_or_default();
        assert!(!e.contains("must be a number above 0"), "{e}");
    }
}
