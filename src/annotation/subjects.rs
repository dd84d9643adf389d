//! The subject task of an observer session: the multi-observer paper's validation against people.
//! An annotator reads all of a subject's dialogues and rates it per Big Five trait on the 1–5 scale of
//! the reports (or, with the per-observer toggle, rates it as one observer saw it). Agreement is per
//! annotator and trait over the rated subjects: Spearman (average ranks for ties) with the self-report
//! and with the aggregated observer report (the paper's Table 1, lower part), the mean absolute
//! difference to each (Table 3), Spearman with the latent levels for synthetic subjects, the same per
//! relationship context against that context's observers, and between annotators Spearman and QWK over
//! rounded ratings. Several sessions (one per subject model) give Table 4.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::{Annotation, Case, Task};
use crate::domain::rng::SplitMix64;
use crate::domain::scale::Scale;
use crate::domain::stats;
use crate::observer::report::{SubjectResult, Traits};
use crate::observer::{Context, ObservePlan, SCALE};

/// Ratings share the reports' trait range: the mean of 1–5 items.
pub const RANGE: (f64, f64) = (1.0, 5.0);

/// Every annotator's latest answer per case, as `annotation::load` reads them.
pub type Annotations = BTreeMap<String, BTreeMap<Case, Annotation>>;

/// The case of `subject`'s `trait_`, rated from all its dialogues or (`observer`) as one observer saw it.
pub fn case(subject: &str, observer: Option<&str>, trait_: &str) -> Case {
    Case {
        task: Task::Subject,
        character: subject.to_string(),
        scale: SCALE.to_string(),
        repeat: 0,
        dimension: trait_.to_string(),
        item_id: None,
        observer: observer.map(str::to_string),
    }
}

/// The traits, in the scale's order.
pub fn traits(scale: &Scale) -> Vec<String> {
    scale.dimensions.iter().map(|d| d.name.clone()).collect()
}

/// The subjects' ids in the session's seeded order: every annotator meets them in the same order, and
/// not in the order they were drawn.
pub fn order(plan: &ObservePlan) -> Vec<String> {
    let mut ids: Vec<String> = plan.subjects.iter().map(|s| s.id.clone()).collect();
    let mut rng = SplitMix64(plan.seed ^ 0x5ab1_ec75);
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.below(i + 1));
    }
    ids
}

/// The cases of a session in the seeded order: each subject's traits, or (`per_observer`) each of its
/// observers' traits.
pub fn cases(plan: &ObservePlan, scale: &Scale, per_observer: bool) -> Vec<Case> {
    let traits = traits(scale);
    let mut out = Vec::new();
    for id in order(plan) {
        let Some(s) = plan.subjects.iter().find(|s| s.id == id) else {
            continue;
        };
        let observers: Vec<Option<&str>> = if per_observer {
            s.observers.iter().map(|o| Some(o.id.as_str())).collect()
        } else {
            vec![None]
        };
        for o in observers {
            out.extend(traits.iter().map(|t| case(&s.id, o, t)));
        }
    }
    out
}

/// The part of a case that [`mismatch`] found wrong, so that an importer can point at its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Task,
    Subject,
    Scale,
    Trait,
    Item,
    Repeat,
    Observer,
}

#[cfg(test)]
/// Why `case` is not one of the session's subject cases (the subject, observer, scale or trait it names
/// is unknown, or it has an item), in words.
pub fn check(plan: &ObservePlan, scale: &Scale, case: &Case) -> Result<(), String> {
    mismatch(plan, scale, case).map_err(|(_, why)| why)
}

/// [`check`], with the part of the case that is wrong (the first, in the order of an export's columns).
pub fn mismatch(plan: &ObservePlan, scale: &Scale, case: &Case) -> Result<(), (Part, String)> {
    if case.task != Task::Subject {
        return Err((
            Part::Task,
            format!("an observer session's task is subject, not {}", case.task.name()),
        ));
    }
    let Some(s) = plan.subjects.iter().find(|s| s.id == case.character) else {
        let known: Vec<&str> = plan.subjects.iter().map(|s| s.id.as_str()).collect();
        return Err((
            Part::Subject,
            format!(
                "no subject {:?} in this session (its subjects: {})",
                case.character,
                known.join(", ")
            ),
        ));
    };
    if case.scale != SCALE {
        return Err((
            Part::Scale,
            format!("subjects are rated on {SCALE}, not {:?}", case.scale),
        ));
    }
    if !traits(scale).contains(&case.dimension) {
        return Err((
            Part::Trait,
            format!(
                "no trait {:?} (the traits: {})",
                case.dimension,
                traits(scale).join(", ")
            ),
        ));
    }
    if case.item_id.is_some() {
        return Err((Part::Item, "a subject case has no item_id".into()));
    }
    if case.repeat != 0 {
        return Err((Part::Repeat, "a subject case has no repeat (0 or empty)".into()));
    }
    if let Some(o) = &case.observer
        && !s.observers.iter().any(|x| &x.id == o)
    {
        let known: Vec<&str> = s.observers.iter().map(|o| o.id.as_str()).collect();
        return Err((
            Part::Observer,
            format!(
                "subject {} has no observer \"{o}\" (its observers: {})",
                s.id,
                known.join(", ")
            ),
        ));
    }
    Ok(())
}

