//! The modelled devices charge Table 2.1's costs for known access patterns, and the O_DIRECT
//! file device reads back what it wrote (or says clearly that the file system refuses O_DIRECT).
//! Would catch: a sequential read charged as random, a seek that ignores distance, rotation
//! charged on the SSD, or a file device silently served from the page cache.

use queryopt::device::{BlockDevice, DeviceProfile, FileDevice, MemDevice, Modelled, PageBuf};

fn filled(pages: usize) -> (MemDevice, PageBuf) {
    let mut dev = MemDevice::new();
    let mut buf = PageBuf::new(pages);
    for p in 0..pages {
        buf.page_mut(p).fill(p as u8);
    }
    dev.write_pages(0, pages, &buf).unwrap();
    (dev, buf)
}

#[test]
fn table_2_1_random_reads() {
    let disk = DeviceProfile::disk(10_000_000);
    // 7 ms average seek + 3 ms half rotation (10K rpm) + 4 KiB at 120 MB/s.
    assert!((disk.random_read_ns() - (10e6 + 4096.0 / 120e6 * 1e9)).abs() < 1.0);
    let ssd = DeviceProfile::ssd();
    assert!((ssd.random_read_ns() - (90e3 + 4096.0 / 190e6 * 1e9)).abs() < 1.0);
}

#[test]
fn sequential_random_and_pass_over_on_the_disk() {
    let (inner, mut buf) = filled(4096);
    let profile = DeviceProfile::disk(10_000_000);
    let mut dev = Modelled::new(inner, profile.clone());
    let t = profile.transfer_ns(1.0);
    // First request: unknown head position, a full random read of 8 pages.
    dev.read_pages(0, 8, &mut buf).unwrap();
    let mut expect = 10e6 + 8.0 * t;
    // Continues where it ended: transfer only.
    dev.read_pages(8, 8, &mut buf).unwrap();
    expect += 8.0 * t;
    // Forward by 3 pages: cheaper to let them pass under the head than to seek.
    dev.read_pages(19, 1, &mut buf).unwrap();
    expect += 3.0 * t + t;
    // Backward: a short seek + half a rotation.
    dev.read_pages(0, 1, &mut buf).unwrap();
    expect += profile.seek_ns(20.0) + 3e6 + t;
    let s = dev.stats();
    assert!((s.modelled_io_ns as f64 - expect).abs() < 4.0, "{} vs {expect}", s.modelled_io_ns);
    assert_eq!((s.sequential_requests, s.random_requests), (1, 3));
    assert_eq!((s.pages_read, s.read_requests), (18, 4));
    assert!(profile.seek_ns(20.0) < 1e6, "a 20-page seek is nearly track-to-track");
}

#[test]
fn ssd_charges_access_latency_for_any_jump() {
    let (inner, mut buf) = filled(64);
    let profile = DeviceProfile::ssd();
    let mut dev = Modelled::new(inner, profile.clone());
    dev.read_pages(0, 4, &mut buf).unwrap();
    dev.read_pages(5, 1, &mut buf).unwrap();
    dev.read_pages(6, 1, &mut buf).unwrap();
    let expect = 2.0 * 90e3 + profile.transfer_ns(6.0);
    assert!((dev.stats().modelled_io_ns as f64 - expect).abs() < 3.0);
    assert_eq!(buf.page(0)[0], 6);
}

#[test]
fn file_device_with_o_direct_round_trips() {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("queryopt-test-{}.tbl", std::process::id()));
    let mut dev = match FileDevice::create(&path, false) {
        Ok(d) => d,
        Err(e) => {
            // tmpfs /tmp, or a file system without O_DIRECT: the refusal must be clear.
            let e = e.to_string();
            assert!(e.contains("O_DIRECT") || e.contains("in memory"), "{e}");
            return;
        }
    };
    assert!(dev.direct());
    let (_, buf) = filled(16);
    dev.write_pages(0, 16, &buf).unwrap();
    let mut back = PageBuf::new(4);
    dev.read_pages(12, 4, &mut back).unwrap();
    assert_eq!(back.page(3)[100], 15);
    assert!(dev.read_pages(15, 2, &mut back).is_err(), "past the end");
    assert_eq!(dev.stats().pages_read, 4);
    drop(dev);
    assert!(!path.exists(), "removed on drop");
    if std::path::Path::new("/dev/shm").is_dir() {
        let shm = std::path::Path::new("/dev/shm").join(format!("qo-{}", std::process::id()));
        let err = FileDevice::create(&shm, false).err().expect("tmpfs is refused");
        assert!(err.to_string().contains("keeps files in memory"), "{err}");
        let buffered = FileDevice::create(&shm, true).unwrap();
        assert!(!buffered.direct());
    }
}
