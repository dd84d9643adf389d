//! What the doctor knows about this machine, and the quick look that gathers it: the config, the data
//! dir, the embedded model's file, each configured provider's key and roles, the terminal. Nothing
//! here sends a request or loads a model; `examine` fills in what that takes.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::EMBEDDED_MODEL;
use crate::config::{Config, ProviderConfig, ProviderKind};
use crate::llm::Role;

/// The data dir: where it is, whether a file can be made there, and how much it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct DataDir {
    pub path: PathBuf,
    pub writable: Result<(), String>,
    pub bytes: u64,
}

impl DataDir {
    /// Creates the folder if needed, then makes and removes a temporary file in it.
    pub fn look(path: PathBuf) -> DataDir {
        let writable = match crate::paths::data_dir_problem(&path) {
            Some(problem) => Err(problem),
            None => std::fs::create_dir_all(&path)
                .and_then(|()| tempfile::NamedTempFile::new_in(&path).map(drop).map_err(crate::files::unnamed))
                .map_err(|e| e.to_string()),
        };
        let bytes = size_on_disk(&path);
        DataDir { path, writable, bytes }
    }
}

/// Bytes of the files under `path` (links are not followed).
fn size_on_disk(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => stack.push(entry.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Whether the embedded model's file is the one `model fetch` recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum Checksum {
    /// Not computed (yet).
    Unchecked,
    /// No checksum is recorded for this model (a GGUF the user added).
    Unrecorded,
    Matches,
    Differs,
    Unreadable(String),
}

/// The embedded model.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub name: String,
    /// Whether this build has the embedded runner (feature `local-model`).
    pub built: bool,
    /// The GGUF, when fetched.
    pub path: Option<PathBuf>,
    pub checksum: Checksum,
    /// How long loading it took, or why it failed; `None` until examined.
    pub load: Option<Result<Duration, String>>,
}

/// How a provider answered the doctor.
#[derive(Debug, Clone, PartialEq)]
pub enum Reach {
    /// Not tried: not examined yet, or something stops it before any request.
    Untried,
    /// The tiny request came back: after `ms`, as valid JSON or not, with what had to be adapted,
    /// and the context the server then said it has (or the config states).
    Answered {
        ms: u64,
        json: bool,
        adapted: Vec<String>,
        context: Option<usize>,
    },
    /// A local provider's model loaded.
    Loaded(Duration),
    Failed {
        error: String,
        /// The key was rejected (401/403).
        unauthorized: bool,
        /// No first token within the probe's wait, which is shorter than a run's: slow, perhaps
        /// loading its model, not necessarily down.
        slow: bool,
    },
}

/// The smallest context an interview's requests fit in (the config refuses a `context_tokens`
/// below it): a server that says it has less fails the doctor for the roles that need it.
pub(super) const SMALLEST_CONTEXT: usize = 1024;

/// How long a provider's tiny request waits for its first token: shorter than a run's wait, so one
/// slower than this is said to be slow, not down.
pub(super) const PROBE_FIRST_TOKEN_S: f64 = 20.0;

/// One configured provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    pub config: ProviderConfig,
    pub roles: Vec<Role>,
    /// Whether the key is there (its variable set, or in the config file); `None`: it needs none.
    pub key: Option<bool>,
    /// Why the key cannot be used as it is (its variable unset, or holding a line break).
    pub key_problem: Option<String>,
    /// A local provider's model: whether its file is there.
    pub fetched: Option<bool>,
    /// Why a local provider's model that is known here cannot be used (its registered file changed
    /// or went away, the registry cannot be read); `None` when it is simply not there.
    pub unusable: Option<String>,
    pub reach: Reach,
}

