//! Expert rating (ER): the judge reads a dimension's (question, answer) pairs and scores the dimension.
//! ER_batch splits them into batches of 3–4 (one judge call each; the dimension score is the batch mean);
//! ER_all sends them all in one call. Repeat n > 0 shuffles the pairs with seed n first.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::anonymize::{EXPERIMENTER, Masker, PARTICIPANT};
use super::judge::{Attempt, Judge};
use super::judge_json;
use super::texts;
use super::weigh::{self, Weighed};
use crate::domain::scale::{Language, Scale};
use crate::llm::{ChatMessage, ChatRequest, ResponseSchema, Role};
use crate::templates::{Template, Templates};

/// One interview exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub item_id: u32,
    pub question: String,
    pub response: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Grouping {
    /// Batches of 3–4 exchanges.
    Batch,
    /// All of a dimension's exchanges at once.
    All,
}

/// How `n` exchanges are split into batches (indices): up to 5 go together; more are cut into fours and
/// the last batch, if shorter than 3, takes the last exchange of the first batches until it has 3 — the
/// InCharacter rule (9 → [0,1,2] [4,5,6] [8,3,7]).
pub fn batches(n: usize) -> Vec<Vec<usize>> {
    if n <= 5 {
        return vec![(0..n).collect()];
    }
    let mut out: Vec<Vec<usize>> = (0..n).collect::<Vec<_>>().chunks(4).map(<[usize]>::to_vec).collect();
    let last = out.len() - 1;
    let missing = 3usize.saturating_sub(out[last].len());
    for i in 0..missing {
        let moved = out[i].pop().expect("earlier batches have four");
        out[last].push(moved);
    }
    out
}

/// The order in which a repeat presents exchanges: as asked for repeat 0, shuffled with seed `repeat`
/// otherwise, as the original pipeline shuffles them (`random.seed(repeat); random.shuffle(…)` in
/// Python: the Mersenne Twister seeded by key, Fisher–Yates drawing each index by rejection from
/// the fewest bits that hold it), so repeats batch the same answers together as it does.
pub fn order(n: usize, repeat: u32) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    if repeat == 0 {
        return idx;
    }
    // `_randbelow` draws from one 32-bit word here: a dimension has far fewer answers.
    assert!(n <= u32::MAX as usize, "{n} answers to shuffle");
    // Python seeds with the 32-bit words of the integer's magnitude: one word here.
    let mut mt = rand_mt::Mt::new_with_key([repeat]);
    // `random._randbelow`: the `bits` high bits of a 32-bit draw, again until below `bound`.
    let mut below = |bound: usize| -> usize {
        let bits = usize::BITS - bound.leading_zeros();
        loop {
            let r = (mt.next_u32() >> (32 - bits)) as usize;
            if r < bound {
                return r;
            }
        }
    };
    for i in (1..n).rev() {
        let j = below(i + 1);
        idx.swap(i, j);
    }
    idx
}

/// How a repeat orders a dimension's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// As the original pipeline ([`order`]).
    Original,
    /// As sessions started before that did ([`order_before`]).
    Before,
}

impl Order {
    /// The order of a plan that reads as the original does (`RunPlan::original_reading`), or not.
    pub fn of(original: bool) -> Order {
        if original { Order::Original } else { Order::Before }
    }

    fn order(self, n: usize, repeat: u32) -> Vec<usize> {
        match self {
            Order::Original => order(n, repeat),
            Order::Before => order_before(n, repeat),
        }
    }
}

/// How sessions started before [`order`] shuffled a repeat's answers (Fisher–Yates, SplitMix64);
/// kept so that their resumes batch as they began.
pub fn order_before(n: usize, repeat: u32) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    if repeat == 0 {
        return idx;
    }
    let mut rng = crate::domain::rng::SplitMix64(u64::from(repeat));
    for i in (1..n).rev() {
        let j = rng.below(i + 1);
        idx.swap(i, j);
    }
    idx
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRating {
    pub item_ids: Vec<u32>,
    /// `None` when the judge never gave a usable reply.
    pub score: Option<f64>,
    pub analysis: String,
    pub attempts: Vec<Attempt>,
    /// With expected scores: how the written score was weighed (`score` is then its expected value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighed: Option<Weighed>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DimensionRating {
    /// Mean of the batch scores; `None` if any batch failed (the failure is visible, never filled in).
    pub score: Option<f64>,
    pub batches: Vec<BatchRating>,
    /// How the calls departed from the method to fit the judge's context, when they had to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitted: Option<String>,
}

