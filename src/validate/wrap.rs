//! Text for logs: lines broken at spaces to fit [`WIDTH`] columns, so a verdict reads the same in a terminal,
//! a CI log and a `kubectl logs` pane. The preflight's and the pairwise test's summaries use it.

/// The width every line of a summary fits in: a terminal's, or a `kubectl logs` pane, without wrapping.
pub const WIDTH: usize = 100;

/// `s` broken at spaces into lines of at most `first` characters, then `rest`; a word longer than a line is
/// cut, so no line is ever wider.
pub(crate) fn wrap(s: &str, first: usize, rest: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    let room = |lines: &Vec<String>| (if lines.is_empty() { first } else { rest }).max(1);
    for word in s.split_whitespace() {
        let mut word = word;
        while !word.is_empty() {
            let (have, len) = (cur.chars().count(), word.chars().count());
            if have + usize::from(have > 0) + len <= room(&lines) {
                if have > 0 {
                    cur.push(' ');
                }
                cur.push_str(word);
                break;
            }
            if have > 0 {
                lines.push(std::mem::take(&mut cur));
                continue;
            }
            let cut = word.char_indices().nth(room(&lines)).map_or(word.len(), |(i, _)| i);
            lines.push(word[..cut].to_string());
            word = &word[cut..];
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// `s` as lines of at most [`WIDTH`], each ending in a newline: the first after `first`, the others after
/// `rest` (`# ` and `#   ` keep a wrapped comment a comment).
pub(crate) fn prefixed(s: &str, first: &str, rest: &str) -> String {
    let (f, r) = (first.chars().count(), rest.chars().count());
    wrap(s, WIDTH.saturating_sub(f), WIDTH.saturating_sub(r))
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{}{l}\n", if i == 0 { first } else { rest }))
        .collect()
}

/// `s` as lines of at most [`WIDTH`]: the first after `indent`, the others after `indent` and four spaces.
pub(crate) fn para(s: &str, indent: usize) -> String {
    prefixed(s, &" ".repeat(indent), &" ".repeat(indent + 4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_lines_fit_and_keep_their_prefix_and_every_word() {
        let s = "word ".repeat(60) + &"x".repeat(150);
        let out = prefixed(&s, "# ", "#   ");
        assert!(out.lines().all(|l| l.chars().count() <= WIDTH), "{out}");
        assert!(
            out.starts_with("# word") && out.lines().skip(1).all(|l| l.starts_with("#   ")),
            "{out}"
        );
        let words: String = out
            .lines()
            .map(|l| l.trim_start_matches('#').trim())
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(words.replace(' ', ""), s.replace(' ', ""));
        assert_eq!(para("short", 2), "  short\n");
    }
}
