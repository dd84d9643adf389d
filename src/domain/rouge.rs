//! ROUGE-L between an answer and its reference answers, as RoleBench scores role-playing: tokenization
//! (English exactly as the PyPI `rouge-score` package's default tokenizer, Chinese by character), the
//! longest common subsequence with the matched positions (so a screen can highlight them), and
//! precision/recall/F with rouge-score's conventions. Pure: text in, numbers and positions out.
//!
//! English reproduces `rouge_score.tokenize.tokenize(text, stemmer=None)` (rouge-score 0.1.2), the
//! tokenizer of `RougeScorer(["rougeL"])` without a stemmer: Python's Unicode `lower()`, then every
//! character outside `[a-z0-9]` separates tokens. Accented and other non-ASCII letters are therefore
//! dropped ("café" → "caf"), apart from the two characters whose lower case is ASCII: U+0130 "İ"
//! ("i" plus a combining dot, which separates) and U+212A KELVIN SIGN ("k").
//!
//! Chinese is scored by character, the granularity RoleLLM reports for RoleBench-zh: every character
//! that is not whitespace (Unicode White_Space) is one token, punctuation included (full-width "，" and
//! "。" match like any character), and nothing is lower-cased or normalized. There is no reference code
//! to follow: RoleLLM-public and the RoleBench release hold no evaluation code, and the OpenCompass port
//! scores RoleBench-zh with its `RougeEvaluator` (rouge-score's English tokenizer, which deletes every
//! ideograph; its own docstring says it is not suitable for Chinese). Keeping punctuation is the plain
//! reading of "by character". A character is a Unicode scalar value, so an emoji built with joiners
//! counts as several.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::scale::Language;

/// One token and the bytes of the original text it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub text: String,
    /// Byte range in the text that was tokenized; whole characters (a token that ends inside the
    /// lower-case expansion of "İ" covers all of "İ").
    pub span: Range<usize>,
}

/// The tokens of `text` with their byte ranges, by `language`'s rule.
pub fn tokens(text: &str, language: Language) -> Vec<Token> {
    match language {
        Language::En => tokens_en(text),
        Language::Zh => tokens_zh(text),
    }
}

/// The token texts of `text` by `language`'s rule.
pub fn tokenize(text: &str, language: Language) -> Vec<String> {
    tokens(text, language).into_iter().map(|t| t.text).collect()
}

#[cfg(any(test, feature = "testing"))]
/// rouge-score's default tokenizer: lower-case, split on anything outside `[a-z0-9]`.
pub fn tokenize_en(text: &str) -> Vec<String> {
    tokenize(text, Language::En)
}

#[cfg(any(test, feature = "testing"))]
/// One token per non-whitespace character, punctuation included.
pub fn tokenize_zh(text: &str) -> Vec<String> {
    tokenize(text, Language::Zh)
}

fn tokens_en(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut current: Option<Token> = None;
    for (at, c) in text.char_indices() {
        let end = at + c.len_utf8();
        // Per-character lower-casing equals Python's whole-string `lower()` here: its only contextual
        // rule (final sigma) yields a Greek letter, which is dropped either way.
        for l in c.to_lowercase() {
            if l.is_ascii_lowercase() || l.is_ascii_digit() {
                match &mut current {
                    Some(t) => {
                        t.text.push(l);
                        t.span.end = end;
                    }
                    None => {
                        current = Some(Token {
                            text: l.to_string(),
                            span: at..end,
                        })
                    }
                }
            } else if let Some(t) = current.take() {
                out.push(t);
            }
        }
    }
    out.extend(current);
    out
}

fn tokens_zh(text: &str) -> Vec<Token> {
    text.char_indices()
        .filter(|(_, c)| !c.is_whitespace())
        .map(|(at, c)| Token {
            text: c.to_string(),
            span: at..at + c.len_utf8(),
        })
        .collect()
}

/// CJK unified ideographs (the basic block, extension A, the compatibility block, extensions B–H).
pub fn is_cjk_ideograph(c: char) -> bool {
    matches!(c, '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{20000}'..='\u{323AF}')
}

