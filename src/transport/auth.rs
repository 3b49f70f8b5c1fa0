//! Proof of the job token without sending it, shared by the rendezvous and the data connections.
//!
//! Both sides of a connection send a fresh random nonce; each then proves it holds the token with an
//! HMAC-SHA256, keyed by the token, over both nonces, its role and what the connection claims (the
//! protocol, and for a data connection the ranks and stream). The accepting side proves first, and the
//! connecting side sends its own proof only once that proof checked out, so:
//! - a process squatting on an address learns the connecting side's nonce and nothing derived from the token;
//! - a proof is worth nothing elsewhere: the other side's nonce is fresh on every connection, and the role and
//!   claims bound into it keep a listener's proof from passing as a connector's, or one rank's as another's;
//! - proofs are checked in constant time (`Mac::verify_slice`).
//!
//! It authenticates the opening of a connection, not the bytes after it: a process that can sit between two
//! ranks and relay both directions is not kept out (that needs an encrypted channel, which collbench does not
//! have). A token derived from launcher variables is not a secret, so there the proof only keeps jobs apart.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// A per-job secret every connection must prove it holds.
pub type Token = [u8; 16];
/// Bytes of a nonce.
pub const NONCE_LEN: usize = 16;
/// Bytes of a proof (HMAC-SHA256).
pub const PROOF_LEN: usize = 32;

/// A fresh random value, one per connection and side.
pub type Nonce = [u8; NONCE_LEN];
/// What one side sends to show it holds the token.
pub type Proof = [u8; PROOF_LEN];

/// Which side of a connection a proof comes from; bound into the proof, so one side's cannot pass as the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The side that accepted the connection (rank 0's rendezvous, a data listener).
    Listener,
    /// The side that connected.
    Connector,
}

/// What a proof is bound to, besides the token: which protocol, both nonces, and the claims of the opening.
pub struct Binding<'a> {
    /// The protocol's magic (`CBRV`, `CBTH`): a proof for one protocol is no proof for the other.
    pub protocol: [u8; 4],
    /// The connecting side's nonce.
    pub connector: &'a Nonce,
    /// The accepting side's nonce.
    pub listener: &'a Nonce,
    /// What the opening claims (ranks, stream), as sent.
    pub claims: &'a [u8],
}

/// A fresh nonce from the operating system's random source.
pub fn nonce() -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    getrandom::getrandom(&mut n).expect("the OS random source is available");
    n
}

fn mac(token: &Token, role: Role, b: &Binding<'_>) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(token).expect("HMAC takes a key of any length");
    // Fixed-length fields first, the variable one last with its length: no two bindings encode alike.
    m.update(b"collbench proof v1");
    m.update(&b.protocol);
    m.update(&[match role {
        Role::Listener => 1,
        Role::Connector => 2,
    }]);
    m.update(b.connector);
    m.update(b.listener);
    m.update(&(b.claims.len() as u32).to_le_bytes());
    m.update(b.claims);
    m
}

/// The proof `role` sends for this binding.
pub fn prove(token: &Token, role: Role, b: &Binding<'_>) -> Proof {
    mac(token, role, b).finalize().into_bytes().into()
}

/// Whether `proof` is `role`'s proof for this binding, compared in constant time.
pub fn verify(token: &Token, role: Role, b: &Binding<'_>, proof: &[u8]) -> bool {
    mac(token, role, b).verify_slice(proof).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_only_for_its_token_role_nonces_and_claims() {
        let (t, nc, ns) = ([5u8; 16], nonce(), nonce());
        assert_ne!(nc, ns, "nonces are fresh");
        let b = |claims: &'static [u8], c: &Nonce, l: &Nonce| -> Proof {
            prove(
                &t,
                Role::Connector,
                &Binding {
                    protocol: *b"CBTH",
                    connector: c,
                    listener: l,
                    claims,
                },
            )
        };
        let p = b(b"rank 3", &nc, &ns);
        let bind = Binding {
            protocol: *b"CBTH",
            connector: &nc,
            listener: &ns,
            claims: b"rank 3",
        };
        assert!(verify(&t, Role::Connector, &bind, &p));
        assert!(!verify(&t, Role::Listener, &bind, &p), "the role is bound");
        assert!(!verify(&[6u8; 16], Role::Connector, &bind, &p), "the token is the key");
        assert_ne!(p, b(b"rank 2", &nc, &ns), "the claims are bound");
        assert_ne!(p, b(b"rank 3", &nc, &nonce()), "the listener's nonce is bound");
        assert_ne!(p, b(b"rank 3", &ns, &nc), "the nonces keep their places");
        let rv = Binding {
            protocol: *b"CBRV",
            ..bind
        };
        assert!(!verify(&t, Role::Connector, &rv, &p), "the protocol is bound");
        assert!(!verify(&t, Role::Connector, &bind, &p[..31]), "a short proof fails");
    }
}
