//! Tests of the stream checks (`validate.rs`).

use super::*;
use crate::fixtures::{bytes, noise, words as enc};
use crate::input::session::CounterInfo;

fn first(words: &[u64], lim: &Limits) -> Option<Bad> {
    first_bad(&mut bytes(words, lim.word_bytes).as_slice(), lim).unwrap()
}

/// The start of a pass on `cpu` in kernel mode, task 7.
fn pass(cpu: u64) -> Vec<Record> {
    vec![
        Record::CpuSwitch { cpu },
        Record::KernelEnter,
        Record::CtxSwitch {
            pid: 7,
            tgid: 7,
            app_cookie: 0,
        },
    ]
}

fn sample(pc: u64, event: u64) -> Record {
    Record::Sample { pc, event }
}

/// A stream as the module writes one: two passes, a user sample, a call chain.
fn valid() -> Vec<Record> {
    let mut r = pass(0);
    r.extend([
        sample(0xc000_1000, 0),
        Record::TraceBegin,
        sample(0xc000_1004, 1),
    ]);
    r.extend([sample(0xc000_2000, 0), sample(0xc000_2004, 0)]);
    r.extend([
        Record::KernelExit,
        Record::CookieSwitch { cookie: 3 },
        sample(0x400, 0),
    ]);
    r.push(Record::ModuleLoaded);
    r.extend(pass(1));
    r.push(sample(0xc000_3000, 1));
    r
}

fn any4() -> Limits {
    Limits::bare(4, None)
}

fn problem(words: &[u64], lim: &Limits) -> (usize, Problem) {
    let b = first(words, lim).expect("a bad word");
    (b.word, b.problem)
}

#[test]
fn streams_as_the_module_writes_them_pass() {
    for wb in [4, 8] {
        let lim = Limits::bare(wb, None);
        assert_eq!(first(&enc(&valid(), wb), &lim), None, "{wb}-byte words");
        assert_eq!(first(&[], &lim), None, "an empty stream");
        let kept = keep(&enc(&valid(), wb), &lim);
        assert!(kept.skipped.ranges.is_empty() && kept.ranges.len() == 1);
    }
    // MODULE_LOADED may come first (a module loaded before any sample was synced).
    let mut r = vec![Record::ModuleLoaded];
    r.extend(valid());
    assert_eq!(first(&enc(&r, 4), &any4()), None);
}

#[test]
fn random_and_zero_bytes_are_refused_at_offset_0() {
    let lim = any4();
    for data in [noise(1000), vec![0u8; 1000]] {
        let bad = first_bad(&mut data.as_slice(), &lim).unwrap().unwrap();
        assert_eq!((bad.word, bad.problem), (0, Problem::Start("a sample")));
        // --force finds no pass to resync at: everything is skipped.
        let words: Vec<u64> = le_words(&data, 4).collect();
        let kept = keep(&words, &lim);
        assert!(kept.ranges.is_empty());
        assert_eq!((kept.skipped.bytes, kept.skipped.ranges.len()), (1000, 1));
    }
}

#[test]
fn counters_are_the_sessions() {
    let mut r = pass(0);
    r.push(sample(0xc000_1000, 7));
    let w = enc(&r, 4);
    // Word 13 (after 3 + 2 + 7 words and the PC) is the counter.
    assert_eq!(problem(&w, &any4()), (13, Problem::Counter(7)));
    let a8 = CpuModel::by_cpu_type("arm/armv7");
    let (ok, bad) = (
        enc(&[pass(0), vec![sample(1, 4)]].concat(), 4),
        enc(&[pass(0), vec![sample(1, 5)]].concat(), 4),
    );
    assert_eq!(first(&ok, &Limits::bare(4, Some(a8))), None);
    assert_eq!(
        problem(&bad, &Limits::bare(4, Some(a8))).1,
        Problem::Counter(5)
    );
    // Timer mode: counter 0 only; frames carry 0 whatever the counters are.
    let timer = Limits::bare(4, Some(None));
    assert_eq!(problem(&ok, &timer).1, Problem::Counter(4));
    let mut info = SessionInfo {
        pointer_size: 4,
        ..Default::default()
    };
    let counter = |counter| CounterInfo {
        counter,
        event: "CPU_CYCLES".into(),
        event_number: 0xff,
        count: 100000,
        unit_mask: 0,
        kernel: true,
        user: true,
        total: None,
    };
    info.counters = vec![counter(1)];
    let chain = [
        pass(0),
        vec![Record::TraceBegin, sample(1, 1), sample(2, 0)],
    ]
    .concat();
    assert_eq!(
        first(&enc(&chain, 4), &Limits::session(&info)),
        None,
        "a frame's 0 is no counter"
    );
    let zero = [pass(0), vec![sample(1, 0)]].concat();
    let msg = Problem::Counter(0).describe(&Limits::session(&info));
    assert_eq!(
        problem(&enc(&zero, 4), &Limits::session(&info)).1,
        Problem::Counter(0)
    );
    assert!(msg.contains("counters 1 (session.json)"), "{msg}");
}

