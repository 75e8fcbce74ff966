//! What the engines' `nvmdb crashtest` tests share: run the binary with `--json`, parse its
//! output, and the three things every clean campaign must show.

// Each test binary compiles its own copy; not every binary uses every helper.
#![allow(dead_code)]

use std::process::{Command, Output};

/// `nvmdb` with the engine's fixed arguments, then the test's, then `--json`.
pub fn run(fixed: &[&str], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(fixed)
        .args(args)
        .arg("--json")
        .output()
        .expect("the nvmdb binary runs")
}

pub fn json_of(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {text}\nstderr: {}", String::from_utf8_lossy(&out.stderr))
    })
}

/// A campaign that exited 0 with no violation and verified at least one acknowledgement.
pub fn assert_clean(out: &Output) -> serde_json::Value {
    let json = json_of(out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!(json["violations"], 0, "{json}");
    assert!(json["acks_verified"].as_u64().unwrap_or(0) > 0, "{json}");
    json
}
