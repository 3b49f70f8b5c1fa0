//! What the staged engine needs from a GPU: device buffers, pinned host staging, copies queued on one
//! stream, and events that time them and that the host can wait for one at a time.
//! [`super::emulated::Emulated`] implements it with host memory (always built, for tests);
//! `super::cuda_device::CudaDevice` with the CUDA driver (feature `cuda`).
//!
//! The runner reaches a device only through generics, never `dyn`: the host path does not touch this.

use std::ops::DerefMut;

/// A device and the one stream its work is queued on. Errors are messages naming what failed.
pub trait Device {
    /// One allocation in device memory.
    type Mem;
    /// Page-locked host memory the device copies to and from asynchronously.
    type Pinned: DerefMut<Target = [u8]>;
    /// A point on the stream whose time can be read once it has passed.
    type Mark;

    /// Names the device in messages and reports (`cuda:0 NVIDIA H200`).
    fn describe(&self) -> String;
    /// The device address of `mem` (for libraries that take device pointers, such as NCCL).
    fn address(&self, mem: &Self::Mem) -> u64;
    /// `bytes` of device memory, zeroed.
    fn alloc(&self, bytes: usize) -> Result<Self::Mem, String>;
    /// `bytes` of pinned host memory, zeroed.
    fn alloc_pinned(&self, bytes: usize) -> Result<Self::Pinned, String>;
    /// Copies `src` into `dst` from byte `at`, and waits for it (setting inputs up; not timed).
    fn upload(&self, src: &[u8], dst: &mut Self::Mem, at: usize) -> Result<(), String>;
    /// Copies `dst.len()` bytes of `src` from byte `at` into `dst`, and waits for it (for the data check).
    fn download(&self, src: &Self::Mem, at: usize, dst: &mut [u8]) -> Result<(), String>;
    /// Queues a copy of `len` bytes from `src[src_at..]` into `dst[dst_at..]`. Those bytes of `dst` must not
    /// be read before a mark queued after the copy has been waited for, or the next [`Device::sync`].
    fn to_host(
        &self,
        src: &Self::Mem,
        src_at: usize,
        dst: &mut Self::Pinned,
        dst_at: usize,
        len: usize,
    ) -> Result<(), String>;
    /// Queues a copy of `len` bytes from `src[src_at..]` into `dst[dst_at..]`. Those bytes of `src` must not
    /// be written before a mark queued after the copy has been waited for, or the next [`Device::sync`].
    fn to_device(
        &self,
        src: &Self::Pinned,
        src_at: usize,
        dst: &mut Self::Mem,
        dst_at: usize,
        len: usize,
    ) -> Result<(), String>;
    /// Records a mark on the stream now.
    fn mark(&self) -> Result<Self::Mark, String>;
    /// Waits until the stream has passed `mark` (work queued after it may still be running).
    fn wait(&self, mark: &Self::Mark) -> Result<(), String>;
    /// Waits for everything queued so far.
    fn sync(&self) -> Result<(), String>;
    /// Seconds between two marks, both passed (after a [`Device::sync`]).
    fn elapsed(&self, from: &Self::Mark, to: &Self::Mark) -> Result<f64, String>;
}

/// Checks that `at..at + len` lies within a buffer of `size` bytes (a staging bug, not bad input).
pub fn check_range(what: &str, at: usize, len: usize, size: usize) -> Result<(), String> {
    match at.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(format!(
            "{what}: bytes {at}..{} outside a buffer of {size} bytes",
            at.saturating_add(len)
        )),
    }
}
