//! What a connection to the rendezvous sends (hello, proof, then a length-prefixed JSON join) and what a rank
//! reads back: the decoders return a verdict or an error, never panic, and ask only for more bytes, within the
//! limit.
#![no_main]

use collbench::transport::tcp::gate::Verdict;
use collbench::world::rendezvous::{admit_join, decode_reply};
use libfuzzer_sys::fuzz_target;

const TOKEN: [u8; 16] = *b"collbench-fuzz!!";
const NONCE: [u8; 16] = [0x5a; 16];

fuzz_target!(|data: &[u8]| {
    match admit_join(&NONCE, data, &TOKEN) {
        // Hello (22 bytes) + proof (33) + length (4) + at most a 1 MiB frame.
        Verdict::Need(n) => assert!(n > data.len() && n <= 59 + (1 << 20), "need {n} after {}", data.len()),
        Verdict::Answer { need, .. } => assert!(data.len() == 22 && need == 59),
        Verdict::Admit(j) => drop(j.info()),
        Verdict::Reject { why, .. } => assert!(!why.is_empty()),
    }
    let _ = decode_reply(data, "rank 1 (host fuzz)", "127.0.0.1:1");
});
