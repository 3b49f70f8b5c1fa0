//! Small control-plane exchanges over the data transport: barrier, gather and broadcast of byte strings.
//! Not on the timed path.

use crate::error::{Error, Result};

/// Largest control message accepted: per-point statistics are a few KiB; a larger length means the ranks
/// disagree on the protocol, and must not turn into a huge allocation.
const MAX_CONTROL: u64 = 16 << 20;

/// A received length prefix, refused when it cannot be a control message.
fn control_len(len: [u8; 8], me: usize, peer: usize) -> Result<usize> {
    let n = u64::from_le_bytes(len);
    if n > MAX_CONTROL {
        return Err(Error::Peer(format!(
            "rank {me}: rank {peer} announced a control message of {n} bytes (limit {MAX_CONTROL}); the ranks \
             disagree on the protocol: were they all started with the same collbench version?"
        )));
    }
    Ok(n as usize)
}
use crate::transport::{self, Transport};

/// Dissemination barrier: ceil(log2 n) rounds of one-byte exchanges; no rank leaves before all arrived.
pub fn barrier<T: Transport + ?Sized>(t: &mut T) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    let mut dist = 1;
    while dist < n {
        let mut got = [0u8; 1];
        transport::sendrecv(t, (r + dist) % n, &[1u8], (r + n - dist) % n, &mut got)?;
        dist <<= 1;
    }
    Ok(())
}

/// Gathers every rank's `data` on rank 0 (length-prefixed, so lengths may differ). Other ranks get `None`.
pub fn gather<T: Transport + ?Sized>(t: &mut T, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
    let (n, r) = (t.size(), t.rank());
    if r != 0 {
        transport::send(t, 0, &(data.len() as u64).to_le_bytes())?;
        transport::send(t, 0, data)?;
        return Ok(None);
    }
    let mut all = Vec::with_capacity(n);
    all.push(data.to_vec());
    for peer in 1..n {
        let mut len = [0u8; 8];
        transport::recv(t, peer, &mut len)?;
        let mut buf = vec![0u8; control_len(len, r, peer)?];
        transport::recv(t, peer, &mut buf)?;
        all.push(buf);
    }
    Ok(Some(all))
}

/// Broadcasts rank 0's `data` to every rank (length-prefixed) and returns it.
pub fn broadcast<T: Transport + ?Sized>(t: &mut T, data: &[u8]) -> Result<Vec<u8>> {
    let (n, r) = (t.size(), t.rank());
    if r == 0 {
        for peer in 1..n {
            transport::send(t, peer, &(data.len() as u64).to_le_bytes())?;
            transport::send(t, peer, data)?;
        }
        return Ok(data.to_vec());
    }
    let mut len = [0u8; 8];
    transport::recv(t, 0, &mut len)?;
    let mut buf = vec![0u8; control_len(len, r, 0)?];
    transport::recv(t, 0, &mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_control_lengths_are_refused_naming_the_peer() {
        assert_eq!(control_len(100u64.to_le_bytes(), 0, 3).unwrap(), 100);
        let e = control_len(u64::MAX.to_le_bytes(), 0, 3).unwrap_err().to_string();
        assert!(e.contains("rank 3") && e.contains("version"), "{e}");
    }
}
