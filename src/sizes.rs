//! Byte sizes as people type and read them: `64M`, `1KiB`, `512` in; `64 MiB`, `8 B` out.
//!
//! Units are binary whatever the spelling, as in nccl-tests (`1K` = 1024): `K`, `KB` and `KiB` are all
//! 1024 bytes, so a value copied from nccl-tests' command line means the same here. A decimal is accepted
//! only when it names a whole number of bytes (`1.5K` = 1536, `1.5M`; not `1.3K` = 1331.2 bytes), so every
//! label [`format_size`] prints without `~` can be typed back in.

/// Largest number of decimal digits accepted after the point; keeps the exact arithmetic inside `u128`.
const MAX_DECIMALS: usize = 20;

/// What every parse error ends with: how to write a size.
const HOW: &str = "give bytes or a K/M/G/T/P/E suffix (binary, 1K = 1024), e.g. 8, 64K, 1M, 2GiB";

/// Parses a byte count: plain bytes or a K/M/G/T/P/E suffix (binary), case-insensitive, optional `B`/`iB`.
/// P and E are here because [`format_size`] prints them for the largest sizes, and what it prints must parse.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("empty size; {HOW}"));
    }
    if t.starts_with('-') {
        return Err(format!("'{s}' is negative; sizes are 0 or more bytes"));
    }
    let num_end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(num_end);
    let unit = unit.trim_start();
    if num.is_empty() {
        return Err(format!("'{s}' is not a size; {HOW}"));
    }
    let shift = unit_shift(unit).ok_or_else(|| format!("'{s}' has an unknown unit '{unit}'; {HOW}"))?;
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() || frac.contains('.') || (num.contains('.') && frac.is_empty()) {
        return Err(format!("'{s}' is not a number; {HOW}"));
    }
    let too_large = || format!("'{s}' is too large (the limit is {} bytes)", u64::MAX);
    // 20 digits bound the integer part below 2^67, so shifting by up to 60 (E) stays inside u128.
    let int = int.trim_start_matches('0');
    if int.len() > 20 {
        return Err(too_large());
    }
    let whole = int.parse::<u128>().unwrap_or(0) << shift;
    let frac = frac.trim_end_matches('0');
    let part = if frac.is_empty() {
        0
    } else {
        if frac.len() > MAX_DECIMALS {
            return Err(format!("'{s}' has too many decimals; use a smaller unit"));
        }
        let digits: u128 = frac.parse().map_err(|_| format!("'{s}' is not a number; {HOW}"))?;
        let scaled = digits << shift;
        let denom = 10u128.pow(frac.len() as u32);
        if scaled % denom != 0 {
            return Err(format!(
                "'{s}' is not a whole number of bytes; use a smaller unit or an integer"
            ));
        }
        scaled / denom
    };
    u64::try_from(whole + part).map_err(|_| too_large())
}

/// The power of two a unit suffix stands for, or `None` when the suffix is not a unit.
fn unit_shift(unit: &str) -> Option<u32> {
    let lower = unit.to_ascii_lowercase();
    if lower.is_empty() || lower == "b" {
        return Some(0);
    }
    let mut chars = lower.chars();
    let shift = match chars.next()? {
        'k' => 10,
        'm' => 20,
        'g' => 30,
        't' => 40,
        'p' => 50,
        'e' => 60,
        _ => return None,
    };
    matches!(chars.as_str(), "" | "b" | "ib").then_some(shift)
}

/// A size for messages and labels: `8 B`, `1.5 KiB`, `64 MiB`; `~` marks a value rounded to 2 decimals.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // The largest unit the size reaches; u64 tops out below 16 EiB, so EiB always suffices.
    let exp = (63 - bytes.leading_zeros()) / 10;
    let unit = 1u128 << (10 * exp);
    let scaled = u128::from(bytes) * 100;
    let hundredths = (scaled + unit / 2) / unit;
    let approx = if scaled % unit == 0 { "" } else { "~" };
    let (int, frac) = (hundredths / 100, hundredths % 100);
    let frac = match frac {
        0 => String::new(),
        f if f % 10 == 0 => format!(".{}", f / 10),
        f => format!(".{f:02}"),
    };
    format!("{approx}{int}{frac} {}", UNITS[exp as usize - 1])
}

