//! Two interview sessions compared properly: over the characters × dimensions both measured (same
//! scale and method), the paired difference B − A in absolute error to the labels and in Acc_Dim, with
//! a 95% bootstrap interval and a sign-flip permutation p-value. The sampling unit is the character:
//! a bootstrap draw keeps all of a character's pairs, and a sign flip flips them together (a
//! character's dimensions are answered by one agent and move together). Pure: two journals in.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalog::Catalog;
use crate::domain::character::LabelSource;
use crate::domain::metrics;
use crate::domain::resample::{self, Bootstrap, Permutation};
use crate::method::Method;
use crate::study::Event;
use crate::study::interview::results::{latest_assessments, rows};

/// Random sign patterns when there are too many characters to count them all.
pub const MONTE_CARLO: usize = 10_000;

/// What to compare, and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub scale: Option<String>,
    pub method: Option<Method>,
    /// `None`: the paper's choice per character (PDb where it has it, else the annotation).
    pub labels: Option<LabelSource>,
    pub bootstrap: Bootstrap,
}

/// One figure in A and in B, their paired difference (B − A), its interval and p-value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Paired {
    pub a: f64,
    pub b: f64,
    pub diff: f64,
    /// `None` with one character (nothing to resample).
    pub ci: Option<[f64; 2]>,
    pub p: f64,
}

/// A session of the two.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub session: String,
    pub rpa: String,
    pub judge: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    /// Pairs: (character, scale, method, dimension) scored in both.
    pub n: usize,
    pub characters: usize,
    /// Mean |error| / range span (as MAE): lower is closer to the labels.
    pub mean_abs_error: Paired,
    /// Share of pairs whose type (H/L) matches the label.
    pub acc_dim: Paired,
    /// How the p-values were reached.
    pub permutation: Test,
    pub bootstrap: Bootstrap,
    /// The scale × method groups compared.
    pub groups: Vec<Group>,
}

/// How a permutation p-value was reached: every sign pattern counted, or that many random ones.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Test {
    pub exact: bool,
    pub resamples: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub scale: String,
    pub method: String,
    /// Pairs compared in it.
    pub n: usize,
}

/// Why two sessions cannot be compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    #[error("{} is not an interview session", .0.to_string())]
    NotInterviews(String),
    #[error(
        "the sessions share no scored character × dimension{}: {} scored {}; {} scored {}",
        .filter, .a.0.to_string(), list(&.a.1), .b.0.to_string(), list(&.b.1)
    )]
    Nothing {
        filter: String,
        a: (String, Vec<String>),
        b: (String, Vec<String>),
    },
}

fn list(groups: &[String]) -> String {
    if groups.is_empty() {
        return "nothing against a label (no character × dimension it scored has one, or it scored none)".into();
    }
    groups.join(", ")
}

/// (character, scale, method, dimension).
type Pair = (String, String, Method, String);

/// A pair's error and correctness in one session, averaged over its repeats.
type Scored = BTreeMap<Pair, (f64, f64)>;

fn side((session, events): (&str, &[Event])) -> Result<Side, CompareError> {
    let start = events.iter().find_map(Event::start);
    let session = session.to_string();
    if start.as_ref().is_none_or(|s| s.kind != crate::study::Kind::Interviews) {
        return Err(CompareError::NotInterviews(session));
    }
    let model = |role: &str| {
        start
            .as_ref()
            .and_then(|s| s.providers.get(role))
            .map_or("?".to_string(), |m| m.model.clone())
    };
    Ok(Side {
        rpa: model("rpa"),
        judge: model("judge"),
        session,
    })
}

/// Every scored pair of a session: |error| on 0–1 and 1/0 for a correct type, means over repeats.
fn scored(events: &[Event], catalog: &Catalog, options: &Options) -> Scored {
    let mut by: BTreeMap<(String, Method), Vec<&crate::method::Assessment>> = BTreeMap::new();
    for a in latest_assessments(events) {
        let wanted = options
            .scale
            .as_deref()
            .is_none_or(|s| s.eq_ignore_ascii_case(&a.scale))
            && options.method.is_none_or(|m| m == a.method);
        if wanted {
            by.entry((a.scale.clone(), a.method)).or_default().push(a);
        }
    }
    let mut sums: BTreeMap<Pair, (f64, f64, usize)> = BTreeMap::new();
    for ((scale_id, method), list) in by {
        let Some(scale) = catalog.scale(&scale_id) else {
            continue;
        };
        let range = scale.dimension_range();
        for row in rows(catalog, &scale_id, &list, options.labels) {
            let Some((correct, error)) = metrics::judge(&row, range) else {
                continue;
            };
            let e = sums
                .entry((row.character, scale_id.clone(), method, row.dimension))
                .or_default();
            e.0 += error.abs();
            e.1 += f64::from(u8::from(correct));
            e.2 += 1;
        }
    }
    sums.into_iter()
        .map(|(k, (err, ok, n))| (k, (err / n as f64, ok / n as f64)))
        .collect()
}

