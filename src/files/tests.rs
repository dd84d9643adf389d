use super::*;

/// The names in folder `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    n.sort();
    n
}

#[test]
fn files_written_together_change_all_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b, c, gone] = ["a", "b", "c", "gone"].map(|n| dir.path().join(n));
    std::fs::write(&a, "old a").unwrap();
    std::fs::write(&gone, "old").unwrap();
    std::fs::create_dir(&c).unwrap();
    let names = || names(dir.path());
    let e = write_all_or_none(&[
        (a.clone(), Some(b"new a".as_slice())),
        (gone.clone(), None),
        (b.clone(), Some(b"new b".as_slice())),
        (c.clone(), Some(b"new c".as_slice())),
    ])
    .unwrap_err();
    assert!(matches!(e, FileError::NotAFileToWrite(ref p) if *p == c), "{e}");
    assert_eq!(names(), ["a", "c", "gone"], "no temporary, no new file");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "old a");
    std::fs::remove_dir(&c).unwrap();
    write_all_or_none(&[
        (a.clone(), Some(b"new a".as_slice())),
        (gone.clone(), None),
        (b.clone(), Some(b"new b".as_slice())),
        (c.clone(), None),
    ])
    .unwrap();
    assert_eq!(names(), ["a", "b"], "the old files are not left aside");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "new a");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "new b");

    // A swap failing after others were made puts every old file back: written, removed, new.
    std::fs::write(&gone, "kept").unwrap();
    for fail_at in 1..4 {
        FAIL_SWAP.with(|f| f.set(Some(fail_at)));
        let e = write_all_or_none(&[
            (a.clone(), Some(b"newer a".as_slice())),
            (gone.clone(), None),
            (c.clone(), Some(b"new c".as_slice())),
            (b.clone(), Some(b"newer b".as_slice())),
        ]);
        FAIL_SWAP.with(|f| f.set(None));
        assert!(e.is_err(), "fails at {fail_at}");
        assert_eq!(names(), ["a", "b", "gone"], "as before, nothing aside (failing at {fail_at})");
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new a");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "new b");
        assert_eq!(std::fs::read_to_string(&gone).unwrap(), "kept");
    }
}

#[test]
fn a_json_error_is_placed_from_column_one_and_said_once() {
    for (text, line, column) in [
        ("", 1, 1),
        ("\n\n", 3, 1),
        ("{\"a\": tru}", 1, 10),
        ("{\"t\":\"日本語日本語日本語\", x}", 1, 19),
        ("[\n\"é\", x]", 2, 6),
        // At the end of the text, inside its last character: that character's column.
        ("\"é", 1, 2),
    ] {
        let e = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
        assert_eq!((e.line(), json_column(text, &e)), (line, column), "{text:?}");
        assert!(!json_message(&e).contains(" at line "), "{}", json_message(&e));
    }
}

#[test]
fn a_write_replaces_the_file_whole_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.json");
    write_atomic(&path, b"old").unwrap();
    write_atomic(&path, b"new").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["x.json"]);
}

#[cfg(unix)]
#[test]
fn a_link_is_neither_followed_nor_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("x.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = write_atomic(&link, b"new").unwrap_err();
    assert!(matches!(e, FileError::Symlink(_)), "{e}");
    assert!(e.is_input());
    assert!(e.to_string().contains("x.json: is a symbolic link"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
}

#[cfg(unix)]
#[test]
fn a_write_that_fails_names_the_path_and_keeps_the_old_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.json");
    std::fs::write(&path, "old").unwrap();
    // A folder where no temporary can be made (root may write anywhere: then nothing to test).
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
    let result = write_atomic(&path, b"new");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    if let Err(e) = result {
        assert!(matches!(e, FileError::Write { .. }) && !e.is_input(), "{e}");
        assert!(
            e.to_string().starts_with(&format!("cannot write {}: ", path.display())),
            "{e}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
    }
}

#[cfg(unix)]
#[test]
fn devices_and_fifos_are_refused_before_reading() {
    let e = read_limited(Path::new("/dev/zero"), 1 << 20, "a test file").unwrap_err();
    assert!(matches!(e, FileError::NotRegular(_)) && e.is_input(), "{e}");
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let e = read_limited(dir.path(), 1 << 20, "a test file").unwrap_err();
    assert!(matches!(e, FileError::NotRegular(_)), "{e}");
    // Written: a folder or a device where the file goes is said to be what it is.
    for target in [dir.path(), Path::new("/dev/null")] {
        let e = write_atomic(target, b"x").unwrap_err();
        assert!(matches!(e, FileError::NotAFileToWrite(_)) && e.is_input(), "{e}");
        assert!(e.to_string().contains("is never written over"), "{e}");
    }
}

#[test]
fn a_file_over_its_limit_is_refused_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.txt");
    std::fs::write(&path, vec![b'a'; 2048]).unwrap();
    let e = read_limited(&path, 1024, "a template").unwrap_err();
    assert!(
        e.to_string()
            .ends_with("big.txt: larger than the 1 KiB allowed for a template"),
        "{e}"
    );
    assert_eq!(read_limited(&path, 2048, "a template").unwrap().len(), 2048);
}

#[test]
fn bad_utf8_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.txt");
    std::fs::write(&path, b"ok\nab\xffc").unwrap();
    let e = read_text_limited(&path, 100, "a test file").unwrap_err();
    assert!(e.to_string().ends_with("t.txt:2:3: not UTF-8 text"), "{e}");
}

