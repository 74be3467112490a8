//! `oprof report` of a session with user-stack snapshots (`oprof record -g`) in bounded memory:
//! the stream is unwound and counted as it is read, so eight times the samples take about the
//! same peak RSS (the child's, from `wait4`), not eight times the stream.

use oprofile_common::event::{user_maps_header, user_stack_header, Record};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::words;

/// Stack words of each snapshot (2 KiB, as `-g`'s default-sized copies).
const STACK_WORDS: usize = 512;
/// Samples of one sync pass.
const PASS: usize = 100;

/// One sync pass of `PASS` user-mode samples of task 9 in image 1, each with a snapshot.
fn pass() -> Vec<u8> {
    let mut b = words(&[
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 9,
            tgid: 9,
            app_cookie: 1,
        },
        Record::KernelExit,
        Record::CookieSwitch { cookie: 1 },
    ]);
    let le =
        |w: &[usize]| -> Vec<u8> { w.iter().flat_map(|&x| (x as u32).to_le_bytes()).collect() };
    b.extend(le(&user_maps_header(9, 1)));
    b.extend(le(&[0x1_0000, 0x2_0000, 0, 1]));
    for i in 0..PASS {
        let off = 0x400 + 4 * (i % 16);
        b.extend(words(&[
            Record::TraceBegin,
            Record::Sample {
                pc: off as u64,
                event: 1,
            },
        ]));
        b.extend(le(&user_stack_header(STACK_WORDS)));
        let mut regs = [0usize; 17];
        regs[13] = 0xbe00_0000;
        regs[15] = 0x1_0000 + off;
        regs[16] = 0x10;
        b.extend(le(&regs));
        b.extend(le(&[0x1234_5678; STACK_WORDS]));
    }
    b
}

/// A session of `passes` passes in `dir`; returns the stream's size in bytes.
fn write_session(dir: &Path, passes: usize) -> u64 {
    // Written pass by pass: the test's own peak RSS stays small, as the child's counts it (a
    // spawned child shares its parent's memory until it execs).
    let one = pass();
    std::fs::create_dir(dir).unwrap();
    let mut f = std::fs::File::create(dir.join("samples")).unwrap();
    for _ in 0..passes {
        f.write_all(&one).unwrap();
    }
    let len = (one.len() * passes) as u64;
    std::fs::write(dir.join("images"), "1 /nonexistent/app\n").unwrap();
    let json = r##"{"format": 1, "oprof_version": "0.1.0", "cpu_type": "arm/armv7-ca15", "pointer_size": 4,
        "kernel": {"release": "7.3.4", "version": "#1", "machine": "armv7l", "nodename": "board"},
        "cpus": 1,
        "counters": [{"counter": 1, "event": "CPU_CYCLES", "event_number": 255, "count": 1000000,
                      "unit_mask": 0, "kernel": true, "user": true, "total": 1}],
        "timer_hz": null,
        "settings": {"buffer_size": 131072, "buffer_watershed": 32768, "cpu_buffer_size": 8192,
                     "backtrace_depth": 16, "user_stack_size": 2048},
        "start": {"unix_ns": 0, "utc": "1970-01-01T00:00:00.000Z"}, "stop": {"unix_ns": 1, "utc": "x"},
        "duration_ns": 1, "command": ["./app"], "exit_status": 0, "ended_by": "command",
        "command_line": ["oprof", "record"], "totals": {"samples": SAMPLES, "sample_received": SAMPLES,
        "lost": 0, "not_taken": 0, "bytes": BYTES, "reads": 1}}"##;
    let json = json
        .replace("SAMPLES", &(passes * PASS).to_string())
        .replace("BYTES", &len.to_string());
    std::fs::write(dir.join("session.json"), json).unwrap();
    len
}

/// Runs `oprof report --json DIR`: its peak RSS in bytes and the samples it counted.
// The child is reaped by `wait4`, which also gives its resource usage.
#[allow(clippy::zombie_processes)]
fn report_peak_rss(dir: &Path) -> (u64, u64) {
    let err = dir.with_extension("stderr");
    let out = dir.with_extension("json");
    let child = Command::new(env!("CARGO_BIN_EXE_oprof"))
        .args(["report", "--json"])
        .arg(dir)
        .env("OPROF_THREADS", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: all-zero is a valid `rusage` (integers and timevals).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unreaped child (`Child` is never waited for, so it is reaped once,
    // here); `status` and `ru` are valid for writes.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let text = std::fs::read_to_string(&err).unwrap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "oprof report {}: status {status}: {text}",
        dir.display()
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    // ru_maxrss is in KiB on Linux.
    (ru.ru_maxrss as u64 * 1024, j["total"].as_u64().unwrap())
}

/// 8× the samples take less than a quarter of the extra stream bytes in extra peak RSS. Reading
/// the whole stream (as `Stream::read` + `expand` did: ~3× the stream) fails it by far.
#[test]
fn report_of_snapshot_session_has_bounded_memory() {
    let d = tempfile::tempdir().unwrap();
    let (small, big) = (d.path().join("small"), d.path().join("big"));
    let n = 20;
    let small_bytes = write_session(&small, n);
    let big_bytes = write_session(&big, 8 * n);
    assert!(big_bytes - small_bytes > 25 << 20, "{big_bytes}");
    let (small_rss, small_total) = report_peak_rss(&small);
    let (big_rss, big_total) = report_peak_rss(&big);
    assert_eq!(
        (small_total, big_total),
        ((n * PASS) as u64, (8 * n * PASS) as u64),
        "every sample counted"
    );
    let extra = big_bytes - small_bytes;
    assert!(
        big_rss < small_rss + extra / 4,
        "peak RSS {small_rss} B for {small_bytes} B of stream, {big_rss} B for {big_bytes} B"
    );
}
