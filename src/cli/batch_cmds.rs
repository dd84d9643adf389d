//! Batch mode at the command line: `run --batch` / `--batch-files DIR` (and `assess`), and
//! `batch import` / `batch export`, which carry a session in batch files mode from phase to phase.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::drive::{self, Batch};
use super::{Ctx, input_error, machine_error};
use crate::session::batch::{self, BatchMode};
use crate::session::resume::Resume;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct BatchArgs {
    /// Send each phase (the interviews, then the judge's calls, then its re-asks) as one batch through
    /// the providers' OpenAI Batch API, polled every `batch_poll_ms`; a resumed run polls the same batch
    #[arg(long, conflicts_with = "batch_files")]
    pub batch: bool,
    /// Send nothing: write the first phase's requests as a batch file in DIR (for `vllm run-batch` or
    /// any batch API), print its path, and go on with `incharacter batch import`
    #[arg(long, value_name = "DIR")]
    pub batch_files: Option<PathBuf>,
}

impl BatchArgs {
    pub(super) fn batch(&self) -> anyhow::Result<Option<Batch>> {
        if let Some(dir) = &self.batch_files {
            // Never among the workbench's own files (a folder of requests in sessions/ would be
            // listed as a broken session).
            crate::files::not_own(&dir.join("requests.jsonl"), &crate::session::store::kept())?;
            std::fs::create_dir_all(dir).map_err(|e| mkdir_error(dir, &e))?;
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            return Ok(Some(Batch {
                mode: BatchMode::Files { dir, output: None },
                import: None,
            }));
        }
        Ok(self.batch.then_some(Batch {
            mode: BatchMode::Api,
            import: None,
        }))
    }
}

