//! From chosen options to scores: reverse keying, refusals, dimension aggregation, and the
//! 16Personalities "% of the first pole" that replaces the closed 16personalities.com scoring.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::scale::{Keying, Scale, ScoreRange};

/// What was chosen for one item: an option in the scale's range, or a refusal ("x").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ItemOption {
    Value(i32),
    Refused,
}

/// Which way an option points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orientation {
    /// Agreement with the item's statement (OC, SR, SR-CoT): reverse-keyed items are flipped.
    Statement,
    /// Already in the dimension's direction (d-OC anchors name the poles): never flipped.
    Dimension,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ItemScore {
    /// In the dimension's direction, on the item range.
    pub value: f64,
    /// The option was "x": the value is the midpoint and the refusal is counted.
    pub refused: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DimensionScore {
    /// The mean item score, or for pole-percent scales the % of the first pole (0–100).
    pub value: f64,
    pub items: usize,
    pub refusals: usize,
}

#[derive(Debug, Error, PartialEq)]
pub enum ScoringError {
    #[error("option {option} for item {item} is outside the range [{min}, {max}]")]
    OutOfRange { item: u32, option: i32, min: i32, max: i32 },
    #[error("item {0} is not a scored item of this scale")]
    UnknownItem(u32),
}

/// Reverse score: min + max − raw.
pub fn reverse(range: ScoreRange, raw: f64) -> f64 {
    f64::from(range.min + range.max) - raw
}

/// The score of one item in its dimension's direction.
pub fn item_score(
    item: u32,
    range: ScoreRange,
    keying: &Keying,
    option: ItemOption,
    orientation: Orientation,
) -> Result<ItemScore, ScoringError> {
    match option {
        ItemOption::Refused => Ok(ItemScore {
            value: range.midpoint(),
            refused: true,
        }),
        ItemOption::Value(v) if !range.contains(v) => Err(ScoringError::OutOfRange {
            item,
            option: v,
            min: range.min,
            max: range.max,
        }),
        ItemOption::Value(v) => {
            let raw = f64::from(v);
            let value = match orientation {
                Orientation::Statement if !keying.is_positive() => reverse(range, raw),
                _ => raw,
            };
            Ok(ItemScore { value, refused: false })
        }
    }
}

/// Aggregates item scores of one dimension: their mean, or for pole-percent scales
/// mean((score − min) / (max − min)) × 100, the % of the first pole.
pub fn aggregate(scale: &Scale, scores: &[ItemScore]) -> Option<DimensionScore> {
    if scores.is_empty() {
        return None;
    }
    let n = scores.len() as f64;
    let mean = scores.iter().map(|s| s.value).sum::<f64>() / n;
    let value = if scale.is_pole_percent() {
        (mean - f64::from(scale.range.min)) / scale.range.span() * 100.0
    } else {
        mean
    };
    Some(DimensionScore {
        value,
        items: scores.len(),
        refusals: scores.iter().filter(|s| s.refused).count(),
    })
}

/// Scores every dimension from per-item options (item id → option). Dimensions with no answered
/// item are `None`; options for fillers or unknown items are errors.
pub fn score_scale(
    scale: &Scale,
    options: &BTreeMap<u32, ItemOption>,
    orientation: Orientation,
) -> Result<Vec<Option<DimensionScore>>, ScoringError> {
    let mut per_dimension = vec![Vec::new(); scale.dimensions.len()];
    for (&id, &option) in options {
        let item = scale.item(id).ok_or(ScoringError::UnknownItem(id))?;
        let (Some(dimension), Some(keying)) = (item.dimension(), item.keying()) else {
            return Err(ScoringError::UnknownItem(id));
        };
        per_dimension[dimension].push(item_score(id, scale.range, keying, option, orientation)?);
    }
    Ok(per_dimension.iter().map(|scores| aggregate(scale, scores)).collect())
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::diagnostic::Source;
    use crate::domain::scale::tests::TINY;

    fn tiny() -> Scale {
        Scale::parse(Source::new("tiny.toml", TINY)).unwrap()
    }

    #[test]
    fn negative_keying_reverses_statement_options_only() {
        let r = ScoreRange { min: 1, max: 5 };
        let s = |k, o, or| item_score(1, r, &k, ItemOption::Value(o), or).unwrap().value;
        assert_eq!(s(Keying::Positive, 2, Orientation::Statement), 2.0);
        assert_eq!(s(Keying::Negative, 2, Orientation::Statement), 4.0);
        assert_eq!(s(Keying::Negative, 2, Orientation::Dimension), 2.0);
        let zero_based = ScoreRange { min: 0, max: 4 };
        assert_eq!(
            item_score(
                1,
                zero_based,
                &Keying::Negative,
                ItemOption::Value(0),
                Orientation::Statement
            )
            .unwrap()
            .value,
            4.0
        );
    }

    #[test]
    fn refusal_is_the_midpoint_and_counted() {
        let r = ScoreRange { min: 1, max: 9 };
        let s = item_score(1, r, &Keying::Negative, ItemOption::Refused, Orientation::Statement).unwrap();
        assert_eq!(
            s,
            ItemScore {
                value: 5.0,
                refused: true
            }
        );
    }

    #[test]
    fn out_of_range_is_an_error_not_a_clamp() {
        let r = ScoreRange { min: 1, max: 5 };
        assert_eq!(
            item_score(7, r, &Keying::Positive, ItemOption::Value(0), Orientation::Statement),
            Err(ScoringError::OutOfRange {
                item: 7,
                option: 0,
                min: 1,
                max: 5
            })
        );
    }

    #[test]
    fn scale_scoring_means_items_and_rejects_fillers() {
        let scale = tiny();
        let opts = BTreeMap::from([(1, ItemOption::Value(5)), (2, ItemOption::Value(2))]);
        let d = score_scale(&scale, &opts, Orientation::Statement).unwrap()[0].unwrap();
        assert_eq!(
            d,
            DimensionScore {
                value: 4.5,
                items: 2,
                refusals: 0
            }
        );
        let opts = BTreeMap::from([(1, ItemOption::Value(5)), (2, ItemOption::Refused)]);
        let d = score_scale(&scale, &opts, Orientation::Statement).unwrap()[0].unwrap();
        assert_eq!(
            d,
            DimensionScore {
                value: 4.0,
                items: 2,
                refusals: 1
            }
        );
        assert_eq!(
            score_scale(
                &scale,
                &BTreeMap::from([(3, ItemOption::Value(1))]),
                Orientation::Statement
            ),
            Err(ScoringError::UnknownItem(3))
        );
        assert_eq!(
            score_scale(&scale, &BTreeMap::new(), Orientation::Statement).unwrap(),
            vec![None]
        );
    }
}
