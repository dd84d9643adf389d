use super::*;

fn names(text: &str) -> Vec<String> {
    pieces(text)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Slot { name, .. } => Some(name.to_string()),
            Piece::Text(_) => None,
        })
        .collect()
}

#[test]
fn placeholders_are_identifiers_in_braces_and_every_other_brace_is_literal() {
    assert_eq!(names("{a} {_b2} {3c} { d} {e } {f-g} {} {"), vec!["a", "_b2"]);
    let json = r#"{"analysis": "<why>", "result": {result_form}}"#;
    assert_eq!(names(json), vec!["result_form"]);
    assert_eq!(
        fill(json, &[("result_form", "<a number>")]),
        r#"{"analysis": "<why>", "result": <a number>}"#
    );
    assert_eq!(fill("{{x}}", &[("x", "1")]), "{1}");
    assert_eq!(fill("钟离{x}。", &[("x", "「")]), "钟离「。");
    assert_eq!(fill("{unset} {x}", &[("x", "1")]), "{unset} 1");
}

#[test]
fn rendering_is_one_pass() {
    let out = fill("{a}/{b}", &[("a", "{b}"), ("b", "{a}")]);
    assert_eq!(out, "{b}/{a}", "a value is never substituted again");
}

#[test]
fn the_bundled_templates_are_valid_and_say_what_they_require() {
    for t in Template::ALL {
        validate(t, t.bundled_text(), &t.file_name()).unwrap();
        assert_eq!(Template::from_name(t.name()), Some(t));
        for group in t.required() {
            for name in *group {
                assert!(t.placeholders().iter().any(|p| p.name == *name), "{}: {name}", t.name());
            }
        }
    }
    assert!(Template::SelfReportZh.is_required("stem") && Template::SelfReportZh.is_required("statement"));
    assert!(!Template::ExpertRating.is_required("rule"));
    assert_eq!(Template::from_name("expert_rating.txt"), None);
}

#[test]
fn an_unknown_placeholder_is_located_by_line_and_character_column() {
    let text = "Dimension: {dimension}\n钟离 {options} and {dimensoin}\n";
    let e = validate(Template::ExpertRating, text, "p/expert_rating.txt").unwrap_err();
    assert_eq!((e.line, e.column), (2, 4));
    assert!(
        e.to_string().starts_with("p/expert_rating.txt:2:4: unknown placeholder {options} in the expert_rating template; it may use {scale_name}"),
        "{e}"
    );
}

#[test]
fn an_unclosed_placeholder_is_located_where_it_opens() {
    let e = validate(Template::Interviewer, "Ask:\n  {question\nnow", "i.txt").unwrap_err();
    assert_eq!(
        e.to_string(),
        "i.txt:2:3: the placeholder {question is not closed: write {question}"
    );
    // A sentence's full stop after the name does not close it.
    let e = validate(Template::Interviewer, "Ask {question. Then", "i.txt").unwrap_err();
    assert_eq!(e.to_string(), "i.txt:1:5: the placeholder {question is not closed: write {question}");
    // Braces of literal text, and names no placeholder has, stay literal.
    validate(Template::Interviewer, "{\"a\": 1} {question} {other", "i.txt").unwrap();
}

#[test]
fn a_missing_required_placeholder_is_named_at_the_start_of_the_file() {
    let e = validate(Template::DimensionConversion, "Rate {dimension}.", "d.txt").unwrap_err();
    assert_eq!(
        e.to_string(),
        "d.txt:1:1: the dimension_conversion template needs the placeholder {options} or {dimension.conversion_instruction} (the dimension's options, each by doc_option, joined by doc_option_separator; or the dimension's `conversion_instruction` in the scale file (English), {character} in it filled; empty if none)"
    );
    let e = validate(Template::SelfReportEn, "{options}", "s.txt").unwrap_err();
    assert!(e.to_string().contains("{stem} or {statement}"), "{e}");
    validate(Template::SelfReportEn, "Agree? {statement} ({options})", "s.txt").unwrap();
}

