//! Some of a transport's ranks as a transport of their own: rank `i` here is rank `members[i]` of the one
//! beneath. A preflight that found a host it cannot send full-sized frames to goes on measuring the others
//! over this, so nothing it sends or gathers ever waits on that host.

use super::{Request, Transport};
use crate::error::Result;

/// `members` of `inner`, renumbered from 0 in the order given.
pub struct Subset<'a, T: Transport + ?Sized> {
    inner: &'a mut T,
    members: Vec<usize>,
    me: usize,
}

impl<'a, T: Transport + ?Sized> Subset<'a, T> {
    /// The subset holding `members` (ranks of `inner`), or `None` when this rank is not one of them.
    pub fn new(inner: &'a mut T, members: Vec<usize>) -> Option<Self> {
        let me = members.iter().position(|&r| r == inner.rank())?;
        Some(Subset { inner, members, me })
    }

    /// Rank `r` of the subset as a rank of the transport beneath.
    pub fn outer(&self, r: usize) -> usize {
        self.members[r]
    }
}

impl<T: Transport + ?Sized> Transport for Subset<'_, T> {
    fn rank(&self) -> usize {
        self.me
    }
    fn size(&self) -> usize {
        self.members.len()
    }
    fn path(&self) -> String {
        self.inner.path()
    }
    unsafe fn post_send(&mut self, peer: usize, ptr: *const u8, len: usize) -> Result<Request> {
        let p = self.members[peer];
        // SAFETY: the caller's guarantee for `ptr..ptr+len` is passed on unchanged.
        unsafe { self.inner.post_send(p, ptr, len) }
    }
    unsafe fn post_recv(&mut self, peer: usize, ptr: *mut u8, len: usize) -> Result<Request> {
        let p = self.members[peer];
        // SAFETY: the caller's guarantee for `ptr..ptr+len` is passed on unchanged.
        unsafe { self.inner.post_recv(p, ptr, len) }
    }
    fn wait(&mut self, req: Request) -> Result<()> {
        self.inner.wait(req)
    }
    fn wait_all(&mut self) -> Result<()> {
        self.inner.wait_all()
    }
    fn pending(&self) -> usize {
        self.inner.pending()
    }
    fn forget_memory(&mut self) {
        self.inner.forget_memory()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank `rank` of `size`, recording the peer of every post.
    struct Peers {
        rank: usize,
        size: usize,
        posted: Vec<usize>,
    }

    impl Transport for Peers {
        fn rank(&self) -> usize {
            self.rank
        }
        fn size(&self) -> usize {
            self.size
        }
        fn path(&self) -> String {
            "tcp@test".into()
        }
        unsafe fn post_send(&mut self, peer: usize, _: *const u8, _: usize) -> Result<Request> {
            self.posted.push(peer);
            Ok(Request(0, 0))
        }
        unsafe fn post_recv(&mut self, peer: usize, _: *mut u8, _: usize) -> Result<Request> {
            self.posted.push(peer);
            Ok(Request(0, 0))
        }
        fn wait(&mut self, _: Request) -> Result<()> {
            Ok(())
        }
        fn wait_all(&mut self) -> Result<()> {
            Ok(())
        }
        fn pending(&self) -> usize {
            0
        }
    }

    #[test]
    fn a_subset_renumbers_its_members_and_posts_to_them_only() {
        let mut t = Peers {
            rank: 3,
            size: 4,
            posted: Vec::new(),
        };
        assert!(Subset::new(&mut t, vec![0, 1]).is_none(), "rank 3 is not a member");
        let mut s = Subset::new(&mut t, vec![0, 1, 3]).unwrap();
        assert_eq!((s.rank(), s.size(), s.outer(1)), (2, 3, 1));
        let buf = [0u8; 4];
        let mut into = [0u8; 4];
        // SAFETY: the recording transport never touches the buffers.
        unsafe {
            let _ = s.post_send(0, buf.as_ptr(), 4).unwrap();
            let _ = s.post_recv(1, into.as_mut_ptr(), 4).unwrap();
        }
        assert_eq!(t.posted, [0, 1]);
    }
}
