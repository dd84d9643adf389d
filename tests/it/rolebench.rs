//! RoleBench scoring against its oracles: ROUGE-L equal to the PyPI `rouge-score` package's on the
//! frozen cases of tests/fixtures/rouge/expected.json (see make_expected.py), and the question files of
//! the RoleBench reference data (../shared/reference/RoleBench) loaded, filtered, sampled and scored.
//! Tests that need the reference data print a note and pass when it is not on this machine.

use std::path::{Path, PathBuf};

use incharacter::domain::rouge::{self, RougeL};
use incharacter::domain::scale::Language;
use incharacter::method::rolebench::{self, Filter, LoadError, Question, Scored};
use serde_json::Value;

const TOLERANCE: f64 = 1e-9;

fn fixture() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rouge/expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture present")).expect("fixture is JSON")
}

fn number(v: &Value) -> f64 {
    v.as_f64().expect("a number")
}

fn text(v: &Value) -> &str {
    v.as_str().expect("a string")
}

/// Whether `got` equals the case's p, r and f to within TOLERANCE.
fn same(got: RougeL, case: &Value) -> bool {
    [(got.p, "p"), (got.r, "r"), (got.f, "f")]
        .iter()
        .all(|(x, k)| (x - number(&case[*k])).abs() <= TOLERANCE)
}

#[test]
fn english_tokenizer_equals_rouge_score() {
    let f = fixture();
    assert_eq!(f["generator"]["rouge_score"], "0.1.2");
    let cases = f["tokenize"].as_array().unwrap();
    assert!(cases.len() > 50);
    for case in cases {
        let want: Vec<&str> = case["tokens"].as_array().unwrap().iter().map(text).collect();
        assert_eq!(rouge::tokenize_en(text(&case["text"])), want, "{:?}", case["text"]);
    }
    // Python's lower() maps exactly these non-ASCII characters to something with [a-z0-9].
    let python: Vec<u32> = f["lower_to_ascii"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    let rust: Vec<u32> = (0x80..=0x10FFFFu32)
        .filter(|&cp| char::from_u32(cp).is_some_and(|c| c.to_lowercase().any(|l| l.is_ascii_alphanumeric())))
        .collect();
    assert_eq!(rust, python);
}

#[test]
fn english_rouge_l_equals_rouge_score() {
    let f = fixture();
    let cases = f["cases"].as_array().unwrap();
    assert!(cases.len() >= 200, "{} cases", cases.len());
    let from_rows = cases.iter().filter(|c| text(&c["origin"]).starts_with("jack")).count();
    assert!(from_rows >= 200, "{from_rows} cases from Jack Sparrow rows");
    for case in cases {
        let (reference, candidate) = (text(&case["reference"]), text(&case["candidate"]));
        let got = rouge::score(reference, candidate, Language::En);
        assert!(same(got, case), "{got:?} for {case}");
        // The highlighted subsequence is rouge-score's own choice, and consistent with the scores.
        let lcs = rouge::lcs(&rouge::tokenize_en(reference), &rouge::tokenize_en(candidate));
        let want: Vec<usize> = case["lcs_reference"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(lcs.reference, want, "{case}");
        assert_eq!(lcs.candidate.len(), lcs.len);
        let h = rouge::highlight(reference, candidate, Language::En);
        assert_eq!((h.rouge, h.reference.len(), h.candidate.len()), (got, lcs.len, lcs.len));
    }
    for case in f["best"].as_array().unwrap() {
        let references: Vec<&str> = case["references"].as_array().unwrap().iter().map(text).collect();
        let (index, got) = rouge::best(&references, text(&case["candidate"]), Language::En).unwrap();
        assert_eq!(index as u64, case["index"].as_u64().unwrap(), "{case}");
        assert!(same(got, case), "{got:?} for {case}");
    }
}

#[test]
fn chinese_rouge_l_equals_rouge_score_with_a_character_tokenizer() {
    let f = fixture();
    let cases = f["zh_cases"].as_array().unwrap();
    assert!(cases.len() >= 40);
    for case in cases {
        let got = rouge::score(text(&case["reference"]), text(&case["candidate"]), Language::Zh);
        assert!(same(got, case), "{got:?} for {case}");
    }
}

fn reference_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference/RoleBench");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "note: {} is missing; skipping the RoleBench reference-data test",
            dir.display()
        );
        None
    }
}

fn english_test(dir: &Path) -> Vec<Question> {
    rolebench::load_questions(&dir.join("rolebench-eng/role-generalization/role_specific/test.jsonl")).unwrap()
}

