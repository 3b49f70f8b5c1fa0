//! A kind of path is asked what it is through its traits (`transport::path::Traits`), never by comparing its
//! name: outside the path module (src/transport/path.rs and src/path_names.rs), no non-test code compares a
//! string with a kind's name (`== "nccl"`, `starts_with("tcp")`, `"mpi" =>`, `matches!(s, "rdma" | ..)`).
//! A place that has only a path's name parses it (`Traits::named`) and asks the trait, so a new kind of path
//! is its variant, its traits and its name, not a hunt through every file that once asked "is it nccl?".

use std::path::{Path, PathBuf};

/// The path module, where names are parsed and printed.
const PATH_MODULE: [&str; 2] = ["transport/path.rs", "path_names.rs"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A string literal of the source: its quotes' byte range and its text.
struct Literal {
    at: usize,
    end: usize,
    text: String,
}

/// `code`'s string literals, and its skeleton: `code` with comments and the literals' contents blanked to
/// spaces (newlines and quotes kept, so positions and line numbers stay), for the braces and operators
/// around them to be read without a string or a comment fooling the reader.
fn lex(code: &str) -> (Vec<Literal>, String) {
    let b = code.as_bytes();
    let mut skeleton = b.to_vec();
    let mut literals = Vec::new();
    let blank = |s: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut s[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = code[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut skeleton, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = code[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
                blank(&mut skeleton, i, end);
                i = end;
            }
            // A char literal ('"', '\'', '\n'), or a lifetime (left as it is).
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 3,
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i = code[i + 2..].find('\'').map_or(b.len(), |n| i + 2 + n + 1);
            }
            b'"' => {
                // A raw string (r"..", r#".."#) ends at a quote with as many hashes; others skip escapes.
                let hashes = code[..i].len() - code[..i].trim_end_matches('#').len();
                let raw = code[..i - hashes].ends_with('r');
                let close = format!("\"{}", "#".repeat(hashes));
                let mut j = i + 1;
                let end = loop {
                    match b.get(j) {
                        None => break b.len(),
                        Some(b'\\') if !raw => j += 2,
                        Some(b'"') if code[j..].starts_with(&close) => break j + 1,
                        Some(_) => j += 1,
                    }
                };
                let inner = i + 1..end.saturating_sub(1).max(i + 1);
                blank(&mut skeleton, inner.start, inner.end);
                // The literal's span takes in its `r#` and closing `#`s, so `== r#"..."#` reads as `== ".."`.
                literals.push(Literal {
                    at: i - hashes - usize::from(raw),
                    end: (end + hashes).min(b.len()),
                    text: code[inner].to_string(),
                });
                i = end + hashes;
            }
            _ => i += 1,
        }
    }
    (literals, String::from_utf8(skeleton).expect("blanking keeps UTF-8"))
}

