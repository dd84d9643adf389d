//! Prompt assembly for the role-playing agent, one isolated exchange at a time (no history).
//! `description`: the character's description as the system prompt, then the experimenter's line.
//! `rolegpt`: a system instruction with the role's name, work, description and catchphrases ("speak
//! like …"), then the five dialogue pairs from its memories most relevant to the question (BM25),
//! replayed as earlier user/assistant turns, then the experimenter's line.
//! `chatharuhi`: the description, with one user message of "classic scenes" in between — the memories most
//! relevant to the question (BM25), separated by `###`, at most 19 and within a 1,500-token budget
//! (approximated: one token per CJK character, 1.3 per other word). What was retrieved is returned so
//! the exact prompt can be inspected.
//!
//! A character's final instruction (`post_history`: a card's `post_history_instructions`) comes last in
//! every style, after the retrieved history and the question: appended to the last user message after a
//! blank line, as SillyTavern places it after the chat history. It is not sent as a trailing system
//! message because many chat templates accept a system message only first.

use serde::{Deserialize, Serialize};

use super::memories::Memories;
use crate::text::approx_tokens;
use crate::domain::character::Character;
use crate::domain::scale::Language;
use crate::llm::ChatMessage;
use crate::templates::{Template, Templates};

pub const MAX_SNIPPETS: usize = 19;
pub const SNIPPET_BUDGET: usize = 1500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RpaStyle {
    Description,
    Chatharuhi,
    Rolegpt,
}

impl RpaStyle {
    pub fn parse(name: &str) -> Option<RpaStyle> {
        match name {
            "description" => Some(RpaStyle::Description),
            "chatharuhi" => Some(RpaStyle::Chatharuhi),
            "rolegpt" => Some(RpaStyle::Rolegpt),
            _ => None,
        }
    }
}

/// The experimenter addressing the character: the `interviewer` template (bundled: the ChatHaruhi
/// convention, `Harry:「question」`).
pub fn experimenter_line(templates: &Templates, character: &Character, text: &str) -> String {
    templates.render(
        Template::Interviewer,
        &[
            ("experimenter", &character.experimenter),
            ("character", &character.name),
            ("question", text),
            ("character.alias", character.first_alias()),
        ],
    )
}

/// Dialogue pairs replayed by the rolegpt style.
pub const ROLEGPT_PAIRS: usize = 5;

/// The RoleGPT system instruction (`rolegpt.<language>`, or `rolegpt_no_work.<language>` when the work
/// is not known): name, work, description, catchphrases, and
/// "speak like".
fn rolegpt_instruction(templates: &Templates, character: &Character) -> String {
    // A character whose work is not known is not said to come from one.
    let work = character.source_work();
    let (instruction, catchphrases) = match (character.language, work.is_some()) {
        (Language::En, true) => (Template::RolegptEn, Template::RolegptCatchphrasesEn),
        (Language::En, false) => (Template::RolegptNoWorkEn, Template::RolegptCatchphrasesEn),
        (Language::Zh, true) => (Template::RolegptZh, Template::RolegptCatchphrasesZh),
        (Language::Zh, false) => (Template::RolegptNoWorkZh, Template::RolegptCatchphrasesZh),
    };
    let phrases = templates.join(
        &character.catchphrases,
        Template::Catchphrase,
        Template::CatchphraseSeparator,
        |_, p| vec![("phrase", p.clone())],
    );
    let catchphrases = match character.catchphrases.is_empty() {
        true => String::new(),
        false => templates.render(catchphrases, &[("phrases", &phrases)]),
    };
    templates.render(
        instruction,
        &[
            ("character", &character.name),
            ("character.alias", character.first_alias()),
            ("work", work.unwrap_or_default()),
            ("description", character.description.trim()),
            ("catchphrases", &catchphrases),
        ],
    )
}

/// The messages sent, and which memories (by index) were retrieved for them: memory chunks for
/// chatharuhi, dialogue pairs for rolegpt.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    pub messages: Vec<ChatMessage>,
    pub retrieved: Vec<usize>,
}

