//! What a session's events add up to: the export JSON (interviews, assessments), the tidy CSV, and the
//! Table-2-style summary per scale × method (alignment with the labels, consistency across repeats,
//! refusals and failed dimensions). Everything is recomputed from the journal's events.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::domain::character::{Label, LabelSource, LabelType};
use crate::domain::metrics::{self, AlignmentRow};
use crate::domain::resample::{self, Bootstrap};
use crate::domain::scoring::ItemOption;
use crate::method::{Assessment, Method};
use crate::study::Event;
use crate::templates;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    pub scale: String,
    pub method: String,
    pub acc_dim: Option<f64>,
    pub acc_full: Option<f64>,
    pub mae: Option<f64>,
    pub std_item: Option<f64>,
    pub std_dim: Option<f64>,
    pub std_score: Option<f64>,
    /// Scored (character, dimension) pairs and those left out as marginal.
    pub count: usize,
    pub excluded: usize,
    pub refusals: usize,
    pub failed_dimensions: usize,
    /// Items without a usable conversion in dimensions scored from their other items.
    pub failed_items: usize,
    /// 95% bootstrap intervals over characters, when asked for ([`summary_with`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Intervals>,
}

/// A figure with its 95% interval; `ci` is `None` where there is none (one character: nothing to
/// resample; or no value).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub value: Option<f64>,
    pub ci: Option<[f64; 2]>,
}

impl Interval {
    /// `0.812 [0.700, 0.900]`, `0.812 [–]` without an interval, `–` without a value.
    pub fn cell(&self) -> String {
        match (self.value, self.ci) {
            (None, _) => "–".into(),
            (Some(v), Some([lo, hi])) => format!("{v:.3} [{lo:.3}, {hi:.3}]"),
            (Some(v), None) => format!("{v:.3} [–]"),
        }
    }
}

/// A summary row's figures with their intervals: a seeded percentile bootstrap over the characters
/// (each draw keeps all of a character's dimensions and repeats). The consistency figures have one
/// only where the row has them (repeats, item-level methods).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Intervals {
    pub acc_dim: Interval,
    pub acc_full: Interval,
    pub mae: Interval,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub std_item: Option<Interval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub std_dim: Option<Interval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub std_score: Option<Interval>,
}

/// The last assessment of every (character, scale, method, repeat, dimension).
pub fn latest_assessments(events: &[Event]) -> Vec<&Assessment> {
    let mut latest: BTreeMap<(String, String, Method, u32, String), &Assessment> = BTreeMap::new();
    for e in events {
        if let Event::DimensionAssessed(a) = e {
            latest.insert(
                (
                    a.character.clone(),
                    a.scale.clone(),
                    a.method,
                    a.repeat,
                    a.dimension.clone(),
                ),
                a,
            );
        }
    }
    latest.into_values().collect()
}

fn option_json(o: Option<ItemOption>) -> Value {
    match o {
        Some(ItemOption::Value(v)) => json!(v),
        Some(ItemOption::Refused) => json!("x"),
        None => Value::Null,
    }
}

/// One assessed dimension as `export` writes it: its score, and what it was made of.
fn dimension_json(a: &crate::method::Assessment) -> Value {
    let mut dim = json!({"score": a.score});
    if !a.batches.is_empty() {
        dim["batches"] = json!(a.batches.iter().map(|b| json!({"item_ids": b.item_ids, "score": b.score, "analysis": b.analysis, "attempts": b.attempts})).collect::<Vec<_>>());
    }
    if !a.items.is_empty() {
        let item = |i: &crate::method::convert::ConvertedItem| {
            let mut v = json!({"item_id": i.item_id, "option": option_json(i.option), "score": i.score, "refused": i.refused});
            // Why an item has no option, as the journal records it.
            if let Some(e) = &i.error {
                v["error"] = json!(e);
            }
            v
        };
        dim["items"] = json!(a.items.iter().map(item).collect::<Vec<_>>());
    }
    if !a.calls.is_empty() {
        dim["calls"] = json!(a.calls);
    }
    // The conversion calls recorded with this dimension (their first), every reply included.
    if !a.conversions.is_empty() {
        dim["conversions"] = json!(a.conversions);
    }
    if let Some(f) = &a.failure {
        dim["failure"] = json!(f);
    }
    // A departure from the method (to fit the judge's context, or to narrow a failure) is part
    // of the result.
    if let Some(f) = &a.fitted {
        dim["fitted"] = json!(f);
    }
    dim
}

