//! `lsm`'s options (`docs/design.md` §4, "Options"): one table row per `--engine-opt` key, with
//! its default, parser and help. Arulraj et al. SIGMOD 2015 §3.3, §4.3.

use serde::{Deserialize, Serialize};
use storage::options::Bytes;

/// The shared keys `lsm` takes (`crate::EngineOptions`'s).
pub const SHARED_KEYS: &[&str] = &["fault", "io", "checksums"];

storage::engine_options! {
    /// `lsm`'s own options.
    #[derive(Serialize, Deserialize)]
    #[serde(default)]
    pub struct Options {
        key memtable_bytes: u64 = 4 << 20 => Bytes,
            "bytes of the memtable (an NVRAM arena with io=nvm, two of them; DRAM with io=fs, \
             whose log is twice this); a full memtable is flushed into runs";
        key group_commit: bool = true,
            "commits that find another committing queue for it, and the committer applies them \
             as one (one sequence number, one set of barriers; N-Store's NVM engines group \
             commits; on by default since a 16-core run: 1.3-1.7x at 16 threads); off: one \
             commit at a time under the commit latch";
        key group_commit_delay_us: u64 = 0,
            "with group_commit=on, how long the committer that takes the latch waits (yielding) \
             for others to queue before it applies a group (PostgreSQL's commit_delay); 0: none";
    }
}
