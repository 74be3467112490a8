//! `--pprof` read back by the real client, `go tool pprof` (Debian's golang-go, installed by
//! `scripts/setup-host.sh`; a missing `go` fails the test), and `--folded` against the flame
//! graph, on the real virt-a15 stream with call chains (`testdata/virt-a15-run.*`, kernel
//! symbols from its kallsyms excerpt).

use crate::aggregate;
use crate::input::session::Counter;
use crate::resolve::elf::ElfImage;
use crate::resolve::images::{ImageMap, ModuleSnapshot};
use crate::resolve::kallsyms::Kallsyms;
use crate::resolve::{self, Resolver};
use crate::tests::streaming::testdata;
use crate::view::pprof;
use crate::view::report::{self, Options, Report};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The report and the pprof profile of the test stream, resolved alike.
fn report_and_profile() -> (Report, pprof::Profile) {
    let bytes = std::fs::read(testdata("virt-a15-run.buf")).unwrap();
    let resolver = || {
        let text = std::fs::read_to_string(testdata("virt-a15-run.kallsyms")).unwrap();
        let table = Kallsyms::parse(&text, "kallsyms")
            .unwrap()
            .kernel_table()
            .unwrap();
        let images = ImageMap::parse(
            &std::fs::read(testdata("virt-a15-run.images")).unwrap(),
            "images",
        )
        .unwrap();
        let mut snap = ModuleSnapshot::default();
        snap.add_proc_modules(
            &std::fs::read_to_string(testdata("virt-a15-run.proc_modules")).unwrap(),
            "pm",
        )
        .unwrap();
        let vm = ElfImage::from_symbols(Path::new("kallsyms"), table, vec![]);
        Resolver::new(
            resolve::Options {
                lines: true,
                ..Default::default()
            },
            Some(images),
            Some(("kallsyms".into(), vm)),
            &snap,
        )
    };
    let counters = [Counter {
        counter: 0,
        event: "timer".into(),
        count: None,
    }];
    let read = |task| {
        aggregate::read(
            std::io::Cursor::new(&bytes),
            4,
            aggregate::Options { app: true, task },
            Default::default(),
        )
        .unwrap()
    };
    // The report as `oprof report -l --flame` counts it (no task keys) ...
    let r = report::build_counts(
        &read(false),
        &mut resolver(),
        &counters,
        Options {
            lines: false,
            flame: true,
        },
    );
    // ... and the profile as `--pprof` does (task keys, another resolver).
    let with_task = read(true);
    let p = pprof::build(
        &with_task,
        &mut resolver(),
        &counters,
        &pprof::Meta::default(),
    );
    // Task keys split the counts finer but change no view of the report.
    let again = report::build_counts(
        &with_task,
        &mut resolver(),
        &counters,
        Options {
            lines: false,
            flame: true,
        },
    );
    let views = |r: &Report| {
        let mut s = report::render(r, report::View::Symbols, 0) + &report::render_callgraph(r, 0);
        s += &serde_json::to_string(r).unwrap();
        s + &r.folded.text()
    };
    assert!(
        views(&again) == views(&r),
        "aggregate::Options::task changed the report"
    );
    (r, p)
}

