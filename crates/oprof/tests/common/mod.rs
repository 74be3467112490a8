//! What the integration tests share: streams made of records (the crate's [`oprof::fixtures`],
//! which the unit tests use too), and running the `oprof` binary.

use std::process::Command;

pub use oprof::fixtures::bytes32 as words;

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
