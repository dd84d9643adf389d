//! incharacter: a terminal workbench that measures whether role-playing agents keep their character's
//! personality. Data flows one way, and no module imports one above it:
//! `domain` (the method's pure vocabulary) and `catalog` (scales, characters) → `llm` (models) →
//! `rpa`, `method`, `observer` (the procedures) → `study` (the kinds of run) → `session` (runs on disk:
//! lifecycle and store) → `cli` and `tui` (the two faces, which never import each other). `doctor`
//! (whether this machine can do the main job) reads `llm` and `study` and serves both faces; so does
//! `figures` (a session's pictures as SVG and PNG files), which reads `study`.
//! `files`, `journal`, `paths`, `png` and `text` are leaves any layer may use; so is `templates` (the method's prompt
//! templates as data), which reads only `domain` and `text`.
//!
//! The library's API is what the binary needs: [`cli`], [`tui`], [`paths`] and [`logging`]. The
//! layers under them are private, and public only with the `testing` feature, which the integration
//! tests, benches and fuzz targets turn on to reach them.

pub mod cli;
pub mod logging;
pub mod paths;
pub mod tui;

/// Declares the inner layers: `pub` for tests, benches and fuzz targets, crate-private otherwise.
macro_rules! layers {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "testing")]
        pub mod $name;
        #[cfg(not(feature = "testing"))]
        pub(crate) mod $name;
    )*};
}

layers!(
    catalog, doctor, domain, figures, files, journal, llm, method, observer, png, rpa, session, study, templates, text
);
