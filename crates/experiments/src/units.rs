//! Numbers with units, as specs and bench flags write them (`500ns`, `2us`, `1.5GB/s`, `256MiB`),
//! turned into plain numbers in base units (nanoseconds, bytes, bytes per second) so that a
//! grid axis can be an x axis and a break-even latency can be interpolated.
//!
//! The suffixes are the ones `nvmdb bench` accepts (`bench::units`); this crate keeps its own
//! copy because the sweep treats the bench as a separate program and never links it.

use std::time::Duration;

/// What a bare number means for a time value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BareTime {
    Nanos,
    Seconds,
}

/// Splits `"1.5us"` into `(1.5, "us")`.
fn split_number(input: &str) -> Option<(f64, &str)> {
    let s = input.trim();
    // The longest prefix that is a number; what follows is the unit.
    let end = (1..=s.len()).rev().find(|&end| {
        s.is_char_boundary(end)
            && !s[..end].ends_with(['e', 'E'])
            && s[..end].parse::<f64>().is_ok()
    })?;
    let value: f64 = s[..end].parse().ok()?;
    value.is_finite().then_some((value, s[end..].trim()))
}

/// Nanoseconds per unit of a time suffix.
fn time_unit_ns(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1.0,
        "us" | "µs" | "μs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return None,
    })
}

/// Bytes per unit of a size suffix (`K`/`KiB` = 1024, `KB` = 1000, as bench reads them).
fn size_unit_bytes(unit: &str) -> Option<f64> {
    const KI: f64 = 1024.0;
    Some(match unit.to_ascii_lowercase().as_str() {
        "b" => 1.0,
        "k" | "kib" => KI,
        "m" | "mib" => KI * KI,
        "g" | "gib" => KI * KI * KI,
        "t" | "tib" => KI * KI * KI * KI,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return None,
    })
}

/// A number with an optional unit, in base units: times in nanoseconds, sizes in bytes,
/// bandwidths in bytes per second; a bare number is returned as written. `None` if `input` is
/// not a number (a label such as `tpcb`).
pub fn parse_quantity(input: &str) -> Option<f64> {
    let (value, unit) = split_number(input)?;
    if unit.is_empty() {
        return Some(value);
    }
    if let Some(ns) = time_unit_ns(unit) {
        return Some(value * ns);
    }
    let size = unit.strip_suffix("/s").unwrap_or(unit);
    size_unit_bytes(size).map(|b| value * b)
}

/// A duration such as `10s`, `500ms` or `2min`; a bare number is read as `bare`.
pub fn parse_duration(input: &str, bare: BareTime) -> Option<Duration> {
    let (value, unit) = split_number(input)?;
    let ns = match unit {
        "" => match bare {
            BareTime::Nanos => value,
            BareTime::Seconds => value * 1e9,
        },
        u => value * time_unit_ns(u)?,
    };
    (0.0..1e19).contains(&ns).then(|| Duration::from_nanos(ns.round() as u64))
}

/// A duration as bench flags take it: `1.5s`, `200ms` (whole milliseconds when shorter than a
/// second is not exact).
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// A number for tables and labels: three significant digits, no exponent for everyday values.
pub fn format_number(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "n/a".into()
        } else if v > 0.0 {
            "∞".into()
        } else {
            "-∞".into()
        };
    }
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e7).contains(&a) {
        return format!("{v:.2e}");
    }
    let digits = if a >= 100.0 || a == 0.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("0"), Some(0.0));
        assert_eq!(parse_quantity("1us"), Some(1000.0));
        assert_eq!(parse_quantity("2.5µs"), Some(2500.0));
        assert_eq!(parse_quantity("500ns"), Some(500.0));
        assert_eq!(parse_quantity("20ms"), Some(2e7));
        assert_eq!(parse_quantity("1.5GB/s"), Some(1.5e9));
        assert_eq!(parse_quantity("256MiB"), Some(256.0 * 1024.0 * 1024.0));
        assert_eq!(parse_quantity("1e6"), Some(1e6));
        assert_eq!(parse_quantity("tpcb"), None);
        assert_eq!(parse_quantity("3x"), None);
        assert_eq!(parse_quantity(""), None);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2", BareTime::Seconds), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("200ms", BareTime::Seconds), Some(Duration::from_millis(200)));
        assert_eq!(parse_duration("5", BareTime::Nanos), Some(Duration::from_nanos(5)));
        assert_eq!(parse_duration("-1s", BareTime::Seconds), None);
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(3)), "3s");
    }

    #[test]
    fn numbers() {
        assert_eq!(format_number(1.6234), "1.62");
        assert_eq!(format_number(3.5), "3.5");
        assert_eq!(format_number(12345.6), "12346");
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(f64::INFINITY), "∞");
        assert_eq!(format_number(3.2e8), "3.20e8");
    }
}
