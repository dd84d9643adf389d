//! `bench ratio`: the engine's speed as a share of llama.cpp's, computed from the two `--json` reports
//! (`bench local --json`, `benches/llama_cpp_reference.py --json`) instead of by hand.

use crate::common;

fn report(engine: &str, prefill: f64, decode: f64) -> String {
    serde_json::json!({
        "engine": engine, "model": "smollm2-135m", "path": "/m/smollm2.gguf",
        "prompt_tokens": 245, "decode_tokens": 128, "runs": 3,
        "prefill_tok_s": prefill, "decode_tok_s": decode,
    })
    .to_string()
}

#[test]
fn the_ratio_of_two_reports_is_computed_and_a_bad_report_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("ours.json");
    let reference = dir.path().join("llama.json");
    std::fs::write(&ours, report("incharacter", 200.0, 45.0)).unwrap();
    std::fs::write(&reference, report("llama.cpp", 250.0, 50.0)).unwrap();
    let (a, b) = (ours.display().to_string(), reference.display().to_string());
    let out = common::offline(dir.path(), &["bench", "ratio", &a, &b, "--json"]);
    let ratio = common::json_of(out);
    assert!(
        (ratio["prefill_ratio"].as_f64().unwrap() - 0.8).abs() < 1e-12,
        "{ratio}"
    );
    assert!((ratio["decode_ratio"].as_f64().unwrap() - 0.9).abs() < 1e-12, "{ratio}");
    let out = common::offline(dir.path(), &["bench", "ratio", &a, &b]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("prefill: 0.80× (incharacter 200.0 tok/s, llama.cpp 250.0 tok/s)"),
        "{text}"
    );
    assert!(text.contains("decode:  0.90×"), "{text}");
    // One engine ended its replies early: not the same work, and said so.
    let early = report("incharacter", 200.0, 45.0).replace("\"runs\"", "\"decoded_tokens\":40,\"runs\"");
    std::fs::write(&ours, early).unwrap();
    let out = common::offline(dir.path(), &["bench", "ratio", &a, &b]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("decoded 40 vs 128"), "{stderr}");
    std::fs::write(&ours, report("incharacter", 200.0, 45.0)).unwrap();
    // A report that timed no decoding gives no decode ratio.
    let untimed = report("incharacter", 200.0, 45.0).replace("45.0", "null");
    std::fs::write(&ours, untimed).unwrap();
    let out = common::offline(dir.path(), &["bench", "ratio", &a, &b]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("decode:  not timed in both reports"), "{text}");
    let out = common::offline(dir.path(), &["bench", "ratio", &a, &b, "--json"]);
    assert!(common::json_of(out)["decode_ratio"].is_null());
    std::fs::write(&reference, "{\"engine\": \"llama.cpp\",\n  \"prefill_tok_s\": fast}").unwrap();
    let out = common::offline(dir.path(), &["bench", "ratio", &a, &b]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{b}:2:")), "located: {stderr}");
    // A speed of zero (or below) measured nothing: refused, not an infinite ratio.
    std::fs::write(&reference, report("llama.cpp", 250.0, 0.0)).unwrap();
    let out = common::offline(dir.path(), &["bench", "ratio", &a, &b]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("decode_tok_s is 0: a speed above zero was expected"),
        "{stderr}"
    );
}
