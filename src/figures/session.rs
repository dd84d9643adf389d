//! What a figure of an interview session shows, computed from its records, its human annotations
//! and the catalog with the study's own measures: a dimension's score and spread
//! ([`spreads`]), the labels the metrics compare with (the paper's choice unless told), the error
//! as the metrics take it ([`Reference::distance`]), and the pairs `agreement --session` compares.
//! A character, scale or method not named is the session's first in plan order; a name the session
//! does not have is answered with the ones it has.

use std::collections::BTreeMap;

use super::{Agreement, Bar, Bars, Cell, DimensionName, Figure, Heatmap, LabelMark, Point, Radar, Titles};
use crate::analysis::diff::Reference;
use crate::annotation::{self, Annotation, Case, Task};
use crate::catalog::Catalog;
use crate::domain::character::{Character, Label, LabelSource};
use crate::domain::metrics;
use crate::domain::scale::{Dimension, Language, Scale};
use crate::domain::stats;
use crate::method::{Assessment, Method};
use crate::study::Event;
use crate::study::interview::RunPlan;
use crate::study::interview::results::{latest_assessments, rows};
use crate::study::interview::spread::{Over, Spread, spreads};

/// The pictures `incharacter plot` draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Radar,
    Bars,
    Heatmap,
    Agreement,
}

/// What to draw; `None`: the session's first in plan order (the paper's labels).
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub kind: Kind,
    pub character: Option<&'a str>,
    pub scale: Option<&'a str>,
    pub method: Option<&'a str>,
    pub labels: Option<LabelSource>,
}

/// Why the session cannot give the figure asked for: always about what was asked.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// Every annotator's latest answers (as `annotation::load` reads them).
pub type Annotations = BTreeMap<String, BTreeMap<Case, Annotation>>;

pub fn figure(
    events: &[Event],
    annotations: &Annotations,
    catalog: &Catalog,
    request: &Request,
) -> Result<Figure, Unavailable> {
    let session = Session::of(events)?;
    match request.kind {
        Kind::Radar | Kind::Bars => {
            let profile = session.profile(catalog, request)?;
            // A radar needs three axes to be a shape: a scale of one or two dimensions (GSE) is
            // drawn as bars, which show the same figures.
            Ok(if request.kind == Kind::Radar && profile.scale.dimensions.len() >= 3 {
                Figure::Radar(profile.radar())
            } else {
                Figure::Bars(profile.bars())
            })
        }
        Kind::Heatmap => session.heatmap(catalog, request).map(Figure::Heatmap),
        Kind::Agreement => session.agreement(annotations, catalog, request).map(Figure::Agreement),
    }
}

fn list<T: AsRef<str>>(names: &[T]) -> String {
    if names.is_empty() {
        return "none".into();
    }
    names
        .iter()
        .map(|n| n.as_ref().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The labels a figure compares with, in words.
fn labels_name(source: Option<LabelSource>) -> String {
    match source {
        Some(LabelSource::Target) => "the targets".into(),
        Some(s) => format!("{} labels", s.name()),
        None => "the paper's labels (pdb where a character has them, else annotation)".into(),
    }
}

/// A dimension's names: its Chinese one too for a Chinese character.
fn dimension_name(d: &Dimension, language: Language) -> DimensionName {
    let zh =
        (language == Language::Zh && !d.name_zh.trim().is_empty() && d.name_zh != d.name).then(|| d.name_zh.clone());
    DimensionName {
        name: d.name.clone(),
        zh,
    }
}

/// Where `label` puts a dimension: its score, or a letter target's band (H: from 0.6 of the range to
/// its top, L: from its bottom to 0.4), which begins at `value`; a marginal label without a score
/// puts it nowhere.
fn mark(label: &Label, marginal: bool, range: (f64, f64)) -> Option<LabelMark> {
    let reference = Reference::of(label)?;
    let value = reference.position(range);
    let band = match reference {
        Reference::Score(_) => None,
        Reference::High => Some((value, range.1)),
        Reference::Low => Some((range.0, value)),
    };
    Some(LabelMark { value, marginal, band })
}

/// A character's label for a dimension from `source`, and whether the labels that decide
/// marginality mark it X (as the metrics read them: `results::rows`).
fn label_of<'c>(
    character: &'c Character,
    scale: &Scale,
    source: LabelSource,
    dimension: &str,
) -> Option<(&'c Label, bool)> {
    let label = character.labels.get(source, &scale.id, dimension)?;
    let marginal = character.labels.marginal(&scale.id, dimension, source);
    Some((label, marginal))
}

/// An interview session's records and plan.
struct Session<'a> {
    id: &'a str,
    plan: &'a RunPlan,
    events: &'a [Event],
}

