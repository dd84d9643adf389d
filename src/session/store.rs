//! The one place that finds sessions: the data dir's `sessions/`, then the bundled samples (recorded
//! runs for demos: `$INCHARACTER_SAMPLES`, else the checkout's `sample-sessions/`, else the copy built
//! into the binary, unpacked once into `<data dir>/samples/<hash>`). Samples are read-only: what would
//! be written next to one (an export) goes to the data dir instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{SessionError, sessions_dir};
use crate::catalog::Catalog;
use crate::journal;
use crate::study::{Event, Kind, kind_of};

/// One row of the sessions list.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEntry {
    pub id: String,
    pub name: Option<String>,
    pub created: String,
    /// `running` (a live writer holds it), `interrupted`, `complete` or `complete with failures`
    /// (finished, with items or assessments that failed for good).
    pub status: String,
    /// The models of its roles in one phrase ([`crate::study::models_phrase`]).
    pub model: String,
    /// Each role's provider and model.
    pub models: crate::study::Providers,
    pub path: PathBuf,
    pub sample: bool,
}

/// The status of a session whose last sitting stopped at its cost cap (a resume goes on).
pub const STOPPED_AT_CAP: &str = "stopped at its cost cap";

impl SessionEntry {
    /// The status as a list column shows it: "complete with failures" is too wide, and what sets it
    /// apart ("with failures") is enough.
    pub fn short_status(&self) -> &str {
        if self.status == STOPPED_AT_CAP {
            return "cost cap";
        }
        self.status.strip_prefix("complete ").unwrap_or(&self.status)
    }
}

/// Sessions in a data dir and among the samples; with a catalog, what is loaded is checked against
/// its scales ([`crate::study::check_records`]).
#[derive(Clone)]
pub struct Store {
    data: PathBuf,
    samples: Option<PathBuf>,
    catalog: Option<std::sync::Arc<Catalog>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("data", &self.data)
            .field("samples", &self.samples)
            .finish_non_exhaustive()
    }
}

/// Why the folder `dir` holds no session: its journal is missing, or is not a file.
fn no_journal(dir: &Path) -> SessionError {
    let journal = dir.join("journal.jsonl");
    let why = match std::fs::metadata(&journal) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "it has no journal.jsonl".to_string(),
        Err(e) => format!("its journal.jsonl cannot be read: {e}"),
        Ok(m) if m.is_dir() => "its journal.jsonl is a folder".to_string(),
        Ok(_) => "its journal.jsonl is not a regular file".to_string(),
    };
    SessionError::NoJournal {
        dir: dir.to_path_buf(),
        why,
    }
}

impl Store {
    /// The sessions of `data`, with the samples this build knows.
    pub fn new(data: &Path) -> Store {
        Store {
            data: data.to_path_buf(),
            samples: samples_dir(),
            catalog: None,
        }
    }

    /// This store, checking what it loads against `catalog`'s scales.
    pub fn checked(mut self, catalog: std::sync::Arc<Catalog>) -> Store {
        self.catalog = Some(catalog);
        self
    }

    /// The sessions of `data`, with the samples in `samples` (tests).
    pub fn with_samples(data: &Path, samples: Option<PathBuf>) -> Store {
        Store {
            data: data.to_path_buf(),
            samples,
            catalog: None,
        }
    }

    pub fn data(&self) -> &Path {
        &self.data
    }

    pub fn samples(&self) -> Option<&Path> {
        self.samples.as_deref()
    }

    /// The folder of the data dir's session `id`, which a run may write to.
    pub fn own(&self, id: &str) -> Result<PathBuf, SessionError> {
        let dir = sessions_dir(&self.data).join(id);
        if id.contains('/') || id.contains("..") || !dir.join("journal.jsonl").is_file() {
            if let Some(samples) = &self.samples
                && !id.contains('/')
                && !id.contains("..")
                && samples.join(id).join("journal.jsonl").is_file()
            {
                return Err(SessionError::Sample {
                    id: id.to_string(),
                    from: samples.join(id),
                    to: sessions_dir(&self.data),
                });
            }
            if !id.contains('/') && !id.contains("..") && !id.is_empty() && dir.is_dir() {
                return Err(no_journal(&dir));
            }
            return Err(SessionError::NotFound(id.to_string()));
        }
        Ok(dir)
    }

