//! Where a run's results go and how they look (`run`'s Output flags): files, charts, the prediction and the
//! progress bar, and the nccl-tests style of `run`'s hidden `--nccl-tests-*` flags. Local to each rank: ranks
//! need not agree on any of it. Validated here, naming the flag.

use std::path::PathBuf;

use serde::Serialize;

use super::nccl_table::NcclTestsStyle;
use crate::cli::RunArgs;
use crate::error::{Error, Result};

/// Whether to draw a progress bar on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Progress {
    /// Only when stderr is a terminal.
    Auto,
    Never,
}

/// The run's outputs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outputs {
    /// JSON output file (`-J`), nccl-tests layout plus collbench's fields.
    pub json: Option<PathBuf>,
    /// CSV output file (`--csv`).
    pub csv: Option<PathBuf>,
    /// Markdown output file (`--markdown`).
    pub markdown: Option<PathBuf>,
    /// Directory for charts drawn at the end of the run (`--plot`).
    pub plot: Option<PathBuf>,
    /// Ranks to predict at from the run's measurements (`--target-ranks`); `None`: no prediction.
    pub target_ranks: Option<usize>,
    /// Ranks per node of the two-level prediction (`--ranks-per-node`).
    pub ranks_per_node: Option<usize>,
    /// Overwrite existing output files (`--force`).
    pub force: bool,
    pub progress: Progress,
    /// The unit bandwidth is printed in (`--units`); files keep GB/s.
    pub units: crate::units::BwUnit,
}

impl Default for Outputs {
    fn default() -> Self {
        Outputs {
            json: None,
            csv: None,
            markdown: None,
            plot: None,
            target_ranks: None,
            ranks_per_node: None,
            force: false,
            progress: Progress::Auto,
            units: crate::units::BwUnit::Gbyte,
        }
    }
}

impl Outputs {
    /// Validates the output flags of `collbench run`.
    pub fn from_cli(args: &RunArgs) -> Result<Outputs> {
        Outputs {
            json: args.out.output_file.clone(),
            csv: args.csv.clone(),
            markdown: args.markdown.clone(),
            plot: args.plot.clone(),
            target_ranks: target_ranks(args.target_ranks, args.ranks_per_node)?,
            ranks_per_node: args.ranks_per_node,
            force: args.out.force,
            progress: Progress::from_flag(args.no_progress),
            units: args.units.unit()?,
        }
        .checked()
    }

    /// Rejects one file named for two outputs, however spelled (a link, `./x`, `-` and `/dev/stdout`): the
    /// second writer would destroy the first's results.
    fn checked(self) -> Result<Outputs> {
        super::file::refuse_same_file(&self.declared().files)?;
        Ok(self)
    }

    /// The output files and chart directory asked for, with their flags.
    pub fn declared(&self) -> super::declared::Declared<'_> {
        super::declared::Declared::new(self.force)
            .file("-J/--output_file", self.json.as_deref())
            .file("--csv", self.csv.as_deref())
            .file("--markdown", self.markdown.as_deref())
            .charts("--plot", self.plot.as_deref())
    }

    /// Whether an output file is standard output (`-J -`): the table then goes to stderr.
    pub fn stdout_taken(&self) -> bool {
        self.declared().stdout_taken()
    }
}

impl Progress {
    /// `--no-progress` as a choice.
    pub fn from_flag(no_progress: bool) -> Progress {
        if no_progress {
            Progress::Never
        } else {
            Progress::Auto
        }
    }
}

/// `--target-ranks` and `--ranks-per-node`: a rank count that moves data, and a node size that divides it.
fn target_ranks(target: Option<usize>, per_node: Option<usize>) -> Result<Option<usize>> {
    match (target, per_node) {
        (Some(n), _) if n < 2 => Err(Error::usage(
            "--target-ranks",
            format!("{n} ranks move nothing between ranks; give 2 or more"),
        )),
        (None, Some(_)) => Err(Error::usage(
            "--ranks-per-node",
            "only shapes a prediction; give --target-ranks N with it",
        )),
        (Some(n), Some(g)) if g == 0 || n % g != 0 => Err(Error::usage(
            "--ranks-per-node",
            format!("{g} does not divide --target-ranks {n} into whole nodes; give a divisor of it"),
        )),
        (n, _) => Ok(n),
    }
}

impl NcclTestsStyle {
    /// The style `run`'s hidden `--nccl-tests-*` flags ask for; `None` without `--nccl-tests-table`.
    pub fn from_cli(args: &RunArgs) -> Result<Option<NcclTestsStyle>> {
        let Some(program) = &args.nccl_tests_table else {
            return Ok(None);
        };
        if !super::nccl_table::PROGRAMS.iter().any(|(p, _)| p == program) {
            return Err(Error::usage(
                "--nccl-tests-table",
                format!(
                    "unknown program '{program}' (expected one of {})",
                    super::nccl_table::PROGRAMS.map(|(p, _)| p).join(", ")
                ),
            ));
        }
        if let Some(bw) = args.nccl_tests_min_bw {
            if !bw.is_finite() {
                return Err(Error::usage(
                    "NCCL_TESTS_MIN_BW",
                    format!("must be a number of GB/s, got {bw}"),
                ));
            }
        }
        Ok(Some(NcclTestsStyle {
            program: program.clone(),
            min_bw: args.nccl_tests_min_bw,
            timestamps: args.nccl_tests_timestamps,
        }))
    }
}
