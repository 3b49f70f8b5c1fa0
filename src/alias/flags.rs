//! nccl-tests' command line (src/common.cu: getopt_long over `t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:
//! D:V:J:S:M:u:`) turned into `collbench run`'s, with nccl-tests' defaults. Every flag nccl-tests knows is
//! either carried over with its meaning or refused with why and what to use instead; nothing is silently
//! dropped. The environment (`NCCL_TESTS_MIN_BW`) and whether a launcher started this rank are injected.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// What the nccl-tests command line asks for.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// `-h`: print the usage and exit 0.
    Help,
    /// Run: `collbench run`'s arguments (without the program and verb), and notes for stderr.
    Run { args: Vec<String>, notes: Vec<String> },
}

/// Whether this machine runs NCCL on device memory or collbench's tcp path on host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A GPU, the cuda build and libnccl: NCCL's collectives on device buffers, as nccl-tests.
    Nccl,
    /// collbench's own tcp path on host buffers.
    Tcp,
}

/// nccl-tests' long option names, by their short letter.
const LONG: [(&str, char); 30] = [
    ("nthreads", 't'),
    ("ngpus", 'g'),
    ("minbytes", 'b'),
    ("maxbytes", 'e'),
    ("stepbytes", 'i'),
    ("stepfactor", 'f'),
    ("iters", 'n'),
    ("agg_iters", 'm'),
    ("warmup_iters", 'w'),
    ("run_cycles", 'N'),
    ("parallel_init", 'p'),
    ("check", 'c'),
    ("op", 'o'),
    ("datatype", 'd'),
    ("root", 'r'),
    ("blocking", 'z'),
    ("stream_null", 'y'),
    ("timeout", 'T'),
    ("cudagraph", 'G'),
    ("report_cputime", 'C'),
    ("report_timestamps", 'S'),
    ("output_file", 'J'),
    ("average", 'a'),
    ("local_register", 'R'),
    ("cta_policy", 'x'),
    ("device_implementation", 'D'),
    ("device_cta_count", 'V'),
    ("memory", 'M'),
    ("unalign", 'u'),
    ("per_iter_timing", 'I'),
];

/// Letters that take a value (all of nccl-tests' but `-h`); `K` is `--per_iter_skip`.
const WITH_VALUE: &str = "tgbeifnmwNpIKcodrzyTGCaRxDVJSMu";

/// The usage `-h` prints.
pub fn usage(program: &str) -> String {
    format!(
        "USAGE: {program} (collbench, answering to nccl-tests' name and flags)
\t[-b,--minbytes <min size in bytes>] [-e,--maxbytes <max size in bytes>] (default 32M each)
\t[-i,--stepbytes <increment size>] (default 1M) [-f,--stepfactor <increment factor>]
\t[-n,--iters <iteration count>] (20) [-w,--warmup_iters <count>] (1) [-m,--agg_iters <count>] (1)
\t[-N,--run_cycles <cycle count>] (1; 0, forever, is refused) [-c,--check <check iterations>] (1)
\t[-o,--op <sum/prod/min/max/avg/all>] [-d,--datatype <type/all>] [-r,--root <root>]
\t[-z,--blocking <0/1/2/3>] [-T,--timeout <seconds>] [-C,--report_cputime <0/1>]
\t[-S,--report_timestamps <0/1>] [-J,--output_file <file.json>] [-a,--average <0/1/2/3>] (1)
\t[-u,--unalign <elements>] [-I,--per_iter_timing <0/1>] [-K,--per_iter_skip <count>]
\t[-t,--nthreads <n>] [-g,--ngpus <n>]: one rank per process here; without a launcher n x n local ranks
\t[-p 0] [-y 0] [-G 0] [-R 0] [-D 0] [-M 0]: accepted at 0 only (see docs/nccl-tests.md)
\t[-h,--help]
NCCL_TESTS_MIN_BW=<GB/s>: fail (exit 7) when the average bus bandwidth is under 90% of it.
"
    )
}

