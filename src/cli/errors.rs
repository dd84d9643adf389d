//! What went wrong, and whose fault it is: the user's input (exit 2) or the machine, the network or a
//! provider (exit 1); each error type says which itself (`crate::fault`).

use crate::fault::{Classify, Fault};

/// A problem with what the user gave us; exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

impl Classify for InputError {
    fn fault(&self) -> Fault {
        Fault::Input
    }
}

pub fn input_error(message: impl Into<String>) -> anyhow::Error {
    InputError(message.into()).into()
}

/// `ids` (what each of `given` names, in order) when no two are the same; else an input error naming
/// the repeated one and how it was given, so that a list never asks or pays for the same work twice.
pub fn each_once<T: PartialEq>(
    option: &str,
    given: &[&str],
    ids: Vec<T>,
    name: impl Fn(&T) -> String,
) -> anyhow::Result<Vec<T>> {
    for (i, id) in ids.iter().enumerate() {
        let repeats: Vec<&str> = (0..ids.len())
            .filter(|&j| ids[j] == *id)
            .map(|j| given.get(j).map_or("", |g| g.trim()))
            .collect();
        if repeats.len() > 1 && ids[..i].iter().all(|earlier| earlier != id) {
            let times = match repeats.len() {
                2 => "twice".to_string(),
                n => format!("{n} times"),
            };
            return Err(input_error(format!(
                "{option} names {} {times} (as {}): give each once",
                name(id),
                repeats.join(", ")
            )));
        }
    }
    Ok(ids)
}

/// A failure of the machine, the network or another process (a folder that cannot be made, a
/// server that does not answer); exit code 1 whatever wrapped it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MachineError(pub String);

impl Classify for MachineError {
    fn fault(&self) -> Fault {
        Fault::Machine
    }
}

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

impl Classify for Advised {
    fn fault(&self) -> Fault {
        self.error.fault()
    }
}

/// What an error says: its message, then each cause's that the messages before it do not already
/// end with (an error that quotes its source, "cannot write F: Permission denied", would say it twice).
pub fn said(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// The exit code of an error: the innermost error of the chain that knows whose fault it is decides
/// (2 the user's input, 1 the machine); an error no type of the workbench made (an I/O error at the
/// edge) is the machine's.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    error
        .chain()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .find_map(fault_of)
        .unwrap_or(Fault::Machine)
        .exit_code()
}

/// The fault `e` states, if it is one of the workbench's error types (each says it itself, next to its
/// definition).
fn fault_of(e: &(dyn std::error::Error + 'static)) -> Option<Fault> {
    macro_rules! stated_by {
        ($($kind:ty),* $(,)?) => {
            $(if let Some(e) = e.downcast_ref::<$kind>() {
                return Some(e.fault());
            })*
        };
    }
    stated_by!(
        InputError,
        MachineError,
        Advised,
        crate::files::FileError,
        crate::journal::JournalError,
        crate::config::ConfigError,
        crate::templates::TemplateError,
        crate::llm::LlmError,
        crate::study::StudyError,
        crate::annotation::AnnotationError,
        crate::session::SessionError,
    );
    None
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn a_cause_the_message_quotes_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot write f.jsonl: {source}")]
        struct Quoting {
            source: std::io::Error,
        }
        let denied = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = anyhow::Error::new(Quoting { source: denied() }).context("import stopped");
        assert_eq!(said(&e), format!("import stopped: cannot write f.jsonl: {}", denied()));
        let e = anyhow::Error::new(denied()).context("cannot write f.jsonl");
        assert_eq!(said(&e), format!("cannot write f.jsonl: {}", denied()));
    }

    #[test]
    fn the_innermost_error_that_knows_whose_fault_it_is_decides() {
        let input: anyhow::Result<()> = Err(input_error("no scale \"XYZ\""));
        assert_eq!(exit_code(&input.context("while planning the run").unwrap_err()), 2);
        let disk = std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left");
        let wrapped = Err::<(), _>(crate::files::FileError::Write {
            path: "out.csv".into(),
            error: disk,
        })
        .context(InputError("exporting the session you named".into()))
        .unwrap_err();
        assert_eq!(
            exit_code(&wrapped),
            1,
            "a full disk is the machine's, whatever wrapped it"
        );
        let config: anyhow::Error = crate::config::ConfigError::NoLocation.into();
        assert_eq!(exit_code(&config.context("loading the config")), 2);
        let unknown = anyhow::anyhow!("something no type of ours made");
        assert_eq!(exit_code(&unknown), 1);
    }

    #[test]
    fn a_list_that_names_something_twice_is_refused_saying_how() {
        let given = ["hermione", "snape-en", " Hermione Granger", "hermione-en"];
        let ids = vec!["hermione-en", "snape-en", "hermione-en", "hermione-en"];
        let e = each_once("--characters", &given, ids, |id| id.to_string()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--characters names hermione-en 3 times (as hermione, Hermione Granger, hermione-en): give each once"
        );
        assert_eq!(exit_code(&e), 2);
        let e = each_once("--methods", &["oc", "sr", "oc"], vec!["oc", "sr", "oc"], |id| {
            id.to_string()
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "--methods names oc twice (as oc, oc): give each once");
        let once = each_once("--scales", &["BFI", "GSE"], vec!["BFI", "GSE"], |id| id.to_string());
        assert_eq!(once.unwrap(), ["BFI", "GSE"]);
    }
}