/// Why `--batch-files DIR` could not be made, and whose fault that is: a path that cannot be a folder
/// (a file is there, or one of its parents is a file; a name the filesystem refuses) is the user's
/// input (exit 2); anything else (permissions, a read-only or full filesystem, an I/O error) is the
/// machine's (exit 1).
fn mkdir_error(dir: &Path, e: &std::io::Error) -> anyhow::Error {
    use std::io::ErrorKind;
    let dir = dir.display().to_string();
    match e.kind() {
        ErrorKind::AlreadyExists | ErrorKind::NotADirectory | ErrorKind::InvalidFilename | ErrorKind::InvalidInput => {
            input_error(format!(
                "--batch-files {dir}: cannot make the folder ({e}); give a folder, or a path where one can be made"
            ))
        }
        _ => machine_error(format!(
            "--batch-files {dir}: cannot make the folder ({e}); nothing was sent or written"
        )),
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum BatchCommand {
    /// Import the results of a session's batch file (from `vllm run-batch`, or downloaded from a batch
    /// API) and go on: prints the next phase's requests file, or the run's summary once it is complete.
    /// A file with a line that is not JSON or names an unknown custom_id is refused whole (line:column)
    /// and changes nothing
    Import {
        /// The session (id)
        session: String,
        /// The results file (JSONL, lines in any order)
        results: PathBuf,
        /// Stop before writing the next phase once this sitting's imported results have cost USD (at
        /// the providers' prices; see `max_cost` in the config)
        #[arg(long, value_name = "USD", value_parser = drive::usd)]
        max_cost: Option<f64>,
        /// Print one JSON object: {"session", "requests", "usage"} while phases remain, else the run's {"session", "path", "summary", "usage"}
        #[arg(long)]
        json: bool,
    },
    /// Write again, as one batch file, the requests the session still needs
    Export {
        /// The session (id)
        session: String,
        /// The batch file to write
        #[arg(short = 'o', long)]
        output: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

/// Refuses `batch import` and `export` on a session whose batch went through a Batch API and has not
/// ended: its results come from the provider, which `run --resume` polls.
fn not_following_an_api_batch(session: &str, events: &[crate::study::Event]) -> anyhow::Result<()> {
    let history = batch::History::of(events);
    let Some((phase, provider, _, id)) = history.open().into_iter().next() else {
        return Ok(());
    };
    let id = id.map_or_else(|| "being created".to_string(), |id| crate::text::visible(&id));
    Err(super::input_error(format!(
        "session {session} waits for {provider}'s batch {id} (phase {phase}, sent through the Batch API), \
         not for a results file: `incharacter run --resume {session}` follows it to its end"
    )))
}

pub fn batch(ctx: &Ctx, command: BatchCommand, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let store = ctx.store()?;
    let (session, json, batch, max_cost) = match command {
        BatchCommand::Import {
            session,
            results,
            max_cost,
            json,
        } => {
            let session = store.own_id(&session)?;
            let own = store.own(&session)?;
            let events = store.load(&own)?;
            not_following_an_api_batch(&session, &events)?;
            let import = batch::check_import(&events, &own, &results)?;
            let dir = match Resume::from_events(&session, &events).and_then(|how| how.batch) {
                Some(BatchMode::Files { dir, .. }) => dir,
                _ => results.parent().map(Path::to_path_buf).unwrap_or_default(),
            };
            let batch = Batch {
                mode: BatchMode::Files { dir, output: None },
                import: Some(import),
            };
            (session, json, batch, max_cost)
        }
        BatchCommand::Export { session, output, json } => {
            // The session records the file it wrote (it made one named "-").
            if output == Path::new("-") {
                return Err(super::input_error(
                    "batch export writes a file the session records: give its name with -o (not -, standard output)",
                ));
            }
            let output = std::path::absolute(&output).unwrap_or(output);
            crate::files::check_output(&output, &crate::session::store::kept())?;
            if let Ok(id) = store.own_id(&session)
                && let Ok(own) = store.own(&id)
                && let Ok(events) = store.load(&own)
            {
                not_following_an_api_batch(&id, &events)?;
            }
            let dir = output.parent().map(Path::to_path_buf).unwrap_or_default();
            let batch = Batch {
                mode: BatchMode::Files {
                    dir,
                    output: Some(output),
                },
                import: None,
            };
            (session, json, batch, None)
        }
    };
    let options = drive::Options {
        batch: Some(batch),
        json,
        cost: drive::CostArgs { max_cost, yes: false },
        ..Default::default()
    };
    // The session goes on as its kind, as every resume does, in the files mode given here.
    drive::resume(ctx, Resume::of(&store, &session)?, options, out)
}

#[cfg(test)]
mod tests {
    use std::io::{Error, ErrorKind};

    use super::*;
    use crate::cli::exit_code;

    fn files(path: &Path) -> anyhow::Result<Option<Batch>> {
        BatchArgs {
            batch: false,
            batch_files: Some(path.to_path_buf()),
        }
        .batch()
    }

    /// A path that cannot be a folder is the user's (exit 2); a filesystem that refuses to make one
    /// is the machine's (exit 1). Either way the error names the path.
    #[test]
    fn a_batch_files_folder_that_cannot_be_made_is_the_users_path_or_the_machines_failure() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "").unwrap();
        // A file where the folder would be (AlreadyExists), and a folder under a file (ENOTDIR).
        for path in [file.clone(), file.join("batches")] {
            let e = files(&path).err().expect("no folder can be made there");
            assert_eq!(exit_code(&e), 2, "{e}");
            assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            assert!(e.to_string().contains("give a folder"), "{e}");
        }
        // sysfs makes no folder, even for root (EPERM): not the path's fault but the filesystem's.
        let sys = Path::new("/sys/incharacter-batches");
        if Path::new("/sys/kernel").is_dir() {
            let e = files(sys).err().expect("sysfs makes no folder");
            assert_eq!(exit_code(&e), 1, "{e}");
            assert!(e.to_string().contains("/sys/incharacter-batches"), "{e}");
        }
        // By the error's kind, whatever this machine can reproduce.
        for kind in [
            ErrorKind::StorageFull,
            ErrorKind::ReadOnlyFilesystem,
            ErrorKind::PermissionDenied,
            ErrorKind::QuotaExceeded,
            ErrorKind::Other,
        ] {
            assert_eq!(exit_code(&mkdir_error(sys, &Error::from(kind))), 1, "{kind:?}");
        }
        for kind in [
            ErrorKind::NotADirectory,
            ErrorKind::AlreadyExists,
            ErrorKind::InvalidFilename,
        ] {
            assert_eq!(exit_code(&mkdir_error(sys, &Error::from(kind))), 2, "{kind:?}");
        }
        // A folder that can be made is, and given as an absolute path.
        let made = dir.path().join("a/b");
        let Some(Batch {
            mode: BatchMode::Files {
                dir: given,
                output: None,
            },
            import: None,
        }) = files(&made).unwrap()
        else {
            panic!("files mode")
        };
        assert!(made.is_dir());
        assert_eq!(given, made);
    }
}
