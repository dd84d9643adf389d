//! `scales`, `characters` and `validate`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::input_error;
use super::table::{Table, num};
use crate::catalog::{Catalog, Kind};
use crate::domain::character::{Character, LabelSource};
use crate::domain::scale::{ItemRole, Scale};

pub fn list_scales(catalog: &Catalog, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if json {
        let list: Vec<_> = catalog
            .scales
            .iter()
            .map(|e| {
                let s = &e.value;
                json!({
                    "id": s.id,
                    "name": s.name,
                    "items": s.items.len(),
                    "scored_items": s.scored_items().count(),
                    "dimensions": s.dimensions.iter().map(|d| &d.name).collect::<Vec<_>>(),
                    "range": [s.range.min, s.range.max],
                    "origin": e.origin,
                })
            })
            .collect();
        writeln!(out, "{}", crate::text::json_pretty(&list)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&["id", "name", ">items", ">scored", ">dims", "range", "origin"]);
    for e in &catalog.scales {
        let s = &e.value;
        t.row(vec![
            s.id.to_string(),
            s.name.to_string(),
            s.items.len().to_string(),
            s.scored_items().count().to_string(),
            s.dimensions.len().to_string(),
            format!("{}–{}", s.range.min, s.range.max),
            e.origin.describe().to_string(),
        ]);
    }
    write!(out, "{}", t.render())?;
    Ok(ExitCode::SUCCESS)
}

/// Why an id the user's files hold is not in the catalog: several of them hold it.
fn refused(catalog: &Catalog, kind: Kind, id: &str) -> Option<anyhow::Error> {
    let d = catalog
        .duplicates
        .iter()
        .find(|d| d.kind == kind && d.id.eq_ignore_ascii_case(id.trim()))?;
    let files: Vec<String> = d.files.iter().map(|f| f.display().to_string()).collect();
    Some(input_error(format!(
        "{} \"{}\" is not used: {} files hold its id ({}); give all but one of them another id",
        kind.noun(),
        d.id,
        files.len(),
        files.join(", ")
    )))
}

fn find_scale<'a>(catalog: &'a Catalog, id: &str) -> anyhow::Result<&'a Scale> {
    if let (None, Some(e)) = (catalog.scale(id), refused(catalog, Kind::Scale, id)) {
        return Err(e);
    }
    catalog.scale(id).ok_or_else(|| {
        let ids: Vec<&str> = catalog.scales.iter().map(|e| e.value.id.as_str()).collect();
        input_error(format!("unknown scale \"{}\"; known scales: {}", id, ids.join(", ")))
    })
}

pub(super) fn find_character<'a>(catalog: &'a Catalog, id: &str) -> anyhow::Result<&'a Character> {
    if let (None, Some(e)) = (catalog.character(id), refused(catalog, Kind::Character, id)) {
        return Err(e);
    }
    let id = super::lookup::character_id(catalog, id)?;
    catalog
        .character_by_id(&id)
        .map(|e| &e.value)
        .ok_or_else(|| input_error(format!("unknown character \"{id}\"")))
}

