//! TATP loads and runs a few thousand transactions on MemEngine with 1 and 2 threads, in the
//! standard mix and Update-Location alone; the referential checks pass and acknowledged
//! subscriber updates survive.

mod common;

use workloads::tatp::{SubscriberDistribution, Tatp, TatpConfig, TatpTxn};

#[test]
fn standard_mix_keeps_references() {
    for distribution in [SubscriberDistribution::NonUniform, SubscriberDistribution::Uniform] {
        let cfg = TatpConfig { subscribers: 2_000, distribution, ..TatpConfig::default() };
        let w = Tatp::new(cfg).unwrap();
        let stats = common::load_run_check(&w, 3_000);
        for t in TatpTxn::ALL {
            assert!(stats.kinds.get(t.name()).copied().unwrap_or(0) > 0, "{:?}", stats.kinds);
        }
    }
}

#[test]
fn update_location_alone() {
    let cfg = TatpConfig {
        subscribers: 1_000,
        txn: Some(TatpTxn::UpdateLocation),
        ..TatpConfig::default()
    };
    let w = Tatp::new(cfg).unwrap();
    let stats = common::load_run_check(&w, 2_000);
    assert_eq!(stats.kinds["update-location"], 6_000);
    assert_eq!(stats.acks.len(), 6_000);
}
