//! RoleBench role profiles: `desc.json` maps each role to its description, and `profiles-*.jsonl` holds
//! the role's script lines as rows `{act_id, diag_id, role, content}`. The lines of one (act, dialogue)
//! become one memory chunk written as `Name:「utterance」`, the form the retrieval styles read.

use std::path::Path;

use super::{Existing, Imported, MAX_FILE, Options, Profile, clean, jsonl_rows, read_text, write_character};
use crate::domain::character::Character;
use crate::domain::scale::Scale;

fn id_part(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// Imports `role` (a key of `desc`) with the dialogues of `profiles`.
pub fn rolebench_profile<'s>(
    desc: &Path,
    profiles: &Path,
    role: &str,
    data_dir: &Path,
    options: &Options,
    scale: impl Fn(&str) -> Option<&'s Scale>,
    existing: impl Fn(&str) -> Existing<'s, Character>,
) -> Result<Imported, super::ImportError> {
    let text = read_text(desc, MAX_FILE * 16, "a RoleBench desc.json")?;
    let all: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| crate::files::json_error(desc, &text, &e))?;
    let description = match all.get(role) {
        Some(serde_json::Value::String(d)) => d.clone(),
        Some(_) => {
            let place = crate::domain::diagnostic::Source::new("", &text)
                .json_at(&[role])
                .map_or(String::new(), |(line, column)| format!(":{line}:{column}"));
            return Err(format!("{}{place}: the description of \"{role}\" is not a string", desc.display()).into());
        }
        None => {
            let roles: Vec<&str> = all.keys().take(12).map(String::as_str).collect();
            return Err(format!(
                "{}: no role \"{role}\" (roles: {}{})",
                desc.display(),
                roles.join(", "),
                if all.len() > roles.len() { ", …" } else { "" }
            )
            .into());
        }
    };
    let mut chunks: Vec<String> = Vec::new();
    let mut current: Option<(String, String)> = None;
    for (line, row, raw) in jsonl_rows(profiles)? {
        let at = |key: &str| super::row_at(profiles, line, &raw, key);
        let (Some(speaker), Some(content)) = (
            row.get("role").and_then(|v| v.as_str()),
            row.get("content").and_then(|v| v.as_str()),
        ) else {
            let missing = if row.get("role").and_then(|v| v.as_str()).is_none() { "role" } else { "content" };
            return Err(format!("{}: a row needs string fields \"role\" and \"content\"", at(missing)).into());
        };
        let key = (id_part(row.get("act_id")), id_part(row.get("diag_id")));
        let (Some(act), Some(diag)) = key else {
            let missing = if id_part(row.get("act_id")).is_none() { "act_id" } else { "diag_id" };
            return Err(format!("{}: a row needs \"act_id\" and \"diag_id\" (numbers or strings)", at(missing)).into());
        };
        let speaker = clean(speaker).replace('\n', " ");
        let content = clean(content).replace('\n', " ");
        if speaker.is_empty() || content.is_empty() {
            continue;
        }
        let utterance = format!("{speaker}:「{content}」");
        match chunks.last_mut() {
            Some(chunk) if current.as_ref() == Some(&(act.clone(), diag.clone())) => {
                chunk.push('\n');
                chunk.push_str(&utterance);
            }
            _ => {
                chunks.push(utterance);
                current = Some((act, diag));
            }
        }
    }
    let profile = Profile {
        name: options.name.clone().unwrap_or_else(|| role.to_string()),
        description,
        chunks,
        origin: format!("RoleBench ({role})"),
        // Every role of a file shares its folder: a name without ASCII letters (李白, 孙悟空) is told
        // apart by a digest of its own, the same at every import.
        fallback_slug: {
            use sha2::{Digest, Sha256};
            use unicode_normalization::UnicodeNormalization;
            // Of the name in one normal form: the same name however its characters were written.
            let digest = Sha256::digest(role.nfc().collect::<String>().as_bytes());
            format!("rolebench-{}", digest[..4].iter().map(|b| format!("{b:02x}")).collect::<String>())
        },
    };
    write_character(profile, data_dir, options, scale, existing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(profile_rows: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("desc.json"),
            r#"{"Wren Ashby": "Wren Ashby is a lighthouse keeper who talks to the gulls.", "Other": "x"}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("profiles-eng-Wren Ashby.jsonl"), profile_rows).unwrap();
        dir
    }

    /// Imports `role` from the files in `dir` into `data`, as no other character holds its id.
    fn profile(dir: &tempfile::TempDir, data: &tempfile::TempDir, role: &str) -> Result<Imported, super::super::ImportError> {
        rolebench_profile(
            &dir.path().join("desc.json"),
            &dir.path().join("profiles-eng-Wren Ashby.jsonl"),
            role,
            data.path(),
            &Options::default(),
            |_| None,
            |_| Existing::none(),
        )
    }

    const ROWS: &str = r#"{"act_id": 1, "diag_id": 0, "role": "Captain Hale", "content": "Any ships tonight?"}
{"act_id": 1, "diag_id": 0, "role": "Wren Ashby", "content": "Only the gulls, Captain."}
{"act_id": 1, "diag_id": 1, "role": "Captain Hale", "content": "The lamp?"}
{"act_id": 1, "diag_id": 1, "role": "Wren Ashby", "content": "Trimmed and burning."}
"#;

    #[test]
    fn each_dialogue_becomes_one_chunk() {
        let dir = files(ROWS);
        let data = tempfile::tempdir().unwrap();
        let got = profile(&dir, &data, "Wren Ashby")
        .unwrap();
        assert_eq!((got.id.as_str(), got.memories), ("wren-ashby-en", 2));
        let chunks: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&got.memories_file).unwrap()).unwrap();
        assert_eq!(
            chunks[0],
            "Captain Hale:「Any ships tonight?」\nWren Ashby:「Only the gulls, Captain.」"
        );
        let toml = std::fs::read_to_string(&got.character_file).unwrap();
        assert!(toml.contains("experimenter = \"Captain Hale\"") && toml.contains("lighthouse keeper"));
    }

    #[test]
    fn roles_named_without_ascii_letters_get_ids_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("desc.json"), r#"{"李白": "诗仙。", "孙悟空": "齐天大圣。"}"#).unwrap();
        let rows = |asker: &str, role: &str| format!("{{\"act_id\":0,\"diag_id\":0,\"role\":\"{asker}\",\"content\":\"问。\"}}\n{{\"act_id\":0,\"diag_id\":0,\"role\":\"{role}\",\"content\":\"答。\"}}\n");
        let import = |role: &str, asker: &str| {
            let data = tempfile::tempdir().unwrap();
            let file = dir.path().join(format!("profiles-zh-{role}.jsonl"));
            std::fs::write(&file, rows(asker, role)).unwrap();
            rolebench_profile(&dir.path().join("desc.json"), &file, role, data.path(), &Options::default(), |_| None, |_| Existing::none())
                .unwrap()
                .id
        };
        let (li, sun) = (import("李白", "杜甫"), import("孙悟空", "唐僧"));
        assert!(li.starts_with("rolebench-") && li.ends_with("-zh") && li.len() == "rolebench-12345678-zh".len(), "{li}");
        assert_ne!(li, sun);
        assert_eq!(import("李白", "杜甫"), li, "the same at every import");
    }

    #[test]
    fn unknown_roles_and_bad_rows_are_errors() {
        let dir = files(ROWS);
        let data = tempfile::tempdir().unwrap();
        let run = |role: &str| profile(&dir, &data, role);
        let e = run("Nobody").unwrap_err().to_string();
        assert!(e.contains("no role \"Nobody\"") && e.contains("Wren Ashby"), "{e}");
        let e = run("Other").unwrap_err().to_string();
        assert!(e.contains("\"Other\" never speaks"), "{e}");
        std::fs::write(
            dir.path().join("profiles-eng-Wren Ashby.jsonl"),
            "{\"act_id\": 1, \"diag_id\": 0, \"role\": \"Wren Ashby\", \"content\": \"a\"}\n{\"act_id\": 1, \"role\": \"Wren Ashby\", \"content\": \"b\"}\n",
        )
        .unwrap();
        let e = run("Wren Ashby").unwrap_err().to_string();
        assert!(e.contains(".jsonl:2:1: a row needs \"act_id\""), "{e}");
        assert!(std::fs::read_dir(data.path()).unwrap().next().is_none());
    }

    /// A description larger than the catalog reads a character file would be: refused before
    /// anything is written (the file could only be skipped afterwards).
    #[test]
    fn a_character_too_large_for_the_catalog_is_refused_before_it_is_written() {
        let dir = files(ROWS);
        let huge = serde_json::json!({"Wren Ashby": "x".repeat(5 << 20)});
        std::fs::write(dir.path().join("desc.json"), huge.to_string()).unwrap();
        let data = tempfile::tempdir().unwrap();
        let e = profile(&dir, &data, "Wren Ashby")
        .unwrap_err()
        .to_string();
        assert!(e.contains("the character file would take"), "{e}");
        assert!(e.contains("more than the 4 MiB a scale or character file may hold"), "{e}");
        let left: Vec<_> = std::fs::read_dir(data.path().join("characters"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
    }
}
