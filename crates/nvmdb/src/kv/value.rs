//! Typed values: a [`Value`] converts to and from the bytes a table stores, so an application
//! reads back what it wrote without hand-written encodings. The encodings are fixed (they are
//! part of the stored data): integers little-endian, `bool` one byte, strings UTF-8.

use storage::{DbError, Result};

/// A type a table can store as a value ([`crate::Table::insert_as`],
/// [`crate::Table::get_as`]). Implemented for `u64`, `i64`, `u32`, `i32`, `f64`, `bool`,
/// `String` and `Vec<u8>`; implement it for an application type to store that.
///
/// ```
/// use nvmdb::{DbError, Value};
/// #[derive(Debug, PartialEq)]
/// struct Point { x: i32, y: i32 }
/// impl Value for Point {
///     fn to_bytes(&self) -> Vec<u8> {
///         [self.x.to_bytes(), self.y.to_bytes()].concat()
///     }
///     fn from_bytes(bytes: &[u8]) -> Result<Self, DbError> {
///         let (x, y) = bytes.split_at_checked(4).ok_or_else(|| {
///             DbError::Invalid(format!("a Point is 8 bytes, not {}", bytes.len()))
///         })?;
///         Ok(Point { x: i32::from_bytes(x)?, y: i32::from_bytes(y)? })
///     }
/// }
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| tx.open_table::<str>("points")?.insert_as("home", &Point { x: 3, y: -4 }))?;
/// let p = db.read(|tx| tx.open_table::<str>("points")?.map_or(Ok(None), |t| t.get_as("home")))?;
/// assert_eq!(p, Some(Point { x: 3, y: -4 }));
/// # Ok::<(), DbError>(())
/// ```
pub trait Value: Sized {
    /// The bytes stored for the value.
    ///
    /// ```
    /// use nvmdb::Value;
    /// assert_eq!(258u64.to_bytes(), [2, 1, 0, 0, 0, 0, 0, 0]);
    /// ```
    fn to_bytes(&self) -> Vec<u8>;

    /// The value stored as `bytes`; bytes that are not one are [`DbError::Invalid`].
    ///
    /// ```
    /// use nvmdb::Value;
    /// assert_eq!(String::from_bytes(b"ada")?, "ada");
    /// assert!(u64::from_bytes(b"short").is_err());
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    fn from_bytes(bytes: &[u8]) -> Result<Self>;
}

fn wrong(what: &str, bytes: &[u8]) -> DbError {
    DbError::Invalid(format!("a stored value of {} bytes is not a {what}", bytes.len()))
}

macro_rules! number {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn to_bytes(&self) -> Vec<u8> {
                self.to_le_bytes().to_vec()
            }
            fn from_bytes(bytes: &[u8]) -> Result<Self> {
                bytes.try_into().map(<$t>::from_le_bytes).map_err(|_| wrong(stringify!($t), bytes))
            }
        }
    )*};
}
number!(u64, i64, u32, i32, f64);

impl Value for bool {
    fn to_bytes(&self) -> Vec<u8> {
        vec![u8::from(*self)]
    }
    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        match bytes {
            [0] => Ok(false),
            [1] => Ok(true),
            _ => Err(wrong("bool", bytes)),
        }
    }
}

impl Value for String {
    fn to_bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        String::from_utf8(bytes.to_vec()).map_err(|_| wrong("UTF-8 string", bytes))
    }
}

impl Value for Vec<u8> {
    fn to_bytes(&self) -> Vec<u8> {
        self.clone()
    }
    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Ok(bytes.to_vec())
    }
}
