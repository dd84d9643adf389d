//! Deterministic made-up sessions for the screens' snapshot tests and render benchmarks. Nothing here
//! is model output: the answers are templates, the scores arithmetic, and the session's providers say
//! `kind = "fixture"`.

use crate::catalog::Catalog;
use crate::domain::scale::Keying;
use crate::domain::scoring::ItemOption;
use crate::llm::ModelInfo;
use crate::method::convert::ConvertedItem;
use crate::method::expert::BatchRating;
use crate::method::interview::QueryStyle;
use crate::method::judge::Attempt;
use crate::method::{Assessment, Method};
use crate::study::{Event, RunPlan};

pub fn plan(characters: &[&str], scales: &[&str], methods: &[Method]) -> RunPlan {
    let mut plan = RunPlan::new(
        characters.iter().map(|c| c.to_string()).collect(),
        scales.iter().map(|s| s.to_string()).collect(),
        methods.to_vec(),
        "fixture",
        "fixture",
    );
    plan.seed = 7;
    plan
}

/// A finished session of `plan` (one repeat, open interviews): every item answered, every dimension
/// assessed by each method, some OC options refused.
pub fn session(catalog: &Catalog, plan: &RunPlan) -> Vec<Event> {
    let model = ModelInfo {
        provider: "fixture".into(),
        kind: "fixture".into(),
        model: "none (made-up answers)".into(),
        sha256: None,
    };
    let mut events = vec![Event::RunStarted {
        header: crate::study::SessionHeader {
            session: "20261129-120000-fixture-0001".into(),
            name: Some("fixture".into()),
            created: "2026-11-29T12:00:00Z".into(),
            app_version: "0.1.0".into(),
            character_versions: Default::default(),
            scale_versions: Default::default(),
            batch: None,
        },
        plan: Box::new(plan.clone()),
        providers: [("rpa".to_string(), model.clone()), ("judge".to_string(), model)]
            .into_iter()
            .collect(),
    }];
    for c in &plan.characters {
        let Some(character) = catalog.character(c) else {
            continue;
        };
        for s in &plan.scales {
            let Some(scale) = catalog.scale(s) else { continue };
            let (min, max) = scale.dimension_range();
            for item in scale.scored_items() {
                let response = if character.language.code() == "zh" {
                    format!(
                        "此事不急。第{}题，我想先喝杯茶，再慢慢说。契约既成，便当守之。",
                        item.id
                    )
                } else {
                    format!(
                        "Honestly, item {} is the sort of thing I have read about in Hogwarts: A History. I would say it depends.",
                        item.id
                    )
                };
                events.push(Event::ItemAnswered {
                    character: c.clone(),
                    scale: s.clone(),
                    repeat: 0,
                    style: QueryStyle::Open,
                    item_id: item.id,
                    question: item.question.get(character.language).clone(),
                    response,
                    retrieved: vec![],
                    truncated: false,
                });
            }
            for (d, dim) in scale.dimensions.iter().enumerate() {
                let ids: Vec<u32> = scale.items_of(d).map(|i| i.id).collect();
                let share = ((d * 3 + c.len()) % 7) as f64 / 6.0;
                let score = min + (max - min) * (0.1 + 0.8 * share);
                for &method in &plan.methods {
                    let (batches, items) = if method.item_level() {
                        let items = ids
                            .iter()
                            .map(|&id| {
                                let value = scale.range.min + (id as i32 % scale.range.len() as i32);
                                let refused = id % 9 == 0;
                                let reversed = match scale.item(id).and_then(|i| i.keying()) {
                                    Some(Keying::Negative) => true,
                                    Some(Keying::Pole { first, .. }) => !first,
                                    _ => false,
                                };
                                let (lo, hi) = (scale.range.min, scale.range.max);
                                let scored = if refused {
                                    (lo + hi) / 2
                                } else if reversed {
                                    lo + hi - value
                                } else {
                                    value
                                };
                                ConvertedItem {
                                    item_id: id,
                                    option: Some(if refused {
                                        ItemOption::Refused
                                    } else {
                                        ItemOption::Value(value)
                                    }),
                                    score: Some(f64::from(scored)),
                                    refused,
                                    weighed: None,
                                    error: None,
                                }
                            })
                            .collect();
                        (vec![], items)
                    } else {
                        let batch = BatchRating {
                            item_ids: ids.clone(),
                            score: Some(score),
                            analysis: format!("The participant talks about {} with measured care.", dim.name),
                            attempts: vec![Attempt {
                                temperature: 0.0,
                                reply: "{}".into(),
                                error: None,
                                cached: false,
                            }],
                            weighed: None,
                        };
                        (vec![batch], vec![])
                    };
                    let shift = if method.item_level() { (max - min) * 0.15 } else { 0.0 };
                    events.push(Event::DimensionAssessed(Assessment {
                        character: c.clone(),
                        scale: s.clone(),
                        method,
                        repeat: 0,
                        dimension: dim.name.clone(),
                        score: Some((score + shift).min(max)),
                        batches,
                        calls: Vec::new(),
                        items,
                        failure: None,
                        fitted: None,
                        conversions: Vec::new(),
                    }));
                }
            }
        }
    }
    events.push(Event::RunFinished {
        status: "complete".into(),
        at: "2026-11-29T12:03:00Z".into(),
    });
    events
}

/// A made-up re-assessment of `parent` (a session from [`session`]): the parent's answers copied as
/// they are, every dimension scored again by other arithmetic (`variant` 1, 2, … moves the scores
/// differently), the plan naming the parent, and a made-up judge of its own.
pub fn reassessment(catalog: &Catalog, parent: &[Event], id: &str, variant: u32) -> Vec<Event> {
    let judge = ModelInfo {
        provider: "fixture".into(),
        kind: "fixture".into(),
        model: format!("judge {variant} (made-up scores)"),
        sha256: None,
    };
    let mut events = Vec::new();
    for e in parent {
        match e {
            Event::RunStarted {
                header,
                plan,
                providers,
            } => {
                let mut plan = plan.clone();
                plan.parent = Some(header.session.clone());
                plan.judge_temperature = 0.2 * variant as f32;
                let mut providers = providers.clone();
                providers.insert("judge".into(), judge.clone());
                events.push(Event::RunStarted {
                    header: crate::study::SessionHeader {
                        session: id.into(),
                        name: Some(format!("fixture re-assessment {variant}")),
                        ..header.clone()
                    },
                    plan,
                    providers,
                });
            }
            Event::DimensionAssessed(a) => {
                let Some(scale) = catalog.scale(&a.scale) else { continue };
                let (min, max) = scale.dimension_range();
                let d = scale.dimension_index(&a.dimension).unwrap_or(0) as u32;
                // A step of a tenth of the range up or down, by dimension and variant.
                let step = f64::from((d + variant) % 3) - 1.0;
                let score = a
                    .score
                    .map(|s| (s + step * (max - min) * 0.1 * f64::from(variant)).clamp(min, max));
                let mut a = a.clone();
                a.score = score;
                for b in &mut a.batches {
                    b.score = score;
                }
                events.push(Event::DimensionAssessed(a));
            }
            other => events.push(other.clone()),
        }
    }
    events
}
