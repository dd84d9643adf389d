//! The workbench's helpers for replays, probes and character versions, tested without a terminal.

use super::replay::replay_pieces;
use super::*;

#[test]
fn replayed_answers_stream_in_words_or_short_runs_of_characters() {
    assert_eq!(replay_pieces("I like books. "), vec!["I ", "like ", "books. "]);
    let zh = "日行者：「见到一个人时，你多快能看出他此刻的心情？」";
    let pieces = replay_pieces(zh);
    assert_eq!(pieces.concat(), zh, "nothing lost or reordered");
    assert!(
        pieces.len() >= 8 && pieces.iter().all(|p| p.chars().count() <= 3),
        "{pieces:?}"
    );
    assert!(replay_pieces("").is_empty());
}

/// A data dir holding copies of these sample sessions (and no samples beside them).
fn store_with(samples: &[&str]) -> (tempfile::TempDir, Store) {
    let data = tempfile::tempdir().unwrap();
    for id in samples {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(id);
        let to = crate::session::sessions_dir(data.path()).join(id);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(from.join("journal.jsonl"), to.join("journal.jsonl")).unwrap();
    }
    let store = Store::with_samples(data.path(), None);
    (data, store)
}

const BFI_1: &str = "20261129-233202-bfi-on-the-local-model-e80e";
const BFI_2: &str = "20261130-231918-bfi-and-16p-on-the-local-model-248f";
const GSE: &str = "20261129-201520-gse-on-the-local-model-e700";

#[test]
fn a_probe_is_measured_against_the_newest_earlier_session_of_its_character() {
    let catalog = Catalog::load(None).unwrap();
    // The GSE session is older than the second BFI one but shares no scale with it: skipped.
    let (data, store) = store_with(&[BFI_1, GSE, BFI_2]);
    let p = probed(&store, &catalog, BFI_2, "hermione-en").unwrap();
    assert!(!p.first);
    assert_eq!(p.diff.a.session, BFI_1);
    assert_eq!(p.diff.b.session, BFI_2);
    assert!(
        p.diff.dimensions.iter().all(|d| d.scale == "BFI"),
        "{:?}",
        p.diff.dimensions
    );
    assert_eq!(p.diff.dimensions.len(), 10, "5 BFI dimensions × ER_batch and d-OC");

    // A newer session judged otherwise (another judge) is passed over for one judged alike: what
    // moved would be the judge's doing, not the character's.
    let judged = "20261130-120000-bfi-by-another-judge-0001";
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("sample-sessions")
            .join(BFI_1)
            .join("journal.jsonl"),
    )
    .unwrap()
    .replacen(
        "\"judge\":{\"provider\":\"local\",\"kind\":\"local\",\"model\":\"smollm2-135m\"}",
        "\"judge\":{\"provider\":\"local\",\"kind\":\"local\",\"model\":\"qwen2.5-coder-1.5b\"}",
        1,
    )
    .replacen("2026-11-29T23:32:03Z", "2026-11-30T12:00:00Z", 1)
    .replacen(BFI_1, judged, 1);
    let to = crate::session::sessions_dir(data.path()).join(judged);
    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(to.join("journal.jsonl"), text).unwrap();
    let store = Store::with_samples(data.path(), None);
    assert_eq!(
        probed(&store, &catalog, BFI_2, "hermione-en").unwrap().diff.a.session,
        BFI_1
    );
    std::fs::remove_dir_all(crate::session::sessions_dir(data.path()).join(BFI_1)).unwrap();
    let store = Store::with_samples(data.path(), None);
    assert_eq!(
        probed(&store, &catalog, BFI_2, "hermione-en").unwrap().diff.a.session,
        judged,
        "none judged alike: the newest that shares a scale and method"
    );
    let (_fresh, store) = store_with(&[BFI_1, GSE, BFI_2]);

    // The oldest session has nothing before it: the probe is shown alone.
    let p = probed(&store, &catalog, BFI_1, "hermione-en").unwrap();
    assert!(p.first);
    assert_eq!(p.diff.a.session, BFI_1);
    // A character the probe did not measure, and a session that is not there, are said.
    let e = probed(&store, &catalog, BFI_1, "zhongli-zh").unwrap_err();
    assert!(e.contains("did not measure zhongli-zh"), "{e}");
    assert!(
        probed(&store, &catalog, "nowhere", "hermione-en")
            .unwrap_err()
            .contains("not in the data dir")
    );
}

