//! The streaming report (`aggregate` + `report::build_counts`) against the report as it was
//! built before (`report::build_reference`: the whole stream decoded into samples, each
//! resolved and counted): the same text (images, `-l`, `-g`, `-c`), JSON and folded stacks,
//! byte for byte, and the same errors, sequentially and in parallel with blocks small enough
//! to split the stream at many resync points. On a real stream captured by `make run` on
//! virt-a15 (backtrace_depth 16, timer mode; `testdata/virt-a15-run.*`) and on seeded random
//! streams with every record type, odd contexts and corruptions.

use crate::aggregate::{self, Tuning};
use crate::input::stream::Stream;
use crate::input::synth::{self, Chains};
use crate::resolve::elf::ElfImage;
use crate::resolve::images::{ImageMap, ModuleSnapshot};
use crate::resolve::symbols::{Binding, Symbol, SymbolTable};
use crate::resolve::{self, Resolver};
use crate::view::report::{self, Options, Report, View};
use oprofile_common::event::Record;
use std::io::Cursor;
use std::path::Path;

/// Kernel text 0xc0000000..0xc1000000 as vmlinux, with a symbol every 0x40 bytes in its first
/// MiB and every 0x1000 bytes after (addresses resolve to many symbols).
fn kernel() -> (std::path::PathBuf, ElfImage) {
    static TABLE: std::sync::OnceLock<SymbolTable> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let fine = (0..0x4000u64).map(|i| 0xc000_0000 + i * 0x40);
        let coarse = (0x100..0x1000u64).map(|i| 0xc000_0000 + i * 0x1000);
        let syms = fine
            .map(|a| (a, 0x40))
            .chain(coarse.map(|a| (a, 0x1000)))
            .map(|(addr, size)| Symbol {
                addr,
                size,
                name: format!("k{addr:x}"),
                binding: Binding::Global,
            })
            .collect();
        SymbolTable::new(syms, std::iter::once(0xc000_0000..0xc100_0000).collect())
    });
    (
        "/host/vmlinux".into(),
        ElfImage::from_symbols(Path::new("/host/vmlinux"), table.clone(), vec![]),
    )
}

fn resolver(images: &str, proc_modules: &str, lines: bool) -> Resolver {
    let images = ImageMap::parse(images.as_bytes(), "images").unwrap();
    let mut snap = ModuleSnapshot::default();
    snap.add_proc_modules(proc_modules, "proc_modules").unwrap();
    Resolver::new(
        resolve::Options {
            lines,
            ..Default::default()
        },
        Some(images),
        Some(kernel()),
        &snap,
    )
}

/// Every view of a report, as printed.
fn render_all(r: &Report) -> String {
    let mut s = report::render(r, View::Images, 0);
    s += &report::render(r, View::Symbols, 0);
    s += &report::render_callgraph(r, 0);
    s += &serde_json::to_string_pretty(r).unwrap();
    s += &r.folded.lines().join("\n");
    s
}

/// Tunings: sequential, and parallel with blocks of a few records up to a few KiB.
fn tunings() -> [Tuning; 5] {
    [
        Tuning {
            threads: 1,
            block_bytes: 4 << 20,
        },
        Tuning {
            threads: 2,
            block_bytes: 64,
        },
        Tuning {
            threads: 2,
            block_bytes: 1000,
        },
        Tuning {
            threads: 3,
            block_bytes: 4096,
        },
        Tuning {
            threads: 2,
            block_bytes: 32 << 10,
        },
    ]
}

/// Compares every tuning's report (or error) with the reference; returns the segments the
/// parallel runs decoded and whether any fell back to sequential decoding.
fn compare(bytes: &[u8], word_bytes: usize, images: &str, proc_modules: &str) -> (usize, bool) {
    let (mut segments, mut fell_back) = (0, false);
    for opts in [
        Options {
            lines: false,
            flame: false,
        },
        Options {
            lines: true,
            flame: true,
        },
    ] {
        let want = Stream::from_bytes(bytes, word_bytes)
            .and_then(|st| {
                report::build_reference(
                    &st,
                    &mut resolver(images, proc_modules, opts.lines),
                    &[],
                    opts,
                )
            })
            .map(|r| render_all(&r))
            .map_err(|e| format!("{e:#}"));
        for t in tunings() {
            let got = aggregate::read(
                Cursor::new(bytes),
                word_bytes,
                aggregate::Options {
                    app: opts.flame,
                    task: false,
                },
                t,
            )
            .map(|a| {
                if t.threads > 1 {
                    segments += a.segments;
                    fell_back |= a.fell_back;
                }
                render_all(&report::build_counts(
                    &a,
                    &mut resolver(images, proc_modules, opts.lines),
                    &[],
                    opts,
                ))
            })
            .map_err(|e| format!("{e:#}"));
            assert!(
                got == want,
                "{t:?} {opts:?}: streaming report differs from the reference:\n{}",
                first_diff(&got, &want)
            );
        }
    }
    (segments, fell_back)
}

