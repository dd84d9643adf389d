use super::*;

#[test]
fn a_malformed_registry_is_named_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        registry_path(dir.path()),
        "[[models]]\nname = \"mine\"\npath = 3\narchitecture = \"llama\"\n",
    )
    .unwrap();
    let e = list(dir.path()).unwrap_err().to_string();
    let at = format!("{}:3:8: ", registry_path(dir.path()).display());
    assert!(e.starts_with(&at), "{e}");
    assert!(e.contains("expected path string"), "{e}");
    assert_eq!(line_column("a\néé x", 6), (2, 3));
}

#[test]
fn models_added_at_once_are_all_kept() {
    let dir = tempfile::tempdir().unwrap();
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/tiny-llama-q8_0.gguf");
    let start = std::sync::Barrier::new(8);
    std::thread::scope(|s| {
        for i in 0..8 {
            let (dir, gguf, start) = (dir.path(), &gguf, &start);
            s.spawn(move || {
                start.wait();
                add(dir, gguf, &format!("mine-{i}"), false).unwrap();
            });
        }
    });
    let mut names: Vec<String> = list(dir.path()).unwrap().into_iter().map(|m| m.name).collect();
    names.sort();
    assert_eq!(names, (0..8).map(|i| format!("mine-{i}")).collect::<Vec<_>>());
}

#[test]
fn a_missing_model_is_told_apart_from_an_unknown_name() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        resolve(dir.path(), DEFAULT_MODEL),
        Err(Error::NotFetched {
            name: DEFAULT_MODEL.into()
        })
    );
    assert_eq!(resolve(dir.path(), "mine"), Err(Error::Unknown { name: "mine".into() }));
    assert!(list(dir.path()).unwrap().is_empty());
    assert!(matches!(fetch(dir.path(), "mine", &mut |_| {}), Err(Error::Input(m)) if m.contains("smollm2-135m")));
}

#[test]
fn a_registered_file_is_found_by_name_and_checksums_are_known_models_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain.bin");
    std::fs::write(&file, b"not a gguf").unwrap();
    // A file that is not a GGUF is refused before it is registered.
    let e = add(dir.path(), &file, "plain", false).unwrap_err();
    assert!(
        matches!(&e, Error::Input(m) if m.contains("not a readable GGUF")),
        "{e}"
    );
    assert!(verify("plain", &file).is_none());
    assert!(matches!(verify(DEFAULT_MODEL, &file), Some(Ok(false))));
    let registry = Registry {
        models: vec![Registered {
            name: "plain".into(),
            path: file.clone(),
            architecture: "llama".into(),
            identity: None,
        }],
    };
    write_registry(dir.path(), &registry).unwrap();
    assert_eq!(resolve(dir.path(), "plain").unwrap(), file);
    // A registered file that went away is named, not loaded.
    std::fs::remove_file(&file).unwrap();
    let e = resolve(dir.path(), "plain").unwrap_err().to_string();
    assert!(
        e.contains("registered as") && e.ends_with("which is no longer there"),
        "{e}"
    );
}

#[test]
fn a_model_is_named_as_the_config_and_the_command_line_can_say() {
    for good in ["tiny", "qwen2.5-coder-1.5b", "My_Model.Q4"] {
        assert!(valid_name(good), "{good}");
    }
    for bad in [
        "",
        "a\u{1b}[31mb",
        "../../x",
        "-x",
        ".hidden",
        "two words",
        &"x".repeat(65),
    ] {
        assert!(!valid_name(bad), "{bad:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/tiny-llama-q8_0.gguf");
    let e = add(dir.path(), &gguf, "a\u{1b}[31mb", false).unwrap_err();
    assert!(
        matches!(&e, Error::Input(m) if m.contains("cannot name a model")),
        "{e}"
    );
    assert!(!dir.path().join("registry.toml").exists(), "nothing registered");
}

#[test]
fn a_name_is_pointed_at_another_file_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf");
    let first = fixtures.join("tiny-llama-q8_0.gguf").canonicalize().unwrap();
    let other = dir.path().join("other.gguf");
    std::fs::copy(&first, &other).unwrap();
    let other = other.canonicalize().unwrap();
    add(dir.path(), &first, "mine", false).unwrap();
    // The same file again: nothing changes.
    add(dir.path(), &first, "mine", false).unwrap();
    let e = add(dir.path(), &other, "mine", false).unwrap_err();
    assert!(
        matches!(&e, Error::Input(m) if m.contains("is registered for") && m.contains("--replace")),
        "{e}"
    );
    assert_eq!(resolve(dir.path(), "mine").unwrap(), first, "still the first file");
    add(dir.path(), &other, "mine", true).unwrap();
    assert_eq!(resolve(dir.path(), "mine").unwrap(), other);
}

