//! Drawing one table's charts onto any plotters backend: busbw vs size (linear y) and time vs size
//! (log y), one colour and marker per path, a shaded band per path, line rates dashed, the legend in a
//! panel of its own beside the plot so it never covers data.
//!
//! One concern, drawing a table's charts; its tests are a sixth of the file.

use plotters::chart::MeshStyle;
use std::ops::Range;

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis;
use super::data::{Point, Series, Table};

/// Chart width in pixels (PNG) or user units (SVG).
pub const WIDTH: u32 = 1280;
/// Chart height, as [`WIDTH`].
pub const HEIGHT: u32 = 720;

/// A line rate is drawn only when it is within this factor of the largest busbw; above it the data
/// would be squashed against the x axis, so the legend gives the rate instead.
const RATE_ON_SCALE: f64 = 4.0;

/// Height of the title band (title and note).
const TITLE_H: u32 = 72;
/// Most size labels on the x axis; about 70 px each at [`WIDTH`], wide enough for `256KiB`.
const MAX_SIZE_LABELS: usize = 12;

/// Okabe and Ito's colour-blind-safe palette, without its yellow (too pale on white).
const COLOURS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
];

/// Which chart of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chart {
    /// Bus bandwidth (GB/s) vs size, with line rates.
    BusBw,
    /// Time (us) vs size, log-log.
    Latency,
}

impl Chart {
    /// Both charts, in the order files are written.
    pub const ALL: [Chart; 2] = [Chart::BusBw, Chart::Latency];

    /// The file-name suffix: `busbw`, `latency`.
    pub fn name(self) -> &'static str {
        match self {
            Chart::BusBw => "busbw",
            Chart::Latency => "latency",
        }
    }
}

/// Drawing failures carry the backend's message; the caller adds which file.
type Drawn = Result<(), String>;

fn err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

/// The colour of the `i`-th path.
fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// The index whose colour and marker series `i` of `table` takes: its own for a measured path; for a
/// prediction, that of the measured series of the same path, so a prediction reads as its path's.
fn style_index(table: &Table, i: usize) -> usize {
    let s = &table.series[i];
    if s.predicted.is_none() {
        return i;
    }
    table
        .series
        .iter()
        .position(|m| m.predicted.is_none() && m.path == s.path)
        .unwrap_or(i)
}

/// Dash and gap lengths of a predicted series: long dashes for the ring, dots for the latency algorithm.
fn dashes(series: &Series) -> (u32, u32) {
    match series.predicted.as_ref().map(|p| p.algo.as_str()) {
        Some("ring") | None => (12, 6),
        Some(_) => (3, 5),
    }
}

/// Draws a predicted series: a dashed line in its path's colour, no markers and no band.
fn predicted_line<DB: DrawingBackend, X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    table: &Table,
    i: usize,
    pts: &[(f64, f64)],
) -> Drawn
where
    DB::ErrorType: 'static,
{
    let (dash, gap) = dashes(&table.series[i]);
    let style = colour(style_index(table, i)).stroke_width(2);
    chart
        .draw_series(DashedLineSeries::new(pts.iter().copied(), dash, gap, style))
        .map_err(err)?;
    Ok(())
}

/// Draws series `i` of `table` through `pts`: measured with markers, predicted dashed.
fn series_line<DB: DrawingBackend, X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    table: &Table,
    i: usize,
    pts: &[(f64, f64)],
) -> Drawn
where
    DB::ErrorType: 'static,
{
    if table.series[i].predicted.is_some() {
        predicted_line(chart, table, i, pts)
    } else {
        line_with_markers(chart, i, pts)
    }
}

/// Draws `chart` of `table` on `root` (already sized [`WIDTH`] x [`HEIGHT`]), with `warning` (an incomplete run,
/// clipped bands; may be empty) in red under the note.
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: Chart,
    table: &Table,
    note: &str,
    warning: &str,
) -> Drawn
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let (top, rest) = root.split_vertically(TITLE_H);
    draw_title(&top, &title(chart, table), note, warning)?;
    let legend = legend_entries(chart, table, &busbw_scale(table));
    let legend_w = legend_width(&legend);
    let (plot, side) = rest.split_horizontally(WIDTH.saturating_sub(legend_w));
    match chart {
        Chart::BusBw => draw_busbw(&plot, table)?,
        Chart::Latency => draw_latency(&plot, table)?,
    }
    draw_legend(&side, &legend)
}

