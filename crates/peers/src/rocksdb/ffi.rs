//! The part of RocksDB's C API (`rocksdb/c.h`, stable across 6.x–9.x) this peer calls, declared
//! by hand and linked against the system library (Debian `librocksdb-dev`, RocksDB 7.8), so the
//! peer builds in seconds instead of compiling RocksDB's C++.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uchar, c_void, CStr};

macro_rules! opaque {
    ($($name:ident),*) => { $( #[repr(C)] pub(crate) struct $name { _private: [u8; 0] } )* };
}
opaque!(
    rocksdb_options_t,
    rocksdb_transactiondb_options_t,
    rocksdb_transactiondb_t,
    rocksdb_transaction_t,
    rocksdb_transaction_options_t,
    rocksdb_writeoptions_t,
    rocksdb_readoptions_t,
    rocksdb_column_family_handle_t,
    rocksdb_iterator_t,
    rocksdb_cache_t,
    rocksdb_block_based_table_options_t
);

pub(crate) type Err = *mut *mut c_char;

#[link(name = "rocksdb")]
extern "C" {
    pub(crate) fn rocksdb_options_create() -> *mut rocksdb_options_t;
    pub(crate) fn rocksdb_options_destroy(o: *mut rocksdb_options_t);
    pub(crate) fn rocksdb_options_set_create_if_missing(o: *mut rocksdb_options_t, v: c_uchar);
    pub(crate) fn rocksdb_options_set_create_missing_column_families(
        o: *mut rocksdb_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_options_set_block_based_table_factory(
        o: *mut rocksdb_options_t,
        t: *mut rocksdb_block_based_table_options_t,
    );
    pub(crate) fn rocksdb_block_based_options_create() -> *mut rocksdb_block_based_table_options_t;
    pub(crate) fn rocksdb_block_based_options_destroy(t: *mut rocksdb_block_based_table_options_t);
    pub(crate) fn rocksdb_block_based_options_set_block_cache(
        t: *mut rocksdb_block_based_table_options_t,
        cache: *mut rocksdb_cache_t,
    );
    pub(crate) fn rocksdb_cache_create_lru(capacity: usize) -> *mut rocksdb_cache_t;
    pub(crate) fn rocksdb_cache_destroy(cache: *mut rocksdb_cache_t);
    pub(crate) fn rocksdb_list_column_families(
        o: *const rocksdb_options_t,
        name: *const c_char,
        len: *mut usize,
        err: Err,
    ) -> *mut *mut c_char;
    pub(crate) fn rocksdb_list_column_families_destroy(list: *mut *mut c_char, len: usize);
    pub(crate) fn rocksdb_transactiondb_options_create() -> *mut rocksdb_transactiondb_options_t;
    pub(crate) fn rocksdb_transactiondb_options_destroy(o: *mut rocksdb_transactiondb_options_t);
    pub(crate) fn rocksdb_transactiondb_open_column_families(
        o: *const rocksdb_options_t,
        txn_db_options: *const rocksdb_transactiondb_options_t,
        name: *const c_char,
        num_column_families: c_int,
        column_family_names: *const *const c_char,
        column_family_options: *const *const rocksdb_options_t,
        column_family_handles: *mut *mut rocksdb_column_family_handle_t,
        err: Err,
    ) -> *mut rocksdb_transactiondb_t;
    pub(crate) fn rocksdb_transactiondb_create_column_family(
        db: *mut rocksdb_transactiondb_t,
        o: *const rocksdb_options_t,
        name: *const c_char,
        err: Err,
    ) -> *mut rocksdb_column_family_handle_t;
    pub(crate) fn rocksdb_transactiondb_put(
        db: *mut rocksdb_transactiondb_t,
        o: *const rocksdb_writeoptions_t,
        key: *const c_char,
        klen: usize,
        val: *const c_char,
        vlen: usize,
        err: Err,
    );
    pub(crate) fn rocksdb_transactiondb_create_iterator(
        db: *mut rocksdb_transactiondb_t,
        o: *const rocksdb_readoptions_t,
    ) -> *mut rocksdb_iterator_t;
    pub(crate) fn rocksdb_transactiondb_create_iterator_cf(
        db: *mut rocksdb_transactiondb_t,
        o: *const rocksdb_readoptions_t,
        cf: *mut rocksdb_column_family_handle_t,
    ) -> *mut rocksdb_iterator_t;
    pub(crate) fn rocksdb_transactiondb_flush_wal(
        db: *mut rocksdb_transactiondb_t,
        sync: c_uchar,
        err: Err,
    );
    pub(crate) fn rocksdb_transactiondb_close(db: *mut rocksdb_transactiondb_t);
    pub(crate) fn rocksdb_column_family_handle_destroy(cf: *mut rocksdb_column_family_handle_t);
    pub(crate) fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t;
    pub(crate) fn rocksdb_writeoptions_destroy(o: *mut rocksdb_writeoptions_t);
    pub(crate) fn rocksdb_writeoptions_set_sync(o: *mut rocksdb_writeoptions_t, v: c_uchar);
    pub(crate) fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t;
    pub(crate) fn rocksdb_readoptions_destroy(o: *mut rocksdb_readoptions_t);
    pub(crate) fn rocksdb_transaction_options_create() -> *mut rocksdb_transaction_options_t;
    pub(crate) fn rocksdb_transaction_options_destroy(o: *mut rocksdb_transaction_options_t);
    pub(crate) fn rocksdb_transaction_options_set_lock_timeout(
        o: *mut rocksdb_transaction_options_t,
        timeout: i64,
    );
    pub(crate) fn rocksdb_transaction_options_set_deadlock_detect(
        o: *mut rocksdb_transaction_options_t,
        v: c_uchar,
    );
    pub(crate) fn rocksdb_transaction_begin(
        db: *mut rocksdb_transactiondb_t,
        wo: *const rocksdb_writeoptions_t,
        to: *const rocksdb_transaction_options_t,
        old: *mut rocksdb_transaction_t,
    ) -> *mut rocksdb_transaction_t;
    pub(crate) fn rocksdb_transaction_get_for_update_cf(
        txn: *mut rocksdb_transaction_t,
        o: *const rocksdb_readoptions_t,
        cf: *mut rocksdb_column_family_handle_t,
        key: *const c_char,
        klen: usize,
        vlen: *mut usize,
        exclusive: c_uchar,
        err: Err,
    ) -> *mut c_char;
    pub(crate) fn rocksdb_transaction_put_cf(
        txn: *mut rocksdb_transaction_t,
        cf: *mut rocksdb_column_family_handle_t,
        key: *const c_char,
        klen: usize,
        val: *const c_char,
        vlen: usize,
        err: Err,
    );
    pub(crate) fn rocksdb_transaction_delete_cf(
        txn: *mut rocksdb_transaction_t,
        cf: *mut rocksdb_column_family_handle_t,
        key: *const c_char,
        klen: usize,
        err: Err,
    );
    pub(crate) fn rocksdb_transaction_commit(txn: *mut rocksdb_transaction_t, err: Err);
    pub(crate) fn rocksdb_transaction_rollback(txn: *mut rocksdb_transaction_t, err: Err);
    pub(crate) fn rocksdb_transaction_destroy(txn: *mut rocksdb_transaction_t);
    pub(crate) fn rocksdb_transaction_create_iterator_cf(
        txn: *mut rocksdb_transaction_t,
        o: *const rocksdb_readoptions_t,
        cf: *mut rocksdb_column_family_handle_t,
    ) -> *mut rocksdb_iterator_t;
    pub(crate) fn rocksdb_iter_destroy(it: *mut rocksdb_iterator_t);
    pub(crate) fn rocksdb_iter_valid(it: *const rocksdb_iterator_t) -> c_uchar;
    pub(crate) fn rocksdb_iter_seek(it: *mut rocksdb_iterator_t, key: *const c_char, klen: usize);
    pub(crate) fn rocksdb_iter_seek_to_first(it: *mut rocksdb_iterator_t);
    pub(crate) fn rocksdb_iter_next(it: *mut rocksdb_iterator_t);
    pub(crate) fn rocksdb_iter_key(
        it: *const rocksdb_iterator_t,
        klen: *mut usize,
    ) -> *const c_char;
    pub(crate) fn rocksdb_iter_value(
        it: *const rocksdb_iterator_t,
        vlen: *mut usize,
    ) -> *const c_char;
    pub(crate) fn rocksdb_iter_get_error(it: *const rocksdb_iterator_t, err: Err);
    pub(crate) fn rocksdb_free(ptr: *mut c_void);
}

/// RocksDB's status text (`Corruption: ...`, `Operation timed out: ...`), which says its kind.
#[derive(Debug)]
pub(crate) struct Error(pub String);

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    Corruption,
    /// Busy, timed out (a lock wait), try again: the transaction may succeed if run again.
    Retry,
    Other,
}

impl Error {
    pub(crate) fn kind(&self) -> ErrorKind {
        let s = self.0.as_str();
        if s.starts_with("Corruption") {
            ErrorKind::Corruption
        } else if s.starts_with("Resource busy")
            || s.starts_with("Operation timed out")
            || s.starts_with("Operation failed. Try again")
        {
            ErrorKind::Retry
        } else {
            ErrorKind::Other
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs `call` with an error slot; a set slot becomes an [`Error`] (and is freed).
pub(crate) fn check<T>(call: impl FnOnce(Err) -> T) -> Result<T, Error> {
    let mut err: *mut c_char = std::ptr::null_mut();
    let out = call(&mut err);
    if err.is_null() {
        return Ok(out);
    }
    // SAFETY: RocksDB set `err` to a malloc'd NUL-terminated string, ours to free.
    let message = unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned();
    // SAFETY: as above; freed once.
    unsafe { rocksdb_free(err.cast()) };
    Err(Error(message))
}

/// An iterator, destroyed on drop.
pub(crate) struct Iter(pub *mut rocksdb_iterator_t);

impl Iter {
    pub(crate) fn seek(&mut self, key: &[u8]) {
        // SAFETY: a live iterator; RocksDB copies the key.
        unsafe { rocksdb_iter_seek(self.0, key.as_ptr().cast(), key.len()) }
    }

    pub(crate) fn seek_to_first(&mut self) {
        // SAFETY: a live iterator.
        unsafe { rocksdb_iter_seek_to_first(self.0) }
    }

    pub(crate) fn next(&mut self) {
        // SAFETY: a live iterator, valid (checked by the callers through `entry`).
        unsafe { rocksdb_iter_next(self.0) }
    }

    /// The current (key, value), borrowed until the iterator moves; `None` at the end.
    pub(crate) fn entry(&self) -> Option<(&[u8], &[u8])> {
        // SAFETY: a live iterator; key and value stay valid until it moves (`&self` borrow).
        unsafe {
            if rocksdb_iter_valid(self.0) == 0 {
                return None;
            }
            let (mut klen, mut vlen) = (0, 0);
            let k = rocksdb_iter_key(self.0, &mut klen);
            let v = rocksdb_iter_value(self.0, &mut vlen);
            Some((slice(k, klen), slice(v, vlen)))
        }
    }

    pub(crate) fn status(&self) -> Result<(), Error> {
        // SAFETY: a live iterator.
        check(|err| unsafe { rocksdb_iter_get_error(self.0, err) })
    }
}

/// # Safety
/// `ptr..ptr+len` is readable for the returned lifetime (or `len` is 0).
unsafe fn slice<'a>(ptr: *const c_char, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(ptr.cast(), len) }
    }
}

impl Drop for Iter {
    fn drop(&mut self) {
        // SAFETY: a live iterator, destroyed once.
        unsafe { rocksdb_iter_destroy(self.0) }
    }
}

/// A value RocksDB returned in a malloc'd buffer, copied out and freed.
///
/// # Safety
/// `ptr` is NULL or a malloc'd buffer of `len` bytes owned by the caller.
pub(crate) unsafe fn take_value(ptr: *mut c_char, len: usize) -> Option<Vec<u8>> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let v = unsafe { slice(ptr, len) }.to_vec();
    // SAFETY: freed once.
    unsafe { rocksdb_free(ptr.cast()) };
    Some(v)
}
