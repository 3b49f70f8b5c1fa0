//! A one-rank engine for the memory tests: the control exchanges are trivial, and each collective is handed
//! to a closure (host slices) or another (device addresses).

use super::Engine;
use crate::algorithm::{Algo, Args};
use crate::collective::Collective;
use crate::engine::call::Call;
use crate::error::Result;

/// One rank whose collectives `run` (host buffers) and `run_device` (device addresses) perform.
pub struct OneRank<R, D> {
    pub run: R,
    pub run_device: D,
}

impl<R, D> Engine for OneRank<R, D>
where
    R: FnMut(Args<'_>) -> Result<()>,
    D: FnMut(&Call, u64, u64) -> Result<()>,
{
    fn path(&self) -> String {
        "one-rank".into()
    }
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn algo(&self, _c: Collective, _s: u64) -> Algo {
        Algo::Ring
    }
    fn run(&mut self, _algo: Algo, args: Args<'_>) -> Result<()> {
        (self.run)(args)
    }
    fn run_device(&mut self, call: &Call, send: u64, recv: u64) -> Result<()> {
        (self.run_device)(call, send, recv)
    }
    fn barrier(&mut self) -> Result<()> {
        Ok(())
    }
    fn gather(&mut self, d: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        Ok(Some(vec![d.to_vec()]))
    }
    fn broadcast(&mut self, d: &[u8]) -> Result<Vec<u8>> {
        Ok(d.to_vec())
    }
}
