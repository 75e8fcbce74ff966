//! Every committed spec in `experiments/` passes `nvmdb sweep SPEC --dry-run`, full and
//! `--quick` (issue 36: `nstore-ycsb.toml` was committed with runs that could never start).
//! Would catch a spec whose flags the bench or the sweep's checks refuse before any run.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn every_committed_spec_passes_a_dry_run() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut specs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    specs.sort();
    assert!(specs.iter().any(|p| p.ends_with("nstore-tpcc.toml")), "{specs:?}");
    let out = std::env::temp_dir().join(format!("nvmdb-dry-run-every-{}", std::process::id()));
    for spec in &specs {
        for quick in [false, true] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvmdb"));
            cmd.args(["sweep", "--dry-run", "--out"]).arg(&out).arg(spec);
            if quick {
                cmd.arg("--quick");
            }
            let result = cmd.output().expect("the nvmdb binary runs");
            assert!(
                result.status.success(),
                "{} (quick: {quick}): {}",
                spec.display(),
                String::from_utf8_lossy(&result.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}
