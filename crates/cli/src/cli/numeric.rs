//! Value parsers for the numeric flags of every subcommand: each names the range it accepts, so
//! `--threads -1`, `--records 0`, `--target-tps inf` or `--step-timeout NaN` end in one line
//! (`error: invalid value '-1' for '--threads <THREADS>': expected a whole number from 1 to
//! 1024`) before anything runs. `main` lets negative numbers reach these parsers as values;
//! float flags also take `allow_hyphen_values`, since clap reads `-inf` as a short flag.

/// A whole number in `min..=max`, as a `T` (which must hold every number of the range).
pub fn whole<T: TryFrom<u64>>(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        text.trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| format!("expected a whole number from {min} to {max}"))
    }
}

/// Any whole number a `u64` holds (seeds, case numbers).
pub fn any_u64() -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    whole(0, u64::MAX)
}

/// A finite number in `min..=max`.
pub fn real_in(
    min: f64,
    max: f64,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        text.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && (min..=max).contains(x))
            .ok_or_else(|| format!("expected a number from {min} to {max}"))
    }
}

/// A finite number strictly between `min` and `max`.
pub fn real_between(
    min: f64,
    max: f64,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        text.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && min < *x && *x < max)
            .ok_or_else(|| format!("expected a number above {min} and below {max}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_parsers_refuse_what_their_range_excludes() {
        let threads = whole::<usize>(1, 1024);
        assert_eq!(threads("8"), Ok(8));
        for bad in ["-1", "0", "1025", "1e3", "", "x", "18446744073709551616"] {
            assert!(threads(bad).is_err(), "{bad}");
        }
        let u8s = whole::<u8>(0, 300);
        assert!(u8s("300").is_err(), "a value the type cannot hold is refused");
        let fraction = real_in(0.0, 1.0);
        assert_eq!(fraction("1"), Ok(1.0));
        for bad in ["-0.5", "1.5", "NaN", "inf", "-inf"] {
            assert!(fraction(bad).is_err(), "{bad}");
        }
        let open = real_between(0.0, 1.0);
        assert!(open("0").is_err() && open("1").is_err() && open("0.99").is_ok());
    }
}
