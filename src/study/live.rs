//! What a live view sees but the journal does not keep: each model call as it starts, its tokens as
//! they stream, its retries and its end. [`Observed`] wraps a model and reports these as [`Live`]
//! values; it also holds every new call while the run is paused (calls in flight finish).

use std::sync::Arc;

use futures_util::StreamExt;

use crate::llm::{ChatEvent, ChatModel, ChatRequest, EventStream, ModelInfo, Role, Usage};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Live {
    pub role: Role,
    /// The request's purpose, e.g. "interview hermione-en BFI 3 open" or "ER BFI Openness (attempt 1)".
    pub purpose: String,
    pub repeat: u32,
    pub kind: LiveKind,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum LiveKind {
    /// The call starts; `prompt` is its last message (the question, for an interview).
    Started {
        prompt: String,
    },
    Token(String),
    Retry {
        attempt: u32,
        reason: String,
    },
    Done {
        cached: bool,
        usage: Option<Usage>,
    },
    Failed(String),
}

pub use crate::llm::client::Pause;

/// Where live reports go (called on the task making the call, so keep it cheap: e.g. a channel send).
pub type LiveSink = Arc<dyn Fn(Live) + Send + Sync>;

pub struct Observed {
    pub inner: Arc<dyn ChatModel>,
    pub sink: LiveSink,
    pub pause: Pause,
}

impl ChatModel for Observed {
    fn stream(&self, request: ChatRequest) -> EventStream {
        let inner = self.inner.clone();
        let sink = self.sink.clone();
        let pause = self.pause.clone();
        let meta = request.meta.clone();
        let prompt = request.messages.last().map(|m| m.content.clone()).unwrap_or_default();
        let live = move |kind: LiveKind| {
            sink(Live {
                role: meta.role,
                purpose: meta.purpose.clone(),
                repeat: meta.repeat,
                kind,
            });
        };
        Box::pin(async_stream(inner, request, pause, prompt, live))
    }

    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn context_tokens(&self) -> Option<usize> {
        self.inner.context_tokens()
    }

    fn forget(&self, request: &ChatRequest, reply: &str) {
        self.inner.forget(request, reply);
    }
}

fn async_stream(
    inner: Arc<dyn ChatModel>,
    request: ChatRequest,
    pause: Pause,
    prompt: String,
    live: impl Fn(LiveKind) + Send + 'static,
) -> impl futures_util::Stream<Item = ChatEvent> + Send {
    futures_util::stream::once(async move {
        pause.wait().await;
        live(LiveKind::Started { prompt });
        let mut usage = None;
        inner.stream(request).map(move |event| {
            match &event {
                ChatEvent::Token(t) => live(LiveKind::Token(t.clone())),
                ChatEvent::Retry { attempt, reason, .. } => live(LiveKind::Retry {
                    attempt: *attempt,
                    reason: reason.clone(),
                }),
                ChatEvent::Usage(u) => usage = Some(*u),
                ChatEvent::Choices(_) => {}
                ChatEvent::Done { cached, .. } => live(LiveKind::Done { cached: *cached, usage }),
                ChatEvent::Error(e) => live(LiveKind::Failed(e.to_string())),
            }
            event
        })
    })
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;

    struct Scripted;

    impl ChatModel for Scripted {
        fn stream(&self, _: ChatRequest) -> EventStream {
            Box::pin(futures_util::stream::iter([
                ChatEvent::Token("Hel".into()),
                ChatEvent::Token("lo".into()),
                ChatEvent::Usage(Usage {
                    prompt_tokens: 3,
                    completion_tokens: 2,
                }),
                ChatEvent::Done {
                    finish_reason: None,
                    cached: false,
                },
            ]))
        }

        fn info(&self) -> ModelInfo {
            ModelInfo {
                provider: "scripted".into(),
                kind: "test".into(),
                model: "none".into(),
                sha256: None,
            }
        }
    }

    #[tokio::test]
    async fn reports_the_call_and_waits_while_paused() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let pause = Pause::default();
        let model = Observed {
            inner: Arc::new(Scripted),
            sink: Arc::new(move |l| {
                let _ = tx.send(l);
            }),
            pause: pause.clone(),
        };
        let mut request = ChatRequest::new(vec![ChatMessage::user("Harry:「Hi?」")]);
        request.meta.purpose = "interview x y 1 open".into();
        pause.set(true);
        let call = tokio::spawn(async move { crate::llm::complete(&model, request).await });
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "nothing starts while paused");
        pause.set(false);
        let reply = call.await.unwrap().unwrap();
        assert_eq!(reply.text, "Hello");
        let kinds: Vec<LiveKind> = std::iter::from_fn(|| rx.try_recv().ok()).map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            [
                LiveKind::Started {
                    prompt: "Harry:「Hi?」".into()
                },
                LiveKind::Token("Hel".into()),
                LiveKind::Token("lo".into()),
                LiveKind::Done {
                    cached: false,
                    usage: Some(Usage {
                        prompt_tokens: 3,
                        completion_tokens: 2
                    })
                }
            ]
        );
    }
}
