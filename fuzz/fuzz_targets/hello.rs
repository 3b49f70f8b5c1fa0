//! The data connection's opening and its answer: whatever a connection sends, the decoders return a verdict
//! (never panic), ask only for more bytes than they have, and admit nothing but an exact, authenticated hello.
#![no_main]

use collbench::transport::tcp::gate::Verdict;
use collbench::transport::tcp::handshake::{decode_ack, Hello, HELLO_LEN};
use libfuzzer_sys::fuzz_target;

/// The token the fuzzed rank expects; the corpus holds hellos with it and with others.
const TOKEN: [u8; 16] = *b"collbench-fuzz!!";

fuzz_target!(|data: &[u8]| {
    match Hello::admit(data, &TOKEN) {
        Verdict::Need(n) => assert!(n > data.len() && n == HELLO_LEN),
        Verdict::Admit(h) => {
            assert_eq!(h.token, TOKEN);
            assert_eq!(&h.encode()[..], data, "only an exact hello is admitted");
        }
        Verdict::Reject { why, .. } => assert!(!why.is_empty()),
    }
    if let Ok(h) = Hello::decode(data, &TOKEN) {
        assert_eq!(&h.encode()[..], data);
    }
    let _ = decode_ack(data);
});
