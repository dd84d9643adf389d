//! How one attempt at a request failed, and what each failure means for the retry policy.

use std::time::Duration;

use crate::llm::LlmError;
use crate::llm::pace::RateHeaders;
use crate::llm::policy;

/// How one attempt failed.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptError {
    /// Could not send the request (a connection that broke, a pooled one the server had closed).
    Connect(String),
    /// Could not open a connection at all (refused, no route, no such host).
    NoConnection(String),
    /// A non-success status before any token.
    Status {
        status: u16,
        /// `Retry-After` and the rate-limit budgets, as the refusal's headers said (boxed: they are
        /// most of the error's size, and rare).
        rate: Box<RateHeaders>,
        message: String,
        /// The error body's `param` and `code` (OpenAI-style), which name what was refused.
        param: Option<String>,
        code: Option<String>,
    },
    /// The stream ended or broke before `[DONE]`.
    Cut(String),
    /// A success status whose body is not JSON nor an event stream (a proxy's login page, a web
    /// server at the wrong path): asked again, the same page comes back.
    NotAnApi(String),
    /// `[DONE]` came without a `finish_reason`: the server ended the request early to serve another
    /// (llama-cpp-python serves one at a time). Asked again, and taken as a sign of too many in
    /// flight, as a 429 is.
    Interrupted,
    /// An error object inside a 200 stream.
    InStream(String),
    /// The server refused the prompt as too long for its context (classified by
    /// [`crate::llm::server::context_refusal`]): asking again cannot help.
    ContextRefused {
        message: String,
        refusal: crate::llm::server::Refusal,
    },
    FirstTokenTimeout,
    IdleTimeout,
    /// The reply was complete but held no text, or only whitespace ([`super::is_empty_reply`]): a
    /// server that dropped the request under load, an embedded model's immediate end of sequence.
    Empty {
        finish_reason: Option<String>,
    },
    /// Retrying cannot help (a rejected key, a missing model file).
    Fatal(LlmError),
    /// Nobody listens any more.
    Cancelled,
}

impl AttemptError {
    pub fn retryable(&self) -> bool {
        match self {
            AttemptError::Connect(_)
            | AttemptError::NoConnection(_)
            | AttemptError::Cut(_)
            | AttemptError::Interrupted
            | AttemptError::InStream(_)
            | AttemptError::FirstTokenTimeout
            | AttemptError::IdleTimeout
            | AttemptError::Empty { .. } => true,
            AttemptError::Status { status, .. } => policy::retryable_status(*status),
            AttemptError::Fatal(_)
            | AttemptError::Cancelled
            | AttemptError::ContextRefused { .. }
            | AttemptError::NotAnApi(_) => false,
        }
    }

    /// The server refused for its rate (429, or 503 with a `Retry-After`): not the request's fault.
    pub(super) fn rate_limited(&self) -> bool {
        match self {
            AttemptError::Status { status: 429, .. } | AttemptError::Interrupted => true,
            AttemptError::Status { status: 503, rate, .. } => rate.retry_after.is_some(),
            _ => false,
        }
    }

    /// The wait the server asked for before a request of about `tokens` tokens is sent again.
    pub(super) fn retry_after(&self, tokens: u64) -> Option<Duration> {
        match self {
            AttemptError::Status { rate, .. } => rate.wait(tokens),
            _ => None,
        }
    }

    /// The failure in words, naming `base_url` where it matters.
    pub fn describe(&self, base_url: &str) -> String {
        match self {
            AttemptError::Connect(e) | AttemptError::NoConnection(e) => format!("cannot reach {base_url}: {e}"),
            AttemptError::Status { status, message, .. } => format!("HTTP {status} from {base_url}: {message}"),
            AttemptError::Cut(e) => e.clone(),
            AttemptError::NotAnApi(e) => format!("{e} (is {base_url} the server's OpenAI-compatible API?)"),
            AttemptError::Interrupted => {
                "the stream ended with [DONE] but no finish_reason: the server interrupted the request".into()
            }
            AttemptError::InStream(e) => format!("error inside the stream: {e}"),
            AttemptError::ContextRefused { message, .. } => format!("too long for the context: {message}"),
            AttemptError::FirstTokenTimeout => "no first token in time".into(),
            AttemptError::IdleTimeout => "the stream stalled".into(),
            AttemptError::Empty { finish_reason: None } => "the reply was empty".into(),
            AttemptError::Empty {
                finish_reason: Some(reason),
            } => format!("the reply was empty (finish_reason \"{}\")", reason),
            AttemptError::Fatal(e) => e.to_string(),
            AttemptError::Cancelled => "cancelled".into(),
        }
    }
}

impl AttemptError {
    /// The same failure, as a context refusal when the server's words say it is one (a 400, 413 or
    /// 422 status, or an error inside the stream).
    pub(super) fn classified(self) -> AttemptError {
        let refusal = match &self {
            AttemptError::Status {
                status: 400 | 413 | 422,
                message,
                code,
                ..
            } => crate::llm::server::context_refusal(message, code.as_deref()).map(|r| (message.clone(), r)),
            AttemptError::InStream(message) => {
                crate::llm::server::context_refusal(message, None).map(|r| (message.clone(), r))
            }
            _ => None,
        };
        match refusal {
            Some((message, refusal)) => AttemptError::ContextRefused { message, refusal },
            None => self,
        }
    }
}