    /// The id of the data dir's session `what` names: an id as it is, or the path of a folder or a
    /// journal of one of the data dir's sessions as its folder's name. A session elsewhere is
    /// refused: what writes to a session writes to the data dir's.
    pub fn own_id(&self, what: &str) -> Result<String, SessionError> {
        let sessions = sessions_dir(&self.data);
        // An id (or a name in the sessions folder, a link there included) as it is.
        if !what.is_empty() && Path::new(what).components().count() == 1 && sessions.join(what).join("journal.jsonl").is_file() {
            return Ok(what.to_string());
        }
        let Ok(dir) = self.find(what) else {
            // Not a path either: said as the id it was taken for.
            return self.own(what).map(|_| what.to_string());
        };
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        let canonical = |p: &Path| std::fs::canonicalize(p).ok();
        let root = canonical(&sessions);
        let entry = dir.file_name().filter(|_| dir.parent().and_then(canonical) == root && root.is_some());
        let resolved = canonical(&dir);
        let name = match (entry, &resolved) {
            // The folder's entry is in the sessions folder (it may be a link to elsewhere).
            (Some(name), _) => Some(name.to_string_lossy().into_owned()),
            // A path (a link, `.`, `./`) that resolves to one of the sessions.
            (None, Some(r)) if r.parent().map(Path::to_path_buf) == root => {
                r.file_name().map(|n| n.to_string_lossy().into_owned())
            }
            _ => None,
        };
        match name {
            Some(name) => Ok(name),
            None if self.is_sample(&dir) || resolved.as_deref().is_some_and(|r| self.is_sample(r)) => {
                Err(SessionError::Sample {
                    id: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                    from: dir.clone(),
                    to: sessions,
                })
            }
            None => Err(SessionError::NotOwn { path: dir.clone(), sessions }),
        }
    }

    /// A session folder from an id (the data dir's first, since a copied sample may be annotated
    /// there, then a sample's), a folder or a journal path.
    pub fn find(&self, what: &str) -> Result<PathBuf, SessionError> {
        let p = Path::new(what);
        if p.is_file() {
            // A session's journal names its folder; any other file is a mistake, said as such (its
            // folder may hold no session, or another one).
            if p.file_name().is_none_or(|n| n != "journal.jsonl") {
                return Err(SessionError::NotAJournal(p.to_path_buf()));
            }
            return p
                .parent()
                .map(Path::to_path_buf)
                .ok_or_else(|| SessionError::NotFound(what.to_string()));
        }
        if p.join("journal.jsonl").is_file() {
            return Ok(p.to_path_buf());
        }
        // A folder given by its path (not an id) that holds no journal.
        if p.components().count() > 1 && p.is_dir() {
            return Err(no_journal(p));
        }
        self.own(what).or_else(|e| match &self.samples {
            Some(samples) if !what.contains("..") && samples.join(what).join("journal.jsonl").is_file() => {
                Ok(samples.join(what))
            }
            _ => Err(e),
        })
    }

    /// Whether `session` is one of the (read-only) samples.
    pub fn is_sample(&self, session: &Path) -> bool {
        self.samples.as_deref().is_some_and(|s| session.starts_with(s))
    }

    /// A session's records: an empty journal is not a session, and a record out of its scale's
    /// range is an error naming its line (when the store has a catalog).
    pub fn load(&self, dir: &Path) -> Result<Vec<Event>, SessionError> {
        let path = dir.join("journal.jsonl");
        let records = journal::read_numbered::<Event>(&path)?;
        if records.is_empty() {
            return Err(SessionError::Empty(path));
        }
        if let Some(catalog) = &self.catalog {
            crate::study::check_records(&records, catalog).map_err(|(line, message)| SessionError::Invalid {
                path,
                line,
                message,
            })?;
        }
        Ok(records.into_iter().map(|(_, e)| e).collect())
    }

