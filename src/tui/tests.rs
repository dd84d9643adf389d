//! The workbench's helpers for replays, probes and character versions, tested without a terminal.

use super::*;

#[test]
fn replayed_answers_stream_in_words_or_short_runs_of_characters() {
    assert_eq!(replay_pieces("I like books. "), vec!["I ", "like ", "books. "]);
    let zh = "日行者：「见到一个人时，你多快能看出他此刻的心情？」";
    let pieces = replay_pieces(zh);
    assert_eq!(pieces.concat(), zh, "nothing lost or reordered");
    assert!(
        pieces.len() >= 8 && pieces.iter().all(|p| p.chars().count() <= 3),
        "{pieces:?}"
    );
    assert!(replay_pieces("").is_empty());
}

/// A data dir holding copies of these sample sessions (and no samples beside them).
fn store_with(samples: &[&str]) -> (tempfile::TempDir, Store) {
    let data = tempfile::tempdir().unwrap();
    for id in samples {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-sessions").join(id);
        let to = crate::session::sessions_dir(data.path()).join(id);
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(from.join("journal.jsonl"), to.join("journal.jsonl")).unwrap();
    }
    let store = Store::with_samples(data.path(), None);
    (data, store)
}

const BFI_1: &str = "20261129-233202-bfi-on-the-local-model-e80e";
const BFI_2: &str = "20261130-231918-bfi-and-16p-on-the-local-model-248f";
const GSE: &str = "20261129-201520-gse-on-the-local-model-e700";

#[test]
fn a_probe_is_measured_against_the_newest_earlier_session_of_its_character() {
    let catalog = Catalog::load(None).unwrap();
    // The GSE session is older than the second BFI one but shares no scale with it: skipped.
    let (_data, store) = store_with(&[BFI_1, GSE, BFI_2]);
    let p = probed(&store, &catalog, BFI_2, "hermione-en").unwrap();
    assert!(!p.first);
    assert_eq!(p.diff.a.session, BFI_1);
    assert_eq!(p.diff.b.session, BFI_2);
    assert!(
        p.diff.dimensions.iter().all(|d| d.scale == "BFI"),
        "{:?}",
        p.diff.dimensions
    );
    assert_eq!(p.diff.dimensions.len(), 10, "5 BFI dimensions × ER_batch and d-OC");

    // The oldest session has nothing before it: the probe is shown alone.
    let p = probed(&store, &catalog, BFI_1, "hermione-en").unwrap();
    assert!(p.first);
    assert_eq!(p.diff.a.session, BFI_1);
    // A character the probe did not measure, and a session that is not there, are said.
    let e = probed(&store, &catalog, BFI_1, "zhongli-zh").unwrap_err();
    assert!(e.contains("did not measure zhongli-zh"), "{e}");
    assert!(
        probed(&store, &catalog, "nowhere", "hermione-en")
            .unwrap_err()
            .contains("not in the data dir")
    );
}

#[test]
fn versions_give_each_character_its_version_now_and_the_recorded_ones() {
    let catalog = Catalog::load(None).unwrap();
    let (data, store) = store_with(&[BFI_1]);
    // The sample is older than versions: give its first record one, as runs now write it.
    let journal = crate::session::sessions_dir(data.path())
        .join(BFI_1)
        .join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut record: serde_json::Value = serde_json::from_str(first).unwrap();
    record["character_versions"] = serde_json::json!({"hermione-en": "0123456789abcdef"});
    std::fs::write(&journal, format!("{record}\n{rest}")).unwrap();
    let v = versions(&store, &catalog);
    assert_eq!(v.current.len(), catalog.characters.len());
    let hermione = catalog.character("hermione-en").unwrap();
    assert_eq!(
        v.current["hermione-en"],
        hermione.version(&[]),
        "no memories in this data dir"
    );
    assert_eq!(
        v.index["hermione-en"],
        [("0123456789abcdef".to_string(), vec![BFI_1.to_string()])]
    );
}