/// The language whose tokenizer suits `text`: Chinese when CJK ideographs make up more than a third of
/// its letters (the rule the importers use), so an English answer that quotes one character stays
/// English. Decide once per question — from its references — and tokenize both sides with it.
pub fn detect(text: &str) -> Language {
    let (mut cjk, mut letters) = (0usize, 0usize);
    for c in text.chars() {
        cjk += usize::from(is_cjk_ideograph(c));
        letters += usize::from(c.is_alphabetic());
    }
    if cjk > 0 && cjk * 3 > letters {
        Language::Zh
    } else {
        Language::En
    }
}

/// A longest common subsequence: its length and the matched token indices, ascending, in each input
/// (`reference[self.reference[k]] == candidate[self.candidate[k]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lcs {
    pub len: usize,
    pub reference: Vec<usize>,
    pub candidate: Vec<usize>,
}

/// The length of a longest common subsequence, in O(n·m) time and O(min(n, m)) memory.
pub fn lcs_len<T: PartialEq>(reference: &[T], candidate: &[T]) -> usize {
    let (long, short) = if reference.len() >= candidate.len() {
        (reference, candidate)
    } else {
        (candidate, reference)
    };
    let mut prev = vec![0usize; short.len() + 1];
    let mut row = vec![0usize; short.len() + 1];
    for a in long {
        for (j, b) in short.iter().enumerate() {
            row[j + 1] = if a == b { prev[j] + 1 } else { row[j].max(prev[j + 1]) };
        }
        std::mem::swap(&mut prev, &mut row);
    }
    prev[short.len()]
}

/// A longest common subsequence with its positions, in O(n·m) time; memory is two rows of lengths plus
/// one bit per cell (3 MB for two answers of 5,000 tokens). The subsequence chosen among equally long
/// ones is rouge-score's (`lcs_ind`, i.e. `_backtrack_norec` over `_lcs_table(ref, can)`): walking back
/// from the end, a match is taken, otherwise it steps back in the candidate only when that keeps a
/// strictly longer subsequence than stepping back in the reference.
pub fn lcs<T: PartialEq>(reference: &[T], candidate: &[T]) -> Lcs {
    let (n, m) = (reference.len(), candidate.len());
    if n == 0 || m == 0 {
        return Lcs::default();
    }
    // Bit (i, j) is set when table[i+1][j] > table[i][j+1] (in table coordinates: left beats up).
    let mut left = vec![0u64; (n * m).div_ceil(64)];
    let mut prev = vec![0usize; m + 1];
    let mut row = vec![0usize; m + 1];
    for (i, a) in reference.iter().enumerate() {
        for (j, b) in candidate.iter().enumerate() {
            row[j + 1] = if a == b {
                prev[j] + 1
            } else if row[j] > prev[j + 1] {
                let bit = i * m + j;
                left[bit / 64] |= 1 << (bit % 64);
                row[j]
            } else {
                prev[j + 1]
            };
        }
        std::mem::swap(&mut prev, &mut row);
    }
    let len = prev[m];
    let (mut in_reference, mut in_candidate) = (Vec::with_capacity(len), Vec::with_capacity(len));
    let (mut i, mut j) = (n, m);
    while i > 0 && j > 0 {
        if reference[i - 1] == candidate[j - 1] {
            in_reference.push(i - 1);
            in_candidate.push(j - 1);
            i -= 1;
            j -= 1;
        } else {
            let bit = (i - 1) * m + (j - 1);
            if left[bit / 64] >> (bit % 64) & 1 == 1 {
                j -= 1;
            } else {
                i -= 1;
            }
        }
    }
    in_reference.reverse();
    in_candidate.reverse();
    Lcs {
        len,
        reference: in_reference,
        candidate: in_candidate,
    }
}

/// ROUGE-L of a candidate against one reference, each in [0, 1].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RougeL {
    /// Precision: LCS length / candidate tokens.
    pub p: f64,
    /// Recall: LCS length / reference tokens.
    pub r: f64,
    /// F1: 2pr / (p + r), 0 when p + r is 0.
    pub f: f64,
}

impl RougeL {
    /// rouge-score's `_score_lcs`: all zero when either side has no tokens; the arithmetic is done in the
    /// same order, so the values are bit-identical to Python's.
    pub fn from_lcs(lcs: usize, reference_len: usize, candidate_len: usize) -> Self {
        if reference_len == 0 || candidate_len == 0 {
            return Self::default();
        }
        let p = lcs as f64 / candidate_len as f64;
        let r = lcs as f64 / reference_len as f64;
        let f = if p + r > 0.0 { 2.0 * p * r / (p + r) } else { 0.0 };
        Self { p, r, f }
    }

