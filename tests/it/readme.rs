//! README shows real screens: each `<!-- screen:NAME -->` block is `assets/screens/NAME.txt` (a
//! capture of `incharacter demo`, made by `tests/e2e/demo.sh … --captures assets/screens`) and each
//! `<!-- snapshot:NAME -->` block is the body of `tests/snapshots/NAME.snap`, so neither can drift.

use std::path::Path;

fn blocks<'a>(readme: &'a str, kind: &str) -> Vec<(&'a str, &'a str)> {
    let open = format!("<!-- {kind}:");
    let mut out = Vec::new();
    let mut rest = readme;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        let name_end = after.find(" -->").expect("a marker ends with -->");
        let name = &after[..name_end];
        let body = &after[name_end + " -->\n".len()..];
        let end = body.find(&format!("<!-- /{kind} -->")).expect("a closing marker");
        let fenced = &body[..end];
        let inner = fenced
            .strip_prefix("```text\n")
            .and_then(|b| b.strip_suffix("```\n"))
            .unwrap_or_else(|| panic!("{kind} {name}: a ```text block"));
        out.push((name, inner));
        rest = &body[end..];
    }
    out
}

#[test]
fn readme_screens_are_the_captured_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let screens = blocks(&readme, "screen");
    assert!(screens.len() >= 2, "live and compare at least");
    for (name, shown) in screens {
        let file = std::fs::read_to_string(root.join("assets/screens").join(format!("{name}.txt"))).unwrap();
        assert_eq!(shown, file, "README's {name} differs from assets/screens/{name}.txt");
    }
    let snapshots = blocks(&readme, "snapshot");
    assert!(!snapshots.is_empty());
    for (name, shown) in snapshots {
        let file = std::fs::read_to_string(root.join("tests/snapshots").join(format!("{name}.snap"))).unwrap();
        let body = file.splitn(3, "---\n").nth(2).expect("an insta header");
        assert_eq!(shown, body, "README's {name} differs from tests/snapshots/{name}.snap");
    }
}
