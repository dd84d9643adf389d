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
        .with_writer(Mutex::new(writer(file)))
        .with_ansi(false)
        .with_max_level(level)
        .try_init();
}

/// The log file's writer: what servers and models said goes into log lines, and `tail -f` or `cat`
/// of the log must not run their escape sequences, so control characters are taken out as they are
/// on the terminal (line by line; a line's end stays).
fn writer(file: std::fs::File) -> crate::text::Safe<Lossy> {
    crate::text::Safe::new(Lossy(file))
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

#[cfg(test)]
mod tests {
    #[test]
    fn escape_sequences_a_server_sent_do_not_reach_the_log() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("incharacter.log");
        let file = std::fs::File::create(&path).unwrap();
        let mut w = super::writer(file);
        w.write_all(b"WARN attempt failed reason=HTTP 400: \x1b]0;PWNED\x07\x1b[2J\x1b[41mjson error\n")
            .unwrap();
        w.write_all("next line \u{9b}31m ok\n".as_bytes()).unwrap();
        drop(w);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        assert!(text.contains("json error\n") && text.ends_with("ok\n"), "{text:?}");
    }
}
