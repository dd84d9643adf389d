//! `export-card`: any character as a Character Card V2, JSON or inside a PNG.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use base64::Engine as _;

use super::catalog_cmds::find_character;
use super::input_error;
use crate::catalog::Catalog;
use crate::rpa::card::{self, png};
use crate::rpa::memories;

/// Writes `character` as a V2 card: to stdout, or to `output` (`.json`, or `.png` with the card
/// base64-encoded in a `chara` chunk). The memories come from the data dir, where it has any.
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
    let card = card::export(c, &chunks);
    let Some(path) = output else {
        writeln!(out, "{}", serde_json::to_string_pretty(&card)?)?;
        return Ok(ExitCode::SUCCESS);
    };
    let bytes = if png {
        let text = base64::engine::general_purpose::STANDARD.encode(card.to_string());
        png::with_text("chara", &text)?
    } else {
        format!("{}\n", serde_json::to_string_pretty(&card)?).into_bytes()
    };
    crate::files::write_atomic(path, &bytes)?;
    writeln!(out, "wrote {}", path.display())?;
    Ok(ExitCode::SUCCESS)
}
