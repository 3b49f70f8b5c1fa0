//! The values of enumerated flags, for `--help` and for shell completions (clap_complete offers a flag's
//! possible values after it). Parsing and its messages stay where each value is used (`Options::from_cli`
//! names the flag); these lists only describe, and a test in `docgen` checks them against those parsers.

use clap::builder::{PossibleValue, TypedValueParser};

/// `--algo` (the long names `rec_doubling`, `halving_doubling`, `ring_pipelined` are accepted too).
pub const ALGOS: &[&str] = &["auto", "ring", "pring", "rd", "rhd", "bruck", "tree"];
/// `--collective`.
pub const COLLECTIVES: &[&str] = &[
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "alltoall",
    "sendrecv",
    "all",
];
/// `-d`/`--datatype` (nccl-tests' aliases such as fp16 and bf16 are accepted too).
pub const DTYPES: &[&str] = &[
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double", "all",
];
/// `-o`/`--op`.
pub const OPS: &[&str] = &["sum", "prod", "max", "min", "avg", "all"];
/// `--memory`.
pub const MEMORY: &[&str] = &["host", "cuda"];
/// `--interleave`.
pub const INTERLEAVE: &[&str] = &["sweep", "point"];
/// `--reduce-on`.
pub const REDUCE_ON: &[&str] = &["host", "device"];
/// `-a`/`--average`.
pub const RANK_STATS: &[&str] = &["0", "1", "2", "3", "rank0", "avg", "min", "max"];
/// `--transport` of `run` and `preflight`: every kind of path that is one alone (plus `tcp@SPEC` and
/// `rdma@DEVICE`, which take a name).
pub const TRANSPORTS: &[&str] = &crate::path_names::ALONE;
/// `model --weight`.
pub const WEIGHTINGS: &[&str] = &["sqrt", "relative", "absolute"];
/// `plot --format`.
pub const IMAGE_FORMATS: &[&str] = &["png", "svg"];

/// A value parser that takes any UTF-8 string as it is (the options layer checks it and names the flag
/// in its message) but tells clap which values exist, so `--help` and completions can list them.
#[derive(Clone, Copy, Debug)]
pub struct Choices(pub &'static [&'static str]);

impl TypedValueParser for Choices {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.0.iter().map(|v| PossibleValue::new(*v))))
    }
}
