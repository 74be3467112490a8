# `make bench` (scripts/bench.sh): our profiler and `perf` measured side by side in one boot.
# Prints "BENCH PART key=value..." lines and base64 blocks; scripts/bench.py turns them into the
# table (Documentation/performance.rst explains every figure). Not part of make check.
#
# Guest arguments (GUEST_ARGS): benchreps=N (repetitions, default 3), benchparts=p1,p2,p3,p4,
# benchp2s=SECONDS (per rate, default 2), benchp4s=SECONDS (P4's long recording, default 20).
#   P1 overhead: a CPU-bound (opwork) and a kernel-bound (dd) workload timed bare, under
#      `oprof record` in timer mode (1000 Hz per CPU), `oprof record -e CPU_CYCLES:N`, `perf
#      record -a -e cycles -c N` and `perf record -a -e cpu-clock -F 1000`, each without and with
#      call chains of the same depth (-g 16 --user-stack 0 / --call-graph fp,16: frame-pointer
#      chains of at most 16 entries on both sides), and under optest.ko's bare interrupts at the
#      same rates (floor-timer: bare_hz, floor-cycles: bare_period: an empty handler, the
#      floor no profiler can go below); configurations interleaved, repeated. Each run prints
#      the samples its profiler took.
#   P2 losses: `oprof record` at rising rates for benchp2s seconds each with every CPU busy:
#      one dd per CPU (kernel PCs) in timer and cycles modes, one opwork loop per CPU (user PCs)
#      with frame-pointer chains (timer-bt: -g 16 --user-stack 0) and with user-stack snapshots
#      (timer-stack: -g 16, oprof record's default buffers); every stat and the session's totals.
#   P3 per-sample cost: the module's sample_handler profile point, and the slowdown per sample,
#      against optest.ko's bare interrupts (bare_period / bare_hz: an empty handler) at the
#      same rate; without chains, with frame-pointer chains (ours-bt) and with user-stack
#      snapshots (ours-stack: -g 16 with oprof record's default --user-stack), the stream
#      bytes per sample and the kernel/user split of each; the user-bound workload runs once
#      per CPU so no CPU idles. Runs of their own (-parts) time the handler's parts
#      (sample_resolve, ring_push, user_stack_copy, bt_kernel, bt_user, bt_user_frame).
#      CLOCKRES: the clock's smallest step (optool clockres) and the clocksource.
#   P4 sources (virt-a15): a captured stream and two perf.data files of the same short
#      workload (replicated on the host), and a long recording (benchp4s seconds, default 20) by
#      each profiler with 16-entry chains, for the report speed figures on the host.
. /tests/lib.sh
echo "BENCH START uptime=$(cut -d" " -f1 /proc/uptime)"
echo 1 > /proc/sys/kernel/printk
echo -1 > /proc/sys/kernel/perf_event_paranoid
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent   # no throttling under emulation
# Soft lockups at 120 s instead of 20 s. Under -icount the kernel's lazy vmap purge after the
# module's many unloads flushes the kernel TLB page by page (v7wbi_flush_kern_tlb_range from
# __purge_vmap_area_lazy) over the span from the module area (0xbf000000) to the vmalloc'd
# buffers (0xd0...), ~70,000 broadcast TLBIMVAAIS that QEMU syncs across vCPUs one by one: up
# to ~44 s of guest time in which that CPU does not schedule (seen: "soft lockup - CPU#1 stuck
# for 22s! [oprof]" in rmmod's wake). A real hang still trips the watchdog at 120 s.
echo 60 > /proc/sys/kernel/watchdog_thresh
reps=$(guest_arg benchreps); reps=${reps:-3}
parts=$(guest_arg benchparts); parts=${parts:-p1,p2,p3,p4}
p2s=$(guest_arg benchp2s); p2s=${p2s:-2}
p4s=$(guest_arg benchp4s); p4s=${p4s:-20}
b=$(board)
ncpu=$(nproc)
# Sampling period of the hardware modes: 200000 cycles of QEMU's 1 GHz cycle counter, 5000
# samples/s per busy CPU. Timer mode and perf's cpu-clock: 1000 Hz per CPU.
N=200000
HZ=1000
# 1 MiB of input for opwork (any bytes do).
cat /bin/busybox /lib/libc.so.6 /usr/bin/perf | head -c 1048576 > /tmp/data
# P1's workloads: about half a second each.
W_cpu="opwork /tmp/data /tmp/sorted 8"
W_kernel="dd if=/dev/zero of=/dev/null bs=64k count=15000"
# P3's user-bound workload: opwork once per CPU, so no CPU idles, long beside the session's
# start and end (whose samples are the idle CPUs' kernel PCs).
cat > /tmp/cpuall.sh <<EOF
i=0
while [ \$i -lt $ncpu ]; do opwork /tmp/data /tmp/sorted.\$i 24 & i=\$((i + 1)); done
wait
EOF
W_cpuall="sh /tmp/cpuall.sh"
cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)
echo "BENCH INFO board=$b cpus=$ncpu reps=$reps N=$N hz=$HZ p2s=$p2s p4s=$p4s clocksource=$cs $(optool clockres | sed -n 's/^CLOCKRES ns /clockres_ns=/p')"

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
    g=; pg=; extra=
    [ "$3" = 0 ] || { g="-g 16 --user-stack 0"; pg="--call-graph fp,16"; }
    case $2 in
    bare)   out=$(optool time $w 2>&1) ;;
    floor-*)
        if [ $2 = floor-cycles ]; then insmod /optest.ko spin_rounds=0 bare_period=$N; else insmod /optest.ko spin_rounds=0 bare_hz=$HZ; fi
        out=$(optool time $w 2>&1)
        extra="samples=$(cat /sys/module/optest/parameters/bare_count)"
        rmmod optest ;;
    timer)  out=$(oprof record -f -o /tmp/s $g -- optool time $w 2>&1) ;;
    cycles) out=$(oprof record -f -o /tmp/s -e CPU_CYCLES:$N $g -- optool time $w 2>&1) ;;
    perf-c) out=$(perf record -o /tmp/perf.data -a -e cycles -c $N $pg -- optool time $w 2>&1) ;;
    perf-F) out=$(perf record -o /tmp/perf.data -a -e cpu-clock -F $HZ $pg -- optool time $w 2>&1) ;;
    esac
    unload
    rm -rf /tmp/s /tmp/perf.data
    [ -n "$extra" ] || extra="samples=$(samples_of "$out")"
    echo "BENCH P1 wl=$1 mode=$2 chains=$3 rep=$4 $(kv "$out") $extra"
    check_run "P1 $1 $2 $3" "$out"
}

