//! Prompt assembly for the role-playing agent. Style `description`: the character's description as the
//! system prompt, then the experimenter's line `{experimenter}:「{question}」` as the user turn. (The
//! retrieval-based styles `chatharuhi` and `rolegpt` build on the same shape.)

use serde::{Deserialize, Serialize};

use crate::domain::character::Character;
use crate::llm::ChatMessage;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RpaStyle {
    Description,
}

/// The experimenter addressing the character, in the ChatHaruhi convention.
pub fn experimenter_line(character: &Character, text: &str) -> String {
    format!("{}:「{}」", character.experimenter, text)
}

/// The messages for one isolated exchange (no history).
pub fn messages(character: &Character, style: RpaStyle, user_turn: &str) -> Vec<ChatMessage> {
    match style {
        RpaStyle::Description => {
            vec![
                ChatMessage::system(character.description.trim()),
                ChatMessage::user(user_turn),
            ]
        }
    }
}