/// The JSON Schema of an expert rating on `scale`.
pub fn schema(scale: &Scale, dimension: usize) -> serde_json::Value {
    let result = match &scale.dimensions[dimension].poles {
        Some([a, b]) => json!({"type": "object", "properties": {
            a: {"type": "number", "minimum": 0, "maximum": 100},
            b: {"type": "number", "minimum": 0, "maximum": 100}},
            "required": [a, b], "additionalProperties": false}),
        None => json!({"type": "number", "minimum": scale.range.min, "maximum": scale.range.max}),
    };
    json!({"type": "object", "properties": {"analysis": {"type": "string"}, "result": result},
           "required": ["analysis", "result"], "additionalProperties": false})
}

/// The reply format of an expert rating call.
pub fn response_schema(templates: &Templates, scale: &Scale, dimension: usize) -> ResponseSchema {
    let schema = schema(scale, dimension);
    ResponseSchema {
        instruction: templates.schema_instruction(&schema),
        ..ResponseSchema::new("expert_rating", schema)
    }
}

/// The judge's messages for one batch: the `expert_rating` template, then the `expert_conversation`.
pub fn messages(
    templates: &Templates,
    scale: &Scale,
    dimension: usize,
    language: Language,
    masker: &Masker,
    exchanges: &[&Exchange],
) -> Vec<ChatMessage> {
    let poled = scale.dimensions[dimension].poles.is_some();
    let mut values = texts::range(scale);
    values.extend(texts::dimension(scale, dimension, PARTICIPANT));
    let (rule, result) = match poled {
        true => (Template::ExpertRulePoles, Template::ExpertResultPoles),
        false => (Template::ExpertRule, Template::ExpertResult),
    };
    let rule = templates.render(rule, &texts::pairs(&values));
    let form = templates.render(result, &texts::pairs(&values));
    let language_name = match language {
        Language::En => "English",
        Language::Zh => "Chinese",
    };
    values.extend([
        ("scale_name", scale.name.clone()),
        ("scale_id", scale.id.clone()),
        ("experimenter", EXPERIMENTER.to_string()),
        ("participant", PARTICIPANT.to_string()),
        ("rule", rule),
        ("language", language_name.to_string()),
        ("result_form", form),
    ]);
    let system = templates.render(Template::ExpertRating, &texts::pairs(&values));
    let conversation = templates.join(exchanges, Template::ExpertExchange, Template::ExpertSeparator, |i, e| {
        vec![
            ("number", (i + 1).to_string()),
            ("item", e.item_id.to_string()),
            ("experimenter", EXPERIMENTER.to_string()),
            ("participant", PARTICIPANT.to_string()),
            ("question", unwrap_line(&masker.mask(&e.question), EXPERIMENTER)),
            ("answer", unwrap_line(&masker.mask(&e.response), PARTICIPANT)),
            ("statement", scale.item(e.item_id).map_or(String::new(), |it| it.statement.en.clone())),
        ]
    });
    vec![
        ChatMessage::system(system),
        ChatMessage::user(templates.render(Template::ExpertConversation, &[("conversation", &conversation)])),
    ]
}

/// A line without the speaker's mask and colon it may already carry (a role-play agent often answers
/// `Hermione: …`, which the mask turns into `<the participant>: …`), and without the corner brackets
/// around it, so the prompt wraps it once.
fn unwrap_line(line: &str, speaker: &str) -> String {
    let text = line.trim();
    let Some(rest) = text.strip_prefix(speaker) else {
        return text.to_string();
    };
    let rest = rest.trim_start();
    let Some(rest) = rest.strip_prefix(':').or_else(|| rest.strip_prefix('：')) else {
        return text.to_string();
    };
    let rest = rest.trim();
    rest.strip_prefix('「')
        .and_then(|r| r.strip_suffix('」'))
        .unwrap_or(rest)
        .trim()
        .to_string()
}

