//! The embedded runner against llama.cpp on tiny random-weight GGUFs of every supported architecture
//! and the quantization formats people download (`tests/fixtures/gguf/make_tiny.py` made the files and
//! recorded llama.cpp's logits; nothing here needs llama.cpp).
#![cfg(feature = "local-model")]

use std::path::{Path, PathBuf};

use incharacter::llm::local::{LocalModel, facts};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf")
}

/// The largest difference from llama.cpp's logits allowed per format, as a share of the standard
/// deviation of llama.cpp's logits (random weights give logits of very different scales per
/// architecture). On F32 weights the two engines agree to 1e-4 of it (llama.cpp keeps its attention
/// cache in f16); on quantized weights both quantize the activations before each product, and the
/// roundings differ: llama.cpp's Q8_0 logits are themselves up to 0.035 σ from its logits on the same
/// weights dequantized. Formats the engine has no kernel for (the K-quants) are re-quantized to Q8_0
/// when loaded, which moves them by a fraction of their own rounding step (up to 0.074 σ measured).
fn tolerance(_quantization: &str) -> f32 {
    0.08
}

fn reference() -> Value {
    let text = std::fs::read_to_string(fixtures().join("reference_logits.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The model at `name`, loaded from a copy (loading may write a converted copy next to the file).
fn load(dir: &Path, name: &str) -> LocalModel {
    let copy = dir.join(name);
    std::fs::copy(fixtures().join(name), &copy).unwrap();
    LocalModel::load(name, &copy).unwrap()
}

#[test]
fn tiny_models_of_five_architectures_give_llama_cpps_logits() {
    let reference = reference();
    let prefill = reference["prefill"].as_u64().unwrap() as usize;
    let files = reference["files"].as_object().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    let mut failed = false;
    let mut architectures: Vec<&str> = Vec::new();
    for (name, entry) in files {
        let bytes = std::fs::read(fixtures().join(name)).unwrap();
        let sha: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            sha, entry["sha256"],
            "{name} is not the file the reference logits were computed on"
        );
        let quantization = entry["quantization"].as_str().unwrap();
        let architecture = entry["architecture"].as_str().unwrap();
        architectures.push(architecture);
        let found = facts(&fixtures().join(name)).unwrap();
        assert_eq!(
            (found.architecture.as_str(), found.quantization.as_str()),
            (architecture, quantization)
        );
        let ids: Vec<u32> = entry["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let model = load(dir.path(), name);
        // The file's own tokenizer splits a text as llama.cpp does (specials, merges, byte fallback).
        let text_ids: Vec<u32> = entry["text_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(
            model.encode(reference["text"].as_str().unwrap()).unwrap(),
            text_ids,
            "{name}: tokenization"
        );
        let ours = model.logits(&ids, prefill).unwrap();
        let theirs: Vec<Vec<f32>> = entry["logits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                row.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap() as f32)
                    .collect()
            })
            .collect();
        assert_eq!(ours.len(), theirs.len(), "{name}: positions");
        let all: Vec<f32> = theirs.iter().flatten().copied().collect();
        let mean = all.iter().sum::<f32>() / all.len() as f32;
        let sigma = (all.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / all.len() as f32).sqrt();
        let allowed = tolerance(quantization) * sigma;
        let mut worst = 0f32;
        let (mut differs, mut clear_differs) = (0, 0);
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(a.len(), b.len(), "{name}: vocabulary size");
            worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(worst, f32::max);
            if argmax(a) != argmax(b) {
                differs += 1;
                // A greedy choice may flip only where llama.cpp's top two are within the tolerance.
                clear_differs += usize::from(margin(b) > 2.0 * allowed);
            }
        }
        let ok = worst <= allowed && clear_differs == 0;
        failed |= !ok;
        report.push(format!(
            "{name}: max |Δlogit| {worst:.4} = {:.4} σ (tolerance {} σ), greedy choice differs at {differs} of {} positions (near ties) {}",
            worst / sigma,
            tolerance(quantization),
            ours.len(),
            if ok { "ok" } else { "FAILED" }
        ));
    }
    architectures.sort_unstable();
    architectures.dedup();
    assert_eq!(architectures, ["gemma3", "llama", "phi3", "qwen2", "qwen3"]);
    assert!(!failed, "{}", report.join("\n"));
    eprintln!("{}", report.join("\n"));
}

/// How far llama.cpp's best logit is ahead of the second.
fn margin(row: &[f32]) -> f32 {
    let mut sorted = row.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    sorted[0] - sorted[1]
}

fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i)
}

