//! A character file, its labels checked against the bundled scales (looked up as the catalog does).

#![no_main]

mod common;

use std::sync::OnceLock;

use incharacter::catalog::Catalog;
use incharacter::domain::character::{Character, LabelSource};
use incharacter::domain::diagnostic::Source;
use libfuzzer_sys::fuzz_target;

const NAME: &str = "character.toml";

fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| Catalog::bundled().expect("the bundled files are valid"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let catalog = catalog();
    match Character::parse(Source::new(NAME, text), |id| catalog.scale(id)) {
        Ok(character) => {
            assert!(character.answers_to(&character.id));
            for source in [LabelSource::Pdb, LabelSource::Annotation] {
                for id in character.labels.source(source).keys() {
                    let scale = catalog.scale(id).expect("labels name only known scales");
                    let code = character.code(scale, source).expect("a labelled scale has a code");
                    assert!(!code.is_empty());
                }
            }
            let _ = character.labels.exclusion_source("BFI");
        }
        Err(diagnostics) => {
            assert!(!diagnostics.is_empty(), "an error without a diagnostic");
            for d in &diagnostics {
                common::assert_within(d, NAME, text);
            }
        }
    }
});
