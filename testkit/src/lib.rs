//! Test instruments for incharacter, kept out of the product: `fake_openai`, a scripted,
//! fault-injecting OpenAI-compatible server (also the `fake-openai` binary), with the Batch API in
//! `fake_openai::batch`, and `bound`, the ideal bound the runner benchmark (the `bench-run` binary) measures wall
//! time against.

pub mod bound;
pub mod fake_openai;