/// Splits the command line into (letter, value) pairs as getopt_long does: `-b 8`, `-b8`, `--minbytes 8`,
/// `--minbytes=8`; `-h`/`--help` as ('h', "").
fn options(args: &[String]) -> Result<Vec<(char, String)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let (letter, inline) = if let Some(long) = a.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            if name == "help" {
                out.push(('h', String::new()));
                continue;
            }
            if name == "per_iter_skip" {
                ('K', value)
            } else {
                let Some(&(_, c)) = LONG.iter().find(|(n, _)| *n == name) else {
                    return Err(Error::usage(
                        format!("--{name}"),
                        "is not an nccl-tests flag; see -h for the flags, or use `collbench run`",
                    ));
                };
                (c, value)
            }
        } else if let Some(short) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            let mut chars = short.chars();
            let c = chars.next().expect("not empty");
            if c == 'h' {
                out.push(('h', String::new()));
                continue;
            }
            if !WITH_VALUE.contains(c) {
                return Err(Error::usage(
                    format!("-{c}"),
                    "is not an nccl-tests flag; see -h for the flags, or use `collbench run`",
                ));
            }
            let rest: String = chars.collect();
            (c, (!rest.is_empty()).then_some(rest))
        } else {
            return Err(Error::usage(
                a.clone(),
                "nccl-tests takes no positional arguments; flags only (see -h)",
            ));
        };
        let value = match inline {
            Some(v) => v,
            None => {
                let Some(v) = args.get(i) else {
                    return Err(Error::usage(format!("-{letter}"), "needs a value"));
                };
                i += 1;
                v.clone()
            }
        };
        out.push((letter, value));
    }
    Ok(out)
}

/// An integer as nccl-tests' `strtol(optarg, NULL, 0)` reads it (decimal, `0x` hex).
fn int(flag: char, v: &str) -> Result<i64> {
    let t = v.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => i64::from_str_radix(h, 16),
        None => t.parse(),
    };
    parsed.map_err(|_| Error::usage(format!("-{flag}"), format!("expects a whole number, got '{v}'")))
}

/// `-J`'s file as nccl-tests picks it: the name given, else `NAME.0`, `NAME.1`, ... the first that does not
/// exist (`exists` is injected); `None` when the name does not end in `.json` (nccl-tests writes nothing).
pub fn json_target(given: &str, exists: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    let ext = Path::new(given).extension()?.to_str()?;
    if !ext.eq_ignore_ascii_case("json") {
        return None;
    }
    let mut p = PathBuf::from(given);
    let mut n = 0;
    while exists(&p) && n < 10_000 {
        p = PathBuf::from(format!("{given}.{n}"));
        n += 1;
    }
    Some(p)
}

/// A flag nccl-tests has that collbench does not honour at this value: exit 2 with why and what instead.
fn refuse(flag: char, why: &str) -> Error {
    let long = LONG.iter().find(|(_, c)| *c == flag).map_or("", |(n, _)| n);
    Error::usage(format!("-{flag}/--{long}"), why)
}

