//! Re-assessment: a new session that takes a recorded session's interviews as they are and assesses
//! them again — with another judge, prompt set, temperature or set of methods — sending only judge
//! requests. Its plan names the parent; its journal copies the parent's answers, so it stands alone.

use std::collections::BTreeMap;
use std::path::Path;

use super::{AnswerKey, Done, RunPlan};
use crate::method::Method;
use crate::method::interview::QueryStyle;
use crate::study::{Event, Interviews, Kind, Study, kind_of};
use crate::templates::{PromptSet, Template};

/// What changes in a re-assessment; everything else is the parent's.
#[derive(Debug, Clone, PartialEq)]
pub struct Reassess {
    /// `None`: the parent's methods.
    pub methods: Option<Vec<Method>>,
    pub judge: String,
    pub judge_temperature: f32,
    /// Score by the judge's expected options.
    pub expected_scores: bool,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReassessError {
    #[error("session {id} is {kind}; only interview sessions can be re-assessed")]
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
                kind: match kind {
                    Kind::Observers => "an observer session",
                    Kind::Rolebench => "a RoleBench session",
                    Kind::Interviews => "an interview session",
                },
            });
        }
        None => return Err(ReassessError::NoPlan { id: parent.to_string() }),
    }
    let source = Interviews::plan_of(events).ok_or_else(|| ReassessError::NoPlan { id: parent.to_string() })?;
    let asked = asked(source);
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
            available: available(&asked),
        });
    }
    let mut plan = source.clone();
    plan.methods = methods;
    plan.judge = change.judge.clone();
    plan.judge_temperature = change.judge_temperature;
    plan.expected_scores = change.expected_scores;
    plan.max_attempts = crate::method::judge::DEFAULT_ATTEMPTS;
    // Conversion calls are fitted to this judge when the session opens, not kept at the parent's.
    plan.items_per_call = crate::method::convert::MAX_ITEMS_PER_CALL as u32;
    plan.parent = Some(source.parent.clone().unwrap_or_else(|| parent.to_string()));
    // Names the parent's resumes masked besides its plan's.
    super::fold_masked(&mut plan.masked, events);
    // A new session: it reads and orders answers as new runs do.
    plan.original_reading = true;
    Ok(plan)
}

/// The interviews a plan asked (one query style per method).
fn asked(plan: &RunPlan) -> Vec<QueryStyle> {
    plan.methods.iter().map(|m| m.query_style()).collect()
}

/// The methods that can assess interviews asked in `asked` styles.
fn available(asked: &[QueryStyle]) -> Vec<Method> {
    Method::ALL
        .into_iter()
        .filter(|m| asked.contains(&m.query_style()))
        .collect()
}

/// What a re-assessment of `parent` can choose from: the parent's methods (the default) and every
/// method its interviews can be assessed with. Errors as [`plan`] does for a session that is not an
/// interview session.
pub fn methods(parent: &str, events: &[Event]) -> Result<(Vec<Method>, Vec<Method>), ReassessError> {
    let plan = plan(
        parent,
        events,
        &Reassess {
            methods: None,
            judge: String::new(),
            judge_temperature: 0.0,
            expected_scores: false,
        },
    )?;
    let available = available(&asked(&plan));
    Ok((plan.methods, available))
}

/// The id a re-assessment records for the session in `dir` with records `events`: the folder's name,
/// which is what finds it again (a copied folder keeps the id its journal started under), else the
/// one its start record names.
pub fn parent_id(dir: &Path, events: &[Event]) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .or_else(|| events.iter().find_map(|e| e.start().map(|s| s.session.to_string())))
        .unwrap_or_default()
}

/// What a re-assessment is called when it is given no name: the session it re-assesses (by its
/// name, else its id) and the judge. A re-assessment of a re-assessment names the first one's
/// session once, not a chain of judges.
pub fn default_name(parent: &str, events: &[Event], judge: &str) -> String {
    let named = events
        .iter()
        .find_map(|e| e.start().and_then(|s| s.name.clone()))
        .filter(|n| !n.trim().is_empty());
    let of = match &named {
        Some(name) => name.split(RE_ASSESSED).next().unwrap_or(name),
        None => parent,
    };
    format!("{of}{RE_ASSESSED}{judge}")
}

const RE_ASSESSED: &str = ", re-assessed by ";

/// Gives `plan` the judge's templates of a prompt folder (`folder`, as [`Templates::record`] gives
/// it; the rest bundled) while the interviews keep the parent's wording, since they were asked with
/// it. Returns a note for each interview template the folder holds, which a re-assessment ignores.
///
/// [`Templates::record`]: crate::templates::Templates::record
pub fn with_prompts(plan: &mut RunPlan, folder: PromptSet) -> Vec<String> {
    let interview = |name: &str| Template::from_name(name).is_some_and(Template::is_interview);
    plan.prompts.retain(|name, _| interview(name));
    let mut notes = Vec::new();
    for (name, file) in folder {
        if interview(&name) {
            notes.push(format!(
                "{} is the interview's wording; a re-assessment keeps the parent's",
                name
            ));
        } else {
            plan.prompts.insert(name, file);
        }
    }
    notes
}

