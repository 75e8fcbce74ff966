//! The few libpmemobj (PMDK 1.12) calls the peer needs, declared by hand, and [`Tx`]: one PMDK
//! transaction begun without a `jmp_buf`, so a failure is an error code, never a `longjmp`
//! across Rust frames (PMDK: with a NULL `env`, "the function that failed returns an error and
//! the transaction moves to `TX_STAGE_ONABORT`").

use std::ffi::{c_char, c_int, c_void, CStr};
use storage::DbError;

/// `PMEMoid`: a persistent pointer (pool id, offset in the pool).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Oid {
    pub pool_uuid_lo: u64,
    pub off: u64,
}

impl Oid {
    pub(crate) const NULL: Oid = Oid { pool_uuid_lo: 0, off: 0 };

    pub(crate) fn is_null(self) -> bool {
        self.off == 0
    }
}

/// `enum pobj_tx_stage`.
const TX_STAGE_WORK: c_int = 1;
/// `TX_PARAM_NONE`, which ends `pmemobj_tx_begin`'s parameter list.
const TX_PARAM_NONE: c_int = 0;

#[link(name = "pmemobj")]
extern "C" {
    pub(crate) fn pmemobj_create(
        path: *const c_char,
        layout: *const c_char,
        poolsize: usize,
        mode: u32,
    ) -> *mut c_void;
    pub(crate) fn pmemobj_open(path: *const c_char, layout: *const c_char) -> *mut c_void;
    pub(crate) fn pmemobj_close(pop: *mut c_void);
    pub(crate) fn pmemobj_root(pop: *mut c_void, size: usize) -> Oid;
    fn pmemobj_errormsg() -> *const c_char;
    fn pmemobj_tx_begin(pop: *mut c_void, env: *mut c_void, ...) -> c_int;
    fn pmemobj_tx_stage() -> c_int;
    fn pmemobj_tx_abort(errnum: c_int);
    fn pmemobj_tx_commit();
    fn pmemobj_tx_end() -> c_int;
    fn pmemobj_tx_add_range_direct(ptr: *const c_void, size: usize) -> c_int;
    fn pmemobj_tx_alloc(size: usize, type_num: u64) -> Oid;
    fn pmemobj_tx_zalloc(size: usize, type_num: u64) -> Oid;
    fn pmemobj_tx_free(oid: Oid) -> c_int;
}

/// PMDK's message for the last error on this thread.
pub(crate) fn last_error() -> String {
    // SAFETY: pmemobj_errormsg returns a thread-local, NUL-terminated string (never NULL).
    let msg = unsafe { pmemobj_errormsg() };
    if msg.is_null() {
        return "unknown PMDK error".into();
    }
    // SAFETY: non-NULL and NUL-terminated, valid until the next PMDK call on this thread.
    unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned()
}

/// A failed PMDK call as a `DbError`: out of space is `RegionFull`, the rest a peer error.
pub(crate) fn tx_error(what: &str, errnum: c_int) -> DbError {
    let message = format!("pmemobj: {what}: {} (errno {errnum})", last_error());
    if errnum == libc_enomem() {
        DbError::RegionFull(format!("{message}; open with a larger pool_bytes"))
    } else {
        DbError::Peer { engine: super::ENGINE, message, retryable: false }
    }
}

const fn libc_enomem() -> c_int {
    12
}

/// One PMDK transaction on the calling thread. Dropping it without [`Tx::commit`] aborts it,
/// which rolls back every range added so far (PMDK's undo log) and frees what it allocated.
///
/// Not `Send`: PMDK keeps the transaction in thread-local state.
pub(crate) struct Tx {
    ended: bool,
    _not_send: std::marker::PhantomData<*mut ()>,
}

impl Tx {
    /// Begins a transaction on pool `pop`.
    ///
    /// # Safety
    /// `pop` is an open pool, and no other PMDK transaction is open on this thread.
    pub(crate) unsafe fn begin(pop: *mut c_void) -> Result<Tx, DbError> {
        // SAFETY: NULL env: failures are returned, never longjmp'd (see the module doc).
        let rc = unsafe { pmemobj_tx_begin(pop, std::ptr::null_mut(), TX_PARAM_NONE) };
        let tx = Tx { ended: false, _not_send: std::marker::PhantomData };
        if rc != 0 {
            return Err(tx_error("tx_begin", rc)); // dropping `tx` ends it
        }
        Ok(tx)
    }

    fn check(&self, what: &str, rc: c_int) -> Result<(), DbError> {
        if rc == 0 {
            Ok(())
        } else {
            Err(tx_error(what, rc))
        }
    }

    /// Snapshots `len` bytes at `ptr` into the undo log before they are modified.
    ///
    /// # Safety
    /// `ptr..ptr+len` lies inside the transaction's pool.
    pub(crate) unsafe fn add(&mut self, ptr: *const u8, len: usize) -> Result<(), DbError> {
        // SAFETY: the caller keeps the range in the pool.
        let rc = unsafe { pmemobj_tx_add_range_direct(ptr.cast(), len) };
        self.check("tx_add_range", rc)
    }

    /// Allocates `size` bytes, zeroed if `zero`; freed again if the transaction aborts.
    pub(crate) fn alloc(&mut self, size: usize, type_num: u64, zero: bool) -> Result<Oid, DbError> {
        // SAFETY: a transaction is open on this thread (this `Tx`).
        let oid = unsafe {
            if zero {
                pmemobj_tx_zalloc(size, type_num)
            } else {
                pmemobj_tx_alloc(size, type_num)
            }
        };
        if oid.is_null() {
            return Err(tx_error("tx_alloc", libc_enomem()));
        }
        Ok(oid)
    }

    /// Frees `oid` when the transaction commits.
    pub(crate) fn free(&mut self, oid: Oid) -> Result<(), DbError> {
        // SAFETY: a transaction is open; PMDK validates the oid.
        let rc = unsafe { pmemobj_tx_free(oid) };
        self.check("tx_free", rc)
    }

    /// Commits: PMDK persists every added range and new object, then drops the undo log.
    pub(crate) fn commit(mut self) -> Result<(), DbError> {
        self.ended = true;
        // SAFETY: the transaction is open on this thread; commit only in TX_STAGE_WORK.
        unsafe {
            if pmemobj_tx_stage() == TX_STAGE_WORK {
                pmemobj_tx_commit();
            }
            let rc = pmemobj_tx_end();
            self.check("tx_commit", rc)
        }
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        // SAFETY: the transaction is open on this thread (Tx is not Send); abort only in
        // TX_STAGE_WORK (after a failed call PMDK has aborted already); end always.
        unsafe {
            if pmemobj_tx_stage() == TX_STAGE_WORK {
                pmemobj_tx_abort(125 /* ECANCELED */);
            }
            pmemobj_tx_end();
        }
    }
}
