//! Shared by the crash-image property tests: random single-thread operation sequences on a `sim`
//! region, and an independent model of what a crash may leave.
//!
//! The model records every version each 64-byte line has held and, per line, the newest version
//! a completed persist (flush, then a fence of the same thread) covers. Crash-image rules are
//! checks against it.

// Each test file uses a different part of this module.
#![allow(dead_code)]

use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use proptest::prelude::*;

pub const LINE: usize = 64;
pub const WORD: usize = 8;

/// A small region keeps images cheap and makes operations collide on lines.
pub const REGION_BYTES: usize = 1024;

#[derive(Clone, Debug)]
pub enum Op {
    Write { offset: usize, bytes: Vec<u8> },
    WriteU64 { word: usize, value: u64 },
    Flush { offset: usize, len: usize },
    Fence,
    Persist { offset: usize, len: usize },
    Crash { policy: CrashPolicy, seed: u64 },
}

fn range(len_bytes: usize, max: usize) -> impl Strategy<Value = (usize, usize)> {
    (0..len_bytes, 0..=max).prop_map(move |(o, l)| (o, l.min(len_bytes - o)))
}

/// Operations on a region of `len_bytes`.
pub fn op(len_bytes: usize) -> impl Strategy<Value = Op> {
    let policy = prop::sample::select(CrashPolicy::ALL.to_vec());
    prop_oneof![
        4 => (0..len_bytes, prop::collection::vec(any::<u8>(), 1..=150)).prop_map(
            move |(offset, mut bytes)| {
                bytes.truncate(len_bytes - offset);
                Op::Write { offset, bytes }
            }
        ),
        2 => (0..len_bytes / WORD, any::<u64>())
            .prop_map(|(word, value)| Op::WriteU64 { word, value }),
        3 => range(len_bytes, 200).prop_map(|(offset, len)| Op::Flush { offset, len }),
        2 => Just(Op::Fence),
        2 => range(len_bytes, 200).prop_map(|(offset, len)| Op::Persist { offset, len }),
        1 => (policy, any::<u64>()).prop_map(|(policy, seed)| Op::Crash { policy, seed }),
    ]
}

pub fn ops(len_bytes: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(len_bytes), 1..60)
}

pub struct Model {
    pub current: Vec<u8>,
    /// Every version of each line, oldest first; version 0 is the initial contents.
    pub versions: Vec<Vec<Vec<u8>>>,
    /// Per line, the index of the newest version a completed persist covers.
    pub persisted: Vec<usize>,
    /// `(line, version)` flushed since this thread's last fence.
    pending: Vec<(usize, usize)>,
}

impl Model {
    pub fn new(initial: &[u8]) -> Model {
        let versions = initial.chunks(LINE).map(|c| vec![c.to_vec()]).collect::<Vec<_>>();
        Model {
            current: initial.to_vec(),
            persisted: vec![0; versions.len()],
            versions,
            pending: Vec::new(),
        }
    }

    fn lines(offset: usize, len: usize) -> std::ops::Range<usize> {
        if len == 0 {
            return 0..0;
        }
        offset / LINE..(offset + len - 1) / LINE + 1
    }

    fn line_bytes(&self, line: usize) -> Vec<u8> {
        self.current[line * LINE..((line + 1) * LINE).min(self.current.len())].to_vec()
    }

    fn store(&mut self, offset: usize, bytes: &[u8]) {
        self.current[offset..offset + bytes.len()].copy_from_slice(bytes);
        for line in Self::lines(offset, bytes.len()) {
            let now = self.line_bytes(line);
            self.versions[line].push(now);
        }
    }

    fn flush(&mut self, offset: usize, len: usize) {
        for line in Self::lines(offset, len) {
            self.pending.push((line, self.versions[line].len() - 1));
        }
    }

    fn fence(&mut self) {
        for (line, version) in self.pending.drain(..) {
            self.persisted[line] = self.persisted[line].max(version);
        }
    }

    /// Word `word` of line `line` as it was in version `v`.
    pub fn word(&self, line: usize, v: usize, word: usize) -> &[u8] {
        let bytes = &self.versions[line][v];
        &bytes[word * WORD..((word + 1) * WORD).min(bytes.len())]
    }
}

/// Applies `ops` to a `sim` region opened on `initial` and to the model; at every `Crash` op,
/// and once per policy at the end, hands the crash image to `check`.
pub fn run(
    initial: &[u8],
    ops: &[Op],
    mut check: impl FnMut(&Model, CrashPolicy, &[u8]) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let region = Region::from_image(initial, &RegionOptions::new(Medium::Sim, 0))
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut model = Model::new(initial);
    let mut crash = |model: &Model, policy: CrashPolicy, seed: u64| {
        let image = region.crash_image(policy, seed).expect("sim region has crash images");
        prop_assert_eq!(image.len(), initial.len());
        check(model, policy, &image)
    };
    for op in ops {
        match op {
            Op::Write { offset, bytes } => {
                region.write(*offset as u64, bytes);
                model.store(*offset, bytes);
            }
            Op::WriteU64 { word, value } => {
                region.write_u64((*word * WORD) as u64, *value);
                model.store(*word * WORD, &value.to_le_bytes());
            }
            Op::Flush { offset, len } => {
                region.flush(*offset as u64, *len as u64);
                model.flush(*offset, *len);
            }
            Op::Fence => {
                region.fence();
                model.fence();
            }
            Op::Persist { offset, len } => {
                region.persist(*offset as u64, *len as u64);
                model.flush(*offset, *len);
                model.fence();
            }
            Op::Crash { policy, seed } => crash(&model, *policy, *seed)?,
        }
    }
    for policy in CrashPolicy::ALL {
        crash(&model, policy, 0x5eed)?;
    }
    Ok(())
}

/// Calls `check(line, word, value)` for every aligned word of `image` (the last may be short).
pub fn for_each_word(
    image: &[u8],
    mut check: impl FnMut(usize, usize, &[u8]) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    for (line, chunk) in image.chunks(LINE).enumerate() {
        for (word, value) in chunk.chunks(WORD).enumerate() {
            check(line, word, value)?;
        }
    }
    Ok(())
}
