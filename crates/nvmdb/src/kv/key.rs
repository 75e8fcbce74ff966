//! Typed keys, encoded to byte strings whose byte order is the keys' order.

/// A key type a table can have: `u64`, `i64`, `str` or `[u8]`. Keys are stored as byte
/// strings whose lexicographic order is the type's order (integers big-endian, `i64` with
/// its sign bit flipped), so ranges and iteration run in key order.
///
/// ```
/// use nvmdb::Key;
/// let mut a = Vec::new();
/// let mut b = Vec::new();
/// (-1i64).encode(&mut a);
/// 1i64.encode(&mut b);
/// assert!(a < b);
/// assert_eq!(i64::decode(&a), Some(-1));
/// ```
pub trait Key: sealed::Sealed {
    /// What iteration hands back: the owned form (`String` for `str`, `Vec<u8>` for `[u8]`).
    type Owned;
    /// Stored in the catalog, so a table is always opened with the type it was made with.
    #[doc(hidden)]
    const KIND: u8;
    /// The type's name in error messages.
    #[doc(hidden)]
    const NAME: &'static str;
    /// Appends the order-preserving encoding.
    ///
    /// ```
    /// use nvmdb::Key;
    /// let mut out = Vec::new();
    /// 258u64.encode(&mut out);
    /// assert_eq!(out, [0, 0, 0, 0, 0, 0, 1, 2]); // big-endian
    /// ```
    fn encode(&self, out: &mut Vec<u8>);
    /// Decodes an encoding; `None` if it is not one.
    ///
    /// ```
    /// use nvmdb::Key;
    /// assert_eq!(str::decode(b"ada"), Some("ada".to_string()));
    /// assert_eq!(u64::decode(b"too short"), None);
    /// ```
    fn decode(bytes: &[u8]) -> Option<Self::Owned>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u64 {}
    impl Sealed for i64 {}
    impl Sealed for str {}
    impl Sealed for [u8] {}
}

impl Key for u64 {
    type Owned = u64;
    const KIND: u8 = 1;
    const NAME: &'static str = "u64";
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
    fn decode(bytes: &[u8]) -> Option<u64> {
        Some(u64::from_be_bytes(bytes.try_into().ok()?))
    }
}

impl Key for i64 {
    type Owned = i64;
    const KIND: u8 = 2;
    const NAME: &'static str = "i64";
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&((*self as u64) ^ (1 << 63)).to_be_bytes());
    }
    fn decode(bytes: &[u8]) -> Option<i64> {
        Some((u64::from_be_bytes(bytes.try_into().ok()?) ^ (1 << 63)) as i64)
    }
}

impl Key for str {
    type Owned = String;
    const KIND: u8 = 3;
    const NAME: &'static str = "str";
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
    fn decode(bytes: &[u8]) -> Option<String> {
        String::from_utf8(bytes.to_vec()).ok()
    }
}

impl Key for [u8] {
    type Owned = Vec<u8>;
    const KIND: u8 = 4;
    const NAME: &'static str = "[u8]";
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
    fn decode(bytes: &[u8]) -> Option<Vec<u8>> {
        Some(bytes.to_vec())
    }
}

/// What a table method accepts as a key of type `K`: the key by value or by reference
/// (`7` or `&7` for `u64`; `"a"`, `&String` or `String` for `str`; `b"a"`, `&[u8]` or
/// `Vec<u8>` for `[u8]`).
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| {
///     let names = tx.open_table::<str>("names")?;
///     let owned = String::from("b");
///     names.insert("a", b"1")?;
///     names.insert(&owned, b"2")?;
///     names.insert(owned, b"3")?;
///     let bytes = tx.open_table::<[u8]>("bytes")?;
///     bytes.insert(b"k", b"1")?;
///     bytes.insert(vec![1u8, 2], b"2")?;
///     let numbers = tx.open_table::<u64>("numbers")?;
///     numbers.insert(7, b"1")?;
///     assert!(numbers.get(&7)?.is_some());
///     Ok(())
/// })?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub trait KeyArg<K: Key + ?Sized> {
    /// Appends the key's encoding (that of the key type `K`).
    ///
    /// ```
    /// use nvmdb::KeyArg;
    /// let mut out = Vec::new();
    /// KeyArg::<str>::encode_key(&"ab", &mut out);
    /// assert_eq!(out, b"ab");
    /// ```
    fn encode_key(&self, out: &mut Vec<u8>);
}

macro_rules! key_arg {
    ($k:ty: $($t:ty),*) => {$(
        impl KeyArg<$k> for $t {
            fn encode_key(&self, out: &mut Vec<u8>) {
                let k: &$k = self.as_ref_key();
                k.encode(out)
            }
        }
    )*};
}

/// Private helper so the macro can borrow each argument type as its key type.
trait AsRefKey<K: ?Sized> {
    fn as_ref_key(&self) -> &K;
}
impl AsRefKey<u64> for u64 {
    fn as_ref_key(&self) -> &u64 {
        self
    }
}
impl AsRefKey<u64> for &u64 {
    fn as_ref_key(&self) -> &u64 {
        self
    }
}
impl AsRefKey<i64> for i64 {
    fn as_ref_key(&self) -> &i64 {
        self
    }
}
impl AsRefKey<i64> for &i64 {
    fn as_ref_key(&self) -> &i64 {
        self
    }
}
impl AsRefKey<str> for &str {
    fn as_ref_key(&self) -> &str {
        self
    }
}
impl AsRefKey<str> for String {
    fn as_ref_key(&self) -> &str {
        self
    }
}
impl AsRefKey<str> for &String {
    fn as_ref_key(&self) -> &str {
        self
    }
}
impl AsRefKey<[u8]> for &[u8] {
    fn as_ref_key(&self) -> &[u8] {
        self
    }
}
impl AsRefKey<[u8]> for Vec<u8> {
    fn as_ref_key(&self) -> &[u8] {
        self
    }
}
impl AsRefKey<[u8]> for &Vec<u8> {
    fn as_ref_key(&self) -> &[u8] {
        self
    }
}
impl<const N: usize> AsRefKey<[u8]> for &[u8; N] {
    fn as_ref_key(&self) -> &[u8] {
        &self[..]
    }
}
impl<const N: usize> KeyArg<[u8]> for &[u8; N] {
    fn encode_key(&self, out: &mut Vec<u8>) {
        self.as_ref_key().encode(out)
    }
}

key_arg!(u64: u64, &u64);
key_arg!(i64: i64, &i64);
key_arg!(str: &str, String, &String);
key_arg!([u8]: &[u8], Vec<u8>, &Vec<u8>);

#[cfg(test)]
mod tests {
    use super::*;

    fn enc<K: Key + ?Sized>(k: &K) -> Vec<u8> {
        let mut v = Vec::new();
        k.encode(&mut v);
        v
    }

    #[test]
    fn encodings_keep_order() {
        let ints = [i64::MIN, -7, -1, 0, 1, 9, i64::MAX];
        for w in ints.windows(2) {
            assert!(enc(&w[0]) < enc(&w[1]), "{w:?}");
        }
        let uns = [0u64, 1, 255, 256, u64::MAX];
        for w in uns.windows(2) {
            assert!(enc(&w[0]) < enc(&w[1]), "{w:?}");
        }
        assert!(enc("ab") < enc("abc") && enc("abc") < enc("b"));
        assert_eq!(u64::decode(&enc(&77u64)), Some(77));
        assert_eq!(u64::decode(b"short"), None);
    }
}
