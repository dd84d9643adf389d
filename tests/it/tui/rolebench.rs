//! The RoleBench screen showing a session opened from Sessions (or resumed), not a run it started.

use incharacter::method::rolebench::Question;

use super::*;

#[test]
fn an_opened_rolebench_session_names_its_file_roles_and_sample_and_the_files_are_listed() {
    let mut app = app();
    let question = |line: usize, role: &str| Question {
        line,
        role: role.into(),
        question: format!("Question {line}?"),
        references: vec!["An answer.".into()],
        types: vec!["script_agnostic".into()],
    };
    // A plan as the screen makes one, then given the file, sample and seed of a command-line run.
    let file = std::path::PathBuf::from("/data/rolebench/small.jsonl");
    app.update(Action::RolebenchFiles(vec![file.clone()]));
    key(&mut app, KeyCode::Char('9'));
    app.update(Action::RolebenchLoaded(
        file,
        Ok(vec![
            question(1, "Jack Sparrow"),
            question(2, "Jack Sparrow"),
            question(3, "Zed \u{1b}[31mTest\u{1b}]0;RB\u{7}"),
        ]),
    ));
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("[ ] Zed Test (1)"),
        "a role drawn without its escapes:\n{screen}"
    );
    key(&mut app, KeyCode::Char(' '));
    let effects = app.update(Action::Key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL)));
    let [Effect::StartRolebench { plan }] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    let mut plan = plan.clone();
    plan.data = "/elsewhere/big.jsonl".into();
    plan.limit = Some(20);
    plan.seed = 3;

    // Opened from Sessions, in a workbench that never showed the screen: its files are listed too.
    let mut app = super::app();
    let effects = app.update(Action::SessionLoaded(vec![Event::RolebenchStarted {
        header: header("20261129-120000-rbref-0001", "2026-11-29T12:00:00Z"),
        plan,
        providers: Default::default(),
    }]));
    assert_eq!(app.screen, Screen::Rolebench);
    assert!(effects.contains(&Effect::ListRolebenchFiles), "{effects:?}");
    let screen = render(&app, (120, 40));
    // (Wrapped in the pane: each piece on one of its lines.)
    for said in [
        "this session: big.jsonl",
        "2 questions, a seeded sample of 20",
        "(seed 3)",
        "roles: Jack Sparrow",
    ] {
        assert!(screen.contains(said), "{said}:\n{screen}");
    }
    assert!(screen.contains("new run"), "{screen}");
}
