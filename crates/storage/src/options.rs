//! Engine options as `--engine-opt key=value` pairs (`docs/design.md` §4, "Options"): the
//! [`OptionSet`] interface every engine's options struct has, and [`engine_options!`], which
//! declares such a struct from one table — per field its type, default, parser, help line and
//! whether `--engine-opt` sets it — so parsing, help and the bench row's listing cannot drift
//! apart. It lives here, below `engines` and `sqlite-nvwal`, so both declare options the same way.
//!
//! Invariant: a key is parsed, listed and documented from the same table row; a value that does
//! not parse is a one-line error naming the key and the accepted values, never a panic.

/// A type an option can have: how `--engine-opt` spells its values.
pub trait OptionValue: Sized {
    /// The values [`OptionValue::parse_option`] accepts, in words, for errors and help.
    const ACCEPTS: &'static str;
    /// The value `text` names, if any.
    fn parse_option(text: &str) -> Option<Self>;
    /// The value as `--engine-opt` spells it (`None`: unset, listed nowhere).
    fn show_option(&self) -> Option<String>;
}

/// How one field is parsed and shown: [`Plain`] (its type's [`OptionValue`]) unless the table
/// names another (e.g. [`Bytes`] for a byte count that takes units).
pub trait ParseAs<T> {
    const ACCEPTS: &'static str;
    fn parse(text: &str) -> Option<T>;
    fn show(value: &T) -> Option<String>;
}

/// A field parsed by its type's [`OptionValue`].
pub struct Plain;

impl<T: OptionValue> ParseAs<T> for Plain {
    const ACCEPTS: &'static str = T::ACCEPTS;
    fn parse(text: &str) -> Option<T> {
        T::parse_option(text)
    }
    fn show(value: &T) -> Option<String> {
        value.show_option()
    }
}

/// A byte count: a number with an optional unit (`K`/`KiB` = 1024, `KB` = 1000, likewise M, G,
/// T), listed as the plain number (as bench rows always listed it).
pub struct Bytes;

impl ParseAs<u64> for Bytes {
    const ACCEPTS: &'static str = "a size in bytes (4096, 8MiB, 1GB)";
    fn parse(text: &str) -> Option<u64> {
        parse_bytes(text)
    }
    fn show(value: &u64) -> Option<String> {
        Some(value.to_string())
    }
}

impl ParseAs<Option<u64>> for Bytes {
    const ACCEPTS: &'static str = <Bytes as ParseAs<u64>>::ACCEPTS;
    fn parse(text: &str) -> Option<Option<u64>> {
        parse_bytes(text).map(Some)
    }
    fn show(value: &Option<u64>) -> Option<String> {
        value.map(|v| v.to_string())
    }
}

/// `text` as a byte count (see [`Bytes`]); `None` for anything else, or a count past `u64`.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let multiplier = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return None,
    };
    let bytes = value * multiplier;
    // A fraction of a byte or more than u64 holds is not a size.
    (bytes.fract() == 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

macro_rules! number_option {
    ($($t:ty),*) => {$(
        impl OptionValue for $t {
            const ACCEPTS: &'static str = "a number";
            fn parse_option(text: &str) -> Option<Self> {
                text.parse().ok()
            }
            fn show_option(&self) -> Option<String> {
                Some(self.to_string())
            }
        }
    )*};
}
number_option!(u32, u64, usize);

/// `on`/`off` (`true`/`false` too: older rows recorded a switch as a JSON boolean).
impl OptionValue for bool {
    const ACCEPTS: &'static str = "on or off";
    fn parse_option(text: &str) -> Option<Self> {
        match text {
            "on" | "true" => Some(true),
            "off" | "false" => Some(false),
            _ => None,
        }
    }
    fn show_option(&self) -> Option<String> {
        Some(if *self { "on" } else { "off" }.to_string())
    }
}

impl<T: OptionValue> OptionValue for Option<T> {
    const ACCEPTS: &'static str = T::ACCEPTS;
    fn parse_option(text: &str) -> Option<Self> {
        T::parse_option(text).map(Some)
    }
    fn show_option(&self) -> Option<String> {
        self.as_ref().and_then(T::show_option)
    }
}

impl OptionValue for crate::pages::CachePolicy {
    const ACCEPTS: &'static str = "lru or set8";
    fn parse_option(text: &str) -> Option<Self> {
        Self::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(self.name().to_string())
    }
}

/// One `--engine-opt` key of an [`OptionSet`], for help and listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionInfo {
    pub key: &'static str,
    /// Its values in words (`a number`, `nvm or fs`).
    pub accepts: &'static str,
    /// One line: what it does.
    pub help: &'static str,
}

