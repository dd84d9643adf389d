//! `export --format md` past the summary: every interview (question and answer, item by item) and
//! every assessment (per dimension its score with the judge's analysis, or the options each item was
//! converted to), laid out from the JSON export so both say the same.

use std::fmt::Write;

use serde_json::Value;

use crate::text::md_cell as cell;

/// A model's text as the body of a list item: its lines indented under the item.
fn indented(text: &str) -> String {
    text.trim().lines().collect::<Vec<_>>().join("\n   ")
}

fn number(v: &Value) -> String {
    v.as_f64().map_or_else(|| "–".into(), |x| format!("{x:.2}"))
}

/// `### hermione-en × BFI` (with the repeat, the style or the method where they tell groups apart).
fn heading(group: &Value, what: &[&str]) -> String {
    let mut parts: Vec<String> = what.iter().filter_map(|k| group[*k].as_str().map(str::to_string)).collect();
    if group["repeat"].as_u64().is_some_and(|r| r > 0) {
        parts.push(format!("repeat {}", group["repeat"]));
    }
    format!("### {}\n\n", parts.join(" × "))
}

/// The interviews and assessments of an interview session's JSON export, as Markdown sections.
pub fn details(export: &Value) -> String {
    let mut md = String::new();
    let empty = Vec::new();
    let interviews = export["interviews"].as_array().unwrap_or(&empty);
    if !interviews.is_empty() {
        md.push_str("## Interviews\n\n");
    }
    for group in interviews {
        md.push_str(&heading(group, &["character", "scale"]));
        for item in group["items"].as_array().unwrap_or(&empty) {
            let dimension = item["dimension"].as_str().map(|d| format!(", {d}")).unwrap_or_default();
            let cut = if item["truncated"].as_bool() == Some(true) {
                " *(cut at the answer cap)*"
            } else {
                ""
            };
            let _ = write!(
                md,
                "{}. **Q** (item {}{dimension}): {}\n   **A**{cut}: {}\n\n",
                item["item_id"],
                item["item_id"],
                indented(item["question"].as_str().unwrap_or("")),
                indented(item["response"].as_str().unwrap_or("")),
            );
        }
    }
    let assessments = export["assessments"].as_array().unwrap_or(&empty);
    if !assessments.is_empty() {
        md.push_str("## Assessments\n\n");
    }
    for group in assessments {
        md.push_str(&heading(group, &["character", "scale", "method"]));
        md.push_str("| dimension | score | the judge's reasons, or each item's option |\n|---|---|---|\n");
        for (dimension, d) in group["dimensions"].as_object().into_iter().flatten() {
            let why = if let Some(f) = d["failure"].as_str() {
                format!("failed: {f}")
            } else if let Some(batches) = d["batches"].as_array() {
                batches
                    .iter()
                    .map(|b| match b["score"].as_f64() {
                        Some(s) if batches.len() > 1 => format!("{s:.2}: {}", b["analysis"].as_str().unwrap_or("")),
                        _ => b["analysis"].as_str().unwrap_or("").to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" / ")
            } else {
                d["items"]
                    .as_array()
                    .unwrap_or(&empty)
                    .iter()
                    .map(|i| {
                        let option = match &i["option"] {
                            Value::Null => "–".to_string(),
                            Value::String(s) => s.clone(),
                            v => v.to_string(),
                        };
                        format!("{}: {option}", i["item_id"])
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(md, "| {} | {} | {} |", cell(dimension), number(&d["score"]), cell(&why));
        }
        md.push('\n');
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_keep_their_lines_and_cells_stay_one_line() {
        let export = json!({
            "interviews": [{"character": "c", "scale": "BFI", "repeat": 0, "style": "open", "items": [
                {"item_id": 3, "dimension": "Openness", "question": "Q?", "response": "one\ntwo", "truncated": true}]}],
            "assessments": [{"character": "c", "scale": "BFI", "method": "ER_batch", "repeat": 1, "dimensions": {
                "Openness": {"score": 4.25, "batches": [{"score": 4.25, "analysis": "a | b\nc"}]},
                "Neuroticism": {"score": null, "failure": "no usable reply"}}},
                {"character": "c", "scale": "BFI", "method": "OC", "repeat": 0, "dimensions": {
                "Openness": {"score": 3.0, "items": [{"item_id": 3, "option": 4}, {"item_id": 5, "option": "x"}]}}}]
        });
        let md = details(&export);
        assert!(md.contains("### c × BFI\n\n3. **Q** (item 3, Openness): Q?\n   **A** *(cut at the answer cap)*: one\n   two\n"), "{md}");
        assert!(md.contains("### c × BFI × ER_batch × repeat 1\n"), "{md}");
        assert!(md.contains("| Openness | 4.25 | a \\| b c |"), "{md}");
        assert!(md.contains("| Neuroticism | – | failed: no usable reply |"), "{md}");
        assert!(md.contains("| Openness | 3.00 | 3: 4, 5: x |"), "{md}");
    }
}
