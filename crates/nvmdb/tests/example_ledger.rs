//! The `ledger` example run as a user would: separate opens of one database file per command,
//! so balances and the journal persist across processes' worth of reopen, and a refused
//! overdraft leaves no trace.

#[path = "../examples/ledger.rs"]
mod ledger;

#[test]
fn ledger_transfers_persist_and_overdrafts_roll_back() {
    let path = std::env::temp_dir().join(format!("nvmdb-ledger-{}", std::process::id()));
    let path = path.to_str().unwrap();
    let run = |args: &[&str]| ledger::run(path, args);
    run(&["open", "alice", "100"]).unwrap();
    run(&["open", "bob", "20"]).unwrap();
    run(&["transfer", "alice", "bob", "30"]).unwrap();
    let e = run(&["transfer", "bob", "carol", "500"]).unwrap_err();
    assert!(e.to_string().contains("bob has 50, cannot send 500"), "{e}");
    assert_eq!(run(&["balances"]).unwrap(), "alice: 70\nbob: 50\n");
    assert_eq!(
        run(&["journal"]).unwrap(),
        "0: deposit 100 to alice\n1: deposit 20 to bob\n2: transfer 30 from alice to bob\n"
    );
    std::fs::remove_file(path).ok();
}
