//! What a listener says about the connections it dropped, in a few lines however many there were: the first
//! few are named as they happen, the rest are counted by source address and cause, and one summary follows.
//! A flood of strangers must not turn into a flood of log lines, nor an error message of megabytes.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::error::stderr;

/// Dropped connections named one by one, as they happen, before the rest are only counted.
pub const NAMED: usize = 8;
/// Groups (source and cause) a summary lists before it only counts the rest.
const GROUPS: usize = 6;
/// A reason is cut here: a decoder's message may quote what a stranger sent.
const WHY_MAX: usize = 160;

/// The connections one listener dropped.
pub struct Drops {
    /// Who is speaking, e.g. `rendezvous at 10.0.0.1:29500` or `rank 2 (host h2)`.
    who: String,
    total: usize,
    /// Count and first example of each (source, cause), in order of first appearance.
    groups: Vec<Group>,
    index: HashMap<(IpAddr, String), usize>,
}

struct Group {
    source: IpAddr,
    cause: String,
    count: usize,
    example: String,
}

impl Drops {
    /// An empty record for the listener of `who`.
    pub fn new(who: impl Into<String>) -> Self {
        Drops {
            who: who.into(),
            total: 0,
            groups: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Records a dropped connection; names it on stderr if it is one of the first [`NAMED`].
    pub fn note(&mut self, from: SocketAddr, why: &str) {
        let why = cut(&crate::error::escape(why));
        self.total += 1;
        if self.total <= NAMED {
            stderr!("collbench: {}: dropped a connection from {from}: {why}", self.who);
        }
        let key = (from.ip(), cause(&why));
        let i = *self.index.entry(key.clone()).or_insert_with(|| {
            self.groups.push(Group {
                source: key.0,
                cause: key.1,
                count: 0,
                example: format!("{from}: {why}"),
            });
            self.groups.len() - 1
        });
        self.groups[i].count += 1;
    }

    /// How many connections were dropped.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Says on stderr, in one line, what was dropped beyond the connections already named; nothing if none was.
    pub fn finish(&self) {
        if self.total > NAMED {
            stderr!(
                "collbench: {}: dropped {} connections in all ({NAMED} named above): {}",
                self.who,
                self.total,
                self.summary()
            );
        }
    }

    /// The dropped connections in a bounded line: counts per source and cause, largest first, each with its
    /// first example, then how many more.
    pub fn summary(&self) -> String {
        let mut order: Vec<&Group> = self.groups.iter().collect();
        // Stable: among equal counts, the first seen first.
        order.sort_by_key(|g| std::cmp::Reverse(g.count));
        let mut parts: Vec<String> = order
            .iter()
            .take(GROUPS)
            .map(|g| format!("{} from {} ({}; first {})", g.count, g.source, g.cause, g.example))
            .collect();
        let rest: usize = order.iter().skip(GROUPS).map(|g| g.count).sum();
        if rest > 0 {
            parts.push(format!(
                "and {rest} more from {} other source(s) or cause(s)",
                order.len() - GROUPS
            ));
        }
        parts.join("; ")
    }
}

/// `why` cut to [`WHY_MAX`] characters.
fn cut(why: &str) -> String {
    match why.char_indices().nth(WHY_MAX) {
        Some((i, _)) => format!("{}...", &why[..i]),
        None => why.to_string(),
    }
}

/// The cause of a drop: its reason with every number replaced by `N`, so drops that differ only in counts,
/// sizes or times are counted together.
fn cause(why: &str) -> String {
    let mut out = String::with_capacity(why.len());
    let mut in_num = false;
    for ch in why.chars() {
        let digit = ch.is_ascii_digit() || (in_num && ch == '.');
        if digit && !in_num {
            out.push('N');
        } else if !digit {
            out.push(ch);
        }
        in_num = digit;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_counted_by_source_and_cause_in_a_bounded_line() {
        let mut d = Drops::new("rank 0 (host h0)");
        for i in 0..5000u32 {
            let from = SocketAddr::from(([127, 0, 0, 1 + (i % 2) as u8], 10000 + (i % 50000) as u16));
            let why = if i % 10 == 0 {
                format!("closed after {} of 34 opening bytes", i % 7)
            } else {
                format!(
                    "sent 0 of 34 opening bytes within 5.{} s (half-open or too slow)",
                    i % 3
                )
            };
            d.note(from, &why);
        }
        for i in 0..20u8 {
            d.note(SocketAddr::from(([10, 0, 0, i], 1)), &"x".repeat(100_000));
        }
        assert_eq!(d.total(), 5020);
        let s = d.summary();
        assert!(s.len() < 3000, "{} characters: {s}", s.len());
        assert!(
            s.starts_with("2500 from 127.0.0.2 (sent N of N opening bytes within N s (half-open or too slow); first "),
            "{s}"
        );
        assert!(s.contains("; 2000 from 127.0.0.1 (sent N of N"), "{s}");
        assert!(
            s.contains("; 500 from 127.0.0.1 (closed after N of N opening bytes; first 127.0.0.1:"),
            "{s}"
        );
        assert!(s.ends_with("and 17 more from 17 other source(s) or cause(s)"), "{s}");
    }

    #[test]
    fn causes_differ_only_in_words() {
        assert_eq!(
            cause("sent 13 of 26 opening bytes within 5.0 s"),
            "sent N of N opening bytes within N s"
        );
        assert_eq!(cut(&"é".repeat(500)).chars().count(), WHY_MAX + 3);
    }
}
