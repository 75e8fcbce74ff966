//! Records the git commit the binary is built from (`NVMDB_GIT_COMMIT`, "unknown" outside a
//! git checkout or without git), so every result row names the code that produced it. A build
//! from uncommitted changes to the code (`crates/`, `Cargo.toml`, `Cargo.lock`) is labelled
//! `<commit>-dirty`: found when a session's sweep binary, built before its fix was committed,
//! labelled its rows with the commit before the fix (issue 16).

use std::process::Command;

/// What the binary is built from; results and notes may change without changing it.
const CODE: &[&str] = &["crates", "Cargo.toml", "Cargo.lock"];

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty());
    let top = git(&["rev-parse", "--show-toplevel"]);
    let dirty = top.as_ref().and_then(|top| {
        let mut args = vec!["-C", top, "status", "--porcelain", "--untracked-files=no", "--"];
        args.extend_from_slice(CODE);
        git(&args).map(|s| !s.is_empty())
    });
    let label = match (commit, dirty) {
        (Some(c), Some(true)) => format!("{c}-dirty"),
        (Some(c), _) => c,
        (None, _) => "unknown".to_string(),
    };
    println!("cargo:rustc-env=NVMDB_GIT_COMMIT={label}");
    // Rebuild when HEAD moves: the HEAD file (branch switches) and the log of HEAD (commits);
    // and when the code changes, so the dirty mark comes and goes with it.
    for path in ["HEAD", "logs/HEAD", "index"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(top) = &top {
        for path in CODE {
            println!("cargo:rerun-if-changed={top}/{path}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
