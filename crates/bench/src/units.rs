//! Parsing quantities with units, as users type them on the command line and in sweep specs:
//! times (`500`, `1us`, `1.5ms`, `2s`), sizes (`4096`, `64MiB`, `1G`, `10MB`) and bandwidths
//! (`2GB/s`, `500MiB/s`). Negative, non-finite and overflowing values are errors, never wrapped.

/// Why a quantity did not parse; the message completes "invalid value for --flag: ...".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}`: {reason}")]
pub struct UnitError {
    pub input: String,
    pub reason: String,
}

fn err(input: &str, reason: impl Into<String>) -> UnitError {
    UnitError { input: input.to_string(), reason: reason.into() }
}

/// The unit a bare number (no suffix) is read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Nanos,
    Seconds,
}

/// Splits `"1.5ms"` into `(1.5, "ms")`.
fn split_number(input: &str) -> Result<(f64, &str), UnitError> {
    let s = input.trim();
    if s.starts_with('-') {
        return Err(err(input, "must not be negative"));
    }
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(s.len());
    let (number, unit) = s.split_at(end);
    let number: String = number.chars().filter(|c| *c != '_').collect();
    if number.is_empty() {
        return Err(err(input, "expected a number, optionally followed by a unit"));
    }
    let value: f64 = number.parse().map_err(|_| err(input, "not a number"))?;
    if !value.is_finite() {
        return Err(err(input, "not a finite number"));
    }
    Ok((value, unit.trim()))
}

fn to_u64(input: &str, value: f64) -> Result<u64, UnitError> {
    // 2^64 as f64; anything at or above it does not fit.
    if value >= 18_446_744_073_709_551_616.0 {
        return Err(err(input, "too large"));
    }
    Ok(value.round() as u64)
}

/// A duration in nanoseconds. A bare number is read in `default_unit`.
pub fn parse_time_ns(input: &str, default_unit: TimeUnit) -> Result<u64, UnitError> {
    let (value, unit) = split_number(input)?;
    let ns_per_unit = match unit {
        "" => match default_unit {
            TimeUnit::Nanos => 1.0,
            TimeUnit::Seconds => 1e9,
        },
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return Err(err(input, "unknown time unit (use ns, us, ms, s, min or h)")),
    };
    to_u64(input, value * ns_per_unit)
}

/// A duration (see [`parse_time_ns`]).
pub fn parse_duration(
    input: &str,
    default_unit: TimeUnit,
) -> Result<std::time::Duration, UnitError> {
    parse_time_ns(input, default_unit).map(std::time::Duration::from_nanos)
}

/// A size in bytes: `K`/`KiB` = 1024, `KB` = 1000 (likewise M, G, T).
pub fn parse_bytes(input: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(input)?;
    let multiplier = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return Err(err(input, "unknown size unit (use B, KiB, MiB, GiB, TiB, KB, MB, GB)")),
    };
    to_u64(input, value * multiplier)
}

/// A bandwidth in bytes per second: a size, optionally followed by `/s` (`2GB/s`, `500MiB`).
pub fn parse_bandwidth(input: &str) -> Result<u64, UnitError> {
    let trimmed = input.trim();
    let size = trimmed.strip_suffix("/s").unwrap_or(trimmed);
    parse_bytes(size).map_err(|e| err(input, e.reason))
}

/// `1536` -> `1.5 KiB`, for messages.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time_ns("500", TimeUnit::Nanos), Ok(500));
        assert_eq!(parse_time_ns("1us", TimeUnit::Nanos), Ok(1_000));
        assert_eq!(parse_time_ns("1µs", TimeUnit::Nanos), Ok(1_000));
        assert_eq!(parse_time_ns("1.5ms", TimeUnit::Nanos), Ok(1_500_000));
        assert_eq!(parse_time_ns("2", TimeUnit::Seconds), Ok(2_000_000_000));
        assert_eq!(parse_time_ns("0.5s", TimeUnit::Nanos), Ok(500_000_000));
        assert!(parse_time_ns("-1us", TimeUnit::Nanos).is_err());
        assert!(parse_time_ns("1 parsec", TimeUnit::Nanos).is_err());
        assert!(parse_time_ns("us", TimeUnit::Nanos).is_err());
        assert!(parse_time_ns("1e400", TimeUnit::Nanos).is_err());
        assert!(parse_time_ns("99999999999999h", TimeUnit::Nanos).is_err());
    }

    #[test]
    fn sizes_and_bandwidths() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("10MB"), Ok(10_000_000));
        assert_eq!(parse_bandwidth("2GB/s"), Ok(2_000_000_000));
        assert_eq!(parse_bandwidth("500MiB"), Ok(500 << 20));
        // Pelley's 1.5GB/s, in the thesis's own units (35 ns a line = 1.7 "GB"/s: GiB).
        assert_eq!(parse_bandwidth("1.5GiB/s"), Ok(1_610_612_736));
        assert_eq!(parse_bandwidth("1.5GB/s"), Ok(1_500_000_000));
        assert!(parse_bytes("-5").is_err());
        assert!(parse_bandwidth("fast").is_err());
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(12), "12 B");
    }
}
