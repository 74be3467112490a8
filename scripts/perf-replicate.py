#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""perf-replicate.py IN OUT COPIES: writes OUT, a perf.data whose data section is IN's repeated
COPIES times, as `oprof synth` repeats a captured stream's samples (P4 of `make bench`: `perf
report` on as many samples as `oprof report`, made of samples recorded in the guest).

Each copy's timestamps (samples' PERF_SAMPLE_TIME and the sample_id trailer of the other kernel
records) are shifted past the previous copy, so the events stay in time order for perf's
ordered-events queue. The attributes and everything before the data section are kept; the
feature sections after it move by the added size (their table's offsets are rewritten).
Prints the number of PERF_RECORD_SAMPLE records written.
"""
import struct
import sys

HEADER = struct.Struct("<8sQQ" + "QQ" * 3 + "32s")
RECORD_SAMPLE = 9
USER_TYPE_START = 64
IP, TID, TIME, ID, CPU, STREAM_ID, IDENTIFIER = 1 << 0, 1 << 1, 1 << 2, 1 << 6, 1 << 7, 1 << 9, 1 << 16


def fail(msg):
    sys.exit(f"perf-replicate.py: {msg}")


def main():
    if len(sys.argv) != 4:
        fail("usage: perf-replicate.py IN OUT COPIES")
    src, dst, copies = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if copies < 1:
        fail("COPIES must be at least 1")
    b = open(src, "rb").read()
    (magic, _hsize, attr_size, a_off, a_sz, d_off, d_sz, _e_off, _e_sz, feats) = HEADER.unpack_from(b, 0)
    if magic != b"PERFILE2":
        fail(f"{src}: not a perf.data file (magic {magic!r})")
    if d_off % 8 or d_sz % 8 or d_off + d_sz > len(b):
        fail(f"{src}: odd data section {d_off}+{d_sz} in {len(b)} bytes")
    kinds = set()
    for off in range(a_off, a_off + a_sz, attr_size):
        sample_type, = struct.unpack_from("<Q", b, off + 24)
        flags, = struct.unpack_from("<Q", b, off + 40)
        kinds.add((sample_type, (flags >> 18) & 1))
    # Events may differ in other fields (perf -g adds a tracking event without callchains);
    # the fields before TIME in a sample and in the sample_id trailer must agree.
    layout = IDENTIFIER | IP | TID | TIME | ID | STREAM_ID | CPU
    if len({(t & layout, a) for t, a in kinds}) != 1:
        fail(f"{src}: events with different sample layouts {sorted(kinds)}")
    (st, id_all) = kinds.pop()
    if not st & TIME:
        fail(f"{src}: samples without PERF_SAMPLE_TIME")
    in_sample = 8 + 8 * sum(1 for f in (IDENTIFIER, IP, TID) if st & f)
    # sample_id trailer: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER; TIME is this far from the end.
    from_end = 8 * (1 + sum(1 for f in (ID, STREAM_ID, CPU, IDENTIFIER) if st & f))
    data = b[d_off:d_off + d_sz]
    times, samples, pos = [], 0, 0
    while pos < len(data):
        typ, _misc, size = struct.unpack_from("<IHH", data, pos)
        if size < 8 or size % 8 or pos + size > len(data):
            fail(f"{src}: bad record at data offset {pos} (type {typ}, size {size})")
        if typ == RECORD_SAMPLE:
            times.append((pos + in_sample) // 8)
            samples += 1
        elif typ < USER_TYPE_START and id_all:
            times.append((pos + size - from_end) // 8)
        pos += size
    words = memoryview(bytearray(data)).cast("Q")
    stamps = [words[i] for i in times]
    span = max(stamps, default=0) - min(stamps, default=0) + 1
    nfeat = bin(int.from_bytes(feats, "little")).count("1")
    tail = bytearray(b[d_off + d_sz:])
    delta = (copies - 1) * d_sz
    for i in range(nfeat):
        off, size = struct.unpack_from("<QQ", tail, 16 * i)
        struct.pack_into("<QQ", tail, 16 * i, off + delta, size)
    head = bytearray(b[:d_off])
    struct.pack_into("<QQ", head, 40, d_off, d_sz * copies)
    with open(dst, "wb") as f:
        f.write(head)
        for k in range(copies):
            if k:
                for i, t in zip(times, stamps):
                    words[i] = t + k * span
            f.write(words.tobytes())
        f.write(tail)
    print(samples * copies)


if __name__ == "__main__":
    main()
