//! Every request shape an interview run sends, rendered without sending it: the agent's interview
//! and self-report questions, and the judge's ER_batch, ER_all, OC, d-OC and self-report conversion
//! calls, each as the messages a model reads — with structured outputs on (the schema travels apart)
//! or off (the schema is described in the system message, as a server without structured outputs
//! gets it). `prompts check` prints them so a template set can be compared with another protocol
//! before anything is spent; the tests hold the bundled set to the requests it has always sent.

use crate::domain::character::Character;
use crate::domain::scale::Scale;
use crate::llm::{ChatMessage, ResponseSchema};
use crate::method::convert;
use crate::method::expert::{self, Exchange};
use crate::method::interview::{self, QueryStyle};
use crate::rpa::memories::Memories;
use crate::rpa::prompt::{self, RpaStyle};
use crate::templates::Templates;

use super::Done;

/// The kinds of request a run sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shape {
    Interview,
    SelfReport,
    SelfReportCot,
    ErBatch,
    ErAll,
    Oc,
    DOc,
    SrConversion,
    SrCotConversion,
}

impl Shape {
    pub const ALL: [Shape; 9] = [
        Shape::Interview,
        Shape::SelfReport,
        Shape::SelfReportCot,
        Shape::ErBatch,
        Shape::ErAll,
        Shape::Oc,
        Shape::DOc,
        Shape::SrConversion,
        Shape::SrCotConversion,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Shape::Interview => "interview",
            Shape::SelfReport => "self-report",
            Shape::SelfReportCot => "self-report-cot",
            Shape::ErBatch => "er-batch",
            Shape::ErAll => "er-all",
            Shape::Oc => "oc",
            Shape::DOc => "d-oc",
            Shape::SrConversion => "sr-conversion",
            Shape::SrCotConversion => "sr-cot-conversion",
        }
    }

    pub fn parse(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The answers a judge's shape reads.
    fn reads(self) -> QueryStyle {
        match self {
            Shape::SelfReport | Shape::SrConversion => QueryStyle::Sr,
            Shape::SelfReportCot | Shape::SrCotConversion => QueryStyle::SrCot,
            _ => QueryStyle::Open,
        }
    }
}

/// One request as a model reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub shape: Shape,
    /// Which one: the item, the dimension and batch, the call's items.
    pub label: String,
    pub messages: Vec<ChatMessage>,
    /// The reply's schema (judge requests).
    pub schema: Option<ResponseSchema>,
}

/// What the requests are rendered from.
pub struct Subject<'a> {
    pub templates: &'a Templates,
    pub scale: &'a Scale,
    pub character: &'a Character,
    pub style: RpaStyle,
    pub memories: Option<&'a Memories>,
    /// Items per conversion call.
    pub per_call: usize,
    /// The answers of each query style, in questionnaire order.
    pub answers: &'a dyn Fn(QueryStyle) -> Vec<Exchange>,
    /// The names a session recorded as masked for the character (its current ones are masked
    /// too), as its judge had them hidden.
    pub masked: Option<&'a super::Masked>,
}

