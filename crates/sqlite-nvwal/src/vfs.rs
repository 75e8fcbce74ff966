//! The SQLite VFS `nvwal` (Kim et al., ASPLOS 2016, §3: SQLite's WAL kept in NVRAM): the
//! database file and the `-wal` file of a database live in a [`Store`] on a `pmem` region;
//! rollback journals and temporary files live in process memory (only the format of a new
//! database and statement journals use them; see the crate docs).
//!
//! Locking: several connections of one engine share one database (the `Engine` contract: a
//! reader never waits for the writer), so this VFS implements the file locks and the xShm
//! methods in process: the wal-index lives in process memory, is rebuilt by SQLite's own WAL
//! recovery on every open of a region, and is never persistent (as in SQLite's exclusive mode).
//!
//! Invariant: every callback catches panics and maps errors to SQLite codes; nothing unwinds
//! across the FFI boundary.

use crate::store::Store;
use libsqlite3_sys as ffi;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use storage::DbError;

/// The VFS's registered name.
pub const VFS_NAME: &str = "nvwal";
const VFS_NAME_C: &CStr = c"nvwal";
const MAX_PATH: c_int = 512;
/// SQLite's number of shm lock slots.
const SHM_LOCKS: usize = 8;

const LOCK_NONE: c_int = ffi::SQLITE_LOCK_NONE;
const LOCK_SHARED: c_int = ffi::SQLITE_LOCK_SHARED;
const LOCK_RESERVED: c_int = ffi::SQLITE_LOCK_RESERVED;
const LOCK_PENDING: c_int = ffi::SQLITE_LOCK_PENDING;
const LOCK_EXCLUSIVE: c_int = ffi::SQLITE_LOCK_EXCLUSIVE;

/// The per-database state the VFS adds to a [`Store`]: locks, the wal-index, volatile files.
pub struct Shared {
    pub store: Store,
    locks: Mutex<FileLocks>,
    shm: Mutex<Shm>,
    aux: Mutex<HashMap<String, Vec<u8>>>,
}

impl Shared {
    pub fn new(store: Store) -> Shared {
        Shared {
            store,
            locks: Mutex::new(FileLocks::default()),
            shm: Mutex::new(Shm::default()),
            aux: Mutex::new(HashMap::new()),
        }
    }
}

#[derive(Default)]
struct FileLocks {
    shared: u32,
    reserved: Option<u64>,
    pending: Option<u64>,
    exclusive: Option<u64>,
}

#[derive(Default)]
struct Shm {
    regions: Vec<Vec<u8>>,
    shared: [u32; SHM_LOCKS],
    exclusive: [Option<u64>; SHM_LOCKS],
    mapped: u32,
}

/// Databases the VFS can open, by directory prefix (`/nvwal-<pid>-<n>`).
fn registry() -> &'static Mutex<HashMap<String, Weak<Shared>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Weak<Shared>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

static SEQ: AtomicU64 = AtomicU64::new(0);
static FILE_IDS: AtomicU64 = AtomicU64::new(1);

/// A database registered with the VFS; unregistered on drop.
pub struct Registration {
    pub prefix: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        registry().lock().remove(&self.prefix);
    }
}

/// Registers `shared` and returns the path SQLite should open it by.
pub fn register(shared: &Arc<Shared>) -> Result<(Registration, String), DbError> {
    ensure_vfs()?;
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let prefix = format!("/nvwal-{}-{n}", std::process::id());
    registry().lock().insert(prefix.clone(), Arc::downgrade(shared));
    let path = format!("{prefix}/sqlite.db");
    Ok((Registration { prefix }, path))
}

fn lookup(name: &str) -> Option<Arc<Shared>> {
    let prefix = name.rsplit_once('/').map(|(p, _)| p)?;
    registry().lock().get(prefix).and_then(Weak::upgrade)
}

enum Kind {
    Db,
    Wal,
    /// A named volatile file (rollback journal) in `Shared::aux`.
    Aux(String),
    /// An unnamed temporary file.
    Temp(Vec<u8>),
}

struct FileState {
    shared: Option<Arc<Shared>>,
    kind: Kind,
    id: u64,
    lock: c_int,
    shm_shared: u8,
    shm_exclusive: u8,
    shm_mapped: bool,
}

