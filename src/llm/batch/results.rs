//! The results of a batch: what a results file (of the Batch API, of `vllm run-batch`, or an
//! offline engine's) answers each request, read line by line, a bad line located.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::llm::Usage;

/// A reply a batch returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// The tokens' rivals, when the request asked for `top_logprobs`.
    pub choices: Vec<crate::llm::TokenChoice>,
    /// Returned by a batch this sitting, read from results an earlier sitting kept, or imported.
    pub came: crate::llm::client::Came,
}

impl Reply {
    /// Whether it holds an answer: text beyond blanks and a reasoning model's thought (as a streamed
    /// reply is judged).
    pub fn usable(&self) -> bool {
        let text = &self.text;
        !crate::llm::is_empty_reply(&text[crate::llm::thought_len(text)..])
    }
}

/// A line the server answered with an error (or did not answer).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<String>,
    /// As a reply's: returned by a batch this sitting, kept from an earlier one, or imported.
    pub came: crate::llm::client::Came,
}

pub type Answer = Result<Reply, Refusal>;

/// A line of a results file that cannot be taken; the whole file is then refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}:{line}:{column}: {message}", file.to_string())]
pub struct BadLine {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// The answers of a results file (an output file of the Batch API or of `vllm run-batch`, its error
/// file, or both concatenated), by `custom_id`. Every line must be JSON, carry a `custom_id` that
/// `known` accepts (once) and a response or an error; the first line that does not is located.
pub fn parse_results(file: &str, text: &str, known: &dyn Fn(&str) -> bool) -> Result<BTreeMap<String, Answer>, BadLine> {
    let mut answers = BTreeMap::new();
    for (i, raw) in text.strip_prefix('\u{feff}').unwrap_or(text).lines().enumerate() {
        let bad = |column: usize, message: String| BadLine {
            file: file.to_string(),
            line: i + 1,
            column,
            message,
        };
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(raw).map_err(|e| bad(crate::files::json_column(raw, &e), format!("not JSON: {}", crate::files::json_message(&e))))?;
        // Where a field's value starts on the line, for the column of what is wrong with it.
        let at = |field: &str| raw.find(&format!("\"{field}\"")).map_or(1, |p| crate::files::char_column(raw, p));
        let Some(id) = value.get("custom_id").and_then(Value::as_str) else {
            return Err(bad(1, "no custom_id".into()));
        };
        if !known(id) {
            return Err(bad(
                at("custom_id"),
                format!("custom_id {} is not a request of this batch", id),
            ));
        }
        let answer = answer_of(&value).map_err(|why| bad(at("response"), why))?;
        if answers.insert(id.to_string(), answer).is_some() {
            return Err(bad(
                at("custom_id"),
                format!("custom_id {} answered twice", id),
            ));
        }
    }
    Ok(answers)
}

/// The answer a results line holds: a 200 response's completion, or the error it reports.
fn answer_of(line: &Value) -> Result<Answer, String> {
    let response = line.get("response").filter(|r| !r.is_null());
    let status = response
        .and_then(|r| r.get("status_code"))
        .and_then(Value::as_u64)
        .map(|s| s as u16);
    let error = line.get("error").filter(|e| !e.is_null());
    let body = response.and_then(|r| r.get("body"));
    let field = |v: Option<&Value>, name: &str| v.and_then(|e| e.get(name)).and_then(Value::as_str).map(str::to_string);
    match (status, error) {
        (Some(200), None) => {
            let body = body.ok_or("a 200 response without a body")?;
            let choice = body.pointer("/choices/0").ok_or("a 200 response without choices")?;
            let text = match choice.pointer("/message/content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(_) => return Err("message.content is not text".into()),
            };
            // (Counts no reply can have are no usage: the reply's tokens are estimated.)
            let usage = body
                .get("usage")
                .and_then(|u| {
                    Some(Usage {
                        prompt_tokens: u.get("prompt_tokens")?.as_u64()?,
                        completion_tokens: u.get("completion_tokens")?.as_u64()?,
                    })
                })
                .filter(|u| u.prompt_tokens <= crate::llm::MOST_TOKENS && u.completion_tokens <= crate::llm::MOST_TOKENS);
            Ok(Ok(Reply {
                text,
                usage,
                finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_string),
                choices: crate::llm::openai::token_choices(choice, &mut 0),
                came: crate::llm::client::Came::Sent,
            }))
        }
        (status, error) => {
            let inner = body.and_then(|b| b.get("error")).or(error);
            if inner.is_none() && status.is_none() {
                return Err("neither a response nor an error".into());
            }
            Ok(Err(Refusal {
                // A line that never ran (expired, cancelled) is worth asking again.
                status: status.filter(|s| *s != 200).unwrap_or(503),
                message: field(inner, "message").unwrap_or_else(|| "the batch reported an error".into()),
                param: field(inner, "param"),
                code: field(inner, "code"),
                came: crate::llm::client::Came::Sent,
            }))
        }
    }
}