/// `all_reduce  float  sum  4 ranks: bus bandwidth`.
pub fn title(chart: Chart, table: &Table) -> String {
    let what = match chart {
        Chart::BusBw => "bus bandwidth",
        Chart::Latency => "time",
    };
    let op = table.op.as_deref().map(|o| format!(" {o}")).unwrap_or_default();
    let ranks = if table.nranks == 1 { "rank" } else { "ranks" };
    format!(
        "{} {}{op}, {} {ranks}: {what} vs message size",
        table.collective, table.dtype, table.nranks
    )
}

fn draw_title<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, note: &str, warning: &str) -> Drawn {
    let centre = (WIDTH / 2) as i32;
    let big = ("sans-serif", 26)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    area.draw_text(title, &big, (centre, 12)).map_err(err)?;
    let small = |colour: RGBColor| {
        ("sans-serif", 15)
            .into_font()
            .color(&colour)
            .pos(Pos::new(HPos::Center, VPos::Top))
    };
    // The note moves up a little to make room for a warning line under it.
    let note_y = if warning.is_empty() { 46 } else { 40 };
    if !note.is_empty() {
        area.draw_text(note, &small(RGBColor(90, 90, 90)), (centre, note_y))
            .map_err(err)?;
    }
    if !warning.is_empty() {
        area.draw_text(warning, &small(RGBColor(190, 0, 0)), (centre, 56))
            .map_err(err)?;
    }
    Ok(())
}

/// The x (log2 size) extent of a table.
fn size_extent(table: &Table) -> (f64, f64) {
    let sizes = table.series.iter().flat_map(|s| s.points.iter().map(|p| p.size));
    let (min, max) = sizes.fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
    axis::size_range(min.min(max), max)
}

fn log2(size: u64) -> f64 {
    (size as f64).log2()
}

/// One dashed line-rate mark: the paths that share the rate, and whether it fits the axis.
struct RateLine {
    rate: f64,
    /// Indices of the series with this rate.
    members: Vec<usize>,
    drawn: bool,
}

impl RateLine {
    /// A path's own colour, or grey for a rate several paths share (one line, not several on top of
    /// each other).
    fn colour(&self) -> RGBColor {
        match self.members.as_slice() {
            [only] => colour(*only),
            _ => SHARED_RATE,
        }
    }
}

const SHARED_RATE: RGBColor = RGBColor(90, 90, 90);

/// The busbw axis: its top, and the line rates with whether each fits under it.
struct BusBwScale {
    top: f64,
    rates: Vec<RateLine>,
}

fn busbw_scale(table: &Table) -> BusBwScale {
    let points = || table.series.iter().flat_map(|s| s.points.iter());
    let data_max = points().map(|p| p.busbw).fold(0.0, f64::max);
    // Bands widen the axis a little at most: a noisy small point must not flatten the rest.
    let band_max = points().map(|p| p.busbw_hi.min(data_max * 1.3)).fold(0.0, f64::max);
    let mut rates: Vec<RateLine> = Vec::new();
    for (i, s) in table.series.iter().enumerate() {
        let Some(rate) = s.line_rate_gbs else { continue };
        match rates.iter_mut().find(|r| (r.rate - rate).abs() <= 1e-6 * rate) {
            Some(r) => r.members.push(i),
            None => rates.push(RateLine {
                rate,
                members: vec![i],
                drawn: data_max <= 0.0 || rate <= data_max * RATE_ON_SCALE,
            }),
        }
    }
    let rate_max = rates.iter().filter(|r| r.drawn).map(|r| r.rate).fold(0.0, f64::max);
    let top = (data_max * 1.1).max(band_max).max(rate_max * 1.05);
    BusBwScale {
        top: if top > 0.0 && top.is_finite() { top } else { 1.0 },
        rates,
    }
}

/// Decimals for linear-axis labels up to `top`. plotters steps ticks by 1, 2 or 5 x 10^k with at most
/// ten labels, so a step is at least top / 10 and needs no more decimals than that does.
fn decimals(top: f64) -> usize {
    (1 - top.log10().floor() as i64).clamp(0, 6) as usize
}

