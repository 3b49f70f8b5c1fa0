//! Tests of the command line as clap parses it.

use clap::error::ErrorKind;
use clap::CommandFactory;

use super::*;

fn run(args: &[&str]) -> RunArgs {
    let argv = ["collbench", "run"].iter().chain(args);
    match Cli::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .command
    {
        Command::Run(r) => *r,
        other => panic!("{args:?} parsed as {other:?}"),
    }
}

#[test]
fn clap_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn no_subcommand_prints_help_and_exits_2() {
    let err = Cli::try_parse_from(["collbench"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand);
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("run"), "{err}");
}

#[test]
fn nccl_tests_short_and_long_names_parse() {
    let short = run(&[
        "-b", "1K", "-e", "1M", "-f", "4", "-n", "7", "-w", "3", "-c", "0", "-o", "max", "-d", "half", "-r", "2", "-a",
        "1", "-T", "9", "-J", "x.json",
    ]);
    let long = run(&[
        "--minbytes",
        "1K",
        "--maxbytes",
        "1M",
        "--stepfactor",
        "4",
        "--iters",
        "7",
        "--warmup_iters",
        "3",
        "--check",
        "0",
        "--op",
        "max",
        "--datatype",
        "half",
        "--root",
        "2",
        "--average",
        "1",
        "--timeout",
        "9",
        "--output_file",
        "x.json",
    ]);
    let dashed = run(&[
        "--min-bytes",
        "1K",
        "--max-bytes",
        "1M",
        "--step-factor",
        "4",
        "--iters",
        "7",
        "--warmup-iters",
        "3",
        "--check",
        "0",
        "--op",
        "max",
        "--dtype",
        "half",
        "--root",
        "2",
        "--average",
        "1",
        "--timeout",
        "9",
        "--output-file",
        "x.json",
    ]);
    for r in [&short, &long, &dashed] {
        assert_eq!(
            (r.minbytes.as_str(), r.maxbytes.as_str(), r.stepfactor),
            ("1K", "1M", Some(4))
        );
        assert_eq!((r.iters, r.warmup_iters, r.check, r.root), (7, 3, 0, 2));
        assert_eq!(
            (r.op.clone(), r.datatype.clone()),
            (vec!["max".to_string()], vec!["half".to_string()])
        );
        assert_eq!((r.average.as_str(), r.deadlines.timeout), ("1", 9.0));
        assert_eq!(r.out.output_file, Some(PathBuf::from("x.json")));
    }
}

#[test]
fn lists_split_on_commas_and_accumulate() {
    let r = run(&["-d", "float,half", "-d", "double", "--collective", "all"]);
    assert_eq!(r.datatype, ["float", "half", "double"]);
    assert_eq!(r.collective, ["all"]);
    // The default list is split the same way as a typed one.
    assert_eq!(run(&[]).collective, ["all_reduce", "all_gather"]);
}

#[test]
fn help_states_every_default() {
    let mut cmd = Cli::command();
    let run = cmd.find_subcommand_mut("run").unwrap();
    for arg in run.get_arguments() {
        let id = arg.get_id().as_str();
        if arg.get_action().takes_values() && !arg.is_hide_set() && !["help", "version"].contains(&id) {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                !arg.get_default_values().is_empty() || help.contains("[default: "),
                "--{id}: {help}"
            );
        }
    }
}
