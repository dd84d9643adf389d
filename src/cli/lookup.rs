//! Finding what a command names: a session by id, folder or journal path; the provider of a role.
//! A leaf the commands share, so none of them reaches into another for it.

use std::path::PathBuf;

use super::{Ctx, input_error};
use crate::catalog::Catalog;
use crate::llm::Role;
use crate::study::Event;

/// A session's records, by id (in the data dir or among the bundled samples), folder, or journal path.
/// A scale of one's own edited since the session recorded it is said (its recorded scores are read
/// with the scale as it is now: another range or other poles would read them otherwise), and one the
/// catalog lacks.
pub(super) fn load_session(ctx: &Ctx, what: &str) -> anyhow::Result<(PathBuf, Vec<Event>)> {
    let store = ctx.store()?;
    let dir = store.find(what)?;
    let events = store.load(&dir)?;
    say_changed_scales(ctx, &dir, &events)?;
    Ok((dir, events))
}

/// Says (on stderr) each scale of one's own that changed since the session in `dir` recorded it, and
/// each the catalog no longer has (its results cannot be scored without it); each character the
/// catalog no longer has, and each edited while the session was interrupted (its answers come from
/// several versions).
pub(super) fn say_changed_scales(ctx: &Ctx, dir: &std::path::Path, events: &[Event]) -> anyhow::Result<()> {
    if let Some(start) = events.iter().find_map(Event::start) {
        let catalog = ctx.catalog()?;
        let session = crate::text::visible(&dir.file_name().unwrap_or_default().to_string_lossy());
        for (scale, then) in start.scale_versions {
            let Some(entry) = catalog.scale_entry(scale) else {
                crate::note!(
                    "note: scale {} of session {session} is not in the catalog (its file was removed, or fails \
                     `incharacter validate`): its recorded results stay, and what needs the scale (scores \
                     against labels, figures, reports) leaves them out until it is back",
                    crate::text::visible(scale)
                );
                continue;
            };
            if entry.value.version() != *then {
                // A user's file now, or the bundled scale (a user's file removed since, or another
                // build's wording): either way not the version recorded.
                let now = match catalog.user_files(crate::catalog::Kind::Scale, scale).first() {
                    Some(file) => crate::text::visible(&file.display().to_string()),
                    None => "the bundled one now".to_string(),
                };
                // An observer session records the options given, not scores: its traits are scored
                // from the scale as it is.
                let what = match crate::study::kind_of(events) {
                    Some(crate::study::Kind::Observers) => {
                        "its reports recorded the options given, and every trait score is computed from them \
                         with the scale as it is now (its keying and dimensions)"
                    }
                    _ => {
                        "the scores it recorded stand (keyed as they were), and what is read from the scale \
                         (its range, dimensions and poles, the labels on it) is read as it is now"
                    }
                };
                crate::note!("note: scale {scale} ({now}) has changed since session {session} recorded it: {what}");
            }
        }
        for (character, first) in start.character_versions {
            if catalog.character(character).is_none_or(|c| c.id != *character) {
                crate::note!(
                    "note: character {} of session {session} is not in the catalog (its file was removed, or \
                     fails `incharacter validate`): figures against its labels leave it out until it is back",
                    crate::text::visible(character)
                );
                continue;
            }
            let later = crate::study::later_versions(events, character);
            if !later.is_empty() {
                let all: Vec<&str> = std::iter::once(first)
                    .chain(&later)
                    .map(|v| crate::study::short_version(v))
                    .collect();
                crate::note!(
                    "note: character {} was edited while session {session} was interrupted: its answers come \
                     from versions {} (the figures pool them)",
                    crate::text::visible(character),
                    all.join(", ")
                );
            }
        }
    }
    Ok(())
}

/// [`load_session`], named by its folder, however it was given (an id, a folder, a journal's path):
/// the id every command finds it by (a copied folder's journal was started under another).
pub(super) fn load_named(ctx: &Ctx, what: &str) -> anyhow::Result<(String, Vec<Event>)> {
    load_found(ctx, what).map(|(name, _, events)| (name, events))
}

