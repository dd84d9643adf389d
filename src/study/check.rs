//! A provider's verdict (`providers check`, the setup screen) on the method's real requests: an interview question as the role-playing
//! agent is asked it, and an expert rating, an option conversion and a 16Personalities rating as the
//! judge is asked them (the real prompts and schemas, tiny inputs). Each shape runs on its own fresh
//! adaptation state, so it says whether *it* needed adapting. Before them, [`probe`]: one tiny request
//! that says whether the provider answers at all, how fast, and whether its structured output is JSON.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;
use serde_json::json;

use crate::catalog::Catalog;
use crate::domain::scale::Scale;
use crate::llm::adapt::Adaptation;
use crate::llm::client::Shared;
use crate::llm::{ChatEvent, ChatMessage, ChatModel, ChatRequest, LlmError, ResponseSchema};
use crate::method::anonymize::Masker;
use crate::method::convert::{self, Conversion};
use crate::method::expert::{self, Exchange, Grouping};
use crate::method::interview::{self, AnswerSampling, QueryStyle};
use crate::method::judge::Judge;
use crate::rpa::prompt::RpaStyle;
use crate::templates::Templates;

#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub shape: &'static str,
    /// `works`, `adapted` (it works once adapted; `detail` says how) or `fails` (the provider's words).
    pub status: &'static str,
    pub detail: Option<String>,
}

/// How a provider answered one tiny request asking for `{"ok": true}` under a strict schema.
#[derive(Debug)]
pub struct Probe {
    /// Time to the first token, when one came.
    pub first: Option<Duration>,
    pub total: Duration,
    pub reply: Result<String, LlmError>,
}

impl Probe {
    /// Whether the reply is the JSON object asked for (`None`: no reply).
    pub fn valid_json(&self) -> Option<bool> {
        self.reply.as_ref().ok().map(|text| {
            serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.get("ok").is_some_and(|b| b.is_boolean()))
        })
    }
}

/// Sends the tiny request: reachable at all, how fast, and whether structured output works.
pub async fn probe(model: &dyn ChatModel) -> Probe {
    let schema = json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": false,
    });
    let mut request = ChatRequest::new(vec![ChatMessage::user("Reply with the JSON object {\"ok\": true}.")]);
    request.sampling.temperature = Some(0.0);
    request.sampling.max_tokens = Some(20);
    request.schema = Some(ResponseSchema::new("check", schema));
    request.meta.purpose = "providers check".into();
    let started = Instant::now();
    let mut events = model.stream(request);
    let mut first = None;
    let mut text = String::new();
    let reply = loop {
        match events.next().await {
            Some(ChatEvent::Token(t)) => {
                first.get_or_insert_with(|| started.elapsed());
                text.push_str(&t);
            }
            Some(ChatEvent::Retry { .. }) => text.clear(),
            Some(ChatEvent::Done { .. }) => break Ok(text),
            Some(ChatEvent::Error(e)) => break Err(e),
            Some(ChatEvent::Usage(_) | ChatEvent::Choices(_)) => {}
            None => break Err(LlmError::Transport("no reply".into())),
        }
    };
    Probe {
        first,
        total: started.elapsed(),
        reply,
    }
}

/// Connects a fresh client of the provider (its own adaptation state) for one shape.
pub type Fresh<'a> = dyn Fn() -> anyhow::Result<(Arc<dyn ChatModel>, Shared)> + Send + Sync + 'a;

fn verdict(shape: &'static str, adapted: Vec<Adaptation>, failure: Option<String>) -> Verdict {
    let how = adapted.iter().map(|a| a.kind.describe()).collect::<Vec<_>>().join("; ");
    match failure {
        Some(why) => Verdict {
            shape,
            status: "fails",
            detail: Some(if how.is_empty() {
                why
            } else {
                format!("{why} (after adapting: {how})")
            }),
        },
        None if !adapted.is_empty() => Verdict {
            shape,
            status: "adapted",
            detail: Some(how),
        },
        None => Verdict {
            shape,
            status: "works",
            detail: None,
        },
    }
}

/// Three answers to the first items of a scale's first dimension.
fn exchanges(scale: &Scale) -> Vec<Exchange> {
    scale
        .scored_items()
        .filter(|i| i.dimension() == Some(0))
        .take(3)
        .map(|i| Exchange {
            item_id: i.id,
            question: i.question.en.clone(),
            response: "I suppose I do, when the subject interests me.".into(),
        })
        .collect()
}

