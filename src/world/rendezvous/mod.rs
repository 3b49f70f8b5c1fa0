//! The rendezvous: every rank connects, presents the job token, its endpoint and the options it was started
//! with; when all have arrived the service checks they agree and sends every rank the full table, or a
//! refusal that names the ranks and fields that differ. The table goes down a tree of ranks (see
//! [`super::relay`]): each rank hears a small welcome, and the rendezvous sends the table itself to four ranks.
//!
//! One file per job: `join_message` (what a rank tells the rendezvous), `wire` (the opening with its proofs,
//! the frames and the answers, as bytes), `service` (rank 0's side: admitting joins, refusing two jobs at one
//! address, answering every rank), `table` (the rank table and each rank's welcome, built by the service,
//! fetched and relayed by the ranks), `client` (a rank's side: connecting, joining, waiting for the welcome)
//! and `address` (resolving the rendezvous's address, and binding it on rank 0).

mod address;
mod client;
pub(super) mod join_message;
mod service;
mod table;
pub(super) mod wire;

pub use address::bind_root;
pub use client::{await_welcome, connect, exchange, join, send_join};
pub use join_message::{Join, Refusal};
pub use service::{make_room, serve};
pub use table::{answer, with_relay, Answer};
pub use wire::{admit_join, decode_reply};

// The MPI bootstrap, which exchanges joins itself, checks them the same way.
#[cfg(any(feature = "mpi", test))]
pub(crate) use crate::world::disagreement::disagreement;
