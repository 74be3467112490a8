//! `oprof report DIR` on a session directory as `oprof record` writes it: the stream, images,
//! modules, counters and word size come from the session; kernel and module symbols from its
//! kallsyms; a `--vmlinux`-less report names kernel functions; explicit options win.

use oprofile_common::event::Record;
use std::path::Path;
use std::process::Command;

mod common;
use common::{oprof, words};

fn write_session(dir: &Path) {
    let s = |pc| Record::Sample { pc, event: 1 };
    std::fs::write(
        dir.join("samples"),
        words(&[
            Record::CpuSwitch { cpu: 0 },
            Record::CtxSwitch {
                pid: 9,
                tgid: 9,
                app_cookie: 1,
            },
            Record::KernelEnter,
            s(0xc010_0004),
            s(0xc010_0008),
            s(0xc010_0104),
            s(0xbf00_0010),
            Record::KernelExit,
            Record::CookieSwitch { cookie: 1 },
            s(0x400),
        ]),
    )
    .unwrap();
    std::fs::write(dir.join("images"), "1 /bin/app\n").unwrap();
    std::fs::write(
        dir.join("proc_modules"),
        "optest 8192 0 - Live 0xbf000000 (O)\n",
    )
    .unwrap();
    std::fs::write(dir.join("module_sections"), "").unwrap();
    std::fs::write(
        dir.join("kallsyms"),
        "c0100000 T _stext\nc0100000 t read_zero\nc0100100 W arm_clear_user\nc0100100 T __clear_user_std\n\
         c0200000 T _etext\nbf000000 t optest_spin\t[optest]\n",
    )
    .unwrap();
    std::fs::write(dir.join("stats.json"), "{\"cpu0/sample_received\": 5}\n").unwrap();
    std::fs::write(
        dir.join("session.json"),
        r##"{"format": 1, "oprof_version": "0.1.0", "cpu_type": "arm/armv7-ca15", "pointer_size": 4,
            "kernel": {"release": "7.3.4", "version": "#1", "machine": "armv7l", "nodename": "board"},
            "cpus": 2,
            "counters": [{"counter": 1, "event": "CPU_CYCLES", "event_number": 255, "count": 1000000,
                          "unit_mask": 0, "kernel": true, "user": true, "total": 12345678}],
            "timer_hz": null,
            "settings": {"buffer_size": 131072, "buffer_watershed": 32768, "cpu_buffer_size": 8192, "backtrace_depth": 0},
            "start": {"unix_ns": 0, "utc": "1970-01-01T00:00:00.000Z"}, "stop": {"unix_ns": 1, "utc": "x"},
            "duration_ns": 2500000000, "command": ["./app", "--fast"], "exit_status": 0, "ended_by": "command",
            "command_line": ["oprof", "record"], "totals": {"samples": 5, "sample_received": 5, "lost": 0,
            "not_taken": 0, "bytes": 108, "reads": 1}}"##,
    )
    .unwrap();
}

