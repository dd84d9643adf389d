//! Cards: macros, the three versions, and what is not a card (located where it can be).
use super::*;

#[test]
fn macros_resolve_in_any_case_and_the_legacy_forms() {
    assert_eq!(
        resolve("{{char}} greets {{User}}; <BOT> and <user>, {{CHAR}}. {{chars}} 钟离", "Zhongli", "Traveler"),
        "Zhongli greets Traveler; Zhongli and Traveler, Zhongli. {{chars}} 钟离"
    );
    assert_eq!(resolve("{{cha", "a", "b"), "{{cha");
}

#[test]
fn the_three_versions_are_told_apart() {
    let v1 = parse(r#"{"name": "Ann", "description": "d", "tags": ["ignored in V1"]}"#).unwrap();
    assert_eq!((v1.spec, v1.description.as_str(), v1.tags.len()), (Spec::V1, "d", 0));
    let v2 = parse(
        r#"{"spec": "chara_card_v2", "name": "flat copy", "data": {"name": "Ann", "tags": ["a"], "system_prompt": "sp"}}"#,
    )
    .unwrap();
    assert_eq!((v2.spec, v2.name.as_str(), v2.system_prompt.as_str()), (Spec::V2, "Ann", "sp"));
    assert_eq!(v2.tags, ["a"]);
    let v3 = parse(
        r#"{"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Ann", "alternate_greetings": ["hi"],
            "extensions": {"incharacter": {"id": "ann-en", "experimenter": "Bo"}}}}"#,
    )
    .unwrap();
    assert_eq!((v3.spec, v3.alternate_greetings.len()), (Spec::V3, 1));
    let ours = v3.ours.unwrap();
    assert_eq!(ours.experimenter.as_deref(), Some("Bo"));
    assert!(ours.whole_prompt(), "an id says the description is the whole prompt");
    let v2 = parse(r#"{"spec": "chara_card_v2", "data": {"name": "Ann", "extensions": {"incharacter": {"experimenter": "Bo"}}}}"#)
        .unwrap();
    assert!(!v2.ours.unwrap().whole_prompt());
}

