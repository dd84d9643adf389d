//! ChatHaruhi characters: a folder (`system_prompt.txt` + `texts/*.txt`) or a jsonl export (one row per
//! text in `text` or base64 `enc_text`; the row whose embedding column says `system_prompt` holds the
//! profile, a `config` row is skipped, embedding columns are ignored).

use std::path::{Path, PathBuf};

use base64::Engine as _;

use super::{Existing, Imported, MAX_FILES, Options, Profile, clean, jsonl_rows, read_bounded, write_character};
use crate::domain::character::Character;
use crate::domain::scale::Scale;

/// Natural order of file stems: text_2 before text_10.
fn natural_key(p: &Path) -> (String, u64, String) {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digits = super::trailing_digits(&stem);
    (
        stem[..stem.len() - digits.len()].to_string(),
        digits.parse::<u64>().unwrap_or(0),
        stem.clone(),
    )
}

/// Imports a ChatHaruhi character folder into `data_dir`. `scale` looks up scales for validation;
/// `existing` tells what already holds the new id: refused unless `options.replace`, and then the
/// labels and targets, reference id, aliases, experimenter and card info of the character it
/// replaces stay (an import adds a profile and memories, it does not erase what is known about the
/// character).
pub fn chatharuhi_folder<'s>(
    dir: &Path,
    data_dir: &Path,
    options: &Options,
    scale: impl Fn(&str) -> Option<&'s Scale>,
    existing: impl Fn(&str) -> Existing<'s, Character>,
) -> Result<Imported, super::ImportError> {
    let mut total = 0;
    let description = read_bounded(&dir.join("system_prompt.txt"), &mut total)?;
    let texts_dir = dir.join("texts");
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(&texts_dir).map_err(|e| format!("{}: {e}", texts_dir.display()))? {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "txt") {
            // Counted while listing: a folder of millions of files is refused without holding them all.
            if files.len() == MAX_FILES {
                return Err(format!("{}: more than {MAX_FILES} .txt files", texts_dir.display()).into());
            }
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(format!("{}: no .txt memories", texts_dir.display()).into());
    }
    files.sort_by_key(|p| natural_key(p));
    let mut chunks = Vec::new();
    for f in &files {
        let text = clean(&read_bounded(f, &mut total)?);
        if !text.is_empty() {
            chunks.push(text);
        }
    }
    let folder = dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let profile = Profile {
        name: options.name.clone().unwrap_or_else(|| folder.clone()),
        description,
        chunks,
        origin: format!("ChatHaruhi ({folder})"),
        fallback_slug: folder,
    };
    write_character(profile, data_dir, options, scale, existing)
}

