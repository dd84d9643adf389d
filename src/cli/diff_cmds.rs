//! `diff`: one character in two interview sessions (e.g. before and after an edit of its
//! description): the dimension scores side by side, whether B moved toward the target, and the items
//! that moved most.

use std::io::Write;
use std::process::ExitCode;

use super::lookup::load_named;
use super::table::{Table, num};
use super::{Ctx, input_error};
use crate::analysis::diff::{self, Diff, DimensionDiff, ItemDiff, Reference};
use crate::domain::character::LabelSource;
use crate::study::short_version;

/// Items shown in the text output (`--json` has them all).
const MOST_MOVED: usize = 5;
/// Columns an answer takes on its line.
const ANSWER_WIDTH: usize = 100;

pub fn diff(
    ctx: &Ctx,
    (a, b): (&str, &str),
    character: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let catalog = ctx.catalog()?;
    let (a_id, a) = load_named(ctx, a)?;
    let (b_id, b) = load_named(ctx, b)?;
    // A character named as every command takes one (its name, an alias …); a name no character of
    // the catalog answers to is looked for as an id in the sessions (a character since removed),
    // and is unknown when they did not measure it either.
    let (character, unknown) = match character.map(|c| (c, catalog.named_character(c))) {
        None => (None, None),
        Some((_, Ok(found))) => (Some(found.id.clone()), None),
        Some((c, Err(several))) if several.is_empty() => (Some(c.to_string()), Some(c)),
        // Several answer to it: said by the lookup every command uses.
        Some((c, Err(_))) => (Some(super::lookup::character_id(&catalog, c)?), None),
    };
    let d = diff::diff((&a_id, &a), (&b_id, &b), &catalog, character.as_deref()).map_err(|e| match (unknown, &e) {
        (Some(c), diff::DiffError::NotMeasured { .. }) => input_error(format!(
            "unknown character \"{c}\": no character answers to it, and the sessions did not both measure one of that id"
        )),
        _ => input_error(e.to_string()),
    })?;
    if d.dimensions.is_empty() {
        return Err(input_error(format!(
            "{a_id} and {b_id} scored {} on no scale × method in common: nothing to diff",
            d.character
        )));
    }
    if json {
        writeln!(out, "{}", crate::text::json_pretty(&d)?)?;
    } else {
        write!(out, "{}", text(&d))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `text` on one line, at most `width` columns (an ellipsis says it was cut).
fn one_line(text: &str, width: usize) -> String {
    crate::text::fit(&text.split_whitespace().collect::<Vec<_>>().join(" "), width)
}

fn signed(x: Option<f64>) -> String {
    x.map_or("–".into(), |v| crate::text::decimals(v, 3, true))
}

fn version_line(letter: &str, side: &diff::Side) -> String {
    let version = side.version.as_deref().map_or("version not recorded".to_string(), |v| {
        format!("version {}", short_version(v))
    });
    let later = if side.later_versions.is_empty() {
        String::new()
    } else {
        let list: Vec<&str> = side.later_versions.iter().map(|v| short_version(v)).collect();
        format!(" (then {} after a resume)", list.join(", "))
    };
    format!("{letter}  {}  {version}{later}\n", side.session)
}

fn reference_cell(d: &DimensionDiff) -> String {
    let Some((reference, source)) = d.reference.zip(d.label_source) else {
        return "–".into();
    };
    let value = match reference {
        Reference::Score(x) => num(Some(x)),
        letter => letter.to_string(),
    };
    match source {
        LabelSource::Target => value,
        other => format!("{value} ({})", other.name()),
    }
}

/// `toward` the reference, `away` from it, or as far as before (`same`, which JSON counts as not
/// toward).
fn direction(d: &DimensionDiff) -> &'static str {
    match d.closer_by {
        Some(c) if c > diff::EQUAL => "toward",
        Some(c) if c < -diff::EQUAL => "away",
        Some(_) => "same",
        None => "–",
    }
}

fn item_lines(i: &ItemDiff) -> String {
    let score = |s: Option<f64>| {
        s.map_or(String::new(), |s| {
            format!(
                " ({})",
                crate::text::decimals(s, 3, false)
                    .trim_end_matches('0')
                    .trim_end_matches('.')
            )
        })
    };
    let answer = |a: &Option<String>| a.as_deref().map_or("(no answer)".into(), |a| one_line(a, ANSWER_WIDTH));
    let change = i
        .change
        .map_or(String::new(), |c| format!(" (Δ {})", crate::text::decimals(c, 3, true)));
    format!(
        "{} {} {} #{}{change}: {}\n  A{}: {}\n  B{}: {}\n",
        i.scale,
        i.method.name(),
        i.dimension,
        i.item_id,
        one_line(&i.question, ANSWER_WIDTH),
        score(i.a_score),
        answer(&i.a_answer),
        score(i.b_score),
        answer(&i.b_answer)
    )
}

/// The diff as tables: one per scale × method, then the items that moved most.
fn text(d: &Diff) -> String {
    let mut s = format!("character {}\n", d.character);
    s += &version_line("A", &d.a);
    s += &version_line("B", &d.b);
    if !d.setup.is_empty() {
        s += "asked or judged otherwise (what moved may be their doing, not the character's):
";
        let mut t = Table::new(&["", "A", "B"]);
        for x in &d.setup {
            t.row(vec![x.what.clone(), x.a.clone(), x.b.clone()]);
        }
        s += &t.render();
    }
    let mut groups: Vec<((&str, crate::method::Method), Vec<&DimensionDiff>)> = Vec::new();
    for row in &d.dimensions {
        match groups.last_mut() {
            Some((key, rows)) if *key == (row.scale.as_str(), row.method) => rows.push(row),
            _ => groups.push(((row.scale.as_str(), row.method), vec![row])),
        }
    }
    for ((scale, method), rows) in groups {
        let mut t = Table::new(&["dimension", ">A", ">B", ">Δ", "target", "", "B on it"]);
        for r in rows {
            t.row(vec![
                r.dimension.to_string(),
                num(r.a),
                num(r.b),
                signed(r.delta),
                reference_cell(r),
                direction(r).into(),
                r.on_text(),
            ]);
        }
        s += &format!("\n{} {}\n{}", scale, method.name(), t.render());
    }
    // Items whose score changed (by more than rounding): a session against itself has none.
    let moved: Vec<&ItemDiff> = d
        .items
        .iter()
        .filter(|i| i.change.is_some_and(|c| c.abs() > diff::EQUAL))
        .take(MOST_MOVED)
        .collect();
    if !moved.is_empty() {
        s += "\nitems that moved most\n";
        for i in moved {
            s += &item_lines(i);
        }
    } else if d.items.iter().any(|i| i.change.is_some()) {
        s += "\nno item's score moved\n";
    } else {
        // Expert ratings score whole dimensions: show the first answers that differ instead.
        let differ: Vec<&ItemDiff> = d
            .items
            .iter()
            .filter(|i| i.a_answer != i.b_answer)
            .take(MOST_MOVED)
            .collect();
        if !differ.is_empty() {
            s += "\nanswers that differ (no item scores: the methods rate whole dimensions; --json lists every item)\n";
            for i in differ {
                s += &item_lines(i);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn answers_are_cut_to_one_line() {
        assert_eq!(one_line("a\n b  c", 20), "a b c");
        assert_eq!(one_line("abcdefgh", 5), "abcd…");
        assert_eq!(one_line("abcde", 5), "abcde");
        assert_eq!(one_line("钟离钟离", 5), "钟离…");
    }
}