#[test]
fn lines_are_bounded_and_torn_last_lines_told() {
    let text = b"one\ntwo\nthree";
    let lines: Vec<_> = lines_limited(&text[..], Path::new("f"), 10, "a line")
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        lines,
        [
            (1, b"one".to_vec(), true),
            (2, b"two".to_vec(), true),
            (3, b"three".to_vec(), false)
        ]
    );
    let long = b"short\nthis line is far too long\nnever read\n";
    let mut it = lines_limited(&long[..], Path::new("f.jsonl"), 10, "a results line");
    assert!(it.next().unwrap().is_ok());
    let e = it.next().unwrap().unwrap_err();
    assert_eq!(
        e.to_string(),
        "f.jsonl:2:1: a line longer than the 10 bytes allowed for a results line"
    );
    assert!(it.next().is_none());
    let exact = b"0123456789\n";
    let lines: Vec<_> = lines_limited(&exact[..], Path::new("f"), 10, "a line").collect();
    assert!(lines[0].is_ok());
}

/// Staged files a killed write left behind go once they are old; a fresh one (a write going
/// on) and a kept old file stay.
#[test]
fn abandoned_staged_files_are_removed_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, age: u64| {
        let path = dir.path().join(name);
        std::fs::write(&path, b"x").unwrap();
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(at).unwrap();
        path
    };
    let abandoned = file(".incharacter-abc123.tmp", 2 * 3600);
    let fresh = file(".incharacter-def456.tmp", 10);
    let named_so = file(".incharacter-my-thesis-notes.tmp", 2 * 3600);
    let kept_old = file(".incharacter-ghi.old", 2 * 3600);
    let users = file("wren-en.tmp", 2 * 3600);
    remove_abandoned(dir.path());
    assert!(!abandoned.exists());
    assert!(fresh.exists() && kept_old.exists() && users.exists() && named_so.exists());
    // An output written into the folder takes what killed writes left there.
    let (abandoned, out) = (file(".incharacter-jkl789.tmp", 2 * 3600), dir.path().join("out.json"));
    write_output(&out, b"{}", &Kept::default()).unwrap();
    assert!(!abandoned.exists() && fresh.exists());
}

/// A folder a run killed as it began left (nothing in it, or only its staged first record) goes
/// once an hour has passed; one with anything else in it, or a fresh one, stays.
#[test]
fn a_folder_with_nothing_written_whole_goes_once_it_is_old() {
    let root = tempfile::tempdir().unwrap();
    let aged = |path: &Path, age: u64| {
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
        std::fs::File::open(path).unwrap().set_modified(at).unwrap();
    };
    let folder = |name: &str, files: &[(&str, u64)], age: u64| {
        let dir = root.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        for (file, file_age) in files {
            std::fs::write(dir.join(file), b"{\"event\":").unwrap();
            aged(&dir.join(file), *file_age);
        }
        aged(&dir, age);
        dir
    };
    let hour = 3600;
    let empty = folder("empty", &[], 2 * hour);
    let staged = folder("staged", &[(".incharacter-aaaaaa.tmp", 2 * hour), (".incharacter-bbbbbb.tmp", 3 * hour)], 2 * hour);
    let starting = folder("starting", &[(".incharacter-cccccc.tmp", 5)], 5);
    let fresh_file = folder("fresh-file", &[(".incharacter-dddddd.tmp", 5)], 2 * hour);
    let with_journal = folder("journal", &[("journal.jsonl", 2 * hour)], 2 * hour);
    let with_other = folder("other", &[(".incharacter-eeeeee.tmp", 2 * hour), ("notes.txt", 2 * hour)], 2 * hour);
    assert!(remove_abandoned_folder(&empty) && !empty.exists());
    assert!(remove_abandoned_folder(&staged) && !staged.exists());
    for kept in [&starting, &fresh_file, &with_journal, &with_other] {
        assert!(!remove_abandoned_folder(kept), "{}", kept.display());
        assert!(kept.exists());
    }
    assert!(with_other.join(".incharacter-eeeeee.tmp").exists(), "nothing in a kept folder is touched");
    let file = root.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    aged(&file, 2 * hour);
    assert!(!remove_abandoned_folder(&file), "not a folder");
}

