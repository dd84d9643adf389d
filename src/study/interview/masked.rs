//! The names a judge never reads: a character's names and experimenters across the sittings of
//! a session and its re-assessments (see [`super::RunPlan::masked`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::character::Character;
use crate::method::anonymize::Masker;
use crate::study::Event;

/// Adds to `masked` the names the resumes of `events` recorded.
pub fn fold_masked(masked: &mut BTreeMap<String, Masked>, events: &[Event]) {
    for e in events {
        if let Event::Resumed { masked: more, .. } = e {
            merge_masked(masked, more);
        }
    }
}

/// Adds to `masked` the names of `more`, each once.
pub fn merge_masked(masked: &mut BTreeMap<String, Masked>, more: &BTreeMap<String, Masked>) {
    for (id, m) in more {
        let into = masked.entry(id.clone()).or_default();
        for name in &m.participant {
            if !into.participant.contains(name) {
                into.participant.push(name.clone());
            }
        }
        for name in &m.experimenter {
            if !into.experimenter.contains(name) {
                into.experimenter.push(name.clone());
            }
        }
    }
}

/// Names a judge never reads (see [`RunPlan::masked`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Masked {
    /// The character's aliases (its names as the catalog lists them): each becomes
    /// `<the participant>`.
    pub participant: Vec<String>,
    /// Its experimenters: each becomes `<the experimenter>`.
    pub experimenter: Vec<String>,
}

impl Masked {
    /// Adds the character's names as they are now.
    pub(super) fn add(&mut self, c: &Character) {
        for alias in &c.aliases {
            if !alias.trim().is_empty() && !self.participant.contains(alias) {
                self.participant.push(alias.clone());
            }
        }
        if !c.experimenter.trim().is_empty() && !self.experimenter.contains(&c.experimenter) {
            self.experimenter.push(c.experimenter.clone());
        }
    }

    pub fn masker(&self) -> Masker {
        Masker::with(&self.participant, &self.experimenter)
    }
}
