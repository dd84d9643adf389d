//! Drawing a [`Figure`] on any plotters backend, in pixel coordinates: the same code makes the SVG and
//! the PNG. Text is placed by its top edge (plotters centres lines by a box that sits high on the
//! glyphs) and measured with the embedded font, so labels fit where they are put in both files.

use ab_glyph::{Font, FontRef, GlyphId, PxScale, ScaleFont, point};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontFamily, FontTransform};

use super::font::FAMILY;
use super::{Agreement, Bars, DimensionName, Figure, FigureError, Heatmap, LabelMark, Radar, Titles};

type Area<DB> = DrawingArea<DB, Shift>;
type Drawn = Result<(), FigureError>;

const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
const MUTED: RGBColor = RGBColor(0x60, 0x60, 0x60);
const GRID: RGBColor = RGBColor(0xd9, 0xd9, 0xd9);
const WHITE_INK: RGBColor = RGBColor(0xff, 0xff, 0xff);
/// Okabe–Ito colours, told apart with any colour vision: blue for what was measured, vermilion for
/// the labels, then the other annotators' colours.
const MEASURED: RGBColor = RGBColor(0x00, 0x72, 0xb2);
const LABEL: RGBColor = RGBColor(0xd5, 0x5e, 0x00);
const MARGINAL: RGBColor = RGBColor(0x99, 0x99, 0x99);
const MISSING: RGBColor = RGBColor(0xee, 0xee, 0xee);
const SERIES: [RGBColor; 6] = [
    MEASURED,
    LABEL,
    RGBColor(0x00, 0x9e, 0x73),
    RGBColor(0xcc, 0x79, 0xa7),
    RGBColor(0xe6, 0x9f, 0x00),
    RGBColor(0x56, 0xb4, 0xe9),
];
/// The heatmap's ramp (ColorBrewer YlOrRd) and the error at its dark end: larger errors are as dark.
const RAMP: [(u8, u8, u8); 3] = [(0xff, 0xff, 0xcc), (0xfd, 0x8d, 0x3c), (0xbd, 0x00, 0x26)];
const RAMP_MAX: f64 = 0.5;

/// Text sizes (plotters' size: the font's ascent-to-descent height) at 600 px, scaled with the figure.
const TITLE: f64 = 24.0;
const SUBTITLE: f64 = 15.0;
const LABEL_TEXT: f64 = 16.0;
const SMALL: f64 = 13.0;

/// Draws `figure` on `area`: an SVG document's when `vector`, else a raster's.
pub fn figure<DB: DrawingBackend>(area: &Area<DB>, figure: &Figure, vector: bool) -> Drawn {
    area.fill(&WHITE).map_err(failed)?;
    let pen = Pen::new(area, vector)?;
    match figure {
        Figure::Radar(r) => radar(&pen, r),
        Figure::Bars(b) => bars(&pen, b),
        Figure::Heatmap(h) => heatmap(&pen, h),
        Figure::Agreement(a) => agreement(&pen, a),
    }
}

fn failed(e: impl std::fmt::Display) -> FigureError {
    FigureError::Draw(e.to_string())
}

/// Text from outside on one line, without escape sequences or control characters (which are not
/// even valid XML, and have no glyph in a PNG).
fn clean(text: &str) -> String {
    crate::text::terminal_safe(text).replace('\n', " ")
}

/// Ticks for a rating scale's range: every whole number of a short whole range (1–7), else round
/// values.
fn scale_ticks(min: f64, max: f64) -> Vec<f64> {
    if min.fract() == 0.0 && max.fract() == 0.0 && max - min <= 10.0 {
        (min as i64..=max as i64).map(|v| v as f64).collect()
    } else {
        ticks(min, max, 6)
    }
}