impl Provider {
    fn look(
        config: &ProviderConfig,
        roles: Vec<Role>,
        data_dir: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Provider {
        let local = config.kind == ProviderKind::Local;
        let fetched = local.then(|| local_model_path(data_dir, local_model(config)).is_some());
        let unusable = (fetched == Some(false))
            .then(|| local_model_problem(data_dir, local_model(config)))
            .flatten();
        Provider {
            config: config.clone(),
            roles,
            key: config.key_present(env),
            key_problem: config.resolve_key(env).err().map(|e| e.to_string()),
            fetched,
            unusable,
            reach: Reach::Untried,
        }
    }

    /// What stops the provider before any request is sent.
    pub fn problem(&self) -> Option<String> {
        if let Some(why) = &self.unusable {
            return Some(why.clone());
        }
        if self.fetched == Some(false) {
            return Some(format!(
                "the local model {} is not fetched yet",
                local_model(&self.config)
            ));
        }
        match (&self.config.api_key_env, self.key) {
            (Some(var), Some(false)) => Some(format!("the key variable {} is not set", var)),
            _ => self.key_problem.clone(),
        }
    }

    /// Whether it answered (in a context an interview's requests fit in) or loaded; or is only slower
    /// to its first token than the doctor waits (a run waits longer: its check warns).
    pub(super) fn serves(&self) -> bool {
        match self.reach {
            Reach::Answered { context, .. } => context.is_none_or(|n| n >= SMALLEST_CONTEXT),
            Reach::Loaded(_) | Reach::Failed { slow: true, .. } => true,
            _ => false,
        }
    }
}

/// A local provider's model (the embedded one when the config names none).
pub(super) fn local_model(p: &ProviderConfig) -> &str {
    if p.model.is_empty() { EMBEDDED_MODEL } else { &p.model }
}

#[cfg(feature = "local-model")]
pub(super) fn local_model_path(data_dir: Option<&Path>, name: &str) -> Option<PathBuf> {
    use crate::llm::local;
    data_dir.and_then(|d| local::resolve(&local::models_dir(d), name).ok())
}

#[cfg(not(feature = "local-model"))]
pub(super) fn local_model_path(_: Option<&Path>, _: &str) -> Option<PathBuf> {
    None
}

/// Why the local model `name`, which the models directory lists, cannot be used (a registered file
/// changed or gone); why the directory's registry cannot be read. `None` when the name is simply not
/// there (not fetched, or not registered).
#[cfg(feature = "local-model")]
fn local_model_problem(data_dir: Option<&Path>, name: &str) -> Option<String> {
    use crate::llm::local;
    let models = local::models_dir(data_dir?);
    match local::list(&models) {
        Err(e) => Some(e.to_string()),
        Ok(listed) if listed.iter().any(|m| m.name == name) => local::resolve(&models, name).err().map(|e| e.to_string()),
        Ok(_) => None,
    }
}

#[cfg(not(feature = "local-model"))]
fn local_model_problem(_: Option<&Path>, _: &str) -> Option<String> {
    None
}

/// The terminal the command runs in, as far as it matters to the workbench.
#[derive(Debug, Clone, PartialEq)]
pub struct Terminal {
    /// Columns and rows, when the terminal says.
    pub size: Option<(u16, u16)>,
    pub colorterm: Option<String>,
    pub term: Option<String>,
    /// The variable that decides the character set (`LC_ALL`, `LC_CTYPE` or `LANG`, the first set) and
    /// its value.
    pub locale: Option<(String, String)>,
}

impl Terminal {
    /// `None` when standard input or output is not a terminal (a script, a pipe): the workbench needs
    /// both, the headless commands neither.
    pub fn detect(env: &dyn Fn(&str) -> Option<String>) -> Option<Terminal> {
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return None;
        }
        // A pseudo-terminal nobody sized (`script`, some CI runners) says 0×0: that is not known.
        let size = ratatui::crossterm::terminal::size()
            .ok()
            .filter(|&(w, h)| w > 0 && h > 0);
        Some(Terminal::from_env(size, env))
    }

    pub fn from_env(size: Option<(u16, u16)>, env: &dyn Fn(&str) -> Option<String>) -> Terminal {
        let set = |k: &str| env(k).filter(|v| !v.is_empty());
        Terminal {
            size,
            colorterm: set("COLORTERM"),
            term: set("TERM"),
            locale: ["LC_ALL", "LC_CTYPE", "LANG"]
                .into_iter()
                .find_map(|k| set(k).map(|v| (k.to_string(), v))),
        }
    }
}

