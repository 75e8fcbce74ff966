//! A bank ledger on nvmdb's table layer: accounts and an append-only journal, transfers
//! atomic and durable, overdrafts refused (the whole transfer rolls back).
//!
//! `cargo run --release -p nvmdb --example ledger -- /dev/shm/bank.nvmdb open alice 100`
//! then `transfer alice bob 30`, `balances`, `journal`.

use nvmdb::{Db, DbError, DbOptions, Table};

fn balance(t: &Table<str>, who: &str) -> Result<u64, DbError> {
    Ok(t.get(who)?.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap_or([0; 8]))))
}

/// Runs one ledger command against the database file at `path`; returns what it prints.
pub fn run(path: &str, args: &[&str]) -> Result<String, DbError> {
    let mut options = DbOptions::default();
    options.region.medium = nvmdb::pmem::Medium::File;
    options.region.path = Some(path.into());
    let db = Db::open(&options)?;
    let amount = |s: &str| s.parse::<u64>().map_err(|_| DbError::Invalid(format!("amount {s:?}")));
    db.write(|tx| {
        let accounts = tx.open_table::<str>("accounts")?;
        let journal = tx.open_table::<u64>("journal")?;
        let log = |line: String| {
            let next = journal.range(0..)?.last().transpose()?.map_or(0, |(n, _)| n + 1);
            journal.insert(next, &line).map(|_| line)
        };
        match args {
            ["open", who, n] => {
                accounts.insert(*who, (balance(&accounts, who)? + amount(n)?).to_le_bytes())?;
                log(format!("deposit {n} to {who}"))
            }
            ["transfer", from, to, n] => {
                let (n, have) = (amount(n)?, balance(&accounts, from)?);
                let left = have.checked_sub(n).ok_or_else(|| {
                    DbError::Invalid(format!("{from} has {have}, cannot send {n}"))
                })?;
                accounts.insert(*from, left.to_le_bytes())?;
                accounts.insert(*to, (balance(&accounts, to)? + n).to_le_bytes())?;
                log(format!("transfer {n} from {from} to {to}"))
            }
            ["balances"] => accounts
                .iter()
                .map(|e| {
                    e.map(|(who, v)| {
                        format!("{who}: {}\n", u64::from_le_bytes(v.try_into().unwrap_or([0; 8])))
                    })
                })
                .collect(),
            ["journal"] => journal
                .iter()
                .map(|e| e.map(|(n, line)| format!("{n}: {}\n", String::from_utf8_lossy(&line))))
                .collect(),
            _ => Err(DbError::Invalid(
                "usage: open WHO N | transfer FROM TO N | balances | journal".into(),
            )),
        }
    })
}

#[allow(dead_code)]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((path, rest)) = args.split_first() else {
        eprintln!("usage: ledger PATH (open WHO N | transfer FROM TO N | balances | journal)");
        std::process::exit(2);
    };
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    match run(path, &rest) {
        Ok(out) => println!("{}", out.trim_end()),
        Err(e) => {
            eprintln!("ledger: {e}");
            std::process::exit(1);
        }
    }
}