/// An output under a missing folder asks for the folder; under a file, says the file is in the way
/// (creating "it" could not work).
#[test]
fn an_output_under_a_file_says_the_file_is_in_the_way() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("afile");
    std::fs::write(&file, b"x").unwrap();
    for path in [file.join("x.json"), file.join("deeper").join("x.json")] {
        let e = folder_exists(&path).unwrap_err();
        assert!(matches!(e, FileError::FileAsFolder { ref folder, .. } if *folder == file), "{e}");
        assert!(e.to_string().contains("afile is a file, not a folder"), "{e}");
    }
    let e = folder_exists(&dir.path().join("missing").join("x.json")).unwrap_err();
    assert!(matches!(e, FileError::NoFolder { .. }), "{e}");
    // A path ending in a slash names a folder: not a file to write, whether it exists or not.
    let kept = Kept::default();
    for named in ["afile/", "missing/"] {
        let e = check_output(Path::new(&format!("{}/{named}", dir.path().display())), &kept).unwrap_err();
        assert!(matches!(e, FileError::NotAFileToWrite(_)), "{named}: {e}");
    }
    assert!(folder_exists(&dir.path().join("x.json")).is_ok());
}

/// A write killed between its swaps leaves its undo record: the next write in the folder (or
/// `recover`) first puts every old file back, so no mix of old and new files is ever read as one.
#[test]
fn a_write_killed_between_its_swaps_is_undone_before_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b, gone] = ["a", "b", "gone"].map(|n| dir.path().join(n));
    let names = || names(dir.path());
    let changes = [
        (a.clone(), Some(b"new a".as_slice())),
        (gone.clone(), None),
        (b.clone(), Some(b"new b".as_slice())),
    ];
    for killed_after in 0..3 {
        std::fs::write(&a, "old a").unwrap();
        std::fs::write(&gone, "old gone").unwrap();
        let _ = std::fs::remove_file(&b);
        KILL_AFTER_SWAP.with(|k| k.set(Some(killed_after)));
        write_all_or_none(&changes).unwrap();
        KILL_AFTER_SWAP.with(|k| k.set(None));
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new a", "killed after {killed_after}");
        assert!(names().iter().any(|n| n.ends_with(".undo")), "{:?}", names());
        let restored = recover(dir.path());
        assert_eq!(restored.len(), killed_after + 1, "killed after {killed_after}: {restored:?}");
        assert_eq!(names(), ["a", "gone"], "as before, nothing left aside (killed after {killed_after})");
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old a");
        assert_eq!(std::fs::read_to_string(&gone).unwrap(), "old gone");
        assert!(recover(dir.path()).is_empty(), "once");
    }

    // The next write puts the killed one's files back before its own.
    KILL_AFTER_SWAP.with(|k| k.set(Some(1)));
    write_all_or_none(&changes).unwrap();
    KILL_AFTER_SWAP.with(|k| k.set(None));
    write_all_or_none(&[(b.clone(), Some(b"other b".as_slice()))]).unwrap();
    assert_eq!(names(), ["a", "b", "gone"]);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "old a");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "other b");

    // A target written since the killed write is left as it is; a record still held is of a write
    // going on, and is not touched.
    KILL_AFTER_SWAP.with(|k| k.set(Some(0)));
    write_all_or_none(&changes[..1]).unwrap();
    KILL_AFTER_SWAP.with(|k| k.set(None));
    write_atomic(&a, b"written since").unwrap();
    assert!(recover(dir.path()).is_empty());
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "written since");
    assert_eq!(names(), ["a", "b", "gone"], "the record and the kept copy went");
    let held = undo::Undo::begin(dir.path()).unwrap();
    assert!(recover(dir.path()).is_empty());
    assert!(names().iter().any(|n| n.ends_with(".undo")), "held: left");
    held.discard();
}

