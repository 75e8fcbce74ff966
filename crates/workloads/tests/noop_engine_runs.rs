//! Every workload runs on NoopEngine (zeroed rows, every write succeeds) without panicking or
//! failing, so the driver's own overhead can be measured with any workload.

use workloads::testing::NoopEngine;
use workloads::{by_name, WorkloadOptions};

#[test]
fn all_workloads_run_on_noop() {
    let cases = [
        ("ycsb-a", WorkloadOptions { records: Some(1_000), ..Default::default() }),
        ("ycsb-e", WorkloadOptions { records: Some(1_000), ..Default::default() }),
        ("ycsb-d", WorkloadOptions { records: Some(1_000), ..Default::default() }),
        ("ycsb-f", WorkloadOptions { records: Some(1_000), ..Default::default() }),
        ("tpcb", WorkloadOptions { accounts_per_branch: Some(100), ..Default::default() }),
        (
            "tpcc",
            WorkloadOptions {
                items: Some(100),
                customers_per_district: Some(30),
                ..Default::default()
            },
        ),
        ("tatp", WorkloadOptions { records: Some(1_000), ..Default::default() }),
    ];
    for (name, options) in cases {
        let w = by_name(name, &options).unwrap();
        let e = NoopEngine::new();
        w.load(&e, &|_, _| {}).unwrap();
        w.attach(&e).unwrap();
        let mut worker = w.worker(0, 5);
        for _ in 0..3_000 {
            let done = worker.run_one(&e).unwrap_or_else(|err| panic!("{name}: {err}"));
            assert_eq!(done.retries, 0);
        }
        // The checker reads zeroed rows and rejects them; it must say so, not panic.
        assert!(w.check(&e).is_err(), "{name}: checker accepted a database of zeros");
    }
}
