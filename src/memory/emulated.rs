//! A [`Device`] made of host memory that behaves like a GPU's stream: copies are queued and done only when
//! the host waits for a mark after them (or syncs), and a mark gets its time when the stream passes it. So
//! the staged engine's whole logic runs on machines without a GPU, and a missing wait shows up as wrong
//! data or a refused timing instead of passing by luck. It can also corrupt the copies either way, so tests
//! can see the algorithm read what came from the device and the check read what went back to it.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

use super::device::{check_finalize, check_range, check_reduce, Device};
use super::{HostBuf, MemoryError};
use crate::reduce::{kernel, Dtype, Op};

/// Host memory posing as a device with one stream.
#[derive(Debug, Default)]
pub struct Emulated {
    corrupt_to_device: bool,
    corrupt_to_host: bool,
    /// Work queued and not yet done, in stream order (shared with [`Observer`]s).
    queue: Rc<RefCell<VecDeque<Queued>>>,
}

/// Which way a queued copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    ToHost,
    ToDevice,
    OnDevice,
}

/// A view of an emulated device's queue, for tests that check what the device still has to do while the
/// host works (that copies overlap the host's work, not only that they happen).
#[derive(Clone, Debug)]
pub struct Observer(Rc<RefCell<VecDeque<Queued>>>);

impl Observer {
    /// Copies queued and not yet done: `(to the host, to the device)`.
    pub fn pending_copies(&self) -> (usize, usize) {
        let q = self.0.borrow();
        let count = |w: Way| {
            q.iter()
                .filter(|e| matches!(e, Queued::Copy { way, .. } if *way == w))
                .count()
        };
        (count(Way::ToHost), count(Way::ToDevice))
    }
}

/// One entry on the emulated stream.
#[derive(Debug)]
enum Queued {
    /// A copy between two buffers, held by address as a DMA engine would hold it. `flip` corrupts its first
    /// byte.
    Copy {
        src: *const u8,
        dst: *mut u8,
        len: usize,
        flip: bool,
        way: Way,
    },
    /// `base[dst..] = base[a..] op base[b..]` over `len` bytes, as the reduction kernel does.
    Reduce {
        base: *mut u8,
        kind: (Dtype, Op),
        dst: usize,
        a: usize,
        b: usize,
        len: usize,
    },
    /// The end of Avg over `len` bytes at `at`.
    Finalize {
        at: *mut u8,
        kind: (Dtype, Op),
        len: usize,
        nranks: usize,
    },
    /// A mark: its time is set when the stream passes it.
    Mark(Rc<Cell<Option<Instant>>>),
}

/// A point on the emulated stream; it has a time once passed.
#[derive(Clone, Debug)]
pub struct Mark(Rc<Cell<Option<Instant>>>);

impl Emulated {
    /// Flips the first byte of every copy to the device (testing aid).
    pub fn corrupting_copies_to_device(self) -> Self {
        Emulated {
            corrupt_to_device: true,
            ..self
        }
    }

    /// Flips the first byte of every copy to the host (testing aid).
    pub fn corrupting_copies_to_host(self) -> Self {
        Emulated {
            corrupt_to_host: true,
            ..self
        }
    }

