//! RoleBench evaluation (RoleLLM): an agent answers the benchmark's questions in character and is scored
//! two ways. ROUGE-L against the reference answers ([`crate::domain::rouge`]; the best of a question's
//! references counts), summarized per role, per question type and overall; and a pairwise judge that
//! compares the agent's answer with a baseline's (the RoleGPT answers shipped with RoleBench-zh) on
//! speaking style and role knowledge, asked in both orders to cancel position bias. This module owns the
//! question files, the selection of questions, the judge's prompt and reply, and the arithmetic; the
//! engine owns the calls.
//!
//! A question file is jsonl, one row per line: `{"role", "question", "generated": [references…], "type"}`
//! where `type` is a string, a list of strings (one per reference) or absent. The baseline file has the
//! same shape; its first `generated` is the baseline's answer.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::judge_json::{self, ReplyError};
use crate::domain::rng::SplitMix64;
use crate::domain::rouge::{self, RougeL};
use crate::domain::scale::Language;
use crate::llm::{ChatMessage, ChatRequest, ResponseSchema, Role};

/// The largest question file read (the English RoleBench test split is 1.4 MB).
pub const MAX_FILE_BYTES: u64 = 256 << 20;
/// The most rows a question file may hold (all of RoleBench is 168,093 samples).
pub const MAX_ROWS: usize = 500_000;

/// One benchmark question for one role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// 1-based line in the file: the question's identity, since a file may ask the same thing twice
    /// (the English test split repeats 206 questions with other references).
    pub line: usize,
    pub role: String,
    /// Trimmed (the files pad some questions with spaces).
    pub question: String,
    /// The reference answers, trimmed; at least one, none empty.
    pub references: Vec<String>,
    /// The distinct types of the row in file order (the files repeat the type once per reference);
    /// empty when the row has none.
    pub types: Vec<String>,
}

impl Question {
    /// The tokenizer language for this question, detected from its references.
    pub fn language(&self) -> Language {
        rouge::detect(&self.references.join("\n"))
    }
}

/// Why a question file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    /// `column` is 1-based and counts characters, as every located error does.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Row {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// Reads a question file: a regular file (symlinks followed) of at most [`MAX_FILE_BYTES`], UTF-8 jsonl.
pub fn load_questions(path: &Path) -> Result<Vec<Question>, LoadError> {
    let text = read_bounded(path)?;
    let questions = parse_questions(path, &text)?;
    if questions.is_empty() {
        return Err(LoadError::File {
            path: path.to_path_buf(),
            message: "holds no question (every line is blank)".into(),
        });
    }
    Ok(questions)
}

/// Parses question rows; `path` only names the source in errors. Blank lines are skipped. A row is
/// refused (with its line and column) when it is not a JSON object with a non-empty string `role`, a
/// non-empty string `question` and a non-empty list `generated` of non-empty strings, or when `type` is
/// neither a string, a list of strings, null nor absent. Unknown keys are ignored.
pub fn parse_questions(path: &Path, text: &str) -> Result<Vec<Question>, LoadError> {
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let n = i + 1;
        // A byte-order mark may open the file; it is not a column (as editors show it).
        let line = match line.strip_prefix('\u{feff}') {
            Some(rest) if n == 1 => rest,
            _ => line,
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let at = |column: usize, message: String| LoadError::Row {
            path: path.to_path_buf(),
            line: n,
            column,
            message,
        };
        if out.len() == MAX_ROWS {
            return Err(at(1, format!("more than {MAX_ROWS} rows")));
        }
        let start = line.len() - line.trim_start().len();
        if !line[start..].starts_with('{') {
            return Err(at(crate::files::char_column(line, start), "a row must be a JSON object".into()));
        }
        let row: Row = serde_json::from_str(line)
            .map_err(|e| at(crate::files::json_column(line, &e), crate::files::json_message(&e)))?;
        out.push(
            row.question(n)
                .map_err(|(key, message)| at(key_column(line, key), message))?,
        );
    }
    Ok(out)
}

#[derive(Deserialize)]
struct Row {
    role: String,
    question: String,
    generated: Vec<String>,
    #[serde(default, rename = "type")]
    kind: Value,
}