/// n, Spearman and mean absolute difference of (human, other) pairs.
fn compared(pairs: &[(f64, f64)]) -> (usize, Option<f64>, Option<f64>) {
    let (h, x): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let mad = (!pairs.is_empty()).then(|| pairs.iter().map(|(h, x)| (h - x).abs()).sum::<f64>() / pairs.len() as f64);
    (pairs.len(), stats::spearman(&h, &x), mad)
}

/// Pairs of a human rating per subject with `other`'s value for it, where both exist.
fn pairs_with(ratings: &BTreeMap<String, f64>, other: impl Fn(&str) -> Option<f64>) -> Vec<(f64, f64)> {
    ratings
        .iter()
        .filter_map(|(subject, h)| Some((*h, other(subject)?)))
        .collect()
}

/// Ratings of whole subjects: trait → subject → rating.
type Ratings = BTreeMap<String, BTreeMap<String, f64>>;

/// One annotator's ratings of whole subjects ("x" left out).
fn subject_ratings(cases: &BTreeMap<Case, Annotation>) -> Ratings {
    let mut out = Ratings::new();
    for (c, a) in cases {
        if c.task == Task::Subject
            && c.observer.is_none()
            && let Some(v) = a.value.value()
        {
            out.entry(c.dimension.clone())
                .or_default()
                .insert(c.character.clone(), v);
        }
    }
    out
}

/// The mean of the reports of `subject`'s observers in `context` on `trait_`.
fn context_mean(subject: &SubjectResult, context: Context, trait_: &str) -> Option<f64> {
    let values: Vec<f64> = subject
        .observers
        .iter()
        .filter(|o| o.context == context)
        .filter_map(|o| o.report.as_ref()?.1.get(trait_).copied())
        .collect();
    stats::mean(&values)
}

/// The agreement of one annotator with the session: per trait, per context, and per observer when they
/// rated per observer.
fn annotator(cases: &BTreeMap<Case, Annotation>, subjects: &[SubjectResult], trait_names: &[String]) -> Value {
    let by_id: BTreeMap<&str, &SubjectResult> = subjects.iter().map(|s| (s.id.as_str(), s)).collect();
    let ratings = subject_ratings(cases);
    let synthetic = subjects.iter().any(|s| s.latent.is_some());
    let empty = BTreeMap::new();
    let mut traits = Map::new();
    for t in trait_names {
        let rated = ratings.get(t).unwrap_or(&empty);
        let (n_self, rho_self, mad_self) = compared(&pairs_with(rated, |s| {
            by_id.get(s)?.self_report.as_ref()?.1.get(t).copied()
        }));
        let (n_obs, rho_obs, mad_obs) = compared(&pairs_with(rated, |s| by_id.get(s)?.aggregate.get(t).copied()));
        let mut entry = json!({
            "n": rated.len(),
            "n_self": n_self,
            "n_observers": n_obs,
            "spearman_self": rho_self,
            "spearman_observers": rho_obs,
            "mean_abs_diff_self": mad_self,
            "mean_abs_diff_observers": mad_obs,
        });
        if synthetic {
            let latent = pairs_with(rated, |s| Some(f64::from(*by_id.get(s)?.latent.as_ref()?.get(t)?)));
            entry["spearman_latent"] = json!(compared(&latent).1);
        }
        traits.insert(t.clone(), entry);
    }
    let mut contexts = Map::new();
    for context in Context::ALL {
        let mut per_trait = Map::new();
        for t in trait_names {
            let rated = ratings.get(t).unwrap_or(&empty);
            let pairs = pairs_with(rated, |s| context_mean(by_id.get(s)?, context, t));
            if pairs.is_empty() {
                continue;
            }
            let (n, rho, mad) = compared(&pairs);
            per_trait.insert(
                t.clone(),
                json!({"n": n, "spearman_observers": rho, "mean_abs_diff_observers": mad}),
            );
        }
        if !per_trait.is_empty() {
            contexts.insert(context.name().into(), Value::Object(per_trait));
        }
    }
    let mut out = json!({
        "subjects": ratings.values().flat_map(|m| m.keys()).collect::<BTreeSet<_>>().len(),
        "traits": traits,
        "contexts": contexts,
    });
    // Per observer: the annotator's reading of what one observer saw, against that observer's report.
    let mut per_observer: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for (c, a) in cases {
        let (Some(o), Some(h)) = (&c.observer, a.value.value()) else {
            continue;
        };
        let report = by_id
            .get(c.character.as_str())
            .and_then(|s| s.observers.iter().find(|x| &x.id == o))
            .and_then(|x| x.report.as_ref()?.1.get(&c.dimension).copied());
        if c.task == Task::Subject
            && let Some(r) = report
        {
            per_observer.entry(c.dimension.as_str()).or_default().push((h, r));
        }
    }
    if !per_observer.is_empty() {
        // In the scale's order, as the traits above.
        out["per_observer"] = trait_names
            .iter()
            .filter_map(|t| Some((t, per_observer.get(t.as_str())?)))
            .map(|(t, pairs)| {
                let (n, rho, mad) = compared(pairs);
                (t.clone(), json!({"n": n, "spearman": rho, "mean_abs_diff": mad}))
            })
            .collect::<Map<String, Value>>()
            .into();
    }
    out
}

