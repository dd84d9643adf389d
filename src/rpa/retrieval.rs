//! BM25 over a character's dialogue memories, offline (no embedding model). English is split into
//! lower-case words; CJK text into single characters and character bigrams, since it has no spaces.

use std::collections::HashMap;

use crate::text::is_cjk;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Terms of a text: lower-case alphanumeric words; CJK characters and bigrams of adjacent CJK characters.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_cjk: Option<char> = None;
    for c in text.chars() {
        if is_cjk(c) {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            out.push(c.to_string());
            if let Some(p) = prev_cjk {
                out.push(format!("{p}{c}"));
            }
            prev_cjk = Some(c);
            continue;
        }
        prev_cjk = None;
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

pub struct Bm25 {
    docs: Vec<HashMap<String, usize>>,
    lengths: Vec<usize>,
    average: f64,
    document_frequency: HashMap<String, usize>,
}

impl Bm25 {
    pub fn new<S: AsRef<str>>(documents: &[S]) -> Bm25 {
        let mut docs = Vec::with_capacity(documents.len());
        let mut lengths = Vec::with_capacity(documents.len());
        let mut document_frequency: HashMap<String, usize> = HashMap::new();
        for d in documents {
            let ts = terms(d.as_ref());
            lengths.push(ts.len());
            let mut counts: HashMap<String, usize> = HashMap::new();
            for t in ts {
                *counts.entry(t).or_default() += 1;
            }
            for t in counts.keys() {
                *document_frequency.entry(t.clone()).or_default() += 1;
            }
            docs.push(counts);
        }
        let average = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<usize>() as f64 / lengths.len() as f64
        };
        Bm25 {
            docs,
            lengths,
            average,
            document_frequency,
        }
    }

    /// The `k` best documents for `query`, best first (ties by index), with their scores; only documents
    /// that share a term with the query.
    pub fn search(&self, query: &str, k: usize) -> Vec<(usize, f64)> {
        let n = self.docs.len() as f64;
        let q = terms(query);
        let mut scored: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, doc)| {
                let len = self.lengths[i] as f64;
                let score = q
                    .iter()
                    .filter_map(|t| {
                        let tf = *doc.get(t)? as f64;
                        let df = *self.document_frequency.get(t)? as f64;
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        Some(idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / self.average.max(1e-9))))
                    })
                    .sum::<f64>();
                (i, score)
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_split_words_and_cjk() {
        assert_eq!(terms("Luna's NARGLES!"), ["luna", "s", "nargles"]);
        assert_eq!(terms("钟离好"), ["钟", "离", "钟离", "好", "离好"]);
    }

    #[test]
    fn ranks_relevant_memories_first() {
        let docs = [
            "Luna talks about Nargles and mistletoe.",
            "Harry plays Quidditch.",
            "The Quibbler prints Nargles stories about Nargles.",
        ];
        let index = Bm25::new(&docs);
        let hits = index.search("What are Nargles?", 5);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2, 0]);
        assert!(index.search("dragons", 5).is_empty());
        assert_eq!(Bm25::new(&["旅行者来到璃月", "钟离喜欢喝茶"]).search("钟离", 1)[0].0, 1);
    }
}
