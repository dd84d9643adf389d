//! Prompt assembly for the role-playing agent, one isolated exchange at a time (no history).
//! `description`: the character's description as the system prompt, then the experimenter's line.
//! `chatharuhi`: the same, with one user message of "classic scenes" in between — the memories most
//! relevant to the question (BM25), separated by `###`, at most 19 and within a 1,500-token budget
//! (approximated: one token per CJK character, 1.3 per other word). What was retrieved is returned so
//! the exact prompt can be inspected.

use serde::{Deserialize, Serialize};

use super::memories::Memories;
use super::retrieval::approx_tokens;
use crate::domain::character::Character;
use crate::domain::scale::Language;
use crate::llm::ChatMessage;

pub const MAX_SNIPPETS: usize = 19;
pub const SNIPPET_BUDGET: usize = 1500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RpaStyle {
    Description,
    Chatharuhi,
}

impl RpaStyle {
    pub fn parse(name: &str) -> Option<RpaStyle> {
        match name {
            "description" => Some(RpaStyle::Description),
            "chatharuhi" => Some(RpaStyle::Chatharuhi),
            _ => None,
        }
    }
}

/// The experimenter addressing the character, in the ChatHaruhi convention.
pub fn experimenter_line(character: &Character, text: &str) -> String {
    format!("{}:「{}」", character.experimenter, text)
}

/// The messages sent, and which memories (by index) were retrieved for them.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    pub messages: Vec<ChatMessage>,
    pub retrieved: Vec<usize>,
}

/// Assembles one exchange; `query` is what retrieval searches for (the question itself).
pub fn assemble(
    character: &Character,
    style: RpaStyle,
    memories: Option<&Memories>,
    query: &str,
    user_turn: &str,
) -> Assembled {
    let mut messages = vec![ChatMessage::system(character.description.trim())];
    let mut retrieved = Vec::new();
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
            let heading = match character.language {
                Language::En => format!("Classic scenes for the role {} are as follows:", character.name),
                Language::Zh => format!("{}的经典桥段如下：", character.name),
            };
            messages.push(ChatMessage::user(format!("{heading}\n{}", snippets.join("\n###\n"))));
        }
    }
    messages.push(ChatMessage::user(user_turn));
    Assembled { messages, retrieved }
}
