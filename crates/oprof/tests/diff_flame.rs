//! `oprof diff --flame/--folded`: the differential flame graph of two sessions, run as the
//! binary. The fixture: two sessions of one task whose traced kernel samples have known stacks
//! and counts, the second of "another build" (the same function names at other addresses). The
//! folded lines are checked against counts computed here from the fixture's, the SVG is parsed
//! as XML for each frame's colour, and bad input is one error line.

use oprofile_common::event::Record;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod common;
use common::{oprof_status, words};
use oprof::fixtures;

/// Kernel functions of the fixture, in address order: (name, offset from the text start).
const FUNCS: [&str; 6] = ["outer", "main_loop", "hot_f", "hot_g", "cold_h", "gone"];

/// The stack (outermost first, below the task's root `app`) of each leaf function.
fn stack(leaf: &str) -> Vec<&'static str> {
    match leaf {
        // cold_h is called by outer itself: a stack of another depth.
        "cold_h" => vec!["outer", "cold_h"],
        "hot_f" => vec!["outer", "main_loop", "hot_f"],
        "hot_g" => vec!["outer", "main_loop", "hot_g"],
        "gone" => vec!["outer", "main_loop", "gone"],
        _ => unreachable!("{leaf}"),
    }
}

/// The folded stack of `leaf`, as `oprof report --folded` names it.
fn folded(leaf: &str) -> String {
    format!("app;{}", stack(leaf).join(";"))
}

/// Writes a session of `counts` (leaf function, samples) into `dir`: `word_bytes`-byte words,
/// functions `stride` bytes apart from `base` (another stride: another build).
fn session(dir: &Path, counts: &[(&str, u64)], word_bytes: usize, base: u64, stride: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let addr = |f: &str| base + stride * FUNCS.iter().position(|&x| x == f).unwrap() as u64;
    let mut recs = vec![
        Record::CpuSwitch { cpu: 0 },
        Record::CtxSwitch {
            pid: 9,
            tgid: 9,
            app_cookie: 1,
        },
        Record::KernelEnter,
    ];
    for &(leaf, n) in counts {
        let frames = stack(leaf);
        for _ in 0..n {
            recs.push(Record::TraceBegin);
            recs.push(Record::Sample {
                pc: addr(leaf) + 8,
                event: 0,
            });
            // Return addresses (looked up at -1) in each caller, innermost first.
            for caller in frames[..frames.len() - 1].iter().rev() {
                recs.push(Record::Sample {
                    pc: addr(caller) + 0x10,
                    event: 0,
                });
            }
        }
    }
    let bytes = match word_bytes {
        4 => words(&recs),
        w => fixtures::bytes(&fixtures::words(&recs, w), w),
    };
    std::fs::write(dir.join("samples"), &bytes).unwrap();
    std::fs::write(dir.join("images"), "1 /bin/app\n").unwrap();
    std::fs::write(dir.join("proc_modules"), "").unwrap();
    std::fs::write(dir.join("module_sections"), "").unwrap();
    let mut ks = format!("{base:x} T _stext\n");
    for f in FUNCS {
        ks += &format!("{:x} t {f}\n", addr(f));
    }
    ks += &format!("{:x} T _etext\n", base + stride * FUNCS.len() as u64);
    std::fs::write(dir.join("kallsyms"), ks).unwrap();
    let total: u64 = counts.iter().map(|c| c.1).sum();
    std::fs::write(
        dir.join("session.json"),
        format!(
            r##"{{"format": 1, "oprof_version": "0.1.0", "cpu_type": "arm/armv7-ca15", "pointer_size": {word_bytes},
            "kernel": {{"release": "7.3.4", "version": "#1", "machine": "armv7l", "nodename": "board"}},
            "cpus": 1,
            "counters": [{{"counter": 0, "event": "CPU_CYCLES", "event_number": 255, "count": 100000,
                          "unit_mask": 0, "kernel": true, "user": true, "total": 1}}],
            "timer_hz": null,
            "settings": {{"buffer_size": 131072, "buffer_watershed": 32768, "cpu_buffer_size": 8192, "backtrace_depth": 8}},
            "start": {{"unix_ns": 0, "utc": "x"}}, "stop": {{"unix_ns": 1, "utc": "x"}},
            "duration_ns": 1000000000, "command": ["./app"], "exit_status": 0, "ended_by": "command",
            "command_line": ["oprof", "record"], "totals": {{"samples": {total}, "sample_received": {total}, "lost": 0,
            "not_taken": 0, "bytes": {}, "reads": 1}}}}"##,
            bytes.len()
        ),
    )
    .unwrap();
}

/// A: 100 samples. B (another build, 200 samples): hot_f's share falls from 50% to 20%,
/// hot_g's rises from 30% to 70%, cold_h's stays 10%, gone is gone.
const A: [(&str, u64); 4] = [("hot_f", 50), ("hot_g", 30), ("cold_h", 10), ("gone", 10)];
const B: [(&str, u64); 3] = [("hot_f", 40), ("hot_g", 140), ("cold_h", 20)];

