//! The man pages' sections clap does not generate: EXIT STATUS, ENVIRONMENT, EXAMPLES and SEE ALSO, and
//! the roff spelling of the Markdown the help text uses (`code` spans become bold).

use super::environment::{GROUPS, PRECEDENCE, VARS};

/// Exit statuses, as the README's "Exit codes and failures" table gives them (tests/docgen.rs checks
/// that the README lists every code).
pub const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Every point ran and every element was right; `preflight`: PASS or WARN; `pairwise`, `gpu-matrix`: nothing named; `selftest`: whatever its ratios (a `BELOW` row is information about this machine, not a failure: `-J`'s `status` says which rows)."),
    ("1", "Wrong data in a point; `compare`: a significant regression; `preflight`: a check failed; `pairwise`, `gpu-matrix`: a slow host, link or pair named."),
    ("2", "Bad command line, launcher environment or options; ranks started with different options (nothing was measured)."),
    ("3", "A peer, a connection or a deadline failed."),
    ("4", "A local I/O error, such as an output file that cannot be written."),
    ("7", "Under an nccl-tests name only: wrong data or an average bus bandwidth under 90% of `NCCL_TESTS_MIN_BW`, as nccl-tests exits."),
    ("128+N", "`run --np`: the launcher got signal N (SIGTERM 143, SIGINT 130) and stopped its ranks; output files keep what was measured, with `complete` false."),
];

/// Examples per subcommand (`""` is the top-level page): what it does, then the command.
fn examples(sub: &str) -> &'static [(&'static str, &'static str)] {
    match sub {
        "" => &[
            ("Four local ranks, the default sweep (all_reduce and all_gather, 8 B to 64 MiB):", "collbench run"),
            ("Is the network fit for a job? PASS, WARN or FAIL:", "collbench preflight --np 2"),
            ("Install nccl-tests' program names:", "collbench install-aliases /usr/local/bin"),
        ],
        "run" => &[
            ("Two local ranks, a short sweep, results kept as JSON:", "collbench run --np 2 -b 8 -e 64K -n 2 -w 1 -J out.json"),
            ("Two hosts by hand (the same command on host1 with RANK=1):", "RANK=0 WORLD_SIZE=2 MASTER_ADDR=host0 COLLBENCH_JOB_TOKEN=$(cat token) collbench run -e 16M"),
            ("Under OpenMPI (two slots per host: OpenMPI 4 gives `-H n1,n2` one each), two paths side by side with the comparison table:", "mpirun -np 4 -H n1:2,n2:2 collbench run --transport tcp@eth0,tcp@ib0 -e 1G"),
            ("On GPUs through NCCL (a build with --features cuda):", "collbench run --transport nccl --memory cuda --collective all_reduce -e 1G"),
        ],
        "info" => &[("Interfaces, RDMA ports, GPUs and CPU limits of this host, with advice:", "collbench info")],
        "preflight" => &[
            ("The default plan on two local ranks:", "collbench preflight --np 2"),
            ("Against expectations and a saved baseline, with JUnit for CI:", "collbench preflight --expect launch/preflight-expect.toml --baseline before.json --junit preflight.xml -J after.json"),
        ],
        "pairwise" => &[
            ("Every pair of three local ranks:", "collbench pairwise --np 3 --bytes 64K -n 2 --lat-iters 20"),
            ("Every pair of hosts under Slurm, over RDMA:", "srun --nodes=8 --ntasks-per-node=1 collbench pairwise --transport rdma@mlx5_0"),
        ],
        "p2p" => &[
            ("Latency and bandwidth between two local ranks, as osu_latency and osu_bw print them:", "collbench p2p"),
            ("Between ranks 0 and 5 of a job, in Gbit/s:", "mpirun -np 8 collbench p2p --pair 0,5 --units gbit"),
        ],
        "compare" => &[("Before and after a change, as Markdown too:", "collbench compare before.json after.json --threshold 5 --markdown diff.md")],
        "model" => &[("Fit two runs and predict 64 ranks:", "collbench model run-2.json run-3.json --target-ranks 64")],
        "plot" => &[("SVG charts of a saved run:", "collbench plot out.json --out charts --format svg")],
        "selftest" => &[("The CPU reduction kernels against memory bandwidth:", "collbench selftest --bytes 64M")],
        "gpu-matrix" => &[("Copy bandwidth between every GPU pair of this node:", "collbench gpu-matrix --bytes 256M -n 5")],
        "completions" => &[
            ("Bash completions for the current user:", "mkdir -p ~/.local/share/bash-completion/completions && collbench completions bash > ~/.local/share/bash-completion/completions/collbench"),
            ("Zsh completions (with fpath+=~/.zfunc in ~/.zshrc):", "mkdir -p ~/.zfunc && collbench completions zsh > ~/.zfunc/_collbench"),
        ],
        "install-aliases" => &[("nccl-tests' names on the PATH:", "collbench install-aliases /usr/local/bin")],
        _ => &[],
    }
}

