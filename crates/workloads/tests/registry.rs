//! `by_name` builds every workload from flat options, and turns unknown names, options a
//! workload does not take, and impossible values into one-line errors (never a panic).

use workloads::{by_name, WorkloadOptions, WORKLOAD_NAMES};

fn opts() -> WorkloadOptions {
    WorkloadOptions::default()
}

fn err(name: &str, o: WorkloadOptions) -> String {
    match by_name(name, &o) {
        Ok(w) => panic!("{name} with {o:?} built workload {}", w.name()),
        Err(e) => {
            assert!(!e.contains('\n'), "multi-line error: {e}");
            e
        }
    }
}

#[test]
fn every_name_builds() {
    for name in WORKLOAD_NAMES {
        assert_eq!(by_name(name, &opts()).unwrap().name(), *name);
    }
    for (alias, name) in
        [("tpc-b", "tpcb"), ("TPC-C", "tpcc"), ("ycsb-c", "ycsb"), ("YCSB", "ycsb")]
    {
        assert_eq!(by_name(alias, &opts()).unwrap().name(), name);
    }
}

#[test]
fn options_reach_the_workload() {
    let o = WorkloadOptions {
        records: Some(1_000),
        mix: Some("write-heavy".into()),
        skew: Some("low".into()),
        field_count: Some(4),
        field_length: Some(16),
        ..opts()
    };
    assert!(by_name("ycsb", &o).is_ok());
    let o =
        WorkloadOptions { scale: Some(3), txn: Some("payment".into()), items: Some(10), ..opts() };
    assert!(by_name("tpcc", &o).is_ok());
    let o = WorkloadOptions { scale: Some(2), txn: Some("update-location".into()), ..opts() };
    assert!(by_name("tatp", &o).is_ok());
    let o = WorkloadOptions { distribution: Some("zipfian".into()), theta: Some(0.5), ..opts() };
    assert!(by_name("ycsb-a", &o).is_ok());
    let o = WorkloadOptions { scale: Some(4), accounts_per_branch: Some(10), ..opts() };
    assert!(by_name("tpcb", &o).is_ok());
    let o: WorkloadOptions =
        serde_json::from_str(r#"{"history_last": "on", "for_update": "false"}"#).unwrap();
    assert_eq!((o.history_last, o.for_update), (Some(true), Some(false)));
    assert!(by_name("tpcb", &o).is_ok());
}

#[test]
fn bad_names_and_options_are_errors() {
    assert!(err("tpcd", opts()).contains("unknown workload"));
    assert!(err("ycsb-g", opts()).contains("unknown workload"));
    let theta = WorkloadOptions { theta: Some(0.9), ..opts() };
    assert!(err("tpcb", theta).contains("theta does not apply to tpcb"));
    let history = WorkloadOptions { history_last: Some(true), ..opts() };
    assert!(err("tpcc", history).contains("history_last does not apply to tpcc"));
    let items = WorkloadOptions { items: Some(10), ..opts() };
    assert!(err("tatp", items).contains("items"));
    let mix = WorkloadOptions { mix: Some("balanced".into()), ..opts() };
    assert!(err("tpcc", mix).contains("standard mix"));
    let clash = WorkloadOptions { mix: Some("b".into()), ..opts() };
    assert!(err("ycsb-a", clash).contains("contradicts"));
}

#[test]
fn impossible_values_are_errors() {
    let cases: Vec<(&str, WorkloadOptions, &str)> = vec![
        ("ycsb", WorkloadOptions { theta: Some(1.5), ..opts() }, "theta"),
        ("ycsb", WorkloadOptions { theta: Some(f64::NAN), ..opts() }, "theta"),
        ("ycsb", WorkloadOptions { records: Some(0), ..opts() }, "record_count"),
        ("ycsb", WorkloadOptions { field_length: Some(10_000), ..opts() }, "row limit"),
        ("ycsb", WorkloadOptions { field_count: Some(0), ..opts() }, "field_count"),
        ("ycsb", WorkloadOptions { skew: Some("medium".into()), ..opts() }, "skew"),
        (
            "ycsb",
            WorkloadOptions { hot_set_fraction: Some(0.0), skew: Some("low".into()), ..opts() },
            "hot set",
        ),
        (
            "ycsb",
            WorkloadOptions { distribution: Some("gaussian".into()), ..opts() },
            "distribution",
        ),
        ("ycsb", WorkloadOptions { txn: Some("delete".into()), ..opts() }, "operation"),
        ("tpcb", WorkloadOptions { scale: Some(0), ..opts() }, "branches"),
        ("tpcb", WorkloadOptions { txn: Some("payment".into()), ..opts() }, "account-update"),
        ("tpcc", WorkloadOptions { scale: Some(1 << 40), ..opts() }, "warehouses"),
        ("tpcc", WorkloadOptions { scale: Some(70_000), ..opts() }, "warehouses"),
        ("tpcc", WorkloadOptions { customers_per_district: Some(5_000), ..opts() }, "customers"),
        ("tpcc", WorkloadOptions { txn: Some("new_order".into()), ..opts() }, "new-order"),
        ("tatp", WorkloadOptions { records: Some(0), ..opts() }, "subscribers"),
        ("tatp", WorkloadOptions { scale: Some(1), records: Some(5), ..opts() }, "not both"),
        ("tatp", WorkloadOptions { scale: Some(u64::MAX), ..opts() }, "too large"),
        ("tatp", WorkloadOptions { distribution: Some("zipfian".into()), ..opts() }, "nurand"),
    ];
    for (name, o, needle) in cases {
        let e = err(name, o.clone());
        assert!(e.contains(needle), "{name} {o:?}: error {e:?} lacks {needle:?}");
    }
}

#[test]
fn options_deserialize_from_json() {
    let o: WorkloadOptions =
        serde_json::from_str(r#"{"scale": 2, "txn": "new-order", "items": 100}"#).unwrap();
    assert_eq!(by_name("tpcc", &o).unwrap().name(), "tpcc");
    assert!(serde_json::from_str::<WorkloadOptions>(r#"{"sclae": 2}"#).is_err());
}

#[test]
fn nstore_skew_is_a_distribution_with_a_numeric_skew() {
    // `--distribution nstore-skew --workload-opt skew=0.1` arrives as a number.
    let o: WorkloadOptions = serde_json::from_value(serde_json::json!({
        "records": 1000, "mix": "write-heavy", "distribution": "nstore-skew", "skew": 0.5
    }))
    .expect("a numeric skew deserializes");
    assert_eq!(o.skew.as_deref(), Some("0.5"));
    by_name("ycsb", &o).expect("builds");
    for named in ["low", "high"] {
        let o = WorkloadOptions {
            distribution: Some("nstore-skew".into()),
            skew: Some(named.into()),
            ..opts()
        };
        by_name("ycsb", &o).expect("low and high name N-Store's 0.1 and 0.5");
    }
    for bad in ["1.5", "0", "steep"] {
        let o = WorkloadOptions {
            distribution: Some("nstore-skew".into()),
            skew: Some(bad.into()),
            ..opts()
        };
        err("ycsb", o);
    }
}
