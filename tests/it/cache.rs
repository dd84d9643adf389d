//! A matrix run twice into the same data dir: the second run is served entirely from the response
//! cache (no request reaches the server) and gives the same results.

use crate::common;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

fn run(config: &std::path::Path, data: &std::path::Path) -> Value {
    let out = common::command(
        config,
        data,
        &[
            "run",
            "--characters",
            "hermione-en,zhongli-zh,sheldon-en",
            "--scales",
            "BFI,16Personalities",
            "--methods",
            "er-batch,oc",
            "--json",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = common::session_id(&out);
    let export = common::command(config, data, &["export", &id, "--format", "json"])
        .output()
        .unwrap();
    let mut v: Value = serde_json::from_slice(&export.stdout).unwrap();
    v.as_object_mut().unwrap().remove("session");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_cache_serves_a_whole_rerun() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "max_concurrency = 8");
    let data = dir.path().join("data");
    let (c, d) = (config.clone(), data.clone());
    let first = tokio::task::spawn_blocking(move || run(&c, &d)).await.unwrap();
    let cold = server.stats().requests;
    assert!(cold > 300, "{cold} requests");
    let (c, d) = (config.clone(), data.clone());
    let second = tokio::task::spawn_blocking(move || run(&c, &d)).await.unwrap();
    assert_eq!(
        server.stats().requests,
        cold,
        "no request reached the server the second time"
    );
    let strip = |mut v: Value| {
        // Attempt records say whether a reply came from the cache.
        fn walk(v: &mut Value) {
            match v {
                Value::Object(m) => {
                    m.remove("attempts");
                    m.values_mut().for_each(walk);
                }
                Value::Array(a) => a.iter_mut().for_each(walk),
                _ => {}
            }
        }
        walk(&mut v);
        v
    };
    assert_eq!(strip(first), strip(second));
}
