//! `report`: the summary tables of sessions side by side (md, JSON, LaTeX), every headline figure with
//! its 95% bootstrap interval over characters.

use std::io::Write;
use std::process::ExitCode;

use serde_json::json;

use super::lookup::load_found;
use super::table::num;
use super::{Ctx, input_error};
use crate::analysis::targets::TargetCheck;
use crate::domain::resample::Bootstrap;
use crate::study::Event;
use crate::study::Study;
use crate::study::interview::results;

/// Summary tables of one or more sessions, recomputed from their journals, side by side.
/// Each session given, by its folder's name however it was given (an id, a folder, a journal's
/// path), with its folder and records; a folder given twice is refused.
fn each_once(ctx: &Ctx, ids: &[String]) -> anyhow::Result<Vec<(String, std::path::PathBuf, Vec<Event>)>> {
    let mut found: Vec<(String, std::path::PathBuf, Vec<Event>)> = Vec::new();
    for given in ids {
        let (id, dir, events) = load_found(ctx, given)?;
        // The same folder twice (two folders of one name, in two data dirs, are two sessions).
        let same = |other: &std::path::Path| std::fs::canonicalize(other).ok() == std::fs::canonicalize(&dir).ok();
        if found.iter().any(|(_, other, _)| same(other)) {
            return Err(input_error(format!("session {id} is given more than once")));
        }
        found.push((id, dir, events));
    }
    Ok(found)
}

