//! Online backup ([`Db::backup_to`]): a consistent copy of every named table into a new
//! database file, taken while the database stays open; and compaction ([`Db::compact`]), a
//! backup renamed over the database's own file, which gives deleted entries' space back.
//!
//! Consistency comes from a brief quiesce: the backup takes every worker slot (so no
//! transaction of the table layer runs; new ones wait for a slot, as they do under load) and
//! reads everything in one read transaction, whose strict-2PL locks would make it a
//! serializable snapshot even without the quiesce (thesis §2, the engines' lock manager). The
//! copy is logical (entries, not pages): it needs no engine support, works from every engine
//! to the same engine, and leaves out space the source has not reclaimed.
//!
//! Crash invariant: the target path holds either nothing or a complete backup. The copy is
//! written to `<path>.partial`, made durable (`fsync`), then renamed into place and the
//! directory synced; a crash before the rename leaves only the partial file, which the next
//! backup to that path replaces.

use crate::handle::{Ending, BEGIN_WAIT};
use crate::kv::{self, Durability, ReadTx, SlotGuard};
use crate::{Db, DbOptions};
use pmem::{Medium, RegionOptions};
use std::path::{Path, PathBuf};
use storage::{DbError, Result};

/// Bytes of entries one transaction of the copy writes at most (the default engine options
/// let a transaction write about 1 MiB; a single larger value goes alone).
const BATCH_BYTES: usize = 256 << 10;
/// Initial size of a copy that can grow (it grows as the copy needs pages).
const BACKUP_START_BYTES: u64 = 16 << 20;
/// Entries one transaction of the copy writes at most.
const BATCH_ENTRIES: usize = 1024;

/// What [`Db::backup_to`] copied.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"one"))?;
/// let path = std::env::temp_dir().join(format!("nvmdb-doc-report-{}", std::process::id()));
/// let report = db.backup_to(&path)?;
/// assert_eq!((report.tables, report.entries, report.value_bytes), (1, 1, 3));
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), nvmdb::DbError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// Named tables copied.
    pub tables: u64,
    /// Entries copied, over all tables.
    pub entries: u64,
    /// Bytes of the values copied.
    pub value_bytes: u64,
    /// Size of the backup file.
    pub file_bytes: u64,
    /// Bytes the file system holds for it (less than `file_bytes` where the file is sparse).
    pub allocated_bytes: u64,
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> DbError {
    DbError::Invalid(format!("backup: {what} {}: {e}", path.display()))
}

fn compact_error(what: &str, path: &Path, e: std::io::Error) -> DbError {
    DbError::Invalid(format!("compact: {what} {}: {e}", path.display()))
}

