//! The catalog read again while the workbench runs: the driver looks at the data folder's character
//! and scale files, reads the catalog when they change, and the app takes it and says what changed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Driver;
use super::app::{Action, App};
use crate::catalog::{Catalog, Entry, Origin};

/// The user's character and scale files, those the catalog reads (name, size, modification time):
/// what tells that the catalog has to be read again. An editor's swap or backup file is not one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogFiles(Vec<(PathBuf, u64, Option<std::time::SystemTime>)>);

impl CatalogFiles {
    pub fn of(data: &Path) -> CatalogFiles {
        let mut files = Vec::new();
        for dir in ["characters", "scales"] {
            let Ok(entries) = std::fs::read_dir(data.join(dir)) else {
                continue;
            };
            for e in entries.flatten().filter(|e| crate::catalog::is_catalog_file(&e.path())) {
                // A link's target: what the catalog reads.
                let meta = std::fs::metadata(e.path()).ok();
                files.push((
                    e.path(),
                    meta.as_ref().map_or(0, std::fs::Metadata::len),
                    meta.and_then(|m| m.modified().ok()),
                ));
            }
        }
        files.sort();
        CatalogFiles(files)
    }
}

impl Driver {
    /// Reads the catalog again if the data folder's character or scale files changed since it was
    /// last read (written by an editor, `characters import`, another workbench): the app is told,
    /// and runs started from now on, and the sessions opened, use it. A catalog that cannot be read
    /// (a bundled file broken) keeps the one in use.
    pub(super) fn reread_catalog(&mut self) {
        let files = CatalogFiles::of(&self.data);
        if files == self.catalog_files {
            return;
        }
        self.catalog_files = files;
        let Ok(catalog) = Catalog::load(Some(&self.data)) else {
            return;
        };
        let catalog = Arc::new(catalog);
        self.catalog = catalog.clone();
        self.store = self.store.clone().checked(catalog.clone());
        let _ = self.tx.send(Action::CatalogReread(catalog));
        // A character imported meanwhile gets its version and greeting now, not at the next listing.
        self.read_versions();
    }
}

impl App {
    /// The catalog read again after its files changed outside the workbench: what changed is said.
    pub(super) fn reread(&mut self, catalog: Arc<Catalog>) {
        let said = self.take_catalog(catalog, None);
        if !said.is_empty() {
            self.flash = Some(format!("data folder read again: {}", said.join("; ")));
        }
    }

    /// Takes `catalog`, read anew (after a change outside, or a save of character `saved`): the
    /// persona list keeps the character under its cursor, the setup forgets characters and scales
    /// that are gone (not those whose file cannot be read for now). Returns what changed but
    /// `saved`, to be said.
    fn take_catalog(&mut self, catalog: Arc<Catalog>, saved: Option<&str>) -> Vec<String> {
        let under = crate::tui::screens::persona::listed(&self.catalog)
            .get(self.persona.cursor)
            .map(|e| e.value.id.clone());
        let skipped = |c: &Catalog| -> BTreeSet<String> { c.problems.iter().map(|p| p.file.clone()).collect() };
        let (problems, problems_before) = (skipped(&catalog), skipped(&self.catalog));
        let mut people = Changes::look(
            (&self.catalog.characters, &catalog.characters),
            |c| &c.id,
            &problems,
            &mut self.unreadable.characters,
        );
        for ids in [&mut people.added, &mut people.changed] {
            ids.retain(|id| Some(id.as_str()) != saved);
        }
        let scales = Changes::look(
            (&self.catalog.scales, &catalog.scales),
            |s| &s.id,
            &problems,
            &mut self.unreadable.scales,
        );
        self.catalog = catalog;
        let (catalog, unreadable) = (&self.catalog, &self.unreadable);
        // A pick goes with its file (even if another file of its id comes), and stays while the file
        // cannot be read.
        self.setup.characters.retain(|id| {
            !people.removed.contains(id) && (catalog.character(id).is_some() || unreadable.characters.contains_key(id))
        });
        self.setup.scales.retain(|id| {
            !scales.removed.contains(id) && (catalog.scale(id).is_some() || unreadable.scales.contains_key(id))
        });
        self.setup.unreadable = unreadable
            .characters
            .keys()
            .chain(unreadable.scales.keys())
            .cloned()
            .collect();
        self.setup.scale_cursor = self.setup.scale_cursor.min(catalog.scales.len().saturating_sub(1));
        let listed_here = self.setup.filtered_characters(catalog).len();
        self.setup.char_cursor = self.setup.char_cursor.min(listed_here.saturating_sub(1));
        let listed = crate::tui::screens::persona::listed(catalog);
        self.persona.cursor = under
            .and_then(|id| listed.iter().position(|e| e.value.id == id))
            .unwrap_or(self.persona.cursor)
            .min(listed.len().saturating_sub(1));
        let mut said: Vec<String> = [people.said(""), scales.said("scale ")]
            .into_iter()
            .flatten()
            .flatten()
            .collect();
        // Said when which files are skipped changes, not at every look while one stays broken.
        if problems != problems_before {
            if problems.is_empty() {
                said.push("no file skipped now".into());
            } else {
                said.push(format!(
                    "{} file(s) skipped: `incharacter validate` says why",
                    problems.len()
                ));
            }
        }
        said
    }