/// Between each pair of annotators, over the whole-subject cases both rated with a number: Spearman
/// of the ratings and QWK of the rounded ratings, over all traits and per trait.
fn inter_annotator(annotations: &Annotations) -> Value {
    let ratings: Vec<(&String, Ratings)> = annotations.iter().map(|(n, c)| (n, subject_ratings(c))).collect();
    let mut pairs = Vec::new();
    for i in 0..ratings.len() {
        for j in i + 1..ratings.len() {
            let (a, b) = (&ratings[i].1, &ratings[j].1);
            let mut all = Vec::new();
            let mut traits = Map::new();
            for (t, of_a) in a {
                let Some(of_b) = b.get(t) else { continue };
                let both: Vec<(f64, f64)> = of_a.iter().filter_map(|(s, x)| Some((*x, *of_b.get(s)?))).collect();
                if both.is_empty() {
                    continue;
                }
                traits.insert(t.clone(), agreement(&both));
                all.extend(both);
            }
            let mut entry = agreement(&all);
            entry["a"] = json!(ratings[i].0);
            entry["b"] = json!(ratings[j].0);
            entry["traits"] = Value::Object(traits);
            pairs.push(entry);
        }
    }
    json!({"pairs": pairs})
}

/// n, Spearman and QWK (ratings rounded to the nearest whole point) of two raters' pairs.
fn agreement(pairs: &[(f64, f64)]) -> Value {
    let (x, y): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let rounded = |v: &[f64]| v.iter().map(|v| v.round() as i64).collect::<Vec<i64>>();
    json!({
        "n": pairs.len(),
        "spearman": stats::spearman(&x, &y),
        "qwk": stats::quadratic_weighted_kappa(&rounded(&x), &rounded(&y)),
    })
}

/// The `agreement --session` report of an observer session: per annotator and trait, per context, per
/// observer, and between annotators.
pub fn report(annotations: &Annotations, subjects: &[SubjectResult], scale: &Scale) -> Value {
    let trait_names = traits(scale);
    let annotators: Map<String, Value> = annotations
        .iter()
        .filter(|(_, cases)| cases.keys().any(|c| c.task == Task::Subject))
        .map(|(name, cases)| (name.clone(), annotator(cases, subjects, &trait_names)))
        .collect();
    let rating: Annotations = annotations
        .iter()
        .filter(|(name, _)| annotators.contains_key(*name))
        .map(|(n, c)| (n.clone(), c.clone()))
        .collect();
    json!({
        "task": Task::Subject,
        "scale": SCALE,
        "annotators": annotators,
        "inter_annotator": inter_annotator(&rating),
    })
}

/// Human ratings pooled over annotators: the mean rating per (subject, trait) of whole-subject cases.
pub fn pooled(annotations: &Annotations) -> BTreeMap<String, Traits> {
    let mut sums: BTreeMap<(String, String), (f64, usize)> = BTreeMap::new();
    for cases in annotations.values() {
        for (t, by_subject) in subject_ratings(cases) {
            for (s, v) in by_subject {
                let e = sums.entry((s, t.clone())).or_default();
                e.0 += v;
                e.1 += 1;
            }
        }
    }
    let mut out: BTreeMap<String, Traits> = BTreeMap::new();
    for ((s, t), (sum, n)) in sums {
        out.entry(s).or_default().insert(t, sum / n as f64);
    }
    out
}