#[test]
fn a_known_models_name_is_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/tiny-llama-q8_0.gguf");
    for name in [DEFAULT_MODEL, "SmolLM2-135M"] {
        let e = add(dir.path(), &gguf, name, false).unwrap_err();
        assert!(
            matches!(&e, Error::Input(m) if m.contains("is the name of a known model")),
            "{name}: {e}"
        );
    }
    // A registry written before that was refused: its entry does not stand for the known model.
    let registry = Registry {
        models: vec![Registered {
            name: DEFAULT_MODEL.into(),
            path: gguf,
            architecture: "llama".into(),
            identity: None,
        }],
    };
    write_registry(dir.path(), &registry).unwrap();
    assert!(list(dir.path()).unwrap().is_empty());
    assert_eq!(shadowed(dir.path()).unwrap(), registry.models);
    assert_eq!(
        resolve(dir.path(), DEFAULT_MODEL),
        Err(Error::NotFetched {
            name: DEFAULT_MODEL.into()
        })
    );
}

/// A copy of the tiny fixture in `dir`, registered as `name`.
fn registered_copy(dir: &Path, name: &str) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/tiny-llama-q8_0.gguf");
    let file = dir.join(format!("{name}.gguf"));
    std::fs::copy(fixture, &file).unwrap();
    let file = file.canonicalize().unwrap();
    add(dir, &file, name, false).unwrap();
    file
}

/// Sets the file's modification time `seconds` past what it was (as an editor's save would).
fn touch(file: &Path, seconds: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    let was = f.metadata().unwrap().modified().unwrap();
    f.set_modified(was + std::time::Duration::from_secs(seconds)).unwrap();
}

#[test]
fn a_registered_file_changed_in_place_is_refused_until_added_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = registered_copy(dir.path(), "mine");
    let entry = &list(dir.path()).unwrap()[0];
    let identity = entry.identity.clone().expect("recorded by add");
    assert_eq!(identity.bytes, std::fs::metadata(&file).unwrap().len());
    assert_eq!(identity.sha256, sha256_file(&file).unwrap());

    // Touched but the same bytes: still the model it was, and its new stamp is kept (the next
    // use reads no more than the file's metadata).
    touch(&file, 5);
    assert_eq!(resolve(dir.path(), "mine").unwrap(), file);
    let restamped = list(dir.path()).unwrap()[0].identity.clone().unwrap();
    assert_eq!(restamped.sha256, identity.sha256);
    assert_ne!(restamped.stamp, identity.stamp);
    assert_eq!(restamped.stamp, Some(stamp(&std::fs::metadata(&file).unwrap())));

    // The same size, one weight changed (a fine-tune of the same shape would be so).
    let mut bytes = std::fs::read(&file).unwrap();
    *bytes.last_mut().unwrap() ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    touch(&file, 10);
    let e = resolve(dir.path(), "mine").unwrap_err().to_string();
    assert!(e.contains("is not the file registered as the model mine"), "{e}");
    assert!(
        e.contains(&identity.sha256) && e.contains(&sha256_file(&file).unwrap()),
        "{e}"
    );
    assert!(e.contains("--name mine --replace"), "{e}");
    // Adding it again under its name without --replace is refused too; with it, it is the model.
    let e = add(dir.path(), &file, "mine", false).unwrap_err().to_string();
    assert!(e.contains("as it was before it changed"), "{e}");
    add(dir.path(), &file, "mine", true).unwrap();
    assert_eq!(resolve(dir.path(), "mine").unwrap(), file);

    // Another size is another file, told without reading it.
    bytes.extend_from_slice(&[0; 32]);
    std::fs::write(&file, &bytes).unwrap();
    let e = resolve(dir.path(), "mine").unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "{} bytes, {} when it was registered",
            bytes.len(),
            bytes.len() - 32
        )),
        "{e}"
    );
}

