//! A character's dialogue memories (the "classic scenes" of ChatHaruhi): plain text chunks stored next
//! to an imported character as `<data dir>/characters/<id>.memories.json`, indexed with BM25 on load.

use std::path::{Path, PathBuf};

use super::retrieval::Bm25;

pub struct Memories {
    pub chunks: Vec<String>,
    pub index: Bm25,
    /// (someone's line, the character's reply) pairs found in the chunks, for the rolegpt style.
    pub pairs: Vec<(String, String)>,
    pub pair_index: Bm25,
}

/// `Name:「text」` → (name, text).
pub(crate) fn utterance(line: &str) -> Option<(&str, &str)> {
    let (name, rest) = line.split_once(':').or_else(|| line.split_once('：'))?;
    let text = rest.trim().strip_prefix('「')?.trim_end().strip_suffix('」')?;
    Some((name.trim(), text.trim()))
}

/// Dialogue pairs: a line by someone else directly followed by a line of `speaker`.
pub fn dialogue_pairs(chunks: &[String], speaker: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for chunk in chunks {
        let lines: Vec<(&str, &str)> = chunk.lines().filter_map(utterance).collect();
        for w in lines.windows(2) {
            if w[0].0 != speaker && w[1].0 == speaker && !w[0].1.is_empty() && !w[1].1.is_empty() {
                pairs.push((format!("{}:「{}」", w[0].0, w[0].1), w[1].1.to_string()));
            }
        }
    }
    pairs
}

pub fn path(data_dir: &Path, character: &str) -> PathBuf {
    data_dir.join("characters").join(format!("{character}.memories.json"))
}

impl Memories {
    /// Indexes `chunks`; `speaker` is the character's name as it speaks in them.
    pub fn new(chunks: Vec<String>, speaker: &str) -> Memories {
        let index = Bm25::new(&chunks);
        let pairs = dialogue_pairs(&chunks, speaker);
        let texts: Vec<String> = pairs.iter().map(|(q, a)| format!("{q} {a}")).collect();
        let pair_index = Bm25::new(&texts);
        Memories {
            chunks,
            index,
            pairs,
            pair_index,
        }
    }

    /// The memories of `character` (speaking as `speaker`), if it has any.
    pub fn load(data_dir: &Path, character: &str, speaker: &str) -> Result<Option<Memories>, String> {
        Ok(chunks(data_dir, character)?.map(|chunks| Memories::new(chunks, speaker)))
    }
}

/// The memory chunks of `character` as stored, if it has any.
pub fn chunks(data_dir: &Path, character: &str) -> Result<Option<Vec<String>>, String> {
    let p = path(data_dir, character);
    match std::fs::read_to_string(&p) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{}:{}:{}: {e}", p.display(), e.line(), e.column())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", p.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_someone_elses_line_then_the_characters() {
        let chunks = vec!["Harry:「Hi Luna」\nLuna:「Hello, Harry.」\n:She smiled\nLuna:「Nargles!」\nGinny:「What?」\nLuna:「Nothing.」".to_string()];
        let pairs = dialogue_pairs(&chunks, "Luna");
        assert_eq!(
            pairs,
            vec![
                ("Harry:「Hi Luna」".to_string(), "Hello, Harry.".to_string()),
                ("Ginny:「What?」".to_string(), "Nothing.".to_string())
            ]
        );
    }
}