/// The settings both charts share.
fn common_mesh<DB: DrawingBackend, X: Ranged, Y: Ranged>(mesh: &mut MeshStyle<'_, '_, X, Y, DB>) {
    mesh.label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .bold_line_style(RGBColor(200, 200, 200))
        .light_line_style(RGBColor(236, 236, 236))
        .x_desc("message size (bytes)");
}

fn chart_builder<'a, 'b, DB: DrawingBackend>(area: &'a DrawingArea<DB, Shift>) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(area);
    b.margin_left(10)
        .margin_right(20)
        .margin_top(10)
        .margin_bottom(10)
        .x_label_area_size(56)
        .y_label_area_size(86);
    b
}

/// A linear axis over an exponent with its ticks chosen by [`axis`] and labelled by `label`. plotters'
/// own key-point override cannot be combined with a label formatter for f64, hence this small type.
#[derive(Clone)]
struct Ticked {
    range: Range<f64>,
    bold: Vec<f64>,
    light: Vec<f64>,
    label: fn(f64) -> String,
}

impl Ranged for Ticked {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let frac = if span > 0.0 {
            (value - self.range.start) / span
        } else {
            0.5
        };
        limit.0 + (frac * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

impl ValueFormatter<f64> for Ticked {
    fn format_ext(&self, value: &f64) -> String {
        (self.label)(*value)
    }
}

/// The size axis: log2 of bytes, labelled at whole powers of two.
fn x_axis(table: &Table) -> Ticked {
    let (x0, x1) = size_extent(table);
    Ticked {
        range: x0..x1,
        bold: axis::size_ticks(x0, x1, MAX_SIZE_LABELS),
        light: axis::size_grid(x0, x1),
        label: axis::size_label_at,
    }
}

fn draw_busbw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, table: &Table) -> Drawn
where
    DB::ErrorType: 'static,
{
    let scale = busbw_scale(table);
    let (x0, x1) = size_extent(table);
    let top = scale.top;
    let mut chart = chart_builder(area)
        .build_cartesian_2d(x_axis(table), 0.0..top)
        .map_err(err)?;
    let places = decimals(top);
    let y_fmt = |v: &f64| format!("{v:.places$}");
    let mut mesh = chart.configure_mesh();
    common_mesh(&mut mesh);
    mesh.y_desc("bus bandwidth (GB/s, 1e9 B/s)")
        .y_label_formatter(&y_fmt)
        .y_labels(10)
        .y_max_light_lines(1)
        .draw()
        .map_err(err)?;
    for (i, s) in table.series.iter().enumerate().filter(|(_, s)| s.predicted.is_none()) {
        band(&mut chart, s, colour(i), (0.0, top), |p| (p.busbw_lo, p.busbw_hi))?;
    }
    for r in scale.rates.iter().filter(|r| r.drawn) {
        let style = r.colour().stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new([(x0, r.rate), (x1, r.rate)], 12, 8, style))
            .map_err(err)?;
    }
    for (i, s) in table.series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (log2(p.size), p.busbw)).collect();
        series_line(&mut chart, table, i, &pts)?;
    }
    Ok(())
}

fn draw_latency<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, table: &Table) -> Drawn
where
    DB::ErrorType: 'static,
{
    let points = || table.series.iter().flat_map(|s| s.points.iter());
    // Lower band ends at or below 0 cannot go on a log axis; such a band runs to the axis bottom.
    let min = points()
        .map(|p| if p.time_lo_us > 0.0 { p.time_lo_us } else { p.time_us })
        .fold(f64::INFINITY, f64::min);
    let max = points().map(|p| p.time_hi_us.max(p.time_us)).fold(0.0, f64::max);
    let (y0, y1) = axis::time_range(min, max);
    let (bold, light) = axis::time_ticks(y0, y1);
    let y_axis = Ticked {
        range: y0..y1,
        bold,
        light,
        label: axis::time_label_at,
    };
    let mut chart = chart_builder(area)
        .build_cartesian_2d(x_axis(table), y_axis)
        .map_err(err)?;
    let mut mesh = chart.configure_mesh();
    common_mesh(&mut mesh);
    mesh.y_desc("time (us), log scale").draw().map_err(err)?;
    let log = |us: f64| if us > 0.0 { us.log10().clamp(y0, y1) } else { y0 };
    // The band is cut to the axis by `band` itself.
    let band_log = |us: f64| if us > 0.0 { us.log10() } else { y0 };
    for (i, s) in table.series.iter().enumerate().filter(|(_, s)| s.predicted.is_none()) {
        band(&mut chart, s, colour(i), (y0, y1), |p| {
            (band_log(p.time_lo_us), band_log(p.time_hi_us))
        })?;
    }
    for (i, s) in table.series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (log2(p.size), log(p.time_us))).collect();
        series_line(&mut chart, table, i, &pts)?;
    }
    Ok(())
}

