//! The one `io=nvm|fs` device of `wal`, `cow` and `lsm` (`engines::device`, issue 34): asking
//! for `io=fs` on a region with no file is a clear error that names the engine asked for.
//! Would catch: the shared device reporting another engine's name (before it was shared, `lsm`'s
//! errors said "engine wal"), or an `io=fs` open that silently stores to a volatile mapping.

use engines::device::Io;
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::DbError;

fn open_error(engine: &str) -> String {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 128 << 20)).unwrap();
    let mut o = EngineOptions { io: Io::Fs, ..Default::default() };
    if engine == "wal" {
        o.wal.log_bytes = engines::wal::default_log_bytes(&o);
    }
    match engines::open(engine, region, &o) {
        Ok(_) => panic!("engine {engine} opened with io=fs on a region with no file"),
        Err(DbError::Invalid(message)) => message,
        Err(e) => panic!("engine {engine}: expected Invalid, got {e}"),
    }
}

#[test]
fn io_fs_without_a_file_is_an_error_naming_the_engine() {
    for engine in ["wal", "cow", "lsm"] {
        let message = open_error(engine);
        assert!(
            message.starts_with(&format!("engine {engine}: io=fs needs a file medium")),
            "{engine}: {message}"
        );
    }
}
