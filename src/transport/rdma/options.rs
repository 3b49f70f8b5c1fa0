//! The RDMA transport's options (`--gid-index`, `--rdma-qps`), validated here, naming the flag in every error.

use serde::Serialize;

use crate::cli::LinkArgs;
use crate::defaults;
use crate::error::{Error, Result};

/// Most RDMA queue pairs per peer (`--rdma-qps`).
pub const MAX_RDMA_QPS: usize = super::endpoint::MAX_QPS;

/// How rdma@ paths address and drive their queue pairs. Every rank must agree on all of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RdmaOptions {
    /// GID table index of RDMA paths (`--gid-index`); `None`: chosen per link layer.
    pub gid_index: Option<u8>,
    /// Queue pairs per peer of RDMA paths (`--rdma-qps`); a message's fragments go round-robin over them.
    pub rdma_qps: usize,
}

impl Default for RdmaOptions {
    fn default() -> Self {
        RdmaOptions {
            gid_index: None,
            rdma_qps: defaults::RDMA_QPS,
        }
    }
}

impl RdmaOptions {
    /// Validates the RDMA flags of `link`.
    pub fn from_cli(link: &LinkArgs) -> Result<RdmaOptions> {
        if !(1..=MAX_RDMA_QPS).contains(&link.rdma_qps) {
            return Err(Error::usage(
                "--rdma-qps",
                format!(
                    "must be between 1 and {MAX_RDMA_QPS} queue pairs per peer (got {})",
                    link.rdma_qps
                ),
            ));
        }
        Ok(RdmaOptions {
            gid_index: link.gid_index,
            rdma_qps: link.rdma_qps,
        })
    }
}
