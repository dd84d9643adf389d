//! A session in batch mode (see [`crate::llm::batch`]): what its journal says of its batches, and
//! the coordinator that sends each complete phase out — to a provider's Batch API, polled until it
//! ends, or to a file for an offline engine, after which the run stops until `batch import` brings
//! the results. Every batch id and file id is journaled as soon as it exists (a resumed run polls
//! the same batch), and every result is kept in the session's folder (`batches/`) before anything
//! reads it, so a kill at any moment loses nothing already paid for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use super::SessionError;
use crate::fault::Classify;
use crate::journal;
use crate::llm::LlmError;
use crate::llm::client::Came;
use crate::llm::batch::{self, Answer, Batch, BatchApi, Hub, Pending, Step};
use crate::study::Event;

/// Where a run in batch mode sends its phases.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchMode {
    /// The providers' OpenAI Batch API (`run --batch`).
    Api,
    /// Files for an offline engine (`run --batch-files DIR`): a phase goes to `output` when given
    /// (`batch export -o`), else to `DIR/<session>-phase<N>.jsonl`.
    Files { dir: PathBuf, output: Option<PathBuf> },
}

impl BatchMode {
    /// The mode as a run's first record keeps it.
    pub fn started(&self) -> crate::study::BatchStart {
        match self {
            BatchMode::Api => crate::study::BatchStart::Api,
            BatchMode::Files { dir, .. } => crate::study::BatchStart::Files { dir: dir.clone() },
        }
    }

    /// The mode a run was started in, from its first record.
    pub fn of_start(start: &crate::study::BatchStart) -> BatchMode {
        match start {
            crate::study::BatchStart::Api => BatchMode::Api,
            crate::study::BatchStart::Files { dir } => BatchMode::Files {
                dir: dir.clone(),
                output: None,
            },
        }
    }
}

/// A results file checked against the phase that waits for it, to import when the run resumes.
#[derive(Debug, Clone)]
pub struct Import {
    /// The file, as an absolute path (how it was spelled, relative to where, is not what matters).
    pub from: PathBuf,
    /// When the file was last written, as read (see [`Step::Imported`]).
    pub modified_ms: Option<u64>,
    pub phase: u32,
    pub text: String,
    pub answers: BTreeMap<String, Answer>,
    /// The results the session last imported, given again: the run goes on from the kept copy.
    pub already: bool,
    /// The phase's requests the file has no result for (they go out again in the next phase).
    pub missing: usize,
}

/// What a session's journal records of its batches.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub steps: Vec<Step>,
    /// How many of `steps` came before the run last finished: their failures were the concluded
    /// run's, and a resume asks again with a whole retry policy.
    finished: usize,
}

impl History {
    pub fn of(events: &[Event]) -> History {
        let mut history = History::default();
        for e in events {
            match e {
                Event::Batch(step) => history.steps.push(step.clone()),
                Event::RunFinished { .. } => history.finished = history.steps.len(),
                _ => {}
            }
        }
        history
    }

    pub fn last_phase(&self) -> u32 {
        self.steps.iter().map(Step::phase).max().unwrap_or(0)
    }

    /// The mode the session last ran in, if it ran in batch mode.
    pub fn mode(&self) -> Option<BatchMode> {
        self.steps.iter().rev().find_map(|s| match s {
            Step::Written { path, .. } => Some(BatchMode::Files {
                dir: Path::new(path).parent().map(Path::to_path_buf).unwrap_or_default(),
                output: None,
            }),
            Step::Uploaded { .. } | Step::Submitted { .. } => Some(BatchMode::Api),
            _ => None,
        })
    }

    /// The requests file whose results the session waits for: the last one written, unless results
    /// were imported since.
    pub fn waiting(&self) -> Option<(u32, &str, &[String])> {
        match self
            .steps
            .iter()
            .rev()
            .find(|s| matches!(s, Step::Written { .. } | Step::Imported { .. }))
        {
            Some(Step::Written { phase, path, requests }) => Some((*phase, path.as_str(), requests.as_slice())),
            _ => None,
        }
    }