fn first_diff(got: &Result<String, String>, want: &Result<String, String>) -> String {
    let text = |r: &Result<String, String>| match r {
        Ok(s) => s.clone(),
        Err(e) => format!("error: {e}"),
    };
    let (g, w) = (text(got), text(want));
    match g
        .lines()
        .zip(w.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
    {
        Some((i, (a, b))) => format!("line {}: got {a:?}, want {b:?}", i + 1),
        None => format!(
            "lengths {} and {} lines",
            g.lines().count(),
            w.lines().count()
        ),
    }
}

pub(crate) fn testdata(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

#[test]
fn real_stream_streams_like_the_reference() {
    let bytes = std::fs::read(testdata("virt-a15-run.buf")).unwrap();
    let images = std::fs::read_to_string(testdata("virt-a15-run.images")).unwrap();
    let pm = std::fs::read_to_string(testdata("virt-a15-run.proc_modules")).unwrap();
    let (segments, fell_back) = compare(&bytes, 4, &images, &pm);
    // The module's sync passes start with CPU_SWITCH and full context: the stream splits.
    assert!(
        !fell_back,
        "a parallel run fell back to sequential decoding on the module's stream"
    );
    assert!(
        segments > 100,
        "only {segments} segments: resync points not found"
    );
    // Cut inside a record: the same error as the reference.
    compare(&bytes[..bytes.len() - 8], 4, &images, &pm);
    compare(&bytes[..bytes.len() - 4], 4, &images, &pm);
    // A synthetic stream made of it (as `make bench` uses) has the same pattern.
    let st = Stream::from_bytes(&bytes, 4).unwrap();
    for chains in [Chains::AsRecorded, Chains::None, Chains::MinFrames(5)] {
        let mut out = Vec::new();
        synth::write(&st, 5000, chains, &mut out).unwrap();
        let (segments, fell_back) = compare(&out, 4, &images, &pm);
        assert!(
            !fell_back && segments > 100,
            "{chains:?}: {segments} segments, fell back: {fell_back}"
        );
    }
}

/// xorshift64*: a seeded generator for reproducible random streams.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random stream of `n` records: sync passes (CPU_SWITCH with or without full context),
/// mode, task and image switches, traced and untraced samples of two counters, kernel,
/// module and user words, MODULE_LOADED.
fn random_records(rng: &mut Rng, n: usize) -> Vec<Record> {
    let mut v = Vec::new();
    let kernel = |r: &mut Rng| match r.below(4) {
        0 => 0xbf00_0000 + r.below(0x2000), // module (proc_modules range)
        1 => 0xd000_0000 + r.below(0x100),  // outside every image
        _ => 0xc000_0000 + r.below(0x4000) * 4,
    };
    while v.len() < n {
        match rng.below(20) {
            0 => {
                v.push(Record::CpuSwitch { cpu: rng.below(3) });
                if rng.below(5) > 0 {
                    if rng.below(2) == 0 {
                        v.push(Record::TraceBegin);
                    }
                    v.push(if rng.below(2) == 0 {
                        Record::KernelEnter
                    } else {
                        Record::KernelExit
                    });
                    v.push(Record::CtxSwitch {
                        pid: rng.below(4),
                        tgid: rng.below(4),
                        app_cookie: rng.below(5),
                    });
                }
            }
            1 => v.push(Record::KernelEnter),
            2 => v.push(Record::KernelExit),
            3 => v.push(Record::CtxSwitch {
                pid: rng.below(4),
                tgid: rng.below(4),
                app_cookie: rng.below(5),
            }),
            4 => v.push(Record::CookieSwitch {
                cookie: rng.below(5),
            }),
            5 | 6 => v.push(Record::TraceBegin),
            7 => v.push(Record::ModuleLoaded),
            _ => {
                let event = if rng.below(5) == 0 { 1 } else { 0 };
                let pc = if rng.below(2) == 0 {
                    kernel(rng)
                } else {
                    rng.below(0x400) * 4
                };
                v.push(Record::Sample { pc, event });
            }
        }
    }
    v
}

/// `records` as a stream of `word_bytes`-byte words.
fn encode(records: &[Record], word_bytes: usize) -> Vec<u8> {
    crate::fixtures::bytes(&crate::fixtures::words(records, word_bytes), word_bytes)
}

#[test]
fn random_streams_stream_like_the_reference() {
    let images = "1 /bin/app\n2 /lib/libc.so.6\n3 /bin/other (deleted)\n";
    let pm = "netfoo 8192 0 - Live 0xbf000000\n";
    let mut rng = Rng(0x5eed_0f0b_0f00);
    let (mut segments, mut fell_back) = (0, false);
    for round in 0..40 {
        let n = 50 + rng.below(1500) as usize;
        let records = random_records(&mut rng, n);
        for word_bytes in [4, 8] {
            let mut bytes = encode(&records, word_bytes);
            match round % 8 {
                // Corruptions: unknown escape code, malformed CTX_SWITCH, cut inside a record,
                // a partial word.
                1 => {
                    let at =
                        rng.below(bytes.len() as u64 / word_bytes as u64) as usize * word_bytes;
                    let bad = encode(&[Record::ModuleLoaded], word_bytes);
                    bytes.splice(
                        at..at,
                        bad[..word_bytes]
                            .iter()
                            .copied()
                            .chain(std::iter::once(9))
                            .chain(std::iter::repeat_n(0, word_bytes - 1)),
                    );
                }
                2 => {
                    let bad = encode(
                        &[Record::CtxSwitch {
                            pid: 1,
                            tgid: 1,
                            app_cookie: 1,
                        }],
                        word_bytes,
                    );
                    let at = bytes.len() / 2 / word_bytes * word_bytes;
                    bytes.splice(
                        at..at,
                        bad[..5 * word_bytes]
                            .iter()
                            .copied()
                            .chain(std::iter::repeat_n(0, 2 * word_bytes)),
                    );
                }
                3 => bytes.truncate(bytes.len() - word_bytes),
                4 => bytes.truncate(bytes.len() - 1),
                _ => {}
            }
            let (s, f) = compare(&bytes, word_bytes, images, pm);
            segments += s;
            fell_back |= f;
        }
    }
    // Random streams split too (and some assumptions fail: the fallback is exercised).
    assert!(segments > 500, "{segments} segments");
    assert!(
        fell_back,
        "no random stream exercised the sequential fallback"
    );
}

#[test]
fn synth_replicates_the_source() {
    let bytes = std::fs::read(testdata("virt-a15-run.buf")).unwrap();
    let st = Stream::from_bytes(&bytes, 4).unwrap();
    let src = crate::input::stream::decode(&st).unwrap();
    let mut out = Vec::new();
    let w = synth::write(&st, src.samples.len() as u64, Chains::AsRecorded, &mut out).unwrap();
    let again = crate::input::stream::decode(&Stream::from_bytes(&out, 4).unwrap()).unwrap();
    // The first round decodes to the same samples (kernel samples' image cookie aside, which
    // nothing reads), with every frame.
    let strip = |s: &crate::input::stream::Sample| {
        let mut s = s.clone();
        if s.ctx.in_kernel == Some(true) {
            s.ctx.cookie = None;
        }
        s
    };
    assert_eq!(again.samples.len(), src.samples.len());
    for (a, b) in again.samples.iter().zip(&src.samples) {
        assert_eq!(strip(a), strip(b));
    }
    assert_eq!(
        w.frames,
        src.samples
            .iter()
            .map(|s| s.frames.len() as u64)
            .sum::<u64>()
    );
    // More rounds, no chains, long chains only.
    let mut out = Vec::new();
    let w = synth::write(&st, 10_000, Chains::None, &mut out).unwrap();
    let d = crate::input::stream::decode(&Stream::from_bytes(&out, 4).unwrap()).unwrap();
    assert_eq!((w.samples, w.frames, d.samples.len()), (10_000, 0, 10_000));
    assert!(d.samples.iter().all(|s| !s.traced && s.frames.is_empty()));
    let mut out = Vec::new();
    synth::write(&st, 3000, Chains::MinFrames(8), &mut out).unwrap();
    let d = crate::input::stream::decode(&Stream::from_bytes(&out, 4).unwrap()).unwrap();
    assert_eq!(d.samples.len(), 3000);
    assert!(
        d.samples.iter().all(|s| s.traced && s.frames.len() >= 8),
        "min:8 chains"
    );
    assert!(synth::write(&st, 10, Chains::MinFrames(99), &mut Vec::new()).is_err());
    assert!(synth::parse_chains("min:x").is_err());
}
