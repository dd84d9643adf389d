use super::*;

/// Why importing the questionnaire at `path` in `format` into `data` with `options` is refused (as
/// no scale of its id exists yet).
fn refused(path: &Path, format: ScaleFormat, data: &Path, options: &ScaleOptions) -> String {
    questionnaire(path, format, data, options, |_| Existing::none())
        .unwrap_err()
        .to_string()
}

#[test]
fn option_wording_is_read_from_instructions() {
    let en =
        "Each choice is a number from 1 to 3: 1 denotes 'disagree', 2 denotes \"neutral\", and 3 denotes 'agree'.";
    assert_eq!(
        option_labels(en).into_values().collect::<Vec<_>>(),
        ["disagree", "neutral", "agree"]
    );
    let zh = "0代表“强烈不同意”，1表示“同意”。";
    assert_eq!(
        option_labels(zh).into_values().collect::<Vec<_>>(),
        ["强烈不同意", "同意"]
    );
}

fn write(dir: &Path, name: &str, v: Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    p
}

#[test]
fn an_incharacter_questionnaire_keeps_its_text_and_poles() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "Mini.json",
        serde_json::json!({
            "name": "Mini", "full_name": "Mini Type Inventory", "range": [1, 3],
            "categories": [{"cat_name": "E/I", "cat_questions": [1, 2]}],
            "questions": {
                "2": {"origin_en": "Parties tire you.", "origin_zh": "聚会让你累。", "rewritten_en": "Do parties tire you?",
                      "rewritten_zh": "聚会会让你累吗？", "dimension": "E/I", "category": "I"},
                "1": {"origin_en": "You love crowds.", "origin_zh": "你喜欢人群。", "rewritten_en": "Do you love crowds?",
                      "rewritten_zh": "你喜欢人群吗？", "dimension": "E/I", "category": "E"},
                "3": {"origin_en": "You like tea.", "origin_zh": "你喜欢茶。", "rewritten_en": "Tea?", "rewritten_zh": "茶？",
                      "category": "positive"}
            },
            "prompts": {"dim_desc": {"E/I": "Energy from people or from solitude."},
                        "llm_choice_instruction": {"en": "1 denotes 'disagree', 2 denotes 'neutral', 3 denotes 'agree'",
                                                   "zh": "1代表“不同意”，2代表“中立”，3代表“同意”"}}
        }),
    );
    let data = tempfile::tempdir().unwrap();
    let got = questionnaire(
        &file,
        ScaleFormat::Incharacter,
        data.path(),
        &ScaleOptions::default(),
        |_| Existing::none(),
    )
    .unwrap();
    assert_eq!((got.id.as_str(), got.items, got.dimensions), ("Mini", 3, 1));
    assert_eq!(got.filled, ["dimension descriptions in Chinese (copied from English)"]);
    let text = std::fs::read_to_string(&got.file).unwrap();
    let scale = Scale::parse(Source::new("x", &text)).unwrap();
    assert_eq!(scale.dimensions[0].poles, Some(["E".to_string(), "I".to_string()]));
    assert!(text.contains("keying = \"I\"") && text.contains("filler = true") && text.contains("\"同意\""));
    assert!(text.starts_with("# Imported from"));
}

#[test]
fn a_psychobench_questionnaire_is_filled_and_marked() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "questionnaires.json",
        serde_json::json!([{
            "name": "Tiny", "scale": 6, "compute_mode": "AVG", "reverse": [2],
            "prompt": "1 denotes 'strongly disagree' and 5 denotes 'strongly agree'.",
            "questions": {"1": "I like mornings.", "2": "I hate mornings.", "3": "I own a dog."},
            "categories": [{"cat_name": "Morningness", "cat_questions": [1, 2]}]
        }]),
    );
    let data = tempfile::tempdir().unwrap();
    let e = refused(&file, ScaleFormat::Psychobench, data.path(), &ScaleOptions::default());
    assert!(e.contains("pass --name with one of: Tiny"), "{e}");
    let opts = ScaleOptions {
        name: Some("Tiny".into()),
        ..ScaleOptions::default()
    };
    assert_eq!(stated_range("reply numbers from 0 to 4 in"), Some([0, 4]));
    for (prompt, range) in [
        ("Score each statement on a scale of 1 to 7, with 1 being agree", Some([1, 7])),
        ("reply numbers from -3 to 3 in the following", Some([-3, 3])),
        ("Answer between 1 and 5.", Some([1, 5])),
        ("Rate it 0-10: 0 never, 10 always.", Some([0, 10])),
        ("Rate it 1–5.", Some([1, 5])),
        ("numbers 1 to 7 … please give points between 2-6", Some([1, 7])),
        ("Here are the 30 statements, score them.", None),
        ("COVID-19 worries, rated as you like", None),
        ("item 12 to item 20", None),
        ("a weight from 0.5 to 1.0", None),
        ("written 2023-2024-05, answer from 1 to 5", Some([1, 5])),
        ("items 1-30 below; reply from 1 to 5", Some([1, 5])),
        ("call 555-1234-567", None),
    ] {
        assert_eq!(stated_range(prompt), range, "{prompt}");
    }
    let bundled = |_: &str| Existing {
        entry: None,
        files: Vec::new(),
        bundled: Some("Tiny".into()),
    };
    let e = questionnaire(&file, ScaleFormat::Psychobench, data.path(), &opts, bundled)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a scale \"Tiny\" already exists: the bundled scale Tiny;"),
        "{e}"
    );
    assert!(e.contains("--replace"), "{e}");
    let got = questionnaire(&file, ScaleFormat::Psychobench, data.path(), &opts, |_| {
        Existing::none()
    })
    .unwrap();
    assert_eq!(got.replaced, None);
    assert_eq!((got.items, got.dimensions), (3, 1));
    assert!(got.filled.iter().any(|f| f.contains("options.en")), "{:?}", got.filled);
    let text = std::fs::read_to_string(&got.file).unwrap();
    let scale = Scale::parse(Source::new("x", &text)).unwrap();
    assert_eq!(scale.range.min, 1);
    assert_eq!(scale.range.max, 5);
    assert!(
        text.contains("\"strongly disagree\", \"2\", \"3\", \"4\", \"strongly agree\""),
        "{text}"
    );
    assert!(text.contains("keying = \"negative\""));
}