/// Assembles one exchange; `query` is what retrieval searches for (the question itself).
pub fn assemble(
    templates: &Templates,
    character: &Character,
    style: RpaStyle,
    memories: Option<&Memories>,
    query: &str,
    user_turn: &str,
) -> Assembled {
    let mut retrieved = Vec::new();
    if style == RpaStyle::Rolegpt {
        let mut messages = vec![ChatMessage::system(rolegpt_instruction(templates, character))];
        if let Some(m) = memories {
            for (i, _) in m.pair_index.search(query, ROLEGPT_PAIRS) {
                let (q, a) = &m.pairs[i];
                messages.push(ChatMessage::user(q.clone()));
                messages.push(ChatMessage::assistant(a.clone()));
                retrieved.push(i);
            }
        }
        messages.push(ChatMessage::user(last_turn(templates, character, user_turn)));
        return Assembled { messages, retrieved };
    }
    let mut messages = vec![ChatMessage::system(character.description.trim())];
    if let (RpaStyle::Chatharuhi, Some(m)) = (style, memories) {
        let mut used = 0;
        let mut snippets = Vec::new();
        for (i, _) in m.index.search(query, MAX_SNIPPETS) {
            let cost = approx_tokens(&m.chunks[i]);
            if used + cost > SNIPPET_BUDGET {
                continue;
            }
            used += cost;
            retrieved.push(i);
            snippets.push(m.chunks[i].trim().to_string());
        }
        if !snippets.is_empty() {
            let scenes = match character.language {
                Language::En => Template::ScenesEn,
                Language::Zh => Template::ScenesZh,
            };
            let joined = snippets.join(templates.text(Template::SceneSeparator));
            messages.push(ChatMessage::user(templates.render(
                scenes,
                &[
                    ("character", &character.name),
                    ("character.alias", character.first_alias()),
                    ("scenes", &joined),
                ],
            )));
        }
    }
    messages.push(ChatMessage::user(last_turn(templates, character, user_turn)));
    Assembled { messages, retrieved }
}

/// The last user message: the experimenter's line, then the character's final instruction if it has one.
fn last_turn(templates: &Templates, character: &Character, user_turn: &str) -> String {
    let last = character.post_history.trim();
    if last.is_empty() || user_turn.is_empty() {
        user_turn.to_string()
    } else {
        templates.render(Template::FinalInstruction, &[("turn", user_turn), ("instruction", last)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::diagnostic::Source;

    #[test]
    fn the_final_instruction_comes_after_the_question_in_every_style() {
        let text = "id = \"flux-en\"\nname = \"Flux\"\nlanguage = \"en\"\nexperimenter = \"Bo\"\n\
                    description = \"You are Flux.\"\npost_history_instructions = \"[Answer as a cat.]\"\n";
        let c = Character::parse(Source::new("flux.toml", text), |_| None).unwrap();
        let memories = Memories::new(vec!["Bo:「Hi」\nFlux:「Mrrp.」".into()], "Flux");
        for style in [RpaStyle::Description, RpaStyle::Chatharuhi, RpaStyle::Rolegpt] {
            let got = assemble(Templates::bundled(), &c, style, Some(&memories), "Hi", "Bo:「Hi?」");
            let last = got.messages.last().unwrap();
            assert_eq!(last.content, "Bo:「Hi?」\n\n[Answer as a cat.]", "{style:?}");
            assert!(got.messages[..got.messages.len() - 1].iter().all(|m| !m.content.contains("[Answer")));
        }
        let plain = Character {
            post_history: String::new(),
            ..c
        };
        let got = assemble(Templates::bundled(), &plain, RpaStyle::Description, None, "Hi", "Bo:「Hi?」");
        assert_eq!(got.messages.last().unwrap().content, "Bo:「Hi?」");
    }

    #[test]
    fn a_character_of_no_known_work_is_not_said_to_come_from_one() {
        let text = |work: &str| format!("id = \"flux-en\"\nname = \"Flux\"\nlanguage = \"en\"\nexperimenter = \"Bo\"\n{work}description = \"You are Flux.\"\n");
        let system = |work: &str| {
            let c = Character::parse(Source::new("flux.toml", &text(work)), |_| None).unwrap();
            assemble(Templates::bundled(), &c, RpaStyle::Rolegpt, None, "Hi", "Bo:「Hi?」").messages[0].content.clone()
        };
        assert!(system("work = \"Cats (T. S. Eliot)\"\n").starts_with("You are Flux, from Cats (T. S. Eliot).\n"));
        for unknown in ["", "work = \"\"\n"] {
            let said = system(unknown);
            assert!(said.starts_with("You are Flux.\nYou are Flux.\nSpeak like Flux"), "{said}");
        }
    }
}