/// A record is followed no further than its folder: a target that is not a plain name there, or a
/// kept copy that is not one of ours, is not touched; a line cut by the kill is of a change not
/// begun; a copy recorded before its target changed is removed, the target left.
#[test]
fn a_record_is_followed_only_inside_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("characters");
    std::fs::create_dir(&folder).unwrap();
    let outside = dir.path().join("thesis.tex");
    std::fs::write(&outside, "years of work").unwrap();
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let kept = folder.join(".incharacter-abc123.old");
    std::fs::write(folder.join("x.toml"), "as it is").unwrap();
    std::fs::hard_link(folder.join("x.toml"), &kept).unwrap();
    let lines = [
        // A kept copy outside the folder, and one named as ours would not be.
        format!(r#"{{"target":"{}","old":"{}","new":null}}"#, hex("x.toml"), hex("../thesis.tex")),
        format!(r#"{{"target":"{}","old":"{}","new":null}}"#, hex("../thesis.tex"), hex(".incharacter-abc123.old")),
        format!(r#"{{"target":"{}","old":"{}","new":null}}"#, hex("x.toml"), hex("thesis.tex")),
        // The copy of a target the kill left unchanged.
        format!(r#"{{"target":"{}","old":"{}","new":{{"stamp":[1,"00"]}}}}"#, hex("x.toml"), hex(".incharacter-abc123.old")),
        r#"{"target":"78"#.to_string(),
    ];
    std::fs::write(folder.join(".incharacter-zz9999.undo"), lines.join("\n")).unwrap();
    assert!(recover(&folder).is_empty());
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "years of work");
    assert_eq!(std::fs::read_to_string(folder.join("x.toml")).unwrap(), "as it is");
    assert_eq!(names(&folder), ["x.toml"], "the copy and the record went");
}

/// A record left by a kill still undoes its write once the folder was copied elsewhere (new inodes,
/// the same content); a record its writer never named is removed; one no live process holds and that
/// cannot be undone is reported as stale.
#[test]
fn a_killed_write_is_undone_in_a_copy_of_its_folder_and_leftovers_are_known() {
    let dir = tempfile::tempdir().unwrap();
    let (first, copy) = (dir.path().join("first"), dir.path().join("copy"));
    std::fs::create_dir(&first).unwrap();
    std::fs::write(first.join("a"), "old a").unwrap();
    KILL_AFTER_SWAP.with(|k| k.set(Some(0)));
    write_all_or_none(&[
        (first.join("a"), Some(b"new a".as_slice())),
        (first.join("b"), Some(b"new b".as_slice())),
    ])
    .unwrap();
    KILL_AFTER_SWAP.with(|k| k.set(None));
    std::fs::create_dir(&copy).unwrap();
    for name in names(&first) {
        std::fs::copy(first.join(&name), copy.join(&name)).unwrap();
    }
    assert_eq!(stale(&copy).len(), 1, "{:?}", names(&copy));
    assert_eq!(recover(&copy), [copy.join("a")]);
    assert_eq!(std::fs::read_to_string(copy.join("a")).unwrap(), "old a");
    assert_eq!(names(&copy), ["a"]);
    assert!(stale(&copy).is_empty());

    std::fs::write(copy.join(".incharacter-abc123.undo-new"), "").unwrap();
    assert!(recover(&copy).is_empty());
    assert_eq!(names(&copy), ["a"], "a record never named goes");
}

#[test]
fn a_temporary_files_error_does_not_name_the_temporary() {
    // Nothing can be created in /proc, not even by root.
    let error = tempfile::Builder::new()
        .prefix(".incharacter-")
        .tempfile_in("/proc")
        .unwrap_err();
    assert!(error.to_string().contains("at path"), "{error}");
    let said = super::unnamed(error).to_string();
    assert!(!said.contains("at path") && !said.contains(".incharacter-"), "{said}");
    assert!(said.contains("os error"), "the system's words are kept: {said}");
}
