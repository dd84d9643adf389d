//! The slow look: each provider's tiny request (short timeouts, no retries), the embedded model's
//! checksum and load, pip. What it finds is added to the quick [`Facts`].

use std::path::Path;
use std::time::Duration;

use super::facts::{Checksum, Facts, PROBE_FIRST_TOKEN_S, Reach, local_model, local_model_path};
use crate::config::ProviderKind;
use crate::llm::LlmError;

/// A provider's tiny request waits at most this long for a connection: the doctor says "no usable
/// answer" in seconds, where a run would wait and retry (for its first token, [`PROBE_FIRST_TOKEN_S`]).
const PROBE_CONNECT_S: f64 = 5.0;

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
                    let shared = crate::llm::client::Shared::new(1, None, crate::config::CacheMode::Off, 0);
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
                reach_of(&probe, adapted, crate::llm::ChatModel::context_tokens(&client))
            }
            Err(e) => failed(&e),
        };
        (i, reach)
    }))
    .await;
    for (i, mut reach) in probes {
        // Slow only if a run waits longer than the probe did: one that waits no longer times out too.
        if let Reach::Failed { slow, .. } = &mut reach
            && facts.providers[i].config.timeout_first_token_s <= PROBE_FIRST_TOKEN_S
        {
            *slow = false;
        }
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
                slow: false,
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
        slow: matches!(e, LlmError::Exhausted { last, .. } if last.contains("no first token in time")),
    }
}

fn reach_of(probe: &crate::study::check::Probe, adapted: Vec<String>, context: Option<usize>) -> Reach {
    match &probe.reply {
        Ok(_) => Reach::Answered {
            ms: probe.total.as_millis() as u64,
            json: probe.valid_json() == Some(true),
            adapted,
            context,
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
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_versions_read_short() {
        assert_eq!(
            short_pip_version("pip 24.0 from /usr/lib/python3/dist-packages/pip (python 3.12)"),
            "pip 24.0 (python 3.12)"
        );
        assert_eq!(short_pip_version("pip 24.0"), "pip 24.0");
    }
}
