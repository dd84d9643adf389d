//! Reading a judge's reply. Structured outputs make replies clean, but providers without them (and
//! models that ignore them) wrap JSON in code fences and prose, add `//` comments and trailing commas,
//! write percentages as `60%` and numbers as strings. `extract` repairs those; the validators check keys,
//! types, ranges and 16Personalities sums and say precisely what is wrong, so the caller can re-ask.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::domain::scale::ScoreRange;
use crate::domain::scoring::ItemOption;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplyError {
    #[error("the reply holds no JSON object")]
    NoJson,
    #[error("the JSON cannot be read: {0}")]
    Syntax(String),
    #[error("the reply is not a JSON object")]
    NotAnObject,
    /// A problem specific to what the reply should hold (e.g. an empty utterance).
    #[error("{0}")]
    Invalid(String),
    #[error("key \"{0}\" is missing")]
    MissingKey(String),
    #[error("\"{key}\" is not a number: {found}")]
    NotANumber { key: String, found: String },
    #[error("\"{key}\" = {value} is outside [{min}, {max}]")]
    OutOfRange {
        key: String,
        value: f64,
        min: f64,
        max: f64,
    },
    #[error("\"{key}\" = {value} is not one of the options")]
    NotAnOption { key: String, value: f64 },
    #[error("the poles' percentages sum to {sum}, not 100")]
    BadSum { sum: f64 },
}

/// Finds the JSON object in a reply and repairs the usual damage. A reply holding two different
/// objects (an example, then the answer) or a key written twice is not read as either: which one
/// was meant is not known, so the judge is asked again.
pub fn extract(reply: &str) -> Result<Value, ReplyError> {
    let start = reply.find('{').ok_or(ReplyError::NoJson)?;
    let body = balanced(&reply[start..]).ok_or_else(|| ReplyError::Syntax("the object is never closed".into()))?;
    let first = read(body);
    // A key written twice is refused as such, not passed over for a later object.
    if let Err(e @ ReplyError::Syntax(why)) = &first
        && why.contains("is written twice")
    {
        return Err(e.clone());
    }
    // Another object after it (prose braces that are no JSON, and an empty object, aside).
    let mut rest = &reply[start + body.len()..];
    let mut read_first = first.as_ref().ok().cloned();
    while let Some(at) = rest.find('{') {
        let Some(next) = balanced(&rest[at..]) else {
            rest = &rest[at + 1..];
            continue;
        };
        match read(next) {
            Err(e @ ReplyError::Syntax(_)) if e.to_string().contains("is written twice") => return Err(e),
            Ok(other) if other.as_object().is_some_and(|o| !o.is_empty()) => match &read_first {
                None => read_first = Some(other),
                Some(value) if same(value, &other) => {}
                Some(_) => {
                    return Err(ReplyError::Invalid(
                        "the reply holds two different JSON objects: which one is the answer is not known".into(),
                    ));
                }
            },
            _ => {}
        }
        rest = &rest[at + next.len()..];
    }
    match read_first {
        Some(value) => Ok(value),
        None => first,
    }
}

/// Whether two objects say the same: numbers alike however written (4, 4.0, "4").
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w)),
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
    }
}

/// One object's text, repaired and read; refused when it writes a key twice (JSON keeps the last,
/// silently).
fn read(body: &str) -> Result<Value, ReplyError> {
    let cleaned = clean(body);
    serde_json::from_str::<Once>(&cleaned).map_err(|e| ReplyError::Syntax(e.to_string()))?;
    serde_json::from_str(&cleaned).map_err(|e| ReplyError::Syntax(e.to_string()))
}

/// Reads any JSON, refusing an object that holds a key twice (at any depth).
struct Once;

impl<'de> serde::Deserialize<'de> for Once {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Once, D::Error> {
        d.deserialize_any(OnceVisitor)
    }
}

struct OnceVisitor;

