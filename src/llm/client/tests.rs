//! The client's policy against scripted transports.
use std::sync::Mutex;

use futures_util::StreamExt;
use async_trait::async_trait;


use super::*;
use crate::config::ProviderKind;
use crate::fault::Classify;
use crate::llm::pace::RateHeaders;
use crate::llm::{ChatMessage, Completion, ResponseSchema, Role, complete};

/// A transport that replies from a script, one reply per attempt (the last one again once the
/// script is spent), each split into word pieces as a server streams them.
struct Scripted {
    replies: Mutex<Vec<&'static str>>,
    attempts: Mutex<u32>,
    finish_reason: &'static str,
    batched: bool,
    /// The first this many attempts end as a server ends a request it interrupted.
    interrupted: Mutex<u32>,
    /// Every attempt is refused with this status and body message.
    refusal: Option<(u16, &'static str)>,
    /// Every attempt is answered with a web page of this text.
    page: Option<&'static str>,
    /// What the server says of itself.
    facts: Option<Facts>,
    /// Whether the model behind it may refuse a request's shape.
    may_refuse: bool,
    /// Each attempt waits here (at most two seconds) for the others sent with it.
    together: Option<tokio::sync::Barrier>,
    /// Attempts that met the others at `together`.
    met: Mutex<u32>,
    /// Whether replies say what they used (some servers ignore `stream_options.include_usage`).
    usage: bool,
    /// The model's own context, as the embedded model knows it.
    context: Option<usize>,
    /// The SHA-256 of the model's file, as the embedded model's registry knows it.
    file: Option<String>,
}

impl Scripted {
    fn new(replies: &[&'static str]) -> Scripted {
        Scripted {
            replies: Mutex::new(replies.iter().rev().copied().collect()),
            attempts: Mutex::new(0),
            finish_reason: "stop",
            batched: false,
            interrupted: Mutex::new(0),
            refusal: None,
            page: None,
            facts: None,
            may_refuse: true,
            together: None,
            met: Mutex::new(0),
            usage: true,
            context: None,
            file: None,
        }
    }

    fn attempts(&self) -> u32 {
        *self.attempts.lock().unwrap()
    }
}

#[async_trait]
impl Transport for Scripted {
    async fn attempt(
        &self,
        request: &ChatRequest,
        on_token: &mut (dyn FnMut(String) -> bool + Send),
    ) -> Result<Finished, AttemptError> {
        *self.attempts.lock().unwrap() += 1;
        if let Some(together) = &self.together
            && tokio::time::timeout(std::time::Duration::from_secs(2), together.wait())
                .await
                .is_ok()
        {
            *self.met.lock().unwrap() += 1;
        }
        if let Some(page) = self.page {
            // A page's text changes from one request to the next (a token, the time).
            let n = self.attempts();
            return Err(AttemptError::NotAnApi(format!(
                "the server answered text/html, not an event stream: {page}{}",
                if n > 1 { format!(" (request {n})") } else { String::new() }
            )));
        }
        if let Some((status, message)) = self.refusal {
            return Err(AttemptError::Status {
                status,
                rate: Box::default(),
                message: message.into(),
                param: None,
                code: None,
            });
        }
        {
            let mut interrupted = self.interrupted.lock().unwrap();
            if *interrupted > 0 {
                *interrupted -= 1;
                on_token("Half an ans".into());
                return Err(AttemptError::Interrupted);
            }
        }
        let reply = {
            let mut replies = self.replies.lock().unwrap();
            if replies.len() > 1 {
                replies.pop().unwrap()
            } else {
                replies[0]
            }
        };
        for piece in reply.split_inclusive(' ') {
            if !on_token(piece.to_string()) {
                return Err(AttemptError::Cancelled);
            }
        }
        Ok(Finished {
            usage: self.usage.then(|| Usage {
                prompt_tokens: 5,
                completion_tokens: reply.split_inclusive(' ').count() as u64,
            }),
            finish_reason: Some(self.finish_reason.into()),
            rate: RateHeaders::default(),
            // Asked for, each piece is a token, as sure as can be.
            choices: match request.sampling.top_logprobs {
                Some(_) => reply
                    .split_inclusive(' ')
                    .scan(0, |offset, piece| {
                        let at = *offset;
                        *offset += piece.len();
                        Some(crate::llm::TokenChoice {
                            offset: at,
                            token: piece.into(),
                            top: vec![(piece.into(), 0.0)],
                        })
                    })
                    .collect(),
                None => Vec::new(),
            },
            came: Came::Sent,
        })
    }