    /// A session's JSON export (what `export --format json` prints and `results.json` holds), by the
    /// kind of study its journal is of.
    pub fn export(&self, dir: &Path, catalog: &Catalog) -> Result<serde_json::Value, SessionError> {
        Ok(crate::study::export_in(dir, crate::study::export_any(&self.load(dir)?, catalog)))
    }

    /// The data dir's sessions, then the samples, each oldest first.
    pub fn list(&self) -> Vec<SessionEntry> {
        self.list_with_unreadable().0
    }

    /// [`Store::list`], and the session folders it leaves out (the data dir's and the samples'),
    /// with why (a journal that is missing, empty, or has no first record to read).
    pub fn list_with_unreadable(&self) -> (Vec<SessionEntry>, Vec<(PathBuf, String)>) {
        let (mut out, mut unreadable) = list_in(&sessions_dir(&self.data), false);
        if let Some(samples) = &self.samples {
            let (listed, left_out) = list_in(samples, true);
            out.extend(listed);
            unreadable.extend(left_out);
        }
        (out, unreadable)
    }

    /// The interview sessions that hold the interviews that go by `interviews` (a session's folder
    /// name or the id its journal was started under): that session, its copies, and every
    /// re-assessment of it by that id ([`crate::analysis::judges::holds_interviews`]), in list order
    /// with their records (a session in both the data dir and the samples once, the data dir's).
    pub fn sharing_interviews(&self, interviews: &str) -> Vec<(SessionEntry, Vec<Event>)> {
        let mut out: Vec<(SessionEntry, Vec<Event>)> = Vec::new();
        for entry in self.list() {
            if out.iter().any(|(e, _)| e.id == entry.id) {
                continue;
            }
            let Ok(events) = self.load(&entry.path) else { continue };
            if crate::analysis::judges::holds_interviews(&entry.id, &events, interviews) {
                out.push((entry, events));
            }
        }
        out
    }

    /// Where a session's export is written: `export.json` in its folder, or for a sample
    /// `<data dir>/exports/<id>.json`.
    pub fn export_target(&self, session: &Path) -> PathBuf {
        let id = session
            .file_name()
            .map_or_else(|| "session".into(), |n| n.to_string_lossy().into_owned());
        if self.is_sample(session) {
            self.data.join("exports").join(format!("{id}.json"))
        } else {
            session.join("export.json")
        }
    }

    /// The interview sample a demo replays: the newest (ids begin with the time they were started),
    /// so the tour shows the latest recording, made with the most capable model the samples have.
    pub fn demo_session(&self) -> Option<PathBuf> {
        self.newest_sample(Kind::Interviews)
    }

    /// The observer session the demo's last step opens: the newest observer sample.
    pub fn observer_sample(&self) -> Option<PathBuf> {
        self.newest_sample(Kind::Observers)
    }

    fn newest_sample(&self, kind: Kind) -> Option<PathBuf> {
        samples_of(self.samples.as_deref()?)
            .into_iter()
            .rfind(|(_, events)| kind_of(events) == Some(kind))
            .map(|(dir, _)| dir)
    }
}

/// The sample folders in id order, with the events of each readable journal.
fn samples_of(samples: &Path) -> Vec<(PathBuf, Vec<Event>)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(samples)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .filter_map(|dir| Some((dir.clone(), journal::read::<Event>(&dir.join("journal.jsonl")).ok()?)))
        .collect()
}

/// Why a folder of this name cannot be a session's, if it cannot: its name is the session's id, and
/// one that is not UTF-8, or that holds characters a terminal acts on, can be neither typed nor shown.
fn unnameable(name: &std::ffi::OsStr) -> Option<String> {
    let Some(name) = name.to_str() else {
        return Some("its name is not UTF-8, so no command can name the session: rename the folder".into());
    };
    name.chars().any(crate::text::acts_on_terminal).then(|| {
        "its name holds characters a terminal acts on (shown escaped), so no command can name the session: rename \
         the folder"
            .to_string()
    })
}

