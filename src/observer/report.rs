//! Observer results: per-trait IPIP-50 scores of the self-report and of each observer, the aggregate
//! (mean over observers), and the statistics of the multi-observer paper — per trait the mean deviation
//! observer − self with a paired t-test and Cohen's d across subjects, Spearman between latent levels and
//! aggregated scores (synthetic subjects), the correlation as the number of observers grows (seeded
//! random subsets), and the same by relationship context. Latent levels are reported on the IPIP
//! dimension's direction (Emotional Stability = 7 − Neuroticism level).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::persona::{Persona, TRAITS};
use super::{Context, Done, ObservePlan, SubjectKind, Turn};
use crate::domain::rng::SplitMix64;
use crate::domain::scale::Scale;
use crate::domain::scoring::{ItemOption, Orientation, score_scale};
use crate::domain::stats;

pub type Traits = BTreeMap<String, f64>;

/// Trait scores of a questionnaire's items (IPIP keying).
pub fn traits(scale: &Scale, items: &BTreeMap<u32, ItemOption>) -> Traits {
    let short = short_traits(scale, items);
    match score_scale(scale, items, Orientation::Statement) {
        Ok(scores) => scale
            .dimensions
            .iter()
            .zip(scores)
            .filter(|(d, _)| !short.contains(&d.name))
            .filter_map(|(d, s)| s.map(|s| (d.name.clone(), s.value)))
            .collect(),
        Err(_) => Traits::new(),
    }
}

/// The traits fewer than half of whose items `items` answers: left unscored rather than guessed
/// from a few (as an interview's dimensions are).
pub fn short_traits(scale: &Scale, items: &BTreeMap<u32, ItemOption>) -> Vec<String> {
    (0..scale.dimensions.len())
        .filter(|&d| {
            let all = scale.items_of(d).count();
            let answered = scale.items_of(d).filter(|i| items.contains_key(&i.id)).count();
            answered * 2 < all
        })
        .map(|d| scale.dimensions[d].name.clone())
        .collect()
}

