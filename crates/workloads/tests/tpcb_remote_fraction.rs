//! TPC-B's account choice (clause 5.3.5): 15% ± 1% of account updates use an account of a
//! branch other than the teller's, spread over the other branches; none with one branch.

use workloads::tpcb::{Tpcb, TpcbConfig, MAX_DELTA};

const DRAWS: usize = 100_000;

#[test]
fn fifteen_percent_remote() {
    let cfg = TpcbConfig { branches: 10, accounts_per_branch: 1_000, ..TpcbConfig::default() };
    let w = Tpcb::new(cfg).unwrap();
    let mut inputs = w.inputs(0, 42);
    let mut remote = 0usize;
    let mut by_branch = [0usize; 10];
    for _ in 0..DRAWS {
        let u = inputs.next_update();
        assert_eq!(u.branch, u.teller / 10, "branch must be the teller's");
        assert_eq!(u.account_branch, u.account / 1_000, "account outside its branch");
        assert!(u.delta.abs() <= MAX_DELTA);
        if u.is_remote() {
            remote += 1;
            by_branch[u.account_branch as usize] += 1;
        }
    }
    let share = remote as f64 / DRAWS as f64;
    assert!((share - 0.15).abs() < 0.01, "remote share {share:.4}");
    // Remote accounts are spread over all branches (about 10% each).
    for (b, n) in by_branch.iter().enumerate() {
        let f = *n as f64 / remote as f64;
        assert!((f - 0.1).abs() < 0.02, "branch {b} gets {f:.3} of the remote accounts");
    }
}

#[test]
fn one_branch_is_always_local() {
    let w = Tpcb::new(TpcbConfig { accounts_per_branch: 100, ..TpcbConfig::default() }).unwrap();
    let mut inputs = w.inputs(3, 1);
    assert!((0..10_000).all(|_| !inputs.next_update().is_remote()));
}