/// The config's `[tui]` section as the workbench reads it: key bindings it refuses to start with, theme
/// files it skips, a theme it does not have. The workbench knows its screens and actions, so it fills
/// this in ([`Facts::with_workbench`]); the quick look leaves it empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Workbench {
    /// Located errors in `[tui.keys]`: the workbench does not start with them.
    pub key_errors: Vec<String>,
    /// Located errors of user theme files (skipped).
    pub theme_errors: Vec<String>,
    /// The bindings the config makes, and the theme it names.
    pub bindings: usize,
    pub theme: Option<String>,
    /// Whether the named theme is one the workbench has (else it uses the default).
    pub theme_found: bool,
}

/// Everything the doctor looked at.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub config_file: Option<PathBuf>,
    /// Whether the config file exists (without one, the defaults apply).
    pub config_found: bool,
    /// Whether `$INCHARACTER_CONFIG` named it (one named and missing is likely a mistyped path).
    pub config_named: bool,
    /// The config, or the loader's message (it names file:line:column).
    pub config: Result<Config, String>,
    pub data_dir: Option<DataDir>,
    pub model: Model,
    /// The configured providers, in the config's order.
    pub providers: Vec<Provider>,
    /// `python3 -m pip --version`'s answer, or why there is none; `None` until examined.
    pub pip: Option<Result<String, String>>,
    /// `None`: no terminal.
    pub terminal: Option<Terminal>,
    /// Whether `examine` has run.
    pub examined: bool,
    pub workbench: Workbench,
}

impl Facts {
    /// This machine's quick facts: the user's config file and data dir, the process's environment and
    /// terminal.
    pub fn here(config: Result<Config, String>) -> Facts {
        let env = |k: &str| std::env::var(k).ok();
        Facts::quick(
            crate::paths::config_file(),
            config,
            crate::paths::data_dir(),
            &env,
            Terminal::detect(&env),
        )
    }

    /// What can be known at once: no request is sent and no model loaded.
    pub fn quick(
        config_file: Option<PathBuf>,
        config: Result<Config, String>,
        data_dir: Option<PathBuf>,
        env: &dyn Fn(&str) -> Option<String>,
        terminal: Option<Terminal>,
    ) -> Facts {
        let data_dir = data_dir.map(DataDir::look);
        let data = data_dir.as_ref().map(|d| d.path.as_path());
        let providers = config.as_ref().map_or_else(|_| Vec::new(), |c| providers(c, data, env));
        Facts {
            config_found: config_file.as_deref().is_some_and(Path::is_file),
            config_named: env("INCHARACTER_CONFIG").is_some_and(|v| !v.is_empty()),
            config_file,
            config,
            model: Model {
                name: EMBEDDED_MODEL.into(),
                built: cfg!(feature = "local-model"),
                path: local_model_path(data, EMBEDDED_MODEL),
                checksum: Checksum::Unchecked,
                load: None,
            },
            data_dir,
            providers,
            pip: None,
            terminal,
            examined: false,
            workbench: Workbench::default(),
        }
    }

    /// With what the workbench says of the config's `[tui]` section.
    pub fn with_workbench(mut self, workbench: Workbench) -> Facts {
        self.workbench = workbench;
        self
    }

    /// What stops the provider `name` before any request (see [`Provider::problem`]).
    pub fn problem(&self, name: &str) -> Option<String> {
        self.providers.iter().find(|p| p.config.name == name)?.problem()
    }

    /// The embedded model has just been fetched to `path` (the welcome screen's `f`).
    pub fn fetched(&mut self, path: PathBuf) {
        self.model.path = Some(path);
        for p in &mut self.providers {
            if p.fetched == Some(false) && local_model(&p.config) == self.model.name {
                p.fetched = Some(true);
            }
        }
    }
}

/// The configured providers, in the config's order, with the roles they serve.
pub(super) fn providers(
    config: &Config,
    data_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<Provider> {
    config
        .providers
        .iter()
        .map(|p| {
            let roles = Role::ALL
                .into_iter()
                .filter(|r| config.roles.get(r) == Some(&p.name))
                .collect();
            Provider::look(p, roles, data_dir, env)
        })
        .collect()
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_dir_is_made_and_measured() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("fresh");
        assert!(DataDir::look(dir.clone()).writable.is_ok());
        std::fs::create_dir_all(dir.join("sessions/a")).unwrap();
        std::fs::write(dir.join("sessions/a/journal.jsonl"), [b'x'; 1000]).unwrap();
        let look = DataDir::look(dir);
        assert_eq!(look.bytes, 1000);
    }
}