/// The byte ranges of `skeleton`'s `#[cfg(test)]` items (a `mod tests { .. }`, a test function), and the
/// names of the modules declared `#[cfg(test)] mod NAME;` (test files of their own).
fn test_items(skeleton: &str) -> (Vec<(usize, usize)>, Vec<String>) {
    let mut ranges = Vec::new();
    let mut files = Vec::new();
    let mut from = 0;
    while let Some(n) = skeleton[from..].find("#[cfg(test)]") {
        let at = from + n;
        let item = &skeleton[at + "#[cfg(test)]".len()..];
        // The item ends at the `;` of a declaration or at the brace that closes its body.
        let (mut depth, mut len) = (0usize, item.len());
        for (i, c) in item.char_indices() {
            match c {
                ';' if depth == 0 => {
                    len = i + 1;
                    let words: Vec<&str> = item[..i].split_whitespace().collect();
                    if let [.., "mod", name] = words[..] {
                        files.push(name.to_string());
                    }
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        len = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        let end = at + "#[cfg(test)]".len() + len;
        ranges.push((at, end));
        from = end;
    }
    (ranges, files)
}

/// Whether the string literal at `at..end` of `skeleton` is compared: an operand of `==`/`!=`, the argument of
/// a comparing method, a `match` arm or `|` alternative, or a pattern inside `matches!`.
fn compared(skeleton: &str, at: usize, end: usize) -> bool {
    let before = skeleton[..at].trim_end();
    let after = skeleton[end..].trim_start();
    const CALLS: [&str; 6] = [
        "starts_with(",
        "ends_with(",
        "strip_prefix(",
        "strip_suffix(",
        "eq(",
        "eq_ignore_ascii_case(",
    ];
    // Inside `matches!(..)`: one of the parentheses around the literal, within its statement, is that macro's.
    let inside_matches = {
        let mut depth = 0usize;
        let mut found = false;
        for (i, c) in before.char_indices().rev() {
            match c {
                ')' | ']' => depth += 1,
                '(' | '[' if depth > 0 => depth -= 1,
                '(' if before[..i].ends_with("matches!") => {
                    found = true;
                    break;
                }
                ';' | '{' | '}' if depth == 0 => break,
                _ => {}
            }
        }
        found
    };
    // `"a" | "tcp"` and `"tcp" | ..` are alternatives of a pattern; `|t| "tcp"` is a closure.
    let alternative = before.strip_suffix('|').is_some_and(|b| b.trim_end().ends_with('"'))
        || (after.starts_with('|') && !after.starts_with("||"));
    let arm = after
        .trim_start_matches(|c: char| c == ')' || c.is_whitespace())
        .starts_with("=>");
    ["==", "!="].iter().any(|op| before.ends_with(op))
        || CALLS.iter().any(|c| before.ends_with(c))
        || ["==", "!=", ".eq", ".starts_with"]
            .iter()
            .any(|op| after.starts_with(op))
        || inside_matches
        || alternative
        || arm
}

/// Every string literal naming a kind (`"nccl"`, or `"tcp@..."`) that non-test code of `code` compares, as
/// (line, literal), and the modules it declares as test files.
fn comparisons(code: &str, kinds: &[&str]) -> (Vec<(usize, String)>, Vec<String>) {
    let (literals, skeleton) = lex(code);
    let (tests, test_files) = test_items(&skeleton);
    let mut out = Vec::new();
    for l in literals {
        let names_a_kind = kinds
            .iter()
            .any(|k| l.text == *k || l.text.strip_prefix(k).is_some_and(|t| t.starts_with('@')));
        let in_test = tests.iter().any(|&(from, to)| (from..to).contains(&l.at));
        if names_a_kind && !in_test && compared(&skeleton, l.at, l.end) {
            let line = code[..l.at].matches('\n').count() + 1;
            out.push((line, format!("\"{}\"", l.text)));
        }
    }
    (out, test_files)
}

#[test]
fn no_code_outside_the_path_module_compares_a_kind_of_path_by_name() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let kinds: Vec<&str> = collbench::path_names::KINDS.iter().map(|k| k.name).collect();
    assert!(kinds.len() >= 4, "{kinds:?}");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    // Files that are `#[cfg(test)] mod NAME;` of a module: tests, free to hold literal data.
    let mut test_files = Vec::new();
    let mut code = Vec::new();
    for f in &files {
        let (found, tests) = comparisons(&std::fs::read_to_string(f).unwrap(), &kinds);
        let dir = f.parent().unwrap();
        let dir = if f.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs") {
            dir.to_path_buf()
        } else {
            dir.join(f.file_stem().unwrap())
        };
        for t in tests {
            test_files.push(dir.join(format!("{t}.rs")));
            test_files.push(dir.join(t).join("mod.rs"));
        }
        code.push((f, found));
    }
    let mut wrong = Vec::new();
    let mut scanned = 0;
    for (f, found) in &code {
        let rel = f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if PATH_MODULE.contains(&rel.as_str()) || test_files.contains(f) {
            continue;
        }
        scanned += 1;
        for (line, literal) in found {
            wrong.push(format!("src/{rel}:{line}: compares {literal}"));
        }
    }
    assert!(scanned > 100, "only {scanned} files scanned under {}", root.display());
    assert!(
        wrong.is_empty(),
        "{} comparison(s) of a kind of path's name outside the path module (src/transport/path.rs, src/path_names.rs); parse the name \
         (`transport::path::Traits::named`) and ask a trait, adding one there if none answers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_checker_finds_comparisons_and_skips_tests_comments_and_plain_literals() {
    let kinds = ["tcp", "mpi", "nccl", "rdma"];
    let code = r##"fn a(t: &str, p: &P) -> bool {
    let x = t == "nccl";
    let y = "mpi" != t || p.name.starts_with("tcp");
    let z = matches!(t, "rdma" | "x");
    match t {
        "tcp@lo" => true,
        _ => t.ends_with(
            "nccl"),
    }
}
fn b() -> String { format!("tcp {}", 1) + "nccl" } // t == "mpi"
fn c(t: &str) -> &str { t.strip_prefix("tcp@").unwrap_or("tcp") }
#[cfg(test)]
mod tests {
    fn d(t: &str) -> bool { t == "nccl" && "{" != t }
}
#[cfg(test)]
mod more;
#[cfg(test)]
use super::x;
fn e(t: &str) -> bool { t == "tcpx" || t.eq_ignore_ascii_case("mpi") }
fn f(t: Option<&str>) -> &str { let q = '"'; t.map_or_else(|| "tcp", |t| "mpi") } /* t == "nccl" */
fn g(t: &str) -> bool { let u = "http://x"; t == r#"rdma"# || Some("mpi") == None }
"##;
    let (found, test_files) = comparisons(code, &kinds);
    assert_eq!(test_files, ["more"]);
    let want: Vec<(usize, String)> = [
        (2, "\"nccl\""),
        (3, "\"mpi\""),
        (3, "\"tcp\""),
        (4, "\"rdma\""),
        (6, "\"tcp@lo\""),
        (8, "\"nccl\""),
        (12, "\"tcp@\""),
        (21, "\"mpi\""),
        (23, "\"rdma\""),
    ]
    .iter()
    .map(|(l, s)| (*l, s.to_string()))
    .collect();
    assert_eq!(found, want);
}
