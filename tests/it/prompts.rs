//! Prompt templates as data, through the binary: an exported, edited template reaches the server in
//! every request built from it and the session records the edited file's checksum; a template with an
//! unknown placeholder is refused with its location before any request is sent.

use std::path::{Path, PathBuf};

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common;

const MARKER: &str = "Weigh every answer twice before you rate.";

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Hermione × GSE × ER_batch with the templates of `prompts`.
fn run_er(config: &Path, data: &Path, prompts: &Path) -> std::process::Output {
    let mut args: Vec<&str> = "run --characters hermione-en --scales GSE --methods er-batch --json"
        .split(' ')
        .collect();
    args.extend(["--prompts", prompts.to_str().unwrap()]);
    common::command(config, data, &args).output().unwrap()
}

/// A fake server, and a config on it with a data dir in a temporary folder.
async fn setup() -> (FakeServer, tempfile::TempDir, PathBuf, PathBuf) {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "");
    let data = dir.path().join("data");
    (server, dir, config, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_expert_rating_template_reaches_every_er_request_and_is_recorded() {
    let (server, dir, config, data) = setup().await;
    let prompts = dir.path().join("my prompts");
    let (c, d, p) = (config.clone(), data.clone(), prompts.clone());
    let export = tokio::task::spawn_blocking(move || {
        common::command(&c, &d, &["prompts", "export", p.to_str().unwrap()])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let file = prompts.join("expert_rating.txt");
    let bundled = std::fs::read_to_string(&file).unwrap();
    let edited = bundled.replacen("\n\n", &format!(" {MARKER}\n\n"), 1);
    assert_ne!(edited, bundled);
    std::fs::write(&file, &edited).unwrap();
    // The other exported files stay as they are: still a valid override each.
    std::fs::remove_file(prompts.join("reask.txt")).unwrap();

    let (c, d, p) = (config.clone(), data.clone(), prompts.clone());
    let out = tokio::task::spawn_blocking(move || run_er(&c, &d, &p)).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let requests = server.requests();
    let system = |r: &Value| r["messages"][0]["content"].as_str().unwrap_or("").to_string();
    let er: Vec<String> = requests
        .iter()
        .filter(|r| {
            r["messages"][1]["content"]
                .as_str()
                .is_some_and(|u| u.starts_with("The conversation:"))
        })
        .map(system)
        .collect();
    // GSE's 10 items in batches of 4, 3 and 3.
    assert_eq!(er.len(), 3, "{requests:#?}");
    for s in &er {
        assert!(s.contains(MARKER), "{s}");
    }
    assert!(
        requests.iter().map(system).filter(|s| s.contains(MARKER)).count() == er.len(),
        "only ER requests read the expert-rating template"
    );

    let id = common::session_id(&out);
    let (c, d) = (config.clone(), data.clone());
    let export = tokio::task::spawn_blocking(move || {
        common::command(&c, &d, &["export", &id, "--format", "json"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let v: Value = serde_json::from_slice(&export.stdout).unwrap();
    let recorded = &v["session"]["prompts"];
    assert_eq!(recorded["expert_rating"]["sha256"], hex_sha256(edited.as_bytes()));
    assert_eq!(
        recorded["expert_rating"]["origin"],
        std::path::absolute(&file).unwrap().to_str().unwrap()
    );
    assert_eq!(recorded["reask"]["origin"], "bundled");
    assert_eq!(
        recorded["reask"]["sha256"],
        hex_sha256(include_bytes!("../../assets/prompts/reask.txt"))
    );
    assert_eq!(recorded.as_object().unwrap().len(), 45, "every template: {recorded}");
    // The plan keeps the overrides with their text, so a resume reads what the run read.
    assert_eq!(
        v["session"]["plan"]["prompts"]["expert_rating"]["text"],
        edited.as_str()
    );
    assert!(v["session"]["plan"]["prompts"].get("reask").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_with_an_unknown_placeholder_stops_the_run_before_any_request() {
    let (server, dir, config, data) = setup().await;
    let prompts = dir.path().join("prompts");
    std::fs::create_dir(&prompts).unwrap();
    std::fs::write(
        prompts.join("interviewer.txt"),
        "Asked by {experimenter}:\n  「{questoin}」",
    )
    .unwrap();
    let (c, d, p) = (config.clone(), data.clone(), prompts.clone());
    let out = tokio::task::spawn_blocking(move || run_er(&c, &d, &p)).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let located = format!(
        "{}:2:4: unknown placeholder {{questoin}}",
        prompts.join("interviewer.txt").display()
    );
    assert!(stderr.contains(&located), "{stderr}");
    assert_eq!(server.stats().requests, 0);
    assert!(!data.join("sessions").exists(), "no session was started");

    // A misspelt file name is refused too, rather than falling back to the bundled template.
    std::fs::remove_file(prompts.join("interviewer.txt")).unwrap();
    std::fs::write(prompts.join("expert-rating.txt"), "{dimension}").unwrap();
    let (c, d, p) = (config.clone(), data.clone(), prompts.clone());
    let out = tokio::task::spawn_blocking(move || run_er(&c, &d, &p)).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("expert-rating.txt: not a prompt template"), "{stderr}");
    assert_eq!(server.stats().requests, 0);
}

/// The prompt sets README's judge study passes with `--prompts` (under `benches/prompts/`) load as
/// the workbench reads them, each file in place of a bundled template.
#[test]
fn the_benchmark_prompt_sets_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/prompts");
    let mut sets = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let templates =
            incharacter::templates::Templates::load_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert!(!templates.record().is_empty(), "{}: no file of its own", dir.display());
        sets += 1;
    }
    assert!(sets >= 1);
}

/// A conversion template may read the options from a text of the scale file instead of `{options}`;
/// on a scale without that text the judge would see no options. Refused, at the placeholder, by the
/// run and by `prompts check`, before anything is sent; with `{options}` beside it, taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversion_template_that_renders_no_options_for_the_scale_is_refused() {
    let (server, dir, config, data) = setup().await;
    let prompts = dir.path().join("prompts");
    std::fs::create_dir(&prompts).unwrap();
    let file = prompts.join("option_conversion.txt");
    std::fs::write(
        &file,
        "Rate {character} on each item.\n  {scale.conversion_instruction}\n",
    )
    .unwrap();
    let located = format!(
        "{}:2:3: {{scale.conversion_instruction}} is empty for scale GSE",
        file.display()
    );
    let p = prompts.to_str().unwrap().to_string();
    let run = |method: &'static str| -> Vec<String> {
        let line = format!("run --characters hermione-en --scales GSE --methods {method} --prompts");
        let mut args: Vec<String> = line.split(' ').map(str::to_string).collect();
        args.push(p.clone());
        args
    };
    let check = |shapes: Option<&str>| -> Vec<String> {
        let mut args: Vec<String> = ["prompts", "check", &p, "--scale", "GSE", "--character", "hermione-en"]
            .map(str::to_string)
            .to_vec();
        if let Some(shapes) = shapes {
            args.extend(["--shapes".to_string(), shapes.to_string()]);
        }
        args
    };
    let output = |args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::command(&config, &data, &args).output().unwrap()
    };
    // SR's replies that are no bare number are converted with the same template.
    for args in [run("oc"), run("sr"), check(None), check(Some("oc"))] {
        let out = output(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&located), "{args:?}: {stderr}");
    }
    assert_eq!(server.stats().requests, 0);
    assert!(!data.join("sessions").exists(), "no session was started");
    // Shapes that do not read the template are not held up by it.
    let shown = |shapes: &str| {
        let out = output(&check(Some(shapes)));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    shown("er-batch");
    std::fs::write(
        &file,
        "Rate {character} on each item.\n  {scale.conversion_instruction}\n{options}\n",
    )
    .unwrap();
    assert!(shown("oc").contains("1 = Not at all true"));
}
