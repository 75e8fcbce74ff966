//! Guards numeric flags out of range (issue 39: `--threads -1` printed clap's usage block,
//! `-1` read as an unknown flag): every subcommand's numeric flags refuse negative, zero-where-
//! nonsense, too large, NaN and infinite values in one line naming the flag, with status 2.

use std::process::{Command, Output};

fn nvmdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(args).output().expect("the nvmdb binary runs")
}

#[test]
fn numeric_flags_out_of_range_give_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "--engine", "mem", "--threads", "-1"], "--threads"),
        (&["bench", "--engine", "mem", "--threads", "0"], "--threads"),
        (&["bench", "--engine", "mem", "--threads", "1000000"], "--threads"),
        (&["bench", "--engine", "mem", "--duration", "1e30"], "--duration"),
        (&["bench", "--engine", "mem", "--txns", "0"], "--txns"),
        (&["bench", "--engine", "mem", "--txns", "-3"], "--txns"),
        (&["bench", "--engine", "mem", "--records", "0"], "--records"),
        (&["bench", "--engine", "mem", "--records", "-5"], "--records"),
        (&["bench", "--engine", "mem", "--scale", "0"], "--scale"),
        (&["bench", "--engine", "mem", "--theta", "NaN"], "--theta"),
        (&["bench", "--engine", "mem", "--theta", "1.5"], "--theta"),
        (&["bench", "--engine", "mem", "--target-tps", "inf"], "--target-tps"),
        (&["bench", "--engine", "mem", "--target-tps", "-3"], "--target-tps"),
        (&["bench", "--engine", "mem", "--max-pending", "0"], "--max-pending"),
        (&["bench", "--engine", "mem", "--cache-pages", "0"], "--cache-pages"),
        (&["bench", "--engine", "mem", "--seed", "-1"], "--seed"),
        (&["crashtest", "--engine", "mem", "--crashes", "0"], "--crashes"),
        (&["crashtest", "--engine", "mem", "--threads", "-1"], "--threads"),
        (&["crashtest", "--engine", "mem", "--aim", "101"], "--aim"),
        (&["crashtest", "--engine", "mem", "--jobs", "0"], "--jobs"),
        (&["crashtest", "--engine", "mem", "--ages", "0"], "--ages"),
        (&["fuzz", "--cases", "0"], "--cases"),
        (&["fuzz", "--step-timeout", "NaN"], "--step-timeout"),
        (&["fuzz", "--step-timeout", "-1"], "--step-timeout"),
        (&["fuzz", "--jobs", "-2"], "--jobs"),
        (&["fuzz", "--txns", "0"], "--txns"),
        (&["dcpower", "model", "--utilisation", "1.5"], "--utilisation"),
        (&["dcpower", "model", "--utilisation", "-inf"], "--utilisation"),
        (&["dcpower", "route", "--pdus", "0"], "--pdus"),
        (&["dcpower", "route", "--idle-fraction", "-0.1"], "--idle-fraction"),
        (&["calibrate", "--threads", "-1"], "--threads"),
        (&["scan", "--rows", "-1"], "--rows"),
        (&["scan", "--prune", "NaN"], "prune"),
        (&["join", "--memory-pages", "-1"], "--memory-pages"),
        (&["persistency", "--threads", "-1"], "threads"),
    ];
    for (args, flag) in cases {
        let out = nvmdb(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: the error does not name {flag}: {err}");
        assert!(!err.contains("Usage:"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: ran anyway");
    }
}