    /// Does the queued work in order until `until` returns true for an entry just done, or the queue is empty.
    fn drain(&self, mut until: impl FnMut(&Queued) -> bool) {
        let mut queue = self.queue.borrow_mut();
        while let Some(q) = queue.pop_front() {
            match &q {
                &Queued::Copy {
                    src, dst, len, flip, ..
                } => {
                    // SAFETY: the Device contract keeps both buffers alive and untouched by the host until a
                    // wait past this copy or a sync, which is now; the ranges were checked when queued.
                    unsafe {
                        std::ptr::copy(src, dst, len);
                        if flip {
                            *dst ^= 0xff;
                        }
                    }
                }
                &Queued::Reduce {
                    base,
                    kind: (dtype, op),
                    dst,
                    a,
                    b,
                    len,
                } => {
                    // SAFETY: as for copies; the three ranges were checked to lie within one buffer and not to
                    // overlap, so the one mutable slice aliases neither shared one.
                    let (d, x, y) = unsafe {
                        (
                            std::slice::from_raw_parts_mut(base.add(dst), len),
                            std::slice::from_raw_parts(base.add(a), len),
                            std::slice::from_raw_parts(base.add(b), len),
                        )
                    };
                    kernel::reduce_into(dtype, op, d, x, y);
                }
                &Queued::Finalize {
                    at,
                    kind: (dtype, op),
                    len,
                    nranks,
                } => {
                    // SAFETY: as for copies; the range was checked when queued.
                    kernel::finalize(dtype, op, unsafe { std::slice::from_raw_parts_mut(at, len) }, nranks);
                }
                Queued::Mark(at) => at.set(Some(Instant::now())),
            }
            if until(&q) {
                return;
            }
        }
    }

    fn push_copy(&self, (src, dst): (*const u8, *mut u8), len: usize, flip: bool, way: Way) {
        if len > 0 {
            self.queue.borrow_mut().push_back(Queued::Copy {
                src,
                dst,
                len,
                flip,
                way,
            });
        }
    }

    /// A view of this device's queue.
    pub fn observer(&self) -> Observer {
        Observer(Rc::clone(&self.queue))
    }
}

impl Device for Emulated {
    type Mem = HostBuf;
    type Pinned = HostBuf;
    type Mark = Mark;

    fn describe(&self) -> String {
        "emulated (host memory)".into()
    }

    fn address(&self, mem: &HostBuf) -> u64 {
        mem.as_ptr() as u64
    }

