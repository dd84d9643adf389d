//! The catalog read again while the workbench runs: the driver looks at the data folder's character
//! and scale files, reads the catalog when they change, and the app takes it and says what changed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Driver;
use super::app::{Action, App};
use crate::catalog::Catalog;

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
                let meta = e.metadata().ok();
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
    /// that are gone. Returns what changed but `saved`, to be said.
    fn take_catalog(&mut self, catalog: Arc<Catalog>, saved: Option<&str>) -> Vec<String> {
        let characters = |c: &Catalog| -> BTreeMap<String, crate::domain::character::Character> {
            c.characters
                .iter()
                .map(|e| (e.value.id.clone(), e.value.clone()))
                .collect()
        };
        let (before, after) = (characters(&self.catalog), characters(&catalog));
        let under = crate::tui::screens::persona::listed(&self.catalog)
            .get(self.persona.cursor)
            .map(|e| e.value.id.clone());
        // A character whose file is still there but cannot be read now (caught half-written, or
        // broken by an edit) is not removed: said as unreadable, and its pick kept.
        let unreadable: BTreeSet<String> = self
            .catalog
            .characters
            .iter()
            .filter(|e| !after.contains_key(&e.value.id))
            .filter(|e| match &e.origin {
                crate::catalog::Origin::User { path, .. } => {
                    let file = path.display().to_string();
                    catalog.problems.iter().any(|p| p.file == file)
                }
                crate::catalog::Origin::Bundled => false,
            })
            .map(|e| e.value.id.clone())
            .collect();
        let mut people = Changes::between(&before, &after, &unreadable);
        for ids in [&mut people.added, &mut people.changed] {
            ids.retain(|id| Some(id.as_str()) != saved);
        }
        // One whose file was skipped before, and reads now, is not new: it is readable again.
        let was_skipped = |id: &String| {
            catalog.characters.iter().any(|e| {
                &e.value.id == id
                    && matches!(&e.origin, crate::catalog::Origin::User { path, .. }
                        if self.catalog.problems.iter().any(|p| p.file == path.display().to_string()))
            })
        };
        let readable_again: Vec<String> = people.added.iter().filter(|id| was_skipped(id)).cloned().collect();
        people.added.retain(|id| !readable_again.contains(id));
        let scales = |c: &Catalog| -> BTreeMap<String, crate::domain::scale::Scale> {
            c.scales.iter().map(|e| (e.value.id.clone(), e.value.clone())).collect()
        };
        let (scales_before, scales_after) = (scales(&self.catalog), scales(&catalog));
        let scale_changes = Changes::between(&scales_before, &scales_after, &BTreeSet::new());
        let skipped = |c: &Catalog| -> BTreeSet<String> { c.problems.iter().map(|p| p.file.clone()).collect() };
        let (problems, problems_before) = (skipped(&catalog), skipped(&self.catalog));
        self.catalog = catalog;
        // Only a character gone with this change is unpicked: a pick already missing from the catalog
        // before was kept while its file cannot be read, and stays kept.
        self.setup
            .characters
            .retain(|id| after.contains_key(id) || !before.contains_key(id) || unreadable.contains(id));
        self.setup.scales.retain(|id| scales_after.contains_key(id));
        self.setup.scale_cursor = self.setup.scale_cursor.min(scales_after.len().saturating_sub(1));
        let listed_here = self.setup.filtered_characters(&self.catalog).len();
        self.setup.char_cursor = self.setup.char_cursor.min(listed_here.saturating_sub(1));
        let listed = crate::tui::screens::persona::listed(&self.catalog);
        self.persona.cursor = under
            .and_then(|id| listed.iter().position(|e| e.value.id == id))
            .unwrap_or(self.persona.cursor)
            .min(listed.len().saturating_sub(1));
        let unreadable: Vec<String> = unreadable.into_iter().collect();
        let mut said: Vec<String> = [
            people.said(""),
            vec![
                named("unreadable now", &unreadable),
                named("readable again", &readable_again),
            ],
            scale_changes.said("scale "),
        ]
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
        let said = catalog.map(|c| self.take_catalog(c, None)).unwrap_or_default();
        self.flash = Some(also(format!("not saved: {e}"), &said));
    }
}

/// What one kind of catalog entry (characters, scales) gained, changed and lost, by id.
struct Changes {
    added: Vec<String>,
    changed: Vec<String>,
    removed: Vec<String>,
}

impl Changes {
    /// The ids in `after` only, in both but different, and in `before` only less `kept` (entries whose
    /// file cannot be read now, said apart).
    fn between<T: PartialEq>(
        before: &BTreeMap<String, T>,
        after: &BTreeMap<String, T>,
        kept: &BTreeSet<String>,
    ) -> Changes {
        let ids = |f: &dyn Fn(&String, &T) -> bool, of: &BTreeMap<String, T>| -> Vec<String> {
            of.iter().filter(|(id, v)| f(id, v)).map(|(id, _)| id.clone()).collect()
        };
        Changes {
            added: ids(&|id, _| !before.contains_key(id), after),
            changed: ids(&|id, v| before.get(id).is_some_and(|b| b != v), after),
            removed: ids(&|id, _| !after.contains_key(id) && !kept.contains(id), before),
        }
    }

    /// "added a, b", "changed c", "removed d", each said only when it names something; `kind` goes
    /// before the verb ("scale added BFI").
    fn said(&self, kind: &str) -> Vec<Option<String>> {
        vec![
            named(&format!("{kind}added"), &self.added),
            named(&format!("{kind}changed"), &self.changed),
            named(&format!("{kind}removed"), &self.removed),
        ]
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
