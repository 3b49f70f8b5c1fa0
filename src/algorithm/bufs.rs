//! Raw views of a collective's input and output, which alias when running in place.

use std::marker::PhantomData;

/// Input and output of one call as raw pointers: in place they are the same memory, which `&`/`&mut`
/// cannot express. Every accessor takes byte offsets and hands out slices only for the chunk in use.
pub(crate) struct Bufs<'a> {
    inp: *const u8,
    inp_len: usize,
    out: *mut u8,
    out_len: usize,
    pub in_place: bool,
    _life: PhantomData<&'a mut [u8]>,
}

impl<'a> Bufs<'a> {
    /// Views of `send` (or, in place, `recv`) as input and `recv` as output.
    pub fn new(send: Option<&'a [u8]>, recv: &'a mut [u8]) -> Self {
        let out_len = recv.len();
        let out = recv.as_mut_ptr();
        let (inp, inp_len) = match send {
            Some(s) => (s.as_ptr(), s.len()),
            None => (out as *const u8, out_len),
        };
        Bufs {
            inp,
            inp_len,
            out,
            out_len,
            in_place: send.is_none(),
            _life: PhantomData,
        }
    }

    /// Input bytes `off..off+len`.
    pub fn inp(&self, off: usize, len: usize) -> &[u8] {
        assert!(
            off + len <= self.inp_len,
            "input range {off}+{len} beyond {}",
            self.inp_len
        );
        // SAFETY: in bounds of the caller's input; callers never hold it across a write to the same bytes.
        unsafe { std::slice::from_raw_parts(self.inp.add(off), len) }
    }

    /// Output bytes `off..off+len`.
    #[allow(clippy::mut_from_ref)]
    pub fn out(&self, off: usize, len: usize) -> &mut [u8] {
        assert!(
            off + len <= self.out_len,
            "output range {off}+{len} beyond {}",
            self.out_len
        );
        // SAFETY: in bounds of the caller's exclusive output borrow; callers take disjoint or sequential views.
        unsafe { std::slice::from_raw_parts_mut(self.out.add(off), len) }
    }

    /// Raw input pointer at `off`, for posting sends.
    pub fn inp_ptr(&self, off: usize) -> *const u8 {
        assert!(off <= self.inp_len);
        // SAFETY: within or one past the input.
        unsafe { self.inp.add(off) }
    }

    /// Raw output pointer at `off`, for posting receives and sends.
    pub fn out_ptr(&self, off: usize) -> *mut u8 {
        assert!(off <= self.out_len);
        // SAFETY: within or one past the output.
        unsafe { self.out.add(off) }
    }

    /// Copies input `src_off..+len` to output `dst_off..` (a no-op when they are the same bytes).
    pub fn copy_in_to_out(&self, src_off: usize, dst_off: usize, len: usize) {
        let (s, d) = (self.inp_ptr(src_off), self.out_ptr(dst_off));
        assert!(src_off + len <= self.inp_len && dst_off + len <= self.out_len);
        if !std::ptr::eq(s, d) && len > 0 {
            // SAFETY: both ranges in bounds; copy handles overlap.
            unsafe { std::ptr::copy(s, d, len) }
        }
    }
}