impl Row {
    /// The row as a question, or the offending key and what is wrong with it.
    fn question(self, line: usize) -> Result<Question, (&'static str, String)> {
        let role = self.role.trim().to_string();
        if role.is_empty() {
            return Err(("role", "\"role\" is empty".into()));
        }
        let question = self.question.trim().to_string();
        if question.is_empty() {
            return Err(("question", "\"question\" is empty".into()));
        }
        if self.generated.is_empty() {
            return Err((
                "generated",
                "no reference answers: \"generated\" is an empty list".into(),
            ));
        }
        let mut references = Vec::with_capacity(self.generated.len());
        for (i, r) in self.generated.iter().enumerate() {
            let r = r.trim();
            if r.is_empty() {
                return Err(("generated", format!("reference {} of \"generated\" is empty", i + 1)));
            }
            references.push(r.to_string());
        }
        let listed: Vec<&str> = match &self.kind {
            Value::Null => Vec::new(),
            Value::String(s) => vec![s.as_str()],
            Value::Array(items) if items.iter().all(Value::is_string) => {
                items.iter().filter_map(Value::as_str).collect()
            }
            _ => return Err(("type", "\"type\" must be a string or a list of strings".into())),
        };
        let mut types: Vec<String> = Vec::new();
        for t in listed.into_iter().map(str::trim).filter(|t| !t.is_empty()) {
            if !types.iter().any(|k| k == t) {
                types.push(t.to_string());
            }
        }
        Ok(Question {
            line,
            role,
            question,
            references,
            types,
        })
    }
}

/// 1-based byte column of `"key"` used as a key in `line` (a quoted `"key"` followed by `:` can only
/// be a key in JSON), or 1.
fn key_column(line: &str, key: &str) -> usize {
    let quoted = format!("\"{key}\"");
    line.match_indices(&quoted)
        .find(|(at, _)| line[at + quoted.len()..].trim_start().starts_with(':'))
        .map_or(1, |(at, _)| crate::files::char_column(line, at))
}

// rpa::import has a similar reader, but it is private to that sibling layer and refuses symlinks;
// benchmark folders are often linked in, so this one follows them and only insists on a regular file.
fn read_bounded(path: &Path) -> Result<String, LoadError> {
    let fail = |message: String| LoadError::File {
        path: path.to_path_buf(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
    if !meta.is_file() {
        return Err(fail("not a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(fail(format!(
            "{} bytes is more than the {MAX_FILE_BYTES} allowed",
            meta.len()
        )));
    }
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The file may grow between the check and the read.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(fail(format!("more than the {MAX_FILE_BYTES} bytes allowed")));
    }
    String::from_utf8(bytes).map_err(|e| {
        let bad = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..bad];
        let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        LoadError::Row {
            path: path.to_path_buf(),
            line: before.iter().filter(|&&b| b == b'\n').count() + 1,
            // (What comes before the bad byte is valid UTF-8.)
            column: String::from_utf8_lossy(&before[line_start..]).chars().count() + 1,
            message: "not UTF-8".into(),
        }
    })
}

/// The distinct roles of `questions`, in file order.
pub fn roles(questions: &[Question]) -> Vec<&str> {
    distinct(questions.iter().map(|q| q.role.as_str()))
}

/// The distinct types of `questions`, in file order.
pub fn types(questions: &[Question]) -> Vec<&str> {
    distinct(questions.iter().flat_map(|q| q.types.iter().map(String::as_str)))
}

fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Which questions to ask. An empty list selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    /// Exact role names.
    pub roles: Vec<String>,
    /// A question is kept when any of its types is listed.
    pub types: Vec<String>,
}

/// A filter names something the questions do not have (a likely typo).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("no role \"{role}\" among the questions (roles: {known})")]
    UnknownRole { role: String, known: String },
    #[error("no question of type \"{kind}\" (types: {known})")]
    UnknownType { kind: String, known: String },
}

impl Filter {
    pub fn matches(&self, q: &Question) -> bool {
        (self.roles.is_empty() || self.roles.contains(&q.role))
            && (self.types.is_empty() || q.types.iter().any(|t| self.types.contains(t)))
    }