/// Sessions `a` (of `A`) and `b` (of `b_counts`, another build) in `d`.
fn sessions(d: &Path, b_counts: &[(&str, u64)]) -> (String, String) {
    let (a, b) = (d.join("a"), d.join("b"));
    session(&a, &A, 4, 0xc010_0000, 0x100);
    session(&b, b_counts, 4, 0xc020_0000, 0x400);
    (s(&a), s(&b))
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `oprof ARGS`, which must succeed: its stdout.
fn ok(args: &[&str]) -> String {
    let (code, out, err) = oprof_status(args);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    out
}

/// Folded lines `STACK FIRST SECOND` as a map.
fn parse_folded(text: &str) -> BTreeMap<String, (u64, u64)> {
    text.lines()
        .map(|l| {
            let mut it = l.rsplitn(3, ' ');
            let second = it.next().unwrap().parse().unwrap();
            let first = it.next().unwrap().parse().unwrap();
            (it.next().unwrap().to_string(), (first, second))
        })
        .collect()
}

/// The expected differential: `first` scaled to `second`'s total, as counted in the fixture.
fn expected(first: &[(&str, u64)], second: &[(&str, u64)]) -> BTreeMap<String, (u64, u64)> {
    let (t1, t2): (u64, u64) = (
        first.iter().map(|c| c.1).sum(),
        second.iter().map(|c| c.1).sum(),
    );
    let mut m = BTreeMap::new();
    for &(f, n) in first {
        m.entry(folded(f)).or_insert((0, 0)).0 = n * t2 / t1;
    }
    for &(f, n) in second {
        m.entry(folded(f)).or_insert((0, 0)).1 = n;
    }
    m
}

/// Each frame of a flame graph SVG: (its title, its fill). Panics unless the SVG is
/// well-formed XML.
fn frames(svg: &str) -> Vec<(String, String)> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(svg);
    let (mut out, mut title, mut in_title) = (vec![], String::new(), false);
    loop {
        match r
            .read_event()
            .unwrap_or_else(|e| panic!("SVG not XML: {e}"))
        {
            Event::Eof => break,
            Event::Start(e) if e.name().as_ref() == b"title" => {
                in_title = true;
                title.clear();
            }
            Event::End(e) if e.name().as_ref() == b"title" => in_title = false,
            Event::Text(t) if in_title => title += &t.decode().unwrap(),
            Event::GeneralRef(g) if in_title => title += &format!("&{};", g.decode().unwrap()),
            Event::Empty(e) | Event::Start(e) if e.name().as_ref() == b"rect" => {
                if let Some(fill) = e.try_get_attribute("fill").unwrap() {
                    let fill = String::from_utf8(fill.value.to_vec()).unwrap();
                    out.push((std::mem::take(&mut title), fill));
                }
            }
            _ => {}
        }
    }
    out
}

/// The fill of the frame of function `f` (its title starts with `f (`).
fn fill_of<'a>(frames: &'a [(String, String)], f: &str) -> &'a str {
    let hits: Vec<_> = frames
        .iter()
        .filter(|(t, _)| t.starts_with(&format!("{f} (")))
        .collect();
    assert_eq!(hits.len(), 1, "one frame of {f}: {frames:?}");
    &hits[0].1
}

