//! No input makes the loaders panic: every bundled scale and character file, damaged at random
//! (bytes deleted, duplicated, replaced), must parse or fail with located diagnostics.

use incharacter::catalog::Catalog;
use incharacter::domain::character::Character;
use incharacter::domain::diagnostic::Source;
use incharacter::domain::rng::SplitMix64;
use incharacter::domain::scale::Scale;

const NASTY: &[&str] = &[
    "\"",
    "[",
    "]",
    "{",
    "}",
    "=",
    "\n",
    "[[items]]\n",
    "-2147483648",
    "2147483647",
    "1e309",
    "nan",
    "\u{1b}[31m",
    "钟",
    "\\u0000",
    "\"X\"",
    "type = \"Q\"",
    "keying = \"\"",
    "range = [5, 1]",
    "range = [-2147483648, 2147483647]",
];

fn damage(text: &str, rng: &mut SplitMix64) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(3) {
            0 => {
                let end = (at + rng.below(40)).min(bytes.len());
                bytes.drain(at..end);
            }
            1 => {
                let piece = NASTY[rng.below(NASTY.len())].as_bytes();
                bytes.splice(at..at, piece.iter().copied());
            }
            _ => {
                let end = (at + rng.below(80)).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                let to = rng.below(bytes.len() + 1);
                bytes.splice(to..to, copy);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn damaged_files_never_panic() {
    let catalog = Catalog::bundled().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let scales = ["GSE", "16Personalities", "LOT-R", "ICB"]
        .map(|id| std::fs::read_to_string(root.join(format!("assets/scales/{id}.toml"))).unwrap());
    let characters = ["hermione-en", "zhongli-zh"]
        .map(|id| std::fs::read_to_string(root.join(format!("assets/characters/{id}.toml"))).unwrap());
    for seed in 0..3000u64 {
        let mut rng = SplitMix64(seed);
        let (text, is_scale) = if seed % 2 == 0 {
            (damage(&scales[rng.below(scales.len())], &mut rng), true)
        } else {
            (damage(&characters[rng.below(characters.len())], &mut rng), false)
        };
        let source = Source::new("damaged.toml", &text);
        let result = std::panic::catch_unwind(|| {
            let errors = if is_scale {
                Scale::parse(source).err()
            } else {
                Character::parse(source, |id| catalog.scale(id)).err()
            };
            for e in errors.unwrap_or_default() {
                let lines = text.lines().count().max(1) + 1;
                assert!(e.line >= 1 && e.line <= lines && e.column >= 1, "{e}");
            }
        });
        assert!(result.is_ok(), "seed {seed} panicked on:\n{text}");
    }
}
