//! `model fetch | list | add | remove`: the embedded model's weights.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use super::table::Table;
use super::{BenchCommand, ModelCommand, input_error};
use crate::llm::local;

/// `bench local` and `bench ratio`.
pub fn bench_command(command: BenchCommand, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match command {
        BenchCommand::Local {
            name,
            tokens,
            runs,
            prompt_tokens,
            json,
            parallel,
        } => bench(&name, (tokens, prompt_tokens), runs, json, &parallel, out),
        BenchCommand::Ratio { ours, reference, json } => ratio(&ours, &reference, json, out),
    }
}

/// `model fetch`, `list`, `add`, `remove` and `continue`.
pub fn model_command(command: ModelCommand, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match command {
        ModelCommand::Fetch { name } => fetch(&name, out),
        ModelCommand::List { json } => list(json, out),
        ModelCommand::Add { path, name, replace } => add(&path, name.as_deref(), replace, out),
        ModelCommand::Remove { name } => remove(&name, out),
        ModelCommand::Continue {
            model,
            text,
            ids,
            tokens,
            json,
        } => continue_greedy(&model, text.as_deref(), ids, tokens, json, out),
    }
}

fn models_dir() -> anyhow::Result<std::path::PathBuf> {
    let data = crate::paths::data_dir().ok_or_else(|| input_error("no data dir: set INCHARACTER_DATA_DIR"))?;
    Ok(local::models_dir(&data))
}

pub fn fetch(name: &str, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let dir = models_dir()?;
    let mut failed = None;
    let path = local::fetch(&dir, name, &mut |line| {
        if let Err(e) = writeln!(out, "{line}").and_then(|_| out.flush()) {
            failed = Some(e);
        }
    })
    // The error says whose fault it is: an unknown name is the user's, a download that fails the
    // machine's or the network's.
    .map_err(anyhow::Error::new)?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    writeln!(out, "ready: {} ({})", name, local::shown(&path))?;
    Ok(ExitCode::SUCCESS)
}

