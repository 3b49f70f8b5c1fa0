//! `collbench compare OLD.json NEW.json`: every point of two runs side by side, with the change in time
//! and busbw and whether it is larger than the noise; exit 1 on a significant regression beyond the
//! threshold. The check to run after a network change (CNI, MTU, driver).
//!
//! [`input`] reads a results file, [`diff`] pairs points and decides, [`render`] writes the outputs.

pub mod cpu;
pub mod diff;
pub mod input;
pub mod render;