    fn info(&self) -> ModelInfo {
        ModelInfo {
            provider: "scripted".into(),
            kind: "test".into(),
            model: "m".into(),
            sha256: self.file.clone(),
        }
    }

    fn context_tokens(&self) -> Option<usize> {
        self.context
    }

    fn base_url(&self) -> &str {
        "http://scripted"
    }

    fn batched(&self) -> bool {
        self.batched
    }

    fn may_refuse_shapes(&self) -> bool {
        self.may_refuse
    }

    async fn learn(&self) -> Option<Facts> {
        self.facts.clone()
    }
}

fn client(transport: Arc<Scripted>, cache: &std::path::Path) -> Client {
    let mut config = ProviderConfig::new("scripted", ProviderKind::Openai, "http://scripted", "m");
    config.retry_base_ms = 1;
    config.max_retries = 3;
    let shared = Shared::new(4, Some(Cache::new(cache)), CacheMode::ReadWrite, 1);
    Client::new(transport, config, shared)
}

fn request(role: Role) -> ChatRequest {
    let mut r = ChatRequest::new(vec![ChatMessage::user("Are you talkative?")]);
    r.meta.role = role;
    r
}

fn cached(dir: &std::path::Path, request: &ChatRequest) -> Option<CacheEntry> {
    Cache::new(dir).get(&cache::key("http://scripted", "m", request))
}

/// Every file under `dir` (the cache's entries).
fn files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| if e.path().is_dir() { files(&e.path()) } else { 1 })
        .sum()
}

fn long_request() -> ChatRequest {
    let mut r = request(Role::Judge);
    r.messages = vec![ChatMessage::user("Rate these answers. ".repeat(2000))];
    r.sampling.max_tokens = Some(200);
    r
}

/// Rivals asked for come with the reply, and again with the reply the cache replays.
/// A server's first request of a shape goes alone (a refusal costs one request, not a wave); a
/// model that takes every shape, the embedded one, gets the first ones side by side.
#[tokio::test]
async fn the_first_requests_wait_for_a_first_reply_only_where_a_shape_may_be_refused() {
    for may_refuse in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut transport = Scripted::new(&["Quite talkative."]);
        transport.may_refuse = may_refuse;
        transport.together = Some(tokio::sync::Barrier::new(3));
        let transport = Arc::new(transport);
        let c = client(transport.clone(), dir.path());
        let asked: Vec<ChatRequest> = (0..3)
            .map(|i| {
                let mut r = request(Role::Judge);
                r.messages[0].content = format!("Question {i}?");
                r
            })
            .collect();
        let replies = futures_util::future::join_all(asked.into_iter().map(|r| complete(&c, r))).await;
        assert!(replies.iter().all(Result::is_ok));
        let met = *transport.met.lock().unwrap();
        // Where a shape may be refused, the first waits alone in vain and the two others then go
        // side by side (the first's arrival still counts at the barrier); else all three meet.
        assert_eq!(met, if may_refuse { 2 } else { 3 }, "may refuse: {may_refuse}");
        assert_eq!(transport.attempts(), 3);
    }
}

/// Requests waiting for the first of their shape to come back are queued, and the progress says
/// so: before, they were neither queued nor in flight (`0/10 · 1 in flight · 0 queued`).
#[tokio::test]
async fn requests_waiting_for_the_first_of_their_shape_are_queued() {
    let dir = tempfile::tempdir().unwrap();
    let mut transport = Scripted::new(&["One.", "Two.", "Three."]);
    // The first attempt waits there for this test.
    transport.together = Some(tokio::sync::Barrier::new(2));
    let transport = Arc::new(transport);
    let c = Arc::new(client(transport.clone(), dir.path()));
    let asked: Vec<_> = (0..3)
        .map(|i| {
            let (c, mut r) = (c.clone(), request(Role::Judge));
            r.messages[0].content = format!("Question {i}?");
            tokio::spawn(async move { complete(c.as_ref(), r).await })
        })
        .collect();
    let accounting = c.shared.accounting.clone();
    // (One thread: each yield runs every task that can run until it waits.)
    for _ in 0..1000 {
        if transport.attempts() == 1 && accounting.flight(Role::Judge).queued == 2 {
            break;
        }
        tokio::task::yield_now().await;
    }
    let flight = accounting.flight(Role::Judge);
    assert_eq!((flight.in_flight, flight.queued), (1, 2));
    transport.together.as_ref().unwrap().wait().await;
    for replied in futures_util::future::join_all(asked).await {
        assert!(replied.unwrap().is_ok());
    }
    let flight = accounting.flight(Role::Judge);
    assert_eq!((flight.in_flight, flight.queued), (0, 0));
}