#[test]
fn a_questionnaires_problems_are_named_in_it_before_anything_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let item = |category: &str, rewritten: &str| {
        serde_json::json!({"origin_en": "You like tea.", "category": category, "dimension": "A", "rewritten_en": rewritten})
    };
    let questionnaire_with = |range: serde_json::Value, items: serde_json::Value| {
        serde_json::to_string_pretty(&serde_json::json!({
            "name": "A", "range": range,
            "categories": [{"cat_name": "A", "cat_questions": [1, 2]}],
            "questions": items,
        }))
        .unwrap()
    };
    let good = item("positive", "Tea?");
    let cases = [
        // A range of a billion options is refused at once (it was built, label by label, first).
        (
            questionnaire_with(serde_json::json!([1, 1_000_000_000]), serde_json::json!({"1": good})),
            "\"range\"",
            "range [1, 1000000000]",
        ),
        // A keying no dimension takes is found in the scale it would become, and named at its item
        // in the questionnaire, not in a scale file that was never written.
        (
            questionnaire_with(
                serde_json::json!([1, 5]),
                serde_json::json!({"1": good, "2": item("sideways", "Tea?")}),
            ),
            "\"2\":",
            "item 2: keying \"sideways\"",
        ),
        (
            questionnaire_with(
                serde_json::json!([1, 5]),
                serde_json::json!({"1": good, "2": item("positive", " ")}),
            ),
            "\"rewritten_en\": \" \"",
            "item 2: \"rewritten_en\" must be a non-empty text",
        ),
        // What would leave an item unscored without a word: a dimension no category has, one whose
        // category does not list the item, a category listing an item that is not there.
        (
            questionnaire_with(
                serde_json::json!([1, 5]),
                serde_json::json!({"1": good, "2": {"origin_en": "Tea.", "dimension": "Aa"}}),
            ),
            "\"dimension\": \"Aa\"",
            "item 2: dimension \"Aa\" is not a category (categories: A)",
        ),
        (
            serde_json::to_string_pretty(&serde_json::json!({
                "name": "A", "range": [1, 5],
                "categories": [{"cat_name": "A", "cat_questions": [1, 2]}, {"cat_name": "B", "cat_questions": [1]}],
                "questions": {"1": good, "2": {"origin_en": "Tea.", "dimension": "B"}},
            }))
            .unwrap(),
            "\"dimension\": \"B\"",
            "item 2 names dimension \"B\", whose cat_questions do not list it",
        ),
        (
            serde_json::to_string_pretty(&serde_json::json!({
                "name": "A", "range": [1, 5],
                "categories": [{"cat_name": "A", "cat_questions": [1, 2, 77]}],
                "questions": {"1": good, "2": good},
            }))
            .unwrap(),
            "77",
            "category \"A\" lists item 77, which is not among the questions",
        ),
    ];
    let p = dir.path().join("bad.json");
    for (text, line_of, expect) in cases {
        std::fs::write(&p, &text).unwrap();
        let e = refused(&p, ScaleFormat::Incharacter, data.path(), &ScaleOptions::default());
        let line = text.lines().position(|l| l.contains(line_of)).unwrap() + 1;
        let named = format!("{}:{line}:", p.display());
        assert!(e.starts_with(&named) && e.contains(expect), "{text}\n{e}\n(wanted {named} … {expect})");
    }
    // A category named twice is named at its second entry (it was at 1:1).
    let text = serde_json::to_string_pretty(&serde_json::json!({
        "name": "A", "range": [1, 5],
        "categories": [{"cat_name": "A", "cat_questions": [1, 2]}, {"cat_name": "A", "cat_questions": [1, 2]}],
        "questions": {"1": good, "2": good},
    }))
    .unwrap();
    std::fs::write(&p, &text).unwrap();
    let e = refused(&p, ScaleFormat::Incharacter, data.path(), &ScaleOptions::default());
    let second = text.lines().enumerate().filter(|(_, l)| l.contains("\"cat_name\": \"A\"")).nth(1).unwrap().0 + 1;
    assert!(
        e.starts_with(&format!("{}:{second}:", p.display())) && e.contains("duplicate dimension \"A\""),
        "{e}"
    );
    // A PsychoBench questionnaire's scale, likewise.
    let list = serde_json::to_string_pretty(&serde_json::json!([
        {"name": "Other", "scale": 5, "categories": [], "questions": {}},
        {"name": "Big", "scale": 2_000_000_000, "categories": [{"cat_name": "A", "cat_questions": [1]}],
         "questions": {"1": "I like tea."}},
    ]))
    .unwrap();
    std::fs::write(&p, &list).unwrap();
    let options = ScaleOptions {
        name: Some("Big".into()),
        ..ScaleOptions::default()
    };
    let e = refused(&p, ScaleFormat::Psychobench, data.path(), &options);
    let line = list.lines().position(|l| l.contains("2000000000")).unwrap() + 1;
    assert!(e.starts_with(&format!("{}:{line}:", p.display())) && e.contains("range [1, 1999999999]"), "{e}");
    let scales = data.path().join("scales");
    assert!(!scales.exists() || std::fs::read_dir(&scales).unwrap().next().is_none(), "nothing written");
}

