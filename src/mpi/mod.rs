//! MPI (feature `mpi`): initialisation, bootstrap through MPI under `mpirun`, and the MPI baseline engine
//! that runs the library's own collectives on collbench's buffers.

pub mod engine;

use mpi::collective::CommunicatorCollectives;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::Root;

use crate::error::{Error, Result};

/// An initialised MPI library and its world communicator; MPI is finalised when this is dropped.
pub struct Mpi {
    // Field order: the communicator must go before the universe finalises MPI.
    world: SimpleCommunicator,
    _universe: Universe,
}

impl Mpi {
    /// Initialises MPI (once per process).
    pub fn init() -> Result<Mpi> {
        let universe = mpi::initialize()
            .ok_or_else(|| Error::peer("MPI was already initialised in this process; collbench initialises it once"))?;
        Ok(Mpi {
            world: universe.world(),
            _universe: universe,
        })
    }

    /// This process's rank in MPI_COMM_WORLD.
    pub fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    /// Size of MPI_COMM_WORLD.
    pub fn size(&self) -> usize {
        self.world.size() as usize
    }

    /// The world communicator.
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// The MPI library's version string.
    pub fn library_version(&self) -> String {
        mpi::environment::library_version()
            .unwrap_or_else(|_| "unknown MPI".into())
            .trim()
            .to_string()
    }

    /// Every rank's `data`, in rank order.
    pub fn allgather_bytes(&self, data: &[u8]) -> Vec<Vec<u8>> {
        let n = self.size();
        let len = data.len() as i32;
        let mut lens = vec![0i32; n];
        self.world.all_gather_into(&len, &mut lens[..]);
        let displs: Vec<i32> = lens
            .iter()
            .scan(0, |acc, &l| {
                let d = *acc;
                *acc += l;
                Some(d)
            })
            .collect();
        let mut buf = vec![0u8; lens.iter().map(|&l| l as usize).sum()];
        {
            let mut part = PartitionMut::new(&mut buf[..], &lens[..], &displs[..]);
            self.world.all_gather_varcount_into(data, &mut part);
        }
        lens.iter()
            .zip(&displs)
            .map(|(&l, &d)| buf[d as usize..(d + l) as usize].to_vec())
            .collect()
    }

    /// Rank 0's `data` on every rank.
    pub fn broadcast_bytes(&self, data: &[u8]) -> Vec<u8> {
        let root = self.world.process_at_rank(0);
        let mut len = data.len() as u64;
        root.broadcast_into(&mut len);
        let mut buf = if self.rank() == 0 {
            data.to_vec()
        } else {
            vec![0u8; len as usize]
        };
        root.broadcast_into(&mut buf[..]);
        buf
    }
}
