//! `bench run`: the headless runner against `fake-openai` with a fixed latency model, compared with the
//! ideal bound that latency model allows. The server runs in this process; every run is the real binary
//! in a child process with a fresh data dir, so its CPU time and peak RSS are the client's alone.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::input_error;
use super::table::Table;
use crate::catalog::Catalog;
use crate::fake_openai::{FakeConfig, FakeServer, TraceEntry};

#[derive(Debug, clap::Args)]
pub struct BenchRunArgs {
    /// Concurrency levels, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,64")]
    pub concurrency: Vec<usize>,
    /// Character ids (comma-separated) or `all`
    #[arg(long, default_value = "all")]
    pub characters: String,
    /// Scale ids, comma-separated
    #[arg(long, default_value = "BFI,16Personalities")]
    pub scales: String,
    /// Latency model: milliseconds before the response headers
    #[arg(long, default_value_t = 200)]
    pub first_byte_ms: u64,
    /// Latency model: streaming rate after the first byte
    #[arg(long, default_value_t = 200.0)]
    pub tokens_per_s: f64,
    /// Instead of the concurrency levels: how wall time and memory grow with the number of characters
    /// (1→32, BFI + 16P) and of scales (1→14, 4 characters), at the first concurrency level given
    #[arg(long)]
    pub growth: bool,
    /// Write each run's per-request trace here as CSV (`benches/bound.py` recomputes the bound from it)
    #[arg(long)]
    pub traces: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// One run of the matrix and what it cost.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub label: String,
    pub concurrency: usize,
    pub characters: usize,
    pub scales: usize,
    pub interviews: usize,
    pub judge_calls: usize,
    pub requests: usize,
    pub wall_s: f64,
    /// `None` for a warm-cache run (no request reached the server).
    pub bound_s: Option<f64>,
    pub ratio: Option<f64>,
    pub cpu_s: f64,
    pub cpu_ms_per_request: Option<f64>,
    pub peak_rss_mib: f64,
}

