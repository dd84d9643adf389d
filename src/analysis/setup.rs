//! Where two interview sessions were asked or judged otherwise: the models (by what they are, not by
//! the provider names a config gives them), the role-play style, the prompt templates, the sampling,
//! the judge's temperature and the reading of replies. (Items per conversion call are not among
//! them: a run fits them to its judge's context, so they follow from the judge model.) A score that moved between two sessions that
//! differ here may have moved for that, not for the character: `diff` says so, and the Persona view
//! compares a probe with an earlier session that differs in none of it.

use serde::Serialize;

use crate::llm::ModelInfo;
use crate::method::Method;
use crate::study::Event;
use crate::study::interview::RunPlan;
use crate::templates::{BUNDLED, PromptFile, PromptSet, Template};

/// One way the two sessions differ: what, and how each side has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetupDifference {
    pub what: String,
    pub a: String,
    pub b: String,
}

fn plan_of(events: &[Event]) -> Option<&RunPlan> {
    events.iter().find_map(|e| match e {
        Event::RunStarted { plan, .. } => Some(plan.as_ref()),
        _ => None,
    })
}

fn model_of<'a>(events: &'a [Event], role: &str) -> Option<&'a ModelInfo> {
    events.iter().find_map(|e| e.start()?.providers.get(role))
}

/// A model as the difference shows it: its name, with the file's SHA-256 (shortened) when two files
/// of one name differ.
fn model_text(m: Option<&ModelInfo>, with_file: bool) -> String {
    match m {
        None => "not recorded".to_string(),
        Some(m) => match (&m.sha256, with_file) {
            (Some(sha), true) => format!("{m}, file {}", short(sha)),
            _ => m.to_string(),
        },
    }
}

fn template_text(file: Option<&PromptFile>) -> String {
    match file {
        None => BUNDLED.to_string(),
        Some(f) => format!("{} (sha256 {})", f.origin, short(&f.sha256)),
    }
}

/// Whether a run of `methods` reads template `t`: the expert rating's for ER, the option
/// conversion's for OC and the self-reports (whose replies that are no bare number it converts), the
/// dimension conversion's for d-OC, the self-report questions for SR; the interviewer's, the re-ask
/// and the others for every method.
fn read_by(t: Template, methods: &[Method]) -> bool {
    let name = t.name();
    let any = |of: &[Method]| methods.iter().any(|m| of.contains(m));
    if name.starts_with("expert_") {
        any(&[Method::ErBatch, Method::ErAll])
    } else if name.starts_with("option_conversion") || name.starts_with("oc_") {
        any(&[Method::Oc, Method::Sr, Method::SrCot])
    } else if name.starts_with("dimension_conversion") || name.starts_with("doc_") {
        any(&[Method::DOc])
    } else if name.starts_with("self_report") || name.starts_with("sr_") {
        any(&[Method::Sr, Method::SrCot])
    } else {
        true
    }
}

/// The first twelve characters of a SHA-256 as recorded (a journal edited by hand may hold anything).
fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// The templates the two sets read differently that a run of `methods` reads, in the bundle's order
/// (a set lists only the files it did not take from the bundle).
fn templates(a: &PromptSet, b: &PromptSet, methods: &[Method]) -> Vec<SetupDifference> {
    let sha = |set: &PromptSet, t: Template| {
        set.get(t.name())
            .map_or_else(|| crate::templates::sha256(t.bundled_text()), |f| f.sha256.clone())
    };
    Template::ALL
        .into_iter()
        .filter(|t| read_by(*t, methods))
        .filter(|t| sha(a, *t) != sha(b, *t))
        .map(|t| SetupDifference {
            what: format!("prompt template {}", t.name()),
            a: template_text(a.get(t.name())),
            b: template_text(b.get(t.name())),
        })
        .collect()
}

fn sampling(p: &RunPlan) -> String {
    let temperature = p
        .answer_sampling
        .temperature
        .map_or("the provider's temperature".to_string(), |t| format!("temperature {t}"));
    format!("{temperature}, at most {} tokens", p.answer_sampling.max_tokens)
}

