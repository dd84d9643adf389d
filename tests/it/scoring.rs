//! Keying and scoring of every bundled scale: which items are reverse-keyed, and what a respondent who
//! answers the maximum (or the minimum) everywhere scores on each dimension.

use std::collections::BTreeMap;

use incharacter::catalog::Catalog;
use incharacter::domain::scale::Scale;
use incharacter::domain::scoring::{ItemOption, Orientation, score_scale};

fn all(scale: &Scale, option: ItemOption) -> BTreeMap<u32, ItemOption> {
    scale.scored_items().map(|i| (i.id, option)).collect()
}

/// (scale, reverse-keyed scored items) — METHOD.md's table; 16P counts items keyed to the second pole.
const REVERSED: [(&str, usize); 15] = [
    ("BFI", 16),
    ("16Personalities", 33),
    ("BSRI", 0),
    ("CABIN", 0),
    ("DTDD", 0),
    ("ECR-R", 14),
    ("EIS", 3),
    ("Empathy", 4),
    ("EPQ-R", 37),
    ("GSE", 0),
    ("ICB", 4),
    ("LMS", 0),
    ("LOT-R", 2),
    ("WLEIS", 0),
    ("IPIP-50", 24),
];

#[test]
fn reverse_keyed_counts_match_the_instruments() {
    let catalog = Catalog::bundled().unwrap();
    for (id, reversed) in REVERSED {
        let scale = catalog.scale(id).unwrap();
        let n = scale
            .scored_items()
            .filter(|i| !i.keying().unwrap().is_positive())
            .count();
        assert_eq!(n, reversed, "{id}");
    }
    let lot = catalog.scale("LOT-R").unwrap();
    let scored: Vec<u32> = lot.scored_items().map(|i| i.id).collect();
    assert_eq!(scored, [1, 3, 4, 7, 10]);
    let reverse: Vec<u32> = lot
        .scored_items()
        .filter(|i| !i.keying().unwrap().is_positive())
        .map(|i| i.id)
        .collect();
    assert_eq!(reverse, [3, 7]);
}

#[test]
fn extreme_answers_score_every_dimension_by_its_keying() {
    let catalog = Catalog::bundled().unwrap();
    for entry in &catalog.scales {
        let scale = &entry.value;
        let (min, max) = (f64::from(scale.range.min), f64::from(scale.range.max));
        for (option, positive_value, negative_value) in [
            (ItemOption::Value(scale.range.max), max, min),
            (ItemOption::Value(scale.range.min), min, max),
        ] {
            let scores = score_scale(scale, &all(scale, option), Orientation::Statement).unwrap();
            for (index, dimension) in scale.dimensions.iter().enumerate() {
                let items: Vec<_> = scale.items_of(index).collect();
                let positive = items.iter().filter(|i| i.keying().unwrap().is_positive()).count() as f64;
                let n = items.len() as f64;
                let mean = (positive * positive_value + (n - positive) * negative_value) / n;
                let expected = if scale.is_pole_percent() {
                    (mean - min) / (max - min) * 100.0
                } else {
                    mean
                };
                let got = scores[index].unwrap();
                assert!(
                    (got.value - expected).abs() < 1e-12,
                    "{} {}: {} != {expected}",
                    scale.id,
                    dimension.name,
                    got.value
                );
                assert_eq!((got.items, got.refusals), (items.len(), 0));
            }
            // d-OC options already point along the dimension: never flipped.
            let directional = score_scale(scale, &all(scale, option), Orientation::Dimension).unwrap();
            for score in directional {
                let expected = if scale.is_pole_percent() {
                    (positive_value - min) / (max - min) * 100.0
                } else {
                    positive_value
                };
                assert!((score.unwrap().value - expected).abs() < 1e-12, "{} d-OC", scale.id);
            }
        }
    }
}

#[test]
fn pinned_values_for_bfi_and_16p() {
    let catalog = Catalog::bundled().unwrap();
    let bfi = catalog.scale("BFI").unwrap();
    let scores = score_scale(bfi, &all(bfi, ItemOption::Value(5)), Orientation::Statement).unwrap();
    // Extraversion: 8 items, 3 reverse (6, 21, 31) → (5·5 + 3·1) / 8.
    let e = bfi.dimension_index("Extraversion").unwrap();
    assert_eq!(scores[e].unwrap().value, 3.5);
    let p16 = catalog.scale("16Personalities").unwrap();
    let scores = score_scale(p16, &all(p16, ItemOption::Value(7)), Orientation::Statement).unwrap();
    // E/I: 7 of 13 items keyed E → 7/13 of the way to the E pole.
    assert!((scores[0].unwrap().value - 700.0 / 13.0).abs() < 1e-12);
    // Refusals everywhere: the midpoint, 50 %, with every refusal counted.
    let scores = score_scale(p16, &all(p16, ItemOption::Refused), Orientation::Statement).unwrap();
    assert_eq!((scores[0].unwrap().value, scores[0].unwrap().refusals), (50.0, 13));
}
