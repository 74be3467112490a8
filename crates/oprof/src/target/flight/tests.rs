use super::*;
use crate::fixtures::bytes32;
use crate::input::stream::Stream;
use oprofile_common::event::Record as R;

/// One sync pass over CPU `cpu` of task `pid`: its context, then `n` kernel samples at `pc`.
fn pass(cpu: u64, pid: u64, pc: u64, n: usize) -> Vec<u8> {
    let mut recs = vec![
        R::CpuSwitch { cpu },
        R::KernelEnter,
        R::CtxSwitch {
            pid,
            tgid: pid,
            app_cookie: 0,
        },
    ];
    recs.extend((0..n).map(|_| R::Sample { pc, event: 0 }));
    bytes32(&recs)
}

fn session() -> (tempfile::TempDir, SessionDir) {
    let d = tempfile::tempdir().unwrap();
    let out = SessionDir::prepare(&d.path().join("s"), false).unwrap();
    (d, out)
}

/// Samples of a stream, by the whole-stream decoder (independent of the ring's counting).
fn decoded_samples(bytes: &[u8]) -> usize {
    stream::decode(&Stream::from_bytes(bytes, 4).unwrap())
        .unwrap()
        .samples
        .len()
}

#[test]
fn the_ring_keeps_the_last_chunks_whole_and_counts_what_it_drops() {
    let (_d, out) = session();
    let max = 8 * 1024;
    let mut ring = Ring::new(out.subdir(CHUNK_DIR).unwrap(), 4, max);
    // 200 reads of two passes each (pid = the read's number): 27 words, 108 bytes a pass.
    let mut all = vec![];
    let mut reads = vec![];
    for i in 0..200u64 {
        let mut r = pass(0, i + 1, 0x1000 + i, 10);
        r.extend(pass(1, i + 1, 0x1000 + i, 10));
        all.extend_from_slice(&r);
        reads.push(r);
    }
    for r in &reads {
        let (n, err) = ring.put(r);
        assert!(
            n == r.len() && err.is_none(),
            "{n} of {} written: {err:?}",
            r.len()
        );
    }
    let kept = ring.finish();
    assert!(assemble(&out, &kept).unwrap().left.is_empty());
    let samples = std::fs::read(out.path().join(session::SAMPLES)).unwrap();
    assert!(
        !out.path().join(CHUNK_DIR).exists(),
        "the chunk directory is gone"
    );
    // The kept stream is the original's tail, cut at a pass's start.
    assert!(all.ends_with(&samples));
    let one_pass = pass(0, 1, 0x1000, 10);
    assert!(
        samples.starts_with(&one_pass[..8]),
        "starts with CPU_SWITCH"
    );
    let chunk = max / CHUNKS;
    let len = samples.len() as u64;
    assert!(
        len <= max + chunk + one_pass.len() as u64,
        "{len} bytes kept, max {max}"
    );
    assert!(len >= max - chunk, "{len} bytes kept: too few");
    let d = &kept.dropped;
    assert_eq!(
        d.bytes + len,
        all.len() as u64,
        "every byte kept or dropped"
    );
    assert!(d.chunks > 0 && d.uncounted.is_none() && kept.cut);
    let total = decoded_samples(&all) as u64;
    assert_eq!(d.samples + decoded_samples(&samples) as u64, total);
}

#[test]
fn a_read_of_many_passes_is_cut_between_them() {
    let (_d, out) = session();
    let max = 8 * 1024;
    let mut ring = Ring::new(out.subdir(CHUNK_DIR).unwrap(), 8, max);
    // One read of 400 passes (8-byte words), as a reader woken late takes them.
    let passes: Vec<Vec<u8>> = (0..400)
        .map(|i| {
            let words = crate::fixtures::words(
                &[
                    R::CpuSwitch { cpu: i % 2 },
                    R::KernelEnter,
                    R::CtxSwitch {
                        pid: i + 1,
                        tgid: i + 1,
                        app_cookie: 0,
                    },
                    R::Sample { pc: 0x40, event: 0 },
                ],
                8,
            );
            crate::fixtures::bytes(&words, 8)
        })
        .collect();
    let read = passes.concat();
    let (n, err) = ring.put(&read);
    assert!(n == read.len() && err.is_none());
    let kept = ring.finish();
    assert!(kept.cut && kept.dropped.chunks > 0);
    assert!(assemble(&out, &kept).unwrap().left.is_empty());
    let samples = std::fs::read(out.path().join(session::SAMPLES)).unwrap();
    let len = samples.len() as u64;
    assert!(
        len <= max + max / CHUNKS + passes[0].len() as u64,
        "{len} bytes kept"
    );
    assert!(read.ends_with(&samples));
    assert!(
        passes.iter().any(|p| samples.starts_with(p)),
        "from a pass's start"
    );
    let words: Vec<u64> = stream::le_words(&samples, 8).collect();
    let st = Stream {
        words,
        word_bytes: 8,
    };
    assert_eq!(
        stream::decode(&st).unwrap().samples.len() as u64,
        len / passes[0].len() as u64
    );
}