/// The sessions in `dir`, and its folders that hold none that can be read, with why.
fn list_in(dir: &Path, sample: bool) -> (Vec<SessionEntry>, Vec<(PathBuf, String)>) {
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    // No folder yet lists nothing; a folder that cannot be read (or a file in its place) is said.
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => Some(entries),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) if dir.exists() && !dir.is_dir() => {
            unreadable.push((dir.to_path_buf(), "it is a file, not a folder: no session in it can be listed".into()));
            None
        }
        Err(e) => {
            unreadable.push((dir.to_path_buf(), format!("it cannot be read: {e}")));
            None
        }
    };
    for entry in entries.into_iter().flatten().flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let journal_file = path.join("journal.jsonl");
        // A folder that cannot be searched (no permission) hides whether it holds a journal: said as
        // such, not as a folder without one.
        match std::fs::symlink_metadata(&journal_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                unreadable.push((path, format!("it cannot be read: {e}")));
                continue;
            }
            _ => {}
        }
        if !journal_file.exists() {
            // A run killed as it began, an hour ago or more, leaves a folder with nothing recorded.
            if !sample && crate::files::remove_abandoned_folder(&path) {
                continue;
            }
            unreadable.push((path, "it holds no journal.jsonl".into()));
            continue;
        }
        // A session goes by its folder's name: one no command can be given is not a session's.
        if let Some(why) = unnameable(&entry.file_name()) {
            unreadable.push((path, why));
            continue;
        }
        let timed = match journal::read_timed::<Event>(&journal_file) {
            Ok(timed) => timed,
            Err(e) => {
                unreadable.push((path, e.to_string()));
                continue;
            }
        };
        // Two sessions can start within the same second: the first line's milliseconds order them.
        let started_ms = timed.first().and_then(|(ts, _)| *ts);
        let events: Vec<Event> = timed.into_iter().map(|(_, e)| e).collect();
        let Some(start) = events.iter().find_map(Event::start) else {
            // Earlier versions made the journal before writing its first record: a kill between
            // the two left it empty, a session with nothing in it.
            let why = if events.is_empty() {
                "its journal is empty (a run stopped as it began: nothing was recorded; remove the folder)"
            } else {
                "its journal holds no first record"
            };
            unreadable.push((path, why.into()));
            continue;
        };
        // A session no one finished is running while its writer lives, else interrupted.
        // (A resume that was stopped leaves it unfinished, whatever an earlier sitting ended with.)
        let status = events
            .iter()
            .rev()
            .take_while(|e| !matches!(e, Event::Resumed { .. }))
            .find_map(|e| match e {
                Event::RunFinished { status, .. } if crate::study::failures_any(&events).any() => {
                    Some(format!("{status} with failures"))
                }
                Event::RunFinished { status, .. } => Some(status.clone()),
                // Unless a writer has it again (a resume going on).
                Event::Stopped { .. } if journal::writer(&path.join("journal.jsonl")).is_none() => {
                    Some(STOPPED_AT_CAP.into())
                }
                _ => None,
            })
            .unwrap_or_else(|| match journal::writer(&path.join("journal.jsonl")) {
                Some(_) => "running".into(),
                None => "interrupted".into(),
            });
        let model = crate::study::models_phrase(start.providers);
        found.push((
            started_ms,
            SessionEntry {
                // The folder's name: the id every command finds it by (a copied folder keeps the
                // id its journal was started under).
                id: path
                    .file_name()
                    .map_or_else(|| start.session.to_string(), |n| n.to_string_lossy().into_owned()),
                name: start.name.clone(),
                created: start.created.to_string(),
                status,
                model,
                models: start.providers.clone(),
                path,
                sample,
            },
        ));
    }
    found.sort_by(|(ms_a, a), (ms_b, b)| a.created.cmp(&b.created).then(ms_a.cmp(ms_b)).then(a.id.cmp(&b.id)));
    unreadable.sort();
    (found.into_iter().map(|(_, e)| e).collect(), unreadable)
}

/// Each character's versions, by id: every version the data dir's sessions recorded (oldest first, by
/// the first session that recorded it) with the sessions that recorded it, in creation order.
pub type CharacterVersions = BTreeMap<String, Vec<(String, Vec<String>)>>;

