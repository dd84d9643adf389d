//! `bench-run`: the headless runner against `fake-openai` with a fixed latency model, compared with the
//! ideal bound that latency model allows. The server runs in this process; every run is the real
//! `incharacter` binary in a child process with a fresh data dir, so its CPU time and peak RSS are the
//! client's alone. Build that binary first (`cargo build --release`); it is looked for next to this one.

// An instrument's own output, not the product's (which passes `text::Safe`).
#![allow(clippy::disallowed_macros)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use incharacter::catalog::Catalog;
use incharacter_testkit::bound::ideal_bound_ms;
use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde::Serialize;
use serde_json::json;

/// An error in the arguments (exit status 2, like the product's own input errors).
#[derive(Debug)]
struct InputError(String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

fn input_error(message: impl Into<String>) -> anyhow::Error {
    InputError(message.into()).into()
}

fn main() -> ExitCode {
    let args = BenchRunArgs::parse();
    let mut out = std::io::stdout();
    match run(args, &mut out) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<InputError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The 32 characters × BFI + 16P × ER_batch matrix against fake-openai with a fixed latency, at several
/// concurrency levels, against the ideal bound (use a release build)
#[derive(Debug, Parser)]
#[command(name = "bench-run")]
struct BenchRunArgs {
    /// Concurrency levels, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,64")]
    concurrency: Vec<usize>,
    /// Character ids (comma-separated) or `all`
    #[arg(long, default_value = "all")]
    characters: String,
    /// Scale ids, comma-separated
    #[arg(long, default_value = "BFI,16Personalities")]
    scales: String,
    /// Latency model: milliseconds before the response headers
    #[arg(long, default_value_t = 200)]
    first_byte_ms: u64,
    /// Latency model: streaming rate after the first byte
    #[arg(long, default_value_t = 200.0)]
    tokens_per_s: f64,
    /// Instead of the concurrency levels: how wall time and memory grow with the number of characters
    /// (1→32, BFI + 16P) and of scales (1→14, 4 characters), at the first concurrency level given
    #[arg(long)]
    growth: bool,
    /// Write each run's per-request trace here as CSV (`benches/bound.py` recomputes the bound from it)
    #[arg(long)]
    traces: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    /// The `incharacter` binary to measure [default: the one next to this binary]
    #[arg(long)]
    incharacter: Option<PathBuf>,
}

/// One run of the matrix and what it cost.
#[derive(Debug, Clone, Serialize)]
struct Measured {
    label: String,
    concurrency: usize,
    characters: usize,
    scales: usize,
    interviews: usize,
    judge_calls: usize,
    requests: usize,
    wall_s: f64,
    /// `None` for a warm-cache run (no request reached the server).
    bound_s: Option<f64>,
    ratio: Option<f64>,
    cpu_s: f64,
    cpu_ms_per_request: Option<f64>,
    peak_rss_mib: f64,
}

fn run(args: BenchRunArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if args.concurrency.is_empty() || args.concurrency.contains(&0) {
        return Err(input_error("--concurrency: one or more levels, each at least 1"));
    }
    if !(args.tokens_per_s > 0.0 && args.tokens_per_s.is_finite()) {
        return Err(input_error("--tokens-per-s must be a positive number"));
    }
    let incharacter = match &args.incharacter {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("incharacter"),
    };
    if !incharacter.is_file() {
        return Err(input_error(format!(
            "{}: no incharacter binary there (build it first: cargo build --release, or pass --incharacter)",
            incharacter.display()
        )));
    }
    // The bundled catalog only: each run gets a fresh data dir, so it sees nothing else either.
    let catalog = &Catalog::load(None).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(|d| d.to_string()).collect();
        anyhow::anyhow!("the bundled assets are invalid:\n{}", lines.join("\n"))
    })?;
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
    let setup = Setup {
        incharacter,
        traces: args.traces.clone(),
    };
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
            rows.push(runtime.block_on(measure(&setup, &label, &latency, c, &characters[..n], &scales, out))?);
        }
        let four = &characters[..characters.len().min(4)];
        for n in [1, 2, 4, 8, 14].into_iter().filter(|&n| n <= all_scales.len()) {
            let label = format!("{} characters × {n} scales", four.len());
            rows.push(runtime.block_on(measure(&setup, &label, &latency, c, four, &all_scales[..n], out))?);
        }
    } else {
        let mut last = None;
        for &c in &args.concurrency {
            let server = runtime.block_on(latency.serve())?;
            let (row, data) = runtime.block_on(measure_in(
                &setup,
                &format!("C={c}"),
                &server,
                c,
                &characters,
                &scales,
                None,
                out,
            ))?;
            rows.push(row);
            last = Some((c, server, data));
        }
        // The last level again into the same data dir and server: every reply from the cache.
        if let Some((c, server, data)) = last {
            let (row, _) = runtime.block_on(measure_in(
                &setup,
                &format!("C={c}, warm cache"),
                &server,
                c,
                &characters,
                &scales,
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
        let mut t = Table::new([
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

/// What every measured run shares: the binary measured and where traces go.
struct Setup {
    incharacter: PathBuf,
    traces: Option<PathBuf>,
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
    setup: &Setup,
    label: &str,
    latency: &Latency,
    concurrency: usize,
    characters: &[String],
    scales: &[String],
    out: &mut dyn Write,
) -> anyhow::Result<Measured> {
    let server = latency.serve().await?;
    Ok(
        measure_in(setup, label, &server, concurrency, characters, scales, None, out)
            .await?
            .0,
    )
}

/// Runs the matrix once in a child process; `warm` reuses a data dir (and its cache) from an earlier
/// run against the same server. Returns the measurement and the data dir.
#[allow(clippy::too_many_arguments)]
async fn measure_in(
    setup: &Setup,
    label: &str,
    server: &FakeServer,
    concurrency: usize,
    characters: &[String],
    scales: &[String],
    warm: Option<tempfile::TempDir>,
    out: &mut dyn Write,
) -> anyhow::Result<(Measured, tempfile::TempDir)> {
    let seen = server.trace().len();
    let warm_run = warm.is_some();
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
    let log = data.path().join("run.stderr");
    let mut child = Command::new(&setup.incharacter);
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
    // A warm run sends no request: no trace to write.
    if let Some(dir) = setup.traces.as_deref().filter(|_| !warm_run) {
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

/// Aligned columns: the first left-aligned, the numbers right-aligned.
struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new<const N: usize>(header: [&str; N]) -> Self {
        Table {
            rows: vec![header.iter().map(|h| h.to_string()).collect()],
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let pad = " ".repeat(widths[i] - c.chars().count());
                    if i == 0 {
                        format!("{c}{pad}")
                    } else {
                        format!("{pad}{c}")
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}
