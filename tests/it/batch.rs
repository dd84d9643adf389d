//! Batch mode: a run through the OpenAI Batch API, and one carried phase by phase through batch files
//! (as `vllm run-batch` would answer them), give the results the same run gives streaming; a results
//! file that cannot be read is refused whole and changes nothing.

use std::path::Path;

use incharacter_testkit::fake_openai::FakeConfig;
use incharacter_testkit::fake_openai::batch::{BatchOrder, batch_output_for};
use serde_json::Value;

use crate::common;

const RUN: [&str; 7] = [
    "run",
    "--characters",
    "hermione-en,snape-en",
    "--scales",
    "BFI",
    "--methods",
    "er-batch,oc",
];

/// What a session concluded, without what differs from sitting to sitting: every answer and every
/// assessment (scores, ratings, converted items), in a stable order.
fn conclusions(session: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    let mut out: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| {
            matches!(
                e["event"].as_str(),
                Some("item_answered" | "dimension_assessed" | "item_failed")
            )
        })
        .map(|mut e| {
            common::strip(&mut e, "cached");
            common::strip(&mut e, "ts_ms");
            e
        })
        .collect();
    out.sort_by_key(|e| e.to_string());
    out
}

/// Every row of a run's `--json` summary has all its dimensions assessed.
fn assert_all_assessed(summary: &Value) {
    let rows = summary["summary"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["failed_dimensions"] == 0), "{summary}");
}

fn session_dir(data: &Path, id: &str) -> std::path::PathBuf {
    data.join("sessions").join(id)
}

