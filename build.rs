//! Compiles every bundled scale and character file into the binary, so a new file in `assets/` needs
//! no code change.

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
    let dest = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("bundled.rs");
    fs::write(dest, out).expect("write bundled.rs");
}
