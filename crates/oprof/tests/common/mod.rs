//! What the integration tests share: streams made of records (the crate's [`oprof::fixtures`],
//! which the unit tests use too), and running the `oprof` binary.

use std::path::Path;
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

/// Runs `PROG ARGS` in `dir` (a compiler or linker making a test program); panics if it fails.
#[allow(dead_code)]
pub fn tool(dir: &Path, prog: &str, args: &[&str]) {
    let st = Command::new(prog)
        .current_dir(dir)
        .args(args)
        .status()
        .expect(prog);
    assert!(st.success(), "{prog} {args:?}");
}

/// (build-id hex, file offset of `hot` + 4) of the ELF file `exe`.
#[allow(dead_code)]
pub fn facts(exe: &Path) -> (String, u64) {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let data = std::fs::read(exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let id: String = f
        .build_id()
        .unwrap()
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let va = (f
        .symbols()
        .find(|s| s.name() == Ok("hot"))
        .unwrap()
        .address()
        & !1)
        + 4;
    let g = f
        .segments()
        .find(|g| va >= g.address() && va - g.address() < g.file_range().1)
        .unwrap();
    (id, va - g.address() + g.file_range().0)
}

/// Writes `s.buf` (one user sample of task 3 at file offset `off` of image 1) and `s.images`
/// (`1 /bin/p`) into `d`: the stream the debug-file tests report.
#[allow(dead_code)]
pub fn one_sample_stream(d: &Path, off: u64) {
    use oprofile_common::event::Record;
    let recs = [
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 3,
            tgid: 3,
            app_cookie: 1,
        },
        Record::KernelExit,
        Record::CookieSwitch { cookie: 1 },
        Record::Sample { pc: off, event: 0 },
    ];
    std::fs::write(d.join("s.buf"), words(&recs)).unwrap();
    std::fs::write(d.join("s.images"), "1 /bin/p\n").unwrap();
}