#[test]
fn escape_codes_and_record_parts() {
    let e = escape_code(4);
    let mut w = enc(&pass(0), 4);
    w.extend([e, 9]);
    assert_eq!(problem(&w, &any4()), (13, Problem::Code(9)));
    // CTX_SWITCH without CTX_TGID: the word after its first half.
    let w = [
        enc(&[Record::CpuSwitch { cpu: 0 }], 4),
        vec![e, 1, 5, 0, e, 8, 5],
    ]
    .concat();
    assert_eq!(problem(&w, &any4()), (7, Problem::CtxTgid));
    // A sample before its pass's mode and task.
    let w = enc(
        &[
            Record::CpuSwitch { cpu: 0 },
            Record::KernelEnter,
            sample(1, 0),
        ],
        4,
    );
    assert_eq!(problem(&w, &any4()), (5, Problem::NoContext));
    // CPU and pid bounds follow the word size.
    let cpu = |cpu, wb| enc(&[Record::CpuSwitch { cpu }], wb);
    assert_eq!(problem(&cpu(32, 4), &any4()), (2, Problem::Cpu(32)));
    assert_eq!(first(&cpu(4095, 8), &Limits::bare(8, None)), None);
    let ctx = |pid, tgid| {
        enc(
            &[
                Record::CpuSwitch { cpu: 0 },
                Record::CtxSwitch {
                    pid,
                    tgid,
                    app_cookie: 0,
                },
            ],
            4,
        )
    };
    assert_eq!(
        problem(&ctx(1 << 15, 1), &any4()),
        (5, Problem::Pid("pid", 1 << 15))
    );
    assert_eq!(
        problem(&ctx(1, 1 << 15), &any4()),
        (9, Problem::Pid("tgid", 1 << 15))
    );
}

#[test]
fn snapshot_records_are_bounded() {
    let e = escape_code(4);
    let start = enc(&[pass(0), vec![sample(1, 0)]].concat(), 4);
    // USER_MAPS of 257 mappings: refused at its count, before its payload is looked for.
    let maps = [start.clone(), vec![e, 32, 7, 257]].concat();
    assert_eq!(problem(&maps, &any4()), (17, Problem::Maps(257)));
    let stack = [start.clone(), vec![e, 33, 4097]].concat();
    assert_eq!(problem(&stack, &any4()), (16, Problem::Stack(4097)));
    let ok = [start.clone(), vec![e, 33, 2], vec![0; 17 + 2]].concat();
    assert_eq!(first(&ok, &any4()), None);
    // A session without snapshots has none; one with 8 bytes has 2 words at most.
    let mut info = SessionInfo {
        pointer_size: 4,
        ..Default::default()
    };
    assert_eq!(
        problem(&ok, &Limits::session(&info)),
        (15, Problem::NoSnapshots)
    );
    info.settings.user_stack_size = 4;
    assert_eq!(
        problem(&ok, &Limits::session(&info)),
        (16, Problem::Stack(2))
    );
}

#[test]
fn the_end_is_a_record_boundary() {
    let w = enc(&valid(), 4);
    let cut = &w[..w.len() - 1];
    assert_eq!(
        problem(cut, &any4()),
        (w.len() - 2, Problem::Truncated { need: 2, have: 1 })
    );
    let mut b = bytes(&w, 4);
    b.extend([1, 2]);
    let bad = first_bad(&mut b.as_slice(), &any4()).unwrap().unwrap();
    assert_eq!((bad.word, bad.problem), (w.len(), Problem::PartialWord(2)));
}

