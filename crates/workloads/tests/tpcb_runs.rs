//! TPC-B loads and runs a few thousand account updates on MemEngine with 1 and 2 threads; the
//! balance and history checks pass and every acknowledged history row exists, including when
//! a new worker resumes a worker id's history sequence.

mod common;

use workloads::tpcb::{Tpcb, TpcbConfig};
use workloads::Workload;

#[test]
fn account_updates_keep_balances_consistent() {
    for branches in [1, 3] {
        let cfg = TpcbConfig { branches, accounts_per_branch: 2_000, ..TpcbConfig::default() };
        let w = Tpcb::new(cfg).unwrap();
        let stats = common::load_run_check(&w, 2_000);
        assert_eq!(stats.kinds["account-update"], 6_000);
        assert_eq!(stats.acks.len(), 6_000, "every account update acknowledges its history row");
        assert_eq!(stats.without_token, 0);
    }
}

#[test]
fn a_new_worker_continues_the_history_sequence() {
    let w = Tpcb::new(TpcbConfig { accounts_per_branch: 100, ..TpcbConfig::default() }).unwrap();
    let e = common::loaded(&w);
    common::run(&w, &e, 1, 50, 1);
    // Same worker id, new object (as after reopening): no duplicate keys, no gaps.
    common::run(&w, &e, 1, 50, 2);
    w.check(&e).unwrap();
}
