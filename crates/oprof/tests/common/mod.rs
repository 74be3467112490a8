//! What the integration tests share: streams made of records, and running the `oprof` binary.

use oprofile_common::event::Record;
use std::process::Command;

/// `records` as a 32-bit little-endian stream (ARM32's `/dev/oprofile/buffer`).
pub fn words(records: &[Record]) -> Vec<u8> {
    let mut out = vec![];
    for r in records {
        let mut w = [0usize; 7];
        let n = r.encode(&mut w).unwrap();
        for x in &w[..n] {
            out.extend_from_slice(&(*x as u32).to_le_bytes());
        }
    }
    out
}

/// Runs `oprof ARGS`: whether it succeeded, its stdout and its stderr.
pub fn oprof(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_oprof")).args(args).output().unwrap();
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}