impl Subject<'_> {
    /// Every request of `shape`, in the order a run sends them (repeat 0).
    pub fn render(&self, shape: Shape) -> Vec<Rendered> {
        let (t, s, c) = (self.templates, self.scale, self.character);
        let one = |label: String, messages: Vec<ChatMessage>, schema: Option<ResponseSchema>| Rendered {
            shape,
            label,
            messages,
            schema,
        };
        let mut masked = self.masked.cloned().unwrap_or_default();
        masked.add(c);
        let masker = masked.masker();
        let answers = (self.answers)(shape.reads());
        match shape {
            Shape::Interview | Shape::SelfReport | Shape::SelfReportCot => s
                .scored_items()
                .map(|item| {
                    let text = interview::query(t, c, s, item, shape.reads());
                    let question = item.question.get(c.language);
                    let assembled = prompt::assemble(t, c, self.style, self.memories, question, &text);
                    one(format!("item {}", item.id), assembled.messages, None)
                })
                .collect(),
            Shape::ErBatch | Shape::ErAll => {
                let mut out = Vec::new();
                for (d, dimension) in s.dimensions.iter().enumerate() {
                    let mine: Vec<&Exchange> = answers
                        .iter()
                        .filter(|e| s.item(e.item_id).and_then(|i| i.dimension()) == Some(d))
                        .collect();
                    let groups = match shape {
                        Shape::ErAll => vec![(0..mine.len()).collect()],
                        _ => expert::batches(mine.len()),
                    };
                    let count = groups.len();
                    for (b, group) in groups.into_iter().enumerate() {
                        let members: Vec<&Exchange> = group.iter().map(|&i| mine[i]).collect();
                        let ids: Vec<String> = members.iter().map(|e| e.item_id.to_string()).collect();
                        let messages = expert::messages(t, s, d, c.language, &masker, &members);
                        out.push(one(
                            format!("{} · call {} of {count} · items {}", dimension.name, b + 1, ids.join(", ")),
                            messages,
                            Some(expert::response_schema(t, s, d)),
                        ));
                    }
                }
                out
            }
            Shape::Oc | Shape::SrConversion | Shape::SrCotConversion | Shape::DOc => {
                let groups = match shape {
                    Shape::DOc => convert::doc_groups(t, s, &masker, &answers, self.per_call),
                    _ => convert::oc_groups(t, s, c, &answers, self.per_call),
                };
                let count = groups.len();
                groups
                    .into_iter()
                    .enumerate()
                    .map(|(i, (messages, ids))| {
                        let keys: Vec<String> = ids.iter().map(u32::to_string).collect();
                        one(
                            format!("call {} of {count} · items {}", i + 1, keys.join(", ")),
                            messages,
                            Some(convert::response_schema(t, &keys, s.range)),
                        )
                    })
                    .collect()
            }
        }
    }
}

/// The messages as a server without structured outputs reads them: the schema described in the system
/// message (the embedded model reads them so too, and is also held to the schema token by token).
pub fn unstructured(rendered: &Rendered) -> Vec<ChatMessage> {
    match &rendered.schema {
        Some(schema) => crate::llm::described(&rendered.messages, schema),
        None => rendered.messages.clone(),
    }
}

/// Answers for a scale that has none recorded: the item's question, and a placeholder answer that says
/// which item it answers (a bare option for the self-report, which a run would score without a call).
pub fn synthetic(scale: &Scale, character: &Character, style: QueryStyle) -> Vec<Exchange> {
    scale
        .scored_items()
        .map(|item| Exchange {
            item_id: item.id,
            question: match style {
                QueryStyle::Open => item.question.get(character.language).clone(),
                _ => item.statement.get(character.language).clone(),
            },
            response: format!("<{}'s answer to item {}>", character.name, item.id),
        })
        .collect()
}

/// The answers a journal holds for `character` on `scale` in `style` (repeat 0), or [`synthetic`] ones
/// when it holds none.
pub fn answers_in(done: &Done, scale: &Scale, character: &Character, style: QueryStyle) -> Vec<Exchange> {
    let recorded: Vec<Exchange> = done
        .answers
        .iter()
        .filter(|((c, s, repeat, st, _), _)| *c == character.id && *s == scale.id && *repeat == 0 && *st == style)
        .map(|(_, e)| e.clone())
        .collect();
    if recorded.is_empty() {
        synthetic(scale, character, style)
    } else {
        recorded
    }
}

/// `rendered` as `prompts check` prints it: a heading, each message under its role, the schema.
pub fn print(rendered: &Rendered, messages: &[ChatMessage]) -> String {
    let mut out = format!("=== {} · {}\n", rendered.shape.name(), rendered.label);
    for m in messages {
        let role = m.role.name();
        out.push_str(&format!("--- {role}\n{}\n", m.content));
    }
    out
}

#[cfg(test)]
mod tests;
