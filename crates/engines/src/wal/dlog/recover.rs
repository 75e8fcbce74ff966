//! Recovery of the distributed log: analysis of every log up to the persisted horizon, and
//! redo, per log or by page buckets on several threads.

use super::*;

/// What recovery found in the logs.
pub(crate) struct Recovered {
    /// Each log's end.
    pub ends: Vec<u64>,
    /// Records redone.
    pub redone: u64,
    /// Records above the horizon, retired.
    pub retired: u64,
    /// The highest GSN in any log (new GSNs start above it).
    pub max_gsn: u64,
    /// The horizon recovery redid up to (`u64::MAX` with a durable cache).
    pub horizon: u64,
    /// The horizon word as persisted.
    pub persisted_horizon: u64,
    /// The redo points recovery started from.
    pub redo: RedoPoints,
}

struct Rec {
    gsn: u64,
    offset: u64,
    bytes: Vec<u8>,
}

/// Analysis and redo over every log into `image` (`retire`: persist the retirement of records
/// above the horizon in `nvram`; false for a read-only inspection).
#[allow(clippy::too_many_arguments)]
pub(crate) fn recover(
    nvram: &Region,
    image: &Region,
    control: u64,
    area: u64,
    c: Control,
    image_bytes: u64,
    retire: bool,
    fault: Option<DlogFault>,
) -> Result<Recovered> {
    let n = c.layout.logs() as usize;
    // Both are validated whatever the cache mode: damage is `Corrupt`, never a guess.
    let persisted_horizon = read_horizon(nvram, control)?;
    let redo = read_redo(nvram, control, n)?;
    let horizon = match c.cache {
        Cache::Durable => u64::MAX,
        Cache::Volatile if fault == Some(DlogFault::RedoPastHorizon) => u64::MAX,
        Cache::Volatile => persisted_horizon,
    };
    let mut per_log: Vec<Vec<Rec>> = Vec::with_capacity(n);
    let (mut ends, mut retired, mut max_gsn) = (Vec::with_capacity(n), 0u64, 0u64);
    for (i, &from) in redo.points.iter().enumerate() {
        let log_area = area + i as u64 * c.per_log_bytes;
        let mut recs = Vec::new();
        let mut dead = Vec::new();
        let (end, _) = log::scan(nvram, log_area, c.per_log_bytes, from, image_bytes, |r| {
            let gsn = r.gsn.unwrap_or(0);
            max_gsn = max_gsn.max(gsn);
            if gsn <= horizon {
                recs.push(Rec { gsn, offset: r.offset, bytes: r.bytes.to_vec() });
            } else {
                dead.push(r.place);
            }
        })?;
        if retire {
            for place in &dead {
                log::retire(nvram, *place);
            }
        }
        retired += dead.len() as u64;
        ends.push(end);
        per_log.push(recs);
    }
    let redone = per_log.iter().map(|l| l.len() as u64).sum();
    let threads = std::thread::available_parallelism().map_or(2, |p| p.get()).clamp(1, 8);
    match c.layout {
        LogLayout::Txn(_) if fault != Some(DlogFault::RedoUnsorted) => {
            redo_by_page_buckets(image, per_log, threads)
        }
        _ => redo_per_log(image, &per_log, threads),
    }
    Ok(Recovered { ends, redone, retired, max_gsn, horizon, persisted_horizon, redo })
}

/// Page partitioning: each log in its order (a page's records are all in one log; those that
/// write the same bytes in store order, which is their GSN order); logs in parallel.
fn redo_per_log(image: &Region, per_log: &[Vec<Rec>], threads: usize) {
    let next = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.min(per_log.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(recs) = per_log.get(i) else { return };
                for r in recs {
                    image.write(r.offset, &r.bytes);
                }
            });
        }
    });
}

/// Transaction partitioning (§3.2's two-step pipeline): bucket every record by page, sort each
/// bucket by GSN, apply the buckets in parallel.
fn redo_by_page_buckets(image: &Region, per_log: Vec<Vec<Rec>>, threads: usize) {
    let mut buckets: std::collections::BTreeMap<u64, Vec<Rec>> = Default::default();
    for r in per_log.into_iter().flatten() {
        buckets.entry(r.offset / PAGE_SIZE_U64).or_default().push(r);
    }
    let mut buckets: Vec<Vec<Rec>> = buckets.into_values().collect();
    for b in &mut buckets {
        b.sort_by_key(|r| r.gsn);
    }
    let next = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.min(buckets.len()).max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(bucket) = buckets.get(i) else { return };
                for r in bucket {
                    image.write(r.offset, &r.bytes);
                }
            });
        }
    });
}
