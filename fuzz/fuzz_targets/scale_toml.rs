//! A scale file: TOML shape, then validation of range, options, dimensions, poles and items.

#![no_main]

mod common;

use incharacter::domain::diagnostic::Source;
use incharacter::domain::scale::{Language, Scale};
use libfuzzer_sys::fuzz_target;

const NAME: &str = "scale.toml";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Scale::parse(Source::new(NAME, text)) {
        Ok(scale) => {
            assert!(scale.range.min < scale.range.max);
            assert!(!scale.dimensions.is_empty());
            for language in [Language::En, Language::Zh] {
                assert_eq!(scale.options.get(language).len(), scale.range.len());
            }
            let (low, high) = scale.dimension_range();
            assert!(low < high);
            for item in scale.scored_items() {
                let d = item.dimension().expect("a scored item has a dimension");
                assert!(d < scale.dimensions.len());
                assert!(item.keying().is_some());
                assert!(scale.item(item.id).is_some());
            }
            for (index, d) in scale.dimensions.iter().enumerate() {
                assert_eq!(scale.dimension_index(&d.name), Some(index));
                assert!(
                    scale.items_of(index).next().is_some(),
                    "dimension {} has no items",
                    d.name
                );
                for high in [None, Some(false), Some(true)] {
                    let _ = d.letter(high);
                }
            }
        }
        Err(diagnostics) => {
            assert!(!diagnostics.is_empty(), "an error without a diagnostic");
            for d in &diagnostics {
                common::assert_within(d, NAME, text);
            }
        }
    }
});
