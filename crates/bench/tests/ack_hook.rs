//! The durable-ack hook sees a transaction only after its commit is durable, numbers them
//! densely in observation order, and the acks verify against the database. Guards the crash
//! tester's premise: an ack delivered before a crash must be durable.

mod common;

use bench::{run, DurableSink, DurableTxn, Hooks, RunLength, RunOptions};
use common::{Bank, Durability, TinyEngine};
use parking_lot::Mutex;
use storage::Engine;
use workloads::Workload;

struct Checking<'a> {
    engine: &'a TinyEngine,
    seen: Mutex<Vec<DurableTxn>>,
}

impl DurableSink for Checking<'_> {
    fn on_durable(&self, txns: &[DurableTxn]) {
        for t in txns {
            let token = t.token.expect("bank transactions commit");
            assert!(self.engine.is_durable(token), "delivered before durable: {t:?}");
        }
        self.seen.lock().extend_from_slice(txns);
    }
}

#[test]
fn acks_are_delivered_durable_in_a_dense_order_and_verify() {
    let engine = TinyEngine::new(Durability::Group { lag: 5 });
    let bank = Bank::new(32);
    let sink = Checking { engine: &engine, seen: Mutex::new(Vec::new()) };
    let options = RunOptions {
        threads: 2,
        length: RunLength::Transactions { per_thread: 300 },
        max_pending: 16,
        ..RunOptions::default()
    };
    let hooks = Hooks { sink: Some(&sink), ..Hooks::default() };
    run(&engine, &bank, &options, &hooks).unwrap();
    let mut seen = sink.seen.into_inner();
    seen.sort_by_key(|t| t.seq);
    let seqs: Vec<u64> = seen.iter().map(|t| t.seq).collect();
    assert_eq!(seqs, (0..600).collect::<Vec<u64>>());
    for worker in 0..2 {
        // Each worker observes its own commits in commit order.
        let txns: Vec<u64> = seen.iter().filter(|t| t.worker == worker).map(|t| t.txn).collect();
        assert_eq!(txns, (0..300).collect::<Vec<u64>>());
    }
    let acks: Vec<_> = seen.iter().flat_map(|t| t.acks.clone()).collect();
    bank.verify_acks(&engine, &acks).unwrap();
}