/// Another file given the registered one's times (`cp -p`, an archive's fixed dates, a rename
/// into place), even before 1970, is still another file: its inode or change time differ.
#[test]
fn a_file_put_in_place_with_the_old_times_is_still_another_file() {
    let set_times = |file: &Path, at: std::time::SystemTime| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(file)
            .unwrap()
            .set_modified(at)
            .unwrap();
    };
    for at in [
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(315_532_800),
        std::time::UNIX_EPOCH - std::time::Duration::from_secs(86_400),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let file = registered_copy(dir.path(), "mine");
        let mut other = std::fs::read(&file).unwrap();
        *other.last_mut().unwrap() ^= 0x55;
        // Renamed into place with the same times.
        let beside = dir.path().join("beside.gguf");
        std::fs::write(&beside, &other).unwrap();
        set_times(&file, at);
        add(dir.path(), &file, "mine", true).unwrap();
        set_times(&beside, at);
        std::fs::rename(&beside, &file).unwrap();
        let e = resolve(dir.path(), "mine").unwrap_err().to_string();
        assert!(
            e.contains("is not the file registered as the model mine (SHA-256"),
            "{e}"
        );
        // Written over in place and given the old times back.
        let file = registered_copy(dir.path(), "again");
        set_times(&file, at);
        add(dir.path(), &file, "again", true).unwrap();
        std::fs::write(&file, &other).unwrap();
        set_times(&file, at);
        let e = resolve(dir.path(), "again").unwrap_err().to_string();
        assert!(
            e.contains("is not the file registered as the model again (SHA-256"),
            "{e}"
        );
    }
}

#[test]
fn a_registry_from_before_identities_is_read_and_its_files_checked_from_their_first_use() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.gguf");
    std::fs::write(&file, b"whatever").unwrap();
    std::fs::write(
        registry_path(dir.path()),
        format!(
            "[[models]]\nname = \"old\"\npath = {:?}\narchitecture = \"llama\"\n",
            file
        ),
    )
    .unwrap();
    assert_eq!(list(dir.path()).unwrap()[0].identity, None);
    assert_eq!(resolve(dir.path(), "old").unwrap(), file);
    // Its first use records what the file is; from then on it is checked as any other.
    let recorded = list(dir.path()).unwrap()[0]
        .identity
        .clone()
        .expect("recorded on first use");
    assert_eq!(recorded.sha256, sha256_file(&file).unwrap());
    std::fs::write(&file, b"whatever, edited").unwrap();
    let e = resolve(dir.path(), "old").unwrap_err().to_string();
    assert!(e.contains("is not the file registered as the model old"), "{e}");
    // A digest edited into something that is not one is named.
    let text = std::fs::read_to_string(registry_path(dir.path())).unwrap();
    std::fs::write(
        registry_path(dir.path()),
        text.replace(&recorded.sha256, "NOT-A-DIGEST"),
    )
    .unwrap();
    let e = list(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("the model old has a sha256 that is not 64 small hexadecimal digits"),
        "{e}"
    );
}

#[test]
fn names_that_differ_only_in_case_are_one_name() {
    let dir = tempfile::tempdir().unwrap();
    registered_copy(dir.path(), "Mine");
    let file = dir.path().join("Mine.gguf");
    let e = add(dir.path(), &file, "mine", false).unwrap_err().to_string();
    assert!(e.contains("differs from the registered \"Mine\" only in case"), "{e}");
    // Asked for in other letters, the name it has is said.
    let e = resolve(dir.path(), "MINE").unwrap_err().to_string();
    assert_eq!(
        e,
        "no local model named \"MINE\": names are exact, and this one is \"Mine\""
    );
    let e = resolve(dir.path(), "SmolLM2-135M").unwrap_err().to_string();
    assert!(e.ends_with("this one is \"smollm2-135m\""), "{e}");
    assert_eq!(list(dir.path()).unwrap().len(), 1);
}

