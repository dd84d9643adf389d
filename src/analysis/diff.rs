//! What changed for one character between two interview sessions (say, before and after its
//! description was edited): per scale × method × dimension both assessed, the score in each and the
//! change, and whether B moved toward the character's target (else its PDb or annotation label); per
//! item, the two answers and, for methods that read items (OC, d-OC, SR, SR-CoT), the change in the item's
//! score. Pure: it reads the two journals and the catalog.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Serialize, Serializer};

use super::setup::SetupDifference;
use crate::catalog::Catalog;
use crate::domain::character::{Character, Label, LabelSource, LabelType};
use crate::method::expert::Exchange;
use crate::method::interview::QueryStyle;
use crate::method::{Assessment, Method};
use crate::study::interview::answer;
use crate::study::interview::results::latest_assessments;
use crate::study::{Event, Kind, character_versions, kind_of, later_versions};

/// Distances this close count as equal.
pub const EQUAL: f64 = 1e-9;

/// One session of the two.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub session: String,
    /// The character's version the session's first record gives (`None`: a session older than
    /// versions).
    pub version: Option<String>,
    /// Versions a resume recorded after that one (the character was edited while the session was
    /// interrupted: its later answers come from them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub later_versions: Vec<String>,
}

/// A score within this share of the range of a numeric target is on it (0.4 on a 1–5 scale).
pub const ON_TARGET_SHARE: f64 = 0.1;

/// What a score is compared with: a number, or a letter target's band (H: ≥ 0.6 of the dimension
/// range, L: ≤ 0.4), as `metrics::alignment` reads letter targets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reference {
    Score(f64),
    High,
    Low,
}

impl Serialize for Reference {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Reference::Score(x) => serializer.serialize_f64(*x),
            Reference::High => serializer.serialize_str("H"),
            Reference::Low => serializer.serialize_str("L"),
        }
    }
}

impl Reference {
    /// A label's reference; `None` for a marginal (X) label without a score.
    pub fn of(label: &Label) -> Option<Reference> {
        match (label.score, label.kind) {
            (Some(x), _) => Some(Reference::Score(x)),
            (None, LabelType::H) => Some(Reference::High),
            (None, LabelType::L) => Some(Reference::Low),
            (None, LabelType::X) => None,
        }
    }

    /// How far `score` is from the reference, on a dimension whose scores lie in `range`: to a
    /// letter's band, 0 inside it.
    pub fn distance(self, score: f64, range: (f64, f64)) -> f64 {
        let at = self.position(range);
        match self {
            Reference::Score(_) => (score - at).abs(),
            Reference::High => (at - score).max(0.0),
            Reference::Low => (score - at).max(0.0),
        }
    }

    /// How far `score` is from being on the reference, 0 when it is on it: outside a letter's band by
    /// this much, or farther than [`ON_TARGET_SHARE`] of the range from a number by this much.
    pub fn off_by(self, score: f64, range: (f64, f64)) -> f64 {
        match self {
            Reference::Score(_) => (self.distance(score, range) - ON_TARGET_SHARE * (range.1 - range.0)).max(0.0),
            _ => self.distance(score, range),
        }
    }

    /// Whether `score` is on the reference ([`Reference::off_by`] is 0).
    pub fn on(self, score: f64, range: (f64, f64)) -> bool {
        self.off_by(score, range) <= EQUAL
    }

    /// Where the reference sits on a dimension whose scores lie in `range`: its score, or where a
    /// letter's band begins (H: 0.6 of the range, L: 0.4). Bars, radars and figures mark it there.
    pub fn position(self, (min, max): (f64, f64)) -> f64 {
        match self {
            Reference::Score(x) => x,
            Reference::High => min + 0.6 * (max - min),
            Reference::Low => min + 0.4 * (max - min),
        }
    }
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reference::Score(x) => write!(f, "{x}"),
            Reference::High => f.write_str("H"),
            Reference::Low => f.write_str("L"),
        }
    }
}

