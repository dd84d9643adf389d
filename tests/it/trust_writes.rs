//! Files written for the user and text shown from imports, as a hostile world would test them. A
//! write that fails (a full disk: simulated with RLIMIT_FSIZE, which runs everywhere, and for real on
//! a tmpfs where one can be mounted) leaves the old file, no temporary and no empty file, names the
//! path and exits 1; a symbolic link where a file goes is refused with exit 2 and left as it was.
//! CSV cells a spreadsheet would run arrive as text; escape sequences from an imported note never
//! reach the terminal. `annotations import` refuses devices, FIFOs and oversized files before
//! reading them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use incharacter_testkit::fake_openai::FakeConfig;

use crate::common;

const GSE: &str = "20261129-201520-gse-on-the-local-model-e700";
const FORMULAS: [&str; 3] = ["=HYPERLINK(\"http://evil\",\"x\")", "=cmd|' /C calc'!A0", "@SUM(1+1)"];

/// The binary on `data` (no config) from `cwd`, on a full disk ([`common::on_full_disk`]).
fn on_full_disk(data: &Path, cwd: &Path, blocks: u64, args: &[&str]) -> Output {
    common::on_full_disk(&data.join("none.toml"), data, cwd, blocks, args)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A failed write: exit 1, the path named, the old bytes (or no file) left, no temporary.
fn assert_failed_cleanly(out: &Output, dir: &Path, name: &str, old: Option<&[u8]>) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{name}: {err}");
    assert!(err.contains(&format!("cannot write {name}: ")), "{name}: {err}");
    match old {
        Some(old) => assert_eq!(std::fs::read(dir.join(name)).unwrap(), old, "{name} was replaced"),
        None => assert!(!dir.join(name).exists(), "{name} was left behind"),
    }
    let left: Vec<String> = names(dir).into_iter().filter(|n| n.contains(".incharacter-")).collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
}

#[test]
fn an_export_on_a_full_disk_leaves_the_old_file_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let old = b"{\"an\": \"earlier export\"}\n";
    for format in ["json", "csv", "md"] {
        std::fs::write(dir.path().join("x.out"), old).unwrap();
        let out = on_full_disk(
            &data,
            dir.path(),
            0,
            &["export", GSE, "--format", format, "-o", "x.out"],
        );
        assert_failed_cleanly(&out, dir.path(), "x.out", Some(old));
        let out = on_full_disk(
            &data,
            dir.path(),
            0,
            &["export", GSE, "--format", format, "-o", "new.out"],
        );
        assert_failed_cleanly(&out, dir.path(), "new.out", None);
    }
    // With room, the same command replaces the file whole.
    let out = ok(common::offline(
        &data,
        &[
            "export",
            GSE,
            "--format",
            "json",
            "-o",
            dir.path().join("x.out").to_str().unwrap(),
        ],
    ));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("wrote "));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("x.out")).unwrap()).unwrap();
    assert_eq!(v["session"]["id"], GSE, "{}", &v.to_string()[..200]);
}

/// `ulimit -f` with SIGXFSZ left at its default (which kills a process that writes past it): the
/// binary catches the signal, so the write fails as on a full disk and its temporary is removed.
#[test]
fn a_file_size_limit_fails_the_write_instead_of_killing_the_process_mid_write() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let old = b"an earlier export\n";
    std::fs::write(dir.path().join("x.out"), old).unwrap();
    let args = ["export", GSE, "--format", "csv", "-o", "x.out"];
    let out = common::in_shell(
        "trap - XFSZ; ulimit -f 0; exec \"$@\"",
        &data.join("none.toml"),
        &data,
        dir.path(),
        &args,
    );
    assert_failed_cleanly(&out, dir.path(), "x.out", Some(old));
}