#[test]
fn a_read_without_a_pass_context_does_not_start_a_chunk() {
    let (_d, out) = session();
    let mut ring = Ring::new(out.subdir(CHUNK_DIR).unwrap(), 4, 64 * 1024);
    // Samples without a preceding CPU_SWITCH context: never a chunk start.
    let bare = bytes32(&[R::Sample { pc: 4, event: 0 }; 400]);
    let mut written = 0;
    for _ in 0..100 {
        written += ring.put(&bare).0;
    }
    let kept = ring.finish();
    assert_eq!(
        kept.names.len(),
        1,
        "one chunk: no read could start another"
    );
    assert!(!kept.cut && kept.dropped == Dropped::default());
    assert!(assemble(&out, &kept).unwrap().left.is_empty());
    let len = std::fs::metadata(out.path().join(session::SAMPLES))
        .unwrap()
        .len();
    assert_eq!(len, written as u64);
}

#[test]
fn an_empty_ring_makes_an_empty_samples_file() {
    let (_d, out) = session();
    let kept = Ring::new(out.subdir(CHUNK_DIR).unwrap(), 4, 1 << 20).finish();
    assert!(assemble(&out, &kept).unwrap().left.is_empty());
    assert_eq!(
        std::fs::read(out.path().join(session::SAMPLES)).unwrap(),
        b""
    );
}

#[test]
fn chunk_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let (_d, out) = session();
    let mut ring = Ring::new(out.subdir(CHUNK_DIR).unwrap(), 4, 1 << 20);
    ring.put(&pass(0, 1, 4, 1));
    let dir = out.path().join(CHUNK_DIR);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("0000000000")), 0o600);
}

/// Snapshots of `out`'s recording (4-byte words), oprofilefs at `opfs`.
fn snapshots(out: &SessionDir, opfs: &std::path::Path) -> Snapshots {
    let info = SessionInfo {
        pointer_size: 4,
        ..Default::default()
    };
    Snapshots::new(out, &info, opfs, 64 * 1024).unwrap()
}

#[test]
fn a_snapshot_copies_the_chunks_whole_records_while_the_ring_goes_on() {
    // The stream part of Snapshots::take (the system's files are the end of a session's:
    // collect_system, held by the guest test record.sh).
    let (d, out) = session();
    let mut ring = Ring::new(out.subdir(CHUNK_DIR).unwrap(), 4, 64 * 1024);
    let snaps = snapshots(&out, d.path());
    let first = pass(0, 7, 0x100, 20);
    ring.put(&first);
    // A read being written: the chunk ends inside a record (one word of a sample's two).
    let torn = &pass(1, 8, 0x200, 20)[..];
    ring.put(&torn[..torn.len() - 4]);
    let copy = |n: u32| {
        let to = SessionDir::prepare(&d.path().join(format!("copy{n}")), false).unwrap();
        let got = snaps.copy_chunks(&to).unwrap();
        (
            got,
            std::fs::read(to.path().join(session::SAMPLES)).unwrap(),
        )
    };
    let ((samples, bytes), got) = copy(1);
    assert_eq!(bytes as usize, got.len());
    assert_eq!(
        got.len(),
        first.len() + torn.len() - 8,
        "whole records only"
    );
    assert_eq!((samples, decoded_samples(&got)), (39, 39));
    // The ring goes on: the next copy has the rest.
    ring.put(&torn[torn.len() - 4..]);
    let ((samples, _), got) = copy(2);
    assert_eq!(got, [first, torn.to_vec()].concat());
    assert_eq!(samples, 40);
}

