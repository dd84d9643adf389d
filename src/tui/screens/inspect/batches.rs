//! An expert rating's batches as the Inspector shows them: each batch's items, score, attempts and
//! analysis, and an expected score's making.
use ratatui::text::{Line, Span};

use crate::method::Assessment;
use crate::tui::theme::Theme;
use crate::tui::widgets::{score_text, wrapped};
use crate::tui::wrap::wrap;

/// A dimension the judge rated: its batches with their analyses.
pub(super) fn batch_lines(a: &Assessment, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if let Some(f) = &a.failure {
        lines.extend(wrapped(&format!("failed: {f}"), width, theme.fg(theme.error)));
    }
    for (bi, batch) in a.batches.iter().enumerate() {
        let heading = format!("batch {} ", bi + 1);
        let what = format!(
            "items {:?} → {} ({} attempt{})",
            batch.item_ids,
            score_text(batch.score),
            batch.attempts.len(),
            if batch.attempts.len() == 1 { "" } else { "s" }
        );
        for (i, l) in wrap(&what, width.saturating_sub(heading.len()).max(1))
            .into_iter()
            .enumerate()
        {
            let first = if i == 0 {
                heading.clone()
            } else {
                " ".repeat(heading.len())
            };
            lines.push(Line::from(vec![Span::styled(first, theme.title()), Span::raw(l)]));
        }
        if let Some(w) = &batch.weighed {
            lines.extend(wrapped(&format!("  {}", weighed_text(w)), width, theme.dim()));
        }
        for l in wrap(&batch.analysis, width.saturating_sub(2)) {
            lines.push(Line::raw(format!("  {l}")));
        }
        lines.push(Line::raw(""));
    }
    lines
}

/// An expected score's making: what was written and the options' probabilities.
fn weighed_text(w: &crate::method::weigh::Weighed) -> String {
    let options: Vec<String> = w
        .probabilities
        .iter()
        .map(|(v, p)| format!("{v} {:.0}%", p * 100.0))
        .collect();
    let written = if w.written.fract() == 0.0 {
        format!("{:.0}", w.written)
    } else {
        w.written.to_string()
    };
    format!(
        "expected {:.2}; written {written}; options {}",
        w.expected,
        options.join(" · ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::weigh::Weighed;

    #[test]
    fn an_expected_score_shows_what_was_written_and_each_options_share() {
        let w = Weighed {
            written: 5.0,
            probabilities: vec![(4, 0.375), (5, 0.625)],
            expected: 4.625,
        };
        assert_eq!(weighed_text(&w), "expected 4.62; written 5; options 4 38% · 5 62%");
        let w = Weighed { written: 4.5, ..w };
        assert!(weighed_text(&w).contains("written 4.5;"));
    }
}
