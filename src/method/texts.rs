//! The values the judge's and the agent's templates are filled with that come from a scale, one of its
//! dimensions or the character: the range's ends and middle with their option labels, the dimension's
//! words, poles and note, and the questionnaire's own instructions. Every template that may use one is
//! given all of them (a user's file may use any), so they are built in one place.

use crate::domain::scale::{Language, Scale};
use crate::templates::fill;

/// A template's values, owned.
pub type Values = Vec<(&'static str, String)>;

/// `values` as [`crate::templates::Templates::render`] takes them.
pub fn pairs(values: &Values) -> Vec<(&str, &str)> {
    values.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

/// The range's ends and middle, and the English labels of the options there (no middle label when no
/// option is in the middle).
pub fn range(scale: &Scale) -> Values {
    let r = scale.range;
    let mid = r.midpoint();
    let label = |v: i32| {
        usize::try_from(v - r.min)
            .ok()
            .and_then(|i| scale.options.en.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let mid_label = if mid.fract() == 0.0 { label(mid as i32) } else { String::new() };
    vec![
        ("range.min", r.min.to_string()),
        ("range.mid", format!("{mid}")),
        ("range.max", r.max.to_string()),
        ("option.min", label(r.min)),
        ("option.mid", mid_label),
        ("option.max", label(r.max)),
    ]
}

/// A scale text with `{character}` filled (the questionnaire's own instructions name the character).
fn naming(text: &Option<String>, character: &str) -> String {
    text.as_deref()
        .map(|t| fill(t, &[("character", character)]))
        .unwrap_or_default()
}

/// Dimension `d`'s name, description, words, note, poles and own instruction (`character` names the
/// character in it).
pub fn dimension(scale: &Scale, d: usize, character: &str) -> Values {
    let dim = &scale.dimensions[d];
    let (a, b) = match &dim.poles {
        Some([a, b]) => ((a.clone(), dim.high.en.clone()), (b.clone(), dim.low.en.clone())),
        None => Default::default(),
    };
    vec![
        ("dimension", dim.name.clone()),
        ("description", dim.description.en.trim().to_string()),
        ("dimension.note", dim.note.clone().unwrap_or_default()),
        ("dimension.low", dim.low.en.clone()),
        ("dimension.high", dim.high.en.clone()),
        ("dimension.conversion_instruction", naming(&dim.conversion_instruction, character)),
        ("dimension.conversion_prompt", naming(&dim.conversion_prompt, character)),
        ("pole_a.letter", a.0),
        ("pole_a.name", a.1),
        ("pole_b.letter", b.0),
        ("pole_b.name", b.1),
    ]
}

/// The questionnaire's own instructions (`character` names the character in them; the self-report
/// one in `language`).
pub fn questionnaire(scale: &Scale, character: &str, language: Language) -> Values {
    vec![
        ("scale_name", scale.name.clone()),
        ("scale_id", scale.id.clone()),
        ("scale.conversion_instruction", naming(&scale.conversion_instruction, character)),
        ("scale.questionnaire_prompt", scale.questionnaire_prompt.clone().unwrap_or_default()),
        ("scale.conversion_prompt", naming(&scale.conversion_prompt, character)),
        ("scale.questionnaire_setting", scale.questionnaire_setting.clone().unwrap_or_default()),
        (
            "scale.self_report_instruction",
            scale
                .self_report_instruction
                .as_ref()
                .map(|i| i.get(language).clone())
                .unwrap_or_default(),
        ),
    ]
}