#[test]
fn versions_give_each_character_its_version_now_and_the_recorded_ones() {
    let catalog = Catalog::load(None).unwrap();
    let (data, store) = store_with(&[BFI_1]);
    // The sample is older than versions: give its first record one, as runs now write it.
    let journal = crate::session::sessions_dir(data.path())
        .join(BFI_1)
        .join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut record: serde_json::Value = serde_json::from_str(first).unwrap();
    record["character_versions"] = serde_json::json!({"hermione-en": "0123456789abcdef"});
    std::fs::write(&journal, format!("{record}\n{rest}")).unwrap();
    let v = versions(&store, &catalog);
    assert_eq!(v.current.len(), catalog.characters.len());
    let hermione = catalog.character("hermione-en").unwrap();
    assert_eq!(
        v.current["hermione-en"],
        hermione.version(&[]),
        "no memories in this data dir"
    );
    assert_eq!(
        v.index["hermione-en"],
        [("0123456789abcdef".to_string(), vec![BFI_1.to_string()])]
    );
}

/// The live screen driven through the app: its gauges, ETA and labels as a run goes.
mod live_screen {
    use std::sync::Arc;

    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use crate::catalog::Catalog;
    use crate::config::Config;
    use crate::llm::Role;
    use crate::llm::accounting::Accounting;
    use crate::method::Method;
    use crate::study::Event;
    use crate::study::live::{Live as Report, LiveKind};
    use crate::tui::app::{Action, App};
    use crate::tui::fixture;
    use crate::tui::keys::Keymap;
    use crate::tui::screens::Component;
    use crate::tui::vocab::Screen;

    fn app() -> App {
        let catalog = Arc::new(Catalog::load(None).expect("the bundled catalog"));
        let config = Config::defaults(&|_| None);
        let (themes, _) = crate::tui::theme::load_all(None);
        let mut app = App::new(catalog, &config, None, Keymap::default(), themes, 0);
        app.screen = Screen::Live;
        app.live.start(None, true);
        app
    }

    /// A run of two characters on BFI (88 items, 20 assessments) whose journal holds `records` of
    /// the fixture session, the run started at 0 and the clock at `now_ms`.
    fn running(records: usize, now_ms: u64) -> (App, Vec<Event>) {
        let mut app = app();
        let plan = fixture::plan(&["hermione-en", "zhongli-zh"], &["BFI"], &[Method::ErBatch, Method::Oc]);
        let events = fixture::session(&app.catalog, &plan);
        for e in events.iter().take(records) {
            record(&mut app, e);
        }
        app.update(Action::Tick(now_ms));
        (app, events)
    }

    /// A record as a run makes it: an answer after its request went out and streamed (a copied one
    /// has none, a cached one comes whole).
    fn record(app: &mut App, e: &Event) {
        if let Event::ItemAnswered {
            character,
            scale,
            repeat,
            style,
            item_id,
            ..
        } = e
        {
            let purpose = crate::method::interview::purpose(character, scale, *item_id, *style);
            for kind in [LiveKind::Started { prompt: String::new() }, LiveKind::Token("I".into())] {
                app.update(Action::Live(Report {
                    role: Role::Rpa,
                    purpose: purpose.clone(),
                    repeat: *repeat,
                    kind,
                }));
            }
        }
        app.update(Action::Engine(e.clone()));
    }

