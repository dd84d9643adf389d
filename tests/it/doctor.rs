//! `incharacter doctor` as a user runs it: on a fresh data dir without the embedded model it says what
//! is missing and exits 1; with a provider answering for rpa and judge it exits 0; a config that does
//! not parse is reported, not fatal; keys never reach its output; from a script the terminal is
//! reported as absent, never failed.

use std::path::Path;
use std::process::{Command, Output};

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

use crate::common;

const SECRET: &str = "sk-doctor-it-0a1b2c3d4e5f";

/// The binary with this config and data dir, no key of the developer's, and stdin not a terminal.
fn doctor(config: &Path, data: &Path, args: &[&str]) -> Command {
    let mut c = common::command(config, data, &[&["doctor"], args].concat());
    c.env_remove("OPENAI_API_KEY").stdin(std::process::Stdio::null());
    c
}

/// Runs it off the async runtime, so a test's fake server keeps serving meanwhile.
async fn output(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report:#}"))
}

#[tokio::test]
async fn a_fresh_data_dir_without_the_model_says_to_fetch_it_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let (config, data) = (dir.path().join("no-config.toml"), dir.path().join("fresh"));
    let out = output(doctor(&config, &data, &["--json"])).await;
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report = report(&out);
    assert_eq!(report["ok"], false);
    assert!(
        report["summary"].as_str().unwrap().starts_with("not ready"),
        "{report:#}"
    );
    let model = check(&report, "embedded model");
    assert_eq!(model["status"], "fail");
    assert!(
        model["fix"].as_str().unwrap().contains("incharacter model fetch"),
        "{model}"
    );
    // Named by INCHARACTER_CONFIG (as every test names its config) and not there: a warning, for a
    // path that may be typed wrong; the defaults apply.
    let config_check = check(&report, "config");
    assert_eq!(config_check["status"], "warn");
    assert!(
        config_check["detail"]
            .as_str()
            .unwrap()
            .contains("no-config.toml: no file, the defaults apply (INCHARACTER_CONFIG names it)"),
        "{config_check}"
    );
    // Every other command says it too, once, and goes on with the defaults; a config that is
    // there says nothing.
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.toml");
    let providers = common::command(&typo, &dir.path().join("data"), &["providers"])
        .output()
        .unwrap();
    assert_eq!(providers.status.code(), Some(0));
    let said = String::from_utf8_lossy(&providers.stderr);
    assert_eq!(said.matches("INCHARACTER_CONFIG names").count(), 1, "{said}");
    assert!(
        said.contains("typo.toml, which does not exist: the defaults apply"),
        "{said}"
    );
    std::fs::write(&typo, "").unwrap();
    let there = common::command(&typo, &dir.path().join("data"), &["providers"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&there.stderr), "");
    assert_eq!(check(&report, "data dir")["status"], "ok");
    // Run from a script: no terminal, which headless commands do not need.
    let terminal = check(&report, "terminal");
    assert_eq!(terminal["status"], "ok");
    assert!(
        terminal["detail"].as_str().unwrap().starts_with("no terminal"),
        "{terminal}"
    );

    // The same as text: a line per check, the fix under it, the verdict last.
    let out = output(doctor(&config, &data, &[])).await;
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let model = lines
        .iter()
        .position(|l| l.starts_with("FAIL  embedded model"))
        .expect(&text);
    assert!(
        lines[model + 1]
            .trim_start()
            .starts_with("→ run `incharacter model fetch`"),
        "{text}"
    );
    assert!(text.contains("\nok    terminal "), "{text}");
    assert!(lines.last().unwrap().starts_with("not ready"), "{text}");
    assert!(lines.len() <= 24, "one screenful:\n{text}");
}