pub fn report(
    ctx: &Ctx,
    ids: &[String],
    format: &str,
    labels: Option<crate::domain::character::LabelSource>,
    bootstrap: Bootstrap,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let catalog = &*ctx.catalog()?;
    if !matches!(format, "md" | "json" | "latex") {
        return Err(input_error(format!("unknown format \"{}\" (md, json, latex)", format)));
    }
    let mut sessions = Vec::new();
    let mut observer_sessions = Vec::new();
    let mut rolebench_sessions = Vec::new();
    let mut adapted: Vec<(String, Vec<String>)> = Vec::new();
    // Against the targets: each session's dimensions on target or not.
    let mut targets: Vec<Vec<TargetCheck>> = Vec::new();
    let against_targets = labels == Some(crate::domain::character::LabelSource::Target);
    let mut unscorable: Vec<String> = Vec::new();
    for (id, dir, events) in each_once(ctx, ids)? {
        let id = &id;
        if let Some((_, items)) = crate::study::rolebench::items(&events) {
            rolebench_sessions.push((id.clone(), crate::study::rolebench::totals(&items)));
            continue;
        }
        if let Some((plan, subjects)) = crate::study::observe::subjects(&events, catalog) {
            let scale = catalog
                .scale(crate::observer::SCALE)
                .ok_or_else(|| input_error("the IPIP-50 scale is missing"))?;
            let stats = crate::observer::report::statistics(&subjects, scale, plan.seed);
            let human = super::annotation_cmds::human_ratings(&dir, catalog, &events, &plan, &subjects, scale)?;
            let notes = super::observe_cmds::questionnaire_notes(&events);
            observer_sessions.push((id.clone(), subjects, stats, human, notes));
            continue;
        }
        // (A scale the catalog lacks is said by the session's loading; none of them: nothing to
        // report of that session.)
        if let Some(plan) = crate::study::interview::Interviews::plan_of(&events)
            && !plan.scales.is_empty()
            && plan.scales.iter().all(|s| catalog.scale(s).is_none())
        {
            unscorable.push(format!(
                "session {id} measured {}, which the catalog no longer has (a file removed, or one that fails \
                 `incharacter validate`)",
                plan.scales.join(", ")
            ));
            continue;
        }
        let providers = events.iter().find_map(|e| match e {
            Event::RunStarted { providers, .. } => Some(providers.clone()),
            _ => None,
        });
        let label = |role: &str| {
            providers
                .as_ref()
                .and_then(|p| p.get(role))
                .map_or("?".to_string(), |m| m.model.clone())
        };
        sessions.push((
            id.clone(),
            label("rpa"),
            label("judge"),
            results::summary_with(&events, catalog, labels, Some(bootstrap)),
        ));
        adapted.push((id.clone(), crate::study::adaptation_lines(&events)));
        targets.push(crate::analysis::targets::checks(&events, catalog));
    }
    if sessions.is_empty() && observer_sessions.is_empty() && rolebench_sessions.is_empty() && !unscorable.is_empty() {
        return Err(input_error(format!("{}: nothing to report", unscorable.join("; "))));
    }
    for why in &unscorable {
        crate::note!("note: {why}: left out of the report");
    }
    match format {
        "json" => {
            let list: Vec<_> = sessions
                .iter()
                .zip(&adapted)
                .zip(&targets)
                .map(|((row, (_, adapted)), targets)| interview_entry(row, adapted, targets, labels, bootstrap))
                .chain(
                    observer_sessions
                        .iter()
                        .map(|(id, _, stats, human, (_, notes))| observer_entry(id, stats, human.as_ref(), notes)),
                )
                .chain(
                    rolebench_sessions
                        .iter()
                        .map(|(id, totals)| json!({"session": id, "kind": "rolebench", "summary": totals})),
                )
                .collect();
            writeln!(out, "{}", crate::text::json_pretty(&list)?)?;
        }
        "latex" if sessions.is_empty() => {
            return Err(input_error(
                "--format latex writes the interview table (the paper's Table 2), and none of these is an interview \
                 session: use md or json",
            ));
        }
        "latex" => write!(out, "{}", latex(&sessions, labels, bootstrap))?,
        _ => {
            for (id, totals) in &rolebench_sessions {
                writeln!(out, "## {id} (RoleBench)\n\n```text")?;
                write!(out, "{}", super::rolebench_cmds::tables(totals))?;
                writeln!(out, "```\n")?;
            }
            for (id, subjects, stats, _, (notes, _)) in &observer_sessions {
                writeln!(out, "## {id} (observers)\n\n```text")?;
                write!(out, "{}", crate::observer::report::tables(subjects, stats))?;
                write!(out, "{notes}")?;
                writeln!(out, "```\n")?;
            }
            let rated: Vec<(&str, &_)> = observer_sessions
                .iter()
                .filter_map(|(id, _, _, human, _)| Some((id.as_str(), human.as_ref()?)))
                .collect();
            if !rated.is_empty() {
                writeln!(out, "## Human ratings of the subjects (Tables 3 and 4)\n\n```text")?;
                write!(out, "{}", super::annotation_cmds::human_ratings_table(&rated))?;
                writeln!(out, "```\n")?;
            }
            if sessions.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(source) = labels {
                writeln!(out, "Against the {} labels.\n", source.name())?;
            }
            writeln!(out, "{}\n", interval_note(bootstrap))?;
            write!(out, "{}", summary_table(&sessions))?;
            if against_targets {
                write!(out, "{}", on_target_table(&sessions, &targets, catalog))?;
            }
            for (id, lines) in adapted.iter().filter(|(_, l)| !l.is_empty()) {
                writeln!(
                    out,
                    "\n{id} was adapted to its providers (it changes what the method did):"
                )?;
                for line in lines {
                    writeln!(out, "- {}", line)?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An interview session in `report --format json`: its summary, what it adapted, the labels and,
/// against the targets, each dimension on target or not.
fn interview_entry(
    (id, rpa, judge, summary): &Row,
    adapted: &[String],
    targets: &[TargetCheck],
    labels: Option<crate::domain::character::LabelSource>,
    bootstrap: Bootstrap,
) -> serde_json::Value {
    let mut entry = json!({"session": id, "rpa": rpa, "judge": judge, "summary": summary,
                           "adapted": adapted, "bootstrap": bootstrap});
    if let Some(source) = labels {
        entry["labels"] = json!(source.name());
        if source == crate::domain::character::LabelSource::Target {
            entry["on_target"] = json!(targets);
        }
    }
    entry
}

/// The sessions' summary rows as one Markdown table (every cell kept in its column).
/// An observer session's entry in `report --format json`: its statistics, what its tables alone do
/// not say (`failed`, `left_out`, `reasked`), and its human ratings if any.
fn observer_entry(
    id: &str,
    stats: &crate::observer::report::Statistics,
    human: Option<&super::annotation_cmds::HumanRatings>,
    notes: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    let mut entry = serde_json::Value::Object(notes.clone());
    entry["session"] = json!(id);
    entry["kind"] = json!("observers");
    entry["statistics"] = json!(stats);
    if let Some(h) = human {
        entry["human_ratings"] = h.to_json();
    }
    entry
}

fn summary_table(sessions: &[Row]) -> String {
    use crate::text::md_cell as md;
    let mut t = String::from(
        "| session | rpa | judge | scale | method | Acc_Dim | Acc_Full | MAE | Std_Item | Std_Dim | Std_Score | refusals | failed |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (id, rpa, judge, summary) in sessions {
        for r in summary {
            t.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                md(id),
                md(rpa),
                md(judge),
                md(&r.scale),
                r.method,
                cell(r, r.acc_dim, |i| Some(i.acc_dim)),
                cell(r, r.acc_full, |i| Some(i.acc_full)),
                cell(r, r.mae, |i| Some(i.mae)),
                cell(r, r.std_item, |i| i.std_item),
                cell(r, r.std_dim, |i| i.std_dim),
                cell(r, r.std_score, |i| i.std_score),
                r.refusals,
                r.failed_cell()
            ));
        }
    }
    t
}

/// Per session × character × scale × method, how many measured dimensions are on target and how far
/// outside each of the others is.
fn on_target_table(sessions: &[Row], targets: &[Vec<TargetCheck>], catalog: &crate::catalog::Catalog) -> String {
    use crate::text::md_cell;
    let mut t = String::from(
        "\nOn target (a letter target is its band: H the top 40% of the range, L the bottom 40%; a number, \
         within a tenth of the range):\n\n| session | character | scale | method | on target | off target, by how much |\n\
         |---|---|---|---|---|---|\n",
    );
    for ((id, ..), checks) in sessions.iter().zip(targets) {
        if checks.is_empty() {
            t.push_str(&format!(
                "| {} | – | – | – | no targets for what it measured | |\n",
                md_cell(id)
            ));
            continue;
        }
        let mut groups: Vec<&[TargetCheck]> = Vec::new();
        let mut rest = checks.as_slice();
        while let Some(first) = rest.first() {
            let n = rest
                .iter()
                .take_while(|c| (&c.character, &c.scale, c.method) == (&first.character, &first.scale, first.method))
                .count();
            groups.push(&rest[..n]);
            rest = &rest[n..];
        }
        for group in groups {
            let first = &group[0];
            let range = catalog.scale(&first.scale).map_or((1.0, 5.0), |s| s.dimension_range());
            let off: Vec<String> = group
                .iter()
                .filter(|c| !c.on)
                .map(|c| {
                    format!(
                        "{} {:.2} vs {} ({:.2} {})",
                        c.dimension,
                        c.measured,
                        c.target,
                        c.off_by,
                        crate::analysis::targets::side(c, range)
                    )
                })
                .collect();
            t.push_str(&format!(
                "| {} | {} | {} | {} | {} of {} | {} |\n",
                md_cell(id),
                md_cell(&first.character),
                md_cell(&first.scale),
                first.method.name(),
                group.iter().filter(|c| c.on).count(),
                group.len(),
                if off.is_empty() {
                    "–".to_string()
                } else {
                    md_cell(&off.join(" · "))
                }
            ));
        }
    }
    t
}

/// What the intervals are, said once above a table.
fn interval_note(b: Bootstrap) -> String {
    format!(
        "[lo, hi]: 95% percentile bootstrap interval over characters ({} resamples, seed {}); [–]: one character, no interval.",
        b.resamples, b.seed
    )
}

/// A figure with its interval where the row has one.
fn cell(
    row: &results::SummaryRow,
    value: Option<f64>,
    of: impl Fn(&results::Intervals) -> Option<results::Interval>,
) -> String {
    match row.intervals.as_ref().and_then(of) {
        Some(i) => i.cell(),
        None => num(value),
    }
}

/// `text` with LaTeX's special characters escaped, and those the default (OT1) font encoding draws
/// as other glyphs (`<` as ¡, `>` as ¿, `|` as a dash, `"` as a closing quote) written by name.
fn tex(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\textbackslash{}"),
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            '~' => out.push_str("\\textasciitilde{}"),
            '^' => out.push_str("\\textasciicircum{}"),
            '<' => out.push_str("\\textless{}"),
            '>' => out.push_str("\\textgreater{}"),
            '|' => out.push_str("\\textbar{}"),
            '"' => out.push_str("{\\ttfamily\\char34}"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A LaTeX cell: the value, then its interval in small type.
fn tex_cell(i: Option<results::Interval>, value: Option<f64>) -> String {
    match (i.and_then(|i| i.value.zip(i.ci)), value) {
        (Some((v, [lo, hi])), _) => format!("{v:.3} {{\\scriptsize[{lo:.3}, {hi:.3}]}}"),
        (None, Some(v)) => format!("{v:.3}"),
        (None, None) => "--".into(),
    }
}

type Row = (String, String, String, Vec<results::SummaryRow>);

/// The paper's Table-2 layout as a booktabs table: a row per session × method, for each scale the
/// columns Acc_Dim, Acc_Full and MAE, each with its 95% interval.
fn latex(sessions: &[Row], labels: Option<crate::domain::character::LabelSource>, b: Bootstrap) -> String {
    let mut scales: Vec<&str> = Vec::new();
    for (_, _, _, rows) in sessions {
        for r in rows {
            if !scales.contains(&r.scale.as_str()) {
                scales.push(&r.scale);
            }
        }
    }
    let several = sessions.len() > 1;
    let lead = if several { "ll" } else { "l" };
    let mut t = String::new();
    t.push_str("% Generated by incharacter report --format latex. Needs \\usepackage{booktabs}.\n");
    t.push_str("\\begin{table}[t]\n\\centering\n\\small\n");
    t.push_str(&format!(
        "\\begin{{tabular}}{{{lead}{}}}\n\\toprule\n",
        "ccc".repeat(scales.len())
    ));
    let blank = if several { " & " } else { "" };
    t.push_str(blank);
    for s in &scales {
        t.push_str(&format!(" & \\multicolumn{{3}}{{c}}{{{}}}", tex(s)));
    }
    t.push_str(" \\\\\n");
    let first = if several { 3 } else { 2 };
    for k in 0..scales.len() {
        let from = first + 3 * k;
        t.push_str(&format!("\\cmidrule(lr){{{from}-{}}}", from + 2));
    }
    t.push('\n');
    t.push_str(if several { "Session & Method" } else { "Method" });
    for _ in &scales {
        t.push_str(" & Acc\\textsubscript{Dim} $\\uparrow$ & Acc\\textsubscript{Full} $\\uparrow$ & MAE $\\downarrow$");
    }
    t.push_str(" \\\\\n\\midrule\n");
    for (id, rpa, judge, rows) in sessions {
        let mut methods: Vec<&str> = Vec::new();
        for r in rows {
            if !methods.contains(&r.method.as_str()) {
                methods.push(&r.method);
            }
        }
        for m in methods {
            if several {
                t.push_str(&format!("{} ({}, {}) & ", tex(id), tex(rpa), tex(judge)));
            }
            t.push_str(&tex(m));
            for s in &scales {
                match rows.iter().find(|r| r.method == m && r.scale == *s) {
                    Some(r) => {
                        let i = r.intervals.as_ref();
                        t.push_str(&format!(
                            " & {} & {} & {}",
                            tex_cell(i.map(|i| i.acc_dim), r.acc_dim),
                            tex_cell(i.map(|i| i.acc_full), r.acc_full),
                            tex_cell(i.map(|i| i.mae), r.mae)
                        ));
                    }
                    None => t.push_str(" & -- & -- & --"),
                }
            }
            t.push_str(" \\\\\n");
        }
    }
    t.push_str("\\bottomrule\n\\end{tabular}\n");
    let against = labels.map_or("the PDb labels (else the annotations)".to_string(), |l| {
        format!("the {} labels", l.name())
    });
    // The caption promises only the intervals the table has: none where no row has two characters
    // with scores, and says which figures stand alone where only some rows have them.
    let cis = sessions
        .iter()
        .flat_map(|(_, _, _, rows)| rows)
        .filter_map(|r| r.intervals.as_ref())
        .flat_map(|i| [i.acc_dim, i.acc_full, i.mae])
        .filter(|i| i.value.is_some())
        .map(|i| i.ci.is_some())
        .collect::<Vec<bool>>();
    let intervals = if cis.iter().all(|c| !c) {
        "No intervals: no row has two characters with scores to resample.".to_string()
    } else {
        let alone = if cis.iter().all(|c| *c) {
            ""
        } else {
            " A figure without one had a single character with scores."
        };
        format!(
            "Beside each figure its 95\\% percentile bootstrap interval over characters ({} resamples, seed {}).{alone}",
            b.resamples, b.seed
        )
    };
    t.push_str(&format!(
        "\\caption{{Personality fidelity against {}. {intervals}}}\n",
        tex(&against)
    ));
    t.push_str("\\end{table}\n");
    t
}

#[cfg(test)]
mod tests {
    #[test]
    fn tex_writes_what_ot1_would_draw_as_another_glyph_by_name() {
        assert_eq!(
            super::tex(r#"x<y&z"]]>|a\b_c"#),
            r"x\textless{}y\&z{\ttfamily\char34}]]\textgreater{}\textbar{}a\textbackslash{}b\_c"
        );
    }
}