/// The ideal bound of a run with `concurrency` slots: no schedule beats the total latency spread over
/// the slots, the longest single reply, or the longest judge call after the shortest interview (every
/// judge call waits for at least one interview).
pub fn ideal_bound_ms(trace: &[TraceEntry], concurrency: usize) -> f64 {
    let total: f64 = trace.iter().map(|t| t.model_ms).sum();
    let longest = trace.iter().map(|t| t.model_ms).fold(0.0, f64::max);
    let shortest_chat = trace
        .iter()
        .filter(|t| t.kind == "chat")
        .map(|t| t.model_ms)
        .fold(f64::INFINITY, f64::min);
    let longest_judge = trace
        .iter()
        .filter(|t| t.kind == "judge")
        .map(|t| t.model_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    let chain = if shortest_chat.is_finite() && longest_judge.is_finite() {
        shortest_chat + longest_judge
    } else {
        0.0
    };
    (total / concurrency.max(1) as f64).max(longest).max(chain)
}

pub fn run(args: BenchRunArgs, catalog: &Catalog, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if args.concurrency.is_empty() || args.concurrency.contains(&0) {
        return Err(input_error("--concurrency: one or more levels, each at least 1"));
    }
    if !(args.tokens_per_s > 0.0 && args.tokens_per_s.is_finite()) {
        return Err(input_error("--tokens-per-s must be a positive number"));
    }
    let characters = resolve_characters(catalog, &args.characters)?;
    let scales: Vec<String> = args.scales.split(',').map(|s| s.trim().to_string()).collect();
    for s in &scales {
        if catalog.scale(s).is_none() {
            return Err(input_error(format!("unknown scale \"{s}\"")));
        }
    }
    if let Some(dir) = &args.traces {
        std::fs::create_dir_all(dir).map_err(|e| input_error(format!("{}: {e}", dir.display())))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let latency = Latency {
        first_byte: Duration::from_millis(args.first_byte_ms),
        tokens_per_s: args.tokens_per_s,
    };
    writeln!(
        out,
        "latency model: {} ms to the first byte, then {} tokens/s (fake-openai, in this process)",
        args.first_byte_ms, args.tokens_per_s
    )?;

    let mut rows = Vec::new();
    if args.growth {
        let c = args.concurrency[0];
        let all_scales: Vec<String> = catalog
            .scales
            .iter()
            .filter(|e| e.value.id != "IPIP-50")
            .map(|e| e.value.id.clone())
            .collect();
        for n in [1, 4, 8, 16, 32].into_iter().filter(|&n| n <= characters.len()) {
            let label = format!("{n} characters × {}", scales.join("+"));
            rows.push(runtime.block_on(measure(
                &label,
                &latency,
                c,
                &characters[..n],
                &scales,
                args.traces.as_deref(),
                out,
            ))?);
        }
        let four = &characters[..characters.len().min(4)];
        for n in [1, 2, 4, 8, 14].into_iter().filter(|&n| n <= all_scales.len()) {
            let label = format!("{} characters × {n} scales", four.len());
            rows.push(runtime.block_on(measure(
                &label,
                &latency,
                c,
                four,
                &all_scales[..n],
                args.traces.as_deref(),
                out,
            ))?);
        }
    } else {
        let mut last = None;
        for &c in &args.concurrency {
            let server = runtime.block_on(latency.serve())?;
            let (row, data) = runtime.block_on(measure_in(
                &format!("C={c}"),
                &server,
                c,
                &characters,
                &scales,
                args.traces.as_deref(),
                None,
                out,
            ))?;
            rows.push(row);
            last = Some((c, server, data));
        }
        // The last level again into the same data dir and server: every reply from the cache.
        if let Some((c, server, data)) = last {
            let (row, _) = runtime.block_on(measure_in(
                &format!("C={c}, warm cache"),
                &server,
                c,
                &characters,
                &scales,
                None,
                Some(data),
                out,
            ))?;
            rows.push(row);
        }
    }

    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&json!({
                "latency": {"first_byte_ms": args.first_byte_ms, "tokens_per_s": args.tokens_per_s},
                "runs": rows,
            }))?
        )?;
    } else {
        let mut t = Table::new(&[
            "run",
            "interviews",
            "judge calls",
            "wall s",
            "bound s",
            "wall/bound",
            "CPU ms/req",
            "peak RSS MiB",
        ]);
        for r in &rows {
            t.row(vec![
                r.label.clone(),
                r.interviews.to_string(),
                r.judge_calls.to_string(),
                format!("{:.2}", r.wall_s),
                r.bound_s.map_or("—".into(), |b| format!("{b:.2}")),
                r.ratio.map_or("—".into(), |x| format!("{x:.3}")),
                r.cpu_ms_per_request.map_or("—".into(), |x| format!("{x:.2}")),
                format!("{:.0}", r.peak_rss_mib),
            ]);
        }
        write!(out, "{}", t.render())?;
        writeln!(
            out,
            "bound = max(total latency / C, longest reply, shortest interview + longest judge call); \
             a warm run sends no request."
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

struct Latency {
    first_byte: Duration,
    tokens_per_s: f64,
}

impl Latency {
    /// A fresh server (no cache of earlier attempts, an empty trace).
    async fn serve(&self) -> std::io::Result<FakeServer> {
        FakeServer::start(FakeConfig {
            seed: 1,
            first_byte: self.first_byte,
            tokens_per_s: self.tokens_per_s,
            ..FakeConfig::default()
        })
        .await
    }
}

fn resolve_characters(catalog: &Catalog, list: &str) -> anyhow::Result<Vec<String>> {
    if list.trim() == "all" {
        return Ok(catalog.characters.iter().map(|e| e.value.id.clone()).collect());
    }
    list.split(',')
        .map(|id| {
            let id = id.trim();
            catalog
                .character(id)
                .map(|c| c.id.clone())
                .ok_or_else(|| input_error(format!("unknown character \"{id}\"")))
        })
        .collect()
}

async fn measure(
    label: &str,
    latency: &Latency,
    concurrency: usize,
    characters: &[String],
    scales: &[String],
    traces: Option<&Path>,
    out: &mut dyn Write,
) -> anyhow::Result<Measured> {
    let server = latency.serve().await?;
    Ok(
        measure_in(label, &server, concurrency, characters, scales, traces, None, out)
            .await?
            .0,
    )
}

/// Runs the matrix once in a child process; `warm` reuses a data dir (and its cache) from an earlier
/// run against the same server. Returns the measurement and the data dir.
#[allow(clippy::too_many_arguments)]
async fn measure_in(
    label: &str,
    server: &FakeServer,
    concurrency: usize,
    characters: &[String],
    scales: &[String],
    traces: Option<&Path>,
    warm: Option<tempfile::TempDir>,
    out: &mut dyn Write,
) -> anyhow::Result<(Measured, tempfile::TempDir)> {
    let seen = server.trace().len();
    let data = match warm {
        Some(d) => d,
        None => tempfile::tempdir()?,
    };
    let config = data.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "max_concurrency = {concurrency}\n\n[[providers]]\nname = \"fake\"\nkind = \"openai\"\n\
             base_url = \"{}\"\nmodel = \"fake-model\"\nmax_concurrency = {concurrency}\n\n\
             [roles]\nrpa = \"fake\"\njudge = \"fake\"\n",
            server.base_url()
        ),
    )?;
    write!(out, "{label} … ")?;
    out.flush()?;
    let exe = std::env::current_exe()?;
    let log = data.path().join("run.stderr");
    let mut child = Command::new(exe);
    child
        .args([
            "run",
            "--characters",
            &characters.join(","),
            "--scales",
            &scales.join(","),
            "--methods",
            "er-batch",
            "--concurrency",
            &concurrency.to_string(),
            "--json",
        ])
        .env("INCHARACTER_CONFIG", &config)
        .env("INCHARACTER_DATA_DIR", data.path().join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?);
    let started = Instant::now();
    let child = child.spawn()?;
    let pid = child.id();
    let usage = tokio::task::spawn_blocking(move || wait_with_usage(pid)).await??;
    let wall = started.elapsed();
    if !usage.success {
        let stderr = std::fs::read_to_string(&log).unwrap_or_default();
        anyhow::bail!("the run for {label} failed:\n{stderr}");
    }
    let trace = server.trace().split_off(seen);
    if let Some(dir) = traces {
        let name = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>();
        let mut csv = String::from("arrival_ms,kind,tokens,events,model_ms\n");
        for t in &trace {
            csv.push_str(&format!(
                "{:.3},{},{},{},{:.3}\n",
                t.arrival_ms, t.kind, t.tokens, t.events, t.model_ms
            ));
        }
        std::fs::write(dir.join(format!("trace-{name}.csv")), csv)?;
    }
    let requests = trace.len();
    let bound_s = (requests > 0).then(|| ideal_bound_ms(&trace, concurrency) / 1000.0);
    let measured = Measured {
        label: label.to_string(),
        concurrency,
        characters: characters.len(),
        scales: scales.len(),
        interviews: trace.iter().filter(|t| t.kind == "chat").count(),
        judge_calls: trace.iter().filter(|t| t.kind == "judge").count(),
        requests,
        wall_s: wall.as_secs_f64(),
        bound_s,
        ratio: bound_s.map(|b| wall.as_secs_f64() / b),
        cpu_s: usage.cpu.as_secs_f64(),
        cpu_ms_per_request: (requests > 0).then(|| usage.cpu.as_secs_f64() * 1000.0 / requests as f64),
        peak_rss_mib: usage.max_rss_kib as f64 / 1024.0,
    };
    writeln!(
        out,
        "{:.2} s{}",
        measured.wall_s,
        measured.ratio.map_or(String::new(), |r| format!(" ({r:.3} × bound)"))
    )?;
    Ok((measured, data))
}

