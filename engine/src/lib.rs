//! The embedded model's forward pass, in pure Rust.
//!
//! A decoder-only transformer (llama, qwen2, qwen3, phi3 and gemma3 as GGUF files lay them out) computed over the
//! file's own quantized blocks: weights are never dequantized, activations are quantized to 8 bits
//! once per row and multiplied block by block with integer dot products, AVX2/FMA where the CPU has
//! them and a scalar path that gives the same sums elsewhere ([`kernels`]). The threads of a forward
//! pass move in lockstep through the layers, each taking its share of every step ([`team`]), so a
//! decoding step costs one thread start instead of one dispatch per operation.
//!
//! The crate knows nothing of files: the caller hands it each tensor's raw GGUF bytes.

pub mod kernels;
mod model;
mod team;

pub use kernels::{Format, QMatrix};
pub use model::{Activation, Cache, Config, Layer, MOST_POSITIONS, Model, Rope, Step};
