//! Cache-line write-back instructions. The instruction is chosen once at region open from what
//! the CPU reports through CPUID (CLWB, else CLFLUSHOPT, else CLFLUSH) and can be overridden.
//! Stable Rust has intrinsics only for CLFLUSH, so CLWB and CLFLUSHOPT use inline assembly.

use serde::{Deserialize, Serialize};

pub const CACHE_LINE: u64 = 64;

/// The cache lines a byte range touches: every line holding at least one byte of it, and no
/// other. The one place a byte range becomes lines: statistics, the wear map, the timing model,
/// the crash simulator and the hardware flush loop all take their lines from here, so the lines
/// the tests check are the lines the hardware flushes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineSpan {
    /// Index of the first line (byte offset / [`CACHE_LINE`]).
    pub first: u64,
    /// Number of lines; 0 for an empty range.
    pub count: u64,
}

impl LineSpan {
    /// The line indices, in order.
    #[inline(always)]
    pub fn lines(self) -> std::ops::Range<u64> {
        self.first..self.first + self.count
    }
}

/// The lines `[offset, offset + len)` touches. The caller has bounds-checked the range, so
/// `offset + len` does not overflow.
#[inline(always)]
pub fn line_span(offset: u64, len: u64) -> LineSpan {
    let first = offset / CACHE_LINE;
    if len == 0 {
        return LineSpan { first, count: 0 };
    }
    let last = (offset + len - 1) / CACHE_LINE;
    LineSpan { first, count: last - first + 1 }
}

/// How a dirty cache line is written back to the persistence domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlushKind {
    /// Write back without invalidating (Skylake-SP and later).
    Clwb,
    /// Weakly ordered flush with invalidation.
    Clflushopt,
    /// Strongly ordered flush with invalidation (every x86-64 CPU).
    Clflush,
    /// No instruction: durable caches (eADR) or media without persistence (`dram`).
    None,
}

impl FlushKind {
    pub fn name(self) -> &'static str {
        match self {
            FlushKind::Clwb => "clwb",
            FlushKind::Clflushopt => "clflushopt",
            FlushKind::Clflush => "clflush",
            FlushKind::None => "none",
        }
    }

    pub fn parse(s: &str) -> Option<FlushKind> {
        match s.to_ascii_lowercase().as_str() {
            "clwb" => Some(FlushKind::Clwb),
            "clflushopt" => Some(FlushKind::Clflushopt),
            "clflush" => Some(FlushKind::Clflush),
            "none" => Some(FlushKind::None),
            _ => None,
        }
    }
}

impl std::str::FromStr for FlushKind {
    type Err = crate::PmemError;

    fn from_str(s: &str) -> Result<FlushKind, crate::PmemError> {
        FlushKind::parse(s).ok_or_else(|| {
            crate::PmemError::InvalidOption(format!(
                "unknown flush instruction `{s}` (expected clwb, clflushopt, clflush or none)"
            ))
        })
    }
}

impl std::fmt::Display for FlushKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the CPU offers, read from CPUID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CpuFlushSupport {
    pub clwb: bool,
    pub clflushopt: bool,
    pub clflush: bool,
}

