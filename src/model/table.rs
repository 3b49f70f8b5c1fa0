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
    /// Text width the cell is padded to (0: none).
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

fn text_line(s: &mut String, prefix: &str, cols: &[Col], cells: &[&str], trim: bool) {
    let mut line = prefix.to_string();
    for (i, (c, v)) in cols.iter().zip(cells).enumerate() {
        // The first column follows the prefix directly.
        let before = if i == 0 { "" } else { c.before };
        let w = c.width;
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
    if let Some(prefix) = form.head {
        let heads: Vec<&str> = t.cols.iter().map(|c| c.text).collect();
        text_line(s, prefix, &t.cols, &heads, form.trim);
    }
    for r in &t.rows {
        let cells: Vec<&str> = r.iter().map(|c| c.text.as_str()).collect();
        text_line(s, form.row, &t.cols, &cells, form.trim);
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
