//! Costs of the pure core: loading every bundled scale and character, scoring a scale, the alignment
//! metrics over a full benchmark matrix, and Kendall τ-b (O(n log n)) on an annotation-sized sample
//! and on a 100,000-row `agreement --pairs` file.
//! Run: `cargo bench --bench domain`.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use incharacter::catalog::Catalog;
use incharacter::domain::character::{Label, LabelType};
use incharacter::domain::metrics::{AlignmentRow, alignment};
use incharacter::domain::scoring::{ItemOption, Orientation, score_scale};
use incharacter::domain::stats;

fn bench(c: &mut Criterion) {
    c.bench_function("catalog: parse and validate 15 scales + 32 characters", |b| {
        b.iter(|| black_box(Catalog::bundled().unwrap()))
    });

    let catalog = Catalog::bundled().unwrap();
    let cabin = catalog.scale("CABIN").unwrap();
    let options: BTreeMap<u32, ItemOption> = cabin
        .scored_items()
        .map(|i| (i.id, ItemOption::Value(1 + (i.id % 5) as i32)))
        .collect();
    c.bench_function("scoring: CABIN, 164 items", |b| {
        b.iter(|| black_box(score_scale(cabin, &options, Orientation::Statement).unwrap()))
    });

    // 32 characters × 41 dimensions × 10 repeats.
    let dims: Vec<String> = cabin.dimensions.iter().map(|d| d.name.clone()).collect();
    let rows: Vec<AlignmentRow> = (0..10u32)
        .flat_map(|r| (0..32).flat_map(move |ch| (0..41usize).map(move |d| (r, ch, d))))
        .map(|(r, ch, d)| AlignmentRow {
            character: format!("c{ch}"),
            dimension: dims[d].clone(),
            repeat: r,
            predicted: Some(1.0 + ((r as usize + ch + d) % 9) as f64 / 2.0),
            label: Label {
                score: Some(1.0 + ((ch * d) % 5) as f64),
                kind: if (ch * d) % 5 >= 3 { LabelType::H } else { LabelType::L },
            },
            marginal: (ch + d) % 7 == 0,
        })
        .collect();
    c.bench_function("metrics: alignment over 13,120 rows", |b| {
        b.iter(|| black_box(alignment((1.0, 5.0), &dims, &rows)))
    });

    let a: Vec<f64> = (0..1000).map(|i| ((i * 37) % 5) as f64).collect();
    let bv: Vec<f64> = (0..1000).map(|i| ((i * 11) % 5) as f64).collect();
    c.bench_function("stats: Kendall tau-b, n = 1000 with ties", |b| {
        b.iter(|| black_box(stats::kendall_tau_b(&a, &bv)))
    });
    let a: Vec<f64> = (0..100_000).map(|i| ((i * 37) % 5) as f64).collect();
    let bv: Vec<f64> = (0..100_000).map(|i| ((i * 11) % 7) as f64).collect();
    c.bench_function("stats: Kendall tau-b, n = 100000 with ties", |b| {
        b.iter(|| black_box(stats::kendall_tau_b(&a, &bv)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