    /// ROUGE-L of already tokenized texts.
    pub fn of_tokens<T: PartialEq>(reference: &[T], candidate: &[T]) -> Self {
        Self::from_lcs(lcs_len(reference, candidate), reference.len(), candidate.len())
    }
}

#[cfg(any(test, feature = "testing"))]
/// ROUGE-L of `candidate` against `reference`, both tokenized by `language`'s rule.
pub fn score(reference: &str, candidate: &str, language: Language) -> RougeL {
    RougeL::of_tokens(&tokenize(reference, language), &tokenize(candidate, language))
}

/// The reference that `candidate` matches best: its index and scores, keeping the highest F and the
/// first of equals (rouge-score's `score_multi`, which takes `np.argmax` of the F values). `None` when
/// there are no references.
pub fn best<S: AsRef<str>>(references: &[S], candidate: &str, language: Language) -> Option<(usize, RougeL)> {
    let candidate = tokenize(candidate, language);
    let mut out: Option<(usize, RougeL)> = None;
    for (i, reference) in references.iter().enumerate() {
        let s = RougeL::of_tokens(&tokenize(reference.as_ref(), language), &candidate);
        if out.is_none_or(|(_, b)| s.f > b.f) {
            out = Some((i, s));
        }
    }
    out
}

/// What a screen needs to show a comparison: the scores and the byte ranges of the matched tokens in
/// each text (one range per token, in order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Highlight {
    pub rouge: RougeL,
    pub reference: Vec<Range<usize>>,
    pub candidate: Vec<Range<usize>>,
}

