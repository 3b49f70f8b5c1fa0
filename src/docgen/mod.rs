//! Reference pages generated from the clap definitions, so they cannot drift from the code: a man page per
//! subcommand (clap_mangen), the Markdown options page `docs/options.md` (clap-markdown), and shell
//! completions (`collbench completions SHELL`, clap_complete). Each man page also gets the sections clap
//! does not make ([`sections`]: EXIT STATUS, ENVIRONMENT, EXAMPLES, SEE ALSO), and the list of environment
//! variables ([`environment`]) is rendered to `docs/environment.md` as well.
//!
//! The committed pages under `docs/` are checked against [`pages`] by `tests/docgen.rs`; after changing a
//! flag or its help, regenerate them with
//! `COLLBENCH_WRITE_DOCS=1 cargo test --features mpi,rdma,cuda --test docgen` (see [`REGENERATE`]).

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::Error;

pub mod environment;
pub mod sections;

/// The command that rewrites the committed pages from this build.
pub const REGENERATE: &str = "COLLBENCH_WRITE_DOCS=1 cargo test --features mpi,rdma,cuda --test docgen";

/// Every generated page: its path relative to the repository root and its bytes. Man pages go to
/// `docs/man/` (`collbench.1` and `collbench-SUBCOMMAND.1`), the options reference to `docs/options.md`.
pub fn pages() -> Result<Vec<(PathBuf, Vec<u8>)>, Error> {
    // Built as clap_mangen::generate_to does it, so each subcommand's page is titled and named
    // `collbench-SUBCOMMAND` and its usage line reads `collbench SUBCOMMAND`; generated into memory
    // so the test can compare without writing.
    // The pages carry the package version only: `-V`'s list of features depends on the build, the pages
    // must not.
    let mut root = Cli::command()
        .disable_help_subcommand(true)
        .version(env!("CARGO_PKG_VERSION"));
    root.build();
    let subs: Vec<String> = root
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .collect();
    let mut out = Vec::new();
    for cmd in std::iter::once(&root).chain(root.get_subcommands().filter(|s| !s.is_hide_set())) {
        let sub = if cmd.get_name() == root.get_name() {
            ""
        } else {
            cmd.get_name()
        };
        // Subcommands display as `collbench` (for `-V`, src/cli/); each page is named for its subcommand.
        let man = clap_mangen::Man::new(if sub.is_empty() {
            cmd.clone()
        } else {
            cmd.clone().display_name(format!("collbench-{sub}"))
        });
        out.push((
            PathBuf::from("docs/man").join(man.get_filename()),
            man_page(&man, sub, &subs)?,
        ));
    }
    out.push((PathBuf::from("docs/options.md"), options_markdown().into_bytes()));
    out.push((
        PathBuf::from("docs/environment.md"),
        environment::markdown(REGENERATE).into_bytes(),
    ));
    Ok(out)
}

/// One man page (roff): clap's sections with their `code` spans in bold, then [`sections::extra`] before
/// the VERSION section.
fn man_page(man: &clap_mangen::Man, sub: &str, subs: &[String]) -> Result<Vec<u8>, Error> {
    let mut buf = Vec::new();
    man.render(&mut buf).map_err(|e| Error::io("rendering a man page", e))?;
    let roff = String::from_utf8_lossy(&buf);
    let mut page: String = roff.lines().map(|l| sections::code_spans(l) + "\n").collect();
    let at = page.find(".SH VERSION\n").unwrap_or(page.len());
    page.insert_str(at, &sections::extra(sub, subs));
    Ok(page.into_bytes())
}

