//! Human ratings of an observer session's subjects (the multi-observer paper's validation), through the
//! binary: six synthetic subjects with three observers each run against `fake-openai`, two annotators'
//! ratings imported from a CSV, and `agreement --session --json` equal to statistics computed here from
//! the export's self-reports, aggregates, context reports and latent levels (Spearman as
//! scipy.stats.spearmanr: Pearson of average ranks; mean absolute differences). A row naming an unknown
//! subject is located and writes nothing; an export imports back to itself; `report` of two sessions
//! (the same subjects played by two models) gives the Table 3/4 rows.

use std::collections::BTreeMap;
use std::path::Path;

use incharacter_testkit::fake_openai::{FakeConfig, FakeServer};
use serde_json::Value;

use crate::annotation::{close, mean, pearson, qwk, ranks};
use crate::common;

/// Runs the binary and returns its stdout, failing with its stderr.
async fn ok(config: &Path, data: &Path, args: &[&str]) -> Vec<u8> {
    let out = common::output(config, data, args).await;
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

async fn json(config: &Path, data: &Path, args: &[&str]) -> Value {
    serde_json::from_slice(&ok(config, data, args).await).unwrap()
}

/// An observer run of six synthetic subjects × three observers; returns its session id.
async fn observe(config: &Path, data: &Path, subject_provider: &str) -> String {
    let out = json(
        config,
        data,
        &[
            "observe",
            "--subject",
            "synthetic",
            "--subjects",
            "6",
            "--observers",
            "3",
            "--scenarios",
            "1",
            "--turns",
            "2",
            "--provider",
            "fake",
            "--subject-provider",
            subject_provider,
            "--seed",
            "3",
            "--json",
        ],
    )
    .await;
    out["session"].as_str().unwrap().to_string()
}

/// scipy.stats.spearmanr(x, y).statistic: Pearson of the average ranks (NaN when one side is constant).
fn spearman(x: &[f64], y: &[f64]) -> f64 {
    pearson(&ranks(x), &ranks(y))
}

fn mean_abs_diff(x: &[f64], y: &[f64]) -> f64 {
    mean(&x.iter().zip(y).map(|(a, b)| (a - b).abs()).collect::<Vec<_>>())
}

/// `got` is `want`, to 1e-9, or null where `want` is undefined.
fn same(want: f64, got: &Value, what: &str) {
    if want.is_nan() {
        assert!(got.is_null(), "{what}: undefined here, {got} there");
    } else {
        close(want, got, what);
    }
}

/// Spearman and mean |Δ| of (human, other) pairs, checked against an entry's keys.
fn check_pairs(pairs: &[(f64, f64)], got: &Value, n: &str, rho: &str, mad: &str, what: &str) {
    let (h, x): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    assert_eq!(got[n], pairs.len(), "{what}: {n}");
    same(spearman(&h, &x), &got[rho], &format!("{what}: {rho}"));
    same(mean_abs_diff(&h, &x), &got[mad], &format!("{what}: {mad}"));
}

/// A subject's rating on a trait by their indices (`None`: "x").
type Rater = fn(usize, usize) -> Option<f64>;

/// A rating that varies with subject and trait, with ties, half points and an occasional x.
fn rating_of_ann(s: usize, t: usize) -> Option<f64> {
    if (s + t) % 7 == 6 {
        return None;
    }
    let whole = 1.0 + ((s * 7 + t * 3) % 5) as f64;
    Some(if (s * t) % 4 == 1 && whole < 5.0 {
        whole + 0.5
    } else {
        whole
    })
}

/// Whole points 1–4 over the first five subjects: ties in every trait.
fn rating_of_bob(s: usize, t: usize) -> Option<f64> {
    (s < 5).then(|| 1.0 + ((s * 2 + t) % 4) as f64)
}

/// The annotators' whole-subject ratings: annotator → trait → subject → rating ("x" left out).
type Ratings = BTreeMap<&'static str, BTreeMap<String, BTreeMap<String, f64>>>;

/// The CSV both annotators' ratings are imported from (bob also rates s1 as its friend saw it), and
/// the numeric whole-subject ratings it holds.
fn ratings_csv(subjects: &[String], traits: &[String]) -> (String, Ratings) {
    let mut csv = String::from("annotator,task,character,scale,dimension,item_id,value,observer\n");
    let mut ratings = Ratings::new();
    let raters: [(&'static str, Rater); 2] = [("ann", rating_of_ann), ("bob", rating_of_bob)];
    for (name, rate) in raters {
        for (s, subject) in subjects.iter().enumerate() {
            for (t, trait_) in traits.iter().enumerate() {
                if name == "bob" && s >= 5 {
                    continue;
                }
                let value = rate(s, t);
                csv.push_str(&format!(
                    "{name},subject,{subject},IPIP-50,{trait_},,{},\n",
                    value.map_or("x".to_string(), |v| v.to_string())
                ));
                if let Some(v) = value {
                    ratings
                        .entry(name)
                        .or_default()
                        .entry(trait_.clone())
                        .or_default()
                        .insert(subject.clone(), v);
                }
            }
        }
    }
    csv.push_str(&format!("bob,subject,{},ipip-50,{},,4,o2\n", subjects[0], traits[0]));
    (csv, ratings)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_subject_ratings_agree_with_an_independent_computation() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "max_concurrency = 8");
    let data = dir.path().join("data");
    let id = observe(&config, &data, "fake").await;
    let export = json(&config, &data, &["export", &id, "--format", "json"]).await;
    let subjects = export["subjects"].as_array().unwrap();
    assert_eq!(subjects.len(), 6);
    let ids: Vec<String> = subjects.iter().map(|s| s["id"].as_str().unwrap().to_string()).collect();
    let traits: Vec<String> = subjects[0]["self_report"]["traits"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(traits.len(), 5);
    let by_id: BTreeMap<&str, &Value> = subjects.iter().map(|s| (s["id"].as_str().unwrap(), s)).collect();

    let (csv, ratings) = ratings_csv(&ids, &traits);
    let csv_path = dir.path().join("ratings.csv");
    std::fs::write(&csv_path, &csv).unwrap();
    let said = ok(
        &config,
        &data,
        &["annotations", "import", &id, csv_path.to_str().unwrap()],
    )
    .await;
    assert!(String::from_utf8_lossy(&said).contains("by ann, bob"));

    let report = json(&config, &data, &["agreement", "--session", &id, "--json"]).await;
    assert_eq!(
        (report["task"].as_str(), report["scale"].as_str()),
        (Some("subject"), Some("IPIP-50"))
    );
    let mut nontrivial = 0;
    for (name, by_trait) in &ratings {
        let got = &report["annotators"][name];
        let rated: std::collections::BTreeSet<&String> = by_trait.values().flat_map(|m| m.keys()).collect();
        assert_eq!(got["subjects"], rated.len(), "{name}");
        for t in &traits {
            let rated = &by_trait[t];
            let what = format!("{name} {t}");
            let pairs = |of: &dyn Fn(&Value) -> f64| -> Vec<(f64, f64)> {
                rated.iter().map(|(s, h)| (*h, of(by_id[s.as_str()]))).collect()
            };
            let entry = &got["traits"][t];
            assert_eq!(entry["n"], rated.len(), "{what}");
            let with_self = pairs(&|s| s["self_report"]["traits"][t].as_f64().unwrap());
            check_pairs(
                &with_self,
                entry,
                "n_self",
                "spearman_self",
                "mean_abs_diff_self",
                &what,
            );
            let with_observers = pairs(&|s| s["aggregate"][t].as_f64().unwrap());
            check_pairs(
                &with_observers,
                entry,
                "n_observers",
                "spearman_observers",
                "mean_abs_diff_observers",
                &what,
            );
            let (h, l): (Vec<f64>, Vec<f64>) = pairs(&|s| s["latent"][t].as_f64().unwrap()).into_iter().unzip();
            same(spearman(&h, &l), &entry["spearman_latent"], &format!("{what}: latent"));
            for context in ["family", "friend", "workplace"] {
                let with_context = pairs(&|s| {
                    let reports: Vec<f64> = s["observers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|o| o["context"] == context)
                        .map(|o| o["report"]["traits"][t].as_f64().unwrap())
                        .collect();
                    mean(&reports)
                });
                check_pairs(
                    &with_context,
                    &got["contexts"][context][t],
                    "n",
                    "spearman_observers",
                    "mean_abs_diff_observers",
                    &format!("{what} {context}"),
                );
            }
            nontrivial += [&entry["spearman_self"], &entry["spearman_observers"]]
                .iter()
                .filter(|v| v.as_f64().is_some_and(|r| r.abs() < 0.999))
                .count();
        }
    }
    assert!(
        nontrivial >= 10,
        "the ratings give correlations other than ±1 ({nontrivial})"
    );
    // The per-observer rating is bob's reading of what o2 saw, against o2's report only.
    let o2 = by_id[ids[0].as_str()]["observers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "o2")
        .unwrap();
    let per_observer = &report["annotators"]["bob"]["per_observer"][&traits[0]];
    assert_eq!(per_observer["n"], 1);
    close(
        (4.0 - o2["report"]["traits"][&traits[0]].as_f64().unwrap()).abs(),
        &per_observer["mean_abs_diff"],
        "per observer",
    );
    assert!(report["annotators"]["ann"].get("per_observer").is_none());
    // Between the annotators: every (subject, trait) both rated with a number.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (t, of_ann) in &ratings["ann"] {
        for (s, x) in of_ann {
            if let Some(y) = ratings["bob"].get(t).and_then(|m| m.get(s)) {
                a.push(*x);
                b.push(*y);
            }
        }
    }
    let pair = &report["inter_annotator"]["pairs"][0];
    assert_eq!((pair["a"].as_str(), pair["b"].as_str()), (Some("ann"), Some("bob")));
    assert_eq!(pair["n"], a.len());
    same(spearman(&a, &b), &pair["spearman"], "inter-annotator spearman");
    let rounded = |v: &[f64]| v.iter().map(|x| x.round() as i64).collect::<Vec<_>>();
    same(qwk(&rounded(&a), &rounded(&b)), &pair["qwk"], "inter-annotator qwk");

    // The table: a row per trait under an aligned header, ρ latent for synthetic subjects. An
    // interview's --method has no meaning here: refused, not ignored.
    let method = common::output(&config, &data, &["agreement", "--session", &id, "--method", "er-all"]).await;
    assert_eq!(method.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&method.stderr).contains("leave --method out"));
    let table = String::from_utf8(ok(&config, &data, &["agreement", "--session", &id]).await).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("trait ")).unwrap();
    assert!(lines[header].ends_with("ρ latent"), "{table}");
    for row in &lines[header + 1..=header + traits.len()] {
        assert_eq!(row.chars().count(), lines[header].chars().count(), "{table}");
    }
    assert!(
        table.contains("\ninter-annotator") && table.contains("family "),
        "{table}"
    );

    // A row naming an unknown subject: located, exit 2, nothing written.
    let annotations = data.join("sessions").join(&id).join("annotations");
    let before = common::snapshot(&annotations);
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        format!(
            "annotator,task,character,scale,dimension,item_id,value\ncid,subject,s2,IPIP-50,{0},,3\ncid,subject,s7,IPIP-50,{0},,3\n",
            traits[0]
        ),
    )
    .unwrap();
    let out = common::output(&config, &data, &["annotations", "import", &id, bad.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.csv:3:13: no subject \"s7\""), "{err}");
    assert_eq!(common::snapshot(&annotations), before, "nothing written");
    // An item row, an unknown observer and a value off the 1–5 scale are located too.
    for (row, at) in [
        (format!("cid,item,s2,IPIP-50,{},1,3,", traits[0]), ":2:5: session "),
        (
            format!("cid,subject,s2,IPIP-50,{},,3,o4", traits[0]),
            "no observer \"o4\"",
        ),
        (format!("cid,subject,s2,IPIP-50,{},,5.5,", traits[0]), "outside [1, 5]"),
        (
            "cid,subject,s2,IPIP-50,Openness,,3,".to_string(),
            ":2:24: no trait \"Openness\"",
        ),
    ] {
        std::fs::write(
            &bad,
            format!("annotator,task,character,scale,dimension,item_id,value,observer\n{row}\n"),
        )
        .unwrap();
        let out = common::output(&config, &data, &["annotations", "import", &id, bad.to_str().unwrap()]).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{row}: {err}");
        assert!(err.contains(at), "{row}: {err}");
    }
    assert_eq!(common::snapshot(&annotations), before, "nothing written");

    // An export imports back to the same annotations.
    let exported = ok(&config, &data, &["annotations", "export", &id, "--format", "csv"]).await;
    let text = String::from_utf8(exported.clone()).unwrap();
    assert!(text.starts_with("annotator,task,character,scale,repeat,dimension,item_id,value,note,observer\n"));
    assert!(text.contains(",o2\n"), "{text}");
    let as_json = |v: Value| -> Value {
        let mut v = v;
        common::strip(&mut v, "at");
        v
    };
    let before_json = as_json(json(&config, &data, &["annotations", "export", &id, "--format", "json"]).await);
    std::fs::remove_dir_all(&annotations).unwrap();
    let round_trip = dir.path().join("exported.csv");
    std::fs::write(&round_trip, &exported).unwrap();
    ok(
        &config,
        &data,
        &["annotations", "import", &id, round_trip.to_str().unwrap()],
    )
    .await;
    assert_eq!(
        ok(&config, &data, &["annotations", "export", &id, "--format", "csv"]).await,
        exported
    );
    assert_eq!(
        as_json(json(&config, &data, &["annotations", "export", &id, "--format", "json"]).await),
        before_json
    );
    assert_eq!(
        json(&config, &data, &["agreement", "--session", &id, "--json"]).await,
        report
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_gives_a_table_3_row_per_session_and_trait_of_rated_sessions() {
    let server = FakeServer::start(FakeConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = common::fake_config(dir.path(), &server, "max_concurrency = 8");
    // A second provider on the same server, another model name: the subjects' other player.
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[[providers]]\nname = \"other\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"other-model\"\n",
        server.base_url()
    ));
    std::fs::write(&config, text).unwrap();
    let data = dir.path().join("data");
    let first = observe(&config, &data, "fake").await;
    let second = observe(&config, &data, "other").await;

    // Without human ratings a session reports as before.
    let plain = String::from_utf8(ok(&config, &data, &["report", &first, &second]).await).unwrap();
    assert!(!plain.contains("Human ratings"), "{plain}");
    let plain_json = json(&config, &data, &["report", &first, &second, "--format", "json"]).await;
    assert!(
        plain_json
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s.get("human_ratings").is_none())
    );

    let export = json(&config, &data, &["export", &first, "--format", "json"]).await;
    let subjects = export["subjects"].as_array().unwrap();
    let ids: Vec<String> = subjects.iter().map(|s| s["id"].as_str().unwrap().to_string()).collect();
    let traits: Vec<String> = subjects[0]["aggregate"].as_object().unwrap().keys().cloned().collect();
    let (csv, ratings) = ratings_csv(&ids, &traits);
    let csv_path = dir.path().join("ratings.csv");
    std::fs::write(&csv_path, &csv).unwrap();
    for id in [&first, &second] {
        ok(
            &config,
            &data,
            &["annotations", "import", id, csv_path.to_str().unwrap()],
        )
        .await;
    }

    let report = json(&config, &data, &["report", &first, &second, "--format", "json"]).await;
    let entries = report.as_array().unwrap();
    for (entry, id, model) in [
        (&entries[0], &first, "fake-model"),
        (&entries[1], &second, "other-model"),
    ] {
        assert_eq!(entry["session"], id.as_str());
        let human = &entry["human_ratings"];
        assert_eq!(human["subject_model"], model);
        assert_eq!(human["traits"].as_object().unwrap().len(), traits.len());
    }
    // Pooled over annotators: the mean rating per subject and trait.
    for t in &traits {
        let mut pooled: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for by_trait in ratings.values() {
            for (s, v) in &by_trait[t] {
                pooled.entry(s.as_str()).or_default().push(*v);
            }
        }
        let of = |s: &str| subjects.iter().find(|x| x["id"] == s).unwrap();
        let h: Vec<f64> = pooled.values().map(|v| mean(v)).collect();
        let self_: Vec<f64> = pooled
            .keys()
            .map(|s| of(s)["self_report"]["traits"][t].as_f64().unwrap())
            .collect();
        let obs: Vec<f64> = pooled.keys().map(|s| of(s)["aggregate"][t].as_f64().unwrap()).collect();
        let row = &entries[0]["human_ratings"]["traits"][t];
        assert_eq!(row["n"], pooled.len(), "{t}");
        same(mean_abs_diff(&h, &self_), &row["mean_abs_diff_self"], t);
        same(mean_abs_diff(&h, &obs), &row["mean_abs_diff_observers"], t);
        same(spearman(&h, &self_), &row["spearman_self"], t);
        same(spearman(&h, &obs), &row["spearman_observers"], t);
    }

    let md = String::from_utf8(ok(&config, &data, &["report", &first, &second]).await).unwrap();
    let block = &md[md.find("## Human ratings").expect("the Table 3/4 block")..];
    let lines: Vec<&str> = block.lines().skip_while(|l| !l.starts_with("session")).collect();
    assert!(lines[0].ends_with("ρ(H,S)  ρ(H,O)"), "{block}");
    for (id, model) in [(&first, "fake-model"), (&second, "other-model")] {
        let rows: Vec<&&str> = lines.iter().filter(|l| l.starts_with(id.as_str())).collect();
        assert_eq!(rows.len(), traits.len(), "{block}");
        assert!(rows.iter().all(|l| l.contains(model)), "{block}");
    }
    assert!(md.find("## Human ratings") > md.find(&format!("## {second} (observers)")));
}
