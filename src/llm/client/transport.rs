//! What a client sends its attempts through: a provider's server, the embedded engine, or a batch.

use async_trait::async_trait;

use super::AttemptError;
use crate::llm::pace::RateHeaders;
use crate::llm::server::Facts;
use crate::llm::{ChatRequest, ModelInfo, Usage};

/// How one attempt ended well.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Finished {
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// What the reply's headers said of the provider's rate-limit budgets.
    pub rate: RateHeaders,
    /// The tokens' rivals, when the request asked for `top_logprobs` and the provider gave them.
    pub choices: Vec<crate::llm::TokenChoice>,
    /// Sent by this sitting, or taken from batch results rather than sent (see [`Came`]).
    pub came: Came,
}

/// Where a reply came from, which decides what the run's accounts count it as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Came {
    /// Returned to a request of this sitting (streamed, or by a batch it followed): a request, billed.
    #[default]
    Sent,
    /// Read from batch results an earlier sitting kept in the session: paid for then, not again.
    Kept,
    /// From a batch results file the user's own engine made (`batch import`): no request of this
    /// run's, but its tokens are counted, and priced as the provider's config states.
    Imported,
}

/// One request attempt against a model; no retries, no cache.
#[async_trait]
pub trait Transport: Send + Sync {
    /// Streams the reply's pieces to `on_token` (which returns false when nobody listens any more).
    async fn attempt(
        &self,
        request: &ChatRequest,
        on_token: &mut (dyn FnMut(String) -> bool + Send),
    ) -> Result<Finished, AttemptError>;

    fn info(&self) -> ModelInfo;

    /// The model's context in tokens, when the transport knows it.
    fn context_tokens(&self) -> Option<usize> {
        None
    }

    /// Where the model lives; part of the cache key.
    fn base_url(&self) -> &str;

    /// Who answered a refusal, as its error says it: the server at `base_url` unless the replies
    /// come from elsewhere (a batch results file an offline engine wrote).
    fn answerer(&self) -> &str {
        self.base_url()
    }

    /// Whether attempts wait for a batch (batch mode) instead of going out one by one; then the
    /// first request of a shape is not sent alone (its batch holds every request of its phase).
    fn batched(&self) -> bool {
        false
    }

    /// Whether the model behind it may refuse a request's shape in a way the run adapts to (a
    /// server's `max_tokens`, temperature or schema rules): then the first request of a shape goes
    /// alone. The embedded model takes every shape, so its requests need not wait for a first reply.
    fn may_refuse_shapes(&self) -> bool {
        true
    }

    /// What the server says about itself, asked once on first contact ([`super::server::learn`]);
    /// `None` for a transport with nothing to ask.
    async fn learn(&self) -> Option<Facts> {
        None
    }

    /// The model's own exact count of `request`'s prompt tokens, chat template included, when the
    /// transport holds its tokenizer (the embedded model); asked before a server's count.
    fn own_count(&self, _request: &ChatRequest) -> Option<usize> {
        None
    }

    /// The server's own count of `request`'s prompt tokens, when it offers one (`how`).
    async fn count_tokens(&self, _request: &ChatRequest, _how: crate::llm::server::Tokenize) -> Option<usize> {
        None
    }
}