#[repr(C)]
struct NvFile {
    base: ffi::sqlite3_file,
    state: *mut FileState,
}

fn ensure_vfs() -> Result<(), DbError> {
    static REGISTERED: OnceLock<c_int> = OnceLock::new();
    let rc = *REGISTERED.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, a static SQLite owns; we copy
        // it and override the file methods, so time, randomness and sleep are the default's.
        unsafe {
            let rc = ffi::sqlite3_initialize();
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            let default = ffi::sqlite3_vfs_find(std::ptr::null());
            if default.is_null() {
                return ffi::SQLITE_ERROR;
            }
            let mut vfs: ffi::sqlite3_vfs = std::ptr::read(default);
            vfs.iVersion = vfs.iVersion.min(2);
            vfs.szOsFile = std::mem::size_of::<NvFile>() as c_int;
            vfs.mxPathname = MAX_PATH;
            vfs.pNext = std::ptr::null_mut();
            vfs.zName = VFS_NAME_C.as_ptr();
            vfs.pAppData = std::ptr::null_mut();
            vfs.xOpen = Some(x_open);
            vfs.xDelete = Some(x_delete);
            vfs.xAccess = Some(x_access);
            vfs.xFullPathname = Some(x_full_pathname);
            ffi::sqlite3_vfs_register(Box::leak(Box::new(vfs)), 0)
        }
    });
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(DbError::Invalid(format!("sqlite-nvwal: registering the VFS failed: {rc}")))
    }
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 2,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: None,
    xUnfetch: None,
};

/// Runs `f`, turning a panic into `SQLITE_IOERR`.
fn guard(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(ffi::SQLITE_IOERR)
}

fn db_error_code(e: &DbError, io: c_int) -> c_int {
    match e {
        DbError::RegionFull(_) => ffi::SQLITE_FULL,
        DbError::Corrupt(_) => ffi::SQLITE_CORRUPT,
        _ => io,
    }
}

