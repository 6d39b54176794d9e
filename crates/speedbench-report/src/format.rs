//! Number and word formatting shared by the renderers.

/// AIPerf's console number format `f"{v:,.2f}"`: two decimals and a comma
/// every three integer digits; `N/A` for NaN and infinities.
pub(crate) fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return "N/A".to_string();
    }
    // Past a trillion a grouped figure is a wall of digits (a speedup over
    // a timer's resolution reaches 1e300): scientific notation instead.
    if v.abs() >= LARGE {
        return format!("{v:.2e}");
    }
    // Round first, then group: 999.999 must become "1,000.00", not "999.100".
    let fixed = format!("{:.2}", v.abs());
    let (int, frac) = fixed.split_once('.').unwrap_or((&fixed, "00"));
    let mut grouped = String::with_capacity(int.len() + int.len() / 3);
    for (i, digit) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    // "-0.00" would be noise: only a value that rounds to non-zero keeps its sign.
    let sign = if v < 0.0 && fixed.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        "-"
    } else {
        ""
    };
    format!("{sign}{grouped}.{frac}")
}

/// Where a figure is shown in scientific notation.
const LARGE: f64 = 1e12;

/// `v` with `decimals` decimals, or in scientific notation past a
/// trillion (so a ratio over a timer's resolution stays one short word).
pub(crate) fn fixed(v: f64, decimals: usize) -> String {
    if v.is_finite() && v.abs() >= LARGE {
        format!("{v:.2e}")
    } else {
        format!("{v:.decimals$}")
    }
}

/// `n` followed by `word`, pluralized with an `s` unless `n == 1`.
pub(crate) fn count_of(n: u64, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_figures_are_scientific_not_a_wall_of_digits() {
        assert_eq!(thousands(1e300), "1.00e300");
        assert_eq!(thousands(-5.25e13), "-5.25e13");
        assert_eq!(thousands(999_999_999_999.0), "999,999,999,999.00");
        assert_eq!(fixed(327.194, 2), "327.19");
        assert_eq!(fixed(1.5e300, 2), "1.50e300");
        assert_eq!(fixed(0.5, 3), "0.500");
    }

    #[test]
    fn thousands_groups_and_rounds() {
        assert_eq!(thousands(0.0), "0.00");
        assert_eq!(thousands(8.0), "8.00");
        assert_eq!(thousands(999.994), "999.99");
        // 999.996 rounds to 1000.00, then groups.
        assert_eq!(thousands(999.996), "1,000.00");
        assert_eq!(thousands(4963.789), "4,963.79");
        assert_eq!(thousands(52_974.9), "52,974.90");
        assert_eq!(thousands(1_234_567.891), "1,234,567.89");
        assert_eq!(thousands(-1234.5), "-1,234.50");
        assert_eq!(thousands(-0.001), "0.00");
        assert_eq!(thousands(f64::NAN), "N/A");
        assert_eq!(thousands(f64::INFINITY), "N/A");
    }

    #[test]
    fn count_of_pluralizes() {
        assert_eq!(count_of(0, "request"), "0 requests");
        assert_eq!(count_of(1, "request"), "1 request");
        assert_eq!(count_of(2, "step"), "2 steps");
    }
}
