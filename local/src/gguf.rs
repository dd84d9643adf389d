//! What a GGUF file says of itself (architecture, quantization, context, chat template), read before
//! the embedded runner loads it: `model add` reports it, and an architecture the runner cannot run is
//! refused by name.

use std::fs::File;
use std::path::Path;

use crate::Error;
use crate::gguf_read::{Gguf, TensorInfo};

/// What a GGUF holds that decides whether, and how, the embedded runner can use it.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub architecture: String,
    /// The file type llama.cpp wrote (`Q4_K_M`, …), else the commonest weight format.
    pub quantization: String,
    /// `<architecture>.context_length`, when the file says.
    pub context: Option<u32>,
    /// Whether the file has its own chat template (else ChatML is assumed).
    pub chat_template: bool,
    /// Why the file's chat template cannot render a conversation ([`crate::template::template_problem`]):
    /// ChatML is used instead.
    pub chat_template_problem: Option<String>,
    /// `gpt2` (byte-level BPE) or `llama` (SentencePiece).
    pub tokenizer: String,
}

/// The architectures the embedded runner runs (`decoder`).
pub const ARCHITECTURES: &[&str] = &["llama", "qwen2", "qwen3", "gemma3", "phi3"];

/// The vocabulary kinds it tokenizes (`vocab::Vocab`): byte-level BPE and SentencePiece.
const TOKENIZERS: &[&str] = &["gpt2", "llama"];

/// llama.cpp's `general.file_type` numbers, as its quantizer names them.
const FILE_TYPES: &[(u32, &str)] = &[
    (0, "F32"),
    (1, "F16"),
    (2, "Q4_0"),
    (3, "Q4_1"),
    (7, "Q8_0"),
    (8, "Q5_0"),
    (9, "Q5_1"),
    (10, "Q2_K"),
    (11, "Q3_K_S"),
    (12, "Q3_K_M"),
    (13, "Q3_K_L"),
    (14, "Q4_K_S"),
    (15, "Q4_K_M"),
    (16, "Q5_K_S"),
    (17, "Q5_K_M"),
    (18, "Q6_K"),
    (32, "BF16"),
];

/// The facts of the GGUF at `path`; an architecture the runner cannot run is refused, named.
pub fn facts(path: &Path) -> Result<Facts, Error> {
    // Not opened otherwise: a FIFO would wait for a writer forever, a device never end.
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(Error::Input(format!(
                "{} is not a regular file (a GGUF model is one)",
                crate::shown(path)
            )));
        }
        Err(e) => return Err(Error::Input(format!("cannot open {}: {e}", crate::shown(path)))),
    }
    let mut file = File::open(path).map_err(|e| Error::Input(format!("cannot open {}: {e}", crate::shown(path))))?;
    let content = Gguf::read(&mut std::io::BufReader::new(&mut file))
        .map_err(|e| Error::Input(format!("{} is not a readable GGUF file: {e}", crate::shown(path))))?;
    let meta = |key: &str| content.get(key);
    let text = |key: &str| meta(key).and_then(|v| v.as_str()).map(str::to_string);
    let architecture = text("general.architecture").unwrap_or_else(|| "unknown".into());
    if !ARCHITECTURES.contains(&architecture.as_str()) {
        return Err(Error::Input(format!(
            "{}: architecture {architecture:?} is not supported by the embedded runner (supported: {})",
            crate::shown(path),
            ARCHITECTURES.join(", ")
        )));
    }
    let tokenizer = text("tokenizer.ggml.model").unwrap_or_else(|| "none".into());
    if !TOKENIZERS.contains(&tokenizer.as_str()) {
        return Err(Error::Input(format!(
            "{}: tokenizer model {tokenizer:?} is not supported by the embedded runner (supported: gpt2, llama)",
            crate::shown(path)
        )));
    }
    // A header with no weights behind it (or fewer tensors than the blocks it claims) is refused
    // here, not at its first load.
    if !content.tensors.iter().any(|t| t.name == "token_embd.weight") {
        return Err(Error::Input(format!(
            "{}: the file holds no token embeddings (token_embd.weight): it is not a whole model",
            crate::shown(path)
        )));
    }
    if let Some(blocks) = meta(&format!("{architecture}.block_count")).and_then(|v| v.as_u32())
        && let Some(why) = blocks_problem(&architecture, blocks, &content.tensors)
    {
        return Err(Error::Input(format!("{}: {why}", crate::shown(path))));
    }
    let named = meta("general.file_type")
        .and_then(|v| v.as_u32())
        .and_then(|t| FILE_TYPES.iter().find(|(n, _)| *n == t))
        .map(|(_, name)| name.to_string());
    let quantization = named.unwrap_or_else(|| {
        let mut counts: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
        for info in &content.tensors {
            *counts.entry(format!("{:?}", info.format)).or_default() += 1;
        }
        counts
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map_or_else(|| "no tensors".into(), |(dtype, _)| dtype)
    });
    Ok(Facts {
        context: meta(&format!("{architecture}.context_length")).and_then(|v| v.as_u32()),
        chat_template: meta("tokenizer.chat_template").is_some(),
        chat_template_problem: meta("tokenizer.chat_template")
            .and_then(|v| v.as_str())
            .and_then(crate::template::template_problem),
        tokenizer,
        architecture,
        quantization,
    })
}

