//! Option conversion: the judge turns open answers into questionnaire options. OC converts against each
//! item's statement (all items in one call, at most 60 per call; reverse keying applies when scoring);
//! d-OC converts one dimension at a time against options named by the dimension's poles (the option is
//! already the item's score in the dimension's direction). Self-report answers that are not a bare
//! number are converted like OC. A judge with a small context gets fewer items per call
//! ([`items_per_call`]); the run's plan records the number, so a session always regroups the same way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::anonymize::{EXPERIMENTER, Masker, PARTICIPANT};
use super::expert::Exchange;
use super::judge::{Attempt, Judge};
use super::judge_json;
use super::texts;
use super::weigh::{self, Weighed};
use crate::domain::character::Character;
use crate::domain::diagnostic::Diagnostic;
use crate::domain::scale::{Scale, ScoreRange};
use crate::domain::scoring::{ItemOption, ItemScore, Orientation, item_score};
use crate::llm::{ChatMessage, ChatRequest, ResponseSchema, Role};
use crate::templates::{Template, Templates};

/// Items per OC call.
pub const MAX_ITEMS_PER_CALL: usize = 60;

/// Context an item can take in a conversion call besides its answer: the statement, the question (a
/// Chinese question costs a byte-level tokenizer 100+ tokens), the JSON around them and the item's
/// entry in the reply.
const ITEM_TOKENS: usize = 200;
/// Context the conversion prompt takes besides the items (instructions, options, schema).
const PROMPT_TOKENS: usize = 1000;

/// Items per conversion call for a judge whose context holds `context` tokens: [`MAX_ITEMS_PER_CALL`],
/// or fewer when that many answers at the interview's token cap would not fit.
pub fn items_per_call(context: Option<usize>, answer_tokens: u32) -> usize {
    let Some(context) = context else {
        return MAX_ITEMS_PER_CALL;
    };
    let per_item = answer_tokens as usize + ITEM_TOKENS;
    (context.saturating_sub(PROMPT_TOKENS) / per_item).clamp(1, MAX_ITEMS_PER_CALL)
}

/// `items` in order, in as few groups of at most `max` as possible, their sizes differing by at most
/// one (44 items at most 14 a call: 11, 11, 11, 11, not 14, 14, 14, 2).
fn balanced<T>(items: &[T], max: usize) -> Vec<&[T]> {
    let groups = items.len().div_ceil(max.max(1));
    let mut out = Vec::with_capacity(groups);
    let mut rest = items;
    for g in 0..groups {
        let size = rest.len().div_ceil(groups - g);
        let (head, tail) = rest.split_at(size);
        out.push(head);
        rest = tail;
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Conversion {
    /// OC: agreement with each item's statement.
    Statement,
    /// d-OC: position on the dimension.
    Dimension,
}

/// One item's converted option and the score it gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvertedItem {
    pub item_id: u32,
    /// `None` when the judge never gave a usable reply for this item's call.
    pub option: Option<ItemOption>,
    pub score: Option<f64>,
    pub refused: bool,
    /// With expected scores: how the written option was weighed (`score` is then the expected item
    /// score, keyed as the written one would be).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighed: Option<Weighed>,
    /// Why the item has no option: the last problem of the last call that held it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversionCall {
    pub item_ids: Vec<u32>,
    pub attempts: Vec<Attempt>,
    /// The call was too long for the judge's context and its items went in smaller calls instead
    /// (a departure from the method, recorded with the assessment).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub split: bool,
    /// No reply to the call could be used (every attempt rejected): its items were asked again alone,
    /// so that an answer the judge cannot convert fails alone ([`fitted`] says so).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub itemized: bool,
}

impl ConversionCall {
    /// The call's items were asked again in other calls (smaller ones for the context, or alone).
    pub fn replaced(&self) -> bool {
        self.split || self.itemized
    }
}

/// Why a conversion call gave no option at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failed {
    /// Too long for the judge's context.
    Context,
    /// Every reply was rejected.
    Rejected,
    /// The request itself failed (the provider's error).
    Request,
}

