//! The log file: `<data dir>/logs/incharacter.log`. Never the terminal (the TUI owns it), never a key
//! (nothing logs one: keys live only in `Secret`, whose Debug is a placeholder).

use std::path::Path;
use std::sync::Mutex;

/// Starts logging to the data dir; `INCHARACTER_LOG` sets the filter level (default info).
/// Logging is best-effort: a data dir that cannot be written leaves it off.
pub fn init(data_dir: &Path) {
    let dir = data_dir.join("logs");
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("incharacter.log"))
    else {
        return;
    };
    let level = match std::env::var("INCHARACTER_LOG").as_deref() {
        Ok("debug") => tracing::Level::DEBUG,
        Ok("trace") => tracing::Level::TRACE,
        Ok("warn") => tracing::Level::WARN,
        _ => tracing::Level::INFO,
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(Mutex::new(Lossy(file)))
        .with_ansi(false)
        .with_max_level(level)
        .try_init();
}

/// The log file, dropping lines it cannot write (a full disk must not spill log complaints onto
/// the terminal; the journal's own error says what happened).
struct Lossy(std::fs::File);

impl std::io::Write for Lossy {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(self.0.write(buf).unwrap_or(buf.len()))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}
