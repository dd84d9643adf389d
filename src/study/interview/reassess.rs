//! Re-assessment: a new session that takes a recorded session's interviews as they are and assesses
//! them again — with another judge, prompt set, temperature or set of methods — sending only judge
//! requests. Its plan names the parent; its journal copies the parent's answers, so it stands alone.

use std::collections::BTreeMap;

use super::{AnswerKey, Done, RunPlan};
use crate::method::Method;
use crate::method::interview::QueryStyle;
use crate::study::{Event, Interviews, Kind, Study, kind_of};

/// What changes in a re-assessment; everything else is the parent's.
#[derive(Debug, Clone, PartialEq)]
pub struct Reassess {
    /// `None`: the parent's methods.
    pub methods: Option<Vec<Method>>,
    pub judge: String,
    pub judge_temperature: f32,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReassessError {
    #[error("session {id} is a {kind} session; only interview sessions can be re-assessed")]
    NotInterviews { id: String, kind: &'static str },
    #[error("session {id} has no plan (its journal holds no start record)")]
    NoPlan { id: String },
    #[error(
        "session {id} did not ask the interviews {}; it can be re-assessed with {}",
        missing.iter().map(|(m, s)| format!("{} needs ({} questions)", m.name(), s.name())).collect::<Vec<_>>().join(", "),
        available.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
    )]
    MissingInterviews {
        id: String,
        missing: Vec<(Method, QueryStyle)>,
        available: Vec<Method>,
    },
}

/// The plan of a re-assessment of `parent` (its records `events`). A re-assessment of a
/// re-assessment names the session whose interviews they both hold, so sessions that assess the same
/// answers always share one parent.
pub fn plan(parent: &str, events: &[Event], change: &Reassess) -> Result<RunPlan, ReassessError> {
    match kind_of(events) {
        Some(Kind::Interviews) => {}
        Some(kind) => {
            return Err(ReassessError::NotInterviews {
                id: parent.to_string(),
                kind: kind.name(),
            });
        }
        None => return Err(ReassessError::NoPlan { id: parent.to_string() }),
    }
    let source = Interviews::plan_of(events).ok_or_else(|| ReassessError::NoPlan { id: parent.to_string() })?;
    let asked: Vec<QueryStyle> = source.methods.iter().map(|m| m.query_style()).collect();
    let methods = change.methods.clone().unwrap_or_else(|| source.methods.clone());
    let missing: Vec<(Method, QueryStyle)> = methods
        .iter()
        .filter(|m| !asked.contains(&m.query_style()))
        .map(|m| (*m, m.query_style()))
        .collect();
    if !missing.is_empty() {
        return Err(ReassessError::MissingInterviews {
            id: parent.to_string(),
            missing,
            available: Method::ALL
                .into_iter()
                .filter(|m| asked.contains(&m.query_style()))
                .collect(),
        });
    }
    let mut plan = source.clone();
    plan.methods = methods;
    plan.judge = change.judge.clone();
    plan.judge_temperature = change.judge_temperature;
    plan.max_attempts = crate::method::judge::DEFAULT_ATTEMPTS;
    plan.parent = Some(source.parent.clone().unwrap_or_else(|| parent.to_string()));
    Ok(plan)
}

/// The parent's answers a journal (`done`) has not copied yet, each as the parent recorded it (the
/// latest answer of an item wins, as in the parent's own results).
pub fn answers(parent: &[Event], done: &Done) -> BTreeMap<AnswerKey, Event> {
    let mut out = BTreeMap::new();
    for e in parent {
        if let Some(key) = super::answer_key(e)
            && !done.answers.contains_key(&key)
        {
            out.insert(key, e.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::SessionHeader;

    fn parent(methods: &[Method], parent: Option<&str>) -> Vec<Event> {
        let mut plan = RunPlan::new(
            vec!["hermione-en".into()],
            vec!["BFI".into()],
            methods.to_vec(),
            "rpa-model",
            "judge-model",
        );
        plan.parent = parent.map(str::to_string);
        plan.seed = 9;
        vec![
            Event::RunStarted {
                header: SessionHeader {
                    session: "p".into(),
                    name: None,
                    created: "2026-01-01T00:00:00Z".into(),
                    app_version: "0".into(),
                },
                plan: Box::new(plan),
                providers: BTreeMap::new(),
            },
            answered(1, "first"),
            answered(2, "second"),
            answered(1, "first, asked again"),
        ]
    }

    fn answered(item_id: u32, response: &str) -> Event {
        Event::ItemAnswered {
            character: "hermione-en".into(),
            scale: "BFI".into(),
            repeat: 0,
            style: QueryStyle::Open,
            item_id,
            question: "q".into(),
            response: response.into(),
            retrieved: vec![],
        }
    }

    fn change(methods: Option<Vec<Method>>) -> Reassess {
        Reassess {
            methods,
            judge: "other".into(),
            judge_temperature: 0.3,
        }
    }

    #[test]
    fn a_reassessment_keeps_the_interviews_and_changes_the_judge() {
        let events = parent(&[Method::ErBatch, Method::Oc], None);
        let plan = plan("p", &events, &change(Some(vec![Method::DOc]))).unwrap();
        assert_eq!(plan.methods, vec![Method::DOc]);
        assert_eq!((plan.judge.as_str(), plan.judge_temperature), ("other", 0.3));
        assert_eq!((plan.rpa.as_str(), plan.seed), ("rpa-model", 9));
        assert_eq!(plan.parent.as_deref(), Some("p"));
        let same = super::plan("p", &events, &change(None)).unwrap();
        assert_eq!(same.methods, vec![Method::ErBatch, Method::Oc]);
    }

    #[test]
    fn methods_whose_interviews_the_parent_lacks_are_refused_by_name() {
        let events = parent(&[Method::ErBatch], None);
        let e = plan("p", &events, &change(Some(vec![Method::Oc, Method::Sr]))).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("sr needs (sr questions)"), "{text}");
        assert!(!text.contains("oc needs"), "{text}");
        assert!(text.contains("re-assessed with er-batch, er-all, oc, d-oc"), "{text}");
    }

    #[test]
    fn a_reassessment_of_a_reassessment_names_the_original_interviews() {
        let events = parent(&[Method::ErBatch], Some("root"));
        assert_eq!(plan("child", &events, &change(None)).unwrap().parent.as_deref(), Some("root"));
    }

    #[test]
    fn the_latest_answer_is_copied_and_copied_ones_are_not_copied_again() {
        let events = parent(&[Method::ErBatch], None);
        let all = answers(&events, &Done::default());
        assert_eq!(all.len(), 2);
        let key = ("hermione-en".to_string(), "BFI".to_string(), 0, QueryStyle::Open, 1);
        assert_eq!(all[&key], answered(1, "first, asked again"));
        let done = Done::from_events(&[answered(1, "first, asked again")]);
        assert_eq!(answers(&events, &done).len(), 1);
    }
}
