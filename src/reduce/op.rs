//! Reduction operations, named as nccl-tests names them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One reduction operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Sum,
    Prod,
    Max,
    Min,
    Avg,
}

impl Op {
    /// Every op, in the order nccl-tests lists them (`-o all`).
    pub const ALL: [Op; 5] = [Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg];

    /// The name used on the command line, in tables and in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Prod => "prod",
            Op::Max => "max",
            Op::Min => "min",
            Op::Avg => "avg",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Op {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "sum" => Ok(Op::Sum),
            "prod" => Ok(Op::Prod),
            "max" => Ok(Op::Max),
            "min" => Ok(Op::Min),
            "avg" => Ok(Op::Avg),
            _ => Err(format!(
                "unknown op '{s}' (expected one of: {}, or all)",
                Op::ALL.map(Op::name).join(", ")
            )),
        }
    }
}