/// How a path's band is filled, on the chart and in the legend alike.
fn band_style(colour: RGBColor) -> ShapeStyle {
    colour.mix(0.18).filled()
}

/// A series' band as one translucent polygon: upper edge left to right, lower edge back, cut to the y axis's
/// range `y` ([`clip_y`]).
fn band<DB: DrawingBackend, X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    series: &Series,
    colour: RGBColor,
    y: (f64, f64),
    bounds: impl Fn(&Point) -> (f64, f64),
) -> Drawn
where
    DB::ErrorType: 'static,
{
    if series.points.len() < 2 {
        return Ok(());
    }
    let upper = series.points.iter().map(|p| (log2(p.size), bounds(p).1));
    let lower = series.points.iter().rev().map(|p| (log2(p.size), bounds(p).0));
    let outline = clip_y(&upper.chain(lower).collect::<Vec<_>>(), y.0, y.1);
    if outline.len() < 3 {
        return Ok(());
    }
    chart
        .draw_series(std::iter::once(Polygon::new(outline, band_style(colour))))
        .map_err(err)?;
    Ok(())
}

/// The polygon `outline` cut to `lo <= y <= hi` along its edges (Sutherland-Hodgman against two lines), so a
/// band whose interval reaches beyond the axis stops at the axis with its edges' slopes kept, rather than
/// being drawn past it or pulled to it vertex by vertex (which bends the band's sides). A bound that is not
/// a number is taken as `lo`; an infinite one as far beyond the axis.
fn clip_y(outline: &[(f64, f64)], lo: f64, hi: f64) -> Vec<(f64, f64)> {
    let far = 1e9 * (hi - lo).abs().max(1.0);
    let poly: Vec<(f64, f64)> = outline
        .iter()
        .map(|&(x, y)| (x, if y.is_nan() { lo } else { y.clamp(lo - far, hi + far) }))
        .collect();
    let cut = |poly: Vec<(f64, f64)>, edge: f64, inside: &dyn Fn(f64) -> bool| {
        let mut out = Vec::with_capacity(poly.len() + 2);
        for (i, &a) in poly.iter().enumerate() {
            let b = poly[(i + 1) % poly.len()];
            if inside(a.1) {
                out.push(a);
            }
            if inside(a.1) != inside(b.1) {
                let t = (edge - a.1) / (b.1 - a.1);
                out.push((a.0 + t * (b.0 - a.0), edge));
            }
        }
        out
    };
    let below_top = cut(poly, hi, &|y| y <= hi);
    cut(below_top, lo, &|y| y >= lo)
}

fn line_with_markers<DB: DrawingBackend, X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    index: usize,
    pts: &[(f64, f64)],
) -> Drawn
where
    DB::ErrorType: 'static,
{
    let c = colour(index);
    // Segment by segment: plotters turns a wide polyline into one mitred polygon, which folds over
    // itself at sharp turns and leaves those segments hairline-thin; lone segments have no joins, and
    // the markers cover the corners.
    chart
        .draw_series(pts.windows(2).map(|w| PathElement::new(w.to_vec(), c.stroke_width(2))))
        .map_err(err)?;
    let (fill, stroke) = (c.filled(), c.stroke_width(2));
    let drawn = match index % 4 {
        0 => chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 4, fill)))
            .map(drop),
        1 => chart
            .draw_series(pts.iter().map(|p| TriangleMarker::new(*p, 6, fill)))
            .map(drop),
        2 => chart
            .draw_series(
                pts.iter()
                    .map(|p| EmptyElement::at(*p) + Rectangle::new([(-4, -4), (4, 4)], fill)),
            )
            .map(drop),
        _ => chart
            .draw_series(pts.iter().map(|p| Cross::new(*p, 5, stroke)))
            .map(drop),
    };
    drawn.map_err(err)
}

