//! What the machine's network looks like: interfaces and their addresses.

pub mod iface;
