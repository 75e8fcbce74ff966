//! Flush pipelining for the central log — Johnson et al., *Aether*, VLDB 2010, §3 (flush
//! pipelining: "decoupled commit acknowledgement"), `log_force=pipelined`.
//!
//! A committing thread does not force the log: it notes its commit LSN and returns a token (the
//! LSN), and its worker goes on with the next transaction while the token is not yet durable
//! (the bench driver polls [`Pipeline::is_durable`]; a caller that must know blocks in
//! [`Pipeline::wait_durable`]). A log flush daemon forces the log in the background; one force
//! covers every commit in the buffer (group commit at the log level), and no committer holds a
//! lock or sleeps while a force runs. `log_force=inline` is Pelley's `persist_wal` in the
//! committing thread (concurrent committers share a force under the force lock), the baseline.
//!
//! The daemon needs a core: where it gets none for a while (more runnable threads than cores,
//! as on a 2-core machine with 2 workers and a page flusher), a committer that finds more than
//! [`HELP_BACKLOG_BYTES`] of its log unforced forces it itself, if no force is running (it never
//! waits for one): commit latency stays bounded by that backlog instead of by the scheduler.
//!
//! **Invariant**: a token is acknowledged durable only once the log's durable LSN
//! ([`Log::forced`], moved by the force's second barrier) is at or past it.

use super::log::Log;
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use storage::{CommitToken, DbError, Result};

/// How a commit makes the central log durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogForce {
    /// The log flush daemon forces; committers continue (Aether's flush pipelining).
    Pipelined,
    /// The committing thread forces (Pelley's `persist_wal` at each commit).
    Inline,
}

impl LogForce {
    pub fn parse(s: &str) -> Option<LogForce> {
        match s {
            "pipelined" => Some(LogForce::Pipelined),
            "inline" => Some(LogForce::Inline),
            _ => None,
        }
    }
}

/// How often the daemon looks for commits while they arrive: committers do not wake it (a
/// futex wake per commit costs the worker more than the force), it polls; a thread that blocks
/// in `wait_durable` wakes it at once.
const DAEMON_POLL: Duration = Duration::from_micros(50);
/// Empty polls after which the daemon sleeps until a committer wakes it (about 2 ms idle).
const IDLE_POLLS: u32 = 40;
/// The daemon's sleep when idle (it re-checks `stop` and the requests).
const DAEMON_IDLE_SLEEP: Duration = Duration::from_millis(5);
/// Unforced log behind a commit beyond which the committer helps the daemon (about 15 TPC-B
/// transactions): ours, chosen so that a starved daemon costs at most that much latency while
/// a force still covers many commits.
pub(crate) const HELP_BACKLOG_BYTES: u64 = 16 << 10;
/// A waiter's sleep between looks at the durable LSN (the daemon also wakes it).
const WAIT_SLICE: Duration = Duration::from_millis(1);

#[derive(Default)]
struct DaemonState {
    stop: bool,
}

/// The log flush daemon and the commits waiting on it; see the module doc.
#[derive(Default)]
pub(crate) struct Pipeline {
    /// The highest commit LSN a committer asked to be made durable.
    requested: CachePadded<AtomicU64>,
    /// The daemon sleeps (idle): a committer must wake it.
    asleep: CachePadded<AtomicBool>,
    state: Mutex<DaemonState>,
    wake: Condvar,
    /// Threads blocked in `wait_durable`, and their wake-up.
    waiters: AtomicU64,
    durable_lock: Mutex<()>,
    durable: Condvar,
    /// A force of the daemon failed: nothing logged since can be acknowledged.
    failed: AtomicBool,
    /// Forces the daemon ran (each covers every commit requested before it began).
    pub rounds: AtomicU64,
    /// `wait_durable` calls that had to block.
    pub blocked_waits: AtomicU64,
    /// Forces run by committers that found the daemon behind.
    pub helped: AtomicU64,
}

fn log_failed() -> DbError {
    DbError::Invalid("the write-ahead log failed; reopen the database to recover".into())
}

