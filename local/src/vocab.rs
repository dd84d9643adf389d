//! A GGUF's own vocabulary as the embedded runner uses it: the tokenizer that turns a rendered chat
//! prompt into ids (as llama.cpp would), the bytes each token stands for (what constrained decoding
//! matches against), the tokens that end a turn, and the BOS/EOS text the chat template may print.
//!
//! Two vocabulary kinds, as GGUF names them: `gpt2` (byte-level BPE with merges: Llama 3, Qwen, SmolLM2)
//! and `llama` (SentencePiece with scores and byte fallback: Gemma, Phi-3, Llama 2). The first is the
//! file's vocabulary and merges with the pre-tokenizer llama.cpp uses for `tokenizer.ggml.pre`. The
//! second is a BPE whose merges are ranked by the score of the piece they make, which is how
//! SentencePiece's BPE and llama.cpp's SPM tokenizer merge.

use std::collections::HashMap;

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::{NFC, Prepend, Replace, Sequence as Normalizers};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

use crate::gguf_read::{Gguf, Value};

/// GGUF token types (llama.cpp's `llama_token_type`).
const NORMAL: u32 = 1;
const UNKNOWN: u32 = 2;
const USER_DEFINED: u32 = 4;
const UNUSED: u32 = 5;
const BYTE: u32 = 6;

/// SentencePiece's visible space.
const SPACE: char = '\u{2581}';

/// Qwen2's pre-tokenizer split (llama.cpp's `qwen2`): digits one by one.
const QWEN2_SPLIT: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Llama 3's pre-tokenizer split (llama.cpp's `llama-bpe`).
const LLAMA3_SPLIT: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Tokens that end a turn in the chat formats the runner knows, besides the file's EOS and EOT ids.
const END_OF_TURN: &[&str] = &[
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<end_of_turn>",
    "<|end|>",
];

pub struct Vocab {
    pub tokenizer: Tokenizer,
    /// The bytes each token stands for; `None` for control tokens (never part of a reply's text).
    pub token_bytes: Vec<Option<Vec<u8>>>,
    /// Ids that end a reply.
    pub stop: Vec<u32>,
    pub bos: String,
    pub eos: String,
}

/// The strings of the array under `key` (an element of another type is an empty string).
fn strings(content: &Gguf, key: &str) -> Option<Vec<String>> {
    let items = content.get(key)?.as_array()?;
    Some(
        items
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect(),
    )
}

/// The id under `key`, of whichever integer type the writer chose.
fn id(content: &Gguf, key: &str) -> Option<u32> {
    content.get(key).and_then(Value::as_u32)
}

impl Vocab {
    /// The vocabulary of a GGUF; `Err` names what is missing or unsupported.
    pub fn from_gguf(content: &Gguf) -> Result<Vocab, String> {
        let meta_str = |k: &str| content.get(k).and_then(Value::as_str).map(str::to_string);
        let meta_u32 = |k: &str| id(content, k);
        let tokens = strings(content, "tokenizer.ggml.tokens").ok_or("no tokenizer.ggml.tokens")?;
        let types: Vec<u32> = match content.get("tokenizer.ggml.token_type").and_then(Value::as_array) {
            Some(a) => a.iter().map(|v| v.as_u32().unwrap_or(NORMAL)).collect(),
            None => vec![NORMAL; tokens.len()],
        };
        let kind = meta_str("tokenizer.ggml.model").unwrap_or_else(|| "gpt2".into());
        let (tokenizer, token_bytes) = match kind.as_str() {
            "gpt2" => {
                let tokenizer = byte_level(content, &tokens, &types, meta_str("tokenizer.ggml.pre").as_deref())?;
                (tokenizer, byte_level_bytes(&tokens, &types))
            }
            "llama" => {
                let scores: Vec<f32> = match content.get("tokenizer.ggml.scores").and_then(Value::as_array) {
                    Some(a) => a.iter().map(|v| v.as_f32().unwrap_or(0.0)).collect(),
                    None => return Err("a SentencePiece vocabulary without tokenizer.ggml.scores".into()),
                };
                let space_prefix = content
                    .get("tokenizer.ggml.add_space_prefix")
                    .and_then(Value::as_bool)
                    .unwrap_or(true);
                let tokenizer = sentencepiece(&tokens, &types, &scores, space_prefix)?;
                (tokenizer, sentencepiece_bytes(&tokens, &types))
            }
            other => {
                return Err(format!(
                    "tokenizer model {other:?} is not supported (supported: gpt2, llama)"
                ));
            }
        };
        let id_of = |t: &str| tokens.iter().position(|x| x == t).map(|i| i as u32);
        let eos_id = meta_u32("tokenizer.ggml.eos_token_id");
        let mut stop: Vec<u32> = eos_id
            .into_iter()
            .chain(meta_u32("tokenizer.ggml.eot_token_id"))
            .chain(END_OF_TURN.iter().filter_map(|t| id_of(t)))
            .collect();
        stop.sort_unstable();
        stop.dedup();
        let text_of = |id: Option<u32>| id.and_then(|i| tokens.get(i as usize).cloned()).unwrap_or_default();
        Ok(Vocab {
            tokenizer,
            token_bytes,
            stop,
            bos: text_of(meta_u32("tokenizer.ggml.bos_token_id")),
            eos: text_of(eos_id),
        })
    }
}

