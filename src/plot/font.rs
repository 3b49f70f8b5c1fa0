//! The one font charts use, compiled into the binary so PNG text needs no fontconfig or freetype.

use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

use crate::error::{Error, Result};

/// Registers DejaVu Sans as plotters' `sans-serif` family, once per process. plotters keeps its font
/// table process-wide, so this is the one place that sets it; later calls reuse the first outcome.
pub fn ensure_registered() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok =
        *REGISTERED.get_or_init(|| register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular()).is_ok());
    if ok {
        Ok(())
    } else {
        // Only a corrupt build can get here: the bytes are the dejavu crate's own font file.
        Err(Error::io(
            "loading the embedded chart font",
            std::io::Error::other("DejaVu Sans could not be parsed; rebuild collbench"),
        ))
    }
}
