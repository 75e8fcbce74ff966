//! TPC-C's terminal inputs over 100,000 draws: the 45/43/4/4/4 mix, 60% of customers by last
//! name, 15% remote payments, 1% remote order lines and 1% rolled-back new orders, each within
//! 1 point; ids in range; `txn` runs one type alone.

use workloads::tpcc::{CustomerSelector, Tpcc, TpccConfig, TpccInput, TpccTxn};

const DRAWS: usize = 100_000;

fn within_one_point(what: &str, observed: usize, total: usize, expected: f64) {
    let share = observed as f64 / total as f64;
    assert!((share - expected).abs() < 0.01, "{what}: {share:.4}, expected {expected}");
}

#[test]
fn standard_mix_and_input_rules() {
    let cfg = TpccConfig { warehouses: 4, ..TpccConfig::default() };
    let w = Tpcc::new(cfg).unwrap();
    let mut inputs = w.inputs(1, 7);
    let home = inputs.home_warehouse();
    assert_eq!(home, 2, "worker 1 of 4 warehouses has home warehouse 2");
    let mut kinds = [0usize; 5];
    let (mut by_name, mut customer_choices) = (0, 0);
    let (mut payments, mut remote_payments) = (0, 0);
    let (mut lines, mut remote_lines) = (0, 0);
    let (mut new_orders, mut rollbacks) = (0, 0);
    for _ in 0..DRAWS {
        let input = inputs.next_input();
        kinds[TpccTxn::ALL.iter().position(|t| *t == input.txn()).unwrap()] += 1;
        let selector = match &input {
            TpccInput::NewOrder(n) => {
                new_orders += 1;
                rollbacks += n.rollback as usize;
                assert!((5..=15).contains(&n.lines.len()));
                assert!((1..=3000).contains(&n.c) && (1..=10).contains(&n.d) && n.w == home);
                for (i, l) in n.lines.iter().enumerate() {
                    lines += 1;
                    remote_lines += (l.supply_w != home) as usize;
                    assert!((1..=4).contains(&l.supply_w) && (1..=10).contains(&l.quantity));
                    let unused = n.rollback && i == n.lines.len() - 1;
                    assert_eq!(l.item == 100_001, unused, "only a rollback's last item is unused");
                }
                None
            }
            TpccInput::Payment(p) => {
                payments += 1;
                remote_payments += (p.c_w != p.w) as usize;
                assert!((100..=500_000).contains(&p.amount_cents));
                Some(p.customer)
            }
            TpccInput::OrderStatus(o) => Some(o.customer),
            TpccInput::Delivery(d) => {
                assert!((1..=10).contains(&d.carrier));
                None
            }
            TpccInput::StockLevel(s) => {
                assert!((10..=20).contains(&s.threshold));
                None
            }
        };
        if let Some(sel) = selector {
            customer_choices += 1;
            by_name += matches!(sel, CustomerSelector::LastName(_)) as usize;
        }
    }
    for (t, (n, expected)) in
        TpccTxn::ALL.iter().zip(kinds.iter().zip([0.45, 0.43, 0.04, 0.04, 0.04]))
    {
        within_one_point(t.name(), *n, DRAWS, expected);
    }
    within_one_point("customers by last name", by_name, customer_choices, 0.60);
    within_one_point("remote payments", remote_payments, payments, 0.15);
    within_one_point("remote order lines", remote_lines, lines, 0.01);
    within_one_point("rolled-back new orders", rollbacks, new_orders, 0.01);
}

#[test]
fn one_warehouse_has_no_remote_inputs() {
    let w = Tpcc::new(TpccConfig::default()).unwrap();
    let mut inputs = w.inputs(0, 1);
    for _ in 0..10_000 {
        match inputs.next_input() {
            TpccInput::NewOrder(n) => assert!(n.lines.iter().all(|l| l.supply_w == 1)),
            TpccInput::Payment(p) => assert_eq!((p.c_w, p.c_d), (p.w, p.d)),
            _ => {}
        }
    }
}

#[test]
fn txn_option_runs_one_type() {
    for t in TpccTxn::ALL {
        let w = Tpcc::new(TpccConfig { txn: Some(t), ..TpccConfig::default() }).unwrap();
        let mut inputs = w.inputs(0, 3);
        assert!((0..1_000).all(|_| inputs.next_input().txn() == t));
        assert_eq!(TpccTxn::parse(t.name()), Ok(t));
    }
    assert!(TpccTxn::parse("neworder").is_err());
}
