//! The mutual proof of the job token, both protocols: the first 16 bytes are the listener's nonce, the rest what
//! a connection sends (or, for the connector's side, the challenge it reads). The decoders never panic, answer a
//! hello only with a challenge that proves the token, and admit only an opening whose proof checks out, which no
//! input without the token can make: every admitted input is re-checked here against the proof itself.
#![no_main]

use collbench::transport::auth::{self, Binding, Role, NONCE_LEN};
use collbench::transport::tcp::gate::Verdict;
use collbench::transport::tcp::handshake::{answer_challenge, Hello, CHALLENGE_LEN, HELLO_LEN, OPENING_LEN};
use collbench::world::rendezvous::admit_join;
use libfuzzer_sys::fuzz_target;

const TOKEN: [u8; 16] = *b"collbench-fuzz!!";

fuzz_target!(|data: &[u8]| {
    let mut nonce = [0u8; NONCE_LEN];
    let n = data.len().min(NONCE_LEN);
    nonce[..n].copy_from_slice(&data[..n]);
    let b = &data[n..];

    match Hello::admit(&nonce, b, &TOKEN) {
        Verdict::Need(need) => assert!(need > b.len() && (need == HELLO_LEN || need == OPENING_LEN)),
        Verdict::Answer { send, need } => {
            assert_eq!((b.len(), need, send.len()), (HELLO_LEN, OPENING_LEN, CHALLENGE_LEN));
            // The challenge proves the token to the connector that sent this hello.
            let h = Hello::decode(b).expect("an answered hello decodes");
            assert!(answer_challenge(&TOKEN, &h, &send).is_ok());
            assert!(
                answer_challenge(&[0; 16], &h, &send).is_err(),
                "the proof is the token's"
            );
        }
        Verdict::Admit(h) => {
            assert_eq!(b.len(), OPENING_LEN);
            assert_eq!(b[HELLO_LEN], 1);
            let wire = h.encode();
            let bind = Binding {
                protocol: *b"CBTH",
                connector: &h.nonce,
                listener: &nonce,
                claims: &wire[..HELLO_LEN - NONCE_LEN],
            };
            assert!(auth::verify(&TOKEN, Role::Connector, &bind, &b[HELLO_LEN + 1..]));
        }
        Verdict::Reject { why, .. } => assert!(!why.is_empty()),
    }
    // The connector's side: a challenge read from whoever answered.
    if let Ok(h) = Hello::decode(
        &[
            b"CBTH\x03\x00".as_slice(),
            &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0],
            &nonce,
        ]
        .concat(),
    ) {
        if let Ok(proof) = answer_challenge(&TOKEN, &h, b) {
            assert_eq!(b.len(), CHALLENGE_LEN);
            assert_eq!(proof[0], 1);
        }
    }
    match admit_join(&nonce, b, &TOKEN) {
        Verdict::Need(need) => assert!(need > b.len() && need <= 22 + 33 + 4 + (1 << 20)),
        Verdict::Answer { send, need } => assert!(b.len() == 22 && need == 22 + 33 + 4 && send.len() == 54),
        Verdict::Admit(j) => drop(j.info()),
        Verdict::Reject { why, .. } => assert!(!why.is_empty()),
    }
});
