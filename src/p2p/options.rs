//! `collbench p2p`'s options, validated from its flags (naming the flag in every error).

use super::{P2pCommand, P2pConfig, MAX_BYTES, MAX_ITERS, MAX_WINDOW};
use crate::cli::P2pArgs;
use crate::error::{Error, Result};
use crate::options::{own_path, Options};
use crate::sizes::parse_size;

/// The command `args` ask for; errors name the flag.
pub fn command(args: &P2pArgs) -> Result<P2pCommand> {
    let (opts, cfg) = options(args)?;
    Ok(P2pCommand {
        opts,
        cfg,
        json: args.out.output_file.clone(),
        force: args.out.force,
        units: crate::flags::units_flag(&args.units)?,
    })
}

/// The session options and configuration the flags ask for; errors name the flag. `--pair` is checked
/// against `--np` here, and against the launcher's world once ranks know it.
fn options(args: &P2pArgs) -> Result<(Options, P2pConfig)> {
    let opts = own_path::options(&own_path::PathFlags {
        command: "p2p",
        np: args.np,
        transport: &args.transport,
        iface: args.iface.as_deref(),
        deadlines: &args.deadlines,
    })?;
    let pair = parse_pair(&args.pair)?;
    let size = |flag: &str, v: &str| -> Result<usize> {
        let b = parse_size(v).map_err(|e| Error::usage(flag, e))?;
        if b > MAX_BYTES {
            return Err(Error::usage(flag, format!("must be at most 1G (got {v})")));
        }
        Ok(b as usize)
    };
    let (min_bytes, max_bytes) = (
        size("-b/--minbytes", &args.minbytes)?,
        size("-e/--maxbytes", &args.maxbytes)?,
    );
    if min_bytes > max_bytes {
        return Err(Error::usage(
            "-b/--minbytes",
            format!("{} is above -e/--maxbytes {}", args.minbytes, args.maxbytes),
        ));
    }
    for (flag, v, lo) in [
        ("-n/--iters", args.iters, 1),
        ("-w/--warmup_iters", args.warmup_iters, 0),
    ] {
        if !(lo..=MAX_ITERS).contains(&v) {
            return Err(Error::usage(
                flag,
                format!("must be between {lo} and {MAX_ITERS} (got {v})"),
            ));
        }
    }
    if !(1..=MAX_WINDOW).contains(&args.window) {
        return Err(Error::usage(
            "--window",
            format!("must be between 1 and {MAX_WINDOW} (got {})", args.window),
        ));
    }
    let cfg = P2pConfig {
        pair,
        min_bytes,
        max_bytes,
        iters: args.iters,
        warmup: args.warmup_iters,
        window: args.window,
    };
    Ok((opts, cfg))
}

/// `A,B`: two different ranks.
pub(super) fn parse_pair(s: &str) -> Result<(usize, usize)> {
    let bad = || {
        Error::usage(
            "--pair",
            format!("'{s}' is not two different ranks: give A,B such as 0,1"),
        )
    };
    let (a, b) = s.split_once(',').ok_or_else(bad)?;
    let (a, b): (usize, usize) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a == b {
        return Err(bad());
    }
    Ok((a, b))
}
