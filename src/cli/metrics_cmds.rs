//! `metrics` (predictions vs labels) and `agreement` (two raters), reading CSV files whose errors are
//! reported as file:line:column.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use super::input_error;
use super::table::{Table, num};
use crate::catalog::Catalog;
use crate::domain::character::{Label, LabelSource};
use crate::domain::metrics::{Alignment, AlignmentRow, alignment, std_score};
use crate::domain::scale::Scale;
use crate::domain::stats;

/// One CSV data row: its fields and where each field starts (line, column): a field after a quoted
/// one that spans lines starts on a later line than its record.
pub(super) struct Row {
    pub(super) fields: Vec<String>,
    places: Vec<(u64, usize)>,
}

/// Reads a CSV with a header naming at least `required` (any order, extra columns ignored) and returns
/// the rows' fields in the order of `required`.
/// The largest table `metrics` and `agreement` read (millions of rows; a file larger than that is
/// not a table of predictions or ratings).
pub(super) const MAX_CSV: u64 = 256 * 1024 * 1024;

pub(super) fn read_csv(path: &Path, required: &[&str]) -> anyhow::Result<Vec<Row>> {
    read_csv_with(path, required, &[], &[])
}

/// [`read_csv`], then the fields of the `optional` columns the header names ("" where it does not).
/// Values are read without the spaces around them, except in the `verbatim` columns (text such as a
/// note, kept as it was written).
pub(super) fn read_csv_with(
    path: &Path,
    required: &[&str],
    optional: &[&str],
    verbatim: &[&str],
) -> anyhow::Result<Vec<Row>> {
    let name = path.display().to_string();
    let bytes = crate::files::read_limited(path, MAX_CSV, "a CSV table")?;
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(input_error(format!(
            "{name}: the file is empty (a header naming {} first, then a row per line)",
            required.join(",")
        )));
    }
    let lines = LineStarts::of(&bytes);
    // The reader takes a quote never closed to hold the rest of the file: every row after it
    // would be read as one field's text, unsaid.
    if let Some(at) = unclosed_quote(&bytes) {
        let line = lines.line_of(at);
        let start = lines.0[line as usize - 1];
        let column = String::from_utf8_lossy(&bytes[start..at]).chars().count() + 1;
        return Err(input_error(format!(
            "{name}:{line}:{column}: this quote is never closed, or only after whole rows, which would be read \
             as this one field's text (a quote inside a field is written twice, \"\", in a field quoted whole)"
        )));
    }
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::Headers)
        .flexible(false)
        .from_reader(bytes.as_slice());
    let header = reader
        .headers()
        .map_err(|e| csv_error(&name, &bytes, &lines, &e))?
        .clone();
    // The header's own line: blank lines before it are skipped by the reader.
    let header_start = header.position().map_or(0, |p| record_start(&bytes, p.byte()));
    let header_line = lines.line_of(header_start);
    // A column named twice is ambiguous: which one is meant would be a guess.
    for col in required.iter().chain(optional) {
        let mut named = header.iter().enumerate().filter(|(_, h)| h.eq_ignore_ascii_case(col));
        if let (Some(_), Some((second, _))) = (named.next(), named.next()) {
            let column = field_starts(&bytes[header_start..])
                .get(second)
                .map_or(1, |&(_, c, _)| c);
            return Err(input_error(format!(
                "{name}:{header_line}:{column}: the header names column \"{col}\" twice"
            )));
        }
    }
    let positions: Vec<usize> = required
        .iter()
        .map(|col| {
            header.iter().position(|h| h.eq_ignore_ascii_case(col)).ok_or_else(|| {
                // One column holding the names, split another way: said.
                let split = match header.iter().collect::<Vec<_>>()[..] {
                    [one] if one.contains(';') => "; its fields are split by ';', not ','",
                    [one] if one.contains('\t') => "; its fields are split by tabs, not ','",
                    _ => "",
                };
                input_error(format!(
                    "{}:{header_line}:1: missing column \"{col}\" (the header must name {}{split})",
                    name,
                    required.join(",")
                ))
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let positions: Vec<Option<usize>> = positions
        .into_iter()
        .map(Some)
        .chain(
            optional
                .iter()
                .map(|col| header.iter().position(|h| h.eq_ignore_ascii_case(col))),
        )
        .collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| csv_error(&name, &bytes, &lines, &e))?;
        // The line from the record's byte offset: the reader's own count is short after CRLF line ends
        // (files saved by Excel or Python's csv module) and blank lines.
        let start = record.position().map_or(0, |p| record_start(&bytes, p.byte()));
        let line = lines.line_of(start);
        let fields = positions
            .iter()
            .zip(required.iter().chain(optional))
            .map(|(i, col)| {
                let field = i.and_then(|i| record.get(i)).unwrap_or("");
                if verbatim.iter().any(|v| v.eq_ignore_ascii_case(col)) {
                    field
                } else {
                    field.trim()
                }
                .to_string()
            })
            .collect();
        let starts = field_starts(&bytes[start..]);
        let places = positions
            .iter()
            .map(|i| {
                let (below, column, _) = starts.get(i.unwrap_or(0)).copied().unwrap_or((0, 1, 0));
                (line + below, column)
            })
            .collect();
        rows.push(Row { fields, places });
    }
    if rows.is_empty() {
        return Err(input_error(format!("{}: no data rows after the header", name)));
    }
    Ok(rows)
}

/// Where each line of a file starts, to turn a byte offset into a line number in O(log n). A line
/// ends as the CSV reader ends a record: at `\n`, `\r\n` or a `\r` alone (old Mac files).
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn of(bytes: &[u8]) -> LineStarts {
        let ends = bytes
            .iter()
            .enumerate()
            .filter(|&(i, &b)| line_end(bytes, i, b))
            .map(|(i, _)| i + 1);
        LineStarts(std::iter::once(0).chain(ends).collect())
    }

    /// The 1-based line holding byte `offset`.
    fn line_of(&self, offset: usize) -> u64 {
        self.0.partition_point(|&start| start <= offset) as u64
    }
}

