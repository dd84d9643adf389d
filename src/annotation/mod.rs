//! Human annotation of the interviewer (the InCharacter paper's Tables 1, 5 and 7). Two tasks built from
//! a session: per interview item, the option a human reads in the answer (compared with OC and d-OC);
//! per dimension, the score a human gives from all its exchanges (compared with ER_batch and ER_all).
//! Annotations are stored per annotator in `<session>/annotations/<name>.jsonl`, appended and flushed
//! per answer; the latest record of a case wins. Agreement: Pearson, Spearman, Kendall τ-b and the
//! paper's right / close / wrong (|Δ| < 1, = 1, > 1) with accuracy = (right + close / 2) / n, overall
//! and per dimension; between annotators, quadratic-weighted kappa per scale and on average.
//! Observer sessions have a third task, the multi-observer paper's validation: [`subjects`].
//! It reads sessions' records (`study`), which never reads it; the faces and `figures` read it.

pub mod subjects;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::domain::scoring::{ItemOption, reverse};
use crate::domain::stats;
use crate::fault::{Classify, Fault};
use crate::journal::{self, Journal, JournalError};
use crate::method::interview::QueryStyle;
use crate::method::{Assessment, Method};
use crate::study::Event;

/// Why an annotation could not be kept or read.
#[derive(Debug, thiserror::Error)]
pub enum AnnotationError {
    #[error("annotator {0:?}: {1}")]
    Annotator(String, &'static str),
    #[error("cannot write {}: {source}", path.display())]
    Unwritable { path: PathBuf, source: std::io::Error },
    /// A write that failed once an import had begun (a full disk): what it had written is taken back
    /// (`written` 0), or, if that failed too, said.
    #[error(
        "cannot write {}: {source}; {}",
        path.display(),
        match written {
            0 => format!("nothing of the {total} annotations was imported"),
            n => format!(
                "{n} of {total} annotations were written before it and could not be taken back (importing the \
                 file again once that is fixed is safe: each annotator's latest answer per case counts)"
            ),
        }
    )]
    Stopped {
        path: PathBuf,
        source: std::io::Error,
        written: usize,
        total: usize,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    File(#[from] crate::files::FileError),
    /// An import that would make an annotator's file larger than it may be read back.
    #[error(
        "{}: the import would make it {} (it holds {} now), more than the {} an annotator's answers may hold; \
         nothing was imported (each annotator's latest answer per case counts: import only the rows that changed)",
        path.display(),
        crate::files::size(*after),
        crate::files::size(*before),
        crate::files::size(MAX_FILE_BYTES)
    )]
    TooLarge { path: PathBuf, before: u64, after: u64 },
}

impl Classify for AnnotationError {
    /// The user's input (a bad name, a file damaged by hand) or the machine.
    fn fault(&self) -> Fault {
        let input = match self {
            AnnotationError::File(e) => e.is_input(),
            e => matches!(
                e,
                AnnotationError::Annotator(..)
                    | AnnotationError::Journal(JournalError::Damaged { .. })
                    | AnnotationError::TooLarge { .. }
            ),
        };
        if input { Fault::Input } else { Fault::Machine }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    Item,
    Dimension,
    /// An observer session's subject, rated per Big Five trait from its dialogues.
    Subject,
}

impl Task {
    pub fn parse(s: &str) -> Option<Task> {
        match s.trim() {
            "item" => Some(Task::Item),
            "dimension" => Some(Task::Dimension),
            "subject" => Some(Task::Subject),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Task::Item => "item",
            Task::Dimension => "dimension",
            Task::Subject => "subject",
        }
    }
}

/// One case: an item of an interview, a dimension of a (character, scale, repeat), or a trait of an
/// observer session's subject (`character` is the subject's id, `scale` IPIP-50, `dimension` the trait).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Case {
    pub task: Task,
    pub character: String,
    pub scale: String,
    #[serde(default)]
    pub repeat: u32,
    pub dimension: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<u32>,
    /// A subject rated as one observer saw it (the per-observer toggle), not from all its dialogues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observer: Option<String>,
}

/// A human's answer: a number, or "x" (refuses / unrelated).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    Value(f64),
    Refused(Refusal),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Refusal {
    #[serde(rename = "x")]
    X,
}

