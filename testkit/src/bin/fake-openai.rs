//! `fake-openai` — a TEST INSTRUMENT for incharacter's tests and benchmarks, not a model: it serves the
//! OpenAI chat-completions API (and the Batch API over it) on 127.0.0.1 with deterministic filler
//! replies, a set latency and streaming rate, and seeded fault injection — or, with `--server`, as a real
//! self-hosted server behaves (llama.cpp, llama-cpp-python, vLLM, Ollama, LM Studio: their probe routes,
//! context limits and slots); or, with `--answer-batch`, it
//! answers a batch input file offline as `vllm run-batch` does, and exits. See
//! `incharacter_testkit::fake_openai`, `incharacter_testkit::fake_openai::servers` and
//! `incharacter_testkit::fake_openai::batch`.

// An instrument's own output, not the product's (which passes `text::Safe`).
#![allow(clippy::disallowed_macros)]

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use incharacter_testkit::fake_openai::batch::{BatchOrder, batch_output_for};
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer, Fault, Persona, ScriptRule};

#[derive(Parser)]
#[command(
    name = "fake-openai",
    about = "Test instrument: a scripted, fault-injecting OpenAI-compatible server (not a model)"
)]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free one; the first line printed says which)
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Seed of replies and fault choices
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Milliseconds before the response headers
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Streaming rate in tokens per second (0 = as fast as possible)
    #[arg(long, default_value_t = 0.0)]
    tokens_per_s: f64,
    /// Write every SSE event as two separate chunks
    #[arg(long)]
    split_events: bool,
    /// Share of distinct requests that get faults on their first attempts (0–1)
    #[arg(long, default_value_t = 0.0)]
    fault_share: f64,
    /// How many first attempts of a faulty request fail
    #[arg(long, default_value_t = 1)]
    faults_per_request: u32,
    /// Faults to inject, comma-separated: 429,500,503,400,drop,cut,in-stream-error,stall,empty,blank,prose
    #[arg(long, value_delimiter = ',')]
    faults: Vec<String>,
    /// How long a `stall` fault stays silent before closing, in milliseconds
    #[arg(long, default_value_t = 60_000)]
    stall_ms: u64,
    /// Require this bearer key (else 401)
    #[arg(long)]
    require_key: Option<String>,
    /// Answer a `json_schema` response_format with 400 (as llama-cpp-python's server does)
    #[arg(long)]
    reject_json_schema: bool,
    /// JSON list of {"contains": "…", "reply": "…"} scripted replies
    #[arg(long)]
    script: Option<PathBuf>,
    /// In every structured reply with this property (e.g. an item id of an option conversion), give it 99
    #[arg(long)]
    out_of_range_key: Option<String>,
    /// Refuse `max_tokens` and temperatures other than 1 as reasoning models do
    #[arg(long)]
    reasoning: bool,
    /// Refuse schemas with numeric or length bounds as strict schema subsets do
    #[arg(long)]
    no_numeric_bounds: bool,
    /// Answer 429 to a request that would make more than this many in flight
    #[arg(long)]
    concurrency_limit: Option<usize>,
    /// At most this many requests per window (see --window-ms), announced in x-ratelimit-* headers
    #[arg(long, requires = "window_ms")]
    requests_per_window: Option<u32>,
    /// The length of a --requests-per-window window, in milliseconds
    #[arg(long, requires = "requests_per_window")]
    window_ms: Option<u64>,
    /// Append every request as a JSON line here
    #[arg(long)]
    log: Option<PathBuf>,
    /// The order of a batch's result lines (OpenAI promises none)
    #[arg(long, value_enum, default_value_t = BatchOrder::Reverse)]
    batch_order: BatchOrder,
    /// Serve nothing: answer this batch input file (JSONL) into `--output` and exit, as
    /// `vllm run-batch -i IN -o OUT` does (failed requests included)
    #[arg(long, value_name = "IN.jsonl", requires = "output")]
    answer_batch: Option<PathBuf>,
    /// Behave as this server does: llama.cpp (llamacpp, llama-server), llama-cpp-python, vllm, ollama,
    /// lmstudio (lm-studio)
    #[arg(long, value_name = "PERSONA")]
    server: Option<String>,
    /// The --server's context in tokens (per slot for llama.cpp)
    #[arg(long, default_value_t = 2048)]
    context: usize,
    /// How many chat requests a llama.cpp or Ollama --server processes at once (the others queue)
    #[arg(long, default_value_t = 1)]
    slots: usize,
    /// Ollama's /api/show states no num_ctx (the model runs with the server's default context)
    #[arg(long)]
    ollama_default_context: bool,
    /// Answer every route with 500 and a Python traceback
    #[arg(long)]
    fail_all: bool,
    /// Fail every batch when it is validated, with no output file (as a batch past the enqueued-token limit)
    #[arg(long)]
    fail_batches: bool,
    /// Where `--answer-batch` writes its results
    #[arg(short, long, value_name = "OUT.jsonl", requires = "answer_batch")]
    output: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let faults = args
        .faults
        .iter()
        .map(|f| {
            Fault::parse(f).ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown fault \"{f}\" (429,500,503,400,drop,cut,in-stream-error,stall,empty,blank,prose)"
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let script: Vec<ScriptRule> = match &args.script {
        Some(path) => serde_json::from_str(&std::fs::read_to_string(path)?)?,
        None => Vec::new(),
    };
    let persona = match &args.server {
        Some(name) => Some(Persona::parse(name).ok_or_else(|| {
            anyhow::anyhow!("unknown server \"{name}\" (llama.cpp, llama-cpp-python, vllm, ollama, lmstudio)")
        })?),
        None => None,
    };
    let config = FakeConfig {
        seed: args.seed,
        first_byte: Duration::from_millis(args.latency_ms),
        tokens_per_s: args.tokens_per_s,
        split_events: args.split_events,
        fault_share: args.fault_share,
        faults_per_request: args.faults_per_request,
        faults,
        stall: Duration::from_millis(args.stall_ms),
        require_key: args.require_key,
        reject_json_schema: args.reject_json_schema,
        script,
        out_of_range_key: args.out_of_range_key,
        reasoning: args.reasoning,
        no_numeric_bounds: args.no_numeric_bounds,
        concurrency_limit: args.concurrency_limit,
        requests_per_window: args.requests_per_window.zip(args.window_ms.map(Duration::from_millis)),
        log: args.log,
        batch_order: args.batch_order,
        persona,
        context: args.context,
        slots: args.slots,
        ollama_modelfile_ctx: !args.ollama_default_context,
        fail_all: args.fail_all,
        fail_batches: args.fail_batches,
        ..FakeConfig::default()
    };
    if let (Some(input), Some(output)) = (&args.answer_batch, &args.output) {
        let text =
            std::fs::read_to_string(input).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", input.display()))?;
        let results = batch_output_for(&config, &text)
            .map_err(|e| anyhow::anyhow!("{} is not a valid batch file: {e}", input.display()))?;
        std::fs::write(output, results).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", output.display()))?;
        return Ok(());
    }
    let server = FakeServer::start_on(config, args.port).await?;
    println!("fake-openai (test instrument) listening on {}", server.base_url());
    tokio::signal::ctrl_c().await?;
    let stats = server.stats();
    eprintln!(
        "requests: {}, faults: {}, refused (429): {}, max in flight: {}, batches: {} ({} lines)",
        stats.requests, stats.faults, stats.throttled, stats.max_in_flight, stats.batches, stats.batch_lines
    );
    if persona.is_some() || args.fail_all {
        eprintln!(
            "probes: {}, max processing: {}, largest prompt: {} tokens, context refusals: {}, truncated: {}, interrupted: {}",
            stats.probes,
            stats.max_processing,
            stats.max_prompt_tokens,
            stats.context_refusals,
            stats.truncated,
            stats.interrupted
        );
    }
    Ok(())
}
