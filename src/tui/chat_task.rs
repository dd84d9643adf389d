//! A chat turn of the Chat screen: the prompt built as an interview's, the reply streamed back to
//! the workbench as actions.

use std::path::Path;
use std::sync::Arc;

use futures_util::StreamExt;
use tokio::sync::mpsc::UnboundedSender;

use super::app::Action;
use crate::catalog::Catalog;
use crate::llm::Role;
use crate::method::interview;
use crate::rpa::memories::Memories;

/// What a chat request carries of the conversation: the greeting it opened on, the earlier turns
/// (question, reply) and the new question.
pub(super) struct Said<'a> {
    pub(super) greeting: Option<&'a str>,
    pub(super) history: &'a [(String, String)],
    pub(super) text: &'a str,
    /// How an interview answer is sampled (the config's `[sampling.rpa]`): a chat reply, and an
    /// item asked again beside its recorded answer, are sampled alike.
    pub(super) sampling: interview::AnswerSampling,
}

/// One chat turn: the prompt as the engine would build it for an interview, with the greeting (the
/// agent's first message, as chat UIs send a card's) and the earlier turns before the new line,
/// streamed back as actions.
pub(super) async fn chat(
    model: Arc<dyn crate::llm::ChatModel>,
    catalog: &Catalog,
    data: &Path,
    character: &str,
    style: crate::rpa::prompt::RpaStyle,
    said: Said<'_>,
    tx: &UnboundedSender<Action>,
) -> Result<(), String> {
    let Said {
        greeting,
        history,
        text,
        sampling,
    } = said;
    use crate::llm::{ChatEvent, ChatMessage, ChatRequest};
    use crate::rpa::prompt;
    let c = catalog
        .character(character)
        .ok_or_else(|| format!("unknown character {character}"))?;
    let memories = Memories::load(data, &c.id, &c.name).ok().flatten();
    let templates = crate::templates::Templates::bundled();
    let line = prompt::experimenter_line(templates, c, text);
    let mut assembled = prompt::assemble(templates, c, style, memories.as_ref(), text, &line);
    let last = assembled.messages.pop();
    if let Some(greeting) = greeting {
        assembled.messages.push(ChatMessage::assistant(greeting.to_string()));
    }
    for (user, reply) in history {
        assembled
            .messages
            .push(ChatMessage::user(prompt::experimenter_line(templates, c, user)));
        assembled.messages.push(ChatMessage::assistant(reply.clone()));
    }
    assembled.messages.extend(last);
    let _ = tx.send(Action::ChatPrompt(assembled.messages.clone()));
    let mut request = ChatRequest::new(assembled.messages);
    request.meta.role = Role::Rpa;
    request.meta.purpose = format!("chat {}", c.id);
    request.sampling.max_tokens = Some(sampling.max_tokens);
    request.sampling.temperature = sampling.temperature;
    let mut events = model.stream(request);
    while let Some(event) = events.next().await {
        match event {
            ChatEvent::Token(t) => {
                let _ = tx.send(Action::ChatToken(t));
            }
            ChatEvent::Retry { .. } => {
                let _ = tx.send(Action::ChatRetry);
            }
            ChatEvent::Usage(_) | ChatEvent::Choices(_) => {}
            ChatEvent::Done { .. } => return Ok(()),
            ChatEvent::Error(e) => return Err(e.to_string()),
        }
    }
    Err("the reply ended without finishing".into())
}
