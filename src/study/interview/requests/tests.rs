//! The bundled templates render every request exactly as the runs recorded in `sample-sessions/` were
//! asked (and every scale's requests as they were before the texts moved into templates): a digest
//! of each request, with structured outputs on and off, is held in `tests/fixtures/requests/`.
//! `INCHARACTER_BLESS=1` rewrites the file (only when a change of the requests is intended).

use std::path::Path;

use super::*;
use crate::catalog::Catalog;
use crate::study::Event;
use crate::study::interview::{Done, RunPlan};
use crate::templates::sha256;

fn digest(messages: &[ChatMessage]) -> String {
    let text: Vec<String> = messages.iter().map(|m| format!("{:?}\u{0}{}", m.role, m.content)).collect();
    sha256(&text.join("\u{1}"))[..16].to_string()
}

fn lines_of(subject: &Subject<'_>, heading: &str, out: &mut Vec<String>) {
    for shape in Shape::ALL {
        let requests = subject.render(shape);
        let on: Vec<ChatMessage> = requests.iter().flat_map(|r| r.messages.clone()).collect();
        let off: Vec<ChatMessage> = requests.iter().flat_map(unstructured).collect();
        out.push(format!(
            "{heading} · {} · {} requests · {} {}",
            shape.name(),
            requests.len(),
            digest(&on),
            digest(&off)
        ));
    }
}

fn rendered_now() -> Vec<String> {
    let catalog = Catalog::bundled().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut sessions: Vec<_> = std::fs::read_dir(root.join("sample-sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    sessions.sort();
    for dir in sessions {
        let records = crate::journal::read_numbered::<Event>(&dir.join("journal.jsonl")).unwrap();
        let events: Vec<Event> = records.into_iter().map(|(_, e)| e).collect();
        let Some(plan): Option<&RunPlan> = events.iter().find_map(|e| match e {
            Event::RunStarted { plan, .. } => Some(plan.as_ref()),
            _ => None,
        }) else {
            continue;
        };
        let templates = Templates::from_record(&plan.prompts).unwrap();
        let done = Done::from_events(&events);
        for c in &plan.characters {
            let character = catalog.character(c).unwrap();
            for s in &plan.scales {
                let scale = catalog.scale(s).unwrap();
                let answers = |style: QueryStyle| answers_in(&done, scale, character, style);
                let subject = Subject {
                    templates: &templates,
                    scale,
                    character,
                    style: plan.style,
                    memories: None,
                    per_call: plan.items_per_call as usize,
                    answers: &answers,
                    masked: None,
                };
                let name = dir.file_name().unwrap().to_string_lossy().into_owned();
                lines_of(&subject, &format!("{name} · {c} · {s}"), &mut out);
            }
        }
    }
    // Every bundled scale, in both languages, on synthetic answers.
    for c in ["hermione-en", "zhongli-zh"] {
        let character = catalog.character(c).unwrap();
        for scale in catalog.scales.iter().map(|e| &e.value) {
            let answers = |style: QueryStyle| synthetic(scale, character, style);
            let subject = Subject {
                templates: Templates::bundled(),
                scale,
                character,
                style: RpaStyle::Description,
                memories: None,
                per_call: 14,
                answers: &answers,
                masked: None,
            };
            lines_of(&subject, &format!("synthetic · {c} · {}", scale.id), &mut out);
        }
        // The styles that replay memories: scenes and dialogue pairs retrieved for each question.
        let scale = catalog.scale("BFI").unwrap();
        let e = &character.experimenter;
        let n = &character.name;
        let chunks = vec![
            format!("{e}:「Do you talk much at parties?」\n{n}:「More than I should, honestly.」"),
            format!("{e}:「Are you ever careless with your work?」\n{n}:「Never with homework.」"),
            format!("旁白：雨夜。\n{e}:「你会担心考试吗？」\n{n}:「每一次都会。」"),
            format!("{e}:「Do new ideas excite you?」\n{n}:「Always — I read about them first.」"),
        ];
        let memories = Memories::new(chunks, n);
        for style in [RpaStyle::Chatharuhi, RpaStyle::Rolegpt] {
            let answers = |query: QueryStyle| synthetic(scale, character, query);
            let subject = Subject {
                templates: Templates::bundled(),
                scale,
                character,
                style,
                memories: Some(&memories),
                per_call: 14,
                answers: &answers,
                masked: None,
            };
            lines_of(&subject, &format!("synthetic · {c} · BFI · {style:?}"), &mut out);
        }
    }
    out
}

#[test]
fn the_bundled_templates_render_every_request_as_recorded_runs_read_it() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/requests/bundled.txt");
    let now = rendered_now();
    if std::env::var_os("INCHARACTER_BLESS").is_some() {
        std::fs::create_dir_all(fixture.parent().unwrap()).unwrap();
        std::fs::write(&fixture, now.join("\n") + "\n").unwrap();
        return;
    }
    let held = std::fs::read_to_string(&fixture).unwrap();
    let held: Vec<&str> = held.lines().collect();
    assert_eq!(held.len(), now.len(), "as many requests as before");
    let differing: Vec<(&str, &String)> = held.iter().zip(&now).filter(|(a, b)| **a != b.as_str()).map(|(a, b)| (*a, b)).take(5).collect();
    assert!(differing.is_empty(), "requests that changed (held, now):\n{differing:#?}");
}