# check_run WHAT OUTPUT: a BENCH ERROR unless the timed command ran and exited 0 and the
# profiler's summary line is there.
check_run() {
    if ! echo "$2" | grep -q '^TIME .* status 0$'; then
        echo "BENCH ERROR $1: the workload did not run or failed:"; echo "$2" | tail -5
    elif ! echo "$1" | grep -qE ' (bare|none|floor-[a-z]*)( |$)' &&
         ! echo "$2" | grep -qE '^oprof record: [0-9]+ samples|samples\) \]'; then
        echo "BENCH ERROR $1: no profiler summary:"; echo "$2" | tail -5
    fi
}

if want p1; then
    if [ "$b" = a15 ]; then modes="timer cycles perf-c perf-F"; floors="floor-timer floor-cycles"
    else modes="timer perf-F"; floors=floor-timer; fi
    r=1
    while [ $r -le "$reps" ]; do
        for wl in cpu kernel; do
            p1_run $wl bare 0 $r
            for m in $floors; do p1_run $wl $m 0 $r; done
            for m in $modes; do
                p1_run $wl $m 0 $r
                p1_run $wl $m 1 $r
            done
        done
        r=$((r + 1))
    done
fi

# P2: every CPU busy while oprof record samples for p2s seconds: one dd per CPU (kernel PCs) in
# timer mode at timer_hz = rate (both boards) and on the A15 with CPU_CYCLES at 1e9/rate (its
# minimum count, 100000, caps that series at 10000/s); one opwork loop per CPU (user PCs) with
# frame-pointer chains (timer-bt) and with user-stack snapshots (timer-stack). Prints every stat
# and the session's totals (stream samples, received, lost, not taken).
p2_run() {
    i=0
    while [ $i -lt "$ncpu" ]; do
        case $1 in
        timer-*) (while :; do opwork /tmp/data /tmp/p2.$i 1 > /dev/null; done) & ;;
        *) dd if=/dev/zero of=/dev/null bs=64k count=100000000 2>/dev/null & ;;
        esac
        i=$((i + 1))
    done
    case $1 in
    cycles) out=$(oprof record -f -o /tmp/s -e CPU_CYCLES:$((1000000000 / $2)) --duration "$p2s" 2>&1) ;;
    *)
        insmod /oprofile.ko timer=1 timer_hz=$2
        case $1 in timer-bt) g="-g 16 --user-stack 0" ;; timer-stack) g="-g 16" ;; *) g= ;; esac
        out=$(oprof record -f -o /tmp/s $g --duration "$p2s" 2>&1) ;;
    esac
    kill $(jobs -p) 2>/dev/null; wait
    if [ -f /tmp/s/stats.json ] && [ -f /tmp/s/session.json ] && echo "$out" | grep -q '^oprof record: [0-9]* samples'; then
        stats=$(tr -d '{}" \n' < /tmp/s/stats.json | tr ',' ' ' | sed 's/:/=/g')
        totals=$(tr -d '\n ' < /tmp/s/session.json | sed -n 's/.*"totals":{\([^}]*\)}.*/\1/p' | tr -d '"' | tr ',' ' ' | sed 's/\([a-z_]*\):/total_\1=/g')
        echo "BENCH P2 mode=$1 rate=$2 seconds=$p2s $totals $stats"
    else
        echo "BENCH ERROR P2 $1 $2: oprof record failed:"; echo "$out" | tail -5
    fi
    unload
    rm -rf /tmp/s /tmp/p2.*
}

