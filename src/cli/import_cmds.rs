//! `incharacter import …`: characters from ChatHaruhi, RoleBench and character cards, scales from
//! InCharacter and PsychoBench.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::{CharacterImportArgs, ImportCommand, input_error};
use crate::catalog::Catalog;
use crate::rpa::import::{self, Imported, Options, ScaleFormat, ScaleOptions};
use crate::text::terminal_safe;

fn options(args: CharacterImportArgs) -> Options {
    Options {
        id: args.id,
        name: args.name,
        experimenter: args.experimenter,
        language: args.language,
    }
}

fn print_character(imported: Imported, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    writeln!(
        out,
        "{}\n  character: {}\n  memories:  {} ({} chunks)",
        imported.id,
        imported.character_file.display(),
        imported.memories_file.display(),
        imported.memories
    )?;
    Ok(ExitCode::SUCCESS)
}

pub fn import(command: ImportCommand, catalog: &Catalog, data: &Path, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let failed = |e: import::ImportError| match e {
        import::ImportError::Invalid(message) => input_error(terminal_safe(&message)),
        write @ import::ImportError::Write { .. } => anyhow::Error::new(write),
    };
    match command {
        ImportCommand::Chatharuhi { path, character } => {
            let options = options(character);
            let imported = if path.is_dir() {
                import::chatharuhi_folder(&path, data, &options, |s| catalog.scale(s), |c| catalog.character(c))
            } else {
                import::chatharuhi_jsonl(&path, data, &options, |s| catalog.scale(s), |c| catalog.character(c))
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
                &options(character),
                |s| catalog.scale(s),
                |c| catalog.character(c),
            )
            .map_err(failed)?;
            print_character(imported, out)
        }
        ImportCommand::Card { file, character, json } => {
            let options = options(character);
            let imported =
                import::character_card(&file, data, &options, |s| catalog.scale(s), |c| catalog.character(c))
                    .map_err(failed)?;
            if json {
                let path = imported.character_file.display().to_string();
                writeln!(out, "{}", serde_json::json!({"id": imported.id, "path": path}))?;
            } else {
                writeln!(
                    out,
                    "imported card \"{}\" as {} ({} memories)\n  {}",
                    terminal_safe(&imported.name),
                    imported.id,
                    imported.memories,
                    imported.character_file.display()
                )?;
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
            let options = ScaleOptions { name, id, replace };
            let imported = import::questionnaire(&file, format, data, &options, |id| catalog.scale(id).is_some())
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
            Ok(ExitCode::SUCCESS)
        }
    }
}
