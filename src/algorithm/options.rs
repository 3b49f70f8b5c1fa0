//! The algorithm's options (`--algo`, `--algo-threshold`, `--algo-model`, `--chunk`): which algorithm runs, where `auto`
//! switches, and the pipeline chunk. Validated here, naming the flag in every error.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;

use super::CostModel;
use crate::cli::LinkArgs;
use crate::defaults;
use crate::error::{Error, Result};
use crate::flags::size_flag;
use crate::sizes::format_size;

/// Smallest pipeline chunk (`--chunk`): below this, per-chunk overhead dominates.
pub const MIN_CHUNK: u64 = 4 << 10;
/// Largest pipeline chunk (`--chunk`): above this there is no pipelining left to speak of.
pub const MAX_CHUNK: u64 = 64 << 20;

/// Which algorithm to run for the collectives that have a choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlgoChoice {
    /// The latency algorithm below the threshold, the ring at and above it.
    Auto,
    /// Pipelined ring (chain for broadcast and reduce).
    Ring,
    /// Recursive doubling (all_reduce, reduce_scatter) or Bruck (all_gather).
    RecDoubling,
    /// Binomial tree (broadcast, reduce; all_reduce as reduce + broadcast).
    Tree,
    /// Rabenseifner's recursive halving + doubling (all_reduce).
    HalvingDoubling,
    /// Bruck's all_gather, on any rank count (auto runs it below 256 KiB).
    Bruck,
    /// The ring (all_reduce, all_gather) with its chunk per call from `--algo-model`.
    RingPipelined,
}

impl AlgoChoice {
    /// The name `--algo` takes and messages print.
    pub const fn name(self) -> &'static str {
        match self {
            AlgoChoice::Auto => "auto",
            AlgoChoice::Ring => "ring",
            AlgoChoice::RecDoubling => "rd",
            AlgoChoice::Tree => "tree",
            AlgoChoice::HalvingDoubling => "rhd",
            AlgoChoice::Bruck => "bruck",
            AlgoChoice::RingPipelined => "pring",
        }
    }
}

impl fmt::Display for AlgoChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AlgoChoice {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "auto" => AlgoChoice::Auto,
            "ring" => AlgoChoice::Ring,
            "rd" | "rec_doubling" | "recursive_doubling" => AlgoChoice::RecDoubling,
            "tree" => AlgoChoice::Tree,
            "rhd" | "halving_doubling" | "rabenseifner" => AlgoChoice::HalvingDoubling,
            "bruck" => AlgoChoice::Bruck,
            "pring" | "ring_pipelined" | "pipelined_ring" => AlgoChoice::RingPipelined,
            _ => {
                return Err(format!(
                    "unknown algorithm '{s}' (expected auto, ring, pring, rd, rhd, bruck or tree)"
                ))
            }
        })
    }
}

/// How collbench's own algorithms run. Every rank must agree on all of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AlgoOptions {
    pub algo: AlgoChoice,
    /// Message size in bytes at which `--algo auto` switches from the latency algorithm to the ring; `None`:
    /// each collective's own ([`crate::algorithm::Algo::default_threshold`]).
    pub algo_threshold: Option<u64>,
    /// Pipeline chunk size in bytes (`--chunk`).
    pub chunk_bytes: usize,
    /// The fitted model `--algo-model` read, which `--algo auto` picks by where it can
    /// ([`crate::algorithm::Algo::choose`]).
    pub algo_model: Option<CostModel>,
}

impl Default for AlgoOptions {
    fn default() -> Self {
        AlgoOptions {
            algo: AlgoChoice::Auto,
            algo_threshold: None,
            chunk_bytes: defaults::CHUNK_BYTES,
            algo_model: None,
        }
    }
}

impl AlgoOptions {
    /// Validates `--algo` and `--chunk` of `link` and the `--algo-threshold` text (`auto` or a size).
    pub fn from_cli(link: &LinkArgs, algo_threshold: &str) -> Result<AlgoOptions> {
        let algo = link.algo.parse().map_err(|e| Error::usage("--algo", e))?;
        let algo_threshold = match algo_threshold.trim() {
            "auto" => None,
            t => Some(size_flag("--algo-threshold", t)?),
        };
        Ok(AlgoOptions {
            algo,
            algo_threshold,
            chunk_bytes: chunk(&link.chunk)?,
            algo_model: None,
        })
    }

    /// These options with the model of the `--algo-model` file at `path`, if given.
    pub fn with_model(self, path: Option<&Path>) -> Result<AlgoOptions> {
        Ok(AlgoOptions {
            algo_model: path
                .map(read_model)
                .transpose()?
                .map(|m| m.with_ring_chunk(self.chunk_bytes)),
            ..self
        })
    }
}

/// The most a model file may hold: `collbench model` writes kilobytes to a few megabytes (its residuals).
const MAX_MODEL_BYTES: u64 = 64 << 20;

/// `--algo-model`: the fitted model at `path`.
fn read_model(path: &Path) -> Result<CostModel> {
    let shown = path.display().to_string();
    let text = crate::input::read_to_string(path, MAX_MODEL_BYTES)
        .map_err(|e| Error::usage("--algo-model", format!("{e}; give a file `collbench model -J` wrote")))?;
    CostModel::parse(&text, &shown).map_err(|e| Error::usage("--algo-model", e))
}

/// `--chunk`: [`MIN_CHUNK`]..=[`MAX_CHUNK`], a multiple of 16 bytes.
fn chunk(value: &str) -> Result<usize> {
    let chunk = size_flag("--chunk", value)?;
    if !(MIN_CHUNK..=MAX_CHUNK).contains(&chunk) || chunk % 16 != 0 {
        return Err(Error::usage(
            "--chunk",
            format!(
                "must be between {} and {} and a multiple of 16 bytes, \
                 so chunks hold whole elements of every dtype (got {})",
                format_size(MIN_CHUNK),
                format_size(MAX_CHUNK),
                format_size(chunk)
            ),
        ));
    }
    // Bounded by MAX_CHUNK above, so it fits any usize.
    Ok(chunk as usize)
}