if want p2; then
    for rate in 1000 5000 20000 50000; do p2_run timer $rate; done
    [ "$b" != a15 ] || for rate in 1000 10000; do p2_run cycles $rate; done
    for rate in 1000 5000; do p2_run timer-bt $rate; p2_run timer-stack $rate; done
fi

# P3: the same rate as P1's hardware mode (A15) or timer mode (A8); --points times the module.
p3_run() {
    if [ $1 = cpu ]; then w=$W_cpuall; else w=$W_kernel; fi
    case $2 in
    none) out=$(optool time $w 2>&1); extra= ;;
    bare)
        if [ "$b" = a15 ]; then insmod /optest.ko spin_rounds=0 bare_period=$N; else insmod /optest.ko spin_rounds=0 bare_hz=$HZ; fi
        out=$(optool time $w 2>&1)
        extra="count=$(cat /sys/module/optest/parameters/bare_count) handler_ns=$(cat /sys/module/optest/parameters/bare_ns)"
        rmmod optest ;;
    ours*)
        case $2 in ours|ours-parts) g= ;; ours-bt|ours-bt-parts) g="-g 16 --user-stack 0" ;; *) g="-g 16" ;; esac
        # The handler's own point, or (-parts) only its parts: a point timed inside another
        # adds its clock reads to the outer one.
        case $2 in
        *-parts) pts=sample_resolve,ring_push,user_stack_copy,bt_kernel,bt_user,bt_user_frame ;;
        *) pts=sample_handler,sync_pass,buffer_read ;;
        esac
        if [ "$b" = a15 ]; then ev="-e CPU_CYCLES:$N"; else ev=; fi
        out=$(oprof record -f -o /tmp/s --points=$pts $ev $g -- optool time $w 2>&1)
        # NAME_s NAME_nr NAME_ns of every point that ran (sample_handler: the sampling
        # interrupt's part; sync_pass, buffer_read: the rest of a sample's way).
        pp=$(awk '$1 == "on" && $4 > 0 { printf "%s_s=%s %s_nr=%s %s_ns=%s ", $2, $3, $2, $4, $2, $5 }' /tmp/s/profile_points)
        rcv=$(tr -d '{}" \n' < /tmp/s/stats.json | tr ',' '\n' | sed -n 's/^cpu[0-9]*\/sample_received://p' | awk '{ s += $1 } END { print s + 0 }')
        split=$(oprof report /tmp/s 2>/dev/null | sed -n 's/^Samples: \([0-9]*\) total, \([0-9]*\) kernel, \([0-9]*\) user$/kernel_samples=\2 user_samples=\3/p')
        extra="count=$rcv stream_bytes=$(wc -c < /tmp/s/samples) $split $pp"
        unload
        rm -rf /tmp/s ;;
    esac
    echo "BENCH P3 wl=$1 mode=$2 rep=$3 $(kv "$out") $extra"
    check_run "P3 $1 $2" "$out"
}

