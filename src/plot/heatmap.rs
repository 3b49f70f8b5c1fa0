//! Host x host heatmaps (PNG) of the pairwise link test: one cell per ordered pair, coloured from the
//! worst value (red) to the best (green), its value written in the cell when there is room.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{encode_png, font};
use crate::error::{Error, Result};
use crate::report::file::write_atomic;

/// One heatmap: `cells[row][col]` (None on the diagonal or where nothing was measured).
pub struct Heatmap<'a> {
    pub title: &'a str,
    /// A second line under the title (what the rows and columns mean).
    pub note: &'a str,
    pub names: &'a [String],
    pub cells: &'a [Vec<Option<f64>>],
    pub unit: &'a str,
    /// Bandwidth: true; latency: false.
    pub higher_is_better: bool,
}

/// Canvas size in pixels.
const SIZE: (u32, u32) = (1100, 1000);
/// Left and top margins for the names, and the side of the grid.
const LEFT: i32 = 240;
const TOP: i32 = 130;
const GRID: i32 = 760;

/// Red, yellow, green: a diverging scale readable on white (ColorBrewer's RdYlGn ends and middle).
fn colour(t: f64) -> RGBColor {
    let stops = [(215.0, 48.0, 39.0), (254.0, 224.0, 139.0), (26.0, 152.0, 80.0)];
    let t = t.clamp(0.0, 1.0) * 2.0;
    let (lo, hi, f) = if t < 1.0 {
        (stops[0], stops[1], t)
    } else {
        (stops[1], stops[2], t - 1.0)
    };
    let mix = |a: f64, b: f64| (a + (b - a) * f).round() as u8;
    RGBColor(mix(lo.0, hi.0), mix(lo.1, hi.1), mix(lo.2, hi.2))
}

/// Where a value sits against the best of the map: 1 is the best, 0 nothing (bandwidth 0, infinite
/// latency); a ratio, so a clean map's small scatter stays green rather than spanning the whole scale.
fn score(v: f64, lo: f64, hi: f64, higher_is_better: bool) -> f64 {
    let t = if higher_is_better { v / hi } else { lo / v };
    if t.is_finite() {
        t
    } else {
        1.0
    }
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, map: &Heatmap<'_>) -> std::result::Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let centre = SIZE.0 as i32 / 2;
    let style = |size: u32, h: HPos, v: VPos| ("sans-serif", size).into_font().color(&BLACK).pos(Pos::new(h, v));
    root.draw_text(map.title, &style(26, HPos::Center, VPos::Top), (centre, 14))
        .map_err(e)?;
    root.draw_text(map.note, &style(15, HPos::Center, VPos::Top), (centre, 50))
        .map_err(e)?;
    let n = map.names.len().max(1) as i32;
    let cell = GRID / n;
    let values: Vec<f64> = map
        .cells
        .iter()
        .flatten()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let label_size = (cell / 3).clamp(9, 18) as u32;
    for (r, name) in map.names.iter().enumerate() {
        let y = TOP + r as i32 * cell + cell / 2;
        root.draw_text(name, &style(label_size, HPos::Right, VPos::Center), (LEFT - 8, y))
            .map_err(e)?;
        // Column names above the grid, turned so long host names fit.
        let x = LEFT + r as i32 * cell + cell / 2;
        let turned = ("sans-serif", label_size)
            .into_font()
            .transform(FontTransform::Rotate270)
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        root.draw_text(name, &turned, (x, TOP - 8)).map_err(e)?;
    }
    for r in 0..map.names.len() {
        for c in 0..map.names.len() {
            let (x0, y0) = (LEFT + c as i32 * cell, TOP + r as i32 * cell);
            let v = map
                .cells
                .get(r)
                .and_then(|row| row.get(c))
                .copied()
                .flatten()
                .filter(|v| v.is_finite());
            let fill = match v {
                Some(v) => colour(score(v, lo, hi, map.higher_is_better)),
                None => RGBColor(225, 225, 225),
            };
            root.draw(&Rectangle::new(
                [(x0, y0), (x0 + cell - 1, y0 + cell - 1)],
                fill.filled(),
            ))
            .map_err(e)?;
            if let (Some(v), true) = (v, cell >= 44) {
                let size = (cell / 4).clamp(9, 20) as u32;
                root.draw_text(
                    &fmt(v),
                    &style(size, HPos::Center, VPos::Center),
                    (x0 + cell / 2, y0 + cell / 2),
                )
                .map_err(e)?;
            }
        }
    }
    if lo.is_finite() {
        let (worst, best) = if map.higher_is_better { (lo, hi) } else { (hi, lo) };
        let legend = format!(
            "colour: worst {} {}, best {} {}",
            fmt(worst),
            map.unit,
            fmt(best),
            map.unit
        );
        root.draw_text(&legend, &style(16, HPos::Center, VPos::Top), (centre, TOP + GRID + 20))
            .map_err(e)?;
    }
    Ok(())
}

/// Draws `map` and writes it to `path` as PNG (replacing a file of that name).
pub fn write_png(path: &Path, map: &Heatmap<'_>) -> Result<()> {
    font::ensure_registered()?;
    let mut rgb = vec![0u8; SIZE.0 as usize * SIZE.1 as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
        draw(&root, map)
            .and_then(|_| root.present().map_err(|x| x.to_string()))
            .map_err(|m| Error::io(format!("drawing {}", path.display()), std::io::Error::other(m)))?;
    }
    let bytes = encode_png(&rgb, SIZE.0, SIZE.1)
        .map_err(|x| Error::io(format!("encoding {}", path.display()), std::io::Error::other(x)))?;
    write_atomic(path, &bytes, crate::report::file::Replace::Allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_run_from_red_to_green() {
        assert_eq!(colour(0.0), RGBColor(215, 48, 39));
        assert_eq!(colour(0.5), RGBColor(254, 224, 139));
        assert_eq!(colour(1.0), RGBColor(26, 152, 80));
        assert_eq!(score(1.5, 1.0, 3.0, true), 0.5);
        assert_eq!(score(4.0, 2.0, 3.0, false), 0.5);
        assert_eq!(score(1.0, 1.0, 3.0, false), 1.0);
    }

    #[test]
    fn writes_a_png_coloured_by_the_ratio_to_the_best() {
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let cells = vec![
            vec![None, Some(1.0), Some(1.0)],
            vec![Some(1.0), None, Some(0.25)],
            vec![Some(1.0), Some(1.0), None],
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bw.png");
        let map = Heatmap {
            title: "t",
            note: "n",
            names: &names,
            cells: &cells,
            unit: "GB/s",
            higher_is_better: true,
        };
        write_png(&path, &map).unwrap();
        let dec = png::Decoder::new(std::fs::File::open(&path).unwrap());
        let mut reader = dec.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), SIZE);
        // A corner of cell (row 1, col 2), at a quarter of the best, is between red and yellow; a corner of
        // (0, 1) is the best's green.
        let cell = GRID / 3;
        let px = |x: i32, y: i32| {
            let i = (y as usize * SIZE.0 as usize + x as usize) * 3;
            RGBColor(buf[i], buf[i + 1], buf[i + 2])
        };
        assert_eq!(px(LEFT + 2 * cell + 2, TOP + cell + 2), colour(0.25));
        assert_eq!(px(LEFT + cell + 2, TOP + 2), RGBColor(26, 152, 80));
        assert_eq!(px(LEFT + 2, TOP + 2), RGBColor(225, 225, 225));
    }
}