impl Pipeline {
    /// A commit whose records end at `lsn`: durable already, or queued for the daemon (returns
    /// the token to poll). Takes no lock and writes one shared word, unless the daemon is
    /// [`HELP_BACKLOG_BYTES`] behind.
    pub fn commit(&self, log: &Log, lsn: u64, skip_second_barrier: bool) -> Result<CommitToken> {
        let forced = log.forced();
        if lsn <= forced {
            return Ok(CommitToken::DURABLE);
        }
        let behind = lsn - forced > HELP_BACKLOG_BYTES && !self.failed.load(Ordering::Acquire);
        if behind && log.try_force(lsn, skip_second_barrier)? {
            self.helped.fetch_add(1, Ordering::Relaxed);
            return Ok(CommitToken::DURABLE);
        }
        if self.failed.load(Ordering::Acquire) || log.overflowed() {
            return Err(log_failed());
        }
        // SeqCst with the daemon's `asleep` (Dekker): either it sees this request before it
        // sleeps, or this thread sees it asleep and wakes it.
        if self.requested.load(Ordering::Relaxed) < lsn {
            self.requested.fetch_max(lsn, Ordering::SeqCst);
        }
        if self.asleep.load(Ordering::SeqCst) {
            self.wake_daemon();
        }
        Ok(CommitToken(lsn))
    }

    pub fn is_durable(&self, log: &Log, token: CommitToken) -> bool {
        token.0 <= log.forced()
    }

    /// Blocks until `token` is durable. With the daemon stopped (a close), forces itself.
    ///
    /// A waiter first leads a force itself when none runs (`try_force`): a thread that must
    /// block gains nothing by handing the force to the daemon, and an embedded caller committing
    /// alone then pays one force, not two context switches (Aether's flush pipelining is for
    /// the agents that go on; a waiter is not one). Only when a force runs already does it sleep
    /// until that force (the daemon's or another waiter's) wakes it.
    pub fn wait_durable(
        &self,
        log: &Log,
        token: CommitToken,
        skip_second_barrier: bool,
    ) -> Result<()> {
        if self.is_durable(log, token) {
            return Ok(());
        }
        if !self.failed.load(Ordering::Acquire) && log.try_force(token.0, skip_second_barrier)? {
            self.helped.fetch_add(1, Ordering::Relaxed);
            self.wake_waiters();
            if self.is_durable(log, token) {
                return Ok(());
            }
        }
        self.blocked_waits.fetch_add(1, Ordering::Relaxed);
        self.requested.fetch_max(token.0, Ordering::SeqCst);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            if self.is_durable(log, token) {
                break Ok(());
            }
            if self.failed.load(Ordering::Acquire) {
                break Err(log_failed());
            }
            if self.state.lock().stop {
                // No daemon any more: force here (the force lock orders this with any other).
                break log.force(token.0, skip_second_barrier);
            }
            self.wake_daemon();
            let mut g = self.durable_lock.lock();
            if !self.is_durable(log, token) {
                self.durable.wait_for(&mut g, WAIT_SLICE);
            }
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Wakes the threads blocked in `wait_durable` after a force (none: one load).
    fn wake_waiters(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.durable_lock.lock();
            self.durable.notify_all();
        }
    }

    fn wake_daemon(&self) {
        let _state = self.state.lock();
        self.wake.notify_one();
    }

    /// The log flush daemon: forces whenever a commit waits, until [`Self::stop`].
    /// `skip_second_barrier` is the test fault of `persist_wal` without its second barrier.
    pub fn daemon(&self, log: &Log, skip_second_barrier: bool) {
        let mut idle_polls = 0u32;
        loop {
            let want = self.requested.load(Ordering::SeqCst);
            if want > log.forced() && !self.failed.load(Ordering::Acquire) {
                idle_polls = 0;
                // Everything filled so far, not only `want`: one force for the whole buffer.
                if log.force(want, skip_second_barrier).is_err() {
                    self.failed.store(true, Ordering::Release);
                }
                self.rounds.fetch_add(1, Ordering::Relaxed);
                self.wake_waiters();
                continue;
            }
            let mut state = self.state.lock();
            if state.stop {
                return;
            }
            if idle_polls < IDLE_POLLS {
                idle_polls += 1;
                self.wake.wait_for(&mut state, DAEMON_POLL);
                continue;
            }
            self.asleep.store(true, Ordering::SeqCst);
            if self.requested.load(Ordering::SeqCst) <= log.forced() {
                self.wake.wait_for(&mut state, DAEMON_IDLE_SLEEP);
            }
            self.asleep.store(false, Ordering::SeqCst);
        }
    }

