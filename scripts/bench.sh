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
# takes 26 s of guest time). P4 runs on the host: `oprof report -l` against `perf report --stdio
# --no-children -g none --sort dso,sym` (flat) and `oprof report -c` against perf's caller
# graph (call graphs), a host perf from the same tree, on streams made of the guest's short
# captured stream (`oprof synth`) and its perf.data replicated to the same sample count
# (scripts/perf-replicate.py), and on a long recording of each; wall time and peak RSS from
# /usr/bin/time, and the samples each tool read, from its own output.
#   BOARDS (default "virt-a15 realview-pb-a8"), REPS (repetitions, default 3), PARTS (default
#   p1,p2,p3,p4), P2S (seconds per P2 rate, default 2), P4_SAMPLES (default "1000000
#   10000000"), P4_REPS (report runs per figure, default 3), P4S (seconds of the long
#   recording, default 20).
# Prints the table; writes build/bench/bench.json (rows and raw runs) and the logs, and with
# every part on both boards the README's table and Documentation/bench-results.md
# (scripts/bench-table.py).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out=$REPO/build/bench
BOARDS=${BOARDS:-virt-a15 realview-pb-a8}
REPS=${REPS:-3}
PARTS=${PARTS:-p1,p2,p3,p4}
P2S=${P2S:-2}
P4_SAMPLES=${P4_SAMPLES:-1000000 10000000}
P4_REPS=${P4_REPS:-3}
P4S=${P4S:-20}
oprof=$REPO/target/release/oprof
mkdir -p "$out"
# The tree measured (bench.py records it): the commit, and whether tracked files differed from it.
BENCH_TREE="$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
[ -z "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ] || BENCH_TREE="$BENCH_TREE with local changes"
export BENCH_TREE
[ -x /usr/bin/time ] || die "/usr/bin/time missing (package time: scripts/setup-host.sh)"
KOUT=$(bash "$REPO/scripts/build-kernel.sh" plain); export KOUT
perf_arm=$(bash "$REPO/scripts/build-perf.sh" arm)
perf_host=
case ",$PARTS," in *,p4,*) perf_host=$(bash "$REPO/scripts/build-perf.sh" host) ;; esac
# The plain kernel and its modules (make module testmod: build/plain).
read -r moddir kmoddir < <(mod_dirs plain)
PERF=$perf_arm KVARIANT=plain bash "$REPO/scripts/initramfs.sh" "$out/initramfs.cpio.gz" "$moddir/oprofile.ko"
root=$out/initramfs.root
# The boards boot side by side (guest time counts instructions, so one does not slow the
# other's figures; P4's host timing comes after both).
logs=() pids=()
for board in $BOARDS; do
    log=$out/$board.log
    step "bench: $board (REPS=$REPS PARTS=$PARTS; guest log: $log)"
    QEMU_ARGS="-icount shift=0,sleep=off" GUEST_ARGS="benchreps=$REPS benchparts=$PARTS benchp2s=$P2S benchp4s=$P4S" \
        bash "$REPO/scripts/qemu.sh" "$board" "$out/initramfs.cpio.gz" bench.sh "$log" 14400 > "$out/$board.qemu.out" 2>&1 &
    pids+=($!)
    logs+=(--log "$board=$log")
done
set -- $BOARDS
for pid in "${pids[@]}"; do
    wait "$pid" || die "QEMU failed on $1 (see $out/$1.log, $out/$1.qemu.out)"
    shift
done

