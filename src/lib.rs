//! incharacter: a terminal workbench that measures whether role-playing agents keep their character's
//! personality. Data flows one way, and no module imports one above it:
//! `domain` (the method's pure vocabulary) and `catalog` (scales, characters) → `config` (the config
//! file: providers, roles, sampling, key bindings; `llm` and everything above read it) → `llm` (models) →
//! `rpa`, `method`, `observer` (the procedures) → `study` (the kinds of run) → `analysis` (what finished
//! sessions say together) and `annotation` (people's ratings of a session's answers) → `session` (runs on
//! disk: lifecycle and store) → `cli` and `tui` (the two faces, which never import each other). `doctor`
//! (whether this machine can do the main job) reads `llm` and `study` and serves both faces; so does
//! `figures` (a session's pictures as SVG and PNG files), which reads `study`, `analysis` and `annotation`.
//! `fault` (whose fault an error is), `files`, `journal`, `paths`, `png`, `process` and `text` are leaves any layer may use; so is `templates` (the method's prompt
//! templates as data), which reads only `domain` and `text`.
//!
//! The library's API is what the binary needs: [`cli`], [`tui`], [`paths`], [`text`] (the gate its
//! output passes) and [`logging`]. The
//! layers under them are private, and public only with the `testing` feature, which the integration
//! tests, benches and fuzz targets turn on to reach them.

pub mod cli;
pub mod logging;
pub mod paths;
pub mod text;
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
    analysis, annotation, catalog, config, doctor, domain, fault, figures, files, journal, llm, method, observer, png,
    process, rpa, session, study, templates
);
