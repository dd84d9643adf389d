//! Helpers shared by the tests that drive the binary against `fake-openai`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};

/// A config with one provider, `fake`, on `server` for the rpa and judge roles; `extra` lines are
/// added to the provider (e.g. `max_concurrency = 8`).
pub fn fake_config(dir: &Path, server: &FakeServer, extra: &str) -> PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\n{extra}\n\n[roles]\nrpa = \"fake\"\njudge = \"fake\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    path
}

/// A fake server, and in a temporary folder a config on it (see [`fake_config`]) and a data dir.
pub struct Setup {
    pub server: FakeServer,
    pub config: PathBuf,
    pub data: PathBuf,
    /// The folder, removed when this is dropped.
    pub dir: tempfile::TempDir,
}

/// Starts a server behaving as `fake` and writes a config on it with `extra` lines in its provider.
pub async fn setup(fake: FakeConfig, extra: &str) -> Setup {
    let server = FakeServer::start(fake).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(dir.path(), &server, extra);
    let data = dir.path().join("data");
    Setup {
        server,
        config,
        data,
        dir,
    }
}

/// The arguments of `run` for Hermione on `scales` with `methods`, then `more`.
pub fn run_hermione<'a>(scales: &'a str, methods: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--characters",
        "hermione-en",
        "--scales",
        scales,
        "--methods",
        methods,
    ];
    args.extend(more);
    args
}

/// The binary on `data` with no config file, so only the bundled samples and `data`'s sessions are
/// found; run to its end.
pub fn offline(data: &Path, args: &[&str]) -> std::process::Output {
    command(&data.join("none.toml"), data, args).output().unwrap()
}

/// The binary with this config and data dir.
pub fn command(config: &Path, data: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_incharacter"));
    c.args(args)
        .env("INCHARACTER_CONFIG", config)
        .env("INCHARACTER_DATA_DIR", data);
    c
}

/// Runs the binary to its end off the async runtime (a test's fake server keeps serving meanwhile).
pub async fn output(config: &Path, data: &Path, args: &[&str]) -> std::process::Output {
    let mut c = command(config, data, args);
    tokio::task::spawn_blocking(move || c.output().unwrap()).await.unwrap()
}

/// Starts the binary with `args`, kills it with SIGKILL once `server` has seen `requests` requests,
/// and returns the folder of the one session it left.
pub async fn kill_after_requests(
    config: &Path,
    data: &Path,
    args: &[&str],
    server: &FakeServer,
    requests: u64,
) -> PathBuf {
    let mut child = command(config, data, args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    server.wait_for_requests(requests).await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let sessions: Vec<PathBuf> = std::fs::read_dir(data.join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(sessions.len(), 1);
    sessions.into_iter().next().unwrap()
}

/// The binary on `config` and `data` from `cwd`, with files limited to `blocks` × 512 bytes and
/// SIGXFSZ ignored, so a write past the limit fails with EFBIG as a full disk fails with ENOSPC.
pub fn on_full_disk(config: &Path, data: &Path, cwd: &Path, blocks: u64, args: &[&str]) -> std::process::Output {
    in_shell(
        &format!("trap '' XFSZ; ulimit -f {blocks}; exec \"$@\""),
        config,
        data,
        cwd,
        args,
    )
}

/// The binary with `args`, started by `sh -c script` (which ends in `exec "$@"`, after whatever
/// limits or redirections it sets), in `cwd` with its own data dir and config.
pub fn in_shell(script: &str, config: &Path, data: &Path, cwd: &Path, args: &[&str]) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_incharacter"))
        .args(args)
        .current_dir(cwd)
        .env("INCHARACTER_DATA_DIR", data)
        .env("INCHARACTER_CONFIG", config)
        .output()
        .unwrap()
}

/// Every file directly under `dir` with its bytes (empty when it does not exist); a link as the path
/// it points to, a folder as `<folder>`.
pub fn snapshot(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let kind = e.file_type().unwrap();
            let bytes = if kind.is_symlink() {
                std::fs::read_link(e.path())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
                    .into_bytes()
            } else if kind.is_dir() {
                b"<folder>".to_vec()
            } else {
                std::fs::read(e.path()).unwrap()
            };
            (e.file_name().to_string_lossy().to_string(), bytes)
        })
        .collect()
}

/// Removes `key` at every depth (attempt records say whether a reply came from the cache, which
/// differs after a resume).
pub fn strip(v: &mut serde_json::Value, key: &str) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            m.remove(key);
            m.values_mut().for_each(|x| strip(x, key));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| strip(x, key)),
        _ => {}
    }
}

/// The session id a `--json` run printed on stdout.
pub fn session_id(out: &std::process::Output) -> String {
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The JSON a successful command printed (the command's output in the panic if it failed).
pub fn json_of(out: std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every file under `dir` with its bytes (to look for what must never be written).
pub fn all_bytes(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            all_bytes(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
}

pub fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The one session in `data`: its folder, and how many answers its journal holds.
pub fn only_session(data: &Path) -> (PathBuf, usize) {
    let mut sessions = std::fs::read_dir(data.join("sessions")).unwrap().flatten();
    let dir = sessions.next().unwrap().path();
    assert!(sessions.next().is_none(), "one session in {}", data.display());
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    (dir, journal.matches(r#""event":"item_answered""#).count())
}
