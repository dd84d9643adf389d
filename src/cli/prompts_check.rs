//! `prompts check`: every request shape of a scale rendered with a template set, on a recorded
//! session's answers or on placeholder answers, printed (or as JSON) and never sent.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::{Ctx, input_error, lookup};
use crate::method::interview::QueryStyle;
use crate::rpa::memories::Memories;
use crate::rpa::prompt::RpaStyle;
use crate::study::Event;
use crate::study::interview::requests::{self, Shape, Subject};
use crate::study::interview::{Done, RunPlan};
use crate::templates::{TemplateError, Templates};

/// Render every request a run of SCALE sends — interview, self-report, ER_batch, ER_all, OC, d-OC and
/// the self-report conversions — with the template set in DIR (the bundled set without one), on a
/// recorded session's answers or on placeholder answers, and print them without sending anything: to
/// diff against another protocol before spending money
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// A prompt folder (as `--prompts DIR` takes it); without one, the session's recorded set or the
    /// bundled one
    pub dir: Option<PathBuf>,
    #[arg(long)]
    pub scale: String,
    /// Render on this session's answers (repeat 0), with its plan's style and items per call
    #[arg(long)]
    pub session: Option<String>,
    /// The character [default: the session's first; required without a session]
    #[arg(long)]
    pub character: Option<String>,
    /// Only these shapes, comma-separated: interview, self-report, self-report-cot, er-batch, er-all,
    /// oc, d-oc, sr-conversion, sr-cot-conversion
    #[arg(long)]
    pub shapes: Option<String>,
    /// `off`: as a server without structured outputs reads them (the reply's schema described at the
    /// end of the system message by `schema_instruction`); `on`: the schema travels apart
    #[arg(long, default_value = "on")]
    pub structured: String,
    /// Role-play prompt style [default: the session's, else description]
    #[arg(long)]
    pub style: Option<String>,
}

/// The shapes asked for, all of them without a list.
fn shapes(list: &Option<String>) -> anyhow::Result<Vec<Shape>> {
    let Some(list) = list else {
        return Ok(Shape::ALL.to_vec());
    };
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| {
            Shape::parse(name).ok_or_else(|| {
                let known: Vec<&str> = Shape::ALL.iter().map(|s| s.name()).collect();
                input_error(format!("unknown shape \"{name}\" (one of: {})", known.join(", ")))
            })
        })
        .collect()
}

pub fn check(ctx: &Ctx, args: &CheckArgs, json_output: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let structured = match args.structured.as_str() {
        "on" => true,
        "off" => false,
        other => return Err(input_error(format!("--structured {other}: on or off"))),
    };
    let shapes = shapes(&args.shapes)?;
    let catalog = ctx.catalog()?;
    let scale = catalog.scale(&args.scale).ok_or_else(|| {
        input_error(format!(
            "unknown scale \"{}\" (`incharacter scales` lists them)",
            args.scale
        ))
    })?;
    let events: Vec<Event> = match &args.session {
        Some(id) => lookup::load_session(ctx, id)?.1,
        None => Vec::new(),
    };
    let plan: Option<RunPlan> = events.iter().find_map(|e| match e {
        Event::RunStarted { plan, .. } => Some(plan.as_ref().clone()),
        _ => None,
    });
    if args.session.is_some() && plan.is_none() {
        return Err(input_error(
            "that session is not an interview run: it has no answers to render",
        ));
    }
    let character_id = match (&args.character, &plan) {
        (Some(c), _) => c.clone(),
        (None, Some(p)) => p.characters.first().cloned().unwrap_or_default(),
        (None, None) => {
            return Err(input_error(
                "pass --character (or --session, whose first character is taken)",
            ));
        }
    };
    let character_id = super::lookup::character_id(&catalog, &character_id)?;
    let character = catalog
        .character_by_id(&character_id)
        .map(|e| &e.value)
        .ok_or_else(|| input_error(format!("unknown character \"{character_id}\"")))?;
    let templates = match (&args.dir, &plan) {
        (Some(dir), _) => Templates::load_dir(dir)?,
        (None, Some(p)) => Templates::from_record(&p.prompts)?,
        (None, None) => Templates::bundled().clone(),
    };
    let style = match (&args.style, &plan) {
        (Some(s), _) => {
            RpaStyle::parse(s).ok_or_else(|| input_error(format!("--style {s}: description, chatharuhi or rolegpt")))?
        }
        (None, Some(p)) => p.style,
        (None, None) => RpaStyle::Description,
    };
    let memories = match style {
        RpaStyle::Description => None,
        _ => Memories::load(&ctx.data_dir()?, &character.id, &character.name).map_err(input_error)?,
    };
    // The items per call a resume settled on, as the run groups them.
    let per_call = plan.as_ref().map_or(crate::method::convert::MAX_ITEMS_PER_CALL, |p| {
        events
            .iter()
            .rev()
            .find_map(|e| match e {
                Event::Resumed {
                    items_per_call: Some(n),
                    ..
                } => Some(*n),
                _ => None,
            })
            .unwrap_or(p.items_per_call) as usize
    });
    let done = Done::from_events(&events);
    let answers = |query: QueryStyle| requests::answers_in(&done, scale, character, query);
    // The names the session's judge had hidden, its resumes' too.
    let mut masked = plan.as_ref().map(|p| p.masked.clone()).unwrap_or_default();
    crate::study::interview::fold_masked(&mut masked, &events);
    let subject = Subject {
        templates: &templates,
        scale,
        character,
        style,
        memories: memories.as_ref(),
        per_call,
        answers: &answers,
        masked: masked.get(&character.id),
    };
    // A conversion template that would give the judge no options is refused as a run refuses it.
    let oc = shapes
        .iter()
        .any(|s| matches!(s, Shape::Oc | Shape::SrConversion | Shape::SrCotConversion));
    let doc = shapes.contains(&Shape::DOc);
    crate::method::convert::templates_fill(&templates, scale, character, oc, doc).map_err(TemplateError::Invalid)?;
    let mut listed = Vec::new();
    for shape in shapes {
        for r in subject.render(shape) {
            let messages = if structured {
                r.messages.clone()
            } else {
                requests::unstructured(&r)
            };
            if json_output {
                listed.push(json!({
                    "shape": shape.name(),
                    "label": r.label,
                    "messages": messages,
                    "response_format": r.schema.as_ref().filter(|_| structured).map(|s| &s.schema),
                }));
            } else {
                write!(out, "{}", requests::print(&r, &messages))?;
                if let (true, Some(schema)) = (structured, &r.schema) {
                    writeln!(out, "--- response_format ({})\n{}", schema.name, schema.schema)?;
                }
                writeln!(out)?;
            }
        }
    }
    if json_output {
        writeln!(out, "{}", crate::text::json_pretty(&listed)?)?;
    }
    Ok(ExitCode::SUCCESS)
}