    /// The matching questions in file order; an error when a listed role or type occurs in none of
    /// `questions` (a combination that matches nothing is just an empty result).
    pub fn apply(&self, questions: Vec<Question>) -> Result<Vec<Question>, FilterError> {
        let known_roles = roles(&questions);
        if let Some(role) = self.roles.iter().find(|r| !known_roles.contains(&r.as_str())) {
            return Err(FilterError::UnknownRole {
                role: role.clone(),
                known: known_roles.join(", "),
            });
        }
        let known_types = types(&questions);
        if let Some(kind) = self.types.iter().find(|t| !known_types.contains(&t.as_str())) {
            return Err(FilterError::UnknownType {
                kind: kind.clone(),
                known: known_types.join(", "),
            });
        }
        Ok(questions.into_iter().filter(|q| self.matches(q)).collect())
    }
}

/// `limit` items drawn without replacement with `seed` (SplitMix64, partial Fisher–Yates), returned in
/// their original order; all of them when there are no more than `limit`. The same seed gives the same
/// sample, and raising the limit only adds items (the first draws do not depend on it).
pub fn sample<T>(items: Vec<T>, limit: usize, seed: u64) -> Vec<T> {
    let n = items.len();
    if limit >= n {
        return items;
    }
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix64(seed);
    for k in 0..limit {
        let j = k + rng.below(n - k);
        order.swap(k, j);
    }
    let mut keep = vec![false; n];
    for &i in &order[..limit] {
        keep[i] = true;
    }
    items
        .into_iter()
        .zip(keep)
        .filter_map(|(item, k)| k.then_some(item))
        .collect()
}

/// The baseline's answer to each (role, question).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    answers: HashMap<(String, String), String>,
}

impl Baseline {
    /// The baseline's answer; `question` is trimmed before the look-up, as the file's questions are.
    pub fn get(&self, role: &str, question: &str) -> Option<&str> {
        self.answers
            .get(&(role.to_string(), question.trim().to_string()))
            .map(String::as_str)
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }
}

/// Reads a baseline file (rows as in a question file; the first `generated` is the answer). A (role,
/// question) given twice with different answers is an error naming both lines.
pub fn load_baseline(path: &Path) -> Result<Baseline, LoadError> {
    let rows = load_questions(path)?;
    let mut answers = HashMap::with_capacity(rows.len());
    let mut lines: HashMap<(String, String), usize> = HashMap::with_capacity(rows.len());
    for mut q in rows {
        let key = (q.role, q.question);
        let answer = q.references.swap_remove(0);
        if let Some(previous) = answers.get(&key)
            && *previous != answer
        {
            return Err(LoadError::Row {
                path: path.to_path_buf(),
                line: q.line,
                column: 1,
                message: format!(
                    "the baseline answers this question of \"{}\" differently on line {}",
                    key.0, lines[&key]
                ),
            });
        }
        lines.entry(key.clone()).or_insert(q.line);
        answers.insert(key, answer);
    }
    Ok(Baseline { answers })
}

/// One scored question, for [`summarize`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored<'a> {
    pub role: &'a str,
    pub types: &'a [String],
    /// The best reference's ROUGE-L ([`rouge::best`]).
    pub rouge: RougeL,
}

/// Mean ROUGE-L of a group of questions. A group of 0 has no means: 0 here, `null` in JSON (not a
/// score of 0 that an average over sessions would take in).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct Mean {
    pub count: usize,
    #[serde(deserialize_with = "zero_if_null")]
    pub p: f64,
    #[serde(deserialize_with = "zero_if_null")]
    pub r: f64,
    #[serde(deserialize_with = "zero_if_null")]
    pub f: f64,
}

impl Mean {
    /// `x` of a group that has questions; none of an empty one.
    pub fn of(&self, x: f64) -> Option<f64> {
        (self.count > 0).then_some(x)
    }
}

impl Serialize for Mean {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown {
            count: usize,
            p: Option<f64>,
            r: Option<f64>,
            f: Option<f64>,
        }
        Shown {
            count: self.count,
            p: self.of(self.p),
            r: self.of(self.r),
            f: self.of(self.f),
        }
        .serialize(serializer)
    }
}

fn zero_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(0.0))
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub overall: Mean,
    pub by_role: BTreeMap<String, Mean>,
    /// A question counts once in each of its types; questions without a type count only overall.
    pub by_type: BTreeMap<String, Mean>,
}

