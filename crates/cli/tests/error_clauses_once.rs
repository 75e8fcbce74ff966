//! Guards errors that repeated themselves (issue 39: a bench worker's error and a sweep that
//! could not record its results printed their cause twice, once in the message and once as the
//! error's source): every clause of a printed error appears once.

use std::process::{Command, Output};

fn nvmdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(args).output().expect("the nvmdb binary runs")
}

/// The error line, checked to hold no `: `-separated clause twice.
fn assert_no_repeated_clause(args: &[&str], needle: &str) {
    let out = nvmdb(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
    let line = err.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| {
        panic!("{args:?}: no error line: {err}");
    });
    assert!(line.contains(needle), "{args:?}: {line}");
    assert_eq!(line.matches(needle).count(), 1, "{args:?}: repeated: {line}");
    let clauses: Vec<&str> = line.split(": ").filter(|c| c.len() > 12).collect();
    for (i, clause) in clauses.iter().enumerate() {
        assert!(!clauses[i + 1..].contains(clause), "{args:?}: `{clause}` repeats: {line}");
    }
}

#[test]
fn an_error_never_repeats_its_own_clause() {
    // Every loaded record is deleted before the run ends: a worker's error.
    assert_no_repeated_clause(
        &[
            "bench",
            "--engine",
            "inplace",
            "--workload",
            "mobibench",
            "--workload-opt",
            "txn=delete",
            "--records",
            "100",
            "--warmup",
            "0s",
            "--duration",
            "1s",
        ],
        "loaded records are deleted",
    );
    // An output directory that cannot be made (as root no directory is read-only to us, so
    // its parent is a regular file).
    let dir = std::env::temp_dir().join(format!("nvmdb-clauses-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let out = file.join("out");
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/smoke.toml");
    assert_no_repeated_clause(&["sweep", spec, "--out", out.to_str().unwrap()], "Not a directory");
    std::fs::remove_dir_all(&dir).unwrap();
}
