//! Judge agreement: several assessments of the same recorded interviews side by side (a session and
//! its re-assessments, or re-assessments of one session, each by another judge, prompt set or
//! temperature). Per dimension the score of each session on 0–1; per pair of sessions and method
//! Pearson, Spearman and mean |Δ|; per session and method Acc_Dim and MAE against the labels; per scale
//! how much the scores move with the judge (its sensitivity). Everything is recomputed from the
//! sessions' journals.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::domain::stats;
use crate::method::Method;
use crate::study::Event;
use crate::study::interview::RunPlan;
use crate::study::interview::results::{self, SummaryRow};

/// Why sessions cannot be compared. Each is the user's choice of sessions (exit 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JudgesError {
    #[error("judges compares at least two sessions; {0} given")]
    TooFew(usize),
    #[error("session {} is given more than once", .0.to_string())]
    Repeated(String),
    #[error("{} not an interview session (judges compares assessments of interviews)", list(.0, "is", "are"))]
    NotInterviews(Vec<String>),
    /// (session, the session whose interviews it assesses), for every session given.
    #[error(
        "the sessions do not share interviews ({}); compare a session with its re-assessments (`incharacter assess`), or re-assessments of one session",
        sources(.0)
    )]
    NotShared(Vec<(String, String)>),
}

fn list(ids: &[String], one: &str, many: &str) -> String {
    let names: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    format!("{} {}", names.join(", "), if ids.len() == 1 { one } else { many })
}

/// "interviews of p: p, c; interviews of q: x".
fn sources(of: &[(String, String)]) -> String {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for (id, source) in of {
        match groups.iter_mut().find(|(s, _)| s == source) {
            Some((_, ids)) => ids.push(id.to_string()),
            None => groups.push((source, vec![id.to_string()])),
        }
    }
    groups
        .iter()
        .map(|(source, ids)| format!("interviews of {}: {}", source, ids.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// One of the sessions compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Session {
    pub id: String,
    pub name: Option<String>,
    /// `provider/model` of its judge.
    pub judge: Option<String>,
    pub judge_temperature: f32,
    /// The session whose interviews it re-assesses (`None`: its own interviews).
    pub parent: Option<String>,
}

/// One dimension as each session scored it, in the order of [`Judges::sessions`].
#[derive(Debug, Clone, PartialEq)]
pub struct Scores {
    pub scale: String,
    pub method: Method,
    pub character: String,
    pub repeat: u32,
    pub dimension: String,
    /// On 0–1: (score − min) / (max − min) with the scale's dimension range.
    pub normalized: Vec<Option<f64>>,
    /// On the scale's range.
    pub raw: Vec<Option<f64>>,
}

/// Agreement of two sessions on one method, over the dimensions both scored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pair {
    pub a: String,
    pub b: String,
    pub method: Method,
    pub n: usize,
    pub pearson: Option<f64>,
    pub spearman: Option<f64>,
    /// Mean |a − b| on 0–1.
    pub mean_abs_diff: Option<f64>,
}

/// How much a scale's scores move with the judge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensitivity {
    /// Mean over the scale's rows of scores of the population standard deviation (0–1) across the
    /// sessions that scored the row.
    pub sensitivity: Option<f64>,
    /// Rows averaged: (method, character, repeat, dimension) scored by at least two sessions.
    pub n: usize,
}

/// Acc_Dim and MAE of one session on one scale × method.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accuracy {
    pub session: String,
    pub scale: String,
    pub method: String,
    pub acc_dim: Option<f64>,
    pub mae: Option<f64>,
    /// Scored (character, dimension) pairs compared with a label.
    pub count: usize,
}

/// The comparison of several assessments of the same interviews.
#[derive(Debug, Clone, PartialEq)]
pub struct Judges {
    /// The session whose interviews they all assess.
    pub interviews: String,
    pub sessions: Vec<Session>,
    pub scores: Vec<Scores>,
    pub pairs: Vec<Pair>,
    pub scales: BTreeMap<String, Sensitivity>,
    pub summary: Vec<Accuracy>,
}

