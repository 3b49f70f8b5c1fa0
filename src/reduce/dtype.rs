//! Element types, named as nccl-tests names them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One element type a collective can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Half,
    Bfloat16,
    Float,
    Double,
}

impl Dtype {
    /// Every dtype, in the order nccl-tests lists them (`-d all`).
    pub const ALL: [Dtype; 10] = [
        Dtype::Int8,
        Dtype::Uint8,
        Dtype::Int32,
        Dtype::Uint32,
        Dtype::Int64,
        Dtype::Uint64,
        Dtype::Half,
        Dtype::Float,
        Dtype::Double,
        Dtype::Bfloat16,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            Dtype::Int8 | Dtype::Uint8 => 1,
            Dtype::Half | Dtype::Bfloat16 => 2,
            Dtype::Int32 | Dtype::Uint32 | Dtype::Float => 4,
            Dtype::Int64 | Dtype::Uint64 | Dtype::Double => 8,
        }
    }

    /// The name used on the command line, in tables and in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::Int8 => "int8",
            Dtype::Uint8 => "uint8",
            Dtype::Int32 => "int32",
            Dtype::Uint32 => "uint32",
            Dtype::Int64 => "int64",
            Dtype::Uint64 => "uint64",
            Dtype::Half => "half",
            Dtype::Bfloat16 => "bfloat16",
            Dtype::Float => "float",
            Dtype::Double => "double",
        }
    }

    /// True for the floating-point types.
    pub const fn is_float(self) -> bool {
        matches!(self, Dtype::Half | Dtype::Bfloat16 | Dtype::Float | Dtype::Double)
    }

    /// True for the unsigned integer types.
    pub const fn is_unsigned(self) -> bool {
        matches!(self, Dtype::Uint8 | Dtype::Uint32 | Dtype::Uint64)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dtype {
    type Err = String;

    /// Accepts the nccl-tests names and their usual aliases (`fp16`, `bf16`, `float32`, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let d = match s.to_ascii_lowercase().as_str() {
            "int8" | "char" => Dtype::Int8,
            "uint8" => Dtype::Uint8,
            "int32" | "int" => Dtype::Int32,
            "uint32" => Dtype::Uint32,
            "int64" => Dtype::Int64,
            "uint64" => Dtype::Uint64,
            "half" | "fp16" | "float16" => Dtype::Half,
            "bfloat16" | "bf16" => Dtype::Bfloat16,
            "float" | "fp32" | "float32" => Dtype::Float,
            "double" | "fp64" | "float64" => Dtype::Double,
            _ => {
                return Err(format!(
                    "unknown dtype '{s}' (expected one of: {}, or all)",
                    Dtype::ALL.map(Dtype::name).join(", ")
                ))
            }
        };
        Ok(d)
    }
}
