//! Records the git commit the binary is built from (`NVMDB_GIT_COMMIT`, "unknown" outside a
//! git checkout or without git), so every result row names the code that produced it.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty());
    println!("cargo:rustc-env=NVMDB_GIT_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
    // Rebuild when HEAD moves: the HEAD file (branch switches) and the log of HEAD (commits).
    for path in ["HEAD", "logs/HEAD"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