/// The plan and id of an interview session.
fn interview_start(events: &[Event]) -> Option<(&str, &RunPlan)> {
    events.iter().find_map(|e| match e {
        Event::RunStarted { header, plan, .. } => Some((header.session.as_str(), plan.as_ref())),
        _ => None,
    })
}

/// The ids the interviews of session `name` (an interview session's journal `started_as`) go by:
/// a re-assessment's its parent, any other session's its own id and the id its journal was
/// started under (the same but for a copied folder).
fn interview_ids<'a>(name: &'a str, started_as: &'a str, plan: &'a RunPlan) -> Vec<&'a str> {
    match plan.parent.as_deref() {
        Some(parent) => vec![parent],
        None => vec![name, started_as],
    }
}

/// Whether the session that goes by `name` (its folder's name) holds the interviews that go by
/// `interviews`: it is that session, a copy of it, or a re-assessment of one of those by that id.
pub fn holds_interviews(name: &str, events: &[Event], interviews: &str) -> bool {
    interview_start(events).is_some_and(|(started_as, plan)| interview_ids(name, started_as, plan).contains(&interviews))
}

/// Compares the assessments of `named` (each a session's id and its journal's events), which must be
/// at least two interview sessions sharing their interviews. Each goes by the id it was found by (a
/// copied session's folder name is its id, as for every command; a re-assessment names its parent
/// by the id it was found by).
pub fn compare(named: &[(&str, &[Event])], catalog: &Catalog) -> Result<Judges, JudgesError> {
    let sessions: Vec<&[Event]> = named.iter().map(|(_, e)| *e).collect();
    let sessions = sessions.as_slice();
    if sessions.len() < 2 {
        return Err(JudgesError::TooFew(sessions.len()));
    }
    let mut starts = Vec::new();
    let mut not_interviews = Vec::new();
    for (name, events) in named {
        match (events.iter().find_map(Event::start), interview_start(events)) {
            (Some(start), Some((_, plan))) => starts.push((*name, start, plan)),
            (Some(_), None) => not_interviews.push(name.to_string()),
            (None, _) => not_interviews.push(format!("{name} (a journal without a start record)")),
        }
    }
    if !not_interviews.is_empty() {
        return Err(JudgesError::NotInterviews(not_interviews));
    }
    for (i, (name, ..)) in starts.iter().enumerate() {
        if starts[..i].iter().any(|(other, ..)| other == name) {
            return Err(JudgesError::Repeated(name.to_string()));
        }
    }
    // The ids of the interviews each holds.
    let sources: Vec<Vec<&str>> = starts
        .iter()
        .map(|(name, start, plan)| interview_ids(name, start.session, plan))
        .collect();
    let shared = sources[0]
        .iter()
        .find(|source| sources.iter().all(|s| s.contains(source)))
        .map(|s| s.to_string());
    let Some(shared) = shared else {
        let of = starts
            .iter()
            .zip(&sources)
            .map(|((name, ..), source)| (name.to_string(), source[0].to_string()))
            .collect();
        return Err(JudgesError::NotShared(of));
    };
    let list: Vec<Session> = starts
        .iter()
        .map(|(name, start, plan)| Session {
            id: name.to_string(),
            name: start.name.clone(),
            judge: start
                .providers
                .get("judge")
                .map(|m| format!("{}/{}", m.provider, m.model)),
            judge_temperature: plan.judge_temperature,
            parent: plan.parent.clone(),
        })
        .collect();
    let scores = scores(sessions, catalog);
    let pairs = pairs(&list, &scores, sessions);
    let scales = sensitivity(&scores);
    let summary = list
        .iter()
        .zip(sessions)
        .flat_map(|(s, events)| {
            results::summary(events, catalog)
                .into_iter()
                .map(|r: SummaryRow| Accuracy {
                    session: s.id.clone(),
                    scale: r.scale,
                    method: r.method,
                    acc_dim: r.acc_dim,
                    mae: r.mae,
                    count: r.count,
                })
        })
        .collect();
    Ok(Judges {
        interviews: shared,
        sessions: list,
        scores,
        pairs,
        scales,
        summary,
    })
}

