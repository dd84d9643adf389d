//! The `incharacter` binary driven as a user (or other tooling) would: JSON shapes, exit codes, error
//! locations, and numbers checked against independent oracles (scipy/sklearn, a Python implementation
//! of the InCharacter formulas) to 1e-9.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const TOLERANCE: f64 = 1e-9;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs the binary with an empty data dir (so a developer's own files never leak into tests).
fn run_in(data_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_incharacter"))
        .args(args)
        .env("INCHARACTER_DATA_DIR", data_dir)
        .output()
        .expect("run incharacter")
}

fn run(args: &[&str]) -> Output {
    let empty = tempfile::tempdir().unwrap();
    run_in(empty.path(), args)
}

fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON value")
}

/// Every number in `expected` equals the one at the same place in `actual` within TOLERANCE.
fn assert_close(actual: &Value, expected: &Value, path: &str) {
    match (actual, expected) {
        (Value::Number(a), Value::Number(e)) => {
            let (a, e) = (a.as_f64().unwrap(), e.as_f64().unwrap());
            assert!((a - e).abs() <= TOLERANCE, "{path}: {a} != {e}");
        }
        (Value::Object(a), Value::Object(e)) => {
            for (k, v) in e {
                assert_close(
                    a.get(k).unwrap_or_else(|| panic!("{path}.{k} missing")),
                    v,
                    &format!("{path}.{k}"),
                );
            }
        }
        _ => assert_eq!(actual, expected, "{path}"),
    }
}

#[test]
fn scales_json_lists_the_fifteen_scales_of_the_method() {
    let list = json_of(&run(&["scales", "--json"]));
    let list = list.as_array().unwrap();
    // (id, items, scored items, dimensions, min, max) as in METHOD.md.
    let expected = [
        ("BFI", 44, 44, 5, 1, 5),
        ("16Personalities", 60, 60, 4, 1, 7),
        ("BSRI", 60, 40, 2, 1, 7),
        ("CABIN", 164, 164, 41, 1, 5),
        ("DTDD", 12, 12, 3, 1, 9),
        ("ECR-R", 36, 36, 2, 1, 7),
        ("EIS", 33, 33, 1, 1, 5),
        ("Empathy", 10, 10, 1, 1, 7),
        ("EPQ-R", 100, 100, 4, 0, 1),
        ("GSE", 10, 10, 1, 1, 4),
        ("ICB", 8, 8, 1, 1, 6),
        ("LMS", 9, 9, 3, 1, 5),
        ("LOT-R", 10, 5, 1, 0, 4),
        ("WLEIS", 16, 16, 4, 1, 7),
        ("IPIP-50", 50, 50, 5, 1, 5),
    ];
    assert_eq!(list.len(), expected.len());
    for (id, items, scored, dims, min, max) in expected {
        let s = list
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing"));
        assert_eq!(s["items"], items, "{id}");
        assert_eq!(s["scored_items"], scored, "{id}");
        assert_eq!(s["dimensions"].as_array().unwrap().len(), dims, "{id}");
        assert_eq!(s["range"], serde_json::json!([min, max]), "{id}");
        assert!(s["name"].is_string());
    }
}

#[test]
fn characters_json_carries_experimenters_and_every_reference_label() {
    let list = json_of(&run(&["characters", "--json"]));
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 32);
    let facts: Value = serde_json::from_str(include_str!("../fixtures/reference_facts.json")).unwrap();
    for (ref_id, fact) in facts["characters"].as_object().unwrap() {
        let c = list
            .iter()
            .find(|c| c["aliases"] == fact["aliases"])
            .unwrap_or_else(|| panic!("{ref_id}"));
        assert_eq!(c["experimenter"], fact["experimenter"], "{ref_id}");
        for source in ["pdb", "annotation"] {
            let expected = facts["labels"][source]
                .get(ref_id.as_str())
                .cloned()
                .unwrap_or_else(|| serde_json::json!({}));
            // Numbers compare by value: the reference writes some scores as integers (1 vs 1.0).
            assert_close(&c["labels"][source], &expected, &format!("{ref_id} {source}"));
            assert_eq!(
                c["labels"][source].as_object().unwrap().len(),
                expected.as_object().unwrap().len()
            );
        }
        assert!(c["language"] == "en" || c["language"] == "zh");
    }
}