/// Latent levels by IPIP dimension name.
pub fn latent(p: &Persona) -> BTreeMap<String, u8> {
    TRAITS
        .iter()
        .zip(p.latent)
        .map(|(t, level)| {
            let (name, reversed) = t.ipip();
            (name.to_string(), if reversed { 7 - level } else { level })
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    pub text: String,
    pub dialogue: Vec<Turn>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ObserverResult {
    pub id: String,
    pub context: Context,
    pub profile: Persona,
    pub relationship: Option<String>,
    pub scenarios: Vec<Scenario>,
    pub report: Option<(BTreeMap<u32, ItemOption>, Traits)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SubjectResult {
    pub id: String,
    pub kind: SubjectKind,
    pub name: String,
    pub latent: Option<BTreeMap<String, u8>>,
    pub self_report: Option<(BTreeMap<u32, ItemOption>, Traits)>,
    pub observers: Vec<ObserverResult>,
    /// Mean over the observers that reported.
    pub aggregate: Traits,
}

fn mean_traits<'a>(list: impl IntoIterator<Item = &'a Traits>) -> Traits {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for t in list {
        for (k, v) in t {
            let e = sums.entry(k.clone()).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    sums.into_iter().map(|(k, (s, n))| (k, s / n as f64)).collect()
}

pub fn results(plan: &ObservePlan, done: &Done, scale: &Scale, name_of: impl Fn(&str) -> String) -> Vec<SubjectResult> {
    plan.subjects
        .iter()
        .map(|s| {
            let observers: Vec<ObserverResult> = s
                .observers
                .iter()
                .map(|o| {
                    let key = (s.id.clone(), o.id.clone());
                    let scenarios = done
                        .scenarios
                        .get(&key)
                        .map(|list| {
                            list.iter()
                                .enumerate()
                                .map(|(i, text)| Scenario {
                                    text: text.clone(),
                                    dialogue: done
                                        .turns
                                        .get(&(s.id.clone(), o.id.clone(), i))
                                        .cloned()
                                        .unwrap_or_default(),
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    ObserverResult {
                        id: o.id.clone(),
                        context: o.context,
                        profile: o.persona.clone(),
                        relationship: done.relationships.get(&key).cloned(),
                        scenarios,
                        report: done
                            .reports
                            .get(&key)
                            .map(|items| (items.clone(), traits(scale, items))),
                    }
                })
                .collect();
            let aggregate = mean_traits(observers.iter().filter_map(|o| o.report.as_ref().map(|r| &r.1)));
            SubjectResult {
                id: s.id.clone(),
                kind: s.kind,
                name: s.persona.as_ref().map_or_else(
                    || name_of(s.character.as_deref().unwrap_or_default()),
                    |p| p.name.clone(),
                ),
                latent: s.persona.as_ref().map(latent),
                self_report: done
                    .self_reports
                    .get(&s.id)
                    .map(|items| (items.clone(), traits(scale, items))),
                observers,
                aggregate,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TraitStatistics {
    /// Subjects with both a self-report and at least one observer report.
    pub n: usize,
    /// Mean of (aggregate observer − self).
    pub mean_deviation: Option<f64>,
    pub t: Option<f64>,
    pub p: Option<f64>,
    pub cohens_d: Option<f64>,
    /// Spearman between latent levels and aggregated observer scores (synthetic subjects).
    pub spearman_latent: Option<f64>,
    /// The same for the self-report.
    pub spearman_latent_self: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Statistics {
    pub traits: BTreeMap<String, TraitStatistics>,
    /// (number of observers, mean Spearman with the latent levels over traits and random subsets).
    pub observers_curve: Vec<(usize, Option<f64>)>,
    /// Per context: mean Spearman with the latent levels over traits, using that context's observers.
    pub by_context: BTreeMap<String, Option<f64>>,
}

/// Subsets drawn per size for the observers curve.
const SUBSETS: usize = 20;

fn mean_of(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Mean over traits of Spearman(latent, score of `pick`'s observers) across synthetic subjects.
fn latent_correlation(
    subjects: &[&SubjectResult],
    dims: &[String],
    pick: impl Fn(&SubjectResult) -> Traits,
) -> Option<f64> {
    let scored: Vec<(&BTreeMap<String, u8>, Traits)> = subjects
        .iter()
        .filter_map(|s| Some((s.latent.as_ref()?, pick(s))))
        .collect();
    let per_trait: Vec<f64> = dims
        .iter()
        .filter_map(|d| {
            let (x, y): (Vec<f64>, Vec<f64>) = scored
                .iter()
                .filter_map(|(l, t)| Some((f64::from(*l.get(d)?), *t.get(d)?)))
                .unzip();
            stats::spearman(&x, &y)
        })
        .collect();
    mean_of(&per_trait)
}

pub fn statistics(subjects: &[SubjectResult], scale: &Scale, seed: u64) -> Statistics {
    let dims: Vec<String> = scale.dimensions.iter().map(|d| d.name.clone()).collect();
    let mut out = Statistics::default();
    for d in &dims {
        let pairs: Vec<(f64, f64)> = subjects
            .iter()
            .filter_map(|s| Some((*s.aggregate.get(d)?, *s.self_report.as_ref()?.1.get(d)?)))
            .collect();
        let (obs, own): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
        let t = stats::paired_t_test(&obs, &own);
        let latent_pairs = |pick: &dyn Fn(&SubjectResult) -> Option<f64>| {
            let (x, y): (Vec<f64>, Vec<f64>) = subjects
                .iter()
                .filter_map(|s| Some((f64::from(*s.latent.as_ref()?.get(d)?), pick(s)?)))
                .unzip();
            stats::spearman(&x, &y)
        };
        out.traits.insert(
            d.clone(),
            TraitStatistics {
                n: pairs.len(),
                mean_deviation: stats::mean_deviation(&obs, &own).filter(|_| !obs.is_empty()),
                t: t.map(|t| t.t),
                p: t.map(|t| t.p),
                cohens_d: stats::cohens_d(&obs, &own),
                spearman_latent: latent_pairs(&|s| s.aggregate.get(d).copied()),
                spearman_latent_self: latent_pairs(&|s| s.self_report.as_ref()?.1.get(d).copied()),
            },
        );
    }
    let synthetic: Vec<&SubjectResult> = subjects.iter().filter(|s| s.latent.is_some()).collect();
    let max_observers = subjects.iter().map(|s| s.observers.len()).max().unwrap_or(0);
    let mut rng = SplitMix64(seed ^ 0x0b5e_7e75);
    for k in 1..=max_observers {
        let mut values = Vec::new();
        for _ in 0..SUBSETS {
            // One random subset of k observers per subject.
            let picks: BTreeMap<String, Vec<usize>> = synthetic
                .iter()
                .map(|s| {
                    let mut idx: Vec<usize> = (0..s.observers.len()).collect();
                    for i in (1..idx.len()).rev() {
                        idx.swap(i, rng.below(i + 1));
                    }
                    idx.truncate(k);
                    (s.id.clone(), idx)
                })
                .collect();
            let v = latent_correlation(&synthetic, &dims, |s| {
                mean_traits(
                    picks[&s.id]
                        .iter()
                        .filter_map(|&i| s.observers.get(i)?.report.as_ref().map(|r| &r.1)),
                )
            });
            values.extend(v);
        }
        out.observers_curve.push((k, mean_of(&values)));
    }
    for c in Context::ALL {
        if subjects.iter().all(|s| s.observers.iter().all(|o| o.context != c)) {
            continue;
        }
        let v = latent_correlation(&synthetic, &dims, |s| {
            mean_traits(
                s.observers
                    .iter()
                    .filter(|o| o.context == c)
                    .filter_map(|o| o.report.as_ref().map(|r| &r.1)),
            )
        });
        out.by_context.insert(c.name().to_string(), v);
    }
    out
}

fn items_json(items: &BTreeMap<u32, ItemOption>) -> Value {
    Value::Object(
        items
            .iter()
            .map(|(id, o)| {
                (
                    id.to_string(),
                    match o {
                        ItemOption::Value(v) => json!(v),
                        ItemOption::Refused => json!("x"),
                    },
                )
            })
            .collect(),
    )
}

fn report_json(r: &Option<(BTreeMap<u32, ItemOption>, Traits)>) -> Value {
    match r {
        Some((items, traits)) => json!({"items": items_json(items), "traits": traits}),
        None => Value::Null,
    }
}

/// `export --format json` of an observer session.
pub fn export(session: Value, subjects: &[SubjectResult], statistics: &Statistics) -> Value {
    let subjects: Vec<Value> = subjects
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "kind": s.kind,
                "name": s.name,
                "latent": s.latent,
                "self_report": report_json(&s.self_report),
                "observers": s.observers.iter().map(|o| json!({
                    "id": o.id,
                    "context": o.context,
                    "profile": o.profile,
                    "relationship": o.relationship,
                    "scenarios": o.scenarios,
                    "report": report_json(&o.report),
                })).collect::<Vec<_>>(),
                "aggregate": s.aggregate,
            })
        })
        .collect();
    json!({"session": session, "subjects": subjects, "statistics": statistics})
}

/// Tidy rows: subject, observer, context, trait, score, source (self | observer | aggregate | latent).
pub fn csv_rows(subjects: &[SubjectResult]) -> Vec<[String; 6]> {
    let mut rows = Vec::new();
    let row = |s: &str, o: &str, c: &str, t: &str, v: f64, src: &str| {
        [
            s.to_string(),
            o.to_string(),
            c.to_string(),
            t.to_string(),
            format!("{v}"),
            src.to_string(),
        ]
    };
    for s in subjects {
        if let Some(latent) = &s.latent {
            for (t, l) in latent {
                rows.push(row(&s.id, "", "", t, f64::from(*l), "latent"));
            }
        }
        if let Some((_, traits)) = &s.self_report {
            for (t, v) in traits {
                rows.push(row(&s.id, "", "", t, *v, "self"));
            }
        }
        for o in &s.observers {
            if let Some((_, traits)) = &o.report {
                for (t, v) in traits {
                    rows.push(row(&s.id, &o.id, o.context.name(), t, *v, "observer"));
                }
            }
        }
        for (t, v) in &s.aggregate {
            rows.push(row(&s.id, "", "", t, *v, "aggregate"));
        }
    }
    rows
}

/// The paper-style tables as text: correlations with the latent levels, deviations observer − self,
/// and the observers-count curve.
pub fn tables(subjects: &[SubjectResult], st: &Statistics) -> String {
    // A value that rounds to zero is zero, never -0.000.
    let f = |v: Option<f64>| v.map_or("–".to_string(), |v| crate::text::decimals(v, 3, false));
    let mut out = String::new();
    out.push_str(&format!("{} subject(s)\n\n", subjects.len()));
    out.push_str("trait                    n   obs−self      t        p   Cohen d   ρ(latent, obs)  ρ(latent, self)\n");
    for (t, s) in &st.traits {
        out.push_str(&format!(
            "{:<22} {:>3} {:>10} {:>6} {:>8} {:>9} {:>16} {:>16}\n",
            t,
            s.n,
            f(s.mean_deviation),
            f(s.t),
            f(s.p),
            f(s.cohens_d),
            f(s.spearman_latent),
            f(s.spearman_latent_self)
        ));
    }
    if !st.observers_curve.is_empty() {
        out.push_str("\nobservers  mean ρ(latent, observers)\n");
        for (k, v) in &st.observers_curve {
            let bar = v.map_or(String::new(), |v| "█".repeat((v.max(0.0) * 30.0).round() as usize));
            out.push_str(&format!("{k:>9}  {:>6}  {bar}\n", f(*v)));
        }
    }
    if !st.by_context.is_empty() {
        out.push_str("\ncontext    mean ρ(latent, observers)\n");
        for (c, v) in &st.by_context {
            out.push_str(&format!("{c:<10} {:>6}\n", f(*v)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A curve value that rounds to zero (−8e-18, from averaging correlations) is printed as zero.
    #[test]
    fn a_value_that_rounds_to_zero_is_printed_without_a_sign() {
        let st = Statistics {
            observers_curve: vec![(2, Some(-8e-18)), (3, Some(-0.25))],
            ..Statistics::default()
        };
        let text = tables(&[], &st);
        assert!(text.contains("        2   0.000"), "{text}");
        assert!(text.contains("-0.250") && !text.contains("-0.000"), "{text}");
    }
    use crate::observer::{Draw, Side, Step, draw};

    #[test]
    fn aggregate_is_the_mean_of_observers_and_latent_follows_ipip_direction() {
        let catalog = crate::catalog::Catalog::bundled().unwrap();
        let scale = catalog.scale("IPIP-50").unwrap();
        let subjects = draw(&Draw {
            characters: &[],
            synthetic: 1,
            latent: Some([1, 4, 2, 1, 2]),
            observers: &[(Context::Family, 1), (Context::Friend, 1)],
            seed: 1,
        });
        let plan = ObservePlan {
            subjects,
            scenarios: 1,
            turn_cap: 4,
            temperature: 1.0,
            subject_provider: "x".into(),
            observer_provider: "x".into(),
            self_report: super::super::SelfReportMode::Batched,
            seed: 1,
            max_attempts: 5,
        };
        let all = |v: i32| -> BTreeMap<u32, ItemOption> {
            scale.scored_items().map(|i| (i.id, ItemOption::Value(v))).collect()
        };
        let steps = vec![
            Step::Report {
                left_out: Vec::new(),
                asked_again: Vec::new(),
                subject: "s1".into(),
                observer: "o1".into(),
                items: all(2),
            },
            Step::Report {
                left_out: Vec::new(),
                asked_again: Vec::new(),
                subject: "s1".into(),
                observer: "o2".into(),
                items: all(4),
            },
            Step::SelfReport {
                left_out: Vec::new(),
                asked_again: Vec::new(),
                subject: "s1".into(),
                mode: super::super::SelfReportMode::Batched,
                items: all(5),
            },
            Step::Turn {
                subject: "s1".into(),
                observer: "o1".into(),
                scenario: 0,
                turn: Turn {
                    speaker: Side::Observer,
                    utterance: "Hi".into(),
                    end: true,
                },
            },
        ];
        let done = Done::from_steps(&steps);
        let r = results(&plan, &done, scale, |_| String::new());
        // Every item at 3 on average: every trait 3 whatever its keying.
        assert!(
            r[0].aggregate.values().all(|v| (v - 3.0).abs() < 1e-12),
            "{:?}",
            r[0].aggregate
        );
        let latent = r[0].latent.as_ref().unwrap();
        assert_eq!(latent["Emotional Stability"], 5, "N = 2 → stability 5");
        assert_eq!(latent["Intellect/Imagination"], 1);
        let rows = csv_rows(&r);
        assert!(rows.iter().any(|row| row[5] == "aggregate" && row[4] == "3"));
        let st = statistics(&r, scale, 1);
        assert_eq!(st.traits["Extraversion"].n, 1);
        assert_eq!(st.observers_curve.len(), 2);
    }
}
