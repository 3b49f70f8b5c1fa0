//! `collbench run`'s options: an argv split out of the input (one argument per line) goes through clap and
//! validation; either it is refused with an error naming a flag, or the options it gives are usable.
#![no_main]

use clap::Parser;
use collbench::cli::{Cli, Command};
use collbench::options::Options;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let argv = ["collbench", "run"].into_iter().chain(text.split('\n'));
    let Ok(cli) = Cli::try_parse_from(argv) else { return };
    let Command::Run(args) = cli.command else { return };
    match Options::from_cli(&args) {
        Ok(opts) => {
            let sizes = opts.sweep.sizes.sizes();
            assert!(!sizes.is_empty());
            assert!(sizes.windows(2).all(|w| w[0] < w[1]), "sizes grow");
            let _ = opts.agreement().to_wire();
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
