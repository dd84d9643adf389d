//! The InCharacter procedures, written against `dyn ChatModel`: interviewing a role-playing agent and
//! assessing its answers (expert rating, option conversion, self-report).

pub mod annotation;
pub mod anonymize;
pub mod convert;
pub mod expert;
pub mod interview;
pub mod judge;
pub mod judge_json;
pub mod rolebench;
