//! Asking the judge until its reply can be used: attempt 0 at temperature 0, later attempts at 0.2 with
//! the reason the previous reply was rejected; bounded (default 5 attempts); every attempt recorded.
//! Running out of attempts is a recorded failure — never a silent midpoint.

use serde::{Deserialize, Serialize};

use super::judge_json::ReplyError;
use crate::llm::{ChatMessage, ChatModel, ChatRequest, complete};

pub const DEFAULT_ATTEMPTS: u32 = 5;

/// One request to the judge and what became of its reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub temperature: f32,
    pub reply: String,
    /// Why the reply was rejected (or the request failed); `None` for the accepted one.
    pub error: Option<String>,
    pub cached: bool,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no usable judge reply after {attempts} attempts; last problem: {last}")]
pub struct JudgeFailure {
    pub attempts: u32,
    pub last: String,
}

/// The judge as the methods use it: the model, the bounded number of attempts, and the temperature of
/// the first one (the run's plan records both).
#[derive(Clone, Copy)]
pub struct Judge<'a> {
    pub model: &'a dyn ChatModel,
    pub attempts: u32,
    pub temperature: f32,
}

impl Judge<'_> {
    /// [`ask_at`] with this judge's policy.
    pub async fn ask<T>(
        &self,
        request: &ChatRequest,
        parse: impl Fn(&str) -> Result<T, ReplyError>,
    ) -> (Result<T, JudgeFailure>, Vec<Attempt>) {
        ask_at(self.model, request, self.attempts, self.temperature, parse).await
    }
}

/// Sends `request` (temperature and seed are set here) and parses the reply with `parse`, re-asking
/// with the rejection reason up to `max_attempts` times.
pub async fn ask<T>(
    judge: &dyn ChatModel,
    request: &ChatRequest,
    max_attempts: u32,
    parse: impl Fn(&str) -> Result<T, ReplyError>,
) -> (Result<T, JudgeFailure>, Vec<Attempt>) {
    ask_at(judge, request, max_attempts, 0.0, parse).await
}

/// [`ask`] for a request sampled at `temperature` (simulations at 1.0): the first attempt uses it, and
/// re-asks use it too, or 0.2 when it is 0.
pub async fn ask_at<T>(
    judge: &dyn ChatModel,
    request: &ChatRequest,
    max_attempts: u32,
    temperature: f32,
    parse: impl Fn(&str) -> Result<T, ReplyError>,
) -> (Result<T, JudgeFailure>, Vec<Attempt>) {
    let mut attempts = Vec::new();
    let mut messages = request.messages.clone();
    let base_seed = request.sampling.seed.unwrap_or(0);
    for n in 0..max_attempts.max(1) {
        let temperature = if n == 0 || temperature > 0.0 { temperature } else { 0.2 };
        let mut r = request.clone();
        r.messages = messages.clone();
        r.sampling.temperature = Some(temperature);
        r.sampling.seed = Some(base_seed.wrapping_add(u64::from(n)));
        r.meta.purpose = format!("{} (attempt {})", request.meta.purpose, n + 1);
        match complete(judge, r).await {
            Err(e) => attempts.push(Attempt {
                temperature,
                reply: String::new(),
                error: Some(e.to_string()),
                cached: false,
            }),
            Ok(reply) => match parse(&reply.text) {
                Ok(value) => {
                    attempts.push(Attempt {
                        temperature,
                        reply: reply.text,
                        error: None,
                        cached: reply.cached,
                    });
                    return (Ok(value), attempts);
                }
                Err(problem) => {
                    messages = request.messages.clone();
                    messages.push(ChatMessage::assistant(reply.text.clone()));
                    messages.push(ChatMessage::user(format!(
                        "That reply cannot be used: {problem}. Reply again with the JSON only, exactly in the requested form."
                    )));
                    attempts.push(Attempt {
                        temperature,
                        reply: reply.text,
                        error: Some(problem.to_string()),
                        cached: reply.cached,
                    });
                }
            },
        }
    }
    let last = attempts.last().and_then(|a| a.error.clone()).unwrap_or_default();
    (
        Err(JudgeFailure {
            attempts: attempts.len() as u32,
            last,
        }),
        attempts,
    )
}

/// Fills `{name}` placeholders of a prompt template.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}
