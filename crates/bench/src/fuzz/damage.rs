//! Damage: case `k`'s target page and what is done to it (bit flips, overwritten words, a
//! zeroed page, a stale copy of another page, a lost write, truncation), as a patch over its
//! base image; deterministic in `(seed, k)`.

use super::*;

/// A value an overwritten word takes: the kinds of values that break readers (zero, all ones,
/// a valid-looking page id, one past the end, a power of two, random bits).
fn nasty_value(rng: &mut Rng, page_count: u64, page: u64, near: &[u64]) -> u64 {
    match rng.below(11) {
        // Pointers that make cycles: the page itself, or another page of the same kind (its
        // parent, child or sibling, for a B+tree node).
        8 => page,
        9 | 10 if !near.is_empty() => *rng.pick(near),
        0 => 0,
        1 => u64::MAX,
        2 => rng.below(page_count),
        3 => page_count + rng.below(3),
        4 => 1 << rng.below(64),
        5 => rng.below(16),
        6 => rng.next() & 0xFFFF_FFFF,
        _ => rng.next(),
    }
}

/// An offset inside a page of `target`, biased towards the bytes that address things: page
/// headers, undo log header words, superblock fields, catalog entries.
fn offset_in_page(rng: &mut Rng, base: &Base, target: Target, page_start: u64) -> u64 {
    let page = storage::format::PAGE_SIZE_U64;
    let header_page = base.undo_headers.contains(&page_start);
    if let Some(lines) = base.recent.get(&(page_start / page)) {
        if rng.chance(40) {
            return rng.pick(lines) - page_start + rng.below(64);
        }
    }
    match target {
        Target::Superblock | Target::SuperblockCopy if rng.chance(90) => rng.below(256),
        Target::Catalog if rng.chance(80) => rng.below(64 + 8 * 128),
        // The words that describe the region's pages (the rest of the bitmap is unused).
        Target::Bitmap | Target::BitmapMirror if rng.chance(80) => {
            rng.below((base.image.len() as u64 / page).div_ceil(8))
        }
        Target::UserUndo | Target::SystemUndo if header_page && rng.chance(50) => {
            rng.below(storage::undo::HEADER_SLOTS) * 64 + rng.below(8)
        }
        _ if rng.chance(50) => rng.below(64),
        _ => rng.below(page),
    }
}

/// A damaged image as its base plus replaced pages (copying whole images per case cost more
/// than running the case).
#[derive(Clone, Debug)]
pub struct Patch {
    /// The image's length (shorter than the base when truncated).
    pub len: usize,
    /// Pages whose contents replace the base's.
    pub pages: BTreeMap<u64, Vec<u8>>,
}

impl Patch {
    /// The damaged image in full.
    pub fn apply(&self, base: &[u8]) -> Vec<u8> {
        let mut image = base[..self.len].to_vec();
        for (page, bytes) in &self.pages {
            let at = (page * storage::format::PAGE_SIZE_U64) as usize;
            image[at..at + bytes.len()].copy_from_slice(bytes);
        }
        image
    }

    /// The bytes of `page` as damaged so far, copied from `base` on first change.
    fn page_mut(&mut self, base: &[u8], page: u64) -> &mut Vec<u8> {
        let size = storage::format::PAGE_SIZE;
        self.pages.entry(page).or_insert_with(|| {
            let at = page as usize * size;
            base[at..at + size].to_vec()
        })
    }
}

