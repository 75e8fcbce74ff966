//! Every workload configuration round-trips through serde (experiment specs are TOML/JSON),
//! fills omitted fields with the defaults, and rejects unknown fields.

use serde::{de::DeserializeOwned, Serialize};
use std::fmt::Debug;
use workloads::tatp::TatpConfig;
use workloads::tpcb::TpcbConfig;
use workloads::tpcc::{TpccConfig, TpccTxn};
use workloads::ycsb::{YcsbConfig, PRESETS};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) {
    let json = serde_json::to_string(value).unwrap();
    assert_eq!(&serde_json::from_str::<T>(&json).unwrap(), value, "{json}");
}

#[test]
fn configs_round_trip() {
    for p in PRESETS {
        round_trip(&YcsbConfig::preset(p).unwrap());
    }
    round_trip(&TpcbConfig::default());
    round_trip(&TpccConfig { txn: Some(TpccTxn::Delivery), ..TpccConfig::default() });
    round_trip(&TatpConfig::default());
}

#[test]
fn omitted_fields_take_defaults_and_unknown_fields_fail() {
    let c: TpccConfig = serde_json::from_str(r#"{"warehouses": 4, "txn": "new-order"}"#).unwrap();
    assert_eq!(c.warehouses, 4);
    assert_eq!(c.txn, Some(TpccTxn::NewOrder));
    assert_eq!(c.items, TpccConfig::default().items);
    let y: YcsbConfig =
        serde_json::from_str(r#"{"request_distribution": "scrambled-zipfian"}"#).unwrap();
    assert_eq!(y.record_count, YcsbConfig::default().record_count);
    assert!(serde_json::from_str::<TpcbConfig>(r#"{"branchs": 4}"#).is_err());
    assert!(serde_json::from_str::<TatpConfig>(r#"{"txn": "update_location"}"#).is_err());
}