/// Rates one dimension from its exchanges (in questionnaire order).
#[allow(clippy::too_many_arguments)]
pub async fn rate(
    judge: Judge<'_>,
    scale: &Scale,
    dimension: usize,
    language: Language,
    masker: &Masker,
    exchanges: &[Exchange],
    grouping: Grouping,
    (repeat, shuffle): (u32, Order),
) -> DimensionRating {
    let ordered: Vec<&Exchange> = shuffle
        .order(exchanges.len(), repeat)
        .into_iter()
        .map(|i| &exchanges[i])
        .collect();
    let groups: Vec<Vec<usize>> = match grouping {
        Grouping::All => vec![(0..ordered.len()).collect()],
        Grouping::Batch => batches(ordered.len()),
    };
    let asker = Asker {
        judge,
        scale,
        dimension,
        language,
        masker,
        repeat,
    };
    // Batches are independent: asked together (the client's limits pace them), kept in batch order.
    let asks = groups.iter().map(|group| {
        let members: Vec<&Exchange> = group.iter().map(|&i| ordered[i]).collect();
        asker.fitted(members)
    });
    let out: Vec<BatchRating> = futures_util::future::join_all(asks).await.concat();
    let fitted = (out.len() > groups.len()).then(|| {
        let sizes = |s: Vec<usize>| s.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
        format!(
            "the judge's context could not hold {} call(s) of {} exchanges: rated in {} calls of {} \
             exchanges, the score being their mean",
            groups.len(),
            sizes(groups.iter().map(Vec::len).collect()),
            out.len(),
            sizes(out.iter().map(|b| b.item_ids.len()).collect())
        )
    });
    let scores: Option<Vec<f64>> = out.iter().map(|b| b.score).collect();
    let score = scores
        .filter(|s| !s.is_empty())
        .map(|s| s.iter().sum::<f64>() / s.len() as f64);
    DimensionRating {
        score,
        batches: out,
        fitted,
    }
}

/// What every batch of one dimension's rating is asked with.
#[derive(Clone, Copy)]
struct Asker<'a> {
    judge: Judge<'a>,
    scale: &'a Scale,
    dimension: usize,
    language: Language,
    masker: &'a Masker,
    repeat: u32,
}