/// The first of a shape is sent alone until a reply comes, whatever the reply holds: its retries of
/// an empty one do not hold up the others, which the server has shown it takes.
#[tokio::test]
async fn the_others_go_once_the_first_gets_a_reply_even_one_it_must_ask_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut transport = Scripted::new(&["", "Real one.", "Real two."]);
    // (The first attempt's arrival, alone, still counts at the barrier: the third to come opens it.)
    transport.together = Some(tokio::sync::Barrier::new(3));
    let transport = Arc::new(transport);
    let c = client(transport.clone(), dir.path());
    let asked = (0..2).map(|i| {
        let mut r = request(Role::Judge);
        r.messages[0].content = format!("Question {i}?");
        r
    });
    let replies = futures_util::future::join_all(asked.map(|r| complete(&c, r))).await;
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
    assert_eq!(transport.attempts(), 3, "the first asked twice");
    // The first's retry and the second went side by side.
    assert_eq!(*transport.met.lock().unwrap(), 2);
}

#[tokio::test]
async fn token_choices_come_with_the_reply_and_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let transport = Arc::new(Scripted::new(&["I am 4"]));
    let c = client(transport.clone(), dir.path());
    assert!(complete(&c, request(Role::Judge)).await.unwrap().choices.is_empty());
    let mut asked = request(Role::Judge);
    asked.sampling.top_logprobs = Some(5);
    let first = complete(&c, asked.clone()).await.unwrap();
    let tokens: Vec<(usize, &str)> = first.choices.iter().map(|c| (c.offset, c.token.as_str())).collect();
    assert_eq!(tokens, [(0, "I "), (2, "am "), (5, "4")]);
    let again = complete(&c, asked).await.unwrap();
    assert!(again.cached);
    assert_eq!((again.text, again.choices), (first.text, first.choices));
    assert_eq!(transport.attempts(), 2, "the second ask was a different request, the third a replay");
}

#[tokio::test]
async fn a_request_the_context_cannot_hold_is_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let transport = Arc::new(Scripted::new(&["5"]));
    let mut config = ProviderConfig::new("scripted", ProviderKind::Openai, "http://scripted", "m");
    config.context_tokens = Some(2048);
    let c = Client::new(
        transport.clone(),
        config,
        Shared::new(4, Some(Cache::new(dir.path())), CacheMode::ReadWrite, 1),
    );
    let error = complete(&c, long_request()).await.unwrap_err();
    assert!(error.is_context(), "{error:?}");
    let LlmError::Context {
        prompt_tokens,
        reply_tokens,
        context_tokens,
        how,
    } = &error
    else {
        panic!("{error:?}")
    };
    assert!(
        *prompt_tokens > 2048 && *reply_tokens == 200 && *context_tokens == 2048,
        "{error}"
    );
    assert_eq!(how, "estimated");
    assert!(error.to_string().contains("context"), "{error}");
    assert_eq!(transport.attempts(), 0, "nothing sent that cannot fit");
    // A short one goes.
    assert_eq!(complete(&c, request(Role::Judge)).await.unwrap().text, "5");
}

#[tokio::test]
async fn a_servers_context_refusal_is_not_retried_and_its_context_believed() {
    let dir = tempfile::tempdir().unwrap();
    let transport = Arc::new(Scripted {
        refusal: Some((
            400,
            "request (2086 tokens) exceeds the available context size (2048 tokens), try increasing it",
        )),
        ..Scripted::new(&["5"])
    });
    let c = client(transport.clone(), dir.path());
    assert_eq!(c.context_tokens(), None);
    let error = complete(&c, request(Role::Judge)).await.unwrap_err();
    assert_eq!(
        error,
        LlmError::ContextRefused {
            message: "request (2086 tokens) exceeds the available context size (2048 tokens), try increasing it".into(),
            prompt_tokens: Some(2086),
            context_tokens: Some(2048),
        }
    );
    assert_eq!(transport.attempts(), 1, "a refusal for length is not asked again");
    assert_eq!(c.context_tokens(), Some(2048), "later requests are fitted to it");
    // The next long one is not sent at all.
    assert!(complete(&c, long_request()).await.unwrap_err().is_context());
    assert_eq!(transport.attempts(), 1);
}

