//! A scripted stand-in for SQLite's WAL writer: it writes the WAL header, frames (a 24-byte
//! header, then the page) and syncs through a [`Store`] as SQLite's `walWriteOneFrame` does,
//! and keeps the byte-exact WAL file it wrote as the model.

#![allow(dead_code)]

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use sqlite_nvwal::store::Store;
use std::collections::BTreeMap;

pub const PAGE: usize = 4096;

pub struct Script {
    pub rng: SmallRng,
    /// The current content of each page.
    pub pages: BTreeMap<u32, Vec<u8>>,
    /// The WAL file as written (header + frames) in the current generation.
    pub model: Vec<u8>,
    pub salts: [u8; 8],
    pub generation: u32,
}

impl Script {
    pub fn new(seed: u64) -> Script {
        Script {
            rng: SmallRng::seed_from_u64(seed),
            pages: BTreeMap::new(),
            model: Vec::new(),
            salts: [0; 8],
            generation: 0,
        }
    }

    /// A WAL restart: a new header with new salts.
    pub fn restart(&mut self, store: &Store) {
        self.generation += 1;
        let mut h = [0u8; 32];
        h[0..4].copy_from_slice(&0x377f_0682u32.to_be_bytes());
        h[4..8].copy_from_slice(&3_007_000u32.to_be_bytes());
        h[8..12].copy_from_slice(&(PAGE as u32).to_be_bytes());
        h[16..20].copy_from_slice(&self.generation.to_be_bytes());
        let salt2: u32 = self.rng.gen();
        h[20..24].copy_from_slice(&salt2.to_be_bytes());
        h[24..32].copy_from_slice(&self.rng.gen::<u64>().to_le_bytes());
        self.salts.copy_from_slice(&h[16..24]);
        self.model = h.to_vec();
        store.wal_write(0, &h).expect("header");
    }

    /// Edits a page the way SQLite's B-tree does: a few byte runs, mostly near its end.
    pub fn edit(&mut self, pgno: u32) -> Vec<u8> {
        let rng = &mut self.rng;
        let page = self.pages.entry(pgno).or_insert_with(|| vec![0u8; PAGE]);
        for _ in 0..rng.gen_range(1..4) {
            let len = rng.gen_range(1..300);
            let at = if rng.gen_bool(0.7) {
                rng.gen_range(PAGE - 1200..PAGE - len)
            } else {
                rng.gen_range(0..PAGE - len)
            };
            for b in &mut page[at..at + len] {
                *b = rng.gen();
            }
        }
        page.clone()
    }

    /// One transaction over `pgnos`: frames written, then synced (the commit).
    pub fn txn(&mut self, store: &Store, pgnos: &[u32]) {
        let n = pgnos.len();
        for (i, pgno) in pgnos.iter().enumerate() {
            let page = self.edit(*pgno);
            self.frame(store, *pgno, &page, i + 1 == n);
        }
        store.wal_sync().expect("sync");
    }

    /// One transaction writing the given page contents (the pages' new versions).
    pub fn txn_pages(&mut self, store: &Store, pages: &[(u32, Vec<u8>)]) {
        for (i, (pgno, page)) in pages.iter().enumerate() {
            assert_eq!(page.len(), PAGE);
            self.pages.insert(*pgno, page.clone());
            self.frame(store, *pgno, page, i + 1 == pages.len());
        }
        store.wal_sync().expect("sync");
    }

    /// Writes one frame (header, then page) as `walWriteOneFrame` does.
    fn frame(&mut self, store: &Store, pgno: u32, page: &[u8], commit: bool) {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&pgno.to_be_bytes());
        let commit = if commit { 100u32 } else { 0 };
        h[4..8].copy_from_slice(&commit.to_be_bytes());
        h[8..16].copy_from_slice(&self.salts);
        h[16..24].copy_from_slice(&self.rng.gen::<u64>().to_le_bytes());
        let at = self.model.len() as u64;
        store.wal_write(at, &h).expect("frame header");
        store.wal_write(at + 24, page).expect("frame page");
        self.model.extend_from_slice(&h);
        self.model.extend_from_slice(page);
    }

    /// Random distinct pages for one transaction.
    pub fn pick(&mut self, max_pages: u32, n: usize) -> Vec<u32> {
        let mut v: Vec<u32> = Vec::new();
        while v.len() < n {
            let p = self.rng.gen_range(1..=max_pages);
            if !v.contains(&p) {
                v.push(p);
            }
        }
        v
    }
}

/// Frames in a WAL image.
pub fn frames(image: &[u8]) -> usize {
    image.len().saturating_sub(32) / (PAGE + 24)
}
