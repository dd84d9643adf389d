//! A judge's free-text reply: JSON extraction and repair, then every validator over the result.

#![no_main]

use incharacter::domain::scale::ScoreRange;
use incharacter::domain::scoring::ItemOption;
use incharacter::method::judge_json::{bare_option, expert_poles, expert_score, extract, option, some_options};
use libfuzzer_sys::fuzz_target;

const RANGES: [ScoreRange; 2] = [ScoreRange { min: 1, max: 5 }, ScoreRange { min: -3, max: 3 }];

fn check_option(o: ItemOption, range: ScoreRange) {
    if let ItemOption::Value(x) = o {
        assert!(range.contains(x), "option {x} outside {range:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(reply) = std::str::from_utf8(data) else { return };
    for range in RANGES {
        if let Some(o) = bare_option(reply, range, &["Hermione"]) {
            check_option(o, range);
        }
    }
    let Ok(v) = extract(reply) else { return };
    if let Ok((score, _)) = expert_score(&v, 1.0, 5.0) {
        assert!((1.0..=5.0).contains(&score), "score {score}");
    }
    if let Ok((share, _)) = expert_poles(&v, ["E", "I"]) {
        assert!((0.0..=100.0).contains(&share), "share {share}");
    }
    for range in RANGES {
        if let Ok(o) = option("answer", &v, range) {
            check_option(o, range);
        }
        if let Some(object) = v.as_object() {
            // The object's own keys, plus one it may lack.
            let mut keys: Vec<String> = object.keys().cloned().collect();
            if let Ok((usable, unusable)) = some_options(&v, &keys, range) {
                assert_eq!(usable.len() + unusable.len(), keys.len());
                assert!(!usable.is_empty());
                usable.into_values().for_each(|o| check_option(o, range));
            }
            keys.push("1".into());
            let _ = some_options(&v, &keys, range);
            for (key, value) in object {
                if let Ok(o) = option(key, value, range) {
                    check_option(o, range);
                }
            }
        }
    }
});