/// One dimension as A and B measured it (repeats averaged).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DimensionDiff {
    pub scale: String,
    pub method: Method,
    pub dimension: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// b − a.
    pub delta: Option<f64>,
    /// The author's target for the dimension.
    pub target: Option<Reference>,
    /// What `toward_target` measures the distance to: the target, else the PDb or annotation label
    /// (the one that decides marginality).
    pub reference: Option<Reference>,
    pub label_source: Option<LabelSource>,
    /// How much closer B is to the reference than A (negative: farther), in the dimension's units.
    pub closer_by: Option<f64>,
    /// Whether B is closer to the reference than A (an equal distance is not).
    pub toward_target: Option<bool>,
    /// Whether A's and B's scores are on the reference ([`Reference::on`]).
    pub a_on: Option<bool>,
    pub b_on: Option<bool>,
    /// How far B is from being on the reference ([`Reference::off_by`]), 0 when on it.
    pub b_off_by: Option<f64>,
}

impl DimensionDiff {
    /// `✓ on target` (or `on label`), else `✗ 0.35 below` / `above` the band or number; empty
    /// without a reference or a score.
    pub fn on_text(&self) -> String {
        let what = if self.label_source == Some(LabelSource::Target) {
            "target"
        } else {
            "label"
        };
        match (self.b_on, self.b_off_by, self.reference, self.b) {
            (Some(true), ..) => format!("✓ on {what}"),
            (Some(false), Some(off), Some(r), Some(b)) => {
                let side = match r {
                    Reference::High => "below",
                    Reference::Low => "above",
                    Reference::Score(x) if b < x => "below",
                    Reference::Score(_) => "above",
                };
                format!("✗ {off:.2} {side}")
            }
            _ => String::new(),
        }
    }
}

/// One item as A and B answered it, in the interview the method reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemDiff {
    pub scale: String,
    pub method: Method,
    pub dimension: String,
    pub item_id: u32,
    pub question: String,
    pub a_answer: Option<String>,
    pub b_answer: Option<String>,
    /// The item's score (repeats averaged) where the method reads items.
    pub a_score: Option<f64>,
    pub b_score: Option<f64>,
    /// b_score − a_score.
    pub change: Option<f64>,
}

/// One character in two sessions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub character: String,
    pub a: Side,
    pub b: Side,
    /// Where B was asked or judged otherwise than A (empty: alike): what moved may be their doing.
    pub setup: Vec<SetupDifference>,
    /// By scale, method, then the scale's dimension order.
    pub dimensions: Vec<DimensionDiff>,
    /// Every item of those dimensions: the ones whose score changed most first, then those without
    /// an item score in scale, method and item order.
    pub items: Vec<ItemDiff>,
}

/// Why two sessions cannot be diffed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DiffError {
    #[error("{} is not an interview session", .0.to_string())]
    NotInterviews(String),
    #[error(
        "the sessions measured no character in common ({} measured {}; {} measured {})",
        .a.0.to_string(), list(&.a.1), .b.0.to_string(), list(&.b.1)
    )]
    NoCommonCharacter {
        a: (String, Vec<String>),
        b: (String, Vec<String>),
    },
    #[error("both sessions measured {}: choose one with --character", list(.0))]
    Ambiguous(Vec<String>),
    #[error(
        "session {} did not measure {} (it measured {})",
        session.to_string(),
        character.to_string(),
        list(measured)
    )]
    NotMeasured {
        session: String,
        character: String,
        measured: Vec<String>,
    },
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        return "no one".into();
    }
    names.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
}

/// Session `name` (its events) if it is an interview session.
fn interviews<'a>((name, events): (&'a str, &'a [Event])) -> Result<(&'a str, &'a [Event]), DiffError> {
    match kind_of(events) {
        Some(Kind::Interviews) => Ok((name, events)),
        _ => Err(DiffError::NotInterviews(name.to_string())),
    }
}

