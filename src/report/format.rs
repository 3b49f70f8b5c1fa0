//! printf-style number formatting as nccl-tests' table does it, so columns line up the same way and
//! existing parsers read the same numbers.

/// nccl-tests' `getFloatStr` (src/util.cu): `value` right-aligned in `width` columns with two decimals,
/// fewer decimals as the value grows, and an exponent once even no decimals would overflow the column.
pub fn float_col(value: f64, width: usize) -> String {
    if !value.is_finite() {
        // C's printf spells these "nan" / "inf"; Rust would print "NaN".
        let s = if value.is_nan() {
            "nan"
        } else if value > 0.0 {
            "inf"
        } else {
            "-inf"
        };
        return format!("{s:>width$}");
    }
    // Digits left of the decimal point, counted as nccl-tests counts them (0 below 1 and for negatives).
    let mut power = 0usize;
    let mut bound = 1.0f64;
    while value >= bound && power < 400 {
        power += 1;
        bound *= 10.0;
    }
    let s = if power + 2 < width {
        format!("{value:.2}")
    } else if power + 1 < width {
        format!("{value:.1}")
    } else if power < width + 1 {
        format!("{value:.0}")
    } else if width >= 7 {
        c_exp(value, 1)
    } else {
        c_exp(value, 0)
    };
    format!("{s:>width$}")
}

/// C's `%g` (six significant digits, trailing zeros dropped, exponent outside 1e-4..1e6).
pub fn g(value: f64) -> String {
    if value == 0.0 {
        return "0".to_string();
    }
    if !value.is_finite() {
        return float_col(value, 0);
    }
    // Rounding to six significant digits first decides the exponent, as C does (999999.5 -> 1e+06).
    let sci = format!("{value:.5e}");
    let exp: i32 = sci.split_once('e').and_then(|(_, e)| e.parse().ok()).unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let (mant, _) = sci.split_once('e').unwrap_or((&sci, ""));
        format!("{}{}", strip_zeros(mant), exp_suffix(exp))
    } else {
        let prec = (5 - exp) as usize;
        strip_zeros(&format!("{value:.prec$}")).to_string()
    }
}

/// Bytes in the largest binary unit that divides them exactly (`1 MiB`, `64 KiB`, `1000 B`).
pub fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if n >= unit && n % unit == 0 {
            return format!("{} {name}", n / unit);
        }
    }
    format!("{n} B")
}

/// `%.{prec}e` with C's exponent spelling (`1.2e+07`, not Rust's `1.2e7`).
fn c_exp(value: f64, prec: usize) -> String {
    let s = format!("{value:.prec$e}");
    match s.split_once('e') {
        Some((mant, exp)) => format!("{mant}{}", exp_suffix(exp.parse().unwrap_or(0))),
        None => s,
    }
}

fn exp_suffix(exp: i32) -> String {
    let sign = if exp < 0 { '-' } else { '+' };
    format!("e{sign}{:02}", exp.unsigned_abs())
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_col_matches_nccl_tests_get_float_str() {
        // Time column (width 7): two decimals below 1e4, one below 1e5, none below 1e7, then an exponent.
        assert_eq!(float_col(12.345, 7), "  12.35");
        assert_eq!(float_col(0.5, 7), "   0.50");
        assert_eq!(float_col(9999.99, 7), "9999.99");
        assert_eq!(float_col(12345.67, 7), "12345.7");
        assert_eq!(float_col(1234567.0, 7), "1234567");
        assert_eq!(float_col(12345678.0, 7), "1.2e+07");
        // Bandwidth columns (width 6).
        assert_eq!(float_col(1.5, 6), "  1.50");
        assert_eq!(float_col(999.99, 6), "999.99");
        assert_eq!(float_col(1234.56, 6), "1234.6");
        assert_eq!(float_col(123456.0, 6), "123456");
        assert_eq!(float_col(1234567.0, 6), " 1e+06");
        assert_eq!(float_col(f64::NAN, 6), "   nan");
    }

    #[test]
    fn g_matches_c_percent_g() {
        assert_eq!(g(0.0), "0");
        assert_eq!(g(3.0), "3");
        assert_eq!(g(12.5), "12.5");
        assert_eq!(g(1.0 / 3.0), "0.333333");
        assert_eq!(g(123456.0), "123456");
        assert_eq!(g(1234567.0), "1.23457e+06");
        assert_eq!(g(999999.5), "1e+06");
        assert_eq!(g(0.0001), "0.0001");
        assert_eq!(g(0.00001234), "1.234e-05");
    }

    #[test]
    fn bytes_uses_exact_binary_units() {
        assert_eq!(bytes(1 << 20), "1 MiB");
        assert_eq!(bytes(64 << 10), "64 KiB");
        assert_eq!(bytes(1000), "1000 B");
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(3 << 29), "1536 MiB");
    }
}
