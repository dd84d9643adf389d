//! The assessment methods end to end against scripted models (test doubles whose replies are a function
//! of the request): every dimension score is recomputed here from the judge's replies, the batch rule
//! and the scale's keying.

use std::sync::Mutex;

use futures_util::stream;
use incharacter::catalog::Catalog;
use incharacter::domain::scoring::ItemOption;
use incharacter::llm::{ChatEvent, ChatModel, ChatRequest, EventStream, ModelInfo};
use incharacter::method::anonymize::Masker;
use incharacter::method::convert::{self, Conversion};
use incharacter::method::expert::{self, Exchange, Grouping};
use incharacter::method::interview::{self, QueryStyle};
use incharacter::templates::Templates;
use serde_json::{Value, json};

/// A first repeat, in the order the answers were given.
const FIRST: (u32, expert::Order) = (0, expert::Order::Original);

/// Replies with `reply(request)`; records every request.
struct Scripted<F: Fn(&ChatRequest) -> String + Send + Sync> {
    reply: F,
    seen: Mutex<Vec<ChatRequest>>,
}

impl<F: Fn(&ChatRequest) -> String + Send + Sync> ChatModel for Scripted<F> {
    fn stream(&self, request: ChatRequest) -> EventStream {
        let text = (self.reply)(&request);
        self.seen.lock().unwrap().push(request);
        Box::pin(stream::iter(vec![
            ChatEvent::Token(text),
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
            model: "scripted".into(),
            sha256: None,
        }
    }
}

fn scripted<F: Fn(&ChatRequest) -> String + Send + Sync>(reply: F) -> Scripted<F> {
    Scripted {
        reply,
        seen: Mutex::new(Vec::new()),
    }
}

/// The judge's ER score for a conversation: 1 + (number of exchanges mod 5), as a function of the text.
fn er_reply(r: &ChatRequest) -> String {
    let user = &r.messages[1].content;
    let n = user.matches("<the experimenter>:").count();
    if r.schema.as_ref().unwrap().schema["properties"]["result"]["type"] == "object" {
        let props = r.schema.as_ref().unwrap().schema["properties"]["result"]["properties"]
            .as_object()
            .unwrap()
            .clone();
        let poles: Vec<&String> = props.keys().collect();
        let first = 10.0 * n as f64;
        return json!({"analysis": "poles", "result": {poles[0]: first, poles[1]: 100.0 - first}}).to_string();
    }
    json!({"analysis": format!("{n} exchanges"), "result": 1 + (n % 5)}).to_string()
}

#[tokio::test]
async fn er_batch_and_all_scores_are_batch_means() {
    let catalog = Catalog::bundled().unwrap();
    let bfi = catalog.scale("BFI").unwrap();
    let hermione = catalog.character("hermione-en").unwrap();
    let judge = scripted(er_reply);
    let masker = Masker::new(&hermione.aliases, &hermione.experimenter);
    for (d, dim) in bfi.dimensions.iter().enumerate() {
        let exchanges: Vec<Exchange> = bfi
            .items_of(d)
            .map(|i| Exchange {
                item_id: i.id,
                question: i.question.en.clone(),
                response: "Honestly, Harry.".into(),
            })
            .collect();
        for repeat in 0..2 {
            let r = expert::rate(
                at5(&judge),
                bfi,
                d,
                hermione.language,
                &masker,
                &exchanges,
                Grouping::Batch,
                (repeat, expert::Order::Original),
            )
            .await;
            let expected_batches = expert::batches(exchanges.len());
            assert_eq!(r.batches.len(), expected_batches.len(), "{}", dim.name);
            let mut ids: Vec<u32> = r.batches.iter().flat_map(|b| b.item_ids.clone()).collect();
            ids.sort();
            assert_eq!(ids, exchanges.iter().map(|e| e.item_id).collect::<Vec<_>>());
            let mean = r
                .batches
                .iter()
                .map(|b| 1.0 + (b.item_ids.len() % 5) as f64)
                .sum::<f64>()
                / r.batches.len() as f64;
            assert!((r.score.unwrap() - mean).abs() < 1e-12, "{}", dim.name);
            let all = expert::rate(
                at5(&judge),
                bfi,
                d,
                hermione.language,
                &masker,
                &exchanges,
                Grouping::All,
                (repeat, expert::Order::Original),
            )
            .await;
            assert_eq!(all.score.unwrap(), 1.0 + (exchanges.len() % 5) as f64);
        }
    }
    // Every judge prompt is anonymized.
    for r in judge.seen.lock().unwrap().iter() {
        assert!(!r.messages[1].content.contains("Harry"), "{}", r.messages[1].content);
        assert!(r.messages[1].content.contains("<the participant>"));
    }
}

#[tokio::test]
async fn sixteen_p_er_reports_the_first_pole_share() {
    let catalog = Catalog::bundled().unwrap();
    let p16 = catalog.scale("16Personalities").unwrap();
    let c = catalog.character("zhongli").unwrap();
    let judge = scripted(er_reply);
    let masker = Masker::new(&c.aliases, &c.experimenter);
    let exchanges: Vec<Exchange> = p16
        .items_of(0)
        .map(|i| Exchange {
            item_id: i.id,
            question: i.question.zh.clone(),
            response: "嗯。".into(),
        })
        .collect();
    let r = expert::rate(
        at5(&judge),
        p16,
        0,
        c.language,
        &masker,
        &exchanges,
        Grouping::Batch,
        FIRST,
    )
    .await;
    let expected: f64 = r.batches.iter().map(|b| 10.0 * b.item_ids.len() as f64).sum::<f64>() / r.batches.len() as f64;
    assert!((r.score.unwrap() - expected).abs() < 1e-9);
}

#[tokio::test]
async fn bad_replies_are_re_asked_and_exhaustion_is_a_visible_failure() {
    let catalog = Catalog::bundled().unwrap();
    let gse = catalog.scale("GSE").unwrap();
    let c = catalog.character("hermione").unwrap();
    let masker = Masker::new(&c.aliases, &c.experimenter);
    let exchanges: Vec<Exchange> = gse
        .items_of(0)
        .take(3)
        .map(|i| Exchange {
            item_id: i.id,
            question: i.question.en.clone(),
            response: "Yes.".into(),
        })
        .collect();
    // First attempt out of range, second fine.
    let judge = scripted(|r: &ChatRequest| {
        if r.messages.len() == 2 {
            r#"{"analysis": "a", "result": 9}"#.into()
        } else {
            r#"{"analysis": "b", "result": 3}"#.into()
        }
    });
    let r = expert::rate(
        at5(&judge),
        gse,
        0,
        c.language,
        &masker,
        &exchanges,
        Grouping::Batch,
        FIRST,
    )
    .await;
    assert_eq!(r.score, Some(3.0));
    let attempts = &r.batches[0].attempts;
    assert_eq!(attempts.len(), 2);
    assert_eq!((attempts[0].temperature, attempts[1].temperature), (0.0, 0.2));
    assert!(attempts[0].error.as_deref().unwrap().contains("outside [1, 4]"));
    let retry = judge.seen.lock().unwrap()[1].clone();
    assert_eq!(
        retry.messages.last().unwrap().content,
        format!(
            "That reply cannot be used: {}. Reply again with the JSON only, exactly in the requested form.",
            attempts[0].error.as_deref().unwrap()
        ),
        "the re-ask says what was wrong, in the wording sessions were recorded with"
    );
    let asked = judge.seen.lock().unwrap()[0].messages[1].content.clone();
    assert!(
        asked.starts_with("The conversation:\n\n1. <the experimenter>: 「") && asked.ends_with("」"),
        "{asked}"
    );
    // Never usable: no score, five recorded attempts.
    let judge = scripted(|_: &ChatRequest| "I cannot rate this.".into());
    let r = expert::rate(
        at5(&judge),
        gse,
        0,
        c.language,
        &masker,
        &exchanges,
        Grouping::Batch,
        FIRST,
    )
    .await;
    assert_eq!(r.score, None);
    assert_eq!(r.batches[0].attempts.len(), 5);
}

/// OC option for an item: x for every 11th, else 1 + id mod range size.
fn oc_option(id: u32, max: i32, min: i32) -> Value {
    if id.is_multiple_of(11) {
        json!("x")
    } else {
        json!(min + (id as i32) % (max - min + 1))
    }
}

#[tokio::test]
async fn oc_and_doc_scores_follow_keying_and_refusals() {
    let catalog = Catalog::bundled().unwrap();
    for scale_id in ["BFI", "16Personalities", "EPQ-R", "LOT-R", "CABIN"] {
        let scale = catalog.scale(scale_id).unwrap();
        let c = catalog.character("james-bond").unwrap();
        let masker = Masker::new(&c.aliases, &c.experimenter);
        let (min, max) = (scale.range.min, scale.range.max);
        let judge = scripted(move |r: &ChatRequest| {
            let props = r.schema.as_ref().unwrap().schema["properties"]
                .as_object()
                .unwrap()
                .clone();
            let reply: serde_json::Map<String, Value> = props
                .keys()
                .map(|k| (k.clone(), oc_option(k.parse().unwrap(), max, min)))
                .collect();
            Value::Object(reply).to_string()
        });
        let exchanges: Vec<Exchange> = scale
            .scored_items()
            .map(|i| Exchange {
                item_id: i.id,
                question: i.question.en.clone(),
                response: "M said so. The Mission first.".into(),
            })
            .collect();
        let (oc, calls) = convert::convert(
            at5(&judge),
            scale,
            convert::oc_groups(
                Templates::bundled(),
                scale,
                Catalog::bundled().unwrap().character("james-bond-en").unwrap(),
                &exchanges,
                convert::MAX_ITEMS_PER_CALL,
            ),
            &|ids| panic!("items {ids:?} asked again though every option was usable"),
            Conversion::Statement,
            0,
        )
        .await;
        assert_eq!(
            calls.len(),
            exchanges.len().div_ceil(60),
            "{scale_id}: at most 60 items per call"
        );
        let (doc, calls) = convert::convert(
            at5(&judge),
            scale,
            convert::doc_groups(
                Templates::bundled(),
                scale,
                &masker,
                &exchanges,
                convert::MAX_ITEMS_PER_CALL,
            ),
            &|ids| panic!("items {ids:?} asked again though every option was usable"),
            Conversion::Dimension,
            0,
        )
        .await;
        assert_eq!(calls.len(), scale.dimensions.len());
        for (items, conversion) in [(&oc, Conversion::Statement), (&doc, Conversion::Dimension)] {
            for it in items.iter() {
                let item = scale.item(it.item_id).unwrap();
                let raw = oc_option(it.item_id, max, min);
                let expected = match raw.as_i64() {
                    None => (scale.range.midpoint(), true),
                    Some(v) if conversion == Conversion::Statement && !item.keying().unwrap().is_positive() => {
                        ((min + max) as f64 - v as f64, false)
                    }
                    Some(v) => (v as f64, false),
                };
                assert_eq!(
                    (it.score.unwrap(), it.refused),
                    expected,
                    "{scale_id} item {} {conversion:?}",
                    it.item_id
                );
                assert_eq!(it.option == Some(ItemOption::Refused), expected.1);
            }
            let dims = convert::dimension_scores(scale, items);
            for (d, score) in dims.iter().enumerate() {
                let mine: Vec<f64> = items
                    .iter()
                    .filter(|i| scale.item(i.item_id).unwrap().dimension() == Some(d))
                    .map(|i| i.score.unwrap())
                    .collect();
                let mean = mine.iter().sum::<f64>() / mine.len() as f64;
                let want = if scale.is_pole_percent() {
                    (mean - 1.0) / 6.0 * 100.0
                } else {
                    mean
                };
                assert!((score.unwrap().value - want).abs() < 1e-9, "{scale_id} dim {d}");
            }
        }
        // d-OC prompts are anonymized on word boundaries: M is masked, Mission is not.
        let seen = judge.seen.lock().unwrap();
        let doc_prompt = &seen.last().unwrap().messages[1].content;
        assert!(
            doc_prompt.contains("<the experimenter> said so. The Mission first."),
            "{doc_prompt}"
        );
    }
}

#[test]
fn interview_queries_speak_the_characters_language() {
    let catalog = Catalog::bundled().unwrap();
    let bfi = catalog.scale("BFI").unwrap();
    let zhongli = catalog.character("zhongli").unwrap();
    let item = bfi.item(1).unwrap();
    let open = interview::query(Templates::bundled(), zhongli, bfi, item, QueryStyle::Open);
    assert_eq!(open, format!("旅行者:「{}」", item.question.zh));
    let sr = interview::query(Templates::bundled(), zhongli, bfi, item, QueryStyle::Sr);
    assert!(
        sr.contains(&item.statement.zh) && sr.contains("请只回答一个数字"),
        "{sr}"
    );
    let hermione = catalog.character("hermione").unwrap();
    let cot = interview::query(Templates::bundled(), hermione, bfi, item, QueryStyle::SrCot);
    assert!(cot.contains("Is talkative.") && cot.contains("last line"), "{cot}");
}

#[test]
fn the_bundled_templates_keep_the_wording_sessions_were_recorded_with() {
    let catalog = Catalog::bundled().unwrap();
    let t = Templates::bundled();
    let bfi = catalog.scale("BFI").unwrap();
    let item = bfi.item(1).unwrap();
    let cases = [
        (
            "hermione-en",
            "Do you see yourself as someone who fits this description: \"Is talkative.\" How much do you agree or disagree that it describes you?\n\
             Options: 1 = Disagree strongly; 2 = Disagree a little; 3 = Neither agree nor disagree; 4 = Agree a little; 5 = Agree strongly.\n",
            "Answer with the number only.",
            "First explain your reasons in a few sentences, then give the number alone on the last line.",
            "Harry:「When you're among friends or colleagues, how much of the conversation tends to come from you?」",
        ),
        (
            "zhongli-zh",
            "你是否认为自己是这样的人：“话多，爱说话。”你在多大程度上同意这句话描述的是你？\n\
             选项：1 = 非常不同意；2 = 有点不同意；3 = 说不上同意或不同意；4 = 有点同意；5 = 非常同意。\n",
            "请只回答一个数字。",
            "请先用几句话说明理由，最后一行只写一个数字。",
            "旅行者:「跟一群人聊天时，你一般会说多少话？通常是你说得多还是听得多？」",
        ),
    ];
    for (id, question, sr, cot, open) in cases {
        let c = catalog.character(id).unwrap();
        assert_eq!(
            interview::query(t, c, bfi, item, QueryStyle::Sr),
            format!("{question}{sr}")
        );
        assert_eq!(
            interview::query(t, c, bfi, item, QueryStyle::SrCot),
            format!("{question}{cot}")
        );
        assert_eq!(interview::query(t, c, bfi, item, QueryStyle::Open), open);
    }
}

/// The judge policy the original procedure uses: 5 attempts, the first at temperature 0.
fn at5(model: &dyn incharacter::llm::ChatModel) -> incharacter::method::judge::Judge<'_> {
    incharacter::method::judge::Judge {
        model,
        attempts: 5,
        temperature: 0.0,
        templates: Templates::bundled(),
        expected: false,
    }
}

/// A judge whose every token is one character and which, asked for rivals, is 75% sure of each
/// digit it writes and gives the rest to its neighbour (one lower, or one higher for 1).
struct Hesitant<F: Fn(&ChatRequest) -> String + Send + Sync>(Scripted<F>);

fn neighbour(d: u32) -> u32 {
    if d > 1 { d - 1 } else { d + 1 }
}

impl<F: Fn(&ChatRequest) -> String + Send + Sync> ChatModel for Hesitant<F> {
    fn stream(&self, request: ChatRequest) -> EventStream {
        let text = (self.0.reply)(&request);
        let asked = request.sampling.top_logprobs.is_some();
        self.0.seen.lock().unwrap().push(request);
        let choices = text
            .char_indices()
            .map(|(offset, c)| incharacter::llm::TokenChoice {
                offset,
                token: c.to_string(),
                top: match c.to_digit(10) {
                    Some(d) => vec![(c.to_string(), 0.75f32.ln()), (neighbour(d).to_string(), 0.25f32.ln())],
                    None => vec![(c.to_string(), 0.0)],
                },
            })
            .collect();
        let mut events = vec![ChatEvent::Token(text)];
        if asked {
            events.push(ChatEvent::Choices(choices));
        }
        events.push(ChatEvent::Done {
            finish_reason: None,
            cached: false,
        });
        Box::pin(stream::iter(events))
    }
    fn info(&self) -> ModelInfo {
        self.0.info()
    }
}

/// With expected scores, each written score is weighed by the probabilities of the options that
/// could have been written in its place: ER's ratings and OC's options (keyed as the written one),
/// refusals left as they are; without, the rivals are not even asked for.
#[tokio::test]
async fn expected_scores_weigh_each_written_option() {
    let catalog = Catalog::bundled().unwrap();
    let bfi = catalog.scale("BFI").unwrap();
    let hermione = catalog.character("hermione-en").unwrap();
    let masker = Masker::new(&hermione.aliases, &hermione.experimenter);
    let weighed = |w: f64| 0.75 * w + 0.25 * f64::from(neighbour(w as u32));
    let judge = Hesitant(scripted(er_reply));
    let exchanges: Vec<Exchange> = bfi
        .items_of(0)
        .map(|i| Exchange {
            item_id: i.id,
            question: i.question.en.clone(),
            response: "Honestly, Harry.".into(),
        })
        .collect();
    let mut expecting = at5(&judge);
    expecting.expected = true;
    let r = expert::rate(
        expecting,
        bfi,
        0,
        hermione.language,
        &masker,
        &exchanges,
        Grouping::Batch,
        FIRST,
    )
    .await;
    for b in &r.batches {
        let written = 1.0 + (b.item_ids.len() % 5) as f64;
        let w = b.weighed.as_ref().expect("every batch weighed");
        assert_eq!(w.written, written);
        assert!((b.score.unwrap() - weighed(written)).abs() < 1e-6, "{b:?}");
        assert_eq!(w.probabilities.len(), 2);
    }
    assert!(
        judge
            .0
            .seen
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.sampling.top_logprobs.is_some())
    );
    let plain = expert::rate(
        at5(&judge),
        bfi,
        0,
        hermione.language,
        &masker,
        &exchanges,
        Grouping::Batch,
        FIRST,
    )
    .await;
    assert!(plain.batches.iter().all(|b| b.weighed.is_none()));
    assert!(
        judge
            .0
            .seen
            .lock()
            .unwrap()
            .last()
            .unwrap()
            .sampling
            .top_logprobs
            .is_none()
    );