/// One character × scale × method, with what the radar and the bars show of it.
struct Profile<'a> {
    character: &'a Character,
    scale: &'a Scale,
    method: Method,
    source: LabelSource,
    session: &'a str,
    spreads: Vec<Option<Spread>>,
    labels: Vec<Option<LabelMark>>,
    /// (Acc_Dim, MAE) against the labels drawn.
    accuracy: Option<(f64, f64)>,
}

impl<'a> Session<'a> {
    fn of(events: &'a [Event]) -> Result<Self, Unavailable> {
        for e in events {
            match e {
                Event::RunStarted { header, plan, .. } => {
                    return Ok(Session {
                        id: &header.session,
                        plan,
                        events,
                    });
                }
                e if e.start().is_some() => {
                    let start = e.start().map(|s| (s.session, s.kind.name())).unwrap_or_default();
                    let article = if start.1.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
                    return Err(Unavailable(format!(
                        "{} is {article} {} session: plot draws interview sessions (`incharacter run`)",
                        start.0, start.1
                    )));
                }
                _ => {}
            }
        }
        Err(Unavailable("the journal has no first record: not a session".into()))
    }

    fn character(&self, catalog: &'a Catalog, name: Option<&str>) -> Result<&'a Character, Unavailable> {
        let id = match name {
            None => self.plan.characters.first().cloned().unwrap_or_default(),
            Some(name) => {
                // A name several characters answer to picks the one of them the session measured.
                let id = match catalog.named_character_among(name, |id| self.plan.characters.iter().any(|c| c == id)) {
                    Ok(id) => id,
                    Err(here) if here.is_empty() => name.trim().to_string(),
                    Err(here) => {
                        return Err(Unavailable(format!(
                            "\"{name}\" names several characters of session {}: {}; give its id",
                            self.id,
                            list(&here)
                        )));
                    }
                };
                if !self.plan.characters.contains(&id) {
                    return Err(Unavailable(format!(
                        "character \"{}\" is not in session {}; it has {}",
                        name,
                        self.id,
                        list(&self.plan.characters)
                    )));
                }
                id
            }
        };
        catalog.character(&id).ok_or_else(|| {
            Unavailable(format!(
                "character {} of session {} is not in the catalog (bundled or in the data dir)",
                id, self.id
            ))
        })
    }

    fn scale(&self, catalog: &'a Catalog, name: Option<&str>) -> Result<&'a Scale, Unavailable> {
        let id = match name {
            None => self.plan.scales.first(),
            Some(name) => self.plan.scales.iter().find(|s| s.eq_ignore_ascii_case(name.trim())),
        };
        let id = id.ok_or_else(|| {
            Unavailable(format!(
                "scale \"{}\" is not in session {}; it has {}",
                name.unwrap_or_default(),
                self.id,
                list(&self.plan.scales)
            ))
        })?;
        catalog.scale(id).ok_or_else(|| {
            Unavailable(format!(
                "scale {} of session {} is not in the catalog (bundled or in the data dir)",
                id, self.id
            ))
        })
    }

    fn methods(&self) -> Vec<&'static str> {
        self.plan.methods.iter().map(|m| m.name()).collect()
    }

    fn method(&self, name: Option<&str>) -> Result<Method, Unavailable> {
        let found = match name {
            None => self.plan.methods.first().copied(),
            Some(name) => Method::parse(name).filter(|m| self.plan.methods.contains(m)),
        };
        found.ok_or_else(|| {
            Unavailable(format!(
                "method \"{}\" is not in session {}; it has {}",
                name.unwrap_or_default(),
                self.id,
                list(&self.methods())
            ))
        })
    }

    fn profile(&self, catalog: &'a Catalog, request: &Request) -> Result<Profile<'a>, Unavailable> {
        let character = self.character(catalog, request.character)?;
        let scale = self.scale(catalog, request.scale)?;
        let method = self.method(request.method)?;
        let source = request
            .labels
            .unwrap_or_else(|| character.labels.exclusion_source(&scale.id));
        let mut all = spreads(self.events);
        let range = scale.dimension_range();
        let spreads: Vec<Option<Spread>> = scale
            .dimensions
            .iter()
            .map(|d| all.remove(&(character.id.clone(), scale.id.clone(), method, d.name.clone())))
            .collect();
        if spreads.iter().all(Option::is_none) {
            return Err(Unavailable(format!(
                "session {} has no {} scores of {} by {} (not assessed yet, or every assessment failed)",
                self.id,
                scale.id,
                character.id,
                method.name()
            )));
        }
        let labels = scale
            .dimensions
            .iter()
            .map(|d| {
                let (label, marginal) = label_of(character, scale, source, &d.name)?;
                mark(label, marginal, range)
            })
            .collect();
        let list: Vec<&Assessment> = latest_assessments(self.events)
            .into_iter()
            .filter(|a| a.character == character.id && a.scale == scale.id && a.method == method)
            .collect();
        let order: Vec<String> = scale.dimensions.iter().map(|d| d.name.clone()).collect();
        let accuracy = metrics::alignment(range, &order, &rows(catalog, &scale.id, &list, Some(source)))
            .map(|a| (a.overall.acc_dim, a.overall.mae));
        Ok(Profile {
            character,
            scale,
            method,
            source,
            session: self.id,
            spreads,
            labels,
            accuracy,
        })
    }

    fn heatmap(&self, catalog: &'a Catalog, request: &Request) -> Result<Heatmap, Unavailable> {
        if request.character.is_some() {
            return Err(Unavailable(
                "--character does not apply to a heatmap: it shows every character of the session".into(),
            ));
        }
        let scale = self.scale(catalog, request.scale)?;
        let method = self.method(request.method)?;
        let range = scale.dimension_range();
        let span = range.1 - range.0;
        // Each repeat's score: a cell is the mean of their errors, as MAE takes them (the error of
        // the mean score would understate repeats on both sides of the label).
        let mut all: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
        for a in latest_assessments(self.events) {
            if let (Some(score), true) = (a.score, a.scale == scale.id && a.method == method) {
                all.entry((a.character.as_str(), a.dimension.as_str())).or_default().push(score);
            }
        }
        // A heatmap of nothing but "n/a" is refused, as a radar of nothing is.
        if all.is_empty() {
            return Err(Unavailable(format!(
                "session {} has no {} scores by {} (not assessed yet, or every assessment failed)",
                self.id,
                scale.id,
                method.name()
            )));
        }
        let mut names = Vec::new();
        let mut cells = Vec::new();
        let mut targets = false;
        for id in &self.plan.characters {
            let character = self.character(catalog, Some(id))?;
            names.push(character.name.clone());
            let source = request
                .labels
                .unwrap_or_else(|| character.labels.exclusion_source(&scale.id));
            targets |= source == LabelSource::Target;
            cells.push(
                scale
                    .dimensions
                    .iter()
                    .map(|d| {
                        let scores = all.get(&(id.as_str(), d.name.as_str()))?;
                        let (label, marginal) = label_of(character, scale, source, &d.name)?;
                        let reference = Reference::of(label)?;
                        let errors: Vec<f64> = scores.iter().map(|&v| reference.distance(v, range) / span).collect();
                        Some(Cell {
                            error: crate::domain::stats::mean(&errors)?,
                            marginal,
                        })
                    })
                    .collect(),
            );
        }
        // One language for the column names: Chinese names too when every character is Chinese.
        let language = if self
            .plan
            .characters
            .iter()
            .all(|c| catalog.character(c).is_some_and(|c| c.language == Language::Zh))
        {
            Language::Zh
        } else {
            Language::En
        };
        Ok(Heatmap {
            titles: Titles {
                title: format!("{}: error per character and dimension", scale.id),
                subtitle: format!(
                    "{} against {}, session {}",
                    method.name(),
                    match (request.labels, targets) {
                        // A character of one's own has only its targets, which are then drawn.
                        (None, true) => "the labels (pdb where a character has them, else annotation, else its \
                                         targets)"
                            .to_string(),
                        (given, _) => labels_name(given),
                    },
                    self.id
                ),
            },
            characters: names,
            dimensions: scale.dimensions.iter().map(|d| dimension_name(d, language)).collect(),
            cells,
        })
    }

    fn agreement(
        &self,
        annotations: &Annotations,
        catalog: &'a Catalog,
        request: &Request,
    ) -> Result<Agreement, Unavailable> {
        if annotations.is_empty() {
            return Err(Unavailable(format!(
                "session {} has no human annotations, so no agreement figure (annotate it in the workbench, or \
                 `incharacter annotations import`); it can draw radar, bars and heatmap",
                self.id
            )));
        }
        let character = match request.character {
            Some(name) => Some(self.character(catalog, Some(name))?),
            None => None,
        };
        let scales: Vec<&Scale> = match request.scale {
            Some(_) => vec![self.scale(catalog, request.scale)?],
            None => self.plan.scales.iter().filter_map(|s| catalog.scale(s)).collect(),
        };
        let annotated: Vec<Method> = self
            .plan
            .methods
            .iter()
            .copied()
            .filter(|m| annotation::task_of(*m).is_some())
            .collect();
        let methods = match request.method {
            Some(_) => {
                let m = self.method(request.method)?;
                if annotation::task_of(m).is_none() {
                    return Err(Unavailable(format!(
                        "{} has no human annotation task; agreement compares oc, d-oc, er-batch or er-all (session \
                         {} has {})",
                        m.name(),
                        self.id,
                        list(&annotated.iter().map(|m| m.name()).collect::<Vec<_>>())
                    )));
                }
                vec![m]
            }
            // As `agreement` defaults: OC first, then the plan's order.
            None => {
                let mut ordered = annotated;
                ordered.sort_by_key(|m| *m != Method::Oc);
                ordered
            }
        };
        let assessments = latest_assessments(self.events);
        let pairs = |scale: &Scale, method: Method| -> Vec<(usize, f64, f64)> {
            annotations
                .values()
                .enumerate()
                .flat_map(|(i, cases)| {
                    annotation::rated(cases, &assessments, method, catalog)
                        .into_iter()
                        .filter(|(c, _, _)| c.scale == scale.id && character.is_none_or(|ch| ch.id == c.character))
                        .map(move |(_, h, m)| (i, h, m))
                })
                .collect()
        };
        // The first scale × method in plan order with a case both rated.
        let found = scales
            .iter()
            .flat_map(|s| methods.iter().map(move |m| (*s, *m)))
            .map(|(s, m)| (s, m, pairs(s, m)))
            .find(|(_, _, p)| !p.is_empty());
        let names: Vec<&String> = annotations.keys().collect();
        let Some((scale, method, pairs)) = found else {
            return Err(Unavailable(format!(
                "no case of {} by {}{} was rated with a number by both a human and the judge in session {} \
                 (annotators: {})",
                list(&scales.iter().map(|s| s.id.as_str()).collect::<Vec<_>>()),
                list(&methods.iter().map(|m| m.name()).collect::<Vec<_>>()),
                character.map_or(String::new(), |c| format!(" for {}", c.id)),
                self.id,
                list(&names)
            )));
        };
        let task = annotation::task_of(method).unwrap_or(Task::Item);
        let range = match task {
            Task::Item => (f64::from(scale.range.min), f64::from(scale.range.max)),
            _ => scale.dimension_range(),
        };
        let (h, m): (Vec<f64>, Vec<f64>) = pairs.iter().map(|(_, h, m)| (*h, *m)).unzip();
        let stat = |x: Option<f64>| x.map_or("–".to_string(), |x| format!("{x:.2}"));
        let mut counts: BTreeMap<(usize, i64, i64), (f64, f64, usize)> = BTreeMap::new();
        for (i, h, m) in &pairs {
            // Ratings closer than a thousandth share a point.
            let key = (*i, (h * 1000.0).round() as i64, (m * 1000.0).round() as i64);
            counts.entry(key).or_insert((*h, *m, 0)).2 += 1;
        }
        Ok(Agreement {
            titles: Titles {
                title: format!(
                    "{} vs human on {}: n = {}, Pearson r = {}, Spearman ρ = {}",
                    method.name(),
                    scale.id,
                    pairs.len(),
                    stat(stats::pearson(&h, &m)),
                    stat(stats::spearman(&h, &m))
                ),
                subtitle: format!(
                    "{} task, {}, session {}",
                    task.name(),
                    character.map_or("all characters".to_string(), |c| c.name.clone()),
                    self.id
                ),
            },
            range,
            human_axis: format!(
                "human rating ({})",
                names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ")
            ),
            judge_axis: format!("{} rating", method.name()),
            annotators: names.iter().map(|n| n.to_string()).collect(),
            points: counts
                .into_iter()
                .map(|((annotator, _, _), (human, judge, count))| Point {
                    annotator,
                    human,
                    judge,
                    count,
                })
                .collect(),
        })
    }
}

impl Profile<'_> {
    /// The title, and a subtitle saying how it was measured (and `note`).
    fn titles(&self, note: &str) -> Titles {
        let accuracy = self
            .accuracy
            .map_or(String::new(), |(acc, mae)| format!(": Acc_Dim {acc:.2}, MAE {mae:.3}"));
        Titles {
            title: format!("{} – {}", self.character.name, self.scale.id),
            subtitle: format!(
                "{} against {}{accuracy}{note}; session {}",
                self.method.name(),
                labels_name(Some(self.source)),
                self.session
            ),
        }
    }

    fn axes(&self) -> Vec<DimensionName> {
        self.scale
            .dimensions
            .iter()
            .map(|d| dimension_name(d, self.character.language))
            .collect()
    }

    fn radar(&self) -> Radar {
        Radar {
            titles: self.titles(""),
            range: self.scale.dimension_range(),
            axes: self.axes(),
            measured: self.spreads.iter().map(|s| s.as_ref().map(|s| s.value)).collect(),
            labels: self.labels.clone(),
            measured_name: format!("measured ({})", self.method.name()),
            labels_name: labels_name(Some(self.source)),
        }
    }

    fn bars(&self) -> Bars {
        let over: Vec<Over> = self.spreads.iter().flatten().filter_map(|s| s.over).collect();
        let spread_name = match (over.contains(&Over::Repeats), over.contains(&Over::Batches)) {
            (true, false) => "±1 sd over repeats",
            (false, true) => "±1 sd over batches",
            _ => "±1 sd over repeats or batches",
        };
        let note = if over.is_empty() {
            " (one measurement each: no spread)"
        } else {
            ""
        };
        Bars {
            titles: self.titles(note),
            range: self.scale.dimension_range(),
            rows: self
                .axes()
                .into_iter()
                .zip(&self.spreads)
                .zip(&self.labels)
                .map(|((dimension, s), label)| Bar {
                    dimension,
                    value: s.as_ref().map(|s| s.value),
                    sd: s.as_ref().and_then(|s| s.sd),
                    label: *label,
                })
                .collect(),
            measured_name: format!("measured ({})", self.method.name()),
            labels_name: labels_name(Some(self.source)),
            spread_name: spread_name.into(),
        }
    }
}