impl<'a> Asker<'a> {
    /// Rates `members` in one call; a call the judge's context cannot hold is split in two halves,
    /// each rated in its own call (and split again if need be), down to one exchange a call.
    fn fitted(
        self,
        members: Vec<&'a Exchange>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<BatchRating>> + Send + 'a>> {
        Box::pin(async move {
            let (rating, too_long) = self.ask(&members).await;
            if !too_long || members.len() < 2 {
                return vec![rating];
            }
            let (a, b) = members.split_at(members.len().div_ceil(2));
            let (a, b) = futures_util::future::join(self.fitted(a.to_vec()), self.fitted(b.to_vec())).await;
            a.into_iter().chain(b).collect()
        })
    }

    /// One call rating `members`, and whether it was too long for the judge's context.
    async fn ask(self, members: &[&Exchange]) -> (BatchRating, bool) {
        let Asker {
            judge,
            scale,
            dimension,
            language,
            masker,
            repeat,
        } = self;
        let poles = scale.dimensions[dimension].poles.clone();
        let (min, max) = (f64::from(scale.range.min), f64::from(scale.range.max));
        let mut request = ChatRequest::new(messages(judge.templates, scale, dimension, language, masker, members));
        request.schema = Some(response_schema(judge.templates, scale, dimension));
        request.meta.role = Role::Judge;
        request.meta.repeat = repeat;
        request.meta.purpose = format!("ER {} {}", scale.id, scale.dimensions[dimension].name);
        let range = scale.range;
        let (result, attempts) = judge
            .ask_weighing(&request, |reply, choices| {
                let v = judge_json::extract(reply)?;
                let (score, analysis) = match &poles {
                    Some([a, b]) => judge_json::expert_poles(&v, [a.as_str(), b.as_str()])?,
                    None => judge_json::expert_score(&v, min, max)?,
                };
                let weighed = (judge.expected && poles.is_none())
                    .then(|| weigh::value_at(reply, "result"))
                    .flatten()
                    .and_then(|at| weigh::weigh(reply, choices, at, range, score));
                Ok((score, analysis, weighed))
            })
            .await;
        let (score, analysis, weighed, too_long) = match result {
            Ok((s, a, w)) => (Some(w.as_ref().map_or(s, |w| w.expected)), a, w, false),
            Err(failure) => (None, String::new(), None, failure.is_context()),
        };
        let rating = BatchRating {
            item_ids: members.iter().map(|e| e.item_id).collect(),
            score,
            analysis,
            attempts,
            weighed,
        };
        (rating, too_long)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_rule_matches_the_original() {
        assert_eq!(batches(3), vec![vec![0, 1, 2]]);
        assert_eq!(batches(5), vec![vec![0, 1, 2, 3, 4]]);
        assert_eq!(batches(6), vec![vec![0, 1, 2], vec![4, 5, 3]]);
        assert_eq!(batches(7), vec![vec![0, 1, 2, 3], vec![4, 5, 6]]);
        assert_eq!(batches(8), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(batches(9), vec![vec![0, 1, 2], vec![4, 5, 6], vec![8, 3, 7]]);
        assert_eq!(batches(10), vec![vec![0, 1, 2], vec![4, 5, 6, 7], vec![8, 9, 3]]);
        for n in 6..=40 {
            let b = batches(n);
            assert!(b.iter().all(|x| (3..=4).contains(&x.len())), "{n}: {b:?}");
            let mut all: Vec<usize> = b.concat();
            all.sort();
            assert_eq!(all, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn repeats_shuffle_reproducibly() {
        assert_eq!(order(5, 0), vec![0, 1, 2, 3, 4]);
        // What `random.seed(s); random.shuffle(list(range(n)))` gives in Python 3.
        for (n, seed, python) in [
            (8, 1, &[3, 6, 1, 5, 7, 0, 4, 2][..]),
            (12, 1, &[7, 11, 0, 8, 5, 6, 3, 10, 4, 1, 9, 2]),
            (12, 2, &[9, 11, 3, 4, 7, 6, 8, 2, 5, 10, 1, 0]),
            (9, 3, &[1, 5, 6, 0, 8, 4, 7, 2, 3]),
            (15, 7, &[3, 12, 14, 7, 11, 4, 13, 9, 8, 1, 0, 10, 6, 2, 5]),
            (1, 1, &[0]),
            (2, 5, &[0, 1]),
        ] {
            assert_eq!(order(n, seed), python, "n {n}, seed {seed}");
        }
        // Sessions started before keep their own shuffle, so a resume batches as they began.
        assert_eq!(Order::of(false).order(12, 1), order_before(12, 1));
        assert_ne!(order_before(12, 1), order(12, 1));
        assert_eq!(order_before(12, 1), [4, 6, 7, 9, 11, 3, 10, 1, 2, 0, 8, 5]);
        assert_eq!(order(12, 1), order(12, 1));
        assert_ne!(order(12, 1), order(12, 2));
        let mut o = order(12, 3);
        o.sort();
        assert_eq!(o, (0..12).collect::<Vec<_>>());
    }

    #[test]
    fn a_line_that_already_names_its_speaker_is_wrapped_once() {
        assert_eq!(
            unwrap_line("<the participant>: I keep lists.", PARTICIPANT),
            "I keep lists."
        );
        assert_eq!(unwrap_line("<the participant>：「我记得。」", PARTICIPANT), "我记得。");
        assert_eq!(unwrap_line(" I keep lists. ", PARTICIPANT), "I keep lists.");
        assert_eq!(
            unwrap_line("<the experimenter>: asked me", PARTICIPANT),
            "<the experimenter>: asked me",
            "only the speaker's own mask is taken off"
        );
        assert_eq!(
            unwrap_line("<the participant> says hi", PARTICIPANT),
            "<the participant> says hi"
        );
    }
}
