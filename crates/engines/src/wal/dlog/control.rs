//! The distributed log's control-page extension: the layout line, the persisted GSN horizon,
//! and the two alternating copies of the per-log redo points.

use super::*;

const D_LINE: u64 = 64;
/// The layout line's magic. Regions of the first distributed-log format (`NVMDBdlg`: horizon and
/// redo points unchecked) are refused with a `Format` error.
const D_MAGIC: u64 = u64::from_le_bytes(*b"NVMDBdl2");
const D_MAGIC_V1: u64 = u64::from_le_bytes(*b"NVMDBdlg");
pub(super) const D_HORIZON: u64 = 128;
/// The two copies of the redo points: `[seq][redo point of log 0..N][crc]`, on their own lines.
pub(super) const D_REDO_COPIES: [u64; 2] = [256, 1024];
/// Bits of the horizon word that hold `H`; the 16 above are its check bits.
const GSN_BITS: u32 = 48;
/// The highest GSN a region can hold (the horizon word keeps 48 bits of it).
pub(crate) const MAX_GSN: u64 = (1 << GSN_BITS) - 1;
const _: () = assert!(D_REDO_COPIES[0] + 8 * (MAX_LOGS as u64 + 2) <= D_REDO_COPIES[1]);
const _: () = assert!(D_REDO_COPIES[0].is_multiple_of(64) && D_REDO_COPIES[1].is_multiple_of(64));
const _: () = assert!(D_REDO_COPIES[1] + 8 * (MAX_LOGS as u64 + 2) <= PAGE_SIZE_U64);
const _: () = assert!(D_HORIZON.is_multiple_of(8) && D_HORIZON + 8 <= D_REDO_COPIES[0]);

/// What the control page says about the logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Control {
    pub layout: LogLayout,
    pub cache: Cache,
    pub per_log_bytes: u64,
}

