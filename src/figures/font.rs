//! The font every figure is set in, compiled into the binary: a subset of Noto Sans CJK SC (SIL Open
//! Font License 1.1) holding Latin, Greek, every character of the bundled scales and characters and
//! the 3,755 commonest Chinese characters (assets/fonts/SOURCE.md says where it comes from and how
//! it was cut). Embedded, a PNG renders the same on every machine and no system font is looked up.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef};
use plotters::style::FontStyle;

pub const BYTES: &[u8] = include_bytes!("../../assets/fonts/NotoSansCJKsc-Subset.otf");

/// The family figures name: the embedded font, then any sans-serif for an SVG viewer without it.
/// Plotters writes the family as given into SVG's `font-family`, and finds the font to measure and
/// rasterise text with by the same string among those registered with it.
pub const FAMILY: &str = "Noto Sans CJK SC, sans-serif";

/// Registers the embedded font with plotters (once per process); false if it cannot be read.
pub fn register() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, BYTES).is_ok())
}

/// How many font sizes an em is: plotters sizes text by the font's ascent-to-descent height (1.448 em
/// for Noto Sans CJK), which is what a PNG shows, but writes `font-size` into SVG as if that were
/// 1.24 em; [`svg_sizes`] puts that right.
fn height_in_em() -> f64 {
    FontRef::try_from_slice(BYTES).map_or(1.24, |f| {
        f64::from(f.height_unscaled()) / f64::from(f.units_per_em().unwrap_or(1000.0))
    })
}

/// An SVG from plotters with every `font-size` the em size the PNG draws the same text at.
pub fn svg_sizes(svg: &str) -> String {
    const ATTRIBUTE: &str = "font-size=\"";
    let factor = 1.24 / height_in_em();
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(at) = rest.find(ATTRIBUTE) {
        let start = at + ATTRIBUTE.len();
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find('"').unwrap_or(rest.len());
        match rest[..end].parse::<f64>() {
            Ok(size) => out.push_str(&format!("{:.2}", size * factor)),
            Err(_) => out.push_str(&rest[..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The characters of `text` the embedded font has no glyph for (they would be drawn as boxes), each
/// once, in order; whitespace never counts.
pub fn missing(text: &str) -> Vec<char> {
    let Ok(font) = FontRef::try_from_slice(BYTES) else {
        return text.chars().filter(|c| !c.is_whitespace()).collect();
    };
    let mut out: Vec<char> = Vec::new();
    for c in text.chars() {
        if !c.is_whitespace() && font.glyph_id(c).0 == 0 && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_font_reads_and_covers_latin_greek_and_chinese() {
        assert!(register());
        assert_eq!(missing("Extraversion E/I Acc_Dim ± ρ – · 钟离 外向性 神经质 旅行者"), Vec::<char>::new());
        // A Hangul syllable and an emoji are not in the subset.
        assert_eq!(missing("a 한 😀 b 한"), vec!['한', '😀']);
    }

    #[test]
    fn svg_font_sizes_become_the_em_the_png_draws() {
        let factor = 1.24 / height_in_em();
        assert!((factor - 1.24 / 1.448).abs() < 0.01, "{factor}");
        let svg = r#"<text font-size="20" x="1">a</text><text font-size="x">b</text>"#;
        assert_eq!(
            svg_sizes(svg),
            format!(r#"<text font-size="{:.2}" x="1">a</text><text font-size="x">b</text>"#, 20.0 * factor)
        );
    }

    #[test]
    fn every_character_of_the_bundled_scales_and_characters_has_a_glyph() {
        let catalog = crate::catalog::Catalog::bundled().unwrap();
        let mut text = String::new();
        for s in catalog.scales.iter().map(|e| &e.value) {
            text += &format!("{} {} ", s.name, s.name_zh);
            for d in &s.dimensions {
                text += &format!("{} {} ", d.name, d.name_zh);
            }
        }
        for c in catalog.characters.iter().map(|e| &e.value) {
            text += &format!("{} {} {} ", c.name, c.aliases.join(" "), c.experimenter);
        }
        assert_eq!(missing(&text), Vec::<char>::new());
    }
}
