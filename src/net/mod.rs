//! What the machine's network looks like: interfaces and their addresses.

pub mod advice;
pub mod classify;
pub mod iface;
pub mod inventory;
