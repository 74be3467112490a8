//! `oprof report` fetching a stripped program's debug file from a real debuginfod server
//! (Debian's `debuginfod`, started here on 127.0.0.1 with a directory holding the debug file;
//! installed by scripts/setup-host.sh, the test is skipped with a SKIP line without it), the
//! same names as with `--debug-dir`, elfutils' cache layout; and from servers that fail (down,
//! 404, a truncated body, another build-id): a note, nothing cached, the report written.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{facts, one_sample_stream, tool};

/// The test program, `variant` making another build-id.
fn program(d: &Path, name: &str, variant: u32) -> PathBuf {
    let src = d.join(format!("{name}.c"));
    std::fs::write(
        &src,
        format!("volatile int sink;\n__attribute__((noinline)) int hot(int n) {{ int s = {variant}; for (int i = 0; i < n; i++) s += i * sink; return s; }}\nint main(int c, char **v) {{ sink = hot(c); return 0; }}\n"),
    )
    .unwrap();
    tool(
        d,
        "arm-linux-gnueabihf-gcc",
        &[
            "-O2",
            "-g",
            "-Wl,--build-id",
            "-o",
            name,
            src.to_str().unwrap(),
        ],
    );
    d.join(name)
}

/// The fixture: `root/bin/p` stripped, `srv/p.debug` its debug file, a stream of one sample
/// in `hot`. Returns (build-id, the report's arguments).
fn fixture(d: &Path) -> (String, Vec<String>) {
    let p = program(d, "p", 0);
    std::fs::create_dir_all(d.join("root/bin")).unwrap();
    std::fs::create_dir_all(d.join("srv")).unwrap();
    tool(
        d,
        "arm-linux-gnueabihf-objcopy",
        &["--strip-all", "p", "root/bin/p"],
    );
    tool(
        d,
        "arm-linux-gnueabihf-objcopy",
        &["--only-keep-debug", "p", "srv/p.debug"],
    );
    let (id, off) = facts(&p);
    one_sample_stream(d, off);
    let s = |p: &str| d.join(p).display().to_string();
    let args = vec![
        "report".into(),
        s("s.buf"),
        "--images".into(),
        s("s.images"),
        "--sysroot".into(),
        s("root"),
        "-l".into(),
    ];
    (id, args)
}

/// `oprof ARGS EXTRA` with DEBUGINFOD_URLS=`urls` and the cache `cache`: (ok, stdout, stderr).
fn report(args: &[String], extra: &[&str], urls: &str, cache: &Path) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_oprof"))
        .args(args)
        .args(extra)
        .env("DEBUGINFOD_URLS", urls)
        .env("DEBUGINFOD_CACHE_PATH", cache)
        .env("DEBUGINFOD_TIMEOUT", "5")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .output()
        .unwrap();
    let t = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (o.status.success(), t(&o.stdout), t(&o.stderr))
}

/// Whether the report named `hot` (from a debug file) rather than `(no symbols)`.
fn named(out: &str) -> bool {
    out.lines()
        .any(|l| l.ends_with("/bin/p                       hot"))
}

/// A free TCP port on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The HTTP status of `GET path` on 127.0.0.1:`port`, if it answers.
fn status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Kills the server when the test ends, whatever way.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts debuginfod on a free port of 127.0.0.1 serving the files of `srv`, and waits until it
/// answers `GET ready` with 200 (it indexed the directory). The server and its URL.
fn start_server(d: &Path, srv: &Path, ready: &str) -> (Server, String) {
    let port = free_port();
    let server = Server(
        Command::new("debuginfod")
            .args(["-F", "-p", &port.to_string(), "-d"])
            .arg(d.join("db.sqlite"))
            .arg(srv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while status(port, ready) != Some(200) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "debuginfod did not serve {ready} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (server, format!("http://127.0.0.1:{port}"))
}

/// Whether the debuginfod binary runs; prints a SKIP line if not.
fn have_debuginfod() -> bool {
    let ok = Command::new("debuginfod").arg("--version").output().is_ok();
    if !ok {
        eprintln!(
            "SKIP: no debuginfod binary (Debian's debuginfod package, scripts/setup-host.sh)"
        );
    }
    ok
}

#[test]
fn report_names_a_stripped_image_from_a_debuginfod_server() {
    if !have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (id, args) = fixture(d);
    let (server, url) = start_server(d, &d.join("srv"), &format!("/buildid/{id}/debuginfo"));
    let cache = d.join("cache");
    let (ok, out, err) = report(&args, &["--verbose"], &url, &cache);
    assert!(ok, "{err}");
    let cached = cache.join(&id).join("debuginfo");
    assert!(named(&out), "{out}\n{err}");
    assert!(
        out.contains(&format!("  /bin/p: {} (debuginfod)\n", cached.display())),
        "{out}"
    );
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        std::fs::read(d.join("srv/p.debug")).unwrap(),
        "the cached file is the server's"
    );
    // The same names as with --debug-dir.
    let dbg = d.join(format!("dbg/.build-id/{}/{}.debug", &id[..2], &id[2..]));
    std::fs::create_dir_all(dbg.parent().unwrap()).unwrap();
    std::fs::copy(d.join("srv/p.debug"), &dbg).unwrap();
    let dd = d.join("dbg").display().to_string();
    let (ok, local, err) = report(&args, &["--debug-dir", &dd], "", &cache);
    assert!(ok, "{err}");
    let (ok, remote, err) = report(&args, &[], &url, &cache);
    assert!(ok, "{err}");
    assert_eq!(local, remote);
    let (ok, out, err) = report(&args, &["--json"], &url, &cache);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["images"][0]["debug_found_by"], "debuginfod");
    // The server gone: the cache serves; --no-debuginfod asks neither.
    drop(server);
    let (ok, out, err) = report(&args, &[], &url, &cache);
    assert!(ok && named(&out) && err.is_empty(), "{out}\n{err}");
    let (ok, out, _) = report(&args, &["--no-debuginfod"], &url, &cache);
    assert!(ok && !named(&out) && out.contains("(no symbols)"), "{out}");
}