/// One session's row of the paper's Tables 3 and 4 for one trait: human ratings (pooled over
/// annotators) against the self-reports and the aggregated observer reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TableRow {
    pub n: usize,
    pub mean_abs_diff_self: Option<f64>,
    pub mean_abs_diff_observers: Option<f64>,
    pub spearman_self: Option<f64>,
    pub spearman_observers: Option<f64>,
}

/// Per trait, one session's [`TableRow`] (empty without human ratings).
pub fn table(annotations: &Annotations, subjects: &[SubjectResult], scale: &Scale) -> BTreeMap<String, TableRow> {
    let human = pooled(annotations);
    let mut out = BTreeMap::new();
    for t in traits(scale) {
        let rated: BTreeMap<String, f64> = human
            .iter()
            .filter_map(|(s, traits)| Some((s.clone(), *traits.get(&t)?)))
            .collect();
        if rated.is_empty() {
            continue;
        }
        let of = |s: &str| subjects.iter().find(|x| x.id == s);
        let (_, rho_self, mad_self) =
            compared(&pairs_with(&rated, |s| of(s)?.self_report.as_ref()?.1.get(&t).copied()));
        let (_, rho_obs, mad_obs) = compared(&pairs_with(&rated, |s| of(s)?.aggregate.get(&t).copied()));
        out.insert(
            t.clone(),
            TableRow {
                n: rated.len(),
                mean_abs_diff_self: mad_self,
                mean_abs_diff_observers: mad_obs,
                spearman_self: rho_self,
                spearman_observers: rho_obs,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotation::Answer;
    use crate::observer::report::ObserverResult;
    use crate::observer::{Draw, SubjectKind, draw};

    fn plan() -> ObservePlan {
        ObservePlan {
            subjects: draw(&Draw {
                characters: &[],
                synthetic: 4,
                latent: None,
                observers: &[(Context::Family, 1), (Context::Friend, 1)],
                seed: 7,
            }),
            scenarios: 1,
            turn_cap: 4,
            temperature: 1.0,
            subject_provider: "x".into(),
            observer_provider: "x".into(),
            self_report: crate::observer::SelfReportMode::Batched,
            seed: 7,
            max_attempts: 3,
        }
    }

    fn close(v: &Value, want: f64) {
        assert!((v.as_f64().unwrap() - want).abs() < 1e-12, "{v} ≠ {want}");
    }

    fn traits_of(v: f64) -> Traits {
        ["Extraversion", "Agreeableness"]
            .iter()
            .map(|t| (t.to_string(), v))
            .collect()
    }

    /// Subjects s1..s4 whose self-report is i, family observer 6 − i and friend observer i + 0.5.
    fn subjects() -> Vec<SubjectResult> {
        (1..=4)
            .map(|i| {
                let x = f64::from(i);
                let observer = |id: &str, context, v| ObserverResult {
                    id: id.into(),
                    context,
                    profile: plan().subjects[0].observers[0].persona.clone(),
                    relationship: None,
                    scenarios: Vec::new(),
                    report: Some((BTreeMap::new(), traits_of(v))),
                };
                let observers = vec![
                    observer("o1", Context::Family, 6.0 - x),
                    observer("o2", Context::Friend, x + 0.5),
                ];
                SubjectResult {
                    id: format!("s{i}"),
                    kind: SubjectKind::Synthetic,
                    name: String::new(),
                    latent: Some([("Extraversion".to_string(), i as u8)].into()),
                    self_report: Some((BTreeMap::new(), traits_of(x))),
                    aggregate: traits_of((6.0 - x + x + 0.5) / 2.0 + x / 100.0),
                    observers,
                }
            })
            .collect()
    }

    fn rate(name: &str, values: &[(&str, Option<&str>, &str, &str)]) -> (String, BTreeMap<Case, Annotation>) {
        let cases = values
            .iter()
            .map(|(s, o, t, v)| {
                let c = case(s, *o, t);
                let a = Annotation {
                    annotator: name.into(),
                    case: c.clone(),
                    value: Answer::parse(v).unwrap(),
                    note: None,
                    at: String::new(),
                };
                (c, a)
            })
            .collect();
        (name.to_string(), cases)
    }

    #[test]
    fn subjects_come_in_a_seeded_order_and_cases_name_subject_and_trait() {
        let p = plan();
        let order = order(&p);
        assert_eq!(order, super::order(&p), "seeded");
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, ["s1", "s2", "s3", "s4"]);
        let catalog = crate::catalog::Catalog::bundled().unwrap();
        let scale = catalog.scale(SCALE).unwrap();
        assert_eq!(cases(&p, scale, false).len(), 4 * 5);
        assert_eq!(cases(&p, scale, true).len(), 4 * 2 * 5);
        assert!(check(&p, scale, &case("s2", None, "Extraversion")).is_ok());
        assert!(
            check(&p, scale, &case("s9", None, "Extraversion"))
                .unwrap_err()
                .contains("no subject \"s9\"")
        );
        assert!(
            check(&p, scale, &case("s2", None, "Openness"))
                .unwrap_err()
                .contains("no trait")
        );
        assert!(check(&p, scale, &case("s2", Some("o7"), "Extraversion")).is_err());
        let part = |c: &Case| mismatch(&p, scale, c).unwrap_err().0;
        assert_eq!(
            part(&case("s9", Some("o7"), "Openness")),
            Part::Subject,
            "the first wrong part"
        );
        assert_eq!(part(&case("s2", Some("o7"), "Extraversion")), Part::Observer);
        let mut repeated = case("s2", None, "Extraversion");
        repeated.repeat = 1;
        assert_eq!(part(&repeated), Part::Repeat);
        let item = Case {
            task: Task::Item,
            ..case("s2", None, "Extraversion")
        };
        assert_eq!(part(&item), Part::Task);
    }

    #[test]
    fn agreement_follows_self_observers_contexts_and_latent_levels() {
        let catalog = crate::catalog::Catalog::bundled().unwrap();
        let scale = catalog.scale(SCALE).unwrap();
        // Ratings rising with the self-report (i + 1), one "x" left out.
        let ann: Annotations = [
            rate(
                "ann",
                &[
                    ("s1", None, "Extraversion", "2"),
                    ("s2", None, "Extraversion", "3"),
                    ("s3", None, "Extraversion", "4"),
                    ("s4", None, "Extraversion", "x"),
                    ("s1", Some("o1"), "Extraversion", "5"),
                    ("s2", Some("o1"), "Extraversion", "4"),
                    ("s1", Some("o1"), "Agreeableness", "3"),
                ],
            ),
            rate(
                "bob",
                &[
                    ("s1", None, "Extraversion", "2.4"),
                    ("s2", None, "Extraversion", "2.6"),
                    ("s3", None, "Extraversion", "4"),
                ],
            ),
        ]
        .into();
        let r = report(&ann, &subjects(), scale);
        let e = &r["annotators"]["ann"]["traits"]["Extraversion"];
        assert_eq!(e["n"], 3);
        close(&e["spearman_self"], 1.0);
        assert_eq!(e["mean_abs_diff_self"], 1.0, "{e}");
        // The aggregate rises with i by the x/100 term: ρ = 1; |h − agg| = |i + 1 − (3.25 + i/100)|.
        close(&e["spearman_observers"], 1.0);
        let mad: f64 = (1..=3)
            .map(|i| (f64::from(i) + 1.0 - (3.25 + f64::from(i) / 100.0)).abs())
            .sum::<f64>()
            / 3.0;
        assert!((e["mean_abs_diff_observers"].as_f64().unwrap() - mad).abs() < 1e-12);
        close(&e["spearman_latent"], 1.0);
        close(
            &r["annotators"]["ann"]["contexts"]["family"]["Extraversion"]["spearman_observers"],
            -1.0,
        );
        close(
            &r["annotators"]["ann"]["contexts"]["friend"]["Extraversion"]["spearman_observers"],
            1.0,
        );
        assert_eq!(r["annotators"]["ann"]["per_observer"]["Extraversion"]["n"], 2);
        let order: Vec<&String> = r["annotators"]["ann"]["per_observer"].as_object().unwrap().keys().collect();
        assert_eq!(order, ["Extraversion", "Agreeableness"], "the scale's order, as the traits");
        assert_eq!(r["annotators"]["ann"]["subjects"], 3);
        let pair = &r["inter_annotator"]["pairs"][0];
        assert_eq!(
            (pair["a"].as_str(), pair["b"].as_str(), pair["n"].as_u64()),
            (Some("ann"), Some("bob"), Some(3))
        );
        close(&pair["spearman"], 1.0);
        // Rounded: (2, 3, 4) against (2, 3, 4): perfect.
        close(&pair["qwk"], 1.0);
        let t = table(&ann, &subjects(), scale);
        assert_eq!(t["Extraversion"].n, 3, "pooled over annotators per subject");
        assert!((t["Extraversion"].spearman_self.unwrap() - 1.0).abs() < 1e-12);
    }
}
