//! The bundled scales and characters must equal the facts of the published instruments and of the
//! InCharacter data: item→dimension maps, keying, English statements, experimenters, every label.
//! The facts are frozen in tests/fixtures/reference_facts.json (see freeze_reference.py); when the
//! reference data itself is present (../shared/reference), it is checked too.

use std::collections::BTreeMap;
use std::path::Path;

use incharacter::catalog::Catalog;
use incharacter::domain::character::{LabelSource, LabelType};
use serde_json::Value;

/// Facts in the fixture's shape: {scales: {id: {range, items: {id: {statement, dimension, keying}}}},
/// characters: {id: {aliases, experimenter}}, labels: {pdb|annotation: {char: {scale: {dim: {score, type}}}}}}.
fn fixture() -> Value {
    let text = include_str!("../fixtures/reference_facts.json");
    serde_json::from_str(text).expect("fixture is JSON")
}

/// The same facts read straight from the InCharacter reference data, when it is on this machine.
fn live_reference() -> Option<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference/incharacter/data");
    let questionnaires = dir.join("questionnaires");
    if !questionnaires.is_dir() {
        return None;
    }
    let read = |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let mut scales = serde_json::Map::new();
    for entry in std::fs::read_dir(&questionnaires).unwrap() {
        let d = read(&entry.unwrap().path());
        let items: serde_json::Map<String, Value> = d["questions"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, q)| {
                let keying = if q["dimension"].is_null() {
                    Value::Null
                } else {
                    q["category"].clone()
                };
                let facts =
                    serde_json::json!({"statement": q["origin_en"], "dimension": q["dimension"], "keying": keying});
                (k.clone(), facts)
            })
            .collect();
        scales.insert(
            d["name"].as_str().unwrap().to_string(),
            serde_json::json!({"range": d["range"], "items": items}),
        );
    }
    let characters: serde_json::Map<String, Value> = read(&dir.join("characters.json"))
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                serde_json::json!({"aliases": v["alias"], "experimenter": v["experimenter"]}),
            )
        })
        .collect();
    Some(
        serde_json::json!({"scales": scales, "characters": characters, "labels": read(&dir.join("characters_labels.json"))}),
    )
}