impl<'de> serde::de::Visitor<'de> for OnceVisitor {
    type Value = Once;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Once, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("key \"{key}\" is written twice")));
            }
            map.next_value::<Once>()?;
        }
        Ok(Once)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Once, A::Error> {
        while seq.next_element::<Once>()?.is_some() {}
        Ok(Once)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_str<E>(self, _: &str) -> Result<Once, E> {
        Ok(Once)
    }
    fn visit_unit<E>(self) -> Result<Once, E> {
        Ok(Once)
    }
}

/// The text from the first `{` to its matching `}` (strings and escapes respected).
fn balanced(text: &str) -> Option<&str> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut line_comment = false;
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if line_comment {
            line_comment = b != b'\n';
            continue;
        }
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'/' if bytes.get(i + 1) == Some(&b'/') => line_comment = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(&text[..=i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Removes `//` comments and trailing commas, and turns bare `60%` into `60`, outside strings.
fn clean(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_string = false;
    let mut escaped = false;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ',' => {
                let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
                if !matches!(next, Some('}') | Some(']')) {
                    out.push(c);
                }
            }
            '%' if out.chars().last().is_some_and(|p| p.is_ascii_digit()) => {}
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

/// A number, also from a string such as "4", "4.5" or "60%".
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s
            .trim()
            .trim_end_matches('%')
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite()),
        _ => None,
    }
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, ReplyError> {
    let object = v.as_object().ok_or(ReplyError::NotAnObject)?;
    object
        .get(key)
        .or_else(|| {
            object
                .iter()
                .find(|(k, _)| k.trim().eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
        .ok_or_else(|| ReplyError::MissingKey(key.into()))
}

/// An expert rating `{"analysis": …, "result": score}` with the score in `[min, max]`.
pub fn expert_score(v: &Value, min: f64, max: f64) -> Result<(f64, String), ReplyError> {
    let analysis = field(v, "analysis")
        .ok()
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let raw = field(v, "result")?;
    let score = number(raw).ok_or_else(|| ReplyError::NotANumber {
        key: "result".into(),
        found: raw.to_string(),
    })?;
    if !(min..=max).contains(&score) {
        return Err(ReplyError::OutOfRange {
            key: "result".into(),
            value: score,
            min,
            max,
        });
    }
    Ok((score, analysis))
}

/// A 16Personalities rating: `result` gives both poles' percentages, e.g. `{"E": 60, "I": 40}`; their sum
/// must be within one point of 100. Returns the first pole's share, normalized to a sum of exactly 100.
pub fn expert_poles(v: &Value, poles: [&str; 2]) -> Result<(f64, String), ReplyError> {
    let analysis = field(v, "analysis")
        .ok()
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let result = field(v, "result")?;
    // One number where each pole's share was asked: said so, so that a re-ask can correct it.
    if !result.is_object() {
        return Err(ReplyError::Invalid(format!(
            "\"result\" is {}, not an object giving each pole's percentage, e.g. {{\"{}\": 60, \"{}\": 40}}",
            crate::text::fit(&result.to_string(), 60),
            poles[0],
            poles[1]
        )));
    }
    let mut shares = [0.0; 2];
    for (share, pole) in shares.iter_mut().zip(poles) {
        let raw = field(result, pole)?;
        *share = number(raw).ok_or_else(|| ReplyError::NotANumber {
            key: pole.into(),
            found: raw.to_string(),
        })?;
        if !(0.0..=100.0).contains(share) {
            return Err(ReplyError::OutOfRange {
                key: pole.into(),
                value: *share,
                min: 0.0,
                max: 100.0,
            });
        }
    }
    let sum = shares[0] + shares[1];
    if (sum - 100.0).abs() > 1.0 {
        return Err(ReplyError::BadSum { sum });
    }
    Ok((shares[0] / sum * 100.0, analysis))
}

/// One option: a whole number in range, or "x" for a refusal.
pub fn option(key: &str, v: &Value, range: ScoreRange) -> Result<ItemOption, ReplyError> {
    if v.as_str().is_some_and(|s| s.trim().eq_ignore_ascii_case("x")) {
        return Ok(ItemOption::Refused);
    }
    let x = number(v).ok_or_else(|| ReplyError::NotANumber {
        key: key.into(),
        found: v.to_string(),
    })?;
    let (min, max) = (f64::from(range.min), f64::from(range.max));
    if !(min..=max).contains(&x) {
        return Err(ReplyError::OutOfRange {
            key: key.into(),
            value: x,
            min,
            max,
        });
    }
    if x.fract() != 0.0 {
        return Err(ReplyError::NotAnOption {
            key: key.into(),
            value: x,
        });
    }
    Ok(ItemOption::Value(x as i32))
}

/// Usable options by key, and each unusable item's key with its problem.
pub type SomeOptions = (BTreeMap<String, ItemOption>, Vec<(String, ReplyError)>);

/// The usable options of a conversion reply and the problem of each item that is not usable. An
/// error only when no item is usable (the whole reply is then asked again).
pub fn some_options(v: &Value, keys: &[String], range: ScoreRange) -> Result<SomeOptions, ReplyError> {
    let mut good = BTreeMap::new();
    let mut bad = Vec::new();
    for k in keys {
        match field(v, k).and_then(|x| option(k, x, range)) {
            Ok(o) => {
                good.insert(k.clone(), o);
            }
            Err(e) => bad.push((k.clone(), e)),
        }
    }
    match bad.first() {
        Some((_, e)) if good.is_empty() => Err(e.clone()),
        _ => Ok((good, bad)),
    }
}

/// A self-report answered "with the number only", read as the original pipeline reads it: the
/// `speakers`' names taken out, then what follows the first colon (`:`, else `：`) kept, then every
/// character but ASCII letters and digits and CJK ideographs (U+4E00–U+9FA5) dropped; the reply
/// is an option if what is left is one's number as written (`Hermione: 4`, `赫敏：「4」。`, `**3**`,
/// `4.`). Anything else (`I'd say 4`, `3.5`, `x`) is an answer for the judge to read.
///
/// One departure: a number that dropping characters would take apart is the judge's too, where the
/// original reads `-2` as 2, `3.5` as 35, `1.0` as 10 and `1-2` as 12 (an option on a scale of
/// negative options or of more than nine): what is read must be one run of digits with no minus
/// sign before it. On the bundled scales this changes only a negative reply the original read as
/// its absolute value.
pub fn bare_option(reply: &str, range: ScoreRange, speakers: &[&str]) -> Option<ItemOption> {
    let mut names: Vec<&str> = speakers.iter().map(|n| n.trim()).filter(|n| !n.is_empty()).collect();
    // Longest first, so that "Hermione Granger" goes whole.
    names.sort_by_key(|n| std::cmp::Reverse(n.chars().count()));
    let mut t = reply.to_string();
    for name in names {
        t = t.replace(name, "");
    }
    let after = match t.split_once(':').or_else(|| t.split_once('：')) {
        Some((_, rest)) => rest,
        None => &t,
    };
    let runs = after.split(|c: char| !c.is_ascii_digit()).filter(|r| !r.is_empty()).count();
    let signed = after.char_indices().any(|(i, c)| {
        // Hyphen-minus, the hyphens and dashes U+2010–U+2015, minus, small and full-width hyphen-minus.
        matches!(c, '-' | '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{fe63}' | '\u{ff0d}')
            && after[i + c.len_utf8()..].starts_with(|d: char| d.is_ascii_digit())
    });
    if runs != 1 || signed {
        return None;
    }
    let kept: String = after
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || ('\u{4e00}'..='\u{9fa5}').contains(c))
        .collect();
    (range.min..=range.max)
        .find(|n| n.to_string() == kept)
        .map(ItemOption::Value)
}

/// How sessions started before [`bare_option`] read a self-report (SR only; kept so that their
/// resumes read as they began): the reply is just a number in range (or "x"), also
/// when wrapped the way role-play agents answer: after one of the `speakers`' names and a colon
/// (`Hermione: 4`, `赫敏：4`), in quotes or corner brackets (`"4"`, `「4」`), with a closing full stop.
/// Any other words (`I'd say 4`) make it an answer for the judge to read.
pub fn bare_option_before(reply: &str, range: ScoreRange, speakers: &[&str]) -> Option<ItemOption> {
    let mut t = reply.trim();
    for name in speakers.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if let Some(rest) = t.strip_prefix(name) {
            let rest = rest.trim_start();
            if let Some(rest) = rest.strip_prefix(':').or_else(|| rest.strip_prefix('：')) {
                t = rest.trim();
                break;
            }
        }
    }
    let stop = |s: &str| s.trim().trim_end_matches(['.', '。']).trim().to_string();
    let mut t = stop(t);
    for (open, close) in [('"', '"'), ('\'', '\''), ('“', '”'), ('「', '」'), ('『', '』')] {
        if let Some(inner) = t.strip_prefix(open).and_then(|r| r.strip_suffix(close)) {
            t = stop(inner);
            break;
        }
    }
    option("answer", &Value::String(t), range).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_conversion_reply_keeps_its_usable_options() {
        let keys: Vec<String> = ["1", "2", "3"].iter().map(|k| k.to_string()).collect();
        let range = ScoreRange { min: 1, max: 5 };
        let (good, bad) = some_options(&json!({"1": 4, "2": 9, "3": "x"}), &keys, range).unwrap();
        assert_eq!(good.len(), 2);
        assert_eq!(good["3"], ItemOption::Refused);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].0, "2");
        assert!(matches!(bad[0].1, ReplyError::OutOfRange { .. }));
        let none = some_options(&json!({"1": 0, "3": "many"}), &keys, range).unwrap_err();
        assert!(matches!(none, ReplyError::OutOfRange { .. }), "{none}");
    }

    /// Two different objects (an example before the answer), or a key written twice, are not read
    /// as either; the same object twice is that object, and prose braces are no object.
    #[test]
    fn a_reply_that_says_two_things_is_not_read_as_one() {
        for reply in [
            r#"For example {"1": 9, "2": "x"}. My answer: {"1": 2, "2": 3}"#,
            "{\"result\": 1}\n{\"result\": 5}",
        ] {
            let e = extract(reply).unwrap_err();
            assert!(e.to_string().contains("two different JSON objects"), "{reply}: {e}");
        }
        let e = extract(r#"{"result": 4, "result": 1}"#).unwrap_err();
        assert!(e.to_string().contains("key \"result\" is written twice"), "{e}");
        let e = extract(r#"{"scores": {"1": 2, "1": 4}}"#).unwrap_err();
        assert!(e.to_string().contains("key \"1\" is written twice"), "{e}");
        assert_eq!(
            extract("{\"result\": 3}\nAgain: {\"result\": 3}").unwrap(),
            serde_json::json!({"result": 3})
        );
        assert_eq!(
            extract("I weigh {the answers} first. {\"result\": 2} {and done}").unwrap(),
            serde_json::json!({"result": 2})
        );
        // The same answer written otherwise, or an empty object after it, is still that answer; a
        // different one after an unclosed brace is still found; a key twice in the first object is
        // said even when a later object is clean.
        assert_eq!(extract(r#"{"1": 4} then {"1": "4.0"} {}"#).unwrap(), serde_json::json!({"1": 4}));
        let e = extract(r#"{"1": 4} note: { oops {"1": 2}"#).unwrap_err();
        assert!(e.to_string().contains("two different JSON objects"), "{e}");
        let e = extract(r#"{"1": 4, "1": 2} {"1": 3}"#).unwrap_err();
        assert!(e.to_string().contains("written twice"), "{e}");
    }

    #[test]
    fn extraction_repairs_common_damage() {
        let reply = "Sure! Here is my rating:\n```json\n{\n  \"analysis\": \"talks a lot // really\", // a comment\n  \"result\": 4,\n}\n```\nHope it helps.";
        assert_eq!(
            extract(reply).unwrap(),
            json!({"analysis": "talks a lot // really", "result": 4})
        );
        assert_eq!(extract("{\"E\": 60%, \"I\": 40%}").unwrap(), json!({"E": 60, "I": 40}));
        assert_eq!(extract("no json here"), Err(ReplyError::NoJson));
        assert!(matches!(extract("{\"a\": 1"), Err(ReplyError::Syntax(_))));
    }

    #[test]
    fn validators_check_ranges_sums_and_options() {
        let r = ScoreRange { min: 1, max: 5 };
        assert_eq!(
            expert_score(&json!({"analysis": "a", "result": "4.5"}), 1.0, 5.0)
                .unwrap()
                .0,
            4.5
        );
        assert!(matches!(
            expert_score(&json!({"result": 6}), 1.0, 5.0),
            Err(ReplyError::OutOfRange { .. })
        ));
        let (p, _) = expert_poles(&json!({"result": {"e": 60.5, "I": 40}}), ["E", "I"]).unwrap();
        assert!((p - 60.5 / 100.5 * 100.0).abs() < 1e-12);
        assert_eq!(
            expert_poles(&json!({"result": {"E": 70, "I": 40}}), ["E", "I"]),
            Err(ReplyError::BadSum { sum: 110.0 })
        );
        let one = expert_poles(&json!({"analysis": "…", "result": 99}), ["E", "I"]).unwrap_err().to_string();
        assert_eq!(one, "\"result\" is 99, not an object giving each pole's percentage, e.g. {\"E\": 60, \"I\": 40}");
        let keys = vec!["1".to_string(), "2".to_string()];
        let (o, bad) = some_options(&json!({"1": 4, "2": "X"}), &keys, r).unwrap();
        assert_eq!((o["1"], o["2"], bad.len()), (ItemOption::Value(4), ItemOption::Refused, 0));
        let (o, bad) = some_options(&json!({"1": 4}), &keys, r).unwrap();
        assert_eq!(o.len(), 1);
        assert_eq!(bad, [("2".to_string(), ReplyError::MissingKey("2".into()))]);
        let (o, bad) = some_options(&json!({"1": 3.5, "2": 1}), &keys, r).unwrap();
        assert_eq!(o["2"], ItemOption::Value(1));
        assert!(matches!(bad[..], [(ref k, ReplyError::NotAnOption { .. })] if k == "1"));
        assert_eq!(
            some_options(&json!({"3": 4}), &keys, r),
            Err(ReplyError::MissingKey("1".into())),
            "nothing usable: the reply is asked again"
        );
        assert_eq!(bare_option(" 3.\n", r, &[]), Some(ItemOption::Value(3)));
        assert_eq!(bare_option("I'd say 3", r, &[]), None);
    }

    #[test]
    fn a_number_taken_apart_by_the_reading_is_left_to_the_judge() {
        let signed = ScoreRange { min: -3, max: 3 };
        for reply in ["-2", "\u{2212}3", "\u{2010}2", "\u{2014}1", "Hermione: -1", "「-2」"] {
            assert_eq!(bare_option(reply, signed, &["Hermione"]), None, "{reply}");
        }
        assert_eq!(bare_option("2", signed, &[]), Some(ItemOption::Value(2)));
        assert_eq!(bare_option("- 2", signed, &[]), Some(ItemOption::Value(2)), "a bullet");
        let wide = ScoreRange { min: 0, max: 100 };
        for reply in ["1.0", "3.5", "4/5", "1-2", "2 30"] {
            assert_eq!(bare_option(reply, wide, &[]), None, "{reply}");
        }
        assert_eq!(bare_option("**35**", wide, &[]), Some(ItemOption::Value(35)));
        assert_eq!(bare_option("Hermione: 2:30", wide, &["Hermione"]), None);
    }
}