/// `rgb(R,G,B)` as numbers.
fn rgb(fill: &str) -> (u8, u8, u8) {
    let v: Vec<u8> = fill
        .strip_prefix("rgb(")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{fill}"))
        .split(',')
        .map(|x| x.trim().parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

/// Red (more in B): full red, less green and blue; blue (less): the reverse; white-ish: none.
#[derive(Debug, PartialEq)]
enum Hue {
    Red,
    Blue,
    Neutral,
}

fn hue(fill: &str) -> Hue {
    match rgb(fill) {
        (255, g, b) if g == b && g < 250 => Hue::Red,
        (r, g, 255) if r == g && r < 250 => Hue::Blue,
        (250, 250, 250) => Hue::Neutral,
        c => panic!("not a differential colour: {c:?}"),
    }
}

#[test]
fn folded_differential_is_normalised_and_keyed_by_name() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = sessions(d.path(), &B);
    let out = ok(&["diff", &a, &b, "--folded"]);
    assert_eq!(parse_folded(&out), expected(&A, &B), "{out}");
    let mut sorted: Vec<&str> = out.lines().collect();
    sorted.sort();
    assert_eq!(out.lines().collect::<Vec<_>>(), sorted, "sorted lines");
    // --negate: the columns swapped, B scaled to A's total.
    let out = ok(&["diff", &a, &b, "--folded", "--negate"]);
    assert_eq!(parse_folded(&out), expected(&B, &A), "{out}");
}

#[test]
fn flame_graph_is_red_where_b_grew_and_blue_where_it_shrank() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = sessions(d.path(), &B);
    let svg = d.path().join("diff.svg");
    // The table is still printed.
    let table = ok(&["diff", &a, &b, "-l", "--flame", &s(&svg)]);
    assert!(table.contains("hot_g  vmlinux"), "{table}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let f = frames(&text);
    assert_eq!(hue(fill_of(&f, "hot_g")), Hue::Red, "{f:?}");
    assert_eq!(hue(fill_of(&f, "hot_f")), Hue::Blue, "{f:?}");
    assert_eq!(hue(fill_of(&f, "cold_h")), Hue::Neutral, "{f:?}");
    // B's stacks: gone has no frame; hot_g's title has B's count and the change of its
    // share, (140 - 60) / 200 = +40 points.
    assert!(!f.iter().any(|(t, _)| t.starts_with("gone")), "{f:?}");
    assert!(
        f.iter()
            .any(|(t, _)| t == "hot_g (140 samples, 70.00%; +40.00%)"),
        "{f:?}"
    );
    // --negate: A's stacks, gone shows blue, red still means more in B.
    ok(&["diff", &a, &b, "--flame", &s(&svg), "--negate"]);
    let f = frames(&std::fs::read_to_string(&svg).unwrap());
    assert_eq!(hue(fill_of(&f, "gone")), Hue::Blue, "{f:?}");
    assert_eq!(hue(fill_of(&f, "hot_g")), Hue::Red, "{f:?}");
    assert_eq!(hue(fill_of(&f, "hot_f")), Hue::Blue, "{f:?}");
    assert!(
        f.iter()
            .any(|(t, _)| t == "hot_g (30 samples, 30.00%; +40.00%)"),
        "{f:?}"
    );
}

#[test]
fn same_shape_at_twice_the_samples_is_no_difference() {
    let d = tempfile::tempdir().unwrap();
    let twice: Vec<(&str, u64)> = A.iter().map(|&(f, n)| (f, 2 * n)).collect();
    let (a, b) = sessions(d.path(), &twice);
    let out = ok(&["diff", &a, &b, "--folded"]);
    let m = parse_folded(&out);
    assert_eq!(m.len(), A.len(), "{out}");
    for (stack, (x, y)) in &m {
        assert_eq!(x, y, "{stack}: {out}");
    }
    let svg = d.path().join("same.svg");
    ok(&["diff", &a, &b, "--flame", &s(&svg)]);
    let f = frames(&std::fs::read_to_string(&svg).unwrap());
    for name in ["hot_f", "hot_g", "cold_h", "gone", "main_loop"] {
        assert_eq!(hue(fill_of(&f, name)), Hue::Neutral, "{name}: {f:?}");
    }
}

/// `oprof ARGS` fails with one error line; returns it.
fn one_error_line(args: &[&str]) -> String {
    let (code, out, err) = oprof_status(args);
    assert_ne!(code, Some(0), "{args:?} succeeded: {out}");
    assert!(
        err.starts_with("oprof: error: ") && err.lines().count() == 1,
        "{args:?}: {err}"
    );
    err
}

#[test]
fn bad_input_is_one_error_line() {
    let d = tempfile::tempdir().unwrap();
    let (a, _) = sessions(d.path(), &B);
    let wide = d.path().join("wide");
    session(&wide, &B, 8, 0xc020_0000, 0x400);
    let w = s(&wide);
    let svg = s(&d.path().join("x.svg"));
    let e = one_error_line(&["diff", &a, &w, "--flame", &svg]);
    assert_eq!(
        e,
        format!("oprof: error: {a} has 4-byte words but {w} has 8-byte words: compare profiles of one word size\n")
    );
    assert!(!PathBuf::from(&svg).exists(), "no SVG written");
    let missing = s(&d.path().join("missing"));
    let e = one_error_line(&["diff", &a, &missing, "--folded"]);
    assert!(e.contains(&missing), "{e}");
    let junk = d.path().join("junk");
    std::fs::write(&junk, fixtures::noise(64)).unwrap();
    let e = one_error_line(&["diff", &s(&junk), &a, "--flame", &svg]);
    assert!(e.contains(&s(&junk)), "{e}");
    let empty = d.path().join("empty");
    session(&empty, &[], 4, 0xc010_0000, 0x100);
    let e = one_error_line(&["diff", &a, &s(&empty), "--folded"]);
    assert_eq!(
        e,
        format!(
            "oprof: error: {}: no samples: no differential flame graph\n",
            s(&empty)
        )
    );
    one_error_line(&["diff", &a, &a, "--negate"]);
}

#[test]
fn help_and_man_page_describe_the_flame_graph() {
    let help = ok(&["diff", "--help"]);
    for opt in ["--flame <OUT.svg>", "--folded", "--negate", "red", "blue"] {
        assert!(help.contains(opt), "{opt}: {help}");
    }
    let d = tempfile::tempdir().unwrap();
    ok(&["generate", "man", &s(d.path())]);
    let man = std::fs::read_to_string(d.path().join("oprof-diff.1")).unwrap();
    assert!(
        man.contains("flame") && man.contains("negate"),
        "{man:.400}"
    );
}
