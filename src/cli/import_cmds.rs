//! `incharacter import …`: characters from ChatHaruhi, RoleBench and character cards, scales from
//! InCharacter and PsychoBench. An import whose id is taken (by the user's file or by a bundled
//! character or scale) is refused unless `--replace` is given, and one that replaces says what.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::{CharacterImportArgs, ImportCommand, input_error};
use crate::catalog::{Catalog, Kind};
use crate::domain::character::Character;
use crate::domain::scale::Scale;
use crate::rpa::import::{self, Existing, Imported, Options, Replaced, ScaleFormat, ScaleOptions};

/// The import's options; a name given that shows nothing is refused as the option it is (not as the
/// file it would have been written to).
fn options(args: CharacterImportArgs) -> anyhow::Result<Options> {
    for (option, value) in [("--name", &args.name), ("--experimenter", &args.experimenter)] {
        if value.as_deref().is_some_and(|v| {
            v.chars()
                .all(|c| c.is_whitespace() || crate::text::shows_nothing(c) || crate::text::acts_on_terminal(c))
        }) {
            return Err(input_error(format!("{option} is empty (or shows nothing)")));
        }
    }
    Ok(Options {
        id: args.id,
        name: args.name,
        experimenter: args.experimenter,
        language: args.language,
        replace: args.replace,
        waiting: Some(waiting),
    })
}

/// Said when another import holds the data dir: the command then waits for it instead of looking hung.
fn waiting(data: &Path) {
    crate::note!("waiting for another import into {} to finish", data.display());
}

/// What holds a character id in the catalog.
fn character_holders<'c>(catalog: &'c Catalog, id: &str) -> Existing<'c, Character> {
    Existing {
        entry: catalog.character_by_id(id).map(|e| &e.value),
        files: catalog.user_files(Kind::Character, id),
        bundled: catalog.bundled_id(Kind::Character, id),
    }
}

/// What holds a scale id in the catalog.
fn scale_holders<'c>(catalog: &'c Catalog, id: &str) -> Existing<'c, Scale> {
    Existing {
        entry: catalog.scale(id),
        files: catalog.user_files(Kind::Scale, id),
        bundled: catalog.bundled_id(Kind::Scale, id),
    }
}

/// The line that says what an import replaced.
fn replaced_line(kind: Kind, replaced: &Replaced) -> String {
    match replaced {
        Replaced::User { path } => format!("replaced the {} file {}", kind.noun(), path.display()),
        Replaced::Bundled { id } => format!("replaced the bundled {} {id}: this user file overrides it", kind.noun()),
    }
}

fn print_character(imported: Imported, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    writeln!(
        out,
        "{}\n  character: {}\n  memories:  {} ({} chunk{})",
        imported.id,
        imported.character_file.display(),
        imported.memories_file.display(),
        imported.memories,
        if imported.memories == 1 { "" } else { "s" }
    )?;
    for line in &imported.report {
        writeln!(out, "  {line}")?;
    }
    if let Some(replaced) = &imported.replaced {
        writeln!(out, "  {}", replaced_line(Kind::Character, replaced))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn import(command: ImportCommand, catalog: &Catalog, data: &Path, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let failed = |e: import::ImportError| match e {
        import::ImportError::Invalid(message) => input_error(message.to_string()),
        // The file error itself, so that its kind decides the exit code.
        import::ImportError::Write(e) => anyhow::Error::new(e),
    };
    let characters = |id: &str| character_holders(catalog, id);
    match command {
        ImportCommand::Chatharuhi { path, character } => {
            let options = options(character)?;
            let imported = if path.is_dir() {
                import::chatharuhi_folder(&path, data, &options, |s| catalog.scale(s), characters)
            } else {
                import::chatharuhi_jsonl(&path, data, &options, |s| catalog.scale(s), characters)
            }
            .map_err(failed)?;
            print_character(imported, out)
        }
        ImportCommand::Rolebench {
            desc,
            profiles,
            role,
            character,
        } => {
            let imported = import::rolebench_profile(
                &desc,
                &profiles,
                &role,
                data,
                &options(character)?,
                |s| catalog.scale(s),
                characters,
            )
            .map_err(failed)?;
            print_character(imported, out)
        }
        ImportCommand::Card { file, character, json } => {
            let options = options(character)?;
            let imported =
                import::character_card(&file, data, &options, |s| catalog.scale(s), characters).map_err(failed)?;
            if json {
                let path = imported.character_file.display().to_string();
                let replaced = &imported.replaced;
                let value = serde_json::json!({"id": imported.id, "path": path, "replaced": replaced, "report": imported.report});
                writeln!(out, "{}", crate::text::json_for_terminal(&value.to_string()))?;
            } else {
                let memories = match imported.memories {
                    1 => "1 memory".to_string(),
                    n => format!("{n} memories"),
                };
                writeln!(
                    out,
                    "imported card \"{}\" as {} ({memories})\n  {}",
                    imported.name,
                    imported.id,
                    imported.character_file.display()
                )?;
                for line in &imported.report {
                    writeln!(out, "  {line}")?;
                }
                if let Some(replaced) = &imported.replaced {
                    writeln!(out, "  {}", replaced_line(Kind::Character, replaced))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ImportCommand::Scale {
            file,
            format,
            name,
            id,
            replace,
        } => {
            let format = match format.as_str() {
                "incharacter" => ScaleFormat::Incharacter,
                "psychobench" => ScaleFormat::Psychobench,
                other => return Err(input_error(format!("--format {other}: use incharacter or psychobench"))),
            };
            let options = ScaleOptions {
                name,
                id,
                replace,
                waiting: Some(waiting),
            };
            let imported = import::questionnaire(&file, format, data, &options, |id| scale_holders(catalog, id))
                .map_err(failed)?;
            writeln!(
                out,
                "{}\n  scale: {} ({} items, {} dimensions)",
                imported.id,
                imported.file.display(),
                imported.items,
                imported.dimensions
            )?;
            if !imported.filled.is_empty() {
                writeln!(out, "  filled by the importer, review: {}", imported.filled.join("; "))?;
            }
            if let Some(replaced) = &imported.replaced {
                writeln!(out, "  {}", replaced_line(Kind::Scale, replaced))?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