/// The byte offset of a quote that opens a field and runs away with rows: never closed, or closed
/// only after a line that holds as many commas as the header (a row of its own, taken into one
/// field's text by a stray quote before it). Quotes as the CSV reader reads them: special only at a
/// field's start, `""` inside a quoted field is a quote of its text. A note over several lines
/// (`annotations export` writes them) has no line like a row.
fn unclosed_quote(bytes: &[u8]) -> Option<usize> {
    let header = bytes
        .split(|&b| b == b'\n')
        .find(|l| !l.iter().all(u8::is_ascii_whitespace));
    let commas = header.map_or(0, |h| h.iter().filter(|&&b| b == b',').count());
    // A line read whole inside the open field (the quote still open at its end) with as many
    // commas as the header: a row swallowed. One the field ends on is the rest of its own row.
    let row_like = |line: &[u8]| {
        let mut open = true;
        let mut i = 0;
        while i < line.len() {
            match (open, line[i]) {
                (true, b'"') if line.get(i + 1) == Some(&b'"') => i += 1,
                (true, b'"') => open = false,
                (false, b'"') if i == 0 || line[i - 1] == b',' => open = true,
                _ => {}
            }
            i += 1;
        }
        open && commas > 0 && line.iter().filter(|&&b| b == b',').count() >= commas
    };
    let (mut at, mut field_start, mut opened) = (0, true, None);
    while at < bytes.len() {
        let b = bytes[at];
        match opened {
            Some(_) if b == b'"' && bytes.get(at + 1) == Some(&b'"') => at += 1,
            Some(_) if b == b'"' => opened = None,
            Some(open) if b == b'\n' => {
                let line = bytes[at + 1..].split(|&b| b == b'\n').next().unwrap_or_default();
                if row_like(line) {
                    return Some(open);
                }
            }
            Some(_) => {}
            None if field_start && b == b'"' => opened = Some(at),
            None => {}
        }
        field_start = opened.is_none() && matches!(b, b',' | b'\n' | b'\r');
        at += 1;
    }
    opened
}

/// Whether byte `b` at `at` of `bytes` ends a line: a `\n`, or a `\r` not followed by one.
fn line_end(bytes: &[u8], at: usize, b: u8) -> bool {
    b == b'\n' || (b == b'\r' && bytes.get(at + 1) != Some(&b'\n'))
}