#[test]
fn wrong_word_size_is_refused() {
    let w8 = bytes(&enc(&valid(), 8), 8);
    let bad = first_bad(&mut w8.as_slice(), &any4()).unwrap().unwrap();
    // ~0 as two 4-byte words: an escape with code 0xffffffff.
    assert_eq!((bad.word, bad.problem), (1, Problem::Code(0xffff_ffff)));
    let w4 = bytes(&enc(&valid(), 4), 4);
    let bad = first_bad(&mut w4.as_slice(), &Limits::bare(8, None))
        .unwrap()
        .unwrap();
    assert_eq!(bad.word, 0, "{bad:?}");
}

#[test]
fn blocks_do_not_split_records() {
    // Far more words than a block, with a USER_STACK record across each block boundary.
    let e = escape_code(8);
    let mut w = enc(&pass(0), 8);
    while w.len() < 3 * BLOCK_BYTES / 8 {
        w.extend(enc(&[sample(0xffff_8000_0000_1000, 0)], 8));
        w.extend([e, 33, 100]);
        w.extend(std::iter::repeat_n(e, 34 + 100));
    }
    assert_eq!(first(&w, &Limits::bare(8, None)), None);
    w.extend(enc(&[sample(1, 9)], 8));
    assert_eq!(
        problem(&w, &Limits::bare(8, None)),
        (w.len() - 1, Problem::Counter(9))
    );
}

#[test]
fn force_skips_to_the_next_pass() {
    let lim = any4();
    let good = enc(&valid(), 4);
    // Garbage in front, a bad counter in the middle, a cut record at the end.
    let mut w: Vec<u64> = vec![0; 6];
    w.extend(&good);
    let bad_at = w.len();
    w.extend(enc(&[sample(0xc000_4000, 99), sample(0xc000_4004, 0)], 4));
    w.extend(&good);
    w.push(0x1234);
    let kept = keep(&w, &lim);
    let at = |s: &Skip| (s.offset / 4, s.bytes / 4, s.bad_offset / 4);
    let skips: Vec<_> = kept.skipped.ranges.iter().map(at).collect();
    let second = bad_at + 4;
    assert_eq!(
        skips,
        [
            (0, 6, 0),
            (bad_at as u64, 4, bad_at as u64 + 1),
            (w.len() as u64 - 1, 1, w.len() as u64 - 1)
        ]
    );
    assert_eq!(kept.ranges, [6..bad_at, second..w.len() - 1]);
    let kept_words: Vec<u64> = kept
        .ranges
        .iter()
        .flat_map(|r| w[r.clone()].to_vec())
        .collect();
    assert_eq!(first(&kept_words, &lim), None, "what --force keeps passes");
    assert_eq!(kept.skipped.bytes, 11 * 4);
    let note = kept.skipped.note(Path::new("s.buf"));
    assert!(
        note.starts_with(
            "s.buf: --force skipped 44 bytes in 3 ranges: 24 bytes at byte offset 0 ("
        ),
        "{note}"
    );
}

#[test]
fn force_keeps_the_file_when_nothing_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.buf");
    std::fs::write(&p, bytes(&enc(&valid(), 4), 4)).unwrap();
    assert!(matches!(check(&p, &any4(), true).unwrap(), Checked::File));
    assert!(matches!(check(&p, &any4(), false).unwrap(), Checked::File));
    let mut b = bytes(&enc(&valid(), 4), 4);
    b.extend([0xff; 3]);
    std::fs::write(&p, &b).unwrap();
    let Checked::Kept { bytes: k, skipped } = check(&p, &any4(), true).unwrap() else {
        panic!("skips")
    };
    assert_eq!(
        (k.len(), skipped.bytes, skipped.ranges[0].offset),
        (b.len() - 3, 3, b.len() as u64 - 3)
    );
}