#[test]
fn reference_files_load_and_filter() {
    let Some(dir) = reference_dir() else { return };
    let eng = english_test(&dir);
    assert_eq!(eng.len(), 2534);
    assert!(eng.iter().all(|q| q.language() == Language::En));
    assert_eq!(
        rolebench::roles(&eng),
        [
            "Jack Sparrow",
            "Walt Kowalski",
            "Andrew Detmer",
            "Raylan Givens",
            "John Doe",
            "Tom Ripley",
            "John Keating",
            "Lestat de Lioncourt",
            "Professor G.H. Dorr",
            "Coriolanus"
        ]
    );
    // Counted independently with Python over the raw file (type as a string or a list).
    let count = |roles: &[&str], types: &[&str]| {
        let filter = Filter {
            roles: roles.iter().map(|s| s.to_string()).collect(),
            types: types.iter().map(|s| s.to_string()).collect(),
        };
        filter.apply(eng.clone()).unwrap().len()
    };
    assert_eq!(count(&["Jack Sparrow"], &[]), 286);
    assert_eq!(count(&["Jack Sparrow"], &["script_based"]), 40);
    assert_eq!(count(&["Jack Sparrow"], &["script_agnostic"]), 246);
    assert_eq!(count(&[], &["script_based"]), 758);
    assert_eq!(count(&[], &["script_agnostic"]), 1776);
    assert_eq!(count(&["Jack Sparrow", "Coriolanus"], &[]), 286 + 302);
    let jack = Filter {
        roles: vec!["Jack Sparrow".into()],
        types: vec![],
    }
    .apply(eng.clone())
    .unwrap();
    assert_eq!(jack[0].line, 1);
    assert_eq!(
        jack[0].question,
        "Jack Sparrow, how did you manage to escape from the casket?"
    );
    assert!(jack.iter().all(|q| (1..=4).contains(&q.references.len())));

    let zh = |name: &str| rolebench::load_questions(&dir.join("rolebench-zh/role_specific").join(name)).unwrap();
    let (test, train) = (zh("test.jsonl"), zh("train.jsonl"));
    assert_eq!((test.len(), train.len()), (239, 1535));
    assert_eq!(rolebench::roles(&test), ["皇帝", "张飞", "华妃", "李白", "孙悟空"]);
    assert!(test.iter().chain(&train).all(|q| q.language() == Language::Zh));
    let baseline = rolebench::load_baseline(&dir.join("rolebench-zh/role_specific/rolegpt_baseline.jsonl")).unwrap();
    assert_eq!(baseline.len(), 239);
    assert!(test.iter().all(|q| baseline.get(&q.role, &q.question).is_some()));
}

#[test]
fn the_baseline_summary_equals_rouge_score() {
    let Some(dir) = reference_dir() else { return };
    let zh = dir.join("rolebench-zh/role_specific");
    let test = rolebench::load_questions(&zh.join("test.jsonl")).unwrap();
    let baseline = rolebench::load_baseline(&zh.join("rolegpt_baseline.jsonl")).unwrap();
    let scores: Vec<RougeL> = test
        .iter()
        .map(|q| {
            let answer = baseline.get(&q.role, &q.question).unwrap();
            rouge::best(&q.references, answer, q.language()).unwrap().1
        })
        .collect();
    let summary = rolebench::summarize(test.iter().zip(&scores).map(|(q, &rouge)| Scored {
        role: &q.role,
        types: &q.types,
        rouge,
    }));
    let want = &fixture()["zh_baseline_summary"];
    let check = |got: rolebench::Mean, want: &Value| {
        assert_eq!(got.count as u64, want["count"].as_u64().unwrap());
        assert!(
            same(
                RougeL {
                    p: got.p,
                    r: got.r,
                    f: got.f
                },
                want
            ),
            "{got:?} vs {want}"
        );
    };
    check(summary.overall, &want["overall"]);
    assert_eq!(summary.by_role.len(), 5);
    for (role, mean) in &summary.by_role {
        check(*mean, &want[format!("role:{role}")]);
    }
    assert_eq!(summary.by_type["script_based"].count, 83);
    assert_eq!(summary.by_type["script_agnostic"].count, 156);
}

#[test]
fn samples_are_deterministic() {
    let Some(dir) = reference_dir() else { return };
    let jack = Filter {
        roles: vec!["Jack Sparrow".into()],
        types: vec![],
    }
    .apply(english_test(&dir))
    .unwrap();
    let lines = |limit: usize, seed: u64| -> Vec<usize> {
        rolebench::sample(jack.clone(), limit, seed)
            .iter()
            .map(|q| q.line)
            .collect()
    };
    let a = lines(12, 2023);
    assert_eq!(a, lines(12, 2023));
    assert_eq!(a.len(), 12);
    assert!(a.windows(2).all(|w| w[0] < w[1]), "file order: {a:?}");
    assert_ne!(a, lines(12, 2024));
    // Pinned (and reproduced by a Python port of SplitMix64 + partial Fisher–Yates): a seed recorded in a
    // session must select the same questions in every later version.
    assert_eq!(a, PINNED_SAMPLE);
    let more = lines(30, 2023);
    assert!(a.iter().all(|l| more.contains(l)));
    assert_eq!(lines(1000, 2023).len(), 286);
}

const PINNED_SAMPLE: [usize; 12] = [8, 44, 48, 61, 68, 76, 84, 155, 196, 216, 223, 2074];

#[test]
fn malformed_rows_report_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.jsonl");
    std::fs::write(
        &path,
        concat!(
            r#"{"role": "皇帝", "question": "朕？", "generated": ["是。"], "type": ["script_based"]}"#,
            "\n\n",
            r#"{"role": "皇帝", "question": "朕？", "generated": ["是。" "否。"]}"#,
            "\n",
        ),
    )
    .unwrap();
    let err = rolebench::load_questions(&path).unwrap_err();
    // In characters, as every file:line:column here (serde_json counts bytes: each ideograph 3).
    let line = r#"{"role": "皇帝", "question": "朕？", "generated": ["是。" "否。"]}"#;
    let column = line[..line.find("\"否").unwrap()].chars().count() + 1;
    assert_eq!(
        err,
        LoadError::Row {
            path: path.clone(),
            line: 3,
            column,
            message: "expected `,` or `]`".into()
        }
    );
    assert_eq!(
        err.to_string(),
        format!("{}:3:{column}: expected `,` or `]`", path.display())
    );

    std::fs::write(
        &path,
        "{\"role\": \"Jack Sparrow\", \"question\": \"\", \"generated\": [\"Savvy?\"]}\n",
    )
    .unwrap();
    assert_eq!(
        rolebench::load_questions(&path).unwrap_err().to_string(),
        format!("{}:1:26: \"question\" is empty", path.display())
    );
}