/// The first byte of the record the reader says starts at `offset`: its offset may point at the line
/// ends (blank lines, the `\n` of a CRLF) before the record, so they are skipped, and at a UTF-8 byte
/// order mark, which is not a character of the header.
fn record_start(bytes: &[u8], offset: u64) -> usize {
    let mut at = usize::try_from(offset).map_or(bytes.len(), |o| o.min(bytes.len()));
    if at == 0 && bytes.starts_with(b"\xEF\xBB\xBF") {
        at = 3;
    }
    while matches!(bytes.get(at), Some(b'\r' | b'\n')) {
        at += 1;
    }
    at
}

/// Where each field of the record at the start of `raw` begins: the lines below the record's first
/// (a quoted field may hold line ends), the 1-based column in characters, past the spaces the reader
/// trims and inside an opening quote, and the byte of `raw` there. Read up to the record's end only.
fn field_starts(raw: &[u8]) -> Vec<(u64, usize, usize)> {
    let mut starts = Vec::new();
    let mut field_start = true;
    let mut quoted = false;
    let (mut below, mut column) = (0, 0);
    for (at, &b) in raw.iter().enumerate() {
        // A character is counted at its first byte (UTF-8 continuation bytes are 0b10xxxxxx).
        if b & 0xC0 != 0x80 {
            column += 1;
        }
        if field_start {
            if b == b' ' || b == b'\t' {
                continue;
            }
            starts.push(match b {
                b'"' => (below, column + 1, at + 1),
                _ => (below, column, at),
            });
            field_start = false;
        }
        match b {
            b'"' => quoted = !quoted,
            b',' if !quoted => field_start = true,
            b'\n' | b'\r' if !quoted => break,
            _ if line_end(raw, at, b) => (below, column) = (below + 1, 0),
            _ => {}
        }
    }
    starts
}

/// A record the reader refused, located: a field that is not UTF-8 at its first byte that is not.
fn csv_error(name: &str, bytes: &[u8], lines: &LineStarts, e: &csv::Error) -> anyhow::Error {
    let start = e.position().map_or(0, |p| record_start(bytes, p.byte()));
    let (below, column) = match e.kind() {
        csv::ErrorKind::Utf8 { err, .. } => match field_starts(&bytes[start..]).get(err.field()) {
            Some(&(below, column, at)) => {
                let valid = bytes
                    .get(start + at..start + at + err.valid_up_to())
                    .unwrap_or_default();
                (below, column + valid.iter().filter(|&&b| b & 0xC0 != 0x80).count())
            }
            None => (0, 1),
        },
        _ => (0, 1),
    };
    input_error(format!("{}:{}:{column}: {e}", name, lines.line_of(start) + below))
}

pub(super) fn located(path: &Path, row: &Row, field: usize, message: String) -> anyhow::Error {
    let (line, column) = row.places[field];
    input_error(format!("{}:{line}:{column}: {message}", path.display()))
}

fn parse_number(path: &Path, row: &Row, field: usize, what: &str) -> anyhow::Result<f64> {
    let text = &row.fields[field];
    let problem = match text.parse::<f64>() {
        Ok(v) if v.is_finite() => return Ok(v),
        Ok(v) if v.is_infinite() && !text.to_ascii_lowercase().contains("inf") => "is too large a number",
        _ => "is not a number",
    };
    Err(located(path, row, field, format!("{what} \"{text}\" {problem}")))
}