    /// The results kept in the session's folder, relative to it, each with whether it is of the run
    /// going on (not one that finished before it).
    fn kept(&self) -> Vec<(&str, bool)> {
        self.steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Step::Ended { results, .. } | Step::Imported { results, .. } => {
                    Some((results.as_str(), i >= self.finished))
                }
                _ => None,
            })
            .collect()
    }

    /// Batches uploaded or submitted that have not ended: (phase, provider, file, batch).
    pub fn open(&self) -> Vec<(u32, String, String, Option<String>)> {
        let mut open: BTreeMap<(u32, String), (String, Option<String>)> = BTreeMap::new();
        for step in &self.steps {
            match step {
                Step::Uploaded {
                    phase, provider, file, ..
                } => {
                    open.insert((*phase, provider.clone()), (file.clone(), None));
                }
                Step::Submitted {
                    phase,
                    provider,
                    batch,
                    file,
                } => {
                    open.insert((*phase, provider.clone()), (file.clone(), Some(batch.clone())));
                }
                Step::Ended { phase, provider, .. } => {
                    open.remove(&(*phase, provider.clone()));
                }
                _ => {}
            }
        }
        open.into_iter()
            .map(|((phase, provider), (file, batch))| (phase, provider, file, batch))
            .collect()
    }
}

/// The largest results file `batch import` reads, and the longest line in it: a line holds one
/// completion, and a completion of megabytes is not a reply to any request a run writes.
pub const MAX_RESULTS: u64 = 1024 * 1024 * 1024;
pub const MAX_RESULT_LINE: u64 = 8 * 1024 * 1024;

/// Checks a results file against the phase the session waits for; the first line that is not JSON,
/// names a request the phase did not write, or answers one twice is located, and nothing is changed.
/// `dir` is the session's folder: results imported before (a kill stopped the import's run after it
/// kept them) are recognised there, and the import goes on from them.
pub fn check_import(events: &[Event], dir: &Path, from: &Path) -> Result<Import, SessionError> {
    let history = History::of(events);
    let name = from.display().to_string();
    let refused = |reason: String| SessionError::Batch { reason, input: true };
    let text = crate::files::read_text_limited(from, MAX_RESULTS, "a batch results file").map_err(|e| {
        SessionError::Batch {
            input: e.is_input(),
            reason: e.to_string(),
        }
    })?;
    for (i, line) in text.lines().enumerate() {
        if line.len() as u64 > MAX_RESULT_LINE {
            return Err(refused(format!(
                "{}:{}:1: a line longer than the {} a batch result may hold; nothing was imported",
                name,
                i + 1,
                crate::files::size(MAX_RESULT_LINE)
            )));
        }
    }
    let Some((phase, _, requests)) = history.waiting() else {
        return already_imported(&history, events, dir, from, text);
    };
    // A phase that asks again what an earlier one asked has the same request ids: the earlier
    // phase's results would pass for this one's, their errors counted as new attempts.
    let modified_ms = modified_ms(from);
    if let Some(earlier) = imported_as(&history, dir, from, modified_ms, &text) {
        return Err(refused(format!(
            "{name}: these are phase {earlier}'s results, imported already; phase {phase} waits for the results of \
             its own {} requests; nothing was imported",
            requests.len()
        )));
    }
    if text.trim().is_empty() {
        return Err(refused(format!(
            "{}: no results ({}); phase {phase} waits for the results of its {} requests; nothing was imported",
            name,
            if text.is_empty() { "an empty file" } else { "only blank lines" },
            requests.len()
        )));
    }
    let known: BTreeSet<&str> = requests.iter().map(String::as_str).collect();
    let answers = batch::parse_results(&name, &text, &|id| known.contains(id))
        .map_err(|bad| refused(format!("{bad} (phase {phase}'s results; nothing was imported)")))?;
    Ok(Import {
        from: std::path::absolute(from).unwrap_or_else(|_| from.to_path_buf()),
        modified_ms,
        phase,
        missing: requests.len().saturating_sub(answers.len()),
        text,
        answers,
        already: false,
    })
}

/// The phase an earlier import took this very file for: written when that import read it (to the
/// millisecond; moved or linked since or not), and what it kept the same text. (The same text alone
/// is no proof: a deterministic engine answers a request asked again alike, to the byte, and a user
/// may have it write every phase's results to one file.) Journals of an earlier version recorded no
/// time: there, the same file by where it was.
fn imported_as(history: &History, dir: &Path, from: &Path, modified_ms: Option<u64>, text: &str) -> Option<u32> {
    history.steps.iter().find_map(|s| match s {
        Step::Imported {
            phase,
            from: was,
            results,
            modified_ms: then,
            ..
            // Written when it was (to the millisecond), wherever it is now (moved, linked); an
            // import of an earlier version, which recorded no time, by where it was.
        } if then.map_or_else(|| same_file(Path::new(was), from), |then| Some(then) == modified_ms) => {
            crate::files::read_text_limited(&dir.join(results), MAX_RESULTS, "batch results")
                .is_ok_and(|kept| kept == text)
                .then_some(*phase)
        }
        _ => None,
    })
}