/// `collbench run`'s arguments for nccl-tests' `args` run as `program` (which names the collective).
/// `env` reads the environment, `launched` says whether a launcher (mpirun, srun, ...) started this rank,
/// `exists` whether a file is there, `path` which path this machine runs.
pub fn translate(
    collective: &str,
    program: &str,
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    launched: bool,
    exists: &dyn Fn(&Path) -> bool,
    path: Backend,
) -> Result<Parsed> {
    // nccl-tests' defaults (src/common.cu), where they differ from `collbench run`'s.
    let mut min = "32M".to_string();
    let mut max = "32M".to_string();
    let mut step_bytes = "1M".to_string();
    let mut step_factor: i64 = 1;
    let (mut iters, mut warmup, mut check, mut average) =
        ("20".to_string(), "1".to_string(), "1".to_string(), "1".to_string());
    let (mut op, mut dtype, mut root) = ("sum".to_string(), "float".to_string(), "0".to_string());
    let (mut threads, mut gpus) = (1i64, 1i64);
    let mut run: Vec<String> = Vec::new();
    let mut notes = Vec::new();
    let mut timestamps = false;
    for (c, v) in options(args)? {
        match c {
            'h' => return Ok(Parsed::Help),
            't' => threads = int(c, &v)?,
            'g' => gpus = int(c, &v)?,
            'b' => min = v,
            'e' => max = v,
            'i' => step_bytes = v,
            'f' => step_factor = int(c, &v)?,
            'n' => iters = v,
            'w' => warmup = v,
            'c' => check = v,
            'a' => average = v,
            'o' => op = v,
            'd' => dtype = v,
            'r' => root = v,
            'm' => run.extend(["-m".into(), v]),
            'I' => run.extend(["-I".into(), v]),
            'K' => run.extend(["-K".into(), v]),
            'z' => run.extend(["-z".into(), v]),
            'u' => run.extend(["-u".into(), v]),
            'C' => run.extend(["-C".into(), v]),
            'T' => run.extend(["-T".into(), v]),
            'N' => {
                match int(c, &v)? {
                    0 => return Err(refuse(
                        'N',
                        "0 cycles (forever) is not run here: every run ends and reports; give a count (at most 100), \
                         or loop the command",
                    )),
                    n => run.extend(["--repeat".into(), n.to_string()]),
                }
            }
            'S' => timestamps = int(c, &v)? != 0,
            'J' => match json_target(&v, exists) {
                Some(p) => {
                    notes.push(format!("# Writing JSON output to {}", p.display()));
                    run.extend(["-J".into(), p.display().to_string()]);
                }
                None => notes.push(format!(
                    "collbench: note: -J {v}: not a .json name, so no file is written (as nccl-tests)"
                )),
            },
            'p' if int(c, &v)? == 0 => {}
            'p' => {
                return Err(refuse(
                    c,
                    "each rank is its own process here, so there is no thread to initialise in parallel; drop -p",
                ))
            }
            'y' if int(c, &v)? == 0 => {}
            'y' => {
                return Err(refuse(
                    c,
                    "collbench picks its own CUDA stream for the NCCL path; drop -y",
                ))
            }
            'G' if int(c, &v)? == 0 => {}
            'G' => {
                return Err(refuse(
                    c,
                    "CUDA graphs are not captured here; drop -G: the default -z 0 already queues the timed \
                     launches back to back and waits once, and -m N groups N calls per launch",
                ))
            }
            'R' if int(c, &v)? == 0 => {}
            'R' => return Err(refuse(c, "buffer registration with NCCL is not done here; drop -R")),
            'D' if int(c, &v)? == 0 => {}
            'D' => return Err(refuse(c, "NCCL's device API is not used here; drop -D")),
            'x' => {
                return Err(refuse(
                    c,
                    "the CTA policy is NCCL's; set NCCL_CTA_POLICY in the environment instead",
                ))
            }
            'V' => {
                return Err(refuse(
                    c,
                    "NCCL's device API is not used here, so it has no CTA count; drop -V",
                ))
            }
            'M' if int(c, &v)? == 0 => {}
            'M' => {
                return Err(refuse(
                    c,
                    "GPU memory use is not reported here; `collbench run` reports every rank's peak host memory",
                ))
            }
            other => return Err(Error::usage(format!("-{other}"), "is not an nccl-tests flag; see -h")),
        }
    }
    if threads < 1 || gpus < 1 {
        return Err(refuse('g', "-t and -g must be at least 1"));
    }
    let per_process = threads * gpus;
    if launched && per_process > 1 {
        return Err(refuse(
            if gpus > 1 { 'g' } else { 't' },
            &format!(
                "one GPU per rank and one rank per process here: start {per_process} ranks per node instead (e.g. \
                 mpirun --npernode {per_process}) and drop -t/-g"
            ),
        ));
    }
    if step_factor > 1 {
        run.extend(["-f".into(), step_factor.to_string()]);
    } else {
        run.extend(["-i".into(), step_bytes]);
    }
    run.extend([
        "-b".into(),
        min,
        "-e".into(),
        max,
        "-n".into(),
        iters,
        "-w".into(),
        warmup,
        "-c".into(),
        check,
        "-a".into(),
        average,
        "-o".into(),
        op,
        "-d".into(),
        dtype,
        "-r".into(),
        root,
        "--collective".into(),
        collective.into(),
        "--np".into(),
        per_process.to_string(),
        "--nccl-tests-table".into(),
        program.into(),
    ]);
    match path {
        Backend::Nccl => run.extend(["--transport".into(), "nccl".into(), "--memory".into(), "cuda".into()]),
        Backend::Tcp => run.extend(["--transport".into(), "tcp".into()]),
    }
    if timestamps {
        run.push("--nccl-tests-timestamps".into());
    }
    if let Some(bw) = env("NCCL_TESTS_MIN_BW") {
        let (gbs, whole) = atof(&bw);
        if !whole {
            notes.push(min_bw_note(&bw, gbs));
        }
        // One argument: a negative value as a separate word would read as a flag (`-1`).
        run.push(format!("--nccl-tests-min-bw={gbs}"));
    }
    Ok(Parsed::Run { args: run, notes })
}