    /// Character `id` saved: the catalog as loaded again, with the persona list on it, and what
    /// else changed in the data folder meanwhile said after it.
    pub(super) fn saved(&mut self, id: &str, catalog: Arc<Catalog>) {
        let said = self.take_catalog(catalog, Some(id));
        self.persona.draft = None;
        if let Some(i) = crate::tui::screens::persona::listed(&self.catalog)
            .iter()
            .position(|e| e.value.id == id)
        {
            self.persona.cursor = i;
        }
        self.flash = Some(also(format!("saved {id}"), &said));
    }

    /// A save refused (`e`), with the catalog as it was read to check it, when it was.
    pub(super) fn not_saved(&mut self, e: &str, catalog: Option<Arc<Catalog>>) {
        if let Some(draft) = self.persona.draft.as_mut() {
            draft.saving = false;
        }
        let said = catalog.map(|c| self.take_catalog(c, None)).unwrap_or_default();
        self.flash = Some(also(format!("not saved: {e}"), &said));
    }
}

/// What one kind of catalog entry (characters, scales) gained, changed and lost, by id.
#[derive(Debug, Default)]
struct Changes {
    added: Vec<String>,
    changed: Vec<String>,
    removed: Vec<String>,
    unreadable: Vec<String>,
    readable_again: Vec<String>,
}

impl Changes {
    /// The entries of one kind, `before` and `after` a look at the folder, with `problems` the files
    /// skipped now; `unreadable` (this kind's) is kept up to date: an entry gone whose file is
    /// skipped is unreadable, not removed; one back is readable again, not added; an unreadable one
    /// whose file is no longer skipped (deleted, or read as another id) is removed.
    fn look<T: PartialEq>(
        (before, after): (&[Entry<T>], &[Entry<T>]),
        id: impl Fn(&T) -> &String,
        problems: &BTreeSet<String>,
        unreadable: &mut BTreeMap<String, String>,
    ) -> Changes {
        let by_id = |entries: &[Entry<T>]| -> BTreeMap<String, usize> {
            entries
                .iter()
                .enumerate()
                .map(|(i, e)| (id(&e.value).clone(), i))
                .collect()
        };
        let (was, now) = (by_id(before), by_id(after));
        let user_file = |e: &Entry<T>| match &e.origin {
            Origin::User { path, .. } => Some(path.display().to_string()),
            Origin::Bundled => None,
        };
        let mut c = Changes::default();
        for (key, &i) in &was {
            // Unreadable already, a bundled one of its id standing in: said below.
            if unreadable.contains_key(key) {
                continue;
            }
            let skipped = user_file(&before[i]).filter(|f| problems.contains(f));
            match (now.get(key), skipped) {
                // Its file skipped now: gone, or the bundled one of its id in its place.
                (None, Some(file)) | (Some(_), Some(file)) => {
                    unreadable.insert(key.clone(), file);
                    c.unreadable.push(key.clone());
                }
                (Some(&j), None) if before[i].value != after[j].value => c.changed.push(key.clone()),
                (Some(_), None) => {}
                (None, None) => c.removed.push(key.clone()),
            }
        }
        for (key, &j) in &now {
            match unreadable.get(key) {
                // Read again from the file that could not be: readable again.
                Some(file) if user_file(&after[j]).as_ref() == Some(file) => {
                    unreadable.remove(key);
                    c.readable_again.push(key.clone());
                }
                // Another file of its id (the broken one is said removed below when it goes).
                Some(_) if !was.contains_key(key) => c.added.push(key.clone()),
                Some(_) => {}
                None if !was.contains_key(key) => c.added.push(key.clone()),
                None => {}
            }
        }
        unreadable.retain(|key, file| {
            let still = problems.contains(file) || c.unreadable.contains(key);
            if !still {
                c.removed.push(key.clone());
            }
            still
        });
        c.removed.sort();
        c
    }

    /// "added a, b", "changed c", "removed d", "unreadable now e", "readable again f", each said
    /// only when it names something; `kind` goes before the verb ("scale added BFI").
    fn said(&self, kind: &str) -> Vec<Option<String>> {
        [
            ("added", &self.added),
            ("changed", &self.changed),
            ("removed", &self.removed),
            ("unreadable now", &self.unreadable),
            ("readable again", &self.readable_again),
        ]
        .into_iter()
        .map(|(what, ids)| named(&format!("{kind}{what}"), ids))
        .collect()
    }
}

/// "`what` a, b" with the ids made safe to draw, or nothing for no ids.
fn named(what: &str, ids: &[String]) -> Option<String> {
    (!ids.is_empty()).then(|| format!("{what} {}", crate::text::visible(&ids.join(", "))))
}

/// `first`, then what the data folder read again showed, if anything.
fn also(first: String, said: &[String]) -> String {
    if said.is_empty() {
        first
    } else {
        format!("{first}; data folder read again: {}", said.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An editor's swap, backup and lock files, written as the user edits, are no reason to read
    /// the catalog again; a character file is.
    #[test]
    fn only_the_files_the_catalog_reads_count() {
        let dir = tempfile::tempdir().unwrap();
        let chars = dir.path().join("characters");
        std::fs::create_dir_all(&chars).unwrap();
        std::fs::write(chars.join("a.toml"), "id = \"a\"").unwrap();
        let before = CatalogFiles::of(dir.path());
        for name in [".a.toml.swp", "a.toml~", "#a.toml#", ".#a.toml", "notes.txt"] {
            std::fs::write(chars.join(name), "x").unwrap();
        }
        std::fs::create_dir_all(chars.join("folder.toml")).unwrap();
        assert_eq!(CatalogFiles::of(dir.path()), before);
        std::fs::write(dir.path().join("characters/b.toml"), "id = \"b\"").unwrap();
        assert_ne!(CatalogFiles::of(dir.path()), before);
    }
}
