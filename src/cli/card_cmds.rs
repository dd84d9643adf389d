//! `export-card`: any character as a character card, JSON or inside a PNG. A character imported from a
//! card comes back as that card (its version, every field, its PNG image), with what was edited since
//! written into it; any other character as a V2 card whose description is the whole prompt (see
//! [`crate::rpa::card`]).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::catalog_cmds::find_character;
use super::input_error;
use crate::catalog::Catalog;
use crate::rpa::card::{self, png};
use crate::rpa::memories;

/// Writes `character` as a card: to stdout, or to `output` (`.json`, or `.png` with the card
/// base64-encoded in a `chara` chunk, and a V3 card also in a `ccv3` chunk). The memories and the card
/// an import kept come from the data dir, where it has any.
pub fn export_card(
    catalog: &Catalog,
    data: Option<&Path>,
    character: &str,
    output: Option<&Path>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let c = find_character(catalog, character)?;
    let png = match output.map(|p| p.extension().map(|x| x.to_ascii_lowercase())) {
        None => false,
        Some(Some(x)) if x == "json" => false,
        Some(Some(x)) if x == "png" => true,
        Some(_) => return Err(input_error("-o: name a .json or a .png file")),
    };
    let chunks = match data {
        Some(data) => memories::chunks(data, &c.id).map_err(input_error)?.unwrap_or_default(),
        None => Vec::new(),
    };
    let stored = match data {
        Some(data) => card::stored(data, &c.id).map_err(input_error)?,
        None => None,
    };
    // A card has no way to quote its own markers: a memory holding one reads back otherwise.
    for (i, chunk) in chunks.iter().enumerate() {
        let lower = chunk.to_ascii_lowercase();
        if let Some(marker) = ["<start>", "{{user}}", "{{char}}", "<user>", "<bot>"]
            .into_iter()
            .find(|m| lower.contains(m))
        {
            crate::note!(
                "note: memory {} holds {marker}, which a card reads as {}: it will not import back as it is",
                i + 1,
                if marker == "<start>" {
                    "the start of another example"
                } else {
                    "a name"
                }
            );
        }
    }
    let card = match &stored {
        Some(stored) => card::export_stored(&stored.card, c, &chunks),
        None => card::export(c, &chunks),
    };
    let Some(path) = output else {
        writeln!(out, "{}", crate::text::json_pretty(&card)?)?;
        return Ok(ExitCode::SUCCESS);
    };
    let bytes = if png {
        let texts = card::png_texts(&card);
        match stored.as_ref().and_then(|s| s.png.as_deref()) {
            Some(image) => png::with_card(image, &texts).map_err(input_error)?,
            None => png::with_texts(&texts)?,
        }
    } else {
        format!("{}\n", crate::text::json_pretty(&card)?).into_bytes()
    };
    crate::files::write_output(path, &bytes, &crate::session::store::kept())?;
    writeln!(out, "wrote {}", path.display())?;
    Ok(ExitCode::SUCCESS)
}
