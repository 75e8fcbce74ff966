//! YCSB's presets produce their operation mixes (A-F as in YCSB's workload files, N-Store's
//! four) within 1 point over 100,000 draws, with keys, fields and scan lengths in range.

use workloads::ycsb::{RequestDistribution, Skew, Ycsb, YcsbConfig, YcsbOp};

const DRAWS: usize = 100_000;

fn mix_of(cfg: YcsbConfig) -> [f64; 5] {
    let n = cfg.record_count;
    let (fields, max_scan) = (cfg.field_count, cfg.max_scan_length);
    let w = Ycsb::new(cfg).unwrap();
    let mut inputs = w.inputs(0, 13);
    let mut counts = [0usize; 5];
    let mut inserted = 0;
    for _ in 0..DRAWS {
        let op = inputs.next_op();
        let i = match op {
            YcsbOp::Read { keynum } => {
                // "latest" (D) reads inserted keys too, once acknowledged.
                assert!(keynum < n + inserted);
                0
            }
            YcsbOp::Update { keynum, field } => {
                assert!(keynum < n && field < fields);
                1
            }
            YcsbOp::Insert { keynum } => {
                assert!(keynum >= n, "inserts take key numbers after the loaded ones");
                inputs.acknowledge(keynum);
                inserted += 1;
                2
            }
            YcsbOp::Scan { keynum, len } => {
                assert!(keynum < n && (1..=max_scan).contains(&len));
                3
            }
            YcsbOp::ReadModifyWrite { keynum, field } => {
                assert!(keynum < n && field < fields);
                4
            }
        };
        counts[i] += 1;
    }
    counts.map(|c| c as f64 / DRAWS as f64)
}

fn assert_mix(name: &str, got: [f64; 5], want: [f64; 5]) {
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 0.01, "{name}: mix {got:?}, expected {want:?}");
    }
}

#[test]
fn core_workloads() {
    let want = [
        ("a", [0.5, 0.5, 0.0, 0.0, 0.0]),
        ("b", [0.95, 0.05, 0.0, 0.0, 0.0]),
        ("c", [1.0, 0.0, 0.0, 0.0, 0.0]),
        ("d", [0.95, 0.0, 0.05, 0.0, 0.0]),
        ("e", [0.0, 0.0, 0.05, 0.95, 0.0]),
        ("f", [0.5, 0.0, 0.0, 0.0, 0.5]),
    ];
    for (name, mix) in want {
        let cfg = YcsbConfig { record_count: 10_000, ..YcsbConfig::preset(name).unwrap() };
        assert_mix(name, mix_of(cfg), mix);
    }
    assert_eq!(YcsbConfig::preset("e").unwrap().max_scan_length, 100);
    assert_eq!(YcsbConfig::preset("d").unwrap().request_distribution, RequestDistribution::Latest);
    assert!(YcsbConfig::preset("g").is_err());
}

#[test]
fn nstore_mixes() {
    for (name, writes) in
        [("read-only", 0.0), ("read-heavy", 0.1), ("balanced", 0.5), ("write-heavy", 0.9)]
    {
        for skew in [Skew::Low, Skew::High] {
            let cfg =
                YcsbConfig { record_count: 10_000, ..YcsbConfig::nstore(name, skew).unwrap() };
            assert_eq!(cfg.request_distribution, RequestDistribution::Hotspot);
            assert_eq!((cfg.hot_set_fraction, cfg.hot_ops_fraction), skew.fractions());
            assert_mix(name, mix_of(cfg), [1.0 - writes, writes, 0.0, 0.0, 0.0]);
        }
    }
}

#[test]
fn defaults_are_ycsb_core_defaults() {
    let d = YcsbConfig::default();
    assert_eq!((d.field_count, d.field_length), (10, 100));
    assert_eq!(d.zipfian_theta, 0.99);
    assert_eq!(d.row_bytes(), 1024);
    assert_eq!((d.read_proportion, d.update_proportion), (0.95, 0.05));
}
