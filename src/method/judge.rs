//! Asking the judge until its reply can be used: attempt 0 at temperature 0, later attempts at 0.2 with
//! the reason the previous reply was rejected; bounded (default 5 attempts); every attempt recorded.
//! Running out of attempts is a recorded failure — never a silent midpoint — and the response cache
//! forgets the rejected replies, so that a resume asks again.

use serde::{Deserialize, Serialize};

use super::judge_json::ReplyError;
use crate::llm::{ChatMessage, ChatModel, ChatRequest, TokenChoice, complete};
use crate::templates::{Template, Templates};

pub const DEFAULT_ATTEMPTS: u32 = 5;

/// One request to the judge (or another model whose reply must parse) and what became of its reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// Written as the decimal it was set as (0.2, not 0.20000000298023224).
    #[serde(serialize_with = "crate::domain::decimal::short")]
    pub temperature: f32,
    pub reply: String,
    /// Why the reply was rejected (or the request failed); `None` for the accepted one.
    pub error: Option<String>,
    pub cached: bool,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", match .attempts {
    0 => last.clone(),
    1 => format!("no usable reply after 1 attempt; last problem: {last}"),
    n => format!("no usable reply after {n} attempts; last problem: {last}"),
})]
pub struct JudgeFailure {
    /// The attempts made; 0 when the replies were read but what they give together falls short
    /// (`last` says how).
    pub attempts: u32,
    pub last: String,
    /// The request's own failure, when it failed rather than its replies being rejected.
    pub cause: Option<crate::llm::LlmError>,
}

impl JudgeFailure {
    /// Whether the request was too long for the judge's context (a smaller one may fit).
    pub fn is_context(&self) -> bool {
        self.cause.as_ref().is_some_and(crate::llm::LlmError::is_context)
    }
}

/// The judge as the methods use it: the model, the bounded number of attempts, the temperature of
/// the first one, and the run's prompt templates (the run's plan records all of them).
#[derive(Clone, Copy)]
pub struct Judge<'a> {
    pub model: &'a dyn ChatModel,
    pub attempts: u32,
    pub temperature: f32,
    pub templates: &'a Templates,
    /// Ask for the tokens' rivals so that scores can be weighed by their probabilities
    /// ([`super::weigh`]); what the methods do with them is theirs.
    pub expected: bool,
}

