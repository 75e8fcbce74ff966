//! The region engines by name (`docs/design.md` §4, "Options"): one table, [`REGION_ENGINES`],
//! that the CLI, the `nvmdb` library and the tests read for names, descriptions, the options
//! each engine takes (parsed, listed and documented from its options module), the least region
//! it formats, how to open and inspect it, and whether its region grows. It sits below the CLI so
//! that crash campaigns and option handling can be library tests.
//!
//! Invariant: an engine's keys are its [`RegionEngine::shared_keys`] plus its own part's keys;
//! any other key, and any value that does not parse, is a one-line `DbError::Invalid` naming the
//! engine, the key and what it accepts.

use crate::{cow, group, inplace, lsm, wal, EngineOptions, Inspection};
use pmem::Region;
use std::collections::BTreeMap;
use storage::options::{help_lines, OptionSet};
use storage::{DbError, Engine, Result};

/// One engine of this crate.
pub struct RegionEngine {
    pub name: &'static str,
    /// One line for `--help` and `--list`.
    pub about: &'static str,
    /// The keys of [`EngineOptions`]'s shared table this engine takes.
    pub shared_keys: &'static [&'static str],
    /// Its own options (a part of [`EngineOptions`]).
    pub own: fn(&EngineOptions) -> &dyn OptionSet,
    pub own_mut: fn(&mut EngineOptions) -> &mut dyn OptionSet,
    /// Fills the defaults that depend on other options, given the `key=value` pairs set.
    pub finish: fn(&mut EngineOptions, &BTreeMap<String, String>),
    /// The pages formatting a region of `pages` pages requires ([`min_region_bytes`]).
    pub needed_pages: fn(&EngineOptions, u64) -> u64,
    pub open: fn(Region, &EngineOptions) -> Result<Box<dyn Engine>>,
    /// Adds the engine's own areas to `inplace`'s inspection of its region.
    pub inspect: fn(&Region, Inspection) -> Result<Inspection>,
    /// Whether and how a growable region grows under it (`nvmdb::Db`).
    pub growth: Growth,
    /// Region bytes a workload needs per byte it needs on `inplace` (how densely the engine
    /// stores rows), for default region sizes.
    pub room_factor: u64,
}

impl std::fmt::Debug for RegionEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegionEngine").field("name", &self.name).finish_non_exhaustive()
    }
}

/// How an engine's layout follows a region that grows (a growable file: `nvmdb::Db`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// It lays itself out over the region as it was when formatted (`wal` and `group` keep a
    /// DRAM image of it): it keeps that size.
    Fixed,
    /// Its layout spans the region's whole mapping, so a growable file grows under it.
    Mapping,
    /// As [`Growth::Mapping`], and its whole layout is the superblock's page count and the
    /// allocator's bitmap, so raising the count on reopen adds pages
    /// (`storage::format::extend_page_count`).
    PageCount,
}

impl Growth {
    /// Whether a full region may grow (and the work be retried).
    pub fn grows(self) -> bool {
        self != Growth::Fixed
    }
}

fn no_finish(_: &mut EngineOptions, _: &BTreeMap<String, String>) {}

fn as_is(_: &Region, outer: Inspection) -> Result<Inspection> {
    Ok(outer)
}

