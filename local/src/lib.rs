//! incharacter's embedded local model: a GGUF file (llama, qwen2, qwen3, gemma3 or phi3 architecture)
//! run on the CPU by the project's engine (`incharacter_engine`), with the file's own tokenizer and chat
//! template, seeded sampling, and schema-constrained decoding for replies that must be JSON.
//!
//! It owns the models directory (the models it knows how to fetch, and the ones the user added), the
//! GGUF reader, the vocabulary, the sampler, the cache of computed system prompts, and [`Model`], which
//! turns a [`Request`] (messages already written, sampling settings, an optional JSON Schema) into text.
//! What the prompts say, and how its errors are told to the user, is the caller's: this crate neither
//! writes prompt text nor knows the workbench around it.
//!
//! Its ratings carry no meaning (a 135M-parameter model); it exists so the whole pipeline runs offline.

mod constrain;
mod decoder;
mod gguf;
mod gguf_read;
mod model;
mod registry;
mod sample;
mod template;
mod vocab;

pub use gguf::{ARCHITECTURES, Facts, facts};
/// The most positions a model runs with, whatever its file states.
pub use incharacter_engine::MOST_POSITIONS;
pub use model::{Choice, Finish, Generated, Message, Model, Request, Together};
pub use registry::{
    DEFAULT_MODEL, Identity, KNOWN, KnownModel, Pip, Registered, Removed, SMOLLM2_135M, add, fetch, fetch_known, list,
    models_dir, remove, resolve, resolve_entry, shadowed, valid_name, verify,
};

/// `path` as a message shows it: as it reads, or quoted with escapes when it holds a character a
/// terminal acts on (a line break, an escape), which would otherwise split the message's line or be
/// dropped from it on the way out, leaving another path than the file's.
pub fn shown(path: &std::path::Path) -> String {
    let text = path.display().to_string();
    if text.chars().any(char::is_control) {
        format!("{text:?}")
    } else {
        text
    }
}

/// Why the local model could not do what was asked. The messages say what and where; advice on what to
/// run next is the caller's to add (it knows its own commands).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// What the caller gave cannot be used as given: a model name, a GGUF file, the models directory or
    /// its registry, a request (longer than the context, a schema the decoder cannot follow). The
    /// workbench reports these as the user's to fix.
    #[error("{0}")]
    Input(String),
    /// Fetching, reading or running a model failed (the network, the disk, a file the engine refuses).
    #[error("{0}")]
    Model(String),
    /// A model this crate knows how to fetch, not fetched yet.
    #[error("the local model {name} is not downloaded yet")]
    NotFetched { name: String },
    /// A name that is neither a known model nor one the user registered.
    #[error("no local model named {name:?}")]
    Unknown { name: String },
    /// The caller's cancellation check said stop before the reply was done.
    #[error("cancelled")]
    Cancelled,
}
