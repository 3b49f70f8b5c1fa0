//! `-h` is a short page and `--help` the full one, as nccl-tests' `-h` is about 20 lines: `-h` gives each
//! option's first sentence, and for `run` only its everyday options (nccl-tests' common flags, the ranks,
//! paths and memory); `--help` and the man pages give every option in full. Applied where the command line
//! is parsed ([`parse`]), so the generated man pages and docs/options.md keep the full text.

use clap::{Arg, Command, CommandFactory, FromArgMatches};

use super::Cli;

/// Parses `argv` as collbench's command line, with the short `-h` pages.
pub fn parse(argv: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    let mut cmd = Cli::command().mut_subcommands(shorten);
    let matches = cmd.try_get_matches_from_mut(argv)?;
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
}

/// The options `run -h` lists; every other one is in `run --help`.
const RUN_EVERYDAY: &[&str] = &[
    "help",
    "version",
    "minbytes",
    "maxbytes",
    "stepfactor",
    "collective",
    "datatype",
    "op",
    "np",
    "iters",
    "warmup_iters",
    "check",
    "timeout",
    "transport",
    "memory",
    "output_file",
];

/// A subcommand with its short help set: applied to every subcommand of the command line.
fn shorten(cmd: Command) -> Command {
    let everyday_only = cmd.get_name() == "run";
    let cmd = cmd.mut_args(|a| {
        let hidden = everyday_only && !RUN_EVERYDAY.contains(&a.get_id().as_str());
        short_arg(a).hide_short_help(hidden)
    });
    let all = cmd.get_arguments().filter(|a| !a.is_hide_set()).count();
    let said = if everyday_only {
        format!("The everyday options, in short: --help gives all {all} in full, and man collbench-run")
    } else {
        format!(
            "In short: --help gives every option in full, and man collbench-{}",
            cmd.get_name()
        )
    };
    // The long page has no such line: it is the full one.
    cmd.after_help(said).after_long_help("")
}

/// `a` with its first sentence as the short help and its whole text as the long one.
fn short_arg(a: Arg) -> Arg {
    let Some(full) = a.get_long_help().or(a.get_help()).map(ToString::to_string) else {
        return a;
    };
    let short = first_sentence(&full);
    if short.len() == full.len() {
        return a;
    }
    // A default the text states (clap's own are added by clap) stays on the short line.
    let default = full
        .find("[default: ")
        .and_then(|i| full[i..].find(']').map(|j| &full[i..=i + j]));
    let short = match default {
        Some(d) if !short.contains(d) => format!("{short} {d}"),
        _ => short.to_string(),
    };
    a.help(short).long_help(full)
}

/// The text up to its first full stop, colon, semicolon or parenthesis (whichever comes first), or all of it.
fn first_sentence(text: &str) -> &str {
    let ends = [". ", ": ", "; ", " ("];
    let end = ends.iter().filter_map(|e| text.find(e)).min().unwrap_or(text.len());
    text[..end].trim_end_matches('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sentence_ends_at_the_first_stop() {
        assert_eq!(first_sentence("Smallest size (bytes, or K). More."), "Smallest size");
        assert_eq!(first_sentence("Deadline: any wait; more"), "Deadline");
        assert_eq!(first_sentence("One sentence."), "One sentence");
        assert_eq!(first_sentence("Words"), "Words");
    }
}
