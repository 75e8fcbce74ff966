//! Online backup (issue 39): `Db::backup_to` while writers run. These tests would catch a
//! backup that copies half a transaction (a transfer's debit without its credit, a ledger
//! without its counter, a torn value), one that cannot be opened as a `Db`, one that
//! overwrites an existing file, and — killed with SIGKILL mid-copy — a partial backup left
//! at the target path or a source database damaged by it.

use nvmdb::pmem::Medium;
use nvmdb::{Db, DbError, DbOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const ACCOUNTS: u64 = 10;
const START_BALANCE: u64 = 1000;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvmdb-backup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn file_options(engine: &str, path: &Path) -> DbOptions {
    let mut o = DbOptions { engine: engine.into(), ..Default::default() };
    o.region.medium = Medium::File;
    o.region.path = Some(path.to_path_buf());
    o.engine_options.group.batch_period_ms = 1;
    o
}

/// A blob whose every byte says which transfer wrote it, so a torn one is seen.
fn blob(transfer: u64) -> Vec<u8> {
    let mut v = transfer.to_le_bytes().to_vec();
    v.resize(30_000, transfer as u8);
    v
}

/// One transfer: moves 1 between accounts, appends to the ledger, bumps its counter and
/// rewrites a blob, all in one transaction.
fn transfer(db: &Db, n: u64) -> nvmdb::storage::Result<()> {
    db.write(|tx| {
        let accounts = tx.open_table::<u64>("accounts")?;
        let (from, to) = (n % ACCOUNTS, (n * 7 + 3) % ACCOUNTS);
        let a: u64 = accounts.get_as(from)?.unwrap_or(0);
        let b: u64 = accounts.get_as(to)?.unwrap_or(0);
        if from != to && a > 0 {
            accounts.insert_as(from, &(a - 1))?;
            accounts.insert_as(to, &(b + 1))?;
        }
        let meta = tx.open_table::<str>("meta")?;
        let next: u64 = meta.get_as("next")?.unwrap_or(0);
        meta.insert_as("next", &(next + 1))?;
        tx.open_table::<u64>("ledger")?.insert(next, n.to_le_bytes())?;
        tx.open_table::<u64>("blobs")?.insert(n % 3, blob(n))?;
        Ok(())
    })
}

/// Checks a backup's invariants; returns the number of transfers it holds.
fn check_backup(engine: &str, path: &Path) -> u64 {
    let db = Db::open(&file_options(engine, path)).unwrap();
    let (sum, next, ledger, blobs) = db
        .read(|tx| {
            let accounts = tx.open_table::<u64>("accounts")?.expect("accounts");
            let sum: u64 = accounts
                .iter()
                .map(|e| e.map(|(_, v)| u64::from_le_bytes(v.try_into().unwrap_or([0; 8]))))
                .sum::<Result<u64, _>>()?;
            let next = tx.open_table::<str>("meta")?.map_or(Ok(None), |t| t.get_as("next"))?;
            let ledger = tx.open_table::<u64>("ledger")?.map_or(Ok(0), |t| t.len())?;
            let blobs: Vec<Vec<u8>> = match tx.open_table::<u64>("blobs")? {
                Some(t) => t.iter().map(|e| e.map(|(_, v)| v)).collect::<Result<_, _>>()?,
                None => Vec::new(),
            };
            Ok((sum, next.unwrap_or(0u64), ledger, blobs))
        })
        .unwrap();
    assert_eq!(sum, ACCOUNTS * START_BALANCE, "{engine}: money appeared or vanished");
    assert_eq!(ledger, next, "{engine}: ledger and its counter disagree");
    for b in blobs {
        let n = u64::from_le_bytes(b[..8].try_into().unwrap());
        assert_eq!(b, blob(n), "{engine}: a torn blob");
    }
    assert!(db.check().unwrap().ok(), "{engine}");
    next
}

#[test]
fn backups_taken_while_writers_run_are_consistent_on_every_engine() {
    for engine in nvmdb::engines::ENGINES {
        let dir = scratch(&format!("online-{engine}"));
        let mut o = DbOptions { engine: engine.to_string(), ..Default::default() };
        o.region.medium = Medium::Dram;
        o.engine_options.group.batch_period_ms = 1;
        let db = Db::open(&o).unwrap();
        db.write(|tx| {
            let accounts = tx.open_table::<u64>("accounts")?;
            (0..ACCOUNTS).try_for_each(|a| accounts.insert_as(a, &START_BALANCE).map(drop))
        })
        .unwrap();
        let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
        let mut held = Vec::new();
        std::thread::scope(|s| {
            for w in 0..2u64 {
                let (db, stop, done) = (&db, &stop, &done);
                s.spawn(move || {
                    let mut n = w;
                    while !stop.load(Ordering::Relaxed) {
                        transfer(db, n).unwrap_or_else(|e| panic!("{engine}: {e}"));
                        done.fetch_add(1, Ordering::Relaxed);
                        n += 2;
                    }
                });
            }
            for i in 0..3 {
                let wanted = done.load(Ordering::Relaxed) + 20;
                while done.load(Ordering::Relaxed) < wanted {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let path = dir.join(format!("backup-{i}"));
                let report = db.backup_to(&path).unwrap_or_else(|e| panic!("{engine}: {e}"));
                assert_eq!(report.tables, 4, "{engine}");
                held.push(path);
            }
            stop.store(true, Ordering::Relaxed);
        });
        let mut last = 0;
        for path in &held {
            let transfers = check_backup(engine, path);
            assert!(transfers >= last + 20, "{engine}: {transfers} after {last}");
            last = transfers;
        }
        assert!(done.load(Ordering::Relaxed) >= last, "{engine}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[test]
fn a_backup_never_overwrites_a_file() {
    let dir = scratch("exists");
    let db = Db::open(&DbOptions::default()).unwrap();
    let path = dir.join("taken");
    std::fs::write(&path, b"precious").unwrap();
    match db.backup_to(&path) {
        Err(DbError::Invalid(m)) => assert!(m.contains("exists"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    std::fs::remove_dir_all(&dir).ok();
}

const CHILD_ENV: &str = "NVMDB_BACKUP_CHILD_DIR";

/// Runs the ignored test `child` in a child process (with [`CHILD_ENV`] = `dir`), kills it
/// with SIGKILL after each of six delays, and calls `after_kill(delay_ms)` once it is dead.
fn kill_child_at_delays(child: &str, dir: &Path, mut after_kill: impl FnMut(u64)) {
    for delay_ms in [30u64, 60, 90, 120, 150, 200] {
        let mut process = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", child, "--include-ignored", "--nocapture"])
            .env(CHILD_ENV, dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        process.kill().unwrap(); // SIGKILL
        process.wait().unwrap();
        after_kill(delay_ms);
    }
}

/// Not a test on its own: the process `backup_killed_mid_copy_leaves_no_partial_target`
/// kills. Backs the source up again and again until it is killed.
#[test]
#[ignore = "a child process of backup_killed_mid_copy_leaves_no_partial_target"]
fn backup_child_process() {
    let Some(dir) = std::env::var_os(CHILD_ENV).map(PathBuf::from) else { return };
    let db = Db::open(&file_options("inplace", &dir.join("source"))).unwrap();
    for i in 0.. {
        db.backup_to(dir.join(format!("target-{i}"))).unwrap();
    }
}

#[test]
fn backup_killed_mid_copy_leaves_no_partial_target() {
    let dir = scratch("killed");
    let source = dir.join("source");
    {
        let db = Db::open(&file_options("inplace", &source)).unwrap();
        db.write(|tx| {
            let accounts = tx.open_table::<u64>("accounts")?;
            (0..ACCOUNTS).try_for_each(|a| accounts.insert_as(a, &START_BALANCE).map(drop))
        })
        .unwrap();
        for n in 0..150 {
            transfer(&db, n).unwrap();
        }
    }
    let mut partials = 0;
    kill_child_at_delays("backup_child_process", &dir, |_| {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".partial") {
                partials += 1;
                std::fs::remove_file(&path).unwrap();
            } else if name.starts_with("target-") {
                assert_eq!(check_backup("inplace", &path), 150, "{name}");
                std::fs::remove_file(&path).unwrap();
            }
        }
        assert_eq!(check_backup("inplace", &source), 150, "the source after a kill");
    });
    assert!(partials > 0, "no kill landed during a copy: the test did not test");
    std::fs::remove_dir_all(&dir).ok();
}

/// Figures for the issue (not a check): how fast a backup copies, and how long a concurrent
/// writer waits for it (the quiesce). Run with `--run-ignored only --no-capture`.
#[test]
#[ignore = "figures: prints backup throughput and the longest writer wait"]
fn backup_figures() {
    let dir = scratch("figures");
    let mut o = file_options("inplace", &dir.join("source"));
    o.region.size_bytes = 256 << 20;
    let db = Db::open(&o).unwrap();
    let value = vec![0x5a; 100_000];
    for batch in 0..64u64 {
        db.write(|tx| {
            let t = tx.open_table::<u64>("blobs")?;
            (0..10).try_for_each(|i| t.insert(batch * 10 + i, &value).map(drop))
        })
        .unwrap();
    }
    // Nine values in ten deleted: the source keeps their pages, the copy does not.
    for batch in 0..64u64 {
        db.write(|tx| {
            let t = tx.open_table::<u64>("blobs")?;
            (batch * 10 + 1..batch * 10 + 10).try_for_each(|k| t.remove(k).map(drop))
        })
        .unwrap();
    }
    let stop = AtomicBool::new(false);
    let longest_wait_us = AtomicU64::new(0);
    let (report, took) = std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let started = std::time::Instant::now();
                db.write(|tx| tx.open_table::<u64>("small")?.insert(n, b"x")).unwrap();
                let us = started.elapsed().as_micros() as u64;
                longest_wait_us.fetch_max(us, Ordering::Relaxed);
                n += 1;
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        let started = std::time::Instant::now();
        let report = db.backup_to(dir.join("copy")).unwrap();
        let took = started.elapsed();
        std::thread::sleep(std::time::Duration::from_millis(50));
        stop.store(true, Ordering::Relaxed);
        (report, took)
    });
    let mib = report.value_bytes as f64 / (1 << 20) as f64;
    println!(
        "backup: {} entries, {mib:.1} MiB of values in {:.3} s ({:.0} MiB/s); file {} MiB \
         ({} MiB allocated); longest concurrent write {:.1} ms",
        report.entries,
        took.as_secs_f64(),
        mib / took.as_secs_f64(),
        report.file_bytes >> 20,
        report.allocated_bytes >> 20,
        longest_wait_us.load(Ordering::Relaxed) as f64 / 1000.0
    );
    use std::os::unix::fs::MetadataExt;
    let source = std::fs::metadata(dir.join("source")).unwrap();
    println!(
        "source after the deletes: file {} MiB ({} MiB allocated)",
        source.len() >> 20,
        (source.blocks() * 512) >> 20
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A copy of a file-backed database of an engine that grows starts small: it must grow past
/// its first size and open with the source's options.
#[test]
fn copies_of_growing_engines_grow_past_their_first_size() {
    for engine in ["inplace", "cow", "lsm"] {
        let dir = scratch(&format!("grow-{engine}"));
        let db = Db::open(&file_options(engine, &dir.join("source"))).unwrap();
        let value = vec![0x42; 200_000];
        for batch in 0..20u64 {
            db.write(|tx| {
                let t = tx.open_table::<u64>("blobs")?;
                (0..5).try_for_each(|i| t.insert(batch * 5 + i, &value).map(drop))
            })
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        }
        let report = db.backup_to(dir.join("copy")).unwrap_or_else(|e| panic!("{engine}: {e}"));
        assert_eq!((report.entries, report.value_bytes), (100, 20_000_000), "{engine}");
        assert!(report.file_bytes > 16 << 20, "{engine}: {} bytes", report.file_bytes);
        let copy = Db::open(&file_options(engine, &dir.join("copy"))).unwrap();
        let n = copy.read(|tx| tx.open_table::<u64>("blobs")?.unwrap().len()).unwrap();
        assert_eq!(n, 100, "{engine}");
        assert!(copy.check().unwrap().ok(), "{engine}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// `Db::compact` (issue 39, "compaction that returns space to the file system"): after nine
/// entries in ten are deleted, compaction keeps every remaining entry, leaves no `.compact`
/// file, gives the space back on the engines that grow (filled past their first 64 MiB), and
/// the database goes on working on the new file (written to, reopened from its path).
#[test]
fn compact_gives_deleted_space_back_and_keeps_every_entry_on_every_engine() {
    for engine in nvmdb::engines::ENGINES {
        let dir = scratch(&format!("compact-{engine}"));
        let path = dir.join("db");
        let mut db = Db::open(&file_options(engine, &path)).unwrap();
        // Engines that grow get 80 MB of values; `wal` and `group` keep their 64 MiB.
        let grows = ["inplace", "cow", "lsm"].contains(engine);
        let (batches, value_bytes) = if grows { (20u64, 400_000) } else { (20, 40_000) };
        let value = |k: u64| vec![k as u8; value_bytes];
        for batch in 0..batches {
            db.write(|tx| {
                let t = tx.open_table::<u64>("blobs")?;
                (0..10).try_for_each(|i| t.insert(batch * 10 + i, value(batch * 10 + i)).map(drop))
            })
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        }
        for batch in 0..batches {
            db.write(|tx| {
                let t = tx.open_table::<u64>("blobs")?;
                (batch * 10 + 1..batch * 10 + 10).try_for_each(|k| t.remove(k).map(drop))
            })
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        }
        let report = db.compact().unwrap_or_else(|e| panic!("{engine}: {e}"));
        assert_eq!((report.copy.tables, report.copy.entries), (1, batches), "{engine}");
        assert!(!dir.join("db.compact").exists(), "{engine}: the copy was left beside");
        println!("{engine}: {report:?}");
        if grows {
            // At least half of the deleted values' bytes come back (a fresh layout has its
            // own fixed cost, so the file does not shrink to the live entries alone).
            let deleted = batches * 9 * value_bytes as u64;
            assert!(
                report.copy.allocated_bytes + deleted / 2 <= report.allocated_bytes_before,
                "{engine}: {} bytes allocated after, {} before",
                report.copy.allocated_bytes,
                report.allocated_bytes_before
            );
        }
        db.write(|tx| tx.open_table::<u64>("blobs")?.insert(1000, value(1000)).map(drop))
            .unwrap_or_else(|e| panic!("{engine}: {e}"));
        drop(db);
        let db = Db::open(&file_options(engine, &path)).unwrap();
        let keys: Vec<u64> = db
            .read(|tx| {
                let t = tx.open_table::<u64>("blobs")?.expect("blobs");
                t.iter()
                    .map(|e| {
                        e.map(|(k, v)| {
                            assert_eq!(v, value(k), "{engine}: value of {k}");
                            k
                        })
                    })
                    .collect()
            })
            .unwrap();
        let mut expected: Vec<u64> = (0..batches).map(|b| b * 10).collect();
        expected.push(1000);
        assert_eq!(keys, expected, "{engine}");
        assert!(db.check().unwrap().ok(), "{engine}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A leftover `<path>.compact` (a crash before the rename) is replaced, and a database that
/// is not in a file is refused in one line that names the option.
#[test]
fn compact_replaces_a_leftover_copy_and_refuses_a_database_in_memory() {
    let dir = scratch("compact-leftover");
    let path = dir.join("db");
    let mut db = Db::open(&file_options("inplace", &path)).unwrap();
    db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"one").map(drop)).unwrap();
    std::fs::write(dir.join("db.compact"), b"garbage from a crash").unwrap();
    db.compact().unwrap();
    let v = db.read(|tx| tx.open_table::<u64>("t")?.unwrap().get(1)).unwrap();
    assert_eq!(v.as_deref(), Some(&b"one"[..]));
    let mut memory = Db::open(&DbOptions::default()).unwrap();
    let e = memory.compact().unwrap_err().to_string();
    assert!(e.contains("DbOptions::region.medium") && !e.contains('\n'), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Not a test on its own: the process `compaction_killed_anywhere_leaves_a_whole_database`
/// kills. Compacts the database again and again until it is killed.
#[test]
#[ignore = "a child process of compaction_killed_anywhere_leaves_a_whole_database"]
fn compact_child_process() {
    let Some(dir) = std::env::var_os(CHILD_ENV).map(PathBuf::from) else { return };
    let mut db = Db::open(&file_options("inplace", &dir.join("source"))).unwrap();
    loop {
        db.compact().unwrap();
    }
}

/// SIGKILL at six moments of repeated compactions: the database's path always opens with
/// every transfer and its invariants, whatever leftover lies beside it, and the next
/// compaction succeeds.
#[test]
fn compaction_killed_anywhere_leaves_a_whole_database() {
    let dir = scratch("compact-killed");
    let source = dir.join("source");
    {
        let db = Db::open(&file_options("inplace", &source)).unwrap();
        db.write(|tx| {
            let accounts = tx.open_table::<u64>("accounts")?;
            (0..ACCOUNTS).try_for_each(|a| accounts.insert_as(a, &START_BALANCE).map(drop))
        })
        .unwrap();
        for n in 0..150 {
            transfer(&db, n).unwrap();
        }
    }
    let mut leftovers = 0;
    kill_child_at_delays("compact_child_process", &dir, |delay_ms| {
        leftovers += ["source.compact", "source.compact.partial"]
            .iter()
            .filter(|name| dir.join(name).exists())
            .count();
        assert_eq!(check_backup("inplace", &source), 150, "after a kill at {delay_ms} ms");
    });
    let mut db = Db::open(&file_options("inplace", &source)).unwrap();
    db.compact().unwrap();
    drop(db);
    assert_eq!(check_backup("inplace", &source), 150, "after a last compaction");
    assert!(leftovers > 0, "no kill landed during a copy: the test did not test");
    std::fs::remove_dir_all(&dir).ok();
}