impl Judge<'_> {
    /// Sends `request` (temperature and seed are set here) and parses the reply with `parse`, re-asking
    /// with the rejection reason (the `reask` template) up to `attempts` times. A request that fails
    /// is not re-asked: the client already retried what can be retried. The first attempt is
    /// sampled at `temperature`, and re-asks too, or at 0.2 when it is 0.
    pub async fn ask<T>(
        &self,
        request: &ChatRequest,
        parse: impl Fn(&str) -> Result<T, ReplyError>,
    ) -> (Result<T, JudgeFailure>, Vec<Attempt>) {
        self.ask_weighing(request, |reply, _| parse(reply)).await
    }

    /// [`Judge::ask`] whose `parse` also reads the reply's tokens and their rivals (asked for when
    /// the judge weighs scores; empty otherwise, or when the provider gives none).
    pub async fn ask_weighing<T>(
        &self,
        request: &ChatRequest,
        parse: impl Fn(&str, &[TokenChoice]) -> Result<T, ReplyError>,
    ) -> (Result<T, JudgeFailure>, Vec<Attempt>) {
        let (judge, max_attempts, temperature) = (self.model, self.attempts, self.temperature);
        let mut attempts = Vec::new();
        let mut messages = request.messages.clone();
        let base_seed = request.sampling.seed.unwrap_or(0);
        let mut cause = None;
        // The requests whose replies were rejected: forgotten by the cache if none is accepted.
        let mut rejected = Vec::new();
        for n in 0..max_attempts.max(1) {
            let temperature = if n == 0 || temperature > 0.0 { temperature } else { 0.2 };
            let mut r = request.clone();
            r.messages = messages.clone();
            r.sampling.temperature = Some(temperature);
            r.sampling.seed = Some(base_seed.wrapping_add(u64::from(n)));
            r.sampling.top_logprobs = self.expected.then_some(super::weigh::TOP_LOGPROBS);
            r.meta.purpose = format!("{} (attempt {})", request.meta.purpose, n + 1);
            match complete(judge, r.clone()).await {
                // The client has its own bounded retries for what a retry can mend (429, 5xx, broken
                // streams, empty replies); what it gives up on, or a refusal, is not mended by asking
                // again. So a judge that only ever replies with nothing is one failed attempt here,
                // never re-asked with an empty reply quoted back to it.
                Err(e) => {
                    attempts.push(Attempt {
                        temperature,
                        reply: String::new(),
                        error: Some(e.to_string()),
                        cached: false,
                    });
                    cause = Some(e);
                    break;
                }
                Ok(reply) => match parse(&reply.text, &reply.choices) {
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
                        let problem = problem.to_string();
                        messages = request.messages.clone();
                        messages.push(ChatMessage::assistant(reply.text.clone()));
                        messages.push(ChatMessage::user(
                            self.templates.render(Template::Reask, &[("problem", &problem)]),
                        ));
                        rejected.push((r, reply.text.clone()));
                        attempts.push(Attempt {
                            temperature,
                            reply: reply.text,
                            error: Some(problem),
                            cached: reply.cached,
                        });
                    }
                },
            }
        }
        // Every attempt was used up on replies that could not be used: none is kept to be read
        // back, so a resume asks again rather than failing the same way. A chain that ends accepted
        // keeps its rejected replies, and so does one a failed request cut short (stopped, out of
        // budget, unreachable): a rerun or resume replays them as they went.
        if cause.is_none() {
            for (r, reply) in &rejected {
                judge.forget(r, reply);
            }
        }
        let last = attempts.last().and_then(|a| a.error.clone()).unwrap_or_default();
        (
            Err(JudgeFailure {
                attempts: attempts.len() as u32,
                last,
                cause,
            }),
            attempts,
        )
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
/// re-asks use it too, or 0.2 when it is 0. Re-asks read the bundled `reask` template.
pub async fn ask_at<T>(
    judge: &dyn ChatModel,
    request: &ChatRequest,
    max_attempts: u32,
    temperature: f32,
    parse: impl Fn(&str) -> Result<T, ReplyError>,
) -> (Result<T, JudgeFailure>, Vec<Attempt>) {
    let judge = Judge {
        model: judge,
        attempts: max_attempts,
        temperature,
        templates: Templates::bundled(),
        expected: false,
    };
    judge.ask(request, parse).await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::config::{CacheMode, ProviderConfig, ProviderKind};
    use crate::llm::client::{AttemptError, Finished, Shared, Transport};
    use crate::llm::{Client, ModelInfo, Role};

    /// A judge that gives its scripted replies in turn (the last one ever after), counting them.
    struct Scripted(std::sync::Mutex<Vec<&'static str>>, AtomicU32);

    #[async_trait]
    impl Transport for Scripted {
        async fn attempt(
            &self,
            _: &ChatRequest,
            on_token: &mut (dyn FnMut(String) -> bool + Send),
        ) -> Result<Finished, AttemptError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            let mut replies = self.0.lock().unwrap();
            let reply = if replies.len() > 1 { replies.remove(0) } else { replies[0] };
            on_token(reply.into());
            Ok(Finished::default())
        }

        fn info(&self) -> ModelInfo {
            ModelInfo {
                provider: "scripted".into(),
                kind: "test".into(),
                model: "m".into(),
                sha256: None,
            }
        }

        fn base_url(&self) -> &str {
            "http://scripted"
        }
    }

    /// Asks `replies`' judge twice for a reply that reads "ok", with the cache in `dir` in `mode`:
    /// the two outcomes, and how many replies the judge gave each time.
    async fn asked_twice(dir: &std::path::Path, mode: CacheMode, replies: Vec<&'static str>) -> [(bool, u32); 2] {
        let transport = Arc::new(Scripted(std::sync::Mutex::new(replies), AtomicU32::new(0)));
        let config = ProviderConfig::new("scripted", ProviderKind::Openai, "http://scripted", "m");
        let cache = Some(crate::llm::cache::Cache::new(dir));
        let client = Client::new(transport.clone(), config, Shared::new(2, cache, mode, 0));
        let request = ChatRequest::new(vec![ChatMessage::user("Rate the answers.")]);
        let parse = |reply: &str| if reply == "ok" { Ok(()) } else { Err(ReplyError::NoJson) };
        let mut outcomes = [(false, 0); 2];
        for outcome in &mut outcomes {
            let before = transport.1.load(Ordering::SeqCst);
            let (result, _) = ask(&client, &request, 2, parse).await;
            *outcome = (result.is_ok(), transport.1.load(Ordering::SeqCst) - before);
        }
        outcomes
    }

    #[tokio::test]
    async fn the_cache_forgets_the_replies_of_a_failed_judgment_and_keeps_an_accepted_chain() {
        // Two rejected replies: a failure, and asked again the judge is asked again, not the cache.
        let dir = tempfile::tempdir().unwrap();
        let failed = asked_twice(dir.path(), CacheMode::ReadWrite, vec!["no", "no", "ok"]).await;
        assert_eq!(failed, [(false, 2), (true, 1)]);
        // A rejected reply and an accepted one: the second time both come from the cache.
        let dir = tempfile::tempdir().unwrap();
        let accepted = asked_twice(dir.path(), CacheMode::ReadWrite, vec!["no", "ok"]).await;
        assert_eq!(accepted, [(true, 2), (true, 0)]);
        // A judge that never gives a usable reply leaves nothing in the cache.
        let dir = tempfile::tempdir().unwrap();
        let never = asked_twice(dir.path(), CacheMode::ReadWrite, vec!["no"]).await;
        assert_eq!(never, [(false, 2), (false, 2)]);
        let kept = walkdir(dir.path());
        assert!(kept.is_empty(), "{kept:?}");
    }

    /// The files under `dir`.
    fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            if entry.path().is_dir() {
                files.extend(walkdir(&entry.path()));
            } else {
                files.push(entry.path());
            }
        }
        files
    }

    #[tokio::test]
    async fn a_judge_that_only_replies_empty_fails_once_without_re_asks() {
        let transport = Arc::new(Scripted(std::sync::Mutex::new(vec![" "]), AtomicU32::new(0)));
        let mut config = ProviderConfig::new("silent", ProviderKind::Openai, "http://scripted", "m");
        config.retry_base_ms = 1;
        config.max_retries = 2;
        let client = Client::new(transport.clone(), config, Shared::new(2, None, CacheMode::Off, 0));
        let mut request = ChatRequest::new(vec![ChatMessage::user("Rate the answers.")]);
        request.meta.role = Role::Judge;
        let (result, attempts) = ask(&client, &request, DEFAULT_ATTEMPTS, |reply| Ok(reply.to_string())).await;
        let failure = result.unwrap_err();
        assert_eq!(
            failure.attempts, 1,
            "one failed request, not {DEFAULT_ATTEMPTS} re-asks"
        );
        assert!(
            failure.last.starts_with("the replies were empty: 3 of 3"),
            "{}",
            failure.last
        );
        assert_eq!(attempts.len(), 1);
        assert_eq!(transport.1.load(Ordering::SeqCst), 3, "the client's retries only");
        let counted = client.accounting().snapshot().total();
        assert_eq!((counted.requests, counted.retries, counted.failures), (3, 2, 1));
    }
}
