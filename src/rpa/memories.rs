//! A character's dialogue memories (the "classic scenes" of ChatHaruhi): plain text chunks stored next
//! to an imported character as `<data dir>/characters/<id>.memories.json`, indexed with BM25 on load.

use std::path::{Path, PathBuf};

use super::retrieval::Bm25;

pub struct Memories {
    pub chunks: Vec<String>,
    pub index: Bm25,
}

pub fn path(data_dir: &Path, character: &str) -> PathBuf {
    data_dir.join("characters").join(format!("{character}.memories.json"))
}

impl Memories {
    pub fn new(chunks: Vec<String>) -> Memories {
        let index = Bm25::new(&chunks);
        Memories { chunks, index }
    }

    /// The memories of `character`, if it has any.
    pub fn load(data_dir: &Path, character: &str) -> Result<Option<Memories>, String> {
        let p = path(data_dir, character);
        match std::fs::read_to_string(&p) {
            Ok(text) => {
                let chunks: Vec<String> = serde_json::from_str(&text)
                    .map_err(|e| format!("{}:{}:{}: {e}", p.display(), e.line(), e.column()))?;
                Ok(Some(Memories::new(chunks)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", p.display())),
        }
    }
}