/// Imports a ChatHaruhi jsonl export. The character's name defaults to the file stem.
pub fn chatharuhi_jsonl<'s>(
    file: &Path,
    data_dir: &Path,
    options: &Options,
    scale: impl Fn(&str) -> Option<&'s Scale>,
    existing: impl Fn(&str) -> Existing<'s, Character>,
) -> Result<Imported, super::ImportError> {
    let rows = jsonl_rows(file)?;
    let mut description: Option<String> = None;
    let mut chunks = Vec::new();
    for (line, row, raw) in rows {
        let at = |key: &str| super::row_at(file, line, &raw, key);
        let text = match (row.get("text"), row.get("enc_text")) {
            (Some(serde_json::Value::String(t)), _) => t.clone(),
            (None, Some(serde_json::Value::String(enc))) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(enc.trim())
                    .map_err(|e| format!("{}: enc_text is not base64: {e}", at("enc_text")))?;
                String::from_utf8(bytes)
                    .map_err(|_| format!("{}: enc_text does not decode to UTF-8", at("enc_text")))?
            }
            (Some(_), _) => return Err(format!("{}: text must be a string", at("text")).into()),
            (None, Some(_)) => return Err(format!("{}: enc_text must be a string", at("enc_text")).into()),
            (None, None) => return Err(format!("{}: a row needs \"text\" or \"enc_text\"", at("")).into()),
        };
        // The embedding column of the special rows holds a marker instead of a vector.
        let marker = row
            .iter()
            .filter(|(k, _)| *k != "text" && *k != "enc_text")
            .find_map(|(_, v)| v.as_str().filter(|s| *s == "system_prompt" || *s == "config"));
        match marker {
            Some("system_prompt") => {
                if description.is_some() {
                    return Err(format!("{}: a second system_prompt row", at("")).into());
                }
                description = Some(text);
            }
            Some(_) => {}
            None => {
                let text = clean(&text);
                if !text.is_empty() {
                    chunks.push(text);
                }
            }
        }
    }
    let description =
        description.ok_or_else(|| format!("{}: no system_prompt row (the character's profile)", file.display()))?;
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let profile = Profile {
        name: options.name.clone().unwrap_or_else(|| stem.clone()),
        description,
        chunks,
        origin: format!("ChatHaruhi jsonl ({stem})"),
        fallback_slug: stem,
    };
    write_character(profile, data_dir, options, scale, existing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(texts: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let luna = dir.path().join("Luna");
        std::fs::create_dir_all(luna.join("texts")).unwrap();
        std::fs::write(luna.join("system_prompt.txt"), "I want you to act like Luna.").unwrap();
        for (name, text) in texts {
            std::fs::write(luna.join("texts").join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn imports_a_folder_with_inferred_experimenter_and_language() {
        let src = folder(&[
            ("text_10.txt", "Harry:「Hello」\nLuna:「Nargles.」"),
            ("text_2.txt", "Harry:「Luna?」\nLuna:「Yes?」\nGinny:「Hi」"),
        ]);
        let data = tempfile::tempdir().unwrap();
        let got = chatharuhi_folder(
            &src.path().join("Luna"),
            data.path(),
            &Options::default(),
            |_| None,
            |_| Existing::none(),
        )
        .unwrap();
        assert_eq!(got.id, "luna-en");
        assert_eq!(got.memories, 2);
        let toml = std::fs::read_to_string(&got.character_file).unwrap();
        assert!(toml.contains("experimenter = \"Harry\""), "{toml}");
        let chunks: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&got.memories_file).unwrap()).unwrap();
        assert!(chunks[0].contains("Luna?"), "natural order: text_2 first");
    }

    #[test]
    fn unknown_names_and_bad_ids_write_nothing() {
        let src = folder(&[("text_0.txt", "Harry:「Hello」\nLuna:「Hi」")]);
        let data = tempfile::tempdir().unwrap();
        let opts = Options {
            name: Some("Haruhi".into()),
            ..Options::default()
        };
        let e = chatharuhi_folder(
            &src.path().join("Luna"),
            data.path(),
            &opts,
            |_| None,
            |_| Existing::none(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("\"Haruhi\" never speaks") && e.contains("Luna"), "{e}");
        let opts = Options {
            id: Some("../../etc".into()),
            ..Options::default()
        };
        assert!(
            chatharuhi_folder(
                &src.path().join("Luna"),
                data.path(),
                &opts,
                |_| None,
                |_| Existing::none()
            )
            .unwrap_err()
            .to_string()
            .contains("must be at most 64 ASCII letters")
        );
        assert!(
            std::fs::read_dir(data.path()).unwrap().next().is_none(),
            "nothing written"
        );
    }

    #[test]
    fn an_id_in_use_is_refused_unless_replace_and_replace_keeps_what_is_known() {
        let src = folder(&[("text_0.txt", "Harry:「Hello」\nLuna:「Hi」")]);
        let data = tempfile::tempdir().unwrap();
        let luna = src.path().join("Luna");
        let first = chatharuhi_folder(&luna, data.path(), &Options::default(), |_| None, |_| Existing::none()).unwrap();
        assert_eq!(first.replaced, None);
        let mut known = Character::parse(
            crate::domain::diagnostic::Source::new("x", &std::fs::read_to_string(&first.character_file).unwrap()),
            |_| None,
        )
        .unwrap();
        known.aliases.push("Loony".into());
        let before = std::fs::read(&first.character_file).unwrap();
        let held = |_: &str| Existing {
            entry: Some(&known),
            files: vec![first.character_file.clone()],
            bundled: None,
        };
        let e = chatharuhi_folder(&luna, data.path(), &Options::default(), |_| None, held)
            .unwrap_err()
            .to_string();
        assert!(e.contains("already exists") && e.contains("--replace"), "{e}");
        assert_eq!(std::fs::read(&first.character_file).unwrap(), before, "nothing written");
        let replace = Options {
            replace: true,
            ..Options::default()
        };
        let again = chatharuhi_folder(&luna, data.path(), &replace, |_| None, held).unwrap();
        assert_eq!(
            again.replaced,
            Some(crate::rpa::import::Replaced::User {
                path: first.character_file.clone()
            })
        );
        let toml = std::fs::read_to_string(&again.character_file).unwrap();
        assert!(toml.contains("Loony"), "the replaced character's aliases stay: {toml}");
    }

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn jsonl_rows_in_text_or_base64_with_the_system_prompt_row() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("令狐冲.jsonl");
        let rows = [
            serde_json::json!({"enc_text": b64("你是\u{1b}[31m令狐冲\u{1b}]0;x\u{7}。"), "bge_zh_s15": "system_prompt"}),
            serde_json::json!({"text": "", "bge_zh_s15": "config"}),
            serde_json::json!({"enc_text": b64("岳灵珊:「大师哥！」\n令狐冲:「小师妹。」"), "bge_zh_s15": "AAAA"}),
            serde_json::json!({"text": "岳不群:「冲儿。」\n令狐冲:「师父\u{1b}[2J。」\u{1b}[31m", "bge_zh_s15": [0.1, 0.2]}),
        ];
        let text: String = rows.iter().map(|r| format!("{r}\n\n")).collect();
        std::fs::write(&file, text).unwrap();
        let data = tempfile::tempdir().unwrap();
        let opts = Options {
            id: Some("linghuchong".into()),
            ..Options::default()
        };
        let got = chatharuhi_jsonl(&file, data.path(), &opts, |_| None, |_| Existing::none()).unwrap();
        assert_eq!(got.memories, 2);
        let toml = std::fs::read_to_string(&got.character_file).unwrap();
        assert!(
            toml.contains("language = \"zh\"") && toml.contains("你是令狐冲。"),
            "{toml}"
        );
        let chunks: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&got.memories_file).unwrap()).unwrap();
        assert!(
            chunks[0].starts_with("岳灵珊") && chunks[1] == "岳不群:「冲儿。」\n令狐冲:「师父。」",
            "{chunks:?}"
        );
    }

    #[test]
    fn malformed_jsonl_rows_name_their_line_and_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        for (rows, expect) in [
            (
                "{\"text\": \"a\", \"e\": \"system_prompt\"}\n{\"text\": oops}\n",
                ".jsonl:2:",
            ),
            ("{\"enc_text\": \"***\", \"e\": \"x\"}\n", "not base64"),
            ("[1, 2]\n", "must be a JSON object"),
            ("{\"text\": \"Luna:「Hi」\\nHarry:「Yo」\"}\n", "no system_prompt row"),
            ("{\"speaker\": \"Luna\"}\n", "needs \"text\" or \"enc_text\""),
        ] {
            let file = dir.path().join("Luna.jsonl");
            std::fs::write(&file, rows).unwrap();
            let e = chatharuhi_jsonl(&file, data.path(), &Options::default(), |_| None, |_| Existing::none())
                .unwrap_err()
                .to_string();
            assert!(e.contains(expect), "{rows}: {e}");
        }
        assert!(std::fs::read_dir(data.path()).unwrap().next().is_none());
    }
}
