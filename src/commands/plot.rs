//! `collbench plot RESULTS.json`: the charts of a finished (or aborted) run, from its results file.

use std::path::{Path, PathBuf};

use crate::cli::PlotArgs;
use crate::error::{Result, EXIT_OK};
use crate::plot::{write_plots, Format, PlotData};

/// Runs `collbench plot`: reads the results file, writes the charts, prints each file written.
pub fn plot(args: &PlotArgs) -> Result<i32> {
    let formats = Format::parse_list(&args.format, "--format")?;
    let data = PlotData::from_path(&args.results)?;
    let dir = args.out.clone().unwrap_or_else(|| default_dir(&args.results));
    for path in write_plots(&data, &dir, &formats)? {
        crate::report::stdout::print(&format!("{}\n", path.display()))?;
    }
    Ok(EXIT_OK)
}

/// The results file's directory (`.` for a bare file name).
fn default_dir(results: &Path) -> PathBuf {
    match results.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