#[test]
fn show_subcommands_print_tables_and_json() {
    let out = run(&["scales", "show", "bfi"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Big Five Inventory") && text.contains("Is talkative."),
        "{text}"
    );
    let bfi = json_of(&run(&["scales", "show", "BFI", "--json"]));
    assert_eq!(bfi["items"].as_array().unwrap().len(), 44);
    let c = json_of(&run(&["characters", "show", "Hermione Granger", "--json"]));
    assert_eq!(c["id"], "hermione-en");
    let out = run(&["characters", "show", "zhongli-zh"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("钟离") && text.contains("旅行者"), "{text}");
    let out = run(&["scales", "show", "NOPE"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scale \"NOPE\""));
    // An unknown session is bad input too, said before the terminal is taken over.
    let out = run(&["replay", "no-such-session"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-session"));
}

#[test]
fn agreement_equals_scipy_and_sklearn() {
    let dir = fixtures().join("agreement");
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    for (case, want) in expected.as_object().unwrap() {
        let csv = dir.join(format!("{case}.csv"));
        let got = json_of(&run(&["agreement", "--pairs", csv.to_str().unwrap(), "--json"]));
        assert_close(&got, want, case);
        assert_eq!(got["qwk"].is_null(), want["qwk"].is_null(), "{case}: qwk presence");
    }
}

/// A quote opened and never closed would make the reader take every row after it for one field's
/// text (agreement over the first rows only, unsaid): refused where it opens.
#[test]
fn a_csv_with_a_quote_never_closed_is_refused_where_it_opens() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("q.csv");
    std::fs::write(&csv, "a,b,comment\n1,1,ok\n2,2,\"oops\n3,3,x\n4,4,y\n5,1,z\n").unwrap();
    let out = run(&["agreement", "--pairs", csv.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("q.csv:3:5: this quote is never closed"), "{stderr}");
    assert!(out.stdout.is_empty());
    // Closed by a quoted field three rows down: the rows between would be its text.
    std::fs::write(&csv, "a,b,comment\n1,1,ok\n2,2,\"oops\n3,3,x\n4,4,y\n5,1,\"z\"\n").unwrap();
    let out = run(&["agreement", "--pairs", csv.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("q.csv:3:5: "));
}

#[test]
fn metrics_equal_an_independent_implementation_of_the_original_formulas() {
    let dir = fixtures().join("metrics");
    let cases: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    for (case, spec) in cases.as_object().unwrap() {
        let csv = dir.join(format!("{case}.csv"));
        let mut args = vec![
            "metrics",
            "--scale",
            spec["scale"].as_str().unwrap(),
            "--predictions",
            csv.to_str().unwrap(),
            "--json",
        ];
        if let Some(labels) = spec["labels"].as_str() {
            args.extend(["--labels", labels]);
        }
        let got = json_of(&run(&args));
        assert_close(&got, &spec["expected"], case);
        let dims = got["dimensions"].as_object().unwrap();
        assert_eq!(
            dims.len(),
            spec["expected"]["dimensions"].as_object().unwrap().len(),
            "{case}"
        );
    }
}

#[test]
fn metrics_human_output_is_a_table() {
    let csv = fixtures().join("metrics/bfi_pdb_2_repeats.csv");
    let out = run(&["metrics", "--scale", "BFI", "--predictions", csv.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    for word in [
        "Extraversion",
        "Acc_Dim",
        "Acc_Full",
        "MAE",
        "MSE",
        "excluded",
        "labels: pdb",
    ] {
        assert!(text.contains(word), "{word} missing from:\n{text}");
    }
}

#[test]
fn a_broken_scale_file_names_file_line_column_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let text = include_str!("../../assets/scales/GSE.toml");
    let lines: Vec<&str> = text.lines().collect();
    let target = (39..lines.len())
        .find(|&i| lines[i].starts_with("dimension = "))
        .unwrap();
    let broken: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if i == target {
                "dimension = \"NoSuchDimension\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    let path = dir.path().join("GSE.toml");
    std::fs::write(&path, broken.join("\n")).unwrap();
    let out = run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let errors: Vec<&str> = stdout.lines().filter(|l| l.contains(": item")).collect();
    assert_eq!(errors.len(), 1, "{stdout}");
    let want = format!("{}:{}:13: item ", path.display(), target + 1);
    assert!(errors[0].starts_with(&want), "{} does not start with {want}", errors[0]);
    assert!(
        errors[0].contains("unknown dimension \"NoSuchDimension\""),
        "{}",
        errors[0]
    );
}

#[test]
fn validate_accepts_the_bundled_assets_and_catches_bad_labels() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = run(&[
        "validate",
        root.join("assets/scales").to_str().unwrap(),
        root.join("assets/characters").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("47 file(s) valid"));

    let dir = tempfile::tempdir().unwrap();
    let text = include_str!("../../assets/characters/hermione-en.toml").replace(
        "Extraversion = { score = 4.0, type = \"H\" }",
        "Extraversion = { score = 4.0, type = \"L\" }",
    );
    let path = dir.path().join("hermione.toml");
    std::fs::write(&path, &text).unwrap();
    let out = run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let line = text
        .lines()
        .position(|l| l.contains("type = \"L\" }") && l.starts_with("Extraversion = { score = 4.0"))
        .unwrap()
        + 1;
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains(&format!("hermione.toml:{line}:")) && stdout.contains("contradicts"),
        "{stdout}"
    );

    // A dimension name with a bidirectional override in it is shown with its escape: the error
    // names the name it is, not one the scale has.
    let text = "id = \"d6\"\nname = \"T\"\nlanguage = \"en\"\nexperimenter = \"Bob\"\ndescription = \"x\"\n[targets.BFI]\n\"Extra\\u202eversion\" = \"H\"\n";
    let path = dir.path().join("d6.toml");
    std::fs::write(&path, text).unwrap();
    let out = run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("no dimension \"Extra\\u{202e}version\""), "{stdout}");

    // A character naming a scale whose file, checked beside it, does not read: said as such.
    let folder = dir.path().join("mine");
    std::fs::create_dir_all(&folder).unwrap();
    let gse = include_str!("../../assets/scales/GSE.toml").replace("id = \"GSE\"", "id = \"MYS\"");
    std::fs::write(
        folder.join("MYS.toml"),
        gse.replacen("range = [1, 4]", "range = [1, 4", 1),
    )
    .unwrap();
    let anna = "id = \"anna-en\"\nname = \"Anna\"\nlanguage = \"en\"\nexperimenter = \"Bo\"\ndescription = \"x\"\n\
                [labels.annotation.MYS]\n\"Self-efficacy\" = { score = 3.0, type = \"H\" }\n";
    std::fs::write(folder.join("anna.toml"), anna).unwrap();
    let out = run(&["validate", folder.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("labels name unknown scale \"MYS\": its file, checked here, has errors (said above)"),
        "{stdout}"
    );
}

#[test]
fn a_user_scale_overrides_the_bundled_one_and_says_so() {
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("scales")).unwrap();
    let gse =
        include_str!("../../assets/scales/GSE.toml").replace("name = \"General Self-Efficacy\"", "name = \"My GSE\"");
    std::fs::write(data.path().join("scales/GSE.toml"), gse).unwrap();
    std::fs::write(data.path().join("scales/broken.toml"), "id = ").unwrap();
    let out = run_in(data.path(), &["scales", "--json"]);
    let list = json_of(&out);
    let gse = list.as_array().unwrap().iter().find(|s| s["id"] == "GSE").unwrap();
    assert_eq!(gse["name"], "My GSE");
    assert_eq!(gse["origin"]["kind"], "user");
    assert_eq!(gse["origin"]["overrides_bundled"], true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.toml:1:"), "{stderr}");
}

#[test]
fn bad_prediction_rows_are_located() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "character,dimension,repeat,score\nhermione-en,Extraversion,0,4\nnobody,Extraversion,0,4\n",
            ":3:1: unknown character \"nobody\"",
        ),
        (
            "character,dimension,repeat,score\nhermione-en,Extraversionn,0,4\n",
            ":2:13: scale BFI has no dimension",
        ),
        (
            "character,dimension,repeat,score\nhermione-en,Extraversion,0,6\n",
            ":2:28: score 6 is outside",
        ),
        (
            "character,dimension,repeat,score\nhermione-en,Extraversion,0,four\n",
            ":2:28: score \"four\" is not a number",
        ),
        (
            "character,dimension,repeat,score\nhermione-en,Extraversion,0,4\nHermione-en,Extraversion,0,3\n",
            ":3:1: a second prediction",
        ),
        (
            "character,dimension,score\nhermione-en,Extraversion,4\n",
            ":1:1: missing column \"repeat\"",
        ),
    ];
    for (i, (csv, want)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("p{i}.csv"));
        std::fs::write(&path, csv).unwrap();
        let out = run(&["metrics", "--scale", "BFI", "--predictions", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "case {i}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("p{i}.csv{want}")), "case {i}: {stderr}");
    }
}

#[test]
fn imports_write_characters_and_scales_that_the_catalog_loads() {
    let data = tempfile::tempdir().unwrap();
    let import = fixtures().join("import");
    let arg = |name: &str| import.join(name).to_string_lossy().into_owned();

    let out = run_in(
        data.path(),
        &[
            "import",
            "chatharuhi",
            &arg("ake.jsonl"),
            "--name",
            "阿珂",
            "--id",
            "ake",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ake = json_of(&run_in(data.path(), &["characters", "show", "ake", "--json"]));
    assert_eq!(
        (ake["language"].as_str(), ake["experimenter"].as_str()),
        (Some("zh"), Some("船长"))
    );
    assert!(ake["description"].as_str().unwrap().contains("守塔人"));

    let out = run_in(
        data.path(),
        &[
            "import",
            "rolebench",
            "--desc",
            &arg("desc.json"),
            "--profiles",
            &arg("profiles-eng-Wren Ashby.jsonl"),
            "--role",
            "Wren Ashby",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("(3 chunks)"));
    let wren = json_of(&run_in(data.path(), &["characters", "show", "wren-ashby-en", "--json"]));
    assert_eq!(wren["experimenter"], "Captain Hale");

    let out = run_in(data.path(), &["import", "scale", &arg("tide_incharacter.json")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tide = json_of(&run_in(data.path(), &["scales", "show", "Tide", "--json"]));
    assert_eq!(tide["options"]["zh"], serde_json::json!(["不同意", "中立", "同意"]));
    assert_eq!(tide["items"][1]["keying"], "negative");
    assert_eq!(tide["items"][2]["question"]["zh"], "你种东西吗？");

    // Given as InCharacter's (the default format), a PsychoBench file is said to be one.
    let out = run_in(data.path(), &["import", "scale", &arg("tide_psychobench.json")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("tide_psychobench.json:1:1: a list of questionnaires is a PsychoBench file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The same questionnaire from PsychoBench: same keying, generic questions, marked as filled.
    let out = run_in(
        data.path(),
        &[
            "import",
            "scale",
            "--format",
            "psychobench",
            "--name",
            "Tide",
            &arg("tide_psychobench.json"),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "Tide exists already");
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = run_in(
        data.path(),
        &[
            "import",
            "scale",
            "--format",
            "psychobench",
            "--name",
            "Tide",
            "--id",
            "Tide-pb",
            &arg("tide_psychobench.json"),
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("interview questions (generic)"));
    let pb = json_of(&run_in(data.path(), &["scales", "show", "Tide-pb", "--json"]));
    for (a, b) in tide["items"]
        .as_array()
        .unwrap()
        .iter()
        .zip(pb["items"].as_array().unwrap())
    {
        assert_eq!((&a["dimension"], &a["keying"]), (&b["dimension"], &b["keying"]));
    }
    assert_eq!(pb["range"], tide["range"]);

    let out = run_in(
        data.path(),
        &[
            "import",
            "scale",
            "--format",
            "psychobench",
            "--name",
            "Broken",
            &arg("tide_psychobench.json"),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no categories"));
    let mut written: Vec<String> = std::fs::read_dir(data.path().join("scales"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["Tide-pb.toml", "Tide.toml"], "failed imports write nothing");
}

/// Importing the dialogues again (a newer export, say) brings a new profile and memories; the targets
/// and card info the user wrote into the character file stay.
#[test]
fn reimporting_a_character_keeps_its_targets_and_card() {
    let data = tempfile::tempdir().unwrap();
    let ake = fixtures().join("import/ake.jsonl");
    let import = |more: &[&str]| {
        let ake = ake.to_string_lossy();
        let args = [&["import", "chatharuhi", &*ake, "--name", "阿珂", "--id", "ake"], more].concat();
        let out = run_in(data.path(), &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    import(&[]);
    let file = data.path().join("characters/ake.toml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("\n[card]\ntags = [\"sea\"]\ncreator = \"someone\"\n\n[targets]\n16Personalities = \"INFP\"\n");
    std::fs::write(&file, text).unwrap();
    let authored = json_of(&run_in(data.path(), &["characters", "show", "ake", "--json"]));
    let targets = authored["labels"]["target"]["16Personalities"].as_object();
    assert_eq!(targets.map(|t| t.len()), Some(4), "{authored}");
    assert_eq!(authored["card"]["creator"], "someone");

    // A second import of the same id replaces only when asked.
    import(&["--replace"]);
    let again = json_of(&run_in(data.path(), &["characters", "show", "ake", "--json"]));
    assert_eq!(again["labels"]["target"], authored["labels"]["target"]);
    assert_eq!(again["card"], authored["card"]);
    assert_eq!(again, authored, "the same dialogues import to the same character");
}

#[test]
fn a_reader_that_goes_away_is_not_an_error() {
    // `incharacter scales show BFI | head -1`: the pipe closes before (or while) the binary writes.
    // Completion scripts too (their generator panics on a failing writer).
    for args in [&["scales", "show", "BFI"][..], &["completions", "bash"]] {
        let empty = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_incharacter"))
            .args(args)
            .env("INCHARACTER_DATA_DIR", empty.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
    }
    // A write that fails for sure (a full disk): said, exit 1, no panic.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_incharacter"))
        .args(["completions", "zsh"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("No space left on device") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

/// A user's character that answers to a bundled one's name makes the name not enough: every
/// command that takes a name says which characters it could be, instead of taking the first.
#[test]
fn a_name_two_characters_answer_to_is_refused_with_both() {
    let data = tempfile::tempdir().unwrap();
    let bundled =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/characters/hermione-en.toml"))
            .unwrap();
    std::fs::create_dir_all(data.path().join("characters")).unwrap();
    std::fs::write(
        data.path().join("characters/con.toml"),
        bundled.replacen("id = \"hermione-en\"", "id = \"con\"", 1),
    )
    .unwrap();
    for args in [
        &["characters", "show", "Hermione Granger"][..],
        &["run", "--characters", "Hermione Granger", "--scales", "BFI"],
        &["observe", "--subject", "hermione", "--json"],
    ] {
        let out = run_in(data.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("names 2 characters: ")
                && stderr.contains("hermione-en (Hermione Granger)")
                && stderr.contains("con (Hermione Granger)")
                && stderr.contains("; give its id"),
            "{args:?}: {stderr}"
        );
    }
    // By id, each is itself.
    let json = json_of(&run_in(data.path(), &["characters", "show", "con", "--json"]));
    assert_eq!(json["id"], "con");
    let json = json_of(&run_in(data.path(), &["characters", "show", "hermione-en", "--json"]));
    assert_eq!(json["id"], "hermione-en");
}

/// `prompts export` makes the folder it is given, not a mistyped path's folders above it, and says
/// that a file is not a folder (exit 2: the user's path, not the machine).
#[test]
fn prompts_export_makes_its_folder_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = run_in(&data, &["prompts", "export", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/dev/null: not a folder"));
    let deep = dir.path().join("typo/prompts");
    let out = run_in(&data, &["prompts", "export", &deep.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.path().join("typo").exists());
    let here = dir.path().join("prompts");
    let out = run_in(&data, &["prompts", "export", &here.display().to_string()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_dir(&here).unwrap().count() > 3);
}

/// `chat` checks what it would send as `run` does: a temperature out of 0–2 and an empty message
/// are refused before any provider is asked.
#[test]
fn chat_refuses_what_run_refuses() {
    for (args, said) in [
        (
            &["chat", "--provider", "local", "--temperature", "9", "hi"][..],
            "not a temperature between 0 and 2",
        ),
        (&["chat", "--provider", "local", " "], "an empty message"),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(said), "{args:?}");
    }
}

/// `report` names a session by its folder however it was given, refuses one given twice, and says
/// that the LaTeX table is the interview table rather than printing an empty one.
#[test]
fn report_names_sessions_by_folder_and_refuses_what_it_cannot_table() {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    let gse = "20261129-201520-gse-on-the-local-model-e700";
    let by_path = samples.join(gse).display().to_string();
    let json = json_of(&run(&["report", &by_path, "--format", "json"]));
    assert_eq!(json[0]["session"], gse);
    let out = run(&["report", gse, &by_path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is given more than once"));
    let out = run(&[
        "report",
        "20261129-231052-three-observers-on-the-local-model-038d",
        "--format",
        "latex",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("writes the interview table"));
}

/// A folder with no scale or character file in it is not "0 file(s) valid": nothing was checked.
#[test]
fn validate_of_nothing_says_so() {
    let empty = tempfile::tempdir().unwrap();
    let out = run(&["validate", &empty.path().display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing checked"));
}

/// A resume finishes the session it names with its own plan and providers: a flag that would change
/// them is refused, not dropped without a word.
#[test]
fn a_resume_refuses_what_would_change_the_session() {
    for flag in [
        &["--rpa", "other"][..],
        &["--judge", "other"],
        &["--characters", "snape-en"],
        &["--methods", "oc"],
        &["--repeats", "2"],
        &["--seed", "3"],
        &["--name", "renamed"],
        // The batch mode is the session's too: switched once, it would stay switched.
        &["--batch"],
        &["--batch-files", "requests"],
    ] {
        let out = run(&[&["run", "--resume", "some-session"][..], flag].concat());
        assert_eq!(out.status.code(), Some(2), "{flag:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("'--resume <RESUME>' cannot be used with"),
            "{flag:?}: {stderr}"
        );
    }
    // An observer session's too.
    for flag in [
        &["--seed", "5"][..],
        &["--observers", "9"],
        &["--provider", "other"],
        &["--observer-provider", "other"],
        &["--scenarios", "1"],
        &["--turns", "4"],
        &["--contexts", "family"],
        &["--self-report", "items"],
        &["--temperature", "0.5"],
        &["--name", "renamed"],
    ] {
        let out = run(&[&["observe", "--resume", "some-session"][..], flag].concat());
        assert_eq!(out.status.code(), Some(2), "{flag:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("'--resume <RESUME>' cannot be used with"),
            "{flag:?}: {stderr}"
        );
    }
}

/// Observers counted per context and a number of observers that says otherwise: refused, not one
/// of them dropped without a word.
#[test]
fn observers_and_their_counts_per_context_must_agree() {
    let args = [
        "observe",
        "--subject",
        "synthetic",
        "--contexts",
        "family:2,workplace:1",
    ];
    let out = run(&[&args[..], &["--observers", "5"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--observers 5 and --contexts family:2,workplace:1 (3 observers) say two things"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `events` as the journal of a session in `data`'s sessions folder.
fn write_session(data: &Path, events: &[incharacter::study::Event]) {
    let id = events[0].start().unwrap().session.to_string();
    let mut journal =
        incharacter::journal::Journal::open(&data.join("sessions").join(id).join("journal.jsonl")).unwrap();
    for e in events {
        journal.append(e).unwrap();
    }
}

#[test]
fn judges_compares_assessments_of_the_same_interviews_and_refuses_others() {
    use incharacter::method::Method;
    use incharacter::study::Event;
    use incharacter::tui::fixture;
    let catalog = incharacter::catalog::Catalog::load(None).unwrap();
    let data = tempfile::tempdir().unwrap();
    // Made-up sessions: a parent and two re-assessments of it, and one of other interviews.
    let plan = fixture::plan(&["hermione-en", "zhongli-zh"], &["BFI"], &[Method::ErBatch, Method::Oc]);
    let parent = fixture::session(&catalog, &plan);
    let a = fixture::reassessment(&catalog, &parent, "20261129-130000-fixture-0002", 1);
    let b = fixture::reassessment(&catalog, &parent, "20261129-140000-fixture-0003", 2);
    let mut elsewhere = fixture::reassessment(&catalog, &parent, "20261129-150000-fixture-0004", 1);
    if let Event::RunStarted { plan, .. } = &mut elsewhere[0] {
        plan.parent = Some("20261128-000000-other-0000".into());
    }
    for events in [&parent, &a, &b, &elsewhere] {
        write_session(data.path(), events);
    }
    let ids = [
        "20261129-120000-fixture-0001",
        "20261129-130000-fixture-0002",
        "20261129-140000-fixture-0003",
    ];

    let out = run_in(data.path(), &[&["judges"][..], &ids, &["--json"]].concat());
    let json = json_of(&out);
    let sessions: Vec<&str> = json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(sessions, ids);
    assert_eq!(json["sessions"][1]["judge"], "fixture/judge 1 (made-up scores)");
    let pairs = json["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 3 * 2, "3 pairs × 2 methods");
    for p in pairs {
        for key in ["a", "b", "method", "n", "pearson", "spearman", "mean_abs_diff"] {
            assert!(p.get(key).is_some(), "{key} in {p}");
        }
        assert_eq!(p["n"], 10, "2 characters × 5 dimensions: {p}");
    }
    // The same numbers as the library computes from the journals.
    let events: Vec<(&str, &[Event])> = ids.iter().copied().zip([&parent[..], &a, &b]).collect();
    let expected = incharacter::analysis::judges::compare(&events, &catalog)
        .unwrap()
        .to_json();
    assert_close(&json["pairs"], &expected["pairs"], "pairs");
    assert_close(&json["scales"], &expected["scales"], "scales");
    assert!(json["scales"]["BFI"]["sensitivity"].as_f64().unwrap() > 0.0);
    assert_eq!(json["scores"].as_array().unwrap().len(), 2 * 2 * 5);
    assert!(
        json["summary"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["acc_dim"].is_number())
    );

    let out = run_in(data.path(), &["judges", ids[0], ids[1]]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for part in [
        "agreement per pair of sessions",
        "sensitivity per scale",
        "accuracy against the labels",
    ] {
        assert!(text.contains(part), "{text}");
    }

    let out = run_in(data.path(), &["judges", ids[0], "20261129-150000-fixture-0004"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("do not share interviews"), "{stderr}");
    assert!(stderr.contains("20261128-000000-other-0000"), "{stderr}");
    let out = run_in(data.path(), &["judges", ids[0], "no-such-session"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run_in(data.path(), &["judges", ids[0]]);
    assert_eq!(out.status.code(), Some(2), "one session is too few");
}

/// Copies of two bundled samples' folders under other names are named by those names, the id
/// every command finds them by, in what `compare` and `diff` print, their JSON and their errors.
#[test]
fn compare_and_diff_name_copied_sessions_by_their_folders() {
    let data = tempfile::tempdir().unwrap();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    for (id, name) in [
        ("20261129-233202-bfi-on-the-local-model-e80e", "mine-before"),
        ("20261130-231918-bfi-and-16p-on-the-local-model-248f", "mine-after"),
        ("20261129-201520-gse-on-the-local-model-e700", "mine-gse"),
    ] {
        let to = data.path().join("sessions").join(name);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(samples.join(id).join("journal.jsonl"), to.join("journal.jsonl")).unwrap();
    }
    let json = json_of(&run_in(
        data.path(),
        &["compare", "mine-before", "mine-after", "--json"],
    ));
    assert_eq!(
        (&json["a"]["session"], &json["b"]["session"]),
        (&"mine-before".into(), &"mine-after".into())
    );
    let out = run_in(data.path(), &["compare", "mine-before", "mine-after"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("A  mine-before") && text.contains("B  mine-after"),
        "{text}"
    );
    let out = run_in(data.path(), &["compare", "mine-before", "mine-gse"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mine-before scored") && stderr.contains("mine-gse scored"),
        "{stderr}"
    );
    let json = json_of(&run_in(
        data.path(),
        &[
            "diff",
            "mine-before",
            "mine-after",
            "--character",
            "hermione-en",
            "--json",
        ],
    ));
    assert_eq!(
        (&json["a"]["session"], &json["b"]["session"]),
        (&"mine-before".into(), &"mine-after".into())
    );
    // Errors name them so too; sessions that scored the character on nothing in common say so.
    for (args, said) in [
        (
            &["diff", "mine-before", "mine-gse", "--character", "sheldon-en"][..],
            "session mine-gse did not measure sheldon-en",
        ),
        (
            &["diff", "mine-before", "mine-gse"],
            "mine-before and mine-gse scored hermione-en on no scale × method in common",
        ),
        (
            &["diff", "mine-before", "mine-after", "--character", "nobody"],
            "unknown character \"nobody\"",
        ),
    ] {
        let out = run_in(data.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
}

/// Without a terminal (a pipe, a CI job, `ssh host incharacter`) the workbench says so in one line and
/// exits 2, naming what works without one; it never panics inside the terminal setup.
#[test]
fn the_workbench_without_a_terminal_says_so_in_one_line() {
    let data = tempfile::tempdir().unwrap();
    for args in [
        &[][..],
        &["demo"][..],
        &["replay", "20261129-201520-gse-on-the-local-model-e700"][..],
    ] {
        let out = run_in(data.path(), args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("needs a terminal") && stderr.contains("run, assess"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// `replay` of a file that is not a session's journal is refused before the terminal is touched.
#[test]
fn replaying_a_file_that_is_not_a_journal_names_it_and_exits_2() {
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("notes.txt");
    std::fs::write(&file, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    let out = run_in(data.path(), &["replay", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("notes.txt: not a session journal"), "{stderr}");
    // A journal.jsonl that holds no session is refused the same way.
    let dir = data.path().join("empty");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("journal.jsonl"), "").unwrap();
    let out = run_in(data.path(), &["replay", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn model_list_names_every_known_model_with_its_size_checksum_and_license() {
    let data = tempfile::tempdir().unwrap();
    let listed = json_of(&run_in(data.path(), &["model", "list", "--json"]));
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]);
    for m in listed.as_array().unwrap() {
        assert_eq!(m["fetched"], false, "an empty data dir has fetched nothing: {m}");
        assert!(m["bytes"].as_u64().unwrap() > 90 << 20, "{m}");
        assert_eq!(m["sha256"].as_str().unwrap().len(), 64, "{m}");
        assert!(!m["license"].as_str().unwrap().is_empty() && !m["good_for"].as_str().unwrap().is_empty());
    }
    let qwen = &listed[2];
    assert_eq!(qwen["bytes"], 1_117_320_768u64);
    assert!(qwen["license"].as_str().unwrap().contains("Apache-2.0"), "{qwen}");
    let table = String::from_utf8(run_in(data.path(), &["model", "list"]).stdout).unwrap();
    assert!(
        table.contains("incharacter model fetch --name qwen2.5-coder-1.5b"),
        "{table}"
    );
}
