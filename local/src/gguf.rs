//! What a GGUF file says of itself (architecture, quantization, context, chat template), read before
//! the embedded runner loads it: `model add` reports it, and an architecture the runner cannot run is
//! refused by name.

use std::fs::File;
use std::path::Path;

use crate::Error;
use crate::gguf_read::Gguf;

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
                path.display()
            )));
        }
        Err(e) => return Err(Error::Input(format!("cannot open {}: {e}", path.display()))),
    }
    let mut file = File::open(path).map_err(|e| Error::Input(format!("cannot open {}: {e}", path.display())))?;
    let content = Gguf::read(&mut std::io::BufReader::new(&mut file))
        .map_err(|e| Error::Input(format!("{} is not a readable GGUF file: {e}", path.display())))?;
    let meta = |key: &str| content.get(key);
    let text = |key: &str| meta(key).and_then(|v| v.as_str()).map(str::to_string);
    let architecture = text("general.architecture").unwrap_or_else(|| "unknown".into());
    if !ARCHITECTURES.contains(&architecture.as_str()) {
        return Err(Error::Input(format!(
            "{}: architecture \"{architecture}\" is not supported by the embedded runner (supported: {})",
            path.display(),
            ARCHITECTURES.join(", ")
        )));
    }
    let tokenizer = text("tokenizer.ggml.model").unwrap_or_else(|| "none".into());
    if !TOKENIZERS.contains(&tokenizer.as_str()) {
        return Err(Error::Input(format!(
            "{}: tokenizer model \"{tokenizer}\" is not supported by the embedded runner (supported: gpt2, llama)",
            path.display()
        )));
    }
    // A header with no weights behind it (or fewer tensors than the blocks it claims) is refused
    // here, not at its first load.
    if !content.tensors.iter().any(|t| t.name == "token_embd.weight") {
        return Err(Error::Input(format!(
            "{}: the file holds no token embeddings (token_embd.weight): it is not a whole model",
            path.display()
        )));
    }
    if let Some(blocks) = meta(&format!("{architecture}.block_count")).and_then(|v| v.as_u32())
        && blocks as usize > content.tensors.len()
    {
        return Err(Error::Input(format!(
            "{}: {architecture}.block_count says {blocks} blocks, the file holds {} tensors: it is not a whole model",
            path.display(),
            content.tensors.len()
        )));
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
        let path = tiny_gguf(dir.path(), &llama("phi3", "bert"));
        let e = facts(&path).unwrap_err().to_string();
        assert!(e.contains("tokenizer model \"bert\" is not supported"), "{e}");
    }
}
