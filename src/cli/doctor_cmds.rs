//! `doctor`: whether this machine can do the main job, and what to do if not ([`crate::doctor`] looks
//! and judges; this prints). One line per check, its fix indented under it, the verdict last; exit 0
//! when the main job can run, 1 otherwise.

use std::io::Write;
use std::process::ExitCode;

use unicode_width::UnicodeWidthStr;

use super::Ctx;
use crate::config::Config;
use crate::doctor::{self, Facts, Report, Status};

pub fn doctor(ctx: &Ctx, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    // A config that does not load is one of the things the doctor reports, not a reason to stop.
    let config = Config::load_user().map_err(|e| e.to_string());
    let env = |k: &str| std::env::var(k).ok();
    // The `[tui]` section is checked as the workbench checks it when it starts.
    let workbench = config.as_ref().map(|c| ctx.workbench(c)).unwrap_or_default();
    let facts = Facts::here(config).with_workbench(workbench);
    let report = doctor::judge(&ctx.block_on(doctor::examine(facts, &env)));
    if json {
        writeln!(out, "{}", crate::text::json_pretty(&report)?)?;
    } else {
        write!(out, "{}", text(&report))?;
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The report as the terminal shows it (through the command's `text::Safe` stdout).
fn text(report: &Report) -> String {
    let width = report.checks.iter().map(|c| c.name.width()).max().unwrap_or(0);
    let indent = " ".repeat(4 + 2 + width + 2);
    let mut out = String::new();
    for check in &report.checks {
        let mark = match check.status {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        let pad = " ".repeat(width - check.name.width());
        let mut lines = check.detail.lines();
        out.push_str(&format!(
            "{mark:<4}  {}{pad}  {}\n",
            check.name,
            lines.next().unwrap_or("")
        ));
        for line in lines {
            out.push_str(&format!("{indent}{line}\n"));
        }
        if let Some(fix) = &check.fix {
            out.push_str(&format!("{indent}→ {fix}\n"));
        }
    }
    out.push('\n');
    out.push_str(&report.summary);
    out.push('\n');
    out
}
