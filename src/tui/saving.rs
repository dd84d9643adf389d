//! Saving a character the persona screen wrote: its file, a copy's with the files that go with it.
use std::path::Path;
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::domain::character::Character;

/// Saves `character` among the user's files in `data` (a copy with the memories and card of the
/// character it was made from, all of them or none) and loads the catalog again. `Err`: why it was
/// not saved, with the catalog loaded again when the file had changed since it was read (so the
/// list shows it as it is).
pub fn save_character(
    catalog: &Catalog,
    data: &Path,
    character: &Character,
    was: Option<&Character>,
    copy_of: Option<&str>,
) -> Result<Arc<Catalog>, super::app::NotSaved> {
    let reload = || {
        Catalog::load(Some(data))
            .map(Arc::new)
            .map_err(|_| "the bundled assets are invalid".to_string())
    };
    // Held as an import holds it, from the look at what holds the id to the last file written: a save
    // and an import of one id at once would each find it free and mix their files.
    let _one = match crate::rpa::import::one_import_at_a_time(data, None) {
        Ok(lock) => lock,
        Err(e) => return Err((e.to_string(), None)),
    };
    match catalog.character_file(data, character, was) {
        Ok((path, text)) => write_character(data, &path, &text, &character.id, copy_of)
            .and_then(|()| reload())
            .map_err(|e| (e, None)),
        Err(
            e @ (crate::catalog::SaveError::Changed(_)
            | crate::catalog::SaveError::Removed(_)
            | crate::catalog::SaveError::Gone(_)),
        ) => Err((e.to_string(), reload().ok())),
        Err(e) => Err((e.to_string(), None)),
    }
}

/// Writes a character's file; a copy's with the files that go with the character it was made
/// from (its memories, its card and the card's PNG), under the copy's id: all of them or none. A
/// file of the copy's id already there is not replaced.
fn write_character(data: &Path, path: &Path, text: &str, id: &str, copy_of: Option<&str>) -> Result<(), String> {
    use crate::rpa::{card, memories};
    let Some(from) = copy_of else {
        return crate::files::write_atomic(path, text.as_bytes()).map_err(|e| e.to_string());
    };
    let (card_from, png_from) = card::stored_paths(data, from);
    let (card_to, png_to) = card::stored_paths(data, id);
    let mut going = Vec::new();
    for (from, to) in [
        (memories::path(data, from), memories::path(data, id)),
        (card_from, card_to),
        (png_from, png_to),
    ] {
        if std::fs::symlink_metadata(&from).is_err() {
            continue;
        }
        if std::fs::symlink_metadata(&to).is_ok() {
            return Err(format!(
                "{} is there already: move it away, or choose another id",
                to.display()
            ));
        }
        let bytes =
            crate::files::read_limited(&from, memories::MAX_FILE, "a character's file").map_err(|e| e.to_string())?;
        going.push((to, bytes));
    }
    let mut changes: Vec<crate::files::Change<'_>> = vec![(path.to_path_buf(), Some(text.as_bytes()))];
    changes.extend(going.iter().map(|(to, bytes)| (to.clone(), Some(bytes.as_slice()))));
    crate::files::write_all_or_none(&changes).map_err(|e| e.to_string())
}