/// The versions index of the data dir's sessions ([`CharacterVersions`]). Cheap: it reads only each
/// journal's first record (a resume that met an edited character is not counted).
pub fn character_versions(data_dir: &Path) -> CharacterVersions {
    let mut starts = Vec::new();
    for entry in std::fs::read_dir(sessions_dir(data_dir))
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(Some((ms, first))) = journal::read_first::<Event>(&entry.path().join("journal.jsonl")) else {
            continue;
        };
        if let Some(start) = first.start() {
            starts.push((
                start.created.to_string(),
                ms,
                start.session.to_string(),
                start.character_versions.clone(),
            ));
        }
    }
    starts.sort();
    let mut index = CharacterVersions::new();
    for (_, _, session, versions) in starts {
        for (character, version) in versions {
            let list = index.entry(character).or_default();
            match list.iter_mut().find(|(v, _)| *v == version) {
                Some((_, sessions)) => sessions.push(session.clone()),
                None => list.push((version, vec![session.clone()])),
            }
        }
    }
    index
}

/// The sample sessions this build knows (see the module's paragraph).
pub fn samples_dir() -> Option<PathBuf> {
    if let Some(dir) = samples_outside() {
        return dir.is_dir().then_some(dir);
    }
    static UNPACKED: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    UNPACKED
        .get_or_init(|| {
            let root = crate::paths::data_dir()?.join("samples");
            unpack_samples(&root)
                .inspect_err(|e| tracing::warn!("cannot unpack the sample sessions into {}: {e}", root.display()))
                .ok()
        })
        .clone()
}

/// The sample sessions' folder when it is not the data dir's own `samples`: `$INCHARACTER_SAMPLES`,
/// else the checkout's `sample-sessions` if there is one.
fn samples_outside() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("INCHARACTER_SAMPLES") {
        return Some(PathBuf::from(dir));
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions");
    checkout.is_dir().then_some(checkout)
}

/// The folders whose files an output the user names never replaces: the data dir's own folders
/// and the sample sessions'.
pub fn kept() -> crate::files::Kept {
    crate::files::Kept {
        data_dir: crate::paths::data_dir(),
        config: crate::paths::config_file(),
        samples: samples_outside(),
        prompt_set: false,
    }
}