/// Derives case `case`'s damage to its base image.
pub fn damage(bases: &[Base], seed: u64, case: u64) -> (usize, Plan, Patch) {
    let mut rng = Rng::new(derive(seed, case, SALT_PLAN));
    let b = rng.below(bases.len() as u64) as usize;
    let base = &bases[b];
    let mut targets: Vec<Target> = base.pages.keys().copied().collect();
    targets.push(Target::Truncation);
    let target = *rng.pick(&targets);
    let image = &base.image;
    let len = image.len() as u64;
    let mut patch = Patch { len: image.len(), pages: BTreeMap::new() };
    let page_bytes = storage::format::PAGE_SIZE_U64;
    let page_count = len / page_bytes;
    let plan =
        |damage, page, what| Plan { case, base: base.name.clone(), target, damage, page, what };
    let Some(pages) = base.pages.get(&target) else {
        // Truncation: half the time at a page boundary.
        let cut = if rng.chance(50) { rng.below(page_count) * page_bytes } else { rng.below(len) };
        let cut = cut.max(1);
        patch.len = cut as usize;
        let what = format!("image truncated to {cut} of {len} bytes");
        return (b, plan(DamageKind::Truncate, cut, what), patch);
    };
    let page = *rng.pick(pages);
    let start = page * page_bytes;
    let kinds =
        [DamageKind::BitFlips, DamageKind::Words, DamageKind::ZeroPage, DamageKind::StalePage];
    let kind = *rng.pick(&kinds);
    let mut what = Vec::new();
    let near: Vec<u64> = [Target::BtreeRoot, Target::BtreeInner, Target::BtreeLeaf, Target::Heap]
        .iter()
        .filter(|t| **t == target || rng.chance(50))
        .filter_map(|t| base.pages.get(t))
        .flatten()
        .copied()
        .collect();
    let ps = page_bytes as usize;
    match kind {
        DamageKind::BitFlips => {
            // Sometimes the same bits of both allocator copies: damage the mirror cannot reveal.
            let twin =
                match (base.pages.get(&Target::Bitmap), base.pages.get(&Target::BitmapMirror)) {
                    (Some(b), Some(m)) if rng.chance(30) => match target {
                        Target::Bitmap => Some(m[0]),
                        Target::BitmapMirror => Some(b[0]),
                        _ => None,
                    },
                    _ => None,
                };
            for _ in 0..1 + rng.below(4) {
                let within = offset_in_page(&mut rng, base, target, start) as usize;
                let bit = rng.below(8);
                patch.page_mut(image, page)[within] ^= 1 << bit;
                what.push(format!("bit {bit} of byte {}", start as usize + within));
                if let Some(other) = twin {
                    patch.page_mut(image, other)[within] ^= 1 << bit;
                    what.push(format!("and of page {other}"));
                }
            }
        }
        DamageKind::Words => {
            for _ in 0..1 + rng.below(3) {
                let within = offset_in_page(&mut rng, base, target, start) as usize / 8 * 8;
                let bytes = patch.page_mut(image, page);
                let value = if rng.chance(30) {
                    // Another word of the same page at the same position in its 16-byte entry
                    // (for a B+tree node: a duplicated child pointer or key).
                    let from = within % 16 + 16 * rng.below(16) as usize;
                    u64::from_le_bytes(bytes[from..from + 8].try_into().unwrap_or([0; 8]))
                } else {
                    nasty_value(&mut rng, page_count, page, &near)
                };
                bytes[within..within + 8].copy_from_slice(&value.to_le_bytes());
                what.push(format!("word at {} = {value:#x}", start as usize + within));
            }
        }
        DamageKind::ZeroPage => {
            patch.page_mut(image, page).fill(0);
            what.push(format!("page {page} zeroed"));
        }
        DamageKind::StalePage | DamageKind::Truncate => {
            let at = start as usize;
            let from_older = &base.older[at..at + ps];
            let source = if rng.chance(40) && from_older != &image[at..at + ps] {
                // A lost write: the page as it was in the older image.
                what.push(format!("page {page} as in the older image"));
                from_older
            } else {
                // Another page of the same kind most of the time (a stale node over a live one).
                let same: Vec<u64> = pages.iter().copied().filter(|p| *p != page).collect();
                let source = if !same.is_empty() && rng.chance(70) {
                    *rng.pick(&same)
                } else {
                    let other = rng.below(page_count - 1);
                    if other >= page {
                        other + 1
                    } else {
                        other
                    }
                };
                what.push(format!("page {source} copied over page {page}"));
                &image[source as usize * ps..(source as usize + 1) * ps]
            };
            patch.pages.insert(page, source.to_vec());
        }
    }
    let what = format!("{} page {page}: {}", target.name(), what.join(", "));
    (b, plan(kind, page, what), patch)
}
