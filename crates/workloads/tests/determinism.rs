//! A worker's transaction inputs are a function of `(seed, worker)` only: the same pair gives
//! the same stream, another worker or seed a different one.

use workloads::tatp::{Tatp, TatpConfig};
use workloads::tpcb::{Tpcb, TpcbConfig};
use workloads::tpcc::{Tpcc, TpccConfig};
use workloads::ycsb::{Ycsb, YcsbConfig};

#[test]
fn same_seed_same_stream() {
    let tpcc = Tpcc::new(TpccConfig { warehouses: 2, ..TpccConfig::default() }).unwrap();
    let draw = |worker, seed| {
        let mut i = tpcc.inputs(worker, seed);
        (0..500).map(|_| i.next_input()).collect::<Vec<_>>()
    };
    assert_eq!(draw(0, 1), draw(0, 1));
    assert_ne!(draw(0, 1), draw(1, 1));
    assert_ne!(draw(0, 1), draw(0, 2));

    let tatp = Tatp::new(TatpConfig::default()).unwrap();
    let draw = |worker, seed| {
        let mut i = tatp.inputs(worker, seed);
        (0..500).map(|_| i.next_input()).collect::<Vec<_>>()
    };
    assert_eq!(draw(3, 9), draw(3, 9));
    assert_ne!(draw(3, 9), draw(4, 9));

    let tpcb = Tpcb::new(TpcbConfig { branches: 5, ..TpcbConfig::default() }).unwrap();
    let draw = |worker, seed| {
        let mut i = tpcb.inputs(worker, seed);
        (0..500).map(|_| i.next_update()).collect::<Vec<_>>()
    };
    assert_eq!(draw(0, 1), draw(0, 1));
    assert_ne!(draw(0, 1), draw(0, 2));

    let cfg = YcsbConfig { record_count: 10_000, ..YcsbConfig::preset("a").unwrap() };
    let ycsb = Ycsb::new(cfg).unwrap();
    let draw = |worker, seed| {
        let mut i = ycsb.inputs(worker, seed);
        (0..500).map(|_| i.next_op()).collect::<Vec<_>>()
    };
    assert_eq!(draw(0, 1), draw(0, 1));
    assert_ne!(draw(0, 1), draw(1, 1));
}
