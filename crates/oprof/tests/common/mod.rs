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
#[allow(dead_code)]
pub fn oprof(args: &[&str]) -> (bool, String, String) {
    let (code, out, err) = oprof_status(args);
    (code == Some(0), out, err)
}

/// Runs `oprof ARGS`: its exit status, stdout and stderr.
#[allow(dead_code)]
pub fn oprof_status(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_oprof"))
        .args(args)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (o.status.code(), text(&o.stdout), text(&o.stderr))
}
