//! A call's marks on the device's stream, kept from call to call: each is recorded again instead of made
//! anew, since on CUDA a new mark is an event created, and later destroyed, inside the timed call.

use crate::memory::device::Device;
use crate::memory::MemoryError;

/// The marks of one call: its start, one after each piece's input copy, and two around each later batch of
/// device work (copies back, reductions). Only the first `n_*` of each list belong to the current call.
pub(super) struct Marks<M> {
    start: Vec<M>,
    inputs: Vec<M>,
    n_inputs: usize,
    begins: Vec<M>,
    ends: Vec<M>,
    n_batches: usize,
}

/// Records mark `i` of `marks`, reusing it when it exists.
fn record<D: Device>(dev: &D, marks: &mut Vec<D::Mark>, i: usize) -> Result<(), MemoryError> {
    match marks.get_mut(i) {
        Some(m) => dev.remark(m),
        None => {
            marks.push(dev.mark()?);
            Ok(())
        }
    }
}

impl<M> Marks<M> {
    /// No marks yet.
    pub(super) fn new() -> Self {
        Marks {
            start: Vec::new(),
            inputs: Vec::new(),
            n_inputs: 0,
            begins: Vec::new(),
            ends: Vec::new(),
            n_batches: 0,
        }
    }

    /// Starts a call: its first mark, now.
    pub(super) fn begin<D: Device<Mark = M>>(&mut self, dev: &D) -> Result<(), MemoryError> {
        self.n_inputs = 0;
        self.n_batches = 0;
        record(dev, &mut self.start, 0)
    }

    /// The mark after the next piece's input copy.
    pub(super) fn input<D: Device<Mark = M>>(&mut self, dev: &D) -> Result<(), MemoryError> {
        record(dev, &mut self.inputs, self.n_inputs)?;
        self.n_inputs += 1;
        Ok(())
    }

    /// The mark after piece `k`'s input copy.
    pub(super) fn input_done(&self, k: usize) -> &M {
        &self.inputs[..self.n_inputs][k]
    }

    /// The mark before the next batch of device work.
    pub(super) fn batch_begin<D: Device<Mark = M>>(&mut self, dev: &D) -> Result<(), MemoryError> {
        record(dev, &mut self.begins, self.n_batches)
    }

    /// The mark after it.
    pub(super) fn batch_end<D: Device<Mark = M>>(&mut self, dev: &D) -> Result<(), MemoryError> {
        record(dev, &mut self.ends, self.n_batches)?;
        self.n_batches += 1;
        Ok(())
    }

    /// The mark after batch `k`.
    pub(super) fn batch_done(&self, k: usize) -> &M {
        &self.ends[..self.n_batches][k]
    }

    /// Device time of the call, all marks passed: the input copies ran back to back from the start to the
    /// last input mark; every batch between its own two marks.
    pub(super) fn device_s<D: Device<Mark = M>>(&self, dev: &D) -> Result<f64, MemoryError> {
        let mut s = match (self.start.first(), self.n_inputs) {
            (Some(start), n) if n > 0 => dev.elapsed(start, &self.inputs[n - 1])?,
            _ => 0.0,
        };
        for k in 0..self.n_batches {
            s += dev.elapsed(&self.begins[k], &self.ends[k])?;
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::emulated::Emulated;

    #[test]
    fn marks_are_reused_from_call_to_call_and_only_the_current_calls_count() {
        let d = Emulated::default();
        let mut m = Marks::new();
        for call in 0..3 {
            m.begin(&d).unwrap();
            let pieces = if call == 1 { 1 } else { 3 };
            for _ in 0..pieces {
                m.input(&d).unwrap();
            }
            m.batch_begin(&d).unwrap();
            m.batch_end(&d).unwrap();
            d.wait(m.input_done(pieces - 1)).unwrap();
            d.sync().unwrap();
            assert!(m.device_s(&d).unwrap() >= 0.0);
            assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.input_done(pieces))).is_err());
            assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.batch_done(1))).is_err());
        }
        // The second call used fewer marks than the first; none was made beyond the most any call needed.
        assert_eq!((m.start.len(), m.inputs.len(), m.ends.len()), (1, 3, 1));
    }
}