fn groups_of(s: &Scored) -> Vec<String> {
    let set: std::collections::BTreeSet<(&str, &str)> =
        s.keys().map(|(_, scale, m, _)| (scale.as_str(), m.name())).collect();
    set.into_iter().map(|(scale, m)| format!("{} × {m}", scale)).collect()
}

/// Session `a` against session `b`, each its id (the one it was found by) and its events.
pub fn compare(
    a: (&str, &[Event]),
    b: (&str, &[Event]),
    catalog: &Catalog,
    options: &Options,
) -> Result<Comparison, CompareError> {
    let (side_a, side_b) = (side(a)?, side(b)?);
    let ((_, a), (_, b)) = (a, b);
    let (in_a, in_b) = (scored(a, catalog, options), scored(b, catalog, options));
    // Per character, its pairs' (error A, error B, correct A, correct B).
    let mut units: BTreeMap<&str, Vec<[f64; 4]>> = BTreeMap::new();
    let mut groups: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (key, (ea, ca)) in &in_a {
        if let Some((eb, cb)) = in_b.get(key) {
            units.entry(key.0.as_str()).or_default().push([*ea, *eb, *ca, *cb]);
            *groups.entry((key.1.clone(), key.2.name().to_string())).or_default() += 1;
        }
    }
    if units.is_empty() {
        let filter = match (&options.scale, options.method) {
            (None, None) => String::new(),
            (s, m) => format!(
                " on {}",
                [s.clone(), m.map(|m| m.name().to_string())]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" × ")
            ),
        };
        // What each did measure, whatever the filter.
        let all = Options {
            scale: None,
            method: None,
            ..options.clone()
        };
        return Err(CompareError::Nothing {
            filter,
            a: (side_a.session, groups_of(&scored(a, catalog, &all))),
            b: (side_b.session, groups_of(&scored(b, catalog, &all))),
        });
    }
    let units: Vec<&Vec<[f64; 4]>> = units.values().collect();
    let n: usize = units.iter().map(|u| u.len()).sum();
    // Mean over the drawn characters' pairs of column `i`.
    let mean = |drawn: &[usize], f: &dyn Fn(&[f64; 4]) -> f64| {
        let (sum, count) = drawn
            .iter()
            .flat_map(|&u| units[u].iter())
            .fold((0.0, 0usize), |(s, c), p| (s + f(p), c + 1));
        (count > 0).then(|| sum / count as f64)
    };
    let all: Vec<usize> = (0..units.len()).collect();
    let error_diff = |p: &[f64; 4]| p[1] - p[0];
    let correct_diff = |p: &[f64; 4]| p[3] - p[2];
    let [ci_error, ci_correct] = resample::intervals(units.len(), options.bootstrap, |drawn| {
        [mean(drawn, &error_diff), mean(drawn, &correct_diff)]
    });
    let flips = |f: &dyn Fn(&[f64; 4]) -> f64| {
        let sums: Vec<(f64, usize)> = units.iter().map(|u| (u.iter().map(f).sum(), u.len())).collect();
        resample::sign_flip(&sums, MONTE_CARLO, options.bootstrap.seed)
    };
    let (p_error, p_correct) = (flips(&error_diff), flips(&correct_diff));
    let permutation = p_error.map_or(
        Test {
            exact: true,
            resamples: 0,
        },
        |p| Test {
            exact: p.exact,
            resamples: p.resamples,
        },
    );
    let paired = |a: usize, b: usize, d: &dyn Fn(&[f64; 4]) -> f64, ci, p: Option<Permutation>| Paired {
        a: mean(&all, &|x| x[a]).unwrap_or(0.0),
        b: mean(&all, &|x| x[b]).unwrap_or(0.0),
        diff: mean(&all, d).unwrap_or(0.0),
        ci,
        p: p.map_or(1.0, |p| p.p),
    };
    Ok(Comparison {
        mean_abs_error: paired(0, 1, &error_diff, ci_error, p_error),
        acc_dim: paired(2, 3, &correct_diff, ci_correct, p_correct),
        a: side_a,
        b: side_b,
        n,
        characters: units.len(),
        permutation,
        bootstrap: options.bootstrap,
        groups: groups
            .into_iter()
            .map(|((scale, method), n)| Group { scale, method, n })
            .collect(),
    })
}