/// Every (scale, method, character, repeat, dimension) some session scored, in scale order of the
/// dimensions. Scales the catalog lacks have no range to normalize by and are left out.
fn scores(sessions: &[&[Event]], catalog: &Catalog) -> Vec<Scores> {
    type Key = (String, Method, String, u32, usize, String);
    let mut rows: BTreeMap<Key, Vec<Option<f64>>> = BTreeMap::new();
    for (i, events) in sessions.iter().enumerate() {
        for a in results::latest_assessments(events) {
            let Some(scale) = catalog.scale(&a.scale) else {
                continue;
            };
            let order = scale.dimension_index(&a.dimension).unwrap_or(usize::MAX);
            let key = (
                a.scale.clone(),
                a.method,
                a.character.clone(),
                a.repeat,
                order,
                a.dimension.clone(),
            );
            rows.entry(key).or_insert_with(|| vec![None; sessions.len()])[i] = a.score;
        }
    }
    rows.into_iter()
        .filter_map(|((scale, method, character, repeat, _, dimension), raw)| {
            let (min, max) = catalog.scale(&scale)?.dimension_range();
            let normalized = raw.iter().map(|s| s.map(|s| (s - min) / (max - min))).collect();
            Some(Scores {
                scale,
                method,
                character,
                repeat,
                dimension,
                normalized,
                raw,
            })
        })
        .collect()
}

/// Every pair of sessions on every method both assessed with, over the rows both scored.
fn pairs(list: &[Session], scores: &[Scores], sessions: &[&[Event]]) -> Vec<Pair> {
    let methods_of: Vec<Vec<Method>> = sessions
        .iter()
        .map(|events| {
            let mut m: Vec<Method> = results::latest_assessments(events).iter().map(|a| a.method).collect();
            m.sort();
            m.dedup();
            m
        })
        .collect();
    let mut out = Vec::new();
    for a in 0..list.len() {
        for b in a + 1..list.len() {
            for &method in methods_of[a].iter().filter(|m| methods_of[b].contains(m)) {
                let (x, y): (Vec<f64>, Vec<f64>) = scores
                    .iter()
                    .filter(|r| r.method == method)
                    .filter_map(|r| Some((r.normalized[a]?, r.normalized[b]?)))
                    .unzip();
                let gaps: Vec<f64> = x.iter().zip(&y).map(|(x, y)| (x - y).abs()).collect();
                out.push(Pair {
                    a: list[a].id.clone(),
                    b: list[b].id.clone(),
                    method,
                    n: x.len(),
                    pearson: stats::pearson(&x, &y),
                    spearman: stats::spearman(&x, &y),
                    mean_abs_diff: stats::mean(&gaps),
                });
            }
        }
    }
    out
}

/// Per scale, the mean of the rows' spread across sessions (rows scored by fewer than two sessions
/// have no spread and are left out).
fn sensitivity(scores: &[Scores]) -> BTreeMap<String, Sensitivity> {
    let mut spreads: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in scores {
        let scored: Vec<f64> = r.normalized.iter().flatten().copied().collect();
        let entry = spreads.entry(r.scale.clone()).or_default();
        if scored.len() >= 2
            && let Some(sd) = stats::population_std(&scored)
        {
            entry.push(sd);
        }
    }
    spreads
        .into_iter()
        .map(|(scale, sd)| {
            (
                scale,
                Sensitivity {
                    sensitivity: stats::mean(&sd),
                    n: sd.len(),
                },
            )
        })
        .collect()
}

impl Judges {
    /// The rows of one scale × method × character, averaged over repeats per session: the profile
    /// each session measured, dimension by dimension (in the scale's order).
    pub fn profile(&self, scale: &str, method: Method, character: &str) -> Vec<(String, Vec<Option<f64>>)> {
        let mut out: Vec<(String, Vec<Vec<f64>>)> = Vec::new();
        for r in self
            .scores
            .iter()
            .filter(|r| r.scale == scale && r.method == method && r.character == character)
        {
            let at = match out.iter().position(|(d, _)| *d == r.dimension) {
                Some(at) => at,
                None => {
                    out.push((r.dimension.clone(), vec![Vec::new(); self.sessions.len()]));
                    out.len() - 1
                }
            };
            for (all, s) in out[at].1.iter_mut().zip(&r.normalized) {
                all.extend(*s);
            }
        }
        out.into_iter()
            .map(|(d, per)| (d, per.iter().map(|v| stats::mean(v)).collect()))
            .collect()
    }