/// [`load_named`], with the session's folder; a session whose run has not finished is said (on
/// stderr): what is computed from it is of what its journal holds so far.
pub(super) fn load_found(ctx: &Ctx, what: &str) -> anyhow::Result<(String, PathBuf, Vec<Event>)> {
    let (dir, events) = load_session(ctx, what)?;
    let name = dir
        .file_name()
        .map_or_else(|| what.to_string(), |n| n.to_string_lossy().into_owned());
    say_unfinished(&name, &dir, &events);
    Ok((name, dir, events))
}

/// Says (on stderr) that session `id` (its folder `dir`, its records `events`) has not finished its
/// run: running in another process, or stopped before its end.
pub(super) fn say_unfinished(id: &str, dir: &std::path::Path, events: &[Event]) {
    if crate::study::finished(events) {
        return;
    }
    let id = crate::text::visible(id);
    match crate::journal::writer(&dir.join("journal.jsonl")) {
        Some(w) => crate::note!(
            "note: session {id} is still running (incharacter pid {}): what follows is of what its journal holds so far",
            w.pid
        ),
        None if let Some((phase, path, _)) = crate::session::batch::History::of(events).waiting() => crate::note!(
            "note: session {id} waits for the results of its batch file {} (phase {phase}; `incharacter batch import {id} RESULTS` goes on): what follows is of what its journal holds so far",
            crate::text::visible(path)
        ),
        None => {
            let reassessment = events
                .iter()
                .any(|e| matches!(e, Event::RunStarted { plan, .. } if plan.parent.is_some()));
            let command = match crate::study::kind_of(events) {
                _ if reassessment => "assess",
                kind => kind.map_or("run", |k| k.command()),
            };
            crate::note!(
                "note: session {id} has not finished (`incharacter {command} --resume {id}` finishes it): what follows is of what its journal holds so far"
            );
        }
    }
}

/// The ids a comma-separated `list` of `option` names, each found by `find` (which says why one is
/// not found), each once ([`super::errors::each_once`]).
pub(super) fn ids(
    option: &str,
    list: &str,
    find: impl Fn(&str) -> anyhow::Result<String>,
) -> anyhow::Result<Vec<String>> {
    let given: Vec<&str> = list.split(',').collect();
    let ids = given.iter().map(|n| find(n)).collect::<anyhow::Result<Vec<_>>>()?;
    super::errors::each_once(option, &given, ids, String::clone)
}

/// The id of the character `name` names ([`Catalog::named_character`]), or why none: an unknown
/// name, or one that several characters answer to (each listed, to be named by its id).
pub(super) fn character_id(catalog: &Catalog, name: &str) -> anyhow::Result<String> {
    catalog.named_character(name).map(|c| c.id.clone()).map_err(|several| {
        if several.is_empty() {
            // A file of that name the catalog skipped: its errors, not a missing file, are why.
            let skipped = catalog.problems.iter().find(|d| {
                let path = std::path::Path::new(&d.file);
                path.parent()
                    .and_then(|p| p.file_name())
                    .is_some_and(|p| p == "characters")
                    && path
                        .file_stem()
                        .is_some_and(|s| s.to_string_lossy().eq_ignore_ascii_case(name.trim()))
            });
            if let Some(d) = skipped {
                return input_error(format!(
                    "character \"{name}\" is not in the catalog: its file was skipped for an error ({d}; \
                     `incharacter validate` lists every one)"
                ));
            }
            return input_error(format!(
                "unknown character \"{name}\" (`incharacter characters` lists them)"
            ));
        }
        let each: Vec<String> = several
            .iter()
            .filter_map(|id| catalog.character_by_id(id))
            .map(|e| format!("{} ({})", e.value.id, e.value.name))
            .collect();
        input_error(format!(
            "\"{name}\" names {} characters: {}; give its id",
            several.len(),
            each.join(", ")
        ))
    })
}

/// The provider named on the command line (which must exist), or the config's provider for `role`.
pub(super) fn provider_for(
    config: &crate::config::Config,
    explicit: &Option<String>,
    role: Role,
) -> anyhow::Result<String> {
    match explicit {
        Some(p) if config.provider(p).is_some() => Ok(p.clone()),
        Some(p) => Err(input_error(format!(
            "unknown provider \"{}\" (`incharacter providers` lists them)",
            p
        ))),
        None => config
            .roles
            .get(&role)
            .cloned()
            .ok_or_else(|| input_error(format!("no provider for role {}", role.name()))),
    }
}