#[tokio::test]
async fn what_the_server_says_sets_the_context_and_caps_requests_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let facts = Facts {
        provider: "scripted".into(),
        model: "m".into(),
        server: Some(crate::llm::server::ServerKind::LlamaCpp),
        context_tokens: Some(4096),
        slots: Some(1),
        tokenize: None,
        truncates: false,
        sources: vec!["GET /props: n_ctx 4096, total_slots 1".into()],
        used: crate::llm::server::Used {
            context_tokens: Some(4096),
            max_concurrency: 1,
        },
        warnings: Vec::new(),
    };
    let transport = Arc::new(Scripted {
        facts: Some(facts.clone()),
        ..Scripted::new(&["5"])
    });
    let c = client(transport.clone(), dir.path());
    assert_eq!(c.own.max(), 8);
    complete(&c, request(Role::Judge)).await.unwrap();
    assert_eq!(c.own.max(), 1, "one slot: one request at a time");
    assert_eq!(c.context_tokens(), Some(4096));
    assert_eq!(c.shared.servers.take_fresh(), vec![facts], "journaled once");
    complete(&c, request(Role::Rpa)).await.unwrap();
    assert!(c.shared.servers.take_fresh().is_empty(), "asked once per provider");
}

#[tokio::test]
async fn interrupted_requests_are_asked_again_with_fewer_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let transport = Arc::new(Scripted::new(&["A whole answer."]));
    *transport.interrupted.lock().unwrap() = 2;
    let c = client(transport.clone(), dir.path());
    let before = c.own.limit();
    let mut events = c.stream(request(Role::Rpa));
    let (mut text, mut retries) = (String::new(), Vec::new());
    while let Some(e) = events.next().await {
        match e {
            ChatEvent::Token(t) => text.push_str(&t),
            ChatEvent::Retry { reason, .. } => {
                text.clear();
                retries.push(reason);
            }
            ChatEvent::Error(e) => panic!("{e}"),
            _ => {}
        }
    }
    assert_eq!(text, "A whole answer.", "the cut reply is discarded, never an answer");
    assert_eq!(transport.attempts(), 3);
    assert_eq!(retries.len(), 2);
    assert!(
        retries[0].contains("no finish_reason") && retries[0].contains("(interrupted: "),
        "{retries:?}"
    );
    assert!(c.own.limit() < before, "{} of {before} in flight", c.own.limit());
    assert_eq!(files(dir.path()), 1, "only the whole answer is cached");
}

/// A server that interrupts every request, even alone in flight: the limit halves down to one
/// request at a time, and from there each interruption is an attempt of the bounded policy.
#[tokio::test]
async fn a_server_that_interrupts_every_request_is_given_up_on_within_the_retry_policy() {
    let dir = tempfile::tempdir().unwrap();
    let transport = Arc::new(Scripted::new(&["Never reached."]));
    *transport.interrupted.lock().unwrap() = 1000;
    let c = client(transport.clone(), dir.path());
    let halvings = (c.own.limit() as f64).log2().ceil() as u32;
    let error = complete(&c, request(Role::Rpa)).await.unwrap_err();
    assert_eq!(c.own.limit(), 1);
    // max_retries 3: four attempts at one in flight, after those that halved the limit.
    assert_eq!(transport.attempts(), 4 + halvings, "{error}");
    assert!(error.to_string().contains("no finish_reason"), "{error}");
}

#[tokio::test]
async fn a_page_where_an_answer_was_asked_is_not_asked_again_and_the_same_page_stops_the_provider() {
    let dir = tempfile::tempdir().unwrap();
    let mut scripted = Scripted::new(&["Never reached."]);
    scripted.page = Some("Please sign in");
    let transport = Arc::new(scripted);
    let c = client(transport.clone(), dir.path());
    let error = complete(&c, request(Role::Rpa)).await.unwrap_err();
    assert_eq!(transport.attempts(), 1, "a page is not retried: {error}");
    assert_eq!(
        error.to_string(),
        "the server answered text/html, not an event stream: Please sign in \
         (is http://scripted the server's OpenAI-compatible API?)"
    );
    assert!(c.shared.unreachable_now().is_none(), "one page is not yet the server's way");
    for _ in 1..crate::llm::policy::REFUSED_AFTER {
        let _ = complete(&c, request(Role::Rpa)).await;
    }
    let stopped = c.shared.unreachable_now().expect("the same page, request after request");
    assert_eq!(stopped.reason, "the server answered text/html, not an event stream");
}

