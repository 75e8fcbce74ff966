//! The driver's own cost per transaction: power runs of workloads that do (almost) nothing, on
//! `NoopEngine`. `null` never touches the engine (pure harness: clock reads, histogram, phase
//! check); `begin-commit` begins and commits an empty transaction (adds the engine's virtual
//! calls and one allocation). The harness must never be the bottleneck: both should reach
//! several million transactions per second per thread.
//!
//! `cargo run --release -p bench --example overhead [threads] [seconds]`

use bench::{run, Hooks, Report, RunLength, RunOptions};
use std::time::Duration;
use storage::{CommitToken, DbError, Engine};
use workloads::testing::NoopEngine;
use workloads::{Ack, TxnDone, Worker, Workload};

struct Null {
    touch_engine: bool,
}

struct NullWorker {
    worker: usize,
    touch_engine: bool,
}

impl Workload for Null {
    fn name(&self) -> &'static str {
        if self.touch_engine {
            "begin-commit"
        } else {
            "null"
        }
    }

    fn load(&self, _: &dyn Engine, _: &(dyn Fn(u64, u64) + Sync)) -> Result<(), DbError> {
        Ok(())
    }

    fn attach(&self, _: &dyn Engine) -> Result<(), DbError> {
        Ok(())
    }

    fn worker(&self, worker: usize, _seed: u64) -> Box<dyn Worker> {
        Box::new(NullWorker { worker, touch_engine: self.touch_engine })
    }

    fn check(&self, _: &dyn Engine) -> Result<(), String> {
        Ok(())
    }

    fn verify_acks(&self, _: &dyn Engine, _: &[Ack]) -> Result<(), String> {
        Ok(())
    }
}

impl Worker for NullWorker {
    fn run_one(&mut self, engine: &dyn Engine) -> Result<TxnDone, DbError> {
        let token = if self.touch_engine {
            engine.begin(self.worker)?.commit()?
        } else {
            CommitToken::DURABLE
        };
        Ok(TxnDone { kind: "null", token: Some(token), retries: 0, acks: Vec::new() })
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let seconds: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3.0);
    for touch_engine in [false, true] {
        let engine = NoopEngine::new();
        let workload = Null { touch_engine };
        let options = RunOptions {
            threads,
            length: RunLength::Timed {
                warmup: Duration::from_millis(500),
                duration: Duration::from_secs_f64(seconds),
            },
            ..RunOptions::default()
        };
        match run(&engine, &workload, &options, &Hooks::default()) {
            Ok(result) => {
                let report = Report::new(&result, None, serde_json::json!({}));
                println!(
                    "{:<13} threads {threads}: {:>12.0} txn/s  ({:.0} per thread, {:.1} ns/txn); \
                     latency p50 {:.3} us",
                    workload.name(),
                    result.tps,
                    result.tps / threads as f64,
                    1e9 * threads as f64 / result.tps.max(1.0),
                    report.latency_us.p50,
                );
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
    }
}
