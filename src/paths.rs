//! Where the workbench keeps its files: the data dir (user scales and characters, later sessions,
//! cache and models) and the config file, with the `INCHARACTER_DATA_DIR` / `INCHARACTER_CONFIG`
//! overrides.

use std::path::PathBuf;

use directories::ProjectDirs;

fn project_dirs() -> Option<ProjectDirs> {
    ProjectDirs::from("", "", "incharacter")
}

/// The data dir: `$INCHARACTER_DATA_DIR`, else the platform's data dir for "incharacter".
pub fn data_dir() -> Option<PathBuf> {
    match std::env::var_os("INCHARACTER_DATA_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => project_dirs().map(|d| d.data_dir().to_path_buf()),
    }
}

/// The config file `$INCHARACTER_CONFIG` names, when there is none there (the defaults apply, as
/// with no config at all, but a path set on purpose and missing is likely mistyped: said).
pub fn named_config_missing() -> Option<PathBuf> {
    let named = PathBuf::from(std::env::var_os("INCHARACTER_CONFIG").filter(|p| !p.is_empty())?);
    // A link to nothing is missing too; anything else there is the loader's to refuse.
    (!named.exists()).then_some(named)
}

/// What commands say of [`named_config_missing`].
pub fn config_missing_warning(path: &std::path::Path) -> String {
    format!(
        "warning: INCHARACTER_CONFIG names {}, which does not exist: the defaults apply",
        crate::text::visible(&path.display().to_string())
    )
}

/// What is wrong with `dir` as the data dir, if something is that making it would not say well:
/// a link to nothing ("File exists", it would say), or a file.
pub fn data_dir_problem(dir: &std::path::Path) -> Option<String> {
    let shown = crate::text::visible(&dir.display().to_string());
    if !dir.exists()
        && let Ok(target) = std::fs::read_link(dir)
    {
        return Some(format!(
            "the data dir {shown} is a link to {}, which does not exist: create that folder, or set \
             INCHARACTER_DATA_DIR to a folder",
            crate::text::visible(&target.display().to_string())
        ));
    }
    (dir.exists() && !dir.is_dir()).then(|| {
        format!("the data dir {shown} is a file, not a folder: move it away, or set INCHARACTER_DATA_DIR to a folder")
    })
}

/// The config file: `$INCHARACTER_CONFIG`, else `config.toml` in the platform's config dir.
pub fn config_file() -> Option<PathBuf> {
    match std::env::var_os("INCHARACTER_CONFIG") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => project_dirs().map(|d| d.config_dir().join("config.toml")),
    }
}