#[tokio::test]
async fn empty_and_blank_replies_are_retried_until_a_real_one() {
    let dir = tempfile::tempdir().unwrap();
    let transport = Arc::new(Scripted::new(&["", " \n\t ", "\u{200B}", "Only when it matters."]));
    let c = client(transport.clone(), dir.path());
    let mut events = c.stream(request(Role::Rpa));
    let (mut text, mut retries, mut usages) = (String::new(), Vec::new(), 0);
    while let Some(e) = events.next().await {
        match e {
            ChatEvent::Token(t) => text.push_str(&t),
            ChatEvent::Retry {
                reason,
                discarded_chars,
                ..
            } => {
                assert_eq!(discarded_chars, text.chars().count());
                text.clear();
                retries.push(reason);
            }
            ChatEvent::Usage(_) => usages += 1,
            ChatEvent::Choices(_) => panic!("not asked for"),
            ChatEvent::Done { cached, .. } => assert!(!cached),
            ChatEvent::Error(e) => panic!("{e}"),
        }
    }
    assert_eq!(text, "Only when it matters.");
    assert_eq!(transport.attempts(), 4);
    assert_eq!(retries.len(), 3);
    assert!(retries.iter().all(|r| r.contains("the reply was empty")), "{retries:?}");
    assert_eq!(usages, 1, "only the answer's usage goes to the caller");
    let counted = c.accounting().snapshot().total();
    assert_eq!((counted.requests, counted.retries, counted.failures), (4, 3, 0));
    assert_eq!(counted.prompt_tokens, 20, "every attempt's cost is counted");
    // Only the answer is cached, and a second ask is served from it.
    assert_eq!(files(dir.path()), 1);
    assert_eq!(
        cached(dir.path(), &request(Role::Rpa)).unwrap().text(),
        "Only when it matters."
    );
    let again = complete(&c, request(Role::Rpa)).await.unwrap();
    assert!(again.cached && again.text == "Only when it matters.");
    assert_eq!(transport.attempts(), 4);
}

#[tokio::test]
async fn a_model_that_only_replies_empty_fails_for_every_role_and_caches_nothing() {
    for role in Role::ALL {
        for reply in ["", "  \n  "] {
            let dir = tempfile::tempdir().unwrap();
            let transport = Arc::new(Scripted::new(&[reply]));
            let c = client(transport.clone(), dir.path());
            let error = complete(&c, request(role)).await.unwrap_err();
            assert_eq!(
                error,
                LlmError::EmptyReplies {
                    attempts: 4,
                    empty: 4,
                    finish_reason: Some("stop".into())
                }
            );
            assert_eq!(
                error.to_string(),
                "the replies were empty: 4 of 4 attempt(s) came back with no text \
                 (the last ended with finish_reason \"stop\")"
            );
            assert!(!error.is_input(), "the model's fault, not the user's: exit 1");
            assert_eq!(transport.attempts(), 4, "bounded by max_retries");
            assert_eq!(files(dir.path()), 0, "nothing cached for {role:?} {reply:?}");
            let counted = c.accounting().snapshot().total();
            assert_eq!((counted.requests, counted.failures), (4, 1));
        }
    }
}

#[tokio::test]
async fn an_empty_reply_to_a_json_request_is_a_failure_too() {
    let dir = tempfile::tempdir().unwrap();
    let transport = Arc::new(Scripted {
        finish_reason: "length",
        ..Scripted::new(&[""])
    });
    let c = client(transport.clone(), dir.path());
    let mut r = request(Role::Judge);
    r.schema = Some(ResponseSchema::new("rating", serde_json::json!({"type": "object"})));
    let error = complete(&c, r).await.unwrap_err().to_string();
    assert!(error.starts_with("the replies were empty: 4 of 4"), "{error}");
    assert!(error.contains("token cap ran out before any text"), "{error}");
    assert_eq!(files(dir.path()), 0);
}

