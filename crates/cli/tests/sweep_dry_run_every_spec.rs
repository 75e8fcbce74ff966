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

/// Guards the seeds' specs (issue 36): `nvmdb sweep` on a persistency or query-optimisation
/// spec, which its own command runs, fails with one line naming that command instead of a
/// TOML error about unknown keys (or a sweep of nothing).
#[test]
fn seed_specs_are_refused_with_the_command_that_runs_them() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let out = std::env::temp_dir().join(format!("nvmdb-seed-specs-{}", std::process::id()));
    let mut seen = 0;
    let seeds = [
        ("persistency", "nvmdb persistency sweep"),
        ("queryopt", "(its claims are judged in results/queryopt/claims.txt)"),
    ];
    for (dir, command) in seeds {
        let mut specs: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        specs.sort();
        for spec in specs {
            let result = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
                .args(["sweep", "--dry-run", "--out"])
                .arg(&out)
                .arg(&spec)
                .output()
                .expect("the nvmdb binary runs");
            let stderr = String::from_utf8_lossy(&result.stderr);
            assert!(!result.status.success(), "{}: {stderr}", spec.display());
            assert_eq!(stderr.trim().lines().count(), 1, "{}: {stderr}", spec.display());
            assert!(stderr.contains("not an `nvmdb sweep` spec: run it with `"), "{stderr}");
            assert!(stderr.contains(command), "{}: {stderr}", spec.display());
            seen += 1;
        }
    }
    assert!(seen >= 9, "{seen} seed specs");
    assert!(!out.exists(), "a refused spec wrote {}", out.display());
}
