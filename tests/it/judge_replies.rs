//! A corpus of judge replies — clean, damaged in the ways real models damage them, and wrong — each
//! with its documented outcome (a value, or which error the re-ask will be told about).

use std::collections::BTreeMap;

use incharacter::domain::scale::ScoreRange;
use incharacter::domain::scoring::ItemOption;
use incharacter::method::judge_json::{self, ReplyError};
use serde_json::Value;

fn error_name(e: &ReplyError) -> &'static str {
    match e {
        ReplyError::NoJson => "NoJson",
        ReplyError::Syntax(_) => "Syntax",
        ReplyError::NotAnObject => "NotAnObject",
        ReplyError::MissingKey(_) => "MissingKey",
        ReplyError::NotANumber { .. } => "NotANumber",
        ReplyError::OutOfRange { .. } => "OutOfRange",
        ReplyError::NotAnOption { .. } => "NotAnOption",
        ReplyError::BadSum { .. } => "BadSum",
        ReplyError::Invalid(_) => "Invalid",
    }
}

fn option_json(o: ItemOption) -> Value {
    match o {
        ItemOption::Value(v) => Value::from(v),
        ItemOption::Refused => Value::from("x"),
    }
}

#[test]
fn every_reply_in_the_corpus_has_its_documented_outcome() {
    let corpus = include_str!("../fixtures/judge_replies.jsonl");
    let mut n = 0;
    for (line_no, line) in corpus.lines().enumerate() {
        let case: Value = serde_json::from_str(line).unwrap();
        let reply = case["reply"].as_str().unwrap();
        let expect = &case["expect"];
        let range = case["range"].as_array().map(|r| ScoreRange {
            min: r[0].as_i64().unwrap() as i32,
            max: r[1].as_i64().unwrap() as i32,
        });
        let at = format!("line {}: {reply:?}", line_no + 1);
        match case["kind"].as_str().unwrap() {
            "er" => {
                let r = range.unwrap();
                let got =
                    judge_json::extract(reply).and_then(|v| judge_json::expert_score(&v, r.min.into(), r.max.into()));
                match (got, expect.get("score")) {
                    (Ok((score, _)), Some(want)) => {
                        assert!((score - want.as_f64().unwrap()).abs() < 1e-9, "{at}: {score}")
                    }
                    (Err(e), None) => assert_eq!(error_name(&e), expect["error"], "{at}: {e}"),
                    (got, _) => panic!("{at}: got {got:?}, expected {expect}"),
                }
            }
            "er16p" => {
                let got = judge_json::extract(reply).and_then(|v| judge_json::expert_poles(&v, ["E", "I"]));
                match (got, expect.get("pct")) {
                    (Ok((pct, _)), Some(want)) => assert!((pct - want.as_f64().unwrap()).abs() < 1e-9, "{at}: {pct}"),
                    (Err(e), None) => assert_eq!(error_name(&e), expect["error"], "{at}: {e}"),
                    (got, _) => panic!("{at}: got {got:?}, expected {expect}"),
                }
            }
            "oc" => {
                let keys: Vec<String> = serde_json::from_value(case["keys"].clone()).unwrap();
                // Every item usable, or the first item's problem.
                let got = judge_json::extract(reply)
                    .and_then(|v| judge_json::some_options(&v, &keys, range.unwrap()))
                    .and_then(|(options, bad)| match bad.into_iter().next() {
                        Some((_, e)) => Err(e),
                        None => Ok(options),
                    });
                match (got, expect.get("options")) {
                    (Ok(options), Some(want)) => {
                        let got: BTreeMap<String, Value> =
                            options.into_iter().map(|(k, o)| (k, option_json(o))).collect();
                        let want: BTreeMap<String, Value> = serde_json::from_value(want.clone()).unwrap();
                        assert_eq!(got, want, "{at}");
                    }
                    (Err(e), None) => assert_eq!(error_name(&e), expect["error"], "{at}: {e}"),
                    (got, _) => panic!("{at}: got {got:?}, expected {expect}"),
                }
            }
            "sr" => {
                let speakers: Vec<&str> = case["speakers"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let got = judge_json::bare_option(reply, range.unwrap(), &speakers).map(option_json);
                assert_eq!(got.unwrap_or(Value::Null), expect["option"], "{at}");
            }
            other => panic!("unknown kind {other}"),
        }
        n += 1;
    }
    assert!(n >= 50, "the corpus has {n} replies");
}