/// # Safety
/// `file` must be an `NvFile` this VFS opened and not yet closed.
unsafe fn state<'a>(file: *mut ffi::sqlite3_file) -> &'a mut FileState {
    // SAFETY: per the contract, `state` was set by `x_open` from a live Box.
    unsafe { &mut *(*(file as *mut NvFile)).state }
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: SQLite passes a buffer of szOsFile bytes; clear the methods first so a failed
        // open is never closed.
        unsafe { (*file).pMethods = std::ptr::null() };
        let name = if name.is_null() {
            None
        } else {
            // SAFETY: SQLite passes a NUL-terminated name.
            Some(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned())
        };
        let (shared, kind) = match &name {
            None => (None, Kind::Temp(Vec::new())),
            Some(n) => {
                let Some(shared) = lookup(n) else { return ffi::SQLITE_CANTOPEN };
                let kind = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
                    Kind::Db
                } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
                    Kind::Wal
                } else {
                    let mut aux = shared.aux.lock();
                    if !aux.contains_key(n) {
                        if flags & ffi::SQLITE_OPEN_CREATE == 0 {
                            return ffi::SQLITE_CANTOPEN;
                        }
                        aux.insert(n.clone(), Vec::new());
                    }
                    Kind::Aux(n.clone())
                };
                (Some(shared), kind)
            }
        };
        let st = Box::new(FileState {
            shared,
            kind,
            id: FILE_IDS.fetch_add(1, Ordering::Relaxed),
            lock: LOCK_NONE,
            shm_shared: 0,
            shm_exclusive: 0,
            shm_mapped: false,
        });
        // SAFETY: `file` is szOsFile (= size_of NvFile) bytes, suitably aligned by SQLite.
        unsafe {
            let f = file as *mut NvFile;
            (*f).state = Box::into_raw(st);
            (*f).base.pMethods = &METHODS;
            if !out_flags.is_null() {
                *out_flags = flags;
            }
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_delete(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    _sync_dir: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: SQLite passes a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let Some(shared) = lookup(&name) else { return ffi::SQLITE_OK };
        if name.ends_with("-wal") {
            shared.store.wal_delete();
        } else {
            shared.aux.lock().remove(&name);
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    _flags: c_int,
    out: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: SQLite passes a NUL-terminated name and an out pointer.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let exists = match lookup(&name) {
            None => false,
            Some(s) if name.ends_with("-wal") => s.store.wal_len() > 0,
            Some(s) if name.ends_with("/sqlite.db") => s.store.db_len() > 0,
            Some(s) => s.aux.lock().contains_key(&name),
        };
        // SAFETY: as above.
        unsafe { *out = c_int::from(exists) };
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n_out: c_int,
    out: *mut c_char,
) -> c_int {
    guard(|| {
        // SAFETY: SQLite passes a NUL-terminated name and an `n_out`-byte buffer.
        let bytes = unsafe { CStr::from_ptr(name) }.to_bytes_with_nul();
        if bytes.len() > n_out as usize {
            return ffi::SQLITE_CANTOPEN;
        }
        // SAFETY: the buffer holds `n_out` >= bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), out, bytes.len()) };
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    guard(|| {
        // SAFETY: SQLite closes each opened file once; the Box came from `x_open`.
        let st = unsafe { Box::from_raw((*(file as *mut NvFile)).state) };
        if let Some(shared) = &st.shared {
            release_locks(shared, &st);
        }
        // SAFETY: as above; the methods pointer is cleared so nothing touches the file again.
        unsafe { (*file).pMethods = std::ptr::null() };
        ffi::SQLITE_OK
    })
}

fn release_locks(shared: &Shared, st: &FileState) {
    {
        let mut l = shared.locks.lock();
        unlock_to(&mut l, st.id, st.lock, LOCK_NONE);
    }
    let mut shm = shared.shm.lock();
    for i in 0..SHM_LOCKS {
        if st.shm_shared & (1 << i) != 0 {
            shm.shared[i] -= 1;
        }
        if st.shm_exclusive & (1 << i) != 0 {
            shm.exclusive[i] = None;
        }
    }
    if st.shm_mapped {
        shm.mapped -= 1;
    }
}

/// Copies `have` bytes read, zero-fills the rest: SQLite's short-read contract.
fn read_result(have: usize, want: usize) -> c_int {
    if have == want {
        ffi::SQLITE_OK
    } else {
        ffi::SQLITE_IOERR_SHORT_READ
    }
}

fn read_vec(data: &[u8], offset: usize, out: &mut [u8]) -> usize {
    let have = data.len().saturating_sub(offset).min(out.len());
    out[..have].copy_from_slice(&data[offset.min(data.len())..offset.min(data.len()) + have]);
    out[have..].fill(0);
    have
}

fn write_vec(data: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    if data.len() < offset + bytes.len() {
        data.resize(offset + bytes.len(), 0);
    }
    data[offset..offset + bytes.len()].copy_from_slice(bytes);
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    guard(|| {
        // SAFETY: an open file; SQLite passes a buffer of `amount` bytes.
        let st = unsafe { state(file) };
        let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), amount as usize) };
        let (want, offset) = (amount as usize, offset as u64);
        let have = match (&st.kind, &st.shared) {
            (Kind::Db, Some(s)) => s.store.db_read(offset, out),
            (Kind::Wal, Some(s)) => s.store.wal_read(offset, out),
            (Kind::Aux(n), Some(s)) => {
                read_vec(s.aux.lock().get(n).map_or(&[][..], |v| v), offset as usize, out)
            }
            (Kind::Temp(v), _) => read_vec(v, offset as usize, out),
            _ => return ffi::SQLITE_IOERR_READ,
        };
        read_result(have, want)
    })
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    guard(|| {
        // SAFETY: an open file; SQLite passes `amount` bytes.
        let st = unsafe { state(file) };
        let bytes = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), amount as usize) };
        let result = match (&mut st.kind, &st.shared) {
            (Kind::Db, Some(s)) => s.store.db_write(offset as u64, bytes),
            (Kind::Wal, Some(s)) => s.store.wal_write(offset as u64, bytes),
            (Kind::Aux(n), Some(s)) => {
                let mut aux = s.aux.lock();
                write_vec(aux.entry(n.clone()).or_default(), offset as usize, bytes);
                Ok(())
            }
            (Kind::Temp(v), _) => {
                write_vec(v, offset as usize, bytes);
                Ok(())
            }
            _ => return ffi::SQLITE_IOERR_WRITE,
        };
        match result {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => db_error_code(&e, ffi::SQLITE_IOERR_WRITE),
        }
    })
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    guard(|| {
        // SAFETY: an open file.
        let st = unsafe { state(file) };
        let size = size.max(0) as u64;
        let result = match (&mut st.kind, &st.shared) {
            (Kind::Db, Some(s)) => {
                s.store.db_truncate(size);
                Ok(())
            }
            (Kind::Wal, Some(s)) => s.store.wal_truncate(size),
            (Kind::Aux(n), Some(s)) => {
                if let Some(v) = s.aux.lock().get_mut(n) {
                    v.truncate(size as usize);
                }
                Ok(())
            }
            (Kind::Temp(v), _) => {
                v.truncate(size as usize);
                Ok(())
            }
            _ => Ok(()),
        };
        match result {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => db_error_code(&e, ffi::SQLITE_IOERR_TRUNCATE),
        }
    })
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    guard(|| {
        // SAFETY: an open file.
        let st = unsafe { state(file) };
        match (&st.kind, &st.shared) {
            (Kind::Db, Some(s)) => {
                s.store.db_sync();
                ffi::SQLITE_OK
            }
            (Kind::Wal, Some(s)) => match s.store.wal_sync() {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => db_error_code(&e, ffi::SQLITE_IOERR_FSYNC),
            },
            _ => ffi::SQLITE_OK,
        }
    })
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, out: *mut i64) -> c_int {
    guard(|| {
        // SAFETY: an open file and an out pointer.
        let st = unsafe { state(file) };
        let len = match (&st.kind, &st.shared) {
            (Kind::Db, Some(s)) => s.store.db_len(),
            (Kind::Wal, Some(s)) => s.store.wal_len(),
            (Kind::Aux(n), Some(s)) => s.aux.lock().get(n).map_or(0, |v| v.len() as u64),
            (Kind::Temp(v), _) => v.len() as u64,
            _ => 0,
        };
        // SAFETY: as above.
        unsafe { *out = len as i64 };
        ffi::SQLITE_OK
    })
}