/// The schema: one property per item id, each a whole option in range or "x".
pub fn schema(ids: &[String], range: ScoreRange) -> Value {
    let option = json!({"anyOf": [{"type": "integer", "minimum": range.min, "maximum": range.max}, {"enum": ["x"]}]});
    let properties: serde_json::Map<String, Value> = ids.iter().map(|id| (id.clone(), option.clone())).collect();
    json!({"type": "object", "properties": properties, "required": ids, "additionalProperties": false})
}

/// The reply format of a conversion call over the items `ids`.
pub fn response_schema(templates: &Templates, ids: &[String], range: ScoreRange) -> ResponseSchema {
    let schema = schema(ids, range);
    ResponseSchema {
        instruction: templates.schema_instruction(&schema),
        ..ResponseSchema::new("option_conversion", schema)
    }
}

/// The scale's options (English) as the OC prompt lists them.
fn option_list(templates: &Templates, scale: &Scale) -> String {
    templates.join(&scale.options.en, Template::OcOption, Template::OcOptionSeparator, |i, label| {
        vec![("value", (scale.range.min + i as i32).to_string()), ("label", label.clone())]
    })
}

fn example(ids: &[String], range: ScoreRange) -> String {
    let sample: serde_json::Map<String, Value> = ids
        .iter()
        .take(2)
        .enumerate()
        .map(|(i, id)| (id.clone(), if i == 0 { json!(range.max) } else { json!("x") }))
        .collect();
    Value::Object(sample).to_string()
}

/// What the `option_conversion` template is filled with, for the items `ids`.
fn oc_values(templates: &Templates, scale: &Scale, character: &Character, ids: &[String]) -> texts::Values {
    let mut values = texts::range(scale);
    values.extend(texts::questionnaire(scale, &character.name, character.language));
    values.extend([
        ("character", character.name.clone()),
        ("character.alias", character.first_alias().to_string()),
        ("options", option_list(templates, scale)),
        ("example", example(ids, scale.range)),
    ]);
    values
}

/// OC messages for some items (the `option_conversion` template): the samples go as a JSON object
/// keyed by item id (`oc_samples`, each item by `oc_sample`).
pub fn oc_messages(templates: &Templates, scale: &Scale, character: &Character, exchanges: &[&Exchange]) -> Vec<ChatMessage> {
    let ids: Vec<String> = exchanges.iter().map(|e| e.item_id.to_string()).collect();
    let alias = character.first_alias().to_string();
    let values = oc_values(templates, scale, character, &ids);
    let system = templates.render(Template::OptionConversion, &texts::pairs(&values));
    let samples = templates.join(exchanges, Template::OcSample, Template::OcSampleSeparator, |_, e| {
        vec![
            ("id", e.item_id.to_string()),
            ("statement", scale.item(e.item_id).map_or(String::new(), |i| i.statement.en.clone())),
            ("question", e.question.clone()),
            ("answer", e.response.clone()),
            ("character", character.name.clone()),
            ("character.alias", alias.clone()),
        ]
    });
    vec![
        ChatMessage::system(system),
        ChatMessage::user(templates.render(Template::OcSamples, &[("samples", &samples)])),
    ]
}

/// The label of option `v` on dimension `d`: the scale's own wording for the dimension, or the
/// `doc_label_*` templates on its end words.
fn doc_label(templates: &Templates, scale: &Scale, d: usize, v: i32) -> String {
    let dim = &scale.dimensions[d];
    let (min, max, mid) = (scale.range.min, scale.range.max, scale.range.midpoint());
    if let Some(label) = dim.option_labels.as_ref().and_then(|l| l.get(usize::try_from(v - min).ok()?)) {
        return label.clone();
    }
    let (low, high) = ([("pole", dim.low.en.as_str())], [("pole", dim.high.en.as_str())]);
    if v == min {
        templates.render(Template::DocLabelEnd, &low)
    } else if v == max {
        templates.render(Template::DocLabelEnd, &high)
    } else if f64::from(v) == mid {
        templates.render(
            Template::DocLabelMiddle,
            &[("dimension.low", &dim.low.en), ("dimension.high", &dim.high.en)],
        )
    } else {
        // A side option's grade: `doc_label_side`'s line k holds the labels of a side with k options,
        // from the end inward, apart by " | " (16Personalities' 1–7: "moderately", then "somewhat";
        // DTDD's 1–9: three). A side longer than the lines reuses the last line, its last label after.
        let (pole, from_end) = if f64::from(v) < mid { (low, v - min - 1) } else { (high, max - v - 1) };
        let side = (min + 1..=max - 1).filter(|&o| f64::from(o) < mid).count().max(1);
        let text = templates.render(Template::DocLabelSide, &pole);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let Some(line) = lines.get(side - 1).or(lines.last()) else {
            return text;
        };
        let labels: Vec<&str> = line.split(" | ").map(str::trim).collect();
        let at = usize::try_from(from_end).unwrap_or(0).min(labels.len() - 1);
        labels[at].to_string()
    }
}

