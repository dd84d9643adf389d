//! A character of one's own, measured before and after an edit of its description, through the binary
//! against `fake-openai`: each session records the version of the character it interviewed (the one
//! the library computes), `diff` compares the two against the character's targets, a session diffed
//! with itself changes nothing, the targets score a session like any labels, and a resume after an edit
//! says so and records the new version.

use std::path::{Path, PathBuf};

use incharacter::catalog::Catalog;
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

use crate::common;

const ID: &str = "mira-en";
const DIMENSIONS: [&str; 5] = [
    "Extraversion",
    "Neuroticism",
    "Conscientiousness",
    "Agreeableness",
    "Openness",
];

fn character(description: &str) -> String {
    format!(
        "id = \"{ID}\"\nname = \"Mira\"\nlanguage = \"en\"\nexperimenter = \"Tom\"\ndescription = \"{description}\"\n\n\
         [targets.BFI]\nExtraversion = \"H\"\nAgreeableness = 2.0\n"
    )
}

/// The version the library gives the character the data dir holds now (it has no memories).
fn version_now(data: &Path) -> String {
    let catalog = Catalog::load(Some(data)).unwrap();
    catalog.character(ID).unwrap().version(&[])
}

/// The distance `toward_target` measures on BFI (1–5): to Extraversion's band (H: ≥ 3.4), to
/// Agreeableness's 2.0; the other dimensions have no target and Mira no other labels.
fn distance(dimension: &str, score: f64) -> Option<f64> {
    match dimension {
        "Extraversion" => Some((3.4 - score).max(0.0)),
        "Agreeableness" => Some((score - 2.0).abs()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_versions_of_a_character_are_recorded_and_diffed_against_its_targets() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "max_concurrency = 4");
    let data = dir.path().join("data");
    let file: PathBuf = data.join("characters").join(format!("{ID}.toml"));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let run_args = [
        "run",
        "--characters",
        ID,
        "--scales",
        "BFI",
        "--methods",
        "er-batch,oc",
        "--json",
    ];

    std::fs::write(
        &file,
        character("You are Mira, a quiet archivist who keeps to herself."),
    )
    .unwrap();
    let v1 = version_now(&data);
    let a = common::session_id(&common::output(&config, &data, &run_args).await);
    std::fs::write(
        &file,
        character("You are Mira, a loud street performer who loves a crowd."),
    )
    .unwrap();
    let v2 = version_now(&data);
    assert_ne!(v1, v2);
    let b = common::session_id(&common::output(&config, &data, &run_args).await);

    let export = |id: String| {
        let (config, data) = (config.clone(), data.clone());
        async move { common::json_of(common::output(&config, &data, &["export", &id, "--format", "json"]).await) }
    };
    let (export_a, export_b) = (export(a.clone()).await, export(b.clone()).await);
    assert_eq!(export_a["session"]["character_versions"][ID], v1.as_str());
    assert_eq!(export_b["session"]["character_versions"][ID], v2.as_str());
    assert!(v1.len() == 64 && v1.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));

    let diff = common::json_of(common::output(&config, &data, &["diff", &a, &b, "--json"]).await);
    assert_eq!(diff["character"], ID);
    assert_eq!(
        (diff["a"]["session"].as_str(), diff["a"]["version"].as_str()),
        (Some(a.as_str()), Some(v1.as_str()))
    );
    assert_eq!(diff["b"]["version"], v2.as_str());
    assert_eq!(diff["setup"], serde_json::json!([]), "asked and judged alike");
    let rows = diff["dimensions"].as_array().unwrap();
    for method in ["er-batch", "oc"] {
        let names: Vec<&str> = rows
            .iter()
            .filter(|r| r["method"] == method)
            .map(|r| r["dimension"].as_str().unwrap())
            .collect();
        assert_eq!(names, DIMENSIONS, "{method}: every BFI dimension, in the scale's order");
    }
    for r in rows {
        let dimension = r["dimension"].as_str().unwrap();
        let (x, y) = (r["a"].as_f64().unwrap(), r["b"].as_f64().unwrap());
        assert!((r["delta"].as_f64().unwrap() - (y - x)).abs() < 1e-12, "{r}");
        match (distance(dimension, x), distance(dimension, y)) {
            (Some(da), Some(db)) => {
                assert_eq!(r["toward_target"], db < da - 1e-9, "{r}");
                assert!((r["closer_by"].as_f64().unwrap() - (da - db)).abs() < 1e-12, "{r}");
                assert_eq!(r["label_source"], "target");
            }
            _ => assert!(r["toward_target"].is_null() && r["label_source"].is_null(), "{r}"),
        }
    }
    assert_eq!(rows[0]["target"], "H");
    assert_eq!(rows[3]["target"], 2.0);
    let items = diff["items"].as_array().unwrap();
    assert_eq!(items.len(), 2 * 44, "every item, for each method");
    let changes: Vec<f64> = items
        .iter()
        .filter_map(|i| i["change"].as_f64())
        .map(f64::abs)
        .collect();
    assert_eq!(changes.len(), 44, "OC reads items; ER_batch does not");
    assert!(
        changes.windows(2).all(|w| w[0] >= w[1]),
        "the items that moved most first"
    );

    let same = common::json_of(common::output(&config, &data, &["diff", &a, &a, "--json"]).await);
    assert!(
        same["dimensions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["delta"] == 0.0 && r["toward_target"] != true)
    );
    assert!(
        same["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["change"].is_null() || i["change"] == 0.0)
    );
    // In words too: no item is listed as having moved.
    let text = common::output(&config, &data, &["diff", &a, &a]).await;
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("no item's score moved") && !text.contains("items that moved most"),
        "{text}"
    );

    let text = common::output(&config, &data, &["diff", &a, &b]).await;
    let text = String::from_utf8(text.stdout).unwrap();
    let header = format!("A  {a}  version {}", &v1[..12]);
    for expected in [
        header.as_str(),
        "BFI er-batch",
        "BFI oc",
        "items that moved most",
        "  B (",
    ] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }
    assert_eq!(text.matches("\n  A (").count(), 5, "five items:\n{text}");

    // The targets score a session like any labels.
    let report = common::json_of(
        common::output(
            &config,
            &data,
            &["report", &a, "--labels", "target", "--format", "json"],
        )
        .await,
    );
    let summary = report[0]["summary"].as_array().unwrap();
    assert_eq!(report[0]["labels"], "target");
    for row in summary {
        assert_eq!(row["scale"], "BFI");
        assert!(row["acc_dim"].is_number() && row["mae"].is_number(), "{row}");
        assert_eq!(row["count"], 2, "the two dimensions with a target: {row}");
    }
    // Each measured dimension with a target says whether it is on it (a letter: anywhere in its band;
    // a number: within a tenth of the range) and by how much it is outside.
    let checks = report[0]["on_target"].as_array().unwrap();
    assert_eq!(checks.len(), 4, "two dimensions × two methods: {checks:?}");
    for c in checks {
        let dimension = c["dimension"].as_str().unwrap();
        let measured = c["measured"].as_f64().unwrap();
        let outside = match dimension {
            "Extraversion" => distance(dimension, measured).unwrap(),
            _ => (distance(dimension, measured).unwrap() - 0.4).max(0.0),
        };
        assert!((c["off_by"].as_f64().unwrap() - outside).abs() < 1e-9, "{c}");
        assert_eq!(c["on"], outside < 1e-9, "{c}");
    }
    assert_eq!(checks[0]["target"], "H");
    let text = common::output(&config, &data, &["report", &a, "--labels", "target"]).await;
    let text = String::from_utf8(text.stdout).unwrap();
    let on = checks
        .iter()
        .filter(|c| c["method"] == "er-batch" && c["on"] == true)
        .count();
    assert!(text.contains("On target (a letter target is its band"), "{text}");
    assert!(
        text.contains(&format!("| {a} | {ID} | BFI | er-batch | {on} of 2 |")),
        "{text}"
    );
    let mut csv = String::from("character,dimension,repeat,score\n");
    for assessment in export_a["assessments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["method"] == "er-batch")
    {
        // Every dimension: the three without a target are left out as marginal ones are.
        for (dimension, d) in assessment["dimensions"].as_object().unwrap() {
            csv += &format!("{ID},{dimension},0,{}\n", d["score"]);
        }
    }
    let predictions = dir.path().join("predictions.csv");
    std::fs::write(&predictions, csv).unwrap();
    let path = predictions.to_str().unwrap();
    let metrics = common::json_of(
        common::output(
            &config,
            &data,
            &[
                "metrics",
                "--scale",
                "BFI",
                "--predictions",
                path,
                "--labels",
                "target",
                "--json",
            ],
        )
        .await,
    );
    assert!(metrics["overall"]["acc_dim"].is_number(), "{metrics}");
    assert_eq!(metrics["overall"]["count"], 2);
    assert_eq!(metrics["overall"]["excluded"], 3, "{metrics}");
    // The session's own report scores the same pairs and leaves out the same three.
    let er = report[0]["summary"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["method"] == "er-batch"))
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!((&er["count"], &er["excluded"]), (&2.into(), &3.into()), "{er}");
    let mae = metrics["overall"]["mae"].as_f64().unwrap();
    assert!(
        (er["mae"].as_f64().unwrap() - mae).abs() < 1e-12,
        "{er} against {metrics}"
    );

    // A session judged at another temperature: diff says so before its tables.
    let mut colder = run_args.to_vec();
    colder.extend(["--judge-temperature", "0.3"]);
    let c = common::session_id(&common::output(&config, &data, &colder).await);
    let other = common::json_of(common::output(&config, &data, &["diff", &b, &c, "--json"]).await);
    assert_eq!(
        other["setup"],
        serde_json::json!([{"what": "judge temperature", "a": "0", "b": "0.3"}])
    );
    let out = common::output(&config, &data, &["diff", &b, &c]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    let said = text.find("asked or judged otherwise").expect(&text);
    assert!(
        said < text.find("BFI ").unwrap() && text.contains("judge temperature  0"),
        "{text}"
    );

    // What the user gets wrong exits 2, saying what.
    let out = common::output(&config, &data, &["diff", &a, "no-such-session"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-session"));
    let out = common::output(&config, &data, &["diff", &a, &b, "--character", "hermione-en"]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("did not measure hermione-en (it measured {ID})")),
        "{stderr}"
    );

    // A complete session has nothing to resume; one that was interrupted (A without its last
    // record), resumed after the edit, says the character changed, and the journal records the new
    // version.
    let path = data.join("sessions").join(&a).join("journal.jsonl");
    let out = common::output(&config, &data, &["run", "--resume", &a]).await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("is complete: nothing to resume"));
    let whole = std::fs::read_to_string(&path).unwrap();
    let cut: String = whole
        .lines()
        .filter(|l| !l.contains("\"run_finished\""))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(cut.len() < whole.len());
    std::fs::write(&path, cut).unwrap();
    let out = common::output(&config, &data, &["run", "--resume", &a]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warning = format!(
        "warning: character {ID} changed since the session recorded it (version {}, now {})",
        &v1[..12],
        &v2[..12]
    );
    assert!(stderr.contains(&warning), "{stderr}");
    let journal = std::fs::read_to_string(data.join("sessions").join(&a).join("journal.jsonl")).unwrap();
    let resumed: Value = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "resumed")
        .unwrap();
    assert_eq!(resumed["character_versions"][ID], v2.as_str());
    let again = common::json_of(common::output(&config, &data, &["diff", &a, &b, "--json"]).await);
    assert_eq!(again["a"]["version"], v1.as_str(), "the first record's");
    assert_eq!(again["a"]["later_versions"][0], v2.as_str());
    // Where the session is read, the pooling of two versions is said.
    let out = common::output(&config, &data, &["report", &a]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "note: character {ID} was edited while session {a} was interrupted: its answers come from versions {}, {}",
            &v1[..12],
            &v2[..12]
        )),
        "{stderr}"
    );
    // A character whose file is gone is said too (its figures leave it out).
    std::fs::remove_file(&file).unwrap();
    let out = common::output(&config, &data, &["export", &b, "--format", "csv"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("note: character {ID} of session {b} is not in the catalog")),
        "{stderr}"
    );
}