impl Db {
    /// Copies every named table, consistently, into a new database file at `path` while the
    /// database stays open; open the copy with the same engine (`DbOptions::engine`) and
    /// `region.medium = Medium::File`, `region.path = Some(path)`. Writers wait while the
    /// copy runs (it holds every transaction slot: a brief quiesce). A crash during the
    /// backup leaves nothing at `path` (only `<path>.partial`). Benchmark-level tables
    /// ([`Db::tables`]) are not copied. Because the copy holds only live entries, it is also
    /// how a database gives space back to the file system: back up, then replace the file.
    ///
    /// ```
    /// use nvmdb::{pmem::Medium, Db, DbOptions};
    /// let db = Db::open(&DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<str>("users")?.insert("ada", b"lovelace"))?;
    /// let path = std::env::temp_dir().join(format!("nvmdb-doc-backup-{}", std::process::id()));
    /// db.backup_to(&path)?;
    ///
    /// let mut options = DbOptions::default();
    /// options.region.medium = Medium::File;
    /// options.region.path = Some(path.clone());
    /// let copy = Db::open(&options)?;
    /// let v = copy.read(|tx| tx.open_table::<str>("users")?.map_or(Ok(None), |t| t.get("ada")))?;
    /// assert_eq!(v.as_deref(), Some(&b"lovelace"[..]));
    /// # drop(copy);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn backup_to(&self, path: impl AsRef<Path>) -> Result<BackupReport> {
        let path = path.as_ref();
        if path.exists() {
            return Err(DbError::Invalid(format!(
                "backup target {} exists; remove it or choose another path",
                path.display()
            )));
        }
        let partial = partial_path(path);
        match std::fs::remove_file(&partial) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("cannot remove the leftover", &partial, e)),
        }
        let copied = self.copy_quiesced(&self.backup_options(&partial));
        let mut report = match copied {
            Ok(report) => report,
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        let file =
            std::fs::File::open(&partial).map_err(|e| io_error("cannot open", &partial, e))?;
        file.sync_all().map_err(|e| io_error("cannot sync", &partial, e))?;
        if let Ok(meta) = file.metadata() {
            use std::os::unix::fs::MetadataExt;
            report.file_bytes = meta.len();
            report.allocated_bytes = meta.blocks() * 512;
        }
        std::fs::rename(&partial, path).map_err(|e| io_error("cannot rename to", path, e))?;
        sync_parent(path)?;
        Ok(report)
    }

    /// The options of the copy: this database's engine and engine options, in a file.
    fn backup_options(&self, partial: &Path) -> DbOptions {
        let mut o = self.options.clone().unwrap_or_else(|| {
            let mut o = DbOptions::default();
            if engines::ENGINES.contains(&self.engine().name()) {
                o.engine = self.engine().name().to_string();
            }
            o
        });
        if matches!(o.region.medium, Medium::Dram | Medium::Sim) {
            // A region in memory never grew: the copy, no larger, keeps its size.
            o.max_size_bytes = Some(0);
        }
        // An engine that grows starts small and takes what the copy needs; one that keeps
        // its size (`wal`, `group`) needs the source's.
        let size_bytes = match crate::db::growth(&o).grows() {
            true if o.max_size_bytes != Some(0) => o.region.size_bytes.min(BACKUP_START_BYTES),
            _ => o.region.size_bytes,
        };
        let mut region = RegionOptions::new(Medium::File, size_bytes);
        region.sync = o.region.sync;
        region.path = Some(partial.to_path_buf());
        o.region = region;
        o
    }

    /// Takes every slot, then copies in one read transaction into a new database.
    fn copy_quiesced(&self, target_options: &DbOptions) -> Result<BackupReport> {
        let tables = self.layer()?;
        let _one_backup = self.backup_lock.lock().unwrap_or_else(|e| e.into_inner());
        let slots = self.take_every_slot()?;
        let source: ReadTx<'_> = self.begin_on(tables, slots[0].slot)?;
        let copied = Db::open(target_options).and_then(|target| {
            let report = copy(&source, &target)?;
            target.flush()?;
            Ok(report)
        });
        let ended = self.end(&source.core, true, Ending::Read);
        let report = copied?;
        ended?;
        Ok(report)
    }

    fn take_every_slot(&self) -> Result<Vec<SlotGuard<'_>>> {
        (0..self.slot_count())
            .map(|_| {
                self.slot_pool().take_within(BEGIN_WAIT).ok_or_else(|| {
                    DbError::Invalid(format!(
                        "backup: transactions kept running for {} s; end the transactions \
                         this thread holds open (begin_write, begin_read) and try again",
                        BEGIN_WAIT.as_secs()
                    ))
                })
            })
            .collect()
    }
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// Copies every named table of `source` into `target`, in transactions of at most
/// [`BATCH_BYTES`] / [`BATCH_ENTRIES`].
fn copy(source: &ReadTx<'_>, target: &Db) -> Result<BackupReport> {
    let mut report = BackupReport::default();
    for (name, kind) in kv::table_kinds(&source.core)? {
        let Some(mut entries) = kv::encoded_entries(&source.core, &name)? else { continue };
        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut batch_bytes = 0;
        loop {
            let next = entries.next_encoded()?;
            let done = next.is_none();
            if let Some((key, value)) = next {
                batch_bytes += key.len() + value.len();
                report.entries += 1;
                report.value_bytes += value.len() as u64;
                batch.push((key, value));
            }
            if done || batch_bytes >= BATCH_BYTES || batch.len() >= BATCH_ENTRIES {
                target.write(|tx| {
                    // Durable at the final flush: the copy is not in place before then.
                    tx.set_durability(Durability::Eventual);
                    let table = kv::open_encoded(&tx.core, &name, kind)?;
                    batch.iter().try_for_each(|(k, v)| kv::put_encoded(&tx.core, table, k, v))
                })?;
                batch.clear();
                batch_bytes = 0;
            }
            if done {
                break;
            }
        }
        report.tables += 1;
    }
    Ok(report)
}

