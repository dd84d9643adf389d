//! `compare`: two interview sessions paired over the characters × dimensions both scored — is B
//! closer to the labels than A, beyond noise?

use std::io::Write;
use std::process::ExitCode;

use super::lookup::load_named;
use super::table::Table;
use super::{Ctx, input_error};
use crate::analysis::compare::{self, Comparison, Paired};
use crate::domain::character::LabelSource;
use crate::domain::resample::Bootstrap;
use crate::method::Method;

pub struct Args {
    pub scale: Option<String>,
    pub method: Option<String>,
    pub labels: Option<LabelSource>,
    pub bootstrap: Bootstrap,
    pub json: bool,
}

pub fn compare(ctx: &Ctx, (a, b): (&str, &str), args: Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let catalog = ctx.catalog()?;
    let method = match args.method.as_deref() {
        None => None,
        Some(m) => Some(Method::parse(m).ok_or_else(|| {
            input_error(format!(
                "unknown method \"{}\" (er-batch, er-all, oc, d-oc, sr, sr-cot)",
                m
            ))
        })?),
    };
    if let Some(s) = &args.scale
        && catalog.scale(s).is_none()
    {
        return Err(input_error(format!(
            "unknown scale \"{}\" (`incharacter scales` lists them)",
            s
        )));
    }
    let (a_id, a) = load_named(ctx, a)?;
    let (b_id, b) = load_named(ctx, b)?;
    let options = compare::Options {
        scale: args.scale,
        method,
        labels: args.labels,
        bootstrap: args.bootstrap,
    };
    let c = compare::compare((&a_id, &a), (&b_id, &b), &catalog, &options).map_err(|e| input_error(e.to_string()))?;
    if args.json {
        let mut value = serde_json::to_value(&c)?;
        value["labels"] = args.labels.map_or(serde_json::Value::Null, |l| l.name().into());
        writeln!(out, "{}", crate::text::json_pretty(&value)?)?;
    } else {
        write!(out, "{}", text(&c, args.labels))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn signed(x: f64) -> String {
    crate::text::decimals(x, 3, true)
}

fn interval(p: &Paired) -> String {
    p.ci.map_or("–".into(), |[lo, hi]| format!("[{}, {}]", signed(lo), signed(hi)))
}

/// The comparison as a person reads it.
pub fn text(c: &Comparison, labels: Option<LabelSource>) -> String {
    let mut s = String::new();
    for (letter, side) in [("A", &c.a), ("B", &c.b)] {
        s.push_str(&format!(
            "{letter}  {}  (rpa {}, judge {})\n",
            side.session, side.rpa, side.judge
        ));
    }
    let groups: Vec<String> = c
        .groups
        .iter()
        .map(|g| format!("{} × {} ({})", g.scale, g.method, g.n))
        .collect();
    let against = labels.map_or("PDb labels, else annotations, else targets".to_string(), |l| {
        format!("{} labels", l.name())
    });
    s.push_str(&format!(
        "n = {} pairs (character × dimension, per scale × method) of {} character(s): {}; against the {against}\n\n",
        c.n,
        c.characters,
        groups.join(", ")
    ));
    let mut t = Table::new(&["", ">A", ">B", ">B − A", ">95% CI", ">p"]);
    for (name, p) in [("MAE", &c.mean_abs_error), ("Acc_Dim", &c.acc_dim)] {
        t.row(vec![
            name.to_string(),
            format!("{:.3}", p.a),
            format!("{:.3}", p.b),
            signed(p.diff),
            interval(p),
            format!("{:.4}", p.p),
        ]);
    }
    s.push_str(&t.render());
    let how = if c.permutation.exact {
        format!("exact over all {} sign patterns", c.permutation.resamples)
    } else {
        format!(
            "Monte Carlo, {} random sign patterns (seed {})",
            c.permutation.resamples, c.bootstrap.seed
        )
    };
    s.push_str(&format!(
        "\nMAE: lower is closer to the labels (B − A < 0: B is closer). CI: percentile bootstrap over characters, \
         {} resamples, seed {}; p: paired sign-flip permutation over characters, {how}.\n",
        c.bootstrap.resamples, c.bootstrap.seed
    ));
    // A percentile bootstrap over a handful of characters is too narrow (it can exclude 0 where the
    // exact test does not reject): said where it would mislead.
    if c.characters < FEW_CHARACTERS {
        s.push_str(&format!(
            "With {} character(s) the bootstrap interval runs narrow: go by p{}.\n",
            c.characters,
            if c.permutation.exact {
                " (exact at this size)"
            } else {
                ""
            }
        ));
    }
    s
}

/// Below this many characters, a percentile bootstrap interval is said to run narrow.
const FEW_CHARACTERS: usize = 10;
