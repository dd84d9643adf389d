//! The test instruments themselves (`incharacter-testkit`): the fake server's JSON follows the
//! request's schema, its tokens keep all the text, and the runner benchmark's ideal bound is the
//! largest of its three limits.

use incharacter::domain::rng::SplitMix64;
use incharacter_testkit::bound::ideal_bound_ms;
use incharacter_testkit::fake_openai::{TraceEntry, generate, split_tokens};
use serde_json::json;

#[test]
fn generated_json_follows_bounds_enums_and_any_of() {
    let schema = json!({
        "type": "object",
        "properties": {
            "analysis": {"type": "string"},
            "result": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 7}, {"enum": ["x"]}]},
            "ratio": {"type": "number", "minimum": 0, "maximum": 100},
        },
        "required": ["analysis", "result", "ratio"],
    });
    for seed in 0..200 {
        let v = generate(&schema, &mut SplitMix64(seed), 0);
        assert!(v["analysis"].is_string());
        let r = &v["result"];
        assert!(r == "x" || (1..=7).contains(&r.as_i64().unwrap()), "{v}");
        let ratio = v["ratio"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&ratio));
    }
}

#[test]
fn tokens_keep_all_text() {
    let text = "Well, hello there.\n你好，世界";
    assert_eq!(split_tokens(text).concat(), text);
    assert!(split_tokens(text).len() > 5);
}

fn entry(kind: &'static str, model_ms: f64) -> TraceEntry {
    TraceEntry {
        arrival_ms: 0.0,
        kind,
        tokens: 0,
        events: 0,
        model_ms,
        fault: None,
    }
}

#[test]
fn the_bound_is_the_largest_of_spread_work_longest_reply_and_chain() {
    let trace = vec![entry("chat", 300.0), entry("chat", 500.0), entry("judge", 400.0)];
    // One slot: everything in a row.
    assert_eq!(ideal_bound_ms(&trace, 1), 1200.0);
    // Many slots: the judge call still waits for the shortest interview.
    assert_eq!(ideal_bound_ms(&trace, 64), 700.0);
    // Two slots: 600 ms of spread work < the 700 ms chain.
    assert_eq!(ideal_bound_ms(&trace, 2), 700.0);
    assert_eq!(ideal_bound_ms(&[entry("chat", 900.0)], 8), 900.0);
}
