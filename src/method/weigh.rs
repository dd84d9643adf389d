//! Expected scores (G-Eval's weighting): instead of the one option a judge writes, the mean of the
//! options it could have written at that place, weighed by their probabilities. A small judge that
//! writes 5 for nearly everything may still put different mass on 4 and 5 from one answer to the next;
//! the expected value keeps that difference, the written digit loses it.
//!
//! The probabilities are the reply's token log-probabilities (`top_logprobs`), renormalised over the
//! tokens that write a whole option in the scale's range at the position where the score begins. Only
//! scales whose options are single digits are weighed; a score with decimals keeps its fraction.

use serde::{Deserialize, Serialize};

use crate::domain::scale::ScoreRange;
use crate::llm::TokenChoice;

/// The rivals asked for each token: enough for every option of a 0–9 scale besides a few non-digits.
pub const TOP_LOGPROBS: u8 = 12;

/// How one written score was weighed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Weighed {
    /// The score as the judge wrote it.
    pub written: f64,
    /// Each option that could have been written there and its probability (summing to 1).
    pub probabilities: Vec<(i32, f64)>,
    /// The options' mean under those probabilities, plus the written score's fraction.
    pub expected: f64,
}

/// Where the value of the last `"key":` in `reply` begins (a byte offset), when it is a number.
pub fn value_at(reply: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    let start = reply.rfind(&quoted)? + quoted.len();
    let rest = &reply[start..];
    let after_colon = rest.trim_start().strip_prefix(':')?;
    let value = after_colon.trim_start();
    let at = reply.len() - value.len();
    value.starts_with(|c: char| c.is_ascii_digit()).then_some(at)
}

/// The written score at byte `at` of the reply, weighed by the probabilities of the tokens that could
/// have begun there; `None` when the reply carries no rivals there, the scale's options are not
/// single digits, or no rival writes an option in range.
pub fn weigh(reply: &str, choices: &[TokenChoice], at: usize, range: ScoreRange, written: f64) -> Option<Weighed> {
    if range.min < 0 || range.max > 9 {
        return None;
    }
    let choice = choices
        .iter()
        .take_while(|c| c.offset <= at)
        .last()
        .filter(|c| at < c.offset + c.token.len().max(1))?;
    // What the token wrote before the score (a space, a colon): the rivals must write it too.
    let before = reply.get(choice.offset..at)?;
    let option = |token: &str| -> Option<i32> {
        let mut rest = token.strip_prefix(before)?.chars();
        let digit = rest.next()?.to_digit(10)? as i32;
        let whole = rest.next().is_none_or(|c| !c.is_ascii_digit());
        (whole && (range.min..=range.max).contains(&digit)).then_some(digit)
    };
    let lead = option(&choice.token)?;
    let mut mass: Vec<(i32, f64)> = Vec::new();
    for (token, logprob) in &choice.top {
        let Some(v) = option(token) else { continue };
        let p = f64::from(*logprob).exp();
        match mass.iter_mut().find(|(o, _)| *o == v) {
            Some(entry) => entry.1 += p,
            None => mass.push((v, p)),
        }
    }
    let total: f64 = mass.iter().map(|(_, p)| p).sum();
    if total.is_nan() || total <= 0.0 {
        return None;
    }
    mass.sort_by_key(|(v, _)| *v);
    let probabilities: Vec<(i32, f64)> = mass.into_iter().map(|(v, p)| (v, p / total)).collect();
    let mean: f64 = probabilities.iter().map(|(v, p)| f64::from(*v) * p).sum();
    let fraction = written - f64::from(lead);
    let expected = (mean + fraction).clamp(f64::from(range.min), f64::from(range.max));
    Some(Weighed {
        written,
        probabilities,
        expected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE: ScoreRange = ScoreRange { min: 1, max: 5 };

    fn choice(offset: usize, token: &str, top: &[(&str, f64)]) -> TokenChoice {
        TokenChoice {
            offset,
            token: token.into(),
            top: top.iter().map(|(t, p)| ((*t).to_string(), p.ln() as f32)).collect(),
        }
    }

    #[test]
    fn the_value_of_the_last_key_is_found() {
        let reply = r#"{"analysis": "a \"result\": 2 here", "result": 4.5}"#;
        let at = value_at(reply, "result").unwrap();
        assert_eq!(&reply[at..], "4.5}");
        assert_eq!(value_at(r#"{"12":3,"13": "x"}"#, "12"), Some(6));
        assert_eq!(value_at(r#"{"12":3,"13": "x"}"#, "13"), None, "a refusal is no number");
        assert_eq!(value_at(r#"{"12":3}"#, "14"), None);
    }

    #[test]
    fn options_are_weighed_by_their_probabilities() {
        let reply = r#"{"result": 4}"#;
        let at = value_at(reply, "result").unwrap();
        let choices = [
            choice(0, "{\"", &[("{\"", 1.0)]),
            choice(2, "result", &[("result", 1.0)]),
            choice(8, "\":", &[("\":", 1.0)]),
            choice(10, " ", &[(" ", 1.0)]),
            choice(11, "4", &[("4", 0.5), ("5", 0.3), ("3", 0.1), ("\"", 0.05), ("44", 0.05)]),
            choice(12, "}", &[("}", 1.0)]),
        ];
        let w = weigh(reply, &choices, at, FIVE, 4.0).unwrap();
        assert_eq!(w.probabilities.iter().map(|p| p.0).collect::<Vec<_>>(), [3, 4, 5]);
        assert!((w.probabilities.iter().map(|p| p.1).sum::<f64>() - 1.0).abs() < 1e-9);
        assert!((w.expected - (3.0 * 0.1 + 4.0 * 0.5 + 5.0 * 0.3) / 0.9).abs() < 1e-6, "{w:?}");
        // A fraction written after the digit is kept; the result stays in range.
        let w = weigh(reply, &choices, at, FIVE, 4.5).unwrap();
        assert!((w.expected - ((3.0 * 0.1 + 4.0 * 0.5 + 5.0 * 0.3) / 0.9 + 0.5)).abs() < 1e-6);
        // Not single-digit options, or no rivals: nothing to weigh.
        assert_eq!(weigh(reply, &choices, at, ScoreRange { min: 0, max: 100 }, 4.0), None);
        assert_eq!(weigh(reply, &[], at, FIVE, 4.0), None);
    }

    #[test]
    fn a_token_that_begins_before_the_score_is_read_past_its_start() {
        // " 4" in one token: its rivals " 2", " 5" are options, "2" (no space) is not there.
        let reply = r#"{"7": 4}"#;
        let at = value_at(reply, "7").unwrap();
        let choices = [
            choice(0, "{\"7\":", &[("{\"7\":", 1.0)]),
            choice(5, " 4", &[(" 4", 0.6), (" 2", 0.3), ("2", 0.1)]),
        ];
        let w = weigh(reply, &choices, at, FIVE, 4.0).unwrap();
        assert_eq!(w.probabilities.iter().map(|p| p.0).collect::<Vec<_>>(), [2, 4]);
        assert!((w.probabilities[0].1 - 1.0 / 3.0).abs() < 1e-6, "{w:?}");
    }
}
