//! The `collbench model` command line (clap derive only).

use std::path::PathBuf;

use clap::Args;

/// Flags of `collbench model`.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Results files written by `collbench run -J`; several are fitted together (e.g. runs on 2 and on 3
    /// hosts, so the rank dependence is measured too).
    #[arg(value_name = "RESULTS.json", required = true)]
    pub files: Vec<PathBuf>,

    /// Ranks at the scale to predict.
    #[arg(long = "target-ranks", alias = "target_ranks", value_name = "N", required = true)]
    pub target_ranks: usize,

    /// Ranks per node at the target: adds the two-level prediction (inside nodes over a local link,
    /// between nodes over the path) [default: none, flat only]
    #[arg(long = "ranks-per-node", alias = "ranks_per_node", value_name = "G")]
    pub ranks_per_node: Option<usize>,

    /// A measured path (in the same files) to use as the local link of the two-level prediction
    /// [default: 2 us per step, 20 GB/s]
    #[arg(long = "local-path", alias = "local_path", value_name = "PATH")]
    pub local_path: Option<String>,

    /// The path the others are compared with at the target [default: the first path in the files]
    #[arg(long = "reference", value_name = "PATH")]
    pub reference: Option<String>,

    /// How the fit weighs points: sqrt (variance proportional to time), relative (relative error) or
    /// absolute (plain least squares on time).
    #[arg(long = "weight", value_name = "HOW", default_value = "sqrt",
        value_parser = super::values::Choices(super::values::WEIGHTINGS), hide_possible_values = true)]
    pub weight: String,

    /// Results measured at the target scale, to put beside the predictions with the error [default: none]
    #[arg(long = "measured", value_name = "FILE")]
    pub measured: Vec<PathBuf>,

    #[command(flatten)]
    pub out: super::OutputArgs,

    /// Write the fits and predictions as Markdown to this file [default: none]
    #[arg(long = "markdown", value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    #[command(flatten)]
    pub units: super::UnitsArg,
}
