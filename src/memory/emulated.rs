//! A [`Device`] made of host memory: copies are `memcpy`s done at once, marks are host clock readings.
//! It runs the staged engine's whole logic on machines without a GPU; it can also corrupt the copies back
//! either way, so tests can see the algorithm read what came from the device and the check read what went
//! back to it.

use std::time::Instant;

use super::device::{check_range, Device};
use super::HostBuf;

/// Host memory posing as a device.
#[derive(Clone, Debug, Default)]
pub struct Emulated {
    /// Flip the first byte of every copy to the device (testing aid).
    pub corrupt_to_device: bool,
    /// Flip the first byte of every copy to the host (testing aid).
    pub corrupt_to_host: bool,
}

impl Device for Emulated {
    type Mem = HostBuf;
    type Pinned = HostBuf;
    type Mark = Instant;

    fn describe(&self) -> String {
        "emulated (host memory)".into()
    }

    fn address(&self, mem: &HostBuf) -> u64 {
        mem.as_ptr() as u64
    }

    fn alloc(&self, bytes: usize) -> Result<HostBuf, String> {
        Ok(HostBuf::new(bytes))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<HostBuf, String> {
        Ok(HostBuf::new(bytes))
    }

    fn upload(&self, src: &[u8], dst: &mut HostBuf, at: usize) -> Result<(), String> {
        check_range("upload", at, src.len(), dst.len())?;
        dst[at..at + src.len()].copy_from_slice(src);
        Ok(())
    }

    fn download(&self, src: &HostBuf, at: usize, dst: &mut [u8]) -> Result<(), String> {
        check_range("download", at, dst.len(), src.len())?;
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
    ) -> Result<(), String> {
        check_range("copy to the host (source)", src_at, len, src.len())?;
        check_range("copy to the host (destination)", dst_at, len, dst.len())?;
        dst[dst_at..dst_at + len].copy_from_slice(&src[src_at..src_at + len]);
        if self.corrupt_to_host && len > 0 {
            dst[dst_at] ^= 0xff;
        }
        Ok(())
    }

    fn to_device(
        &self,
        src: &HostBuf,
        src_at: usize,
        dst: &mut HostBuf,
        dst_at: usize,
        len: usize,
    ) -> Result<(), String> {
        check_range("copy to the device (source)", src_at, len, src.len())?;
        check_range("copy to the device (destination)", dst_at, len, dst.len())?;
        dst[dst_at..dst_at + len].copy_from_slice(&src[src_at..src_at + len]);
        if self.corrupt_to_device && len > 0 {
            dst[dst_at] ^= 0xff;
        }
        Ok(())
    }

    fn mark(&self) -> Result<Instant, String> {
        Ok(Instant::now())
    }

    fn sync(&self) -> Result<(), String> {
        Ok(())
    }

    fn elapsed(&self, from: &Instant, to: &Instant) -> Result<f64, String> {
        Ok(to.saturating_duration_since(*from).as_secs_f64())
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
        assert_eq!(&pin[..], &[0, 1, 2, 3]);
        d.to_device(&pin, 0, &mut mem, 4, 4).unwrap();
        let mut back = [0u8; 8];
        d.download(&mem, 0, &mut back).unwrap();
        assert_eq!(back, [0, 0, 1, 2, 0, 1, 2, 3]);
        let e = d.to_device(&pin, 0, &mut mem, 6, 4).unwrap_err();
        assert!(e.contains("outside a buffer of 8 bytes"), "{e}");
        assert!(d.upload(&[0; 9], &mut mem, 0).is_err());
    }

    #[test]
    fn corrupting_copies_flip_the_first_byte_copied_to_the_device() {
        let d = Emulated {
            corrupt_to_device: true,
            ..Emulated::default()
        };
        let mut mem = d.alloc(4).unwrap();
        let pin = d.alloc_pinned(4).unwrap();
        d.to_device(&pin, 0, &mut mem, 1, 2).unwrap();
        assert_eq!(&mem[..], &[0, 0xff, 0, 0]);
    }
}