/// Whether `a` and `b` reach one file, however each is spelled: through `..`, a link to it or to its
/// folder, another hard link. (A path gone since is compared as written, made absolute.)
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => {
            let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
            absolute(a) == absolute(b)
        }
    }
}

/// When `file` was last written, in milliseconds since 1970, if the system says.
fn modified_ms(file: &Path) -> Option<u64> {
    let at = std::fs::metadata(file).and_then(|m| m.modified()).ok()?;
    at.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_millis() as u64)
}

/// A results file given when the session waits for none: the very results it last imported (a kill
/// stopped the run that followed) go on from where they are kept; anything else says what does.
fn already_imported(
    history: &History,
    events: &[Event],
    dir: &Path,
    from: &Path,
    text: String,
) -> Result<Import, SessionError> {
    let last = history.steps.iter().enumerate().rev().find_map(|(i, s)| match s {
        Step::Imported { phase, results, .. } => Some((i, *phase, results.as_str())),
        _ => None,
    });
    let Some((at, phase, results)) = last else {
        return Err(SessionError::Batch {
            reason: "the session waits for no batch results (`run --batch-files DIR` writes a phase's requests; \
                     `batch export` writes them again)"
                .into(),
            input: true,
        });
    };
    let session = events.iter().find_map(Event::start);
    let (id, command) = session.map_or(("<ID>".to_string(), "run"), |s| {
        (s.session.to_string(), s.kind.command())
    });
    let finished = at < history.finished;
    // The run those results went on with has finished since, with failures: a resume asks them
    // again, as a new sitting that writes a new phase; importing a file again is not one.
    if finished && crate::study::failures_any(events).any() {
        return Err(SessionError::Batch {
            reason: format!(
                "phase {phase}'s results were imported already, and the run they went on with has finished with \
                 failures; nothing was imported. To ask the failed requests again (written as a new phase's \
                 batch file): incharacter {command} --resume {id}"
            ),
            input: true,
        });
    }
    let kept = crate::files::read_text_limited(&dir.join(results), MAX_RESULTS, "batch results");
    if kept.is_ok_and(|kept| kept == text) {
        return Ok(Import {
            from: from.to_path_buf(),
            modified_ms: None,
            phase,
            text,
            answers: BTreeMap::new(),
            already: true,
            missing: 0,
        });
    }
    if finished {
        return Err(SessionError::Batch {
            reason: format!(
                "session {id} is complete and waits for no batch results (phase {phase}'s were its last); nothing was imported"
            ),
            input: true,
        });
    }
    Err(SessionError::Batch {
        reason: format!(
            "phase {phase}'s results were imported already (kept in {}), and the session waits for no others; \
             to go on from them: incharacter {command} --resume {}",
            dir.join(results).display(),
            id
        ),
        input: true,
    })
}

/// Batch steps on their way to the journal; each is acknowledged once written.
pub(super) type Journaler = mpsc::UnboundedSender<(Event, oneshot::Sender<bool>)>;

/// A session's batch mode, for the run that opens it.
pub struct Batching {
    pub hub: Arc<Hub>,
    pub mode: BatchMode,
    /// The Batch API of each provider the run connected (`BatchMode::Api`).
    pub(super) apis: Mutex<BTreeMap<String, Arc<BatchApi>>>,
    pub(super) history: History,
    pub(super) import: Option<Import>,
    /// The session's folder and id.
    pub(super) dir: PathBuf,
    pub(super) session: String,
    /// Each connected provider's prices (USD per million tokens in, out): what a phase is
    /// estimated at before it goes out under a cost cap.
    pub(super) prices: Mutex<BTreeMap<String, (f64, f64)>>,
}

/// The reply tokens a phase's request is estimated at before it goes out under a cost cap: above
/// an interview answer's or a judge's usual length (about 90 each with the bundled prompts), so
/// that a phase of usual replies is not estimated below what it costs.
pub const REPLY_ALLOWANCE: u64 = 150;

