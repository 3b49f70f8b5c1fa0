//! `collbench install-aliases DIR`: links under nccl-tests' program names, so scripts that run nccl-tests
//! run collbench.

use crate::alias::install::links;
use crate::cli::InstallAliasesArgs;
use crate::error::{Error, Result, EXIT_OK};

/// Makes the links in `args.dir` (created with `--mkdir` when missing, refused otherwise); an existing file of the same name is replaced only
/// with `--force`, or when it already links here.
pub fn install_aliases(args: &InstallAliasesArgs) -> Result<i32> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding collbench's own executable", e))?;
    for link in links(&args.dir, &exe, args.force, args.mkdir)? {
        crate::report::stdout::print(&format!("{}\n", link.display()))?;
    }
    Ok(EXIT_OK)
}
