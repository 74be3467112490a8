# `make bench` (scripts/bench.sh): our profiler and `perf` measured side by side in one boot.
# Prints "BENCH PART key=value..." lines and base64 blocks; scripts/bench.py turns them into the
# table (Documentation/performance.rst explains every figure). Not part of make check.
#
# Guest arguments (GUEST_ARGS): benchreps=N (repetitions, default 3), benchparts=p1,p2,p3,p4,
# benchp2s=SECONDS (per rate, default 2).
#   P1 overhead: a CPU-bound (opwork) and a kernel-bound (dd) workload timed bare, under
#      `oprof record` in timer mode (1000 Hz per CPU), `oprof record -e CPU_CYCLES:N`, `perf
#      record -a -e cycles -c N` and `perf record -a -e cpu-clock -F 1000`, each without and with
#      call chains (-g 16 --user-stack 0 / -g: frame-pointer chains on both sides);
#      configurations interleaved, repeated.
#   P2 losses: `oprof record` at rising rates for benchp2s seconds each with every CPU busy;
#      mode stack: timer mode with -g 16 (user-stack snapshots, oprof record's default buffers).
#   P3 per-sample cost: the module's sample_handler profile point, and the slowdown per sample,
#      against optest.ko's bare interrupts (bare_period / bare_hz: an empty handler) at the
#      same rate; without chains, with frame-pointer chains (ours-bt) and with user-stack
#      snapshots (ours-stack: -g 16 with oprof record's default --user-stack), and the stream
#      bytes per sample of each.
#   P4 sources (virt-a15): a captured stream and two perf.data files of the same workload, for
#      the report speed figures on the host.
. /tests/lib.sh
echo "BENCH START uptime=$(cut -d" " -f1 /proc/uptime)"
echo 1 > /proc/sys/kernel/printk
echo -1 > /proc/sys/kernel/perf_event_paranoid
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent   # no throttling under emulation
reps=$(guest_arg benchreps); reps=${reps:-3}
parts=$(guest_arg benchparts); parts=${parts:-p1,p2,p3,p4}
p2s=$(guest_arg benchp2s); p2s=${p2s:-2}
b=$(board)
ncpu=$(nproc)
# Sampling period of the hardware modes: 200000 cycles of QEMU's 1 GHz cycle counter, 5000
# samples/s per busy CPU. Timer mode and perf's cpu-clock: 1000 Hz per CPU.
N=200000
HZ=1000
# 1 MiB of input for opwork (any bytes do).
cat /bin/busybox /lib/libc.so.6 /usr/bin/perf | head -c 1048576 > /tmp/data
W_cpu="opwork /tmp/data /tmp/sorted 3"
W_kernel="dd if=/dev/zero of=/dev/null bs=64k count=12000"
echo "BENCH INFO board=$b cpus=$ncpu reps=$reps N=$N hz=$HZ p2s=$p2s"

want() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }
unload() { umount /dev/oprofile 2>/dev/null; rmmod oprofile 2>/dev/null; true; }
# kv TEXT: the TIME line of optool time as key=value words.
kv() { echo "$1" | sed -n 's/^TIME ns \([0-9]*\) user_ns \([0-9]*\) sys_ns \([0-9]*\) status \([0-9]*\).*/ns=\1 user_ns=\2 sys_ns=\3 status=\4/p' | tail -1; }
# samples_of TEXT: samples the profiler reported (oprof record's summary, perf's "(N samples)").
samples_of() {
    echo "$1" | sed -n -e 's/^oprof record: \([0-9]*\) samples.*/\1/p' -e 's/.*(\([0-9]*\) samples).*/\1/p' | tail -1
}

# p1_run WL MODE CHAINS REP
p1_run() {
    eval "w=\$W_$1"
    g=; pg=
    [ "$3" = 0 ] || { g="-g 16 --user-stack 0"; pg=-g; }
    case $2 in
    bare)   out=$(optool time $w 2>&1) ;;
    timer)  out=$(oprof record -f -o /tmp/s $g -- optool time $w 2>&1) ;;
    cycles) out=$(oprof record -f -o /tmp/s -e CPU_CYCLES:$N $g -- optool time $w 2>&1) ;;
    perf-c) out=$(perf record -o /tmp/perf.data -a -e cycles -c $N $pg -- optool time $w 2>&1) ;;
    perf-F) out=$(perf record -o /tmp/perf.data -a -e cpu-clock -F $HZ $pg -- optool time $w 2>&1) ;;
    esac
    unload
    rm -rf /tmp/s /tmp/perf.data
    echo "BENCH P1 wl=$1 mode=$2 chains=$3 rep=$4 $(kv "$out") samples=$(samples_of "$out")"
    echo "$out" | grep -q '^TIME ' || { echo "BENCH ERROR P1 $1 $2 $3:"; echo "$out" | tail -5; }
}

if want p1; then
    if [ "$b" = a15 ]; then modes="timer cycles perf-c perf-F"; else modes="timer perf-F"; fi
    r=1
    while [ $r -le "$reps" ]; do
        for wl in cpu kernel; do
            p1_run $wl bare 0 $r
            for m in $modes; do
                p1_run $wl $m 0 $r
                p1_run $wl $m 1 $r
            done
        done
        r=$((r + 1))
    done
fi