#[tokio::test]
async fn an_empty_reply_an_older_build_cached_is_asked_again_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let r = request(Role::Rpa);
    let path = {
        let key = cache::key("http://scripted", "m", &r);
        dir.path().join(&key[..2]).join(format!("{key}.json"))
    };
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let stale =
        serde_json::json!({"tokens": [], "usage": null, "finish_reason": "stop", "model": "m", "created_unix": 1});
    std::fs::write(&path, stale.to_string()).unwrap();
    let transport = Arc::new(Scripted::new(&["I do like a good talk."]));
    let c = client(transport.clone(), dir.path());
    let reply: Completion = complete(&c, r.clone()).await.unwrap();
    assert!(!reply.cached, "the empty entry is not served");
    assert_eq!(transport.attempts(), 1);
    assert_eq!(cached(dir.path(), &r).unwrap().text(), "I do like a good talk.");
}

#[tokio::test]
async fn an_empty_reply_from_a_batch_is_asked_again_as_a_streamed_one_is() {
    // The hub keeps no empty reply: asked again, the request goes out in the next phase.
    let dir = tempfile::tempdir().unwrap();
    let transport = Arc::new(Scripted {
        batched: true,
        ..Scripted::new(&["", "Yes, I suppose."])
    });
    let c = client(transport.clone(), dir.path());
    let reply = complete(&c, request(Role::Rpa)).await.unwrap();
    assert_eq!(reply.text, "Yes, I suppose.");
    assert_eq!(transport.attempts(), 2);
}

#[test]
fn a_leading_thought_is_not_the_answer() {
    use crate::llm::thought_len;
    assert_eq!(thought_len("Honestly, yes."), 0);
    let reply = "<think>\nThe user asks…\n</think>\n\nHonestly, yes.";
    assert_eq!(&reply[thought_len(reply)..], "Honestly, yes.");
    let cut = "  <think>\nOkay, the user is asking me about this. Let me recall";
    assert_eq!(thought_len(cut), cut.len(), "cut while thinking: none of it is an answer");
    assert_eq!(thought_len("I never <think> twice."), 0, "a later mention is the answer's own");
}

#[tokio::test]
async fn a_reply_that_is_only_a_thought_is_empty_and_a_thought_before_an_answer_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut thinking = Scripted::new(&["<think>\nOkay, the user is asking me about this. Let me recall"]);
    thinking.finish_reason = "length";
    let c = client(Arc::new(thinking), dir.path());
    let error = complete(&c, request(Role::Rpa)).await.unwrap_err();
    assert!(matches!(error, LlmError::EmptyReplies { empty: 4, .. }), "{error}");
    assert!(error.to_string().contains("raise"), "the cap's hint: {error}");
    assert_eq!(files(dir.path()), 0, "nothing cached");
    let mut asked = request(Role::Rpa);
    asked.sampling.top_logprobs = Some(1);
    let transport = Arc::new(Scripted::new(&["<think> Who am I? </think> Only when it matters."]));
    let reply = complete(&client(transport, dir.path()), asked).await.unwrap();
    assert_eq!(reply.text, "Only when it matters.");
    let first = &reply.choices[0];
    assert_eq!((first.offset, first.token.as_str()), (0, "Only "), "the rivals keep their places");
}

#[tokio::test]
async fn replies_without_usage_are_counted_and_priced_by_estimate() {
    let dir = tempfile::tempdir().unwrap();
    let mut silent = Scripted::new(&["Only when it matters, and then only to friends."]);
    silent.usage = false;
    let mut config = ProviderConfig::new("scripted", ProviderKind::Openai, "http://scripted", "m");
    (config.price_in_per_mtok, config.price_out_per_mtok) = (1e6, 1e6);
    let shared = Shared::new(4, Some(Cache::new(dir.path())), CacheMode::ReadWrite, 1);
    let c = Client::new(Arc::new(silent), config, shared);
    complete(&c, request(Role::Rpa)).await.unwrap();
    let counted = c.accounting().snapshot().total();
    assert_eq!(counted.estimated, 1);
    assert!(counted.prompt_tokens > 0 && counted.completion_tokens > 0, "{counted:?}");
    let dollars = (counted.prompt_tokens + counted.completion_tokens) as f64;
    assert!((counted.cost - dollars).abs() < 1e-9, "priced: {counted:?}");
    let line = c.accounting().snapshot().lines().join("\n");
    assert!(line.contains("1 reply without usage from the server"), "{line}");
}