/// Why `<architecture>.block_count` (`blocks`) cannot be the file's, if it cannot: no block at all,
/// more blocks than tensors, or tensors of blocks past the count (`blk.29.…` when it says 29). The
/// runner computes the blocks the count says; one it leaves out is a model that runs and writes
/// garbage.
fn blocks_problem(architecture: &str, blocks: u32, tensors: &[TensorInfo]) -> Option<String> {
    if blocks == 0 {
        return Some(format!(
            "{architecture}.block_count is 0: a model has at least one block"
        ));
    }
    if blocks as usize > tensors.len() {
        return Some(format!(
            "{architecture}.block_count says {blocks} blocks, the file holds {} tensors: it is not a whole model",
            tensors.len()
        ));
    }
    let block_of = |t: &TensorInfo| t.name.strip_prefix("blk.")?.split('.').next()?.parse::<u64>().ok();
    let last = tensors.iter().filter_map(block_of).max()?;
    (last >= u64::from(blocks)).then(|| {
        format!(
            "the file has tensors for blocks {blocks}..{last} that block_count {blocks} leaves unused: it is not \
             the model its weights make"
        )
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::gguf_read::Value;
    use crate::gguf_read::write::gguf;

    #[cfg(unix)]
    #[test]
    fn what_is_not_a_regular_file_is_refused_unopened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.gguf");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        // Opened, a FIFO would wait for a writer: the test would hang, not fail.
        for path in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
            let Err(Error::Input(e)) = facts(path) else {
                panic!("{} taken as a model", path.display());
            };
            assert!(e.contains("is not a regular file"), "{e}");
        }
    }

    /// A GGUF of one tiny Q8_0 tensor with `metadata`.
    fn tiny_gguf(dir: &Path, metadata: &[(&str, Value)]) -> PathBuf {
        let path = dir.join("tiny.gguf");
        let q8_0 = 8;
        std::fs::write(
            &path,
            gguf(metadata, &[("token_embd.weight", &[2, 32], q8_0, &[0; 68])]),
        )
        .unwrap();
        path
    }

    /// A header with no weights, or fewer tensors than its blocks: refused when it is added, not
    /// registered to fail at its first load.
    #[test]
    fn a_header_without_the_weights_it_claims_is_no_model() {
        let dir = tempfile::tempdir().unwrap();
        let metadata = [
            ("general.architecture", Value::String("llama".into())),
            ("tokenizer.ggml.model", Value::String("gpt2".into())),
            ("llama.block_count", Value::U32(1)),
        ];
        let empty = dir.path().join("empty.gguf");
        std::fs::write(&empty, gguf(&metadata, &[])).unwrap();
        let Err(Error::Input(e)) = facts(&empty) else {
            panic!("a file with no tensors taken as a model");
        };
        assert!(e.contains("holds no token embeddings"), "{e}");
        let mut claims = metadata.to_vec();
        claims[2] = ("llama.block_count", Value::U32(30));
        let Err(Error::Input(e)) = facts(&tiny_gguf(dir.path(), &claims)) else {
            panic!("30 blocks in one tensor taken as a model");
        };
        assert!(
            e.contains("block_count says 30 blocks, the file holds 1 tensors"),
            "{e}"
        );
        assert!(facts(&tiny_gguf(dir.path(), &metadata)).is_ok());
    }

    /// A block count below the file's blocks (or none at all) leaves weights out: refused by what
    /// it leaves, before the model is registered or loaded.
    #[test]
    fn a_block_count_that_leaves_blocks_out_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let q8_0 = 8;
        let block = [0u8; 34];
        let tensors: Vec<(&str, &[u64], u32, &[u8])> = vec![
            ("token_embd.weight", &[1, 32], q8_0, &block),
            ("blk.0.attn_q.weight", &[1, 32], q8_0, &block),
            ("blk.1.attn_q.weight", &[1, 32], q8_0, &block),
            ("blk.2.attn_q.weight", &[1, 32], q8_0, &block),
        ];
        let with_blocks = |n: u32| {
            let path = dir.path().join(format!("blocks-{n}.gguf"));
            let metadata = [
                ("general.architecture", Value::String("llama".into())),
                ("tokenizer.ggml.model", Value::String("gpt2".into())),
                ("llama.block_count", Value::U32(n)),
            ];
            std::fs::write(&path, gguf(&metadata, &tensors)).unwrap();
            facts(&path)
        };
        assert!(with_blocks(3).is_ok());
        let Err(Error::Input(e)) = with_blocks(2) else {
            panic!("block_count 2 of 3 blocks taken as a model");
        };
        assert!(
            e.contains("the file has tensors for blocks 2..2 that block_count 2 leaves unused"),
            "{e}"
        );
        let Err(Error::Input(e)) = with_blocks(0) else {
            panic!("block_count 0 taken as a model");
        };
        assert!(e.contains("llama.block_count is 0"), "{e}");
    }

    #[test]
    fn the_blocks_a_count_leaves_out_are_named() {
        let t = |name: &str| TensorInfo {
            name: name.into(),
            shape: vec![32],
            format: incharacter_engine::Format::F32,
            offset: 0,
            size: 128,
        };
        let tensors = [
            t("token_embd.weight"),
            t("blk.0.ffn_up.weight"),
            t("blk.2.ffn_up.weight"),
            t("blk.x.y"),
        ];
        assert_eq!(blocks_problem("qwen2", 3, &tensors), None);
        assert_eq!(
            blocks_problem("qwen2", 1, &tensors).unwrap(),
            "the file has tensors for blocks 1..2 that block_count 1 leaves unused: it is not the model its \
             weights make"
        );
        assert!(
            blocks_problem("qwen2", 5, &tensors)
                .unwrap()
                .contains("says 5 blocks, the file holds 4 tensors")
        );
        assert!(
            blocks_problem("qwen2", 0, &tensors)
                .unwrap()
                .contains("qwen2.block_count is 0")
        );
    }

    #[test]
    fn a_ggufs_facts_are_read_and_an_unsupported_architecture_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = tiny_gguf(
            dir.path(),
            &[
                ("general.architecture", Value::String("qwen2".into())),
                ("tokenizer.ggml.model", Value::String("gpt2".into())),
                ("general.file_type", Value::U32(15)),
                ("qwen2.context_length", Value::U32(32768)),
                ("tokenizer.chat_template", Value::String("{{ messages }}".into())),
            ],
        );
        let f = facts(&path).unwrap();
        assert_eq!(
            (
                f.architecture.as_str(),
                f.quantization.as_str(),
                f.context,
                f.chat_template
            ),
            ("qwen2", "Q4_K_M", Some(32768), true)
        );
        // Without a file type, the weights' format; without a template, none.
        let llama = |arch: &str, tokenizer: &str| {
            vec![
                ("general.architecture", Value::String(arch.into())),
                ("tokenizer.ggml.model", Value::String(tokenizer.into())),
            ]
        };
        let path = tiny_gguf(dir.path(), &llama("gemma3", "llama"));
        let f = facts(&path).unwrap();
        assert_eq!(
            (
                f.quantization.as_str(),
                f.context,
                f.chat_template,
                f.tokenizer.as_str()
            ),
            ("Q8_0", None, false, "llama")
        );
        let path = tiny_gguf(dir.path(), &llama("mamba", "gpt2"));
        let e = facts(&path).unwrap_err().to_string();
        assert!(
            e.contains("architecture \"mamba\" is not supported") && e.contains("llama, qwen2, qwen3, gemma3, phi3"),
            "{e}"
        );
        // Said as it can be typed back: an escape shown, not dropped (nor acted on).
        let path = tiny_gguf(dir.path(), &llama("llama\u{1b}[2J", "gpt2"));
        let e = facts(&path).unwrap_err().to_string();
        assert!(e.contains(r#"architecture "llama\u{1b}[2J" is not supported"#), "{e}");
        let odd = dir.path().join("line\nbreak.gguf");
        std::fs::rename(&path, &odd).unwrap();
        let e = facts(&odd).unwrap_err().to_string();
        assert!(!e.contains('\n') && e.contains(r#"line\nbreak.gguf""#), "{e}");
        let path = tiny_gguf(dir.path(), &llama("phi3", "bert"));
        let e = facts(&path).unwrap_err().to_string();
        assert!(e.contains("tokenizer model \"bert\" is not supported"), "{e}");
    }
}
