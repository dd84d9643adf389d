//! One request in flight per identical request. Two parts of a study may ask a model the very same
//! thing at the same moment (ER_batch and ER_all rate a dimension whose items fit one batch with the
//! same prompt); sent side by side, both would be paid for, though the response cache would have
//! answered the second a moment later. Wrapped in [`Coalesced`], the second waits until the first
//! has ended, then asks its model as it would have: the reply it finds in the cache is counted as
//! a cache hit, not as a request. A first request that failed or was dropped leaves the second to
//! be sent as usual.
//!
//! The wait happens before the wrapped model sees the request, so a waiting request is neither in
//! flight nor parked for batch mode or a cost cap (they see only the first).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;

use super::{ChatEvent, ChatModel, ChatRequest, EventStream, ModelInfo};

/// The requests in flight by what they ask; shared by every model of a run.
#[derive(Default)]
pub struct Flights {
    by_key: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A request's turn: held while its stream lives.
struct Turn {
    flights: Arc<Flights>,
    key: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.guard.take();
        let mut map = self.flights.by_key.lock().unwrap_or_else(|p| p.into_inner());
        // The map's own handle is the last: no one else holds or waits for this key.
        if map.get(&self.key).is_some_and(|lock| Arc::strong_count(lock) == 1) {
            map.remove(&self.key);
        }
    }
}

impl Flights {
    async fn turn(self: &Arc<Self>, key: String) -> Turn {
        let lock = {
            let mut map = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(key.clone()).or_default().clone()
        };
        let guard = lock.lock_owned().await;
        Turn {
            flights: self.clone(),
            key,
            guard: Some(guard),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_key.lock().unwrap().len()
    }
}

/// A model whose identical requests go one after another (see the module's docs).
pub struct Coalesced {
    pub inner: Arc<dyn ChatModel>,
    pub flights: Arc<Flights>,
}

/// What makes two requests to models the same request: what the response cache keys them by.
fn key(info: &ModelInfo, request: &ChatRequest) -> String {
    let model = format!("{}@{}", info.model, info.sha256.as_deref().unwrap_or(""));
    super::cache::key(&format!("{}:{}", info.kind, info.provider), &model, request)
}

impl ChatModel for Coalesced {
    fn stream(&self, request: ChatRequest) -> EventStream {
        let key = key(&self.inner.info(), &request);
        let (flights, inner) = (self.flights.clone(), self.inner.clone());
        Box::pin(
            futures_util::stream::once(async move {
                let mut turn = Some(flights.turn(key).await);
                inner.stream(request).map(move |event| {
                    // Held until the request's last event (its reply is cached by then), or until
                    // its stream ends or is dropped.
                    if matches!(event, ChatEvent::Done { .. } | ChatEvent::Error(_)) {
                        turn.take();
                    }
                    event
                })
            })
            .flatten(),
        )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A model that counts the requests it has in flight at once, answering each when told.
    struct Gate {
        now: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
        go: Arc<tokio::sync::Notify>,
    }

    impl ChatModel for Gate {
        fn stream(&self, request: ChatRequest) -> EventStream {
            let (now, most, go) = (self.now.clone(), self.most.clone(), self.go.clone());
            Box::pin(futures_util::stream::once(async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                go.notified().await;
                now.fetch_sub(1, Ordering::SeqCst);
                ChatEvent::Token(request.messages[0].content.clone())
            }))
        }

        fn info(&self) -> ModelInfo {
            ModelInfo {
                provider: "p".into(),
                kind: "openai".into(),
                model: "m".into(),
                sha256: None,
            }
        }
    }

    fn asking(text: &str) -> ChatRequest {
        ChatRequest::new(vec![ChatMessage::user(text)])
    }

    /// Two identical requests go one after the other; another request goes beside them; the map
    /// forgets a key once nobody holds it.
    #[tokio::test]
    async fn identical_requests_wait_for_each_other_and_others_do_not() {
        let (now, most, go) = (Arc::default(), Arc::new(AtomicUsize::new(0)), Arc::new(tokio::sync::Notify::new()));
        let flights = Arc::new(Flights::default());
        let model = Coalesced {
            inner: Arc::new(Gate {
                now: Arc::clone(&now),
                most: most.clone(),
                go: go.clone(),
            }),
            flights: flights.clone(),
        };
        let streams = vec![
            model.stream(asking("same")),
            model.stream(asking("same")),
            model.stream(asking("other")),
        ];
        let collect = futures_util::future::join_all(streams.into_iter().map(|s| s.collect::<Vec<_>>()));
        let releaser = async {
            for _ in 0..3 {
                // Let every stream that can start do so, then release one.
                while now.load(Ordering::SeqCst) == 0 {
                    tokio::task::yield_now().await;
                }
                for _ in 0..16 {
                    tokio::task::yield_now().await;
                }
                go.notify_one();
            }
        };
        let (got, ()) = tokio::join!(collect, releaser);
        let texts: Vec<String> = got
            .into_iter()
            .map(|events| match &events[..] {
                [ChatEvent::Token(t)] => t.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["same", "same", "other"]);
        assert_eq!(most.load(Ordering::SeqCst), 2, "the two identical ones never went side by side");
        assert_eq!(flights.len(), 0);
    }
}
