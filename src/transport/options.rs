//! The path options' part that reads the flags (`--transport`, `--line-rate`), validated naming the flag;
//! the kinds of path themselves are [`super::path`]'s.

use super::path::{PathKind, PathOptions};
use crate::cli::LinkArgs;
use crate::error::{Error, Result};
use crate::flags::parse_list;

impl PathOptions {
    /// Validates `--transport` and `--line-rate` of `link`, with `--reference` as given.
    pub fn from_cli(link: &LinkArgs, reference: Option<String>) -> Result<PathOptions> {
        // `all` means every kind of path this build has.
        let transports = parse_list("--transport", &link.transport, &PathKind::all())?;
        let line_rate_gbit = match link.line_rate {
            Some(r) if !(r.is_finite() && r > 0.0) => {
                return Err(Error::usage(
                    "--line-rate",
                    format!("must be a positive rate in Gbit/s (got {r})"),
                ))
            }
            r => r,
        };
        Ok(PathOptions {
            transports,
            reference,
            line_rate_gbit,
        })
    }
}