/// Standard output sent to a file that cannot take it all: the error says it was standard output.
#[test]
fn a_failed_write_to_standard_output_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = ["export", GSE, "--format", "json", "-o", "-"];
    let out = common::in_shell(
        "ulimit -f 1; exec \"$@\" > piped.json",
        &data.join("none.toml"),
        &data,
        dir.path(),
        &args,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write to standard output: "), "{err}");
}

/// The config file the workbench reads is no place for an output: every command after would stop
/// at it. Refused (exit 2) by its path, through a link, or as a hard link to it; left as it was.
#[test]
fn an_output_never_replaces_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("config.toml");
    let text = "[sampling.rpa]\ntemperature = 0.5\n";
    std::fs::write(&config, text).unwrap();
    std::os::unix::fs::symlink(&config, dir.path().join("link.toml")).unwrap();
    std::fs::hard_link(&config, dir.path().join("hard.toml")).unwrap();
    for target in ["config.toml", "link.toml", "hard.toml"] {
        let path = dir.path().join(target);
        for args in [
            vec!["export", GSE, "--format", "json", "-o"],
            vec!["annotations", "export", GSE, "-o"],
        ] {
            let mut args = args.clone();
            args.push(path.to_str().unwrap());
            let out = common::command(&config, &data, &args).output().unwrap();
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{target} {args:?}: {err}");
            assert!(err.contains("is the workbench's config file; not written"), "{err}");
            assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
        }
    }
}

/// A copy of a bundled sample as a session of the data dir `data`; its folder.
fn own_copy(data: &Path, id: &str) -> PathBuf {
    let to = data.join("sessions").join(id);
    std::fs::create_dir_all(&to).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(id);
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        if entry.path().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    to
}

