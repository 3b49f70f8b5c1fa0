//! Small control-plane exchanges over the data transport: barrier, gather and broadcast of byte strings,
//! all along the binomial tree rooted at rank 0, so they need only n-1 connected pairs (no star on rank 0).
//! Not on the timed path.

use crate::error::{Error, Result};
use crate::transport::{self, Transport};

/// Largest control message accepted: per-point statistics are a few KiB per rank, so even a whole
/// subtree's of a large job is far below it; a larger length means the ranks disagree on the protocol, and
/// must not turn into a huge allocation.
const MAX_CONTROL: u64 = 16 << 20;

/// A received length prefix, refused when it cannot be a control message.
fn control_len(len: [u8; 8], me: usize, peer: usize) -> Result<usize> {
    let n = u64::from_le_bytes(len);
    if n > MAX_CONTROL {
        return Err(Error::peer(format!(
            "rank {me}: rank {peer} announced a control message of {n} bytes (limit {MAX_CONTROL}); the ranks \
             disagree on the protocol: were they all started with the same collbench version?"
        )));
    }
    Ok(n as usize)
}

/// Rank `r`'s parent (none for rank 0) and children, in ascending order, in the binomial tree rooted at
/// rank 0: the few peers every control exchange uses (`algorithm::peers::control` plans them).
pub(crate) fn tree(r: usize, n: usize) -> (Option<usize>, Vec<usize>) {
    let low = if r == 0 {
        n.next_power_of_two()
    } else {
        r & r.wrapping_neg()
    };
    let children = (0..)
        .map(|k| 1usize << k)
        .take_while(|&m| m < low && r + m < n)
        .map(|m| r + m)
        .collect();
    ((r != 0).then(|| r - low), children)
}

/// Sends `data` with its length in front.
fn send_framed<T: Transport + ?Sized>(t: &mut T, peer: usize, data: &[u8]) -> Result<()> {
    transport::send(t, peer, &(data.len() as u64).to_le_bytes())?;
    transport::send(t, peer, data)
}

/// Receives one length-prefixed message from `peer`.
fn recv_framed<T: Transport + ?Sized>(t: &mut T, peer: usize) -> Result<Vec<u8>> {
    let mut len = [0u8; 8];
    transport::recv(t, peer, &mut len)?;
    let mut buf = vec![0u8; control_len(len, t.rank(), peer)?];
    transport::recv(t, peer, &mut buf)?;
    Ok(buf)
}

/// Barrier up and down the binomial tree: 2 ceil(log2 n) rounds of one-byte messages over the tree's
/// n-1 pairs; no rank leaves before all arrived.
pub fn barrier<T: Transport + ?Sized>(t: &mut T) -> Result<()> {
    let (parent, children) = tree(t.rank(), t.size());
    let mut b = [0u8; 1];
    for &c in &children {
        transport::recv(t, c, &mut b)?;
    }
    if let Some(p) = parent {
        transport::send(t, p, &[1u8])?;
        transport::recv(t, p, &mut b)?;
    }
    for &c in children.iter().rev() {
        transport::send(t, c, &[1u8])?;
    }
    Ok(())
}

/// Gathers every rank's `data` on rank 0 up the binomial tree (lengths may differ). Other ranks get `None`.
///
/// Each rank forwards its subtree as one message of length-prefixed entries in rank order: its own, then
/// its children's subtrees, which cover the ranks that follow it.
pub fn gather<T: Transport + ?Sized>(t: &mut T, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
    let (n, r) = (t.size(), t.rank());
    let (parent, children) = tree(r, n);
    let mut blob = Vec::with_capacity(8 + data.len());
    blob.extend_from_slice(&(data.len() as u64).to_le_bytes());
    blob.extend_from_slice(data);
    for &c in &children {
        blob.extend_from_slice(&recv_framed(t, c)?);
    }
    if let Some(p) = parent {
        send_framed(t, p, &blob)?;
        return Ok(None);
    }
    split_entries(&blob, n).map(Some)
}

/// Splits rank 0's gathered message into the n entries it must hold.
fn split_entries(mut blob: &[u8], n: usize) -> Result<Vec<Vec<u8>>> {
    let bad = |what: String| {
        Error::peer(format!(
            "rank 0: the gathered control message {what}; the ranks disagree on the protocol: were they all \
             started with the same collbench version?"
        ))
    };
    let mut all = Vec::with_capacity(n);
    while !blob.is_empty() {
        let Some((len, rest)) = blob.split_first_chunk::<8>() else {
            return Err(bad(format!("ends inside the length of entry {}", all.len())));
        };
        let len = u64::from_le_bytes(*len);
        if len > rest.len() as u64 {
            return Err(bad(format!(
                "announces {len} bytes for rank {} but holds {}",
                all.len(),
                rest.len()
            )));
        }
        let (entry, rest) = rest.split_at(len as usize);
        all.push(entry.to_vec());
        blob = rest;
    }
    if all.len() != n {
        return Err(bad(format!("holds {} entries for {n} ranks", all.len())));
    }
    Ok(all)
}

/// Broadcasts rank 0's `data` to every rank down the binomial tree (length-prefixed) and returns it.
pub fn broadcast<T: Transport + ?Sized>(t: &mut T, data: &[u8]) -> Result<Vec<u8>> {
    let (parent, children) = tree(t.rank(), t.size());
    let buf = match parent {
        Some(p) => recv_framed(t, p)?,
        None => data.to_vec(),
    };
    // Farthest child first: it roots the largest subtree.
    for &c in children.iter().rev() {
        send_framed(t, c, &buf)?;
    }
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

    #[test]
    fn malformed_gathers_are_refused_not_misread() {
        let entry = |b: &[u8]| [&(b.len() as u64).to_le_bytes()[..], b].concat();
        let good = [entry(b"ab"), entry(b""), entry(b"c")].concat();
        assert_eq!(
            split_entries(&good, 3).unwrap(),
            [b"ab".to_vec(), vec![], b"c".to_vec()]
        );
        let e = split_entries(&good, 4).unwrap_err().to_string();
        assert!(e.contains("3 entries for 4 ranks"), "{e}");
        let e = split_entries(&good[..good.len() - 1], 3).unwrap_err().to_string();
        assert!(e.contains("announces 1 bytes for rank 2"), "{e}");
        let e = split_entries(&good[..4], 3).unwrap_err().to_string();
        assert!(e.contains("inside the length of entry 0"), "{e}");
    }
}
