//! What a connection to the rendezvous sends (preamble, then a length-prefixed JSON join) and what a rank reads
//! back: the decoders return a verdict or an error, never panic, and ask only for more bytes, within the limit.
#![no_main]

use collbench::transport::tcp::gate::Verdict;
use collbench::world::rendezvous::{admit_join, decode_reply};
use libfuzzer_sys::fuzz_target;

const TOKEN: [u8; 16] = *b"collbench-fuzz!!";

fuzz_target!(|data: &[u8]| {
    match admit_join(data, &TOKEN) {
        // Preamble (22 bytes) + length (4) + at most a 1 MiB frame.
        Verdict::Need(n) => assert!(n > data.len() && n <= 26 + (1 << 20), "need {n} after {}", data.len()),
        Verdict::Admit(j) => drop(j.info()),
        Verdict::Reject { why, .. } => assert!(!why.is_empty()),
    }
    let _ = decode_reply(data, "rank 1 (host fuzz)", "127.0.0.1:1");
});
