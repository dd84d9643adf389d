use std::process::ExitCode;

use clap::Parser;
use incharacter::cli::{Cli, InputError, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(dir) = incharacter::paths::data_dir() {
        incharacter::logging::init(&dir);
    }
    let Some(command) = cli.command else {
        // No subcommand: the workbench.
        return match incharacter::tui::main(incharacter::tui::Options::default()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        };
    };
    let mut stdout = std::io::stdout().lock();
    match run(command, &mut stdout) {
        Ok(code) => code,
        // The reader went away (`… | head`): what it wanted was written; nothing to report.
        Err(error)
            if error
                .chain()
                .filter_map(|e| e.downcast_ref::<std::io::Error>())
                .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            if error.downcast_ref::<InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
