#!/usr/bin/env bash
# `make bench`: overhead, losses, per-sample cost and report speed of oprofile-rs measured
# against `perf` (not part of make check; Documentation/performance.rst explains the figures).
#
# Boots each board once with a bench initramfs (the usual one plus a static armhf perf from
# scripts/build-perf.sh) running tests/guest/bench.sh: P1-P3 side by side in that boot,
# configurations interleaved within each repetition. QEMU runs with -icount shift=0,sleep=off:
# guest time counts instructions (1 ns each: a 1 GHz CPU, as QEMU's cycle counter), so a figure
# does not depend on the host's load (without it, the same run varied by 2x on a busy host).
# Its cost: one host thread runs both vCPUs round robin, 3-4 s of host time per guest second,
# and a vCPU that spins on the other (IPIs, locks) spins for its whole time slice (the boot
# takes 26 s of guest time). P4 runs on the host: `oprof report -l` on streams made of
# the guest's captured stream (`oprof synth`) and `perf report --stdio` (a host perf from the
# same tree) on the guest's perf.data replicated to the same sample count
# (scripts/perf-replicate.py), wall time and peak RSS from /usr/bin/time.
#   BOARDS (default "virt-a15 realview-pb-a8"), REPS (repetitions, default 3), PARTS (default
#   p1,p2,p3,p4), P2S (seconds per P2 rate, default 2), P4_SAMPLES (default "1000000 10000000").
# Prints the table; writes build/bench/bench.json (rows and raw runs) and the logs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out=$REPO/build/bench
BOARDS=${BOARDS:-virt-a15 realview-pb-a8}
REPS=${REPS:-3}
PARTS=${PARTS:-p1,p2,p3,p4}
P2S=${P2S:-2}
P4_SAMPLES=${P4_SAMPLES:-1000000 10000000}
oprof=$REPO/target/release/oprof
mkdir -p "$out"
[ -x /usr/bin/time ] || die "/usr/bin/time missing (package time: scripts/setup-host.sh)"
KOUT=$(bash "$REPO/scripts/build-kernel.sh" plain); export KOUT
perf_arm=$(bash "$REPO/scripts/build-perf.sh" arm)
perf_host=
case ",$PARTS," in *,p4,*) perf_host=$(bash "$REPO/scripts/build-perf.sh" host) ;; esac
# The plain kernel and its modules (make module testmod: build/plain).
read -r moddir kmoddir < <(mod_dirs plain)
PERF=$perf_arm KVARIANT=plain bash "$REPO/scripts/initramfs.sh" "$out/initramfs.cpio.gz" "$moddir/oprofile.ko"
root=$out/initramfs.root
logs=()
for board in $BOARDS; do
    log=$out/$board.log
    step "bench: $board (REPS=$REPS PARTS=$PARTS; guest log: $log)"
    QEMU_ARGS="-icount shift=0,sleep=off" GUEST_ARGS="benchreps=$REPS benchparts=$PARTS benchp2s=$P2S" \
        bash "$REPO/scripts/qemu.sh" "$board" "$out/initramfs.cpio.gz" bench.sh "$log" 14400 ||
        die "QEMU failed on $board (see $log)"
    logs+=(--log "$board=$log")
done

p4=$out/p4.txt
: > "$p4"
log=$out/virt-a15.log
if [ -n "$perf_host" ] && [ -f "$log" ] && grep -aq '^== p4_samples begin' "$log"; then
    d=$out/p4
    rm -rf "$d"; mkdir -p "$d"
    log_stream "$log" p4_samples "$d/samples" || die "P4: no captured stream in $log"
    for f in images proc_modules module_sections; do log_block "$log" "p4_$f" "$d/$f" || die "P4: no $f in $log"; done
    for f in perf perf_g kallsyms; do
        log_stream "$log" "p4_$f" "$d/$f.gz" && gunzip -f "$d/$f.gz" || die "P4: no $f in $log"
    done
    session=(--images "$d/images" --proc-modules "$d/proc_modules" --module-sections "$d/module_sections"
             --vmlinux "$KOUT/vmlinux" --sysroot "$root" --image-path "$root/lib" --image-path "$moddir"
             --image-path "$kmoddir")
    src_samples=$("$oprof" report "$d/samples" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
    # measure TOOL N CHAINS CMD...: wall time and peak RSS of CMD (output discarded).
    measure() {
        local tool=$1 n=$2 ch=$3 t
        shift 3
        /usr/bin/time -f 'TIME %e %M %x' "$@" > /dev/null 2> "$d/err" || true
        t=$(tail -1 "$d/err")
        case $t in "TIME "*" 0") ;; *) cat "$d/err" >&2; die "P4: $tool failed: $*" ;; esac
        set -- $t
        echo "BENCH P4 tool=$tool samples=$n chains=$ch wall_s=$2 rss_kb=$3 ${ACTUAL:+actual=$ACTUAL}" | tee -a "$p4"
    }
    for n in $P4_SAMPLES; do
        for ch in 0 1; do
            c=none; [ $ch = 0 ] || c=recorded
            step "P4: $n samples, chains $c"
            "$oprof" synth "$d/samples" "$d/ours.buf" --samples "$n" --chains $c > /dev/null
            measure ours "$n" $ch "$oprof" report "$d/ours.buf" "${session[@]}" -l
            rm -f "$d/ours.buf"
            pd=$d/perf.data; src=$d/perf; [ $ch = 0 ] || src=$d/perf_g
            per=$(python3 "$REPO/scripts/perf-replicate.py" "$src" /dev/null 1)
            copies=$(( (n + per / 2) / per ))
            ACTUAL=$(python3 "$REPO/scripts/perf-replicate.py" "$src" "$pd" $(( copies > 0 ? copies : 1 ))) \
                measure perf "$n" $ch "$perf_host" report --stdio -i "$pd" --kallsyms "$d/kallsyms" --symfs "$root"
            rm -f "$pd"
        done
    done
    echo "P4 source: $src_samples samples captured by oprof record -g 16 on virt-a15" >> "$p4"
fi
python3 "$REPO/scripts/bench.py" "${logs[@]}" --p4 "$p4" --json "$out/bench.json"
step "bench: table above; rows and raw runs in $out/bench.json"