    /// (character, scale, method) of the rows, in row order, each once.
    pub fn units(&self) -> Vec<(String, String, Method)> {
        let mut out: Vec<(String, String, Method)> = Vec::new();
        for r in &self.scores {
            let unit = (r.character.clone(), r.scale.clone(), r.method);
            if !out.contains(&unit) {
                out.push(unit);
            }
        }
        out
    }

    /// `judges --json`: `{"interviews", "sessions", "scores", "pairs", "scales", "summary"}`.
    pub fn to_json(&self) -> Value {
        let scores: Vec<Value> = self
            .scores
            .iter()
            .map(|r| {
                let by_session = |values: &[Option<f64>]| {
                    let map: serde_json::Map<String, Value> = self
                        .sessions
                        .iter()
                        .zip(values)
                        .map(|(s, v)| (s.id.clone(), json!(v)))
                        .collect();
                    Value::Object(map)
                };
                json!({"scale": r.scale, "method": r.method, "character": r.character, "repeat": r.repeat,
                       "dimension": r.dimension, "scores": by_session(&r.normalized), "raw": by_session(&r.raw)})
            })
            .collect();
        json!({"interviews": self.interviews, "sessions": self.sessions, "scores": scores,
               "pairs": self.pairs, "scales": self.scales, "summary": self.summary})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ModelInfo;
    use crate::method::Assessment;
    use crate::study::SessionHeader;

    /// [`compare`] of sessions that each go by the id its journal was started under.
    fn by_journal_ids(sessions: &[&[Event]], catalog: &Catalog) -> Result<Judges, JudgesError> {
        let named: Vec<(&str, &[Event])> = sessions
            .iter()
            .map(|events| (events.iter().find_map(Event::start).map_or("", |s| s.session), *events))
            .collect();
        compare(&named, catalog)
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    /// A made-up interview session on BFI (range 1–5) with the given ER_batch scores for Hermione's
    /// five dimensions (`None`: not scored).
    fn session(id: &str, parent: Option<&str>, judge: &str, scores: [Option<f64>; 5]) -> Vec<Event> {
        let mut plan = RunPlan::new(
            vec!["hermione-en".into()],
            vec!["BFI".into()],
            vec![Method::ErBatch],
            "p",
            "p",
        );
        plan.parent = parent.map(str::to_string);
        let model = ModelInfo {
            provider: "p".into(),
            kind: "fixture".into(),
            model: judge.into(),
            sha256: None,
        };
        let mut events = vec![Event::RunStarted {
            header: SessionHeader {
                session: id.into(),
                name: None,
                created: "2026-11-29T12:00:00Z".into(),
                app_version: "0.1.0".into(),
                character_versions: Default::default(),
                scale_versions: Default::default(),
                batch: None,
            },
            plan: Box::new(plan),
            providers: [("judge".to_string(), model)].into_iter().collect(),
        }];
        let dims = [
            "Extraversion",
            "Neuroticism",
            "Conscientiousness",
            "Agreeableness",
            "Openness",
        ];
        for (d, score) in dims.iter().zip(scores) {
            events.push(Event::DimensionAssessed(Assessment {
                character: "hermione-en".into(),
                scale: "BFI".into(),
                method: Method::ErBatch,
                repeat: 0,
                dimension: d.to_string(),
                score,
                batches: vec![],
                calls: vec![],
                items: vec![],
                failure: None,
                fitted: None,
                conversions: Vec::new(),
            }));
        }
        events
    }

    fn catalog() -> Catalog {
        Catalog::load(None).unwrap()
    }

    /// Scores 1, 2, 3, 4, 5 (0–1: 0, .25, .5, .75, 1) against 2, 2, 4, 3, 5 (.25, .25, .75, .5, 1),
    /// computed by hand:
    /// Δ = .25, 0, .25, .25, 0 → mean |Δ| = .15;
    /// Pearson on the raw scores (r does not change with the linear map to 0–1): x̄ = 3, ȳ = 3.2,
    /// Σdx·dy = (−2)(−1.2) + (−1)(−1.2) + 0 + (1)(−.2) + (2)(1.8) = 7, Σdx² = 10,
    /// Σdy² = 1.44 + 1.44 + .64 + .04 + 3.24 = 6.8 → r = 7 / √68;
    /// Spearman: ranks of y are 1.5, 1.5, 4, 3, 5 (ȳ = 3), Σdx·dy = 3 + 1.5 + 0 + 0 + 4 = 8.5,
    /// Σdy² = 2.25 + 2.25 + 1 + 0 + 4 = 9.5 → ρ = 8.5 / √95;
    /// sensitivity: the population sd of two values is |Δ| / 2 → mean = .15 / 2 = .075.
    #[test]
    fn two_judges_agree_as_computed_by_hand() {
        let catalog = catalog();
        let parent = session("p", None, "judge-a", [1.0, 2.0, 3.0, 4.0, 5.0].map(Some));
        let child = session("c", Some("p"), "judge-b", [2.0, 2.0, 4.0, 3.0, 5.0].map(Some));
        let j = by_journal_ids(&[&parent, &child], &catalog).unwrap();
        assert_eq!(j.interviews, "p");
        assert_eq!(j.sessions[1].judge.as_deref(), Some("p/judge-b"));
        assert_eq!(j.sessions[1].parent.as_deref(), Some("p"));
        assert_eq!(j.scores.len(), 5);
        assert_eq!(j.scores[0].dimension, "Extraversion", "in the scale's order");
        assert_eq!(j.scores[0].raw, [Some(1.0), Some(2.0)]);
        assert_eq!(j.scores[0].normalized, [Some(0.0), Some(0.25)]);
        let [pair] = &j.pairs[..] else { panic!("{:?}", j.pairs) };
        assert_eq!(
            (pair.a.as_str(), pair.b.as_str(), pair.method, pair.n),
            ("p", "c", Method::ErBatch, 5)
        );
        assert!(close(pair.pearson, 7.0 / 68f64.sqrt()), "{pair:?}");
        assert!(close(pair.spearman, 8.5 / 95f64.sqrt()), "{pair:?}");
        assert!(close(pair.mean_abs_diff, 0.15), "{pair:?}");
        let bfi = &j.scales["BFI"];
        assert!(close(bfi.sensitivity, 0.075), "{bfi:?}");
        assert_eq!(bfi.n, 5);
        assert_eq!(j.summary.len(), 2, "one row per session × scale × method");
        let json = j.to_json();
        assert_eq!(json["pairs"][0]["method"], "er-batch");
        assert_eq!(json["scores"][0]["scores"]["c"], 0.25);
        assert_eq!(json["scores"][0]["raw"]["p"], 1.0);
        assert!(json["scales"]["BFI"]["sensitivity"].is_number());
    }

    /// Only the dimensions both scored count; a pair left with too few has null correlations, not NaN.
    #[test]
    fn unscored_dimensions_are_left_out_and_undefined_correlations_are_null() {
        let catalog = catalog();
        let a = session("p", None, "a", [Some(1.0), None, Some(3.0), None, None]);
        let b = session("c", Some("p"), "b", [Some(2.0), Some(2.0), None, None, None]);
        let j = by_journal_ids(&[&a, &b], &catalog).unwrap();
        let pair = &j.pairs[0];
        assert_eq!(pair.n, 1);
        assert_eq!((pair.pearson, pair.spearman), (None, None));
        assert!(close(pair.mean_abs_diff, 0.25));
        assert_eq!(
            j.scores[1].normalized,
            [None, Some(0.25)],
            "null where a session lacks it"
        );
        let json = j.to_json();
        assert!(json["pairs"][0]["pearson"].is_null());
        assert!(json["scores"][1]["scores"]["p"].is_null());
        // One row has two scores (Extraversion): its spread is the scale's sensitivity.
        assert!(close(j.scales["BFI"].sensitivity, 0.125));
        assert_eq!(j.scales["BFI"].n, 1);
    }

    #[test]
    fn a_session_and_an_identical_copy_agree_perfectly() {
        let catalog = catalog();
        let scores = [1.5, 4.0, 2.5, 3.0, 4.5].map(Some);
        let a = session("p", None, "a", scores);
        let b = session("c", Some("p"), "a", scores);
        let j = by_journal_ids(&[&a, &b], &catalog).unwrap();
        let pair = &j.pairs[0];
        assert!(close(pair.pearson, 1.0) && close(pair.spearman, 1.0), "{pair:?}");
        assert!(close(pair.mean_abs_diff, 0.0));
        assert!(close(j.scales["BFI"].sensitivity, 0.0));
    }

    #[test]
    fn sessions_that_do_not_share_interviews_are_refused_with_their_sources() {
        let catalog = catalog();
        let scores = [Some(3.0); 5];
        let p = session("p", None, "a", scores);
        let c = session("c", Some("p"), "b", scores);
        let d = session("d", Some("p"), "b", scores);
        let x = session("x", Some("q"), "b", scores);
        let own = session("y", None, "b", scores);
        assert!(
            by_journal_ids(&[&c, &d], &catalog).is_ok(),
            "siblings share their parent's interviews"
        );
        assert!(by_journal_ids(&[&c, &p, &d], &catalog).is_ok(), "and the parent's own");
        let err = by_journal_ids(&[&p, &c, &x], &catalog).unwrap_err();
        assert!(matches!(err, JudgesError::NotShared(_)));
        assert_eq!(
            err.to_string(),
            "the sessions do not share interviews (interviews of p: p, c; interviews of q: x); compare a \
             session with its re-assessments (`incharacter assess`), or re-assessments of one session"
        );
        assert!(matches!(by_journal_ids(&[&p, &own], &catalog), Err(JudgesError::NotShared(_))));
        assert_eq!(by_journal_ids(&[&p], &catalog).unwrap_err(), JudgesError::TooFew(1));
        assert_eq!(
            by_journal_ids(&[&p, &p], &catalog).unwrap_err(),
            JudgesError::Repeated("p".into())
        );
    }

    #[test]
    fn a_copied_session_goes_by_its_folders_name_and_shares_interviews_with_its_original() {
        let catalog = catalog();
        let scores = [Some(3.0); 5];
        // "copy" is a copy of p's folder (its journal says p); "c" re-assesses the copy by name.
        let copy = session("p", None, "a", scores);
        let c = session("c", Some("copy"), "b", scores);
        let j = compare(&[("copy", &copy), ("c", &c)], &catalog).unwrap();
        assert_eq!((j.interviews.as_str(), j.sessions[0].id.as_str()), ("copy", "copy"));
        let original = session("p", None, "a", scores);
        assert!(compare(&[("copy", &copy), ("p", &original)], &catalog).is_ok());
        // Errors name each session by its id.
        let other = session("q", None, "b", scores);
        let err = compare(&[("copy", &copy), ("q", &other)], &catalog).unwrap_err();
        assert!(err.to_string().contains("interviews of copy: copy; interviews of q: q"), "{err}");
    }

    #[test]
    fn only_interview_sessions_are_compared() {
        let catalog = catalog();
        let p = session("p", None, "a", [Some(3.0); 5]);
        let observe: Vec<Event> = vec![Event::ObserveStarted {
            header: SessionHeader {
                session: "o".into(),
                name: None,
                created: "2026-11-29T12:00:00Z".into(),
                app_version: "0.1.0".into(),
                character_versions: Default::default(),
                scale_versions: Default::default(),
                batch: None,
            },
            plan: serde_json::from_value(json!({"subjects": [], "scenarios": 1, "turn_cap": 2, "temperature": 1.0,
                "subject_provider": "p", "observer_provider": "p", "self_report": "batched", "seed": 3, "max_attempts": 5}))
            .unwrap(),
            providers: Default::default(),
        }];
        let err = by_journal_ids(&[&p, &observe], &catalog).unwrap_err();
        assert_eq!(err, JudgesError::NotInterviews(vec!["o".into()]));
        assert!(err.to_string().starts_with("o is not an interview session"), "{err}");
    }
}