impl Answer {
    pub fn parse(s: &str) -> Option<Answer> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("x") {
            return Some(Answer::Refused(Refusal::X));
        }
        t.parse::<f64>().ok().filter(|v| v.is_finite()).map(Answer::Value)
    }

    pub fn value(self) -> Option<f64> {
        match self {
            Answer::Value(v) => Some(v),
            Answer::Refused(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Annotation {
    pub annotator: String,
    #[serde(flatten)]
    pub case: Case,
    pub value: Answer,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub at: String,
}

/// What keeps `name` from naming an annotator (and its file, `<name>.jsonl`), if anything.
pub fn annotator_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("a name is needed")
    } else if name.len() > 64 {
        Some("64 bytes at most")
    } else if !name.chars().all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '.') {
        Some("letters, digits, '-', '_' and '.' only")
    } else if name.starts_with('.') {
        Some("not beginning with '.' (the file would be hidden, or a folder's)")
    } else {
        None
    }
}

/// The largest annotator's file read: some 300,000 answers, far more than a person gives, far less
/// than would exhaust memory.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

pub fn dir(session: &Path) -> PathBuf {
    session.join("annotations")
}

/// Appends one annotation to its annotator's file (flushed before returning).
pub fn append(session: &Path, a: &Annotation) -> Result<(), AnnotationError> {
    let (path, mut journal) = open_file(session, &a.annotator)?;
    journal.append(a).map_err(|source| AnnotationError::Unwritable { path, source })
}

/// The annotator's file, opened (made if new) and locked for appending.
fn open_file(session: &Path, annotator: &str) -> Result<(PathBuf, Journal), AnnotationError> {
    let path = writable(session, annotator)?;
    match Journal::open(&path) {
        Ok(journal) => Ok((path, journal)),
        Err(source) => Err(AnnotationError::Unwritable { path, source }),
    }
}

/// Where the annotator's file is, if it can be one: a link in its place is not followed (the answers
/// would go to the file it points to); a FIFO or a device would block or swallow them.
fn writable(session: &Path, annotator: &str) -> Result<PathBuf, AnnotationError> {
    if let Some(problem) = annotator_problem(annotator) {
        return Err(AnnotationError::Annotator(annotator.to_string(), problem));
    }
    let path = dir(session).join(format!("{annotator}.jsonl"));
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(crate::files::FileError::Symlink(path).into()),
        Ok(meta) if !meta.is_file() => Err(crate::files::FileError::NotAFileToWrite(path).into()),
        _ => Ok(path),
    }
}

/// Appends an import's `annotations` to their annotators' files, all or none. Every file is opened
/// (made if new) and locked first, in the order of the annotators' names (two imports at once wait
/// for each other, never for ever): one that cannot be written (its permissions, a link or a FIFO in
/// its place) stops the import before anything is written. A write that fails after that (a full
/// disk, a file size limit) takes back what the import had appended to every file, still locked,
/// and removes the files it made ([`AnnotationError::Stopped`]).
///
/// While it writes, a note of the import stands in the annotations folder (who writes, from which
/// file): one whose process is gone tells that a kill stopped an import part way
/// ([`stopped_imports`]); it goes once an import ends.
pub fn append_all(session: &Path, from: &Path, annotations: &[Annotation]) -> Result<(), AnnotationError> {
    let annotators: std::collections::BTreeSet<&str> = annotations.iter().map(|a| a.annotator.as_str()).collect();
    // What can be told without making anything, first.
    for annotator in &annotators {
        writable(session, annotator)?;
    }
    // Each file with its length before, and whether this import made it (then removed if it stops:
    // a writer waiting for its lock opens the path again, see `Journal::open`).
    let mut files: BTreeMap<&str, (PathBuf, Journal, u64, bool)> = BTreeMap::new();
    let undo = |files: &mut BTreeMap<&str, (PathBuf, Journal, u64, bool)>| {
        files.values_mut().all(|(path, journal, len, made)| match made {
            true => std::fs::remove_file(&*path).is_ok(),
            false => journal.truncate(*len).is_ok(),
        })
    };
    for annotator in annotators {
        let opened = made_if_new(session, annotator).and_then(|made| {
            let (path, journal) = open_file(session, annotator)?;
            let len = journal
                .size()
                .map_err(|source| AnnotationError::Unwritable { path: path.clone(), source })?;
            Ok((path, journal, len, made))
        });
        match opened {
            Ok(file) => {
                files.insert(annotator, file);
            }
            Err(e) => {
                undo(&mut files);
                return Err(e);
            }
        }
    }
    // What the files will hold, before anything is written: a file past what is read back would
    // leave every annotator of the session unreadable.
    let mut adding: BTreeMap<&str, u64> = BTreeMap::new();
    for a in annotations {
        let line = Journal::line(a).map_or(u64::MAX / 4, |l| l.len() as u64);
        *adding.entry(a.annotator.as_str()).or_default() += line;
    }
    for (annotator, added) in adding {
        if let Some((path, _, before, _)) = files.get(annotator)
            && before + added > MAX_FILE_BYTES
        {
            let (path, before) = (path.clone(), *before);
            undo(&mut files);
            return Err(AnnotationError::TooLarge {
                path,
                before,
                after: before + added,
            });
        }
    }
    let note = importing(session, std::process::id());
    let said = ImportNote {
        writer: crate::journal::Writer::me(),
        from: from.display().to_string(),
    };
    if let Err(source) = serde_json::to_vec(&said)
        .map_err(std::io::Error::other)
        .and_then(|bytes| crate::files::write_atomic(&note, &bytes).map_err(std::io::Error::other))
    {
        undo(&mut files);
        return Err(AnnotationError::Unwritable { path: note, source });
    }
    for (written, a) in annotations.iter().enumerate() {
        let Some((path, journal, ..)) = files.get_mut(a.annotator.as_str()) else {
            continue;
        };
        if let Err(source) = journal.append(a) {
            let path = path.clone();
            let kept = undo(&mut files);
            let _ = std::fs::remove_file(&note);
            return Err(AnnotationError::Stopped {
                path,
                source,
                written: if kept { 0 } else { written },
                total: annotations.len(),
            });
        }
    }
    let _ = std::fs::remove_file(&note);
    forget_stopped_imports(session, &said.from);
    Ok(())
}