pub fn show_scale(catalog: &Catalog, id: &str, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let scale = find_scale(catalog, id)?;
    if json {
        writeln!(out, "{}", crate::text::json_pretty(scale)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let origin = catalog.scale_entry(id).map(|e| e.origin.describe()).unwrap_or_default();
    writeln!(out, "{} — {} ({})", scale.id, scale.name, scale.name_zh)?;
    writeln!(out, "citation: {}", scale.citation)?;
    writeln!(out, "origin:   {}", origin)?;
    let options: Vec<String> = scale
        .options
        .en
        .iter()
        .enumerate()
        .map(|(i, o)| format!("{} = {}", scale.range.min + i as i32, o))
        .collect();
    writeln!(
        out,
        "range:    {}–{}: {}",
        scale.range.min,
        scale.range.max,
        options.join(", ")
    )?;
    if scale.is_pole_percent() {
        writeln!(out, "scores:   % of each dimension's first pole (0–100)")?;
    }
    writeln!(out, "self-report: {}", scale.self_report_stem.en)?;
    writeln!(out)?;
    let mut dims = Table::new(&["dimension", "中文", ">items", ">reverse", "low … high"]);
    for (index, d) in scale.dimensions.iter().enumerate() {
        let items: Vec<_> = scale.items_of(index).collect();
        let reverse = items
            .iter()
            .filter(|i| i.keying().is_some_and(|k| !k.is_positive()))
            .count();
        dims.row(vec![
            d.name.to_string(),
            d.name_zh.to_string(),
            items.len().to_string(),
            reverse.to_string(),
            format!("{} … {}", d.low.en, d.high.en),
        ]);
    }
    write!(out, "{}", dims.render())?;
    writeln!(out)?;
    let mut items = Table::new(&[">id", "dimension", "keying", "statement", "interview question"]);
    for item in &scale.items {
        let (dimension, keying) = match &item.role {
            ItemRole::Scored { dimension, keying } => {
                (scale.dimensions[*dimension].name.clone(), keying.as_str().to_string())
            }
            ItemRole::Filler => ("(filler)".to_string(), String::new()),
        };
        items.row(vec![
            item.id.to_string(),
            dimension.to_string(),
            keying,
            item.statement.en.to_string(),
            item.question.en.to_string(),
        ]);
    }
    write!(out, "{}", items.render())?;
    Ok(ExitCode::SUCCESS)
}

/// `{pdb: {scale: {dim: {score, type}}}, annotation: {…}}`.
fn labels_json(c: &Character) -> serde_json::Value {
    json!({ "pdb": c.labels.pdb, "annotation": c.labels.annotation, "target": c.labels.target })
}

pub fn list_characters(catalog: &Catalog, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if json {
        let list: Vec<_> = catalog
            .characters
            .iter()
            .map(|e| {
                let c = &e.value;
                json!({
                    "id": c.id,
                    "name": c.name,
                    "aliases": c.aliases,
                    "language": c.language,
                    "experimenter": c.experimenter,
                    "work": c.work,
                    "reference_id": c.reference_id,
                    "labels": labels_json(c),
                    "origin": e.origin,
                })
            })
            .collect();
        writeln!(out, "{}", crate::text::json_pretty(&list)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let bfi = catalog.scale("BFI");
    let p16 = catalog.scale("16Personalities");
    let mut t = Table::new(&["id", "name", "lang", "experimenter", "BFI", "16P", "work"]);
    for e in &catalog.characters {
        let c = &e.value;
        let code = |scale: Option<&Scale>| {
            scale
                .and_then(|s| c.code(s, c.labels.exclusion_source(&s.id)))
                .unwrap_or_else(|| "–".into())
        };
        t.row(vec![
            c.id.to_string(),
            c.name.to_string(),
            c.language.code().into(),
            c.experimenter.to_string(),
            code(bfi),
            code(p16),
            c.work.to_string(),
        ]);
    }
    write!(out, "{}", t.render())?;
    Ok(ExitCode::SUCCESS)
}

pub fn show_character(catalog: &Catalog, id: &str, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let c = find_character(catalog, id)?;
    if json {
        writeln!(out, "{}", crate::text::json_pretty(c)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let origin = catalog
        .character_by_id(&c.id)
        .map(|e| e.origin.describe())
        .unwrap_or_default();
    writeln!(out, "{} ({}) — {}", c.name, c.id, c.work)?;
    writeln!(out, "aliases:      {}", c.aliases.join(", "))?;
    writeln!(out, "language:     {}", c.language.code())?;
    writeln!(out, "experimenter: {}", c.experimenter)?;
    writeln!(out, "origin:       {}", origin)?;
    writeln!(out, "\n{}", c.description.trim())?;
    if !c.catchphrases.is_empty() {
        writeln!(out, "\ncatchphrases:")?;
        for line in &c.catchphrases {
            writeln!(out, "  “{}”", line)?;
        }
    }
    for source in LabelSource::ALL {
        let set = c.labels.source(source);
        if set.is_empty() {
            continue;
        }
        let title = match source {
            LabelSource::Pdb => "labels from the Personality Database (pdb)",
            LabelSource::Annotation => "labels from expert annotation",
            LabelSource::Target => "targets: the personality the author meant",
        };
        writeln!(out, "\n{title}:")?;
        let mut t = Table::new(&["scale", "code", "dimension", ">score", "type"]);
        for entry in &catalog.scales {
            let scale = &entry.value;
            let Some(dims) = set.get(&scale.id) else { continue };
            // A type code reads well for a handful of dimensions; CABIN's 41 letters would not.
            let code = c
                .code(scale, source)
                .filter(|code| code.chars().count() <= 8)
                .unwrap_or_default();
            let mut first = true;
            for d in &scale.dimensions {
                let Some(label) = dims.get(&d.name) else { continue };
                t.row(vec![
                    if first { scale.id.to_string() } else { String::new() },
                    if first { code.clone() } else { String::new() },
                    d.name.to_string(),
                    // A letter target has no score; an unknown label is X.
                    match (label.score, label.kind) {
                        (Some(s), _) => num(Some(s)),
                        (None, crate::domain::character::LabelType::X) => "X".into(),
                        (None, _) => "–".into(),
                    },
                    format!("{:?}", label.kind),
                ]);
                first = false;
            }
        }
        write!(out, "{}", t.render())?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn validate(catalog: &Catalog, paths: &[PathBuf], out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let result = catalog.validate_files(paths);
    for error in &result.errors {
        // What the file holds that would act on the terminal is shown escaped (a name with a
        // bidirectional override in it reads as the name it is, not as another), as skipped files are.
        writeln!(out, "{}", crate::text::visible(&error.to_string()))?;
    }
    if result.errors.is_empty() && result.checked == 0 {
        // Nothing was checked: a mistyped folder, or one of other files, is not "valid".
        return Err(input_error(format!(
            "no scale or character file (.toml) in {}: nothing checked",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if result.errors.is_empty() {
        writeln!(out, "{} file(s) valid", result.checked)?;
        Ok(ExitCode::SUCCESS)
    } else {
        writeln!(out, "{} error(s) in {} path(s)", result.errors.len(), paths.len())?;
        Ok(ExitCode::from(2))
    }
}
