//! `incharacter plot` on the bundled sample sessions: SVGs are well-formed XML naming every dimension,
//! PNGs have the size asked for, a Chinese character's radar draws its Chinese labels with real
//! glyphs, the agreement scatter states what `agreement --session` computes, what a session cannot
//! give exits 2 naming what it has, and README's figures are what their commands make today.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use incharacter::catalog::Catalog;
use incharacter::figures::session::{self, Kind, Request};
use incharacter::figures::{self, Figure, Size, font};
use incharacter::study::Event;

const BFI_16P: &str = "20261130-231918-bfi-and-16p-on-the-local-model-248f";
const GSE: &str = "20261129-201520-gse-on-the-local-model-e700";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The binary from the checkout's root with an empty data dir (a developer's own characters and
/// sessions never leak in), or with `data`.
fn run_in(data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_incharacter"))
        .args(args)
        .current_dir(root())
        .env("INCHARACTER_DATA_DIR", data)
        .output()
        .expect("run incharacter")
}

fn run(args: &[&str]) -> Output {
    let empty = tempfile::tempdir().unwrap();
    run_in(empty.path(), args)
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn dimensions(scale: &str) -> Vec<String> {
    let catalog = Catalog::bundled().unwrap();
    catalog
        .scale(scale)
        .unwrap()
        .dimensions
        .iter()
        .map(|d| d.name.clone())
        .collect()
}

fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not well-formed XML: {e}"));
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .collect()
}

#[test]
fn svgs_are_xml_that_name_every_dimension_and_pngs_have_the_size_asked() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, scale, extra) in [
        ("radar", "BFI", &["--character", "hermione"][..]),
        ("bars", "16Personalities", &["--method", "oc"][..]),
        ("heatmap", "BFI", &["--labels", "annotation"][..]),
        (
            "radar",
            "16Personalities",
            &["--character", "钟离", "--method", "d-oc"][..],
        ),
    ] {
        let plot = |file: &Path, size: &[&str]| {
            let mut args = vec![
                "plot",
                BFI_16P,
                "--kind",
                kind,
                "--scale",
                scale,
                "-o",
                file.to_str().unwrap(),
            ];
            args.extend_from_slice(extra);
            args.extend_from_slice(size);
            ok(run(&args))
        };
        let svg = dir.path().join(format!("{kind}.svg"));
        let out = plot(&svg, &[]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("wrote {} (800×600)\n", svg.display())
        );
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg width=\"800\" height=\"600\""), "{}", &text[..80]);
        let shown = texts(&text).join("\n");
        for d in dimensions(scale) {
            assert!(shown.contains(&d), "{kind} {scale}: {d} not in\n{shown}");
        }
        assert!(text.contains("font-family=\"Noto Sans CJK SC, sans-serif\""));

        let png = dir.path().join(format!("{kind}.png"));
        plot(&png, &["--width", "1000", "--height", "700"]);
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&bytes[12..16], b"IHDR");
        let word = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
        assert_eq!((word(16), word(20)), (1000, 700), "{kind}");
    }
}

fn events(id: &str) -> Vec<Event> {
    incharacter::journal::read(&root().join("sample-sessions").join(id).join("journal.jsonl")).unwrap()
}