fn folder(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

#[test]
fn a_folder_replaces_the_templates_it_holds_and_no_others() {
    let text = "Ask again: {problem}\n";
    let dir = folder(&[("reask.txt", text.as_bytes()), (".DS_Store", b"\0")]);
    let t = Templates::load_dir(dir.path()).unwrap();
    assert_eq!(t.text(Template::Reask), text);
    assert_eq!(
        t.render(Template::Reask, &[("problem", "no JSON")]),
        "Ask again: no JSON\n"
    );
    assert_eq!(t.origin(Template::ExpertRating), BUNDLED);
    assert_eq!(t.text(Template::ExpertRating), Template::ExpertRating.bundled_text());
    let origin = Path::new(t.origin(Template::Reask));
    assert!(origin.is_absolute() && origin.ends_with("reask.txt"), "{origin:?}");
    assert_eq!(Templates::load_dir(folder(&[]).path()).unwrap(), *Templates::bundled());
    let marked = folder(&[("reask.txt", "\u{feff}Ask again: {problem}\n".as_bytes())]);
    assert_eq!(
        Templates::load_dir(marked.path()).unwrap().text(Template::Reask),
        text,
        "a byte order mark is not sent"
    );
}

#[test]
fn a_folder_with_an_unknown_or_bad_file_is_refused() {
    let dir = folder(&[
        ("expert_rating.txt", b"{dimension}"),
        ("expert-rating.txt", b"{dimension}"),
    ]);
    let e = Templates::load_dir(dir.path()).unwrap_err();
    assert!(
        matches!(&e, TemplateError::UnknownFile { path, known } if path.ends_with("expert-rating.txt") && known.contains("self_report_cot.zh.txt")),
        "{e}"
    );
    // A name with an escape in it is named with the escape written out, so it can be found.
    let dir = folder(&[("expert\x1b[31m.txt", b"{dimension}")]);
    let e = Templates::load_dir(dir.path()).unwrap_err().to_string();
    assert!(e.contains("expert\\u{1b}[31m.txt: not a prompt template"), "{e}");
    let dir = folder(&[("interviewer.txt", b"{experimenter}: \xff{question}")]);
    let e = Templates::load_dir(dir.path()).unwrap_err().to_string();
    assert!(e.ends_with("interviewer.txt:1:17: not UTF-8 text"), "{e}");
    let dir = folder(&[("interviewer.txt", b"\n  {speaker}: {question}")]);
    let e = Templates::load_dir(dir.path()).unwrap_err().to_string();
    assert!(e.contains("interviewer.txt:2:3: unknown placeholder {speaker}"), "{e}");
    let e = Templates::load_dir(&dir.path().join("absent")).unwrap_err();
    assert!(matches!(e, TemplateError::Read { .. }), "{e}");
}

#[test]
fn each_sub_folder_is_a_prompt_set_read_or_refused_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    assert!(sets_in(&dir.path().join("absent")).is_empty());
    for (set, file, text) in [
        ("strict", "reask.txt", "Again: {problem}"),
        ("broken", "reask.txt", "Again: {problme}"),
        (".hidden", "reask.txt", "{problem}"),
    ] {
        std::fs::create_dir(dir.path().join(set)).unwrap();
        std::fs::write(dir.path().join(set).join(file), text).unwrap();
    }
    std::fs::write(dir.path().join("loose.txt"), "not a set").unwrap();
    let sets = sets_in(dir.path());
    let names: Vec<&str> = sets.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["broken", "strict"]);
    let e = sets[0].1.as_ref().unwrap_err().to_string();
    assert!(e.contains("reask.txt:1:8: unknown placeholder {problme}"), "{e}");
    let strict = sets[1].1.as_ref().unwrap();
    assert_eq!(strict["reask"].text.as_deref(), Some("Again: {problem}"));
}

#[test]
fn a_record_holds_the_overrides_with_their_text_and_gives_them_back() {
    let dir = folder(&[("option_conversion.txt", b"Options: {options}\n")]);
    let t = Templates::load_dir(dir.path()).unwrap();
    let record = t.record();
    assert_eq!(record.len(), 1);
    let file = &record["option_conversion"];
    assert_eq!(
        file.sha256, "bb2a1466754e5ccf3307760a259f71212f4e5b96ad4948e2a4bc55eeca996ac2",
        "sha256 of the file's bytes"
    );
    assert_eq!(file.text.as_deref(), Some("Options: {options}\n"));
    // The file may change or go: the record is what the session reads.
    std::fs::remove_file(dir.path().join("option_conversion.txt")).unwrap();
    assert_eq!(Templates::from_record(&record).unwrap(), t);
    assert_eq!(
        Templates::from_record(&PromptSet::new()).unwrap(),
        *Templates::bundled()
    );

    let all = manifest(&record);
    assert_eq!(all.len(), 10, "the first ten, and the replaced ones");
    assert_eq!(all["option_conversion"].origin, file.origin);
    assert_eq!(all["option_conversion"].text, None);
    assert_eq!(all["reask"].origin, BUNDLED);
    assert_eq!(all["reask"].sha256, sha256(Template::Reask.bundled_text()));
    assert_eq!(
        Templates::from_record(&all).unwrap_err().to_string(),
        format!(
            "the session's prompt set: option_conversion ({}) is recorded without its text, and it is not this build's bundled template",
            file.origin
        )
    );
    assert_eq!(
        Templates::from_record(&manifest(&PromptSet::new())).unwrap(),
        *Templates::bundled()
    );
}

