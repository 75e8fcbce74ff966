//! Embedded use: open a database file, write in a transaction, reopen and read it back.
//!
//! `cargo run --release -p nvmdb --example embedded -- /dev/shm/example.nvmdb`

use nvmdb::pmem::Medium;
use nvmdb::storage::TableSpec;
use nvmdb::{Db, DbOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "/dev/shm/nvmdb-example.region".into());
    let mut options = DbOptions::default();
    options.region.medium = Medium::File;
    options.region.path = Some(path.clone().into());
    options.region.size_bytes = 32 << 20;

    {
        let db = Db::open(&options)?;
        let users = match db.table("users") {
            Some(t) => t,
            None => db.create_table(&TableSpec {
                name: "users".into(),
                row_bytes: 32,
                expected_rows: 1000,
            })?,
        };
        let mut txn = db.begin(0)?;
        for id in 0..10u64 {
            let mut row = [0u8; 32];
            row[..8].copy_from_slice(&(id * 100).to_le_bytes());
            if txn.update(users, id, 0, &row[..8])? {
                continue;
            }
            txn.insert(users, id, &row)?;
        }
        txn.commit()?; // durable when this returns
    }

    let db = Db::open(&options)?; // recovers if the process had crashed
    println!("recovery: {:?}", db.recovery_report());
    let users = db.table("users").ok_or("table users missing")?;
    let mut txn = db.begin(0)?;
    let n = txn.scan(users, 0, u64::MAX, 100, &mut |id, row| {
        println!("user {id}: {}", u64::from_le_bytes(row[..8].try_into().unwrap_or([0; 8])));
        true
    })?;
    txn.commit()?;
    println!("{n} users in {path}");
    Ok(())
}
