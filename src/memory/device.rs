//! What the staged engine needs from a GPU: device buffers, pinned host staging, copies queued on one
//! stream, and events that time them and that the host can wait for one at a time.
//! [`super::emulated::Emulated`] implements it with host memory (always built, for tests);
//! `super::cuda_device::CudaDevice` with the CUDA driver (feature `cuda`).
//!
//! The runner reaches a device only through generics, never `dyn`: the host path does not touch this.

use std::ops::DerefMut;

use super::MemoryError;
use crate::reduce::{Dtype, Op};

/// A device and the one stream its work is queued on. Errors say what failed ([`MemoryError`]).
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
    fn alloc(&self, bytes: usize) -> Result<Self::Mem, MemoryError>;
    /// `bytes` of pinned host memory, zeroed.
    fn alloc_pinned(&self, bytes: usize) -> Result<Self::Pinned, MemoryError>;
    /// Copies `src` into `dst` from byte `at`, and waits for it (setting inputs up; not timed).
    fn upload(&self, src: &[u8], dst: &mut Self::Mem, at: usize) -> Result<(), MemoryError>;
    /// Copies `dst.len()` bytes of `src` from byte `at` into `dst`, and waits for it (for the data check).
    fn download(&self, src: &Self::Mem, at: usize, dst: &mut [u8]) -> Result<(), MemoryError>;
    /// Queues a copy of `len` bytes from `src[src_at..]` into `dst[dst_at..]`. Those bytes of `dst` must not
    /// be read before a mark queued after the copy has been waited for, or the next [`Device::sync`].
    fn to_host(
        &self,
        src: &Self::Mem,
        src_at: usize,
        dst: &mut Self::Pinned,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError>;
    /// Queues a copy of `len` bytes from `src[src_at..]` into `dst[dst_at..]`. Those bytes of `src` must not
    /// be written before a mark queued after the copy has been waited for, or the next [`Device::sync`].
    fn to_device(
        &self,
        src: &Self::Pinned,
        src_at: usize,
        dst: &mut Self::Mem,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError>;
    /// Queues a copy of `len` bytes from `src[src_at..]` into `dst[dst_at..]`, both in device memory.
    fn copy(
        &self,
        src: &Self::Mem,
        src_at: usize,
        dst: &mut Self::Mem,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError>;
    /// Readies [`Device::reduce`] and [`Device::finalize`] (CUDA compiles its kernels), so the first call
    /// does not pay for it.
    fn prepare_reductions(&self) -> Result<(), MemoryError> {
        Ok(())
    }
    /// Queues `mem[dst_at..] = mem[a_at..] op mem[b_at..]` over `len` bytes of elements of `kind`'s dtype,
    /// with its op (Avg sums; see [`Device::finalize`]); `from` is `(a_at, b_at)`. The three ranges must not
    /// overlap (the kernels assume it).
    fn reduce(
        &self,
        mem: &mut Self::Mem,
        kind: (Dtype, Op),
        dst_at: usize,
        from: (usize, usize),
        len: usize,
    ) -> Result<(), MemoryError>;
    /// Queues the end of Avg over `len` bytes of `mem` from `at`: every element divided by `nranks`. Nothing
    /// for the other ops.
    fn finalize(
        &self,
        mem: &mut Self::Mem,
        kind: (Dtype, Op),
        at: usize,
        len: usize,
        nranks: usize,
    ) -> Result<(), MemoryError>;
    /// Records a mark on the stream now.
    fn mark(&self) -> Result<Self::Mark, MemoryError>;
    /// Records `mark`, already passed, again on the stream now (reusing it, where making one costs).
    fn remark(&self, mark: &mut Self::Mark) -> Result<(), MemoryError> {
        *mark = self.mark()?;
        Ok(())
    }
    /// Waits until the stream has passed `mark` (work queued after it may still be running).
    fn wait(&self, mark: &Self::Mark) -> Result<(), MemoryError>;
    /// Waits for everything queued so far.
    fn sync(&self) -> Result<(), MemoryError>;
    /// Seconds between two marks, both passed (after a [`Device::sync`]).
    fn elapsed(&self, from: &Self::Mark, to: &Self::Mark) -> Result<f64, MemoryError>;
}

/// Checks the ranges of a device reduction: within `size` bytes, whole elements, and not overlapping.
pub fn check_reduce(
    dtype: Dtype,
    size: usize,
    dst_at: usize,
    (a_at, b_at): (usize, usize),
    len: usize,
) -> Result<(), MemoryError> {
    for (what, at) in [
        ("reduce (destination)", dst_at),
        ("reduce (a)", a_at),
        ("reduce (b)", b_at),
    ] {
        check_range(what, at, len, size)?;
    }
    if len % dtype.size() != 0 {
        return Err(MemoryError::PartElements { len, dtype });
    }
    let apart = |x: usize, y: usize| x.abs_diff(y) >= len;
    if len > 0 && !(apart(dst_at, a_at) && apart(dst_at, b_at) && apart(a_at, b_at)) {
        return Err(MemoryError::Overlap {
            len,
            dst_at,
            a_at,
            b_at,
        });
    }
    Ok(())
}

/// Checks a finalize of `len` bytes at `at` in a buffer of `size` bytes over `nranks` ranks.
pub fn check_finalize(at: usize, len: usize, size: usize, nranks: usize) -> Result<(), MemoryError> {
    check_range("finalize", at, len, size)?;
    if nranks == 0 {
        return Err(MemoryError::NoRanks);
    }
    Ok(())
}

/// Checks that `at..at + len` lies within a buffer of `size` bytes (a staging bug, not bad input).
pub fn check_range(what: &'static str, at: usize, len: usize, size: usize) -> Result<(), MemoryError> {
    match at.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(MemoryError::OutOfRange { what, at, len, size }),
    }
}

/// A borrowed device is a device: the run opens its GPU once and every sweep's buffers borrow it.
impl<D: Device + ?Sized> Device for &D {
    type Mem = D::Mem;
    type Pinned = D::Pinned;
    type Mark = D::Mark;

    fn describe(&self) -> String {
        (**self).describe()
    }
    fn address(&self, mem: &Self::Mem) -> u64 {
        (**self).address(mem)
    }
    fn alloc(&self, bytes: usize) -> Result<Self::Mem, MemoryError> {
        (**self).alloc(bytes)
    }
    fn alloc_pinned(&self, bytes: usize) -> Result<Self::Pinned, MemoryError> {
        (**self).alloc_pinned(bytes)
    }
    fn upload(&self, src: &[u8], dst: &mut Self::Mem, at: usize) -> Result<(), MemoryError> {
        (**self).upload(src, dst, at)
    }
    fn download(&self, src: &Self::Mem, at: usize, dst: &mut [u8]) -> Result<(), MemoryError> {
        (**self).download(src, at, dst)
    }
    fn to_host(
        &self,
        src: &Self::Mem,
        src_at: usize,
        dst: &mut Self::Pinned,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError> {
        (**self).to_host(src, src_at, dst, dst_at, len)
    }
    fn to_device(
        &self,
        src: &Self::Pinned,
        src_at: usize,
        dst: &mut Self::Mem,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError> {
        (**self).to_device(src, src_at, dst, dst_at, len)
    }
    fn copy(
        &self,
        src: &Self::Mem,
        src_at: usize,
        dst: &mut Self::Mem,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError> {
        (**self).copy(src, src_at, dst, dst_at, len)
    }
    fn prepare_reductions(&self) -> Result<(), MemoryError> {
        (**self).prepare_reductions()
    }
    fn reduce(
        &self,
        mem: &mut Self::Mem,
        kind: (Dtype, Op),
        dst_at: usize,
        from: (usize, usize),
        len: usize,
    ) -> Result<(), MemoryError> {
        (**self).reduce(mem, kind, dst_at, from, len)
    }
    fn finalize(
        &self,
        mem: &mut Self::Mem,
        kind: (Dtype, Op),
        at: usize,
        len: usize,
        nranks: usize,
    ) -> Result<(), MemoryError> {
        (**self).finalize(mem, kind, at, len, nranks)
    }
    fn mark(&self) -> Result<Self::Mark, MemoryError> {
        (**self).mark()
    }
    fn remark(&self, mark: &mut Self::Mark) -> Result<(), MemoryError> {
        (**self).remark(mark)
    }
    fn wait(&self, mark: &Self::Mark) -> Result<(), MemoryError> {
        (**self).wait(mark)
    }
    fn sync(&self) -> Result<(), MemoryError> {
        (**self).sync()
    }
    fn elapsed(&self, from: &Self::Mark, to: &Self::Mark) -> Result<f64, MemoryError> {
        (**self).elapsed(from, to)
    }
}
