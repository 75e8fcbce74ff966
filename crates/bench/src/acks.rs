//! The durable-ack hook: the driver hands every committed transaction that carries acks
//! ([`workloads::Ack`]) to a [`DurableSink`] as soon as a worker observes its commit durable,
//! numbered in the run-wide order of those observations. The crash tester records them and,
//! after a crash and recovery, asks the workload to verify that every ack observed before the
//! crash still holds ([`workloads::Workload::verify_acks`]).
//!
//! Invariant: a transaction is delivered only after `Engine::is_durable` (or `wait_durable`)
//! returned true for its token, so an ack delivered before a crash must survive it; `seq` order
//! is consistent with each worker's own observation order.

use parking_lot::Mutex;
use serde::Serialize;
use storage::CommitToken;
use workloads::Ack;

/// One committed transaction whose commit the driver observed durable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DurableTxn {
    /// Position in the run-wide order of durability observations (dense from 0 across the
    /// transactions delivered to the sink).
    pub seq: u64,
    /// Worker thread (0-based).
    pub worker: usize,
    /// Index of the transaction in the worker's stream (0-based, counting warm-up): with the
    /// seed and the worker index, it identifies the transaction.
    pub txn: u64,
    pub kind: &'static str,
    /// `None` when the transaction committed nothing (read-only, or rolled back by design).
    pub token: Option<CommitToken>,
    pub acks: Vec<Ack>,
}

/// Receives durable transactions. Called on the worker thread that observed them, in its
/// observation order, possibly from several threads at once: keep it short.
pub trait DurableSink: Send + Sync {
    fn on_durable(&self, txns: &[DurableTxn]);
}

/// A [`DurableSink`] that keeps everything in memory, bounded: past `limit` transactions it
/// counts the overflow instead of growing (a crash test reports it rather than exhausting RAM).
pub struct AckLog {
    txns: Mutex<Vec<DurableTxn>>,
    limit: usize,
    dropped: std::sync::atomic::AtomicU64,
}

impl AckLog {
    /// Keeps at most `limit` transactions.
    pub fn new(limit: usize) -> AckLog {
        AckLog {
            txns: Mutex::new(Vec::new()),
            limit,
            dropped: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The transactions received, in `seq` order.
    pub fn take(&self) -> Vec<DurableTxn> {
        let mut txns = std::mem::take(&mut *self.txns.lock());
        txns.sort_by_key(|t| t.seq);
        txns
    }

    /// Every ack of the transactions received, in `seq` order.
    pub fn acks(&self) -> Vec<Ack> {
        let mut txns: Vec<(u64, Vec<Ack>)> =
            self.txns.lock().iter().map(|t| (t.seq, t.acks.clone())).collect();
        txns.sort_by_key(|t| t.0);
        txns.into_iter().flat_map(|t| t.1).collect()
    }

    /// Transactions not kept because the log was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl DurableSink for AckLog {
    fn on_durable(&self, txns: &[DurableTxn]) {
        let mut log = self.txns.lock();
        let room = self.limit.saturating_sub(log.len()).min(txns.len());
        log.extend_from_slice(&txns[..room]);
        let over = (txns.len() - room) as u64;
        if over > 0 {
            self.dropped.fetch_add(over, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(seq: u64) -> DurableTxn {
        DurableTxn {
            seq,
            worker: 0,
            txn: seq,
            kind: "t",
            token: Some(CommitToken(seq)),
            acks: vec![Ack { table: 0, key: seq, value: seq }],
        }
    }

    #[test]
    fn log_sorts_by_seq_and_bounds_itself() {
        let log = AckLog::new(3);
        log.on_durable(&[txn(2), txn(0)]);
        log.on_durable(&[txn(1), txn(3)]);
        assert_eq!(log.dropped(), 1);
        let keys: Vec<u64> = log.acks().iter().map(|a| a.key).collect();
        assert_eq!(keys, vec![0, 1, 2]);
        assert_eq!(log.take().len(), 3);
    }
}
