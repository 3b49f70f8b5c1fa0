//! No source file imports itself through others: the graph of which file in src/ refers to which has no
//! circle. A circle makes files that can only be read, changed and tested together; breaking it means moving
//! the piece both sides need to the lower file, or to a small file of its own. Also: no file under src/ has more
//! than [`MAX_LINES`] lines before its test module.
//!
//! The rule, kept simple so that anyone can tell by reading a file what it adds to the graph:
//! - Every src/**/*.rs file is a module: `lib.rs` the crate root, `a.rs` and `a/mod.rs` module `a`, `a/b.rs`
//!   module `a::b`. main.rs (the binary, another crate) is left out, and so is a file declared only under
//!   `#[cfg(test)]`.
//! - A file refers to others through paths: every path of a `use` item, and every path in code, that starts
//!   with `crate::`, `super::`, `self::` or the name of one of the module's own child modules. Comments,
//!   attributes, `pub(in ..)` visibilities, the insides of string and char literals, and items under
//!   `#[cfg(test)]` (the test modules) are left out.
//! - A path is resolved to the file of the longest module it names: a module path to the file that defines the
//!   module (`a.rs` or `a/mod.rs`), an item path to the file of its module (`crate::a::b::Item` is `a/b.rs`).
//!   An item a parent module re-exports is the parent's.
//! - A file's edges to its own descendants (the modules it declares with `mod x;`, and theirs) count only where
//!   it uses them: `mod x;` is no edge, and neither is a `pub use`, so a `mod.rs` re-exporting its children is
//!   not a circle; a call `x::f()` or a private `use` is an edge.
//! - A file's references to its own ancestors are no edge: a parent module is where its children keep what they
//!   share, and every child sees it (that is Rust's module tree, not a circle).
//! - A circle is a set of two or more files that all reach each other; it is named with one cycle through it,
//!   each step at the line that makes it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// Lines a file may have before its test module.
const MAX_LINES: usize = 800;

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

/// Every .rs file under src/, as (path relative to src/ with `/`, text), sorted.
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut out: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap();
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            (rel.join("/"), std::fs::read_to_string(f).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// The module a file (relative to src/) defines; `None` for main.rs.
fn module_of(rel: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = rel.split('/').collect();
    let (last, dirs) = parts.split_last()?;
    let mut m: Vec<String> = dirs.iter().map(|s| s.to_string()).collect();
    match *last {
        "lib.rs" if dirs.is_empty() => {}
        "main.rs" if dirs.is_empty() => return None,
        "mod.rs" => {}
        name => m.push(name.strip_suffix(".rs")?.to_string()),
    }
    Some(m)
}

/// `code` with comments and the insides of string and char literals blanked; newlines are kept, so line numbers
/// still hold.
fn blank(code: &str) -> String {
    let c: Vec<char> = code.chars().collect();
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = String::with_capacity(code.len());
    let put = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                let pair = (c[i], c.get(i + 1).copied());
                if pair == ('/', Some('*')) {
                    depth += 1;
                    i += 2;
                } else if pair == ('*', Some('/')) {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    put(&mut out, c[i]);
                    i += 1;
                }
            }
            continue;
        }
        // Raw strings: r"..", r#".."#, br"..", where the `r` starts a token.
        let raw_at = match (c[i], next) {
            ('r', _) => Some(i + 1),
            ('b', Some('r')) => Some(i + 2),
            _ => None,
        };
        if let Some(mut j) = raw_at.filter(|_| i == 0 || !ident(c[i - 1])) {
            let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
            j += hashes;
            if c.get(j) == Some(&'"') {
                i = j + 1;
                loop {
                    if i >= c.len() {
                        break;
                    }
                    if c[i] == '"' && c[i + 1..].iter().take(hashes).filter(|&&ch| ch == '#').count() == hashes {
                        i += 1 + hashes;
                        break;
                    }
                    put(&mut out, c[i]);
                    i += 1;
                }
                out.push_str("\"\"");
                continue;
            }
        }
        if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if i < c.len() {
                    put(&mut out, c[i]);
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{1b}'), else a lifetime, which is kept.
            if next == Some('\\') {
                let mut j = i + 3;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
                continue;
            }
            if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
                continue;
            }
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

/// The tokens of blanked code, each with its line.
fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

fn is(t: &[(Tok, usize)], i: usize, want: &Tok) -> bool {
    t.get(i).is_some_and(|(x, _)| x == want)
}

