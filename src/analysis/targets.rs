//! How a session's measurements meet the characters' targets (what their authors meant): per
//! character × scale × method × dimension, the measured score (the mean over repeats), the target,
//! whether the score is on it and by how much it is outside — a letter target read as its band, a
//! number as itself within a tenth of the range (see [`Reference`]). Pure: journal records in.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalog::Catalog;
use crate::domain::character::LabelSource;
use crate::method::Method;
use crate::study::Event;
use crate::study::interview::results::latest_assessments;

use super::diff::Reference;

/// One measured dimension against its target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetCheck {
    pub character: String,
    pub scale: String,
    pub method: Method,
    pub dimension: String,
    /// The mean score over the repeats that scored the dimension.
    pub measured: f64,
    pub target: Reference,
    pub on: bool,
    /// How far outside the target the score is (0 when on it).
    pub off_by: f64,
}

/// Every scored dimension of the session whose character has a target for it, in the order of the
/// characters, scales, methods and the scale's dimensions.
pub fn checks(events: &[Event], catalog: &Catalog) -> Vec<TargetCheck> {
    let mut scores: BTreeMap<(String, String, Method, String), Vec<f64>> = BTreeMap::new();
    for a in latest_assessments(events) {
        if let Some(score) = a.score {
            let key = (a.character.clone(), a.scale.clone(), a.method, a.dimension.clone());
            scores.entry(key).or_default().push(score);
        }
    }
    let mut out = Vec::new();
    for ((character, scale_id, method, dimension), list) in scores {
        let (Some(c), Some(scale)) = (catalog.character(&character), catalog.scale(&scale_id)) else {
            continue;
        };
        let Some(target) = c
            .labels
            .get(LabelSource::Target, &scale_id, &dimension)
            .and_then(Reference::of)
        else {
            continue;
        };
        let measured = list.iter().sum::<f64>() / list.len() as f64;
        let range = scale.dimension_range();
        out.push(TargetCheck {
            character,
            scale: scale_id,
            method,
            dimension,
            measured,
            target,
            on: target.on(measured, range),
            off_by: target.off_by(measured, range),
        });
    }
    // The scale's own order of dimensions within each character × scale × method.
    let position = |t: &TargetCheck| {
        catalog
            .scale(&t.scale)
            .and_then(|s| s.dimensions.iter().position(|d| d.name == t.dimension))
            .unwrap_or(usize::MAX)
    };
    out.sort_by(|a, b| {
        (&a.character, &a.scale, a.method, position(a)).cmp(&(&b.character, &b.scale, b.method, position(b)))
    });
    out
}

/// Which side of the target a score lies on, for "0.60 above": a score above a low band or above a
/// number is above, else below.
pub fn side(check: &TargetCheck, range: (f64, f64)) -> &'static str {
    if check.measured > check.target.position(range) {
        "above"
    } else {
        "below"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::character::{Label, LabelType};

    #[test]
    fn a_letter_target_is_met_anywhere_in_its_band_and_missed_by_the_distance_to_it() {
        let mut catalog = Catalog::bundled().unwrap();
        let hermione = catalog
            .characters
            .iter_mut()
            .find(|e| e.value.id == "hermione-en")
            .unwrap();
        hermione.value.labels.target.insert(
            "BFI".into(),
            [
                ("Neuroticism".to_string(), Label { score: None, kind: LabelType::L }),
                ("Extraversion".to_string(), Label { score: None, kind: LabelType::H }),
                ("Openness".to_string(), Label { score: Some(4.0), kind: LabelType::H }),
            ]
            .into(),
        );
        let scores = [("Extraversion", 3.0), ("Neuroticism", 1.0), ("Openness", 3.5), ("Agreeableness", 2.0)];
        let events: Vec<Event> = scores
            .iter()
            .map(|(d, s)| {
                Event::DimensionAssessed(crate::method::Assessment {
                    character: "hermione-en".into(),
                    scale: "BFI".into(),
                    method: Method::ErBatch,
                    repeat: 0,
                    dimension: d.to_string(),
                    score: Some(*s),
                    batches: Vec::new(),
                    calls: Vec::new(),
                    items: Vec::new(),
                    failure: None,
                    fitted: None,
                    conversions: Vec::new(),
                })
            })
            .collect();
        let found = checks(&events, &catalog);
        let brief: Vec<(&str, bool, f64)> = found.iter().map(|c| (c.dimension.as_str(), c.on, (c.off_by * 100.0).round() / 100.0)).collect();
        // The scale's order; Agreeableness has no target.
        assert_eq!(brief, [("Extraversion", false, 0.4), ("Neuroticism", true, 0.0), ("Openness", false, 0.1)]);
        assert_eq!(side(&found[0], (1.0, 5.0)), "below");
    }
}
