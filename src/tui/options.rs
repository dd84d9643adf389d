//! What the workbench is opened on: the replay of a session, or the guided tour (`demo`).

use std::path::PathBuf;

use super::app::Replay;
use crate::session::Store;

#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Open on the replay of this session (an id in the data dir, a session folder or a journal).
    pub replay: Option<(String, Replay)>,
    /// A guided tour: the app says what to look at next as the replay goes.
    pub demo: bool,
}

/// Bad input to the workbench's options (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error("--speed {0}: a number from {MIN_SPEED} up (1 is the original timing), or `instant`")]
    Speed(String),
    #[error("this build has no sample sessions (INCHARACTER_SAMPLES sets a folder of them)")]
    NoSamples,
    #[error("{}: no interview session to replay", .0.display())]
    NoDemoSession(PathBuf),
    #[error(
        "the workbench needs a terminal, and standard input or output is not one here; without one, the \
         headless subcommands work (run, assess, observe, rolebench, report, export, sessions, …: `incharacter --help`)"
    )]
    NoTerminal,
}

impl Options {
    /// `replay <SESSION> --speed S`.
    pub fn replay(session: String, speed: &str) -> anyhow::Result<Options> {
        Ok(Options {
            replay: Some((session, replay_speed(speed)?)),
            demo: false,
        })
    }

    /// `demo --speed S`: the guided tour on the newest interview sample.
    pub fn demo(speed: &str) -> anyhow::Result<Options> {
        let speed = replay_speed(speed)?;
        let store = Store::new(&crate::paths::data_dir().unwrap_or_default());
        let samples = store.samples().ok_or(OptionsError::NoSamples)?;
        let first = store
            .demo_session()
            .ok_or_else(|| OptionsError::NoDemoSession(samples.to_path_buf()))?;
        Ok(Options {
            replay: Some((first.display().to_string(), speed)),
            demo: true,
        })
    }
}

/// The slowest replay: a hundredth of the original pace (a minute's gap, 100 minutes).
pub const MIN_SPEED: f64 = 0.01;

/// `--speed`: a factor from [`MIN_SPEED`] up, or `instant`.
fn replay_speed(speed: &str) -> Result<Replay, OptionsError> {
    Ok(match speed {
        "instant" => Replay::Instant,
        s => match s.parse::<f64>() {
            Ok(f) if f >= MIN_SPEED && f.is_finite() => Replay::Speed(f),
            _ => return Err(OptionsError::Speed(s.to_string())),
        },
    })
}
