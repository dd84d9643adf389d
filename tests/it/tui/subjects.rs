//! The annotate screen's subject task on an observer session: blind ratings per trait with decimals
//! and "cannot tell", autosaved per answer, resumed where the annotator stopped, with the live agreement.

use std::collections::BTreeMap;

use incharacter::annotation::{self, Answer, Task};
use incharacter::domain::scoring::ItemOption;
use incharacter::observer::{self, Context, Draw, ObservePlan, SelfReportMode, Side, Step, Turn};
use incharacter::study::Event;
use incharacter::tui::app::{Action, App, Effect, Screen};
use ratatui::crossterm::event::KeyCode;

use super::{app, header, key, keys, observe_plan, open_sample, render, snap};

/// An observer session of three synthetic subjects with two observers each (family, workplace):
/// relationships, one scenario of two turns, self-reports and reports.
fn observer_session() -> Vec<Event> {
    let subjects = observer::draw(&Draw {
        characters: &[],
        synthetic: 3,
        latent: None,
        observers: &[(Context::Family, 1), (Context::Workplace, 1)],
        seed: 5,
    });
    let catalog = incharacter::catalog::Catalog::load(None).unwrap();
    let ipip = catalog.scale("IPIP-50").unwrap();
    let items = |v: i32| -> BTreeMap<u32, ItemOption> {
        ipip.scored_items()
            .map(|i| (i.id, ItemOption::Value(1 + (i.id as i32 * v) % 5)))
            .collect()
    };
    let mut events = vec![Event::ObserveStarted {
        header: header("20261201-120000-observe-0002", "2026-12-01T12:00:00Z"),
        plan: ObservePlan {
            max_attempts: 3,
            ..observe_plan(subjects.clone(), 4, 5)
        },
        providers: Default::default(),
    }];
    for (k, s) in subjects.iter().enumerate() {
        let k = k as i32 + 1;
        events.push(Event::Observed(Step::SelfReport {
            left_out: Vec::new(),
            asked_again: Vec::new(),
            subject: s.id.clone(),
            mode: SelfReportMode::Batched,
            items: items(k),
        }));
        for (j, o) in s.observers.iter().enumerate() {
            let (subject, observer) = (s.id.clone(), o.id.clone());
            let steps = [
                Step::Relationship {
                    subject: subject.clone(),
                    observer: observer.clone(),
                    relationship: format!("{observer} has known {subject} for years."),
                },
                Step::Scenarios {
                    subject: subject.clone(),
                    observer: observer.clone(),
                    scenarios: vec![format!("A quiet evening; {observer} asks {subject} for help.")],
                },
                Step::Turn {
                    subject: subject.clone(),
                    observer: observer.clone(),
                    scenario: 0,
                    turn: Turn {
                        speaker: Side::Observer,
                        utterance: "Could you give me a hand with this?".into(),
                        end: false,
                    },
                },
                Step::Turn {
                    subject: subject.clone(),
                    observer: observer.clone(),
                    scenario: 0,
                    turn: Turn {
                        speaker: Side::Subject,
                        utterance: format!("Of course, I am {subject} and I like to help."),
                        end: true,
                    },
                },
                Step::Report {
                    left_out: Vec::new(),
                    asked_again: Vec::new(),
                    subject,
                    observer,
                    items: items(k + j as i32 + 1),
                },
            ];
            events.extend(steps.into_iter().map(Event::Observed));
        }
    }
    events
}

/// The app on the observer session, with `dir` as its folder and the annotations found there.
fn opened(dir: &std::path::Path) -> App {
    let mut app = app();
    app.update(Action::SessionLoaded(observer_session()));
    let effects = app.update(Action::SessionDir(dir.to_path_buf()));
    assert!(matches!(&effects[..], [Effect::LoadAnnotations(_)]));
    app.update(Action::Annotations(annotation::load(dir, &app.catalog).unwrap()));
    key(&mut app, KeyCode::Char('8'));
    assert_eq!(app.screen, Screen::Annotate);
    app
}

/// Types `text` (then enter when `enter`), writing what the screen asks to save; returns it.
fn rate(app: &mut App, text: &str, enter: bool) -> Vec<annotation::Annotation> {
    let mut written = Vec::new();
    let mut effects = Vec::new();
    for c in text.chars() {
        effects.extend(key(app, KeyCode::Char(c)));
    }
    if enter {
        effects.extend(key(app, KeyCode::Enter));
    }
    for e in effects {
        let Effect::Annotate { dir, annotation } = e else {
            panic!("{e:?}")
        };
        annotation::append(&dir, &annotation).unwrap();
        written.push(annotation);
    }
    written
}