    pub fn stop(&self) {
        self.state.lock().stop = true;
        self.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::capture::Capture;
    use crate::wal::log::LogInsert;
    use pmem::{Medium, Region, RegionOptions, StoreObserver};
    use std::sync::Arc;

    fn log() -> (Region, Arc<Log>) {
        let region = Region::open(&RegionOptions::new(Medium::Dram, 4096 + (4 << 20) + 4096))
            .expect("a dram region");
        let device =
            Arc::new(crate::device::Device::open(&region, crate::device::Io::Nvm, "wal").unwrap());
        (region, Arc::new(Log::new(device, 4096, 4 << 20, 0, 0, LogInsert::Consolidated)))
    }

    /// With no daemon running, a commit is queued (its token its LSN, not durable) until the
    /// unforced log passes HELP_BACKLOG_BYTES; then the committer forces everything itself.
    /// Would catch a pipelined commit that forces every time (no pipelining) or never (a
    /// starved daemon leaving commits unbounded).
    #[test]
    fn a_commit_is_queued_until_the_backlog_is_large_then_the_committer_forces() {
        let (_region, log) = log();
        let pipeline = Pipeline::default();
        let capture = Capture(log.clone());
        capture.on_store(0, &[1u8; 100]);
        let token = pipeline.commit(&log, log.thread_end(), false).unwrap();
        assert!(token.0 > 0 && !pipeline.is_durable(&log, token), "queued: {token:?}");
        while log.thread_end() - log.forced() <= HELP_BACKLOG_BYTES {
            capture.on_store(0, &[2u8; 1000]);
        }
        let helped = pipeline.commit(&log, log.thread_end(), false).unwrap();
        assert_eq!(helped, CommitToken::DURABLE);
        assert_eq!(pipeline.helped.load(Ordering::Relaxed), 1);
        assert!(pipeline.is_durable(&log, token), "the help covered the earlier commit");
    }

    /// The daemon forces a queued commit without being woken, and a waiter returns once it has;
    /// after the daemon stops, a waiter forces itself.
    #[test]
    fn the_daemon_makes_queued_commits_durable_and_a_waiter_outlives_it() {
        let (_region, log) = log();
        let pipeline = Arc::new(Pipeline::default());
        let capture = Capture(log.clone());
        std::thread::scope(|s| {
            s.spawn(|| pipeline.daemon(&log, false));
            capture.on_store(0, &[1u8; 100]);
            let token = pipeline.commit(&log, log.thread_end(), false).unwrap();
            let started = std::time::Instant::now();
            while !pipeline.is_durable(&log, token) {
                assert!(started.elapsed() < Duration::from_secs(10), "the daemon never forced");
                std::thread::sleep(Duration::from_micros(100));
            }
            assert!(pipeline.rounds.load(Ordering::Relaxed) >= 1);
            pipeline.wait_durable(&log, token, false).unwrap();
            pipeline.stop();
        });
        capture.on_store(0, &[3u8; 100]);
        let token = pipeline.commit(&log, log.thread_end(), false).unwrap();
        assert!(!pipeline.is_durable(&log, token));
        pipeline.wait_durable(&log, token, false).unwrap();
        assert!(pipeline.is_durable(&log, token));
    }

    /// A waiter with no force running leads one itself at once instead of waking the daemon
    /// and sleeping (an embedded caller committing alone pays one force). Would catch a
    /// `wait_durable` that only waits for the daemon: with none running it would spin until
    /// the test's timeout.
    #[test]
    fn a_waiter_forces_itself_when_no_force_runs() {
        let (_region, log) = log();
        let pipeline = Pipeline::default();
        let capture = Capture(log.clone());
        capture.on_store(0, &[4u8; 100]);
        let token = pipeline.commit(&log, log.thread_end(), false).unwrap();
        assert!(!pipeline.is_durable(&log, token), "queued (no daemon runs)");
        let started = std::time::Instant::now();
        pipeline.wait_durable(&log, token, false).unwrap();
        assert!(pipeline.is_durable(&log, token));
        assert_eq!(pipeline.helped.load(Ordering::Relaxed), 1, "the waiter forced");
        assert_eq!(pipeline.blocked_waits.load(Ordering::Relaxed), 0, "and never slept");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