/// Byte-level BPE over the file's vocabulary and merges, split before merging as llama.cpp splits for
/// the pre-tokenizer `pre` names.
fn byte_level(content: &Gguf, tokens: &[String], types: &[u32], pre: Option<&str>) -> Result<Tokenizer, String> {
    let merges = strings(content, "tokenizer.ggml.merges")
        .ok_or("a byte-level vocabulary without tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| match m.split_once(' ') {
            Some((left, right)) => Ok((left.to_string(), right.to_string())),
            None => Err(format!("the merge {m:?} is not two pieces")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let vocab: tokenizers::models::bpe::Vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    let flag = |key: &str| content.get(key).and_then(Value::as_bool);
    let mut builder = BPE::builder().vocab_and_merges(vocab, merges);
    if let Some(unk) = id(content, "tokenizer.ggml.unk_token_id").and_then(|i| tokens.get(i as usize)) {
        builder = builder.unk_token(unk.clone());
    }
    if let Some(on) = flag("tokenizer.ggml.byte_fallback") {
        builder = builder.byte_fallback(on);
    }
    // Llama 3's pre-tokenizer, as llama.cpp: a word found whole in the vocabulary is that token,
    // whatever the merges would make of it.
    let llama3 = matches!(pre, Some("llama-bpe" | "llama3" | "smaug-bpe"));
    let bpe = builder.ignore_merges(llama3 || flag("tokenizer.ggml.ignore_merges") == Some(true));
    let mut tokenizer = Tokenizer::new(bpe.build().map_err(|e| e.to_string())?);
    let split = |pattern: &str| -> Result<PreTokenizerWrapper, String> {
        let split = Split::new(
            SplitPattern::Regex(pattern.into()),
            SplitDelimiterBehavior::Isolated,
            false,
        );
        Ok(split.map_err(|e| e.to_string())?.into())
    };
    let pre_tokenizer: PreTokenizerWrapper = match pre {
        Some("qwen2") => {
            tokenizer.with_normalizer(Some(NFC)).map_err(|e| e.to_string())?;
            Sequence::new(vec![split(QWEN2_SPLIT)?, ByteLevel::new(false, false, false).into()]).into()
        }
        // SmolLM2: digits one by one, then GPT-2's split without a prefix space.
        Some("smollm") => {
            Sequence::new(vec![Digits::new(true).into(), ByteLevel::new(false, true, true).into()]).into()
        }
        _ if llama3 => Sequence::new(vec![split(LLAMA3_SPLIT)?, ByteLevel::new(false, true, false).into()]).into(),
        // GPT-2's own split, as llama.cpp's default: no prefix space.
        _ => ByteLevel::new(false, true, true).into(),
    };
    tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    // Control, unknown, user-defined and unused tokens, and the ids the file names, are found whole in
    // a text before it is split.
    let named = ["bos", "eos", "pad", "sep", "unk"].map(|t| id(content, &format!("tokenizer.ggml.{t}_token_id")));
    let specials: Vec<AddedToken> = (0..tokens.len())
        .filter(|&i| matches!(types.get(i).copied(), Some(UNKNOWN..=UNUSED)))
        .chain(named.into_iter().flatten().map(|i| i as usize))
        .filter_map(|i| tokens.get(i))
        .map(|t| AddedToken::from(t.clone(), true))
        .collect();
    tokenizer.add_special_tokens(specials).map_err(|e| e.to_string())?;
    Ok(tokenizer)
}

/// GPT-2's byte ↔ printable-character table, used by byte-level BPE vocabularies.
fn unicode_to_byte() -> HashMap<char, u8> {
    let mut bytes: Vec<u32> = (b'!'..=b'~')
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .map(u32::from)
        .collect();
    let mut chars = bytes.clone();
    let mut n = 0;
    for b in 0..=255u32 {
        if !bytes.contains(&b) {
            bytes.push(b);
            chars.push(256 + n);
            n += 1;
        }
    }
    bytes
        .into_iter()
        .zip(chars)
        .filter_map(|(b, c)| Some((char::from_u32(c)?, b as u8)))
        .collect()
}

fn byte_level_bytes(tokens: &[String], types: &[u32]) -> Vec<Option<Vec<u8>>> {
    let table = unicode_to_byte();
    tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if types.get(i).copied().unwrap_or(NORMAL) != NORMAL {
                return None; // control / user-defined / unused: never part of JSON text
            }
            t.chars().map(|c| table.get(&c).copied()).collect::<Option<Vec<u8>>>()
        })
        .collect()
}

