//! The sweep's image cache key (`sweep::image_key`) separates every setting that changes the
//! loaded database, so no run starts from an image another configuration loaded.

use experiments::{grid, sweep, ExpandOptions, Spec};
use std::path::PathBuf;

fn spec(name: &str) -> Spec {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments").join(name);
    Spec::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Regression (issue 36): `--txn` was run-only, so a Mobibench update run started from the
/// insert run's empty image and failed with "loaded row 768 is missing".
#[test]
fn image_cache_key_includes_txn() {
    let (points, _) = grid::expand(&spec("nvwal-table2-bytes.toml"), &ExpandOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let key = |op: &str, n: &str, diff: &str| {
        let p = points
            .iter()
            .find(|p| {
                p.value("op").as_deref() == Some(op)
                    && p.value("n").as_deref() == Some(n)
                    && p.value("diff").as_deref() == Some(diff)
            })
            .unwrap_or_else(|| panic!("no point op={op} n={n} diff={diff}"));
        sweep::image_key(p).unwrap_or_else(|| panic!("{} has no image key", p.id))
    };
    for n in ["1", "32"] {
        for diff in ["off", "on"] {
            let (insert, update) = (key("insert", n, diff), key("update", n, diff));
            assert_ne!(insert, update, "insert and update at n={n} diff={diff} share an image");
            assert_ne!(update, key("delete", n, diff));
        }
    }
}

/// The flags that shape what a load builds are never run-only (a flag added to
/// `RUN_ONLY_FLAGS` by mistake would let runs share an image they did not load).
#[test]
fn load_shaping_flags_are_part_of_the_image_key() {
    for flag in [
        "engine",
        "engine_opt",
        "workload",
        "workload_opt",
        "txn",
        "scale",
        "records",
        "size",
        "threads",
        "seed",
        "medium",
    ] {
        assert!(!sweep::RUN_ONLY_FLAGS.contains(&flag), "{flag} changes the loaded image");
    }
}
