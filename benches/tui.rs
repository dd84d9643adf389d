//! Frame render times of the busiest screens, drawn into ratatui's TestBackend (no terminal I/O):
//! the live run with a transcript of 2,816 messages (32 characters × BFI answered) at 200×60, and
//! compare on CABIN (41 dimensions, paged radar, bars, session table) at 200×60.
//! Run: `cargo bench --bench tui`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use incharacter::catalog::Catalog;
use incharacter::config::Config;
use incharacter::method::Method;
use incharacter::tui::app::{Action, App, Screen};
use incharacter::tui::keys::Keymap;
use incharacter::tui::{fixture, theme, ui};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn app_with(plan: &incharacter::study::RunPlan, screen: Screen) -> App {
    let catalog = Arc::new(Catalog::load(None).unwrap());
    let (themes, _) = theme::load_all(None);
    let mut app = App::new(
        catalog.clone(),
        &Config::defaults(&|_| None),
        None,
        Keymap::default(),
        themes,
        0,
    );
    for e in fixture::session(&catalog, plan) {
        app.update(Action::Engine(e));
    }
    app.screen = screen;
    app
}

fn bench(c: &mut Criterion) {
    let catalog = Catalog::load(None).unwrap();
    let everyone: Vec<&str> = catalog.characters.iter().map(|e| e.value.id.as_str()).collect();
    let live = app_with(&fixture::plan(&everyone, &["BFI"], &[Method::ErBatch]), Screen::Live);
    assert!(live.run.transcript.len() >= 2000);
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
    c.bench_function("render: live run, 2,816-message transcript, 200×60", |b| {
        b.iter(|| {
            terminal.draw(|f| ui::render(f, black_box(&live))).unwrap();
        })
    });

    let compare = app_with(
        &fixture::plan(&everyone[..8], &["CABIN"], &[Method::ErBatch, Method::Oc]),
        Screen::Compare,
    );
    c.bench_function("render: compare, CABIN (41 dimensions), 8 characters, 200×60", |b| {
        b.iter(|| {
            terminal.draw(|f| ui::render(f, black_box(&compare))).unwrap();
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
