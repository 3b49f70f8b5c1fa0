//! The tables of a model report, built once and printed two ways: padded text columns behind `#`/blank
//! prefixes (like the run's tables), or Markdown.

use std::fmt::Write as _;

/// One column: its heading in each form and how text lays it out.
#[derive(Clone, Copy)]
pub struct Col {
    /// Heading in text (unused by a table printed without a heading line).
    pub text: &'static str,
    /// Heading in Markdown.
    pub md: &'static str,
    /// Markdown alignment: right (`---:`) or left.
    pub md_right: bool,
    /// Text before the cell (the separator from the previous one, or words).
    pub before: &'static str,
    /// Text width the cell is padded to at least (0: none); a longer cell (`halving_doubling`) widens the
    /// column on every line of its table.
    pub width: usize,
    /// Text alignment: right or left.
    pub right: bool,
    /// Text after the cell (a unit).
    pub after: &'static str,
}

/// A left-aligned column separated by one blank, the same heading in both forms.
pub const fn left(head: &'static str, width: usize) -> Col {
    Col {
        text: head,
        md: head,
        md_right: false,
        before: " ",
        width,
        right: false,
        after: "",
    }
}

/// A right-aligned column separated by one blank, the same heading in both forms.
pub const fn right(head: &'static str, width: usize) -> Col {
    Col {
        md_right: true,
        right: true,
        ..left(head, width)
    }
}

impl Col {
    /// The same column with another Markdown heading.
    pub const fn md(self, md: &'static str) -> Col {
        Col { md, ..self }
    }

    /// The same column left-aligned in Markdown.
    pub const fn md_left(self) -> Col {
        Col {
            md_right: false,
            ..self
        }
    }

    /// The same column with other text around the cell.
    pub const fn around(self, before: &'static str, after: &'static str) -> Col {
        Col { before, after, ..self }
    }
}

/// One cell, as text and as Markdown (mostly the same string).
pub struct Cell {
    text: String,
    md: String,
}

impl Cell {
    /// A cell printed alike in both forms.
    pub fn same(s: impl Into<String>) -> Cell {
        let text = s.into();
        Cell { md: text.clone(), text }
    }

    /// A cell printed one way in text and another in Markdown.
    pub fn forms(text: impl Into<String>, md: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            md: md.into(),
        }
    }
}

/// Columns, rows, and how text prints them.
pub struct Table {
    pub cols: Vec<Col>,
    pub rows: Vec<Vec<Cell>>,
    pub text: TextForm,
}

/// How text prints a table: the prefix of its heading line (none: no heading line), of each row, and whether
/// trailing blanks are cut from every line.
#[derive(Clone, Copy)]
pub struct TextForm {
    pub head: Option<&'static str>,
    pub row: &'static str,
    pub trim: bool,
}

fn text_line(s: &mut String, prefix: &str, cols: &[Col], widths: &[usize], cells: &[&str], trim: bool) {
    let mut line = prefix.to_string();
    for (i, ((c, v), &w)) in cols.iter().zip(cells).zip(widths).enumerate() {
        // The first column follows the prefix directly.
        let before = if i == 0 { "" } else { c.before };
        if c.right {
            let _ = write!(line, "{before}{v:>w$}{}", c.after);
        } else {
            let _ = write!(line, "{before}{v:<w$}{}", c.after);
        }
    }
    let _ = writeln!(s, "{}", if trim { line.trim_end() } else { &line });
}

/// Appends `t` as text lines.
pub fn text(s: &mut String, t: &Table) {
    let form = &t.text;
    let heads: Vec<&str> = t.cols.iter().map(|c| c.text).collect();
    let rows: Vec<Vec<&str>> = t
        .rows
        .iter()
        .map(|r| r.iter().map(|c| c.text.as_str()).collect())
        .collect();
    // Each padded column as wide as its widest cell (and heading, where printed), never narrower than asked.
    let widths: Vec<usize> = t
        .cols
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if c.width == 0 {
                return 0;
            }
            let head = form.head.map_or(0, |_| c.text.chars().count());
            let cells = rows.iter().filter_map(|r| r.get(i)).map(|v| v.chars().count());
            cells.fold(c.width.max(head), usize::max)
        })
        .collect();
    if let Some(prefix) = form.head {
        text_line(s, prefix, &t.cols, &widths, &heads, form.trim);
    }
    for cells in &rows {
        text_line(s, form.row, &t.cols, &widths, cells, form.trim);
    }
}

/// Appends `t` as a Markdown table.
pub fn markdown(s: &mut String, t: &Table) {
    // An empty heading prints as `| |`, not `|  |`.
    let heads: String = t
        .cols
        .iter()
        .map(|c| format!(" {}", c.md).trim_end().to_string() + " |")
        .collect();
    let _ = writeln!(s, "|{heads}");
    let rule: String = t
        .cols
        .iter()
        .map(|c| if c.md_right { "---:|" } else { "---|" })
        .collect();
    let _ = writeln!(s, "|{rule}");
    for r in &t.rows {
        let cells: String = r.iter().map(|c| format!(" {} |", c.md)).collect();
        let _ = writeln!(s, "|{cells}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell longer than its column's width (`halving_doubling` in a 13-wide column) widens the column on
    /// every line, so the columns after it stay aligned.
    #[test]
    fn a_long_cell_widens_its_column_on_every_line() {
        let t = Table {
            cols: vec![left("algo", 13), right("points", 6), left("ranks", 8).around("  ", "")],
            rows: ["ring", "halving_doubling", "rec_doubling"]
                .iter()
                .map(|a| vec![Cell::same(*a), Cell::same("83"), Cell::same("2,3")])
                .collect(),
            text: TextForm {
                head: Some("# "),
                row: "  ",
                trim: false,
            },
        };
        let mut s = String::new();
        text(&mut s, &t);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4, "{s}");
        // The right-aligned column ends, and the next starts, at the same place on every line.
        let ends: Vec<usize> = lines[1..].iter().map(|l| l.find("83").unwrap() + 2).collect();
        assert!(ends.iter().all(|&e| e == ends[0]), "{s}");
        let starts: Vec<usize> = lines
            .iter()
            .map(|l| l.find("2,3").or(l.find("ranks")).unwrap())
            .collect();
        assert!(starts.iter().all(|&x| x == starts[0]), "{s}");
        assert_eq!(lines[0].find("points").unwrap() + 6, ends[0], "{s}");
    }
}
