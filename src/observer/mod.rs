//! Observer agents (the multi-observer framework): observers with a relationship to the subject hold
//! scenario dialogues with it and rate it on IPIP-50; their mean is compared with the subject's
//! self-report and, for synthetic subjects, with the latent profile the subject was built from.
//! `persona` draws synthetic people, `run` drives the model calls, `report` scores and compares.

pub mod persona;
pub mod report;
pub mod run;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::rng::SplitMix64;
use crate::domain::scoring::ItemOption;
use persona::Persona;

/// The questionnaire every report uses.
pub const SCALE: &str = "IPIP-50";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Context {
    Family,
    Friend,
    Workplace,
}

impl Context {
    pub const ALL: [Context; 3] = [Context::Family, Context::Friend, Context::Workplace];

    pub fn name(self) -> &'static str {
        match self {
            Context::Family => "family",
            Context::Friend => "friend",
            Context::Workplace => "workplace",
        }
    }

    pub fn parse(s: &str) -> Option<Context> {
        Context::ALL.into_iter().find(|c| c.name() == s.trim())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubjectKind {
    Character,
    Synthetic,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObserverSpec {
    pub id: String,
    pub context: Context,
    pub persona: Persona,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubjectSpec {
    pub id: String,
    pub kind: SubjectKind,
    /// The character id, for a character subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub character: Option<String>,
    /// The persona, for a synthetic subject (its `latent` is the ground truth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persona: Option<Persona>,
    pub observers: Vec<ObserverSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelfReportMode {
    /// All 50 statements in one request.
    Batched,
    /// One request per statement.
    Items,
}

/// Everything an observer run needs, fixed when it starts (personas included), so a resume is exact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservePlan {
    pub subjects: Vec<SubjectSpec>,
    pub scenarios: usize,
    pub turn_cap: usize,
    /// Sampling temperature of relationships, scenarios and dialogues (reports use 0).
    #[serde(serialize_with = "crate::domain::decimal::short")]
    pub temperature: f32,
    pub subject_provider: String,
    pub observer_provider: String,
    pub self_report: SelfReportMode,
    pub seed: u64,
    pub max_attempts: u32,
}

/// What to draw: subjects (characters, or synthetic with optional fixed latent levels) and observers
/// per context.
pub struct Draw<'a> {
    pub characters: &'a [String],
    pub synthetic: usize,
    pub latent: Option<[u8; 5]>,
    pub observers: &'a [(Context, usize)],
    pub seed: u64,
}

/// Subjects and observers drawn from the seed.
pub fn draw(d: &Draw<'_>) -> Vec<SubjectSpec> {
    let mut rng = SplitMix64(d.seed);
    let mut subjects = Vec::new();
    let observers = |rng: &mut SplitMix64| {
        let mut out = Vec::new();
        for &(context, n) in d.observers {
            for _ in 0..n {
                out.push(ObserverSpec {
                    id: format!("o{}", out.len() + 1),
                    context,
                    persona: Persona::draw(rng, None),
                });
            }
        }
        out
    };
    for c in d.characters {
        let obs = observers(&mut rng);
        subjects.push(SubjectSpec {
            id: c.clone(),
            kind: SubjectKind::Character,
            character: Some(c.clone()),
            persona: None,
            observers: obs,
        });
    }
    for i in 0..d.synthetic {
        let persona = Persona::draw(&mut rng, d.latent);
        let obs = observers(&mut rng);
        subjects.push(SubjectSpec {
            id: format!("s{}", i + 1),
            kind: SubjectKind::Synthetic,
            character: None,
            persona: Some(persona),
            observers: obs,
        });
    }
    subjects
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Observer,
    Subject,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub speaker: Side,
    pub utterance: String,
    pub end: bool,
}

/// Journaled steps of an observer run (inside `Event::Observed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    Relationship {
        subject: String,
        observer: String,
        relationship: String,
    },
    Scenarios {
        subject: String,
        observer: String,
        scenarios: Vec<String>,
    },
    Turn {
        subject: String,
        observer: String,
        scenario: usize,
        #[serde(flatten)]
        turn: Turn,
    },
    SelfReport {
        subject: String,
        mode: SelfReportMode,
        #[serde(with = "options_map")]
        items: BTreeMap<u32, ItemOption>,
        /// Items no reply answered usably, left out of the scores (in `batched` mode after being
        /// asked again alone; in `items` mode each is asked alone from the start, with its re-asks).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<u32>,
        /// Items the first reply had no usable option for, asked again on their own (the ones
        /// answered then are in `items`, the others in `left_out`). Only in `batched` mode: an item
        /// asked alone is not asked alone again.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        asked_again: Vec<u32>,
    },
    Report {
        subject: String,
        observer: String,
        #[serde(with = "options_map")]
        items: BTreeMap<u32, ItemOption>,
        /// As a self-report's.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<u32>,
        /// As a self-report's.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        asked_again: Vec<u32>,
    },
    Failed {
        subject: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observer: Option<String>,
        what: String,
        error: String,
    },
    /// A reply that could not be used, asked again until one could (the re-ask policy, bounded by
    /// `max_attempts`): every attempt, the one taken last. Written before the step it made.
    Reasked {
        subject: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observer: Option<String>,
        /// The request's purpose ("dialogue hermione-en o1 1 turn 3", "report hermione-en o1", …),
        /// which names the subject and observer too.
        #[serde(alias = "what")]
        purpose: String,
        attempts: Vec<crate::method::judge::Attempt>,
    },
}