/// Means of F, P and R (each question weighs the same) per role, per type and overall.
pub fn summarize<'a>(items: impl IntoIterator<Item = Scored<'a>>) -> Summary {
    #[derive(Default)]
    struct Sum {
        count: usize,
        p: f64,
        r: f64,
        f: f64,
    }
    impl Sum {
        fn add(&mut self, s: RougeL) {
            self.count += 1;
            self.p += s.p;
            self.r += s.r;
            self.f += s.f;
        }
        fn mean(&self) -> Mean {
            if self.count == 0 {
                return Mean::default();
            }
            let n = self.count as f64;
            Mean {
                count: self.count,
                p: self.p / n,
                r: self.r / n,
                f: self.f / n,
            }
        }
    }
    let mut overall = Sum::default();
    let mut by_role: BTreeMap<String, Sum> = BTreeMap::new();
    let mut by_type: BTreeMap<String, Sum> = BTreeMap::new();
    for item in items {
        overall.add(item.rouge);
        by_role.entry(item.role.to_string()).or_default().add(item.rouge);
        for t in distinct(item.types.iter().map(String::as_str)) {
            by_type.entry(t.to_string()).or_default().add(item.rouge);
        }
    }
    Summary {
        overall: overall.mean(),
        by_role: by_role.into_iter().map(|(k, s)| (k, s.mean())).collect(),
        by_type: by_type.into_iter().map(|(k, s)| (k, s.mean())).collect(),
    }
}

const PAIRWISE_PROMPT: &str = r#"You judge a role-playing contest. Two answers, A and B, were written in the voice of {role}, replying to the same question. Decide which one plays {role} better, on two counts:

1. Speaking style: does it sound like {role} — tone, vocabulary, turns of phrase, attitude — and stay in character throughout?
2. Knowledge: does it draw on what {role} knows and has lived through, without contradicting the character's story or knowing what {role} could not know?

The reference answers show how {role} might reply. Use them as guidance on style and facts, not as the only right answer. Length is no merit in itself, and the order of A and B says nothing about their quality. Answer "tie" only when neither is better.

Reply with JSON only, in this form:
{"analysis": "<a few sentences comparing A and B>", "winner": "A" | "B" | "tie"}"#;

/// The judge's messages for comparing two answers to `question` (the caller decides which answer is
/// A: ask both orders, see [`pair_score`]).
pub fn pairwise_messages(question: &Question, answer_a: &str, answer_b: &str) -> Vec<ChatMessage> {
    let system = crate::templates::fill(PAIRWISE_PROMPT, &[("role", &question.role)]);
    let mut user = format!(
        "Role: {}\n\nQuestion: {}\n\nReference answers (guidance):\n",
        question.role, question.question
    );
    for (i, r) in question.references.iter().enumerate() {
        user.push_str(&format!("{}. {}\n", i + 1, r.trim()));
    }
    user.push_str(&format!(
        "\n[Answer A]\n{}\n[End of answer A]\n\n[Answer B]\n{}\n[End of answer B]",
        answer_a.trim(),
        answer_b.trim()
    ));
    vec![ChatMessage::system(system), ChatMessage::user(user)]
}

/// The JSON Schema of the judge's reply: `{"analysis": string, "winner": "A" | "B" | "tie"}`.
pub fn pairwise_schema() -> Value {
    json!({"type": "object", "properties": {
            "analysis": {"type": "string"},
            "winner": {"type": "string", "enum": ["A", "B", "tie"]}},
           "required": ["analysis", "winner"], "additionalProperties": false})
}

/// A judge request for one order: messages, reply schema, and the judge's bookkeeping. Parse the reply
/// with [`parse_verdict`] (e.g. through [`super::judge::ask`]).
pub fn pairwise_request(question: &Question, answer_a: &str, answer_b: &str) -> ChatRequest {
    let mut request = ChatRequest::new(pairwise_messages(question, answer_a, answer_b));
    request.schema = Some(ResponseSchema::new("pairwise_verdict", pairwise_schema()));
    request.meta.role = Role::Judge;
    request.meta.purpose = format!("RoleBench pairwise {} line {}", question.role, question.line);
    request
}

