//! What went wrong, and whose fault it is: the user's input (exit 2) or the machine, the network or a
//! provider (exit 1).

/// A problem with what the user gave us; exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

pub fn input_error(message: impl Into<String>) -> anyhow::Error {
    InputError(message.into()).into()
}

/// A failure of the machine, the network or another process (a folder that cannot be made, a
/// server that does not answer); exit code 1 whatever wrapped it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MachineError(pub String);

pub fn machine_error(message: impl Into<String>) -> anyhow::Error {
    MachineError(message.into()).into()
}

/// A session error with what to do about it on the next line (not a `source`: printing the chain
/// would say the error twice).
#[derive(Debug, thiserror::Error)]
#[error("{error}\n{advice}")]
pub(crate) struct Advised {
    pub error: crate::session::SessionError,
    pub advice: String,
}

/// The exit code of an error: 2 when the user's input is at fault, else 1.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    use crate::journal::JournalError;
    // The innermost error that says whose fault it is decides: a file error or a machine error
    // wrapped in an input error's words is still the machine's.
    for e in error.chain().collect::<Vec<_>>().into_iter().rev() {
        if e.downcast_ref::<MachineError>().is_some() {
            return 1;
        }
        if let Some(e) = e.downcast_ref::<crate::files::FileError>() {
            return if e.is_input() { 2 } else { 1 };
        }
    }
    let input = error.chain().any(|e| {
        e.downcast_ref::<InputError>().is_some()
            || e.downcast_ref::<crate::session::SessionError>()
                .is_some_and(|e| e.is_input())
            || e.downcast_ref::<Advised>().is_some_and(|a| a.error.is_input())
            || e.downcast_ref::<crate::llm::LlmError>().is_some_and(|e| e.is_input())
            || e.downcast_ref::<crate::study::StudyError>()
                .is_some_and(|e| e.is_input())
            || e.downcast_ref::<crate::annotation::AnnotationError>()
                .is_some_and(|e| e.is_input())
            || e.downcast_ref::<crate::config::ConfigError>().is_some()
            || e.downcast_ref::<crate::templates::TemplateError>().is_some()
            || matches!(e.downcast_ref::<JournalError>(), Some(JournalError::Damaged { .. }))
    });
    if input { 2 } else { 1 }
}
