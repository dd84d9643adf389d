//! Compiles every bundled scale and character file into the binary, so a new file in `assets/` needs
//! no code change, and the sample sessions, so an installed binary's demo needs no checkout.

// Cargo reads its instructions from stdout.
#![allow(clippy::disallowed_macros)]

use std::{env, fs, path::Path};

fn main() {
    let root = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let mut out = String::new();
    for (kind, constant) in [("scales", "SCALES"), ("characters", "CHARACTERS")] {
        let dir = Path::new(&root).join("assets").join(kind);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        out.push_str(&format!("pub static {constant}: &[(&str, &str)] = &[\n"));
        for path in files {
            let name = format!("assets/{kind}/{}", path.file_name().unwrap().to_string_lossy());
            out.push_str(&format!(
                "    ({name:?}, include_str!({:?})),\n",
                path.display().to_string()
            ));
        }
        out.push_str("];\n");
    }
    let samples = Path::new(&root).join("sample-sessions");
    println!("cargo:rerun-if-changed={}", samples.display());
    let mut files = Vec::new();
    walk(&samples, &mut files);
    files.sort();
    out.push_str("pub static SAMPLES: &[(&str, &[u8])] = &[\n");
    for path in files {
        let name = path
            .strip_prefix(&samples)
            .expect("under sample-sessions")
            .to_string_lossy()
            .to_string();
        out.push_str(&format!(
            "    ({name:?}, include_bytes!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("bundled.rs");
    fs::write(dest, out).expect("write bundled.rs");
}

fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            walk(&path, files);
        } else {
            files.push(path);
        }
    }
}