#[test]
fn subjects_are_rated_blind_per_trait_autosaved_and_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = opened(dir.path());
    let screen = render(&app, (120, 40));
    assert!(screen.contains("subject task · per subject · subject 1/3"), "{screen}");
    assert!(
        screen.contains("Of course, I am") && screen.contains("has known"),
        "the dialogues, with each observer's relationship: {screen}"
    );
    assert!(screen.contains("stay hidden until you"), "blind: {screen}");
    snap("annotate_subjects", &app);
    // v reveals this subject only: the next one is blind again.
    key(&mut app, KeyCode::Char('v'));
    assert!(!render(&app, (120, 40)).contains("stay hidden"), "revealed");
    key(&mut app, KeyCode::Right);
    assert!(
        render(&app, (120, 40)).contains("stay hidden"),
        "the next subject is blind"
    );
    key(&mut app, KeyCode::Left);

    // Three traits typed with decimals, one "cannot tell", one more: the subject is rated.
    let mut written = rate(&mut app, "3.5", true);
    written.extend(rate(&mut app, "4", true));
    written.extend(rate(&mut app, "x", false));
    written.extend(rate(&mut app, "2", true));
    assert!(rate(&mut app, "7", true).is_empty(), "outside 1–5: nothing is saved");
    assert!(app.flash.as_deref().is_some_and(|f| f.contains("not a rating")));
    written.extend(rate(&mut app, "1.25", true));
    assert_eq!(written.len(), 5);
    assert_eq!(written[0].value, Answer::Value(3.5));
    assert_eq!(written[2].value, Answer::Refused(annotation::Refusal::X));
    let first = written[0].case.character.clone();
    assert!(written.iter().all(|a| a.case.task == Task::Subject
        && a.case.character == first
        && a.case.scale == "IPIP-50"
        && a.case.observer.is_none()));
    let traits: std::collections::BTreeSet<&str> = written.iter().map(|a| a.case.dimension.as_str()).collect();
    assert_eq!(traits.len(), 5, "one rating per trait: {traits:?}");
    let screen = render(&app, (120, 40));
    assert!(
        !screen.contains("stay hidden") && screen.contains("self") && screen.contains("obs"),
        "rated: the reports are shown: {screen}"
    );

    // The next subject, every trait.
    key(&mut app, KeyCode::Right);
    for v in ["2", "3", "4", "5", "1"] {
        written.extend(rate(&mut app, v, true));
    }
    let second = written[5].case.character.clone();
    assert_ne!(first, second);
    snap("annotate_subjects_rated", &app);

    // Reopened: the ratings come back, the panel counts two subjects, and the task goes on with the
    // third one.
    let mut app = opened(dir.path());
    let screen = render(&app, (120, 40));
    assert!(screen.contains("10/15 ratings by tester"), "{screen}");
    assert!(
        screen.contains("subject 3/3"),
        "resumed at the first unrated subject: {screen}"
    );
    let saved = annotation::load(dir.path(), &app.catalog).unwrap();
    assert_eq!(saved["tester"].len(), 10);
    let agreement = screen
        .lines()
        .find(|l| l.contains("Agreeableness") && l.matches('│').count() >= 1 && l.contains(" 2 "))
        .unwrap_or_default();
    assert!(!agreement.is_empty(), "n = 2 in the agreement panel: {screen}");

    // Per observer: another set of units, each one observer's view.
    key(&mut app, KeyCode::Tab);
    let screen = render(&app, (120, 40));
    assert!(screen.contains("per observer (o"), "{screen}");
    let per = rate(&mut app, "3", true);
    assert!(per[0].case.observer.is_some());
}

#[test]
fn a_sample_observer_session_is_never_rated_in_place() {
    let mut app = app();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-sessions/20261129-231052-three-observers-on-the-local-model-038d");
    app.update(Action::SessionLoaded(
        incharacter::journal::read(&path.join("journal.jsonl")).unwrap(),
    ));
    open_sample(
        &mut app,
        "20261129-231052-three-observers-on-the-local-model-038d",
        "2026-11-29T23:10:52Z",
        path,
    );
    key(&mut app, KeyCode::Char('8'));
    keys(&mut app, "4");
    assert!(key(&mut app, KeyCode::Enter).is_empty(), "nothing is written");
    assert_eq!(app.flash.as_deref(), Some(incharacter::tui::app::SAMPLE_READ_ONLY));
    assert!(render(&app, (120, 40)).contains("read-only sample"));
}
