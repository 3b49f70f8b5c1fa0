//! Charts of a run: per collective/dtype/op, busbw and time vs message size, one line per path with its
//! 95% band and line rate, as PNG and SVG.
//!
//! [`data`] extracts what is drawn (from records or a results file) and is tested without drawing;
//! [`axis`] picks ticks and labels; `render` draws on any plotters backend; [`write_plots`] writes the
//! files; `command` is `collbench plot`.

pub mod axis;
pub mod data;
mod font;
pub mod heatmap;
mod render;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use plotters::prelude::{BitMapBackend, IntoDrawingArea, SVGBackend};

pub use data::{run_note, PlotData, Table};
pub use render::{Chart, HEIGHT, WIDTH};

use crate::error::{Error, Result};
use crate::report::file::write_atomic;

/// An image format charts are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Png,
    Svg,
}

impl Format {
    /// Both formats, the default.
    pub const ALL: [Format; 2] = [Format::Png, Format::Svg];

    /// The file extension, which is also the name on the command line.
    pub fn ext(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Svg => "svg",
        }
    }

    /// Formats from command-line words (`png`, `svg`, `all`), duplicates dropped; the error names `flag`.
    pub fn parse_list(words: &[String], flag: &str) -> Result<Vec<Format>> {
        let mut out = Vec::new();
        for w in words {
            let add: Vec<Format> = if w.trim().eq_ignore_ascii_case("all") {
                Format::ALL.to_vec()
            } else {
                vec![w.parse().map_err(|e: String| Error::usage(flag, e))?]
            };
            for f in add {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
        if out.is_empty() {
            return Err(Error::usage(flag, "needs at least one format: png, svg"));
        }
        Ok(out)
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "png" => Ok(Format::Png),
            "svg" => Ok(Format::Svg),
            other => Err(format!(
                "unknown image format `{other}`; use png, svg or both (png,svg)"
            )),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ext())
    }
}

/// The file name (without extension) of one chart: `all_reduce-float-sum-busbw`; collectives without
/// an op leave it out (`all_gather-float-latency`). Characters unsafe in file names become `_`.
pub fn file_stem(table: &Table, chart: Chart) -> String {
    let mut parts = vec![table.collective.as_str(), table.dtype.as_str()];
    if let Some(op) = &table.op {
        parts.push(op);
    }
    parts.push(chart.name());
    parts
        .iter()
        .map(|p| {
            p.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// Writes both charts of every table in each format into `dir` (created if missing), replacing files
/// of the same name, and returns the paths written in order.
pub fn write_plots(data: &PlotData, dir: &Path, formats: &[Format]) -> Result<Vec<PathBuf>> {
    font::ensure_registered()?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating chart directory {}", dir.display()), e))?;
    let mut written = Vec::new();
    for table in &data.tables {
        for chart in Chart::ALL {
            for &format in formats {
                let path = dir.join(format!("{}.{}", file_stem(table, chart), format.ext()));
                let bytes = render_bytes(table, chart, &data.note, &data.chart_warning(table), format)
                    .map_err(|e| Error::io(format!("drawing {}", path.display()), std::io::Error::other(e)))?;
                write_atomic(&path, &bytes, crate::report::file::Replace::Allowed)?;
                written.push(path);
            }
        }
    }
    Ok(written)
}

/// One chart as the bytes of a file in `format`, `warning` (may be empty) under its note.
fn render_bytes(
    table: &Table,
    chart: Chart,
    note: &str,
    warning: &str,
    format: Format,
) -> std::result::Result<Vec<u8>, String> {
    match format {
        Format::Png => {
            let mut rgb = vec![0u8; WIDTH as usize * HEIGHT as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
                render::draw(&root, chart, table, note, warning)?;
                root.present().map_err(|e| e.to_string())?;
            }
            encode_png(&rgb, WIDTH, HEIGHT).map_err(|e| format!("encoding PNG: {e}"))
        }
        Format::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
                render::draw(&root, chart, table, note, warning)?;
                root.present().map_err(|e| e.to_string())?;
            }
            Ok(svg.into_bytes())
        }
    }
}

fn encode_png(rgb: &[u8], width: u32, height: u32) -> std::result::Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, width, height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header()?;
    w.write_image_data(rgb)?;
    w.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::results::testutil::record;

    #[test]
    fn formats_parse_from_the_command_line() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            Format::parse_list(&words(&["png", "svg"]), "--format").unwrap(),
            Format::ALL
        );
        assert_eq!(
            Format::parse_list(&words(&["SVG", "svg"]), "--format").unwrap(),
            [Format::Svg]
        );
        assert_eq!(Format::parse_list(&words(&["all"]), "--format").unwrap(), Format::ALL);
        let e = Format::parse_list(&words(&["jpeg"]), "--format")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--format") && e.contains("jpeg"), "{e}");
        assert!(Format::parse_list(&[], "--format").is_err());
    }

    #[test]
    fn file_names_follow_the_table_and_stay_safe() {
        let mut t = Table {
            collective: "all_reduce".into(),
            dtype: "float".into(),
            op: Some("sum".into()),
            nranks: 2,
            series: Vec::new(),
            missing: 0,
        };
        assert_eq!(file_stem(&t, Chart::BusBw), "all_reduce-float-sum-busbw");
        t.op = None;
        assert_eq!(file_stem(&t, Chart::Latency), "all_reduce-float-latency");
        t.dtype = "../x y".into();
        assert_eq!(file_stem(&t, Chart::Latency), "all_reduce-.._x_y-latency");
    }

    #[test]
    fn write_plots_draws_records_into_a_new_directory() {
        let recs: Vec<_> = [8u64, 1024, 1 << 20]
            .into_iter()
            .map(|size| record(Collective::AllReduce, size, size as f64 / 1000.0 + 20.0, 1.0, Some(0)))
            .collect();
        let data = PlotData::from_records(&recs, &[("tcp@lo".into(), 2.0)], "note");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("new").join("charts");
        let written = write_plots(&data, &out, &[Format::Svg]).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["all_reduce-float-sum-busbw.svg", "all_reduce-float-sum-latency.svg"]
        );
        let svg = std::fs::read_to_string(&written[0]).unwrap();
        assert!(svg.contains("line rate 2.00 GB/s") && svg.contains("note"), "{svg}");
    }
}