/// The parent's answers a journal (`done`) has not copied yet, each as the parent recorded it (the
/// latest answer of an item wins, as in the parent's own results).
pub fn answers(parent: &[Event], done: &Done) -> BTreeMap<AnswerKey, Event> {
    let mut out = BTreeMap::new();
    for e in parent {
        if let Some((key, _)) = super::answer(e)
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
        plan.items_per_call = 6;
        vec![
            Event::RunStarted {
                header: SessionHeader {
                    session: "p".into(),
                    name: None,
                    created: "2026-01-01T00:00:00Z".into(),
                    app_version: "0".into(),
                    character_versions: Default::default(),
                    scale_versions: Default::default(),
                    batch: None,
                },
                plan: Box::new(plan),
                providers: BTreeMap::new(),
            },
            answered(1, "first"),
            answered(2, "second"),
            answered(1, "first, asked again"),
        ]
    }

    #[test]
    fn a_re_assessment_is_named_after_its_session_and_judge_once() {
        let mut events = parent(&[Method::ErBatch], None);
        let name = |events: &mut Vec<Event>, name: &str| {
            let Event::RunStarted { header, .. } = &mut events[0] else { unreachable!() };
            header.name = Some(name.into());
        };
        assert_eq!(default_name("p", &events, "gpt"), "p, re-assessed by gpt");
        name(&mut events, "  ");
        assert_eq!(default_name("p", &events, "gpt"), "p, re-assessed by gpt", "a blank name is none");
        name(&mut events, "BFI today");
        assert_eq!(default_name("p", &events, "gpt"), "BFI today, re-assessed by gpt");
        let again = default_name("p", &events, "gpt");
        name(&mut events, &again);
        assert_eq!(default_name("q", &events, "local"), "BFI today, re-assessed by local");
    }

    /// A plan recorded before the original's reading keeps the earlier one (its resumes read as it
    /// began); new plans, and re-assessments of old sessions, which are new sessions, read as the
    /// original does.
    #[test]
    fn only_new_sessions_read_as_the_original_does() {
        let mut events = parent(&[Method::ErBatch], None);
        let Event::RunStarted { plan, .. } = &mut events[0] else { unreachable!() };
        assert!(plan.original_reading);
        let mut json = serde_json::to_value(&**plan).unwrap();
        json.as_object_mut().unwrap().remove("original_reading");
        let old: RunPlan = serde_json::from_value(json).unwrap();
        assert!(!old.original_reading, "recorded before the field");
        **plan = old;
        assert!(super::plan("p", &events, &change(None)).unwrap().original_reading);
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
            truncated: false,
        }
    }

    fn change(methods: Option<Vec<Method>>) -> Reassess {
        Reassess {
            methods,
            judge: "other".into(),
            judge_temperature: 0.3,
            expected_scores: true,
        }
    }

    #[test]
    fn a_reassessment_keeps_the_interviews_and_changes_the_judge() {
        let events = parent(&[Method::ErBatch, Method::Oc], None);
        let plan = plan("p", &events, &change(Some(vec![Method::DOc]))).unwrap();
        assert_eq!(plan.methods, vec![Method::DOc]);
        assert_eq!((plan.judge.as_str(), plan.judge_temperature), ("other", 0.3));
        assert!(plan.expected_scores);
        assert_eq!((plan.rpa.as_str(), plan.seed), ("rpa-model", 9));
        assert_eq!(plan.parent.as_deref(), Some("p"));
        assert_eq!(
            plan.items_per_call, 60,
            "fitted to the new judge when the session opens"
        );
        let same = super::plan("p", &events, &change(None)).unwrap();
        assert_eq!(same.methods, vec![Method::ErBatch, Method::Oc]);
    }

    #[test]
    fn a_parent_is_recorded_by_the_folder_that_finds_it() {
        // A copied folder keeps the id its journal started under ("p"): the copy is the parent.
        let events = parent(&[Method::Oc], None);
        assert_eq!(parent_id(Path::new("/data/sessions/my-copy"), &events), "my-copy");
        assert_eq!(parent_id(Path::new(""), &events), "p", "no folder name: the journal's id");
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
    fn the_choices_are_the_parents_methods_and_those_its_interviews_allow() {
        let events = parent(&[Method::Oc], None);
        let (own, available) = methods("p", &events).unwrap();
        assert_eq!(own, [Method::Oc]);
        assert_eq!(available, [Method::ErBatch, Method::ErAll, Method::Oc, Method::DOc]);
        let mut observe = events.clone();
        observe.remove(0);
        assert_eq!(
            methods("p", &observe).unwrap_err(),
            ReassessError::NoPlan { id: "p".into() }
        );
    }

    #[test]
    fn a_prompt_folder_changes_the_judges_wording_and_never_the_interviews() {
        let file = |origin: &str| crate::templates::PromptFile {
            origin: origin.into(),
            sha256: "x".into(),
            text: Some(origin.into()),
        };
        let mut plan = plan("p", &parent(&[Method::ErBatch], None), &change(None)).unwrap();
        plan.prompts = PromptSet::from([
            ("interviewer".to_string(), file("parent's interviewer")),
            ("expert_rating".to_string(), file("parent's rating")),
        ]);
        let notes = with_prompts(
            &mut plan,
            PromptSet::from([
                ("interviewer".to_string(), file("folder's interviewer")),
                ("reask".to_string(), file("folder's reask")),
            ]),
        );
        let origins: Vec<(&str, &str)> = plan
            .prompts
            .iter()
            .map(|(n, f)| (n.as_str(), f.origin.as_str()))
            .collect();
        assert_eq!(
            origins,
            [("interviewer", "parent's interviewer"), ("reask", "folder's reask")]
        );
        assert_eq!(
            notes,
            ["interviewer is the interview's wording; a re-assessment keeps the parent's"]
        );
    }

    #[test]
    fn a_reassessment_of_a_reassessment_names_the_original_interviews() {
        let events = parent(&[Method::ErBatch], Some("root"));
        assert_eq!(
            plan("child", &events, &change(None)).unwrap().parent.as_deref(),
            Some("root")
        );
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