/// The streaming run's conclusions, on a server of its own with the same seed.
async fn streamed() -> Vec<Value> {
    let s = common::setup(FakeConfig::default(), "max_concurrency = 8").await;
    let mut args = RUN.to_vec();
    args.push("--json");
    let summary = common::json_of(common::output(&s.config, &s.data, &args).await);
    conclusions(&session_dir(&s.data, summary["session"].as_str().unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_through_the_batch_api_equals_the_streamed_run() {
    let expected = streamed().await;
    // Output lines come back in reverse order (the fake's default).
    let s = common::setup(FakeConfig::default(), "batch_poll_ms = 5").await;
    let mut args = RUN.to_vec();
    args.extend(["--batch", "--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let summary = common::json_of(out);
    assert_all_assessed(&summary);
    let stats = s.server.stats();
    assert_eq!(stats.requests, 0, "no request streamed: {stats:?}");
    // The interviews, then the judge's calls (and its re-asks, if any reply was rejected).
    assert_eq!(stats.batches, 2, "{stats:?}");
    assert!(stats.batch_lines >= 2 * 44 + 2 * 5, "{stats:?}");
    assert!(
        stderr.contains("batch phase 1: fake batch_fake_1 in_progress: 0/88 done, 0 failed"),
        "{stderr}"
    );
    assert!(stderr.contains("completed: 88/88 done, 0 failed"), "{stderr}");
    let dir = session_dir(&s.data, summary["session"].as_str().unwrap());
    assert_eq!(
        conclusions(&dir),
        expected,
        "the same answers and assessments as streaming"
    );
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(journal.contains(r#""step":"submitted""#), "batch ids journaled");
    assert!(dir.join("batches/phase-1-fake.out.jsonl").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_files_phase_by_phase_equal_the_streamed_run_and_a_bad_file_changes_nothing() {
    let expected = streamed().await;
    let s = common::setup(FakeConfig::default(), "").await;
    let files = s.dir.path().join("batches");
    let engine = FakeConfig {
        batch_order: BatchOrder::Reverse,
        ..FakeConfig::default()
    };
    let mut args = RUN.to_vec();
    let dir_arg = files.display().to_string();
    args.extend(["--batch-files", &dir_arg, "--json"]);
    let first = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = first["session"].as_str().unwrap().to_string();
    let mut requests = first["requests"].as_str().unwrap().to_string();
    assert!(requests.starts_with(&dir_arg), "{first}");
    let journal = session_dir(&s.data, &id).join("journal.jsonl");

    // A results file with one malformed line: refused whole, located, and the journal is unchanged.
    let input = std::fs::read_to_string(&requests).unwrap();
    assert_eq!(input.lines().count(), 2 * 44, "one line per interview item");
    let good = batch_output_for(&engine, &input).unwrap();
    let mut lines: Vec<&str> = good.lines().collect();
    lines[6] = r#"{"custom_id": "ic-x", "response": {"status_code": 200,"#;
    let bad = files.join("bad.jsonl");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let before = std::fs::read(&journal).unwrap();
    let bad_arg = bad.display().to_string();
    let out = common::output(&s.config, &s.data, &["batch", "import", &id, &bad_arg, "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{bad_arg}:7:")), "located: {stderr}");
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        before,
        "the journal's bytes are unchanged"
    );
    // So is a line for a request the phase did not write.
    let mut unknown: Value = serde_json::from_str(good.lines().next().unwrap()).unwrap();
    unknown["custom_id"] = "ic-not-asked".into();
    std::fs::write(&bad, format!("{good}{unknown}\n")).unwrap();
    let out = common::output(&s.config, &s.data, &["batch", "import", &id, &bad_arg]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("ic-not-asked is not a request of this batch"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("{bad_arg}:{}:", 2 * 44 + 1)), "{stderr}");
    assert_eq!(std::fs::read(&journal).unwrap(), before);

    // Phase after phase, answered by "the engine" in reverse order.
    let mut phases = 0;
    let summary = loop {
        phases += 1;
        assert!(phases < 6, "a run of two judged phases does not take {phases}");
        let input = std::fs::read_to_string(&requests).unwrap();
        let results = files.join(format!("results-{phases}.jsonl"));
        std::fs::write(&results, batch_output_for(&engine, &input).unwrap()).unwrap();
        let results_arg = results.display().to_string();
        let out = common::json_of(
            common::output(&s.config, &s.data, &["batch", "import", &id, &results_arg, "--json"]).await,
        );
        match out["requests"].as_str() {
            Some(next) => requests = next.to_string(),
            None => break out,
        }
    };
    // Interviews, then the judge (whose replies here are all usable: no re-asks), each phase whole.
    assert_eq!(phases, 2, "interviews, then the judge");
    assert_eq!(s.server.stats().requests, 0, "batch files send nothing");
    // The last results imported again: the session is complete, nothing is imported twice.
    let before = std::fs::read(&journal).unwrap();
    let last = files.join(format!("results-{phases}.jsonl")).display().to_string();
    let out = common::output(&s.config, &s.data, &["batch", "import", &id, &last]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("is complete: nothing of the results file is needed"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&journal).unwrap(), before, "nothing appended");
    assert_eq!(summary["session"], id.as_str());
    assert_all_assessed(&summary);
    assert_eq!(conclusions(&session_dir(&s.data, &id)), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_export_writes_again_what_the_session_still_needs() {
    let s = common::setup(FakeConfig::default(), "").await;
    let files = s.dir.path().join("out");
    let dir_arg = files.display().to_string();
    let mut args = RUN.to_vec();
    args.extend(["--batch-files", &dir_arg, "--json"]);
    let first = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = first["session"].as_str().unwrap();
    let again = files.join("again.jsonl");
    let again_arg = again.display().to_string();
    let out =
        common::json_of(common::output(&s.config, &s.data, &["batch", "export", id, "-o", &again_arg, "--json"]).await);
    assert_eq!(out["requests"], again_arg.as_str());
    let written = std::fs::read_to_string(first["requests"].as_str().unwrap()).unwrap();
    assert_eq!(
        std::fs::read_to_string(&again).unwrap(),
        written,
        "the same requests, in the same order"
    );
    for line in written.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(line["method"], "POST");
        assert_eq!(line["url"], "/v1/chat/completions");
        assert!(line["body"].get("stream").is_none(), "{line}");
        assert_eq!(line["body"]["model"], "fake-model");
    }
    // Written again, twice: still phase 1 (the results it waits for are phase 1's, whichever file
    // they answer), not phases 2 and 3.
    let out = common::output(&s.config, &s.data, &["batch", "export", id, "-o", &again_arg]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let journal = std::fs::read_to_string(session_dir(&s.data, id).join("journal.jsonl")).unwrap();
    let phases: Vec<u64> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "batch" && e["step"] == "written")
        .map(|e| e["phase"].as_u64().unwrap())
        .collect();
    assert_eq!(phases, [1, 1, 1]);
    // `-o -` is refused: the session records the file (a file named "-" was written).
    let out = common::output(&s.config, &s.data, &["batch", "export", id, "-o", "-"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not -, standard output"));

    // An export that cannot write its file (a disk that fills: files limited to just above the
    // journal's size, SIGXFSZ ignored) fails and leaves the journal as it was: no resumed record.
    let journal = session_dir(&s.data, id).join("journal.jsonl");
    let before = std::fs::read(&journal).unwrap();
    let limit = before.len() as u64 + 8192;
    assert!(written.len() as u64 > limit, "the batch file is larger than the limit");
    let target = files.join("full.jsonl");
    let to = target.to_str().unwrap();
    let out = common::on_full_disk(
        &s.config,
        &s.data,
        s.dir.path(),
        limit / 512,
        &["batch", "export", id, "-o", to],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!target.exists(), "no half-written file: {stderr}");
    assert_eq!(std::fs::read(&journal).unwrap(), before, "{stderr}");
    assert!(!stderr.contains("used: "), "nothing was sent or written: {stderr}");
    assert!(
        stderr.contains(&format!("once that is fixed: incharacter batch export {id} -o ")),
        "done again as an export, not resumed: {stderr}"
    );
}

/// The run `args` started on `s` and killed (SIGKILL) once its first batch is created and journaled;
/// its session's folder.
async fn killed_once_submitted(s: &common::Setup, args: &[&str]) -> std::path::PathBuf {
    let mut child = common::command(&s.config, &s.data, args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let session = once_submitted(s, &mut child).await;
    child.kill().unwrap();
    child.wait().unwrap();
    session
}

/// The `--json` summary of `run --resume` of `session`, its batches polled every 5 ms from now on
/// (the sitting it follows was started polling once a minute).
async fn resumed_polling_fast(s: &common::Setup, session: &std::path::Path) -> Value {
    std::fs::write(
        &s.config,
        std::fs::read_to_string(&s.config).unwrap().replace("60000", "5"),
    )
    .unwrap();
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    common::json_of(common::output(&s.config, &s.data, &["run", "--resume", &id, "--json"]).await)
}

/// The folder of the session `child` runs on `s`, once its first batch is created and journaled.
async fn once_submitted(s: &common::Setup, child: &mut std::process::Child) -> std::path::PathBuf {
    loop {
        let journaled = std::fs::read_dir(s.data.join("sessions"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                std::fs::read_to_string(p.join("journal.jsonl")).is_ok_and(|j| j.contains(r#""step":"submitted""#))
            });
        if let Some(dir) = journaled {
            return dir;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its batch was submitted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A batch's lines are requests of the sitting that reads its results: a sitting stopped (ctrl-c)
/// while its batch runs says none, and the resume that follows the batch to its end counts each
/// once, so the sittings' requests add up to the lines the provider ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stopped_while_it_runs_is_counted_once_across_its_sittings() {
    let s = common::setup(FakeConfig::default(), "batch_poll_ms = 60000").await;
    let mut args = RUN.to_vec();
    args.push("--batch");
    let mut child = common::command(&s.config, &s.data, &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let session = once_submitted(&s, &mut child).await;
    // SAFETY: a signal to the child this test started and has not yet waited for.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("incharacter run --resume"), "{stderr}");
    assert!(
        !stderr.contains("used: rpa"),
        "the batch has not answered yet: {stderr}"
    );

    let resumed = resumed_polling_fast(&s, &session).await;
    let rpa = resumed["usage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "rpa")
        .cloned()
        .unwrap_or_default();
    assert_eq!(rpa["requests"], 88, "the followed batch's lines, once: {resumed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_batch_run_polls_the_same_batch_when_resumed() {
    let expected = streamed().await;
    // Polls far apart: the run is killed while it waits for its first batch.
    let s = common::setup(FakeConfig::default(), "batch_poll_ms = 60000").await;
    let mut args = RUN.to_vec();
    args.extend(["--batch", "--json"]);
    let session = killed_once_submitted(&s, &args).await;
    assert_eq!(s.server.stats().batches, 1);
    std::fs::write(
        &s.config,
        std::fs::read_to_string(&s.config).unwrap().replace("60000", "5"),
    )
    .unwrap();
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    // Its results come from the provider: a results file or a batch file is not what it waits for.
    let elsewhere = s.dir.path().join("m.jsonl").display().to_string();
    std::fs::write(&elsewhere, "").unwrap();
    for args in [
        vec!["batch", "import", &id, &elsewhere],
        vec!["batch", "export", &id, "-o", &elsewhere],
    ] {
        let out = common::output(&s.config, &s.data, &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("sent through the Batch API")
                && stderr.contains(&format!("`incharacter run --resume {id}` follows it")),
            "{args:?}: {stderr}"
        );
    }
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id, "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let summary = common::json_of(out);
    assert!(stderr.contains("from the last sitting"), "{stderr}");
    let stats = s.server.stats();
    assert_eq!(stats.requests, 0, "{stats:?}");
    let journal = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    assert_eq!(
        journal.matches(r#""step":"uploaded","phase":1,"#).count(),
        1,
        "phase 1 was submitted once: {journal}"
    );
    let uploaded = journal.matches(r#""step":"uploaded""#).count();
    assert_eq!(
        stats.batches as usize, uploaded,
        "one batch per phase, none again: {stats:?}"
    );
    assert_all_assessed(&summary);
    assert_eq!(conclusions(&session), expected);
}

/// What a run's `--json` says it used, each provider and role with its requests, retries and tokens.
fn used(summary: &Value) -> Vec<(Value, Value, Value, Value, Value, Value)> {
    let fields = |u: &Value| {
        let f = |k: &str| u[k].clone();
        // The cost to a millionth of a cent: a sum in another order differs in its last bits.
        let cost = (u["cost"].as_f64().unwrap() * 1e8).round();
        (
            f("role"),
            f("requests"),
            f("retries"),
            f("prompt_tokens"),
            f("completion_tokens"),
            cost.into(),
        )
    };
    summary["usage"].as_array().unwrap().iter().map(fields).collect()
}

/// A batch that ended while no run followed it is billed by the sitting that reads it as the run that
/// sent it would have billed it: empty replies too (a request and its tokens, then a retry), so a
/// cost cap held in that sitting counts what was spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_followed_from_an_earlier_sitting_is_billed_as_an_uninterrupted_run_bills_it() {
    let faulty = || FakeConfig {
        fault_share: 0.3,
        faults_per_request: 1,
        faults: vec![incharacter_testkit::fake_openai::Fault::Empty],
        ..FakeConfig::default()
    };
    let prices = "price_in_per_mtok = 2.5\nprice_out_per_mtok = 10\nretry_base_ms = 1";
    let mut args = RUN.to_vec();
    args.extend(["--batch", "--json"]);
    let whole = common::setup(faulty(), &format!("{prices}\nbatch_poll_ms = 5")).await;
    let uninterrupted = common::json_of(common::output(&whole.config, &whole.data, &args).await);
    assert!(whole.server.stats().faults > 0, "some replies came back empty");

    let s = common::setup(faulty(), &format!("{prices}\nbatch_poll_ms = 60000")).await;
    // Killed before anything came back: the first sitting billed nothing.
    let session = killed_once_submitted(&s, &args).await;
    let resumed = resumed_polling_fast(&s, &session).await;
    assert_eq!(used(&resumed), used(&uninterrupted), "{resumed}\n{uninterrupted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_reply_in_a_batch_goes_out_again_in_the_next_phase() {
    let expected = streamed().await;
    let s = common::setup(FakeConfig::default(), "retry_base_ms = 1").await;
    let files = s.dir.path().join("batches");
    let dir_arg = files.display().to_string();
    let mut args = RUN.to_vec();
    args.extend(["--batch-files", &dir_arg, "--json"]);
    let first = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = first["session"].as_str().unwrap().to_string();
    let mut requests = first["requests"].as_str().unwrap().to_string();
    // The engine answers three of the first phase's requests with nothing (blank, or only a thought).
    let input = std::fs::read_to_string(&requests).unwrap();
    let answered = batch_output_for(&FakeConfig::default(), &input).unwrap();
    let mut emptied = Vec::new();
    let lines: Vec<String> = answered
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let mut v: Value = serde_json::from_str(line).unwrap();
            if let Some(blank) = [(3, ""), (10, "  \n "), (20, "<think>hmm</think>")]
                .iter()
                .find_map(|&(at, text)| (at == i).then_some(text))
            {
                v["response"]["body"]["choices"][0]["message"]["content"] = blank.into();
                emptied.push(v["custom_id"].as_str().unwrap().to_string());
            }
            v.to_string()
        })
        .collect();
    let mut results = files.join("results-1.jsonl");
    std::fs::write(&results, lines.join("\n") + "\n").unwrap();
    let mut phases = 1;
    let summary = loop {
        let results_arg = results.display().to_string();
        let out = common::output(&s.config, &s.data, &["batch", "import", &id, &results_arg, "--json"]).await;
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let out = common::json_of(out);
        let Some(next) = out["requests"].as_str() else {
            break out;
        };
        requests = next.to_string();
        phases += 1;
        assert!(phases < 6, "{stderr}");
        let input = std::fs::read_to_string(&requests).unwrap();
        if phases == 2 {
            // The emptied requests are asked again, in the next phase.
            let asked: Vec<String> = input
                .lines()
                .map(|l| {
                    serde_json::from_str::<Value>(l).unwrap()["custom_id"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            for id in &emptied {
                assert!(asked.contains(id), "{id} asked again: {asked:?}");
            }
        }
        results = files.join(format!("results-{phases}.jsonl"));
        std::fs::write(&results, batch_output_for(&FakeConfig::default(), &input).unwrap()).unwrap();
    };
    assert_all_assessed(&summary);
    let journal = std::fs::read_to_string(session_dir(&s.data, &id).join("journal.jsonl")).unwrap();
    assert!(!journal.contains("item_failed"), "no item failed for good");
    assert_eq!(
        conclusions(&session_dir(&s.data, &id)),
        expected,
        "what streaming concludes"
    );
    assert_eq!(s.server.stats().requests, 0, "batch files send nothing");
}

/// What importing phase after phase left: each phase's requests (lines), each import's `--json`
/// summary, and the last import's exit code.
struct Imported {
    written: Vec<usize>,
    summaries: Vec<Value>,
    code: Option<i32>,
}

/// Hermione × `scale` × ER_batch begun in batch files mode (under `batches/` of the setup's dir):
/// the session's id and its first requests file.
async fn batch_files_run(s: &common::Setup, scale: &str) -> (String, String) {
    let dir_arg = s.dir.path().join("batches").display().to_string();
    let args = common::run_hermione(scale, "er-batch", &["--batch-files", &dir_arg, "--json"]);
    let first = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = first["session"].as_str().unwrap().to_string();
    (id, first["requests"].as_str().unwrap().to_string())
}

/// Answers the batch files session `id`'s phases, the first written to `requests`, with `answer`
/// (a phase's requests file's text gives its results file's text), importing each, until an import
/// writes no further phase; at most six.
async fn import_phases(
    s: &common::Setup,
    id: &str,
    mut requests: String,
    mut answer: impl FnMut(&str) -> String,
) -> Imported {
    let files = s.dir.path().join("batches");
    let (mut written, mut summaries) = (Vec::new(), Vec::new());
    loop {
        let phase = written.len() + 1;
        assert!(phase <= 6, "requests are not written out for ever");
        let input = std::fs::read_to_string(&requests).unwrap();
        written.push(input.lines().count());
        let path = files.join(format!("results-{phase}.jsonl"));
        std::fs::write(&path, answer(&input)).unwrap();
        let path_arg = path.display().to_string();
        let out = common::output(&s.config, &s.data, &["batch", "import", id, &path_arg, "--json"]).await;
        summaries.push(serde_json::from_slice::<Value>(&out.stdout).unwrap_or_default());
        match summaries.last().and_then(|v| v["requests"].as_str()) {
            Some(next) => requests = next.to_string(),
            None => {
                return Imported {
                    written,
                    summaries,
                    code: out.status.code(),
                };
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_a_batch_engine_always_answers_empty_fails_after_its_retries() {
    // Each import is a sitting of its own: the retries are counted across them, from the results
    // the session kept, or the request would be written out again for ever.
    let s = common::setup(FakeConfig::default(), "retry_base_ms = 1\nmax_retries = 2").await;
    let (id, requests) = batch_files_run(&s, "BFI").await;
    let mut blank: Option<String> = None;
    let imported = import_phases(&s, &id, requests, |input| {
        let answered = batch_output_for(&FakeConfig::default(), input).unwrap();
        let lines: Vec<String> = answered
            .lines()
            .map(|line| {
                let mut v: Value = serde_json::from_str(line).unwrap();
                let id = v["custom_id"].as_str().unwrap().to_string();
                let first_interview = blank.is_none() && id.starts_with("ic-");
                if first_interview || blank.as_deref() == Some(id.as_str()) {
                    blank.get_or_insert(id);
                    v["response"]["body"]["choices"][0]["message"]["content"] = "".into();
                }
                v.to_string()
            })
            .collect();
        lines.join("\n") + "\n"
    })
    .await;
    let journal = std::fs::read_to_string(session_dir(&s.data, &id).join("journal.jsonl")).unwrap();
    assert!(journal.contains("\"event\":\"item_failed\""), "{journal}");
    assert!(
        journal.contains("3 of 3 attempt(s)"),
        "the first and max_retries 2 more"
    );
    // Asked in three phases (each a phase of its own, its results kept), then failed; the judge's
    // phase follows.
    for phase in 1..=3 {
        let kept = session_dir(&s.data, &id).join(format!("batches/phase-{phase}.out.jsonl"));
        assert!(kept.exists(), "phase {phase}'s results kept");
    }
    assert_eq!(
        imported.written.len(),
        4,
        "three phases of interviews, then the judge's: {journal}"
    );
}

/// The results of a requests file as a batch engine gives them, the lines of `refused` (custom_id,
/// status) answered with that status's error instead.
fn refusing(input: &str, refused: &[(&str, u16)]) -> String {
    let answered = batch_output_for(&FakeConfig::default(), input).unwrap();
    answered
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).unwrap();
            let id = v["custom_id"].as_str().unwrap().to_string();
            if let Some((_, status)) = refused.iter().find(|(r, _)| *r == id) {
                v["response"] = serde_json::json!({
                    "status_code": status,
                    "body": {"error": {"message": format!("refused with {status}"), "type": "server_error"}}
                });
            }
            v.to_string() + "\n"
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_in_imported_results_are_retried_within_the_policy_then_fail_the_item() {
    // A 500 is worth retrying: asked again in the next phases, as many times as the policy allows
    // (counted across the imports, each a sitting of its own), then failed. A 400 is not: it fails
    // its item at the first import. Neither is written out for ever.
    let s = common::setup(FakeConfig::default(), "retry_base_ms = 1\nmax_retries = 2").await;
    let (id, requests) = batch_files_run(&s, "GSE").await;
    let input = std::fs::read_to_string(&requests).unwrap();
    let ids: Vec<String> = input
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["custom_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    // One line refused with 500, the nine others with 400: more of the same refusal than stop a
    // streamed run (a batch's come back at every sitting; each fails its item instead).
    let mut refusals: Vec<(&str, u16)> = ids.iter().map(|id| (id.as_str(), 400)).collect();
    refusals[0].1 = 500;
    let imported = import_phases(&s, &id, requests, |input| refusing(input, &refusals)).await;
    assert_eq!(imported.code, Some(1), "the run concludes with failed items");
    // Ten items, then the one refused with 500 twice more; GSE's one dimension fails with its
    // items, so no judge's phase.
    assert_eq!(imported.written, [10, 1, 1]);
    // Batch files send nothing: a refused line, like a reply, is an imported result, not a request.
    for summary in &imported.summaries {
        for row in summary["usage"].as_array().into_iter().flatten() {
            assert_eq!(row["requests"], 0, "{summary}");
        }
    }
    assert_eq!(
        imported.summaries[0]["usage"][0]["imported"], 10,
        "{:?}",
        imported.summaries
    );
    let journal = std::fs::read_to_string(session_dir(&s.data, &id).join("journal.jsonl")).unwrap();
    let failed: Vec<Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "item_failed")
        .collect();
    assert_eq!(failed.len(), 10, "each item failed once: {journal}");
    let errors: Vec<&str> = failed.iter().map(|e| e["error"].as_str().unwrap()).collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("the batch results file answered HTTP 400: refused with 400")),
        "an imported refusal names no server it never went to: {errors:?}"
    );
    assert!(!errors.iter().any(|e| e.contains("http://")), "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("HTTP 500") && e.contains("gave up after 3 attempts")),
        "{errors:?}"
    );
    // The last results given again: the run they went on with has finished, with failures. Not a
    // new sitting without a word: refused, nothing changed, and the resume that asks again named.
    let journal_path = session_dir(&s.data, &id).join("journal.jsonl");
    let before = std::fs::read(&journal_path).unwrap();
    let last = s.dir.path().join("batches/results-3.jsonl").display().to_string();
    let out = common::output(&s.config, &s.data, &["batch", "import", &id, &last]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("finished with failures; nothing was imported")
            && stderr.contains(&format!("incharacter run --resume {id}")),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&journal_path).unwrap(), before, "nothing appended");
}

/// A phase that asks again what the one before it asked has the same request ids: the earlier
/// phase's results file is refused for it, not taken as new results (its errors as new attempts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_phases_results_are_refused_for_a_phase_asking_the_same_requests() {
    let s = common::setup(FakeConfig::default(), "retry_base_ms = 1\nmax_retries = 2").await;
    let (id, mut requests) = batch_files_run(&s, "GSE").await;
    let files = s.dir.path().join("batches");
    let input = std::fs::read_to_string(&requests).unwrap();
    let line: Value = serde_json::from_str(input.lines().next().unwrap()).unwrap();
    let refused = line["custom_id"].as_str().unwrap().to_string();
    // Phases 1 and 2: the same request refused with 500, so phase 3 asks it once more.
    for phase in 1..=2 {
        let input = std::fs::read_to_string(&requests).unwrap();
        let path = files.join(format!("results-{phase}.jsonl"));
        std::fs::write(&path, refusing(&input, &[(refused.as_str(), 500)])).unwrap();
        let path_arg = path.display().to_string();
        let out =
            common::json_of(common::output(&s.config, &s.data, &["batch", "import", &id, &path_arg, "--json"]).await);
        requests = out["requests"].as_str().expect("a next phase").to_string();
    }
    let asked: Value =
        serde_json::from_str(std::fs::read_to_string(&requests).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(asked["custom_id"], refused.as_str(), "phase 3 asks what phase 2 asked");
    let journal = session_dir(&s.data, &id).join("journal.jsonl");
    let before = std::fs::read(&journal).unwrap();
    let again = files.join("results-2.jsonl").display().to_string();
    let out = common::output(&s.config, &s.data, &["batch", "import", &id, &again]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("these are phase 2's results, imported already"),
        "{stderr}"
    );
    // The same file spelled from another folder is the same file.
    let mut c = common::command(&s.config, &s.data, &["batch", "import", &id, "results-2.jsonl"]);
    c.current_dir(&files);
    let out = tokio::task::spawn_blocking(move || c.output().unwrap()).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("these are phase 2's results"), "{stderr}");
    // Nor through `..`, a link to it, or another hard link.
    std::os::unix::fs::symlink(files.join("results-2.jsonl"), files.join("link.jsonl")).unwrap();
    std::fs::hard_link(files.join("results-2.jsonl"), files.join("hard.jsonl")).unwrap();
    // Nor moved elsewhere (after the links to it were made).
    std::fs::create_dir_all(s.dir.path().join("elsewhere")).unwrap();
    std::fs::rename(files.join("hard.jsonl"), s.dir.path().join("elsewhere/moved.jsonl")).unwrap();
    for other in [
        files.join("../batches/results-2.jsonl"),
        files.join("link.jsonl"),
        s.dir.path().join("elsewhere/moved.jsonl"),
    ] {
        let other = other.display().to_string();
        let out = common::output(&s.config, &s.data, &["batch", "import", &id, &other]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{other}: {stderr}");
        assert!(stderr.contains("these are phase 2's results"), "{other}: {stderr}");
    }
    assert_eq!(std::fs::read(&journal).unwrap(), before, "nothing appended");
    // Written anew (an engine that answers alike, to the byte, into the one file it writes), it is
    // phase 3's results.
    let file = std::fs::File::options()
        .write(true)
        .open(files.join("results-2.jsonl"))
        .unwrap();
    let written = file.metadata().unwrap().modified().unwrap();
    file.set_modified(written + std::time::Duration::from_secs(1)).unwrap();
    let out = common::output(&s.config, &s.data, &["batch", "import", &id, &again, "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(2), "{stderr}");
    let journal = std::fs::read_to_string(&journal).unwrap();
    assert!(
        journal.contains("\"step\":\"imported\",\"phase\":3"),
        "phase 3 imported: {stderr}"
    );
}

/// The `usage` row of `role` in a run's `--json` summary.
fn usage_of<'a>(summary: &'a Value, role: &str) -> &'a Value {
    summary["usage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["role"] == role)
        .unwrap_or_else(|| panic!("no {role} usage: {summary}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_two_methods_ask_alike_is_sent_and_counted_once() {
    // CABIN's dimensions hold four items each: ER_batch and ER_all send the same prompt for each of
    // its 41. Streamed, the second waits for the first and is read from the cache; in a batch file
    // it is one line, counted once, its tokens once.
    let plan = common::run_hermione("CABIN", "er-batch,er-all", &["--json"]);
    let s = common::setup(FakeConfig::default(), "max_concurrency = 8").await;
    let summary = common::json_of(common::output(&s.config, &s.data, &plan).await);
    let judge = usage_of(&summary, "judge");
    assert_eq!(
        (judge["requests"].as_u64(), judge["cache_hits"].as_u64()),
        (Some(41), Some(41)),
        "{judge}"
    );
    assert_eq!(s.server.stats().requests, 164 + 41, "each prompt sent once");
    let streamed_tokens = judge["prompt_tokens"].as_u64().unwrap();

    let s = common::setup(FakeConfig::default(), "").await;
    let files = s.dir.path().join("batches");
    let dir_arg = files.display().to_string();
    let args = common::run_hermione("CABIN", "er-batch,er-all", &["--batch-files", &dir_arg, "--json"]);
    let first = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = first["session"].as_str().unwrap().to_string();
    let requests = first["requests"].as_str().unwrap().to_string();
    let imported = import_phases(&s, &id, requests, |input| {
        batch_output_for(&FakeConfig::default(), input).unwrap()
    })
    .await;
    assert_eq!(imported.written, [164, 41], "one line a prompt");
    let after_interviews = &imported.summaries[0];
    assert_eq!(
        usage_of(after_interviews, "judge")["in_batch_file"].as_u64(),
        Some(41),
        "{after_interviews}"
    );
    let judge = usage_of(imported.summaries.last().unwrap(), "judge");
    assert_eq!(judge["imported"].as_u64(), Some(41), "{judge}");
    assert_eq!(
        judge["prompt_tokens"].as_u64(),
        Some(streamed_tokens),
        "billed once, as streamed: {judge}"
    );
}

/// A session's journal cut back to its first record: what a kill leaves just after the session began,
/// before the run wrote or sent any batch.
fn cut_to_first_record(data: &Path, id: &str) {
    let journal = session_dir(data, id).join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let first = text.lines().next().unwrap();
    std::fs::write(&journal, format!("{first}\n")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_run_stopped_before_its_first_batch_goes_on_in_its_mode() {
    // Batch files: the resume writes the phase's requests file again and sends nothing.
    let s = common::setup(FakeConfig::default(), "").await;
    let files = s.dir.path().join("batches");
    let dir_arg = files.display().to_string();
    let mut args = RUN.to_vec();
    args.extend(["--batch-files", &dir_arg, "--json"]);
    let first = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = first["session"].as_str().unwrap().to_string();
    let requests = first["requests"].as_str().unwrap().to_string();
    std::fs::remove_file(&requests).unwrap();
    cut_to_first_record(&s.data, &id);
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id, "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let again = common::json_of(out);
    assert_eq!(again["requests"].as_str(), Some(requests.as_str()), "{again} {stderr}");
    assert_eq!(std::fs::read_to_string(&requests).unwrap().lines().count(), 2 * 44);
    assert_eq!(s.server.stats().requests, 0, "batch files send nothing: {stderr}");

    // The Batch API: the resume submits its batches, and streams nothing (no reply from the cache).
    let s = common::setup(FakeConfig::default(), "batch_poll_ms = 5").await;
    let config = std::fs::read_to_string(&s.config).unwrap();
    std::fs::write(&s.config, format!("cache = \"off\"\n{config}")).unwrap();
    let mut args = RUN.to_vec();
    args.extend(["--batch", "--json"]);
    let summary = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = summary["session"].as_str().unwrap().to_string();
    cut_to_first_record(&s.data, &id);
    let before = s.server.stats();
    let out = common::output(&s.config, &s.data, &["run", "--resume", &id, "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let summary = common::json_of(out);
    assert_all_assessed(&summary);
    let stats = s.server.stats();
    assert_eq!(stats.requests, 0, "nothing streamed: {stats:?} {stderr}");
    assert_eq!(
        stats.batches,
        before.batches + 2,
        "its two phases as batches again: {stats:?}"
    );
}

/// A provider's prices at a cent per token: any phase costs dollars.
const CENT_A_TOKEN: &str = "price_in_per_mtok = 10000\nprice_out_per_mtok = 10000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_cap_stops_between_phases_after_journaling_every_reply_the_batch_paid_for() {
    let expected = streamed().await;
    let s = common::setup(FakeConfig::default(), &format!("batch_poll_ms = 5\n{CENT_A_TOKEN}")).await;
    // The interviews' phase is estimated below the cap (with replies longer than the fake's),
    // the judge's, on top of what they cost, above it.
    let mut args = RUN.to_vec();
    args.extend(["--batch", "--max-cost", "500", "--yes"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("batch phase 2 (") && stderr.contains("past its cap of $500.00; it was not sent"),
        "{stderr}"
    );
    assert_eq!(
        s.server.stats().batches,
        1,
        "the judge's phase did not go out: {stderr}"
    );
    let (dir, answered) = common::only_session(&s.data);
    assert_eq!(answered, 88, "every reply of the paid batch is journaled");
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(journal.contains(r#""event":"stopped""#), "why it stopped is journaled");
    // What it used is what went out: the interviews' batch, not the judge's phase held back.
    assert!(stderr.contains("used: rpa fake: 88 requests"), "{stderr}");
    assert!(!stderr.contains("used: judge"), "{stderr}");

    // Resumed with a cap that holds: the journaled answers are not asked again (no interview
    // request this sitting), and the judge's phase goes out.
    let id = dir.file_name().unwrap().to_string_lossy().to_string();
    let out = common::output(
        &s.config,
        &s.data,
        &["run", "--resume", &id, "--max-cost", "1000000", "--json"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !stderr.contains("used: rpa"),
        "no interview request this sitting: {stderr}"
    );
    let summary = common::json_of(out);
    assert_all_assessed(&summary);
    assert_eq!(conclusions(&dir), expected);
}

/// Batch files mode: what a sitting writes for the user's engine is said (`used:`, and `usage` in
/// the JSON), the results it imports are priced as the config says, and a cap they reach stops
/// the run before the next phase is written (the stop journaled); a resume with a cap that holds
/// writes that phase and the run ends as the streamed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_batch_results_are_priced_and_a_cost_cap_holds_the_next_phase() {
    let expected = streamed().await;
    let s = common::setup(FakeConfig::default(), CENT_A_TOKEN).await;
    let files = s.dir.path().join("batches");
    let dir_arg = files.display().to_string();
    let mut args = RUN.to_vec();
    // Written below the cap (its estimate allows for longer replies than the fake's).
    args.extend(["--batch-files", &dir_arg, "--max-cost", "500", "--yes", "--json"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        stderr.contains("used: rpa fake: 0 requests, 0 tokens in, 0 out, 88 written to a batch file"),
        "{stderr}"
    );
    let first = common::json_of(out);
    assert_eq!(first["usage"][0]["in_batch_file"], 88, "{first}");
    let id = first["session"].as_str().unwrap().to_string();
    let input = std::fs::read_to_string(first["requests"].as_str().unwrap()).unwrap();
    let results = files.join("results-1.jsonl");
    std::fs::write(&results, batch_output_for(&FakeConfig::default(), &input).unwrap()).unwrap();
    let results_arg = results.display().to_string();
    let written = || std::fs::read_dir(&files).unwrap().count();
    let before = written();
    let out = common::output(
        &s.config,
        &s.data,
        &["batch", "import", &id, &results_arg, "--max-cost", "20"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("reaching its cap of $20.00"), "{stderr}");
    assert!(stderr.contains("88 from imported batch results, $"), "{stderr}");
    assert!(
        !stderr.contains("0 tokens in, 0 out, 88 from imported"),
        "priced: {stderr}"
    );
    assert_eq!(written(), before, "the judge's phase was not written");
    let journal = std::fs::read_to_string(session_dir(&s.data, &id).join("journal.jsonl")).unwrap();
    assert!(journal.contains(r#""event":"stopped""#), "why it stopped is journaled");

    // Resumed with a cap that holds: the judge's phase is written, then imported to the end.
    let out = common::output(
        &s.config,
        &s.data,
        &["run", "--resume", &id, "--max-cost", "1000000", "--json"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("used: rpa"), "no interview asked again: {stderr}");
    let next = common::json_of(out);
    let input = std::fs::read_to_string(next["requests"].as_str().unwrap()).unwrap();
    std::fs::write(&results, batch_output_for(&FakeConfig::default(), &input).unwrap()).unwrap();
    let summary =
        common::json_of(common::output(&s.config, &s.data, &["batch", "import", &id, &results_arg, "--json"]).await);
    assert_all_assessed(&summary);
    assert_eq!(conclusions(&session_dir(&s.data, &id)), expected);
    assert_eq!(s.server.stats().requests, 0, "batch files send nothing");
}

/// A `--batch` run of [`RUN`] on a server behaving as `fake` (batches polled every 5 ms, `extra`
/// more provider lines), which fails: the setup and what it printed.
async fn failed_batch_run(fake: FakeConfig, extra: &str) -> (common::Setup, String) {
    let s = common::setup(fake, &format!("batch_poll_ms = 5\n{extra}")).await;
    let mut args = RUN.to_vec();
    args.extend(["--batch", "--yes"]);
    let out = common::output(&s.config, &s.data, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    (s, stderr)
}

/// A phase whose upload fails never became a batch: its parked requests are not counted as used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_upload_fails_counts_no_request() {
    let fake = FakeConfig {
        fail_all: true,
        ..FakeConfig::default()
    };
    let (s, stderr) = failed_batch_run(fake, "max_retries = 0").await;
    assert!(
        stderr.contains("upload the batch file"),
        "the failure is named: {stderr}"
    );
    assert!(
        !stderr.contains("used: "),
        "nothing went out, nothing was used: {stderr}"
    );
    let (dir, answered) = common::only_session(&s.data);
    assert_eq!(answered, 0);
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    assert!(!journal.contains(r#""step":"uploaded""#), "{journal}");
}

/// Accounting: a reply read from results kept in the session is not billed again; one a batch
/// followed this sitting returned is; one imported from the user's engine is no request of the
/// run's, but its tokens and their cost are counted (the cost cap holds them).
#[tokio::test]
async fn batch_results_kept_from_an_earlier_sitting_are_neither_a_request_nor_a_cost_again() {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use incharacter::config::{CacheMode, ProviderConfig, ProviderKind};
    use incharacter::llm::batch::{self, BatchTransport, Hub, Reply};
    use incharacter::llm::client::{Came, Client, Shared};
    use incharacter::llm::{ChatMessage, ChatRequest, Role, Usage, complete};
    let mut config = ProviderConfig::new("batchy", ProviderKind::Openai, "http://batchy/v1", "m");
    (config.price_in_per_mtok, config.price_out_per_mtok) = (1e6, 1e6);
    let hub = Arc::new(Hub::default());
    let shared = Shared::new(4, None, CacheMode::Off, 1);
    let c = Client::new(
        Arc::new(BatchTransport::new(
            hub.clone(),
            config.clone(),
            false,
            shared.accounting.clone(),
        )),
        config.clone(),
        shared,
    );
    let answer = |text: &str| {
        Ok(Reply {
            text: text.into(),
            usage: Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
            }),
            finish_reason: Some("stop".into()),
            choices: Vec::new(),
            came: Came::Sent,
        })
    };
    let mut followed = ChatRequest::new(vec![ChatMessage::user("Rate the answer.")]);
    followed.meta.role = Role::Judge;
    let mut kept = ChatRequest::new(vec![ChatMessage::user("Are you talkative?")]);
    kept.meta.role = Role::Rpa;
    let id = |r: &ChatRequest| batch::custom_id(&config.base_url, &config.model, r);
    let mut imported = ChatRequest::new(vec![ChatMessage::user("Describe the scene.")]);
    imported.meta.role = Role::Observer;
    hub.load(&BTreeMap::from([(id(&kept), answer("Kept."))]), Came::Kept);
    hub.load(&BTreeMap::from([(id(&followed), answer("Followed."))]), Came::Sent);
    hub.load(&BTreeMap::from([(id(&imported), answer("Imported."))]), Came::Imported);
    assert_eq!(complete(&c, kept).await.unwrap().text, "Kept.");
    assert_eq!(complete(&c, followed).await.unwrap().text, "Followed.");
    assert_eq!(complete(&c, imported).await.unwrap().text, "Imported.");
    let snapshot = c.accounting().snapshot();
    let rpa = snapshot.by_provider_role[&("batchy".to_string(), Role::Rpa)];
    assert_eq!(
        (rpa.requests, rpa.kept, rpa.cost),
        (0, 1, 0.0),
        "paid for in its own sitting"
    );
    let judge = snapshot.by_provider_role[&("batchy".to_string(), Role::Judge)];
    assert_eq!(
        (judge.requests, judge.kept, judge.cost),
        (1, 0, 5.0),
        "its batch ended in this one"
    );
    let observer = snapshot.by_provider_role[&("batchy".to_string(), Role::Observer)];
    assert_eq!(
        (
            observer.requests,
            observer.imported,
            observer.prompt_tokens,
            observer.cost
        ),
        (0, 1, 3, 5.0),
        "made by the user's engine, priced as the config says"
    );
    let lines = snapshot.lines().join("\n");
    assert!(
        lines.contains("rpa batchy: 0 requests, 0 tokens in, 0 out, 1 from kept batch results"),
        "{lines}"
    );
    assert!(
        lines.contains("observer batchy: 0 requests, 3 tokens in, 2 out, 1 from imported batch results, $5.0000"),
        "{lines}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_missing_some_requests_are_taken_and_the_rest_said_to_go_out_again() {
    let s = common::setup(FakeConfig::default(), "").await;
    let files = s.dir.path().join("batches");
    let dir_arg = files.display().to_string();
    let args = common::run_hermione("GSE", "er-batch", &["--batch-files", &dir_arg, "--json"]);
    let first = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = first["session"].as_str().unwrap().to_string();
    let input = std::fs::read_to_string(first["requests"].as_str().unwrap()).unwrap();
    let answered = batch_output_for(&FakeConfig::default(), &input).unwrap();
    let partial: String = answered.lines().skip(3).map(|l| format!("{l}\n")).collect();
    let path = files.join("partial.jsonl");
    std::fs::write(&path, partial).unwrap();
    let path_arg = path.display().to_string();
    let out = common::output(&s.config, &s.data, &["batch", "import", &id, &path_arg, "--json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let next = common::json_of(out);
    assert!(
        stderr.contains("batch phase 1: 3 of its 10 requests have no result in") && stderr.contains("partial.jsonl"),
        "{stderr}"
    );
    let again = std::fs::read_to_string(next["requests"].as_str().unwrap()).unwrap();
    assert_eq!(again.lines().count(), 3, "the three go out again");
}

/// A phase sent to two providers, one of whose shares fails: the other's batch ended and was paid
/// for, so its answers are journaled and counted in the sitting that read them, not left for a
/// resume to take as kept results no request paid for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_whose_other_share_failed_still_journals_and_counts_the_share_that_came_back() {
    let good = incharacter_testkit::fake_openai::FakeServer::start(FakeConfig::default())
        .await
        .unwrap();
    let broken = incharacter_testkit::fake_openai::FakeServer::start(FakeConfig {
        fail_all: true,
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let data = dir.path().join("data");
    let provider = |name: &str, server: &incharacter_testkit::fake_openai::FakeServer| {
        format!(
            "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"fake-model\"\nbatch_poll_ms = 5\nmax_retries = 0\n\n",
            server.base_url()
        )
    };
    std::fs::write(
        &config,
        provider("good", &good) + &provider("broken", &broken) + "[roles]\nrpa = \"good\"\njudge = \"good\"\n",
    )
    .unwrap();
    // Hermione's answers in the cache: in the batch run her interview is read from it at once, so
    // the first phase holds her judge's requests (the broken provider's share) beside Snape's
    // interview (the good one's).
    let first = common::output(&config, &data, &common::run_hermione("GSE", "er-batch", &[])).await;
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let both = "run --characters hermione-en,snape-en --scales GSE --methods er-batch --judge broken --batch --yes";
    let out = common::output(&config, &data, &both.split(' ').collect::<Vec<_>>()).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("broken"), "the failed share is named: {stderr}");
    let sessions: Vec<std::path::PathBuf> = std::fs::read_dir(data.join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let journal = sessions
        .iter()
        .map(|p| std::fs::read_to_string(p.join("journal.jsonl")).unwrap())
        .find(|j| j.contains(r#""step":"ended""#))
        .expect("the batch session");
    let snape = journal
        .lines()
        .filter(|l| l.contains(r#""event":"item_answered""#) && l.contains("snape-en"))
        .count();
    assert_eq!(snape, 10, "Snape's answers came back and are journaled: {journal}");
    assert!(
        stderr.contains("used: rpa") && stderr.contains("10 requests"),
        "the good provider's batch lines are this sitting's requests: {stderr}"
    );
    assert_eq!(good.stats().batch_lines, 10, "{stderr}");

    // The broken share's provider mended: the resume asks only what has no answer yet.
    let broken_url = broken.base_url().to_string();
    let mended = std::fs::read_to_string(&config)
        .unwrap()
        .replace(&broken_url, &good.base_url());
    std::fs::write(&config, mended).unwrap();
    let session = sessions
        .iter()
        .find(|p| {
            std::fs::read_to_string(p.join("journal.jsonl"))
                .unwrap()
                .contains(r#""step":"ended""#)
        })
        .unwrap();
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    let resumed = common::output(&config, &data, &["run", "--resume", &id]).await;
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let journal = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    let answered = journal
        .lines()
        .filter(|l| l.contains(r#""event":"item_answered""#))
        .count();
    assert_eq!(answered, 20, "the answers are not asked again: {journal}");
    // Then Snape's judge's three calls (Hermione's, asked of the same server before, are cached).
    assert_eq!(good.stats().batch_lines, 13, "{journal}");
}

/// A batch the provider failed with no results (past its enqueued-token limit) is journaled as
/// ended: the resume sends its requests again in a new phase, instead of following, at every
/// resume, a batch that will never have results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_failed_with_no_results_is_asked_again_by_the_resume() {
    let fake = FakeConfig {
        fail_batches: true,
        ..FakeConfig::default()
    };
    let (s, stderr) = failed_batch_run(fake, "").await;
    assert!(
        stderr.contains("Enqueued token limit"),
        "the provider's reason: {stderr}"
    );
    let (session, answered) = common::only_session(&s.data);
    assert_eq!(answered, 0);
    let journal = std::fs::read_to_string(session.join("journal.jsonl")).unwrap();
    assert!(
        journal.contains(r#""step":"ended""#) && journal.contains(r#""status":"failed""#),
        "{journal}"
    );

    // The same provider, mended (another server, as after the limit was raised).
    let good = incharacter_testkit::fake_openai::FakeServer::start(FakeConfig::default())
        .await
        .unwrap();
    let mended = std::fs::read_to_string(&s.config)
        .unwrap()
        .replace(&s.server.base_url(), &good.base_url());
    std::fs::write(&s.config, mended).unwrap();
    let id = session.file_name().unwrap().to_string_lossy().to_string();
    let resumed = common::output(&s.config, &s.data, &["run", "--resume", &id, "--json"]).await;
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert_all_assessed(&common::json_of(resumed));
    assert_eq!(conclusions(&session), streamed().await);
}

/// A batch the provider no longer knows (HTTP 404: a server restarted, a batch deleted) is not a dead
/// end: the resume that meets it journals it as ended with no results, and the next sends its
/// requests again, ending as a streamed run does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_provider_no_longer_knows_is_asked_again() {
    let s = common::setup(FakeConfig::default(), "batch_poll_ms = 5\nmax_concurrency = 8").await;
    let mut args = RUN.to_vec();
    args.extend(["--batch", "--yes", "--json"]);
    let summary = common::json_of(common::output(&s.config, &s.data, &args).await);
    let id = summary["session"].as_str().unwrap().to_string();
    let session = session_dir(&s.data, &id);
    // As if killed while the first batch ran: the journal up to its submission.
    let path = session.join("journal.jsonl");
    let journal = std::fs::read_to_string(&path).unwrap();
    let submitted = journal.find(r#""step":"submitted""#).unwrap();
    let end = submitted + journal[submitted..].find('\n').unwrap() + 1;
    std::fs::write(&path, &journal[..end]).unwrap();
    // Another server, which never heard of that batch.
    let other = incharacter_testkit::fake_openai::FakeServer::start(FakeConfig::default())
        .await
        .unwrap();
    let moved = std::fs::read_to_string(&s.config)
        .unwrap()
        .replace(&s.server.base_url(), &other.base_url());
    std::fs::write(&s.config, moved).unwrap();
    let first = common::output(&s.config, &s.data, &["run", "--resume", &id]).await;
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_ne!(first.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("no longer has batch"), "{stderr}");
    let journal = std::fs::read_to_string(&path).unwrap();
    assert!(journal.contains(r#""status":"gone""#), "{journal}");
    let second = common::output(&s.config, &s.data, &["run", "--resume", &id, "--json"]).await;
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_all_assessed(&common::json_of(second));
    assert_eq!(conclusions(&session), streamed().await);
}