/// What the `dimension_conversion` template is filled with, for dimension `dimension`'s items `ids`.
fn doc_values(templates: &Templates, scale: &Scale, dimension: usize, ids: &[String]) -> texts::Values {
    let points: Vec<i32> = (scale.range.min..=scale.range.max).collect();
    let options = templates.join(&points, Template::DocOption, Template::DocOptionSeparator, |_, v| {
        vec![("value", v.to_string()), ("label", doc_label(templates, scale, dimension, *v))]
    });
    let mut values = texts::range(scale);
    values.extend(texts::dimension(scale, dimension, PARTICIPANT));
    values.extend([
        ("scale_name", scale.name.clone()),
        ("scale_id", scale.id.clone()),
        ("participant", PARTICIPANT.to_string()),
        ("experimenter", EXPERIMENTER.to_string()),
        ("options", options),
        ("example", example(ids, scale.range)),
    ]);
    values
}

/// Checks, before anything is sent, that the conversion templates give the judge `scale`'s options
/// (OC with `oc`, each dimension's with `doc`): a template may read them from a text of the scale
/// file that this scale lacks (see [`Templates::filled`]).
pub fn templates_fill(
    templates: &Templates,
    scale: &Scale,
    character: &Character,
    oc: bool,
    doc: bool,
) -> Result<(), Diagnostic> {
    let ids: Vec<String> = scale.items.iter().take(2).map(|i| i.id.to_string()).collect();
    if oc {
        let values = oc_values(templates, scale, character, &ids);
        let whose = format!("scale {}", scale.id);
        templates.filled(Template::OptionConversion, &texts::pairs(&values), &whose)?;
    }
    if doc {
        for (d, dim) in scale.dimensions.iter().enumerate() {
            let values = doc_values(templates, scale, d, &ids);
            let whose = format!("dimension {} of scale {}", dim.name, scale.id);
            templates.filled(Template::DimensionConversion, &texts::pairs(&values), &whose)?;
        }
    }
    Ok(())
}

/// d-OC messages for one dimension's items (the `dimension_conversion` template; anonymized; the
/// samples by `doc_samples` and `doc_sample`).
pub fn doc_messages(
    templates: &Templates,
    scale: &Scale,
    dimension: usize,
    masker: &Masker,
    exchanges: &[&Exchange],
) -> Vec<ChatMessage> {
    let ids: Vec<String> = exchanges.iter().map(|e| e.item_id.to_string()).collect();
    let values = doc_values(templates, scale, dimension, &ids);
    let system = templates.render(Template::DimensionConversion, &texts::pairs(&values));
    let samples = templates.join(exchanges, Template::DocSample, Template::DocSampleSeparator, |_, e| {
        vec![
            ("id", e.item_id.to_string()),
            ("statement", scale.item(e.item_id).map_or(String::new(), |i| i.statement.en.clone())),
            ("question", masker.mask(&e.question)),
            ("answer", masker.mask(&e.response)),
            ("experimenter", EXPERIMENTER.to_string()),
            ("participant", PARTICIPANT.to_string()),
        ]
    });
    vec![
        ChatMessage::system(system),
        ChatMessage::user(templates.render(Template::DocSamples, &[("samples", &samples)])),
    ]
}