# P2: every CPU busy (one dd per CPU) while oprof record samples for p2s seconds; timer mode at
# timer_hz = rate (both boards), and on the A15 CPU_CYCLES at 1e9/rate (its minimum count,
# 100000, caps that series at 10000/s).
p2_run() {
    i=0
    while [ $i -lt "$ncpu" ]; do dd if=/dev/zero of=/dev/null bs=64k count=100000000 2>/dev/null & i=$((i + 1)); done
    if [ "$1" = cycles ]; then
        out=$(oprof record -f -o /tmp/s -e CPU_CYCLES:$((1000000000 / $2)) --duration "$p2s" 2>&1)
    elif [ "$1" = stack ]; then
        insmod /oprofile.ko timer=1 timer_hz=$2
        out=$(oprof record -f -o /tmp/s -g 16 --duration "$p2s" 2>&1)
    else
        insmod /oprofile.ko timer=1 timer_hz=$2
        out=$(oprof record -f -o /tmp/s --duration "$p2s" 2>&1)
    fi
    kill $(jobs -p) 2>/dev/null; wait
    stats=$(tr -d '{}" \n' < /tmp/s/stats.json | tr ',' ' ' | sed 's/:/=/g')
    echo "BENCH P2 mode=$1 rate=$2 seconds=$p2s stream_samples=$(samples_of "$out") $stats"
    echo "$out" | grep -q '^oprof record: ' || { echo "BENCH ERROR P2 $1 $2:"; echo "$out" | tail -5; }
    unload
    rm -rf /tmp/s
}

if want p2; then
    for rate in 1000 5000 20000 50000; do p2_run timer $rate; done
    for rate in 1000 5000; do p2_run stack $rate; done
    [ "$b" != a15 ] || for rate in 1000 10000; do p2_run cycles $rate; done
fi

# P3: the same rate as P1's hardware mode (A15) or timer mode (A8); --points times the module.
p3_run() {
    eval "w=\$W_$1"
    case $2 in
    none) out=$(optool time $w 2>&1); extra= ;;
    bare)
        if [ "$b" = a15 ]; then insmod /optest.ko spin_rounds=0 bare_period=$N; else insmod /optest.ko spin_rounds=0 bare_hz=$HZ; fi
        out=$(optool time $w 2>&1)
        extra="count=$(cat /sys/module/optest/parameters/bare_count) handler_ns=$(cat /sys/module/optest/parameters/bare_ns)"
        rmmod optest ;;
    ours|ours-bt|ours-stack)
        case $2 in ours) g= ;; ours-bt) g="-g 16 --user-stack 0" ;; *) g="-g 16" ;; esac
        if [ "$b" = a15 ]; then ev="-e CPU_CYCLES:$N"; else ev=; fi
        out=$(oprof record -f -o /tmp/s --points $ev $g -- optool time $w 2>&1)
        # sample_handler: the sampling interrupt's part; sync_pass, buffer_read: the rest of
        # a sample's way (cpu buffer -> event buffer, event buffer -> reader).
        sh=$(sed -n -e 's/^ *on *sample_handler *\([0-9.]*\) *\([0-9]*\) *\([0-9]*\)$/total_s=\1 nr=\2 avg_ns=\3/p' \
                    -e 's/^ *on *\(sync_pass\|buffer_read\) *\([0-9.]*\) *\([0-9]*\) *[0-9]*$/\1_s=\2 \1_nr=\3/p' /tmp/s/profile_points | tr '\n' ' ')
        rcv=$(tr -d '{}" \n' < /tmp/s/stats.json | tr ',' '\n' | sed -n 's/^cpu[0-9]*\/sample_received://p' | awk '{ s += $1 } END { print s + 0 }')
        extra="count=$rcv stream_bytes=$(wc -c < /tmp/s/samples) $sh"
        unload
        rm -rf /tmp/s ;;
    esac
    echo "BENCH P3 wl=$1 mode=$2 rep=$3 $(kv "$out") $extra"
    echo "$out" | grep -q '^TIME ' || { echo "BENCH ERROR P3 $1 $2:"; echo "$out" | tail -5; }
}

if want p3; then
    r=1
    while [ $r -le "$reps" ]; do
        for wl in kernel cpu; do
            for m in none bare ours ours-bt ours-stack; do p3_run $wl $m $r; done
        done
        r=$((r + 1))
    done
fi

# P4 sources: the same workload under oprof record -g 16 and perf record -a (-g and not).
if want p4 && [ "$b" = a15 ]; then
    w="sh -c '$W_cpu; $W_kernel; $W_cpu'"
    eval "oprof record -f -o /tmp/p4 -g 16 -e CPU_CYCLES:$N -- $w" 2>&1 | grep '^oprof record'
    print_stream p4_samples /tmp/p4/samples
    for f in images proc_modules module_sections; do echo "== p4_$f begin"; cat /tmp/p4/$f; echo "== p4_$f end"; done
    unload
    rm -rf /tmp/p4
    eval "perf record -o /tmp/p4g.data -a -g -e cycles -c $N -- $w" 2>&1 | grep 'perf record'
    print_gz p4_perf_g /tmp/p4g.data
    rm -f /tmp/p4g.data
    eval "perf record -o /tmp/p4.data -a -e cycles -c $N -- $w" 2>&1 | grep 'perf record'
    print_gz p4_perf /tmp/p4.data
    rm -f /tmp/p4.data
    print_gz p4_kallsyms /proc/kallsyms
fi
echo "BENCH DONE"
