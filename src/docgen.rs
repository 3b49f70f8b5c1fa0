//! Reference pages generated from the clap definitions, so they cannot drift from the code: a man page per
//! subcommand (clap_mangen), the Markdown options page `docs/options.md` (clap-markdown), and shell
//! completions (`collbench completions SHELL`, clap_complete).
//!
//! The committed pages under `docs/` are checked against [`pages`] by `tests/docgen.rs`; after changing a
//! flag or its help, regenerate them with
//! `COLLBENCH_WRITE_DOCS=1 cargo test --test docgen` (see [`REGENERATE`]).

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::Error;

/// The command that rewrites the committed pages from this build.
pub const REGENERATE: &str = "COLLBENCH_WRITE_DOCS=1 cargo test --test docgen";

/// Every generated page: its path relative to the repository root and its bytes. Man pages go to
/// `docs/man/` (`collbench.1` and `collbench-SUBCOMMAND.1`), the options reference to `docs/options.md`.
pub fn pages() -> Result<Vec<(PathBuf, Vec<u8>)>, Error> {
    // Built as clap_mangen::generate_to does it, so each subcommand's page is titled and named
    // `collbench-SUBCOMMAND` and its usage line reads `collbench SUBCOMMAND`; generated into memory
    // so the test can compare without writing.
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    let mut out = Vec::new();
    for cmd in std::iter::once(&root).chain(root.get_subcommands().filter(|s| !s.is_hide_set())) {
        let man = clap_mangen::Man::new(cmd.clone());
        out.push((PathBuf::from("docs/man").join(man.get_filename()), man_page(&man)?));
    }
    out.push((PathBuf::from("docs/options.md"), options_markdown().into_bytes()));
    Ok(out)
}

/// One man page (roff), with the version the binary reports.
fn man_page(man: &clap_mangen::Man) -> Result<Vec<u8>, Error> {
    let mut buf = Vec::new();
    man.render(&mut buf).map_err(|e| Error::io("rendering a man page", e))?;
    Ok(buf)
}

/// The options reference in Markdown: every subcommand with its flags, defaults and help.
pub fn options_markdown() -> String {
    let body = clap_markdown::help_markdown_command_custom(
        &Cli::command(),
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