struct Usage {
    success: bool,
    cpu: Duration,
    max_rss_kib: i64,
}

/// Reaps `pid` and returns its own resource usage (user + system CPU, peak RSS).
fn wait_with_usage(pid: u32) -> anyhow::Result<Usage> {
    let mut status = 0;
    // SAFETY: `rusage` is plain data; wait4 fills it for the child we spawned and have not reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    if reaped < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let time = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    Ok(Usage {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        max_rss_kib: usage.ru_maxrss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: &'static str, model_ms: f64) -> TraceEntry {
        TraceEntry {
            arrival_ms: 0.0,
            kind,
            tokens: 0,
            events: 0,
            model_ms,
            fault: None,
        }
    }

    #[test]
    fn the_bound_is_the_largest_of_spread_work_longest_reply_and_chain() {
        let trace = vec![entry("chat", 300.0), entry("chat", 500.0), entry("judge", 400.0)];
        // One slot: everything in a row.
        assert_eq!(ideal_bound_ms(&trace, 1), 1200.0);
        // Many slots: the judge call still waits for the shortest interview.
        assert_eq!(ideal_bound_ms(&trace, 64), 700.0);
        // Two slots: 600 ms of spread work < the 700 ms chain.
        assert_eq!(ideal_bound_ms(&trace, 2), 700.0);
        assert_eq!(ideal_bound_ms(&[entry("chat", 900.0)], 8), 900.0);
    }
}
