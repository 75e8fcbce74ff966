//! Cost of the hierarchical bitmap set (`pmem::DirtyLines`, Pelley thesis §4.3.2) at several
//! database sizes: ns per insert (a fresh line, and a line already dirty), and ns per dirty line
//! to iterate and clear, for batches that dirty 0.1% and 1% of the lines.
//! Run: `cargo run --release -p nvmdb-pmem --example dirty_bitmap`.

use pmem::DirtyLines;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    println!(
        "{:>10} {:>8} {:>12} {:>12} {:>14} {:>12}",
        "db", "dirty", "insert ns", "again ns", "iterate ns/ln", "clear ns/ln"
    );
    for size_mib in [64u64, 1024, 8192] {
        let bytes = size_mib << 20;
        let set = DirtyLines::new(bytes);
        let lines = bytes / 64;
        for fraction in [0.001, 0.01] {
            let n = (lines as f64 * fraction) as u64;
            // Scattered lines, as random row updates dirty them.
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            let picks: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % lines) * 64
                })
                .collect();
            let t = Instant::now();
            for &p in &picks {
                set.mark(p, 8);
            }
            let insert = t.elapsed().as_nanos() as f64 / n as f64;
            let t = Instant::now();
            for &p in &picks {
                set.mark(p, 8);
            }
            let again = t.elapsed().as_nanos() as f64 / n as f64;
            let dirty = set.count();
            let t = Instant::now();
            black_box(set.lines());
            let iterate = t.elapsed().as_nanos() as f64 / dirty as f64;
            let t = Instant::now();
            set.clear();
            let clear = t.elapsed().as_nanos() as f64 / dirty as f64;
            println!(
                "{:>7} MiB {:>7.1}% {insert:>12.1} {again:>12.1} {iterate:>14.1} {clear:>12.1}",
                size_mib,
                fraction * 100.0
            );
        }
    }
}