#[tokio::test]
async fn a_provider_answering_for_rpa_and_judge_is_enough_and_its_key_is_never_shown() {
    let server = FakeServer::start(FakeConfig {
        require_key: Some(SECRET.into()),
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // `fake` (rpa, judge) reads its key from a variable that is set; `spare` from one that is not.
    let config = common::fake_config(
        dir.path(),
        &server,
        "api_key_env = \"DOCTOR_IT_KEY\"\n\n[[providers]]\nname = \"spare\"\nkind = \"openai\"\n\
         base_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key_env = \"DOCTOR_IT_UNSET\"",
    );
    let data = dir.path().join("data");
    let with_key = |args: &[&str]| {
        let mut c = doctor(&config, &data, args);
        c.env("DOCTOR_IT_KEY", SECRET).env_remove("DOCTOR_IT_UNSET");
        c
    };
    let out = output(with_key(&["--json"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let report = report(&out);
    assert_eq!(report["ok"], true);
    assert_eq!(report["summary"], "ready: rpa on fake, judge on fake");
    let fake = check(&report, "provider fake");
    assert_eq!(fake["status"], "ok");
    let detail = fake["detail"].as_str().unwrap();
    assert!(detail.contains("structured output works"), "{detail}");
    assert!(detail.contains("key DOCTOR_IT_KEY set"), "{detail}");
    let spare = check(&report, "provider spare");
    assert_eq!(spare["status"], "warn", "no role uses it: {spare}");
    assert_eq!(spare["fix"], "export DOCTOR_IT_UNSET with the provider's key");
    // Without the model, the offline path is a warning once the providers serve.
    assert_eq!(check(&report, "embedded model")["status"], "warn");
    assert!(server.stats().requests >= 1, "the key was sent to the server");

    let text = output(with_key(&[])).await;
    let mut files = Vec::new();
    common::all_bytes(&data, &mut files);
    let printed = [
        ("json stdout".to_string(), out.stdout),
        ("json stderr".to_string(), out.stderr),
        ("text stdout".to_string(), text.stdout),
        ("text stderr".to_string(), text.stderr),
    ];
    for (what, bytes) in printed.iter().chain(&files) {
        assert!(!common::contains(bytes, SECRET), "{what} holds the key");
    }
}

#[tokio::test]
async fn a_config_that_does_not_parse_is_a_failed_check_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[[providers]]\nname = \"x\"\nkind = \"openai\"\nbase_url = http://nowhere\n",
    )
    .unwrap();
    let out = output(doctor(&config, &dir.path().join("data"), &["--json"])).await;
    assert_eq!(out.status.code(), Some(1), "reported, not an input error");
    let report = report(&out);
    assert_eq!(report["summary"], "not ready: the config file is not valid");
    let check = check(&report, "config");
    assert_eq!(check["status"], "fail");
    let detail = check["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("{}:4:", config.display())),
        "file:line:column: {detail}"
    );
    // The rest is still looked at.
    assert_eq!(report["checks"][1]["name"], "data dir");
    assert_eq!(report["checks"][1]["status"], "ok");
}

#[tokio::test]
async fn key_bindings_the_workbench_refuses_leave_it_not_ready_and_an_unknown_theme_is_a_warning() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let with_tui = |tui: &str| {
        let config = common::fake_config(dir.path(), &server, "");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, format!("{text}\n{tui}")).unwrap();
        doctor(&config, &data, &["--json"])
    };

    let out = output(with_tui(
        "[tui.keys.live]\n\"ctrl-p\" = \"pause\"\n\"ctrl-z\" = \"explode\"\n",
    ))
    .await;
    assert_eq!(out.status.code(), Some(1), "the workbench would not start");
    let refused = report(&out);
    assert_eq!(
        refused["summary"],
        "not ready: the workbench does not start with the config's [tui.keys]"
    );
    let tui = check(&refused, "tui");
    assert_eq!(tui["status"], "fail");
    let detail = tui["detail"].as_str().unwrap();
    assert!(detail.contains("unknown action \"explode\""), "{detail}");
    assert!(!detail.contains("\"pause\""), "only the bad binding: {detail}");
    let config = dir.path().join("config.toml");
    let line = std::fs::read_to_string(&config)
        .unwrap()
        .lines()
        .position(|l| l.contains("explode"))
        .unwrap()
        + 1;
    assert!(
        detail.contains(&format!("{}:{line}:1", config.display())),
        "file:line:column: {detail}"
    );

    let out = output(with_tui("[tui]\ntheme = \"solarized-nowhere\"\n")).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let warned = report(&out);
    let tui = check(&warned, "tui");
    assert_eq!(tui["status"], "warn", "{tui}");
    assert!(
        tui["detail"]
            .as_str()
            .unwrap()
            .contains("no theme \"solarized-nowhere\""),
        "{tui}"
    );

    let out = output(with_tui(
        "[tui]\ntheme = \"light\"\n[tui.keys.global]\n\"ctrl-q\" = \"quit\"\n",
    ))
    .await;
    assert_eq!(out.status.code(), Some(0));
    let tui = check(&report(&out), "tui").clone();
    assert_eq!(tui["status"], "ok", "{tui}");
    assert_eq!(tui["detail"], "theme \"light\", 1 key binding(s) of the config's");
}
