//! The binary: parse the command line, build the process's one async runtime, and hand the command
//! to the workbench (no subcommand, `demo`, `replay`) or to the headless subcommands. Errors are
//! printed here, with the exit code they call for (2 the user's input, 1 anything else).

use std::process::ExitCode;

use clap::Parser;
use incharacter::cli::{self, Cli, Command, Ctx};
use incharacter::tui;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(dir) = incharacter::paths::data_dir() {
        incharacter::logging::init(&dir);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            incharacter::note!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let handle = runtime.handle().clone();
    // A file past `ulimit -f` would kill the process mid-write (SIGXFSZ), leaving its temporary
    // beside the target. Caught, the write fails with EFBIG like a full disk's ENOSPC: the
    // temporary is removed and the file named. Tokio's handler stays for the process's life.
    if let Err(e) = runtime
        .block_on(async { tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(libc::SIGXFSZ)) })
    {
        tracing::warn!("cannot catch SIGXFSZ: {e}");
    }
    let result = match cli.command {
        None => tui::main(tui::Options::default(), &handle).map(|()| ExitCode::SUCCESS),
        Some(Command::Demo { speed }) => tui::Options::demo(&speed)
            .and_then(|o| tui::main(o, &handle))
            .map(|()| ExitCode::SUCCESS),
        Some(Command::Replay { session, speed }) => tui::Options::replay(session, &speed)
            .and_then(|o| tui::main(o, &handle))
            .map(|()| ExitCode::SUCCESS),
        Some(command) => {
            // Everything a command prints passes the one gate that lets no escape sequence through.
            let mut stdout = incharacter::text::Safe::named(std::io::stdout().lock(), "standard output");
            let ctx = Ctx::new(handle).with_workbench(tui::check_tui_section);
            // What is still held (a last line without its end) goes now, so a failure is said.
            cli::run(command, &ctx, &mut stdout)
                .and_then(|code| std::io::Write::flush(&mut stdout).map(|()| code).map_err(Into::into))
        }
    };
    // Calls still in flight (a cancelled run) are not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match result {
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
            // Errors quote files, servers and processes (pip's stderr, a provider's message): never
            // an escape sequence to the terminal, whatever layer forgot.
            incharacter::note!("error: {}", cli::said(&error));
            let input = error.downcast_ref::<tui::OptionsError>().is_some();
            ExitCode::from(if input { 2 } else { cli::exit_code(&error) })
        }
    }
}
