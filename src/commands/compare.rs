//! `collbench compare OLD.json NEW.json`: every point of two runs side by side; exit 1 on a significant
//! regression beyond the threshold.

use crate::cli::CompareArgs;
use crate::compare::{diff, input, render};
use crate::error::{stderr, Error, Result, EXIT_OK, EXIT_WRONG};
use crate::report::declared::Declared;
use crate::report::file::write_atomic;

/// Runs `collbench compare`; the exit status is 1 when a point regressed, 0 otherwise.
pub fn compare(args: &CompareArgs) -> Result<i32> {
    if !args.threshold.is_finite() || args.threshold < 0.0 {
        return Err(Error::usage(
            "--threshold",
            format!("{} is not a percentage of 0 or more (e.g. 5)", args.threshold),
        ));
    }
    // Output files are checked before reading anything, so a typo does not cost the comparison.
    let outputs = Declared::new(args.out.force)
        .file("-J/--output_file", args.out.output_file.as_deref())
        .file("--markdown", args.markdown.as_deref());
    outputs.check()?;
    let stdout_taken = outputs.stdout_taken();
    let units = args.units.unit()?;
    let old = input::read_for_compare(&args.old, args.allow_incomplete)?;
    let new = input::read_for_compare(&args.new, args.allow_incomplete)?;
    for (pts, name) in [(&old, &args.old), (&new, &args.new)] {
        if pts.iter().any(|p| p.est.repeats == 2) {
            if let Some(n) = crate::bench::options::repeat_note(2) {
                stderr!("collbench: note: {}: {n}", name.display());
            }
        }
    }
    let d = diff::diff(&old, &new, args.threshold);
    let (old_name, new_name) = (args.old.display().to_string(), args.new.display().to_string());
    if d.changes.is_empty() {
        return Err(Error::usage(
            format!("{old_name} and {new_name}"),
            format!(
                "no point is in both files at the same rank count ({} only in the old, {} only in the new, {} at \
                 different rank counts); compare runs of the same collectives, sizes, paths and --np",
                d.only_old.len(),
                d.only_new.len(),
                d.nranks_differ.len()
            ),
        ));
    }
    let h = render::Header {
        old: &old_name,
        new: &new_name,
        threshold_pct: args.threshold,
    };
    let cpu = crate::compare::cpu::verdict_line(
        &crate::compare::cpu::saturation(&args.old, &args.new),
        d.regressions().next().is_some(),
    );
    if let Some(p) = &args.out.output_file {
        let mut doc = render::json(&h, &d);
        if let (Some(l), Some(o)) = (&cpu, doc.as_object_mut()) {
            o.insert("cpu_saturation".into(), l.clone().into());
        }
        let mut bytes =
            serde_json::to_vec_pretty(&doc).map_err(|e| Error::io(format!("encoding {}", p.display()), e.into()))?;
        bytes.push(b'\n');
        write_atomic(p, &bytes, crate::report::file::Replace::from_force(args.out.force))?;
    }
    if let Some(p) = &args.markdown {
        let mut md = render::markdown(&h, &d);
        if let Some(l) = &cpu {
            md += &format!("\n{l}\n");
        }
        write_atomic(
            p,
            md.as_bytes(),
            crate::report::file::Replace::from_force(args.out.force),
        )?;
    }
    // Last, so a stdout that cannot take it (a full device) loses no file.
    let mut text = render::text(&h, &d, units);
    // A `#` line like the rest of the header and verdict: parsers take unprefixed lines for table rows.
    if let Some(l) = &cpu {
        text += &format!("# {l}\n");
    }
    crate::report::stdout::print_beside(&text, stdout_taken)?;
    Ok(if d.regressions().next().is_some() {
        EXIT_WRONG
    } else {
        EXIT_OK
    })
}