    let (min, max) = (bfi.range.min, bfi.range.max);
    let judge = Hesitant(scripted(move |r: &ChatRequest| {
        let props = r.schema.as_ref().unwrap().schema["properties"]
            .as_object()
            .unwrap()
            .clone();
        let reply: serde_json::Map<String, Value> = props
            .keys()
            .map(|k| (k.clone(), oc_option(k.parse().unwrap(), max, min)))
            .collect();
        Value::Object(reply).to_string()
    }));
    let mut expecting = at5(&judge);
    expecting.expected = true;
    let exchanges: Vec<Exchange> = bfi
        .scored_items()
        .map(|i| Exchange {
            item_id: i.id,
            question: i.question.en.clone(),
            response: "I suppose so.".into(),
        })
        .collect();
    let groups = convert::oc_groups(
        Templates::bundled(),
        bfi,
        Catalog::bundled().unwrap().character("hermione-en").unwrap(),
        &exchanges,
        60,
    );
    let (items, _) = convert::convert(expecting, bfi, groups, &|_| unreachable!(), Conversion::Statement, 0).await;
    for it in &items {
        match oc_option(it.item_id, max, min).as_i64() {
            None => assert!(it.refused && it.weighed.is_none(), "{it:?}"),
            Some(v) => {
                let mean = weighed(v as f64);
                let keyed = if bfi.item(it.item_id).unwrap().keying().unwrap().is_positive() {
                    mean
                } else {
                    f64::from(min + max) - mean
                };
                assert!((it.score.unwrap() - keyed).abs() < 1e-6, "{it:?}");
                assert_eq!(
                    it.option,
                    Some(ItemOption::Value(v as i32)),
                    "the written option is kept"
                );
            }
        }
    }
}