/// The options reference in Markdown: every subcommand with its flags, defaults and help.
pub fn options_markdown() -> String {
    let body = clap_markdown::help_markdown_command_custom(
        // Subcommands display as `collbench` (for `-V`, src/cli/); the page names each by its own name.
        &Cli::command().mut_subcommands(|s| s.display_name(clap::builder::Resettable::Reset)),
        &clap_markdown::MarkdownOptions::new()
            .title("collbench options".to_string())
            .show_footer(false)
            .show_table_of_contents(true),
    );
    // The page's title first, then what it answers, as every page under docs/ does.
    let (title, rest) = body.split_once('\n').unwrap_or((&body, ""));
    format!(
        "<!-- Generated from the clap definitions in src/cli/; do not edit. Regenerate: {REGENERATE} -->\n\n\
         {title}\n\nThis page answers: which flags does each collbench subcommand take, what do they mean, and \
         what are their defaults.\n{rest}"
    )
}

/// Writes every page of [`pages`] under `root` (the repository root), creating `docs/man/`.
pub fn write_pages(root: &Path) -> Result<(), Error> {
    for (rel, bytes) in pages()? {
        let path = root.join(&rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        std::fs::write(&path, bytes).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_subcommand_has_a_man_page_and_a_section() {
        let pages = pages().unwrap();
        let markdown = options_markdown();
        for sub in Cli::command().get_subcommands().filter(|s| !s.is_hide_set()) {
            let man = PathBuf::from(format!("docs/man/collbench-{}.1", sub.get_name()));
            assert!(pages.iter().any(|(p, _)| *p == man), "no man page {}", man.display());
            assert!(
                markdown.contains(&format!("## `collbench {}`", sub.get_name())),
                "no section for {} in options.md",
                sub.get_name()
            );
        }
    }

    /// The values `--help` and completions offer are the ones the options layer accepts, and every one it
    /// names is offered.
    #[test]
    fn enumerated_flag_values_match_their_parsers() {
        use crate::cli::values;
        fn same<T: std::str::FromStr + PartialEq + std::fmt::Debug>(
            offered: &[&str],
            all: &[T],
            name: impl Fn(&T) -> String,
        ) {
            for v in offered.iter().filter(|v| **v != "all") {
                assert!(v.parse::<T>().is_ok(), "{v} is offered but does not parse");
            }
            for t in all {
                assert!(offered.contains(&name(t).as_str()), "{t:?} is not offered");
            }
        }
        use crate::algorithm::options::AlgoChoice;
        let algos = [
            AlgoChoice::Auto,
            AlgoChoice::Ring,
            AlgoChoice::RecDoubling,
            AlgoChoice::Tree,
            AlgoChoice::HalvingDoubling,
            AlgoChoice::Bruck,
        ];
        same(values::ALGOS, &algos, |a| a.name().to_string());
        same(values::COLLECTIVES, &crate::collective::Collective::ALL, |c| {
            c.name().to_string()
        });
        same(values::DTYPES, &crate::reduce::Dtype::ALL, |d| d.name().to_string());
        same(values::OPS, &crate::reduce::Op::ALL, |o| o.name().to_string());
        same(
            values::MEMORY,
            &[crate::memory::MemoryKind::Host, crate::memory::MemoryKind::Cuda],
            |m| format!("{m:?}").to_lowercase(),
        );
        same(
            values::RANK_STATS,
            &{
                use crate::bench::options::RankStat as R;
                [R::Rank0, R::Avg, R::Min, R::Max]
            },
            |r| r.name().to_string(),
        );
        same(
            values::INTERLEAVE,
            &[
                crate::bench::options::Interleave::Sweep,
                crate::bench::options::Interleave::Point,
            ],
            |i| format!("{i:?}").to_lowercase(),
        );
        same(
            values::WEIGHTINGS,
            &[
                crate::model::Weighting::Sqrt,
                crate::model::Weighting::Relative,
                crate::model::Weighting::Absolute,
            ],
            |w| w.name().to_string(),
        );
        for f in values::IMAGE_FORMATS {
            assert!(
                crate::plot::Format::parse_list(&[f.to_string()], "--format").is_ok(),
                "{f}"
            );
        }
    }

    #[test]
    fn completions_name_the_subcommands() {
        let mut script = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut Cli::command(),
            "collbench",
            &mut script,
        );
        let script = String::from_utf8(script).unwrap();
        assert!(script.contains("pairwise") && script.contains("--minbytes"));
    }
}
