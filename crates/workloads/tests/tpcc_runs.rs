//! TPC-C loads and runs a few thousand transactions on MemEngine with 1 and 2 threads, in the
//! full mix and each transaction alone; consistency conditions 1-6, the index tables and every
//! acknowledged order, payment and delivery survive.

mod common;

use workloads::tpcc::{Tpcc, TpccConfig, TpccTxn};

fn small(warehouses: u32) -> TpccConfig {
    TpccConfig { warehouses, items: 2_000, customers_per_district: 120, ..TpccConfig::default() }
}

#[test]
fn full_mix_keeps_the_consistency_conditions() {
    for warehouses in [1, 2] {
        let w = Tpcc::new(small(warehouses)).unwrap();
        let stats = common::load_run_check(&w, 1_500);
        for t in TpccTxn::ALL {
            assert!(stats.kinds.get(t.name()).copied().unwrap_or(0) > 0, "{:?}", stats.kinds);
        }
        // ~1% of new orders roll back and the read-only ones carry no token.
        assert!(stats.without_token > 0);
    }
}

#[test]
fn each_transaction_alone() {
    for t in TpccTxn::ALL {
        let w = Tpcc::new(TpccConfig { txn: Some(t), ..small(2) }).unwrap();
        let stats = common::load_run_check(&w, 400);
        assert_eq!(stats.kinds.keys().copied().collect::<Vec<_>>(), vec![t.name()]);
    }
}

#[test]
fn spec_sized_warehouse_loads_and_checks() {
    let w = Tpcc::new(TpccConfig::default()).unwrap();
    let started = std::time::Instant::now();
    let e = common::loaded(&w);
    eprintln!("one spec-sized warehouse loaded in {:?}", started.elapsed());
    workloads::Workload::check(&w, &e).unwrap();
    common::run(&w, &e, 2, 500, 3);
    workloads::Workload::check(&w, &e).unwrap();
}