/// One line of the legend panel.
enum Entry {
    /// A path: its line, marker and name.
    Path { index: usize, label: String },
    /// A line rate, dashed in its colour.
    Rate { colour: RGBColor, label: String },
    /// A predicted series, dashed in its path's colour with its own dash pattern.
    Predicted {
        colour: RGBColor,
        dash: (u32, u32),
        label: String,
    },
    /// What the shading means, with the colours of the shaded paths (their swatches overlap as the bands
    /// do on the chart, so the legend shows what an overlap looks like).
    Band { label: String, colours: Vec<RGBColor> },
}

impl Entry {
    fn label(&self) -> &str {
        match self {
            Entry::Path { label, .. }
            | Entry::Rate { label, .. }
            | Entry::Predicted { label, .. }
            | Entry::Band { label, .. } => label,
        }
    }
}

fn legend_entries(chart: Chart, table: &Table, scale: &BusBwScale) -> Vec<Entry> {
    let rate_label = |r: &RateLine| {
        let off = if r.drawn { "" } else { " (off scale)" };
        format!("line rate {} GB/s{off}", axis::gbs_label(r.rate))
    };
    let rates: &[RateLine] = match chart {
        Chart::BusBw => &scale.rates,
        Chart::Latency => &[],
    };
    let mut entries = Vec::new();
    for (index, s) in table.series.iter().enumerate() {
        if s.predicted.is_some() {
            entries.push(Entry::Predicted {
                colour: colour(style_index(table, index)),
                dash: dashes(s),
                label: s.label(),
            });
            continue;
        }
        entries.push(Entry::Path {
            index,
            label: s.label(),
        });
        // A path's own rate goes under its name.
        if let Some(r) = rates.iter().find(|r| r.members == [index]) {
            entries.push(Entry::Rate {
                colour: r.colour(),
                label: rate_label(r),
            });
        }
    }
    // Shared rates go after every path, saying whose they are.
    for r in rates.iter().filter(|r| r.members.len() > 1) {
        let measured = table.series.iter().filter(|s| s.predicted.is_none()).count();
        let whose = if r.members.len() == measured {
            "all paths".to_string()
        } else {
            let names: Vec<&str> = r.members.iter().map(|i| table.series[*i].path.as_str()).collect();
            names.join(", ")
        };
        entries.push(Entry::Rate {
            colour: r.colour(),
            label: format!("{}: {whose}", rate_label(r)),
        });
    }
    let repeats = table
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.repeats))
        .max()
        .unwrap_or(1);
    // Files written before intervals were recorded have no band to explain.
    let banded = table
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .any(|p| p.time_hi_us > p.time_lo_us);
    if banded {
        let colours = (0..table.series.len())
            .filter(|&i| table.series[i].predicted.is_none())
            .map(colour)
            .collect();
        entries.push(Entry::Band {
            label: if repeats > 1 {
                format!("band: 95% CI, {repeats} sweeps combined")
            } else {
                "band: 95% CI".to_string()
            },
            colours,
        });
    }
    entries
}

const LEGEND_FONT: u32 = 16;
const LEGEND_LINE: i32 = 28;
const SWATCH_W: i32 = 34;

/// Wide enough for the longest label at about 9 px a character (DejaVu Sans at 16 px), within limits.
fn legend_width(entries: &[Entry]) -> u32 {
    let chars = entries.iter().map(|e| e.label().chars().count()).max().unwrap_or(0) as u32;
    (chars * 9 + SWATCH_W as u32 + 40).clamp(190, 420)
}

fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, entries: &[Entry]) -> Drawn {
    let (w, _) = area.dim_in_pixel();
    let font = ("sans-serif", LEGEND_FONT)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let rows = entries.len() as i32;
    area.draw(&Rectangle::new(
        [(4, 12), (w as i32 - 12, 24 + rows * LEGEND_LINE)],
        RGBColor(170, 170, 170).stroke_width(1),
    ))
    .map_err(err)?;
    let x = 16;
    for (row, entry) in entries.iter().enumerate() {
        let y = 18 + LEGEND_LINE / 2 + row as i32 * LEGEND_LINE;
        match entry {
            Entry::Path { index, .. } => {
                let c = colour(*index);
                area.draw(&PathElement::new([(x, y), (x + SWATCH_W, y)], c.stroke_width(2)))
                    .map_err(err)?;
                legend_marker(area, *index, (x + SWATCH_W / 2, y))?;
            }
            Entry::Rate { colour, .. } => {
                let style = colour.stroke_width(2);
                area.draw(&DashedPathElement::new([(x, y), (x + SWATCH_W, y)], 8, 5, style))
                    .map_err(err)?;
            }
            Entry::Predicted { colour, dash, .. } => {
                let style = colour.stroke_width(2);
                area.draw(&DashedPathElement::new(
                    [(x, y), (x + SWATCH_W, y)],
                    dash.0,
                    dash.1,
                    style,
                ))
                .map_err(err)?;
            }
            Entry::Band { colours, .. } => {
                // Each path's band colour as on the chart, shifted so neighbours overlap by half: where two
                // bands overlap on the chart they mix as they do here.
                let shown = &colours[..colours.len().min(3)];
                let step = SWATCH_W / (shown.len() as i32 + 1).max(2);
                for (k, c) in shown.iter().enumerate() {
                    let x0 = x + k as i32 * step;
                    let w = SWATCH_W - (shown.len() as i32 - 1) * step;
                    area.draw(&Rectangle::new([(x0, y - 7), (x0 + w, y + 7)], band_style(*c)))
                        .map_err(err)?;
                }
            }
        }
        area.draw_text(entry.label(), &font, (x + SWATCH_W + 10, y))
            .map_err(err)?;
    }
    Ok(())
}

