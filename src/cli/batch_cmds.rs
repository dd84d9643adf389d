//! Batch mode at the command line: `run --batch` / `--batch-files DIR` (and `assess`), and
//! `batch import` / `batch export`, which carry a session in batch files mode from phase to phase.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::drive::{self, Batch};
use super::{Ctx, input_error};
use crate::session::Start;
use crate::session::batch::{self, BatchMode, History};
use crate::study::{Interviews, Kind, Observers, Rolebench};

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
            std::fs::create_dir_all(dir)
                .map_err(|e| input_error(format!("cannot make the folder {}: {e}", dir.display())))?;
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
        /// Print one JSON object: {"session", "requests"} while phases remain, else run's {"session", "path", "summary"}
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

pub fn batch(ctx: &Ctx, command: BatchCommand, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let store = ctx.store()?;
    let (session, json, batch) = match command {
        BatchCommand::Import { session, results, json } => {
            let events = store.load(&store.own(&session)?)?;
            let import = batch::check_import(&events, &results)?;
            let dir = match History::of(&events).mode() {
                Some(BatchMode::Files { dir, .. }) => dir,
                _ => results.parent().map(Path::to_path_buf).unwrap_or_default(),
            };
            let batch = Batch {
                mode: BatchMode::Files { dir, output: None },
                import: Some(import),
            };
            (session, json, batch)
        }
        BatchCommand::Export { session, output, json } => {
            let output = std::path::absolute(&output).unwrap_or(output);
            let dir = output.parent().map(Path::to_path_buf).unwrap_or_default();
            let batch = Batch {
                mode: BatchMode::Files {
                    dir,
                    output: Some(output),
                },
                import: None,
            };
            (session, json, batch)
        }
    };
    let events = store.load(&store.own(&session)?)?;
    let id = session.clone();
    let options = drive::Options {
        batch: Some(batch),
        json,
        ..Default::default()
    };
    match crate::study::kind_of(&events) {
        Some(Kind::Interviews) => drive::drive::<Interviews>(ctx, Start::Resume { id }, options, out),
        Some(Kind::Observers) => drive::drive::<Observers>(ctx, Start::Resume { id }, options, out),
        Some(Kind::Rolebench) => drive::drive::<Rolebench>(ctx, Start::Resume { id }, options, out),
        None => Err(input_error(format!("session {session} has no first record"))),
    }
}