#[test]
fn whitespace_and_invisible_marks_are_empty_but_any_text_is_not() {
    // Direction overrides and control characters (an escape sequence's ESC and BEL) say nothing
    // either, as a model's "reply" of them showed.
    for empty in ["", " ", "\n\r\t", "\u{3000}", "\u{200B}\u{FEFF}", " \u{2060} ", "\u{200b}\u{200b}\u{feff}\u{202e}", "\u{1b}\u{7}\u{0}\u{ad}"] {
        assert!(crate::llm::is_empty_reply(empty), "{empty:?}");
    }
    for more in ["\u{1b}[0m\u{7}", "\u{3164}\u{2800}", "\u{301}\u{fe0f}", "\u{e0020}\u{e0041}", "\u{1b}]0;title\u{7}"] {
        assert!(crate::llm::is_empty_reply(more), "{more:?}");
    }
    for text in [".", " 1 ", "{}", "嗯", "e\u{301}", "[0m"] {
        assert!(!crate::llm::is_empty_reply(text), "{text:?}");
    }
}

/// A request that gets its place while the run is paused is not sent until the run goes on: a
/// pause stops what waits for a provider's limit, not only what has not asked yet.
#[tokio::test(start_paused = true)]
async fn a_request_that_gets_its_place_while_the_run_is_paused_waits_to_be_sent() {
    let mut transport = Scripted::new(&["Quite talkative."]);
    transport.may_refuse = false;
    // The first attempt waits (two seconds of the test's clock) for a second that cannot come:
    // the provider takes one request at a time.
    transport.together = Some(tokio::sync::Barrier::new(2));
    let transport = Arc::new(transport);
    let mut config = ProviderConfig::new("scripted", ProviderKind::Openai, "http://scripted", "m");
    config.max_concurrency = 1;
    let shared = Shared::new(4, None, CacheMode::Off, 1);
    let pause = Pause::default();
    shared.pause.set(pause.clone()).ok().unwrap();
    let c = Arc::new(Client::new(transport.clone(), config, shared));
    let ask = |i: usize| {
        let (c, mut r) = (c.clone(), request(Role::Rpa));
        r.messages[0].content = format!("Question {i}?");
        tokio::spawn(async move { complete(&*c, r).await })
    };
    let (first, second) = (ask(0), ask(1));
    while transport.attempts() == 0 {
        tokio::task::yield_now().await;
    }
    pause.set(true);
    first.await.unwrap().unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    assert_eq!(transport.attempts(), 1, "the second took the first's place while paused, and waits");
    pause.set(false);
    second.await.unwrap().unwrap();
    assert_eq!(transport.attempts(), 2);
}

/// A request a pause held back is never sent once nobody listens for it (the run was cancelled),
/// even when the pause is lifted afterwards.
#[tokio::test(start_paused = true)]
async fn a_held_request_whose_run_was_cancelled_is_not_sent() {
    let mut transport = Scripted::new(&["Quite talkative."]);
    transport.may_refuse = false;
    let transport = Arc::new(transport);
    let config = ProviderConfig::new("scripted", ProviderKind::Openai, "http://scripted", "m");
    let shared = Shared::new(4, None, CacheMode::Off, 1);
    let pause = Pause::default();
    shared.pause.set(pause.clone()).ok().unwrap();
    pause.set(true);
    let c = Arc::new(Client::new(transport.clone(), config, shared));
    let asked = {
        let c = c.clone();
        tokio::spawn(async move { complete(&*c, request(Role::Rpa)).await })
    };
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(transport.attempts(), 0, "held by the pause");
    asked.abort();
    let _ = asked.await;
    pause.set(false);
    tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    assert_eq!(transport.attempts(), 0, "the cancelled run's request was not sent");
}

/// Whoever is told a request ended (its reply, or its failure) no longer sees it in flight: a
/// progress line never counts an answer both done and in flight (80/88 done with 9 in flight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_no_longer_in_flight_when_its_end_is_told() {
    let dir = tempfile::tempdir().unwrap();
    for refused in [false, true] {
        let mut transport = Scripted::new(&["Quite talkative."]);
        transport.may_refuse = false;
        if refused {
            transport.refusal = Some((400, "no such model"));
        }
        let c = client(Arc::new(transport), dir.path());
        for i in 0..40 {
            let mut r = request(Role::Rpa);
            r.messages[0].content = format!("Question {i} ({refused})?");
            let mut events = c.stream(r);
            while let Some(event) = events.next().await {
                if matches!(event, ChatEvent::Done { .. } | ChatEvent::Error(_)) {
                    let flight = c.shared.accounting.flight(Role::Rpa);
                    assert_eq!(flight, crate::llm::accounting::Flight::default(), "request {i}, refused: {refused}");
                }
            }
        }
    }
}

