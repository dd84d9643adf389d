//! The shell completion scripts and the man page, generated from the command line's definition: bash
//! accepts its script, every script and the page know the subcommands.

use std::process::Command;

fn incharacter(args: &[&str]) -> String {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_incharacter"))
        .args(args)
        .env("INCHARACTER_DATA_DIR", empty.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn bash_accepts_its_completion_script() {
    let script = incharacter(&["completions", "bash"]);
    assert!(script.contains("doctor") && script.contains("complete -F"), "{script}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("incharacter.bash");
    std::fs::write(&file, &script).unwrap();
    let check = Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(
        check.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn every_shell_gets_a_script_that_knows_the_subcommands() {
    for shell in ["zsh", "fish", "powershell"] {
        let script = incharacter(&["completions", shell]);
        for subcommand in ["doctor", "run", "replay", "completions"] {
            assert!(script.contains(subcommand), "{shell} lacks {subcommand}");
        }
    }
}

#[test]
fn the_man_page_is_roff_and_names_the_subcommands() {
    let page = incharacter(&["man"]);
    assert!(
        page.starts_with(".ie") || page.starts_with(".TH"),
        "{}",
        &page[..page.len().min(200)]
    );
    assert!(page.contains(".TH incharacter 1"), "{page}");
    for subcommand in ["doctor", "run", "replay", "completions", "man"] {
        assert!(page.contains(subcommand), "the page lacks {subcommand}");
    }
}