fn check_against(facts: &Value, what: &str) {
    let catalog = Catalog::bundled().expect("bundled assets are valid");
    let mut problems = Vec::new();

    let scales = facts["scales"].as_object().unwrap();
    assert_eq!(scales.len(), 14, "{what}: 14 InCharacter scales");
    for (id, expected) in scales {
        let Some(scale) = catalog.scale(id) else {
            problems.push(format!("missing scale {id}"));
            continue;
        };
        let range = [i64::from(scale.range.min), i64::from(scale.range.max)];
        if expected["range"] != serde_json::json!(range) {
            problems.push(format!("{id}: range {range:?} != {}", expected["range"]));
        }
        let items = expected["items"].as_object().unwrap();
        if items.len() != scale.items.len() {
            problems.push(format!("{id}: {} items, expected {}", scale.items.len(), items.len()));
        }
        for (item_id, fact) in items {
            let Some(item) = scale.item(item_id.parse().unwrap()) else {
                problems.push(format!("{id}: missing item {item_id}"));
                continue;
            };
            if item.statement.en != fact["statement"].as_str().unwrap() {
                problems.push(format!(
                    "{id} {item_id}: statement {:?} != {}",
                    item.statement.en, fact["statement"]
                ));
            }
            let dimension = item.dimension().map(|d| scale.dimensions[d].name.clone());
            if dimension.as_deref() != fact["dimension"].as_str() {
                problems.push(format!(
                    "{id} {item_id}: dimension {dimension:?} != {}",
                    fact["dimension"]
                ));
            }
            if item.keying().map(|k| k.as_str()) != fact["keying"].as_str() {
                problems.push(format!(
                    "{id} {item_id}: keying {:?} != {}",
                    item.keying(),
                    fact["keying"]
                ));
            }
        }
    }

    let characters = facts["characters"].as_object().unwrap();
    assert_eq!(characters.len(), 32, "{what}: 32 characters");
    assert_eq!(catalog.characters.len(), 32);
    let by_reference: BTreeMap<&str, _> = catalog
        .characters
        .iter()
        .filter_map(|e| Some((e.value.reference_id.as_deref()?, &e.value)))
        .collect();
    for (ref_id, fact) in characters {
        let Some(c) = by_reference.get(ref_id.as_str()) else {
            problems.push(format!("missing character {ref_id}"));
            continue;
        };
        if serde_json::json!(c.aliases) != fact["aliases"] {
            problems.push(format!("{ref_id}: aliases {:?} != {}", c.aliases, fact["aliases"]));
        }
        if c.experimenter != fact["experimenter"].as_str().unwrap() {
            problems.push(format!(
                "{ref_id}: experimenter {} != {}",
                c.experimenter, fact["experimenter"]
            ));
        }
        for (source, key) in [(LabelSource::Pdb, "pdb"), (LabelSource::Annotation, "annotation")] {
            let expected = facts["labels"][key][ref_id.as_str()]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let ours = c.labels.source(source);
            if ours.len() != expected.len() {
                problems.push(format!(
                    "{ref_id} {key}: {} scales labelled, expected {}",
                    ours.len(),
                    expected.len()
                ));
            }
            for (scale_id, dims) in &expected {
                let dims = dims.as_object().unwrap();
                let ours_dims = ours.get(scale_id).cloned().unwrap_or_default();
                if ours_dims.len() != dims.len() {
                    problems.push(format!("{ref_id} {key} {scale_id}: dimension count differs"));
                }
                for (dim, label) in dims {
                    let Some(l) = ours_dims.get(dim) else {
                        problems.push(format!("{ref_id} {key} {scale_id}: missing {dim}"));
                        continue;
                    };
                    let score_ok = match (&label["score"], l.score) {
                        (Value::String(s), None) => s == "X",
                        (Value::Number(n), Some(x)) => n.as_f64() == Some(x),
                        _ => false,
                    };
                    let kind = match l.kind {
                        LabelType::H => "H",
                        LabelType::L => "L",
                        LabelType::X => "X",
                    };
                    if !score_ok || label["type"] != kind {
                        problems.push(format!("{ref_id} {key} {scale_id} {dim}: {l:?} != {label}"));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{what}: {} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn bundled_data_equals_the_frozen_reference_facts() {
    check_against(&fixture(), "fixture");
}

#[test]
fn frozen_facts_equal_the_live_reference_when_present() {
    let Some(live) = live_reference() else {
        eprintln!("../shared/reference not present: checked the frozen fixture only");
        return;
    };
    assert_eq!(
        live,
        fixture(),
        "the fixture is stale: run tests/fixtures/freeze_reference.py"
    );
    check_against(&live, "live reference");
}

#[test]
fn ipip_50_has_goldbergs_key() {
    let catalog = Catalog::bundled().unwrap();
    let ipip = catalog.scale("IPIP-50").unwrap();
    assert_eq!(
        (ipip.items.len(), ipip.dimensions.len(), ipip.range.min, ipip.range.max),
        (50, 5, 1, 5)
    );
    // Items cycle E, A, C, Emotional Stability, Intellect; reverse-keyed items per the IPIP scoring key.
    let negative = [
        2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 29, 30, 32, 34, 36, 38, 39, 44, 46, 49,
    ];
    for item in &ipip.items {
        assert_eq!(item.dimension(), Some(((item.id - 1) % 5) as usize), "item {}", item.id);
        let positive = item.keying().unwrap().is_positive();
        assert_eq!(!positive, negative.contains(&item.id), "item {} keying", item.id);
    }
}