fn measured(events: &[Event]) -> BTreeSet<String> {
    latest_assessments(events).iter().map(|a| a.character.clone()).collect()
}

/// The character to diff: `name` (an id, name or alias) measured in both, or the one both measured.
fn choose(
    (a_id, a): (&str, &[Event]),
    (b_id, b): (&str, &[Event]),
    catalog: &Catalog,
    name: Option<&str>,
) -> Result<String, DiffError> {
    let (in_a, in_b) = (measured(a), measured(b));
    if let Some(name) = name {
        let id = catalog
            .character(name)
            .map_or_else(|| name.trim().to_string(), |c| c.id.clone());
        for (session, set) in [(a_id, &in_a), (b_id, &in_b)] {
            if !set.contains(&id) {
                return Err(DiffError::NotMeasured {
                    session: session.to_string(),
                    character: id,
                    measured: set.iter().cloned().collect(),
                });
            }
        }
        return Ok(id);
    }
    let common: Vec<String> = in_a.intersection(&in_b).cloned().collect();
    match &common[..] {
        [one] => Ok(one.clone()),
        [] => Err(DiffError::NoCommonCharacter {
            a: (a_id.to_string(), in_a.into_iter().collect()),
            b: (b_id.to_string(), in_b.into_iter().collect()),
        }),
        _ => Err(DiffError::Ambiguous(common)),
    }
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// One session's latest assessments of the character, by (scale, method, dimension), every repeat.
fn assessments<'e>(events: &'e [Event], character: &str) -> BTreeMap<(String, Method, String), Vec<&'e Assessment>> {
    let mut out: BTreeMap<_, Vec<&Assessment>> = BTreeMap::new();
    for a in latest_assessments(events)
        .into_iter()
        .filter(|a| a.character == character)
    {
        out.entry((a.scale.clone(), a.method, a.dimension.clone()))
            .or_default()
            .push(a);
    }
    out
}

/// One session's answers to the character's items, by (scale, style, item): the first repeat's
/// question and response.
fn answers(events: &[Event], character: &str) -> BTreeMap<(String, QueryStyle, u32), Exchange> {
    let mut out: BTreeMap<(String, QueryStyle, u32), (u32, Exchange)> = BTreeMap::new();
    for ((c, scale, repeat, style, item_id), exchange) in events.iter().filter_map(answer) {
        let key = (scale, style, item_id);
        if c == character && out.get(&key).is_none_or(|(r, _)| repeat <= *r) {
            out.insert(key, (repeat, exchange));
        }
    }
    out.into_iter().map(|(k, (_, e))| (k, e)).collect()
}

/// An item's score in a method that reads items, repeats averaged.
fn item_score(list: Option<&Vec<&Assessment>>, method: Method, item_id: u32) -> Option<f64> {
    if !method.item_level() {
        return None;
    }
    mean(
        list?
            .iter()
            .flat_map(|a| &a.items)
            .filter(|i| i.item_id == item_id)
            .filter_map(|i| i.score),
    )
}

/// The character's target for a dimension, and the reference `toward_target` measures from.
fn references(
    character: Option<&Character>,
    scale: &str,
    dimension: &str,
) -> (Option<Reference>, Option<(Reference, LabelSource)>) {
    let Some(c) = character else { return (None, None) };
    let target = c
        .labels
        .get(LabelSource::Target, scale, dimension)
        .and_then(Reference::of);
    let reference = match target {
        Some(t) => Some((t, LabelSource::Target)),
        None => {
            let source = c.labels.exclusion_source(scale);
            (source != LabelSource::Target)
                .then(|| c.labels.get(source, scale, dimension).and_then(Reference::of))
                .flatten()
                .map(|r| (r, source))
        }
    };
    (target, reference)
}