/// The judge's preference in one order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Winner {
    A,
    B,
    #[serde(rename = "tie")]
    Tie,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub winner: Winner,
    /// Empty when the judge gave none.
    pub analysis: String,
}

/// Reads the judge's reply leniently (JSON found in prose or fences, trailing commas, key case, "A",
/// "answer a", "Tie", "draw"); the error says what to fix, for a re-ask.
pub fn parse_verdict(reply: &str) -> Result<Verdict, ReplyError> {
    let v = judge_json::extract(reply)?;
    let object = v.as_object().ok_or(ReplyError::NotAnObject)?;
    let get = |key: &str| {
        object.get(key).or_else(|| {
            object
                .iter()
                .find(|(k, _)| k.trim().eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
    };
    let raw = get("winner").ok_or_else(|| ReplyError::MissingKey("winner".into()))?;
    let invalid = || ReplyError::Invalid(format!("\"winner\" must be \"A\", \"B\" or \"tie\", not {raw}"));
    let word = raw
        .as_str()
        .ok_or_else(invalid)?
        .trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '.' || c == '*')
        .to_ascii_lowercase();
    let winner = match word.strip_prefix("answer ").unwrap_or(&word).trim() {
        "a" => Winner::A,
        "b" => Winner::B,
        "tie" | "draw" => Winner::Tie,
        _ => return Err(invalid()),
    };
    let analysis = get("analysis").and_then(Value::as_str).unwrap_or("").trim().to_string();
    Ok(Verdict { winner, analysis })
}

/// The agent's score on one question from the two orders: the mean of its outcomes (win 1, tie 0.5,
/// loss 0) with the agent as A and with the agent as B. So winning both gives 1, losing both 0, a
/// split decision (win one order, lose the other) or a tie in both 0.5, and a win or a loss next to a
/// tie 0.75 or 0.25.
pub fn pair_score(agent_as_a: Winner, agent_as_b: Winner) -> f64 {
    let as_a = match agent_as_a {
        Winner::A => 1.0,
        Winner::Tie => 0.5,
        Winner::B => 0.0,
    };
    let as_b = match agent_as_b {
        Winner::B => 1.0,
        Winner::Tie => 0.5,
        Winner::A => 0.0,
    };
    (as_a + as_b) / 2.0
}

/// The win rate: the mean of the per-question [`pair_score`]s (ties count as half a win); `None` for no
/// questions.
pub fn win_rate(scores: &[f64]) -> Option<f64> {
    (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_group_with_no_answer_has_no_mean_in_json_and_reads_back() {
        let none = summarize(std::iter::empty());
        let json = serde_json::to_value(&none).unwrap();
        assert_eq!(json["overall"], serde_json::json!({"count": 0, "p": null, "r": null, "f": null}));
        let back: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(back, none);
        // As older sessions wrote it: zeros.
        let old: Mean = serde_json::from_str(r#"{"count": 0, "p": 0.0, "r": 0.0, "f": 0.0}"#).unwrap();
        assert_eq!(old, Mean::default());
        let some = Mean { count: 2, p: 0.5, r: 0.25, f: 0.3 };
        assert_eq!(serde_json::from_value::<Mean>(serde_json::to_value(some).unwrap()).unwrap(), some);
    }

    use super::*;

    fn parse(text: &str) -> Result<Vec<Question>, LoadError> {
        parse_questions(Path::new("q.jsonl"), text)
    }

    fn question(line: usize, role: &str, types: &[&str]) -> Question {
        Question {
            line,
            role: role.into(),
            question: format!("q{line}"),
            references: vec![format!("r{line}")],
            types: types.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn rows_of_every_shape_load() {
        let text = concat!(
            r#"{"role": "Jack Sparrow", "question": " Why the rum? ", "generated": [" Because. "], "type": "script_based"}"#,
            "\n\n",
            r#"{"role": "皇帝", "question": "朕？", "generated": ["是。", "对。"], "type": ["script_agnostic", "script_agnostic"], "extra": 1}"#,
            "\r\n",
            r#"{"role": "李白", "question": "酒？", "generated": ["好酒！"]}"#,
        );
        let qs = parse(text).unwrap();
        assert_eq!(qs.len(), 3);
        assert_eq!(
            qs[0],
            Question {
                line: 1,
                role: "Jack Sparrow".into(),
                question: "Why the rum?".into(),
                references: vec!["Because.".into()],
                types: vec!["script_based".into()],
            }
        );
        assert_eq!(
            (qs[1].line, qs[1].types.clone()),
            (3, vec!["script_agnostic".to_string()])
        );
        assert_eq!(qs[1].references.len(), 2);
        assert!(qs[2].types.is_empty());
        assert_eq!(qs[2].language(), Language::Zh);
        assert_eq!(qs[0].language(), Language::En);
    }

    #[test]
    fn bad_rows_name_line_and_column() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        assert_eq!(
            err("\n{\"role\": \"x\", \"question\": \"q\", \"generated\": [\"a\"],}"),
            "q.jsonl:2:51: trailing comma"
        );
        assert_eq!(
            err(r#"{"role": "x", "question": "  ", "generated": ["a"]}"#),
            "q.jsonl:1:15: \"question\" is empty"
        );
        assert_eq!(
            err(r#"{"role": "x", "question": "q", "generated": []}"#),
            "q.jsonl:1:32: no reference answers: \"generated\" is an empty list"
        );
        assert_eq!(
            err(r#"{"role": "x", "question": "q", "generated": ["a", " "]}"#),
            "q.jsonl:1:32: reference 2 of \"generated\" is empty"
        );
        assert_eq!(
            err(r#"{"role": "x", "question": "q", "generated": ["a"], "type": 3}"#),
            "q.jsonl:1:52: \"type\" must be a string or a list of strings"
        );
        assert_eq!(
            err(r#"{"role": "x", "question": "q"}"#),
            "q.jsonl:1:30: missing field `generated`"
        );
        assert_eq!(
            err("  [\"x\", \"q\", [\"a\"]]"),
            "q.jsonl:1:3: a row must be a JSON object"
        );
        assert_eq!(
            err(r#"{"role": 7, "question": "q", "generated": ["a"]}"#),
            "q.jsonl:1:10: invalid type: integer `7`, expected a string"
        );
        assert_eq!(
            err(r#"{"role": "", "question": "q", "generated": ["a"]}"#),
            "q.jsonl:1:2: \"role\" is empty"
        );
    }

    /// A file of blank lines is refused, named.
    #[test]
    fn a_file_without_a_question_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let blank = dir.path().join("blank.jsonl");
        std::fs::write(&blank, "\n \n").unwrap();
        let e = load_questions(&blank).unwrap_err().to_string();
        assert_eq!(e, format!("{}: holds no question (every line is blank)", blank.display()));
    }

    /// A byte that is not UTF-8 is located in characters, as every other error is.
    #[test]
    fn a_byte_that_is_not_utf8_is_located_in_characters() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("q.jsonl");
        let mut bytes = "{\"role\": \"李白\", \"question\": \"".as_bytes().to_vec();
        bytes.extend(b"\xff\"}\n");
        std::fs::write(&file, [b"\n".as_slice(), &bytes].concat()).unwrap();
        let e = load_questions(&file).unwrap_err().to_string();
        assert_eq!(e, format!("{}:2:29: not UTF-8", file.display()), "33 in bytes");
    }

    #[test]
    fn key_columns_ignore_look_alikes_in_values() {
        let line = r#"{"role": "question", "note": "\"question\": no", "question": ""}"#;
        assert_eq!(key_column(line, "question"), line.rfind("\"question\"").unwrap() + 1);
        assert_eq!(key_column(line, "absent"), 1);
    }

    #[test]
    fn filters_select_roles_and_types_and_reject_typos() {
        let qs = vec![
            question(1, "Jack Sparrow", &["script_based"]),
            question(2, "Coriolanus", &["script_agnostic"]),
            question(3, "Jack Sparrow", &["script_agnostic"]),
            question(4, "Jack Sparrow", &[]),
        ];
        let lines = |f: Filter| f.apply(qs.clone()).unwrap().iter().map(|q| q.line).collect::<Vec<_>>();
        assert_eq!(lines(Filter::default()), [1, 2, 3, 4]);
        let jack = Filter {
            roles: vec!["Jack Sparrow".into()],
            types: vec![],
        };
        assert_eq!(lines(jack.clone()), [1, 3, 4]);
        let agnostic = Filter {
            roles: vec![],
            types: vec!["script_agnostic".into()],
        };
        assert_eq!(lines(agnostic), [2, 3]);
        assert_eq!(
            lines(Filter {
                types: vec!["script_based".into()],
                ..jack
            }),
            [1]
        );
        let typo = Filter {
            roles: vec!["jack sparrow".into()],
            types: vec![],
        };
        assert_eq!(
            typo.apply(qs.clone()).unwrap_err().to_string(),
            "no role \"jack sparrow\" among the questions (roles: Jack Sparrow, Coriolanus)"
        );
        let typo = Filter {
            roles: vec![],
            types: vec!["based".into()],
        };
        assert!(matches!(typo.apply(qs), Err(FilterError::UnknownType { .. })));
    }

    #[test]
    fn samples_are_seeded_nested_and_in_order() {
        let items: Vec<u32> = (0..100).collect();
        let a = sample(items.clone(), 10, 7);
        assert_eq!(a, sample(items.clone(), 10, 7));
        assert_eq!(a.len(), 10);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_ne!(a, sample(items.clone(), 10, 8));
        let bigger = sample(items.clone(), 20, 7);
        assert!(a.iter().all(|x| bigger.contains(x)));
        assert_eq!(sample(items.clone(), 100, 7), items);
        assert_eq!(sample(items.clone(), 500, 7), items);
        assert!(sample(items, 0, 7).is_empty());
        assert!(sample(Vec::<u32>::new(), 3, 7).is_empty());
    }

    #[test]
    fn baseline_maps_trimmed_questions_and_refuses_conflicts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baseline.jsonl");
        std::fs::write(
            &path,
            "{\"role\": \"皇帝\", \"question\": \" 朕？ \", \"generated\": [\"是。\"]}\n\
             {\"role\": \"皇帝\", \"question\": \"朕？\", \"generated\": [\"是。\"]}\n",
        )
        .unwrap();
        let b = load_baseline(&path).unwrap();
        assert_eq!(
            (b.len(), b.get("皇帝", "朕？  "), b.get("华妃", "朕？")),
            (1, Some("是。"), None)
        );
        std::fs::write(
            &path,
            "{\"role\": \"皇帝\", \"question\": \"朕？\", \"generated\": [\"是。\"]}\n\
             {\"role\": \"皇帝\", \"question\": \"朕？\", \"generated\": [\"否。\"]}\n",
        )
        .unwrap();
        let e = load_baseline(&path).unwrap_err().to_string();
        assert!(
            e.ends_with("baseline.jsonl:2:1: the baseline answers this question of \"皇帝\" differently on line 1"),
            "{e}"
        );
    }

    #[test]
    fn files_are_bounded_and_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let e = load_questions(dir.path()).unwrap_err();
        assert!(e.to_string().ends_with(": not a regular file"), "{e}");
        let path = dir.path().join("q.jsonl");
        std::fs::write(&path, b"{\"role\": \"x\"}\n{\"role\": \"\xff\"}\n").unwrap();
        let e = load_questions(&path).unwrap_err();
        assert!(
            matches!(
                e,
                LoadError::Row {
                    line: 2,
                    column: 11,
                    ..
                }
            ),
            "{e}"
        );
        assert!(matches!(
            load_questions(&dir.path().join("missing.jsonl")),
            Err(LoadError::File { .. })
        ));
    }

    #[test]
    fn summary_means_per_role_type_and_overall() {
        let based = vec!["script_based".to_string()];
        let both = vec!["script_based".to_string(), "script_agnostic".to_string()];
        let s = |p, r, f| RougeL { p, r, f };
        let items = [
            Scored {
                role: "Jack",
                types: &based,
                rouge: s(0.2, 0.4, 0.3),
            },
            Scored {
                role: "Jack",
                types: &both,
                rouge: s(0.4, 0.6, 0.5),
            },
            Scored {
                role: "Walt",
                types: &[],
                rouge: s(0.6, 0.8, 0.7),
            },
        ];
        let sum = summarize(items);
        let close = |m: Mean, count: usize, p: f64, r: f64, f: f64| {
            m.count == count && (m.p - p).abs() < 1e-12 && (m.r - r).abs() < 1e-12 && (m.f - f).abs() < 1e-12
        };
        assert!(close(sum.overall, 3, 0.4, 0.6, 0.5), "{:?}", sum.overall);
        assert!(close(sum.by_role["Jack"], 2, 0.3, 0.5, 0.4));
        assert!(close(sum.by_role["Walt"], 1, 0.6, 0.8, 0.7));
        assert!(close(sum.by_type["script_based"], 2, 0.3, 0.5, 0.4));
        assert!(close(sum.by_type["script_agnostic"], 1, 0.4, 0.6, 0.5));
        assert_eq!(sum.by_type.len(), 2);
        assert_eq!(summarize([]), Summary::default());
        let json = serde_json::to_value(&sum).unwrap();
        assert_eq!(json["by_role"]["Walt"]["count"], 1);
    }

    #[test]
    fn the_prompt_shows_role_question_references_and_both_answers() {
        let mut q = question(9, "Jack Sparrow", &[]);
        q.references = vec!["Savvy?".into(), "Why is the rum gone?".into()];
        let r = pairwise_request(&q, "  Ahoy. ", "Hello.");
        assert_eq!(r.meta.role, Role::Judge);
        assert_eq!(r.schema.as_ref().unwrap().schema, pairwise_schema());
        let system = &r.messages[0].content;
        assert!(system.contains("in the voice of Jack Sparrow") && system.contains("Speaking style"));
        assert!(system.contains(r#""winner": "A" | "B" | "tie""#) && !system.contains("{role}"));
        let user = &r.messages[1].content;
        assert!(user.starts_with("Role: Jack Sparrow\n\nQuestion: q9\n"), "{user}");
        assert!(user.contains("1. Savvy?\n2. Why is the rum gone?\n"));
        assert!(user.contains("[Answer A]\nAhoy.\n[End of answer A]\n\n[Answer B]\nHello.\n[End of answer B]"));
    }

    #[test]
    fn verdicts_are_read_leniently_and_rejected_clearly() {
        let v =
            parse_verdict("Sure.\n```json\n{\"analysis\": \"A sounds like him\", \"winner\": \"A\",}\n```").unwrap();
        assert_eq!(
            v,
            Verdict {
                winner: Winner::A,
                analysis: "A sounds like him".into()
            }
        );
        for (reply, winner) in [
            (r#"{"winner": "b"}"#, Winner::B),
            (r#"{"Winner": "Answer B"}"#, Winner::B),
            (r#"{"analysis": "same", "winner": "Tie"}"#, Winner::Tie),
            (r#"{"winner": " draw. "}"#, Winner::Tie),
        ] {
            assert_eq!(parse_verdict(reply).map(|v| v.winner), Ok(winner), "{reply}");
        }
        assert_eq!(parse_verdict("A is better"), Err(ReplyError::NoJson));
        assert_eq!(
            parse_verdict(r#"{"analysis": "x"}"#),
            Err(ReplyError::MissingKey("winner".into()))
        );
        assert_eq!(
            parse_verdict(r#"{"winner": "C"}"#).unwrap_err().to_string(),
            "\"winner\" must be \"A\", \"B\" or \"tie\", not \"C\""
        );
        assert!(matches!(parse_verdict(r#"{"winner": 1}"#), Err(ReplyError::Invalid(_))));
    }

    #[test]
    fn both_orders_combine_into_the_win_rate() {
        use Winner::{A, B, Tie};
        // (agent as A, agent as B) → score.
        for (as_a, as_b, score) in [
            (A, B, 1.0),
            (B, A, 0.0),
            (A, A, 0.5),
            (B, B, 0.5),
            (Tie, Tie, 0.5),
            (A, Tie, 0.75),
            (Tie, B, 0.75),
            (B, Tie, 0.25),
            (Tie, A, 0.25),
        ] {
            assert_eq!(pair_score(as_a, as_b), score, "{as_a:?} {as_b:?}");
        }
        assert_eq!(win_rate(&[1.0, 0.5, 0.0, 0.5]), Some(0.5));
        assert_eq!(win_rate(&[]), None);
        assert_eq!(serde_json::to_string(&Tie).unwrap(), "\"tie\"");
    }
}
