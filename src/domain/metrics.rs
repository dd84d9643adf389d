//! How well measured personalities match the labels (Acc_Dim, Acc_Full, MAE, MSE with marginal
//! exclusion) and how consistent a method is across items and repeats (Std_Item, Std_Dim, Std_Score).
//! The formulas are those of the InCharacter paper's code; see METHOD.md.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::character::{Label, LabelType};
use super::stats;

/// One measured dimension score with the label it is compared against.
#[derive(Debug, Clone, PartialEq)]
pub struct AlignmentRow {
    pub character: String,
    pub dimension: String,
    pub repeat: u32,
    /// `None`: the dimension was not measured (its assessment failed). It scores no pair, and its
    /// character, when another of its dimensions was scored, is not all correct in that repeat
    /// (Acc_Full): a full profile needs every labelled dimension measured.
    pub predicted: Option<f64>,
    /// The label compared against (from the chosen label source).
    pub label: Label,
    /// The exclusion source marks this pair as marginal (X): left out of every metric.
    pub marginal: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OverallAlignment {
    /// Share of correctly typed (character, dimension) pairs, micro-averaged, mean over repeats.
    pub acc_dim: f64,
    /// Share of characters whose scored dimensions are all correctly typed, mean over repeats.
    pub acc_full: f64,
    /// Mean |predicted − label| / span.
    pub mae: f64,
    /// Mean ((predicted − label) / span)².
    pub mse: f64,
    /// Distinct (character, dimension) pairs that were scored.
    pub count: usize,
    /// Distinct (character, dimension) pairs left out as marginal or with no numeric label.
    pub excluded: usize,
    pub repeats: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DimensionAlignment {
    pub acc: f64,
    pub mae: f64,
    pub mse: f64,
    /// Distinct characters scored on this dimension.
    pub count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alignment {
    pub overall: OverallAlignment,
    /// In the order of `dimension_order`; dimensions with nothing scored are left out.
    pub dimensions: Vec<(String, DimensionAlignment)>,
}

#[derive(Default, Clone, Copy)]
struct Tally {
    n: usize,
    correct: usize,
    abs: f64,
    sq: f64,
}

impl Tally {
    fn add(&mut self, correct: bool, error: f64) {
        self.n += 1;
        self.correct += usize::from(correct);
        self.abs += error.abs();
        self.sq += error * error;
    }
    fn acc(&self) -> f64 {
        self.correct as f64 / self.n as f64
    }
    fn mae(&self) -> f64 {
        self.abs / self.n as f64
    }
    fn mse(&self) -> f64 {
        self.sq / self.n as f64
    }
}

/// Whether a score on `range` is high (H): above the middle, a tie being low (L). A mean that is the
/// middle but for its last bits (67.2, 86.4, 16.1 and 30.3 average to 50.00000000000001) is a tie:
/// within a billionth of the range of the middle, a score is the middle.
pub fn is_high(score: f64, (min, max): (f64, f64)) -> bool {
    score - (min + max) / 2.0 > 1e-9 * (max - min)
}

/// One row as the metrics score it: whether its predicted type ([`is_high`]: H when predicted > the
/// middle of `range`, a tie is L) is the label's, and its signed error on 0–1 (divided by the range's span).
/// A letter target (H or L without a score) is its band, ≥ 0.6 or ≤ 0.4 of the range: the error is
/// the distance to the band, 0 inside it (labels of the paper always have a score or are X).
/// `None`: the row is not scored (marginal, or an X label without a score).
pub fn judge(row: &AlignmentRow, (min, max): (f64, f64)) -> Option<(bool, f64)> {
    let span = max - min;
    let predicted = row.predicted?;
    let error = match (row.marginal, row.label.score, row.label.kind) {
        (false, Some(s), _) => (predicted - s) / span,
        (false, None, LabelType::H) => (predicted - (min + 0.6 * span)).min(0.0) / span,
        (false, None, LabelType::L) => (predicted - (min + 0.4 * span)).max(0.0) / span,
        _ => return None,
    };
    let predicted_type = if is_high(predicted, (min, max)) {
        LabelType::H
    } else {
        LabelType::L
    };
    Some((predicted_type == row.label.kind, error))
}

/// Whether a row not measured (its assessment failed) had a label it would have been scored against.
fn failed_against_a_label(row: &AlignmentRow) -> bool {
    row.predicted.is_none()
        && !row.marginal
        && (row.label.score.is_some() || matches!(row.label.kind, LabelType::H | LabelType::L))
}

/// One character's part of a scale's overall alignment, per repeat: scored pairs, correct ones, the
/// sum of |error|, and whether all were correct. Resampling characters adds these up instead of
/// scoring the rows again ([`overall_of`] equals [`alignment`]'s overall figures on the same rows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CharacterTally {
    per_repeat: BTreeMap<u32, (usize, usize, f64, bool)>,
}

impl CharacterTally {
    /// The tally of one character's `rows` on a scale whose scores live in `range`.
    pub fn of(rows: &[AlignmentRow], range: (f64, f64)) -> CharacterTally {
        let mut per_repeat: BTreeMap<u32, (usize, usize, f64, bool)> = BTreeMap::new();
        for row in rows {
            if let Some((correct, error)) = judge(row, range) {
                let t = per_repeat.entry(row.repeat).or_insert((0, 0, 0.0, true));
                t.0 += 1;
                t.1 += usize::from(correct);
                t.2 += error.abs();
                t.3 &= correct;
            }
        }
        for row in rows.iter().filter(|r| failed_against_a_label(r)) {
            if let Some(t) = per_repeat.get_mut(&row.repeat) {
                t.3 = false;
            }
        }
        CharacterTally { per_repeat }
    }

    /// Whether any of the character's dimensions was scored against a label.
    pub fn scored(&self) -> bool {
        !self.per_repeat.is_empty()
    }
}

/// A repeat's totals over characters: pairs, correct ones, |error|, characters, characters all correct.
type RepeatTotals = (usize, usize, f64, usize, usize);

/// (Acc_Dim, Acc_Full, MAE) of these characters, each counted once per appearance (a character drawn
/// twice counts twice); `None` when nothing was scored.
pub fn overall_of<'a>(characters: impl IntoIterator<Item = &'a CharacterTally>) -> Option<(f64, f64, f64)> {
    let mut by: BTreeMap<u32, RepeatTotals> = BTreeMap::new();
    for c in characters {
        for (repeat, (n, correct, abs, all)) in &c.per_repeat {
            let t = by.entry(*repeat).or_default();
            t.0 += n;
            t.1 += correct;
            t.2 += abs;
            t.3 += 1;
            t.4 += usize::from(*all);
        }
    }
    // A repeat in which nothing was scored (every dimension failed) has no figures.
    by.retain(|_, t| t.0 > 0);
    if by.is_empty() {
        return None;
    }
    let k = by.len() as f64;
    let mean = |f: &dyn Fn(&RepeatTotals) -> f64| by.values().map(f).sum::<f64>() / k;
    Some((
        mean(&|t| t.1 as f64 / t.0 as f64),
        mean(&|t| t.4 as f64 / t.3 as f64),
        mean(&|t| t.2 / t.0 as f64),
    ))
}

/// Computes the alignment metrics for one scale whose dimension scores live in `range`
/// ([min, max] of the scale, or [0, 100] for 16Personalities).
/// A pair is scored when it is not marginal and its label has a numeric score (or is a letter target:
/// then the error is the distance to the label's band); its predicted type is H when predicted >
/// middle (a tie at the middle is L). Returns `None` when nothing could be scored.
pub fn alignment(range: (f64, f64), dimension_order: &[String], rows: &[AlignmentRow]) -> Option<Alignment> {

    let mut overall: BTreeMap<u32, Tally> = BTreeMap::new();
    let mut per_dim: BTreeMap<&str, BTreeMap<u32, Tally>> = BTreeMap::new();
    // repeat → character → all scored dimensions correct so far
    let mut full: BTreeMap<u32, BTreeMap<&str, bool>> = BTreeMap::new();
    let mut scored = BTreeSet::new();
    let mut excluded = BTreeSet::new();
    let mut dim_chars: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();

    // repeat → characters with a labelled dimension not measured: not all correct.
    let mut unmeasured: BTreeSet<(u32, &str)> = BTreeSet::new();
    for row in rows {
        let pair = (row.character.as_str(), row.dimension.as_str());
        if row.predicted.is_none() {
            if failed_against_a_label(row) {
                unmeasured.insert((row.repeat, pair.0));
            }
            continue;
        }
        let Some((correct, error)) = judge(row, range) else {
            excluded.insert(pair);
            continue;
        };
        scored.insert(pair);
        dim_chars.entry(pair.1).or_default().insert(pair.0);
        overall.entry(row.repeat).or_default().add(correct, error);
        per_dim
            .entry(pair.1)
            .or_default()
            .entry(row.repeat)
            .or_default()
            .add(correct, error);
        let all = full.entry(row.repeat).or_default().entry(pair.0).or_insert(true);
        *all &= correct;
    }
    if overall.is_empty() {
        return None;
    }
    // Among the characters with a scored dimension (Acc_Full's), one with a labelled dimension not
    // measured is not all correct.
    for (repeat, character) in unmeasured {
        if let Some(all) = full.get_mut(&repeat).and_then(|chars| chars.get_mut(character)) {
            *all = false;
        }
    }
    let mean_over = |values: Vec<f64>| values.iter().sum::<f64>() / values.len() as f64;
    let overall_alignment = OverallAlignment {
        acc_dim: mean_over(overall.values().map(Tally::acc).collect()),
        acc_full: mean_over(
            full.values()
                .map(|chars| chars.values().filter(|&&ok| ok).count() as f64 / chars.len() as f64)
                .collect(),
        ),
        mae: mean_over(overall.values().map(Tally::mae).collect()),
        mse: mean_over(overall.values().map(Tally::mse).collect()),
        count: scored.len(),
        excluded: excluded.difference(&scored).count(),
        repeats: overall.len(),
    };
    let dimensions = dimension_order
        .iter()
        .filter_map(|name| {
            let repeats = per_dim.get(name.as_str())?;
            Some((
                name.clone(),
                DimensionAlignment {
                    acc: mean_over(repeats.values().map(Tally::acc).collect()),
                    mae: mean_over(repeats.values().map(Tally::mae).collect()),
                    mse: mean_over(repeats.values().map(Tally::mse).collect()),
                    count: dim_chars[name.as_str()].len(),
                },
            ))
        })
        .collect();
    Some(Alignment {
        overall: overall_alignment,
        dimensions,
    })
}

/// Mean over groups of the population standard deviation within each group, divided by `span`.
/// Groups with fewer than two values carry no spread information and are skipped.
fn mean_spread<'a>(groups: impl IntoIterator<Item = &'a [f64]>, span: f64) -> Option<f64> {
    let stds: Vec<f64> = groups
        .into_iter()
        .filter(|g| g.len() >= 2)
        .filter_map(stats::population_std)
        .collect();
    (!stds.is_empty()).then(|| stds.iter().sum::<f64>() / stds.len() as f64 / span)
}