/// An engine's options: set from `key=value` pairs, listed with their values, documented.
/// Implemented by [`engine_options!`].
pub trait OptionSet {
    /// The keys `--engine-opt` sets, in table order.
    fn options(&self) -> Vec<OptionInfo>;
    /// Sets `key` from `value`: `Ok(false)` if `key` is none of this set's, `Err` (one line
    /// naming the key and the accepted values) if `value` does not parse.
    fn set(&mut self, key: &str, value: &str) -> Result<bool, String>;
    /// Every key with its value as `--engine-opt` spells it (unset ones left out).
    fn resolved(&self) -> Vec<(&'static str, String)>;
}

/// Declares an options struct from one table, with its `Default` and [`OptionSet`]:
///
/// ```
/// storage::engine_options! {
///     /// Options of an example engine.
///     pub struct Options {
///         /// More about the field (optional).
///         key size_bytes: u64 = 1 << 20 => storage::options::Bytes, "bytes of the arena";
///         key rounds: u32 = 3, "rounds per pass";
///         flag workers: u32 = 16, "workers (a command-line flag, not an --engine-opt key)";
///     }
/// }
/// let mut o = Options::default();
/// use storage::options::OptionSet;
/// assert_eq!(o.set("size_bytes", "2MiB"), Ok(true));
/// assert_eq!(o.size_bytes, 2 << 20);
/// assert!(o.set("rounds", "many").unwrap_err().contains("rounds must be a number"));
/// assert_eq!(o.set("workers", "3"), Ok(false));
/// ```
///
/// Each row is `KIND NAME [as KEY]: TYPE = DEFAULT [=> PARSER], "help";` where `KIND` is `key`
/// (an `--engine-opt` key, spelled `NAME` or `KEY`), `flag` (a field set elsewhere, e.g. by a
/// command-line flag) or `part`
/// (a nested [`OptionSet`] whose keys the caller dispatches; give it `#[serde(flatten)]` to
/// serialize it inline). `PARSER` is a [`ParseAs`] type, [`Plain`] when left out. The struct
/// derives `Clone, Debug, PartialEq`; add other derives (serde) above it.
#[macro_export]
macro_rules! engine_options {
    (
        $(#[$smeta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $kind:ident $field:ident $(as $key:ident)? : $ty:ty = $default:expr
                    $(=> $parser:ty)? , $help:literal ;
            )*
        }
    ) => {
        $(#[$smeta])*
        #[derive(Clone, Debug, PartialEq)]
        $vis struct $name {
            $(
                #[doc = $help]
                $(#[$fmeta])*
                pub $field: $ty,
            )*
        }

        impl ::core::default::Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* }
            }
        }

        // Each row expands to its own statement, so a table of flags alone pushes nothing.
        #[allow(clippy::vec_init_then_push, unused_mut)]
        impl $crate::options::OptionSet for $name {
            fn options(&self) -> ::std::vec::Vec<$crate::options::OptionInfo> {
                let mut out = ::std::vec::Vec::new();
                $($crate::engine_options!(
                    @info $kind out, $field, ($($key)?), $ty, $help $(, $parser)?
                );)*
                out
            }

            fn set(&mut self, key: &str, value: &str) -> ::core::result::Result<bool, String> {
                $($crate::engine_options!(
                    @set $kind self, key, value, $field, ($($key)?), $ty $(, $parser)?
                );)*
                Ok(false)
            }