impl Step {
    /// The line a failure or a re-ask is said with, in the progress and the Live log; none for the
    /// steps that make the run.
    pub fn note(&self) -> Option<String> {
        match self {
            Step::Failed {
                subject,
                observer,
                what,
                error,
            } => {
                let who: Vec<&str> = [Some(subject.as_str()), observer.as_deref(), Some(what.as_str())]
                    .into_iter()
                    .flatten()
                    .collect();
                Some(format!("failed: {}: {error}", who.join(" ")))
            }
            Step::Reasked { purpose, attempts, .. } => {
                let last = attempts.iter().rev().find_map(|a| a.error.as_deref()).unwrap_or_default();
                Some(format!(
                    "re-asked: {purpose}: usable after {} attempts (before: {last})",
                    attempts.len()
                ))
            }
            _ => None,
        }
    }
}

/// The calls whose reply was usable only after a re-ask, by (subject, observer; none for the
/// subject's self-report): their purposes. A call is there once: one killed after its record and
/// before its step is made again on resume, and records itself again. (Made again with the response
/// cache off, it may take its first reply then: it counts still, as a call that was re-asked once.)
pub fn reasked_calls<'a>(
    steps: impl IntoIterator<Item = &'a Step>,
) -> BTreeMap<(&'a str, Option<&'a str>), std::collections::BTreeSet<&'a str>> {
    let mut calls: BTreeMap<_, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for step in steps {
        if let Step::Reasked {
            subject,
            observer,
            purpose,
            ..
        } = step
        {
            calls
                .entry((subject.as_str(), observer.as_deref()))
                .or_default()
                .insert(purpose.as_str());
        }
    }
    calls
}

/// Item options as `{"12": 4, "13": "x"}` (string keys, so the map survives the tagged enum around it).
mod options_map {
    use std::collections::BTreeMap;

    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    use crate::domain::scoring::ItemOption;

