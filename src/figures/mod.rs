//! A session's pictures for papers, as the workbench draws them: the radar of a measured profile
//! against the labels, per-dimension bars with their spread, a characters × dimensions heatmap of
//! the error, and the judge-against-human scatter of an annotated session. [`session`] computes what
//! a figure shows from a session's records; this module draws it, as an SVG document (text kept as
//! text) or PNG bytes, in the embedded font ([`font`]). Pure: data in, a file's contents out.

mod draw;
pub mod font;
pub mod session;

use plotters::prelude::*;

/// A figure with everything it shows already computed.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    Radar(Radar),
    Bars(Bars),
    Heatmap(Heatmap),
    Agreement(Agreement),
}

/// The lines above a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Titles {
    pub title: String,
    pub subtitle: String,
}

/// A dimension as an axis or a row names it, with its Chinese name for a Chinese character.
#[derive(Debug, Clone, PartialEq)]
pub struct DimensionName {
    pub name: String,
    pub zh: Option<String>,
}

/// Where a label puts a dimension, in the scale's units (a letter target: where its band begins),
/// whether it is marginal (X: left out of the metrics), and for a letter target without a score the
/// band it asks for (low, high), which the figures draw instead of a point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelMark {
    pub value: f64,
    pub marginal: bool,
    pub band: Option<(f64, f64)>,
}

/// One character × scale × method: the measured profile and the labels, one axis per dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct Radar {
    pub titles: Titles,
    /// The scale's dimension range: the centre is its minimum, the outer ring its maximum.
    pub range: (f64, f64),
    pub axes: Vec<DimensionName>,
    pub measured: Vec<Option<f64>>,
    pub labels: Vec<Option<LabelMark>>,
    /// The legend's names of the two series, e.g. "er-batch" and "pdb labels".
    pub measured_name: String,
    pub labels_name: String,
}

/// One character × scale × method: a bar per dimension with its spread, the label marked.
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    pub titles: Titles,
    pub range: (f64, f64),
    pub rows: Vec<Bar>,
    pub measured_name: String,
    pub labels_name: String,
    /// What an error bar spans, for the legend ("±1 sd over repeats").
    pub spread_name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub dimension: DimensionName,
    pub value: Option<f64>,
    /// No spread, no error bar.
    pub sd: Option<f64>,
    pub label: Option<LabelMark>,
}

/// Characters × dimensions of one scale × method, each cell the absolute error to the label.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    pub titles: Titles,
    pub characters: Vec<String>,
    pub dimensions: Vec<DimensionName>,
    /// `cells[character][dimension]`; `None`: not measured, or no label to compare with.
    pub cells: Vec<Vec<Option<Cell>>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// |measured − label| ÷ the dimension range, 0–1.
    pub error: f64,
    pub marginal: bool,
}

/// Human ratings against the judge's on the same cases.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    pub titles: Titles,
    /// The rating scale both axes share.
    pub range: (f64, f64),
    pub human_axis: String,
    pub judge_axis: String,
    /// One entry per annotator (the legend), in the order `points` refer to them.
    pub annotators: Vec<String>,
    pub points: Vec<Point>,
}

/// `count` cases rated `human` by annotator number `annotator` and `judge` by the judge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub annotator: usize,
    pub human: f64,
    pub judge: f64,
    pub count: usize,
}

impl Figure {
    /// Every text the figure writes, one per line.
    pub fn text(&self) -> String {
        let names = |d: &[DimensionName]| -> Vec<String> {
            d.iter()
                .flat_map(|d| std::iter::once(d.name.clone()).chain(d.zh.clone()))
                .collect()
        };
        let (titles, mut lines) = match self {
            Figure::Radar(r) => (&r.titles, names(&r.axes)),
            Figure::Bars(b) => {
                let axes: Vec<DimensionName> = b.rows.iter().map(|r| r.dimension.clone()).collect();
                (&b.titles, names(&axes))
            }
            Figure::Heatmap(h) => {
                let mut lines = names(&h.dimensions);
                lines.extend(h.characters.iter().cloned());
                (&h.titles, lines)
            }
            Figure::Agreement(a) => {
                let mut lines = vec![a.human_axis.clone(), a.judge_axis.clone()];
                lines.extend(a.annotators.iter().cloned());
                (&a.titles, lines)
            }
        };
        lines.insert(0, titles.title.clone());
        lines.insert(1, titles.subtitle.clone());
        lines.join("\n")
    }
}

/// A figure's size in pixels (an SVG's user units).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("the embedded font cannot be read")]
    Font,
    #[error("drawing the figure failed: {0}")]
    Draw(String),
    #[error("encoding the PNG failed: {0}")]
    Encode(#[from] std::io::Error),
}

/// The figure as an SVG document.
pub fn svg(figure: &Figure, size: Size) -> Result<String, FigureError> {
    if !font::register() {
        return Err(FigureError::Font);
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (size.width, size.height)).into_drawing_area();
        draw::figure(&root, figure, true)?;
        root.present().map_err(|e| FigureError::Draw(e.to_string()))?;
    }
    Ok(font::svg_sizes(&out))
}

/// The figure as 8-bit RGB pixels, row by row (what [`png`] encodes).
pub fn raster(figure: &Figure, size: Size) -> Result<Vec<u8>, FigureError> {
    if !font::register() {
        return Err(FigureError::Font);
    }
    let mut pixels = vec![0u8; size.width as usize * size.height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (size.width, size.height)).into_drawing_area();
        draw::figure(&root, figure, false)?;
        root.present().map_err(|e| FigureError::Draw(e.to_string()))?;
    }
    Ok(pixels)
}

