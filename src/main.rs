use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use incharacter::cli::{Cli, InputError, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(command) = cli.command else {
        // The workbench screens are not built yet; without a subcommand, show what there is.
        let _ = Cli::command().print_help();
        return ExitCode::SUCCESS;
    };
    if let Some(dir) = incharacter::paths::data_dir() {
        incharacter::logging::init(&dir);
    }
    let mut stdout = std::io::stdout().lock();
    match run(command, &mut stdout) {
        Ok(code) => code,
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