fn d_crc(words: &[u64]) -> u64 {
    let mut bytes = Vec::with_capacity(words.len() * 8);
    for w in words {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    u64::from(storage::crc::crc32c(&bytes)) ^ D_MAGIC
}

fn cache_code(c: Cache) -> u64 {
    match c {
        Cache::Volatile => 0,
        Cache::Durable => 1,
    }
}

/// The horizon word: `H` in the low 48 bits, 16 check bits above. One aligned word is the unit
/// the hardware persists atomically, so an update is never torn and a mismatch is damage.
pub(crate) fn horizon_word(h: u64) -> u64 {
    assert!(h <= MAX_GSN, "GSN horizon {h} past the 48-bit GSN space");
    h | (horizon_check(h) << GSN_BITS)
}

fn horizon_check(h: u64) -> u64 {
    u64::from(storage::crc::crc32c(&(h ^ D_MAGIC).to_le_bytes()) & 0xffff)
}

/// One copy of the redo points as bytes: `[seq][points...][crc32c of the rest, xor magic]`.
pub(super) fn redo_copy(seq: u64, points: &[u64]) -> Vec<u8> {
    let mut words = Vec::with_capacity(points.len() + 2);
    words.push(seq);
    words.extend_from_slice(points);
    words.push(d_crc(&words));
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Bytes of each of `n` logs carved from `log_bytes`.
pub(crate) fn per_log_bytes(log_bytes: u64, layout: LogLayout) -> u64 {
    (log_bytes / layout.logs()) / PAGE_SIZE_U64 * PAGE_SIZE_U64
}

/// Writes (persisted) the extension for a region being formatted; `control` is the control
/// page's offset. A central layout only clears a stale extension (fresh regions read zeros).
pub(crate) fn format_control(r: &Region, control: u64, c: Control) {
    if c.layout == LogLayout::Central {
        if r.read_u64(control + D_LINE) != 0 {
            r.write(control + D_LINE, &[0u8; 48]);
            r.persist(control + D_LINE, 48);
        }
        return;
    }
    let (kind, n) = c.layout.code();
    let words = [D_MAGIC, kind, n, cache_code(c.cache), c.per_log_bytes];
    let mut line = [0u8; 48];
    for (i, w) in words.iter().chain([d_crc(&words)].iter()).enumerate() {
        line[i * 8..][..8].copy_from_slice(&w.to_le_bytes());
    }
    // Horizon and redo points first: the line (persisted last) is what makes them count.
    r.write_u64(control + D_HORIZON, horizon_word(0));
    r.persist(control + D_HORIZON, 8);
    let copy = redo_copy(0, &vec![0; n as usize]);
    for at in D_REDO_COPIES {
        r.write(control + at, &copy);
        r.persist(control + at, copy.len() as u64);
    }
    r.write(control + D_LINE, &line);
    r.persist(control + D_LINE, 48);
}

/// Reads and validates the extension against the options (`log_bytes` is the whole log area).
pub(crate) fn read_control(
    r: &Region,
    control: u64,
    log_bytes: u64,
    want: LogLayout,
    want_cache: Cache,
) -> Result<Control> {
    let found = read_layout(r, control, log_bytes)?;
    let have = found.map_or(LogLayout::Central, |c| c.layout);
    let have_cache = found.map_or(Cache::Volatile, |c| c.cache);
    if have != want || (have != LogLayout::Central && have_cache != want_cache) {
        let cache = Cache::name;
        return Err(DbError::Invalid(format!(
            "engine wal: this region was formatted with log={have} cache={}; open it with \
             --engine-opt log={have} --engine-opt cache={} (it was asked for log={want} \
             cache={})",
            cache(have_cache),
            cache(have_cache),
            cache(want_cache)
        )));
    }
    Ok(found.unwrap_or(Control {
        layout: LogLayout::Central,
        cache: Cache::Volatile,
        per_log_bytes: log_bytes,
    }))
}

/// The extension as found (None: a central log), every field validated.
pub(crate) fn read_layout(r: &Region, control: u64, log_bytes: u64) -> Result<Option<Control>> {
    let line = r.read(control + D_LINE, 48);
    let w: Vec<u64> = (0..6).map(|i| get_u64(line, i * 8)).collect();
    let found = if w[0] == 0 && w[5] == 0 {
        None
    } else if w[0] == D_MAGIC_V1 {
        return Err(DbError::Format(
            "wal: this region's distributed log was formatted by an earlier nvmdb (unchecked GSN \
             horizon and redo points); recreate it with this version"
                .into(),
        ));
    } else if w[0] != D_MAGIC || d_crc(&w[..5]) != w[5] {
        return Err(DbError::Corrupt("wal control page: the log-layout line is damaged".into()));
    } else {
        let layout = match (w[1], u32::try_from(w[2])) {
            (1, Ok(n)) if (1..=MAX_LOGS).contains(&n) => LogLayout::Txn(n),
            (2, Ok(n)) if (1..=MAX_LOGS).contains(&n) => LogLayout::Page(n),
            _ => {
                return Err(DbError::Corrupt(format!(
                    "wal control page: log kind {} with {} logs",
                    w[1], w[2]
                )))
            }
        };
        let cache = match w[3] {
            0 => Cache::Volatile,
            1 => Cache::Durable,
            other => return Err(DbError::Corrupt(format!("wal control page: cache mode {other}"))),
        };
        let per = w[4];
        if per == 0
            || !per.is_multiple_of(PAGE_SIZE_U64)
            || per.checked_mul(layout.logs()).is_none_or(|t| t > log_bytes)
        {
            return Err(DbError::Corrupt(format!(
                "wal control page: {} logs of {per} bytes do not fit {log_bytes} bytes",
                layout.logs()
            )));
        }
        Some(Control { layout, cache, per_log_bytes: per })
    };
    Ok(found)
}

/// The GSN horizon `H`, its check bits verified.
pub(crate) fn read_horizon(r: &Region, control: u64) -> Result<u64> {
    let w = r.read_u64(control + D_HORIZON);
    let h = w & MAX_GSN;
    if w >> GSN_BITS != horizon_check(h) {
        return Err(DbError::Corrupt(format!(
            "wal control page: the GSN horizon word {w:#018x} is damaged (its check bits do not \
             match); recovery cannot tell which log records are durable"
        )));
    }
    Ok(h)
}

/// The redo points as found: the newest valid copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RedoPoints {
    /// Checkpoints since format that moved them (the copy's sequence number).
    pub seq: u64,
    /// Each log's redo point.
    pub points: Vec<u64>,
    /// Set when one copy did not verify (a torn update or damage) and the other was used.
    pub note: Option<String>,
}

/// Reads both copies of the redo points of `n` logs; the valid one with the higher sequence
/// number wins; neither valid is `Corrupt`.
pub(crate) fn read_redo(r: &Region, control: u64, n: usize) -> Result<RedoPoints> {
    let parse = |at: u64| {
        let bytes = r.read(control + at, 8 * (n + 2));
        let words: Vec<u64> = (0..n + 2).map(|i| get_u64(bytes, i * 8)).collect();
        (d_crc(&words[..=n]) == words[n + 1]).then(|| (words[0], words[1..=n].to_vec()))
    };
    match (parse(D_REDO_COPIES[0]), parse(D_REDO_COPIES[1])) {
        (Some(a), Some(b)) => {
            let (seq, points) = if b.0 > a.0 { b } else { a };
            Ok(RedoPoints { seq, points, note: None })
        }
        (Some((seq, points)), None) | (None, Some((seq, points))) => Ok(RedoPoints {
            seq,
            points,
            note: Some(format!(
                "one copy of the redo points did not verify (a torn checkpoint or damage); \
                 used the other (checkpoint {seq})"
            )),
        }),
        (None, None) => Err(DbError::Corrupt(
            "wal control page: both copies of the per-log redo points are damaged; recovery \
             cannot tell where the logs start"
                .into(),
        )),
    }
}
