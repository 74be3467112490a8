//! Every command that reads a stream refuses one that is not as the module writes it: one
//! error line naming the file and the byte offset of the first bad word, exit status 2;
//! `--force` decodes around the bad words and says what it skipped (issue 24).

use oprofile_common::event::Record;
use std::path::Path;

mod common;
use common::{oprof_status, words};
use oprof::fixtures::noise;

/// A stream as the module writes one: a pass on CPU 0 with two kernel samples of counter 0.
fn good() -> Vec<Record> {
    vec![
        Record::CpuSwitch { cpu: 0 },
        Record::KernelEnter,
        Record::CtxSwitch {
            pid: 9,
            tgid: 9,
            app_cookie: 0,
        },
        Record::Sample {
            pc: 0xc010_0004,
            event: 0,
        },
        Record::Sample {
            pc: 0xc010_0008,
            event: 0,
        },
    ]
}

/// Runs `oprof ARGS` and checks the refusal: status 2, one line naming `file` and `offset`.
fn refused(args: &[&str], file: &Path, offset: u64) -> String {
    let (code, out, err) = oprof_status(args);
    assert_eq!(code, Some(2), "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?}: nothing on stdout: {out}");
    let want = format!("oprof: error: {}: byte offset {offset}: ", file.display());
    assert!(
        err.starts_with(&want) && err.lines().count() == 1,
        "{args:?}: {err}"
    );
    err
}

#[test]
fn every_stream_command_refuses_random_and_zero_bytes() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    std::fs::write(p("rand"), noise(1000)).unwrap();
    std::fs::write(p("zero"), vec![0u8; 1000]).unwrap();
    std::fs::write(p("good"), words(&good())).unwrap();
    for f in ["rand", "zero"] {
        let s = p(f).display().to_string();
        let g = p("good").display().to_string();
        let out = p("out").display().to_string();
        for args in [
            vec!["report", &s],
            vec!["report", &s, "--json"],
            vec!["report", &s, "--pprof", &out],
            vec!["annotate", &s],
            vec!["decode", &s],
            vec!["diff", &g, &s],
            vec!["synth", &s, &out, "--samples", "10"],
        ] {
            let err = refused(&args, &p(f), 0);
            assert!(err.contains("the stream begins with a sample"), "{err}");
        }
    }
    // The good stream passes every one of them.
    let g = p("good").display().to_string();
    for args in [
        vec!["report", &g],
        vec!["decode", &g],
        vec!["annotate", &g],
        vec!["diff", &g, &g],
    ] {
        let (code, _, err) = oprof_status(&args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
    }
}

#[test]
fn force_decodes_around_bad_words_and_says_what_it_skipped() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("s.buf");
    // Garbage, a good pass, a sample of counter 77 (its counter at byte 40 + 64 + 4), a good pass.
    let mut b = vec![0u8; 40];
    b.extend(words(&good()));
    b.extend(words(&[Record::Sample {
        pc: 0xc010_000c,
        event: 77,
    }]));
    b.extend(words(&good()));
    std::fs::write(&f, &b).unwrap();
    let s = f.display().to_string();
    let err = refused(&["report", &s], &f, 0);
    assert!(err.ends_with("; --force skips bad records\n"), "{err}");
    let (code, out, err) = oprof_status(&["report", &s, "--force", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["total"], 4);
    assert_eq!(j["skipped"]["bytes"], 48);
    let at: Vec<_> = j["skipped"]["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["offset"].clone(), r["bad_offset"].clone()))
        .collect();
    assert_eq!(at, [(0.into(), 0.into()), (104.into(), 108.into())]);
    assert!(
        err.contains(&format!(
            "oprof: note: {s}: --force skipped 48 bytes in 2 ranges"
        )),
        "{err}"
    );
    let (code, out, _) = oprof_status(&["decode", &s, "--force"]);
    assert_eq!(code, Some(0));
    assert!(
        out.starts_with("       0: skipped 40 bytes: the stream begins with a sample"),
        "{out}"
    );
    assert!(
        out.contains("     104: skipped 8 bytes: sample of counter 77"),
        "{out}"
    );
    assert!(out.contains("     112: CpuSwitch { cpu: 0 }"), "{out}");
    // Without --force, decode names the first bad word only.
    std::fs::write(&f, &b[40..]).unwrap();
    refused(&["decode", &s], &f, 68);
}

#[test]
fn an_8_byte_stream_read_as_4_bytes_is_refused_with_a_hint() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("a64.buf");
    let mut b = vec![];
    for r in good() {
        let mut w = [0usize; 7];
        let n = r.encode(&mut w).unwrap();
        b.extend(w[..n].iter().flat_map(|&x| (x as u64).to_le_bytes()));
    }
    std::fs::write(&f, &b).unwrap();
    let s = f.display().to_string();
    let err = refused(&["report", &s], &f, 4);
    assert!(
        err.contains("it is a valid stream of 8-byte words"),
        "{err}"
    );
    let (code, _, err) = oprof_status(&["report", &s, "--word-size", "8"]);
    assert_eq!(code, Some(0), "{err}");
}

/// A timer-mode session directory of `records` (session.json with its word size and size).
fn session(dir: &Path, records: &[Record], bytes_said: Option<u64>) {
    std::fs::create_dir_all(dir).unwrap();
    let b = words(records);
    std::fs::write(dir.join("samples"), &b).unwrap();
    let n = bytes_said.unwrap_or(b.len() as u64);
    let json = format!(
        r#"{{"format": 1, "oprof_version": "0.1.0", "cpu_type": "timer", "pointer_size": 4,
            "kernel": {{"release": "", "version": "", "machine": "", "nodename": ""}}, "cpus": 1,
            "counters": [], "timer_hz": null,
            "settings": {{"buffer_size": 1024, "buffer_watershed": 0, "cpu_buffer_size": 16, "backtrace_depth": 0}},
            "start": {{"unix_ns": 0, "utc": ""}}, "stop": {{"unix_ns": 0, "utc": ""}}, "duration_ns": 0,
            "command": null, "exit_status": null, "ended_by": "command", "command_line": [],
            "totals": {{"samples": 0, "sample_received": 0, "lost": 0, "not_taken": 0, "bytes": {n}, "reads": 1}}}}"#
    );
    std::fs::write(dir.join("session.json"), json).unwrap();
}

#[test]
fn a_session_directory_is_checked_against_its_session_json() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("ses");
    let s = dir.display().to_string();
    session(&dir, &good(), None);
    let (code, out, err) = oprof_status(&["report", &s, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("\"total\": 2") && !out.contains("skipped"),
        "{out}"
    );
    // Timer mode samples counter 0 only.
    let mut recs = good();
    recs.push(Record::Sample {
        pc: 0xc010_000c,
        event: 1,
    });
    session(&dir, &recs, None);
    let err = refused(&["report", &s], &dir.join("samples"), 68);
    assert!(
        err.contains("sample of counter 1, not among counters 0 (session.json: timer mode)"),
        "{err}"
    );
    // --word-size against pointer_size, and the size session.json recorded.
    session(&dir, &good(), None);
    let (code, _, err) = oprof_status(&["report", &s, "--word-size", "8"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err,
        format!(
            "oprof: error: {}: pointer_size is 4, not --word-size 8\n",
            dir.join("session.json").display()
        )
    );
    session(&dir, &good(), Some(100));
    refused(&["report", &s], &dir.join("samples"), 64);
    let (code, _, err) = oprof_status(&["report", &s, "--force"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("byte offset 64") && err.contains("--force: decoded as it is"),
        "{err}"
    );
}
