//! Page-aligned, zero-initialised host buffers.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment of every host buffer: a page, so any element type and any DMA engine is happy.
pub const ALIGN: usize = 4096;

/// A page-aligned byte buffer. Zeroed on allocation so its pages are touched before timing starts.
pub struct HostBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: HostBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for HostBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for HostBuf {}

impl HostBuf {
    /// Allocates `len` zeroed bytes aligned to [`ALIGN`]. Aborts like `Vec` if memory runs out.
    pub fn new(len: usize) -> Self {
        if len == 0 {
            return HostBuf {
                ptr: NonNull::<u64>::dangling().cast(),
                len: 0,
            };
        }
        let layout = Layout::from_size_align(len, ALIGN).expect("buffer size overflows the address space");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        HostBuf { ptr, len }
    }

    /// The allocation's address, not derived from a borrow of its bytes: what a DMA engine holds on to while a
    /// queued copy waits ([`super::emulated::Emulated`]).
    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Makes the buffer at least `len` bytes long, keeping nothing of its contents when it grows.
    pub fn ensure(&mut self, len: usize) {
        if self.len < len {
            *self = HostBuf::new(len);
        }
    }
}

impl Default for HostBuf {
    fn default() -> Self {
        HostBuf::new(0)
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: allocated in new() with this exact layout.
            unsafe { dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.len, ALIGN)) }
        }
    }
}

impl Deref for HostBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (dangling but aligned and len 0 when empty).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for HostBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for HostBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_page_aligned_zeroed_and_growable() {
        let mut b = HostBuf::new(10_000);
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        assert!(b.iter().all(|&x| x == 0));
        b[9_999] = 7;
        assert_eq!(b[9_999], 7);
        b.ensure(5);
        assert_eq!(b.len(), 10_000, "ensure never shrinks");
        b.ensure(20_000);
        assert_eq!(b.len(), 20_000);
        assert_eq!(HostBuf::new(0).len(), 0);
    }
}