/// Scores `candidate` against `reference` and locates the common subsequence in both texts.
pub fn highlight(reference: &str, candidate: &str, language: Language) -> Highlight {
    let r = tokens(reference, language);
    let c = tokens(candidate, language);
    fn texts(ts: &[Token]) -> Vec<&str> {
        ts.iter().map(|t| t.text.as_str()).collect()
    }
    let common = lcs(&texts(&r), &texts(&c));
    Highlight {
        rouge: RougeL::from_lcs(common.len, r.len(), c.len()),
        reference: common.reference.iter().map(|&i| r[i].span.clone()).collect(),
        candidate: common.candidate.iter().map(|&j| c[j].span.clone()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<&str> {
        s.split_whitespace().collect()
    }

    #[test]
    fn english_tokens_follow_rouge_score() {
        assert_eq!(
            tokenize_en("Hello, World! It's café-au-lait, the 2nd time…"),
            ["hello", "world", "it", "s", "caf", "au", "lait", "the", "2nd", "time"]
        );
        assert_eq!(tokenize_en("MiXeD CaSe 42"), ["mixed", "case", "42"]);
        assert_eq!(tokenize_en("İstanbul at 5\u{212A}"), ["i", "stanbul", "at", "5k"]);
        assert_eq!(tokenize_en("ÉCOLE naïve Straße"), ["cole", "na", "ve", "stra", "e"]);
        assert_eq!(tokenize_en("皇上 says 好"), ["says"]);
        assert!(tokenize_en("").is_empty());
        assert!(tokenize_en(" \t\n—!?…🙂 ").is_empty());
        assert_eq!(tokenize_en("٣ ３ 3"), ["3"]);
    }

    #[test]
    fn only_two_non_ascii_characters_lower_to_ascii() {
        let found: Vec<char> = (0x80..=0x10FFFFu32)
            .filter_map(char::from_u32)
            .filter(|c| c.to_lowercase().any(|l| l.is_ascii_alphanumeric()))
            .collect();
        assert_eq!(found, ['\u{130}', '\u{212A}']);
    }

    #[test]
    fn spans_cover_the_original_characters() {
        let text = "Ahoy, İzmir!";
        let ts = tokens(text, Language::En);
        let shown: Vec<(&str, &str)> = ts.iter().map(|t| (t.text.as_str(), &text[t.span.clone()])).collect();
        assert_eq!(shown, [("ahoy", "Ahoy"), ("i", "İ"), ("zmir", "zmir")]);
        let text = "朕 知道了。";
        let ts = tokens(text, Language::Zh);
        let shown: Vec<&str> = ts.iter().map(|t| &text[t.span.clone()]).collect();
        assert_eq!(shown, ["朕", "知", "道", "了", "。"]);
    }

    #[test]
    fn chinese_is_scored_by_character_with_punctuation() {
        assert_eq!(
            tokenize_zh("我爱你，中国！ OK 1"),
            ["我", "爱", "你", "，", "中", "国", "！", "O", "K", "1"]
        );
        assert!(tokenize_zh(" \u{3000}\n").is_empty());
        // 我喜欢吃苹果 / 我不喜欢苹果: LCS 我喜欢苹果 = 5 of 6 on both sides.
        let s = score("我喜欢吃苹果", "我不喜欢苹果", Language::Zh);
        assert_eq!((s.p, s.r), (5.0 / 6.0, 5.0 / 6.0));
        assert!((s.f - 5.0 / 6.0).abs() < 1e-15);
        // Punctuation counts: 好。 vs 好！ share one of two tokens.
        assert_eq!(score("好。", "好！", Language::Zh).f, 0.5);
    }

    #[test]
    fn english_scores_by_hand() {
        // the quick brown fox jumps / the brown dog jumps quick: LCS the-brown-jumps = 3 of 5 and 5.
        let s = score("The quick brown fox jumps", "the brown dog jumps quick", Language::En);
        assert_eq!((s.p, s.r), (0.6, 0.6));
        assert!((s.f - 0.6).abs() < 1e-15);
        // a b c d e / a c e b: LCS a-c-e = 3; p = 3/4, r = 3/5, f = 0.9 / 1.35 = 2/3.
        let s = RougeL::of_tokens(&words("a b c d e"), &words("a c e b"));
        assert_eq!((s.p, s.r), (0.75, 0.6));
        assert!((s.f - 2.0 / 3.0).abs() < 1e-15);
        assert_eq!(score("", "anything", Language::En), RougeL::default());
        assert_eq!(score("anything", "!!!", Language::En), RougeL::default());
        assert_eq!(score("one two", "three", Language::En), RougeL::default());
    }

    #[test]
    fn positions_follow_rouge_score_backtracking() {
        // a b / b a: two LCS of length 1; rouge-score keeps reference "a" (index 0) matched to candidate 1.
        assert_eq!(
            lcs(&words("a b"), &words("b a")),
            Lcs {
                len: 1,
                reference: vec![0],
                candidate: vec![1]
            }
        );
        let l = lcs(&words("a b c d e"), &words("x a c y e b"));
        assert_eq!((l.len, l.reference, l.candidate), (3, vec![0, 2, 4], vec![1, 2, 4]));
        assert_eq!(lcs::<&str>(&[], &words("a")), Lcs::default());
        // Wider than one 64-bit word of directions.
        let r: Vec<usize> = (0..100).collect();
        let c: Vec<usize> = (0..100).rev().chain(0..100).collect();
        let l = lcs(&r, &c);
        assert_eq!((l.len, lcs_len(&r, &c)), (100, 100));
        assert!(l.reference.iter().zip(&l.candidate).all(|(&i, &j)| r[i] == c[j]));
    }

    #[test]
    fn best_keeps_the_highest_f_and_the_first_of_equals() {
        let refs = ["a b", "x y z", "a b"];
        assert_eq!(best(&refs, "a b", Language::En).map(|(i, s)| (i, s.f)), Some((0, 1.0)));
        assert_eq!(best(&refs, "x y", Language::En).map(|(i, _)| i), Some(1));
        assert_eq!(
            best(&refs, "nothing", Language::En).map(|(i, s)| (i, s.f)),
            Some((0, 0.0))
        );
        assert_eq!(best::<&str>(&[], "a", Language::En), None);
    }

    #[test]
    fn highlight_locates_the_common_tokens() {
        let h = highlight("Ahoy, mate!", "ahoy there, old mate", Language::En);
        assert_eq!(h.reference, [0..4, 6..10]);
        assert_eq!(h.candidate, [0..4, 16..20]);
        assert_eq!(h.rouge, score("Ahoy, mate!", "ahoy there, old mate", Language::En));
    }

    #[test]
    fn detection_needs_a_real_share_of_ideographs() {
        assert_eq!(detect("朕知道了。"), Language::Zh);
        assert_eq!(detect("我喜欢Python编程"), Language::Zh);
        assert_eq!(detect("The word 道 means the way."), Language::En);
        assert_eq!(detect(""), Language::En);
        assert_eq!(detect("𠀀𠀁"), Language::Zh);
    }
}
