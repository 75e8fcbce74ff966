//! Every spec in `experiments/` parses, expands, and names only keys its grid or the bench has:
//! guards against a spec edit that would only fail hours into a sweep.

use experiments::{grid, ExpandOptions, Spec};
use std::path::PathBuf;

fn spec_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_spec_parses_and_expands() {
    let files = spec_files();
    assert!(files.len() >= 9, "expected the papers' specs, found {files:?}");
    let mut names = std::collections::HashSet::new();
    for path in files {
        let spec = Spec::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(names.insert(spec.name.clone()), "{}: name used twice", path.display());
        assert!(!spec.claims.is_empty(), "{}: no claim to check", path.display());
        assert!(!spec.plots.is_empty(), "{}: nothing to plot", path.display());
        for quick in [false, true] {
            let (points, reps) =
                grid::expand(&spec, &ExpandOptions { quick, ..Default::default() })
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!points.is_empty() && reps >= 1);
            let ids: std::collections::HashSet<_> = points.iter().map(|p| &p.id).collect();
            assert_eq!(ids.len(), points.len(), "{}: duplicate point ids", path.display());
            for p in &points {
                assert!(
                    p.flags.contains_key("engine"),
                    "{}: {} has no engine",
                    path.display(),
                    p.id
                );
                assert!(
                    p.flags.contains_key("workload"),
                    "{}: {} has no workload",
                    path.display(),
                    p.id
                );
            }
        }
    }
}

#[test]
fn quick_runs_are_short() {
    for path in spec_files() {
        let spec = Spec::load(&path).unwrap();
        let quick = ExpandOptions { quick: true, ..Default::default() };
        let (points, reps) = grid::expand(&spec, &quick).unwrap();
        assert_eq!(reps, 1, "{}", path.display());
        for p in &points {
            let t = grid::timeout(&spec, p, grid::Scale::Quick);
            assert!(t.as_secs() <= 400, "{}: {} may run {t:?}", path.display(), p.id);
            // A run bounded by a transaction count (NVWAL's 1,000 transactions) is short when
            // the count is.
            if let Some(n) = p.flags.get("txns").map(|v| v.to_string()) {
                let n: u64 = n.parse().unwrap_or(u64::MAX);
                assert!(n <= 1000, "{}: {} runs {n} transactions", path.display(), p.id);
                continue;
            }
            let d = p.flags.get("duration").map(|v| v.to_string()).unwrap_or_default();
            let secs =
                experiments::units::parse_duration(&d, experiments::units::BareTime::Seconds);
            assert!(
                secs.is_some_and(|s| s.as_secs_f64() <= 1.0),
                "{}: {} lasts {d}",
                path.display(),
                p.id
            );
        }
    }
}

/// Issue 16: a reproduction (`pelley-*`, `thesis-*`) runs the paper's method (DRAM with the
/// timing model; Fig. 1's crash test on tmpfs without flush cost) and names the protocol of
/// every In-Place and WAL point, so its series cannot silently fall back to ours; a product
/// spec (`product-*`) says it is not a reproduction.
#[test]
fn reproductions_use_the_papers_method() {
    let flag = |p: &grid::Point, k: &str| p.flags.get(k).map(|v| v.to_string()).unwrap_or_default();
    for path in spec_files() {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let spec = Spec::load(&path).unwrap();
        if file.starts_with("product-") {
            let title = spec.title.to_lowercase();
            assert!(title.contains("not a reproduction"), "{file}: title must say so");
            continue;
        }
        if !(file.starts_with("pelley-") || file.starts_with("thesis-")) {
            continue;
        }
        let (points, _) = grid::expand(&spec, &ExpandOptions::default()).unwrap();
        for p in &points {
            let medium = flag(p, "medium");
            match spec.mode {
                experiments::spec::Mode::Run => assert_eq!(medium, "dram", "{file}: {}", p.id),
                _ => {
                    assert_eq!(medium, "shm", "{file}: {}", p.id);
                    assert_eq!(flag(p, "flush"), "none", "{file}: {} pays real flushes", p.id);
                }
            }
            let opts = flag(p, "engine_opt");
            match flag(p, "engine").as_str() {
                "inplace" => assert!(opts.contains("protocol="), "{file}: {} protocol?", p.id),
                "wal" => {
                    assert!(opts.contains("page_flush="), "{file}: {} page_flush?", p.id);
                    // Issue 38: the paper's flusher, or ours named as ours.
                    assert!(opts.contains("flusher="), "{file}: {} flusher?", p.id);
                    if opts.contains("flusher=checkpoint") {
                        assert!(
                            p.id.contains("ours"),
                            "{file}: {} checkpoints but is not ours",
                            p.id
                        );
                    }
                }
                "group" => {
                    // Issue 38: the 4,096 default ended TATP's 200 ms batches early.
                    let cap: u64 = flag(p, "max_pending").parse().unwrap_or(0);
                    assert!(cap >= 1 << 18, "{file}: {} max_pending {cap} caps batches", p.id);
                }
                _ => {}
            }
        }
    }
}

/// Guards issue 38's provenance finding: two specs cited specs that do not exist
/// (`product-read-latency`, `product-persist-latency`). Every `pelley-…`, `thesis-…`,
/// `product-…`, `nstore-…`, `nvwal-…` name a spec's comments mention is a spec's name or file.
#[test]
fn specs_cite_only_specs_that_exist() {
    let files = spec_files();
    let mut known = std::collections::HashSet::new();
    for path in &files {
        known.insert(Spec::load(path).unwrap().name);
        known.insert(path.file_stem().unwrap().to_string_lossy().into_owned());
    }
    let prefixes = ["pelley-", "thesis-", "product-", "nstore-", "nvwal-"];
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let comments: String = text.lines().filter(|l| l.trim_start().starts_with('#')).collect();
        let words = comments.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'));
        for word in words.map(|w| w.trim_end_matches(".toml").trim_end_matches('.')) {
            if prefixes.iter().any(|p| word.starts_with(p)) && word.len() > 8 {
                // `nstore-skew` is a key distribution, not a spec.
                let base = known.contains(word) || word == "nstore-skew";
                assert!(base, "{}: cites `{word}`, which is no spec", path.display());
            }
        }
    }
}