fn legend_marker<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, index: usize, at: (i32, i32)) -> Drawn {
    let c = colour(index);
    let (fill, stroke) = (c.filled(), c.stroke_width(2));
    let (x, y) = at;
    match index % 4 {
        0 => area.draw(&Circle::new(at, 4, fill)),
        1 => area.draw(&TriangleMarker::new(at, 6, fill)),
        2 => area.draw(&Rectangle::new([(x - 4, y - 4), (x + 4, y + 4)], fill)),
        _ => area.draw(&Cross::new(at, 5, stroke)),
    }
    .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(size: u64, busbw: f64) -> Point {
        Point {
            size,
            time_us: 10.0,
            time_lo_us: 9.0,
            time_hi_us: 11.0,
            busbw,
            busbw_lo: busbw * 10.0 / 11.0,
            busbw_hi: busbw * 10.0 / 9.0,
            repeats: 1,
        }
    }

    fn table(rates: &[Option<f64>]) -> Table {
        Table {
            collective: "all_reduce".into(),
            dtype: "float".into(),
            op: Some("sum".into()),
            nranks: 4,
            missing: 0,
            series: rates
                .iter()
                .enumerate()
                .map(|(i, r)| Series {
                    path: format!("tcp@eth{i}"),
                    line_rate_gbs: *r,
                    predicted: None,
                    points: vec![point(8, 0.001), point(1 << 20, 1.0)],
                })
                .collect(),
        }
    }

    fn labels(chart: Chart, t: &Table) -> Vec<String> {
        legend_entries(chart, t, &busbw_scale(t))
            .iter()
            .map(|e| e.label().to_string())
            .collect()
    }

    /// A band above the axis's top is cut where its edges cross the top, not bent to it: the upper edge from
    /// (0, 0.5) to (2, 2.5) crosses 1.0 at x 0.5, and nothing lies above 1.0 or below 0.
    #[test]
    fn a_band_is_cut_at_the_axis_along_its_edges() {
        let outline = [
            (0.0, 0.5),
            (2.0, 2.5),
            (4.0, f64::INFINITY),
            (4.0, 0.5),
            (2.0, -1.0),
            (0.0, 0.2),
        ];
        let c = clip_y(&outline, 0.0, 1.0);
        assert!(c.iter().all(|&(_, y)| (0.0..=1.0).contains(&y)), "{c:?}");
        let near = |p: (f64, f64), q: (f64, f64)| (p.0 - q.0).abs() < 1e-9 && (p.1 - q.1).abs() < 1e-9;
        for want in [(0.5, 1.0), (4.0, 1.0), (0.0, 0.5), (0.0, 0.2)] {
            assert!(c.iter().any(|&p| near(p, want)), "{want:?} in {c:?}");
        }
        // The lower edge dips below 0 around x 2: cut at 0 where it crosses, at x 10/3 and 1/3.
        for want in [(10.0 / 3.0, 0.0), (1.0 / 3.0, 0.0)] {
            assert!(c.iter().any(|&p| near(p, want)), "{want:?} in {c:?}");
        }
        // Wholly inside: unchanged.
        let inside = [(0.0, 0.2), (1.0, 0.8), (1.0, 0.1)];
        assert_eq!(clip_y(&inside, 0.0, 1.0), inside.to_vec());
    }

    #[test]
    fn line_rates_in_the_legend_own_shared_and_off_scale() {
        // eth0 and eth2 share 2.5 GB/s; eth1's 100 GB/s would squash 1 GB/s of data; eth3 has none.
        let t = table(&[Some(2.5), Some(100.0), Some(2.5), None]);
        assert_eq!(
            labels(Chart::BusBw, &t),
            [
                "tcp@eth0",
                "tcp@eth1",
                "line rate 100 GB/s (off scale)",
                "tcp@eth2",
                "tcp@eth3",
                "line rate 2.50 GB/s: tcp@eth0, tcp@eth2",
                "band: 95% CI",
            ]
        );
        let scale = busbw_scale(&t);
        assert!(
            scale.top >= 2.5 && scale.top < 3.0,
            "the shared rate fits, the off-scale one does not"
        );
        assert_eq!(scale.rates[0].colour(), SHARED_RATE);
        // The time chart has no line rates.
        assert_eq!(
            labels(Chart::Latency, &t),
            ["tcp@eth0", "tcp@eth1", "tcp@eth2", "tcp@eth3", "band: 95% CI"]
        );
        // One rate for every path is said once.
        let t = table(&[Some(2.5), Some(2.5)]);
        assert!(labels(Chart::BusBw, &t).contains(&"line rate 2.50 GB/s: all paths".to_string()));
    }

    #[test]
    fn the_band_swatch_shows_each_paths_band_colour_as_the_chart_fills_it() {
        let t = table(&[None, None, None]);
        let entries = legend_entries(Chart::Latency, &t, &busbw_scale(&t));
        let Some(Entry::Band { colours, .. }) = entries.last() else {
            panic!("no band entry")
        };
        // One swatch per path, in its own colour, not one grey for all: overlapping bands mix colours on the
        // chart, and the overlapping swatches show what that looks like.
        assert_eq!(colours, &[colour(0), colour(1), colour(2)]);
    }

    #[test]
    fn the_legend_explains_the_band_only_when_there_is_one() {
        let mut t = table(&[None]);
        t.series[0].points[1].repeats = 3;
        assert_eq!(
            labels(Chart::BusBw, &t).last().unwrap(),
            "band: 95% CI, 3 sweeps combined"
        );
        for p in &mut t.series[0].points {
            (p.time_lo_us, p.time_hi_us) = (p.time_us, p.time_us);
        }
        assert_eq!(labels(Chart::BusBw, &t), ["tcp@eth0"]);
    }

    #[test]
    fn titles_name_collective_dtype_op_and_ranks() {
        let mut t = table(&[None]);
        assert_eq!(
            title(Chart::BusBw, &t),
            "all_reduce float sum, 4 ranks: bus bandwidth vs message size"
        );
        t.op = None;
        t.nranks = 1;
        assert_eq!(
            title(Chart::Latency, &t),
            "all_reduce float, 1 rank: time vs message size"
        );
    }

    #[test]
    fn axis_label_decimals_follow_the_tick_step() {
        assert_eq!(decimals(0.98), 2);
        assert_eq!(decimals(12.0), 0);
        assert_eq!(decimals(1.5), 1);
        assert_eq!(decimals(0.0004), 5);
    }

    #[test]
    fn the_legend_widens_for_long_path_names_within_limits() {
        let mut t = table(&[None]);
        let narrow = legend_width(&legend_entries(Chart::Latency, &t, &busbw_scale(&t)));
        t.series[0].path = "tcp@enp193s0f1np1.vlan42".into();
        let wide = legend_width(&legend_entries(Chart::Latency, &t, &busbw_scale(&t)));
        assert!(narrow >= 190 && wide > narrow && wide <= 420, "{narrow} {wide}");
    }
}