/// Every engine of this crate, in the order `--help` and `--list` show them.
pub const REGION_ENGINES: &[RegionEngine] = &[
    RegionEngine {
        name: inplace::ENGINE_NAME,
        about: "In-Place Updates (Pelley et al. VLDB 2014 §3.2): per-txn undo logs, data in NVRAM",
        shared_keys: inplace::options::SHARED_KEYS,
        own: |o| &o.inplace,
        own_mut: |o| &mut o.inplace,
        finish: no_finish,
        needed_pages: inplace::needed_pages,
        open: |r, o| Ok(Box::new(inplace::InPlace::open(r, o)?)),
        inspect: as_is,
        growth: Growth::PageCount,
        room_factor: 1,
    },
    RegionEngine {
        name: wal::ENGINE_NAME,
        about:
            "NVRAM Disk-Replacement (Pelley et al. VLDB 2014 §3.2): write-ahead log, buffer pool",
        shared_keys: wal::options::SHARED_KEYS,
        own: |o| &o.wal,
        own_mut: |o| &mut o.wal,
        finish: wal::options::finish,
        needed_pages: wal::needed_pages,
        open: |r, o| Ok(Box::new(wal::Wal::open(r, o)?)),
        inspect: wal::inspect,
        growth: Growth::Fixed,
        room_factor: 1,
    },
    RegionEngine {
        name: group::ENGINE_NAME,
        about: "NVRAM Group Commit (Pelley et al. VLDB 2014 §3.2): batches persisted atomically",
        shared_keys: group::options::SHARED_KEYS,
        own: |o| &o.group,
        own_mut: |o| &mut o.group,
        finish: no_finish,
        needed_pages: group::needed_pages,
        open: |r, o| Ok(Box::new(group::Group::open(r, o)?)),
        inspect: group::inspect,
        growth: Growth::Fixed,
        room_factor: 1,
    },
    RegionEngine {
        name: cow::ENGINE_NAME,
        about: "CoW / NVM-CoW (Arulraj et al. SIGMOD 2015 §3.2, §4.2): copy-on-write B+tree, \
                master record swap; io=fs|nvm, group_commit_ms",
        shared_keys: cow::options::SHARED_KEYS,
        own: |o| &o.cow,
        own_mut: |o| &mut o.cow,
        finish: no_finish,
        needed_pages: cow::needed_pages,
        open: |r, o| Ok(Box::new(cow::Cow::open(r, o)?)),
        inspect: cow::inspect,
        growth: Growth::Mapping,
        room_factor: 1,
    },
    RegionEngine {
        name: lsm::ENGINE_NAME,
        about: "Log-structured (Arulraj et al. SIGMOD 2015 §3.3/§4.3): memtable, log, sorted runs",
        shared_keys: lsm::options::SHARED_KEYS,
        own: |o| &o.lsm,
        own_mut: |o| &mut o.lsm,
        finish: no_finish,
        needed_pages: lsm::needed_pages,
        open: |r, o| Ok(Box::new(lsm::Lsm::open(r, o)?)),
        inspect: lsm::inspect,
        growth: Growth::Mapping,
        room_factor: 1,
    },
];

const NAMES: [&str; REGION_ENGINES.len()] = {
    let mut names = [""; REGION_ENGINES.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = REGION_ENGINES[i].name;
        i += 1;
    }
    names
};

/// The names of [`REGION_ENGINES`].
pub const ENGINES: &[&str] = &NAMES;

/// The engine called `name`.
pub fn lookup(name: &str) -> Option<&'static RegionEngine> {
    REGION_ENGINES.iter().find(|e| e.name == name)
}

/// The engine called `name`, or an error naming the known ones.
pub fn get(name: &str) -> Result<&'static RegionEngine> {
    lookup(name).ok_or_else(|| {
        DbError::Invalid(format!(
            "unknown engine `{name}` (this crate has: {})",
            ENGINES.join(", ")
        ))
    })
}

impl RegionEngine {
    /// Every `--engine-opt` key this engine takes: its shared keys, then its own.
    pub fn keys(&self) -> Vec<&'static str> {
        let own = (self.own)(&EngineOptions::default()).options();
        self.shared_keys.iter().copied().chain(own.iter().map(|i| i.key)).collect()
    }

    /// `base` (the shared flags: workers, cache) with `pairs` applied and the defaults that
    /// depend on them filled in. An unknown key or a value that does not parse is an error.
    pub fn options(
        &self,
        mut base: EngineOptions,
        pairs: &BTreeMap<String, String>,
    ) -> Result<EngineOptions> {
        for (key, value) in pairs {
            let set = if self.shared_keys.contains(&key.as_str()) {
                base.set(key, value)
            } else {
                (self.own_mut)(&mut base).set(key, value)
            };
            match set {
                Ok(true) => {}
                Ok(false) => {
                    return Err(DbError::Invalid(format!(
                        "engine `{}` has no option `{key}` (it takes: {})",
                        self.name,
                        self.keys().join(", ")
                    )))
                }
                Err(why) => return Err(DbError::Invalid(format!("engine `{}`: {why}", self.name))),
            }
        }
        (self.finish)(&mut base, pairs);
        Ok(base)
    }

    /// Every key this engine takes with its value in `o`, as `--engine-opt` spells it (unset
    /// ones left out): the bench row's `engine_opts`.
    pub fn resolved(&self, o: &EngineOptions) -> Vec<(&'static str, String)> {
        let mut out: Vec<_> =
            o.resolved().into_iter().filter(|(k, _)| self.shared_keys.contains(k)).collect();
        out.extend((self.own)(o).resolved());
        out
    }

    /// One line per key: `key=<values> (default D): help`.
    pub fn help(&self) -> Vec<String> {
        let defaults = EngineOptions::default();
        let mut out = Vec::new();
        help_lines(&defaults, self.shared_keys, &mut out);
        help_lines((self.own)(&defaults), &[], &mut out);
        out
    }
}