/// A size as one command-line word, exact and without spaces: `8`, `64M`, `512K`, `1536`.
pub fn format_size_arg(bytes: u64) -> String {
    // The largest unit that divides the size exactly; plain 0 rather than `0T`.
    let exp = if bytes == 0 {
        0
    } else {
        (bytes.trailing_zeros().min(40) / 10) as usize
    };
    let suffix = ["", "K", "M", "G", "T"][exp];
    format!("{}{suffix}", bytes >> (10 * exp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_bytes_and_binary_suffixes_in_any_case() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("512", 512),
            ("8B", 8),
            ("8b", 8),
            ("1k", 1024),
            ("1K", 1024),
            ("1KB", 1024),
            ("1kib", 1024),
            ("64MiB", 64 << 20),
            ("64 MiB", 64 << 20),
            ("  64M  ", 64 << 20),
            ("2G", 2 << 30),
            ("3T", 3 << 40),
            ("007K", 7 << 10),
            ("1.5K", 1536),
            ("1.5M", 3 << 19),
            ("1.50M", 3 << 19),
            ("2.0", 2),
            ("0.5K", 512),
            ("18446744073709551615", u64::MAX),
            ("16383.75T", (16383 << 40) + (3 << 38)),
            ("1P", 1 << 50),
            // The label format_size gives 0x4285_0000_0000_0000 bytes (found by the sizes fuzz target).
            ("18.75 PiB", 21_110_623_253_299_200),
            ("15.5EiB", 31 << 59),
        ];
        for &(s, want) in cases {
            assert_eq!(parse_size(s), Ok(want), "{s}");
        }
    }

    #[test]
    fn rejects_malformed_negative_inexact_and_overflowing_sizes() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("   ", "empty"),
            ("1Q", "unknown unit 'Q'"),
            ("1KQ", "unknown unit 'KQ'"),
            ("1iB", "unknown unit 'iB'"),
            ("1Z", "unknown unit 'Z'"),
            ("16E", "too large"),
            ("1µ", "unknown unit 'µ'"),
            ("K", "not a size"),
            ("abc", "not a size"),
            ("+5", "not a size"),
            ("-1", "negative"),
            ("-1K", "negative"),
            ("1.3K", "whole number of bytes"),
            ("1.5", "whole number of bytes"),
            ("1.", "not a number"),
            (".5K", "not a number"),
            ("1.2.3", "not a number"),
            ("18446744073709551616", "too large"),
            ("16777216T", "too large"),
            ("99999999999999999999999999K", "too large"),
            ("1.000000000000000000001K", "too many decimals"),
        ];
        for &(s, want) in cases {
            let err = parse_size(s).expect_err(s);
            assert!(err.contains(want), "{s}: {err}");
        }
        // Every malformed-input message says how to write a size.
        assert!(parse_size("1Q").unwrap_err().contains("1K = 1024"));
    }

    #[test]
    fn formats_with_the_largest_unit_and_marks_rounding() {
        let cases: &[(u64, &str)] = &[
            (0, "0 B"),
            (8, "8 B"),
            (1023, "1023 B"),
            (1024, "1 KiB"),
            (1536, "1.5 KiB"),
            (1280, "1.25 KiB"),
            (1025, "~1 KiB"),
            (64 << 20, "64 MiB"),
            (512 << 10, "512 KiB"),
            (3 << 30, "3 GiB"),
            (5 << 40, "5 TiB"),
            ((1 << 20) - 1, "~1024 KiB"),
            (1_000_000_000, "~953.67 MiB"),
            (u64::MAX, "~16 EiB"),
        ];
        for &(b, want) in cases {
            assert_eq!(format_size(b), want, "{b}");
        }
    }

    #[test]
    fn argument_form_is_exact_and_parses_back() {
        let cases: &[(u64, &str)] = &[
            (0, "0"),
            (8, "8"),
            (1536, "1536"),
            (4096, "4K"),
            (512 << 10, "512K"),
            (64 << 20, "64M"),
            (3 << 30, "3G"),
            (1 << 50, "1024T"),
            (u64::MAX, "18446744073709551615"),
        ];
        for &(b, want) in cases {
            assert_eq!(format_size_arg(b), want, "{b}");
            assert_eq!(parse_size(want), Ok(b), "{want}");
        }
    }

    #[test]
    fn exact_labels_parse_back_to_the_same_bytes() {
        for b in [0, 8, 1000, 1024, 1536, 1280, 3 << 19, 64 << 20, 7 << 30, 5 << 40] {
            assert_eq!(parse_size(&format_size(b)), Ok(b), "{b}");
        }
    }
}