fn unlock_to(l: &mut FileLocks, id: u64, current: c_int, level: c_int) {
    if level < LOCK_EXCLUSIVE && l.exclusive == Some(id) {
        l.exclusive = None;
    }
    if level < LOCK_PENDING && l.pending == Some(id) {
        l.pending = None;
    }
    if level < LOCK_RESERVED && l.reserved == Some(id) {
        l.reserved = None;
    }
    if level < LOCK_SHARED && current >= LOCK_SHARED {
        l.shared -= 1;
    }
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    guard(|| {
        // SAFETY: an open file.
        let st = unsafe { state(file) };
        let Some(shared) = &st.shared else { return ffi::SQLITE_OK };
        if st.lock >= level {
            return ffi::SQLITE_OK;
        }
        let mut l = shared.locks.lock();
        let other = |h: Option<u64>| h.is_some_and(|h| h != st.id);
        match level {
            LOCK_SHARED => {
                if other(l.pending) || other(l.exclusive) {
                    return ffi::SQLITE_BUSY;
                }
                l.shared += 1;
                st.lock = LOCK_SHARED;
            }
            LOCK_RESERVED => {
                if other(l.reserved) || other(l.pending) || other(l.exclusive) {
                    return ffi::SQLITE_BUSY;
                }
                l.reserved = Some(st.id);
                st.lock = LOCK_RESERVED;
            }
            _ => {
                if other(l.pending) || other(l.exclusive) || other(l.reserved) {
                    return ffi::SQLITE_BUSY;
                }
                l.pending = Some(st.id);
                st.lock = LOCK_PENDING;
                if l.shared > 1 {
                    return ffi::SQLITE_BUSY;
                }
                l.exclusive = Some(st.id);
                st.lock = LOCK_EXCLUSIVE;
            }
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    guard(|| {
        // SAFETY: an open file.
        let st = unsafe { state(file) };
        let Some(shared) = &st.shared else { return ffi::SQLITE_OK };
        if st.lock <= level {
            return ffi::SQLITE_OK;
        }
        unlock_to(&mut shared.locks.lock(), st.id, st.lock, level);
        st.lock = level;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    guard(|| {
        // SAFETY: an open file and an out pointer.
        let st = unsafe { state(file) };
        let held = st.shared.as_ref().is_some_and(|s| {
            let l = s.locks.lock();
            l.reserved.is_some() || l.pending.is_some() || l.exclusive.is_some()
        });
        // SAFETY: as above.
        unsafe { *out = c_int::from(held) };
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_file_control(
    _file: *mut ffi::sqlite3_file,
    _op: c_int,
    _arg: *mut c_void,
) -> c_int {
    ffi::SQLITE_NOTFOUND
}

unsafe extern "C" fn x_sector_size(_file: *mut ffi::sqlite3_file) -> c_int {
    512
}

unsafe extern "C" fn x_device_characteristics(_file: *mut ffi::sqlite3_file) -> c_int {
    // Byte-addressable, no torn sectors beyond what the log's commit protocol handles; writes
    // to the WAL become durable in order at its sync (so no header sync is needed).
    ffi::SQLITE_IOCAP_SEQUENTIAL | ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    page: c_int,
    page_bytes: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: an open file and an out pointer.
        let st = unsafe { state(file) };
        let Some(shared) = st.shared.clone() else { return ffi::SQLITE_IOERR_SHMMAP };
        let mut shm = shared.shm.lock();
        let page = page as usize;
        if !st.shm_mapped {
            st.shm_mapped = true;
            shm.mapped += 1;
        }
        while shm.regions.len() <= page && extend != 0 {
            shm.regions.push(vec![0u8; page_bytes as usize]);
        }
        let ptr = match shm.regions.get_mut(page) {
            // The inner buffers never move: the outer Vec moves only their headers.
            Some(r) => r.as_mut_ptr().cast(),
            None => std::ptr::null_mut(),
        };
        // SAFETY: as above.
        unsafe { *out = ptr };
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: an open file.
        let st = unsafe { state(file) };
        let Some(shared) = st.shared.clone() else { return ffi::SQLITE_IOERR_SHMLOCK };
        let mut shm = shared.shm.lock();
        let range = offset as usize..(offset + n) as usize;
        if range.end > SHM_LOCKS {
            return ffi::SQLITE_IOERR_SHMLOCK;
        }
        let exclusive = flags & ffi::SQLITE_SHM_EXCLUSIVE != 0;
        if flags & ffi::SQLITE_SHM_UNLOCK != 0 {
            for i in range {
                let bit = 1u8 << i;
                if st.shm_shared & bit != 0 {
                    shm.shared[i] -= 1;
                    st.shm_shared &= !bit;
                }
                if st.shm_exclusive & bit != 0 {
                    shm.exclusive[i] = None;
                    st.shm_exclusive &= !bit;
                }
            }
            return ffi::SQLITE_OK;
        }
        if exclusive {
            for i in range.clone() {
                let mine = u32::from(st.shm_shared & (1 << i) != 0);
                let held_by_other = shm.exclusive[i].is_some_and(|h| h != st.id);
                if held_by_other || shm.shared[i] > mine {
                    return ffi::SQLITE_BUSY;
                }
            }
            for i in range {
                shm.exclusive[i] = Some(st.id);
                st.shm_exclusive |= 1 << i;
            }
        } else {
            for i in range.clone() {
                if shm.exclusive[i].is_some_and(|h| h != st.id) {
                    return ffi::SQLITE_BUSY;
                }
            }
            for i in range {
                if st.shm_shared & (1 << i) == 0 {
                    shm.shared[i] += 1;
                    st.shm_shared |= 1 << i;
                }
            }
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_shm_barrier(_file: *mut ffi::sqlite3_file) {
    std::sync::atomic::fence(Ordering::SeqCst);
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    guard(|| {
        // SAFETY: an open file.
        let st = unsafe { state(file) };
        let Some(shared) = st.shared.clone() else { return ffi::SQLITE_OK };
        let mut shm = shared.shm.lock();
        if st.shm_mapped {
            st.shm_mapped = false;
            shm.mapped -= 1;
        }
        if delete != 0 && shm.mapped == 0 {
            shm.regions.clear();
        }
        ffi::SQLITE_OK
    })
}