/// What [`Db::compact`] did: the copy it made and the file's size before and after.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// The copy that replaced the file (its `file_bytes` and `allocated_bytes` are the
    /// sizes after).
    pub copy: BackupReport,
    /// Size of the file before.
    pub file_bytes_before: u64,
    /// Bytes the file system held for it before.
    pub allocated_bytes_before: u64,
}

impl Db {
    /// Gives the space of deleted entries back to the file system: copies every named table
    /// into `<path>.compact` ([`Db::backup_to`]), opens the copy, renames it over the
    /// database's file and continues on it. `&mut self` means no transaction is running.
    /// Needs a database in a file (`region.medium` `File` or `Shm` with `region.path`).
    ///
    /// Crash invariant: the database's path holds either the old database or the complete
    /// copy, never a partial one; a leftover `<path>.compact` (a crash before the rename) is
    /// only ever a copy and the next compaction replaces it. On an error before the rename,
    /// `self` is unchanged.
    ///
    /// ```
    /// use nvmdb::{pmem::Medium, Db, DbOptions};
    /// let path = std::env::temp_dir().join(format!("nvmdb-doc-compact-{}", std::process::id()));
    /// let mut options = DbOptions::default();
    /// options.region.medium = Medium::File;
    /// options.region.path = Some(path.clone());
    /// let mut db = Db::open(&options)?;
    /// db.write(|tx| {
    ///     let t = tx.open_table::<u64>("t")?;
    ///     (0..100).try_for_each(|k| t.insert(k, vec![7u8; 10_000]).map(drop))
    /// })?;
    /// db.write(|tx| (1..100).try_for_each(|k| tx.open_table::<u64>("t")?.remove(k).map(drop)))?;
    /// let report = db.compact()?;
    /// assert_eq!(report.copy.entries, 1);
    /// assert_eq!(db.read(|tx| tx.open_table::<u64>("t")?.unwrap().len())?, 1);
    /// # drop(db);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn compact(&mut self) -> Result<CompactReport> {
        let not_a_file = || {
            DbError::Invalid(
                "compact needs a database in a file (DbOptions::region.medium File, or Shm with \
                 region.path)"
                    .into(),
            )
        };
        let options = self.options.clone().ok_or_else(not_a_file)?;
        let path = match (&options.region.medium, &options.region.path) {
            (Medium::File | Medium::Shm, Some(path)) => path.clone(),
            _ => return Err(not_a_file()),
        };
        let mut target = path.as_os_str().to_owned();
        target.push(".compact");
        let target = PathBuf::from(target);
        match std::fs::remove_file(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(compact_error("cannot remove the leftover", &target, e)),
        }
        let (file_bytes_before, allocated_bytes_before) = file_sizes(&path)?;
        let copy = self.backup_to(&target)?;
        let mut copy_options = options.clone();
        copy_options.region.path = Some(target.clone());
        // Opened before the rename, so a copy that cannot open never replaces the database.
        let mut fresh = match Db::open(&copy_options) {
            Ok(db) => db,
            Err(e) => {
                let _ = std::fs::remove_file(&target);
                return Err(e);
            }
        };
        if let Err(e) = std::fs::rename(&target, &path) {
            drop(fresh);
            let _ = std::fs::remove_file(&target);
            return Err(compact_error("cannot rename the copy to", &path, e));
        }
        sync_parent(&path)?;
        // The open copy follows its inode through the rename; later copies and compactions
        // must name the database's path.
        fresh.options = Some(options);
        drop(std::mem::replace(self, fresh));
        Ok(CompactReport { copy, file_bytes_before, allocated_bytes_before })
    }
}

fn file_sizes(path: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| compact_error("cannot stat", path, e))?;
    Ok((meta.len(), meta.blocks() * 512))
}

/// Makes a rename in `path`'s directory durable.
fn sync_parent(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error("cannot sync the directory", &dir, e))
}
