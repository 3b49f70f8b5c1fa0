//! The collectives: names, buffer layouts and bus-bandwidth factors, one small spec per collective.
//!
//! Units follow nccl-tests: `count` is the per-rank parameter count (`paramcount`), the byte count that
//! algorithm bandwidth divides by is [`Layout::alg_bytes`], and bus bandwidth is algorithm bandwidth times
//! [`Collective::bus_factor`]. This file is the one place that defines them.

mod expect;

pub use expect::Expect;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One collective operation of the nccl-tests set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    #[serde(rename = "alltoall")]
    AllToAll,
    #[serde(rename = "sendrecv")]
    SendRecv,
}

impl Collective {
    /// Every collective (`--collective all`).
    pub const ALL: [Collective; 7] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllToAll,
        Collective::SendRecv,
    ];

    /// The name used on the command line, in tables and in JSON (nccl-tests' binary names without `_perf`).
    pub const fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllToAll => "alltoall",
            Collective::SendRecv => "sendrecv",
        }
    }

    /// Whether the collective applies a reduction op (otherwise the table shows redop `none`).
    pub const fn reduces(self) -> bool {
        matches!(
            self,
            Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce
        )
    }

    /// Whether the collective has a root rank (otherwise the table shows root `-1`).
    pub const fn rooted(self) -> bool {
        matches!(self, Collective::Broadcast | Collective::Reduce)
    }

    /// busbw = algbw x this factor, as nccl-tests defines it for `nranks` ranks.
    ///
    /// all_reduce moves 2(n-1)/n of the buffer over each rank's busiest link; all_gather, reduce_scatter and
    /// alltoall move (n-1)/n of the (n x count) total; broadcast, reduce and sendrecv move the buffer once.
    pub fn bus_factor(self, nranks: usize) -> f64 {
        let n = nranks.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => (n - 1.0) / n,
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
        }
    }

    /// The buffer layout for a requested size in bytes, rounded the way nccl-tests rounds it.
    pub fn layout(self, size_bytes: usize, elem_size: usize, nranks: usize) -> Layout {
        let n = nranks.max(1);
        let count = size_bytes / elem_size;
        // nccl-tests keeps per-rank blocks of the sharded collectives a multiple of 16 bytes.
        let align = (16 / elem_size).max(1);
        let (param, send, recv) = match self {
            Collective::AllReduce | Collective::Broadcast | Collective::Reduce | Collective::SendRecv => {
                (count, count, count)
            }
            Collective::AllGather => {
                let p = (count / n) / align * align;
                (p, p, p * n)
            }
            Collective::ReduceScatter => {
                let p = (count / n) / align * align;
                (p, p * n, p)
            }
            Collective::AllToAll => {
                let p = (count / n) / align * align;
                (p, p * n, p * n)
            }
        };
        let alg_elems = match self {
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => param * n,
            _ => param,
        };
        Layout {
            count: param,
            send_count: send,
            recv_count: recv,
            alg_bytes: alg_elems * elem_size,
            size_bytes: send.max(recv) * elem_size,
            elem_size,
        }
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Collective {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.to_ascii_lowercase().replace('-', "_");
        let norm = norm.strip_suffix("_perf").unwrap_or(&norm);
        Ok(match norm {
            "all_reduce" | "allreduce" => Collective::AllReduce,
            "all_gather" | "allgather" => Collective::AllGather,
            "reduce_scatter" | "reducescatter" => Collective::ReduceScatter,
            "broadcast" | "bcast" => Collective::Broadcast,
            "reduce" => Collective::Reduce,
            "alltoall" | "all_to_all" => Collective::AllToAll,
            "sendrecv" | "send_recv" => Collective::SendRecv,
            _ => {
                return Err(format!(
                    "unknown collective '{s}' (expected one of: {}, or all)",
                    Collective::ALL.map(Collective::name).join(", ")
                ))
            }
        })
    }
}