fn style(p: &RunPlan) -> String {
    serde_json::to_value(p.style)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn reading(p: &RunPlan) -> String {
    match p.original_reading {
        true => "as InCharacter's code (Python's shuffle, its bare-number reading)".to_string(),
        false => "the workbench's earlier one".to_string(),
    }
}

/// Every way session `a` was asked or judged otherwise than session `b` (none: alike): of the
/// templates, those the methods both ran read. Sessions that are not interview runs have no setup
/// to compare.
pub fn differences(a: &[Event], b: &[Event]) -> Vec<SetupDifference> {
    let (Some(pa), Some(pb)) = (plan_of(a), plan_of(b)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            out.push(SetupDifference {
                what: what.to_string(),
                a: x,
                b: y,
            });
        }
    };
    for (role, what) in [("rpa", "role-play model"), ("judge", "judge model")] {
        let (x, y) = (model_of(a, role), model_of(b, role));
        let otherwise = match (x, y) {
            (Some(x), Some(y)) => x.differs_from(y),
            (x, y) => x.is_some() != y.is_some(),
        };
        if otherwise {
            let files = matches!((x, y), (Some(x), Some(y)) if x.model == y.model);
            differ(what, model_text(x, files), model_text(y, files));
        }
    }
    differ("role-play style", style(pa), style(pb));
    differ("answer sampling", sampling(pa), sampling(pb));
    differ(
        "judge temperature",
        pa.judge_temperature.to_string(),
        pb.judge_temperature.to_string(),
    );
    differ(
        "expected scores",
        pa.expected_scores.to_string(),
        pb.expected_scores.to_string(),
    );
    differ("reading of replies", reading(pa), reading(pb));
    // The templates of the methods both ran (what the two can be compared on).
    let methods: Vec<Method> = pa.methods.iter().copied().filter(|m| pb.methods.contains(m)).collect();
    out.extend(templates(&pa.prompts, &pb.prompts, &methods));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> Vec<Event> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(name);
        let records = crate::journal::read_numbered::<Event>(&dir.join("journal.jsonl")).unwrap();
        records.into_iter().map(|(_, e)| e).collect()
    }

    fn rpa_file(events: &mut [Event], sha: &str) {
        for e in events {
            if let Event::RunStarted { providers, .. } = e {
                providers.get_mut("rpa").unwrap().sha256 = Some(sha.repeat(32));
            }
        }
    }

    /// A user's template file as a plan records it.
    fn prompt_file(origin: &str, text: &str) -> PromptFile {
        PromptFile { origin: origin.into(), sha256: crate::templates::sha256(text), text: Some(text.into()) }
    }

    #[test]
    fn a_session_against_itself_differs_in_nothing_and_each_change_is_named() {
        let mut a = sample("20261129-233202-bfi-on-the-local-model-e80e");
        assert_eq!(differences(&a, &a), vec![]);
        rpa_file(&mut a, "cd");
        let mut b = a.clone();
        rpa_file(&mut b, "ab");
        for e in &mut b {
            if let Event::RunStarted { plan, providers, .. } = e {
                plan.judge_temperature = 0.5;
                plan.original_reading = !plan.original_reading;
                plan.judge = "renamed".into();
                plan.prompts.insert("expert_rating".into(), prompt_file("/p/expert_rating.txt", "{dimension} {answer}\n"));
                // The same model under another provider name is the same model; another file of one
                // name (above) is not.
                providers.get_mut("judge").unwrap().provider = "elsewhere".into();
            }
        }
        let d = differences(&a, &b);
        let what: Vec<&str> = d.iter().map(|d| d.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "role-play model",
                "judge temperature",
                "reading of replies",
                "prompt template expert_rating"
            ],
            "{d:#?}"
        );
        assert!(d[0].b.ends_with("file abababababab"), "{d:#?}");
        assert_eq!(d[3].a, "bundled");
        // A template none of the methods both ran reads is no difference (the sample ran ER_batch
        // and d-OC: no self-report).
        for e in &mut b {
            if let Event::RunStarted { plan, .. } = e {
                plan.prompts.insert("self_report.en".into(), prompt_file("/p/self_report.en.txt", "{stem}\n"));
            }
        }
        assert_eq!(differences(&a, &b), d);
        assert!(d[3].b.starts_with("/p/expert_rating.txt (sha256 "), "{d:#?}");
    }
}
