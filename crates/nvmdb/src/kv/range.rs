//! Range iteration over a table, from both ends, one B+tree leaf at a time.

use super::core::{with, Core};
use super::node::Value as NodeValue;
use super::store::Store;
use super::{tree, Key};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::Bound;
use storage::{DbError, Result};

/// Iterator over a key range of a table, in key order, or in reverse with `.rev()` (both
/// ends may be used; they stop where they meet); yields `Result<(key, value)>`. It reads one
/// node at a time; entries the same transaction writes while it runs may or may not be
/// visited.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| {
///     let t = tx.open_table::<i64>("t")?;
///     for k in -3..3i64 {
///         t.insert(k, b"")?;
///     }
///     let keys: Vec<i64> = t.range(-1..)?.map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
///     assert_eq!(keys, [-1, 0, 1, 2]);
///     let back: Vec<i64> =
///         t.range(..=0)?.rev().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
///     assert_eq!(back, [0, -1, -2, -3]);
///     Ok(())
/// })?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct Range<'tx, K: Key + ?Sized> {
    core: &'tx dyn Core,
    root: u64,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// Where the next forward node read starts; `None` once that end is exhausted.
    next_from: Option<Bound<Vec<u8>>>,
    /// Where the next reverse node read ends; `None` once that end is exhausted.
    next_to: Option<Bound<Vec<u8>>>,
    front: VecDeque<(Vec<u8>, NodeValue)>,
    back: VecDeque<(Vec<u8>, NodeValue)>,
    /// The last keys handed out at each end: neither end passes the other.
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
    /// Rollbacks to savepoints before it was made: after another, its entries may be undone.
    epoch: usize,
    _key: PhantomData<fn(&K)>,
}

impl<'tx, K: Key + ?Sized> Range<'tx, K> {
    pub(super) fn new(
        core: &'tx dyn Core,
        root: u64,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
    ) -> Self {
        Range {
            core,
            root,
            next_from: Some(start.clone()),
            next_to: Some(end.clone()),
            start,
            end,
            front: VecDeque::new(),
            back: VecDeque::new(),
            front_last: None,
            back_last: None,
            epoch: core.rollbacks(),
            _key: PhantomData,
        }
    }

    /// Runs `f` in the transaction, unless it rolled back to a savepoint since the range was
    /// made (entries read ahead may name rows the rollback removed).
    fn with<R>(&self, f: impl FnOnce(&mut Store<'_, '_>) -> Result<R>) -> Result<R> {
        if self.core.rollbacks() != self.epoch {
            return Err(DbError::Invalid(
                "the transaction rolled back to a savepoint after this range was made; make it \
                 again"
                    .into(),
            ));
        }
        with(self.core, f)
    }

    fn past_end(&self, key: &[u8]) -> bool {
        let beyond = match &self.end {
            Bound::Unbounded => false,
            Bound::Included(e) => key > e.as_slice(),
            Bound::Excluded(e) => key >= e.as_slice(),
        };
        beyond || self.back_last.as_deref().is_some_and(|b| key >= b)
    }

    fn before_start(&self, key: &[u8]) -> bool {
        let before = match &self.start {
            Bound::Unbounded => false,
            Bound::Included(s) => key < s.as_slice(),
            Bound::Excluded(s) => key <= s.as_slice(),
        };
        before || self.front_last.as_deref().is_some_and(|f| key <= f)
    }

    fn exhaust(&mut self) {
        self.next_from = None;
        self.next_to = None;
        self.front.clear();
        self.back.clear();
    }

    /// The next entry from the front, its key still encoded and its value not read.
    pub(super) fn next_raw(&mut self) -> Result<Option<(Vec<u8>, NodeValue)>> {
        while self.front.is_empty() {
            let Some(from) = self.next_from.take() else { return Ok(None) };
            let root = self.root;
            let (entries, upper) =
                self.with(|s| tree::seek(s, root, from.as_ref().map(|k| k.as_slice())))?;
            self.front = entries.into();
            self.next_from = upper.map(Bound::Included);
        }
        let Some((key, value)) = self.front.pop_front() else { return Ok(None) };
        if self.past_end(&key) {
            self.exhaust();
            return Ok(None);
        }
        self.front_last = Some(key.clone());
        Ok(Some((key, value)))
    }

    /// The next entry from the back, as [`Range::next_raw`].
    pub(super) fn next_back_raw(&mut self) -> Result<Option<(Vec<u8>, NodeValue)>> {
        while self.back.is_empty() {
            let Some(to) = self.next_to.take() else { return Ok(None) };
            let root = self.root;
            let (entries, lower) =
                self.with(|s| tree::seek_back(s, root, to.as_ref().map(|k| k.as_slice())))?;
            self.back = entries.into();
            self.next_to = lower.map(Bound::Excluded);
        }
        let Some((key, value)) = self.back.pop_back() else { return Ok(None) };
        if self.before_start(&key) {
            self.exhaust();
            return Ok(None);
        }
        self.back_last = Some(key.clone());
        Ok(Some((key, value)))
    }

    /// The next entry from the front as stored: its key encoded, its value whole.
    pub(crate) fn next_encoded(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some((key, value)) = self.next_raw()? else { return Ok(None) };
        let bytes = self.with(|s| s.get_value(&value))?;
        Ok(Some((key, bytes)))
    }

    fn decode(&self, entry: Option<(Vec<u8>, NodeValue)>) -> Result<Option<(K::Owned, Vec<u8>)>> {
        let Some((key, value)) = entry else { return Ok(None) };
        let decoded = K::decode(&key)
            .ok_or_else(|| DbError::Corrupt(format!("key {key:02x?} is not a {}", K::NAME)))?;
        let bytes = self.with(|s| s.get_value(&value))?;
        Ok(Some((decoded, bytes)))
    }

    fn finish(
        &mut self,
        r: Result<Option<(K::Owned, Vec<u8>)>>,
    ) -> Option<<Self as Iterator>::Item> {
        match r {
            Ok(e) => e.map(Ok),
            Err(e) => {
                self.exhaust();
                Some(Err(e))
            }
        }
    }
}

impl<K: Key + ?Sized> Iterator for Range<'_, K> {
    type Item = Result<(K::Owned, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.next_raw().and_then(|e| self.decode(e));
        self.finish(r)
    }
}

impl<K: Key + ?Sized> DoubleEndedIterator for Range<'_, K> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let r = self.next_back_raw().and_then(|e| self.decode(e));
        self.finish(r)
    }
}