    pub fn serialize<S: Serializer>(items: &BTreeMap<u32, ItemOption>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(items.iter().map(|(id, o)| {
            let v = match o {
                ItemOption::Value(v) => Value::from(*v),
                ItemOption::Refused => Value::from("x"),
            };
            (id.to_string(), v)
        }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<u32, ItemOption>, D::Error> {
        let raw = BTreeMap::<String, Value>::deserialize(d)?;
        raw.into_iter()
            .map(|(k, v)| {
                let id = k
                    .parse::<u32>()
                    .map_err(|_| D::Error::custom(format!("item id \"{k}\"")))?;
                let option = match &v {
                    Value::String(x) if x == "x" => ItemOption::Refused,
                    Value::Number(n) => ItemOption::Value(
                        n.as_i64()
                            .and_then(|n| i32::try_from(n).ok())
                            .ok_or_else(|| D::Error::custom(format!("option {n}")))?,
                    ),
                    other => return Err(D::Error::custom(format!("option {other}"))),
                };
                Ok((id, option))
            })
            .collect()
    }
}

/// What a journal already holds of an observer run.
#[derive(Debug, Default, Clone)]
pub struct Done {
    pub relationships: BTreeMap<(String, String), String>,
    pub scenarios: BTreeMap<(String, String), Vec<String>>,
    pub turns: BTreeMap<(String, String, usize), Vec<Turn>>,
    pub self_reports: BTreeMap<String, BTreeMap<u32, ItemOption>>,
    pub reports: BTreeMap<(String, String), BTreeMap<u32, ItemOption>>,
}

impl Done {
    pub fn from_steps<'a>(steps: impl IntoIterator<Item = &'a Step>) -> Done {
        let mut done = Done::default();
        for s in steps {
            match s {
                Step::Relationship {
                    subject,
                    observer,
                    relationship,
                } => {
                    done.relationships
                        .insert((subject.clone(), observer.clone()), relationship.clone());
                }
                Step::Scenarios {
                    subject,
                    observer,
                    scenarios,
                } => {
                    done.scenarios
                        .insert((subject.clone(), observer.clone()), scenarios.clone());
                }
                Step::Turn {
                    subject,
                    observer,
                    scenario,
                    turn,
                } => done
                    .turns
                    .entry((subject.clone(), observer.clone(), *scenario))
                    .or_default()
                    .push(turn.clone()),
                Step::SelfReport { subject, items, .. } => {
                    done.self_reports.insert(subject.clone(), items.clone());
                }
                Step::Report {
                    subject,
                    observer,
                    items,
                    ..
                } => {
                    done.reports.insert((subject.clone(), observer.clone()), items.clone());
                }
                Step::Failed { .. } | Step::Reasked { .. } => {}
            }
        }
        done
    }
}

/// Whether a dialogue is over: both sides' latest turns said end, or the cap is reached.
pub fn dialogue_over(turns: &[Turn], cap: usize) -> bool {
    if turns.len() >= cap {
        return true;
    }
    let last = |side: Side| turns.iter().rev().find(|t| t.speaker == side).map(|t| t.end);
    last(Side::Observer) == Some(true) && last(Side::Subject) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_seeded_and_observers_follow_the_contexts() {
        let d = Draw {
            characters: &["hermione-en".to_string()],
            synthetic: 2,
            latent: None,
            observers: &[(Context::Family, 2), (Context::Workplace, 1)],
            seed: 3,
        };
        let a = draw(&d);
        assert_eq!(a, draw(&d));
        assert_eq!(a.len(), 3);
        assert_eq!(a[0].kind, SubjectKind::Character);
        let contexts: Vec<Context> = a[1].observers.iter().map(|o| o.context).collect();
        assert_eq!(contexts, [Context::Family, Context::Family, Context::Workplace]);
        assert_ne!(a[1].persona, a[2].persona);
    }

    #[test]
    fn a_dialogue_ends_when_both_say_so_or_at_the_cap() {
        let t = |speaker, end| Turn {
            speaker,
            utterance: "…".into(),
            end,
        };
        assert!(!dialogue_over(&[t(Side::Observer, true)], 10));
        assert!(!dialogue_over(&[t(Side::Observer, true), t(Side::Subject, false)], 10));
        assert!(dialogue_over(&[t(Side::Observer, true), t(Side::Subject, true)], 10));
        assert!(dialogue_over(&[t(Side::Observer, false), t(Side::Subject, false)], 2));
    }

    #[test]
    fn steps_round_trip_through_json() {
        let step = Step::Turn {
            subject: "s1".into(),
            observer: "o1".into(),
            scenario: 0,
            turn: Turn {
                speaker: Side::Subject,
                utterance: "Hello.".into(),
                end: false,
            },
        };
        let json = serde_json::to_string(&step).unwrap();
        assert!(
            json.contains("\"step\":\"turn\"") && json.contains("\"speaker\":\"subject\""),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Step>(&json).unwrap(), step);
        let report = Step::Report {
            left_out: Vec::new(),
            asked_again: Vec::new(),
            subject: "s1".into(),
            observer: "o1".into(),
            items: [(1, ItemOption::Value(4)), (2, ItemOption::Refused)]
                .into_iter()
                .collect(),
        };
        let json = serde_json::to_string(&report).unwrap();
        assert!(json.contains("\"items\":{\"1\":4,\"2\":\"x\"}"), "{json}");
        assert_eq!(serde_json::from_str::<Step>(&json).unwrap(), report);
    }

    /// A failure without an observer (the self-report's) is said without a gap; a re-ask by its
    /// purpose alone (which names the subject and observer already), and a journal of the first
    /// version, whose key was `what`, still reads.
    #[test]
    fn failures_and_reasks_are_said_once_each_and_old_records_read() {
        let failed = |observer: Option<&str>| Step::Failed {
            subject: "s1".into(),
            observer: observer.map(str::to_string),
            what: "self-report".into(),
            error: "no usable reply".into(),
        };
        assert_eq!(failed(None).note().unwrap(), "failed: s1 self-report: no usable reply");
        assert_eq!(failed(Some("o1")).note().unwrap(), "failed: s1 o1 self-report: no usable reply");
        let old = r#"{"step":"reasked","subject":"s1","what":"self-report s1","attempts":[
            {"temperature":0.0,"reply":"prose","error":"the reply holds no JSON object","cached":false},
            {"temperature":0.20000000298023224,"reply":"{}","error":null,"cached":false}]}"#;
        let step: Step = serde_json::from_str(old).unwrap();
        assert_eq!(
            step.note().unwrap(),
            "re-asked: self-report s1: usable after 2 attempts (before: the reply holds no JSON object)"
        );
        let again = serde_json::to_string(&step).unwrap();
        assert!(again.contains(r#""purpose":"self-report s1""#) && again.contains(r#""temperature":0.2,"#), "{again}");
        assert_eq!(reasked_calls([&step, &step]).values().map(|c| c.len()).sum::<usize>(), 1);
    }
}