/// Every page's SEE ALSO: the other collbench pages, the launchers, and the docs.
fn see_also(sub: &str, subcommands: &[String]) -> String {
    let mut pages: Vec<String> = std::iter::once("collbench".to_string())
        .chain(subcommands.iter().map(|s| format!("collbench-{s}")))
        .filter(|p| *p != page_name(sub))
        .map(|p| format!("\\fB{p}\\fR(1)"))
        .collect();
    pages.extend(["\\fBmpirun\\fR(1)", "\\fBsrun\\fR(1)", "\\fBkubectl\\fR(1)"].map(String::from));
    format!(
        ".SH \"SEE ALSO\"\n{}\n.PP\n{}\n",
        pages.join(", "),
        text(
            "The docs/ directory of the source: `docs/running.md` (launchers), `docs/interface.md` (choosing the \
              interface), `docs/environment.md`, `docs/options.md`, `docs/output.md` (every column and JSON field), \
              `docs/validator.md`, `docs/kubernetes.md`, `docs/nccl-tests.md`."
        )
    )
}

fn page_name(sub: &str) -> String {
    if sub.is_empty() {
        "collbench".into()
    } else {
        format!("collbench-{sub}")
    }
}

/// The four sections for the page of subcommand `sub` (`""`: the top-level page), in roff.
pub fn extra(sub: &str, subcommands: &[String]) -> String {
    let mut s = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in EXIT_STATUS {
        s.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", escape(code), text(meaning)));
    }
    s.push_str(".SH ENVIRONMENT\n");
    s.push_str(&format!("{}\n", text(PRECEDENCE)));
    for g in GROUPS {
        s.push_str(&format!(".SS \"{}\"\n", escape(g.title())));
        for v in VARS.iter().filter(|v| v.group == g) {
            s.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", escape(v.name), text(v.meaning)));
        }
    }
    let ex = examples(sub);
    if !ex.is_empty() {
        s.push_str(".SH EXAMPLES\n");
        for (what, cmd) in ex {
            s.push_str(&format!(
                ".PP\n{}\n.PP\n.RS 4\n.EX\n{}\n.EE\n.RE\n",
                text(what),
                escape(cmd)
            ));
        }
    }
    s.push_str(&see_also(sub, subcommands));
    s
}

/// Escapes plain text for roff: backslashes, hyphens (so they are not hyphenation points), quotes, and a
/// leading dot or apostrophe that would read as a request.
pub fn escape(s: &str) -> String {
    let body = s.replace('\\', "\\e").replace('-', "\\-").replace('\'', "\\*(Aq");
    if body.starts_with('.') {
        format!("\\&{body}")
    } else {
        body
    }
}

/// Escapes `s` and turns its Markdown `code` spans into bold.
pub fn text(s: &str) -> String {
    code_spans(&escape(s))
}

/// Turns each pair of backticks on one roff text line into `\fB...\fR`; request lines (`.XX`) and an
/// unpaired backtick are left alone.
pub fn code_spans(line: &str) -> String {
    if line.starts_with('.') || line.matches('`').count() < 2 {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len() + 16);
    let mut open = false;
    let pairs = line.matches('`').count() / 2 * 2;
    let mut seen = 0;
    for c in line.chars() {
        if c == '`' && seen < pairs {
            seen += 1;
            out.push_str(if open { "\\fR" } else { "\\fB" });
            open = !open;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_become_bold_and_odd_backticks_stay() {
        assert_eq!(code_spans("or `all`, `x`"), "or \\fBall\\fR, \\fBx\\fR");
        assert_eq!(code_spans("a ` b `c` d"), "a \\fB b \\fRc` d");
        assert_eq!(code_spans(".TP `x`"), ".TP `x`");
        assert_eq!(escape(".a-b'c\\"), "\\&.a\\-b\\*(Aqc\\e");
    }

    #[test]
    fn every_page_gets_examples_and_the_same_exit_codes() {
        let s = extra("run", &["run".into(), "info".into()]);
        for section in [
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH EXAMPLES",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(s.contains(section), "{section} missing:\n{s}");
        }
        assert!(
            s.contains("collbench-info\\fR(1)") && !s.contains("collbench-run\\fR(1)"),
            "{s}"
        );
        assert!(!s.contains('`'), "a Markdown backtick reached the roff:\n{s}");
    }
}
