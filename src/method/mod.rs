//! The InCharacter procedures, written against `dyn ChatModel`: interviewing a role-playing agent and
//! assessing its answers (expert rating, option conversion, self-report). [`Method`] names the
//! assessments; [`Assessment`] is what one of them concludes about one dimension.

pub mod anonymize;
pub mod convert;
pub mod expert;
pub mod interview;
pub mod judge;
pub mod judge_json;
pub mod rolebench;
pub mod texts;
pub mod weigh;

use serde::{Deserialize, Serialize};

use convert::ConvertedItem;
use expert::BatchRating;
use interview::QueryStyle;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    ErBatch,
    ErAll,
    Oc,
    DOc,
    Sr,
    SrCot,
}

impl Method {
    pub const ALL: [Method; 6] = [
        Method::ErBatch,
        Method::ErAll,
        Method::Oc,
        Method::DOc,
        Method::Sr,
        Method::SrCot,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::ErBatch => "er-batch",
            Method::ErAll => "er-all",
            Method::Oc => "oc",
            Method::DOc => "d-oc",
            Method::Sr => "sr",
            Method::SrCot => "sr-cot",
        }
    }

    pub fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name.trim())
    }

    /// The interview a method reads.
    pub fn query_style(self) -> QueryStyle {
        match self {
            Method::Sr => QueryStyle::Sr,
            Method::SrCot => QueryStyle::SrCot,
            _ => QueryStyle::Open,
        }
    }

    /// Whether the method yields item-level options (and so item-level consistency).
    pub fn item_level(self) -> bool {
        !matches!(self, Method::ErBatch | Method::ErAll)
    }
}

/// One dimension of one method's assessment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    pub character: String,
    pub scale: String,
    pub method: Method,
    pub repeat: u32,
    pub dimension: String,
    /// `None`: the dimension could not be assessed (a failed judge call or interview item); never guessed.
    pub score: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<BatchRating>,
    /// OC, d-OC, SR: the item ids of each judge call that converted items of this dimension (absent in
    /// sessions older than the field, whose calls follow the plan's `items_per_call`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ConvertedItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// How the judge's calls departed from the method to fit its context (a call split into
    /// smaller ones), when they had to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitted: Option<String>,
    /// OC, d-OC, SR: the judge calls whose first dimension this is, with every reply and why each
    /// rejected one was (a call converts several dimensions' items: it is recorded once, with the
    /// first of them), as ER's batches keep theirs. Absent in sessions older than the field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversions: Vec<convert::ConversionCall>,
}

impl Assessment {
    /// Items the judge gave no usable option for (their dimension is scored from the rest when at
    /// least half remain).
    pub fn failed_items(&self) -> Vec<u32> {
        self.items.iter().filter(|i| i.option.is_none()).map(|i| i.item_id).collect()
    }

    /// Whether anything in it failed: the dimension, or one of its items.
    pub fn has_failures(&self) -> bool {
        self.score.is_none() || self.items.iter().any(|i| i.option.is_none())
    }
}
