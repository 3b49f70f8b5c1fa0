//! The data connection's opening and its answer: whatever a connection sends, the decoders return a verdict
//! (never panic), ask only for more bytes than they have, and admit nothing but an exact hello followed by a
//! proof that checks out.
#![no_main]

use collbench::transport::tcp::gate::Verdict;
use collbench::transport::tcp::handshake::{decode_ack, Hello, HELLO_LEN, OPENING_LEN};
use libfuzzer_sys::fuzz_target;

/// The token the fuzzed rank expects.
const TOKEN: [u8; 16] = *b"collbench-fuzz!!";
/// The listener's nonce (the handshake target varies it).
const NONCE: [u8; 16] = [0x5a; 16];

fuzz_target!(|data: &[u8]| {
    match Hello::admit(&NONCE, data, &TOKEN) {
        Verdict::Need(n) => assert!(n > data.len() && (n == HELLO_LEN || n == OPENING_LEN)),
        Verdict::Answer { need, .. } => assert!(data.len() == HELLO_LEN && need == OPENING_LEN),
        Verdict::Admit(h) => {
            assert_eq!(data.len(), OPENING_LEN);
            assert_eq!(&h.encode()[..], &data[..HELLO_LEN], "only an exact hello is admitted");
        }
        Verdict::Reject { why, .. } => assert!(!why.is_empty()),
    }
    if let Ok(h) = Hello::decode(data) {
        assert_eq!(&h.encode()[..], data);
    }
    let _ = decode_ack(data);
});