fn ident(t: &[(Tok, usize)], i: usize) -> Option<&str> {
    match t.get(i) {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

/// The index after the bracket that closes the one at `open`.
fn after_close(t: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, (tok, _)) in t.iter().enumerate().skip(open) {
        match tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// The index after the item (or statement) that starts at `i`: after its `;`, or after its body's `}`.
fn item_end(t: &[(Tok, usize)], i: usize) -> usize {
    let mut depth = 0i32;
    for (k, (tok, _)) in t.iter().enumerate().skip(i) {
        match tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']') => depth -= 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth <= 0 {
                    return k + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return k + 1,
            _ => {}
        }
    }
    t.len()
}

/// The paths of the use tree at `*i` (after `use`), each with the line of its last segment; `prefix` is the
/// path of the enclosing group.
fn use_tree(t: &[(Tok, usize)], i: &mut usize, prefix: Vec<String>, out: &mut Vec<(Vec<String>, usize)>) {
    let mut path = prefix;
    if is(t, *i, &Tok::Sep) {
        // `::name`: an external crate.
        path.push("::".into());
        *i += 1;
    }
    loop {
        match t.get(*i) {
            Some((Tok::Ident(s), line)) => {
                let line = *line;
                *i += 1;
                // `a::{self, b}`: `self` is `a` itself.
                if s != "self" || path.is_empty() {
                    path.push(s.clone());
                }
                if is(t, *i, &Tok::Sep) {
                    *i += 1;
                    continue;
                }
                if ident(t, *i) == Some("as") {
                    *i += 2;
                }
                out.push((path, line));
                return;
            }
            Some((Tok::Punct('*'), line)) => {
                out.push((path, *line));
                *i += 1;
                return;
            }
            Some((Tok::Punct('{'), _)) => {
                *i += 1;
                while *i < t.len() && !is(t, *i, &Tok::Punct('}')) {
                    let at = *i;
                    use_tree(t, i, path.clone(), out);
                    if is(t, *i, &Tok::Punct(',')) {
                        *i += 1;
                    }
                    if *i == at {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            _ => return,
        }
    }
}

/// `segs` (a path written in module `cur`) from the crate root, if it is a path into this crate.
fn absolute(segs: &[String], cur: &[String], is_module: &dyn Fn(&[String]) -> bool) -> Option<Vec<String>> {
    let first = segs.first()?.as_str();
    match first {
        "crate" => Some(segs[1..].to_vec()),
        "self" => Some([cur, &segs[1..]].concat()),
        "super" => {
            let mut m = cur.to_vec();
            let ups = segs.iter().take_while(|s| *s == "super").count();
            for _ in 0..ups {
                m.pop()?;
            }
            m.extend_from_slice(&segs[ups..]);
            Some(m)
        }
        name => {
            let child = [cur, &[name.to_string()]].concat();
            is_module(&child).then(|| [cur, segs].concat())
        }
    }
}

/// A path out of a file: where it leads (from the crate root), its line, and whether it is a `pub use`.
#[derive(Debug, PartialEq)]
struct Ref {
    path: Vec<String>,
    line: usize,
    reexport: bool,
}

/// The paths of `code` (a file of module `module`) into the crate, and the child modules it declares only under
/// `#[cfg(test)]`. `is_module` says whether a module path is a file's.
fn references(code: &str, module: &[String], is_module: &dyn Fn(&[String]) -> bool) -> (Vec<Ref>, Vec<String>) {
    let t = tokens(&blank(code));
    let mut refs = Vec::new();
    let mut test_children = Vec::new();
    // Inline modules (`mod x { .. }`) we are in, each with the brace depth it opened at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut under_test = false;
    let mut i = 0;
    while i < t.len() {
        let cur: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|m| m.0.clone()))
            .collect();
        match &t[i].0 {
            Tok::Punct('#') => {
                let open = if is(&t, i + 1, &Tok::Punct('!')) { i + 2 } else { i + 1 };
                if !is(&t, open, &Tok::Punct('[')) {
                    i += 1;
                    continue;
                }
                let end = after_close(&t, open);
                let inner: Vec<&Tok> = t[open + 1..end.saturating_sub(1)].iter().map(|x| &x.0).collect();
                let cfg_test = [
                    Tok::Ident("cfg".into()),
                    Tok::Punct('('),
                    Tok::Ident("test".into()),
                    Tok::Punct(')'),
                ];
                if open == i + 1 && inner.iter().copied().eq(cfg_test.iter()) {
                    under_test = true;
                }
                i = end;
            }
            _ if under_test => {
                let end = item_end(&t, i);
                let item = &t[i..end];
                if let Some(k) = item.iter().position(|x| x.0 == Tok::Ident("mod".into())) {
                    if let (Some(name), true) = (ident(item, k + 1), is(item, k + 2, &Tok::Punct(';'))) {
                        test_children.push(name.to_string());
                    }
                }
                under_test = false;
                i = end;
            }
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
                i += 1;
            }
            Tok::Ident(k) if k == "mod" => match (ident(&t, i + 1), t.get(i + 2).map(|x| &x.0)) {
                (Some(name), Some(Tok::Punct('{'))) => {
                    inline.push((name.to_string(), depth));
                    depth += 1;
                    i += 3;
                }
                _ => i += 1,
            },
            Tok::Ident(k) if k == "use" => {
                let reexport = match t.get(i.wrapping_sub(1)).map(|x| &x.0) {
                    Some(Tok::Ident(p)) => p == "pub",
                    // `pub(crate) use`, `pub(super) use`
                    Some(Tok::Punct(')')) => (0..i)
                        .rev()
                        .find(|&k| is(&t, k, &Tok::Punct('(')))
                        .is_some_and(|k| ident(&t, k.wrapping_sub(1)) == Some("pub")),
                    _ => false,
                };
                let mut j = i + 1;
                let mut paths = Vec::new();
                use_tree(&t, &mut j, Vec::new(), &mut paths);
                for (p, line) in paths {
                    if let Some(path) = absolute(&p, &cur, is_module) {
                        refs.push(Ref { path, line, reexport });
                    }
                }
                i = j.max(i + 1);
            }
            // A path's first segment: not one after `::`, nor a method's turbofish after `.`, nor the module a
            // `pub(in crate::a)` opens an item to (which refers to nothing in it).
            Tok::Ident(first)
                if is(&t, i + 1, &Tok::Sep)
                    && !(i > 0 && (is(&t, i - 1, &Tok::Sep) || is(&t, i - 1, &Tok::Punct('.'))))
                    && !(ident(&t, i.wrapping_sub(1)) == Some("in") && is(&t, i.wrapping_sub(2), &Tok::Punct('('))) =>
            {
                let line = t[i].1;
                let mut segs = vec![first.clone()];
                let mut j = i + 1;
                while is(&t, j, &Tok::Sep) {
                    match ident(&t, j + 1) {
                        Some(s) => segs.push(s.to_string()),
                        None => break,
                    }
                    j += 2;
                }
                if let Some(path) = absolute(&segs, &cur, is_module) {
                    refs.push(Ref {
                        path,
                        line,
                        reexport: false,
                    });
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    (refs, test_children)
}

/// The file graph: file names, and for each edge (from, to) the first line in `from` that makes it.
struct Graph {
    files: Vec<String>,
    edges: BTreeMap<(usize, usize), usize>,
}

/// The graph of `sources` ((path relative to src/, text)), by the rule in this file's doc.
fn graph(sources: &[(String, String)]) -> Graph {
    let mut modules: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    let mut files = Vec::new();
    for (rel, _) in sources {
        if let Some(m) = module_of(rel) {
            modules.insert(m, files.len());
            files.push(rel.clone());
        }
    }
    let is_module = |m: &[String]| modules.contains_key(m);
    let mut found: Vec<(usize, Vec<Ref>)> = Vec::new();
    let mut test_only: BTreeSet<Vec<String>> = BTreeSet::new();
    for (rel, code) in sources {
        let Some(m) = module_of(rel) else { continue };
        let (refs, tests) = references(code, &m, &is_module);
        test_only.extend(tests.into_iter().map(|t| [m.clone(), vec![t]].concat()));
        found.push((modules[&m], refs));
    }
    let module_of_file: BTreeMap<usize, Vec<String>> = modules.iter().map(|(m, &f)| (f, m.clone())).collect();
    let excluded: BTreeSet<usize> = modules
        .iter()
        .filter(|(m, _)| test_only.iter().any(|t| m.starts_with(t)))
        .map(|(_, &f)| f)
        .collect();
    let mut edges = BTreeMap::new();
    for (from, refs) in found {
        if excluded.contains(&from) {
            continue;
        }
        let mine = &module_of_file[&from];
        for r in refs {
            let Some(to) = (0..=r.path.len())
                .rev()
                .find_map(|k| modules.get(&r.path[..k]).copied())
            else {
                continue;
            };
            let theirs = &module_of_file[&to];
            let own_child = theirs.len() > mine.len() && theirs.starts_with(mine);
            let own_parent = mine.len() > theirs.len() && mine.starts_with(theirs);
            if to == from || excluded.contains(&to) || own_parent || (r.reexport && own_child) {
                continue;
            }
            edges.entry((from, to)).or_insert(r.line);
        }
    }
    Graph { files, edges }
}

/// The circles of `g`: its strongly connected sets of two or more files (Tarjan), each sorted.
fn circles(g: &Graph) -> Vec<Vec<usize>> {
    struct State<'a> {
        next: BTreeMap<usize, Vec<usize>>,
        index: BTreeMap<usize, usize>,
        low: BTreeMap<usize, usize>,
        stack: Vec<usize>,
        on: BTreeSet<usize>,
        out: Vec<Vec<usize>>,
        g: &'a Graph,
    }
    fn visit(s: &mut State, v: usize) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.next.get(&v).cloned().unwrap_or_default() {
            if !s.index.contains_key(&w) {
                visit(s, w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(&v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(&v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[&v] == s.index[&v] {
            let mut set = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(&w);
                set.push(w);
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                s.out.push(set);
            }
        }
    }
    let mut next: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &(a, b) in g.edges.keys() {
        next.entry(a).or_default().push(b);
    }
    let mut s = State {
        next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
        g,
    };
    for v in 0..s.g.files.len() {
        if !s.index.contains_key(&v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// One cycle through the circle `set` from its first file, as `src/a.rs:12 -> src/b.rs:40 -> src/a.rs`.
fn one_cycle(g: &Graph, set: &[usize]) -> String {
    let start = set[0];
    let mut came: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    let mut last = None;
    while let Some(v) = queue.pop_front() {
        for (&(a, b), _) in g.edges.range((v, 0)..=(v, usize::MAX)) {
            debug_assert_eq!(a, v);
            if !set.contains(&b) {
                continue;
            }
            if b == start {
                last = Some(v);
                break;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came.entry(b) {
                e.insert(v);
                queue.push_back(b);
            }
        }
        if last.is_some() {
            break;
        }
    }
    let mut middle = Vec::new();
    let mut v = last.expect("a strongly connected set has a cycle through each file");
    while v != start {
        middle.push(v);
        v = came[&v];
    }
    middle.reverse();
    let path: Vec<usize> = [vec![start], middle, vec![start]].concat();
    let mut out = String::new();
    for w in path.windows(2) {
        out.push_str(&format!("src/{}:{} -> ", g.files[w[0]], g.edges[&(w[0], w[1])]));
    }
    out.push_str(&format!("src/{}", g.files[start]));
    out
}

#[test]
fn no_source_file_imports_itself_through_others() {
    let g = graph(&sources());
    assert!(
        g.files.len() > 50 && g.edges.len() > 100,
        "{} files, {} edges",
        g.files.len(),
        g.edges.len()
    );
    let found = circles(&g);
    let text: Vec<String> = found
        .iter()
        .map(|set| {
            let names: Vec<String> = set.iter().map(|&f| format!("src/{}", g.files[f])).collect();
            format!("- {}\n  e.g. {}", names.join(", "), one_cycle(&g, set))
        })
        .collect();
    println!(
        "{} circle(s) among {} files, {} edges",
        found.len(),
        g.files.len(),
        g.edges.len()
    );
    assert!(
        found.is_empty(),
        "{} circle(s) between source files (rule: tests/file_circles.rs); move what both sides need to the lower \
         file or a small file of its own:\n{}",
        found.len(),
        text.join("\n")
    );
}

#[test]
fn the_checker_resolves_paths_and_finds_circles() {
    let files = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    };
    let name = |g: &Graph, n: &str| g.files.iter().position(|x| x == n).unwrap();
    let mut tree = files(&[
        ("lib.rs", "pub mod a;\npub mod z;\n"),
        // A parent that re-exports its children and calls one of them, which names the parent: no circle.
        (
            "a/mod.rs",
            "mod b;\nmod c;\npub use b::B;\npub(crate) use self::c::{C, D as E};\npub struct Top;\nfn k() { b::f(); }\n",
        ),
        ("a/b.rs", "use super::Top;\npub struct B;\npub fn f() { super::c::g(); }\n"),
        ("a/c.rs", "pub struct C;\npub struct D;\npub fn g() {}\n"),
        // Only comments, strings, a test module and a test helper name z's way to a::b.
        (
            "z.rs",
            "use crate::a::B;\n// crate::a::b::x\nconst S: &str = \"crate::a::b::\";\nconst R: &str = r#\"super::a\"#;\n\
             const Q: char = '\"';\n#[cfg(test)]\nuse crate::a::b::B as T;\n#[cfg(test)]\n#[allow(unused)]\nmod tests {\n\
             use crate::a::b::B;\n}\nfn h<'a>(x: &'a str) -> &'a str { x }\n",
        ),
    ]);
    let g = graph(&tree);
    let edge = |a: &str, b: &str| g.edges.get(&(name(&g, a), name(&g, b))).copied();
    assert_eq!(
        edge("a/mod.rs", "a/b.rs"),
        Some(6),
        "a parent's call into its child: {:?}",
        g.edges
    );
    assert_eq!(edge("a/b.rs", "a/c.rs"), Some(3));
    assert_eq!(
        edge("z.rs", "a/mod.rs"),
        Some(1),
        "an item re-exported by a parent is the parent's"
    );
    assert_eq!(edge("a/mod.rs", "a/c.rs"), None, "a re-export is no edge");
    assert_eq!(edge("a/b.rs", "a/mod.rs"), None, "a child naming its parent is no edge");
    assert_eq!(edge("z.rs", "a/b.rs"), None, "{:?}", g.edges);
    assert_eq!(g.edges.len(), 3, "{:?}", g.edges);
    assert!(circles(&g).is_empty());

    // Now c calls back into b: a circle of two siblings, named with its lines.
    tree[3].1.push_str("fn back() { crate::a::b::f(); }\n");
    let g = graph(&tree);
    let found = circles(&g);
    assert_eq!(found.len(), 1, "{:?}", g.edges);
    assert_eq!(one_cycle(&g, &found[0]), "src/a/b.rs:3 -> src/a/c.rs:4 -> src/a/b.rs");

    // Three files in a ring, one step through `super::super` in an inline module; a file declared only for
    // tests, which would close a second ring, is left out.
    let g = graph(&files(&[
        ("lib.rs", "mod p;\nmod q;\n"),
        ("p/mod.rs", "mod r;\nmod s;\n#[cfg(test)]\nmod t;\n"),
        ("p/r.rs", "mod inner {\n    fn f() { super::super::s::h(); }\n}\n"),
        ("p/s.rs", "pub(in crate::p) fn h() { crate::q::g() }\n"),
        ("p/t.rs", "use crate::q::X;\n"),
        ("q.rs", "pub fn g() { crate::p::r::f(); crate::p::t::x(); }\n"),
    ]));
    let found = circles(&g);
    let ring: Vec<usize> = ["p/r.rs", "p/s.rs", "q.rs"].iter().map(|n| name(&g, n)).collect();
    assert_eq!(
        g.edges.get(&(name(&g, "p/s.rs"), name(&g, "p/mod.rs"))),
        None,
        "a visibility is no reference"
    );
    assert_eq!(found, vec![ring], "{:?}", g.edges);
    assert_eq!(
        one_cycle(&g, &found[0]),
        "src/p/r.rs:2 -> src/p/s.rs:1 -> src/q.rs:1 -> src/p/r.rs"
    );
}

/// The lines of `code` before its test module (`#[cfg(test)]` then `mod`), or all of them.
fn lines_before_tests(code: &str) -> usize {
    let lines: Vec<&str> = code.lines().collect();
    for (k, l) in lines.iter().enumerate() {
        if l.trim() != "#[cfg(test)]" {
            continue;
        }
        let item = lines[k + 1..].iter().map(|l| l.trim()).find(|l| !l.starts_with("#["));
        if item.is_some_and(|l| l.starts_with("mod ") || l.starts_with("pub mod ") || l.starts_with("pub(crate) mod "))
        {
            return k;
        }
    }
    lines.len()
}

#[test]
fn no_source_file_is_longer_than_the_limit_before_its_tests() {
    let long: Vec<String> = sources()
        .iter()
        .filter_map(|(rel, code)| {
            let n = lines_before_tests(code);
            (n > MAX_LINES).then(|| format!("src/{rel}: {n} lines"))
        })
        .collect();
    assert!(
        long.is_empty(),
        "{} file(s) over {MAX_LINES} lines before their test module; split each into files with one job each:\n{}",
        long.len(),
        long.join("\n")
    );
    assert_eq!(
        lines_before_tests("a\nb\n#[cfg(test)]\n#[allow(x)]\nmod tests {\n}\n"),
        2
    );
    assert_eq!(lines_before_tests("a\n#[cfg(test)]\nfn helper() {}\nb\n"), 4);
}