/// The diff of `character` (`None`: the one character both sessions measured) from session `a` to
/// session `b`, each its id (the one it was found by) and its events.
pub fn diff(
    a: (&str, &[Event]),
    b: (&str, &[Event]),
    catalog: &Catalog,
    character: Option<&str>,
) -> Result<Diff, DiffError> {
    let ((a_id, a), (b_id, b)) = (interviews(a)?, interviews(b)?);
    let id = choose((a_id, a), (b_id, b), catalog, character)?;
    let c = catalog.character(&id).filter(|c| c.id == id);
    let side = |session: &str, events: &[Event]| Side {
        session: session.to_string(),
        version: character_versions(events).get(&id).cloned(),
        later_versions: later_versions(events, &id),
    };
    let (in_a, in_b) = (assessments(a, &id), assessments(b, &id));
    // Dimensions in the scale's order (alphabetical for a scale the catalog no longer has).
    let position = |scale: &str, dimension: &str| {
        catalog
            .scale(scale)
            .and_then(|s| s.dimension_index(dimension))
            .unwrap_or(usize::MAX)
    };
    let mut keys: Vec<&(String, Method, String)> = in_a.keys().filter(|k| in_b.contains_key(*k)).collect();
    keys.sort_by(|x, y| (&x.0, x.1, position(&x.0, &x.2), &x.2).cmp(&(&y.0, y.1, position(&y.0, &y.2), &y.2)));
    let score = |list: &[&Assessment]| mean(list.iter().filter_map(|a| a.score));
    let dimensions: Vec<DimensionDiff> = keys
        .iter()
        .map(|key| {
            let (scale, method, dimension) = key;
            let (sa, sb) = (score(&in_a[*key]), score(&in_b[*key]));
            let (target, reference) = references(c, scale, dimension);
            let range = catalog.scale(scale).map(|s| s.dimension_range());
            let closer_by = match (sa, sb, reference, range) {
                (Some(x), Some(y), Some((r, _)), Some(range)) => Some(r.distance(x, range) - r.distance(y, range)),
                _ => None,
            };
            let on = |score: Option<f64>| Some(reference?.0.on(score?, range?));
            DimensionDiff {
                scale: scale.clone(),
                method: *method,
                dimension: dimension.clone(),
                a: sa,
                b: sb,
                delta: sa.zip(sb).map(|(x, y)| y - x),
                target,
                reference: reference.map(|(r, _)| r),
                label_source: reference.map(|(_, s)| s),
                closer_by,
                // Averages that are equal may differ in their last bits: that is not a move.
                toward_target: closer_by.map(|c| c > EQUAL),
                a_on: on(sa),
                b_on: on(sb),
                b_off_by: sb.zip(reference).zip(range).map(|((y, (r, _)), range)| r.off_by(y, range)),
            }
        })
        .collect();
    let (answers_a, answers_b) = (answers(a, &id), answers(b, &id));
    let mut items = Vec::new();
    for d in &dimensions {
        let Some(scale) = catalog.scale(&d.scale) else { continue };
        let Some(index) = scale.dimension_index(&d.dimension) else {
            continue;
        };
        let key = (d.scale.clone(), d.method, d.dimension.clone());
        let style = d.method.query_style();
        for item in scale.scored_items().filter(|i| i.dimension() == Some(index)) {
            let answer_key = (d.scale.clone(), style, item.id);
            let (qa, qb) = (answers_a.get(&answer_key), answers_b.get(&answer_key));
            let (a_score, b_score) = (
                item_score(in_a.get(&key), d.method, item.id),
                item_score(in_b.get(&key), d.method, item.id),
            );
            if qa.is_none() && qb.is_none() && a_score.is_none() && b_score.is_none() {
                continue;
            }
            let language = c.map_or(crate::domain::scale::Language::En, |c| c.language);
            let question = qa
                .or(qb)
                .map_or_else(|| item.question.get(language).clone(), |e| e.question.clone());
            items.push(ItemDiff {
                scale: d.scale.clone(),
                method: d.method,
                dimension: d.dimension.clone(),
                item_id: item.id,
                question,
                a_answer: qa.map(|e| e.response.clone()),
                b_answer: qb.map(|e| e.response.clone()),
                a_score,
                b_score,
                change: a_score.zip(b_score).map(|(x, y)| y - x),
            });
        }
    }
    // Stable: equal changes, and items without a reading, keep scale, method and item order.
    items.sort_by(|x, y| match (x.change, y.change) {
        (Some(p), Some(q)) => q.abs().total_cmp(&p.abs()),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    Ok(Diff {
        character: id.clone(),
        a: side(a_id, a),
        b: side(b_id, b),
        setup: super::setup::differences(a, b),
        dimensions,
        items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::scoring::ItemOption;
    use crate::method::convert::ConvertedItem;
    use crate::study::{RunPlan, SessionHeader};

    /// [`diff`] of sessions that each go by the id its journal was started under.
    fn named(a: &[Event], b: &[Event], catalog: &Catalog, character: Option<&str>) -> Result<Diff, DiffError> {
        let id = |events: &[Event]| events.iter().find_map(|e| e.start().map(|s| s.session.to_string()));
        let (a_id, b_id) = (id(a).unwrap_or_default(), id(b).unwrap_or_default());
        diff((&a_id, a), (&b_id, b), catalog, character)
    }

    const H: &str = "hermione-en";
    const BFI: [&str; 5] = [
        "Extraversion",
        "Neuroticism",
        "Conscientiousness",
        "Agreeableness",
        "Openness",
    ];

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    /// A session's first record, recording `versions` (character, version).
    fn started(id: &str, characters: &[&str], versions: &[(&str, &str)]) -> Event {
        let plan = RunPlan::new(
            characters.iter().map(|c| c.to_string()).collect(),
            vec!["BFI".into()],
            vec![Method::ErBatch, Method::Oc],
            "p",
            "p",
        );
        Event::RunStarted {
            header: SessionHeader {
                session: id.into(),
                name: None,
                created: "2026-11-29T12:00:00Z".into(),
                app_version: "0.1.0".into(),
                character_versions: versions.iter().map(|(c, v)| (c.to_string(), v.to_string())).collect(),
                scale_versions: Default::default(),
                batch: None,
            },
            plan: Box::new(plan),
            providers: Default::default(),
        }
    }

    /// An assessment of `character`'s BFI `dimension`; `items` (id, score) for the methods that read
    /// items.
    fn assessed(
        character: &str,
        method: Method,
        repeat: u32,
        dimension: &str,
        score: Option<f64>,
        items: &[(u32, f64)],
    ) -> Event {
        Event::DimensionAssessed(Assessment {
            character: character.into(),
            scale: "BFI".into(),
            method,
            repeat,
            dimension: dimension.into(),
            score,
            batches: vec![],
            calls: vec![],
            items: items
                .iter()
                .map(|&(item_id, s)| ConvertedItem {
                    item_id,
                    option: Some(ItemOption::Value(s as i32)),
                    score: Some(s),
                    refused: false,
                    weighed: None,
                    error: None,
                })
                .collect(),
            failure: None,
            fitted: None,
            conversions: Vec::new(),
        })
    }

    fn answered(character: &str, repeat: u32, item_id: u32, response: &str) -> Event {
        Event::ItemAnswered {
            character: character.into(),
            scale: "BFI".into(),
            repeat,
            style: QueryStyle::Open,
            item_id,
            question: format!("question {item_id}?"),
            response: response.into(),
            retrieved: vec![],
            truncated: false,
        }
    }

    /// Hermione on BFI: ER_batch scores for the five dimensions, and OC scores of Extraversion's items
    /// 1, 6 and 11 (with their answers).
    fn session(id: &str, version: &str, er: [f64; 5], oc: [f64; 3]) -> Vec<Event> {
        let mut events = vec![started(id, &[H], &[(H, version)])];
        for (item, score) in [1, 6, 11].into_iter().zip(oc) {
            events.push(answered(H, 0, item, &format!("{id} answers {item} with {score}")));
        }
        for (d, score) in BFI.iter().zip(er) {
            events.push(assessed(H, Method::ErBatch, 0, d, Some(score), &[]));
        }
        let items: Vec<(u32, f64)> = [1, 6, 11].into_iter().zip(oc).collect();
        let mean = oc.iter().sum::<f64>() / 3.0;
        events.push(assessed(H, Method::Oc, 0, "Extraversion", Some(mean), &items));
        events
    }

    /// The bundled catalog, Hermione with targets: Extraversion H, Agreeableness 2.0.
    fn catalog() -> Catalog {
        let mut catalog = Catalog::load(None).unwrap();
        let scale = catalog.scale("BFI").unwrap().clone();
        let hermione = catalog.characters.iter_mut().find(|e| e.value.id == H).unwrap();
        let targets = [("Extraversion", "H"), ("Agreeableness", "2.0")]
            .map(|(d, t)| (d.to_string(), crate::domain::character::target(&scale, d, t).unwrap()));
        hermione
            .value
            .labels
            .target
            .insert("BFI".into(), targets.into_iter().collect());
        catalog
    }

    #[test]
    fn a_session_diffed_with_itself_changes_nothing_and_moves_toward_nothing() {
        let catalog = catalog();
        let a = session("a", "v1", [2.0, 3.0, 4.0, 3.0, 4.5], [2.0, 3.0, 4.0]);
        let d = named(&a, &a, &catalog, None).unwrap();
        assert_eq!(d.character, H);
        assert_eq!(d.a.version.as_deref(), Some("v1"));
        assert_eq!(d.dimensions.len(), 6, "five ER_batch rows and OC's Extraversion");
        assert!(
            d.dimensions
                .iter()
                .all(|r| r.delta == Some(0.0) && r.toward_target == Some(false)),
            "{:?}",
            d.dimensions
        );
        assert_eq!(d.items.len(), 6, "items 1, 6, 11 for each method");
        assert!(
            d.items
                .iter()
                .filter(|i| i.method == Method::Oc)
                .all(|i| i.change == Some(0.0))
        );
        assert!(
            d.items
                .iter()
                .filter(|i| i.method == Method::ErBatch)
                .all(|i| i.change.is_none() && i.a_score.is_none())
        );
        assert!(d.items.iter().all(|i| i.a_answer == i.b_answer && i.a_answer.is_some()));
    }

    #[test]
    fn targets_letters_and_labels_decide_the_direction() {
        let catalog = catalog();
        // Extraversion: target H, its band ≥ 3.4 (0.6 of 1–5); Agreeableness: target 2.0; the others
        // have no target and go by Hermione's PDb labels (Neuroticism 1.57…, Conscientiousness 4.93…,
        // Openness 2.25…).
        let a = session("a", "v1", [2.0, 3.0, 4.0, 2.5, 4.5], [2.0, 3.0, 4.0]);
        let b = session("b", "v2", [3.0, 2.5, 4.0, 1.5, 5.0], [4.0, 3.0, 5.0]);
        let d = named(&a, &b, &catalog, Some("Hermione")).unwrap();
        assert_eq!(
            (d.a.version.as_deref(), d.b.version.as_deref()),
            (Some("v1"), Some("v2"))
        );
        let row = |m: Method, dim: &str| {
            d.dimensions
                .iter()
                .find(|r| r.method == m && r.dimension == dim)
                .unwrap()
        };
        let e = row(Method::ErBatch, "Extraversion");
        assert!(close(e.delta, 1.0));
        assert_eq!(
            (e.target, e.reference, e.label_source),
            (Some(Reference::High), Some(Reference::High), Some(LabelSource::Target))
        );
        assert_eq!(e.toward_target, Some(true), "from 1.4 below the band to 0.4");
        // OC Extraversion: 3.0 (0.4 below the band) → 4.0 (inside it).
        assert_eq!(row(Method::Oc, "Extraversion").toward_target, Some(true));
        let agreeableness = row(Method::ErBatch, "Agreeableness");
        assert_eq!(agreeableness.target, Some(Reference::Score(2.0)));
        assert_eq!(
            agreeableness.toward_target,
            Some(false),
            "2.5 → 1.5: as far from 2.0 on the other side"
        );
        let n = row(Method::ErBatch, "Neuroticism");
        assert_eq!((n.target, n.label_source), (None, Some(LabelSource::Pdb)));
        assert_eq!(n.toward_target, Some(true), "3.0 → 2.5, toward 1.57");
        assert_eq!(
            row(Method::ErBatch, "Conscientiousness").toward_target,
            Some(false),
            "no change"
        );
        assert_eq!(
            row(Method::ErBatch, "Openness").toward_target,
            Some(false),
            "4.5 → 5.0, away from 2.25"
        );
        assert_eq!(
            d.dimensions
                .iter()
                .map(|r| (r.method, r.dimension.as_str()))
                .collect::<Vec<_>>()[..5],
            BFI.map(|dim| (Method::ErBatch, dim)),
            "by method, then the scale's order"
        );
        // Items: OC's by |change| (11: +1, 1: +2 → 1 first), then the ER rows' in item order.
        let order: Vec<(Method, u32, Option<f64>)> = d.items.iter().map(|i| (i.method, i.item_id, i.change)).collect();
        assert_eq!(
            order,
            [
                (Method::Oc, 1, Some(2.0)),
                (Method::Oc, 11, Some(1.0)),
                (Method::Oc, 6, Some(0.0)),
                (Method::ErBatch, 1, None),
                (Method::ErBatch, 6, None),
                (Method::ErBatch, 11, None),
            ]
        );
        assert_eq!(d.items[0].a_answer.as_deref(), Some("a answers 1 with 2"));
        assert_eq!(d.items[0].b_answer.as_deref(), Some("b answers 1 with 4"));
        assert_eq!(d.items[0].question, "question 1?");
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["dimensions"][0]["target"], "H");
        assert_eq!(json["dimensions"][0]["method"], "er-batch");
        assert_eq!(json["dimensions"][1]["label_source"], "pdb");
        assert_eq!(json["dimensions"][3]["target"], 2.0);
        assert_eq!(json["a"]["version"], "v1");
        assert!(json["a"].get("later_versions").is_none());
    }

    #[test]
    fn a_letter_target_is_a_band_and_a_number_has_a_tenth_of_the_range_around_it() {
        let range = (1.0, 5.0);
        // L: the band is at or below 2.6; a score of 1.00 is on it, as close as can be.
        assert!(Reference::Low.on(1.0, range) && Reference::Low.on(2.6, range));
        assert!((Reference::Low.off_by(3.0, range) - 0.4).abs() < 1e-12);
        assert!(Reference::High.on(3.4, range) && !Reference::High.on(3.2, range));
        assert!(Reference::Score(2.0).on(2.4, range) && !Reference::Score(2.0).on(2.5, range));
        assert!((Reference::Score(2.0).off_by(3.0, range) - 0.6).abs() < 1e-12);
        let d = |b: f64, r: Reference| DimensionDiff {
            scale: "BFI".into(),
            method: Method::ErBatch,
            dimension: "Neuroticism".into(),
            a: Some(b),
            b: Some(b),
            delta: Some(0.0),
            target: Some(r),
            reference: Some(r),
            label_source: Some(LabelSource::Target),
            closer_by: Some(0.0),
            toward_target: Some(false),
            a_on: Some(r.on(b, range)),
            b_on: Some(r.on(b, range)),
            b_off_by: Some(r.off_by(b, range)),
        };
        assert_eq!(d(1.0, Reference::Low).on_text(), "✓ on target");
        assert_eq!(d(3.0, Reference::Low).on_text(), "✗ 0.40 above");
        assert_eq!(d(3.0, Reference::High).on_text(), "✗ 0.40 below");
        assert_eq!(d(1.0, Reference::Score(2.0)).on_text(), "✗ 0.60 below");
    }

    #[test]
    fn repeats_are_averaged_and_only_dimensions_both_assessed_are_compared() {
        let catalog = catalog();
        let a = vec![
            started("a", &[H], &[]),
            assessed(H, Method::ErBatch, 0, "Openness", Some(2.0), &[]),
            assessed(H, Method::ErBatch, 1, "Openness", Some(3.0), &[]),
            // Assessed again: the latest counts.
            assessed(H, Method::ErBatch, 1, "Openness", Some(4.0), &[]),
            assessed(H, Method::ErBatch, 0, "Neuroticism", Some(2.0), &[]),
        ];
        let b = vec![
            started("b", &[H], &[]),
            assessed(H, Method::ErBatch, 0, "Openness", Some(3.5), &[]),
            assessed(H, Method::ErBatch, 0, "Extraversion", None, &[]),
        ];
        let d = named(&a, &b, &catalog, None).unwrap();
        assert_eq!(d.a.version, None, "a session older than versions");
        let [o] = &d.dimensions[..] else {
            panic!("{:?}", d.dimensions)
        };
        assert!(close(o.a, 3.0) && close(o.b, 3.5) && close(o.delta, 0.5), "{o:?}");
        assert!(d.items.is_empty(), "no answers were recorded");
    }

    #[test]
    fn the_character_must_be_one_both_measured() {
        let catalog = catalog();
        let two = |id: &str| {
            vec![
                started(id, &[H, "harry-en"], &[]),
                assessed(H, Method::ErBatch, 0, "Openness", Some(3.0), &[]),
                assessed("harry-en", Method::ErBatch, 0, "Openness", Some(3.0), &[]),
            ]
        };
        let (a, b) = (two("a"), two("b"));
        let err = named(&a, &b, &catalog, None).unwrap_err();
        assert_eq!(err, DiffError::Ambiguous(vec!["harry-en".into(), H.into()]));
        assert_eq!(
            err.to_string(),
            "both sessions measured harry-en, hermione-en: choose one with --character"
        );
        assert_eq!(named(&a, &b, &catalog, Some("harry-en")).unwrap().character, "harry-en");
        let c = vec![
            started("c", &["ron-en"], &[]),
            assessed("ron-en", Method::ErBatch, 0, "Openness", Some(3.0), &[]),
        ];
        let err = named(&a, &c, &catalog, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the sessions measured no character in common (a measured harry-en, hermione-en; c measured ron-en)"
        );
        let err = named(&a, &c, &catalog, Some(H)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "session c did not measure hermione-en (it measured ron-en)"
        );
        let observe = vec![Event::RunFinished {
            status: "complete".into(),
            at: "now".into(),
        }];
        assert!(matches!(
            named(&a, &observe, &catalog, None),
            Err(DiffError::NotInterviews(_))
        ));
    }

    #[test]
    fn a_character_edited_during_an_interruption_shows_its_later_version() {
        let catalog = catalog();
        let mut a = session("a", "v1", [3.0; 5], [3.0; 3]);
        a.insert(
            1,
            Event::Resumed {
                at: "later".into(),
                items_per_call: None,
                character_versions: [(H.to_string(), "v2".to_string())].into(),
                masked: Default::default(),
            },
        );
        let d = named(&a, &a, &catalog, None).unwrap();
        assert_eq!(d.a.version.as_deref(), Some("v1"));
        assert_eq!(d.a.later_versions, ["v2"]);
    }
}