/// The figure as a PNG file of exactly `size`.
pub fn png(figure: &Figure, size: Size) -> Result<Vec<u8>, FigureError> {
    let pixels = raster(figure, size)?;
    let software = b"Software\0incharacter plot";
    Ok(crate::png::rgb(size.width, size.height, &pixels, &[(b"tEXt", software)])?)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn name(name: &str, zh: Option<&str>) -> DimensionName {
        DimensionName {
            name: name.into(),
            zh: zh.map(Into::into),
        }
    }

    /// Dimension names with XML's special characters, and a Chinese one.
    pub(crate) fn names() -> Vec<DimensionName> {
        vec![
            name("Salt & <Pepper>", None),
            name("Extraversion", Some("外向性")),
            name("\"Quoted\" 'one'", None),
            name("Openness", Some("开放性")),
        ]
    }

    fn titles() -> Titles {
        Titles {
            title: "钟离 – BFI".into(),
            subtitle: "er-batch against pdb labels".into(),
        }
    }

    pub(crate) fn all() -> Vec<Figure> {
        let names = names();
        let label = |value| {
            Some(LabelMark {
                value,
                marginal: false,
                band: None,
            })
        };
        vec![
            Figure::Radar(Radar {
                titles: titles(),
                range: (1.0, 5.0),
                axes: names.clone(),
                measured: vec![Some(2.0), None, Some(4.5), Some(3.0)],
                labels: vec![
                    label(4.0),
                    Some(LabelMark {
                        value: 3.0,
                        marginal: true,
                        band: None,
                    }),
                    None,
                    Some(LabelMark {
                        value: 2.6,
                        marginal: false,
                        band: Some((1.0, 2.6)),
                    }),
                ],
                measured_name: "measured (er-batch)".into(),
                labels_name: "pdb labels".into(),
            }),
            Figure::Bars(Bars {
                titles: titles(),
                range: (0.0, 100.0),
                rows: names
                    .iter()
                    .enumerate()
                    .map(|(i, d)| Bar {
                        dimension: d.clone(),
                        value: (i != 1).then_some(20.0 * i as f64),
                        sd: (i == 2).then_some(7.5),
                        label: if i == 3 {
                            Some(LabelMark {
                                value: 60.0,
                                marginal: false,
                                band: Some((60.0, 100.0)),
                            })
                        } else {
                            label(50.0)
                        },
                    })
                    .collect(),
                measured_name: "measured".into(),
                labels_name: "pdb labels".into(),
                spread_name: "±1 sd over batches".into(),
            }),
            Figure::Heatmap(Heatmap {
                titles: titles(),
                characters: vec!["Hermione Granger".into(), "钟离".into()],
                dimensions: names.clone(),
                cells: vec![
                    vec![Some(Cell { error: 0.1, marginal: false }), None, Some(Cell { error: 0.7, marginal: true })],
                    vec![Some(Cell { error: 0.3, marginal: false }); 4],
                ],
            }),
            Figure::Agreement(Agreement {
                titles: titles(),
                range: (1.0, 5.0),
                human_axis: "human rating (a, b)".into(),
                judge_axis: "oc rating".into(),
                annotators: vec!["a".into(), "b".into()],
                points: vec![
                    Point { annotator: 0, human: 1.0, judge: 2.0, count: 3 },
                    Point { annotator: 1, human: 5.0, judge: 5.0, count: 1 },
                ],
            }),
        ]
    }

    const SIZE: Size = Size { width: 640, height: 480 };

    #[test]
    fn svg_is_well_formed_keeps_text_as_text_and_names_every_dimension() {
        for figure in all() {
            let svg = svg(&figure, SIZE).unwrap();
            let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
            let root = doc.root_element();
            assert_eq!((root.attribute("width"), root.attribute("height")), (Some("640"), Some("480")));
            let texts: Vec<&str> = doc
                .descendants()
                .filter(|n| n.has_tag_name("text"))
                .filter_map(|n| n.text())
                .map(str::trim)
                .collect();
            let all = texts.join("\n");
            if !matches!(figure, Figure::Agreement(_)) {
                for d in names() {
                    assert!(all.contains(&d.name), "{} missing from {all}", d.name);
                }
            }
            assert!(all.contains("钟离"));
            let text = doc.descendants().find(|n| n.has_tag_name("text")).unwrap();
            assert_eq!(text.attribute("font-family"), Some(font::FAMILY));
            // What the figure says it writes is written, and the font has all of it.
            for line in figure.text().lines() {
                assert!(all.contains(line.trim()), "{line} missing from {all}");
            }
            assert_eq!(font::missing(&figure.text()), Vec::<char>::new());
        }
    }

    #[test]
    fn a_png_is_the_size_asked_and_the_same_every_time() {
        for figure in all() {
            for size in [SIZE, Size { width: 200, height: 900 }, Size { width: 1600, height: 1200 }] {
                let png = png(&figure, size).unwrap();
                assert_eq!(crate::png::size(&png), Some((size.width, size.height)));
            }
            assert_eq!(png(&figure, SIZE).unwrap(), png(&figure, SIZE).unwrap());
        }
    }
}