/// Converts exchanges with one judge call per group, scoring each item. The usable options of a reply
/// are kept; an item whose option is not usable is asked again alone, in the same bounded policy, and
/// is left without an option if that fails too. A call too long for the judge's context is split in
/// two halves, each asked in its own call (and split again if need be); the refused call is kept,
/// marked `split`. `subset` builds the messages for some of a group's items.
pub async fn convert(
    judge: Judge<'_>,
    scale: &Scale,
    groups: Vec<(Vec<ChatMessage>, Vec<u32>)>,
    subset: &(dyn Fn(&[u32]) -> Vec<ChatMessage> + Sync),
    conversion: Conversion,
    repeat: u32,
) -> (Vec<ConvertedItem>, Vec<ConversionCall>) {
    let converter = Converter {
        judge,
        scale,
        subset,
        conversion,
        repeat,
    };
    // Groups are independent: asked together (the client's limits pace them), kept in group order.
    let asks = groups.into_iter().map(|(messages, ids)| async move {
        let (mut options, retry, mut calls) = converter.fitted(messages, ids).await;
        let again = retry.iter().map(|&id| converter.ask(subset(&[id]), vec![id], true));
        for (alone, _, call, _) in futures_util::future::join_all(again).await {
            options.extend(alone);
            calls.push(call);
        }
        (calls, options)
    });
    let mut items = Vec::new();
    let mut all_calls = Vec::new();
    for (calls, options) in futures_util::future::join_all(asks).await {
        for id in &calls[0].item_ids {
            let (option, weighed) = match options.get(id) {
                Some((o, w)) => (Some(*o), w.clone()),
                None => (None, None),
            };
            let scored = option.and_then(|o| score(scale, *id, o, conversion));
            // The expected item score: each option's keyed score, weighed.
            let expected = weighed.as_ref().and_then(|w| {
                w.probabilities.iter().try_fold(0.0, |sum, (v, p)| {
                    Some(sum + p * score(scale, *id, ItemOption::Value(*v), conversion)?.value)
                })
            });
            items.push(ConvertedItem {
                item_id: *id,
                option,
                score: expected.or(scored.map(|s| s.value)),
                refused: scored.is_some_and(|s| s.refused),
                weighed: weighed.filter(|_| expected.is_some()),
                // The last problem of the last call that held it (its own, when it was asked alone).
                error: option
                    .is_none()
                    .then(|| {
                        calls
                            .iter()
                            .rev()
                            .filter(|c| c.item_ids.contains(id))
                            .find_map(|c| c.attempts.iter().rev().find_map(|a| a.error.clone()))
                    })
                    .flatten(),
            });
        }
        all_calls.extend(calls);
    }
    (items, all_calls)
}

/// An item's usable option, and how it was weighed when scores are expected ones.
type Usable = (ItemOption, Option<Weighed>);

/// A call's usable options, the items to ask again alone, and the calls made.
type Asked = (BTreeMap<u32, Usable>, Vec<u32>, Vec<ConversionCall>);

/// What every conversion call of one assessment is asked with.
#[derive(Clone, Copy)]
struct Converter<'a> {
    judge: Judge<'a>,
    scale: &'a Scale,
    subset: &'a (dyn Fn(&[u32]) -> Vec<ChatMessage> + Sync),
    conversion: Conversion,
    repeat: u32,
}

impl<'a> Converter<'a> {
    /// Asks one group; a call too long for the context is split in halves (recursively), and one
    /// whose replies were all rejected is asked item by item ([`Converter::narrowed`]).
    fn fitted(
        self,
        messages: Vec<ChatMessage>,
        ids: Vec<u32>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Asked> + Send + 'a>> {
        Box::pin(async move {
            let (options, retry, mut call, failed) = self.ask(messages, ids.clone(), false).await;
            match failed {
                Some(Failed::Context) if ids.len() >= 2 => {
                    call.split = true;
                    let (a, b) = ids.split_at(ids.len().div_ceil(2));
                    let (first, second) = futures_util::future::join(
                        self.fitted((self.subset)(a), a.to_vec()),
                        self.fitted((self.subset)(b), b.to_vec()),
                    )
                    .await;
                    let mut calls = vec![call];
                    let (mut options, mut retry) = (BTreeMap::new(), Vec::new());
                    for (o, r, c) in [first, second] {
                        options.extend(o);
                        retry.extend(r);
                        calls.extend(c);
                    }
                    (options, retry, calls)
                }
                Some(Failed::Rejected) if ids.len() >= 2 => self.narrowed(call).await,
                _ => (options, retry, vec![call]),
            }
        })
    }