            fn resolved(&self) -> ::std::vec::Vec<(&'static str, String)> {
                let mut out = ::std::vec::Vec::new();
                $($crate::engine_options!(
                    @show $kind self, out, $field, ($($key)?), $ty $(, $parser)?
                );)*
                out
            }
        }
    };
    (@key $field:ident ()) => { stringify!($field) };
    (@key $field:ident ($key:ident)) => { stringify!($key) };
    (@parser $ty:ty) => { $crate::options::Plain };
    (@parser $ty:ty, $parser:ty) => { $parser };
    (@info key $out:ident, $field:ident, $key:tt, $ty:ty, $help:literal $(, $parser:ty)?) => {
        $out.push($crate::options::OptionInfo {
            key: $crate::engine_options!(@key $field $key),
            accepts: <$crate::engine_options!(@parser $ty $(, $parser)?)
                as $crate::options::ParseAs<$ty>>::ACCEPTS,
            help: $help,
        })
    };
    (@info $other:ident $($rest:tt)*) => { $crate::engine_options!(@kind $other) };
    (
        @set key $self:ident, $given:ident, $value:ident, $field:ident, $key:tt, $ty:ty
        $(, $parser:ty)?
    ) => {
        if $given == $crate::engine_options!(@key $field $key) {
            type P = $crate::engine_options!(@parser $ty $(, $parser)?);
            return match <P as $crate::options::ParseAs<$ty>>::parse($value) {
                Some(v) => {
                    $self.$field = v;
                    Ok(true)
                }
                None => Err(format!(
                    "{} must be {}, not `{}`",
                    $given,
                    <P as $crate::options::ParseAs<$ty>>::ACCEPTS,
                    $value
                )),
            };
        }
    };
    (@set $other:ident $($rest:tt)*) => { $crate::engine_options!(@kind $other) };
    (@show key $self:ident, $out:ident, $field:ident, $key:tt, $ty:ty $(, $parser:ty)?) => {
        if let Some(text) = <$crate::engine_options!(@parser $ty $(, $parser)?)
            as $crate::options::ParseAs<$ty>>::show(&$self.$field)
        {
            $out.push(($crate::engine_options!(@key $field $key), text));
        }
    };
    (@show $other:ident $($rest:tt)*) => { $crate::engine_options!(@kind $other) };
    // Rows of these kinds are fields only; anything else is a typo in the table.
    (@kind flag) => { () };
    (@kind part) => { () };
}

/// Appends `set`'s help, one line per key (`key=ACCEPTS (default D): help`), to `out`.
pub fn help_lines(set: &dyn OptionSet, keys: &[&str], out: &mut Vec<String>) {
    let values = set.resolved();
    for info in set.options().into_iter().filter(|i| keys.is_empty() || keys.contains(&i.key)) {
        let default = match values.iter().find(|(k, _)| *k == info.key) {
            Some((_, v)) => format!("default {v}"),
            None => "unset by default".to_string(),
        };
        out.push(format!("{}=<{}> ({default}): {}", info.key, info.accepts, info.help));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::engine_options! {
        struct Example {
            key count: u32 = 7, "a count";
            key size: u64 = 4096 => Bytes, "a size";
            key limit as cap: Option<u64> = None, "a limit";
            flag workers: u32 = 2, "not a key";
        }
    }

    #[test]
    fn a_table_parses_lists_and_documents_the_same_keys() {
        let mut o = Example::default();
        assert_eq!(o.resolved(), vec![("count", "7".to_string()), ("size", "4096".to_string())]);
        assert_eq!(o.set("size", "8KiB"), Ok(true));
        assert_eq!(o.set("cap", "9"), Ok(true));
        assert_eq!(o.set("limit", "9"), Ok(false), "a renamed field is set by its key");
        assert_eq!(o.set("workers", "9"), Ok(false), "a flag is not a key");
        assert_eq!(o.set("nope", "1"), Ok(false));
        assert_eq!((o.size, o.limit, o.workers), (8192, Some(9), 2));
        let err = o.set("count", "x").unwrap_err();
        assert_eq!(err, "count must be a number, not `x`");
        let keys: Vec<_> = o.options().iter().map(|i| i.key).collect();
        assert_eq!(keys, ["count", "size", "cap"]);
        let mut help = Vec::new();
        help_lines(&Example::default(), &[], &mut help);
        assert_eq!(help[0], "count=<a number> (default 7): a count");
        assert!(help[2].contains("unset by default"), "{help:?}");
    }

    #[test]
    fn byte_counts_take_units_and_refuse_the_rest() {
        assert_eq!(parse_bytes("64MiB"), Some(64 << 20));
        assert_eq!(parse_bytes("8m"), Some(8 << 20));
        assert_eq!(parse_bytes("1GB"), Some(1_000_000_000));
        assert_eq!(parse_bytes("12"), Some(12));
        for bad in ["", "MiB", "1.5", "-1", "1 parsec", "99999999999TiB", "1e3"] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }
}
