//! Regression (issue 37: nothing a user can do may panic): `nvmdb … | head` closed stdout under
//! a command that prints many lines, and `print!` panicked with "failed printing to stdout:
//! Broken pipe". Would catch SIGPIPE left ignored (Rust's default).

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["sweep", "--dry-run", "--out"])
        .arg(std::env::temp_dir().join(format!("nvmdb-broken-pipe-{}", std::process::id())))
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the nvmdb binary runs");
    // Read one chunk, then close the pipe as `head` does.
    let mut first = [0u8; 64];
    let mut out = child.stdout.take().expect("stdout");
    let n = out.read(&mut first).expect("some output");
    assert!(n > 0, "the dry run prints its points");
    drop(out);
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("stderr");
    let status = child.wait().expect("it exits");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(status.code(), Some(101), "not a panic's status: {status:?} {stderr}");
}