    fn render(app: &App, (w, h): (u16, u16)) -> String {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("a test terminal");
        terminal
            .draw(|f| {
                app.live.render(f, f.area(), &app.ctx());
            })
            .expect("drawn");
        let buffer = terminal.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..h {
            for x in 0..w {
                out.push_str(buffer[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    /// The progress box alone: from its title to its bottom border, from its left border on.
    fn progress(screen: &str) -> String {
        let lines: Vec<&str> = screen.lines().collect();
        let top = lines
            .iter()
            .position(|l| l.contains("╭ Progress"))
            .expect("a progress box");
        let left = lines[top].split("╭ Progress").next().map_or(0, |l| l.chars().count());
        lines[top..top + 6]
            .iter()
            .map(|l| l.chars().skip(left).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_interviews_gauge_says_the_role_play_requests_in_flight_and_waiting() {
        // 24 items answered in the 2 minutes since the run began; the provider takes one at a time.
        let (mut app, _) = running(1 + 24, 120_000);
        let accounting = Arc::new(Accounting::default());
        let _flying = accounting.queue("fixture", Role::Rpa).start();
        let _waiting: Vec<_> = (0..7).map(|_| accounting.queue("fixture", Role::Rpa)).collect();
        app.update(Action::Accounting(accounting));
        let shown = progress(&render(&app, (120, 30)));
        assert!(shown.contains("interviews 24/88 · 1 in flight · 7 queued"), "{shown}");
        assert!(shown.contains("eta 0:07:00"), "(64 + 20) to go at 12 a minute: {shown}");
        insta::assert_snapshot!("live_progress_interviews_120", shown);
        insta::assert_snapshot!("live_progress_interviews_80", progress(&render(&app, (80, 24))));
    }

    #[test]
    fn the_judge_gauge_says_its_calls_done_in_flight_and_waiting_not_the_calls_started() {
        // Every item answered, 5 dimensions assessed; 13 judge calls started against a provider
        // that takes one at a time: 1 came back, 1 is in flight, 11 wait for their place.
        let (mut app, events) = running(1 + 44, 60_000);
        for e in events
            .iter()
            .skip(1 + 44)
            .filter(|e| matches!(e, Event::ItemAnswered { .. }))
        {
            record(&mut app, e);
        }
        for e in events
            .iter()
            .filter(|e| matches!(e, Event::DimensionAssessed(_)))
            .take(5)
        {
            app.update(Action::Engine(e.clone()));
        }
        let report = |kind| {
            Action::Live(Report {
                role: Role::Judge,
                purpose: "ER BFI Openness (attempt 1)".into(),
                repeat: 0,
                kind,
            })
        };
        for _ in 0..13 {
            app.update(report(LiveKind::Started { prompt: "rate".into() }));
        }
        app.update(report(LiveKind::Done {
            cached: false,
            usage: None,
        }));
        let accounting = Arc::new(Accounting::default());
        let _flying = accounting.queue("fixture", Role::Judge).start();
        let _waiting: Vec<_> = (0..11).map(|_| accounting.queue("fixture", Role::Judge)).collect();
        app.update(Action::Accounting(accounting));
        let shown = progress(&render(&app, (120, 30)));
        assert!(
            shown.contains("assessments 5/20 · judge calls 1 done · 1 in flight · 11 queued"),
            "{shown}"
        );
        assert!(!shown.contains("12 running"), "{shown}");
        insta::assert_snapshot!("live_progress_judge_120", shown);
        insta::assert_snapshot!("live_progress_judge_80", progress(&render(&app, (80, 24))));
    }

    /// Replies read from the cache cost nothing now: the figures do not count their tokens; while
    /// the run goes on here they are the run's accounts (which know kept batch results too).
    #[test]
    fn replies_from_the_cache_add_no_tokens_and_the_accounts_give_the_figures() {
        let (mut app, _) = running(1 + 2, 60_000);
        let usage = crate::llm::Usage {
            prompt_tokens: 900,
            completion_tokens: 100,
        };
        let report = |cached| {
            Action::Live(Report {
                role: Role::Judge,
                purpose: "ER BFI Openness (attempt 1)".into(),
                repeat: 0,
                kind: LiveKind::Done {
                    cached,
                    usage: Some(usage),
                },
            })
        };
        app.update(report(true));
        app.update(report(true));
        let shown = progress(&render(&app, (120, 30)));
        assert!(shown.contains("tokens 0 "), "{shown}");
        app.update(report(false));
        let shown = progress(&render(&app, (120, 30)));
        assert!(shown.contains("tokens 1000 "), "{shown}");
        let accounting = Arc::new(Accounting::default());
        accounting.usage("fixture", Role::Judge, usage, false, (0.0, 0.0));
        accounting.usage("fixture", Role::Rpa, usage, false, (0.0, 0.0));
        app.update(Action::Accounting(accounting));
        let shown = progress(&render(&app, (120, 30)));
        assert!(shown.contains("tokens 2000 "), "{shown}");
    }

    /// A session whose character the catalog no longer holds (its file removed since) is shown with
    /// the character's id and the experimenter's role, not a question mark.
    #[test]
    fn a_character_gone_from_the_catalog_is_shown_by_its_id() {
        let mut app = app();
        let plan = fixture::plan(&["hermione-en"], &["BFI"], &[Method::ErBatch]);
        let events = fixture::session(&app.catalog, &plan);
        let mut catalog = (*app.catalog).clone();
        catalog.characters.retain(|e| e.value.id != "hermione-en");
        app.catalog = Arc::new(catalog);
        for e in events.iter().take(3) {
            app.update(Action::Engine(e.clone()));
        }
        let shown = render(&app, (120, 30));
        assert!(
            shown.contains("experimenter") && shown.contains("hermione-en"),
            "{shown}"
        );
        assert!(!shown.contains("││?"), "no speaker shown as a question mark: {shown}");
    }

    /// The pause key, `p`.
    fn pause() -> Action {
        use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
        Action::Key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::NONE))
    }

    /// Paused, a run's clock stops and it has no ETA; a replay has none at all (its pace is its
    /// speed's).
    #[test]
    fn the_clock_stops_while_paused_and_a_replay_has_no_eta() {
        let (mut app, _) = running(1 + 24, 120_000);
        let shown = progress(&render(&app, (120, 30)));
        assert!(
            shown.contains("elapsed 0:02:00") && shown.contains("eta 0:07:00"),
            "{shown}"
        );
        app.update(pause());
        app.update(Action::Tick(180_000));
        let shown = progress(&render(&app, (120, 30)));
        assert!(
            shown.contains("elapsed 0:02:00") && shown.contains("eta –"),
            "paused: {shown}"
        );
        app.update(pause());
        app.update(Action::Tick(190_000));
        let shown = progress(&render(&app, (120, 30)));
        // Nor for the pace: 24 made in 130 s going, 84 to go take 455 s.
        assert!(
            shown.contains("elapsed 0:02:10") && shown.contains("eta 0:07:35"),
            "the minute paused does not count: {shown}"
        );
        app.live.replay = Some(crate::tui::vocab::Replay::Speed(1.0));
        let shown = progress(&render(&app, (120, 30)));
        assert!(shown.contains("eta –"), "a replay: {shown}");
    }

    /// The names a resume masked (a character renamed while the session was interrupted) stay
    /// masked in what the Inspector shows of the judge's prompts, as the judge read them.
    #[test]
    fn the_names_a_resume_masked_stay_masked_for_the_inspector() {
        let (mut app, _) = running(1, 0);
        let masked = [(
            "hermione-en".to_string(),
            crate::study::interview::Masked {
                participant: vec!["Hermy Grangerson".into()],
                experimenter: vec!["Ronald".into()],
            },
        )]
        .into();
        app.update(Action::Engine(Event::Resumed {
            at: "2026-11-29T13:00:00Z".into(),
            items_per_call: None,
            character_versions: Default::default(),
            masked,
        }));
        let plan = app.run.session.plan.as_ref().unwrap();
        let hermione = app.catalog.character("hermione-en").unwrap();
        let shown = plan
            .masker(hermione)
            .mask("Hermy Grangerson told Ronald what Hermione thinks.");
        assert!(
            !shown.contains("Hermy") && !shown.contains("Ronald") && !shown.contains("Hermione"),
            "{shown}"
        );
    }

    #[test]
    fn a_resumed_run_has_no_eta_until_it_has_made_something() {
        let (mut app, events) = running(1 + 30, 0);
        app.update(Action::Tick(5_000));
        app.update(Action::Engine(Event::Resumed {
            at: "2026-11-29T13:00:00Z".into(),
            items_per_call: None,
            character_versions: Default::default(),
            masked: Default::default(),
        }));
        app.update(Action::Tick(65_000));
        let shown = progress(&render(&app, (120, 30)));
        assert!(shown.contains("interviews 30/88 · 0 in flight · 0 queued"), "{shown}");
        assert!(shown.contains("eta –"), "what the journal held is no rate: {shown}");
        // The sitting answers 2 items in its first minute: 56 to go take 28 minutes.
        for e in events.iter().skip(1 + 30).take(2) {
            record(&mut app, e);
        }
        let shown = progress(&render(&app, (120, 30)));
        assert!(shown.contains("interviews 32/88"), "{shown}");
        assert!(shown.contains("eta 0:38:00"), "(56 + 20) to go at 2 a minute: {shown}");
    }

    /// Answers that came with no request of the sitting (copied from the session a re-assessment
    /// judges) are no pace: with only those, no ETA, rather than a rate of hundreds a minute.
    #[test]
    fn copied_answers_give_the_eta_no_rate() {
        let (mut app, events) = running(1, 0);
        for e in events.iter().skip(1).take(30) {
            app.update(Action::Engine(e.clone()));
        }
        app.update(Action::Tick(60_000));
        let shown = progress(&render(&app, (120, 30)));
        assert!(shown.contains("interviews 30/88"), "{shown}");
        assert!(shown.contains("eta –"), "{shown}");
        for e in events.iter().skip(1 + 30).take(2) {
            record(&mut app, e);
        }
        let shown = progress(&render(&app, (120, 30)));
        assert!(shown.contains("eta 0:38:00"), "(56 + 20) to go at 2 a minute: {shown}");
    }

    /// The tour's last step opens the observer sample: an interview replay still going is stopped
    /// for it, and the step says so (it stopped without a word).
    #[test]
    fn the_tours_observer_step_says_it_stops_the_interview_replay() {
        use crate::tui::app::{Demo, Effect};
        use crate::tui::keys::Command;
        let (mut app, _) = running(10, 0);
        let sample = std::path::PathBuf::from("observers-sample");
        app.demo = Some(Demo {
            step: 3,
            observers: Some(sample.clone()),
            finished: None,
        });
        assert!(app.live.running, "the interview replays");
        let effects = app.command(Command::DemoNext);
        assert!(
            matches!(effects.as_slice(), [Effect::Cancel, Effect::Open(p)] if *p == sample),
            "{effects:?}"
        );
        // The observer sample opens (its records are the fixture's here): the step's words stay.
        let plan = fixture::plan(&["hermione-en"], &["BFI"], &[Method::ErBatch]);
        let observed = fixture::session(&app.catalog, &plan);
        app.update(Action::SessionLoaded(observed));
        let said = app.flash.clone().unwrap_or_default();
        assert!(
            said.starts_with("demo 5/5:") && said.contains("the interview's replay stopped"),
            "{said}"
        );
    }
}

/// A chat reply is sampled as an interview answer is (the config's `[sampling.rpa]`), so an item
/// asked again stands beside its recorded answer on equal terms.
mod chat_sampling {
    use std::sync::Mutex;

    use crate::llm::{ChatEvent, ChatModel, ChatRequest, EventStream, ModelInfo};

    #[derive(Default)]
    struct Recorded(Mutex<Vec<ChatRequest>>);

    impl ChatModel for Recorded {
        fn stream(&self, request: ChatRequest) -> EventStream {
            self.0.lock().unwrap().push(request);
            Box::pin(futures_util::stream::iter([
                ChatEvent::Token("Hi.".into()),
                ChatEvent::Done {
                    finish_reason: None,
                    cached: false,
                },
            ]))
        }

        fn info(&self) -> ModelInfo {
            ModelInfo {
                provider: "recorded".into(),
                kind: "test".into(),
                model: "none".into(),
                sha256: None,
            }
        }
    }

    #[tokio::test]
    async fn a_chat_reply_is_sampled_as_an_interview_answer() {
        let model = std::sync::Arc::new(Recorded::default());
        let catalog = crate::catalog::Catalog::bundled().unwrap();
        let data = tempfile::tempdir().unwrap();
        let text = "[sampling.rpa]\ntemperature = 0.3\nmax_tokens = 123\n";
        let source = crate::domain::diagnostic::Source::new("config.toml", text);
        let config = crate::config::Config::parse(source, true, &|_| None).unwrap();
        let said = super::Said {
            greeting: None,
            history: &[],
            text: "Do you like art?",
            sampling: crate::study::interview::answer_sampling(&config, None, None),
        };
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        super::chat(
            model.clone(),
            &catalog,
            data.path(),
            "hermione-en",
            crate::rpa::prompt::RpaStyle::Description,
            said,
            &tx,
        )
        .await
        .unwrap();
        let asked = model.0.lock().unwrap();
        assert_eq!(asked[0].sampling.temperature, Some(0.3));
        assert_eq!(asked[0].sampling.max_tokens, Some(123));
    }
}

/// A replay of a session another process is writing says so at its end: it showed the journal as it
/// was when it began, and the session is not finished.
#[tokio::test]
async fn a_replay_of_a_session_being_written_says_so() {
    let id = "20261129-201520-gse-on-the-local-model-e700";
    let (data, _store) = store_with(&[id]);
    let dir = crate::session::sessions_dir(data.path()).join(id);
    let replay = |tx| {
        let (data, dir) = (data.path().to_path_buf(), dir.clone());
        async move {
            let catalog = Catalog::load(None).unwrap();
            let (_speed, rx) = tokio::sync::watch::channel(Replay::Instant);
            super::replay::replay(&dir, &data, &catalog, &tx, rx, &Default::default()).await
        }
    };
    let flashes = |mut rx: tokio::sync::mpsc::UnboundedReceiver<Action>| {
        let mut said = Vec::new();
        while let Ok(action) = rx.try_recv() {
            if let Action::Flash(text) = action {
                said.push(text);
            }
        }
        said
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    replay(tx).await.unwrap();
    assert_eq!(flashes(rx), Vec::<String>::new(), "a finished session: nothing to say");
    let _writing = crate::journal::Journal::open_exclusive(&dir.join("journal.jsonl")).unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    replay(tx).await.unwrap();
    let said = flashes(rx);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains(&format!(
            "session {id} is being written by another incharacter (pid {})",
            std::process::id()
        )),
        "{said:?}"
    );
}