/// A tick's label: no more decimals than it has (at most two).
fn tick(v: f64) -> String {
    let text = format!("{v:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Round tick values from `min` to `max`, about `count` of them.
fn ticks(min: f64, max: f64, count: usize) -> Vec<f64> {
    let span = max - min;
    if span <= 0.0 || !span.is_finite() {
        return vec![min];
    }
    let rough = span / count.max(1) as f64;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= rough)
        .unwrap_or(10.0 * magnitude);
    let first = (min / step).ceil() as i64;
    let last = (max / step + 1e-9).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// The heatmap's colour for an error.
fn ramp(error: f64) -> RGBColor {
    let t = (error / RAMP_MAX).clamp(0.0, 1.0) * (RAMP.len() - 1) as f64;
    let i = (t.floor() as usize).min(RAMP.len() - 2);
    let f = t - i as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (RAMP[i], RAMP[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Drawing in pixels on one area, with sizes scaled to the figure (`u` pixels per unit at 600 px).
/// Text is measured with the embedded font; on a raster it is also drawn with it here, glyph by glyph
/// at fractional positions with their side bearings and kerning (plotters' own drawing drops the
/// bearings, which spaces letters unevenly); in SVG it stays text.
struct Pen<'a, DB: DrawingBackend> {
    area: &'a Area<DB>,
    w: i32,
    h: i32,
    u: f64,
    vector: bool,
    font: FontRef<'static>,
}

impl<'a, DB: DrawingBackend> Pen<'a, DB> {
    fn new(area: &'a Area<DB>, vector: bool) -> Result<Self, FigureError> {
        let (w, h) = area.dim_in_pixel();
        let u = (f64::from(w.min(h)) / 600.0).clamp(0.4, 8.0);
        let font = FontRef::try_from_slice(super::font::BYTES).map_err(|_| FigureError::Font)?;
        Ok(Pen {
            area,
            w: w as i32,
            h: h as i32,
            u,
            vector,
            font,
        })
    }

    /// `units` in pixels.
    fn px(&self, units: f64) -> i32 {
        (units * self.u).round() as i32
    }

    /// Text of `size` in pixels: the font's ascent-to-descent height, as plotters sizes it.
    fn scale(&self, size: f64) -> PxScale {
        PxScale::from((size * self.u) as f32)
    }

    /// The caret position before each character of `text` and after the last, from 0.
    fn carets(&self, text: &str, size: f64) -> Vec<(f32, GlyphId)> {
        let scaled = self.font.as_scaled(self.scale(size));
        let mut caret = 0.0;
        let mut prev: Option<GlyphId> = None;
        let mut out = Vec::new();
        for c in text.chars() {
            let id = self.font.glyph_id(c);
            if let Some(p) = prev {
                caret += scaled.kern(p, id);
            }
            out.push((caret, id));
            caret += scaled.h_advance(id);
            prev = Some(id);
        }
        out.push((caret, GlyphId(0)));
        out
    }

    fn width(&self, text: &str, size: f64) -> i32 {
        self.carets(text, size).last().map_or(0, |(w, _)| w.ceil() as i32)
    }

    /// The height a line of text takes, with its leading.
    fn line_height(&self, size: f64) -> i32 {
        (size * self.u * 0.9).round() as i32
    }

    /// The largest size up to `size` (down to 60 % of it) at which `text` fits in `width` pixels.
    fn fitting(&self, text: &str, size: f64, width: i32) -> f64 {
        let natural = self.width(text, size);
        if natural <= width || natural == 0 {
            return size;
        }
        (size * f64::from(width) / f64::from(natural)).max(size * 0.6)
    }

    /// `text` with its line's middle at `y`; `h` says which end (or the middle) is at `x`.
    fn text(&self, text: &str, (x, y): (i32, i32), size: f64, color: &'a RGBColor, h: HPos) -> Drawn {
        self.write(&clean(text), (x, y), size, color, h, false)
    }

    /// `text` read from bottom to top, starting at (`x`, `y`), its line's middle on `x`.
    fn text_up(&self, text: &str, (x, y): (i32, i32), size: f64, color: &'a RGBColor) -> Drawn {
        self.write(&clean(text), (x, y), size, color, HPos::Left, true)
    }

    fn write(&self, text: &str, (x, y): (i32, i32), size: f64, color: &'a RGBColor, h: HPos, up: bool) -> Drawn {
        let px = size * self.u;
        if self.vector {
            // SVG puts the baseline 0.76 em under the top; an em is 1 / 1.448 of the size once
            // `font::svg_sizes` has set it right: the baseline lands where the raster puts it.
            let below = (0.285 * px).round() as i32;
            let style = TextStyle::from((FontFamily::Name(FAMILY), px))
                .color(color)
                .pos(Pos::new(h, VPos::Top));
            let (style, at) = if up {
                (style.transform(FontTransform::Rotate270), (x - below, y))
            } else {
                (style, (x, y - below))
            };
            return self.area.draw_text(text, &style, at).map_err(failed);
        }
        let carets = self.carets(text, size);
        let width = carets.last().map_or(0.0, |(w, _)| *w);
        let start = match h {
            HPos::Left => 0.0,
            HPos::Center => -width / 2.0,
            HPos::Right => -width,
        };
        // The baseline a quarter of the size under the line's middle: the middle of lower-case
        // Latin and of CJK glyphs.
        let baseline = (0.24 * px) as f32;
        let mut pixels: Vec<((i32, i32), f32)> = Vec::new();
        for (caret, id) in &carets[..carets.len() - 1] {
            let glyph = id.with_scale_and_position(self.scale(size), point(start + caret, baseline));
            let Some(outline) = self.font.outline_glyph(glyph) else {
                continue;
            };
            let bounds = outline.px_bounds();
            outline.draw(|gx, gy, coverage| {
                let (tx, ty) = (bounds.min.x as i32 + gx as i32, bounds.min.y as i32 + gy as i32);
                let at = if up { (x + ty, y - tx) } else { (x + tx, y + ty) };
                pixels.push((at, coverage));
            });
        }
        for ((px, py), coverage) in pixels {
            if coverage > 0.0 && px >= 0 && py >= 0 && px < self.w && py < self.h {
                self.area
                    .draw_pixel((px, py), &color.mix(f64::from(coverage.min(1.0))))
                    .map_err(failed)?;
            }
        }
        Ok(())
    }

    fn line(&self, points: Vec<(i32, i32)>, color: RGBColor, width: f64) -> Drawn {
        let style = color.stroke_width((width * self.u).round().max(1.0) as u32);
        self.area.draw(&PathElement::new(points, style)).map_err(failed)
    }

    fn dashed(&self, points: Vec<(i32, i32)>, color: RGBColor, width: f64) -> Drawn {
        let style = color.stroke_width((width * self.u).round().max(1.0) as u32);
        let (dash, gap) = (self.px(6.0).max(2), self.px(4.0).max(2));
        self.area
            .draw(&DashedPathElement::new(points, dash, gap, style))
            .map_err(failed)
    }

    fn polygon(&self, points: Vec<(i32, i32)>, color: RGBAColor) -> Drawn {
        self.area.draw(&Polygon::new(points, color.filled())).map_err(failed)
    }

    fn rect(&self, (x0, y0): (i32, i32), (x1, y1): (i32, i32), style: ShapeStyle) -> Drawn {
        self.area
            .draw(&Rectangle::new([(x0, y0), (x1, y1)], style))
            .map_err(failed)
    }

    fn circle(&self, at: (i32, i32), radius: i32, style: ShapeStyle) -> Drawn {
        self.area.draw(&Circle::new(at, radius.max(1), style)).map_err(failed)
    }

    /// A filled marker, or an outlined one (a marginal label's).
    fn marker(&self, at: (i32, i32), color: RGBColor, square: bool, hollow: bool) -> Drawn {
        let r = self.px(4.5).max(2);
        let style = if hollow {
            color.stroke_width(self.px(1.5).max(1) as u32)
        } else {
            color.filled()
        };
        if square {
            self.rect((at.0 - r, at.1 - r), (at.0 + r, at.1 + r), style)
        } else {
            self.circle(at, r, style)
        }
    }

    fn margin(&self) -> i32 {
        self.px(18.0)
    }
}

/// The title and subtitle, centred; returns where the figure below them may start.
fn header<DB: DrawingBackend>(pen: &Pen<DB>, titles: &Titles) -> Result<i32, FigureError> {
    let room = pen.w - 2 * pen.margin();
    let mut y = pen.margin();
    for (text, size, color) in [(&titles.title, TITLE, &INK), (&titles.subtitle, SUBTITLE, &MUTED)] {
        if text.is_empty() {
            continue;
        }
        let size = pen.fitting(&clean(text), size, room);
        let line = pen.line_height(size);
        pen.text(text, (pen.w / 2, y + line / 2), size, color, HPos::Center)?;
        y += line + pen.px(4.0);
    }
    Ok(y + pen.px(6.0))
}

/// What a legend entry shows before its text.
#[derive(Clone, Copy)]
enum Swatch {
    /// A line with a marker on it: a series.
    Series(RGBColor, bool),
    /// A hollow marker: a marginal label.
    Hollow(RGBColor, bool),
    Block(RGBColor),
    Tick(RGBColor),
    ErrorBar,
    Dashed(RGBColor),
    /// A shaded band: a letter target.
    Band(RGBColor),
}

/// The legend's name of a letter target's band.
const BAND_NAME: &str = "letter target: its band (H the top 40%, L the bottom 40%)";

/// A strip `half` pixels either side of the segment from `a` to `b` (a band along a radar's axis).
fn strip(a: (i32, i32), b: (i32, i32), half: i32) -> Vec<(i32, i32)> {
    let (dx, dy) = (f64::from(b.0 - a.0), f64::from(b.1 - a.1));
    let len = dx.hypot(dy).max(1.0);
    let (nx, ny) = (
        (-dy / len * f64::from(half)).round() as i32,
        (dx / len * f64::from(half)).round() as i32,
    );
    vec![
        (a.0 + nx, a.1 + ny),
        (b.0 + nx, b.1 + ny),
        (b.0 - nx, b.1 - ny),
        (a.0 - nx, a.1 - ny),
    ]
}

/// A measured value as the figures write it: always two decimals, so values compare at a glance.
fn value(v: f64) -> String {
    format!("{v:.2}")
}

/// A row of legend entries centred on `y`.
fn legend<DB: DrawingBackend>(pen: &Pen<DB>, entries: &[(Swatch, String)], y: i32) -> Drawn {
    let swatch = pen.px(22.0);
    let gap = pen.px(8.0);
    let space = pen.px(22.0);
    let total: i32 = entries
        .iter()
        .map(|(_, t)| swatch + gap + pen.width(&clean(t), SMALL))
        .sum::<i32>()
        + space * (entries.len() as i32 - 1).max(0);
    let mut x = (pen.w - total) / 2;
    for (kind, text) in entries {
        let mid = (x + swatch / 2, y);
        match *kind {
            Swatch::Series(color, square) => {
                pen.line(vec![(x, y), (x + swatch, y)], color, 2.0)?;
                pen.marker(mid, color, square, false)?;
            }
            Swatch::Hollow(color, square) => pen.marker(mid, color, square, true)?,
            Swatch::Block(color) => {
                let r = pen.px(6.0);
                pen.rect((mid.0 - r, y - r), (mid.0 + r, y + r), color.filled())?;
            }
            Swatch::Tick(color) => pen.line(vec![(mid.0, y - pen.px(8.0)), (mid.0, y + pen.px(8.0))], color, 3.0)?,
            Swatch::ErrorBar => error_bar(pen, (x + pen.px(3.0), x + swatch - pen.px(3.0)), y, pen.px(10.0))?,
            Swatch::Dashed(color) => pen.dashed(vec![(x, y), (x + swatch, y)], color, 1.5)?,
            Swatch::Band(color) => {
                let r = pen.px(6.0);
                pen.rect((x, y - r), (x + swatch, y + r), color.mix(0.3).filled())?;
            }
        }
        x += swatch + gap;
        pen.text(text, (x, y), SMALL, &INK, HPos::Left)?;
        x += pen.width(&clean(text), SMALL) + space;
    }
    Ok(())
}

/// A horizontal error bar from `x0` to `x1` at `y`, with caps `cap` pixels high.
fn error_bar<DB: DrawingBackend>(pen: &Pen<DB>, (x0, x1): (i32, i32), y: i32, cap: i32) -> Drawn {
    pen.line(vec![(x0, y), (x1, y)], INK, 1.5)?;
    for x in [x0, x1] {
        pen.line(vec![(x, y - cap / 2), (x, y + cap / 2)], INK, 1.5)?;
    }
    Ok(())
}

/// A dimension's name on one line, with its Chinese name after it.
fn one_line(d: &DimensionName) -> String {
    match &d.zh {
        Some(zh) => format!("{}  {}", d.name, zh),
        None => d.name.clone(),
    }
}

fn radar<DB: DrawingBackend>(pen: &Pen<DB>, r: &Radar) -> Drawn {
    let top = header(pen, &r.titles)?;
    let legend_y = pen.h - pen.margin() - pen.px(6.0);
    let bottom = legend_y - pen.px(18.0);
    let (min, max) = r.range;
    let norm = |v: f64| ((v - min) / (max - min)).clamp(0.0, 1.0);

    // Axis names take one line per name (two with a Chinese name): the radius is what they leave.
    let line = pen.line_height(LABEL_TEXT);
    let lines: Vec<Vec<String>> = r
        .axes
        .iter()
        .map(|d| {
            std::iter::once(clean(&d.name))
                .chain(d.zh.as_deref().map(clean))
                .collect()
        })
        .collect();
    let widest = lines
        .iter()
        .flatten()
        .map(|t| pen.width(t, LABEL_TEXT))
        .max()
        .unwrap_or(0);
    let tallest = lines.iter().map(Vec::len).max().unwrap_or(1) as i32 * line;
    let pad = pen.px(10.0);
    let radius = ((pen.w / 2 - pen.margin() - widest - pad).min((bottom - top) / 2 - tallest - pad)).max(pen.px(30.0));
    let (cx, cy) = (pen.w / 2, (top + bottom) / 2);

    let n = r.axes.len().max(3);
    let angle = |k: usize| std::f64::consts::FRAC_PI_2 - std::f64::consts::TAU * k as f64 / n as f64;
    let point = |k: usize, v: f64| {
        let a = angle(k);
        (
            cx + (f64::from(radius) * v * a.cos()).round() as i32,
            cy - (f64::from(radius) * v * a.sin()).round() as i32,
        )
    };

    // Rings at round values of the scale, each named on the first axis.
    let mut rings: Vec<f64> = ticks(min, max, 4).into_iter().filter(|v| *v > min).collect();
    if rings.last().is_none_or(|v| (v - max).abs() > 1e-9) {
        rings.push(max);
    }
    for v in &rings {
        let ring: Vec<(i32, i32)> = (0..=n).map(|k| point(k % n, norm(*v))).collect();
        pen.line(ring, GRID, 1.0)?;
    }
    for k in 0..r.axes.len() {
        pen.line(vec![(cx, cy), point(k, 1.0)], GRID, 1.0)?;
    }
    for v in &rings {
        let (x, y) = point(0, norm(*v));
        pen.text(&tick(*v), (x + pen.px(4.0), y + pen.px(7.0)), SMALL, &MUTED, HPos::Left)?;
    }

    // The labels under the measured profile; a dimension without a value is left out of the outline.
    let series = |values: Vec<Option<f64>>, color: RGBColor, fill: f64, width: f64| -> Drawn {
        let points: Vec<(i32, i32)> = values
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.map(|v| point(k, norm(v))))
            .collect();
        if points.len() >= 3 {
            pen.polygon(points.clone(), color.mix(fill))?;
        }
        if points.len() >= 2 {
            let mut closed = points.clone();
            closed.push(points[0]);
            pen.line(closed, color, width)?;
        }
        Ok(())
    };
    // A letter target is a band along its axis, not a point of the labels' outline.
    for (k, l) in r.labels.iter().enumerate() {
        if let Some(LabelMark { band: Some((lo, hi)), .. }) = l {
            pen.polygon(strip(point(k, norm(*lo)), point(k, norm(*hi)), pen.px(5.0)), LABEL.mix(0.35))?;
        }
    }
    let points = r.labels.iter().map(|l| l.filter(|l| l.band.is_none()).map(|l| l.value));
    series(points.collect(), LABEL, 0.08, 2.0)?;
    series(r.measured.clone(), MEASURED, 0.18, 2.5)?;
    for (k, l) in r.labels.iter().enumerate() {
        if let Some(l) = l.filter(|l| l.band.is_none()) {
            let color = if l.marginal { MARGINAL } else { LABEL };
            pen.marker(point(k, norm(l.value)), color, true, l.marginal)?;
        }
    }
    for (k, v) in r.measured.iter().enumerate() {
        if let Some(v) = v {
            pen.marker(point(k, norm(*v)), MEASURED, false, false)?;
        }
    }

    // Axis names outside the outer ring, on the side the axis points to.
    for (k, names) in lines.iter().enumerate() {
        let a = angle(k);
        let (dx, dy) = (a.cos(), -a.sin());
        let (x, y) = point(k, 1.0);
        let (x, y) = (x + (dx * f64::from(pad)) as i32, y + (dy * f64::from(pad)) as i32);
        let h = if dx > 0.3 {
            HPos::Left
        } else if dx < -0.3 {
            HPos::Right
        } else {
            HPos::Center
        };
        let height = names.len() as i32 * line;
        let first = if dy < -0.3 {
            y - height + line / 2
        } else if dy > 0.3 {
            y + line / 2
        } else {
            y - height / 2 + line / 2
        };
        for (i, name) in names.iter().enumerate() {
            let color = if i == 0 { &INK } else { &MUTED };
            pen.text(name, (x, first + i as i32 * line), LABEL_TEXT, color, h)?;
        }
    }

    let mut entries = vec![
        (Swatch::Series(MEASURED, false), r.measured_name.clone()),
        (Swatch::Series(LABEL, true), r.labels_name.clone()),
    ];
    if r.labels.iter().flatten().any(|l| l.marginal) {
        entries.push((Swatch::Hollow(MARGINAL, true), "marginal label (X)".into()));
    }
    if r.labels.iter().flatten().any(|l| l.band.is_some()) {
        entries.push((Swatch::Band(LABEL), BAND_NAME.into()));
    }
    legend(pen, &entries, legend_y)
}

fn bars<DB: DrawingBackend>(pen: &Pen<DB>, b: &Bars) -> Drawn {
    let top = header(pen, &b.titles)?;
    let legend_y = pen.h - pen.margin() - pen.px(6.0);
    let axis_y = legend_y - pen.px(44.0);
    let (min, max) = b.range;
    let names: Vec<String> = b.rows.iter().map(|r| clean(&one_line(&r.dimension))).collect();
    let room = pen.w * 2 / 5;
    let widest = names.iter().map(|n| pen.width(n, LABEL_TEXT)).max().unwrap_or(0);
    let name_size = if widest > room {
        (LABEL_TEXT * f64::from(room) / f64::from(widest)).max(LABEL_TEXT * 0.6)
    } else {
        LABEL_TEXT
    };
    // Every value in one format (two decimals, the spread too), in the measured colour under the
    // series' name: a column of its own, well clear of a label marked at the top of the range.
    let values: Vec<String> = b
        .rows
        .iter()
        .map(|r| match (r.value, r.sd) {
            (Some(v), Some(sd)) => format!("{}±{}", value(v), value(sd)),
            (Some(v), None) => value(v),
            (None, _) => "not measured".into(),
        })
        .collect();
    let column = values
        .iter()
        .map(|v| pen.width(v, SMALL))
        .chain([pen.width(&clean(&b.measured_name), SMALL)])
        .max()
        .unwrap_or(0);
    let value_room = column + pen.px(32.0);
    let left = pen.margin() + widest.min(room) + pen.px(12.0);
    let right = pen.w - pen.margin() - value_room;
    let x = |v: f64| left + ((v.clamp(min, max) - min) / (max - min) * f64::from(right - left)).round() as i32;

    let n = b.rows.len().max(1) as i32;
    let row = ((axis_y - top) / n).max(1);
    let thickness = (row * 11 / 20).min(pen.px(34.0)).max(2);
    for t in scale_ticks(min, max) {
        pen.line(vec![(x(t), top), (x(t), axis_y)], GRID, 1.0)?;
        pen.text(&tick(t), (x(t), axis_y + pen.px(12.0)), SMALL, &MUTED, HPos::Center)?;
    }
    pen.line(vec![(left, axis_y), (right, axis_y)], MUTED, 1.0)?;
    let value_x = pen.w - pen.margin();
    pen.text(&b.measured_name, (value_x, top - pen.px(6.0)), SMALL, &MUTED, HPos::Right)?;

    for (i, r) in b.rows.iter().enumerate() {
        let y = top + i as i32 * row + row / 2;
        pen.text(&names[i], (left - pen.px(12.0), y), name_size, &INK, HPos::Right)?;
        if let Some(LabelMark { band: Some((lo, hi)), .. }) = r.label {
            let reach = thickness * 7 / 10;
            pen.rect((x(lo), y - reach), (x(hi), y + reach), LABEL.mix(0.25).filled())?;
        }
        if let Some(v) = r.value {
            pen.rect(
                (left, y - thickness / 2),
                (x(v), y + thickness / 2),
                MEASURED.mix(0.85).filled(),
            )?;
            if let Some(sd) = r.sd {
                error_bar(pen, (x(v - sd), x(v + sd)), y, thickness / 2)?;
            }
        }
        if let Some(l) = r.label.filter(|l| l.band.is_none()) {
            let reach = thickness * 7 / 10;
            let (lx, color) = (x(l.value), if l.marginal { MARGINAL } else { LABEL });
            if l.marginal {
                pen.dashed(vec![(lx, y - reach), (lx, y + reach)], color, 3.0)?;
            } else {
                pen.line(vec![(lx, y - reach), (lx, y + reach)], color, 3.0)?;
            }
        }
        let color = if r.value.is_some() { &MEASURED } else { &MUTED };
        pen.text(&values[i], (value_x, y), SMALL, color, HPos::Right)?;
    }

    let mut entries = vec![(Swatch::Block(MEASURED), b.measured_name.clone())];
    if b.rows.iter().any(|r| r.sd.is_some()) {
        entries.push((Swatch::ErrorBar, b.spread_name.clone()));
    }
    let labels = b.rows.iter().filter_map(|r| r.label);
    if labels.clone().any(|l| l.band.is_none()) || labels.clone().next().is_none() {
        entries.push((Swatch::Tick(LABEL), b.labels_name.clone()));
    }
    if labels.clone().any(|l| l.marginal) {
        entries.push((Swatch::Dashed(MARGINAL), "marginal label (X)".into()));
    }
    if labels.clone().any(|l| l.band.is_some()) {
        entries.push((Swatch::Band(LABEL), BAND_NAME.into()));
    }
    legend(pen, &entries, legend_y)
}

fn heatmap<DB: DrawingBackend>(pen: &Pen<DB>, h: &Heatmap) -> Drawn {
    let top = header(pen, &h.titles)?;
    let bar_y = pen.h - pen.margin() - pen.px(30.0);
    let bottom = bar_y - pen.px(34.0);
    let characters: Vec<String> = h.characters.iter().map(|c| clean(c)).collect();
    let room = pen.w / 3;
    let widest = characters.iter().map(|c| pen.width(c, LABEL_TEXT)).max().unwrap_or(0);
    let row_size = if widest > room {
        (LABEL_TEXT * f64::from(room) / f64::from(widest)).max(LABEL_TEXT * 0.6)
    } else {
        LABEL_TEXT
    };
    let left = pen.margin() + widest.min(room) + pen.px(10.0);
    let right = pen.w - pen.margin();
    let columns = h.dimensions.len().max(1) as i32;
    let column = ((right - left) / columns).max(1);

    // Column names across when each fits its column, else read upwards.
    let names: Vec<(String, Option<String>)> = h
        .dimensions
        .iter()
        .map(|d| (clean(&d.name), d.zh.as_deref().map(clean)))
        .collect();
    let widest_name = names
        .iter()
        .flat_map(|(n, zh)| std::iter::once(n).chain(zh))
        .map(|t| pen.width(t, SMALL))
        .max()
        .unwrap_or(0);
    let across = widest_name <= column - pen.px(6.0);
    let line = pen.line_height(SMALL);
    let two = names.iter().any(|(_, zh)| zh.is_some());
    let header_height = if across {
        line * if two { 2 } else { 1 } + pen.px(6.0)
    } else {
        let up: i32 = names
            .iter()
            .map(|(n, zh)| pen.width(&zh.as_ref().map_or(n.clone(), |z| format!("{n} {z}")), SMALL))
            .max()
            .unwrap_or(0);
        up.min((bottom - top) * 2 / 5) + pen.px(8.0)
    };
    let rows = h.characters.len().max(1) as i32;
    let row = ((bottom - top - header_height) / rows).clamp(1, pen.px(110.0));
    // Few characters: the grid sits in the middle of the room it has.
    let grid_top = top + header_height + (bottom - top - header_height - rows * row) / 2;
    for (j, (name, zh)) in names.iter().enumerate() {
        let cx = left + j as i32 * column + column / 2;
        if across {
            let mut y = grid_top - pen.px(6.0) - line / 2;
            if let Some(zh) = zh {
                pen.text(zh, (cx, y), SMALL, &MUTED, HPos::Center)?;
                y -= line;
            }
            pen.text(name, (cx, y), SMALL, &INK, HPos::Center)?;
        } else {
            let text = zh.as_ref().map_or(name.clone(), |z| format!("{name} {z}"));
            pen.text_up(&text, (cx, grid_top - pen.px(6.0)), SMALL, &INK)?;
        }
    }

    let value_size = LABEL_TEXT
        .min(f64::from(column) / pen.u / 3.2)
        .min(f64::from(row) / pen.u / 1.6);
    for (i, name) in characters.iter().enumerate() {
        let y0 = grid_top + i as i32 * row;
        pen.text(name, (left - pen.px(10.0), y0 + row / 2), row_size, &INK, HPos::Right)?;
        for j in 0..h.dimensions.len() {
            let x0 = left + j as i32 * column;
            let cell = h.cells.get(i).and_then(|r| r.get(j)).copied().flatten();
            let (fill, text, ink) = match cell {
                Some(c) => {
                    let ink = if c.error > RAMP_MAX * 0.6 { &WHITE_INK } else { &INK };
                    let mark = if c.marginal { "*" } else { "" };
                    (ramp(c.error), format!("{:.2}{mark}", c.error), ink)
                }
                None => (MISSING, "n/a".to_string(), &MUTED),
            };
            pen.rect((x0, y0), (x0 + column, y0 + row), fill.filled())?;
            pen.text(&text, (x0 + column / 2, y0 + row / 2), value_size, ink, HPos::Center)?;
        }
    }
    // Thin white lines between the cells.
    for j in 0..=columns {
        let x = left + j * column;
        pen.line(vec![(x, grid_top), (x, grid_top + rows * row)], WHITE, 1.0)?;
    }
    for i in 0..=rows {
        let y = grid_top + i * row;
        pen.line(vec![(left, y), (left + columns * column, y)], WHITE, 1.0)?;
    }

    // The colour bar: the ramp from 0 to where it stops darkening.
    let caption = "|measured − label| ÷ range";
    let bar_w = (pen.w / 3).max(pen.px(120.0));
    let caption_w = pen.width(caption, SMALL);
    let marginal = h.cells.iter().flatten().flatten().any(|c| c.marginal);
    let note = if marginal {
        "* marginal label (X)   n/a: not measured or no label"
    } else {
        "n/a: not measured or no label"
    };
    let x0 = (pen.w - bar_w - caption_w - pen.px(12.0)) / 2 + caption_w + pen.px(12.0);
    pen.text(
        caption,
        (x0 - pen.px(12.0), bar_y - pen.px(6.0)),
        SMALL,
        &INK,
        HPos::Right,
    )?;
    let steps = 48;
    for s in 0..steps {
        let (a, b) = (x0 + bar_w * s / steps, x0 + bar_w * (s + 1) / steps);
        let color = ramp(RAMP_MAX * (f64::from(s) + 0.5) / f64::from(steps));
        pen.rect((a, bar_y - pen.px(12.0)), (b, bar_y), color.filled())?;
    }
    for t in ticks(0.0, RAMP_MAX, 5) {
        let x = x0 + (t / RAMP_MAX * f64::from(bar_w)).round() as i32;
        let text = if (t - RAMP_MAX).abs() < 1e-9 {
            format!("≥{}", tick(t))
        } else {
            tick(t)
        };
        pen.text(&text, (x, bar_y + pen.px(9.0)), SMALL, &MUTED, HPos::Center)?;
    }
    pen.text(
        note,
        (pen.w / 2, bar_y + pen.px(12.0) + line),
        SMALL,
        &MUTED,
        HPos::Center,
    )
}

fn agreement<DB: DrawingBackend>(pen: &Pen<DB>, a: &Agreement) -> Drawn {
    let top = header(pen, &a.titles)?;
    let legend_y = pen.h - pen.margin() - pen.px(6.0);
    let several = a.annotators.len() > 1;
    let bottom = if several {
        legend_y - pen.px(22.0)
    } else {
        legend_y + pen.px(6.0)
    } - pen.px(44.0);
    let (min, max) = a.range;
    let pad = (max - min) * 0.06;
    let (lo, hi) = (min - pad, max + pad);
    // A square plot, centred, with room on the left for the tick labels and the axis name.
    let side = (bottom - top)
        .min(pen.w - 2 * pen.margin() - pen.px(70.0))
        .max(pen.px(60.0));
    let left = (pen.w - side) / 2 + pen.px(24.0);
    let (right, plot_top) = (left + side, bottom - side);
    let x = |v: f64| left + ((v - lo) / (hi - lo) * f64::from(side)).round() as i32;
    let y = |v: f64| bottom - ((v - lo) / (hi - lo) * f64::from(side)).round() as i32;

    for t in scale_ticks(min, max) {
        pen.line(vec![(x(t), plot_top), (x(t), bottom)], GRID, 1.0)?;
        pen.line(vec![(left, y(t)), (right, y(t))], GRID, 1.0)?;
        pen.text(&tick(t), (x(t), bottom + pen.px(12.0)), SMALL, &MUTED, HPos::Center)?;
        pen.text(&tick(t), (left - pen.px(8.0), y(t)), SMALL, &MUTED, HPos::Right)?;
    }
    pen.line(
        vec![
            (left, plot_top),
            (left, bottom),
            (right, bottom),
            (right, plot_top),
            (left, plot_top),
        ],
        MUTED,
        1.0,
    )?;
    pen.dashed(vec![(x(min), y(min)), (x(max), y(max))], MUTED, 1.0)?;

    for p in &a.points {
        let color = SERIES[p.annotator % SERIES.len()];
        // Area grows with the number of cases at the spot (up to 16); the count is written beside it.
        let r = pen.px(5.0 * (p.count.min(16) as f64).sqrt());
        let at = (x(p.human), y(p.judge));
        pen.circle(at, r, color.mix(0.55).filled())?;
        pen.circle(at, r, color.stroke_width(1))?;
        if p.count > 1 {
            pen.text(
                &p.count.to_string(),
                (at.0 + r + pen.px(3.0), at.1 - r / 2),
                SMALL,
                &INK,
                HPos::Left,
            )?;
        }
    }
    pen.text(
        &a.human_axis,
        ((left + right) / 2, bottom + pen.px(34.0)),
        LABEL_TEXT,
        &INK,
        HPos::Center,
    )?;
    let judge_width = pen.width(&clean(&a.judge_axis), LABEL_TEXT);
    pen.text_up(
        &a.judge_axis,
        (left - pen.px(46.0), (plot_top + bottom) / 2 + judge_width / 2),
        LABEL_TEXT,
        &INK,
    )?;
    if several {
        let entries: Vec<(Swatch, String)> = a
            .annotators
            .iter()
            .enumerate()
            .map(|(i, name)| (Swatch::Block(SERIES[i % SERIES.len()]), name.clone()))
            .collect();
        legend(pen, &entries, legend_y)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside_the_range() {
        assert_eq!(ticks(1.0, 5.0, 6), vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(ticks(0.0, 100.0, 6), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(0.0, 1.0, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(ticks(0.5, 9.5, 4), vec![2.5, 5.0, 7.5]);
        assert_eq!(ticks(3.0, 3.0, 4), vec![3.0]);
    }

    #[test]
    fn short_whole_ranges_tick_every_point_and_labels_keep_their_decimals() {
        assert_eq!(scale_ticks(1.0, 4.0), vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(scale_ticks(0.0, 100.0), ticks(0.0, 100.0, 6));
        assert_eq!(
            [tick(1.5), tick(2.0), tick(0.25), tick(40.0)],
            ["1.5", "2", "0.25", "40"]
        );
    }

    #[test]
    fn numbers_and_the_ramp() {
        assert_eq!(value(1.0), "1.00", "a whole value as its neighbours, not `1` beside `1.55`");
        assert_eq!(value(3.256), "3.26");
        assert_eq!(value(56.25), "56.25");
        assert_eq!(ramp(0.0), RGBColor(0xff, 0xff, 0xcc));
        assert_eq!(ramp(RAMP_MAX), RGBColor(0xbd, 0x00, 0x26));
        assert_eq!(ramp(0.9), ramp(RAMP_MAX));
        assert_eq!(ramp(RAMP_MAX / 2.0), RGBColor(0xfd, 0x8d, 0x3c));
    }

    #[test]
    fn text_loses_control_characters_and_line_breaks() {
        assert_eq!(clean("a\u{1b}[31mb\nc\u{7}"), "ab c");
    }
}