/// Runs `go tool pprof ARGS FILE` offline; panics (the test fails) when go is missing.
fn go_pprof(args: &[&str], file: &Path, home: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .env("HOME", home)
        .env("GOCACHE", home.join("gocache"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .env("PPROF_TOOLS", "")
        .env("PPROF_BINARY_PATH", home)
        .output()
        .unwrap_or_else(|e| {
            panic!("`go tool pprof` not runnable ({e}): install golang-go (scripts/setup-host.sh)")
        });
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn go_tool_pprof_agrees_with_the_report() {
    let (r, p) = report_and_profile();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("profile.pb.gz");
    pprof::write_file(&p, &file).unwrap();
    assert!(
        r.total > 2000 && r.traced == r.total,
        "{} samples, {} traced",
        r.total,
        r.traced
    );

    // -top: every function's flat samples equal the report's -l rows (placeholders such as
    // "(image not found)" carry their image, as rows do).
    let top = go_pprof(
        &["-top", "-nodecount=100000", "-nodefraction=0"],
        &file,
        dir.path(),
    );
    assert!(top.contains("Type: timer_samples"), "{top}");
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for line in top
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
    {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(flat), Some(name)) = (f.first(), f.get(5..)) else {
            continue;
        };
        let flat: u64 = flat
            .parse()
            .unwrap_or_else(|_| panic!("bad -top line {line:?}"));
        if flat > 0 {
            got.insert(name.join(" "), flat);
        }
    }
    let want: BTreeMap<String, u64> = r
        .rows
        .iter()
        .map(|x| {
            (
                if x.symbol.starts_with('(') {
                    format!("{} {}", x.symbol, x.image)
                } else {
                    x.symbol.clone()
                },
                x.samples,
            )
        })
        .collect();
    assert_eq!(got, want, "go tool pprof -top vs oprof report -l");
    let hottest = &r.rows[0];
    assert!(top
        .lines()
        .any(|l| l.trim_start().starts_with(&hottest.samples.to_string())
            && l.ends_with(&hottest.symbol)));

    // -traces: the samples of every printed stack add up to the total, and the syscall
    // stacks read ret_fast_syscall below the handler.
    let traces = go_pprof(&["-traces"], &file, dir.path());
    let mut sum = 0u64;
    let mut stack: Vec<Vec<String>> = vec![];
    for block in traces.split("-----------+") {
        let mut frames = vec![];
        for line in block.lines() {
            let t = line.trim();
            if t.is_empty() || t.contains(':') && !t.starts_with(|c: char| c.is_ascii_digit()) {
                continue; // labels (cpu: 1) and the header
            }
            match t.split_once(char::is_whitespace) {
                Some((n, f))
                    if n.chars().all(|c| c.is_ascii_digit())
                        && line.starts_with("     ")
                        && !line.starts_with("             ") =>
                {
                    sum += n.parse::<u64>().unwrap();
                    frames.push(f.trim().to_string());
                }
                _ if line.starts_with("             ") => frames.push(t.to_string()),
                _ => {}
            }
        }
        if !frames.is_empty() {
            stack.push(frames);
        }
    }
    assert_eq!(sum, r.total, "-traces sample sum");
    let syscall = stack
        .iter()
        .filter(|s| s.iter().any(|f| f == "ret_fast_syscall"))
        .count();
    assert!(syscall > 10, "{syscall} syscall stacks");
    for s in stack
        .iter()
        .filter(|s| s.iter().any(|f| f == "ret_fast_syscall"))
    {
        let i = s.iter().position(|f| f == "ret_fast_syscall").unwrap();
        assert!(i > 0, "ret_fast_syscall is a caller, not a leaf: {s:?}");
    }
    assert!(
        stack.iter().flatten().all(|f| !f.ends_with("_reset")),
        "a *_reset frame"
    );

    // The labels: samples per CPU (cpu 0 too) as the report counts them; tasks.
    let tags = go_pprof(&["-tags"], &file, dir.path());
    let cpu_tags: BTreeMap<u64, u64> = tags
        .split(" cpu: Total")
        .nth(1)
        .expect("cpu tag")
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let (n, v) = l.trim().split_once(' ').unwrap();
            let v = v.rsplit_once("): ").unwrap().1;
            (v.parse().unwrap(), n.parse::<f64>().unwrap() as u64)
        })
        .collect();
    assert_eq!(
        cpu_tags, r.per_cpu,
        "cpu tags vs the report's samples per CPU\n{tags}"
    );
    assert!(
        tags.contains(" pid: Total") && tags.contains(" tid: Total"),
        "{tags}"
    );
}

#[test]
fn folded_stacks_sum_to_the_samples_and_draw_the_flame_graph() {
    let (r, _) = report_and_profile();
    let text = r.folded.text();
    let mut sum = 0;
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').expect("STACK COUNT");
        assert!(!stack.is_empty() && !stack.contains(";;"), "{line}");
        sum += n.parse::<u64>().unwrap();
    }
    assert_eq!(
        (sum, r.traced),
        (r.total, r.total),
        "folded counts vs traced samples"
    );
    assert!(
        text.lines().any(|l| l.contains(";ret_fast_syscall;sys_")),
        "syscall stacks"
    );
    // The SVG from the printed text (as flamegraph.pl or inferno read it) is --flame's.
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = "t".into();
    opts.count_name = "samples".into();
    let mut from_text = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, text.lines(), &mut from_text).unwrap();
    let mut svg = Vec::new();
    r.folded.write_svg("t", &mut svg).unwrap();
    // Frame colours are random (inferno's default palette): compare all but `fill="rgb(...)"`.
    let strip = |b: Vec<u8>| {
        let s = String::from_utf8(b).unwrap();
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find("fill=\"rgb(") {
            out.push_str(&rest[..i]);
            rest = &rest[i..];
            rest = &rest[rest.find(")\"").expect("rgb(...)") + 2..];
        }
        out + rest
    };
    let (svg, from_text) = (strip(svg), strip(from_text));
    assert!(svg.matches("<g>").count() > 100, "frames in the SVG");
    assert!(
        svg == from_text,
        "the flame graph differs from the folded text's"
    );
}