/// What opening `region` would do (superblock verdict, in-flight work), read without writing.
/// A damaged superblock is an error.
pub fn inspect(region: &Region) -> Result<Inspection> {
    let outer = inplace::inspect(region)?;
    match outer.engine.as_deref().and_then(lookup) {
        Some(engine) => (engine.inspect)(region, outer),
        None => Ok(outer),
    }
}

/// The smallest region, in bytes, that engine `name` formats with `options`: its own areas
/// (a `wal` log, a `group` batch log, `lsm`'s memtable log and arenas), the database's
/// metadata (superblock, bitmaps, undo logs) and the few data pages formatting asks for. The
/// rule is each engine's own format check, so a region of this size formats and one page less
/// does not. A workload needs more: see [`area_bytes`].
pub fn min_region_bytes(name: &str, options: &EngineOptions) -> Result<u64> {
    let needed = get(name)?.needed_pages;
    // What a layout needs grows with the region only through its bitmap pages (one per 64 Ki
    // pages): a few rounds reach the fixed point.
    let mut pages = 1u64;
    for _ in 0..64 {
        let need = needed(options, pages);
        if need <= pages {
            return Ok(storage::format::page_offset(pages));
        }
        pages = need;
    }
    Err(DbError::Invalid(format!("engine {name}: no region size fits these options")))
}

/// The bytes engine `name` keeps apart from its database (logs, batch log, LSM areas): what it
/// needs beyond `inplace`'s minimum with the same options, so a default region size chosen for
/// a workload on `inplace` is that much larger for it (0 for `inplace` and `cow`).
pub fn area_bytes(name: &str, options: &EngineOptions) -> Result<u64> {
    let own = min_region_bytes(name, options)?;
    Ok(own.saturating_sub(min_region_bytes(inplace::ENGINE_NAME, options)?))
}

/// Opens (formatting a blank region, recovering otherwise) engine `name` on `region`.
pub fn open(name: &str, region: Region, options: &EngineOptions) -> Result<Box<dyn Engine>> {
    (get(name)?.open)(region, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn each_engine_parses_lists_and_documents_the_same_keys() {
        for engine in REGION_ENGINES {
            let keys = engine.keys();
            let o = engine.options(EngineOptions::default(), &BTreeMap::new()).unwrap();
            let listed: Vec<_> = engine.resolved(&o).iter().map(|(k, _)| *k).collect();
            // Every key but the unset `fault` is listed with its default.
            let expected: Vec<_> = keys.iter().copied().filter(|k| *k != "fault").collect();
            assert_eq!(listed, expected, "{}", engine.name);
            assert_eq!(engine.help().len(), keys.len(), "{}", engine.name);
            // Each listed value parses back to the same options.
            let again: BTreeMap<_, _> =
                engine.resolved(&o).into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            assert_eq!(engine.options(EngineOptions::default(), &again).unwrap(), o);
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key_and_the_accepted_values() {
        let wal = get("wal").unwrap();
        let err = wal.options(EngineOptions::default(), &pairs(&[("protocol", "lean")]));
        let text = err.unwrap_err().to_string();
        assert!(
            text.contains("engine `wal` has no option `protocol` (it takes: undo_pages"),
            "{text}"
        );
        let err = wal.options(EngineOptions::default(), &pairs(&[("io", "tape")]));
        let text = err.unwrap_err().to_string();
        assert!(text.contains("engine `wal`: io must be nvm or fs, not `tape`"), "{text}");
        let err =
            get("lsm").unwrap().options(Default::default(), &pairs(&[("memtable_bytes", "x")]));
        assert!(err.unwrap_err().to_string().contains("memtable_bytes must be a size"));
        assert!(get("nope").unwrap_err().to_string().contains("inplace, wal, group, cow, lsm"));
    }

    #[test]
    fn wal_log_bytes_default_follows_the_logs_unless_given() {
        let wal = get("wal").unwrap();
        let o = wal.options(Default::default(), &pairs(&[("log", "txn:4")])).unwrap();
        assert!(o.wal.log_bytes > 64 << 20, "{}", o.wal.log_bytes);
        let given = pairs(&[("log", "txn:4"), ("log_bytes", "64MiB")]);
        assert_eq!(wal.options(Default::default(), &given).unwrap().wal.log_bytes, 64 << 20);
    }
}
