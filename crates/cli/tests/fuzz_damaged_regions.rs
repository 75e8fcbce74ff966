//! `nvmdb fuzz`: 2,000 damaged regions (bit flips, overwritten words, zeroed and stale pages,
//! truncation, in every kind of page of populated and in-flight images) open, run, check and
//! reopen without a panic, a hang or a reformat. Would catch: any page id, count, offset or
//! length read from a damaged region and used without validation; an unbounded walk; a latch
//! taken twice; a populated region formatted again.
//! The long run is `cargo nextest run --release -p nvmdb-cli --run-ignored only fuzz_long`
//! (or `nvmdb fuzz --cases 100000 --seed 11`).

use std::process::Command;

fn fuzz(cases: u64, seed: u64) -> serde_json::Value {
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4).to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["fuzz", "--engine", "inplace", "--json", "--jobs", &jobs])
        .args(["--cases", &cases.to_string(), "--seed", &seed.to_string()])
        .output()
        .expect("the nvmdb binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("fuzz output is not JSON ({e}): {stdout}\n{stderr}"));
    assert!(out.status.success(), "fuzz failed:\n{stderr}\n{stdout}");
    json
}

fn assert_clean(json: &serde_json::Value, cases: u64) {
    assert_eq!(json["cases"], cases, "{json}");
    for class in ["panic", "hang", "reformatted"] {
        assert_eq!(json["classes"][class], 0, "{class}: {}", json["kept"]);
    }
    // The damage must mostly be noticed: rejected at open or detected later.
    let noticed = json["classes"]["rejected"].as_u64().unwrap_or(0)
        + json["classes"]["detected"].as_u64().unwrap_or(0);
    assert!(noticed * 3 > cases, "only {noticed} of {cases} damaged regions noticed: {json}");
}

#[test]
fn two_thousand_damaged_regions_never_panic_hang_or_reformat() {
    assert_clean(&fuzz(2000, 42), 2000);
}

#[test]
#[ignore = "long run (about 100,000 cases); run on demand"]
fn fuzz_long() {
    assert_clean(&fuzz(100_000, 11), 100_000);
}
