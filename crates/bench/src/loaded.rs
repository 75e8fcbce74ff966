//! The "load complete" mark: a one-row table the driver writes after a workload's load commits,
//! so that a region whose load was interrupted (a kill, a crash, a full medium) is reported as
//! half-loaded rather than attached and then failed by the checker as if it were damaged.
//! Engine-agnostic: it goes through the `Engine` API, so peers carry it too.

use storage::{DbError, Engine, TableSpec};

/// Name of the table that holds the mark.
pub const LOAD_TABLE: &str = "nvmdb_load_complete";
const ROW_BYTES: u32 = 64;

/// What a database says about its load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadState {
    /// No tables at all: nothing was loaded.
    Empty,
    /// The load of this workload completed.
    Complete(String),
    /// Tables exist but no load completed (or the mark is unreadable).
    Incomplete,
}

/// Records that `workload`'s load completed, durably (waits for the commit's token).
pub fn mark_loaded(engine: &dyn Engine, workload: &str) -> Result<(), DbError> {
    let existing = engine.table(LOAD_TABLE);
    let table = match existing {
        Some(t) => t,
        None => engine.create_table(&TableSpec {
            name: LOAD_TABLE.into(),
            row_bytes: ROW_BYTES,
            expected_rows: 1,
        })?,
    };
    let mut row = [0u8; ROW_BYTES as usize];
    let name = workload.as_bytes();
    let n = name.len().min(row.len());
    row[..n].copy_from_slice(&name[..n]);
    let mut txn = engine.begin(0)?;
    // A load runs on an empty database, so the mark is normally new: one insert.
    if existing.is_none() || !txn.update(table, 0, 0, &row)? {
        txn.insert(table, 0, &row)?;
    }
    let token = txn.commit()?;
    engine.wait_durable(token)
}

/// Reads the mark.
pub fn load_state(engine: &dyn Engine) -> LoadState {
    if engine.tables().is_empty() {
        return LoadState::Empty;
    }
    let Some(table) = engine.table(LOAD_TABLE) else { return LoadState::Incomplete };
    let read = || -> Result<Option<Vec<u8>>, DbError> {
        let mut txn = engine.begin(0)?;
        let mut row = Vec::new();
        let found = txn.read(table, 0, &mut row)?;
        txn.commit()?;
        Ok(found.then_some(row))
    };
    match read() {
        Ok(Some(row)) => {
            let end = row.iter().position(|b| *b == 0).unwrap_or(row.len());
            LoadState::Complete(String::from_utf8_lossy(&row[..end]).into_owned())
        }
        _ => LoadState::Incomplete,
    }
}