impl CpuFlushSupport {
    pub fn detect() -> CpuFlushSupport {
        #[cfg(target_arch = "x86_64")]
        {
            // CPUID is safe to call on every x86-64 CPU.
            let leaf1 = core::arch::x86_64::__cpuid(1);
            let max_leaf = core::arch::x86_64::__cpuid(0).eax;
            let leaf7_ebx =
                if max_leaf >= 7 { core::arch::x86_64::__cpuid_count(7, 0).ebx } else { 0 };
            CpuFlushSupport {
                clflush: leaf1.edx & (1 << 19) != 0,
                clflushopt: leaf7_ebx & (1 << 23) != 0,
                clwb: leaf7_ebx & (1 << 24) != 0,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            CpuFlushSupport { clwb: false, clflushopt: false, clflush: false }
        }
    }

    pub fn supports(self, kind: FlushKind) -> bool {
        match kind {
            FlushKind::Clwb => self.clwb,
            FlushKind::Clflushopt => self.clflushopt,
            FlushKind::Clflush => self.clflush,
            FlushKind::None => true,
        }
    }

    /// The best instruction available: CLWB, else CLFLUSHOPT, else CLFLUSH, else none.
    pub fn best(self) -> FlushKind {
        select_flush(self, None).unwrap_or(FlushKind::None)
    }
}

/// Chooses the flush instruction: an explicit request must be supported; otherwise the best
/// available one is taken.
pub fn select_flush(
    cpu: CpuFlushSupport,
    requested: Option<FlushKind>,
) -> Result<FlushKind, crate::PmemError> {
    match requested {
        Some(kind) if cpu.supports(kind) => Ok(kind),
        Some(kind) => Err(crate::PmemError::FlushUnsupported(kind.name())),
        None => Ok([FlushKind::Clwb, FlushKind::Clflushopt, FlushKind::Clflush]
            .into_iter()
            .find(|k| cpu.supports(*k))
            .unwrap_or(FlushKind::None)),
    }
}

/// Writes back one cache line.
///
/// # Safety
/// `line` must point into mapped memory and `kind` must be supported by this CPU.
#[inline(always)]
pub unsafe fn flush_line(kind: FlushKind, line: *const u8) {
    #[cfg(target_arch = "x86_64")]
    match kind {
        // SAFETY: the caller guarantees a mapped address and CPU support.
        FlushKind::Clwb => unsafe {
            core::arch::asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags));
        },
        // SAFETY: as above.
        FlushKind::Clflushopt => unsafe {
            core::arch::asm!("clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags));
        },
        // SAFETY: as above.
        FlushKind::Clflush => unsafe { core::arch::x86_64::_mm_clflush(line) },
        FlushKind::None => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (kind, line);
}

/// Store fence: orders earlier flushes before later stores (the persist barrier's hardware part).
#[inline(always)]
pub fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE has no memory-safety preconditions.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_prefers_clwb_then_clflushopt_then_clflush() {
        let all = CpuFlushSupport { clwb: true, clflushopt: true, clflush: true };
        assert_eq!(select_flush(all, None).unwrap(), FlushKind::Clwb);
        let no_clwb = CpuFlushSupport { clwb: false, ..all };
        assert_eq!(select_flush(no_clwb, None).unwrap(), FlushKind::Clflushopt);
        let only_clflush = CpuFlushSupport { clwb: false, clflushopt: false, clflush: true };
        assert_eq!(select_flush(only_clflush, None).unwrap(), FlushKind::Clflush);
        let nothing = CpuFlushSupport { clwb: false, clflushopt: false, clflush: false };
        assert_eq!(select_flush(nothing, None).unwrap(), FlushKind::None);
    }

    #[test]
    fn explicit_request_must_be_supported() {
        let only_clflush = CpuFlushSupport { clwb: false, clflushopt: false, clflush: true };
        assert!(select_flush(only_clflush, Some(FlushKind::Clwb)).is_err());
        assert_eq!(
            select_flush(only_clflush, Some(FlushKind::Clflush)).unwrap(),
            FlushKind::Clflush
        );
        assert_eq!(select_flush(only_clflush, Some(FlushKind::None)).unwrap(), FlushKind::None);
    }

    #[test]
    fn every_supported_instruction_executes() {
        let cpu = CpuFlushSupport::detect();
        let buf = vec![7u8; 256];
        for kind in [FlushKind::Clwb, FlushKind::Clflushopt, FlushKind::Clflush, FlushKind::None] {
            if cpu.supports(kind) {
                // SAFETY: buf is live memory and the CPU supports `kind`.
                unsafe { flush_line(kind, buf.as_ptr().wrapping_add(64)) };
            }
        }
        store_fence();
        assert_eq!(buf[64], 7);
    }

    #[test]
    fn line_span_counts_every_line_a_byte_of_the_range_is_in() {
        let lines = |offset, len| line_span(offset, len).lines().collect::<Vec<_>>();
        assert_eq!(lines(0, 0), Vec::<u64>::new());
        assert_eq!(lines(70, 0), Vec::<u64>::new());
        assert_eq!(lines(0, 1), [0]);
        assert_eq!(lines(63, 1), [0]);
        assert_eq!(lines(64, 64), [1]);
        assert_eq!(lines(63, 2), [0, 1]);
        assert_eq!(lines(0, 128), [0, 1]);
        assert_eq!(lines(1, 128), [0, 1, 2]);
    }

    #[test]
    fn names_round_trip() {
        for kind in [FlushKind::Clwb, FlushKind::Clflushopt, FlushKind::Clflush, FlushKind::None] {
            assert_eq!(FlushKind::parse(kind.name()), Some(kind));
        }
        assert_eq!(FlushKind::parse("sfence"), None);
    }
}