/// `metrics`: each prediction set against the character's label, then accuracy and error per
/// dimension and overall, as tables or JSON.
pub fn metrics(
    catalog: &Catalog,
    scale_id: &str,
    predictions: &Path,
    labels: Option<LabelSource>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let scale = catalog.scale(scale_id).ok_or_else(|| {
        let ids: Vec<&str> = catalog.scales.iter().map(|e| e.value.id.as_str()).collect();
        input_error(format!(
            "unknown scale \"{}\"; known scales: {}",
            scale_id,
            ids.join(", ")
        ))
    })?;
    let (min, max) = scale.dimension_range();
    let (rows, sources) = read_predictions(catalog, scale, predictions, labels)?;
    let order: Vec<String> = scale.dimensions.iter().map(|d| d.name.clone()).collect();
    let Some(result) = alignment((min, max), &order, &rows) else {
        return Err(input_error(format!(
            "{}: every prediction is for a marginal (X) label or one the {} labels do not have; nothing to score",
            predictions.display(),
            sources.iter().map(|s| s.name()).collect::<Vec<_>>().join(" + ")
        )));
    };
    // Std_Score: spread of each (character, dimension) score across repeats.
    let mut across: std::collections::BTreeMap<(&str, &str), Vec<f64>> = Default::default();
    for r in &rows {
        across
            .entry((&r.character, &r.dimension))
            .or_default()
            .extend(r.predicted);
    }
    let spread = std_score(across.values().map(Vec::as_slice), max - min);
    let labels_used: Vec<&str> = sources.iter().map(|&s| s.name()).collect();
    let report = MetricsReport {
        scale,
        labels_used: &labels_used,
        result: &result,
        spread,
    };
    if json {
        report.write_json(out)?;
    } else {
        report.write_tables(out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The predictions file's rows, each paired with the character's label (and whether that label is
/// marginal), and the label sources used. Unknown names, bad numbers, scores out of range and a
/// second prediction for the same cell are located errors; a pair without a label is marginal.
fn read_predictions(
    catalog: &Catalog,
    scale: &Scale,
    predictions: &Path,
    labels: Option<LabelSource>,
) -> anyhow::Result<(Vec<AlignmentRow>, BTreeSet<LabelSource>)> {
    let (min, max) = scale.dimension_range();
    let mut rows = Vec::new();
    let mut seen = BTreeSet::new();
    let mut sources = BTreeSet::new();
    for row in read_csv(predictions, &["character", "dimension", "repeat", "score"])? {
        let [character, dimension, repeat, _] = &row.fields[..] else {
            unreachable!("four columns requested")
        };
        let c = catalog
            .character(character)
            .ok_or_else(|| located(predictions, &row, 0, format!("unknown character \"{}\"", character)))?;
        let d = scale
            .dimensions
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(dimension))
            .ok_or_else(|| located(predictions, &row, 1, scale.no_dimension(dimension)))?;
        let repeat: u32 = repeat.parse().map_err(|_| {
            located(
                predictions,
                &row,
                2,
                format!("repeat \"{}\" is not a whole number ≥ 0", repeat),
            )
        })?;
        let score = parse_number(predictions, &row, 3, "score")?;
        if !(min..=max).contains(&score) {
            return Err(located(
                predictions,
                &row,
                3,
                format!("score {score} is outside {}'s range [{min}, {max}]", scale.id),
            ));
        }
        if !seen.insert((c.id.clone(), d.name.clone(), repeat)) {
            return Err(located(
                predictions,
                &row,
                0,
                format!("a second prediction for {} / {} in repeat {repeat}", c.id, d.name),
            ));
        }
        let source = labels.unwrap_or_else(|| c.labels.exclusion_source(&scale.id));
        sources.insert(source);
        // A dimension the source has no label for is left out (counted among the excluded pairs),
        // as `report` leaves it out of a session's scores.
        let (label, marginal) = match c.labels.get(source, &scale.id, &d.name) {
            Some(label) => (*label, c.labels.marginal(&scale.id, &d.name, source)),
            None => (Label::NONE, true),
        };
        rows.push(AlignmentRow {
            character: c.id.clone(),
            dimension: d.name.clone(),
            repeat,
            predicted: Some(score),
            label,
            marginal,
        });
    }
    Ok((rows, sources))
}

/// What `metrics` reports: the alignment of the predictions with the labels, and the spread across
/// repeats.
struct MetricsReport<'a> {
    scale: &'a Scale,
    labels_used: &'a [&'a str],
    result: &'a Alignment,
    spread: Option<f64>,
}

impl MetricsReport<'_> {
    fn write_json(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let (scale, labels_used, result, spread) = (self.scale, self.labels_used, self.result, self.spread);
        let o = &result.overall;
        let dimensions: serde_json::Map<String, serde_json::Value> = result
            .dimensions
            .iter()
            .map(|(name, d)| {
                (
                    name.clone(),
                    json!({"acc": d.acc, "mae": d.mae, "mse": d.mse, "count": d.count}),
                )
            })
            .collect();
        let report = json!({
            "scale": scale.id,
            "labels": labels_used,
            "overall": {
                "acc_dim": o.acc_dim, "acc_full": o.acc_full, "mae": o.mae, "mse": o.mse,
                "count": o.count, "excluded": o.excluded, "repeats": o.repeats, "std_score": spread,
            },
            "dimensions": dimensions,
        });
        writeln!(out, "{}", crate::text::json_pretty(&report)?)?;
        Ok(())
    }

    fn write_tables(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let (scale, labels_used, result, spread) = (self.scale, self.labels_used, self.result, self.spread);
        let (min, max) = scale.dimension_range();
        writeln!(
            out,
            "{} ({}), labels: {}; range [{min}, {max}], a tie at the middle counts as L",
            scale.id,
            scale.name,
            labels_used.join(" + ")
        )?;
        let mut t = Table::new(&["dimension", ">acc", ">mae", ">mse", ">n"]);
        for (name, d) in &result.dimensions {
            t.row(vec![
                name.to_string(),
                num(Some(d.acc)),
                num(Some(d.mae)),
                num(Some(d.mse)),
                d.count.to_string(),
            ]);
        }
        write!(out, "{}", t.render())?;
        let o = &result.overall;
        writeln!(out)?;
        let mut t = Table::new(&[
            ">Acc_Dim",
            ">Acc_Full",
            ">MAE",
            ">MSE",
            ">pairs",
            ">excluded",
            ">repeats",
            ">Std_Score",
        ]);
        t.row(vec![
            num(Some(o.acc_dim)),
            num(Some(o.acc_full)),
            num(Some(o.mae)),
            num(Some(o.mse)),
            o.count.to_string(),
            o.excluded.to_string(),
            o.repeats.to_string(),
            num(spread),
        ]);
        write!(out, "{}", t.render())?;
        Ok(())
    }
}

