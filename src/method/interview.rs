//! Interviewing a role-playing agent: every scored item is asked in a fresh context (no history), in the
//! character's language, by the experimenter. `open` asks the item's open-ended question (for ER, OC and
//! d-OC); `sr` presents the statement with the options and asks for the number only; `sr-cot` asks for
//! reasons first and the number last.

use serde::{Deserialize, Serialize};

use super::expert::Exchange;
use super::texts;
use crate::domain::character::Character;
use crate::domain::scale::{Item, Language, Scale};
use crate::llm::{ChatModel, ChatRequest, LlmError, Role, complete};
use crate::rpa::memories::Memories;
use crate::rpa::prompt::{self, RpaStyle};
use crate::templates::{Template, Templates};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueryStyle {
    Open,
    Sr,
    SrCot,
}

impl QueryStyle {
    pub fn name(self) -> &'static str {
        match self {
            QueryStyle::Open => "open",
            QueryStyle::Sr => "sr",
            QueryStyle::SrCot => "sr-cot",
        }
    }

    pub fn parse(name: &str) -> Option<QueryStyle> {
        [QueryStyle::Open, QueryStyle::Sr, QueryStyle::SrCot]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// The request purpose of one interview item: "interview <character> <scale> <item> <style>" (ids have
/// no spaces), which live views parse back with [`parse_purpose`].
pub fn purpose(character: &str, scale: &str, item: u32, style: QueryStyle) -> String {
    format!("interview {character} {scale} {item} {}", style.name())
}

/// (character, scale, item, style) of an interview purpose.
pub fn parse_purpose(purpose: &str) -> Option<(&str, &str, u32, QueryStyle)> {
    let mut parts = purpose.strip_prefix("interview ")?.split(' ');
    let (c, s, i, st) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some((c, s, i.parse().ok()?, QueryStyle::parse(st)?))
}

/// The longest answer a character may give to one question, in tokens, unless configured otherwise.
pub const MAX_ANSWER_TOKENS: u32 = 300;

/// The role-play temperature of the original procedure.
pub const ANSWER_TEMPERATURE: f32 = 0.7;

/// How interview answers are sampled; a session records it in its plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AnswerSampling {
    /// `None`: none is sent (the provider's default applies).
    #[serde(serialize_with = "crate::domain::decimal::short_opt")]
    pub temperature: Option<f32>,
    /// The longest answer, in tokens (a rambling model is cut there).
    pub max_tokens: u32,
}

impl Default for AnswerSampling {
    fn default() -> AnswerSampling {
        AnswerSampling {
            temperature: Some(ANSWER_TEMPERATURE),
            max_tokens: MAX_ANSWER_TOKENS,
        }
    }
}

impl AnswerSampling {
    /// What sessions sent before the sampling was recorded.
    pub fn before_recorded() -> AnswerSampling {
        AnswerSampling {
            temperature: None,
            max_tokens: MAX_ANSWER_TOKENS,
        }
    }
}

/// The template of what the character is asked in `style`: the interviewer's line for an open
/// question, the self-report question of the character's language otherwise.
pub fn query_template(style: QueryStyle, language: Language) -> Template {
    match (style, language) {
        (QueryStyle::Open, _) => Template::Interviewer,
        (QueryStyle::Sr, Language::En) => Template::SelfReportEn,
        (QueryStyle::Sr, Language::Zh) => Template::SelfReportZh,
        (QueryStyle::SrCot, Language::En) => Template::SelfReportCotEn,
        (QueryStyle::SrCot, Language::Zh) => Template::SelfReportCotZh,
    }
}

/// What the character is asked for one item.
pub fn query(templates: &Templates, character: &Character, scale: &Scale, item: &Item, style: QueryStyle) -> String {
    let lang = character.language;
    if style == QueryStyle::Open {
        return prompt::experimenter_line(templates, character, item.question.get(lang));
    }
    let statement = item.statement.get(lang);
    let separator = match lang {
        Language::En => Template::SrOptionSeparatorEn,
        Language::Zh => Template::SrOptionSeparatorZh,
    };
    let options = templates.join(scale.options.get(lang), Template::SrOption, separator, |i, label| {
        vec![("value", (scale.range.min + i as i32).to_string()), ("label", label.clone())]
    });
    let stem = scale.self_report_stem.get(lang).replace("{statement}", statement);
    let mut values = texts::questionnaire(scale, &character.name, lang);
    values.extend([
        ("stem", stem),
        ("statement", statement.clone()),
        ("options", options),
        ("experimenter", character.experimenter.clone()),
        ("character", character.name.clone()),
        ("character.alias", character.first_alias().to_string()),
        ("range.min", scale.range.min.to_string()),
        ("range.max", scale.range.max.to_string()),
    ]);
    templates.render(query_template(style, lang), &texts::pairs(&values))
}

/// One item asked: the exchange (the question as the character saw it), the indices of the memories
/// retrieved for it, and whether the answer reached the answer cap (kept: the cap is the method's).
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub exchange: Exchange,
    pub retrieved: Vec<usize>,
    pub truncated: bool,
}

/// Asks one item.
#[allow(clippy::too_many_arguments)]
pub async fn ask(
    rpa: &dyn ChatModel,
    templates: &Templates,
    character: &Character,
    scale: &Scale,
    item: &Item,
    style: QueryStyle,
    rpa_style: RpaStyle,
    memories: Option<&Memories>,
    repeat: u32,
    seed: u64,
    sampling: AnswerSampling,
) -> Result<Asked, LlmError> {
    let text = query(templates, character, scale, item, style);
    let assembled = prompt::assemble(
        templates,
        character,
        rpa_style,
        memories,
        item.question.get(character.language),
        &text,
    );
    let mut request = ChatRequest::new(assembled.messages);
    request.meta.role = Role::Rpa;
    request.meta.repeat = repeat;
    request.meta.purpose = purpose(&character.id, &scale.id, item.id, style);
    request.sampling.seed = Some(seed);
    // An interview answer is a few sentences; the cap keeps a rambling model from running on.
    request.sampling.max_tokens = Some(sampling.max_tokens);
    request.sampling.temperature = sampling.temperature;
    let reply = complete(rpa, request).await?;
    let question = match style {
        QueryStyle::Open => item.question.get(character.language).clone(),
        _ => text,
    };
    Ok(Asked {
        exchange: Exchange {
            item_id: item.id,
            question,
            response: reply.text.trim().to_string(),
        },
        retrieved: assembled.retrieved,
        // Cut by the token cap, or by the provider's content filter.
        truncated: matches!(reply.finish_reason.as_deref(), Some("length" | "content_filter")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_round_trip() {
        let p = purpose("hermione-en", "16Personalities", 12, QueryStyle::SrCot);
        assert_eq!(
            parse_purpose(&p),
            Some(("hermione-en", "16Personalities", 12, QueryStyle::SrCot))
        );
        assert_eq!(parse_purpose("ER BFI Openness"), None);
    }
}