    /// A call none of whose replies could be used: its items are asked again alone, as an item with
    /// an unusable option is, so that an answer the judge cannot convert fails alone. The first and
    /// the last item go first; when neither converts alone either, the fault is the judge's and not
    /// an item's, and the rest are not asked (they stay without an option, and a resume asks them
    /// again): a judge that converts nothing costs three calls, not one per item.
    fn narrowed(self, mut call: ConversionCall) -> std::pin::Pin<Box<dyn std::future::Future<Output = Asked> + Send + 'a>> {
        Box::pin(async move {
            call.itemized = true;
            let ids = call.item_ids.clone();
            let (first, last) = (ids[0], ids[ids.len() - 1]);
            let (a, b) = futures_util::future::join(
                self.ask((self.subset)(&[first]), vec![first], true),
                self.ask((self.subset)(&[last]), vec![last], true),
            )
            .await;
            let judge_failed = a.3.is_some() && b.3.is_some();
            let mut calls = vec![call];
            let mut options = BTreeMap::new();
            for (o, _, c, _) in [a, b] {
                options.extend(o);
                calls.push(c);
            }
            let rest = match judge_failed {
                true => Vec::new(),
                false => ids.into_iter().filter(|id| *id != first && *id != last).collect(),
            };
            (options, rest, calls)
        })
    }

    /// One call: the usable options, the items to ask again alone, the call, and why it gave no
    /// option at all if it did not.
    async fn ask(
        self,
        messages: Vec<ChatMessage>,
        ids: Vec<u32>,
        alone: bool,
    ) -> (BTreeMap<u32, Usable>, Vec<u32>, ConversionCall, Option<Failed>) {
        let Converter {
            judge,
            scale,
            conversion,
            repeat,
            ..
        } = self;
        let label = match conversion {
            Conversion::Statement => "OC",
            Conversion::Dimension => "d-OC",
        };
        let keys: Vec<String> = ids.iter().map(u32::to_string).collect();
        let mut request = ChatRequest::new(messages);
        request.schema = Some(response_schema(judge.templates, &keys, scale.range));
        request.meta.role = Role::Judge;
        request.meta.repeat = repeat;
        request.meta.purpose = format!(
            "{label} {} {ids:?}{}",
            scale.id,
            if alone { " (asked again alone)" } else { "" }
        );
        let (result, attempts) = judge
            .ask_weighing(&request, |reply, choices| {
                let (good, bad) = judge_json::some_options(&judge_json::extract(reply)?, &keys, scale.range)?;
                let weighed = |key: &str, option: ItemOption| match option {
                    ItemOption::Value(v) if judge.expected => weigh::value_at(reply, key)
                        .and_then(|at| weigh::weigh(reply, choices, at, scale.range, f64::from(v))),
                    _ => None,
                };
                let good: BTreeMap<String, Usable> =
                    good.into_iter().map(|(k, o)| (k.clone(), (o, weighed(&k, o)))).collect();
                Ok((good, bad))
            })
            .await;
        // Items the judge gave no usable option for are asked again alone; a reply that never
        // parsed has had its attempts, and leaves every item of this call without an option.
        let (options, retry, failed) = match result {
            Ok((good, bad)) => (
                good.into_iter()
                    .filter_map(|(k, o)| Some((k.parse().ok()?, o)))
                    .collect(),
                bad.iter().filter_map(|(k, _)| k.parse().ok()).collect(),
                None,
            ),
            Err(failure) => {
                let why = match &failure.cause {
                    _ if failure.is_context() => Failed::Context,
                    Some(_) => Failed::Request,
                    None => Failed::Rejected,
                };
                (BTreeMap::new(), Vec::new(), Some(why))
            }
        };
        let call = ConversionCall {
            item_ids: ids,
            attempts,
            split: false,
            itemized: false,
        };
        (options, retry, call, failed)
    }
}

