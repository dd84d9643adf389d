//! The workbench's event loop: terminal input, engine reports and a 60 Hz tick go to the [`App`]; what
//! it returns goes to the driver; frames are drawn when something changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ratatui::crossterm::event::{self as ct, Event as CtEvent};
use tokio::sync::mpsc::unbounded_channel;
use tokio::sync::watch;

use super::Driver;
use super::app::{Action, App, Effect, Replay};
use super::screens::Hits;
use crate::config::Config;
use crate::session::Store;
use crate::study::live::Pause;

/// The workbench's event loop: `input` (the terminal's events, or synthetic ones in a benchmark),
/// engine reports on the action channel, and a 60 Hz tick. Input is handled on arrival and its frame
/// drawn at once; everything else marks the screen dirty and is drawn on the next tick, so a burst of
/// tokens costs one frame. `draw` renders a frame (into the terminal, or a TestBackend) and returns
/// what it drew where; the mouse is tested against the last frame's. Returns the signal that ended
/// it, if one did (the caller exits as killed by it, once the terminal is given back).
pub async fn event_loop<S, D>(
    mut input: S,
    mut app: App,
    config: Config,
    store: Store,
    first: Vec<Effect>,
    draw: &mut dyn FnMut(&App) -> anyhow::Result<D>,
) -> anyhow::Result<Option<i32>>
where
    S: futures_util::Stream<Item = std::io::Result<CtEvent>> + Unpin,
    D: Into<Hits>,
{
    let (tx, mut rx) = unbounded_channel::<Action>();
    // Not what the folder holds now: what it held when the app's catalog was read, before, is not
    // known. The first look reads the catalog again if the folder has files of its own; the app
    // says only what differs.
    let catalog_files = super::reread::CatalogFiles::default();
    let mut driver = Driver {
        tx: tx.clone(),
        models: BTreeMap::new(),
        config: Arc::new(config),
        data: store.data().to_path_buf(),
        store,
        catalog: app.catalog.clone(),
        task: None,
        chat: None,
        pause: Pause::default(),
        speed: watch::channel(Replay::Speed(1.0)).0,
        catalog_files,
    };
    for e in first {
        driver.perform(e);
    }
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(16));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // A kill, a closed terminal or an interrupt from outside (ctrl-c itself is a key here) ends the
    // loop as a quit does: the terminal is given back as it was.
    use tokio::signal::unix::{SignalKind, signal};
    // (One its parent set to be ignored stays ignored.)
    let heard = |number: u32, kind: SignalKind| match crate::process::ignored(number) {
        true => Ok(None),
        false => signal(kind).map(Some),
    };
    let (mut sigterm, mut sighup, mut sigint) = (
        signal(SignalKind::terminate())?,
        heard(1, SignalKind::hangup())?,
        heard(2, SignalKind::interrupt())?,
    );
    async fn on(s: &mut Option<tokio::signal::unix::Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    let mut dirty = true;
    let mut last_second = 0;
    // The data folder's files are looked at every two seconds (a few directory entries).
    let mut last_look = 0;
    let mut hits = Hits::default();
    let mut stray = super::stray_input::StrayInput::default();
    let signal = loop {
        let mut effects = Vec::new();
        let mut now = false;
        tokio::select! {
            biased;
            event = input.next() => match event {
                // (The keys of a sequence the parser did not know are dropped: `stray_input`.)
                Some(Ok(CtEvent::Key(key))) if key.kind != ct::KeyEventKind::Release => {
                    if !stray.drops(&key, Instant::now()) {
                        effects = app.update(Action::Key(key));
                        now = true;
                    }
                }
                Some(Ok(CtEvent::Mouse(m))) => {
                    effects = app.mouse(m, &hits);
                    now = true;
                }
                Some(Ok(CtEvent::Paste(text))) => {
                    effects = app.update(Action::Paste(text));
                    now = true;
                }
                Some(Ok(CtEvent::Resize(..))) => now = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => break None,
            },
            _ = sigterm.recv() => break Some(libc::SIGTERM),
            _ = on(&mut sighup) => break Some(libc::SIGHUP),
            _ = on(&mut sigint) => break Some(libc::SIGINT),
            Some(action) = rx.recv() => {
                effects.extend(app.update(action));
                // Take everything already waiting, so a burst of tokens costs one frame.
                while let Ok(action) = rx.try_recv() {
                    effects.extend(app.update(action));
                }
                dirty = true;
            }
            _ = tick.tick() => {
                let ms = started.elapsed().as_millis() as u64;
                app.update(Action::Tick(ms));
                if ms / 1000 != last_second && app.live.running {
                    last_second = ms / 1000;
                    dirty = true;
                }
                if ms / 2000 != last_look {
                    last_look = ms / 2000;
                    driver.reread_catalog();
                }
                now = dirty;
            }
        }
        for e in effects {
            if e == Effect::Quit {
                driver.stop();
                return Ok(None);
            }
            driver.perform(e);
        }
        if app.quit {
            break None;
        }
        if now {
            hits = draw(&app)?.into();
            app.laid_out(&hits);
            dirty = false;
        }
    };
    driver.stop();
    Ok(signal)
}