#[test]
fn a_snapshot_keeps_no_chunk_older_than_one_dropped_during_its_copy() {
    let (d, out) = session();
    let dir = out.subdir(CHUNK_DIR).unwrap();
    // Three chunks; the middle one goes (as if dropped between the listing and its open).
    for (i, pid) in [(0, 1), (1, 2), (2, 3)] {
        let mut f = dir.create(&format!("{i:010}")).unwrap();
        f.write_all(&pass(0, pid, 0x100, 3)).unwrap();
    }
    dir.remove("0000000001").unwrap();
    let snaps = snapshots(&out, d.path());
    let to = SessionDir::prepare(&d.path().join("copy"), false).unwrap();
    let (samples, _) = snaps.copy_chunks(&to).unwrap();
    let got = std::fs::read(to.path().join(session::SAMPLES)).unwrap();
    assert_eq!(got, pass(0, 3, 0x100, 3), "only the tail after the gap");
    assert_eq!(samples, 3);
}

#[test]
fn a_chunk_that_cannot_be_joined_stays_with_the_later_ones_and_is_said() {
    let (_d, out) = session();
    let dir = out.subdir(CHUNK_DIR).unwrap();
    for (i, pid) in [(0, 1), (2, 3)] {
        let mut f = dir.create(&format!("{i:010}")).unwrap();
        f.write_all(&pass(0, pid, 0x100, 3)).unwrap();
    }
    // The second is gone (its append fails): it and the third are left, samples is the first.
    let kept = Kept {
        names: ["0000000000", "0000000001", "0000000002"]
            .map(String::from)
            .to_vec(),
        ..Kept::default()
    };
    let j = assemble(&out, &kept).unwrap();
    assert_eq!(j.left, ["0000000001", "0000000002"]);
    assert_eq!(j.left_bytes, pass(0, 3, 0x100, 3).len() as u64);
    assert!(j
        .notes
        .iter()
        .any(|n| n.contains("2 chunks") && n.contains("not joined")));
    let samples = std::fs::read(out.path().join(session::SAMPLES)).unwrap();
    assert_eq!(samples, pass(0, 1, 0x100, 3));
    assert!(out.path().join(CHUNK_DIR).join("0000000002").exists());
}

#[test]
fn a_snapshot_is_refused_without_room_and_never_made_through_a_link() {
    let (d, out) = session();
    let info = SessionInfo {
        pointer_size: 4,
        ..Default::default()
    };
    // A ring so large that no disk has room for a snapshot of it beside it.
    let mut big = Snapshots::new(&out, &info, d.path(), u64::MAX).unwrap();
    let e = format!("{:#}", big.take().unwrap_err());
    assert!(
        e.contains("needed: the snapshot could fill the disk"),
        "{e}"
    );
    assert!(!out.path().join("snapshot-1").exists());
    // A link planted where the snapshot goes is not followed.
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.path().join("snapshot-1")).unwrap();
    let e = format!("{:#}", snapshots(&out, d.path()).take().unwrap_err());
    assert!(e.contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn the_trigger_file_asks_once_and_a_link_named_so_is_removed_not_followed() {
    let (d, out) = session();
    let trigger = out.path().join(TRIGGER);
    // One left by a replaced session is removed at the start: it asks for nothing.
    std::fs::write(&trigger, "").unwrap();
    let mut snaps = snapshots(&out, d.path());
    assert!(!trigger.exists());
    assert!(!snaps.trigger_asked());
    std::fs::write(&trigger, "").unwrap();
    assert!(snaps.trigger_asked());
    assert!(!trigger.exists(), "taken away with the ask");
    assert!(!snaps.trigger_asked(), "one file, one snapshot");
    // A link in its place asks too; what it points to is untouched.
    let target = d.path().join("precious");
    std::fs::write(&target, "keep").unwrap();
    std::os::unix::fs::symlink(&target, &trigger).unwrap();
    assert!(snaps.trigger_asked());
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    // A directory cannot be taken away: it asks for nothing, now or later.
    std::fs::create_dir(&trigger).unwrap();
    assert!(!snaps.trigger_asked());
    std::fs::remove_dir(&trigger).unwrap();
    std::fs::write(&trigger, "").unwrap();
    assert!(!snaps.trigger_asked(), "said once, then ignored");
}
