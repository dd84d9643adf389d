//! How much a dimension's score moves when it is measured again: per character × scale × method ×
//! dimension, the mean score with the (population) standard deviation of its repeats — or, with one
//! repeat, of its batches (ER_batch rates a dimension in several batches) — the spread behind the
//! paper's Std figures, drawn as error bars.

use std::collections::BTreeMap;

use serde::Serialize;

use super::results::latest_assessments;
use crate::domain::stats;
use crate::method::Method;
use crate::study::Event;

/// What a dimension's spread is taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Over {
    Repeats,
    Batches,
}

/// A dimension's score and its spread (`sd: None` with a single measurement: no spread is known).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub value: f64,
    pub sd: Option<f64>,
    /// How many measurements `sd` comes from.
    pub n: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over: Option<Over>,
}

/// (character, scale, method, dimension).
pub type Key = (String, String, Method, String);

/// The [`Spread`] of one dimension's assessments (its repeats); `None` when none has a score.
pub fn spread(list: &[&crate::method::Assessment]) -> Option<Spread> {
    let scores: Vec<f64> = list.iter().filter_map(|a| a.score).collect();
    let value = stats::mean(&scores)?;
    if scores.len() >= 2 {
        return Some(Spread {
            value,
            sd: stats::population_std(&scores),
            n: scores.len(),
            over: Some(Over::Repeats),
        });
    }
    let batches: Vec<f64> = list
        .iter()
        .find(|a| a.score.is_some())
        .map(|a| a.batches.iter().filter_map(|b| b.score).collect())
        .unwrap_or_default();
    Some(if batches.len() >= 2 {
        Spread {
            value,
            sd: stats::population_std(&batches),
            n: batches.len(),
            over: Some(Over::Batches),
        }
    } else {
        Spread {
            value,
            sd: None,
            n: 1,
            over: None,
        }
    })
}

/// Every assessed dimension's [`Spread`] in a session (dimensions without a score are left out).
pub fn spreads(events: &[Event]) -> BTreeMap<Key, Spread> {
    let mut by: BTreeMap<Key, Vec<&crate::method::Assessment>> = BTreeMap::new();
    for a in latest_assessments(events) {
        by.entry((a.character.clone(), a.scale.clone(), a.method, a.dimension.clone()))
            .or_default()
            .push(a);
    }
    by.into_iter()
        .filter_map(|(key, list)| Some((key, spread(&list)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::Assessment;
    use crate::method::expert::BatchRating;

    fn assessed(character: &str, repeat: u32, score: Option<f64>, batches: &[f64]) -> Event {
        Event::DimensionAssessed(Assessment {
            character: character.into(),
            scale: "BFI".into(),
            method: Method::ErBatch,
            repeat,
            dimension: "Openness".into(),
            score,
            batches: batches
                .iter()
                .map(|s| BatchRating {
                    item_ids: vec![1],
                    score: Some(*s),
                    analysis: String::new(),
                    attempts: Vec::new(),
                    weighed: None,
                })
                .collect(),
            calls: Vec::new(),
            items: Vec::new(),
            failure: None,
            fitted: None,
            conversions: Vec::new(),
        })
    }

    fn key(character: &str) -> Key {
        (character.into(), "BFI".into(), Method::ErBatch, "Openness".into())
    }

    #[test]
    fn repeats_give_the_spread_else_batches_else_none() {
        let events = vec![
            // Two repeats: their scores' spread (population sd of 2 and 4 is 1).
            assessed("a", 0, Some(2.0), &[1.0, 3.0]),
            assessed("a", 1, Some(4.0), &[4.0, 4.0]),
            // One repeat of three batches: the batches' spread.
            assessed("b", 0, Some(3.0), &[2.0, 3.0, 4.0]),
            // One measurement: a value without a spread; a failed dimension: nothing.
            assessed("c", 0, Some(3.5), &[3.5]),
            assessed("d", 0, None, &[]),
        ];
        let s = spreads(&events);
        assert_eq!(s[&key("a")], Spread { value: 3.0, sd: Some(1.0), n: 2, over: Some(Over::Repeats) });
        let b = &s[&key("b")];
        assert_eq!((b.value, b.n, b.over), (3.0, 3, Some(Over::Batches)));
        assert!((b.sd.unwrap() - (2.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(s[&key("c")], Spread { value: 3.5, sd: None, n: 1, over: None });
        assert!(!s.contains_key(&key("d")));
    }
}