#[test]
fn an_output_never_replaces_a_file_of_the_data_dir_and_a_complete_session_is_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let session = own_copy(&data, GSE);
    let journal = session.join("journal.jsonl");
    let before = std::fs::read(&journal).unwrap();
    // An export, annotations or a figure aimed at the session's own journal: refused, kept.
    let target = journal.display().to_string();
    for args in [
        &["export", GSE, "-o", &target][..],
        &["annotations", "export", GSE, "-o", &target],
        &["batch", "export", GSE, "-o", &target],
    ] {
        let out = common::offline(&data, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("a folder the workbench keeps its own files in"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(
            std::fs::read(&journal).unwrap(),
            before,
            "{args:?} replaced the journal"
        );
    }
    // A figure over a file the data dir holds (any file there: the workbench cannot know which
    // ones it will read).
    let kept = session.join("figure.png");
    std::fs::write(&kept, b"kept").unwrap();
    let out = common::offline(
        &data,
        &["plot", GSE, "--kind", "bars", "-o", &kept.display().to_string()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read(&kept).unwrap(), b"kept");
    // The same file reached through a link to the data dir is the same file.
    std::os::unix::fs::symlink(&data, dir.path().join("alias")).unwrap();
    let aliased = dir.path().join("alias/sessions").join(GSE).join("journal.jsonl");
    let out = common::offline(&data, &["export", GSE, "-o", &aliased.display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // Outside the data dir, and beside its folders, in its `exports` (made when wanted) or in a
    // folder of the user's own there, files are the user's: written, and written over.
    std::fs::create_dir_all(data.join("figures")).unwrap();
    for target in [
        dir.path().join("out.json"),
        data.join("export.json"),
        data.join("exports/a.json"),
        data.join("figures/a.json"),
    ] {
        for _ in 0..2 {
            ok(common::offline(
                &data,
                &["export", GSE, "-o", &target.display().to_string()],
            ));
        }
    }
    // A new file in one of its folders is refused too: it would be read as the workbench's own (a
    // character every command then warns about, a session that is not one), and no folder is made
    // for it.
    for target in [
        session.join("new.json"),
        data.join("characters/planted.toml"),
        data.join("sessions/planted/journal.jsonl"),
        data.join("nowhere/../scales/planted.toml"),
    ] {
        let out = common::offline(&data, &["export", GSE, "-o", &target.display().to_string()]);
        assert_eq!(out.status.code(), Some(2), "{target:?}: {}", stderr(&out));
        assert!(!target.exists(), "{target:?}");
    }
    assert!(!data.join("sessions/planted").exists() && !data.join("characters").exists());
    // Nor is a mistyped folder made: said, nothing written.
    let typo = dir.path().join("no-such-folder/out.json");
    let out = common::offline(&data, &["export", GSE, "-o", &typo.display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no-such-folder does not exist; nothing written"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("no-such-folder").exists());
    // A complete session resumed: said so, its summary printed, nothing appended.
    let out = ok(common::offline(&data, &["run", "--resume", GSE]));
    assert!(
        stderr(&out).contains("is complete: nothing to resume"),
        "{}",
        stderr(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(GSE), "the summary");
    // Nothing to export in batch form either: refused, no file.
    let file = dir.path().join("requests.jsonl");
    let out = common::offline(&data, &["batch", "export", GSE, "-o", &file.display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no request is left to export"),
        "{}",
        stderr(&out)
    );
    assert!(!file.exists());
    assert_eq!(std::fs::read(&journal).unwrap(), before, "the journal is as it was");
}

#[test]
fn an_export_takes_its_format_from_the_files_name_and_refuses_a_contradiction() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = |name: &str| dir.path().join(name).display().to_string();
    ok(common::offline(&data, &["export", GSE, "-o", &path("results.csv")]));
    let csv = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
    assert!(!csv.starts_with('{') && csv.lines().count() > 1, "{csv}");
    ok(common::offline(&data, &["export", GSE, "-o", &path("summary.md")]));
    assert!(
        std::fs::read_to_string(dir.path().join("summary.md"))
            .unwrap()
            .starts_with("# Session ")
    );
    ok(common::offline(&data, &["export", GSE, "-o", &path("plain.out")]));
    serde_json::from_slice::<serde_json::Value>(&std::fs::read(dir.path().join("plain.out")).unwrap()).unwrap();
    let out = common::offline(&data, &["export", GSE, "--format", "json", "-o", &path("wrong.csv")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--format json would write JSON into"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("wrong.csv").exists());
}

#[test]
fn a_plot_or_a_card_on_a_full_disk_leaves_the_old_file_and_no_empty_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let old = b"an earlier figure";
    std::fs::write(dir.path().join("w.png"), old).unwrap();
    std::fs::write(dir.path().join("card.json"), old).unwrap();
    let old = Some(&old[..]);
    let cases = [
        (vec!["plot", GSE, "--kind", "bars", "-o", "w.png"], "w.png", old),
        (vec!["plot", GSE, "--kind", "radar", "-o", "new.svg"], "new.svg", None),
        (vec!["plot", GSE, "--kind", "radar", "-o", "new.png"], "new.png", None),
        (vec!["export-card", "hermione-en", "-o", "card.json"], "card.json", old),
        (vec!["export-card", "hermione-en", "-o", "card.png"], "card.png", None),
    ];
    for (args, name, old) in cases {
        let out = on_full_disk(&data, dir.path(), 0, &args);
        assert_failed_cleanly(&out, dir.path(), name, old);
    }
}

#[test]
fn prompts_export_on_a_full_disk_leaves_no_empty_template_and_keeps_the_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = on_full_disk(&data, dir.path(), 0, &["prompts", "export", "prompts"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write prompts/expert_rating.txt: "), "{err}");
    assert!(
        !dir.path().join("prompts").exists(),
        "a folder made for nothing is removed"
    );

    // Over an edited folder with --force: every file stays as it was.
    let folder = dir.path().join("prompts");
    ok(common::offline(&data, &["prompts", "export", folder.to_str().unwrap()]));
    std::fs::write(folder.join("reask.txt"), "mine: {problem}").unwrap();
    let before = common::snapshot(&folder);
    let out = on_full_disk(&data, dir.path(), 0, &["prompts", "export", "--force", "prompts"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(common::snapshot(&folder), before);
}

/// A filesystem mounted on `at`, unmounted on drop.
struct Mounted(PathBuf);

impl Mounted {
    /// A tmpfs of `size` at `at` (`None` where mounting is not allowed: the RLIMIT_FSIZE tests above
    /// simulate the full disk).
    fn mount(at: &Path, size: &str) -> Option<Mounted> {
        Mounted::run(at, &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
    }

    /// `from` seen again at `at` (`None` where mounting is not allowed).
    fn bind(from: &Path, at: &Path) -> Option<Mounted> {
        Mounted::run(at, &["--bind", from.to_str().unwrap()])
    }

    fn run(at: &Path, args: &[&str]) -> Option<Mounted> {
        std::fs::create_dir_all(at).unwrap();
        match Command::new("mount").args(args).arg(at).output() {
            Ok(o) if o.status.success() => Some(Mounted(at.to_path_buf())),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot mount here ({})",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount ({e})");
                None
            }
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

/// The reproduction on a real full filesystem: `export -o x.json` over an existing x.json.
#[test]
fn an_export_over_a_file_on_a_really_full_filesystem_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = Mounted::mount(&dir.path().join("disk"), "64k") else {
        return;
    };
    let data = disk.0.join("data");
    let old = b"{\"an\": \"earlier export\"}\n";
    std::fs::write(disk.0.join("x.json"), old).unwrap();
    // Fill the disk to the last byte.
    let mut filler = std::fs::File::create(disk.0.join("filler")).unwrap();
    let block = vec![b'f'; 1024];
    while std::io::Write::write_all(&mut filler, &block).is_ok() {}
    while std::io::Write::write_all(&mut filler, b"f").is_ok() {}
    drop(filler);
    let out = Command::new(env!("CARGO_BIN_EXE_incharacter"))
        .args(["export", GSE, "--format", "json", "-o", "x.json"])
        .current_dir(&disk.0)
        .env("INCHARACTER_DATA_DIR", &data)
        .env("INCHARACTER_CONFIG", data.join("none.toml"))
        .output()
        .unwrap();
    assert_failed_cleanly(&out, &disk.0, "x.json", Some(old));
    assert!(stderr(&out).contains("No space left on device"), "{}", stderr(&out));
}

#[test]
fn prompts_export_on_a_disk_that_fills_part_way_writes_no_template() {
    let dir = tempfile::tempdir().unwrap();
    // Room for a few of the templates (each takes a page), not for all of them.
    let Some(disk) = Mounted::mount(&dir.path().join("disk"), "64k") else {
        return;
    };
    let data = dir.path().join("data");
    let out = common::offline(&data, &["prompts", "export", disk.0.join("set").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("No space left on device"), "{}", stderr(&out));
    assert_eq!(
        names(&disk.0),
        Vec::<String>::new(),
        "no partial set, no temporary, no folder"
    );
}

/// `export GSE --format json -o <to>` on the data dir `data`.
fn export_to(data: &Path, to: &Path) -> Output {
    common::offline(data, &["export", GSE, "--format", "json", "-o", to.to_str().unwrap()])
}

#[test]
fn an_output_through_a_second_way_to_the_data_dir_is_refused_too() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let journal = own_copy(&data, GSE).join("journal.jsonl");
    let before = std::fs::read(&journal).unwrap();
    let Some(alias) = Mounted::bind(&data, &dir.path().join("alias")) else {
        return;
    };
    let out = export_to(&data, &alias.0.join("sessions").join(GSE).join("journal.jsonl"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("in a folder the workbench keeps its own files in"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&journal).unwrap(), before);
    // A second way in inside the data dir's own exports folder leads to the same refusal.
    let inner = Mounted::bind(&data, &data.join("exports").join("inner")).unwrap();
    let out = export_to(&data, &inner.0.join("sessions").join(GSE).join("journal.jsonl"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(std::fs::read(&journal).unwrap(), before);
    drop(inner);
    // A second way to one session's folder alone, or to the samples and one of them.
    let session = Mounted::bind(&data.join("sessions").join(GSE), &dir.path().join("one")).unwrap();
    for target in [session.0.join("journal.jsonl"), session.0.join("new.json")] {
        let out = export_to(&data, &target);
        assert_eq!(out.status.code(), Some(2), "{target:?}: {}", stderr(&out));
    }
    drop(session);
    assert_eq!(std::fs::read(&journal).unwrap(), before);
    let samples = dir.path().join("samples");
    std::fs::create_dir_all(samples.join(GSE)).unwrap();
    std::fs::copy(&journal, samples.join(GSE).join("journal.jsonl")).unwrap();
    std::fs::create_dir_all(samples.join(GSE).join("annotations")).unwrap();
    std::fs::write(samples.join(GSE).join("annotations/maintainer.jsonl"), "").unwrap();
    let kept = common::snapshot(&samples.join(GSE).join("annotations"));
    let all = Mounted::bind(&samples, &dir.path().join("all-samples")).unwrap();
    let one = Mounted::bind(&samples.join(GSE), &dir.path().join("one-sample")).unwrap();
    let notes = Mounted::bind(&samples.join(GSE).join("annotations"), &dir.path().join("notes")).unwrap();
    for target in [
        all.0.join(GSE).join("journal.jsonl"),
        one.0.join("journal.jsonl"),
        one.0.join("x.json"),
        notes.0.join("maintainer.jsonl"),
    ] {
        let out = common::command(
            &data.join("none.toml"),
            &data,
            &["export", GSE, "-o", target.to_str().unwrap()],
        )
        .env("INCHARACTER_SAMPLES", &samples)
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(2), "{target:?}: {}", stderr(&out));
    }
    drop((all, one, notes));
    assert_eq!(common::snapshot(&samples.join(GSE).join("annotations")), kept);
    assert_eq!(std::fs::read(samples.join(GSE).join("journal.jsonl")).unwrap(), before);
    // The data dir's top level, reached the same way, stays the user's.
    let out = export_to(&data, &alias.0.join("x.json"));
    assert!(out.status.success(), "{}", stderr(&out));
}

#[cfg(unix)]
#[test]
fn a_link_where_a_file_goes_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let precious = dir.path().join("precious");
    std::fs::write(&precious, "keep").unwrap();
    let link = |name: &str| {
        let path = dir.path().join(name);
        std::os::unix::fs::symlink(&precious, &path).unwrap();
        path
    };
    let prompts = dir.path().join("prompts");
    std::fs::create_dir(&prompts).unwrap();
    std::os::unix::fs::symlink(&precious, prompts.join("reask.txt")).unwrap();
    let (json, csv, png, card) = (link("x.json"), link("x.csv"), link("w.png"), link("card.json"));
    let runs: [Vec<&str>; 5] = [
        vec!["export", GSE, "--format", "json", "-o", json.to_str().unwrap()],
        vec!["export", GSE, "-o", csv.to_str().unwrap()],
        vec!["plot", GSE, "--kind", "bars", "-o", png.to_str().unwrap()],
        vec!["export-card", "hermione-en", "-o", card.to_str().unwrap()],
        vec!["prompts", "export", "--force", prompts.to_str().unwrap()],
    ];
    for args in runs {
        let out = common::offline(&data, &args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("is a symbolic link"), "{args:?}: {err}");
    }
    for path in [json, csv, png, card, prompts.join("reask.txt")] {
        assert_eq!(std::fs::read_link(&path).unwrap(), precious, "{}", path.display());
    }
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep");
    // Nothing of the prompts was written: the link was found before the first file.
    assert_eq!(names(&prompts), ["reask.txt"]);
}

/// A copy of the GSE sample's journal in `data` (without its annotations), and an annotations CSV
/// of the sample's first rows with `notes` in their note column.
fn hostile_sheet(data: &Path, notes: &[&str]) -> PathBuf {
    let copy = data.join("sessions").join(GSE);
    std::fs::create_dir_all(&copy).unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(GSE);
    std::fs::copy(sample.join("journal.jsonl"), copy.join("journal.jsonl")).unwrap();
    let rows = {
        // The sample's own annotations, read from the bundled sample (not the copy).
        let empty = tempfile::tempdir().unwrap();
        ok(common::offline(
            empty.path(),
            &["annotations", "export", GSE, "--format", "csv"],
        ))
        .stdout
    };
    let mut reader = csv::Reader::from_reader(rows.as_slice());
    let header = reader.headers().unwrap().clone();
    let note = header.iter().position(|h| h == "note").unwrap();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header).unwrap();
    for (record, text) in reader.records().zip(notes) {
        let mut fields: Vec<String> = record.unwrap().iter().map(String::from).collect();
        fields[note] = text.to_string();
        w.write_record(&fields).unwrap();
    }
    let sheet = data.join("sheet.csv");
    std::fs::write(&sheet, w.into_inner().unwrap()).unwrap();
    sheet
}

#[test]
fn annotations_export_neutralises_formulas_and_prints_no_escape_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let clear = "before\u{1b}[2Jafter";
    let clipboard = "copy\u{1b}]52;c;ZXZpbA==\u{7}done";
    let hidden = "\u{1b}[8m=cmd|' /C calc'!A0";
    let notes = [
        FORMULAS[0],
        FORMULAS[1],
        FORMULAS[2],
        clear,
        clipboard,
        hidden,
        "two\nlines",
        "  spaces kept around a note ",
    ];
    let sheet = hostile_sheet(&data, &notes);
    ok(common::offline(
        &data,
        &["annotations", "import", GSE, sheet.to_str().unwrap()],
    ));

    let csv = ok(common::offline(
        &data,
        &["annotations", "export", GSE, "--format", "csv"],
    ))
    .stdout;
    assert!(
        !csv.iter().any(|&b| b == 0x1b || b == 0x07),
        "{}",
        String::from_utf8_lossy(&csv)
    );
    let mut reader = csv::Reader::from_reader(csv.as_slice());
    let header = reader.headers().unwrap().clone();
    let (note, value) = (
        header.iter().position(|h| h == "note").unwrap(),
        header.iter().position(|h| h == "value").unwrap(),
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let shown: Vec<&str> = rows.iter().map(|r| &r[note]).collect();
    for formula in FORMULAS {
        assert!(
            shown.contains(&format!("'{formula}").as_str()),
            "{formula} in {shown:?}"
        );
    }
    for expected in ["beforeafter", "copydone", "'=cmd|' /C calc'!A0", "two\nlines"] {
        assert!(shown.contains(&expected), "{expected:?} in {shown:?}");
    }
    for r in &rows {
        assert!(
            r[value] == *"x" || r[value].parse::<f64>().is_ok(),
            "a number stays a number: {r:?}"
        );
    }

    // JSON keeps every note as imported, escaped.
    let json = ok(common::offline(
        &data,
        &["annotations", "export", GSE, "--format", "json"],
    ))
    .stdout;
    assert!(!json.iter().any(|&b| b == 0x1b || b == 0x07));
    let list: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let kept: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["note"].as_str())
        .collect();
    for note in notes {
        assert!(kept.contains(&note), "{note:?} in {kept:?}");
    }
}

#[test]
fn annotations_import_refuses_devices_fifos_and_oversized_files_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    hostile_sheet(&data, &[]);
    let journal = data.join("sessions").join(GSE).join("journal.jsonl");
    let before = std::fs::read(&journal).unwrap();

    let fifo = dir.path().join("ratings.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let big = dir.path().join("big.csv");
    // Sparse: a size, not bytes.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(64 * 1024 * 1024 + 1)
        .unwrap();
    let cases = [
        (Path::new("/dev/zero"), "/dev/zero: not a regular file"),
        (fifo.as_path(), "ratings.fifo: not a regular file"),
        (dir.path(), "not a regular file"),
        (
            big.as_path(),
            "big.csv: larger than the 64 MiB allowed for an annotations CSV",
        ),
    ];
    for (path, message) in cases {
        let out = common::offline(&data, &["annotations", "import", GSE, path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}: {}", path.display(), stderr(&out));
        assert!(stderr(&out).contains(message), "{}", stderr(&out));
    }
    assert_eq!(std::fs::read(&journal).unwrap(), before);
    assert!(!data.join("sessions").join(GSE).join("annotations").exists());
}

/// A user scale whose one dimension is named as a formula, answered by the fake server: its export
/// CSV (to stdout and to a file) carries the name as text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_csv_neutralises_a_user_scales_dimension_names() {
    let s = common::setup(FakeConfig::default(), "").await;
    std::fs::create_dir_all(s.data.join("scales")).unwrap();
    let toml = include_str!("../../assets/scales/GSE.toml")
        .replacen("id = \"GSE\"", "id = \"Evil\"", 1)
        .replace("\"Self-efficacy\"", "\"=HYPERLINK(\\\"http://evil\\\",\\\"x\\\")\"");
    std::fs::write(s.data.join("scales/Evil.toml"), toml).unwrap();
    let run = common::output(
        &s.config,
        &s.data,
        &common::run_hermione("Evil", "er-batch", &["--json"]),
    )
    .await;
    let id = common::session_id(&ok(run));
    let file = s.dir.path().join("evil.csv");
    let printed = ok(common::output(&s.config, &s.data, &["export", &id, "--format", "csv"]).await).stdout;
    ok(common::output(
        &s.config,
        &s.data,
        &["export", &id, "--format", "csv", "-o", file.to_str().unwrap()],
    )
    .await);
    for csv in [printed, std::fs::read(&file).unwrap()] {
        let mut reader = csv::Reader::from_reader(csv.as_slice());
        let header = reader.headers().unwrap().clone();
        let (dimension, score) = (
            header.iter().position(|h| h == "dimension").unwrap(),
            header.iter().position(|h| h == "score").unwrap(),
        );
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert!(!rows.is_empty());
        for r in rows {
            assert_eq!(&r[dimension], format!("'{}", FORMULAS[0]));
            assert!(r[score].parse::<f64>().is_ok(), "the score stays a number: {r:?}");
        }
    }
}

#[test]
fn annotations_export_writes_its_file_whole_and_the_help_states_the_policies() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let sheet = hostile_sheet(&data, &["\u{1b}[2J=cmd|' /C calc'!A0"]);
    ok(common::offline(
        &data,
        &["annotations", "import", GSE, sheet.to_str().unwrap()],
    ));
    let old = b"earlier ratings";
    std::fs::write(dir.path().join("r.csv"), old).unwrap();
    let args = ["annotations", "export", GSE, "--format", "csv", "-o", "r.csv"];
    let out = on_full_disk(&data, dir.path(), 0, &args);
    assert_failed_cleanly(&out, dir.path(), "r.csv", Some(old));
    let file = dir.path().join("r.csv");
    let out = ok(common::offline(
        &data,
        &[
            "annotations",
            "export",
            GSE,
            "--format",
            "csv",
            "-o",
            file.to_str().unwrap(),
        ],
    ));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("wrote "));
    // The file holds the note as imported, neutralised for spreadsheets: a terminal would show it
    // starting with `=`, so it gets the leading `'` too.
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(",'\u{1b}[2J=cmd|' /C calc'!A0,"), "{text}");

    let help = |args: &[&str]| String::from_utf8(ok(common::offline(&data, args)).stdout).unwrap();
    let import = help(&["annotations", "import", "--help"]);
    assert!(import.contains("64 MiB") && import.contains("FIFO"), "{import}");
    let export = help(&["annotations", "export", "--help"]);
    assert!(
        export.contains("leading '") && export.contains("escape sequences"),
        "{export}"
    );
    assert!(help(&["export", "--help"]).contains("symbolic link"));
}

/// The sample sessions are read-only wherever they are (`$INCHARACTER_SAMPLES`, the checkout): an
/// output aimed at one of their files is refused and the sample is left as it was; and `prompts
/// export` never writes its templates into a folder the workbench keeps its own files in.
#[test]
fn an_output_never_replaces_a_sample_sessions_file_nor_goes_into_a_kept_folder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let samples = dir.path().join("samples");
    let sample = samples.join(GSE);
    std::fs::create_dir_all(&sample).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(GSE);
    for file in ["journal.jsonl", "results.json"] {
        std::fs::copy(from.join(file), sample.join(file)).unwrap();
    }
    let before = common::snapshot(&samples);
    let with_samples = |args: &[&str]| {
        common::command(&data.join("none.toml"), &data, args)
            .env("INCHARACTER_SAMPLES", &samples)
            .output()
            .unwrap()
    };
    // The sample is there to read.
    let listed = with_samples(&["sessions", "--json"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains(GSE));
    for file in ["journal.jsonl", "results.json", "new.svg"] {
        let target = sample.join(file).display().to_string();
        let figure = target.replace(file, "bars.svg");
        for args in [
            &["export", GSE, "-o", &target][..],
            &["annotations", "export", GSE, "-o", &target],
            &["plot", GSE, "--kind", "bars", "-o", &figure],
        ] {
            let out = with_samples(args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("a folder the workbench keeps its own files in"),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
    assert_eq!(common::snapshot(&samples), before, "the samples are as they were");

    let sessions = data.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    for target in [sessions.join("pr"), sessions.clone(), samples.join("templates")] {
        let out = with_samples(&["prompts", "export", &target.display().to_string()]);
        assert_eq!(out.status.code(), Some(2), "{target:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("keeps its own files in"), "{}", stderr(&out));
    }
    // A prompt set's own place, a folder of the data dir's prompts, stays open to it.
    let set = data.join("prompts").join("strict");
    std::fs::create_dir_all(data.join("prompts")).unwrap();
    let out = with_samples(&["prompts", "export", &set.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(set.join("expert_rating.txt").is_file());
    // Nor a run's batch files.
    for target in [sessions.join("bf"), samples.clone()] {
        let out = with_samples(&common::run_hermione(
            "GSE",
            "er-batch",
            &["--batch-files", target.to_str().unwrap()],
        ));
        assert_eq!(out.status.code(), Some(2), "{target:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("keeps its own files in"), "{}", stderr(&out));
    }
    assert_eq!(
        std::fs::read_dir(&sessions).unwrap().count(),
        0,
        "nothing made in sessions"
    );
    assert_eq!(common::snapshot(&samples), before);
}

/// A FIFO standing in a session's folder (as its journal, its writer's note or its results) is never
/// opened: opening one would wait for a writer that never comes. `sessions` names the folder and
/// lists the rest; a resume says which file is in the way.
#[test]
fn a_fifo_in_a_sessions_folder_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let session = own_copy(&data, GSE);
    let other = data.join("sessions").join("x");
    std::fs::create_dir_all(&other).unwrap();
    let fifo = |path: &Path| assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
    fifo(&other.join("journal.jsonl"));
    fifo(&session.join("journal.writer"));
    let out = common::offline(&data, &["sessions"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(GSE));
    assert!(
        stderr(&out).contains("x/journal.jsonl: not a regular file"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_file(session.join("journal.writer")).unwrap();
    let _ = std::fs::remove_file(session.join("results.json"));
    fifo(&session.join("results.json"));
    let out = common::offline(&data, &["run", "--resume", GSE]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("results.json: not a regular file"),
        "{}",
        stderr(&out)
    );
}
