//! An OpenAI-compatible SSE body, split into chunks anywhere: the first input byte picks the chunk sizes,
//! the rest is the body. The reply must not depend on where the chunks were cut.

#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use incharacter::llm::client::{AttemptError, Finished};
use incharacter::llm::openai::read_events;
use libfuzzer_sys::fuzz_target;
use tokio::runtime::Runtime;
use tokio::time::Instant;

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime")
    })
}

/// Cuts `body` into pieces of 1 to `1 + seed % 32` bytes, the sizes drawn from `seed`.
fn chunks(seed: u8, body: &[u8]) -> Vec<Vec<u8>> {
    let max = 1 + usize::from(seed % 32);
    let mut state = u32::from(seed) | 1;
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let size = (1 + (state >> 16) as usize % max).min(rest.len());
        let (head, tail) = rest.split_at(size);
        out.push(head.to_vec());
        rest = tail;
    }
    out
}

fn read(pieces: Vec<Vec<u8>>) -> (Result<Finished, AttemptError>, String) {
    let body = futures_util::stream::iter(pieces.into_iter().map(Ok::<Vec<u8>, std::io::Error>));
    let mut text = String::new();
    let result = runtime().block_on(async {
        let far = Instant::now() + Duration::from_secs(3600);
        read_events(body, far, Duration::from_secs(3600), &mut |t| {
            text.push_str(&t);
            true
        })
        .await
    });
    (result, text)
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, body)) = data.split_first() else {
        return;
    };
    let (split, split_text) = read(chunks(seed, body));
    let (whole, whole_text) = read(vec![body.to_vec()]);
    assert_eq!(split, whole, "the outcome depends on the chunking");
    if whole.is_ok() {
        assert_eq!(split_text, whole_text, "the reply depends on the chunking");
    }
});