/// Std_Item: for each item, its scores across repeats (one group per item); `span` is the item range.
pub fn std_item<'a>(per_item_across_repeats: impl IntoIterator<Item = &'a [f64]>, span: f64) -> Option<f64> {
    mean_spread(per_item_across_repeats, span)
}

/// Std_Dim: for each (dimension, repeat), the item scores within the dimension (in the dimension's
/// direction); `span` is the item range. For 16P this equals the spread on the % scale ÷ 100.
pub fn std_dim<'a>(per_dimension_and_repeat: impl IntoIterator<Item = &'a [f64]>, span: f64) -> Option<f64> {
    mean_spread(per_dimension_and_repeat, span)
}

/// Std_Score: for each dimension, its scores across repeats; `span` is the dimension range (100 for 16P).
pub fn std_score<'a>(per_dimension_across_repeats: impl IntoIterator<Item = &'a [f64]>, span: f64) -> Option<f64> {
    mean_spread(per_dimension_across_repeats, span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_per_character_add_up_to_the_alignment_of_their_rows() {
        let order: Vec<String> = ["A", "B", "C"].iter().map(|s| s.to_string()).collect();
        let label = |score: f64| Label {
            score: Some(score),
            kind: if score > 3.0 { LabelType::H } else { LabelType::L },
        };
        let mut rng = crate::domain::rng::SplitMix64(3);
        // Five characters, two repeats, a marginal pair now and then.
        let rows_of = |c: usize, rng: &mut crate::domain::rng::SplitMix64| -> Vec<AlignmentRow> {
            let mut rows = Vec::new();
            for repeat in 0..2 {
                for d in &order {
                    rows.push(AlignmentRow {
                        character: format!("c{c}"),
                        dimension: d.clone(),
                        repeat,
                        // Now and then a dimension not measured (its assessment failed).
                        predicted: (rng.below(6) != 0).then(|| 1.0 + 4.0 * rng.unit()),
                        label: label(1.0 + 4.0 * rng.unit()),
                        marginal: rng.below(7) == 0,
                    });
                }
            }
            rows
        };
        let characters: Vec<Vec<AlignmentRow>> = (0..5).map(|c| rows_of(c, &mut rng)).collect();
        let tallies: Vec<CharacterTally> = characters.iter().map(|r| CharacterTally::of(r, (1.0, 5.0))).collect();
        // A draw with repeats: each drawn character renamed, as the bootstrap counts it.
        let drawn = [0usize, 3, 3, 1, 4];
        let rows: Vec<AlignmentRow> = drawn
            .iter()
            .enumerate()
            .flat_map(|(k, &c)| {
                characters[c].iter().map(move |r| AlignmentRow {
                    character: format!("draw{k}"),
                    ..r.clone()
                })
            })
            .collect();
        let whole = alignment((1.0, 5.0), &order, &rows).unwrap().overall;
        let (acc_dim, acc_full, mae) = overall_of(drawn.iter().map(|&c| &tallies[c])).unwrap();
        assert!((whole.acc_dim - acc_dim).abs() < 1e-12);
        assert!((whole.acc_full - acc_full).abs() < 1e-12);
        assert!((whole.mae - mae).abs() < 1e-12);
        assert_eq!(overall_of(std::iter::empty()), None);
    }

    /// A dimension that failed scores no pair, but its character's profile is not all correct: the
    /// more a judge fails, the higher Acc_Full would otherwise go.
    #[test]
    fn a_failed_dimension_keeps_its_character_from_full_accuracy() {
        let order: Vec<String> = ["A", "B", "C"].iter().map(|s| s.to_string()).collect();
        let mut rows = vec![
            row("c", "A", 0, 4.0, Some(4.5), LabelType::H, false),
            row("c", "B", 0, 2.0, Some(1.5), LabelType::L, false),
            row("c", "C", 0, 0.0, Some(4.0), LabelType::H, false),
        ];
        rows[2].predicted = None;
        let a = alignment((1.0, 5.0), &order, &rows).unwrap().overall;
        assert_eq!((a.acc_dim, a.acc_full, a.count), (1.0, 0.0, 2));
        let tally = CharacterTally::of(&rows, (1.0, 5.0));
        assert_eq!(overall_of([&tally]).map(|o| o.1), Some(0.0));
        // A failed dimension without a label (marginal) asks nothing of the profile.
        rows[2].marginal = true;
        assert_eq!(alignment((1.0, 5.0), &order, &rows).unwrap().overall.acc_full, 1.0);
        // A character none of whose dimensions was measured is not among Acc_Full's characters (it
        // has no scored dimension), nor a unit of the bootstrap's.
        let mut two = rows.clone();
        two[2].marginal = false;
        two.extend(rows.iter().map(|r| AlignmentRow { character: "d".into(), predicted: None, marginal: false, ..r.clone() }));
        let a = alignment((1.0, 5.0), &order, &two).unwrap().overall;
        assert_eq!((a.acc_dim, a.acc_full), (1.0, 0.0), "c alone counts, and is not all correct");
        let d: Vec<AlignmentRow> = two.iter().filter(|r| r.character == "d").cloned().collect();
        assert!(!CharacterTally::of(&d, (1.0, 5.0)).scored());
        // Nothing measured at all: no figures, rather than a division by nothing.
        let none: Vec<AlignmentRow> = rows.iter().map(|r| AlignmentRow { predicted: None, marginal: false, ..r.clone() }).collect();
        assert!(alignment((1.0, 5.0), &order, &none).is_none());
        assert_eq!(overall_of([&CharacterTally::of(&none, (1.0, 5.0))]), None);
    }

    #[test]
    fn a_letter_target_is_scored_by_its_band() {
        let order = vec!["A".to_string()];
        let target = |kind| Label { score: None, kind };
        let at = |p: f64, kind| {
            let r = AlignmentRow {
                character: "c".into(),
                dimension: "A".into(),
                repeat: 0,
                predicted: Some(p),
                label: target(kind),
                marginal: false,
            };
            alignment((1.0, 5.0), &order, &[r]).unwrap().overall
        };
        // [1, 5]: the H band starts at 3.4, the L band ends at 2.6.
        assert_eq!((at(4.0, LabelType::H).acc_dim, at(4.0, LabelType::H).mae), (1.0, 0.0));
        assert!((at(2.6, LabelType::H).mae - 0.2).abs() < 1e-12);
        assert_eq!(at(2.6, LabelType::H).acc_dim, 0.0);
        assert!((at(4.6, LabelType::L).mae - 0.5).abs() < 1e-12);
        assert_eq!(at(2.0, LabelType::L).mae, 0.0);
        // A dimension without a target (X, no score) is left out, as a marginal label is.
        let none = AlignmentRow {
            character: "c".into(),
            dimension: "A".into(),
            repeat: 0,
            predicted: Some(3.0),
            label: target(LabelType::X),
            marginal: false,
        };
        assert!(alignment((1.0, 5.0), &order, &[none]).is_none());
    }

    fn row(c: &str, d: &str, r: u32, p: f64, score: Option<f64>, kind: LabelType, marginal: bool) -> AlignmentRow {
        AlignmentRow {
            character: c.into(),
            dimension: d.into(),
            repeat: r,
            predicted: Some(p),
            label: Label { score, kind },
            marginal,
        }
    }

    fn dims(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hand_computed_one_repeat_with_marginal_and_midpoint_tie() {
        use LabelType::*;
        // Range 1–5: middle 3, span 4.
        let rows = vec![
            row("a", "E", 0, 4.0, Some(5.0), H, false), // correct, err -0.25
            row("a", "N", 0, 3.0, Some(4.0), H, false), // tie at middle → L: wrong, err -0.25
            row("b", "E", 0, 2.0, Some(1.0), L, false), // correct, err +0.25
            row("b", "N", 0, 5.0, Some(3.0), X, true),  // marginal: excluded
            row("c", "E", 0, 1.0, Some(4.5), H, false), // wrong, err -0.875
        ];
        let a = alignment((1.0, 5.0), &dims(&["E", "N"]), &rows).unwrap();
        let o = a.overall;
        assert_eq!(o.count, 4);
        assert_eq!(o.excluded, 1);
        assert!((o.acc_dim - 0.5).abs() < 1e-12);
        // a: E ok, N wrong → not full; b: E ok → full; c: wrong.
        assert!((o.acc_full - 1.0 / 3.0).abs() < 1e-12);
        assert!((o.mae - (0.25 + 0.25 + 0.25 + 0.875) / 4.0).abs() < 1e-12);
        assert!((o.mse - (3.0 * 0.0625 + 0.765625) / 4.0).abs() < 1e-12);
        let e = a.dimensions[0].1;
        assert_eq!(a.dimensions[0].0, "E");
        assert!((e.acc - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(e.count, 3);
        let n = a.dimensions[1].1;
        assert_eq!((n.acc, n.count), (0.0, 1));
    }

    #[test]
    fn a_mean_at_the_middle_but_for_its_last_bits_is_a_tie() {
        let mean = [67.2, 86.4, 16.1, 30.3].iter().sum::<f64>() / 4.0;
        assert!(mean > 50.0, "the float sum lands a hair above: {mean}");
        assert!(!is_high(mean, (0.0, 100.0)));
        assert!(is_high(50.000001, (0.0, 100.0)));
        assert!(!is_high(3.0, (1.0, 5.0)) && is_high(3.01, (1.0, 5.0)));
    }

    #[test]
    fn sixteen_p_on_percent_scale_averaged_over_repeats() {
        use LabelType::*;
        // 0–100: middle 50, span 100.
        let rows = vec![
            row("a", "E/I", 0, 70.0, Some(80.0), H, false), // ok, err -0.1
            row("a", "E/I", 1, 50.0, Some(80.0), H, false), // tie → L wrong, err -0.3
            row("b", "E/I", 0, 20.0, Some(10.0), L, false), // ok, err 0.1
            row("b", "E/I", 1, 30.0, Some(10.0), L, false), // ok, err 0.2
        ];
        let a = alignment((0.0, 100.0), &dims(&["E/I"]), &rows).unwrap();
        assert!((a.overall.acc_dim - (1.0 + 0.5) / 2.0).abs() < 1e-12);
        assert!((a.overall.acc_full - (1.0 + 0.5) / 2.0).abs() < 1e-12);
        assert!((a.overall.mae - (0.1 + 0.25) / 2.0).abs() < 1e-12);
        assert!((a.overall.mse - ((0.01 + 0.01) / 2.0 + (0.09 + 0.04) / 2.0) / 2.0).abs() < 1e-12);
        assert_eq!((a.overall.count, a.overall.repeats), (2, 2));
    }

    #[test]
    fn x_scores_are_excluded_and_nothing_scored_is_none() {
        let rows = vec![row("a", "E", 0, 4.0, None, LabelType::X, false)];
        assert_eq!(alignment((1.0, 5.0), &dims(&["E"]), &rows), None);
    }

    #[test]
    fn consistency_is_mean_population_std_over_span() {
        let items: Vec<&[f64]> = vec![&[1.0, 3.0], &[2.0, 2.0], &[5.0]];
        // stds 1 and 0 (single-value group skipped) → mean 0.5, / span 4.
        assert_eq!(std_item(items, 4.0), Some(0.125));
        let dims: Vec<&[f64]> = vec![&[0.0, 50.0, 100.0]];
        let expected = (5000.0f64 / 3.0).sqrt() / 100.0;
        assert!((std_score(dims, 100.0).unwrap() - expected).abs() < 1e-12);
        assert_eq!(std_dim(Vec::<&[f64]>::new(), 4.0), None);
    }
}