if want p3; then
    r=1
    while [ $r -le "$reps" ]; do
        for wl in kernel cpu; do
            for m in none bare ours ours-bt ours-stack; do p3_run $wl $m $r; done
            [ $wl = kernel ] || for m in ours-parts ours-bt-parts ours-stack-parts; do p3_run $wl $m $r; done
        done
        r=$((r + 1))
    done
fi

# p4_ours PREFIX WORKLOAD: WORKLOAD under oprof record with chains of at most 16 frame-pointer
# entries at CPU_CYCLES:N; the stream (gzipped) and the session's image files as the blocks
# PREFIXsamples, PREFIXimages, PREFIXproc_modules, PREFIXmodule_sections.
p4_ours() {
    eval "oprof record -f -o /tmp/p4 -g 16 --user-stack 0 -e CPU_CYCLES:$N -- $2" 2>&1 | grep '^oprof record'
    print_gz "${1}samples" /tmp/p4/samples
    for f in images proc_modules module_sections; do echo "== $1$f begin"; cat /tmp/p4/$f; echo "== $1$f end"; done
    unload
    rm -rf /tmp/p4
}
# p4_perf NAME WORKLOAD [OPTION...]: WORKLOAD under perf record -a [OPTION...] -e cycles -c N;
# perf.data (gzipped) as the block NAME.
p4_perf() {
    name=$1 w=$2
    shift 2
    eval "perf record -o /tmp/p4.data -a $* -e cycles -c $N -- $w" 2>&1 | grep 'perf record'
    print_gz "$name" /tmp/p4.data
    rm -f /tmp/p4.data
}

# P4 sources: a short mix under oprof record and perf record -a (with chains, and without for
# the flat lists), replicated on the host; then the same mix in a loop for p4s seconds, by each
# profiler in turn (the long recording).
if want p4 && [ "$b" = a15 ]; then
    w="sh -c '$W_cpu; $W_kernel; $W_cpu'"
    p4_ours p4_ "$w"
    p4_perf p4_perf_g "$w" --call-graph fp,16
    p4_perf p4_perf "$w"
    print_gz p4_kallsyms /proc/kallsyms
    wl="sh -c 'end=\$((\$(cut -d. -f1 /proc/uptime) + $p4s)); while [ \$(cut -d. -f1 /proc/uptime) -lt \$end ]; do $W_cpu; $W_kernel; done'"
    p4_ours p4_long_ "$wl"
    p4_perf p4_long_perf "$wl" --call-graph fp,16
fi
# The kernel log (the console shows only emergencies, echo 1 > printk): the host fails the run on
# any kernel report in it (scripts/bench.py --splat).
echo "== dmesg begin"; dmesg; echo "== dmesg end"
echo "BENCH DONE"