/// "reverse" and the categories name items: a number that is not one, names no question, or is
/// listed twice is located, not dropped or wrapped (4294967297 became item 1, reversed).
#[test]
fn psychobench_item_numbers_are_checked_where_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let p = dir.path().join("questionnaires.json");
    let options = ScaleOptions {
        name: Some("Tiny".into()),
        ..ScaleOptions::default()
    };
    let cases = [
        (serde_json::json!([4_294_967_297u64]), serde_json::json!([1, 2]), "4294967297", "is not an item number"),
        (serde_json::json!([2, "x"]), serde_json::json!([1, 2]), "\"x\"", "\"x\" is not an item number"),
        (serde_json::json!([99]), serde_json::json!([1, 2]), "99", "lists item 99, which is not among the questions"),
        (serde_json::json!([2]), serde_json::json!([1, 7]), "7", "category \"A\" lists item 7, which is not"),
        (serde_json::json!([2]), serde_json::json!([1, 1]), "1", "category \"A\" lists item 1 twice"),
    ];
    for (reverse, listed, line_of, expect) in cases {
        let text = serde_json::to_string_pretty(&serde_json::json!([{
            "name": "Tiny", "scale": 6, "reverse": reverse,
            "questions": {"1": "I like mornings.", "2": "I hate mornings."},
            "categories": [{"cat_name": "A", "cat_questions": listed}]
        }]))
        .unwrap();
        std::fs::write(&p, &text).unwrap();
        let e = refused(&p, ScaleFormat::Psychobench, data.path(), &options);
        // The last line that holds just the value (the categories come after "reverse").
        let line = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim().trim_end_matches(',') == line_of)
            .map(|(i, _)| i + 1)
            .last();
        let named = line.map(|line| format!("{}:{line}:", p.display()));
        assert!(
            named.as_ref().is_some_and(|n| e.starts_with(n)) && e.contains(expect),
            "{text}\n{e}\n(wanted {named:?} … {expect})"
        );
    }
    assert!(!data.path().join("scales").exists(), "nothing written");
    // A name with a line break stays in the header's comment (it ended it: the rest was TOML).
    let name = "Tiny\n[evil]\nx = 1";
    let text = serde_json::to_string_pretty(&serde_json::json!([{
        "name": name, "scale": 6, "reverse": [2],
        "questions": {"1": "I like mornings.", "2": "I hate mornings."},
        "categories": [{"cat_name": "A", "cat_questions": [1, 2]}]
    }]))
    .unwrap();
    std::fs::write(&p, &text).unwrap();
    let options = ScaleOptions {
        name: Some(name.into()),
        id: Some("Tiny".into()),
        ..ScaleOptions::default()
    };
    let got = questionnaire(&p, ScaleFormat::Psychobench, data.path(), &options, |_| Existing::none()).unwrap();
    let written = std::fs::read_to_string(&got.file).unwrap();
    assert!(Scale::parse(Source::new("x", &written)).is_ok(), "{written}");
    assert!(written.contains("name = \"Tiny [evil] x = 1\"\n"), "{written}");
}