#[test]
fn report_reads_a_session_directory() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("oprofile_data");
    std::fs::create_dir(&dir).unwrap();
    write_session(&dir);
    let p = dir.to_str().unwrap();
    let (ok, out, err) = oprof(&["report", p, "-l", "--json"]);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["total"], 5);
    let row = |img: &str, sym: &str| {
        j["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["image"] == img && r["symbol"] == sym)
            .map(|r| r["samples"].clone())
    };
    assert_eq!(
        row("vmlinux", "read_zero"),
        Some(2.into()),
        "kernel symbols from kallsyms: {out}"
    );
    assert_eq!(
        row("vmlinux", "__clear_user_std"),
        Some(1.into()),
        "alias rule: {out}"
    );
    assert_eq!(
        row("optest.ko", "optest_spin"),
        Some(1.into()),
        "module symbols from kallsyms: {out}"
    );
    assert_eq!(
        row("/bin/app", "(image not found)"),
        Some(1.into()),
        "images file of the session: {out}"
    );
    assert_eq!(
        j["counters"][0]["event"], "CPU_CYCLES",
        "counters named from session.json"
    );
    // The text view starts with the session line and the counted total.
    let (ok, text, err) = oprof(&["report", p]);
    assert!(ok, "{err}");
    assert!(
        text.starts_with(&format!(
            "Session {p}: Linux 7.3.4 armv7l, 2 CPUs, arm/armv7-ca15 CPU_CYCLES:1000000, 2.5 s of `./app --fast` (exit 0): 5 samples, 0 lost\n\
             Counter 1: CPU_CYCLES counted 12345678 events (one sample every 1000000)\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("Counter 1: 5 samples of CPU_CYCLES events, one every 1000000 events"),
        "{text}"
    );
    // The default directory is ./oprofile_data.
    let o = Command::new(env!("CARGO_BIN_EXE_oprof"))
        .args(["report", "--json"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("\"total\": 5"));
    // An archived image is used; explicit --images wins over the session's.
    std::fs::create_dir_all(dir.join("root/bin")).unwrap();
    std::fs::write(dir.join("root/bin/app"), "not an ELF").unwrap();
    let (_, out, _) = oprof(&["report", p, "-l", "--json"]);
    assert!(
        out.contains("(unreadable: not an ELF file"),
        "archived /bin/app found: {out}"
    );
    std::fs::write(d.path().join("imgs"), "1 /bin/other\n").unwrap();
    let (_, out, _) = oprof(&[
        "report",
        p,
        "-l",
        "--json",
        "--images",
        d.path().join("imgs").to_str().unwrap(),
    ]);
    assert!(out.contains("\"image\": \"/bin/other\""), "{out}");
    // A directory that is not a session, and a session without samples.
    let (ok, _, err) = oprof(&["report", d.path().to_str().unwrap()]);
    assert!(!ok && err.contains("not a session directory"), "{err}");
    std::fs::remove_file(dir.join("samples")).unwrap();
    let (ok, _, err) = oprof(&["report", p]);
    assert!(!ok && err.contains("no samples file"), "{err}");
    // A flight recorder (--max-size) killed before it joined its chunks: the way to join them.
    std::fs::create_dir(dir.join("samples.d")).unwrap();
    let (ok, _, err) = oprof(&["report", p]);
    assert!(
        !ok && err.contains("died before joining its chunks; `(umask 077; cat ")
            && err.contains("/samples.d/* > ")
            && err.trim_end().lines().count() == 1,
        "{err}"
    );
}

/// The session.json `oprof record` writes when the capture starts (state `recording`): no
/// totals, no stop.
const RECORDING_JSON: &str = r##"{"format": 1, "state": "recording", "oprof_version": "0.1.0",
    "cpu_type": "timer", "pointer_size": 4,
    "kernel": {"release": "7.3.4", "version": "#1", "machine": "armv7l", "nodename": "board"},
    "cpus": 1, "counters": [], "timer_hz": null,
    "settings": {"buffer_size": 131072, "buffer_watershed": 32768, "cpu_buffer_size": 8192, "backtrace_depth": 0},
    "start": {"unix_ns": 0, "utc": "1970-01-01T00:00:00.000Z"}, "stop": {"unix_ns": 0, "utc": ""},
    "duration_ns": 0, "command": ["./app"], "exit_status": null, "ended_by": "",
    "command_line": ["oprof", "record"], "totals": {"samples": 0, "sample_received": 0, "lost": 0,
    "not_taken": 0, "bytes": 0, "reads": 0}}"##;

#[test]
fn a_session_whose_recorder_died_is_reported_to_its_torn_end() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("crashed");
    std::fs::create_dir(&dir).unwrap();
    let s = |pc| Record::Sample { pc, event: 0 };
    let whole = words(&[
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 9,
            tgid: 9,
            app_cookie: 0,
        },
        Record::KernelEnter,
        s(0xc010_0004),
        s(0xc010_0008),
        s(0xc010_0104),
    ]);
    // The next CTX_SWITCH, 3 of its 7 words written, then half a word: the recorder was killed.
    let torn = words(&[Record::CtxSwitch {
        pid: 10,
        tgid: 10,
        app_cookie: 0,
    }]);
    let mut samples = whole.clone();
    samples.extend_from_slice(&torn[..14]);
    std::fs::write(dir.join("samples"), &samples).unwrap();
    std::fs::write(dir.join("session.json"), RECORDING_JSON).unwrap();
    let p = dir.to_str().unwrap();
    let (ok, out, err) = oprof(&["report", p, "--json"]);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["total"], 3, "the whole records' samples");
    assert!(
        err.contains("the recorder died while recording")
            && err.contains("no images, stats.json, proc_modules, module_sections, kallsyms"),
        "{err}"
    );
    let at = whole.len();
    assert!(
        err.contains(&format!(
            "byte offset {at}: the stream ends with a torn record (14 bytes"
        )),
        "{err}"
    );
    // The same file in a complete session is refused: only a dead recorder leaves a torn end.
    let complete = RECORDING_JSON
        .replace(r#""state": "recording", "#, "")
        .replace(r#""bytes": 0"#, &format!(r#""bytes": {}"#, samples.len()));
    std::fs::write(dir.join("session.json"), &complete).unwrap();
    let (ok, _, err) = oprof(&["report", p]);
    assert!(!ok && err.contains("ends inside a record"), "{err}");
    // A bad word before the end is refused in a crashed session too.
    let mut bad = samples.clone();
    bad[4..8].copy_from_slice(&99u32.to_le_bytes()); // CPU_SWITCH's code
    std::fs::write(dir.join("samples"), &bad).unwrap();
    std::fs::write(dir.join("session.json"), RECORDING_JSON).unwrap();
    let (ok, _, err) = oprof(&["report", p]);
    assert!(
        !ok && err.contains("byte offset 4: unknown escape code 99"),
        "{err}"
    );
    // Killed before its stream began: no samples file, and why.
    std::fs::remove_file(dir.join("samples")).unwrap();
    let (ok, _, err) = oprof(&["report", p]);
    assert!(
        !ok && err.contains("no samples file: its recorder died before the stream began")
            && err.trim_end().lines().count() == 1,
        "{err}"
    );
    // A newer format is refused with one line.
    let newer = RECORDING_JSON.replace(r#""format": 1"#, r#""format": 2"#);
    std::fs::write(dir.join("session.json"), newer).unwrap();
    let (ok, _, err) = oprof(&["report", p]);
    assert!(!ok && err.contains("session format 2 is newer"), "{err}");
}

/// Settings beyond the module's limits (128 frames, 16384 stack bytes) are refused with one
/// line naming the file and the field, from session.json and from `--backtrace-depth`.
#[test]
fn settings_beyond_the_module_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    write_session(&dir);
    let p = dir.to_str().unwrap();
    let (ok, _, err) = oprof(&["report", p, "--backtrace-depth", "129"]);
    assert!(!ok && err.contains("129"), "{err}");
    assert!(oprof(&["report", p, "--backtrace-depth", "128"]).0);
    let json = std::fs::read_to_string(dir.join("session.json")).unwrap();
    let big = json.replace(
        r#""backtrace_depth": 0}"#,
        r#""backtrace_depth": 0, "user_stack_size": 17592186044416}"#,
    );
    assert_ne!(big, json);
    std::fs::write(dir.join("session.json"), big).unwrap();
    let (ok, _, err) = oprof(&["report", p]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("session.json: settings.user_stack_size 17592186044416 is beyond"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// Session paths with a `..` component are not joined to a sysroot or to the archive root: a
/// file they would reach outside the root is not opened, and the image stays unresolved with
/// the reason.
#[test]
fn session_paths_do_not_leave_the_root() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("s");
    let (sysroot, outside) = (d.path().join("sysroot"), d.path().join("outside"));
    for x in [&dir, &sysroot, &outside] {
        std::fs::create_dir(x).unwrap();
    }
    write_session(&dir);
    std::fs::write(outside.join("app"), b"not the target's file").unwrap();
    std::fs::write(dir.join("images"), "1 /../outside/app\n").unwrap();
    let json = std::fs::read_to_string(dir.join("session.json")).unwrap();
    let json = json.replace(
        r#""format": 1,"#,
        r#""format": 1, "archive": true, "modules": {"optest": "/../../outside/optest.ko"},"#,
    );
    std::fs::write(dir.join("session.json"), json).unwrap();
    std::fs::create_dir(dir.join("root")).unwrap();
    std::fs::write(outside.join("optest.ko"), b"not the module").unwrap();
    let (p, sr) = (dir.to_str().unwrap(), sysroot.to_str().unwrap());
    let (ok, out, err) = oprof(&["report", p, "-l", "--json", "--sysroot", sr]);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = j["rows"].as_array().unwrap();
    let app = rows.iter().find(|r| r["image"] == "/../outside/app");
    assert_eq!(
        app.map(|r| &r["symbol"]),
        Some(&"(image not found)".into()),
        "{out}"
    );
    assert!(
        !err.contains("unreadable") && !out.contains("unreadable"),
        "{err}{out}"
    );
    let why = "a `..` component would leave the root: not opened";
    assert!(err.contains(&format!("/../outside/app: {why}")), "{err}");
    assert!(
        err.contains(&format!("/../../outside/optest.ko (module optest): {why}")),
        "{err}"
    );
}

/// Control characters in image paths and symbol names (an OSC title sequence, CSI as C1,
/// a newline) are printed escaped by the text views, raw in JSON.
#[test]
fn control_characters_in_names_are_escaped_in_text() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    write_session(&dir);
    // The images file writes a newline as \012.
    std::fs::write(dir.join("images"), "1 /bin/a\x1b]0;pwned\x07p\\012x\n").unwrap();
    let ks = std::fs::read_to_string(dir.join("kallsyms")).unwrap();
    std::fs::write(
        dir.join("kallsyms"),
        ks.replace("read_zero", "read\u{9b}31m_zero\x7f"),
    )
    .unwrap();
    let p = dir.to_str().unwrap();
    let (ok, json, err) = oprof(&["report", p, "-l", "--json"]);
    assert!(ok, "{err}");
    let img = "/bin/a\x1b]0;pwned\x07p\nx";
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    let names: Vec<(&str, &str)> = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["image"].as_str().unwrap(), r["symbol"].as_str().unwrap()))
        .collect();
    assert!(names.contains(&(img, "(image not found)")), "{names:?}");
    assert!(
        names.contains(&("vmlinux", "read\u{9b}31m_zero\x7f")),
        "{names:?}"
    );
    let escaped_img = "/bin/a\\x1b]0;pwned\\x07p\\x0ax";
    for args in [
        vec!["report", p, "-l"],
        vec!["report", p],
        vec!["diff", p, p, "-l"],
    ] {
        let (ok, text, err) = oprof(&args);
        assert!(ok, "{args:?}: {err}");
        for out in [&text, &err] {
            assert!(
                !out.chars().any(|c| c != '\n' && (c.is_control())),
                "{args:?}: a raw control character: {out:?}"
            );
        }
        assert!(text.contains(escaped_img), "{args:?}: {text}");
        if args.contains(&"-l") {
            assert!(
                text.contains("read\\u{9b}31m_zero\\x7f"),
                "{args:?}: {text}"
            );
        }
    }
    let (_, _, err) = oprof(&["report", p]);
    assert!(
        err.contains(escaped_img),
        "the note names the image escaped: {err}"
    );
}
