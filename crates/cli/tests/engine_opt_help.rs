//! `nvmdb bench --engine-opt help` and `nvmdb bench --help` list every engine's keys from the
//! engines' own options tables (issue 34): a key added to an engine's `options.rs` shows up
//! here, and one parsed but missing from the help (or the reverse) fails.

use std::process::Command;

fn nvmdb(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(args).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines of `text` from `name:` up to the next engine's block.
fn block<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| l.trim() != format!("{name}:"));
    lines.next().unwrap_or_else(|| panic!("no block for {name}:\n{text}"));
    lines.take_while(|l| l.starts_with("  ")).collect()
}

#[test]
fn engine_opt_help_lists_every_engines_keys_and_the_faults() {
    let all = nvmdb(&["bench", "--engine-opt", "help"]);
    for engine in engines::registry::REGION_ENGINES {
        let lines = block(&all, engine.name);
        let keys: Vec<_> = lines.iter().map(|l| l.trim().split('=').next().unwrap()).collect();
        assert_eq!(keys, engine.keys(), "{}", engine.name);
    }
    let nvwal = block(&all, "sqlite-nvwal");
    assert_eq!(nvwal.len(), sqlite_nvwal::option_keys().len(), "{nvwal:?}");
    assert!(nvwal[0].contains("nvwal=<ls, e or cs> (default ls)"), "{nvwal:?}");
    for fault in engines::FAULTS {
        assert!(all.contains(fault.name), "fault {} not listed", fault.name);
    }
    // `--help` shows the same keys under --engine-opt.
    let help = nvmdb(&["bench", "--help"]);
    assert!(help.contains("  memtable_bytes=<a size in bytes"), "{help}");
    assert!(help.contains("  log=<central, txn:N or page:N"), "{help}");
}

#[test]
fn engine_opt_help_for_one_engine_lists_only_its_keys() {
    let wal = nvmdb(&["bench", "--engine", "wal", "--engine-opt", "help"]);
    assert!(wal.starts_with("wal:\n"), "{wal}");
    assert!(wal.contains("  log_bytes=<a size in bytes (4096, 8MiB, 1GB)> (default 67108864)"));
    assert!(!wal.contains("memtable_bytes"), "{wal}");
}