#[test]
fn malformed_questionnaires_name_the_place_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let cat = serde_json::json!([{"cat_name": "A", "cat_questions": [1]}]);
    let cases = [
        (
            "{\n  \"name\": \"A\",\n  \"range\": [1, 5,\n}".to_string(),
            "bad.json:4:1",
        ),
        (
            serde_json::json!({"name": "A", "range": [1, 5], "categories": cat, "questions": {"one": {}}})
                .to_string(),
            "item key \"one\"",
        ),
        (
            serde_json::json!({"name": "../../x", "range": [1, 5], "categories": cat,
                               "questions": {"1": {"origin_en": "Tea.", "dimension": "A"}}})
            .to_string(),
            "must be at most 64 ASCII",
        ),
        (
            serde_json::json!({"name": "A", "range": [1, 5], "categories": [], "questions": {}}).to_string(),
            "no categories",
        ),
        (
            serde_json::json!({"name": "A", "range": [1, 99999999999i64], "categories": cat, "questions": {}})
                .to_string(),
            "out of bounds",
        ),
    ];
    for (text, expect) in cases {
        let p = dir.path().join("bad.json");
        std::fs::write(&p, &text).unwrap();
        let e = refused(&p, ScaleFormat::Incharacter, data.path(), &ScaleOptions::default());
        assert!(e.contains(expect), "{text}: {e}");
    }
    assert!(std::fs::read_dir(data.path()).unwrap().next().is_none());
}

/// A questionnaire whose scale file would be larger than the catalog reads (its text is written
/// in both languages, as statement and question) is refused, and nothing is written: the file
/// could only be skipped afterwards.
#[test]
fn a_scale_too_large_for_the_catalog_is_refused_before_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(1 << 20);
    let file = write(
        dir.path(),
        "questionnaires.json",
        serde_json::json!([{
            "name": "Tiny", "scale": 6, "compute_mode": "AVG", "reverse": [],
            "prompt": "1 denotes 'strongly disagree' and 5 denotes 'strongly agree'.",
            "questions": {"1": long, "2": "I hate mornings."},
            "categories": [{"cat_name": "Morningness", "cat_questions": [1, 2]}]
        }]),
    );
    let data = tempfile::tempdir().unwrap();
    let opts = ScaleOptions {
        name: Some("Tiny".into()),
        ..ScaleOptions::default()
    };
    let e = refused(&file, ScaleFormat::Psychobench, data.path(), &opts);
    assert!(
        e.contains("the scale file would take") && e.contains("more than the 4 MiB a scale or character file may hold"),
        "{e}"
    );
    let written: Vec<_> = std::fs::read_dir(data.path().join("scales"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(written.is_empty(), "{written:?}");
}

/// A prompt that asks for other numbers than "scale" reads answers as is refused where it says so;
/// PsychoBench's own two readings ([1, scale − 1], [0, scale]) are taken.
#[test]
fn a_psychobench_prompt_that_contradicts_its_scale_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let p = dir.path().join("questionnaires.json");
    let options = ScaleOptions {
        name: Some("Tiny".into()),
        ..ScaleOptions::default()
    };
    let tiny = |prompt: &str| {
        serde_json::to_string_pretty(&serde_json::json!([{
            "name": "Tiny", "scale": 5, "prompt": prompt,
            "questions": {"1": "I like mornings.", "2": "I hate mornings."},
            "categories": [{"cat_name": "A", "cat_questions": [1, 2]}]
        }]))
        .unwrap()
    };
    let text = tiny("You can only reply numbers from 0 to 4.");
    std::fs::write(&p, &text).unwrap();
    let e = refused(&p, ScaleFormat::Psychobench, data.path(), &options);
    let line = text.lines().position(|l| l.contains("\"prompt\"")).unwrap() + 1;
    assert!(e.starts_with(&format!("{}:{line}:", p.display())), "{e}");
    assert!(e.contains("asks for numbers from 0 to 4, but \"scale\" 5 reads them as 1 to 4"), "{e}");
    for (prompt, range) in [("from 1 to 4.", "[1, 4]"), ("from 0 to 5.", "[0, 5]"), ("no numbers", "[1, 4]")] {
        std::fs::write(&p, tiny(prompt)).unwrap();
        let data = tempfile::tempdir().unwrap();
        let got = questionnaire(&p, ScaleFormat::Psychobench, data.path(), &options, |_| Existing::none()).unwrap();
        let written = std::fs::read_to_string(&got.file).unwrap();
        assert!(written.contains(&format!("range = {range}")), "{prompt}: {written}");
    }
}
