//! The ideal bound of a run against `fake-openai`'s latency model: what no schedule on C slots can
//! beat, computed from the server's trace (`benches/bound.py` computes the same from a trace's CSV).

use crate::fake_openai::TraceEntry;

/// The ideal bound of a run with `concurrency` slots: no schedule beats the total latency spread over
/// the slots, the longest single reply, or the longest judge call after the shortest interview (every
/// judge call waits for at least one interview).
pub fn ideal_bound_ms(trace: &[TraceEntry], concurrency: usize) -> f64 {
    let total: f64 = trace.iter().map(|t| t.model_ms).sum();
    let longest = trace.iter().map(|t| t.model_ms).fold(0.0, f64::max);
    let shortest_chat = trace
        .iter()
        .filter(|t| t.kind == "chat")
        .map(|t| t.model_ms)
        .fold(f64::INFINITY, f64::min);
    let longest_judge = trace
        .iter()
        .filter(|t| t.kind == "judge")
        .map(|t| t.model_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    let chain = if shortest_chat.is_finite() && longest_judge.is_finite() {
        shortest_chat + longest_judge
    } else {
        0.0
    };
    (total / concurrency.max(1) as f64).max(longest).max(chain)
}
