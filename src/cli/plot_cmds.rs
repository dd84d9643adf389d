//! `plot`: a session's figure written as an SVG or PNG file for a paper (radar, bars, heatmap, or the
//! judge-against-human scatter of an annotated session).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;

use super::lookup::load_session;
use super::{Ctx, LabelsArg, input_error};
use crate::annotation;
use crate::figures::session::{self, Kind, Request};
use crate::figures::{self, Size};

#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    /// Session id, session folder, or journal file (sample sessions by id too)
    session: String,
    /// radar: measured profile vs labels; bars: per dimension with error bars; heatmap: characters ×
    /// dimensions, colour = error; agreement: the judge against human annotations
    #[arg(long, value_enum)]
    kind: KindArg,
    /// The character (id, name or alias) [default: the session's first]; agreement: only its cases
    #[arg(long)]
    character: Option<String>,
    /// Scale id [default: the session's first]
    #[arg(long)]
    scale: Option<String>,
    /// Method, e.g. er-batch [default: the session's first; agreement: the first with annotated cases]
    #[arg(long)]
    method: Option<String>,
    /// Labels to compare with [default: pdb where the character has PDb labels (BFI, 16P), else annotation]
    #[arg(long, value_enum)]
    labels: Option<LabelsArg>,
    /// The file to write: FILE.svg or FILE.png (replaced whole or not at all; a symbolic link is refused)
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// Width in pixels
    #[arg(long, default_value_t = 800, value_parser = clap::value_parser!(u32).range(200..=6000))]
    width: u32,
    /// Height in pixels
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(200..=6000))]
    height: u32,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum KindArg {
    Radar,
    Bars,
    Heatmap,
    Agreement,
}

impl From<KindArg> for Kind {
    fn from(k: KindArg) -> Kind {
        match k {
            KindArg::Radar => Kind::Radar,
            KindArg::Bars => Kind::Bars,
            KindArg::Heatmap => Kind::Heatmap,
            KindArg::Agreement => Kind::Agreement,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Svg,
    Png,
}

fn format_of(path: &Path) -> anyhow::Result<Format> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") => Ok(Format::Svg),
        Some("png") => Ok(Format::Png),
        _ => Err(input_error(format!(
            "-o {}: the file name must end in .svg or .png",
            path.display()
        ))),
    }
}

pub fn plot(ctx: &Ctx, args: PlotArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let format = format_of(&args.output)?;
    let catalog = ctx.catalog()?;
    let (dir, events) = load_session(ctx, &args.session)?;
    super::lookup::say_unfinished(&dir.file_name().unwrap_or_default().to_string_lossy(), &dir, &events);
    let kind = Kind::from(args.kind);
    let annotations = if kind == Kind::Agreement {
        annotation::load(&dir, &catalog)?
    } else {
        Default::default()
    };
    let request = Request {
        kind,
        character: args.character.as_deref(),
        scale: args.scale.as_deref(),
        method: args.method.as_deref(),
        labels: args.labels.map(Into::into),
    };
    let figure = session::figure(&events, &annotations, &catalog, &request).map_err(|e| input_error(e.0))?;
    let size = Size {
        width: args.width,
        height: args.height,
    };
    let missing = figures::font::missing(&figure.text());
    if format == Format::Png && !missing.is_empty() {
        let list: String = missing.iter().collect();
        crate::note!(
            "warning: the embedded font has no glyph for {}: drawn as boxes (an SVG leaves them to the viewer's fonts)",
            list.to_string()
        );
    }
    let bytes = match format {
        Format::Svg => figures::svg(&figure, size)?.into_bytes(),
        Format::Png => figures::png(&figure, size)?,
    };
    // Drawn whole before anything is written: a figure that fails leaves no file, a write that fails
    // leaves the old one.
    crate::files::write_output(&args.output, &bytes, &crate::session::store::kept())?;
    writeln!(out, "wrote {} ({}×{})", args.output.display(), size.width, size.height)?;
    Ok(ExitCode::SUCCESS)
}