/// `model add` reports what a file is, and the registered model answers `chat --schema` with JSON
/// that follows the schema (random weights: validity is all there is to check).
#[test]
fn tiny_gemma3_qwen3_and_phi3_files_register_and_answer_schema_valid_json() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let schema = dir.path().join("er.json");
    std::fs::write(
        &schema,
        r#"{"name": "rating", "schema": {"type": "object", "properties": {
            "analysis": {"type": "string", "maxLength": 120},
            "result": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["analysis", "result"], "additionalProperties": false}}"#,
    )
    .unwrap();
    let schema_arg = schema.display().to_string();
    for (arch, tokenizer) in [("gemma3", "llama"), ("qwen3", "gpt2"), ("phi3", "llama")] {
        let copy = dir.path().join(format!("tiny-{arch}.gguf"));
        std::fs::copy(fixtures().join(format!("tiny-{arch}-q4_k_m.gguf")), &copy).unwrap();
        let name = format!("tiny-{arch}");
        let out = crate::common::offline(&data, &["model", "add", &copy.display().to_string(), "--name", &name]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(
            stdout.contains(&format!(
                "architecture {arch}, quantization Q4_K_M, tokenizer {tokenizer}, context 4096 tokens, chat template: the file's own"
            )),
            "{stdout}"
        );
        for seed in ["1", "2"] {
            let args = [
                "chat",
                "--provider",
                "local",
                "--model",
                &name,
                "--schema",
                &schema_arg,
                "--seed",
                seed,
                "--cache",
                "off",
                "Rate Hermione's openness.",
            ];
            let out = crate::common::offline(&data, &args);
            let text = String::from_utf8(out.stdout).expect("valid UTF-8");
            assert!(
                out.status.success(),
                "{arch}: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let reply: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{arch}: {e}: {text}"));
            let keys: Vec<&String> = reply.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["analysis", "result"], "{arch}: {text}");
            assert!(
                reply["analysis"].as_str().unwrap().chars().count() <= 120,
                "{arch}: {text}"
            );
            assert!((1..=5).contains(&reply["result"].as_i64().unwrap()), "{arch}: {text}");
        }
    }
}

/// A file whose header reads but that no request could run on (here a context of 16 positions) is
/// refused when it is added, as the user's file (exit 2), not registered to fail every use.
#[test]
fn model_add_refuses_a_file_that_loads_no_usable_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fixtures().join("tiny-qwen3-q4_k_m.gguf")).unwrap();
    let key = b"qwen3.context_length";
    let at = bytes.windows(key.len()).position(|w| w == key).expect("the key") + key.len();
    // The value's type (u32 = 4), then the value.
    assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 4);
    bytes[at + 4..at + 8].copy_from_slice(&16u32.to_le_bytes());
    let copy = dir.path().join("short.gguf");
    std::fs::write(&copy, bytes).unwrap();
    let data = dir.path().join("data");
    let out = crate::common::offline(&data, &["model", "add", &copy.display().to_string(), "--name", "short"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot be used as a model: its context is 16 positions"),
        "{stderr}"
    );
    let listed = crate::common::offline(&data, &["model", "list", "--json"]);
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("\"short\""),
        "not registered"
    );
}

/// A data dir that cannot hold the registry (here a file) is the machine's failure, exit 1, as the
/// README's exit codes say; a file that is no GGUF model stays the user's, exit 2.
#[test]
fn model_add_into_a_data_dir_that_is_a_file_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("tiny-qwen3.gguf");
    std::fs::copy(fixtures().join("tiny-qwen3-q4_k_m.gguf"), &copy).unwrap();
    let data = dir.path().join("data");
    std::fs::write(&data, b"not a folder").unwrap();
    let out = crate::common::offline(&data, &["model", "add", &copy.display().to_string(), "--name", "tiny"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot create"));
    let not_gguf = dir.path().join("notes.gguf");
    std::fs::write(&not_gguf, b"GGUX and more").unwrap();
    let out = crate::common::offline(&data, &["model", "add", &not_gguf.display().to_string(), "--name", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