/// The text of a message's `content`: a string, or the text parts of a list of parts.
fn content_text(content: &serde_json::Value) -> String {
    match content {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

fn api_error(provider: &str, e: LlmError) -> SessionError {
    SessionError::Batch {
        input: e.is_input(),
        reason: format!("{provider}: {e}"),
    }
}

impl Batching {
    pub fn new(mode: BatchMode, events: &[Event], import: Option<Import>, dir: PathBuf, session: String) -> Batching {
        Batching {
            hub: Arc::default(),
            mode,
            apis: Mutex::default(),
            history: History::of(events),
            import,
            dir,
            session,
            prices: Mutex::default(),
        }
    }

    /// What the requests of a phase would cost at their providers' prices: their prompts as
    /// [`estimate_text`](crate::llm::server::estimate_text) counts them, and each reply at
    /// [`REPLY_ALLOWANCE`] tokens (or the request's own cap on its reply, if lower).
    fn phase_cost(&self, pending: &[Pending]) -> f64 {
        use crate::llm::server::{MARGIN, TEMPLATE_FIXED, TEMPLATE_PER_MESSAGE, estimate_text};
        let prices = self.prices.lock().unwrap_or_else(|p| p.into_inner());
        pending
            .iter()
            .map(|p| {
                let (price_in, price_out) = prices.get(&p.provider).copied().unwrap_or_default();
                let messages = p.body["messages"].as_array().map_or(&[][..], Vec::as_slice);
                let mut text: usize = messages.iter().map(|m| content_text(&m["content"])).map(|t| estimate_text(&t)).sum();
                // A schema the server reads (or turns into a grammar) is counted as the context check counts it.
                if let Some(format) = p.body.get("response_format") {
                    text += estimate_text(&format.to_string());
                }
                let prompt = (text as f64 * MARGIN).ceil() + (TEMPLATE_FIXED + TEMPLATE_PER_MESSAGE * messages.len()) as f64;
                let cap = ["max_completion_tokens", "max_tokens"].iter().find_map(|k| p.body[k].as_u64());
                let reply = cap.map_or(REPLY_ALLOWANCE, |c| c.min(REPLY_ALLOWANCE)) as f64;
                (prompt * price_in + reply * price_out) / 1_000_000.0
            })
            .sum()
    }

    fn api(&self, provider: &str) -> Result<Arc<BatchApi>, SessionError> {
        self.apis
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(provider)
            .cloned()
            .ok_or_else(|| SessionError::Batch {
                reason: format!(
                    "provider {provider} has a batch of session {} open through the Batch API, which this run does not \
                     follow: `incharacter run --resume {}` (without --batch-files) follows it to its end",
                    self.session, self.session
                ),
                input: true,
            })
    }

    async fn journal(&self, journal: &Journaler, step: Step) -> Result<(), SessionError> {
        let (tx, rx) = oneshot::channel();
        let written = journal.send((Event::Batch(step), tx)).is_ok() && rx.await.unwrap_or(false);
        if written {
            Ok(())
        } else {
            Err(SessionError::Unwritable {
                path: self.dir.join("journal.jsonl"),
                source: std::io::Error::other("the journal stopped taking records"),
            })
        }
    }

    /// Keeps results in the session's folder; the path relative to it.
    fn keep(&self, name: String, text: &str) -> Result<String, SessionError> {
        let relative = format!("batches/{name}");
        let path = self.dir.join(&relative);
        journal::write_bytes_atomic(&path, text.as_bytes()).map_err(|source| SessionError::Results { path, source })?;
        Ok(relative)
    }

    /// The results kept in the session's folder, loaded into the hub before the study asks
    /// anything, so each request is answered from them, not from the cache or a new phase.
    pub(super) fn load_kept(&self) -> Result<(), SessionError> {
        for (relative, ongoing) in self.history.kept() {
            let path = self.dir.join(relative);
            let text = crate::files::read_text_limited(&path, MAX_RESULTS, "batch results").map_err(|e| SessionError::Batch {
                reason: format!("cannot read the kept results {}: {e}", path.display()),
                input: false,
            })?;
            let mut answers = batch::parse_results(&path.display().to_string(), &text, &|_| true).map_err(|bad| {
                SessionError::Batch {
                    reason: format!("the kept results are damaged: {bad}"),
                    input: false,
                }
            })?;
            // A finished run's failures are not this one's: its replies are read back, its failed
            // requests asked again.
            if !ongoing {
                answers.retain(|_, answer| answer.as_ref().is_ok_and(batch::Reply::usable));
            }
            // Paid for when their batch ended (or were imported), in the sitting that kept them.
            self.hub.load(&answers, Came::Kept);
        }
        Ok(())
    }

    /// Sends every complete phase out until the study is done (the caller drops this then). In files
    /// mode it returns after writing the first phase it finds: the path of the requests file.
    ///
    /// A cost cap (`cap`) is held between phases: a batch is paid for whole when it ends (or its
    /// results are imported, in files mode), and its replies are read and journaled before the next
    /// phase would go out; once they have cost the cap, that phase does not. The run's accounts
    /// learn which lines went to a batch file.
    pub(super) async fn coordinate(
        &self,
        journal: &Journaler,
        note: &(dyn Fn(String) + Send + Sync),
        (accounting, cap): (&crate::llm::accounting::Accounting, Option<f64>),
    ) -> Result<PathBuf, SessionError> {
        self.take_import(journal, note).await?;
        // A provider this run does not connect is refused before any batch is followed.
        for (_, provider, ..) in self.history.open() {
            self.api(&provider)?;
        }
        // A batch that cannot be followed does not keep the others' answers from this sitting.
        let mut failed = None;
        for (phase, provider, file, batch) in self.history.open() {
            match self.follow_open(journal, note, (phase, &provider, &file, batch)).await {
                // Ended in this sitting: billed now, as a phase's results are.
                Ok(answers) => self.hub.load(&answers, Came::Sent),
                // The first is the run's error; any other is said here.
                Err(e) if failed.is_some() => note(format!("batch phase {phase}: {e}")),
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            self.hub.until_idle().await;
            return Err(e);
        }
        let mut phase = self.history.last_phase();
        loop {
            let Some(pending) = self.hub.phase() else {
                self.hub.changed().await;
                continue;
            };
            phase += 1;
            if let Some(cap) = cap {
                // A phase is paid whole once it goes: one that would take the sitting past its
                // cap does not go (nor does any once the cap is reached).
                let spent = accounting.cost();
                let estimate = self.phase_cost(&pending);
                if spent >= cap || spent + estimate > cap {
                    let next = (spent < cap).then_some(super::NextPhase {
                        phase,
                        requests: pending.len(),
                        estimate,
                        files: matches!(self.mode, BatchMode::Files { .. }),
                    });
                    return Err(SessionError::CostCap { spent, cap, next });
                }
            }
            match &self.mode {
                BatchMode::Files { dir, output } => {
                    let ids: Vec<String> = pending.iter().map(|p| p.custom_id.clone()).collect();
                    // The requests of the phase whose results the session waits for, written again
                    // (`batch export`): the same phase, not the next.
                    // The phase this sitting imported waits no longer: its requests asked again
                    // (a reply that came back empty) are a new phase, not that one written again.
                    let imported = |w: &u32| self.import.as_ref().is_some_and(|i| i.phase == *w);
                    let phase = match self.history.waiting().filter(|(w, ..)| !imported(w)) {
                        Some((waiting, _, requests))
                            if requests.len() == ids.len() && {
                                let asked: std::collections::HashSet<&String> = requests.iter().collect();
                                ids.iter().all(|id| asked.contains(id))
                            } =>
                        {
                            waiting
                        }
                        _ => phase,
                    };
                    let path = output
                        .clone()
                        .unwrap_or_else(|| dir.join(format!("{}-phase{phase}.jsonl", self.session)));
                    let text = lines(pending.iter());
                    // The user's file: whole or not at all, never through a link; a full disk is
                    // the machine's failure, a link or a folder in the way the user's.
                    let written = crate::files::write_atomic(&path, text.as_bytes());
                    if written.is_ok() {
                        for p in &pending {
                            accounting.in_batch_file(&p.provider, p.role);
                        }
                    }
                    written.map_err(|e| SessionError::Batch {
                        input: e.is_input(),
                        reason: e.to_string(),
                    })?;
                    let step = Step::Written {
                        phase,
                        path: path.display().to_string(),
                        requests: ids,
                    };
                    self.journal(journal, step).await?;
                    return Ok(path);
                }
                BatchMode::Api => {
                    let mut by_provider: BTreeMap<&str, Vec<&Pending>> = BTreeMap::new();
                    for p in &pending {
                        by_provider.entry(p.provider.as_str()).or_default().push(p);
                    }
                    let sent = by_provider
                        .into_iter()
                        .map(|(provider, pending)| self.submit(journal, note, phase, provider, pending));
                    // Every share that came back is read, even when another failed: its batch
                    // is paid for and journaled as ended, so its answers are this sitting's to
                    // journal and count. The run stops once they have been (the failed share's
                    // requests stay parked).
                    let mut failed = None;
                    for result in futures_util::future::join_all(sent).await {
                        match result {
                            Ok((asked, answers)) => self.hub.resolve(&asked, &answers),
                            Err(e) if failed.is_some() => note(format!("batch phase {phase}: {e}")),
                            Err(e) => failed = Some(e),
                        }
                    }
                    if let Some(e) = failed {
                        self.hub.until_idle().await;
                        return Err(e);
                    }
                }
            }
        }
    }

    /// The results this sitting imported (`batch import`), unless that phase was imported before:
    /// kept in the session, journaled, and loaded into the hub as the user's engine's (their tokens
    /// counted); requests they do not answer are said to go out again.
    async fn take_import(&self, journal: &Journaler, note: &(dyn Fn(String) + Send + Sync)) -> Result<(), SessionError> {
        let Some(import) = self.import.as_ref().filter(|i| !i.already) else {
            return Ok(());
        };
        let results = self.keep(format!("phase-{}.out.jsonl", import.phase), &import.text)?;
        let step = Step::Imported {
            phase: import.phase,
            from: import.from.display().to_string(),
            results,
            lines: import.answers.len(),
            modified_ms: import.modified_ms,
        };
        note(step.describe());
        if import.missing > 0 {
            note(format!(
                "batch phase {}: {} of its {} requests have no result in {}: they go out again in the next phase",
                import.phase,
                import.missing,
                import.missing + import.answers.len(),
                crate::text::visible(&import.from.display().to_string())
            ));
        }
        self.journal(journal, step).await?;
        // Made by the user's engine: no request of this run's, but their tokens are counted
        // (and priced as the config says, which the cost cap holds before the next phase).
        self.hub.load(&import.answers, Came::Imported);
        Ok(())
    }

    /// A batch an earlier sitting left open (`batch` unless it was killed between upload and
    /// submission), followed to its end.
    async fn follow_open(
        &self,
        journal: &Journaler,
        note: &(dyn Fn(String) + Send + Sync),
        (phase, provider, file, batch): (u32, &str, &str, Option<String>),
    ) -> Result<BTreeMap<String, Answer>, SessionError> {
        let api = self.api(provider)?;
        let batch = match batch {
            Some(id) => match api.get(&id).await {
                Err(e) if gone(&e) => return self.gone(journal, phase, provider, &id, e).await,
                other => other,
            },
            // Uploaded, then killed before the batch was journaled: find it, or create it now.
            None => match api.find(file).await {
                Ok(Some(found)) => Ok(found),
                Ok(None) => api.create(file).await,
                Err(e) => Err(e),
            },
        }
        .map_err(|e| api_error(provider, e))?;
        note(format!(
            "batch phase {phase}: following {provider} batch {} from the last sitting",
            batch.id
        ));
        self.follow(journal, note, phase, provider, &api, batch).await
    }

    /// One provider's share of a phase: uploaded, submitted, followed to its end.
    async fn submit(
        &self,
        journal: &Journaler,
        note: &(dyn Fn(String) + Send + Sync),
        phase: u32,
        provider: &str,
        pending: Vec<&Pending>,
    ) -> Result<(Vec<String>, BTreeMap<String, Answer>), SessionError> {
        let api = self.api(provider)?;
        let asked: Vec<String> = pending.iter().map(|p| p.custom_id.clone()).collect();
        let name = format!("{}-phase{phase}-{provider}.jsonl", self.session);
        let file = api
            .upload(&name, &lines(pending.iter().copied()))
            .await
            .map_err(|e| api_error(provider, e))?;
        let uploaded = Step::Uploaded {
            phase,
            provider: provider.to_string(),
            file: file.clone(),
            requests: asked.len(),
        };
        note(uploaded.describe());
        self.journal(journal, uploaded).await?;
        let batch = api.create(&file).await.map_err(|e| api_error(provider, e))?;
        self.journal(
            journal,
            Step::Submitted {
                phase,
                provider: provider.to_string(),
                batch: batch.id.clone(),
                file,
            },
        )
        .await?;
        let answers = self.follow(journal, note, phase, provider, &api, batch).await?;
        Ok((asked, answers))
    }

    /// Polls a batch until it ends, then keeps its results (output and error files) and journals it.
    async fn follow(
        &self,
        journal: &Journaler,
        note: &(dyn Fn(String) + Send + Sync),
        phase: u32,
        provider: &str,
        api: &BatchApi,
        mut batch: Batch,
    ) -> Result<BTreeMap<String, Answer>, SessionError> {
        let mut said = String::new();
        loop {
            let line = format!(
                "batch phase {phase}: {provider} {} {}: {}",
                batch.id,
                batch.status,
                batch.request_counts.describe()
            );
            if line != said {
                note(line.clone());
                said = line;
            }
            if batch.ended() {
                break;
            }
            tokio::time::sleep(api.poll_interval()).await;
            batch = match api.get(&batch.id).await {
                Err(e) if gone(&e) => return self.gone(journal, phase, provider, &batch.id, e).await,
                other => other.map_err(|e| api_error(provider, e))?,
            };
        }
        // Failed with no results: ended all the same, journaled so, so that a resume sends its
        // requests again in a new phase instead of following a batch that will never have any.
        let unanswered = batch.status == "failed" && batch.output_file_id.is_none();
        let mut text = String::new();
        let files = [&batch.output_file_id, &batch.error_file_id];
        for file in files.into_iter().flatten().filter(|_| !unanswered) {
            let part = match api.content(file).await {
                // Its results deleted at the provider: as good as none.
                Err(e) if gone(&e) => return self.gone(journal, phase, provider, &batch.id, e).await,
                other => other.map_err(|e| api_error(provider, e))?,
            };
            text.push_str(part.trim_end());
            text.push('\n');
        }
        let results = self.keep(format!("phase-{phase}-{provider}.out.jsonl"), &text)?;
        let answers = if unanswered {
            BTreeMap::new()
        } else {
            batch::parse_results(&format!("{provider} batch {}", batch.id), &text, &|_| true).map_err(|bad| {
                SessionError::Batch {
                    reason: format!("{provider} returned results that cannot be read: {bad}"),
                    input: false,
                }
            })?
        };
        self.journal(
            journal,
            Step::Ended {
                phase,
                provider: provider.to_string(),
                batch: batch.id.clone(),
                status: batch.status.clone(),
                counts: batch.request_counts,
                results,
            },
        )
        .await?;
        if unanswered {
            return Err(SessionError::Batch {
                reason: format!("{provider}: {}", batch.failure()),
                input: false,
            });
        }
        Ok(answers)
    }
}

/// Whether the provider answered that it does not know what was asked for (a batch it forgot, a
/// results file deleted): nothing to wait for.
fn gone(e: &LlmError) -> bool {
    matches!(e, LlmError::Http { status: 404, .. })
}

impl Batching {
    /// A batch the provider no longer knows (or whose results it no longer has): journaled as ended
    /// with no results, so that a resume sends its requests again in a new phase instead of asking
    /// for it for ever.
    async fn gone(
        &self,
        journal: &Journaler,
        phase: u32,
        provider: &str,
        batch: &str,
        e: LlmError,
    ) -> Result<BTreeMap<String, Answer>, SessionError> {
        let results = self.keep(format!("phase-{phase}-{provider}.out.jsonl"), "")?;
        self.journal(
            journal,
            Step::Ended {
                phase,
                provider: provider.to_string(),
                batch: batch.to_string(),
                status: "gone".into(),
                counts: Default::default(),
                results,
            },
        )
        .await?;
        Err(SessionError::Batch {
            reason: format!(
                "{provider} no longer has batch {batch} or its results ({e}): journaled as ended with none; a resume \
                 sends its requests again"
            ),
            input: false,
        })
    }
}

/// A batch file's text: a line per request.
fn lines<'a>(pending: impl Iterator<Item = &'a Pending>) -> String {
    pending.map(|p| batch::line(&p.custom_id, &p.body) + "\n").collect()
}
