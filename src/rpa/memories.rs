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

/// A part of a memory chunk: someone's utterance `Name:「text」` (its text may run over several lines,
/// up to the line that ends with `」`), or another line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment<'a> {
    Said(&'a str, String),
    Line(&'a str),
}

/// The segments of a chunk, in order. An utterance left open at the end of the chunk is read as
/// separate lines.
pub(crate) fn segments(chunk: &str) -> Vec<Segment<'_>> {
    let lines: Vec<&str> = chunk.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some((who, text)) = utterance(line) {
            out.push(Segment::Said(who, text.to_string()));
            i += 1;
            continue;
        }
        // `Name:「` opening a text that ends on a later line.
        let opened = line
            .split_once(':')
            .or_else(|| line.split_once('：'))
            .and_then(|(who, rest)| Some((who.trim(), rest.trim_start().strip_prefix('「')?)))
            .filter(|(who, first)| !who.is_empty() && who.chars().count() <= 40 && !first.contains('」'));
        let end = lines[i + 1..].iter().position(|l| l.trim_end().ends_with('」'));
        match (opened, end) {
            (Some((who, first)), Some(end)) => {
                let end = i + 1 + end;
                let mut text = vec![first];
                text.extend(&lines[i + 1..end]);
                text.push(lines[end].trim_end().strip_suffix('」').unwrap_or(lines[end]));
                out.push(Segment::Said(who, text.join("\n").trim().to_string()));
                i = end + 1;
            }
            _ => {
                out.push(Segment::Line(line));
                i += 1;
            }
        }
    }
    out
}

/// Dialogue pairs: a line by someone else directly followed by a line of `speaker`.
pub fn dialogue_pairs(chunks: &[String], speaker: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for chunk in chunks {
        let lines: Vec<(&str, String)> = segments(chunk)
            .into_iter()
            .filter_map(|s| match s {
                Segment::Said(who, text) => Some((who, text)),
                Segment::Line(line) => utterance(line).map(|(w, t)| (w, t.to_string())),
            })
            .collect();
        for w in lines.windows(2) {
            if w[0].0 != speaker && w[1].0 == speaker && !w[0].1.is_empty() && !w[1].1.is_empty() {
                pairs.push((format!("{}:「{}」", w[0].0, w[0].1), w[1].1.to_string()));
            }
        }
    }
    pairs
}

/// The most a memories file may hold (what an import may write, and what is read back): a ChatHaruhi
/// folder brings at most 64 MiB of text, which JSON escaping may grow.
pub const MAX_FILE: u64 = 128 << 20;

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

/// The memory chunks of `character` as stored, if it has any. The file must be a regular file of at
/// most [`MAX_FILE`] bytes (a device or a FIFO is refused before it is read).
pub fn chunks(data_dir: &Path, character: &str) -> Result<Option<Vec<String>>, String> {
    let p = path(data_dir, character);
    match std::fs::symlink_metadata(&p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    let text = crate::files::read_text_limited(&p, MAX_FILE, "a memories file").map_err(|e| e.to_string())?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| crate::files::json_error(&p, &text, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_memories_file_that_is_not_a_regular_file_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(chunks(dir.path(), "luna-en"), Ok(None), "no file: no memories");
        std::fs::create_dir_all(dir.path().join("characters")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", path(dir.path(), "luna-en")).unwrap();
        let e = chunks(dir.path(), "luna-en").unwrap_err();
        assert!(e.contains("luna-en.memories.json: not a regular file"), "{e}");
    }

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