/// Writes the built-in samples under `root`, in a folder named by their content hash (an upgrade gets
/// a new folder, never a mix), completed by a rename so a reader never sees half of it.
fn unpack_samples(root: &Path) -> std::io::Result<PathBuf> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for (name, bytes) in crate::catalog::bundled::SAMPLES {
        hasher.update(name.as_bytes());
        hasher.update(bytes);
    }
    let hash: String = hasher.finalize()[..6].iter().map(|b| format!("{b:02x}")).collect();
    let dir = root.join(&hash);
    if dir.is_dir() {
        return Ok(dir);
    }
    std::fs::create_dir_all(root)?;
    let staging = tempfile::tempdir_in(root)?;
    for (name, bytes) in crate::catalog::bundled::SAMPLES {
        let path = staging.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    match std::fs::rename(staging.keep(), &dir) {
        Ok(()) => Ok(dir),
        // Another process unpacked the same samples first.
        Err(_) if dir.is_dir() => Ok(dir),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions")
    }

    #[test]
    fn an_installed_binary_unpacks_the_samples_it_was_built_with() {
        let root = tempfile::tempdir().unwrap();
        let dir = unpack_samples(root.path()).unwrap();
        assert_eq!(unpack_samples(root.path()).unwrap(), dir, "once per build");
        let ids: Vec<String> = list_in(&dir, true).0.into_iter().map(|e| e.id).collect();
        assert_eq!(
            ids,
            list_in(&checkout(), true).0.into_iter().map(|e| e.id).collect::<Vec<_>>()
        );
        assert!(ids.len() >= 4, "{ids:?}");
        for id in &ids {
            assert_eq!(
                std::fs::read(dir.join(id).join("journal.jsonl")).unwrap(),
                std::fs::read(checkout().join(id).join("journal.jsonl")).unwrap()
            );
        }
    }

    #[test]
    fn exports_of_samples_go_to_the_data_dir_and_others_next_to_their_journal() {
        let data = Path::new("/data");
        let store = Store::with_samples(data, Some(checkout()));
        assert_eq!(
            store.export_target(&checkout().join("20261129-201520-gse-on-the-local-model-e700")),
            data.join("exports/20261129-201520-gse-on-the-local-model-e700.json")
        );
        let own = data.join("sessions/20261201-000000-x");
        assert_eq!(store.export_target(&own), own.join("export.json"));
    }

    #[test]
    fn sessions_started_in_the_same_second_are_listed_in_start_order() {
        let data = tempfile::tempdir().unwrap();
        // The later session has the id that sorts first.
        for (id, ms) in [("20261130-000000-zzzz", 1_000), ("20261130-000000-aaaa", 1_400)] {
            let dir = sessions_dir(data.path()).join(id);
            std::fs::create_dir_all(&dir).unwrap();
            let line = format!(
                r#"{{"event":"run_started","session":"{id}","name":null,"created":"2026-11-30T00:00:00Z","app_version":"0.1.0","plan":{{"characters":["hermione-en"],"scales":["GSE"],"methods":["er-batch"],"repeats":1,"rpa":"p","judge":"p","style":"description","seed":1,"max_attempts":5}},"providers":{{}},"ts_ms":{ms}}}"#
            );
            std::fs::write(dir.join("journal.jsonl"), line + "\n").unwrap();
        }
        let ids: Vec<String> = Store::with_samples(data.path(), None)
            .list()
            .into_iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, ["20261130-000000-zzzz", "20261130-000000-aaaa"]);
    }

    #[test]
    fn a_copied_session_is_listed_by_its_folder_and_unreadable_folders_are_named() {
        let data = tempfile::tempdir().unwrap();
        let sessions = sessions_dir(data.path());
        let copy = sessions.join("my-copy");
        std::fs::create_dir_all(&copy).unwrap();
        let source = checkout().join("20261129-201520-gse-on-the-local-model-e700/journal.jsonl");
        std::fs::copy(source, copy.join("journal.jsonl")).unwrap();
        std::fs::create_dir_all(sessions.join("empty")).unwrap();
        std::fs::write(sessions.join("empty/journal.jsonl"), "").unwrap();
        std::fs::create_dir_all(sessions.join("bare")).unwrap();
        // Names no command can be given: copies of the session under them are named, not listed.
        std::fs::create_dir_all(sessions.join("esc\u{1b}]0;t\u{7}x")).unwrap();
        std::fs::copy(copy.join("journal.jsonl"), sessions.join("esc\u{1b}]0;t\u{7}x/journal.jsonl")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let bytes = sessions.join(std::ffi::OsStr::from_bytes(b"not\xffutf"));
            std::fs::create_dir_all(&bytes).unwrap();
            std::fs::copy(copy.join("journal.jsonl"), bytes.join("journal.jsonl")).unwrap();
        }
        let store = Store::with_samples(data.path(), None);
        let (listed, unreadable) = store.list_with_unreadable();
        let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["my-copy"], "the id that finds it");
        assert_eq!(store.find("my-copy").unwrap(), copy);
        let why: Vec<(String, &str)> = unreadable
            .iter()
            .map(|(p, w)| (p.file_name().unwrap().to_string_lossy().into_owned(), w.as_str()))
            .collect();
        assert_eq!(
            why,
            [
                ("bare".to_string(), "it holds no journal.jsonl"),
                (
                    "empty".to_string(),
                    "its journal is empty (a run stopped as it began: nothing was recorded; remove the folder)"
                ),
                (
                    "esc\u{1b}]0;t\u{7}x".to_string(),
                    "its name holds characters a terminal acts on (shown escaped), so no command can name the session: rename the folder"
                ),
                #[cfg(unix)]
                (
                    "not\u{fffd}utf".to_string(),
                    "its name is not UTF-8, so no command can name the session: rename the folder"
                ),
            ]
        );
    }

    #[test]
    fn a_finished_session_with_failures_left_says_so_and_names_both_models() {
        let data = tempfile::tempdir().unwrap();
        let id = "20261130-000000-fail";
        let dir = sessions_dir(data.path()).join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let start = format!(
            r#"{{"event":"run_started","session":"{id}","name":null,"created":"2026-11-30T00:00:00Z","app_version":"0.1.0","plan":{{"characters":["hermione-en"],"scales":["GSE"],"methods":["er-batch"],"repeats":1,"rpa":"s","judge":"p","style":"description","seed":1,"max_attempts":5}},"providers":{{"rpa":{{"provider":"s","kind":"openai","model":"smollm2"}},"judge":{{"provider":"p","kind":"local","model":"smollm2-135m"}}}}}}"#
        );
        let item = |event: &str, tail: &str| {
            format!(
                r#"{{"event":"{event}","character":"hermione-en","scale":"GSE","repeat":0,"style":"open","item_id":1,{tail}}}"#
            )
        };
        let failed = item("item_failed", r#""error":"the server dropped the request""#);
        let answered = item("item_answered", r#""question":"q","response":"a""#);
        let finished = r#"{"event":"run_finished","status":"complete","at":"2026-11-30T00:01:00Z"}"#;
        let status = |lines: &[&str]| {
            std::fs::write(dir.join("journal.jsonl"), lines.join("\n") + "\n").unwrap();
            let list = Store::with_samples(data.path(), None).list();
            assert_eq!(list[0].model, "rpa smollm2 (openai) · judge smollm2-135m (local)");
            assert_eq!(list[0].models.len(), 2);
            list[0].status.clone()
        };
        assert_eq!(status(&[&start, &failed, finished]), "complete with failures");
        // An answer after the failure (a resume asked again) leaves nothing failed.
        assert_eq!(status(&[&start, &failed, &answered, finished]), "complete");
        assert_eq!(status(&[&start, &failed]), "interrupted");
        // A resume stopped before it finished leaves the session unfinished, whatever the sitting
        // before ended with.
        let resumed = r#"{"event":"resumed","at":"2026-11-30T00:02:00Z"}"#;
        assert_eq!(status(&[&start, &failed, finished, resumed, &answered]), "interrupted");
        assert_eq!(status(&[&start, &failed, finished, resumed, &answered, finished]), "complete");
    }

    /// A session started with `plan_extra` in its plan (e.g. its parent), with nothing after.
    fn started(data: &Path, id: &str, plan_extra: &str) {
        let dir = sessions_dir(data).join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let line = format!(
            r#"{{"event":"run_started","session":"{id}","name":null,"created":"2026-11-30T00:00:00Z","app_version":"0.1.0","plan":{{"characters":["hermione-en"],"scales":["GSE"],"methods":["er-batch"],"repeats":1,"rpa":"p","judge":"p","style":"description","seed":1,"max_attempts":5{plan_extra}}},"providers":{{}}}}"#
        );
        std::fs::write(dir.join("journal.jsonl"), line + "\n").unwrap();
    }

    #[test]
    fn the_sessions_sharing_interviews_are_a_session_and_its_re_assessments() {
        let data = tempfile::tempdir().unwrap();
        started(data.path(), "a-parent", "");
        started(data.path(), "b-again", r#","parent":"a-parent""#);
        started(data.path(), "c-again", r#","parent":"a-parent""#);
        started(data.path(), "d-other", r#","parent":"z-elsewhere""#);
        started(data.path(), "e-unrelated", "");
        let store = Store::with_samples(data.path(), None);
        let ids = |source: &str| -> Vec<String> {
            store
                .sharing_interviews(source)
                .into_iter()
                .map(|(e, _)| e.id)
                .collect()
        };
        assert_eq!(ids("a-parent"), ["a-parent", "b-again", "c-again"]);
        assert_eq!(ids("z-elsewhere"), ["d-other"], "a parent need not be in the store");
        assert_eq!(ids("e-unrelated"), ["e-unrelated"]);
        // A copy of a-parent's folder holds its interviews; a re-assessment of the copy, by the
        // copy's name, holds the copy's (and goes with it, not with the original).
        let copy = sessions_dir(data.path()).join("f-copy");
        std::fs::create_dir_all(&copy).unwrap();
        std::fs::copy(
            sessions_dir(data.path()).join("a-parent/journal.jsonl"),
            copy.join("journal.jsonl"),
        )
        .unwrap();
        started(data.path(), "g-of-the-copy", r#","parent":"f-copy""#);
        assert_eq!(ids("a-parent"), ["a-parent", "b-again", "c-again", "f-copy"]);
        assert_eq!(ids("f-copy"), ["f-copy", "g-of-the-copy"]);
    }

    #[test]
    fn the_versions_index_groups_sessions_by_version_in_creation_order() {
        let data = tempfile::tempdir().unwrap();
        // (id, created, versions): ids sort otherwise than creation.
        let sessions = [
            ("s-3", "2026-11-30T00:00:03Z", r#"{"anna":"v2","bo":"w1"}"#),
            ("s-1", "2026-11-30T00:00:01Z", r#"{"anna":"v1"}"#),
            ("s-2", "2026-11-30T00:00:02Z", r#"{"anna":"v2"}"#),
            ("s-4", "2026-11-30T00:00:04Z", r#"{"anna":"v1"}"#),
            ("s-0", "2026-11-30T00:00:00Z", "{}"),
        ];
        for (id, created, versions) in sessions {
            let dir = sessions_dir(data.path()).join(id);
            std::fs::create_dir_all(&dir).unwrap();
            let first = format!(
                r#"{{"event":"run_started","session":"{id}","name":null,"created":"{created}","app_version":"0.1.0","character_versions":{versions},"plan":{{"characters":["anna"],"scales":["GSE"],"methods":["er-batch"],"repeats":1,"rpa":"p","judge":"p","style":"description","seed":1,"max_attempts":5}},"providers":{{}}}}"#
            );
            // Only the first record is read: a damaged line after it does not matter.
            std::fs::write(dir.join("journal.jsonl"), first + "\n{damaged\n{}\n").unwrap();
        }
        let index = character_versions(data.path());
        let of = |c: &str| -> Vec<(String, Vec<String>)> { index[c].clone() };
        let owned = |v: &str, s: &[&str]| (v.to_string(), s.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(of("anna"), [owned("v1", &["s-1", "s-4"]), owned("v2", &["s-2", "s-3"])]);
        assert_eq!(of("bo"), [owned("w1", &["s-3"])]);
        assert_eq!(index.len(), 2);
        assert!(character_versions(&data.path().join("nowhere")).is_empty());
    }

    #[test]
    fn the_demo_replays_the_newest_interview_sample_and_ends_on_the_newest_observer_sample() {
        let store = Store::with_samples(Path::new("/nonexistent"), Some(checkout()));
        let samples = samples_of(&checkout());
        for (found, kind) in [
            (store.demo_session().unwrap(), Kind::Interviews),
            (store.observer_sample().unwrap(), Kind::Observers),
        ] {
            assert_eq!(kind_of(&store.load(&found).unwrap()), Some(kind));
            let others = samples.iter().filter(|(dir, events)| kind_of(events) == Some(kind) && *dir != found);
            assert!(others.into_iter().all(|(dir, _)| dir < &found), "{found:?} is the newest {kind:?} sample");
        }
        assert!(matches!(store.find("../etc"), Err(SessionError::NotFound(_))));
    }

    /// A session folder whose journal is a folder, or missing, says so, by id or by path.
    #[test]
    fn a_folder_without_a_journal_says_why_it_is_no_session() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::with_samples(data.path(), None);
        let sessions = sessions_dir(data.path());
        std::fs::create_dir_all(sessions.join("a").join("journal.jsonl")).unwrap();
        std::fs::create_dir_all(sessions.join("b")).unwrap();
        for (what, why) in [
            ("a".to_string(), "its journal.jsonl is a folder"),
            ("b".to_string(), "it has no journal.jsonl"),
            (sessions.join("a").display().to_string(), "its journal.jsonl is a folder"),
        ] {
            let e = store.find(&what).unwrap_err();
            assert!(matches!(e, SessionError::NoJournal { .. }), "{what}: {e}");
            assert!(e.to_string().ends_with(&format!("no session, {why}")), "{e}");
        }
        assert!(matches!(store.find("c"), Err(SessionError::NotFound(_))));
    }
}