#[test]
fn a_stated_context_past_the_models_own_is_bounded_by_it() {
    let cache = tempfile::tempdir().unwrap();
    let context = |stated: Option<usize>, own: Option<usize>| {
        let mut scripted = Scripted::new(&[]);
        scripted.context = own;
        let mut config = ProviderConfig::new("scripted", ProviderKind::Openai, "http://scripted", "m");
        config.context_tokens = stated;
        let shared = Shared::new(4, Some(Cache::new(cache.path())), CacheMode::ReadWrite, 1);
        Client::new(Arc::new(scripted), config, shared).context_tokens()
    };
    // A config's 1,000,000 over an embedded model of 4,096: prompts were sent unsplit, and refused.
    assert_eq!(context(Some(1_000_000), Some(4096)), Some(4096));
    assert_eq!(context(Some(2048), Some(4096)), Some(2048), "a smaller stated context is kept");
    assert_eq!(context(Some(8192), None), Some(8192), "a server's, as stated");
    assert_eq!(context(None, Some(4096)), Some(4096));
}

/// An embedded model's replies are its file's: the same name pointed at another file is not
/// answered from the first file's cached replies; the same file again is.
#[tokio::test]
async fn cached_replies_belong_to_the_models_file_not_only_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let on_file = |reply: &'static str, sha: &str| {
        let mut t = Scripted::new(&[reply]);
        t.file = Some(sha.into());
        client(Arc::new(t), dir.path())
    };
    let first = complete(&on_file("From the first file.", "aaaa"), request(Role::Rpa))
        .await
        .unwrap();
    assert!(!first.cached);
    let other = complete(&on_file("From another file.", "bbbb"), request(Role::Rpa))
        .await
        .unwrap();
    assert!(!other.cached && other.text == "From another file.", "{other:?}");
    let again = complete(&on_file("never asked", "aaaa"), request(Role::Rpa))
        .await
        .unwrap();
    assert!(again.cached && again.text == "From the first file.", "{again:?}");
}

/// Where an attempt waits at the cost cap; this one lets it go at once (as a run that stops).
struct Released;

#[async_trait]
impl crate::llm::accounting::Holder for Released {
    async fn hold(&self) {}
}

/// A retry held at the cost cap never went out: it is neither a request nor a retry in what the
/// run says it used (the empty reply that reached the cap was sent and billed; its retry waited).
#[tokio::test]
async fn a_retry_held_at_the_cost_cap_is_not_counted_as_sent() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ProviderConfig::new("scripted", ProviderKind::Openai, "http://scripted", "m");
    config.retry_base_ms = 1;
    (config.price_in_per_mtok, config.price_out_per_mtok) = (1e6, 1e6);
    let shared = Shared::new(4, Some(Cache::new(dir.path())), CacheMode::ReadWrite, 1);
    let _ = shared.cap.set((1.0, Arc::new(Released)));
    let transport = Arc::new(Scripted::new(&["", "A real answer."]));
    let c = Client::new(transport.clone(), config, shared);
    let asked = tokio::time::timeout(std::time::Duration::from_secs(10), complete(&c, request(Role::Rpa))).await;
    assert!(asked.expect("the held request ends with the run").is_err());
    assert_eq!(transport.attempts(), 1, "the retry was held");
    let used = c.accounting().snapshot().total();
    assert_eq!((used.requests, used.retries), (1, 0), "{used:?}");
    assert!(used.cost >= 1.0, "the empty reply was billed: {used:?}");
}

/// A cache that cannot be written (here a file stands where its folder would be) loses no reply,
/// but each reply it could not keep is counted and said in the `used:` line: asked again, it is
/// paid for again.
#[tokio::test]
async fn a_reply_the_cache_could_not_keep_is_counted_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let blocked = dir.path().join("cache");
    std::fs::write(&blocked, "not a folder").unwrap();
    let transport = Arc::new(Scripted::new(&["I am, rather."]));
    let c = client(transport, &blocked);
    assert_eq!(complete(&c, request(Role::Rpa)).await.unwrap().text, "I am, rather.");
    let snapshot = c.accounting().snapshot();
    assert_eq!(snapshot.total().not_cached, 1);
    let lines = snapshot.lines().join("\n");
    assert!(
        lines.contains("1 reply not written to the cache, which could not be written (see the log)"),
        "{lines}"
    );
}