fn request(kind: Kind, character: Option<&'static str>) -> Request<'static> {
    Request {
        kind,
        character,
        scale: None,
        method: None,
        labels: None,
    }
}

/// Pixels that differ between two rasters.
fn differ(a: &[u8], b: &[u8]) -> usize {
    a.chunks(3).zip(b.chunks(3)).filter(|(x, y)| x != y).count()
}

#[test]
fn a_chinese_characters_radar_draws_its_chinese_labels_with_real_glyphs() {
    let catalog = Catalog::bundled().unwrap();
    let figure = session::figure(
        &events(BFI_16P),
        &Default::default(),
        &catalog,
        &request(Kind::Radar, Some("zhongli-zh")),
    )
    .unwrap();
    let Figure::Radar(radar) = &figure else {
        panic!("a radar")
    };
    assert_eq!(radar.titles.title, "钟离 – BFI");
    let zh: Vec<&str> = radar.axes.iter().filter_map(|a| a.zh.as_deref()).collect();
    assert_eq!(zh, ["外向性", "神经质", "尽责性", "宜人性", "开放性"]);
    // Every character written has a glyph in the embedded font: nothing is drawn as a box.
    let mut all = format!("{} {}", radar.titles.title, radar.titles.subtitle);
    for a in &radar.axes {
        all += &format!(" {} {}", a.name, a.zh.as_deref().unwrap_or(""));
    }
    assert_eq!(font::missing(&all), Vec::<char>::new());
    // And the Chinese names put ink on the picture: without them, a few hundred pixels fewer differ
    // from white.
    let size = Size {
        width: 800,
        height: 600,
    };
    let with = figures::raster(&figure, size).unwrap();
    let mut bare = radar.clone();
    for a in &mut bare.axes {
        a.zh = None;
    }
    let without = figures::raster(&Figure::Radar(bare), size).unwrap();
    assert!(differ(&with, &without) > 300, "{}", differ(&with, &without));
}

#[test]
fn what_a_session_cannot_give_exits_2_naming_what_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("x.svg");
    let svg = svg.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--kind", "radar", "--character", "sheldon-zh"],
            "character \"sheldon-zh\" is not in session 20261130-231918-bfi-and-16p-on-the-local-model-248f; it has \
             hermione-en, sheldon-en, zhongli-zh",
        ),
        (
            vec!["--kind", "bars", "--scale", "GSE"],
            "scale \"GSE\" is not in session 20261130-231918-bfi-and-16p-on-the-local-model-248f; it has BFI, \
             16Personalities",
        ),
        (
            vec!["--kind", "radar", "--method", "sr"],
            "method \"sr\" is not in session 20261130-231918-bfi-and-16p-on-the-local-model-248f; it has er-batch, \
             oc, d-oc",
        ),
        (
            vec!["--kind", "agreement"],
            "session 20261130-231918-bfi-and-16p-on-the-local-model-248f has no human annotations, so no agreement \
             figure",
        ),
        (
            vec!["--kind", "heatmap", "--character", "hermione"],
            "--character does not apply to a heatmap",
        ),
        // Every 16P ER_batch judgment of the sample failed: no heatmap of nothing but "n/a".
        (
            vec!["--kind", "heatmap", "--scale", "16Personalities"],
            "has no 16Personalities scores by er-batch (not assessed yet, or every assessment failed)",
        ),
    ] {
        let mut all = vec!["plot", BFI_16P, "-o", svg];
        all.extend(args);
        let out = run(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {stderr}");
        assert!(stderr.contains(says), "{all:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(!Path::new(svg).exists());
    }
    let pdf = dir.path().join("figure.pdf");
    let out = run(&["plot", BFI_16P, "--kind", "radar", "-o", pdf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must end in .svg or .png"));
    let out = run(&[
        "plot",
        "20261129-231052-three-observers-on-the-local-model-038d",
        "--kind",
        "radar",
        "-o",
        svg,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is an observers session: plot draws interview sessions"));
    let out = run(&["plot", BFI_16P, "--kind", "radar", "--width", "20", "-o", svg]);
    assert_eq!(out.status.code(), Some(2));
}

/// The BFI and 16P sample copied into `data`, its BFI dimensions rated by `annotator` (`shift` moves
/// the ratings).
fn annotate(data: &Path, annotator: &str, shift: usize) {
    let to = data.join("sessions").join(BFI_16P);
    if !to.exists() {
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(
            root().join("sample-sessions").join(BFI_16P).join("journal.jsonl"),
            to.join("journal.jsonl"),
        )
        .unwrap();
    }
    let mut csv = String::from("annotator,task,character,scale,dimension,item_id,value\n");
    for (c, character) in ["hermione-en", "sheldon-en", "zhongli-zh"].iter().enumerate() {
        for (d, dimension) in dimensions("BFI").iter().enumerate() {
            let value = 1 + (c + d + shift) % 5;
            csv += &format!("{annotator},dimension,{character},BFI,{dimension},,{value}\n");
        }
    }
    let file = data.join(format!("{annotator}.csv"));
    std::fs::write(&file, csv).unwrap();
    ok(run_in(
        data,
        &["annotations", "import", BFI_16P, file.to_str().unwrap()],
    ));
}

#[test]
fn the_agreement_scatter_states_what_agreement_computes() {
    let data = tempfile::tempdir().unwrap();
    let svg = data.path().join("agreement.svg");
    let plot = |extra: &[&str]| {
        let mut args = vec!["plot", BFI_16P, "--kind", "agreement", "-o", svg.to_str().unwrap()];
        args.extend_from_slice(extra);
        ok(run_in(data.path(), &args));
        texts(&std::fs::read_to_string(&svg).unwrap())
    };
    annotate(data.path(), "ann", 0);
    let out = ok(run_in(
        data.path(),
        &["agreement", "--session", BFI_16P, "--method", "er-batch", "--json"],
    ));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ann = &report["annotators"]["ann"];
    let two = |v: &serde_json::Value| format!("{:.2}", v.as_f64().unwrap());
    // Without --method: the first of the plan's methods (er-batch, oc, d-oc) with rated cases.
    let shown = plot(&[]);
    assert_eq!(
        shown[0],
        format!(
            "er-batch vs human on BFI: n = 15, Pearson r = {}, Spearman ρ = {}",
            two(&ann["pearson"]),
            two(&ann["spearman"])
        )
    );
    assert_eq!(ann["n"], 15);
    assert!(shown.contains(&"human rating (ann)".to_string()), "{shown:?}");
    // A second annotator: pooled in the title, a colour of its own in the legend.
    annotate(data.path(), "bob", 2);
    let shown = plot(&["--method", "er-batch", "--character", "hermione"]);
    assert!(
        shown[0].starts_with("er-batch vs human on BFI: n = 10, "),
        "{}",
        shown[0]
    );
    assert!(
        shown[1].starts_with("dimension task, Hermione Granger, session "),
        "{}",
        shown[1]
    );
    assert!(
        shown.iter().any(|t| t == "ann") && shown.iter().any(|t| t == "bob"),
        "{shown:?}"
    );
    // OC's options in this sample are all refusals: nothing to compare. SR has no human task.
    for (method, says) in [
        (
            "oc",
            "no case of BFI by oc was rated with a number by both a human and the judge",
        ),
        ("d-oc", "no case of BFI, 16Personalities by d-oc was rated"),
    ] {
        let scale: &[&str] = if method == "oc" { &["--scale", "bfi"] } else { &[] };
        let mut args = vec![
            "plot",
            BFI_16P,
            "--kind",
            "agreement",
            "--method",
            method,
            "-o",
            svg.to_str().unwrap(),
        ];
        args.extend_from_slice(scale);
        let out = run_in(data.path(), &args);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = run(&[
        "plot",
        GSE,
        "--kind",
        "agreement",
        "--method",
        "sr",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sr has no human annotation task"));
}

/// README's figures: each `<!-- figure:NAME -->` block shows the command that made its PNG.
fn readme_figures() -> Vec<(String, Vec<String>, PathBuf)> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut out = Vec::new();
    let mut rest = readme.as_str();
    while let Some(i) = rest.find("<!-- figure:") {
        let after = &rest[i + "<!-- figure:".len()..];
        let name = after[..after.find(" -->").unwrap()].to_string();
        let end = after.find("<!-- /figure -->").expect("a closing marker");
        let block = &after[..end];
        let command = block
            .lines()
            .find_map(|l| l.strip_prefix("$ incharacter "))
            .unwrap_or_else(|| panic!("figure {name}: a `$ incharacter plot …` line"));
        let args: Vec<String> = command.split_whitespace().map(String::from).collect();
        let o = args.iter().position(|a| a == "-o").expect("-o FILE");
        let file = root().join(&args[o + 1]);
        assert!(
            block.contains(&format!("]({})", args[o + 1])),
            "figure {name} shows {}",
            args[o + 1]
        );
        out.push((name, args, file));
        rest = &after[end..];
    }
    out
}

#[test]
fn readme_figures_are_what_their_commands_make() {
    let figures = readme_figures();
    assert!(figures.len() >= 2);
    let dir = tempfile::tempdir().unwrap();
    for (name, mut args, committed) in figures {
        let o = args.iter().position(|a| a == "-o").unwrap();
        let fresh = dir.path().join(format!("{name}.png"));
        args[o + 1] = fresh.to_str().unwrap().to_string();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(run(&args));
        assert!(
            std::fs::read(&fresh).unwrap() == std::fs::read(&committed).unwrap(),
            "{} is not what README's command makes today: run it from the checkout's root to update it",
            committed.display()
        );
    }
}

#[test]
fn a_one_dimension_scale_is_drawn_as_bars_even_when_a_radar_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let draw = |kind: &str| {
        let file = dir.path().join(format!("{kind}.svg"));
        let args = [
            "plot",
            GSE,
            "--kind",
            kind,
            "--scale",
            "GSE",
            "--character",
            "hermione-en",
            "-o",
            file.to_str().unwrap(),
        ];
        ok(run(&args));
        std::fs::read(file).unwrap()
    };
    assert_eq!(draw("radar"), draw("bars"), "GSE has one dimension: no one-axis radar");
}

/// A letter target is drawn as the band it asks for (H: the top 40% of the range, L: the bottom
/// 40%), on the radar along its axis and on the bars across its row, named in the legend; a numeric
/// target stays a point.
#[test]
fn letter_targets_are_drawn_as_their_bands() {
    use incharacter::domain::character::{Label, LabelSource, LabelType};
    let mut catalog = Catalog::bundled().unwrap();
    let hermione = catalog
        .characters
        .iter_mut()
        .find(|e| e.value.id == "hermione-en")
        .unwrap();
    let label = |kind, score| Label { score, kind };
    hermione.value.labels.target.insert(
        "BFI".into(),
        [
            ("Extraversion".to_string(), label(LabelType::H, None)),
            ("Neuroticism".to_string(), label(LabelType::L, None)),
            ("Openness".to_string(), label(LabelType::H, Some(4.2))),
        ]
        .into(),
    );
    let mut asked = request(Kind::Radar, Some("hermione-en"));
    asked.scale = Some("BFI");
    asked.labels = Some(LabelSource::Target);
    let events = events(BFI_16P);
    let radar = session::figure(&events, &Default::default(), &catalog, &asked).unwrap();
    let Figure::Radar(r) = &radar else { panic!("a radar") };
    let bands: Vec<Option<(f64, f64)>> = r.labels.iter().map(|l| l.and_then(|l| l.band)).collect();
    assert_eq!(bands, [Some((3.4, 5.0)), Some((1.0, 2.6)), None, None, None]);
    assert_eq!(r.labels[4].map(|l| (l.value, l.band)), Some((4.2, None)));
    asked.kind = Kind::Bars;
    let bars = session::figure(&events, &Default::default(), &catalog, &asked).unwrap();
    let size = Size {
        width: 800,
        height: 600,
    };
    for figure in [&radar, &bars] {
        let svg = figures::svg(figure, size).unwrap();
        let shown = texts(&svg).join("\n");
        assert!(shown.contains("letter target: its band"), "{shown}");
        // Without the bands (the same labels as points), the picture differs.
        let pointed = match figure.clone() {
            Figure::Radar(mut r) => {
                r.labels.iter_mut().flatten().for_each(|l| l.band = None);
                Figure::Radar(r)
            }
            Figure::Bars(mut b) => {
                b.rows
                    .iter_mut()
                    .filter_map(|r| r.label.as_mut())
                    .for_each(|l| l.band = None);
                Figure::Bars(b)
            }
            _ => unreachable!(),
        };
        let (with, without) = (
            figures::raster(figure, size).unwrap(),
            figures::raster(&pointed, size).unwrap(),
        );
        assert!(differ(&with, &without) > 500, "{}", differ(&with, &without));
    }
    // The bars write every value with two decimals, under the measured series' name.
    let svg = figures::svg(&bars, size).unwrap();
    let values: Vec<String> = texts(&svg)
        .into_iter()
        .filter(|t| t.chars().next().is_some_and(|c| c.is_ascii_digit()) && t.contains('.'))
        .collect();
    assert!(!values.is_empty());
    for v in &values {
        let decimals = v
            .split(['±'])
            .map(|n| n.split('.').nth(1).map_or(0, str::len))
            .collect::<Vec<_>>();
        assert!(decimals.iter().all(|d| *d == 2), "{v}");
    }
}

/// Without `--method` the agreement figure takes what `agreement` takes: OC when it has rated cases,
/// though the plan lists ER_batch first.
#[test]
fn the_agreement_scatter_defaults_to_oc_as_agreement_does() {
    const QWEN: &str = "20261203-093314-five-characters-bfi-on-qwen2-5-coder-1-5-051e";
    let data = tempfile::tempdir().unwrap();
    let to = data.path().join("sessions").join(QWEN);
    std::fs::create_dir_all(&to).unwrap();
    std::fs::copy(
        root().join("sample-sessions").join(QWEN).join("journal.jsonl"),
        to.join("journal.jsonl"),
    )
    .unwrap();
    let mut csv = String::from("annotator,task,character,scale,dimension,item_id,value\n");
    for (d, dimension) in dimensions("BFI").iter().enumerate() {
        csv += &format!("ann,dimension,hermione-en,BFI,{dimension},,{}\n", 1 + d % 5);
    }
    let catalog = Catalog::bundled().unwrap();
    let bfi = catalog.scale("BFI").unwrap();
    for item in bfi.items.iter().take(10) {
        let dimension = &bfi.dimensions[item.dimension().unwrap()].name;
        csv += &format!("ann,item,hermione-en,BFI,{dimension},{},{}\n", item.id, 1 + item.id % 5);
    }
    let file = data.path().join("ann.csv");
    std::fs::write(&file, csv).unwrap();
    ok(run_in(
        data.path(),
        &["annotations", "import", QWEN, file.to_str().unwrap()],
    ));
    let out = ok(run_in(data.path(), &["agreement", "--session", QWEN, "--json"]));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["method"], "oc", "{report}");
    let n = report["annotators"]["ann"]["n"].as_u64().unwrap();
    assert!(n > 0, "{report}");
    let svg = data.path().join("agreement.svg");
    ok(run_in(
        data.path(),
        &["plot", QWEN, "--kind", "agreement", "-o", svg.to_str().unwrap()],
    ));
    let shown = texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(
        shown[0].starts_with(&format!("oc vs human on BFI: n = {n}, ")),
        "{shown:?}"
    );
}

/// A heatmap cell is the mean of its repeats' errors, as MAE takes them: two repeats on either side
/// of the label are as far from it as each, not a perfect score for their mean.
#[test]
fn a_heatmap_cell_averages_the_errors_of_its_repeats() {
    use incharacter::domain::character::LabelSource;
    use incharacter::method::Method;
    let catalog = Catalog::bundled().unwrap();
    let journal = events(BFI_16P);
    let mut all = journal.clone();
    let scale = catalog.scale("BFI").unwrap();
    let (lo, hi) = scale.dimension_range();
    let label = |character: &str, dimension: &str| {
        catalog
            .character(character)
            .and_then(|c| c.labels.get(LabelSource::Pdb, "BFI", dimension))
            .and_then(|l| l.score)
    };
    // Each BFI ER_batch score again as a second repeat, mirrored about the label.
    let mirrored: Vec<Event> = journal
        .iter()
        .filter_map(|e| match e {
            Event::DimensionAssessed(a) if a.scale == "BFI" && a.method == Method::ErBatch => {
                let (score, label) = (a.score?, label(&a.character, &a.dimension)?);
                let mut b = a.clone();
                b.repeat = 1;
                b.score = Some(2.0 * label - score);
                Some(Event::DimensionAssessed(b))
            }
            _ => None,
        })
        .collect();
    assert!(!mirrored.is_empty());
    all.extend(mirrored);
    let mut asked = request(Kind::Heatmap, None);
    asked.scale = Some("BFI");
    asked.method = Some("er-batch");
    asked.labels = Some(LabelSource::Pdb);
    let Figure::Heatmap(heatmap) = session::figure(&all, &Default::default(), &catalog, &asked).unwrap() else {
        panic!("a heatmap")
    };
    let mut checked = 0;
    for e in &journal {
        let Event::DimensionAssessed(a) = e else { continue };
        if a.scale != "BFI" || a.method != Method::ErBatch {
            continue;
        }
        let (Some(score), Some(l)) = (a.score, label(&a.character, &a.dimension)) else {
            continue;
        };
        let name = &catalog.character(&a.character).unwrap().name;
        let row = heatmap.characters.iter().position(|c| c == name).unwrap();
        let column = scale.dimensions.iter().position(|d| d.name == a.dimension).unwrap();
        let cell = heatmap.cells[row][column].expect("a cell");
        let each = (score - l).abs() / (hi - lo);
        assert!(
            (cell.error - each).abs() < 1e-12,
            "{} {}: {} vs {each}",
            a.character,
            a.dimension,
            cell.error
        );
        checked += 1;
    }
    assert!(checked >= 10, "{checked}");
}