/// How conversion calls departed from the method, for the assessment of the items in `mine`: a
/// call split to fit the judge's context, one whose items were asked one at a time after no reply
/// to it could be used; `None` when no call holding one of them was either.
pub fn fitted(calls: &[ConversionCall], mine: &[u32]) -> Option<String> {
    let touches = |c: &&ConversionCall| c.item_ids.iter().any(|id| mine.contains(id));
    let sizes = |cs: &[&ConversionCall]| {
        cs.iter()
            .map(|c| c.item_ids.len().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut said = Vec::new();
    let split: Vec<&ConversionCall> = calls.iter().filter(|c| c.split).filter(touches).collect();
    if !split.is_empty() {
        // The planned calls: those split that no larger split call holds.
        let within = |c: &ConversionCall, o: &ConversionCall| {
            o.item_ids.len() > c.item_ids.len() && c.item_ids.iter().all(|id| o.item_ids.contains(id))
        };
        let split: Vec<&ConversionCall> = split
            .iter()
            .filter(|c| !split.iter().any(|o| within(c, o)))
            .copied()
            .collect();
        let made: Vec<&ConversionCall> = calls.iter().filter(|c| !c.replaced()).filter(touches).collect();
        said.push(format!(
            "the judge's context could not hold a call of {} items: converted in calls of {} items (those that held \
             this dimension's items)",
            sizes(&split),
            sizes(&made)
        ));
    }
    let itemized: Vec<&ConversionCall> = calls.iter().filter(|c| c.itemized).filter(touches).collect();
    if !itemized.is_empty() {
        said.push(format!(
            "no reply to a call of {} items could be used: its items were asked again one at a time",
            sizes(&itemized)
        ));
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// The item score of a converted option (statement options follow keying; dimension options do not).
pub fn score(scale: &Scale, item_id: u32, option: ItemOption, conversion: Conversion) -> Option<ItemScore> {
    let keying = scale.item(item_id)?.keying()?;
    let orientation = match conversion {
        Conversion::Statement => Orientation::Statement,
        Conversion::Dimension => Orientation::Dimension,
    };
    item_score(item_id, scale.range, keying, option, orientation).ok()
}

/// OC groups: questionnaire order, at most `per_call` items per call.
pub fn oc_groups(
    templates: &Templates,
    scale: &Scale,
    character: &Character,
    exchanges: &[Exchange],
    per_call: usize,
) -> Vec<(Vec<ChatMessage>, Vec<u32>)> {
    balanced(exchanges, per_call)
        .into_iter()
        .map(|chunk| {
            let refs: Vec<&Exchange> = chunk.iter().collect();
            (
                oc_messages(templates, scale, character, &refs),
                chunk.iter().map(|e| e.item_id).collect(),
            )
        })
        .collect()
}

/// d-OC groups: one call per dimension (split like OC when the dimension has more than `per_call` items).
pub fn doc_groups(
    templates: &Templates,
    scale: &Scale,
    masker: &Masker,
    exchanges: &[Exchange],
    per_call: usize,
) -> Vec<(Vec<ChatMessage>, Vec<u32>)> {
    (0..scale.dimensions.len())
        .flat_map(|d| {
            let refs: Vec<&Exchange> = exchanges
                .iter()
                .filter(|e| scale.item(e.item_id).and_then(|i| i.dimension()) == Some(d))
                .collect();
            balanced(&refs, per_call)
                .into_iter()
                .map(|chunk| {
                    (
                        doc_messages(templates, scale, d, masker, chunk),
                        chunk.iter().map(|e| e.item_id).collect(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Dimension scores from converted items: refusals count at the midpoint; items without a usable
/// conversion are left out, and a dimension with fewer than half of its items usable is left unscored
/// rather than guessed.
pub fn dimension_scores(scale: &Scale, items: &[ConvertedItem]) -> Vec<Option<crate::domain::scoring::DimensionScore>> {
    (0..scale.dimensions.len())
        .map(|d| {
            let mine: Vec<&ConvertedItem> = items
                .iter()
                .filter(|i| scale.item(i.item_id).and_then(|it| it.dimension()) == Some(d))
                .collect();
            let scores: Vec<ItemScore> = mine
                .iter()
                .filter_map(|i| {
                    Some(ItemScore {
                        value: i.score?,
                        refused: i.refused,
                    })
                })
                .collect();
            if scores.len() * 2 < mine.len() {
                return None;
            }
            crate::domain::scoring::aggregate(scale, &scores)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No two options of a d-OC dimension read alike, whatever the range: a side of three options
    /// is graded moderately, somewhat, slightly, from the end inward.
    #[test]
    fn every_d_oc_option_has_its_own_label() {
        let catalog = crate::catalog::Catalog::bundled().unwrap();
        let templates = Templates::bundled();
        for id in ["BFI", "16Personalities", "DTDD", "ICB", "ECR-R", "BSRI", "WLEIS", "Empathy", "CABIN"] {
            let scale = catalog.scale(id).unwrap();
            for d in 0..scale.dimensions.len() {
                let labels: Vec<String> =
                    (scale.range.min..=scale.range.max).map(|v| doc_label(templates, scale, d, v)).collect();
                let distinct: std::collections::BTreeSet<&String> = labels.iter().collect();
                assert_eq!(distinct.len(), labels.len(), "{id} {d}: {labels:?}");
            }
        }
        let dtdd = catalog.scale("DTDD").unwrap();
        let labels: Vec<String> = (1..=9).map(|v| doc_label(templates, dtdd, 0, v)).collect();
        assert_eq!(labels[1..4], ["moderately sincere", "somewhat sincere", "slightly sincere"]);
        assert_eq!(labels[5..8], ["slightly manipulative", "somewhat manipulative", "moderately manipulative"]);
    }

    #[test]
    fn groups_are_as_few_and_as_even_as_the_cap_allows() {
        let sizes = |n: usize, max: usize| -> Vec<usize> {
            let items: Vec<usize> = (0..n).collect();
            let groups = balanced(&items, max);
            assert_eq!(groups.concat(), items, "order kept, nothing lost");
            groups.iter().map(|g| g.len()).collect()
        };
        assert_eq!(sizes(44, 60), vec![44]);
        assert_eq!(sizes(60, 60), vec![60]);
        assert_eq!(sizes(61, 60), vec![31, 30]);
        assert_eq!(sizes(44, 14), vec![11, 11, 11, 11]);
        assert_eq!(sizes(15, 14), vec![8, 7]);
        assert_eq!(sizes(3, 1), vec![1, 1, 1]);
        assert_eq!(sizes(0, 14), Vec::<usize>::new());
    }

    #[test]
    fn a_dimension_is_scored_from_its_usable_items_while_at_least_half_remain() {
        let catalog = crate::catalog::Catalog::bundled().unwrap();
        let bfi = catalog.scale("BFI").unwrap();
        let dim = |d: usize| -> Vec<u32> {
            bfi.scored_items()
                .filter(|i| i.dimension() == Some(d))
                .map(|i| i.id)
                .collect()
        };
        let ids = dim(0);
        let item = |id: u32, usable: bool| ConvertedItem {
            item_id: id,
            option: usable.then_some(ItemOption::Value(4)),
            score: usable.then(|| {
                score(bfi, id, ItemOption::Value(4), Conversion::Statement)
                    .unwrap()
                    .value
            }),
            refused: false,
            weighed: None,
            error: None,
        };
        let all: Vec<ConvertedItem> = ids.iter().map(|&id| item(id, true)).collect();
        let whole = dimension_scores(bfi, &all)[0].unwrap().value;
        // Leaving out one item changes the mean to that of the others.
        let mut one_out = all.clone();
        one_out[0] = item(ids[0], false);
        let expected = all[1..].iter().map(|i| i.score.unwrap()).sum::<f64>() / (ids.len() - 1) as f64;
        assert!((dimension_scores(bfi, &one_out)[0].unwrap().value - expected).abs() < 1e-12);
        assert_ne!(whole, 0.0);
        // Exactly half usable still scores; fewer than half does not.
        let half = ids.len() / 2;
        let with = |usable: usize| -> Vec<ConvertedItem> {
            ids.iter().enumerate().map(|(n, &id)| item(id, n < usable)).collect()
        };
        assert!(dimension_scores(bfi, &with(ids.len() - half))[0].is_some());
        assert!(dimension_scores(bfi, &with(ids.len().div_ceil(2) - 1))[0].is_none());
    }

    #[test]
    fn the_cap_follows_the_judges_context() {
        assert_eq!(items_per_call(None, 300), MAX_ITEMS_PER_CALL);
        assert_eq!(items_per_call(Some(128_000), 300), MAX_ITEMS_PER_CALL);
        assert_eq!(items_per_call(Some(8192), 300), 14);
        // The embedded model's 4,096 usable tokens: 6 answers of up to 300 tokens, with room for the rest.
        assert_eq!(items_per_call(Some(4096), 300), 6);
        assert_eq!(items_per_call(Some(500), 300), 1, "never zero");
    }
}