/// `<0xAB>` → 0xAB.
fn byte_token(t: &str) -> Option<u8> {
    let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

fn sentencepiece_bytes(tokens: &[String], types: &[u32]) -> Vec<Option<Vec<u8>>> {
    tokens
        .iter()
        .enumerate()
        .map(|(i, t)| match types.get(i).copied().unwrap_or(NORMAL) {
            NORMAL => Some(t.replace(SPACE, " ").into_bytes()),
            BYTE => byte_token(t).map(|b| vec![b]),
            _ => None,
        })
        .collect()
}

/// A SentencePiece BPE vocabulary as a `tokenizers` BPE: every split of a piece into two pieces of the
/// vocabulary is a merge, ranked by the merged piece's score (highest first); characters outside the
/// vocabulary fall back to byte tokens; spaces are `▁`, with one in front when the file asks for it.
fn sentencepiece(tokens: &[String], types: &[u32], scores: &[f32], space_prefix: bool) -> Result<Tokenizer, String> {
    let kind = |i: usize| types.get(i).copied().unwrap_or(NORMAL);
    let vocab: HashMap<String, u32> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    let mergeable = |i: usize| matches!(kind(i), NORMAL | USER_DEFINED);
    let mut merges: Vec<(f32, u32, u32, String, String)> = Vec::new();
    for (i, piece) in tokens.iter().enumerate() {
        if !mergeable(i) {
            continue;
        }
        for (cut, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(cut);
            if let (Some(&l), Some(&r)) = (vocab.get(left), vocab.get(right))
                && mergeable(l as usize)
                && mergeable(r as usize)
            {
                let score = scores.get(i).copied().unwrap_or(0.0);
                merges.push((score, l, r, left.to_string(), right.to_string()));
            }
        }
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let merges: Vec<(String, String)> = merges.into_iter().map(|(_, _, _, l, r)| (l, r)).collect();
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab.into_iter().collect::<tokenizers::models::bpe::Vocab>(), merges)
        .byte_fallback(true);
    if let Some(unk) = (0..tokens.len()).find(|&i| kind(i) == UNKNOWN) {
        builder = builder.unk_token(tokens[unk].clone());
    }
    let bpe = builder.build().map_err(|e| e.to_string())?;
    let mut tokenizer = Tokenizer::new(bpe);
    let replace = Replace::new(" ", SPACE.to_string()).map_err(|e| e.to_string())?;
    let normalizer = if space_prefix {
        Normalizers::new(vec![Prepend::new(SPACE.to_string()).into(), replace.into()])
    } else {
        Normalizers::new(vec![replace.into()])
    };
    tokenizer.with_normalizer(Some(normalizer)).map_err(|e| e.to_string())?;
    let specials: Vec<AddedToken> = (0..tokens.len())
        .filter(|&i| !matches!(kind(i), NORMAL | BYTE))
        .map(|i| AddedToken::from(tokens[i].clone(), true))
        .collect();
    tokenizer.add_special_tokens(specials).map_err(|e| e.to_string())?;
    Ok(tokenizer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spm(pieces: &[(&str, u32, f32)], space_prefix: bool) -> Tokenizer {
        let tokens: Vec<String> = pieces.iter().map(|p| p.0.to_string()).collect();
        let types: Vec<u32> = pieces.iter().map(|p| p.1).collect();
        let scores: Vec<f32> = pieces.iter().map(|p| p.2).collect();
        sentencepiece(&tokens, &types, &scores, space_prefix).unwrap()
    }

    fn ids(t: &Tokenizer, text: &str) -> Vec<u32> {
        t.encode(text, false).unwrap().get_ids().to_vec()
    }

    #[test]
    fn byte_table_is_a_bijection() {
        let t = unicode_to_byte();
        assert_eq!(t.len(), 256);
        assert_eq!(t[&'Ġ'], b' ');
        assert_eq!(t[&'Ċ'], b'\n');
        assert_eq!(t[&'a'], b'a');
        let mut bytes: Vec<u8> = t.values().copied().collect();
        bytes.sort_unstable();
        bytes.dedup();
        assert_eq!(bytes.len(), 256);
    }

    #[test]
    fn sentencepiece_merges_the_highest_scored_piece_first_and_falls_back_to_bytes() {
        let mut pieces = vec![("<unk>", UNKNOWN, 0.0), ("<eot>", 3, 0.0)];
        let bytes: Vec<String> = (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect();
        pieces.extend(bytes.iter().map(|b| (b.as_str(), BYTE, 0.0)));
        let base = pieces.len() as u32;
        // ▁ a b c ab bc ▁a: "abc" can merge as ab+c or a+bc; bc scores higher, so a+bc.
        pieces.extend([
            ("\u{2581}", NORMAL, -100.0),
            ("a", NORMAL, -100.0),
            ("b", NORMAL, -100.0),
            ("c", NORMAL, -100.0),
            ("ab", NORMAL, -5.0),
            ("bc", NORMAL, -1.0),
            ("\u{2581}a", NORMAL, -10.0),
        ]);
        let t = spm(&pieces, false);
        let (space, a, _b, c, _ab, bc, space_a) = (base, base + 1, base + 2, base + 3, base + 4, base + 5, base + 6);
        assert_eq!(ids(&t, "abc"), vec![a, bc]);
        // "abc ac": the space merges with the a after it; é is not in the vocabulary: its two bytes.
        assert_eq!(ids(&t, "abc ac"), vec![a, bc, space_a, c]);
        assert_eq!(ids(&t, "é"), vec![2 + 0xC3, 2 + 0xA9]);
        // A control token in the text is that token.
        assert_eq!(ids(&t, "a<eot>"), vec![a, 1]);
        // With a space prefix, the text starts with ▁.
        let t = spm(&pieces, true);
        assert_eq!(ids(&t, "ac"), vec![space_a, c]);
        assert_eq!(ids(&t, " "), vec![space, space]);
    }

    #[test]
    fn token_types_are_read_whatever_their_integer_type() {
        let mut content = Gguf::default();
        let tokens = ["<s>", "<0x41>", "\u{2581}a", "a"]
            .map(|t| Value::String(t.into()))
            .to_vec();
        let scores = [0f32, 0., -1., -2.].map(Value::F32).to_vec();
        let types = [3, BYTE as i32, 1, 1].map(Value::I32).to_vec();
        for (k, v) in [
            ("tokenizer.ggml.model", Value::String("llama".into())),
            ("tokenizer.ggml.tokens", Value::Array(tokens)),
            ("tokenizer.ggml.scores", Value::Array(scores)),
            ("tokenizer.ggml.token_type", Value::Array(types)),
            ("tokenizer.ggml.eos_token_id", Value::I32(0)),
        ] {
            content.metadata.insert(k.into(), v);
        }
        let vocab = Vocab::from_gguf(&content).unwrap();
        assert_eq!(vocab.token_bytes[..2], [None, Some(b"A".to_vec())]);
        assert_eq!((vocab.stop.as_slice(), vocab.eos.as_str()), (&[0][..], "<s>"));
    }

    #[test]
    fn sentencepiece_tokens_stand_for_their_text_and_bytes() {
        let tokens: Vec<String> = ["<s>", "<0x7B>", "\u{2581}the", "x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let types = [3, BYTE, NORMAL, NORMAL];
        let bytes = sentencepiece_bytes(&tokens, &types);
        assert_eq!(
            bytes,
            vec![None, Some(b"{".to_vec()), Some(b" the".to_vec()), Some(b"x".to_vec())]
        );
    }
}
