//! The stand-in for a kind of path whose feature this build lacks: such a path is refused where
//! `--transport` is parsed, and this says so again if one is reached.

use super::{Kind, Open, Opening, Staging};
use crate::bench::{Outcome, Sweep};
use crate::error::{Error, Result};
use crate::options::{Options, PathKind};
use crate::session::Session;

/// The stand-in for `kind`'s file.
pub(super) fn unit(kind: &PathKind) -> Box<dyn Kind> {
    let why = kind.clone().built().err();
    Box::new(NotBuilt {
        name: kind.to_string(),
        why: why.unwrap_or_else(|| format!("{kind}: this build does not have its feature")),
    })
}

/// A kind this build lacks, and why.
struct NotBuilt {
    name: String,
    why: String,
}

impl Kind for NotBuilt {
    fn open(&self, _at: &mut Opening<'_>, _opts: &Options) -> Result<Box<dyn Open>> {
        Ok(Box::new(NotBuilt {
            name: self.name.clone(),
            why: self.why.clone(),
        }))
    }
}

impl Open for NotBuilt {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn sweep(&mut self, _sess: &mut Session, _staging: &Staging, _s: Sweep<'_>) -> Result<Outcome> {
        Err(Error::usage("--transport", self.why.clone()))
    }
}
