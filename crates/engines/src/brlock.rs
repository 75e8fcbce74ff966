//! A reader-writer lock with one reader word per worker (the Linux kernel's "big reader" lock,
//! brlock; per-core reader-writer locks as in Shore-MT, Johnson et al. EDBT 2009 §6). A reader
//! locks only its own worker's word, so readers on different workers write no shared cache line;
//! a writer locks every word, in order. For state read by every transaction and replaced rarely
//! (`lsm`'s memtable and runs: a writer is a flush, a merge, a new table, or `io=fs`'s short
//! in-DRAM publication of a commit, never a persist barrier of one).
//!
//! Invariant: while any word is write-locked by a writer holding all of them, no reader holds
//! any word, so the writer's `&mut` is the only reference; a reader holds its word's shared lock
//! for as long as its `&` lives.

use crossbeam_utils::CachePadded;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

pub(crate) struct BrLock<T> {
    words: Box<[CachePadded<RwLock<()>>]>,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is reached only through the guards below: shared (`&T`) while a reader word
// is read-locked, exclusive (`&mut T`) while every word is write-locked (module invariant), as
// `RwLock<T>` is `Sync` for `T: Send + Sync`.
unsafe impl<T: Send + Sync> Sync for BrLock<T> {}
// SAFETY: as `RwLock<T>`: sending the lock sends the value.
unsafe impl<T: Send> Send for BrLock<T> {}

pub(crate) struct BrReadGuard<'a, T> {
    _word: RwLockReadGuard<'a, ()>,
    value: &'a T,
}

pub(crate) struct BrWriteGuard<'a, T> {
    _words: Vec<RwLockWriteGuard<'a, ()>>,
    value: &'a mut T,
}

impl<T> BrLock<T> {
    /// A lock with `readers` reader words (at least one).
    pub fn new(value: T, readers: usize) -> BrLock<T> {
        BrLock {
            words: (0..readers.max(1)).map(|_| CachePadded::new(RwLock::new(()))).collect(),
            value: UnsafeCell::new(value),
        }
    }

    /// Shared access through reader word `reader` (taken modulo the number of words, so any
    /// index is safe; a worker passes its own).
    pub fn read(&self, reader: usize) -> BrReadGuard<'_, T> {
        self.read_or_wait(reader).0
    }

    /// [`BrLock::read`], and whether it had to wait (a writer held or was taking the word):
    /// what a contention counter counts.
    pub fn read_or_wait(&self, reader: usize) -> (BrReadGuard<'_, T>, bool) {
        let word = &self.words[reader % self.words.len()];
        let (word, waited) = match word.try_read() {
            Some(w) => (w, false),
            None => (word.read(), true),
        };
        // SAFETY: the word is read-locked until the guard drops, so no writer (which holds
        // every word) has a `&mut` while this `&` lives.
        let value = unsafe { &*self.value.get() };
        (BrReadGuard { _word: word, value }, waited)
    }

    /// Exclusive access: every reader word, in index order (two writers cannot deadlock).
    pub fn write(&self) -> BrWriteGuard<'_, T> {
        let words: Vec<_> = self.words.iter().map(|w| w.write()).collect();
        // SAFETY: every word is write-locked until the guard drops: no reader holds a `&`, and
        // no other writer a `&mut`.
        let value = unsafe { &mut *self.value.get() };
        BrWriteGuard { _words: words, value }
    }
}

impl<T> Deref for BrReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> Deref for BrWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> DerefMut for BrWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards that readers on every word and writers exclude each other: a writer keeps the two
    /// halves of a pair equal only inside its critical section, and no reader sees them apart.
    #[test]
    fn readers_on_any_word_never_see_a_writer_half_done() {
        let lock = BrLock::new((0u64, 0u64), 3);
        std::thread::scope(|s| {
            for r in 0..3 {
                let lock = &lock;
                s.spawn(move || {
                    for _ in 0..20_000 {
                        let g = lock.read(r);
                        assert_eq!(g.0, g.1, "a reader on word {r} saw a torn pair");
                    }
                });
            }
            let lock = &lock;
            s.spawn(move || {
                for _ in 0..2_000 {
                    let mut g = lock.write();
                    g.0 += 1;
                    std::hint::spin_loop();
                    g.1 += 1;
                }
            });
        });
        assert_eq!(*lock.read(7), (2_000, 2_000));
    }
}