#[test]
fn a_registry_with_one_name_twice_is_refused_where_the_second_stands() {
    let dir = tempfile::tempdir().unwrap();
    let file = registered_copy(dir.path(), "mine");
    let entry = |name: &str| {
        format!(
            "[[models]]\nname = \"{name}\"\npath = \"{}\"\narchitecture = \"qwen3\"\n\n",
            file.display()
        )
    };
    let text = entry("mine") + &entry("other") + &entry("MINE");
    std::fs::write(dir.path().join("registry.toml"), text).unwrap();
    let e = list(dir.path()).unwrap_err().to_string();
    let want = format!(
        "{}:12:8: the model name \"MINE\" is registered already (line 2)",
        dir.path().join("registry.toml").display()
    );
    assert!(e.starts_with(&want), "{e}");
    assert!(resolve(dir.path(), "other").is_err(), "nothing is read from it");
}

#[test]
fn remove_unregisters_a_users_file_and_deletes_a_fetched_models_folder() {
    let dir = tempfile::tempdir().unwrap();
    let file = registered_copy(dir.path(), "mine");
    registered_copy(dir.path(), "other");
    assert_eq!(remove(dir.path(), "mine").unwrap(), Removed::Unregistered(file.clone()));
    assert!(file.is_file(), "the user's file is left where it is");
    let names: Vec<_> = list(dir.path()).unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["other"]);
    assert_eq!(remove(dir.path(), "mine"), Err(Error::Unknown { name: "mine".into() }));

    let e = remove(dir.path(), DEFAULT_MODEL).unwrap_err().to_string();
    assert_eq!(e, format!("{DEFAULT_MODEL} is not fetched: there is nothing to remove"));
    let known = &KNOWN[0];
    let folder = dir.path().join(known.name);
    let fetched = |extra: &[(&str, usize)]| {
        std::fs::create_dir_all(folder.join(".download")).unwrap();
        std::fs::write(folder.join(known.file), [0u8; 100]).unwrap();
        std::fs::write(folder.join(".download/piece.whl"), [0u8; 7]).unwrap();
        for (name, len) in extra {
            std::fs::write(folder.join(name), vec![0u8; *len]).unwrap();
        }
    };
    fetched(&[(".tmpAbc", 10)]);
    let freed = Removed::Deleted {
        folder: folder.clone(),
        bytes: 117,
    };
    assert_eq!(remove(dir.path(), known.name).unwrap(), freed);
    assert!(!folder.exists(), "only the fetch's files were there");
    // A file of the user's kept in the folder (registered or not) stays, and the folder with it.
    fetched(&[(".tmpAbc", 10), ("my-finetune.gguf", 5)]);
    assert_eq!(remove(dir.path(), known.name).unwrap(), freed);
    let left: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["my-finetune.gguf"]);
}

/// A fetched model written over in place (the same size) is another file: its stamp is not the
/// one its SHA-256 was checked with, so it is hashed again and refused.
#[test]
fn a_fetched_model_changed_in_place_is_hashed_again_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let known = &KNOWN[0];
    let file = dir.path().join(known.name).join(known.file);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // Of the known size, not the known bytes (sparse: nothing is written).
    File::create(&file).unwrap().set_len(known.bytes).unwrap();
    let e = resolve(dir.path(), known.name).unwrap_err().to_string();
    assert!(e.contains(&format!(", {} when it was fetched", known.sha256)), "{e}");
    assert!(
        !verified_path(&file).exists(),
        "a file that is not the model is not marked"
    );
    // As a fetch leaves it: checked as it was assembled, its stamp kept beside it.
    // Hashed as another file than it is now (written meanwhile): not marked.
    mark_verified(&file, Some("0:0:0.0:0.0"));
    assert!(!verified_path(&file).exists());
    mark_verified(&file, None);
    assert_eq!(
        resolve(dir.path(), known.name).unwrap(),
        file,
        "the stamp stands for the check"
    );
    // One byte written over: the stamp is another, and the file is hashed and refused.
    use std::os::unix::fs::FileExt;
    File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .write_all_at(b"x", 4096)
        .unwrap();
    let e = resolve(dir.path(), known.name).unwrap_err().to_string();
    assert!(e.contains("is not the file fetched"), "{e}");
    // `model remove` takes the stamp with the model, and so the folder.
    let removed = remove(dir.path(), known.name).unwrap();
    assert!(matches!(removed, Removed::Deleted { .. }), "{removed:?}");
    assert!(!file.parent().unwrap().exists());
}