pub fn export(events: &[Event], catalog: &Catalog) -> Value {
    let mut session = json!({});
    let mut status = "incomplete".to_string();
    for e in events {
        match e {
            Event::RunStarted {
                header: h,
                plan,
                providers,
            } => {
                session = json!({"id": h.session, "name": h.name, "created": h.created, "app_version": h.app_version,
                                 "plan": plan, "providers": providers, "seed": plan.seed,
                                 "prompts": templates::manifest(&plan.prompts),
                                 "character_versions": h.character_versions});
            }
            Event::RunFinished { status: s, .. } => status = s.clone(),
            _ => {}
        }
    }
    session["status"] = json!(status);
    // Versions a resume went on with (a character edited while its session was interrupted).
    let later: BTreeMap<&String, Vec<String>> = session["character_versions"]
        .as_object()
        .map(|versions| {
            versions
                .keys()
                .map(|c| (c, crate::study::later_versions(events, c)))
                .filter(|(_, later)| !later.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if !later.is_empty() {
        session["later_character_versions"] = json!(later);
    }
    let style_name = |style: &crate::study::QueryStyle| {
        serde_json::to_value(style)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let dimension_of = |scale: &str, item_id: u32| {
        catalog.scale(scale).and_then(|s| {
            s.item(item_id)
                .and_then(|i| i.dimension())
                .map(|d| s.dimensions[d].name.clone())
        })
    };
    let mut interviews: BTreeMap<(String, String, u32, String), Vec<Value>> = BTreeMap::new();
    // Items that failed for good (no later answer): listed with why, so none goes missing unsaid.
    let mut failed: BTreeMap<(String, String, u32, String), BTreeMap<u32, Value>> = BTreeMap::new();
    let done = super::Done::from_events(events);
    for ((character, scale, repeat, style, item_id), error) in &done.failed {
        if done.answers.contains_key(&(character.clone(), scale.clone(), *repeat, *style, *item_id)) {
            continue;
        }
        failed
            .entry((character.clone(), scale.clone(), *repeat, style_name(style)))
            .or_default()
            .insert(*item_id, json!({"item_id": item_id, "dimension": dimension_of(scale, *item_id), "error": error}));
    }
    for e in events {
        if let Event::ItemAnswered {
            character,
            scale,
            repeat,
            style,
            item_id,
            question,
            response,
            retrieved,
            truncated,
        } = e
        {
            let style = style_name(style);
            let dimension = dimension_of(scale, *item_id);
            let key = (character.clone(), scale.clone(), *repeat, style);
            interviews
                .entry(key)
                .or_default()
                .push(json!({"item_id": item_id, "dimension": dimension, "question": question, "response": response, "retrieved": retrieved, "truncated": truncated}));
        }
    }
    for (key, f) in &failed {
        if !f.is_empty() {
            interviews.entry(key.clone()).or_default();
        }
    }
    let interviews: Vec<Value> = interviews
        .into_iter()
        .map(|(key, mut items)| {
            items.sort_by_key(|i| i["item_id"].as_u64());
            let (character, scale, repeat, style) = &key;
            let mut interview = json!({"character": character, "scale": scale, "repeat": repeat, "style": style, "items": items});
            if let Some(f) = failed.get(&key).filter(|f| !f.is_empty()) {
                interview["failed"] = json!(f.values().collect::<Vec<_>>());
            }
            interview
        })
        .collect();
    let mut grouped: BTreeMap<(String, String, Method, u32), serde_json::Map<String, Value>> = BTreeMap::new();
    for a in latest_assessments(events) {
        let dim = dimension_json(a);
        grouped
            .entry((a.character.clone(), a.scale.clone(), a.method, a.repeat))
            .or_default()
            .insert(a.dimension.clone(), dim);
    }
    let assessments: Vec<Value> = grouped
        .into_iter()
        .map(|((character, scale, method, repeat), dims)| {
            json!({"character": character, "scale": scale, "method": method.name(), "repeat": repeat, "dimensions": dims})
        })
        .collect();
    // Each dimension's score with its spread across repeats (else batches): {"value", "sd"}.
    let spreads: Vec<Value> = super::spread::spreads(events)
        .into_iter()
        .map(|((character, scale, method, dimension), s)| {
            json!({"character": character, "scale": scale, "method": method.name(), "dimension": dimension,
                   "score": {"value": s.value, "sd": s.sd}, "n": s.n, "over": s.over})
        })
        .collect();
    json!({"session": session, "interviews": interviews, "assessments": assessments, "spreads": spreads})
}

/// Alignment inputs for one scale × method, against `labels` (`None`: the paper's choice, PDb where
/// the character has it, else the annotation).
pub fn rows(catalog: &Catalog, scale_id: &str, list: &[&Assessment], labels: Option<LabelSource>) -> Vec<AlignmentRow> {
    list.iter()
        .filter_map(|a| {
            let c = catalog.character(&a.character)?;
            let source = labels.unwrap_or_else(|| c.labels.exclusion_source(scale_id));
            // A dimension the source has no label for is left out as a marginal one is, and counted
            // among the excluded pairs.
            let (label, marginal) = match c.labels.get(source, scale_id, &a.dimension) {
                Some(label) => (*label, c.labels.marginal(scale_id, &a.dimension, source)),
                None => (Label::NONE, true),
            };
            Some(AlignmentRow {
                character: a.character.clone(),
                dimension: a.dimension.clone(),
                repeat: a.repeat,
                predicted: a.score,
                label,
                marginal,
            })
        })
        .collect()
}

impl SummaryRow {
    /// The `failed` column: failed dimensions, and items left out of scored ones (`1 +2 items`).
    pub fn failed_cell(&self) -> String {
        match self.failed_items {
            0 => self.failed_dimensions.to_string(),
            n => format!("{} +{n} item{}", self.failed_dimensions, if n == 1 { "" } else { "s" }),
        }
    }
}

pub fn summary(events: &[Event], catalog: &Catalog) -> Vec<SummaryRow> {
    summary_against(events, catalog, None)
}

/// [`summary`] against the chosen labels (`None`: the paper's choice).
pub fn summary_against(events: &[Event], catalog: &Catalog, labels: Option<LabelSource>) -> Vec<SummaryRow> {
    summary_with(events, catalog, labels, None)
}

/// One character's share of a row's inputs: its alignment rows and its consistency groups.
#[derive(Default)]
struct Share {
    rows: Vec<AlignmentRow>,
    per_item: Vec<Vec<f64>>,
    per_dim_repeat: Vec<Vec<f64>>,
    per_dim: Vec<Vec<f64>>,
}

/// Each character's [`Share`] of one scale × method's assessments `list` and alignment `rows`, in
/// character order (so the groups keep the order of the whole: by character, then item or dimension).
fn shares(list: &[&Assessment], rows: Vec<AlignmentRow>) -> BTreeMap<String, Share> {
    let mut out: BTreeMap<String, Share> = BTreeMap::new();
    let mut per_item: BTreeMap<(String, u32), Vec<f64>> = BTreeMap::new();
    let mut per_dim: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for a in list {
        let share = out.entry(a.character.clone()).or_default();
        // A dimension that failed has no score, and its items count in no spread either: a row's
        // consistency is that of the scores it reports.
        let Some(s) = a.score else { continue };
        per_dim
            .entry((a.character.clone(), a.dimension.clone()))
            .or_default()
            .push(s);
        let scores: Vec<f64> = a.items.iter().filter_map(|i| i.score).collect();
        if !scores.is_empty() {
            share.per_dim_repeat.push(scores);
        }
        for i in &a.items {
            if let Some(s) = i.score {
                per_item.entry((a.character.clone(), i.item_id)).or_default().push(s);
            }
        }
    }
    for ((c, _), scores) in per_item {
        out.entry(c).or_default().per_item.push(scores);
    }
    for ((c, _), scores) in per_dim {
        out.entry(c).or_default().per_dim.push(scores);
    }
    for r in rows {
        out.entry(r.character.clone()).or_default().rows.push(r);
    }
    out
}

/// [`summary_against`] with 95% intervals from `bootstrap` (row `i` on stream `i` of its seed).
pub fn summary_with(
    events: &[Event],
    catalog: &Catalog,
    labels: Option<LabelSource>,
    bootstrap: Option<Bootstrap>,
) -> Vec<SummaryRow> {
    let all = latest_assessments(events);
    let mut by: BTreeMap<(String, Method), Vec<&Assessment>> = BTreeMap::new();
    for a in all {
        by.entry((a.scale.clone(), a.method)).or_default().push(a);
    }
    let mut out = Vec::new();
    for ((scale_id, method), list) in by {
        let Some(scale) = catalog.scale(&scale_id) else {
            continue;
        };
        let (min, max) = scale.dimension_range();
        let order: Vec<String> = scale.dimensions.iter().map(|d| d.name.clone()).collect();
        let labelled = rows(catalog, &scale_id, &list, labels);
        let alignment = metrics::alignment((min, max), &order, &labelled);
        // With no pair scorable there is no alignment, and every pair measured is excluded.
        let unscorable = labelled
            .iter()
            .filter(|r| r.predicted.is_some())
            .map(|r| (r.character.as_str(), r.dimension.as_str()))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let repeats = list.iter().map(|a| a.repeat).max().map_or(0, |r| r + 1);
        let item_span = scale.range.span();
        let several = repeats > 1;
        let consistency = |shares: &[&Share]| {
            let groups = |f: fn(&Share) -> &Vec<Vec<f64>>| -> Vec<&[f64]> {
                shares.iter().flat_map(|s| f(s).iter().map(Vec::as_slice)).collect()
            };
            [
                (several && method.item_level())
                    .then(|| metrics::std_item(groups(|s| &s.per_item), item_span))
                    .flatten(),
                method
                    .item_level()
                    .then(|| metrics::std_dim(groups(|s| &s.per_dim_repeat), item_span))
                    .flatten(),
                several
                    .then(|| metrics::std_score(groups(|s| &s.per_dim), max - min))
                    .flatten(),
            ]
        };
        let shares = shares(&list, rows(catalog, &scale_id, &list, labels));
        let all_shares: Vec<&Share> = shares.values().collect();
        let [std_item, std_dim, std_score] = consistency(&all_shares);
        let intervals = bootstrap.map(|b| {
            let units: Vec<&Share> = shares.values().collect();
            // Acc_Dim, Acc_Full and MAE resample the characters that have scores: one scored
            // character among two gives no interval, as one character alone does.
            let tallies: Vec<metrics::CharacterTally> = units
                .iter()
                .map(|u| metrics::CharacterTally::of(&u.rows, (min, max)))
                .filter(metrics::CharacterTally::scored)
                .collect();
            let stream = b.stream(out.len() as u64);
            let [acc_dim, acc_full, mae] = resample::intervals(tallies.len(), stream, |drawn| {
                // Each draw is a character of its own (Acc_Full counts it once per draw).
                let a = metrics::overall_of(drawn.iter().map(|&u| &tallies[u]));
                [a.map(|a| a.0), a.map(|a| a.1), a.map(|a| a.2)]
            });
            // The consistency figures resample the characters that have one: a character whose
            // every assessment failed is no unit of theirs.
            let consistent: Vec<&Share> = units
                .iter()
                .copied()
                .filter(|u| consistency(&[u]).iter().any(Option::is_some))
                .collect();
            let [i, d, s] = resample::intervals(consistent.len(), stream, |drawn| {
                let drawn_shares: Vec<&Share> = drawn.iter().map(|&u| consistent[u]).collect();
                consistency(&drawn_shares)
            });
            let cis = [acc_dim, acc_full, mae, i, d, s];
            let at = |value: Option<f64>, ci: Option<[f64; 2]>| Interval {
                value,
                ci: value.and(ci),
            };
            Intervals {
                acc_dim: at(alignment.as_ref().map(|a| a.overall.acc_dim), cis[0]),
                acc_full: at(alignment.as_ref().map(|a| a.overall.acc_full), cis[1]),
                mae: at(alignment.as_ref().map(|a| a.overall.mae), cis[2]),
                std_item: std_item.map(|v| at(Some(v), cis[3])),
                std_dim: std_dim.map(|v| at(Some(v), cis[4])),
                std_score: std_score.map(|v| at(Some(v), cis[5])),
            }
        });
        out.push(SummaryRow {
            scale: scale_id.clone(),
            method: method.name().into(),
            acc_dim: alignment.as_ref().map(|a| a.overall.acc_dim),
            acc_full: alignment.as_ref().map(|a| a.overall.acc_full),
            mae: alignment.as_ref().map(|a| a.overall.mae),
            std_item,
            std_dim,
            std_score,
            count: alignment.as_ref().map_or(0, |a| a.overall.count),
            excluded: alignment.as_ref().map_or(unscorable, |a| a.overall.excluded),
            refusals: list.iter().flat_map(|a| &a.items).filter(|i| i.refused).count(),
            failed_dimensions: list.iter().filter(|a| a.score.is_none()).count(),
            failed_items: list
                .iter()
                .filter(|a| a.score.is_some())
                .map(|a| a.failed_items().len())
                .sum(),
            intervals,
        });
    }
    out
}

/// The one way the tool writes CSV: every cell passes [`crate::text::csv_cell`], so a cell that a
/// spreadsheet would run as a formula (`=HYPERLINK(…)`, `@SUM(…)`, from an imported note or a user
/// scale's names) arrives as text, while numbers stay numbers.
pub struct SafeCsv {
    writer: csv::Writer<Vec<u8>>,
}

impl Default for SafeCsv {
    fn default() -> SafeCsv {
        SafeCsv::new()
    }
}

impl SafeCsv {
    pub fn new() -> SafeCsv {
        SafeCsv {
            writer: csv::Writer::from_writer(Vec::new()),
        }
    }

    pub fn record<I, S>(&mut self, fields: I) -> csv::Result<()>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.writer.write_record(
            fields
                .into_iter()
                .map(|f| crate::text::csv_cell(f.as_ref()).into_owned()),
        )
    }

    pub fn finish(self) -> csv::Result<String> {
        let bytes = self.writer.into_inner().map_err(|e| csv::Error::from(e.into_error()))?;
        // Every byte came from a `str`.
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

pub use crate::text::json_for_terminal;


/// Tidy rows: `character,scale,method,repeat,dimension,score,label_pdb,label_annotation,pred_type,label_type,correct,label_target,label_source`
/// (`label_type` and `correct` are against `label_source`'s label, the one MAE counts by default).
pub fn csv(events: &[Event], catalog: &Catalog) -> csv::Result<String> {
    let mut w = SafeCsv::new();
    w.record([
        "character",
        "scale",
        "method",
        "repeat",
        "dimension",
        "score",
        "label_pdb",
        "label_annotation",
        "pred_type",
        "label_type",
        "correct",
        "label_target",
        "label_source",
    ])?;
    // A character or scale no longer in the catalog keeps its rows: its scores are the session's,
    // only its labels (or, without the scale's range, its predicted type) are left blank.
    for a in latest_assessments(events) {
        let (c, scale) = (catalog.character(&a.character), catalog.scale(&a.scale));
        // A label's score, else its letter (a target "H" has no score; a label without one is "X").
        let label = |src| {
            c.and_then(|c| c.labels.get(src, &a.scale, &a.dimension))
                .map_or(String::new(), |l| l.score.map_or(format!("{:?}", l.kind), |s| s.to_string()))
        };
        let source = c.map(|c| c.labels.exclusion_source(&a.scale));
        let exclusion = c.zip(source).and_then(|(c, source)| c.labels.get(source, &a.scale, &a.dimension));
        let pred = scale.and_then(|scale| {
            let (min, max) = scale.dimension_range();
            a.score.map(|s| if crate::domain::metrics::is_high(s, (min, max)) { "H" } else { "L" })
        });
        let label_type = exclusion.map(|l| format!("{:?}", l.kind)).unwrap_or_default();
        let correct = match (pred, exclusion.map(|l| l.kind)) {
            (Some(_), Some(LabelType::X)) | (None, _) | (_, None) => String::new(),
            (Some(p), Some(k)) => (format!("{k:?}") == p).to_string(),
        };
        w.record([
            a.character.clone(),
            a.scale.clone(),
            a.method.name().to_string(),
            a.repeat.to_string(),
            a.dimension.clone(),
            a.score.map_or(String::new(), |s| s.to_string()),
            label(LabelSource::Pdb),
            label(LabelSource::Annotation),
            pred.unwrap_or("").to_string(),
            label_type,
            correct,
            label(LabelSource::Target),
            // Only where a label is compared (a character without one on the scale has none).
            source.filter(|_| exclusion.is_some()).map_or(String::new(), |s| s.name().to_string()),
        ])?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An OC assessment of `dimension` at `repeat` with these item scores, scored or failed.
    fn assessed(dimension: &str, repeat: u32, items: &[f64], scored: bool) -> Assessment {
        Assessment {
            character: "c".into(),
            scale: "BFI".into(),
            method: Method::Oc,
            repeat,
            dimension: dimension.into(),
            score: scored.then(|| items.iter().sum::<f64>() / items.len() as f64),
            batches: Vec::new(),
            calls: Vec::new(),
            items: items
                .iter()
                .enumerate()
                .map(|(i, &s)| crate::method::convert::ConvertedItem {
                    item_id: i as u32 + 1,
                    option: None,
                    score: Some(s),
                    refused: false,
                    weighed: None,
                    error: None,
                })
                .collect(),
            failure: (!scored).then(|| "interview items [3] failed".into()),
            fitted: None,
            conversions: Vec::new(),
        }
    }

    #[test]
    fn a_failed_dimension_counts_in_no_spread() {
        let list = [
            assessed("E", 0, &[1.0, 5.0], false),
            assessed("E", 1, &[2.0, 4.0], false),
            assessed("A", 0, &[3.0, 3.0], true),
            assessed("A", 1, &[4.0, 2.0], true),
        ];
        let all = shares(&list.iter().collect::<Vec<_>>(), Vec::new());
        let share = &all["c"];
        assert_eq!(share.per_dim_repeat, vec![vec![3.0, 3.0], vec![4.0, 2.0]]);
        assert_eq!(share.per_item, vec![vec![3.0, 4.0], vec![3.0, 2.0]]);
        assert_eq!(share.per_dim, vec![vec![3.0, 3.0]]);
        // Every dimension failed: the character is there, with no spread at all.
        let failed = shares(&list[..2].iter().collect::<Vec<_>>(), Vec::new());
        let share = &failed["c"];
        assert!(share.per_dim_repeat.is_empty() && share.per_item.is_empty() && share.per_dim.is_empty());
    }

    /// Two characters, one whose every assessment failed: one character has a spread, so there is
    /// no interval of it (before, a one-character resample printed [v, v]).
    #[test]
    fn a_spread_of_one_character_among_two_has_no_interval() {
        let catalog = Catalog::load(None).unwrap();
        let mut events = Vec::new();
        for (character, scored) in [("hermione-en", true), ("snape-en", false)] {
            for dimension in ["Extraversion", "Agreeableness"] {
                let mut a = assessed(dimension, 0, &[4.0, 2.0, 5.0], scored);
                a.character = character.into();
                events.push(Event::DimensionAssessed(a));
            }
        }
        let bootstrap = Bootstrap {
            resamples: 200,
            seed: 1,
        };
        let rows = summary_with(&events, &catalog, None, Some(bootstrap));
        let std_dim = rows[0].intervals.as_ref().unwrap().std_dim.unwrap();
        assert!(std_dim.value.is_some(), "{:?}", rows[0]);
        assert_eq!(std_dim.ci, None, "{:?}", rows[0]);
    }

    /// An export lists the items that failed for good with why (one a resume answered is not
    /// among them), and the versions a resume went on with.
    #[test]
    fn an_export_says_which_items_failed_and_every_version_it_ran() {
        let catalog = Catalog::load(None).unwrap();
        let lines = [
            r#"{"event":"run_started","session":"s","name":null,"created":"2026-01-01T00:00:00Z","app_version":"0.1.0","character_versions":{"hermione-en":"v1"},"plan":{"characters":["hermione-en"],"scales":["GSE"],"methods":["er-batch"],"repeats":1,"rpa":"p","judge":"p","style":"description","seed":1,"max_attempts":5},"providers":{}}"#,
            r#"{"event":"item_failed","character":"hermione-en","scale":"GSE","repeat":0,"style":"open","item_id":2,"error":"gave up after 5 attempts"}"#,
            r#"{"event":"item_failed","character":"hermione-en","scale":"GSE","repeat":0,"style":"open","item_id":5,"error":"refused (400)"}"#,
            r#"{"event":"item_answered","character":"hermione-en","scale":"GSE","repeat":0,"style":"open","item_id":1,"question":"q","response":"r"}"#,
            r#"{"event":"resumed","at":"2026-01-02T00:00:00Z","character_versions":{"hermione-en":"v2"}}"#,
            r#"{"event":"item_answered","character":"hermione-en","scale":"GSE","repeat":0,"style":"open","item_id":2,"question":"q","response":"r"}"#,
        ];
        let events: Vec<Event> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        let export = export(&events, &catalog);
        let interview = &export["interviews"][0];
        assert_eq!(interview["items"].as_array().unwrap().len(), 2, "{export:#}");
        let failed = interview["failed"].as_array().unwrap();
        assert_eq!(failed.len(), 1, "item 2 was answered on the resume: {export:#}");
        assert_eq!(failed[0]["item_id"], 5);
        assert_eq!(failed[0]["error"], "refused (400)");
        assert_eq!(export["session"]["later_character_versions"], json!({"hermione-en": ["v2"]}));
        // A session with no failure and no resume exports as before.
        let clean = export_of_first(&events);
        assert!(clean["interviews"][0].get("failed").is_none(), "{clean:#}");
        assert!(clean["session"].get("later_character_versions").is_none(), "{clean:#}");
    }

    fn export_of_first(events: &[Event]) -> Value {
        let kept: Vec<Event> = events
            .iter()
            .filter(|e| matches!(e, Event::RunStarted { .. } | Event::ItemAnswered { .. }))
            .take(2)
            .cloned()
            .collect();
        export(&kept, &Catalog::load(None).unwrap())
    }

    #[test]
    fn a_character_no_longer_in_the_catalog_keeps_its_rows_without_labels() {
        let catalog = Catalog::load(None).unwrap();
        let mut gone = assessed("Extraversion", 0, &[4.0, 5.0], true);
        gone.character = "gone-en".into();
        let mut known = gone.clone();
        known.character = "hermione-en".into();
        let events = [Event::DimensionAssessed(gone), Event::DimensionAssessed(known)];
        let text = csv(&events, &catalog).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert_eq!(rows[1], "gone-en,BFI,oc,0,Extraversion,4.5,,,H,,,,", "{text}");
        assert!(rows[2].starts_with("hermione-en,BFI,oc,0,Extraversion,4.5,"), "{text}");
        assert!(rows[2].ends_with(",,pdb"), "labelled, against PDb: {text}");
    }

    /// A character with targets only is scored against them: the row carries the target (a score,
    /// or its letter) and says which label its type and correctness are against.
    #[test]
    fn a_target_is_a_column_and_the_label_compared_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("characters")).unwrap();
        std::fs::write(
            dir.path().join("characters").join("c.toml"),
            "id = \"c\"\nname = \"C\"\nlanguage = \"en\"\nexperimenter = \"B\"\ndescription = \"x\"\n\
             [targets.BFI]\nExtraversion = \"H\"\nAgreeableness = 2.0\n",
        )
        .unwrap();
        let catalog = Catalog::load(Some(dir.path())).unwrap();
        let events = [
            Event::DimensionAssessed(assessed("Extraversion", 0, &[2.0, 3.0], true)),
            Event::DimensionAssessed(assessed("Agreeableness", 0, &[2.0, 3.0], true)),
        ];
        let text = csv(&events, &catalog).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows[1], "c,BFI,oc,0,Agreeableness,2.5,,,L,L,true,2,target", "{text}");
        assert_eq!(rows[2], "c,BFI,oc,0,Extraversion,2.5,,,L,H,false,H,target", "{text}");
    }

    #[test]
    fn every_cell_is_neutralised_and_numbers_stay_numbers() {
        let mut w = SafeCsv::new();
        w.record([
            "=HYPERLINK(\"http://evil\",\"x\")",
            "=cmd|' /C calc'!A0",
            "@SUM(1+1)",
            "-1.5",
            "4",
            "a\u{1b}[2Jb",
        ])
        .unwrap();
        let text = w.finish().unwrap();
        assert_eq!(
            text,
            "\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\",'=cmd|' /C calc'!A0,'@SUM(1+1),-1.5,4,a\u{1b}[2Jb\n"
        );
    }

    #[test]
    fn a_terminal_gets_no_escape_sequences_and_keeps_newlines_in_cells() {
        let mut w = SafeCsv::new();
        w.record([
            "a\u{1b}[2Jb",
            "\u{1b}]52;c;ZXZpbA==\u{7}ok",
            "\u{1b}[0m=cmd|' /C calc'!A0",
            "two\nlines",
            "3",
        ])
        .unwrap();
        let mut shown = Vec::new();
        {
            use std::io::Write;
            let mut terminal = crate::text::Safe::new(&mut shown);
            terminal.write_all(w.finish().unwrap().as_bytes()).unwrap();
        }
        let text = String::from_utf8(shown).unwrap();
        assert_eq!(text, "ab,ok,'=cmd|' /C calc'!A0,\"two\nlines\",3\n");
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(text.as_bytes());
        let row = reader.records().next().unwrap().unwrap();
        assert_eq!(&row[3], "two\nlines");
    }

    #[test]
    fn json_for_a_terminal_escapes_what_would_steer_it_and_means_the_same() {
        let value = json!({"note": "a\u{9b}2Jb\u{202e}c\u{7f}", "plain": "x\ny"});
        let text = serde_json::to_string_pretty(&value).unwrap();
        let shown = json_for_terminal(&text);
        assert!(
            !shown.contains('\u{9b}') && !shown.contains('\u{202e}') && !shown.contains('\u{7f}'),
            "{shown}"
        );
        assert!(shown.contains("a\\u009b2Jb\\u202ec\\u007f"), "{shown}");
        assert_eq!(serde_json::from_str::<Value>(&shown).unwrap(), value);
    }
}
