//! `judges`: several assessments of the same interviews compared (agreement per pair of sessions,
//! sensitivity per scale, accuracy of each against the labels).

use std::io::Write;
use std::process::ExitCode;

use super::lookup::load_named;
use super::table::{Table, num};
use super::{Ctx, input_error};
use crate::analysis::judges::{self, Judges};
use crate::study::Event;

pub fn judges(ctx: &Ctx, ids: &[String], json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let catalog = ctx.catalog()?;
    let loaded = ids
        .iter()
        .map(|id| load_named(ctx, id))
        .collect::<anyhow::Result<Vec<(String, Vec<Event>)>>>()?;
    let sessions: Vec<(&str, &[Event])> = loaded.iter().map(|(n, e)| (n.as_str(), e.as_slice())).collect();
    let report = judges::compare(&sessions, &catalog).map_err(|e| input_error(e.to_string()))?;
    if json {
        writeln!(out, "{}", crate::text::json_pretty(&report.to_json())?)?;
    } else {
        write!(out, "{}", tables(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The letter a session goes by in the tables: A, B, … Z, then 27, 28, ….
fn letter(i: usize) -> String {
    u8::try_from(i)
        .ok()
        .filter(|&i| i < 26)
        .map_or_else(|| (i + 1).to_string(), |i| char::from(b'A' + i).to_string())
}

/// The sessions (by letter), the pairs, the scales' sensitivity and each session's accuracy.
pub fn tables(j: &Judges) -> String {
    let by_id = |id: &str| {
        j.sessions
            .iter()
            .position(|s| s.id == id)
            .map_or_else(|| id.to_string(), letter)
    };
    let mut s = Table::new(&["", "session", "name", "judge", ">judge T", "interviews of"]);
    for (i, x) in j.sessions.iter().enumerate() {
        s.row(vec![
            letter(i),
            x.id.to_string(),
            x.name.as_deref().unwrap_or("").to_string(),
            x.judge.as_deref().unwrap_or("?").to_string(),
            x.judge_temperature.to_string(),
            x.parent.as_deref().unwrap_or("(its own)").to_string(),
        ]);
    }
    let mut p = Table::new(&["a", "b", "method", ">n", ">Pearson", ">Spearman", ">mean |Δ|"]);
    for x in &j.pairs {
        p.row(vec![
            by_id(&x.a),
            by_id(&x.b),
            x.method.name().into(),
            x.n.to_string(),
            num(x.pearson),
            num(x.spearman),
            num(x.mean_abs_diff),
        ]);
    }
    let mut sens = Table::new(&["scale", ">sensitivity", ">n"]);
    for (scale, x) in &j.scales {
        sens.row(vec![scale.to_string(), num(x.sensitivity), x.n.to_string()]);
    }
    let mut acc = Table::new(&["session", "scale", "method", ">Acc_Dim", ">MAE", ">pairs"]);
    for x in &j.summary {
        acc.row(vec![
            by_id(&x.session),
            x.scale.to_string(),
            x.method.to_string(),
            num(x.acc_dim),
            num(x.mae),
            x.count.to_string(),
        ]);
    }
    format!(
        "{}\nagreement per pair of sessions (scores on 0–1)\n{}\nsensitivity per scale (mean sd across sessions, 0–1)\n{}\naccuracy against the labels\n{}",
        s.render(),
        p.render(),
        sens.render(),
        acc.render()
    )
}

#[cfg(test)]
mod tests {
    use super::letter;

    #[test]
    fn sessions_go_by_letters_then_numbers() {
        assert_eq!([letter(0), letter(25), letter(26)], ["A", "Z", "27"]);
    }
}
