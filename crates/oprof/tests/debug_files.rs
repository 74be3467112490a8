//! `oprof report --debug-dir` as a user runs it: a stripped ARM program named from its debug
//! file found by build-id, `--verbose` and `--json` saying which file named it, and a missing
//! `--debug-dir` as one error line.

mod common;
use common::{facts, one_sample_stream, oprof, tool};

#[test]
fn report_names_a_stripped_image_from_debug_dir() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("p.c"),
        "volatile int sink;\n__attribute__((noinline)) int hot(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * sink; return s; }\nint main(int c, char **v) { sink = hot(c); return 0; }\n",
    )
    .unwrap();
    tool(
        d,
        "arm-linux-gnueabihf-gcc",
        &["-O2", "-g", "-Wl,--build-id", "-o", "p", "p.c"],
    );
    std::fs::create_dir_all(d.join("root/bin")).unwrap();
    tool(
        d,
        "arm-linux-gnueabihf-objcopy",
        &["--strip-all", "p", "root/bin/p"],
    );
    let (id, off) = facts(&d.join("p"));
    let dbg = d.join(format!("dbg/.build-id/{}/{}.debug", &id[..2], &id[2..]));
    std::fs::create_dir_all(dbg.parent().unwrap()).unwrap();
    tool(
        d,
        "arm-linux-gnueabihf-objcopy",
        &["--only-keep-debug", "p", dbg.to_str().unwrap()],
    );
    one_sample_stream(d, off);
    let s = |p: &str| d.join(p).display().to_string();
    let base = [
        s("s.buf"),
        "--images".into(),
        s("s.images"),
        "--sysroot".into(),
        s("root"),
        "-l".into(),
    ];
    let args = |extra: &[&str]| -> Vec<String> {
        base.iter()
            .cloned()
            .chain(extra.iter().map(|x| x.to_string()))
            .collect()
    };
    let run = |a: Vec<String>| {
        let mut v = vec!["report".to_string()];
        v.extend(a);
        oprof(&v.iter().map(String::as_str).collect::<Vec<_>>())
    };

    let (ok, out, err) = run(args(&["--debug-dir", &s("dbg"), "--verbose"]));
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.ends_with("/bin/p                       hot")),
        "{out}"
    );
    assert!(
        out.contains(&format!("  /bin/p: {} (build-id)\n", dbg.display())),
        "{out}"
    );
    let (ok, out, err) = run(args(&["--debug-dir", &s("dbg"), "--json"]));
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["images"][0]["debug_file"], dbg.display().to_string());
    assert_eq!(j["images"][0]["debug_found_by"], "build-id");
    assert_eq!(j["rows"][0]["symbol"], "hot");
    // Without it: unnamed, and one note says so.
    let (ok, out, err) = run(args(&["--verbose"]));
    assert!(ok, "{err}");
    assert!(
        out.contains("(no symbols)") && out.contains("  /bin/p: none\n"),
        "{out}"
    );
    assert_eq!(err.matches("no debug file").count(), 1, "{err}");
    // A --debug-dir that does not exist: one line naming it.
    let (ok, _, err) = run(args(&["--debug-dir", &s("nope")]));
    assert!(!ok);
    assert_eq!(
        err,
        format!("oprof: error: --debug-dir {}: not a directory\n", s("nope"))
    );
}
