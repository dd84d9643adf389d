//! Pausing a run's calls.

use std::sync::Arc;

use tokio::sync::watch;

/// Pauses and resumes the calls of a run: a paused run starts no call (calls in flight finish).
#[derive(Clone)]
pub struct Pause(Arc<watch::Sender<bool>>);

impl Default for Pause {
    fn default() -> Self {
        Pause(Arc::new(watch::channel(false).0))
    }
}

impl Pause {
    pub fn set(&self, paused: bool) {
        self.0.send_replace(paused);
    }

    /// Returns once the run is not paused.
    pub async fn wait(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|paused| !paused).await;
    }
}