/// The judge as a check asks it: two attempts (a re-ask shows the reply can be repaired), at 0.
fn checking<'a>(model: &'a dyn ChatModel, templates: &'a Templates) -> Judge<'a> {
    Judge {
        model,
        attempts: 2,
        temperature: 0.0,
        templates,
        expected: false,
    }
}

/// The last problem of a judge call's attempts.
fn last_problem(attempts: &[crate::method::judge::Attempt]) -> String {
    attempts
        .iter()
        .rev()
        .find_map(|a| a.error.clone())
        .unwrap_or_else(|| "no usable reply".into())
}

/// The verdict on a shape the time budget left no room to check.
fn unchecked(shape: &'static str) -> Verdict {
    Verdict {
        shape,
        status: "not checked",
        detail: Some("the check's time budget ran out".into()),
    }
}

/// Runs `shape` until `deadline`; past it, the shape is reported not checked.
async fn within(
    deadline: tokio::time::Instant,
    shape: &'static str,
    say: &(dyn Fn(String) + Sync),
    work: impl std::future::Future<Output = anyhow::Result<Verdict>>,
) -> anyhow::Result<Verdict> {
    say(format!("  {shape} …"));
    let started = Instant::now();
    let verdict = match tokio::time::timeout_at(deadline, work).await {
        Ok(v) => v?,
        Err(_) => unchecked(shape),
    };
    say(format!(
        "  {shape}: {} ({:.1} s)",
        verdict.status,
        started.elapsed().as_secs_f64()
    ));
    Ok(verdict)
}

/// The method's requests, each on a fresh client, each given what is left of the time until
/// `deadline`; `say` hears a line as each starts and ends.
pub async fn check(
    fresh: &Fresh<'_>,
    catalog: &Catalog,
    deadline: tokio::time::Instant,
    say: &(dyn Fn(String) + Sync),
) -> anyhow::Result<Vec<Verdict>> {
    let templates = Templates::bundled();
    let (Some(c), Some(bfi), Some(p16)) = (
        catalog.character("hermione-en"),
        catalog.scale("BFI"),
        catalog.scale("16Personalities"),
    ) else {
        anyhow::bail!("the bundled catalog lacks hermione-en, BFI or 16Personalities");
    };
    let masker = Masker::new(&c.aliases, &c.experimenter);
    let mut out = Vec::new();

    let item = bfi
        .scored_items()
        .next()
        .ok_or_else(|| anyhow::anyhow!("BFI has no items"))?;
    let interview = async {
        let (model, shared) = fresh()?;
        let asked = interview::ask(
            model.as_ref(),
            templates,
            c,
            bfi,
            item,
            QueryStyle::Open,
            RpaStyle::Description,
            None,
            0,
            0,
            AnswerSampling::default(),
        )
        .await;
        let failure = asked.err().map(|e: LlmError| e.to_string());
        Ok(verdict("interview", shared.adapter.all(), failure))
    };
    out.push(within(deadline, "interview", say, interview).await?);

    for (shape, scale) in [("expert_rating", bfi), ("16p_rating", p16)] {
        let rating = async {
            let (model, shared) = fresh()?;
            let judge = checking(model.as_ref(), templates);
            let ex = exchanges(scale);
            let first = (0, expert::Order::Original);
            let r = expert::rate(judge, scale, 0, c.language, &masker, &ex, Grouping::All, first).await;
            let failure = r.score.is_none().then(|| {
                r.batches
                    .first()
                    .map_or("no reply".into(), |b| last_problem(&b.attempts))
            });
            Ok(verdict(shape, shared.adapter.all(), failure))
        };
        out.push(within(deadline, shape, say, rating).await?);
    }

    let conversion = async {
        let (model, shared) = fresh()?;
        let judge = checking(model.as_ref(), templates);
        let ex = exchanges(bfi);
        let groups = convert::oc_groups(templates, bfi, c, &ex, convert::MAX_ITEMS_PER_CALL);
        let some = |ids: &[u32]| {
            let some: Vec<&Exchange> = ex.iter().filter(|e| ids.contains(&e.item_id)).collect();
            convert::oc_messages(templates, bfi, c, &some)
        };
        let (items, calls) = convert::convert(judge, bfi, groups, &some, Conversion::Statement, 0).await;
        let failure = items.iter().any(|i| i.option.is_none()).then(|| {
            calls
                .first()
                .map_or("no reply".into(), |call| last_problem(&call.attempts))
        });
        Ok(verdict("option_conversion", shared.adapter.all(), failure))
    };
    out.push(within(deadline, "option_conversion", say, conversion).await?);
    Ok(out)
}