/// An import's note while it writes (see [`append_all`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct ImportNote {
    #[serde(flatten)]
    writer: crate::journal::Writer,
    from: String,
}

/// The note of an import by process `pid` into `session`.
fn importing(session: &Path, pid: u32) -> PathBuf {
    dir(session).join(format!(".importing-{pid}.json"))
}

/// The notes of the imports into `session` whose processes are gone: imports a kill stopped part way.
fn stopped_notes(session: &Path) -> Vec<(PathBuf, ImportNote)> {
    let Ok(entries) = std::fs::read_dir(dir(session)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".importing-"))
        .filter_map(|e| {
            let text = crate::files::read_text_limited(&e.path(), 64 * 1024, "an import's note").ok()?;
            Some((e.path(), serde_json::from_str::<ImportNote>(&text).ok()?))
        })
        .filter(|(_, n)| !n.writer.alive())
        .collect()
}

/// The files of the imports into `session` that a kill stopped part way: importing such a file again
/// completes it, each annotator's latest answer per case counting.
pub fn stopped_imports(session: &Path) -> Vec<String> {
    let mut out: Vec<String> = stopped_notes(session).into_iter().map(|(_, n)| n.from).collect();
    out.sort();
    out
}

/// Removes the notes of stopped imports of the file `from`: importing it whole has completed them.
fn forget_stopped_imports(session: &Path, from: &str) {
    for (path, note) in stopped_notes(session) {
        if note.from == from {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Makes the annotator's file if there is none; whether this call made it (one another process made
/// meanwhile is not).
fn made_if_new(session: &Path, annotator: &str) -> Result<bool, AnnotationError> {
    let path = writable(session, annotator)?;
    let unwritable = |source| AnnotationError::Unwritable { path: path.clone(), source };
    std::fs::create_dir_all(dir(session)).map_err(unwritable)?;
    match std::fs::File::options().write(true).create_new(true).open(&path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(unwritable(e)),
    }
}

/// The values an answer to `case` may take: the scale's options (an item), its dimension scores (a
/// dimension), the subject ratings' (a subject); `None` for a scale the catalog does not have.
pub fn value_range(catalog: &Catalog, case: &Case) -> Option<(f64, f64)> {
    match case.task {
        Task::Item => catalog
            .scale(&case.scale)
            .map(|s| (f64::from(s.range.min), f64::from(s.range.max))),
        Task::Dimension => catalog.scale(&case.scale).map(|s| s.dimension_range()),
        Task::Subject => Some(subjects::RANGE),
    }
}

/// Every annotator's latest answer per case. What is loaded is checked: a value outside what its
/// case may take (a file edited by hand) is refused where it stands.
pub fn load(session: &Path, catalog: &Catalog) -> Result<BTreeMap<String, BTreeMap<Case, Annotation>>, AnnotationError> {
    let mut out: BTreeMap<String, BTreeMap<Case, Annotation>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir(session)) else {
        return Ok(out);
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    for f in files {
        crate::files::check_readable(&f, MAX_FILE_BYTES, "an annotator's answers")?;
        // The file is its annotator's: a record of another (edited in by hand) would be counted as
        // someone no file names.
        let owner = f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        for (line, a) in journal::read_numbered::<Annotation>(&f)? {
            if let (Some(v), Some((min, max))) = (a.value.value(), value_range(catalog, &a.case))
                && !(min..=max).contains(&v)
            {
                return Err(outside(&f, line, "value", format!("value {v} is outside [{min}, {max}]")));
            }
            // (A file system that ignores case holds "Ann" and "ann" in one file.)
            if a.annotator.to_lowercase() != owner.to_lowercase() {
                return Err(outside(
                    &f,
                    line,
                    "annotator",
                    format!(
                        "annotator {:?} in the file of {:?}: each annotator's answers are in their own file",
                        crate::text::visible(&a.annotator),
                        crate::text::visible(&owner)
                    ),
                ));
            }
            out.entry(a.annotator.clone()).or_default().insert(a.case.clone(), a);
        }
    }
    Ok(out)
}

/// An answer refused at line `line` of `file`, located at its field `key`.
fn outside(file: &Path, line: usize, key: &str, message: String) -> AnnotationError {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let at = text.lines().nth(line - 1).unwrap_or_default();
    // A byte-order mark before the first record is a column of its own.
    let (at, marked) = at.strip_prefix('\u{feff}').map_or((at, 0), |rest| (rest, 1));
    let column = crate::domain::diagnostic::Source::new("", at)
        .json_at(&[key])
        .map_or(1, |(_, column)| column + marked);
    AnnotationError::Journal(JournalError::Damaged {
        path: file.to_path_buf(),
        line,
        column,
        message,
    })
}

/// The item case of an answered open-interview item (`None` for a filler or an unknown item).
pub fn item_case(
    catalog: &crate::catalog::Catalog,
    character: &str,
    scale: &str,
    repeat: u32,
    item_id: u32,
) -> Option<Case> {
    let s = catalog.scale(scale)?;
    let dimension = s.dimensions[s.item(item_id)?.dimension()?].name.clone();
    Some(Case {
        task: Task::Item,
        character: character.to_string(),
        scale: scale.to_string(),
        repeat,
        dimension,
        item_id: Some(item_id),
        observer: None,
    })
}

/// The dimension case an expert rating (ER_batch, ER_all) belongs to.
pub fn dimension_case(a: &Assessment) -> Option<Case> {
    matches!(a.method, Method::ErBatch | Method::ErAll).then(|| Case {
        task: Task::Dimension,
        character: a.character.clone(),
        scale: a.scale.clone(),
        repeat: a.repeat,
        dimension: a.dimension.clone(),
        item_id: None,
        observer: None,
    })
}

/// The cases of a session: an item case per answered open-interview item, a dimension case per
/// assessed (character, scale, repeat, dimension).
pub fn cases(events: &[Event], catalog: &crate::catalog::Catalog) -> Vec<Case> {
    let mut out = std::collections::BTreeSet::new();
    for e in events {
        let case = match e {
            Event::ItemAnswered {
                character,
                scale,
                repeat,
                style: QueryStyle::Open,
                item_id,
                ..
            } => item_case(catalog, character, scale, *repeat, *item_id),
            Event::DimensionAssessed(a) => dimension_case(a),
            _ => None,
        };
        out.extend(case);
    }
    out.into_iter().collect()
}

/// A seeded sample of `n` cases of `task`, stratified by dimension (round robin over dimensions in a
/// seeded order), or all of them.
pub fn sample(cases: &[Case], task: Task, n: Option<usize>, seed: u64) -> Vec<Case> {
    let mut by_dim: BTreeMap<(String, String), Vec<&Case>> = BTreeMap::new();
    for c in cases.iter().filter(|c| c.task == task) {
        by_dim
            .entry((c.scale.clone(), c.dimension.clone()))
            .or_default()
            .push(c);
    }
    let total: usize = by_dim.values().map(Vec::len).sum();
    let Some(n) = n.filter(|&n| n < total) else {
        return cases.iter().filter(|c| c.task == task).cloned().collect();
    };
    let mut rng = crate::domain::rng::SplitMix64(seed);
    let mut groups: Vec<Vec<&Case>> = by_dim.into_values().collect();
    for g in &mut groups {
        for i in (1..g.len()).rev() {
            g.swap(i, rng.below(i + 1));
        }
    }
    let mut out = Vec::new();
    let mut round = 0;
    while out.len() < n {
        for g in &groups {
            if let Some(c) = g.get(round)
                && out.len() < n
            {
                out.push((*c).clone());
            }
        }
        round += 1;
    }
    out.sort();
    out
}

/// What the interviewer said for a case under `method`: an item's option (OC, d-OC) or a dimension's
/// score (ER). `None` when the method did not judge it; refusals are `Answer::Refused`. An option is
/// on the options a person answers the item task on, agreement with the item's statement: a d-OC
/// option, which is in the dimension's direction, is turned back for an item keyed against it.
pub fn machine(assessments: &[&Assessment], case: &Case, method: Method, catalog: &Catalog) -> Option<Answer> {
    let a = assessments.iter().find(|a| {
        a.method == method
            && a.character == case.character
            && a.scale == case.scale
            && a.repeat == case.repeat
            && a.dimension == case.dimension
    })?;
    match (case.task, case.item_id) {
        (Task::Item, Some(id)) => match a.items.iter().find(|i| i.item_id == id)?.option? {
            ItemOption::Value(v) => {
                let scale = catalog.scale(&case.scale);
                let against = scale
                    .and_then(|s| s.item(id))
                    .and_then(|item| item.keying())
                    .is_some_and(|keying| !keying.is_positive());
                Some(Answer::Value(match scale {
                    Some(scale) if method == Method::DOc && against => reverse(scale.range, f64::from(v)),
                    _ => f64::from(v),
                }))
            }
            ItemOption::Refused => Some(Answer::Refused(Refusal::X)),
        },
        (Task::Dimension, _) => a.score.map(Answer::Value),
        _ => None,
    }
}

/// The task a method is compared on.
pub fn task_of(method: Method) -> Option<Task> {
    match method {
        Method::Oc | Method::DOc => Some(Task::Item),
        Method::ErBatch | Method::ErAll => Some(Task::Dimension),
        Method::Sr | Method::SrCot => None,
    }
}

/// Agreement of (human, machine) numeric pairs.
pub fn agreement(pairs: &[(f64, f64)]) -> Value {
    let (h, m): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let c = stats::closeness(&h, &m);
    json!({
        "n": pairs.len(),
        "pearson": stats::pearson(&h, &m),
        "spearman": stats::spearman(&h, &m),
        "kendall_tau_b": stats::kendall_tau_b(&h, &m),
        "right": c.map_or(0, |c| c.right),
        "close": c.map_or(0, |c| c.close),
        "wrong": c.map_or(0, |c| c.wrong),
        "accuracy": c.map(|c| c.accuracy),
    })
}

/// One annotator's cases of `method`'s task that both the annotator and the interviewer rated with a
/// number: (case, human, machine). Refusals on either side are left out.
pub fn rated<'a>(
    cases: &'a BTreeMap<Case, Annotation>,
    assessments: &[&Assessment],
    method: Method,
    catalog: &Catalog,
) -> Vec<(&'a Case, f64, f64)> {
    let Some(task) = task_of(method) else {
        return Vec::new();
    };
    cases
        .iter()
        .filter(|(c, _)| c.task == task)
        .filter_map(|(case, a)| {
            let h = a.value.value()?;
            let m = machine(assessments, case, method, catalog).and_then(Answer::value)?;
            Some((case, h, m))
        })
        .collect()
}

/// The `agreement --session` report for one method: per annotator overall and per dimension, and the
/// inter-annotator QWK on the method's task.
pub fn report(
    annotations: &BTreeMap<String, BTreeMap<Case, Annotation>>,
    assessments: &[&Assessment],
    method: Method,
    catalog: &Catalog,
) -> Value {
    let Some(task) = task_of(method) else {
        return json!({"method": method.name(), "error": "self-reports have no human annotation task"});
    };
    let mut annotators = serde_json::Map::new();
    for (name, cases) in annotations {
        let mut all = Vec::new();
        // By scale and dimension: scales share dimension names (BFI's and EPQ-R's Extraversion) on
        // ranges of their own.
        let mut by_dim: BTreeMap<(&str, &str), Vec<(f64, f64)>> = BTreeMap::new();
        let mut by_scale: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for (case, h, m) in rated(cases, assessments, method, catalog) {
            all.push((h, m));
            by_dim.entry((&case.scale, &case.dimension)).or_default().push((h, m));
            by_scale.entry(&case.scale).or_default().push((h, m));
        }
        let mut entry = agreement(&all);
        // Pooled over scales of other ranges (1–7 and 0–1), a correlation follows the scales' means
        // more than the ratings, and right/close/wrong is in each scale's own points: per scale too.
        entry["pooled_scales"] = json!(by_scale.len());
        entry["scales"] = Value::Array(
            by_scale
                .iter()
                .map(|(scale, p)| {
                    let mut row = json!({"scale": scale});
                    if let (Some(row), Value::Object(stats)) = (row.as_object_mut(), agreement(p)) {
                        row.extend(stats);
                    }
                    row
                })
                .collect(),
        );
        entry["dimensions"] = Value::Array(
            by_dim
                .iter()
                .map(|((scale, dimension), p)| {
                    let mut row = json!({"scale": scale, "dimension": dimension});
                    if let (Some(row), Value::Object(stats)) = (row.as_object_mut(), agreement(p)) {
                        row.extend(stats);
                    }
                    row
                })
                .collect(),
        );
        annotators.insert(name.clone(), entry);
    }
    json!({"method": method.name(), "task": task, "annotators": annotators, "inter_annotator": inter_annotator(annotations, task)})
}

/// Quadratic-weighted kappa for each pair of annotators on each scale (cases both answered with a
/// number, rounded to the nearest whole point as QWK compares categories), and the mean over those.
pub fn inter_annotator(annotations: &BTreeMap<String, BTreeMap<Case, Annotation>>, task: Task) -> Value {
    let names: Vec<&String> = annotations.keys().collect();
    let mut pairs = Vec::new();
    let mut values = Vec::new();
    for i in 0..names.len() {
        for j in i + 1..names.len() {
            let (a, b) = (&annotations[names[i]], &annotations[names[j]]);
            let mut by_scale: BTreeMap<String, (Vec<i64>, Vec<i64>)> = BTreeMap::new();
            for (case, x) in a.iter().filter(|(c, _)| c.task == task) {
                let Some(y) = b.get(case) else { continue };
                let (Some(x), Some(y)) = (x.value.value(), y.value.value()) else {
                    continue;
                };
                let e = by_scale.entry(case.scale.clone()).or_default();
                e.0.push(x.round() as i64);
                e.1.push(y.round() as i64);
            }
            for (scale, (x, y)) in by_scale {
                let qwk = stats::quadratic_weighted_kappa(&x, &y);
                values.extend(qwk);
                pairs.push(json!({"a": names[i], "b": names[j], "scale": scale, "n": x.len(), "qwk": qwk}));
            }
        }
    }
    let mean = (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
    json!({"qwk": mean, "pairs": pairs})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::convert::ConvertedItem;

    fn case(item: u32, dim: &str) -> Case {
        Case {
            task: Task::Item,
            character: "c".into(),
            scale: "BFI".into(),
            repeat: 0,
            dimension: dim.into(),
            item_id: Some(item),
            observer: None,
        }
    }

    /// An import's note stands while it writes and goes when it ends; one a killed import left (its
    /// process gone) is told, until the same file is imported again.
    #[test]
    fn an_import_a_kill_stopped_is_told_until_its_file_is_imported_again() {
        let dir = tempfile::tempdir().unwrap();
        let a = Annotation {
            annotator: "ann".into(),
            case: case(1, "Openness"),
            value: Answer::parse("2").unwrap(),
            note: None,
            at: String::new(),
        };
        let (csv, other) = (Path::new("/r/ratings.csv"), Path::new("/r/other.csv"));
        append_all(dir.path(), csv, std::slice::from_ref(&a)).unwrap();
        assert!(stopped_imports(dir.path()).is_empty(), "an import that ended leaves no note");
        // What a killed import leaves: its note, of a process that is gone.
        let gone = crate::journal::Writer {
            pid: u32::MAX,
            since: String::new(),
            process_start: Some(1),
        };
        let note = |from: &Path| ImportNote {
            writer: gone.clone(),
            from: from.display().to_string(),
        };
        for (pid, from) in [(1, csv), (2, other)] {
            let bytes = serde_json::to_vec(&note(from)).unwrap();
            std::fs::write(importing(dir.path(), pid), bytes).unwrap();
        }
        assert_eq!(stopped_imports(dir.path()), ["/r/other.csv", "/r/ratings.csv"]);
        append_all(dir.path(), csv, &[a]).unwrap();
        assert_eq!(stopped_imports(dir.path()), ["/r/other.csv"], "the same file again completes it");
        let catalog = Catalog::bundled().unwrap();
        assert_eq!(load(dir.path(), &catalog).unwrap()["ann"].len(), 1, "the note is no annotator");
    }

    #[test]
    fn a_refused_annotator_is_told_what_is_wrong_with_the_name() {
        for (name, problem) in [
            ("", "a name is needed"),
            (".", "not beginning with '.' (the file would be hidden, or a folder's)"),
            ("..", "not beginning with '.' (the file would be hidden, or a folder's)"),
            ("a/b", "letters, digits, '-', '_' and '.' only"),
            (&"x".repeat(65), "64 bytes at most"),
        ] {
            assert_eq!(annotator_problem(name), Some(problem), "{name:?}");
        }
        for name in ["ana", "rater-2.b", "Zoë_1"] {
            assert_eq!(annotator_problem(name), None, "{name}");
        }
    }

    /// An import that would take an annotator's file past what is read back writes nothing.
    #[test]
    fn an_import_past_what_an_annotators_file_may_hold_writes_nothing() {
        use std::io::{Seek, Write};
        let dir = tempfile::tempdir().unwrap();
        let a = |annotator: &str| Annotation {
            annotator: annotator.into(),
            case: case(1, "Openness"),
            value: Answer::parse("2").unwrap(),
            note: None,
            at: String::new(),
        };
        let full = super::dir(dir.path()).join("ann.jsonl");
        std::fs::create_dir_all(super::dir(dir.path())).unwrap();
        let mut f = std::fs::File::create(&full).unwrap();
        f.seek(std::io::SeekFrom::Start(MAX_FILE_BYTES - 100)).unwrap();
        f.write_all(b"\n").unwrap();
        drop(f);
        let e = append_all(dir.path(), Path::new("/r.csv"), &[a("bob"), a("ann")]).unwrap_err();
        assert!(matches!(e, AnnotationError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("nothing was imported"), "{e}");
        assert_eq!(std::fs::metadata(&full).unwrap().len(), MAX_FILE_BYTES - 99);
        assert!(!super::dir(dir.path()).join("bob.jsonl").exists(), "the file made for bob is taken back");
        assert!(stopped_imports(dir.path()).is_empty());
    }

    #[test]
    fn annotations_append_and_the_latest_answer_wins() {
        let dir = tempfile::tempdir().unwrap();
        let a = |v: &str| Annotation {
            annotator: "ann".into(),
            case: case(1, "Openness"),
            value: Answer::parse(v).unwrap(),
            note: None,
            at: String::new(),
        };
        append(dir.path(), &a("2")).unwrap();
        append(dir.path(), &a("x")).unwrap();
        let catalog = Catalog::bundled().unwrap();
        let loaded = load(dir.path(), &catalog).unwrap();
        assert_eq!(loaded["ann"][&case(1, "Openness")].value, Answer::Refused(Refusal::X));
        let text = std::fs::read_to_string(dir.path().join("annotations/ann.jsonl")).unwrap();
        assert!(text.contains("\"value\":\"x\"") && text.lines().count() == 2, "{text}");
        let mut bad = a("1");
        bad.annotator = "../x".into();
        assert!(append(dir.path(), &bad).is_err());
    }

    /// A file edited by hand is checked as it is loaded: a value its case cannot take is refused
    /// where it stands; a byte-order mark before the first answer is no damage.
    #[test]
    fn answers_edited_by_hand_are_checked_as_they_are_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::bundled().unwrap();
        let answer = |v: f64| Annotation {
            annotator: "evil".into(),
            case: case(1, "Openness"),
            value: Answer::Value(v),
            note: None,
            at: String::new(),
        };
        append(dir.path(), &answer(4.0)).unwrap();
        let file = super::dir(dir.path()).join("evil.jsonl");
        let good = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, format!("\u{feff}{good}")).unwrap();
        assert_eq!(load(dir.path(), &catalog).unwrap()["evil"][&case(1, "Openness")].value, Answer::Value(4.0));
        append(dir.path(), &answer(99.0)).unwrap();
        let e = load(dir.path(), &catalog).unwrap_err();
        let column = std::fs::read_to_string(&file).unwrap().lines().nth(1).unwrap().find("\"value\":").unwrap() + "\"value\":".len() + 1;
        assert!(e.is_input(), "{e}");
        assert!(
            e.to_string().contains(&format!("evil.jsonl:2:{column}: value 99 is outside [1, 5]")),
            "{e}"
        );
        // On the first line, after a byte-order mark, the column counts the mark too.
        let lines: Vec<String> = std::fs::read_to_string(&file).unwrap().lines().map(String::from).collect();
        std::fs::write(&file, format!("\u{feff}{}\n", lines[1])).unwrap();
        let e = load(dir.path(), &catalog).unwrap_err();
        assert!(e.to_string().contains(&format!("evil.jsonl:1:{}: value 99", column + 1)), "{e}");
        // Another annotator's record in this one's file: refused, at its name.
        let carol = serde_json::to_string(&Annotation {
            annotator: "carol".into(),
            ..answer(3.0)
        })
        .unwrap();
        std::fs::write(&file, format!("{good}{carol}\n")).unwrap();
        let e = load(dir.path(), &catalog).unwrap_err();
        assert!(e.to_string().contains("evil.jsonl:2:14: annotator \"carol\" in the file of \"evil\""), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_among_the_annotations_is_refused_not_read_or_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(super::dir(dir.path())).unwrap();
        let fifo = super::dir(dir.path()).join("ann.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let e = load(dir.path(), &Catalog::bundled().unwrap()).unwrap_err();
        assert!(
            e.is_input() && e.to_string().contains("ann.jsonl: not a regular file"),
            "{e}"
        );
        let a = Annotation {
            annotator: "ann".into(),
            case: case(1, "Openness"),
            value: Answer::Value(2.0),
            note: None,
            at: String::new(),
        };
        let e = append(dir.path(), &a).unwrap_err();
        assert!(e.is_input() && e.to_string().contains("not a regular file"), "{e}");
    }

    /// An assessment of Extraversion by `method` giving items 1 ("Is talkative.") and 6 ("Is
    /// reserved.", keyed against it) option 1.
    fn options_of_one(method: Method) -> Assessment {
        let item = |item_id| ConvertedItem {
            item_id,
            option: Some(ItemOption::Value(1)),
            score: None,
            refused: false,
            weighed: None,
            error: None,
        };
        Assessment {
            character: "c".into(),
            scale: "BFI".into(),
            method,
            repeat: 0,
            dimension: "Extraversion".into(),
            score: Some(1.0),
            batches: Vec::new(),
            calls: Vec::new(),
            items: vec![item(1), item(6)],
            failure: None,
            fitted: None,
            conversions: Vec::new(),
        }
    }

    #[test]
    fn a_d_oc_option_is_compared_on_the_statements_options() {
        let catalog = Catalog::load(None).unwrap();
        let (oc, d_oc) = (options_of_one(Method::Oc), options_of_one(Method::DOc));
        let assessments = [&oc, &d_oc];
        let given = |item, method| machine(&assessments, &case(item, "Extraversion"), method, &catalog);
        // d-OC's 1 is "strongly introverted": a 1 on "Is talkative.", a 5 on "Is reserved.".
        assert_eq!(given(1, Method::DOc), Some(Answer::Value(1.0)));
        assert_eq!(given(6, Method::DOc), Some(Answer::Value(5.0)));
        // OC's option already is agreement with the statement.
        assert_eq!(given(6, Method::Oc), Some(Answer::Value(1.0)));
        // A person who reads her as d-OC does agrees with it on both items.
        let mut mine = BTreeMap::new();
        for (item, value) in [(1, 1.0), (6, 5.0)] {
            let annotation = Annotation {
                annotator: "ann".into(),
                case: case(item, "Extraversion"),
                value: Answer::Value(value),
                note: None,
                at: String::new(),
            };
            mine.insert(annotation.case.clone(), annotation);
        }
        let all = BTreeMap::from([("ann".to_string(), mine)]);
        let r = report(&all, &assessments, Method::DOc, &catalog);
        assert_eq!(r["annotators"]["ann"]["right"], 2, "{r}");
    }

    #[test]
    fn annotators_half_points_are_rounded_for_their_kappa_not_left_out() {
        let dimension_case = |dim: &str| Case {
            task: Task::Dimension,
            item_id: None,
            ..case(0, dim)
        };
        let rater = |name: &str, values: [f64; 3]| {
            let cases = ["Openness", "Neuroticism", "Extraversion"]
                .into_iter()
                .zip(values)
                .map(|(dim, v)| {
                    let annotation = Annotation {
                        annotator: name.into(),
                        case: dimension_case(dim),
                        value: Answer::Value(v),
                        note: None,
                        at: String::new(),
                    };
                    (annotation.case.clone(), annotation)
                })
                .collect::<BTreeMap<_, _>>();
            (name.to_string(), cases)
        };
        let all = BTreeMap::from([rater("a", [1.5, 4.5, 3.0]), rater("b", [4.5, 1.5, 3.0])]);
        let qwk = inter_annotator(&all, Task::Dimension);
        assert_eq!(qwk["pairs"][0]["n"], 3, "{qwk}");
        assert!(qwk["qwk"].as_f64().unwrap() < 0.0, "opposite ends disagree: {qwk}");
    }

    #[test]
    fn samples_are_seeded_and_stratified() {
        let cases: Vec<Case> = (0..30)
            .map(|i| case(i, if i < 20 { "Openness" } else { "Neuroticism" }))
            .collect();
        let s = sample(&cases, Task::Item, Some(10), 4);
        assert_eq!(s, sample(&cases, Task::Item, Some(10), 4));
        assert_eq!(s.iter().filter(|c| c.dimension == "Neuroticism").count(), 5);
        assert_eq!(sample(&cases, Task::Item, None, 4).len(), 30);
    }
}
