//! Sort-merge and hybrid hash give the nested loop's count and checksum on small tables, at
//! several memory limits (in memory, one spill level, recursion) and projectivities, and never
//! hold more than the limit.
//! Would catch: a lost or duplicated record at a run or partition boundary, a wrong projection,
//! a partition whose hash range leaks, or a buffer taken outside the budget.

use queryopt::device::{DeviceProfile, MemDevice, Modelled};
use queryopt::join::{run, JoinAlgo, JoinParams};
use queryopt::wisconsin::{load, Layout};

#[test]
fn joins_agree_with_nested_loop_and_respect_memory() {
    let mut dev = Modelled::new(MemDevice::new(), DeviceProfile::disk(10_000));
    let r = load(&mut dev, Layout::new(3000, 19).unwrap(), 0, false, 1).unwrap();
    // S larger than R, with different permutations: matches = keys below 3000.
    let s = load(&mut dev, Layout::new(4500, 19).unwrap(), r.end_page(), false, 2).unwrap();
    let temp = s.end_page();
    for projectivity in [0.02, 0.05, 0.25, 1.0] {
        let params = JoinParams { memory_pages: 4096, projectivity, extent_pages: 8 };
        let reference = run(&mut dev, &r, &s, JoinAlgo::NestedLoop, params, temp).unwrap();
        assert_eq!(reference.aggregate.matches, 3000);
        for memory_pages in [4, 6, 12, 40, 4096] {
            for algo in [JoinAlgo::SortMerge, JoinAlgo::HybridHash] {
                let params = JoinParams { memory_pages, projectivity, extent_pages: 8 };
                let got = run(&mut dev, &r, &s, algo, params, temp).unwrap();
                let what = format!("{algo:?} memory {memory_pages} projectivity {projectivity}");
                assert_eq!(got.aggregate, reference.aggregate, "{what}");
                assert!(got.peak_memory_pages <= memory_pages as u64, "{what}");
                if memory_pages <= 12 && projectivity >= 0.25 {
                    assert!(got.detail.spill_pages_written > 0, "{what} must spill");
                }
                if memory_pages == 4096 && algo == JoinAlgo::HybridHash {
                    assert_eq!(got.detail.spill_pages_written, 0, "{what} fits in memory");
                }
            }
        }
    }
}

#[test]
fn tiny_memory_recurses_or_merges_in_passes() {
    let mut dev = Modelled::new(MemDevice::new(), DeviceProfile::ssd());
    let r = load(&mut dev, Layout::new(20_000, 19).unwrap(), 0, false, 3).unwrap();
    let s = load(&mut dev, Layout::new(20_000, 19).unwrap(), r.end_page(), false, 4).unwrap();
    let params = JoinParams { memory_pages: 5, projectivity: 0.25, extent_pages: 4 };
    let sm = run(&mut dev, &r, &s, JoinAlgo::SortMerge, params, s.end_page()).unwrap();
    let hh = run(&mut dev, &r, &s, JoinAlgo::HybridHash, params, s.end_page()).unwrap();
    assert_eq!(sm.aggregate, hh.aggregate);
    assert_eq!(sm.aggregate.matches, 20_000);
    assert!(sm.detail.merge_passes > 0, "{:?}", sm.detail);
    assert!(hh.detail.max_depth > 1, "{:?}", hh.detail);
    assert!(sm.peak_memory_pages <= 5 && hh.peak_memory_pages <= 5);
}

#[test]
fn bad_parameters_are_errors() {
    let mut dev = MemDevice::new();
    let r = load(&mut dev, Layout::new(100, 19).unwrap(), 0, false, 1).unwrap();
    let p = |memory_pages, projectivity| JoinParams { memory_pages, projectivity, extent_pages: 8 };
    assert!(run(&mut dev, &r, &r, JoinAlgo::SortMerge, p(3, 0.1), 100).is_err());
    assert!(run(&mut dev, &r, &r, JoinAlgo::HybridHash, p(64, 0.0), 100).is_err());
    assert!(run(&mut dev, &r, &r, JoinAlgo::HybridHash, p(64, 1.5), 100).is_err());
}
