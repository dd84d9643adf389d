//! Keypress-to-frame latency through the workbench's own event loop while a run streams: a live run
//! (4 characters × BFI, ER_batch) against fake-openai streaming at 500 tokens/s, frames drawn into a
//! 200×60 TestBackend, and a `ctrl-t` (next theme, visible in every frame) sent every 40 ms. The
//! latency runs from the moment the key enters the loop's input stream to the end of the first frame
//! drawn with its theme. Run: `cargo bench --bench keys` (optional argument: the tokens/s rate).

// An instrument's own output, not the product's (which passes `text::Safe`).
#![allow(clippy::disallowed_macros)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use incharacter::catalog::Catalog;
use incharacter::config::Config;
use incharacter::method::Method;
use incharacter::tui::app::{App, Effect, Screen};
use incharacter::tui::keys::Keymap;
use incharacter::tui::{event_loop, fixture, theme, ui};
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event as CtEvent, KeyCode, KeyEvent, KeyModifiers};
use tokio::sync::{Notify, mpsc};

const KEYS: usize = 250;

/// A key on its way: when it entered the input stream and the theme its frame must show.
struct Pending {
    sent: Instant,
    theme: usize,
}

fn main() {
    let rate: f64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(500.0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(measure(rate));
}

async fn measure(rate: f64) {
    let server = FakeServer::start(FakeConfig {
        seed: 2,
        tokens_per_s: rate,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("config.toml");
    std::fs::write(
        &config_path,
        format!(
            "max_concurrency = 1\n\n[[providers]]\nname = \"fake\"\nkind = \"openai\"\nbase_url = \"{}\"\n\
             model = \"fake-model\"\nmax_concurrency = 1\n\n[roles]\nrpa = \"fake\"\njudge = \"fake\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let config = Config::load(&config_path, &|_| None).unwrap();
    let data = dir.path().join("data");
    let catalog = Arc::new(Catalog::load(None).unwrap());
    let (themes, _) = theme::load_all(None);
    let theme_count = themes.len();
    let mut app = App::new(catalog, &config, Some(&data), Keymap::default(), themes, 0);
    let mut plan = fixture::plan(
        &["hermione-en", "sheldon-en", "zhongli-zh", "luna-en"],
        &["BFI"],
        &[Method::ErBatch],
    );
    plan.rpa = "fake".into();
    plan.judge = "fake".into();
    app.screen = Screen::Live;
    app.live.running = true;
    app.live.follow = true;

    let (keys, rx) = mpsc::unbounded_channel::<CtEvent>();
    let input = Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok(e), rx))
    }));
    let pending: Arc<Mutex<Option<Pending>>> = Arc::default();
    let shown = Arc::new(Notify::new());
    let mut latencies = Vec::new();
    let mut frames = 0usize;
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();

    // Sends a key, waits until its frame is drawn, then waits out the pacing gap; closes the input
    // (which ends the loop) after the last one.
    let sender = {
        let (pending, shown) = (pending.clone(), shown.clone());
        tokio::spawn(async move {
            // Let the run get going first.
            tokio::time::sleep(Duration::from_millis(500)).await;
            for k in 0..KEYS {
                let notified = shown.notified();
                *pending.lock().unwrap() = Some(Pending {
                    sent: Instant::now(),
                    theme: (k + 1) % theme_count,
                });
                keys.send(CtEvent::Key(KeyEvent::new(KeyCode::Char('t'), KeyModifiers::CONTROL)))
                    .unwrap();
                notified.await;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        })
    };
    let tokens_before = server.trace().iter().map(|t| t.tokens).sum::<usize>();
    let started = Instant::now();
    let mut draw = |app: &App| -> anyhow::Result<()> {
        terminal.draw(|f| ui::render(f, app))?;
        frames += 1;
        let mut slot = pending.lock().unwrap();
        if slot.as_ref().is_some_and(|p| p.theme == app.theme) {
            let p = slot.take().unwrap();
            latencies.push(p.sent.elapsed());
            shown.notify_one();
        }
        Ok(())
    };
    event_loop(
        input,
        app,
        config,
        incharacter::session::Store::new(&data),
        vec![Effect::StartRun { plan, name: None }],
        &mut draw,
    )
    .await
    .unwrap();
    sender.await.unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let streamed: usize = server.trace().iter().map(|t| t.tokens).sum::<usize>() - tokens_before;

    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0;
    println!(
        "keypress to frame while streaming ({rate} tokens/s per reply, {:.0} tokens/s arrived; {frames} frames in {elapsed:.1} s)",
        streamed as f64 / elapsed
    );
    println!(
        "  {} keys: median {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        latencies.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}
