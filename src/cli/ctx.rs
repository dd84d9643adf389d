//! What the subcommands share: the runtime, the catalog and config loaded once, the data dir.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::{input_error, load_catalog};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::paths;
use crate::session::Store;

/// What the subcommands share: the process's one async runtime, and the catalog and config, each
/// loaded once and only by the commands that need them.
pub struct Ctx {
    runtime: tokio::runtime::Handle,
    catalog: OnceLock<Arc<Catalog>>,
    config: OnceLock<Config>,
    /// How the workbench reads the config's `[tui]` section, for `doctor` (given by the binary,
    /// which holds both faces: neither imports the other).
    workbench: Option<fn(&Config) -> crate::doctor::Workbench>,
}

impl Ctx {
    pub fn new(runtime: tokio::runtime::Handle) -> Ctx {
        Ctx {
            runtime,
            catalog: OnceLock::new(),
            config: OnceLock::new(),
            workbench: None,
        }
    }

    /// With the workbench's reading of the config's `[tui]` section (see [`Ctx::new`]).
    pub fn with_workbench(mut self, check: fn(&Config) -> crate::doctor::Workbench) -> Ctx {
        self.workbench = Some(check);
        self
    }

    /// What the workbench says of `config`'s `[tui]` section; nothing without the workbench.
    pub fn workbench(&self, config: &Config) -> crate::doctor::Workbench {
        self.workbench.map(|check| check(config)).unwrap_or_default()
    }

    /// Bundled plus user scales and characters; problems in user files are warned about and skipped.
    pub fn catalog(&self) -> anyhow::Result<Arc<Catalog>> {
        if let Some(c) = self.catalog.get() {
            return Ok(c.clone());
        }
        if let Some(dir) = paths::data_dir() {
            not_a_file(&dir)?;
        }
        // Through the terminal gate: a skipped file's name is the user's, escape sequences and all.
        let catalog = Arc::new(load_catalog(&mut crate::text::stderr())?);
        Ok(self.catalog.get_or_init(|| catalog).clone())
    }

    pub fn config(&self) -> anyhow::Result<&Config> {
        if let Some(c) = self.config.get() {
            return Ok(c);
        }
        let config = Config::load_user()?;
        if let Some(path) = paths::named_config_missing() {
            crate::note!("{}", paths::config_missing_warning(&path));
        }
        Ok(self.config.get_or_init(|| config))
    }

    pub fn data_dir(&self) -> anyhow::Result<PathBuf> {
        let dir = paths::data_dir().ok_or_else(|| input_error("no data dir: set INCHARACTER_DATA_DIR"))?;
        not_a_file(&dir)?;
        Ok(dir)
    }

    /// The sessions, checked against the catalog's scales as they are loaded.
    pub fn store(&self) -> anyhow::Result<Store> {
        Ok(Store::new(&self.data_dir()?).checked(self.catalog()?))
    }

    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

/// A data dir that is a file (or a link to one) is the machine's setup, not the command's input: said as
/// such before anything in it is read (exit 1).
fn not_a_file(dir: &Path) -> anyhow::Result<()> {
    match paths::data_dir_problem(dir) {
        Some(problem) => anyhow::bail!("{problem}"),
        None => Ok(()),
    }
}