p4=$out/p4.txt
: > "$p4"
log=$out/virt-a15.log
if [ -n "$perf_host" ] && [ -f "$log" ] && grep -aq '^== p4_samples begin' "$log"; then
    d=$out/p4
    rm -rf "$d"; mkdir -p "$d" "$d/long"
    # The guest's sampling period (BENCH INFO's N, cycles): every perf sample of P4 stands for it.
    period=$(sed -n 's/^BENCH INFO .* N=\([0-9]*\) .*/\1/p' "$log" | head -1)
    [ -n "$period" ] || die "P4: no BENCH INFO N= in $log"
    for f in images proc_modules module_sections; do
        log_block "$log" "p4_$f" "$d/$f" || die "P4: no $f in $log"
        log_block "$log" "p4_long_$f" "$d/long/$f" || die "P4: no long $f in $log"
    done
    for f in samples perf perf_g kallsyms long_samples long_perf; do
        log_stream "$log" "p4_$f" "$d/$f.gz" && gunzip -f "$d/$f.gz" || die "P4: no $f in $log"
    done
    common=(--vmlinux "$KOUT/vmlinux" --sysroot "$root" --image-path "$root/lib" --image-path "$moddir"
            --image-path "$kmoddir")
    short=(--images "$d/images" --proc-modules "$d/proc_modules" --module-sections "$d/module_sections" "${common[@]}")
    long=(--images "$d/long/images" --proc-modules "$d/long/proc_modules" --module-sections "$d/long/module_sections" "${common[@]}")
    # The views compared (same work and output detail on both sides): a flat symbol list, and
    # the call graph of the recorded chains (16 entries at most on both sides).
    ours_flat=(-l) perf_flat=(--no-children -g none --sort dso,sym)
    ours_graph=(-c) perf_graph=(--no-children -g graph,0.5,caller --sort dso,sym)
    # measure TOOL VIEW SOURCE N CMD...: P4_REPS runs of CMD (its output to a file, read back
    # for the samples the tool actually read: ours' "Samples: N total", perf's event count over
    # the period), each a "BENCH P4" line with wall time and peak RSS from /usr/bin/time.
    measure() {
        local tool=$1 view=$2 src=$3 n=$4 t rep nread wall rss
        shift 4
        for rep in $(seq 1 "$P4_REPS"); do
            /usr/bin/time -f 'TIME %e %M %x' "$@" > "$d/out" 2> "$d/err" || true
            t=$(tail -1 "$d/err")
            case $t in "TIME "*" 0") ;; *) cat "$d/err" >&2; die "P4: $tool failed: $*" ;; esac
            if [ "$tool" = ours ]; then
                nread=$(sed -n 's/^Samples: \([0-9]*\) total.*/\1/p' "$d/out" | head -1)
            else
                nread=$(sed -n 's/^# Event count (approx\.): \([0-9]*\)$/\1/p' "$d/out" | awk -v n="$period" '{ s += $1 } END { print s / n }')
            fi
            [ -n "$nread" ] || die "P4: $tool $view $src: no sample count in its output ($d/out)"
            read -r _ wall rss _ <<< "$t"
            echo "BENCH P4 tool=$tool view=$view source=$src samples=$n rep=$rep read=$nread wall_s=$wall rss_kb=$rss" | tee -a "$p4"
        done
    }
    for n in $P4_SAMPLES; do
        for view in flat graph; do
            c=none; pdata=$d/perf; [ $view = flat ] || { c=recorded; pdata=$d/perf_g; }
            step "P4: $n samples (replicated), $view"
            "$oprof" synth "$d/samples" "$d/ours.buf" --samples "$n" --chains $c > /dev/null
            eval "ov=(\"\${ours_$view[@]}\") pv=(\"\${perf_$view[@]}\")"
            measure ours $view replicated "$n" "$oprof" report "$d/ours.buf" "${short[@]}" "${ov[@]}"
            rm -f "$d/ours.buf"
            per=$(python3 "$REPO/scripts/perf-replicate.py" "$pdata" /dev/null 1)
            copies=$(( (n + per / 2) / per ))
            python3 "$REPO/scripts/perf-replicate.py" "$pdata" "$d/perf.data" $(( copies > 0 ? copies : 1 )) > /dev/null
            measure perf $view replicated "$n" "$perf_host" report --stdio -i "$d/perf.data" --kallsyms "$d/kallsyms" --symfs "$root" "${pv[@]}"
            rm -f "$d/perf.data"
        done
    done
    for view in flat graph; do
        step "P4: the long recording, $view"
        eval "ov=(\"\${ours_$view[@]}\") pv=(\"\${perf_$view[@]}\")"
        measure ours $view long 0 "$oprof" report "$d/long_samples" "${long[@]}" "${ov[@]}"
        measure perf $view long 0 "$perf_host" report --stdio -i "$d/long_perf" --kallsyms "$d/kallsyms" --symfs "$root" "${pv[@]}"
    done
fi
rc=0
splat=$(sed -n "s/^SPLAT='\(.*\)'$/\1/p" "$REPO/tests/tap.sh")
[ -n "$splat" ] || die "no SPLAT pattern in tests/tap.sh"
p4arg=(); [ -z "$perf_host" ] || p4arg=(--p4 "$p4")
python3 "$REPO/scripts/bench.py" "${logs[@]}" "${p4arg[@]}" --json "$out/bench.json" --splat "$splat" || rc=$?
[ $rc = 0 ] || die "bench: errors above (the table is incomplete); rows and raw runs in $out/bench.json"
step "bench: table above; rows and raw runs in $out/bench.json"
# The README's table: only from a complete run (every part, both boards).
if [ "$BOARDS" = "virt-a15 realview-pb-a8" ] && [ "$PARTS" = p1,p2,p3,p4 ]; then
    python3 "$REPO/scripts/bench-table.py" "$out/bench.json" --readme "$REPO/README.md" --full Documentation/bench-results.md
else
    step "bench: a partial run (BOARDS/PARTS): README not updated (scripts/bench-table.py $out/bench.json prints its table)"
fi