#[test]
fn errors_are_one_line_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.buf");
    let mut r = pass(0);
    r.push(sample(0xc000_1000, 12));
    std::fs::write(&p, bytes(&enc(&r, 4), 4)).unwrap();
    let e = check(&p, &any4(), false).err().unwrap();
    let text = format!("{e:#}");
    assert!(e.downcast_ref::<Invalid>().is_some());
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.starts_with(&format!(
            "{}: byte offset 52: sample of counter 12",
            p.display()
        )),
        "{text}"
    );
    // An 8-byte stream read with 4-byte words: the hint says so.
    std::fs::write(&p, bytes(&enc(&valid(), 8), 8)).unwrap();
    let text = format!("{:#}", check(&p, &any4(), false).err().unwrap());
    assert!(
        text.contains(
            "byte offset 4: unknown escape code 4294967295; it is a valid stream of 8-byte words"
        ),
        "{text}"
    );
}

#[test]
fn session_json_decides_word_size_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let (json, samples) = (dir.path().join("session.json"), dir.path().join("samples"));
    let b = bytes(&enc(&valid(), 4), 4);
    std::fs::write(&samples, &b).unwrap();
    let mut info = SessionInfo {
        pointer_size: 4,
        ..Default::default()
    };
    info.totals.bytes = b.len() as u64;
    assert_eq!(
        check_session(&json, &info, None, &samples, false).unwrap(),
        None
    );
    assert_eq!(
        check_session(&json, &info, Some(4), &samples, false).unwrap(),
        None
    );
    let e = check_session(&json, &info, Some(8), &samples, false)
        .err()
        .unwrap();
    assert_eq!(
        format!("{e:#}"),
        format!("{}: pointer_size is 4, not --word-size 8", json.display())
    );
    assert!(e.downcast_ref::<Invalid>().is_some());
    // A samples file cut short (or grown) since the session.
    info.totals.bytes += 8;
    let e = format!(
        "{:#}",
        check_session(&json, &info, None, &samples, false)
            .err()
            .unwrap()
    );
    assert!(
        e.starts_with(&format!("{}: byte offset {}: ", samples.display(), b.len())),
        "{e}"
    );
    let note = check_session(&json, &info, None, &samples, true)
        .unwrap()
        .unwrap();
    assert!(note.contains("--force"), "{note}");
    // The session's counters: a sample of a counter it did not sample.
    info.counters = vec![];
    let mut r = pass(0);
    r.push(sample(0xc000_1000, 1));
    let bad = first(&enc(&r, 4), &Limits::session(&info)).unwrap();
    assert_eq!(bad.problem, Problem::Counter(1));
    assert!(bad
        .problem
        .describe(&Limits::session(&info))
        .contains("session.json: timer mode"));
}

/// Up to `len` bytes: `head`, then zero bytes; counts the bytes read.
struct Endless<'a> {
    head: &'a [u8],
    len: u64,
    read: u64,
}

impl Read for Endless<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.len - self.read).unwrap_or(usize::MAX);
        let n = buf.len().min(left);
        for (i, b) in buf[..n].iter_mut().enumerate() {
            let at = usize::try_from(self.read).unwrap() + i;
            *b = self.head.get(at).copied().unwrap_or(0);
        }
        self.read += n as u64;
        Ok(n)
    }
}

#[test]
fn a_stack_header_of_2_40_words_is_refused_in_bounded_memory() {
    // An arm64 session whose session.json claims 2^43 stack bytes (Session::open refuses it;
    // the limits are built directly), then a USER_STACK of 2^40 words and 64 MiB of zeros.
    let mut info = SessionInfo {
        pointer_size: 8,
        ..Default::default()
    };
    info.settings.user_stack_size = 1 << 43;
    let lim = Limits::session(&info);
    let start = enc(&pass(0), 8);
    let at = start.len();
    let w = [start, vec![!0, 33, 1 << 40]].concat();
    let head = bytes(&w, 8);
    let mut r = Endless {
        head: &head,
        len: 64 << 20,
        read: 0,
    };
    let bad = first_bad(&mut r, &lim).unwrap().unwrap();
    // The header is refused at the module's largest stack (16384 bytes: 2048 words) before
    // its payload is awaited: no more than a block or two was read.
    assert_eq!((bad.word, bad.problem), (at + 2, Problem::Stack(1 << 40)));
    assert!(r.read <= 2 * BLOCK_BYTES as u64, "read {} bytes", r.read);
}
