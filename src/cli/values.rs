//! The command line's values: parsers for clap (a count, a temperature, a time budget, a message)
//! and the format an export writes.

use super::input_error;

/// Requests in flight: at least one (zero would wait forever, or mean nothing).
pub(crate) fn concurrency(text: &str) -> Result<usize, String> {
    let most = crate::config::MAX_CONCURRENCY;
    match text.parse::<usize>() {
        Ok(n) if (1..=most).contains(&n) => Ok(n),
        _ => Err(format!(
            "\"{text}\" is not a number of requests in flight (1 to {most})"
        )),
    }
}

/// A sampling temperature, 0–2.
pub(crate) fn temperature(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(t) if (0.0..=2.0).contains(&t) => Ok(t),
        _ => Err(format!("\"{text}\" is not a temperature between 0 and 2")),
    }
}

/// The format an export writes: `--format`, else the output file's extension when it is one of
/// `known`, else `default`. A format that contradicts the file's extension is refused, not written
/// under a misleading name.
pub(crate) fn output_format(
    format: Option<&str>,
    output: Option<&std::path::Path>,
    known: &[&str],
    default: &str,
) -> anyhow::Result<String> {
    let extension = output
        .and_then(|p| p.extension())
        .map(|e| e.to_string_lossy().to_lowercase())
        .filter(|e| known.contains(&e.as_str()));
    match (format, extension) {
        (Some(f), _) if !known.contains(&f) => {
            Err(input_error(format!("unknown format \"{f}\" ({})", known.join(", "))))
        }
        (Some(f), Some(e)) if f != e => Err(input_error(format!(
            "--format {f} would write {} into {}: drop --format, or name the file .{f}",
            f.to_uppercase(),
            output.map_or(String::new(), |p| p.display().to_string())
        ))),
        (Some(f), _) => Ok(f.to_string()),
        (None, Some(e)) => Ok(e),
        (None, None) => Ok(default.into()),
    }
}

/// A message to send: some text, not only white space.
pub(super) fn message(text: &str) -> Result<String, String> {
    match text.trim().is_empty() {
        true => Err("an empty message: give some text to send".into()),
        false => Ok(text.to_string()),
    }
}

/// A time budget in seconds: more than 0, at most an hour.
pub(super) fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 3600.0 => Ok(x),
        _ => Err(format!("{text} is not a number of seconds above 0 and at most 3600")),
    }
}
