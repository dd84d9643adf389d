//! `prompts` and `prompts export`: the method's prompt templates, their placeholders and checksums, and
//! a folder of them to edit; and reading such a folder for `--prompts DIR`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use super::input_error;
use crate::files::FileError;
use crate::templates::{BUNDLED, PromptSet, Template, Templates, sha256};

/// The templates of a `--prompts DIR` folder as a session records them (none without a folder).
/// Every problem is the user's (exit 2) and is found before anything is sent.
pub(super) fn load_prompts(dir: Option<&Path>) -> anyhow::Result<PromptSet> {
    match dir {
        None => Ok(PromptSet::new()),
        Some(dir) => Ok(Templates::load_dir(dir)?.record()),
    }
}

/// `stem|statement, options`: the groups a template must use one of each of.
fn required_text(t: Template) -> String {
    t.required().iter().map(|g| g.join("|")).collect::<Vec<_>>().join(", ")
}

/// Every template with its placeholders: what each renders and an example of it.
pub fn list(json_output: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if json_output {
        let list: Vec<_> = Template::ALL
            .iter()
            .map(|&t| {
                json!({
                    "name": t.name(),
                    "file": t.file_name(),
                    "reader": if t.is_interview() { "agent" } else { "judge" },
                    "json": t.is_json(),
                    "placeholders": t.placeholders().iter().map(|p| json!({
                        "name": p.name,
                        "meaning": p.meaning,
                        "example": p.example,
                        "required": t.is_required(p.name),
                    })).collect::<Vec<_>>(),
                    "required": t.required(),
                    "origin": BUNDLED,
                    "sha256": sha256(t.bundled_text()),
                })
            })
            .collect();
        writeln!(out, "{}", crate::text::json_pretty(&list)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    for t in Template::ALL {
        let reader = if t.is_interview() {
            "the agent reads it"
        } else {
            "the judge reads it"
        };
        let json = if t.is_json() {
            " · writes JSON: values escaped"
        } else {
            ""
        };
        writeln!(
            out,
            "{} · {reader}{json} · {BUNDLED} {}",
            t.file_name(),
            &sha256(t.bundled_text())[..12]
        )?;
        if !t.required().is_empty() {
            writeln!(out, "  needs {}", required_text(t))?;
        }
        for p in t.placeholders() {
            let example = p.example.replace('\n', "\\n");
            writeln!(out, "  {{{}}}  {} (e.g. {example})", p.name, p.meaning)?;
        }
    }
    writeln!(
        out,
        "placeholders are {{name}} or {{name.part}}; `a|b`: one of them; every other brace is text; \
         `incharacter prompts export DIR` writes the files to edit, `incharacter prompts check DIR --scale S` renders them"
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Writes every bundled template into `dir` (created if needed, in a folder that exists), all files
/// or none.
/// Existing files are left alone, and nothing is written, unless `force`; a link or a special file
/// where a template goes, and a folder the workbench keeps its own files in, are refused before
/// anything is written, `force` or not.
pub fn export(dir: &Path, force: bool, json_output: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let targets: Vec<_> = Template::ALL.iter().map(|t| (t, dir.join(t.file_name()))).collect();
    // A prompt set's place is a folder of the data dir's `prompts`; any other kept folder is refused
    // (one check: the templates share their folder).
    let kept = crate::files::Kept {
        prompt_set: true,
        ..crate::session::store::kept()
    };
    if let Some((_, first)) = targets.first() {
        crate::files::not_own(first, &kept)?;
    }
    // An export killed in the middle is undone first: its files are not there to be refused.
    crate::files::recover(dir);
    let mut existing = Vec::new();
    for (_, path) in &targets {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(FileError::Symlink(path.clone()).into()),
            Ok(meta) if !meta.is_file() => return Err(FileError::NotAFileToWrite(path.clone()).into()),
            Ok(_) => existing.push(path.display().to_string()),
            Err(_) => {}
        }
    }
    if !existing.is_empty() && !force {
        return Err(input_error(format!(
            "{} already exist{}; nothing written (--force overwrites)",
            existing.join(", "),
            if existing.len() == 1 { "s" } else { "" }
        )));
    }
    let created = std::fs::symlink_metadata(dir).is_err();
    if created {
        // The folder itself is made, not a mistyped path's folders above it.
        crate::files::folder_exists(dir)?;
        std::fs::create_dir(dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    } else if !dir.is_dir() {
        return Err(input_error(format!(
            "{}: not a folder; nothing written (prompts export writes its templates into a folder)",
            dir.display()
        )));
    }
    // The set whole or nothing of it: a half-written set would be refused next time as existing.
    let changes: Vec<crate::files::Change<'_>> = targets
        .iter()
        .map(|(t, path)| (path.clone(), Some(t.bundled_text().as_bytes())))
        .collect();
    if let Err(e) = crate::files::write_all_or_none(&changes) {
        // A folder made for nothing is not left behind.
        if created {
            let _ = std::fs::remove_dir(dir);
        }
        return Err(e.into());
    }
    let written: Vec<String> = targets.iter().map(|(_, path)| path.display().to_string()).collect();
    if json_output {
        writeln!(out, "{}", crate::text::json_pretty(&json!({ "written": written }))?)?;
    } else {
        for path in &written {
            writeln!(out, "wrote {path}")?;
        }
        writeln!(
            out,
            "edit any of them, delete the others, and pass the folder with `--prompts {}`",
            dir.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_reads_back_as_the_bundled_set_and_is_not_overwritten_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("prompts");
        let mut out = Vec::new();
        export(&folder, false, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("wrote ").count(), Template::ALL.len(), "{text}");
        let loaded = Templates::load_dir(&folder).unwrap();
        for t in Template::ALL {
            assert_eq!(loaded.text(t), t.bundled_text());
        }
        std::fs::write(folder.join("reask.txt"), "mine: {problem}").unwrap();
        let e = export(&folder, false, false, &mut Vec::new()).unwrap_err();
        assert_eq!(super::super::exit_code(&e), 2);
        assert!(e.to_string().contains("reask.txt"), "{e}");
        assert_eq!(
            std::fs::read_to_string(folder.join("reask.txt")).unwrap(),
            "mine: {problem}"
        );
        export(&folder, true, true, &mut Vec::new()).unwrap();
        assert_eq!(
            std::fs::read_to_string(folder.join("reask.txt")).unwrap(),
            Template::Reask.bundled_text()
        );
    }

    #[test]
    fn the_list_names_every_template_with_what_it_requires() {
        let mut out = Vec::new();
        list(false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let at = text
            .find("self_report_cot.zh.txt · the agent reads it · bundled")
            .unwrap();
        assert!(text[at..].lines().nth(1) == Some("  needs stem|statement"), "{text}");
        for t in Template::ALL {
            for p in t.placeholders() {
                assert!(!p.example.is_empty(), "{}: {} has an example", t.name(), p.name);
            }
        }
        assert!(text.contains("  {range.mid}  the middle of the range"), "{text}");
        let mut out = Vec::new();
        list(true, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v.as_array().unwrap().len(), Template::ALL.len());
        assert_eq!(v[0]["name"], "expert_rating");
        assert_eq!(v[0]["sha256"], sha256(Template::ExpertRating.bundled_text()));
        assert_eq!(v[0]["required"], json!([["dimension"]]));
    }
}
