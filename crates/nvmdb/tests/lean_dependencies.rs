//! `cargo add nvmdb` stays lean: the library's normal dependencies, followed through the
//! workspace crates it uses, are pmem, storage, engines and a few small crates. Would catch: the
//! CLI, a peer (SQLite, LMDB and RocksDB sources), plotting or serde_json (whose impls broke
//! type inference in users' code, E0283) coming back as a dependency of the library (issue 14).

use std::collections::BTreeSet;
use std::path::Path;

/// External crates the library may depend on, directly or through pmem, storage and engines.
const ALLOWED_EXTERNAL: &[&str] = &[
    "libc",
    "thiserror",
    "parking_lot",
    "crossbeam-utils",
    "rand",
    "rand_chacha",
    "serde",
    // CRC-32C (storage::crc); it replaced `crc32c` (2026-11-29) and brings `digest` and `spin`.
    "crc-fast",
];
/// Workspace crates the library may depend on.
const ALLOWED_WORKSPACE: &[&str] = &["nvmdb", "pmem", "storage", "engines"];

/// Names in the normal-dependency sections of a manifest (`[dependencies]` and
/// `[target.'…'.dependencies]`; not dev- or build-dependencies).
fn normal_dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_normal = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            let section = line.trim_matches(|c| c == '[' || c == ']');
            in_normal = section == "dependencies" || section.ends_with(".dependencies");
            continue;
        }
        if !in_normal || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or_default().trim_matches('"');
        if !name.is_empty() {
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn library_depends_on_pmem_storage_engines_and_small_crates_only() {
    let crates_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut seen = BTreeSet::new();
    let mut external = BTreeSet::new();
    let mut queue = vec!["nvmdb".to_string()];
    while let Some(name) = queue.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let manifest = crates_dir.join(&name).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .unwrap_or_else(|e| panic!("reading {}: {e}", manifest.display()));
        for dep in normal_dependencies(&text) {
            if crates_dir.join(&dep).join("Cargo.toml").exists() {
                queue.push(dep);
            } else {
                external.insert(dep);
            }
        }
    }
    let workspace: Vec<_> =
        seen.iter().filter(|c| !ALLOWED_WORKSPACE.contains(&c.as_str())).collect();
    assert!(workspace.is_empty(), "nvmdb now depends on workspace crates {workspace:?}");
    let heavy: Vec<_> =
        external.iter().filter(|c| !ALLOWED_EXTERNAL.contains(&c.as_str())).collect();
    assert!(heavy.is_empty(), "nvmdb now depends on {heavy:?}: keep them in nvmdb-cli");
    assert!(seen.contains("engines") && external.contains("serde"), "{seen:?} {external:?}");
}