#[test]
fn a_damaged_record_is_refused() {
    let file = |text: &str, sha: &str| PromptFile {
        origin: "/p/reask.txt".into(),
        sha256: sha.into(),
        text: Some(text.into()),
    };
    let one = |name: &str, f: PromptFile| PromptSet::from([(name.to_string(), f)]);
    let e = Templates::from_record(&one("reask", file("{problem}!", "00"))).unwrap_err();
    assert!(e.to_string().contains("does not have its recorded sha256"), "{e}");
    let e = Templates::from_record(&one("rehash", file("{problem}", &sha256("{problem}")))).unwrap_err();
    assert!(e.to_string().contains("unknown template \"rehash\""), "{e}");
    let e = Templates::from_record(&one("reask", file("{why}", &sha256("{why}")))).unwrap_err();
    assert!(
        e.to_string().starts_with("/p/reask.txt:1:1: unknown placeholder {why}"),
        "{e}"
    );
}

#[test]
fn dotted_placeholders_are_names_and_a_dot_without_a_part_is_text() {
    assert_eq!(
        names("{range.min}–{pole_a.letter} {a.} {.b} {a..b} {x.y.z}"),
        vec!["range.min", "pole_a.letter", "x.y.z"]
    );
    assert_eq!(fill("{range.min} to {range.max}", &[("range.min", "1"), ("range.max", "5")]), "1 to 5");
}

#[test]
fn a_json_template_escapes_every_value_and_keeps_its_own_text() {
    let dir = folder(&[("oc_sample.txt", "«{id}»: {\"said\": \"{answer}\", 'raw': {answer}}".as_bytes())]);
    let t = Templates::load_dir(dir.path()).unwrap();
    let values = [
        ("id", "6"),
        ("statement", "Is reserved."),
        ("question", "Q"),
        ("answer", "She said \"no\"\n\tand left\\"),
        ("character", "Hermione Granger"),
        ("character.alias", "Hermione"),
    ];
    assert_eq!(
        t.render(Template::OcSample, &values),
        "«6»: {\"said\": \"She said \\\"no\\\"\\n\\tand left\\\\\", 'raw': She said \\\"no\\\"\\n\\tand left\\\\}"
    );
    // A prose template takes values as they are.
    assert_eq!(
        t.render(Template::Reask, &[("problem", "a \"quote\"")]),
        "That reply cannot be used: a \"quote\". Reply again with the JSON only, exactly in the requested form."
    );
    assert_eq!(json_escaped("钟离\u{1b}[2J"), "钟离\\u001b[2J");
}

#[test]
fn a_required_group_that_renders_empty_is_located_at_its_first_placeholder() {
    let dir = folder(&[(
        "dimension_conversion.txt",
        b"Rate {dimension}.\n  {dimension.conversion_instruction} and {dimension.conversion_instruction}",
    )]);
    let t = Templates::load_dir(dir.path()).unwrap();
    let filled = |instruction: &str| {
        t.filled(
            Template::DimensionConversion,
            &[("dimension", "Extraversion"), ("dimension.conversion_instruction", instruction)],
            "dimension E of scale X",
        )
    };
    // The dimension's name fills the first group; the options' group rests on the instruction alone.
    let e = filled(" \n").unwrap_err().to_string();
    let file = dir.path().join("dimension_conversion.txt");
    assert!(
        e.starts_with(&format!(
            "{}:2:3: {{dimension.conversion_instruction}} is empty for dimension E of scale X, and the \
             dimension_conversion template uses nothing in its place (it may use {{options}})",
            file.display()
        )),
        "{e}"
    );
    assert!(filled("1 = low … 5 = high").is_ok());
    // The bundled template lists the options itself.
    assert!(
        Templates::bundled()
            .filled(
                Template::DimensionConversion,
                &[("dimension", "E"), ("options", "1 = low")],
                "x"
            )
            .is_ok()
    );
}