/// An interrupted fetch's pieces are removed by `model remove`, which does not say there is
/// nothing to remove.
#[test]
fn an_interrupted_fetch_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let known = &KNOWN[0];
    let folder = dir.path().join(known.name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join(format!("{}.partial", known.file)), vec![7u8; 3000]).unwrap();
    std::fs::write(folder.join(format!("{}.partial.json", known.file)), b"{}").unwrap();
    match remove(dir.path(), known.name).unwrap() {
        Removed::Deleted { bytes, .. } => assert!(bytes >= 3000, "{bytes}"),
        other => panic!("{other:?}"),
    }
    assert!(!folder.exists());
    let e = remove(dir.path(), known.name).unwrap_err().to_string();
    assert!(e.contains("nothing to remove"), "{e}");
}

#[test]
fn a_fetched_model_of_another_size_is_not_the_known_one() {
    let dir = tempfile::tempdir().unwrap();
    let known = &KNOWN[0];
    std::fs::create_dir_all(dir.path().join(known.name)).unwrap();
    std::fs::write(dir.path().join(known.name).join(known.file), b"short").unwrap();
    let e = resolve(dir.path(), known.name).unwrap_err().to_string();
    assert!(
        e.contains(&format!("5 bytes, {} when it was fetched", known.bytes)),
        "{e}"
    );
    assert!(
        e.contains(&format!("incharacter model fetch --name {}", known.name)),
        "{e}"
    );
}

/// A fetched model's file registered under another name too is that name's model: removing the
/// fetched one keeps the file, and says which name holds it.
#[test]
fn a_fetched_file_registered_under_another_name_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let known = &KNOWN[0];
    let folder = dir.path().join(known.name);
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join(known.file);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gguf/tiny-llama-q8_0.gguf");
    std::fs::copy(fixture, &file).unwrap();
    add(dir.path(), &file, "keep", false).unwrap();
    let Err(Error::Input(e)) = remove(dir.path(), known.name) else {
        panic!("the file of \"keep\" removed");
    };
    assert!(
        e.contains("is also registered as \"keep\"") && e.contains("the file is kept"),
        "{e}"
    );
    assert!(file.is_file());
    assert!(matches!(remove(dir.path(), "keep"), Ok(Removed::Unregistered(_))));
    assert!(matches!(remove(dir.path(), known.name), Ok(Removed::Deleted { .. })));
    assert!(!file.exists());
}

/// A name in other letters than a model's is told the name it differs from (`model add … --name`
/// would refuse it), and a name with control characters is shown with them escaped.
#[test]
fn removing_a_name_in_other_letters_names_the_one_it_differs_from() {
    let dir = tempfile::tempdir().unwrap();
    let e = remove(dir.path(), "SMOLLM2-135M").unwrap_err().to_string();
    assert_eq!(
        e,
        "no local model named \"SMOLLM2-135M\": names are exact, and this one is \"smollm2-135m\""
    );
    registered_copy(dir.path(), "mine");
    let e = remove(dir.path(), "MINE").unwrap_err().to_string();
    assert!(e.ends_with("this one is \"mine\""), "{e}");
    let e = remove(dir.path(), "x\u{1b}[31mY").unwrap_err().to_string();
    assert_eq!(e, r#"no local model named "x\u{1b}[31mY""#);
}