#[test]
fn what_is_not_a_card_says_why() {
    let shape = |text: &str| parse(text).unwrap_err().to_string();
    assert!(shape("[1]").contains("the JSON is a list, not an object"));
    assert!(shape(r#"{"description": "x"}"#).contains("no \"name\""));
    assert!(shape(r#"{"spec": "chara_card_v2", "data": {}}"#).contains("no \"data.name\""));
    assert!(shape(r#"{"spec": "chara_card_v9", "name": "x"}"#).contains("unknown spec"));
    assert!(shape(r#"{"spec": "chara_card_v2", "data": {"name": "x", "tags": "a"}}"#).contains("data.tags must be a list"));
    assert!(shape(r#"{"name": 3}"#).contains("name must be a string, not a number"));
    // A field of the wrong kind is located where its value begins: in a V2 card, the one under
    // "data" (not a top-level key of the same name, nor the words inside a string).
    let cases = [
        (
            "{\"spec\": \"chara_card_v2\", \"name\": \"Top\",\n \"data\": {\"name\": \"x\",\n  \"description\": \"says \\\"mes_example\\\": no\",\n  \"mes_example\":  [1]}}",
            (4, 19, "data.mes_example must be a string, not a list"),
        ),
        // A nested object's key of the same name comes first: the field itself is named.
        (
            "{\"spec\": \"chara_card_v2\", \"data\": {\"character_book\": {\"name\": \"Bök\"},\n\"name\": 5}}",
            (2, 9, "data.name must be a string, not a number"),
        ),
        // Columns count characters; a V1 card's keys are the root's.
        (
            "{\"extensions\": {\"tags\": 1},\n \"name\": \"é\", \"tags\": 3, \"mes_example\": {}}",
            (2, 41, "mes_example must be a string, not an object"),
        ),
    ];
    for (card, (line, column, message)) in cases {
        let message = message.to_string();
        assert_eq!(parse(card).unwrap_err(), CardError::Field { line, column, message }, "{card}");
    }
    assert_eq!(
        parse("{\n  \"name\": \"x\",\n  oops\n}").unwrap_err(),
        CardError::Json {
            line: 3,
            column: 3,
            message: "key must be a string".into()
        }
    );
}

#[test]
fn example_dialogues_split_on_start_and_become_memory_lines() {
    let mes = "<START>\n{{user}}: Hi there.\n{{char}}: *waves* Hello!\nHow are you?\n\n<start>\n<USER>：你好\n<BOT>: Fine.\nAnn:「Already a line」\n<START>\n\n";
    assert_eq!(
        examples(mes, "Ann", "Bo"),
        [
            "Bo:「Hi there.」\nAnn:「*waves* Hello!\nHow are you?」",
            "Bo:「你好」\nAnn:「Fine.」\nAnn:「Already a line」"
        ]
    );
    assert_eq!(examples("a narration line\n{{char}}:", "Ann", "Bo"), ["a narration line"]);
    assert_eq!(
        greeting("*smiles*\n\nHello, {{user}}.", "Ann", "Bo").unwrap(),
        ("Ann:「*smiles*\n\nHello, Bo.」".to_string(), MemoryKind::Greeting)
    );
    assert_eq!(greeting(" \n", "Ann", "Bo"), None);
}

#[test]
fn code_blocks_and_line_breaks_stay_as_written() {
    let mes = "<START>\n{{user}}: Show me a loop.\n{{char}}: Here:\n```python\nfor i in range(3):\n    print(i)\n\nprint(\"done\")\n```\nRun it.";
    let chunk = &examples(mes, "Ann", "Bo")[0];
    assert_eq!(
        chunk,
        "Bo:「Show me a loop.」\nAnn:「Here:\n```python\nfor i in range(3):\n    print(i)\n\nprint(\"done\")\n```\nRun it.」"
    );
    let said = segments(chunk);
    assert_eq!(said.len(), 2);
    assert_eq!(
        said[1],
        Segment::Said("Ann", "Here:\n```python\nfor i in range(3):\n    print(i)\n\nprint(\"done\")\n```\nRun it.".into())
    );
    let pairs = crate::rpa::memories::dialogue_pairs(std::slice::from_ref(chunk), "Ann");
    assert_eq!(pairs[0].0, "Bo:「Show me a loop.」");
    assert!(pairs[0].1.ends_with("```\nRun it."), "{:?}", pairs[0]);
}

#[test]
fn narration_greetings_are_told_from_the_characters_words() {
    let narration = [
        "*The kettle clicks off somewhere behind the counter.*",
        "One day you got yourself a cat. Her name is Flux, and she has opinions.",
        "Flux stretches across the keyboard and ignores you.",
        "雨停了。她推开门，看了你一眼。",
    ];
    for text in narration {
        assert!(is_narration(text, "Flux"), "{text}");
    }
    let flux = "One day you got yourself a cat because the flat felt too quiet. It was called Flux at the \
                pet shop, and it mostly rides your robot vacuum.";
    assert!(is_narration(flux, "Flux the Cat"));
    assert!(!is_narration("The weather is fine, isn't it?", "Flux the Cat"));
    let spoken = [
        "Hello again.",
        "Ah, a visitor.",
        "*smiles* Welcome, Bo.",
        "*She looks up.* \"You're late.\"",
        "I told her you would come. She never listens to me.",
        "我等你很久了。",
    ];
    for text in spoken {
        assert!(!is_narration(text, "Flux"), "{text}");
    }
    assert_eq!(
        greeting("{{char}} yawns.\n\n*The screen flickers.*", "Flux", "Bo").unwrap(),
        ("Flux yawns.\n\n*The screen flickers.*".to_string(), MemoryKind::Narration)
    );
}

#[test]
fn names_become_macros_again_on_word_boundaries() {
    assert_eq!(
        unresolve("Ann meets Bo; Annabel and Bob stay. 钟离说", "Ann", "Bo"),
        "{{char}} meets {{user}}; Annabel and Bob stay. 钟离说"
    );
    assert_eq!(unresolve("钟离见到旅行者", "钟离", "旅行者"), "{{char}}见到{{user}}");
    let text = "{{char}} keeps watch for {{user}}.";
    assert_eq!(unresolve(&resolve(text, "Mira Vance", "Captain"), "Mira Vance", "Captain"), text);
}

const CARD: &str = r#"{"spec": "chara_card_v3", "spec_version": "3.0", "data": {
    "name": "Ann", "description": "{{char}} runs the ferry.", "personality": "calm",
    "scenario": "Dawn at the pier.", "system_prompt": "Be brief.", "first_mes": "Morning, {{user}}.",
    "mes_example": "<START>\n{{user}}: Busy?\n{{char}}: Always.", "post_history_instructions": "[Reply as {{char}}.]",
    "tags": ["sea"], "creator": "me", "nickname": "Annie", "extensions": {"depth_prompt": {"depth": 4}}}}"#;

fn imported(card: &Card) -> Character {
    let text = format!(
        "id = \"ann-en\"\nname = \"Ann\"\nlanguage = \"en\"\nexperimenter = \"Bo\"\ndescription = \"\"\"{}\"\"\"\n",
        prompt(card, "Ann", "Bo", Language::En)
    );
    let mut c = Character::parse(crate::domain::diagnostic::Source::new("ann", &text), |_| None).unwrap();
    c.post_history = part(&card.post_history_instructions, "Ann", "Bo");
    c.card = Some(crate::domain::character::CardInfo {
        tags: card.tags.clone(),
        creator: card.creator.clone(),
        ..Default::default()
    });
    c
}

#[test]
fn an_unedited_card_exports_as_it_was_read() {
    let card = parse(CARD).unwrap();
    let mut c = imported(&card);
    let chunks: Vec<String> = memories(&card, "Ann", "Bo").into_iter().map(|(m, _)| m).collect();
    c.experimenter = "User".into();
    let chunks_user: Vec<String> = memories(&card, "Ann", "User").into_iter().map(|(m, _)| m).collect();
    c.description = prompt(&card, "Ann", "User", Language::En);
    c.post_history = part(&card.post_history_instructions, "Ann", "User");
    assert_eq!(export_stored(&card, &c, &chunks_user), card.json);
    // Another experimenter is the workbench's own: it goes into `extensions.incharacter`.
    let c = imported(&card);
    let got = export_stored(&card, &c, &chunks);
    assert_eq!(got["data"]["extensions"]["incharacter"], json!({"experimenter": "Bo"}));
    assert_eq!(got["data"]["extensions"]["depth_prompt"], json!({"depth": 4}));
    assert_eq!(got["data"]["first_mes"], "Morning, {{user}}.");
}

/// A character renamed, or asked by another experimenter, since its import is not an edited one:
/// the card's texts stay as the author wrote them, only the name (and the experimenter, the
/// workbench's own) changes.
#[test]
fn a_rename_or_another_experimenter_is_not_an_edit() {
    let card = parse(CARD).unwrap();
    let mut c = imported(&card);
    let info = c.card.as_mut().unwrap();
    (info.imported_name, info.imported_experimenter) = ("Ann".into(), "Bo".into());
    let chunks: Vec<String> = memories(&card, "Ann", "Bo").into_iter().map(|(m, _)| m).collect();
    let mut renamed = c.clone();
    renamed.name = "Ann Birch".into();
    let got = export_stored(&card, &renamed, &chunks);
    let mut want = card.json.clone();
    want["data"]["name"] = json!("Ann Birch");
    want["data"]["extensions"]["incharacter"] = json!({"experimenter": "Bo"});
    assert_eq!(got, want);
    let mut asked_by_cy = c.clone();
    asked_by_cy.experimenter = "Cy".into();
    let got = export_stored(&card, &asked_by_cy, &chunks);
    want["data"]["name"] = json!("Ann");
    want["data"]["extensions"]["incharacter"] = json!({"experimenter": "Cy"});
    assert_eq!(got, want);
    // An older import did not say what it wrote with: the texts read back unedited under the
    // card's name tell a rename. (Which experimenter it wrote with, when that changed since, no
    // text tells.)
    for (older, what) in [(renamed.clone(), "renamed")] {
        let mut older = older;
        older.card = Some(crate::domain::character::CardInfo {
            tags: card.tags.clone(),
            creator: card.creator.clone(),
            ..Default::default()
        });
        let got = export_stored(&card, &older, &chunks);
        for key in ["description", "personality", "scenario", "system_prompt", "first_mes", "mes_example"] {
            assert_eq!(got["data"][key], card.json["data"][key], "{what}: {key}");
        }
    }
    // The import's own lines updated with the rename: still no edit of the parts.
    let mut rewrapped = renamed.clone();
    rewrapped.description = prompt(&card, "Ann Birch", "Bo", Language::En).replace("Ann Birch runs", "Ann runs");
    let got = export_stored(&card, &rewrapped, &chunks);
    for key in ["description", "personality", "scenario", "system_prompt"] {
        assert_eq!(got["data"][key], card.json["data"][key], "rewrapped: {key}");
    }
    // Renamed to a shorter name, an edit naming the old one is the author's form too.
    let mut shorter = c.clone();
    shorter.name = "An".into();
    shorter.description = shorter.description.replace("calm", "calm, as Ann is");
    let data = export_stored(&card, &shorter, &chunks)["data"].clone();
    assert_eq!(data["personality"], "calm, as {{char}} is");
    // An edit after a rename is still an edit, in the author's form whichever name it uses.
    renamed.description = renamed.description.replace("calm", "calm, unlike Ann Birch's brother");
    let data = export_stored(&card, &renamed, &chunks)["data"].clone();
    assert_eq!(data["personality"], "calm, unlike {{char}}'s brother");
    assert_eq!(data["description"], "{{char}} runs the ferry.");
}

#[test]
fn edits_are_written_back_in_the_authors_form() {
    let card = parse(CARD).unwrap();
    let mut c = imported(&card);
    let chunks: Vec<String> = memories(&card, "Ann", "Bo").into_iter().map(|(m, _)| m).collect();
    c.description = c
        .description
        .replace("calm", "calm, but tired of Bo's questions");
    assert!(c.description.contains("Stay in character"), "{}", c.description);
    c.post_history = "[Keep it under 50 words.]".into();
    c.labels.target.insert(
        "BFI".into(),
        [(
            "Openness".to_string(),
            crate::domain::character::Label {
                score: None,
                kind: LabelType::H,
            },
        )]
        .into(),
    );
    let got = export_stored(&card, &c, &chunks);
    let data = &got["data"];
    assert_eq!(data["personality"], "calm, but tired of {{user}}'s questions");
    assert_eq!(data["description"], "{{char}} runs the ferry.", "unedited: as written");
    assert_eq!(data["system_prompt"], "Be brief.");
    assert_eq!(data["scenario"], "Dawn at the pier.", "the scenario line is still there");
    assert_eq!(data["post_history_instructions"], "[Keep it under 50 words.]");
    assert_eq!(data["nickname"], "Annie");
    assert_eq!(data["extensions"]["incharacter"]["targets"], json!({"BFI": {"Openness": "H"}}));
    // A prompt rewritten without the workbench's lines is the description, the other parts empty.
    c.description = "Ann runs the ferry and never smiles at Bo.".into();
    let data = export_stored(&card, &c, &chunks)["data"].clone();
    assert_eq!(data["description"], "{{char}} runs the ferry and never smiles at {{user}}.");
    assert_eq!((&data["system_prompt"], &data["personality"], &data["scenario"]), (&json!(""), &json!(""), &json!("")));
}

#[test]
fn a_split_prompt_gives_back_its_parts() {
    let card = parse(CARD).unwrap();
    let made = prompt(&card, "Ann", "Bo", Language::En);
    assert_eq!(
        split_prompt(&made, "Ann", Language::En),
        ["Be brief.", "Ann runs the ferry.", "calm", "Dawn at the pier."].map(String::from)
    );
    assert_eq!(
        split_prompt("你是胡桃。\n\n性格：古灵精怪\n\n请始终以胡桃的身份和口吻来回答，不要跳出角色。", "胡桃", Language::Zh),
        ["", "", "古灵精怪", ""].map(String::from)
    );
    // Text written after the closing line joins the last part; the line itself is never a part's.
    let added = format!("{made}\n\nAlso: she hates fog.");
    assert_eq!(
        split_prompt(&added, "Ann", Language::En),
        ["Be brief.", "Ann runs the ferry.", "calm", "Dawn at the pier.\n\nAlso: she hates fog."].map(String::from)
    );
    // On its line, or the next: the same.
    for joined in [" ", "\n"] {
        let added = format!("{made}{joined}Also: she hates fog.");
        assert_eq!(split_prompt(&added, "Ann", Language::En)[3], "Dawn at the pier.\n\nAlso: she hates fog.");
    }
    // Exported and imported again, the prompt holds the closing line once, at its end.
    let mut again = card.clone();
    let [_, _, _, scenario] = split_prompt(&added, "Ann", Language::En);
    again.scenario = scenario;
    let remade = prompt(&again, "Ann", "Bo", Language::En);
    assert_eq!(remade.matches("Stay in character").count(), 1, "{remade}");
    assert!(remade.ends_with("Also: she hates fog.\n\nStay in character and answer every question as Ann would."));
}

#[test]
fn a_character_imported_before_cards_were_kept_exports_the_cards_parts() {
    let card = parse(CARD).unwrap();
    let mut c = imported(&card);
    let chunks: Vec<String> = memories(&card, "Ann", "Bo").into_iter().map(|(m, _)| m).collect();
    c.work = "imported from a character card by me".into();
    let data = export(&c, &chunks)["data"].clone();
    for key in ["system_prompt", "description", "personality", "scenario", "first_mes", "post_history_instructions"] {
        assert_eq!(data[key], card.json["data"][key], "{key}");
    }
    assert_eq!(data["mes_example"], "<START>\n{{user}}: Busy?\n{{char}}: Always.");
    assert_eq!(data["extensions"], json!({"incharacter": {"experimenter": "Bo"}}));
    // Bundled and other characters: the whole prompt, and the id that says so.
    c.work = "Harry Potter".into();
    let data = export(&c, &chunks)["data"].clone();
    assert_eq!(data["description"], json!(c.description));
    assert_eq!(data["extensions"]["incharacter"]["id"], "ann-en");
}

#[test]
fn the_characters_own_lines_come_back_as_its_lines_not_as_narration() {
    let card = parse(CARD).unwrap();
    let mut c = imported(&card);
    c.work = "Harry Potter".into();
    let chunks = vec![
        "Ann:「*waves*」".to_string(),
        "Ann:「She is busy; come back later, Bo.」".to_string(),
        "Ann:「Morning.」".to_string(),
        "Bo:「Hi.」\nAnn:「*nods*」".to_string(),
    ];
    let back = parse(&export(&c, &chunks).to_string()).unwrap();
    let again: Vec<String> = memories(&back, "Ann", "Bo").into_iter().map(|(m, _)| m).collect();
    assert_eq!(again, chunks);
}

#[test]
fn a_v3_png_card_carries_a_v2_copy_for_older_readers() {
    let card = parse(CARD).unwrap();
    let texts = png_texts(&card.json);
    assert_eq!(texts.iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["chara", "ccv3"]);
    let decode = |t: &str| {
        let bytes = base64::engine::general_purpose::STANDARD.decode(t).unwrap();
        serde_json::from_slice::<Value>(&bytes).unwrap()
    };
    assert_eq!(decode(&texts[1].1), card.json);
    assert_eq!(decode(&texts[0].1)["spec"], "chara_card_v2");
    assert_eq!(decode(&texts[0].1)["data"], card.json["data"]);
}

/// Memory lines the example form would not give back are written as memories write them, and an
/// import keeps them as they are: an utterance with an action before its words, a space inside 「 」.
#[test]
fn memory_lines_of_every_form_come_back_from_a_card() {
    let text = "id = \"ming-zh\"\nname = \"小明\"\nlanguage = \"zh\"\nexperimenter = \"老师\"\ndescription = \"你是小明。\"\n";
    let c = Character::parse(crate::domain::diagnostic::Source::new("ming", text), |_| None).unwrap();
    let chunks = [
        "老师:「谁知道？」\n小明:(举手)「我知道答案！」",
        "老师:「 为什么? 」\n小明:「因为。」",
        "老师:「好。」\n小明:「好的。」",
        "老师：「几点？」\n小明：(看表)「3:00 见」",
    ];
    let (_, _, mes_example) = greetings_and_examples(&c, &chunks.map(str::to_string));
    let back = examples(&mes_example, "小明", "老师");
    assert_eq!(back, chunks, "{mes_example}");
    assert!(mes_example.contains("{{char}}: 好的。"), "the plain one in the card's form: {mes_example}");
}

/// A V1 card whose export needs a field only V2 has (a second greeting, here) is written as V2, so
/// that importing it again reads that field; unedited, or edited within V1's fields, it stays V1.
#[test]
fn a_v1_card_given_what_only_v2_holds_is_exported_as_v2() {
    let v1 = r#"{"name": "Ann", "description": "{{char}} runs the ferry.", "personality": "calm",
        "scenario": "", "first_mes": "Morning, {{user}}.", "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Hello"}"#;
    let card = parse(v1).unwrap();
    assert_eq!(card.spec, Spec::V1);
    let mut c = imported(&card);
    c.experimenter = "User".into();
    c.description = prompt(&card, "Ann", "User", Language::En);
    let chunks: Vec<String> = memories(&card, "Ann", "User").into_iter().map(|(m, _)| m).collect();
    assert_eq!(export_stored(&card, &c, &chunks), card.json, "unedited: as it was");
    let mut more = chunks.clone();
    more.insert(1, "Ann:「Evening already?」".into());
    let got = export_stored(&card, &c, &more);
    assert_eq!(got["spec"], "chara_card_v2", "{got}");
    assert_eq!(got["data"]["personality"], "calm", "{got}");
    let back = parse(&got.to_string()).unwrap();
    let read: Vec<String> = memories(&back, "Ann", "User").into_iter().map(|(m, _)| m).collect();
    assert_eq!(read.len(), more.len(), "{read:?}");
}

/// What the workbench reads from `extensions.incharacter` is refused where it stands when it is of
/// the wrong kind, rather than read past (targets or an experimenter vanishing unsaid).
#[test]
fn a_wrong_kind_in_the_workbenchs_extension_is_located() {
    let card = |ours: &str| {
        format!(
            "{{\"spec\": \"chara_card_v2\", \"data\": {{\"name\": \"Ann\",\n\"extensions\": {{\"incharacter\": {{{ours}}}}}}}}}"
        )
    };
    for (ours, said) in [
        (r#""id": "t", "targets": "H""#, "2:54: extensions.incharacter.targets must be an object"),
        (r#""experimenter": 5"#, "2:48: extensions.incharacter.experimenter must be a string, not a number"),
        (r#""id": 5"#, "2:38: extensions.incharacter.id must be a string, not a number"),
        (r#""aliases": ["A", 2]"#, "2:43: extensions.incharacter.aliases must be a list of strings"),
    ] {
        let e = parse(&card(ours)).unwrap_err().to_string();
        assert!(e.starts_with(said), "{ours}: {e}");
    }
    assert!(parse(&card(r#""experimenter": "Bo", "targets": {"BFI": {"Openness": "H"}}"#)).is_ok());
    let e = parse("{\"name\": \"Ann\", \"extensions\": {\"incharacter\": []}}").unwrap_err().to_string();
    assert!(e.contains("extensions.incharacter must be an object, not a list"), "{e}");
}