    fn alloc(&self, bytes: usize) -> Result<HostBuf, MemoryError> {
        Ok(HostBuf::new(bytes))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<HostBuf, MemoryError> {
        Ok(HostBuf::new(bytes))
    }

    fn upload(&self, src: &[u8], dst: &mut HostBuf, at: usize) -> Result<(), MemoryError> {
        check_range("upload", at, src.len(), dst.len())?;
        // Stream order: whatever was queued before the upload is done before it.
        self.sync()?;
        dst[at..at + src.len()].copy_from_slice(src);
        Ok(())
    }

    fn download(&self, src: &HostBuf, at: usize, dst: &mut [u8]) -> Result<(), MemoryError> {
        check_range("download", at, dst.len(), src.len())?;
        self.sync()?;
        dst.copy_from_slice(&src[at..at + dst.len()]);
        Ok(())
    }

    fn to_host(
        &self,
        src: &HostBuf,
        src_at: usize,
        dst: &mut HostBuf,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError> {
        check_range("copy to the host (source)", src_at, len, src.len())?;
        check_range("copy to the host (destination)", dst_at, len, dst.len())?;
        // SAFETY: both offsets are within their buffers (checked above).
        let (s, d) = unsafe { (src.base().add(src_at), dst.base().add(dst_at)) };
        self.push_copy((s, d), len, self.corrupt_to_host, Way::ToHost);
        Ok(())
    }

    fn to_device(
        &self,
        src: &HostBuf,
        src_at: usize,
        dst: &mut HostBuf,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError> {
        check_range("copy to the device (source)", src_at, len, src.len())?;
        check_range("copy to the device (destination)", dst_at, len, dst.len())?;
        // SAFETY: both offsets are within their buffers (checked above).
        let (s, d) = unsafe { (src.base().add(src_at), dst.base().add(dst_at)) };
        self.push_copy((s, d), len, self.corrupt_to_device, Way::ToDevice);
        Ok(())
    }

    fn copy(
        &self,
        src: &HostBuf,
        src_at: usize,
        dst: &mut HostBuf,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError> {
        check_range("device copy (source)", src_at, len, src.len())?;
        check_range("device copy (destination)", dst_at, len, dst.len())?;
        // SAFETY: both offsets are within their buffers (checked above).
        let (s, d) = unsafe { (src.base().add(src_at), dst.base().add(dst_at)) };
        self.push_copy((s, d), len, false, Way::OnDevice);
        Ok(())
    }

    fn reduce(
        &self,
        mem: &mut HostBuf,
        kind: (Dtype, Op),
        dst: usize,
        (a, b): (usize, usize),
        len: usize,
    ) -> Result<(), MemoryError> {
        check_reduce(kind.0, mem.len(), dst, (a, b), len)?;
        if len > 0 {
            let base = mem.base();
            self.queue.borrow_mut().push_back(Queued::Reduce {
                base,
                kind,
                dst,
                a,
                b,
                len,
            });
        }
        Ok(())
    }

    fn finalize(
        &self,
        mem: &mut HostBuf,
        kind: (Dtype, Op),
        at: usize,
        len: usize,
        nranks: usize,
    ) -> Result<(), MemoryError> {
        check_finalize(at, len, mem.len(), nranks)?;
        if len > 0 && kind.1 == Op::Avg {
            // SAFETY: the offset is within the buffer (checked above).
            let at = unsafe { mem.base().add(at) };
            self.queue
                .borrow_mut()
                .push_back(Queued::Finalize { at, kind, len, nranks });
        }
        Ok(())
    }

    fn mark(&self) -> Result<Mark, MemoryError> {
        let at = Rc::new(Cell::new(None));
        self.queue.borrow_mut().push_back(Queued::Mark(Rc::clone(&at)));
        Ok(Mark(at))
    }

    fn wait(&self, mark: &Mark) -> Result<(), MemoryError> {
        if mark.0.get().is_none() {
            self.drain(|q| matches!(q, Queued::Mark(m) if Rc::ptr_eq(m, &mark.0)));
        }
        match mark.0.get() {
            Some(_) => Ok(()),
            None => Err(MemoryError::ForeignMark),
        }
    }

    fn sync(&self) -> Result<(), MemoryError> {
        self.drain(|_| false);
        Ok(())
    }

    fn elapsed(&self, from: &Mark, to: &Mark) -> Result<f64, MemoryError> {
        match (from.0.get(), to.0.get()) {
            (Some(a), Some(b)) => Ok(b.saturating_duration_since(a).as_secs_f64()),
            _ => Err(MemoryError::MarkNotPassed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_move_the_bytes_asked_for_and_refuse_out_of_range() {
        let d = Emulated::default();
        let mut mem = d.alloc(8).unwrap();
        d.upload(&[1, 2, 3], &mut mem, 2).unwrap();
        let mut pin = d.alloc_pinned(4).unwrap();
        d.to_host(&mem, 2, &mut pin, 1, 3).unwrap();
        d.sync().unwrap();
        assert_eq!(&pin[..], &[0, 1, 2, 3]);
        d.to_device(&pin, 0, &mut mem, 4, 4).unwrap();
        let mut back = [0u8; 8];
        d.download(&mem, 0, &mut back).unwrap();
        assert_eq!(back, [0, 0, 1, 2, 0, 1, 2, 3]);
        let e = d.to_device(&pin, 0, &mut mem, 6, 4).unwrap_err();
        assert_eq!(
            e,
            MemoryError::OutOfRange {
                what: "copy to the device (destination)",
                at: 6,
                len: 4,
                size: 8
            }
        );
        assert!(e.to_string().contains("outside a buffer of 8 bytes"), "{e}");
        assert!(d.upload(&[0; 9], &mut mem, 0).is_err());
    }

    #[test]
    fn corrupting_copies_flip_the_first_byte_copied_to_the_device() {
        let d = Emulated::default().corrupting_copies_to_device();
        let mut mem = d.alloc(4).unwrap();
        let pin = d.alloc_pinned(4).unwrap();
        d.to_device(&pin, 0, &mut mem, 1, 2).unwrap();
        d.sync().unwrap();
        assert_eq!(&mem[..], &[0, 0xff, 0, 0]);
    }

    #[test]
    fn copies_happen_only_when_a_mark_after_them_is_waited_for() {
        let d = Emulated::default();
        let mut mem = d.alloc(4).unwrap();
        d.upload(&[1, 2, 3, 4], &mut mem, 0).unwrap();
        let mut pin = d.alloc_pinned(4).unwrap();
        let start = d.mark().unwrap();
        d.to_host(&mem, 0, &mut pin, 0, 2).unwrap();
        let first = d.mark().unwrap();
        d.to_host(&mem, 2, &mut pin, 2, 2).unwrap();
        let second = d.mark().unwrap();
        assert_eq!(&pin[..], &[0, 0, 0, 0], "nothing is copied before a wait");
        let e = d.elapsed(&start, &first).unwrap_err();
        assert_eq!(e, MemoryError::MarkNotPassed);
        assert!(e.to_string().contains("not passed"), "{e}");
        d.wait(&first).unwrap();
        assert_eq!(
            &pin[..],
            &[1, 2, 0, 0],
            "waiting for a mark does the work before it, and only that"
        );
        assert!(d.elapsed(&start, &first).unwrap() >= 0.0);
        assert!(d.elapsed(&first, &second).is_err());
        d.wait(&first).unwrap();
        d.sync().unwrap();
        assert_eq!(&pin[..], &[1, 2, 3, 4]);
        assert!(d.elapsed(&first, &second).is_ok());
        // A download is ordered after what was queued before it.
        d.upload(&[7; 4], &mut mem, 0).unwrap();
        d.to_device(&pin, 0, &mut mem, 0, 1).unwrap();
        let mut back = [0u8; 2];
        d.download(&mem, 0, &mut back).unwrap();
        assert_eq!(back, [1, 7]);
        // A mark of another device is refused.
        let other = Emulated::default().mark().unwrap();
        assert_eq!(d.wait(&other).unwrap_err(), MemoryError::ForeignMark);
    }

    #[test]
    fn reductions_are_queued_like_copies_and_refuse_overlapping_ranges() {
        let d = Emulated::default();
        let mut mem = d.alloc(24).unwrap();
        let ints = |v: [i32; 2]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        d.upload(&ints([1, 2]), &mut mem, 0).unwrap();
        d.upload(&ints([10, 20]), &mut mem, 8).unwrap();
        d.reduce(&mut mem, (Dtype::Int32, Op::Avg), 16, (0, 8), 8).unwrap();
        d.finalize(&mut mem, (Dtype::Int32, Op::Avg), 16, 8, 2).unwrap();
        let mut out = [0u8; 8];
        d.download(&mem, 16, &mut out).unwrap();
        assert_eq!(out.to_vec(), ints([5, 11]), "(1 + 10) / 2 and (2 + 20) / 2, truncated");
        let e = d.reduce(&mut mem, (Dtype::Int32, Op::Sum), 4, (0, 8), 8).unwrap_err();
        assert_eq!(
            e,
            MemoryError::Overlap {
                len: 8,
                dst_at: 4,
                a_at: 0,
                b_at: 8
            }
        );
        assert!(e.to_string().contains("overlapping"), "{e}");
        assert_eq!(
            d.reduce(&mut mem, (Dtype::Int32, Op::Sum), 16, (0, 8), 6).unwrap_err(),
            MemoryError::PartElements {
                len: 6,
                dtype: Dtype::Int32
            },
            "not whole elements"
        );
        assert!(
            d.reduce(&mut mem, (Dtype::Int32, Op::Sum), 20, (0, 8), 8).is_err(),
            "past the end"
        );
        // A device copy waits its turn like the others.
        let mut other = d.alloc(8).unwrap();
        d.copy(&mem, 16, &mut other, 0, 8).unwrap();
        assert_eq!(&other[..], &[0; 8]);
        d.sync().unwrap();
        assert_eq!(other.to_vec(), ints([5, 11]));
    }
}
