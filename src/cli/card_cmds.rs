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
        let text = crate::text::json_pretty(&card)?;
        writeln!(out, "{text}")?;
        if let Some(over) = past_import(&card, false, text.len() + 1) {
            crate::note!("note: {over}: `import card` will not read it back (other tools may)");
        }
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
    if let Some(over) = past_import(&card, png, bytes.len()) {
        crate::note!("note: {over}: `import card` will not read this file back (other tools may)");
    }
    Ok(ExitCode::SUCCESS)
}

/// What makes a written card larger than `import card` reads, if anything: its JSON, a PNG's card
/// chunk, or the PNG file.
fn past_import(card: &serde_json::Value, png: bool, written: usize) -> Option<String> {
    let over = |what: &str, bytes: usize, limit: u64| {
        (bytes as u64 > limit).then(|| format!("{what} is {bytes} bytes, more than the {}", crate::files::size(limit)))
    };
    let json = if png { card.to_string().len() } else { written };
    over("the card's JSON", json, card::MAX_JSON as u64)
        .or_else(|| {
            let chunk = card::png_texts(card)
                .into_iter()
                .map(|(_, text)| text.len())
                .max()
                .unwrap_or(0);
            png.then(|| over("the PNG's card chunk", chunk, png::MAX_TEXT as u64))
                .flatten()
        })
        .or_else(|| png.then(|| over("the PNG", written, card::MAX_PNG)).flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_larger_than_an_import_reads_is_said() {
        let card = |len: usize| serde_json::json!({"spec": "chara_card_v2", "data": {"name": "A", "description": "x".repeat(len)}});
        assert_eq!(past_import(&card(100), false, 150), None);
        let big = card(card::MAX_JSON);
        let said = past_import(&big, false, big.to_string().len()).unwrap();
        assert!(
            said.starts_with("the card's JSON is ") && said.ends_with("more than the 2 MiB"),
            "{said}"
        );
        assert!(past_import(&big, true, 100).unwrap().starts_with("the card's JSON"));
        let said = past_import(&card(100), true, (card::MAX_PNG + 1) as usize).unwrap();
        assert!(said.starts_with("the PNG is ") && said.ends_with("16 MiB"), "{said}");
    }
}