/// `model list`: every known model (fetched or not) and every registered file.
pub fn list(json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let dir = models_dir()?;
    let present = local::list(&dir).map_err(anyhow::Error::new)?;
    for m in local::shadowed(&dir).map_err(anyhow::Error::new)? {
        crate::note!(
            "warning: the registered {} ({}) has a known model's name and is not used: add it again with model add \
             FILE --name ANOTHER",
            m.name,
            local::shown(&m.path)
        );
    }
    let mut rows = Vec::new();
    for known in local::KNOWN {
        let fetched = present.iter().find(|m| m.name == known.name);
        // As every use checks it (hashed again when its stamp is another, and the stamp then kept).
        let changed = fetched
            .map(|m| local::resolve_entry(&dir, &m.name).map(drop))
            .transpose();
        if let Err(e) = &changed {
            crate::note!("warning: {e}");
        }
        rows.push(serde_json::json!({
            "name": known.name,
            "bytes": known.bytes,
            "sha256": known.sha256,
            "fetched": fetched.is_some(),
            "changed": changed.is_err(),
            "path": fetched.map(|m| m.path.display().to_string()),
            "architecture": known.architecture,
            "license": known.license,
            "good_for": known.good_for,
        }));
    }
    for m in present
        .iter()
        .filter(|m| !local::KNOWN.iter().any(|k| k.name == m.name))
    {
        // A file changed since it was added is not the model its name stands for (it is refused
        // where it would be used; the reason is said here once).
        let changed = m.path.is_file() && m.unchanged().inspect_err(|e| crate::note!("warning: {e}")).is_err();
        rows.push(serde_json::json!({
            "name": m.name,
            "bytes": m.identity.as_ref().map(|i| i.bytes).or_else(|| std::fs::metadata(&m.path).ok().map(|md| md.len())),
            "sha256": m.identity.as_ref().map(|i| i.sha256.clone()),
            "fetched": m.path.is_file(),
            "changed": changed,
            "path": m.path.display().to_string(),
            "architecture": m.architecture,
            "license": null,
            "good_for": "registered by you (`model add`)",
        }));
    }
    if json {
        writeln!(out, "{}", crate::text::json_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new(&["name", "architecture", ">MiB", "where", "good for"]);
    for r in &rows {
        let text = |key: &str| r[key].as_str().unwrap_or("").to_string();
        let place = match r["path"].as_str().map(|p| local::shown(Path::new(p))) {
            Some(path) if r["changed"] == true => format!("changed (not the file it was): {path}"),
            Some(path) if r["fetched"] == true => path.to_string(),
            Some(path) => format!("missing: {path}"),
            None => format!("not fetched: incharacter model fetch --name {}", text("name")),
        };
        t.row(vec![
            text("name"),
            text("architecture"),
            r["bytes"].as_u64().map_or("?".into(), |b| (b >> 20).to_string()),
            place,
            text("good_for"),
        ]);
    }
    write!(out, "{}", t.render())?;
    for known in local::KNOWN {
        writeln!(out, "{}: {}", known.name, known.license)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn add(path: &Path, name: Option<&str>, replace: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let dir = models_dir()?;
    let name = match name {
        Some(n) => n.to_string(),
        // The file's name, lower case, each run of other characters than a model name takes as '-'.
        None => {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            let named: Vec<String> = stem
                .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
                .filter(|part| !part.is_empty())
                .map(str::to_string)
                .collect();
            let named = named.join("-").trim_start_matches(['-', '_', '.']).to_string();
            if named.is_empty() {
                "model".into()
            } else {
                named.chars().take(64).collect()
            }
        }
    };
    let (entry, facts, running) = local::add(&dir, path, &name, replace).map_err(registry_error)?;
    writeln!(
        out,
        "registered {} ({}): {}",
        entry.name,
        entry.architecture,
        local::shown(&entry.path),
    )?;
    writeln!(
        out,
        "architecture {}, quantization {}, tokenizer {}, context {}, chat template: {}",
        facts.architecture,
        facts.quantization,
        facts.tokenizer,
        // What it runs with, which a cap (a llama file's, the engine's) may make less than it says.
        match facts.context {
            Some(c) if c as usize == running => format!("{c} tokens"),
            Some(c) => format!("{c} tokens (run with {running})"),
            None => format!("not stated ({running} assumed)"),
        },
        match (&facts.chat_template_problem, facts.chat_template) {
            (Some(problem), _) => format!(
                "the file's own cannot render a conversation ({}), so ChatML is used",
                crate::text::inert(problem)
            ),
            (None, true) => "the file's own".into(),
            (None, false) => "none in the file (ChatML assumed)".into(),
        }
    )?;
    writeln!(
        out,
        "use it with a provider: kind = \"local\", model = \"{}\"",
        entry.name
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `model remove NAME`.
/// A registry change refused: the machine's failure (the data dir cannot be written, exit 1), else
/// what the user gave (exit 2).
fn registry_error(e: crate::llm::LlmError) -> anyhow::Error {
    match e {
        crate::llm::LlmError::Model(said) => anyhow::anyhow!(said),
        other => input_error(other.to_string()),
    }
}

pub fn remove(name: &str, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let dir = models_dir()?;
    match local::remove(&dir, name).map_err(registry_error)? {
        local::Removed::Unregistered(path) => writeln!(
            out,
            "unregistered {name}; the file is left where it was: {}",
            local::shown(&path)
        )?,
        local::Removed::Deleted { folder, bytes } => writeln!(
            out,
            "removed {name} ({} MiB freed: {}); incharacter model fetch --name {name} brings it back",
            bytes >> 20,
            local::shown(&folder)
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `model continue`: the greedy continuation of a text or of token ids, as ids (and text).
pub fn continue_greedy(
    model: &str,
    text: Option<&str>,
    ids: Option<Vec<u32>>,
    tokens: usize,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let path = if Path::new(model).is_file() {
        Path::new(model).to_path_buf()
    } else {
        local::resolve(&models_dir()?, model).map_err(|e| input_error(e.to_string()))?
    };
    let engine = local::LocalModel::load(model, &path).map_err(|e| input_error(e.to_string()))?;
    let prompt = match (ids, text) {
        (Some(ids), _) => ids,
        (None, Some(text)) => engine.encode(text).map_err(|e| input_error(e.to_string()))?,
        (None, None) => return Err(input_error("give a text or --ids")),
    };
    if prompt.is_empty() {
        return Err(input_error("the prompt has no tokens"));
    }
    // Refused before the first step, not after minutes of them.
    if prompt.len().saturating_add(tokens) > engine.context() {
        return Err(input_error(format!(
            "a prompt of {} tokens and {tokens} more do not fit in the model's context of {}: ask for at most {} \
             (--tokens)",
            prompt.len(),
            engine.context(),
            engine.context().saturating_sub(prompt.len())
        )));
    }
    let generated = engine.greedy(&prompt, tokens).map_err(|e| input_error(e.to_string()))?;
    let text = engine.text_of(&generated);
    if json {
        let value = serde_json::json!({"prompt": prompt, "generated": generated, "text": text});
        writeln!(out, "{}", crate::text::json_for_terminal(&value.to_string()))?;
    } else {
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        writeln!(out, "prompt ids:    {}", list(&prompt))?;
        writeln!(out, "generated ids: {}", list(&generated))?;
        writeln!(out, "text: {}", text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prefill and decode speed of a local model, measured through the same code path as requests.
/// `sizes`: tokens to decode, and at least how many the prompt holds (about 220 without).
pub fn bench(
    name: &str,
    sizes: (u32, Option<usize>),
    runs: u32,
    json: bool,
    parallel: &[u32],
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    // With --json the report is one object on stdout, and the lines along the way go to stderr.
    let mut stderr = crate::text::Safe::new(std::io::stderr());
    let (log, out): (&mut dyn Write, &mut dyn Write) = if json {
        (&mut stderr, out)
    } else {
        (out, &mut std::io::sink())
    };
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    let dir = models_dir()?;
    let path = local::resolve(&dir, name).map_err(|e| input_error(e.to_string()))?;
    let started = Instant::now();
    // Throughput is measured on whole prompts: a cached system prompt would skip part of the prefill.
    let model = local::LocalModel::load(name, &path)
        .map_err(|e| input_error(e.to_string()))?
        .without_prefix_cache();
    writeln!(
        log,
        "{name}: loaded in {:.2} s ({})",
        started.elapsed().as_secs_f64(),
        local::shown(&path)
    )?;
    let (tokens, at_least) = sizes;
    widths_fit(&model, parallel, tokens)?;
    let passage = bench_passage(&model, tokens, at_least)?;
    let mut prefill = Vec::new();
    let mut decode = Vec::new();
    let mut constrained = Vec::new();
    let mut choosing = [(0u64, 0u64); 2];
    let mut prompt_len = 0;
    let mut decoded = Vec::new();
    // Free runs, then as many constrained by a schema: one string about as long as the free replies.
    for run in 0..2 * runs {
        let schema_run = run >= runs;
        let mut request = story_request(&passage, tokens);
        request.sampling.temperature = Some(0.8);
        request.sampling.seed = Some(u64::from(run));
        if schema_run {
            request.schema = Some(crate::llm::ResponseSchema::new(
                "story",
                serde_json::json!({"type": "object", "properties": {
                    "story": {"type": "string", "maxLength": 3 * tokens}}, "required": ["story"]}),
            ));
        }
        let before = model.choosing();
        let prompt_tokens = model.prompt_tokens(&request).map_err(|e| input_error(e.to_string()))?;
        if !schema_run {
            // The report's prompt is the free runs' (a schema is described in the system message).
            prompt_len = prompt_tokens;
        }
        let t0 = Instant::now();
        let mut first = None;
        let mut pieces = 0usize;
        let finished = model
            .generate(&request, &AtomicBool::new(false), &mut |_| {
                first.get_or_insert_with(|| t0.elapsed());
                pieces += 1;
            })
            .map_err(|e| anyhow::anyhow!("{}", e.describe("the local model")))?;
        let total = t0.elapsed();
        let generated = finished.usage.map_or(0, |u| u.completion_tokens);
        let first = first.unwrap_or(total);
        let after = model.choosing();
        let slot = &mut choosing[usize::from(schema_run)];
        *slot = (slot.0 + after.0 - before.0, slot.1 + after.1 - before.1);
        // The first piece appears after the prompt's forward pass and one sampled token (or a few,
        // when the first tokens are not whole text yet): too few tokens after it time nothing.
        let speed = (generated >= TIMED_TOKENS).then(|| (generated - 1) as f64 / (total - first).as_secs_f64());
        if schema_run {
            constrained.extend(speed);
        } else {
            prefill.push(prompt_tokens as f64 / first.as_secs_f64());
            decode.extend(speed);
            decoded.push(generated as f64);
        }
        writeln!(
            log,
            "run {}{}: prompt {prompt_tokens} tokens, first piece after {:.0} ms, {generated} tokens in {:.2} s",
            run + 1,
            if schema_run { " (schema)" } else { "" },
            first.as_secs_f64() * 1000.0,
            total.as_secs_f64()
        )?;
    }
    writeln!(
        log,
        "prefill: {:.1} tok/s (median of {})",
        median(&prefill),
        prefill.len()
    )?;
    let decode_tok_s = (!decode.is_empty()).then(|| median(&decode));
    match decode_tok_s {
        Some(speed) => writeln!(log, "decode:  {speed:.1} tok/s (median of {})", decode.len())?,
        None => writeln!(
            log,
            "decode:  not timed (fewer than {TIMED_TOKENS} tokens a run: --tokens {TIMED_TOKENS} or more)"
        )?,
    }
    // The constraint's cost per token, as a share of a free decoding step: what choosing a token
    // under the schema takes beyond choosing it freely.
    let per_token = |(nanos, n): (u64, u64)| nanos as f64 / n.max(1) as f64;
    let overhead = decode_tok_s.map(|speed| (per_token(choosing[1]) - per_token(choosing[0])) / (1e9 / speed));
    let constrained_tok_s = (!constrained.is_empty()).then(|| median(&constrained));
    if let (Some(speed), Some(overhead)) = (constrained_tok_s, overhead) {
        writeln!(
            log,
            "schema-constrained decode: {speed:.1} tok/s (median of {}); choosing a token takes {:.0} µs free, \
             {:.0} µs under the schema: {} of a decoding step",
            constrained.len(),
            per_token(choosing[0]) / 1e3,
            per_token(choosing[1]) / 1e3,
            signed_share(overhead)
        )?;
    }
    let widths = widths(&model, parallel, tokens, runs, log)?;
    let report = BenchReport {
        engine: "incharacter".into(),
        model: name.to_string(),
        path: path.display().to_string(),
        prompt_tokens: prompt_len,
        decode_tokens: tokens,
        decoded_tokens: Some(median(&decoded).round() as u32),
        runs,
        prefill_tok_s: median(&prefill),
        decode_tok_s,
        constrained_decode_tok_s: constrained_tok_s,
        constraint_overhead: overhead,
        prefill_runs: prefill,
        decode_runs: decode,
        widths,
    };
    let cached = local::LocalModel::load(name, &path).map_err(|e| input_error(e.to_string()))?;
    let code = interview_latency(&model, &cached, runs.max(2) as usize, log)?;
    if json {
        writeln!(out, "{}", crate::text::json_pretty(&report)?)?;
    }
    Ok(code)
}

/// Tokens a run must decode for its decoding to be timed: the first piece of text may wait for a
/// token or two after the first (a character's bytes split between tokens), and with only a couple
/// after it the interval measures almost nothing.
pub const TIMED_TOKENS: u64 = 8;

/// `bench local`'s request: Hermione asked for a story after `passage`, `tokens` at most.
fn story_request(passage: &str, tokens: u32) -> crate::llm::ChatRequest {
    use crate::llm::{ChatMessage, ChatRequest};
    let mut request = ChatRequest::new(vec![
        ChatMessage::system("You are Hermione Granger. Answer in character."),
        ChatMessage::user(format!(
            "{passage}\nTell me a long story about your first year at Hogwarts."
        )),
    ]);
    request.sampling.max_tokens = Some(tokens);
    request
}

/// The passage `bench local` reads: twelve sentences, or as many as make a prompt of at least
/// `at_least` tokens (refused when that and `tokens` more exceed the model's context).
fn bench_passage(model: &local::LocalModel, tokens: u32, at_least: Option<usize>) -> anyhow::Result<String> {
    let sentence = "The Sorting Hat considered the first-year for a long moment before it spoke. ";
    let mut passage = sentence.repeat(12);
    let length = |passage: &str| {
        model
            .prompt_tokens(&story_request(passage, tokens))
            .map_err(|e| input_error(e.to_string()))
    };
    let fits = |prompt: usize| {
        if prompt.saturating_add(tokens as usize) > model.context() {
            return Err(input_error(format!(
                "a prompt of {prompt} tokens and {tokens} more do not fit in the model's context of {}",
                model.context()
            )));
        }
        Ok(())
    };
    let Some(at_least) = at_least else {
        fits(length(&passage)?)?;
        return Ok(passage);
    };
    fits(at_least)?;
    // Sentences add about as many tokens each: as many more as the shortfall asks for, measured again.
    let per_sentence = model
        .encode(sentence)
        .map_err(|e| input_error(e.to_string()))?
        .len()
        .max(1);
    loop {
        let short = at_least.saturating_sub(length(&passage)?);
        if short == 0 {
            return Ok(passage);
        }
        passage.push_str(&sentence.repeat(short.div_ceil(per_sentence)));
    }
}

/// The median of `v` as Python's `statistics.median` takes it, which llama.cpp's reference scripts
/// report (`bench ratio` divides one by the other): the mean of the middle two of an even count; 0 for
/// none. `v` is left in its order (the report lists the runs as they ran).
fn median(v: &[f64]) -> f64 {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    let half = sorted.len() / 2;
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[half],
        _ => (sorted[half - 1] + sorted[half]) / 2.0,
    }
}

/// A share with its sign, as a percentage to a tenth (`+4.2%`, `-0.4%`, never `-0.0%`): a schema
/// may cost less than free sampling on a run, and the sign must say so.
fn signed_share(share: f64) -> String {
    format!("{}%", crate::text::decimals(share * 100.0, 1, true))
}

/// Speed at one batch width: `parallel` sequences decoded side by side, one pass per step for all.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Width {
    pub parallel: u32,
    /// Tokens decoded per second, all sequences together (median over the runs); `null` when each
    /// decodes too few tokens to time ([`TIMED_TOKENS`]).
    pub decode_tok_s: Option<f64>,
    /// Milliseconds each sequence waits per token it decodes, at the median speed (so that it and
    /// `decode_tok_s` describe the same runs); `null` as `decode_tok_s`.
    pub per_sequence_ms: Option<f64>,
    /// Prompt tokens read per second, every prompt in one pass (median).
    pub prefill_tok_s: f64,
}

/// The prompts of `width` sequences side by side: Hermione asked one of as many questions each.
fn width_prompts(model: &local::LocalModel, width: u32) -> anyhow::Result<Vec<Vec<u32>>> {
    use crate::llm::{ChatMessage, ChatRequest};
    (0..width)
        .map(|i| {
            let request = ChatRequest::new(vec![
                ChatMessage::system("You are Hermione Granger. Answer in character."),
                ChatMessage::user(format!(
                    "Question {}: tell me about the day you spent in the library before exam number {}.",
                    i + 1,
                    i + 2
                )),
            ]);
            model.encode(&model.prompt(&request))
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| input_error(e.to_string()))
}

/// Refused before anything is timed: side by side, every sequence decodes all `tokens` (none ends
/// early), so the longest prompt and `tokens` more must fit in the model's context.
fn widths_fit(model: &local::LocalModel, parallel: &[u32], tokens: u32) -> anyhow::Result<()> {
    let Some(&widest) = parallel.iter().max() else {
        return Ok(());
    };
    let longest = width_prompts(model, widest)?.iter().map(Vec::len).max().unwrap_or(0);
    let steps = tokens.max(2) as usize;
    if longest + steps > model.context() {
        return Err(input_error(format!(
            "--parallel decodes all {steps} tokens of every sequence: a prompt of {longest} tokens and {steps} \
             more do not fit in the model's context of {}",
            model.context()
        )));
    }
    Ok(())
}

/// `--parallel`: at each width, `runs` greedy decodings of `width` prompts (Hermione asked one of as
/// many questions each) side by side, `tokens` tokens each.
fn widths(
    model: &local::LocalModel,
    parallel: &[u32],
    tokens: u32,
    runs: u32,
    log: &mut dyn Write,
) -> anyhow::Result<Vec<Width>> {
    let steps = tokens.max(2) as usize;
    let mut out = Vec::new();
    for &width in parallel {
        let prompts = width_prompts(model, width)?;
        let prompt_tokens: usize = prompts.iter().map(Vec::len).sum();
        let mut timings = Vec::new();
        for _ in 0..runs {
            let done = model.greedy_together(&prompts, steps).map_err(anyhow::Error::new)?;
            timings.push((done.prefill_s, done.decode_s));
        }
        let w = width_of(width, prompt_tokens, steps, &timings);
        match w.decode_tok_s.zip(w.per_sequence_ms) {
            Some((decode, each)) => writeln!(
                log,
                "{width} side by side: decode {decode:.1} tok/s in all, {each:.0} ms per token each; prompts {:.1} \
                 tok/s",
                w.prefill_tok_s
            )?,
            None => writeln!(
                log,
                "{width} side by side: decode not timed (fewer than {TIMED_TOKENS} tokens each); prompts {:.1} tok/s",
                w.prefill_tok_s
            )?,
        }
        out.push(w);
    }
    Ok(out)
}

/// The speed at `width` from its runs' (prefill, decode) seconds, `steps` tokens each after
/// `prompt_tokens` in all: the median speeds, and each sequence's wait per token at the median decode
/// speed (a median of waits of its own would come from another run when the count is even).
fn width_of(width: u32, prompt_tokens: usize, steps: usize, timings: &[(f64, f64)]) -> Width {
    let after_first = (steps - 1) as f64;
    let decode: Vec<f64> = timings.iter().map(|t| f64::from(width) * after_first / t.1).collect();
    let prefill: Vec<f64> = timings.iter().map(|t| prompt_tokens as f64 / t.0).collect();
    // The rule of one sequence's runs: too few tokens after the first time nothing.
    let decode_tok_s = (steps as u64 >= TIMED_TOKENS).then(|| median(&decode));
    Width {
        parallel: width,
        decode_tok_s,
        per_sequence_ms: decode_tok_s.map(|speed| f64::from(width) * 1000.0 / speed),
        prefill_tok_s: median(&prefill),
    }
}

/// What `bench local --json` and `benches/llama_cpp_reference.py --json` print: one engine's speed on
/// one GGUF (medians over the runs, in tokens per second).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BenchReport {
    pub engine: String,
    #[serde(default)]
    pub model: String,
    pub path: String,
    pub prompt_tokens: usize,
    /// The most tokens a run was to decode.
    pub decode_tokens: u32,
    /// How many a run decoded (median): fewer than `decode_tokens` when the model ended its reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoded_tokens: Option<u32>,
    pub runs: u32,
    pub prefill_tok_s: f64,
    /// `null` when the runs decoded too few tokens to time ([`TIMED_TOKENS`]).
    pub decode_tok_s: Option<f64>,
    /// Decoding under a JSON schema (this engine only; `null` when not timed).
    #[serde(default)]
    pub constrained_decode_tok_s: Option<f64>,
    /// What the schema adds to a decoding step, as a share of it (0.05 = 5%; `null` when either
    /// speed is not timed).
    #[serde(default)]
    pub constraint_overhead: Option<f64>,
    #[serde(default)]
    pub prefill_runs: Vec<f64>,
    #[serde(default)]
    pub decode_runs: Vec<f64>,
    /// `--parallel`: sequences decoded side by side (this engine only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub widths: Vec<Width>,
}

/// `bench ratio OURS REFERENCE`: the engine's prefill and decode speed as a share of the reference's
/// (two `--json` reports of one sitting on the same GGUF).
pub fn ratio(ours: &Path, reference: &Path, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let read = |path: &Path| -> anyhow::Result<BenchReport> {
        let text = crate::files::read_text_limited(path, 16 * 1024 * 1024, "a bench report")?;
        serde_json::from_str(&text).map_err(|e| {
            input_error(format!(
                "{}:{}:{}: not a bench report ({})",
                local::shown(path),
                e.line(),
                crate::files::json_column(&text, &e),
                crate::files::json_message(&e)
            ))
        })
    };
    let (a, b) = (read(ours)?, read(reference)?);
    // A speed is a count over a time: one that is not above zero measured nothing to compare.
    for (path, report) in [(ours, &a), (reference, &b)] {
        let speeds = [
            ("prefill_tok_s", Some(report.prefill_tok_s)),
            ("decode_tok_s", report.decode_tok_s),
        ];
        if let Some((field, value)) = speeds
            .into_iter()
            .find_map(|(field, v)| v.filter(|v| !(v.is_finite() && *v > 0.0)).map(|v| (field, v)))
        {
            return Err(input_error(format!(
                "{}: {field} is {value}: a speed above zero was expected (not a report of a measurement)",
                local::shown(path)
            )));
        }
    }
    // What each decoded, where the report says (a model that ends its reply early decodes less).
    let (da, db) = (
        a.decoded_tokens.unwrap_or(a.decode_tokens),
        b.decoded_tokens.unwrap_or(b.decode_tokens),
    );
    if a.prompt_tokens != b.prompt_tokens || da != db {
        crate::note!(
            "warning: the reports measured different work (prompt {} vs {} tokens, decoded {da} vs {db})",
            a.prompt_tokens,
            b.prompt_tokens,
        );
    }
    let prefill = a.prefill_tok_s / b.prefill_tok_s;
    let decode = a.decode_tok_s.zip(b.decode_tok_s).map(|(a, b)| a / b);
    if json {
        let value = serde_json::json!({
            "prefill_ratio": prefill, "decode_ratio": decode,
            "ours": a, "reference": b,
        });
        writeln!(out, "{}", crate::text::json_pretty(&value)?)?;
    } else {
        let (x, y) = (a.engine.to_string(), b.engine.to_string());
        let (ours, theirs) = (a.prefill_tok_s, b.prefill_tok_s);
        writeln!(
            out,
            "prefill: {prefill:.2}× ({x} {ours:.1} tok/s, {y} {theirs:.1} tok/s)"
        )?;
        match (decode, a.decode_tok_s, b.decode_tok_s) {
            (Some(ratio), Some(ours), Some(theirs)) => {
                writeln!(out, "decode:  {ratio:.2}× ({x} {ours:.1} tok/s, {y} {theirs:.1} tok/s)")?
            }
            _ => writeln!(out, "decode:  not timed in both reports")?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Time to an interview answer's first token for the first BFI questions of an English and a Chinese
/// character, each prompt computed whole and then with the character's system prompt cached (the
/// first question fills the cache and is left out of the cached median).
fn interview_latency(
    whole: &local::LocalModel,
    cached: &local::LocalModel,
    questions: usize,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    use crate::llm::ChatRequest;
    use crate::method::interview::{self, QueryStyle};
    use crate::rpa::prompt::{self, RpaStyle};
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    let catalog = crate::catalog::Catalog::bundled().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let scale = catalog.scale("BFI").ok_or_else(|| anyhow::anyhow!("BFI is bundled"))?;
    let median_ms = |v: Vec<f64>| median(&v) * 1000.0;
    writeln!(
        out,
        "interview questions, time to the first token (median of {questions}):"
    )?;
    for id in ["hermione-en", "zhongli-zh"] {
        let c = catalog
            .character(id)
            .ok_or_else(|| anyhow::anyhow!("{id} is bundled"))?;
        let requests: Vec<ChatRequest> = scale
            .scored_items()
            .take(questions)
            .map(|item| {
                let text = interview::query(crate::templates::Templates::bundled(), c, scale, item, QueryStyle::Open);
                let assembled = prompt::assemble(
                    crate::templates::Templates::bundled(),
                    c,
                    RpaStyle::Description,
                    None,
                    item.question.get(c.language),
                    &text,
                );
                let mut r = ChatRequest::new(assembled.messages);
                r.sampling.temperature = Some(0.0);
                r.sampling.max_tokens = Some(1);
                r
            })
            .collect();
        let time = |model: &local::LocalModel, r: &ChatRequest| -> anyhow::Result<f64> {
            let t0 = Instant::now();
            model
                .generate(r, &AtomicBool::new(false), &mut |_| {})
                .map_err(|e| anyhow::anyhow!("{}", e.describe("the local model")))?;
            Ok(t0.elapsed().as_secs_f64())
        };
        let tokens = whole
            .prompt_tokens(&requests[0])
            .map_err(|e| input_error(e.to_string()))?;
        let hits = cached.prefix_hits();
        let whole_s = requests
            .iter()
            .map(|r| time(whole, r))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let cached_s = requests
            .iter()
            .map(|r| time(cached, r))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let (w, k) = (median_ms(whole_s), median_ms(cached_s[1..].to_vec()));
        writeln!(
            out,
            "  {id}: prompt {tokens} tokens; whole {w:.0} ms, system prompt cached {k:.0} ms ({} hits), {:.1}× faster",
            cached.prefix_hits() - hits,
            w / k.max(f64::EPSILON)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Python's `statistics.median`, which the reference scripts report: the mean of the middle
    /// two of an even count; the runs left in their order.
    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let runs = vec![30.0, 10.0];
        assert_eq!(median(&runs), 20.0);
        assert_eq!(runs, [30.0, 10.0], "in run order");
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    /// A width's speed and each sequence's wait describe the same runs: speed × wait is the width's
    /// thousand milliseconds, whatever the count of runs.
    #[test]
    fn a_widths_speed_and_wait_come_from_the_same_median() {
        // Two runs of 2 sequences, 11 tokens each: 10 after the first in 1 s and in 2 s.
        let w = width_of(2, 100, 11, &[(0.5, 1.0), (0.25, 2.0)]);
        assert_eq!(w.decode_tok_s, Some(15.0));
        let wait = w.per_sequence_ms.unwrap();
        assert!((wait * 15.0 - 2000.0).abs() < 1e-9, "{wait}");
        assert_eq!(w.prefill_tok_s, 300.0);
        // Too few tokens to time: neither.
        let w = width_of(2, 100, 4, &[(0.5, 1.0)]);
        assert_eq!((w.decode_tok_s, w.per_sequence_ms), (None, None));
    }

    #[test]
    fn a_negative_overhead_reads_as_one() {
        assert_eq!(signed_share(-0.004), "-0.4%");
        assert_eq!(signed_share(0.042), "+4.2%");
        assert_eq!(signed_share(-0.0001), "+0.0%");
    }
}