pub fn agreement(pairs: &Path, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut a = Vec::new();
    let mut b = Vec::new();
    for row in read_csv(pairs, &["a", "b"])? {
        a.push(parse_number(pairs, &row, 0, "a")?);
        b.push(parse_number(pairs, &row, 1, "b")?);
    }
    let integers = |x: &[f64]| x.iter().all(|v| v.fract() == 0.0 && v.abs() < 1e15);
    let qwk = if integers(&a) && integers(&b) {
        let to_int = |x: &[f64]| x.iter().map(|&v| v as i64).collect::<Vec<_>>();
        stats::quadratic_weighted_kappa(&to_int(&a), &to_int(&b))
    } else {
        None
    };
    let closeness = stats::closeness(&a, &b).expect("read_csv returns at least one row");
    let report = json!({
        "n": a.len(),
        "pearson": stats::pearson(&a, &b),
        "spearman": stats::spearman(&a, &b),
        "kendall_tau_b": stats::kendall_tau_b(&a, &b),
        "qwk": qwk,
        "right": closeness.right,
        "close": closeness.close,
        "wrong": closeness.wrong,
        "accuracy": closeness.accuracy,
    });
    if json {
        writeln!(out, "{}", crate::text::json_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&[
        ">n",
        ">Pearson",
        ">Spearman",
        ">Kendall τ-b",
        ">QWK",
        ">right",
        ">close",
        ">wrong",
        ">accuracy",
    ]);
    t.row(vec![
        a.len().to_string(),
        num(stats::pearson(&a, &b)),
        num(stats::spearman(&a, &b)),
        num(stats::kendall_tau_b(&a, &b)),
        num(qwk),
        closeness.right.to_string(),
        closeness.close.to_string(),
        closeness.wrong.to_string(),
        num(Some(closeness.accuracy)),
    ]);
    write!(out, "{}", t.render())?;
    writeln!(
        out,
        "right: |a − b| < 1, close: = 1, wrong: > 1; accuracy = (right + close/2) / n; QWK needs whole-number ratings"
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_quote_never_closed_is_found_where_it_opens() {
        use super::unclosed_quote;
        assert_eq!(unclosed_quote(b"a,b\n1,\"oops\n3,3\n"), Some(6));
        // Closed, doubled inside, or inside an unquoted field: none.
        for fine in [
            &b"a,b\n1,\"x, \"\"y\"\"\nz\"\n"[..],
            b"a,b\n1,ab\"c\n",
            b"\"a\",\"\"\r\n1,2\n",
        ] {
            assert_eq!(unclosed_quote(fine), None, "{}", String::from_utf8_lossy(fine));
        }
        assert_eq!(
            unclosed_quote(b"a,b\n1,\"x\"\"\n"),
            Some(6),
            "a doubled quote at the end closes nothing"
        );
        // Closed, but only after rows of their own: a stray quote, then a quoted field further down.
        assert_eq!(
            unclosed_quote(b"a,b,c\n1,1,ok\n2,2,\"oops\n3,3,x\n5,1,\"z\"\n"),
            Some(17)
        );
        // A note over lines that are no rows stays one field.
        assert_eq!(
            unclosed_quote(b"a,b,note\n1,2,\"first line\nsecond, line\"\n3,4,\n"),
            None
        );
        // In any column, commas and all: the line the field ends on is the rest of its row.
        assert_eq!(unclosed_quote(b"a,b,c\n\"x\ny\",1,2\n"), None);
        assert_eq!(unclosed_quote(b"a,b,note\n1,2,\"first\nred, green, blue\"\n"), None);
        assert_eq!(
            unclosed_quote(b"character,reply,dimension,repeat,score\nAlice,\"Well.\nWell, I think so\",O,0,3.5\n"),
            None
        );
    }

    use super::*;

    fn rows(text: &str) -> Vec<Row> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, text).unwrap();
        read_csv(&path, &["a", "b"]).unwrap()
    }

    #[test]
    fn an_empty_file_a_file_split_otherwise_and_a_huge_number_are_said_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, " \n").unwrap();
        let err = read_csv(&path, &["a", "b"]).err().unwrap().to_string();
        assert!(
            err.ends_with("t.csv: the file is empty (a header naming a,b first, then a row per line)"),
            "{err}"
        );
        for (split, said) in [(";", "';'"), ("\t", "tabs")] {
            std::fs::write(&path, format!("a{split}b\n1{split}2\n")).unwrap();
            let err = read_csv(&path, &["a", "b"]).err().unwrap().to_string();
            assert!(
                err.ends_with(&format!("its fields are split by {said}, not ',')")),
                "{err}"
            );
        }
        std::fs::write(&path, "a,b\n1e400,inf\n").unwrap();
        let rows = read_csv(&path, &["a", "b"]).unwrap();
        let err = parse_number(&path, &rows[0], 0, "score").unwrap_err().to_string();
        assert!(
            err.ends_with("t.csv:2:1: score \"1e400\" is too large a number"),
            "{err}"
        );
        let err = parse_number(&path, &rows[0], 1, "score").unwrap_err().to_string();
        assert!(err.ends_with("t.csv:2:7: score \"inf\" is not a number"), "{err}");
    }

    #[test]
    fn values_are_trimmed_except_in_the_columns_kept_verbatim() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, "a, Note ,c\n 1 ,  two  spaces ,\" 3 \"\n").unwrap();
        let rows = read_csv_with(&path, &["a"], &["note", "c"], &["NOTE"]).unwrap();
        assert_eq!(rows[0].fields, ["1", "  two  spaces ", "3"]);
        let rows = read_csv_with(&path, &["a"], &["note", "c"], &[]).unwrap();
        assert_eq!(rows[0].fields, ["1", "two  spaces", "3"]);
    }

    #[test]
    fn rows_know_their_line_with_lf_crlf_and_cr_line_ends() {
        for end in ["\n", "\r\n", "\r"] {
            let text = ["a,b", "1,2", "", "3,4", "5,6"].join(end) + end;
            let lines: Vec<u64> = rows(&text).iter().map(|r| r.places[0].0).collect();
            assert_eq!(lines, [2, 4, 5], "line end {end:?}");
        }
        let mixed: Vec<u64> = rows("a,b\r\n1,2\n\r3,4\r5,6\r\n")
            .iter()
            .map(|r| r.places[0].0)
            .collect();
        assert_eq!(mixed, [2, 4, 5], "line ends mixed");
    }

    #[test]
    fn a_ragged_row_is_located_at_its_line_with_crlf_or_cr_line_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        for end in ["\r\n", "\r"] {
            std::fs::write(&path, ["a,b", "1,2", "3,4", "5", ""].join(end)).unwrap();
            let err = read_csv(&path, &["a", "b"]).err().unwrap().to_string();
            assert!(err.contains("t.csv:4:1:"), "line end {end:?}: {err}");
        }
    }

    #[test]
    fn fields_are_located_where_their_text_starts_spaced_quoted_or_not_utf8() {
        let rows = rows("x,a,b\nann,  subject  ,9\n\"q,1\",\"é\",\"7\"\n");
        assert_eq!(
            rows[0].places,
            [(2, 7), (2, 17)],
            "past the trimmed spaces: {:?}",
            rows[0].fields
        );
        assert_eq!(
            rows[1].places,
            [(3, 8), (3, 12)],
            "inside the quotes, in characters: {:?}",
            rows[1].fields
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, b"a,b\n1,2\n3,\xff4\n").unwrap();
        let err = read_csv(&path, &["a", "b"]).err().unwrap().to_string();
        assert!(err.contains("t.csv:3:3:"), "the field that is not UTF-8: {err}");
        std::fs::write(&path, b"a,b\n1,2\nan\xffn,4\n").unwrap();
        let err = read_csv(&path, &["a", "b"]).err().unwrap().to_string();
        assert!(err.contains("t.csv:3:3:"), "at the byte that is not UTF-8: {err}");
        std::fs::write(&path, b"a,b\n\"\xc3\xa9x\xff\",4\n").unwrap();
        let err = read_csv(&path, &["a", "b"]).err().unwrap().to_string();
        assert!(
            err.contains("t.csv:2:4:"),
            "inside the quotes, counted in characters: {err}"
        );
    }

    #[test]
    fn a_field_after_a_quoted_one_spanning_lines_is_located_on_its_own_line() {
        for end in ["\n", "\r\n", "\r"] {
            let text = format!("a,note,b{end}1,\"first{end}second{end}third\",  x{end}2,n,3{end}");
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.csv");
            std::fs::write(&path, &text).unwrap();
            let rows = read_csv(&path, &["a", "b"]).unwrap();
            assert_eq!(rows[0].places, [(2, 1), (4, 10)], "line end {end:?}");
            assert_eq!(rows[1].places, [(5, 1), (5, 5)], "line end {end:?}");
        }
    }

    #[test]
    fn a_byte_order_mark_and_blank_lines_before_the_header_do_not_shift_places() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, b"\xEF\xBB\xBFa,\xff\n1,2\n").unwrap();
        let err = read_csv(&path, &["a", "b"]).err().unwrap().to_string();
        assert!(
            err.contains("t.csv:1:3:"),
            "the header's second field, the mark not counted: {err}"
        );
        std::fs::write(&path, "\n\nx,b\n1,2\n").unwrap();
        let err = read_csv(&path, &["a", "b"]).err().unwrap().to_string();
        assert!(err.contains("t.csv:3:1: missing column \"a\""), "{err}");
        std::fs::write(&path, "\u{feff}a,b\n1,2\n").unwrap();
        assert_eq!(read_csv(&path, &["a", "b"]).unwrap()[0].fields, ["1", "2"]);
        std::fs::write(&path, "\u{feff}a,b,A\n1,2,3\n").unwrap();
        let err = read_csv(&path, &["a", "b"]).err().unwrap().to_string();
        assert!(err.contains("t.csv:1:5: the header names column \"a\" twice"), "{err}");
    }

    #[test]
    fn a_large_table_is_read_whole_and_its_last_row_knows_its_line() {
        // 200,000 rows: reading that recounted the lines for each row took minutes at this size.
        let text: String = std::iter::once("a,b\n".to_string())
            .chain((0..200_000).map(|i| format!("{i},{}\n", i % 5)))
            .collect();
        let rows = rows(&text);
        assert_eq!(rows.len(), 200_000);
        assert_eq!(rows[199_999].places[0].0, 200_001);
        let lines = LineStarts::of(text.as_bytes());
        assert_eq!(lines.line_of(text.len() - 1), 200_001);
    }
}
