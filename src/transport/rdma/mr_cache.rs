//! Cache of memory registrations keyed by buffer address and length.
//!
//! Registering memory pins it and costs a system call, so a buffer sent from again and again is registered
//! once. A lookup hits any entry that covers the asked range. The cache is bounded: past `max_entries` the
//! least recently used entry not in use by a pending operation is handed back for deregistration.
//!
//! A cached registration is only right while the memory under it is the same allocation: whoever frees
//! buffers that were sent from must call [`MrCache::clear`] (the transport's `forget_memory`) first.

/// One cached registration.
struct Entry<M> {
    addr: usize,
    len: usize,
    mr: M,
    last_use: u64,
    /// Pending operations reading from it.
    in_use: u32,
}

/// Registrations of type `M` (a memory-region handle) by address range.
pub struct MrCache<M> {
    entries: Vec<Entry<M>>,
    max_entries: usize,
    clock: u64,
}

impl<M> MrCache<M> {
    /// An empty cache keeping at most `max_entries` idle registrations.
    pub fn new(max_entries: usize) -> Self {
        MrCache {
            entries: Vec::new(),
            max_entries: max_entries.max(1),
            clock: 0,
        }
    }

    /// Number of registrations held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The registration covering `addr..addr+len`, marked in use, or `None` (then [`MrCache::insert`] one).
    pub fn acquire(&mut self, addr: usize, len: usize) -> Option<&M> {
        self.clock += 1;
        let clock = self.clock;
        let e = self
            .entries
            .iter_mut()
            .find(|e| e.addr <= addr && addr.saturating_add(len) <= e.addr + e.len)?;
        e.last_use = clock;
        e.in_use += 1;
        Some(&e.mr)
    }

    /// Adds a fresh registration of `addr..addr+len`, marked in use; returns the entries evicted to stay
    /// within bounds (the caller deregisters them).
    pub fn insert(&mut self, addr: usize, len: usize, mr: M) -> Vec<M> {
        self.clock += 1;
        self.entries.push(Entry {
            addr,
            len,
            mr,
            last_use: self.clock,
            in_use: 1,
        });
        let mut evicted = Vec::new();
        while self.entries.len() > self.max_entries {
            let victim = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.in_use == 0)
                .min_by_key(|(_, e)| e.last_use)
                .map(|(i, _)| i);
            match victim {
                Some(i) => evicted.push(self.entries.swap_remove(i).mr),
                None => break, // everything is in flight: over the bound until operations complete
            }
        }
        evicted
    }

    /// The most recently acquired registration of the range (after [`MrCache::acquire`] or insert).
    pub fn get(&self, addr: usize, len: usize) -> Option<&M> {
        self.entries
            .iter()
            .filter(|e| e.addr <= addr && addr.saturating_add(len) <= e.addr + e.len)
            .max_by_key(|e| e.last_use)
            .map(|e| &e.mr)
    }

    /// An operation on `addr..addr+len` completed: its registration may be evicted again.
    pub fn release(&mut self, addr: usize, len: usize) {
        if let Some(e) = self
            .entries
            .iter_mut()
            .filter(|e| e.in_use > 0 && e.addr <= addr && addr.saturating_add(len) <= e.addr + e.len)
            .max_by_key(|e| e.last_use)
        {
            e.in_use -= 1;
        }
    }

    /// Removes every registration (the caller deregisters them); for when buffers may have been freed.
    pub fn clear(&mut self) -> Vec<M> {
        self.entries.drain(..).map(|e| e.mr).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_covering_registration_is_reused() {
        let mut c = MrCache::new(4);
        assert!(c.acquire(1000, 100).is_none());
        assert!(c.insert(1000, 100, "a").is_empty());
        assert_eq!(c.acquire(1000, 100), Some(&"a"));
        assert_eq!(c.acquire(1050, 50), Some(&"a"), "a sub-range hits");
        assert!(c.acquire(1050, 51).is_none(), "one byte past the end misses");
        assert!(c.acquire(999, 2).is_none());
        assert_eq!(c.get(1010, 10), Some(&"a"));
    }

    #[test]
    fn eviction_takes_the_least_recently_used_idle_entry() {
        let mut c = MrCache::new(2);
        c.insert(0, 10, "a");
        c.insert(100, 10, "b");
        c.release(0, 10);
        c.release(100, 10);
        c.acquire(0, 10); // a is now newer than b, and in use
        c.release(0, 10);
        assert_eq!(c.insert(200, 10, "c"), ["b"]);
        assert_eq!(c.len(), 2);
        assert!(c.acquire(100, 10).is_none());
    }

    #[test]
    fn entries_in_use_are_never_evicted() {
        let mut c = MrCache::new(1);
        c.insert(0, 10, "a");
        assert!(c.insert(100, 10, "b").is_empty(), "both in flight: none can go");
        assert_eq!(c.len(), 2);
        c.release(0, 10);
        assert_eq!(c.insert(200, 10, "c"), ["a"]);
        let mut all = c.clear();
        all.sort();
        assert_eq!(all, ["b", "c"]);
        assert!(c.is_empty());
    }
}