/// `s` read as C's atof reads it, as nccl-tests reads `NCCL_TESTS_MIN_BW`: the longest leading number (after
/// white space), 0 when there is none; and whether that number was all of `s`.
fn atof(s: &str) -> (f64, bool) {
    let t = s.trim_start();
    // The longest prefix that is a number, among the first 64 bytes (no number of GB/s is longer); decimal
    // forms only (atof's hexadecimal ones are not worth a parser).
    let (value, len) = (1..=t.len().min(64))
        .rev()
        .filter(|&n| t.is_char_boundary(n))
        .find_map(|n| t[..n].parse::<f64>().ok().map(|v| (v, n)))
        .unwrap_or((0.0, 0));
    (value, len > 0 && t[len..].trim().is_empty())
}

/// The stderr note for a `NCCL_TESTS_MIN_BW` that is not a number, read (as nccl-tests does) as `gbs`.
fn min_bw_note(raw: &str, gbs: f64) -> String {
    let shown = crate::error::escape(raw);
    let effect = if gbs > 0.0 {
        format!("only its leading number, {gbs} GB/s, is the minimum")
    } else {
        format!("it reads as {gbs} GB/s, so the bandwidth check is off and any run passes it")
    };
    format!(
        "collbench: warning: NCCL_TESTS_MIN_BW={shown} is not a number of GB/s; read as nccl-tests reads it (C \
         atof), {effect}; set it to a number (a negative one means no minimum)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(args: &[&str], launched: bool) -> Result<Parsed> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        translate(
            "all_reduce",
            "all_reduce_perf",
            &args,
            &|k| (k == "NCCL_TESTS_MIN_BW").then(|| "12.5".to_string()),
            launched,
            &|p| p == Path::new("r.json") || p == Path::new("r.json.0"),
            Backend::Tcp,
        )
    }

    fn run_args(args: &[&str]) -> Vec<String> {
        match t(args, false).unwrap() {
            Parsed::Run { args, .. } => args,
            Parsed::Help => panic!("help"),
        }
    }

    fn value(run: &[String], flag: &str) -> Option<String> {
        run.iter().position(|a| a == flag).map(|i| run[i + 1].clone())
    }

    #[test]
    fn nccl_tests_defaults_and_its_common_command_line() {
        let d = run_args(&[]);
        for (f, v) in [
            ("-b", "32M"),
            ("-e", "32M"),
            ("-i", "1M"),
            ("-w", "1"),
            ("-n", "20"),
            ("-a", "1"),
            ("--np", "1"),
        ] {
            assert_eq!(value(&d, f).as_deref(), Some(v), "{f}: {d:?}");
        }
        assert!(d.contains(&"--nccl-tests-min-bw=12.5".to_string()), "{d:?}");
        let r = run_args(&[
            "-b",
            "8",
            "-e8G",
            "--stepfactor=2",
            "-g",
            "4",
            "--iters",
            "5",
            "-I",
            "1",
            "--per_iter_skip",
            "2",
        ]);
        assert_eq!(value(&r, "-f").as_deref(), Some("2"));
        assert_eq!(value(&r, "-i"), None, "a factor wins over -i, as in nccl-tests");
        assert_eq!(
            (value(&r, "-e").as_deref(), value(&r, "-n").as_deref()),
            (Some("8G"), Some("5"))
        );
        assert_eq!(
            (value(&r, "-I").as_deref(), value(&r, "-K").as_deref()),
            (Some("1"), Some("2"))
        );
        assert_eq!(
            value(&r, "--np").as_deref(),
            Some("4"),
            "no launcher: -g 4 is four local ranks"
        );
    }

    #[test]
    fn every_refusal_names_the_flag_and_exits_2() {
        for args in [
            &["-g", "8"][..],
            &["-t", "2"],
            &["-G", "1"],
            &["-R", "2"],
            &["-p", "1"],
            &["-y", "1"],
            &["-D", "1"],
            &["-x", "1"],
            &["-V", "8"],
            &["-M", "1"],
            &["-N", "0"],
            &["-q", "1"],
            &["--bogus", "1"],
            &["stray"],
            &["-b"],
        ] {
            let e = t(args, true).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}");
            let msg = e.to_string();
            assert!(msg.contains(&args[0].trim_start_matches('-')[..1]), "{args:?}: {msg}");
        }
        let g = t(&["-g", "8"], true).unwrap_err().to_string();
        assert!(g.contains("start 8 ranks per node"), "{g}");
        assert_eq!(t(&["-h"], true).unwrap(), Parsed::Help);
        // At 0 they mean what collbench does anyway.
        assert!(t(
            &["-G", "0", "-R", "0", "-p", "0", "-y", "0", "-M", "0", "-D", "0"],
            true
        )
        .is_ok());
    }

    /// The `--nccl-tests-min-bw=` argument and the notes for `NCCL_TESTS_MIN_BW=value`.
    fn min_bw(value: &str) -> (Option<String>, Vec<String>) {
        let parsed = translate(
            "all_reduce",
            "all_reduce_perf",
            &[],
            &|k| (k == "NCCL_TESTS_MIN_BW").then(|| value.to_string()),
            false,
            &|_| false,
            Backend::Tcp,
        );
        let Ok(Parsed::Run { args, notes }) = parsed else {
            panic!("{parsed:?}")
        };
        let arg = args
            .iter()
            .find_map(|a| a.strip_prefix("--nccl-tests-min-bw=").map(str::to_string));
        (arg, notes)
    }

    #[test]
    fn a_min_bw_that_is_not_a_number_is_said_naming_the_variable_and_its_value() {
        // A typo (letter O for zero) once turned the gate off without a word.
        let (arg, notes) = min_bw("3OO");
        assert_eq!(arg.as_deref(), Some("3"), "atof's leading number, as nccl-tests");
        assert!(
            notes.len() == 1 && notes[0].contains("NCCL_TESTS_MIN_BW=3OO") && notes[0].contains("3 GB/s"),
            "{notes:?}"
        );
        let (arg, notes) = min_bw("fast");
        assert_eq!(arg.as_deref(), Some("0"));
        assert!(
            notes.len() == 1 && notes[0].contains("NCCL_TESTS_MIN_BW=fast") && notes[0].contains("check is off"),
            "{notes:?}"
        );
        // Numbers, negative ones (nccl-tests' "no minimum") included, pass without a word.
        for (v, want) in [("12.5", "12.5"), (" 300 ", "300"), ("-1", "-1"), ("1e2", "100")] {
            assert_eq!(min_bw(v), (Some(want.to_string()), vec![]), "{v}");
        }
        // A line break in the value cannot forge a line of stderr.
        let (_, notes) = min_bw("1\nFAKE");
        assert!(!notes[0].contains('\n'), "{notes:?}");
    }

    #[test]
    fn json_files_are_never_overwritten_and_only_json_is_written() {
        let r = run_args(&["-J", "r.json"]);
        assert_eq!(value(&r, "-J").as_deref(), Some("r.json.1"));
        assert_eq!(value(&run_args(&["-J", "x.csv"]), "-J"), None);
        let s = run_args(&["-S", "1", "-N", "3"]);
        assert!(s.contains(&"--nccl-tests-timestamps".to_string()));
        assert_eq!(value(&s, "--repeat").as_deref(), Some("3"));
    }
}