/// Element counts and byte sizes of one point of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Per-rank parameter count, the `count` column (nccl-tests' `paramcount`).
    pub count: usize,
    /// Elements in each rank's send buffer.
    pub send_count: usize,
    /// Elements in each rank's receive buffer.
    pub recv_count: usize,
    /// Bytes that algorithm bandwidth is computed from.
    pub alg_bytes: usize,
    /// The `size` column: the larger of the send and receive buffers, in bytes.
    pub size_bytes: usize,
    /// Bytes per element.
    pub elem_size: usize,
}

impl Layout {
    /// Algorithm and bus bandwidth in GB/s (1e9 bytes/s) for one operation taking `seconds`.
    pub fn bandwidth(&self, coll: Collective, nranks: usize, seconds: f64) -> (f64, f64) {
        if seconds <= 0.0 {
            return (0.0, 0.0);
        }
        let algbw = self.alg_bytes as f64 / 1e9 / seconds;
        (algbw, algbw * coll.bus_factor(nranks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_factors_match_nccl_tests_for_every_collective() {
        for n in [1usize, 2, 3, 4, 7, 8, 64] {
            let nf = n as f64;
            for c in Collective::ALL {
                let want = match c {
                    Collective::AllReduce => 2.0 * (nf - 1.0) / nf,
                    Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => (nf - 1.0) / nf,
                    Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
                };
                assert_eq!(c.bus_factor(n), want, "{c} at {n} ranks");
            }
        }
        assert_eq!(Collective::AllReduce.bus_factor(4), 1.5);
        assert_eq!(Collective::AllGather.bus_factor(4), 0.75);
        assert_eq!(Collective::Broadcast.bus_factor(4), 1.0);
    }

    #[test]
    fn alg_bytes_count_all_ranks_for_sharded_collectives() {
        // 1 MiB of floats over 4 ranks.
        let ag = Collective::AllGather.layout(1 << 20, 4, 4);
        assert_eq!(ag.count, 65536);
        assert_eq!(ag.recv_count, 262144);
        assert_eq!(ag.alg_bytes, 1 << 20);
        assert_eq!(ag.size_bytes, 1 << 20);
        let rs = Collective::ReduceScatter.layout(1 << 20, 4, 4);
        assert_eq!((rs.count, rs.send_count, rs.recv_count), (65536, 262144, 65536));
        let a2a = Collective::AllToAll.layout(1 << 20, 4, 4);
        assert_eq!((a2a.count, a2a.send_count, a2a.alg_bytes), (65536, 262144, 1 << 20));
        let ar = Collective::AllReduce.layout(1 << 20, 4, 4);
        assert_eq!((ar.count, ar.alg_bytes), (262144, 1 << 20));
        // 1 GB/s algbw for 1e9 bytes in one second, busbw 1.5 at 4 ranks.
        let l = Layout {
            count: 0,
            send_count: 0,
            recv_count: 0,
            alg_bytes: 1_000_000_000,
            size_bytes: 0,
            elem_size: 4,
        };
        assert_eq!(l.bandwidth(Collective::AllReduce, 4, 1.0), (1.0, 1.5));
    }

    #[test]
    fn sharded_counts_round_down_to_16_bytes_per_rank() {
        // 100 floats over 3 ranks: 33 per rank, rounded down to a multiple of 4 floats.
        let l = Collective::AllGather.layout(400, 4, 3);
        assert_eq!(l.count, 32);
        assert_eq!(l.size_bytes, 32 * 3 * 4);
        // Sizes that are not a multiple of the element size are rounded down.
        assert_eq!(Collective::AllReduce.layout(10, 4, 2).count, 2);
        assert_eq!(Collective::AllGather.layout(8, 4, 4).count, 0);
    }

    #[test]
    fn names_round_trip() {
        for c in Collective::ALL {
            assert_eq!(c.name().parse::<Collective>().unwrap(), c);
            assert_eq!(serde_json::to_value(c).unwrap(), c.name(), "JSON uses the same names");
        }
        assert_eq!("all_reduce_perf".parse::<Collective>().unwrap(), Collective::AllReduce);
        assert!("allfoo".parse::<Collective>().is_err());
    }
}