/// A server on 127.0.0.1 answering every request with `answer`; its URL.
fn fake_server(answer: Vec<u8>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut req = [0u8; 4096];
            let _ = s.read(&mut req);
            let _ = s.write_all(&answer);
        }
    });
    url
}

#[test]
fn failing_servers_are_notes_and_nothing_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (id, args) = fixture(d);
    // Another build of the program: another build-id.
    let other = std::fs::read(program(d, "q", 1)).unwrap();
    let debug = std::fs::read(d.join("srv/p.debug")).unwrap();
    let ok_header =
        |n: usize| format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n");
    let mut wrong = ok_header(other.len()).into_bytes();
    wrong.extend(&other);
    let mut truncated = ok_header(debug.len()).into_bytes();
    truncated.extend(&debug[..debug.len() / 2]);
    let down = format!("http://127.0.0.1:{}", free_port());
    let cases = [
        (down, "Connection refused"),
        (
            fake_server(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_vec(),
            ),
            "HTTP 404",
        ),
        (fake_server(truncated), "reading the body"),
        (fake_server(wrong), "is not"),
        ("https://127.0.0.1:1".to_string(), "only http:// servers"),
    ];
    let cache = d.join("cache");
    for (url, why) in &cases {
        let (ok, out, err) = report(&args, &[], url, &cache);
        assert!(ok, "{url}: {err}");
        assert!(out.contains("(no symbols)") && !named(&out), "{url}: {out}");
        let note = err
            .lines()
            .find(|l| l.starts_with("oprof: note: debuginfod: "))
            .unwrap_or_else(|| panic!("{url}: no note: {err}"));
        assert!(note.contains(why), "{url}: {note}");
        assert!(!cache.join(&id).join("debuginfo").exists(), "{url}: cached");
    }
    // A cached file of another build-id is not used.
    std::fs::create_dir_all(cache.join(&id)).unwrap();
    std::fs::write(cache.join(&id).join("debuginfo"), &other).unwrap();
    let (ok, out, err) = report(&args, &[], &cases[0].0, &cache);
    assert!(ok && !named(&out), "{out}");
    assert!(err.contains("debuginfo: build-id "), "{err}");
    // A link in the cache is not followed: the file is used, not cached through it.
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::create_dir_all(d.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(d.join("elsewhere"), cache.join(&id)).unwrap();
    let mut good = ok_header(debug.len()).into_bytes();
    good.extend(&debug);
    let (ok, out, err) = report(&args, &[], &fake_server(good), &cache);
    assert!(ok && named(&out), "{out}\n{err}");
    assert!(err.contains("not cached"), "{err}");
    assert_eq!(std::fs::read_dir(d.join("elsewhere")).unwrap().count(), 0);
}

/// An archived session (`oprof record --archive`: build-ids in session.json) whose archive
/// lacks the executable: fetched from the server by the recorded build-id.
#[test]
fn archived_session_fetches_a_missing_executable() {
    if !have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (id, _) = fixture(d);
    let ses = d.join("ses");
    std::fs::create_dir_all(d.join("exe")).unwrap();
    std::fs::create_dir_all(&ses).unwrap();
    std::fs::copy(d.join("p"), d.join("exe/p")).unwrap();
    let samples = std::fs::read(d.join("s.buf")).unwrap();
    std::fs::write(ses.join("samples"), &samples).unwrap();
    std::fs::write(ses.join("images"), "1 /bin/p\n").unwrap();
    std::fs::write(
        ses.join("session.json"),
        format!(
            r##"{{"format": 1, "oprof_version": "0.1.0", "cpu_type": "timer", "pointer_size": 4,
            "kernel": {{"release": "7.3.4", "version": "#1", "machine": "armv7l", "nodename": "board"}},
            "cpus": 1, "counters": [], "timer_hz": 100,
            "settings": {{"buffer_size": 131072, "buffer_watershed": 32768, "cpu_buffer_size": 8192, "backtrace_depth": 0}},
            "start": {{"unix_ns": 0, "utc": "x"}}, "stop": {{"unix_ns": 1, "utc": "x"}},
            "duration_ns": 1000000000, "command": ["p"], "exit_status": 0, "ended_by": "command",
            "command_line": ["oprof", "record", "--archive"], "totals": {{"samples": 1, "sample_received": 1, "lost": 0,
            "not_taken": 0, "bytes": {}, "reads": 1}},
            "debug_ids": {{"/bin/p": {{"build_id": "{id}"}}}}}}"##,
            samples.len()
        ),
    )
    .unwrap();
    let (_server, url) = start_server(d, &d.join("exe"), &format!("/buildid/{id}/executable"));
    let cache = d.join("cache");
    let args = ["report".to_string(), ses.display().to_string(), "-l".into()];
    let (ok, out, err) = report(&args, &["--json"], &url, &cache);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let exe = cache.join(&id).join("executable");
    assert_eq!(j["rows"][0]["symbol"], "hot", "{out}\n{err}");
    assert_eq!(
        j["images"][0]["debug_file"],
        exe.display().to_string(),
        "{out}"
    );
    assert_eq!(
        std::fs::read(&exe).unwrap(),
        std::fs::read(d.join("p")).unwrap()
    );
    // Without the server: "(image not found)".
    let (ok, out, _) = report(&args, &["--no-debuginfod"], &url, &cache);
    assert!(ok && out.contains("(image not found)"), "{out}");
}
