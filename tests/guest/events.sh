# Hardware events (perf-counter model): model choice, counter directories, validation errors
# with their kernel log lines, counting mode, and (with a PMU interrupt) event-based sampling
# with two counters at different periods. Prints STAT/TOTAL lines and the sample stream for the
# host checks (tests/checks/events.py).
. /tests/lib.sh
# 60 checks on every board, then the A8 has one more setup_fails case (2 checks) and 4 no-irq
# checks, the boards with a PMU interrupt (A15, and the A53s of arm64) 3 sampling checks.
# The model by board (lib.sh): its cpu_type, perf PMU, counter count, CPU_CYCLES number and
# minimum count: ARMv7 CPU_CYCLES is 0xff on the cycle counter (counter 0) only, ARMv8 PMUv3's
# is 0x11 on any counter (counter 0 is PMCCNTR_EL0, cycles only).
board=$(board) want_type=$(hw_cpu_type) cyc=$(cycles_event) min=$(cycles_min)
case $board in
a8)  pmu=armv7_cortex_a8 want_n=5; plan 66 ;;
a15) pmu=armv7_cortex_a15 want_n=7; plan 63 ;;
*)   pmu=armv8_cortex_a53 want_n=7; plan 63 ;;
esac
echo 1 > /proc/sys/kernel/printk
# Emulation makes PMU interrupts slow; keep perf from lowering the sample rate under us.
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent

check "load" load
expect "cpu_type" "$want_type" cat $OP/cpu_type
check "init log names the PMU ($pmu) and model" sh -c "dmesg | grep -q 'oprofile: hardware events on perf PMU $pmu.*cpu_type $want_type, $want_n counters'"
last=$((want_n - 1))
check "counter dirs 0..$last" test -d $OP/0 -a -d $OP/$last
check "no counter dir $want_n" test ! -e $OP/$want_n
for f in enabled event count unit_mask kernel user; do
    expect "mode of $last/$f" 644 stat -c %a $OP/$last/$f
done
expect "mode of 0/total" 444 stat -c %a $OP/0/total
expect "mode of 0/time_running" 444 stat -c %a $OP/0/time_running
expect "mode of stats/period_ns" 444 stat -c %a $OP/stats/period_ns
expect "per-counter loss files stats/$last/ and their mode" "event_read_rejected event_read_rejected_overflows event_throttled sample_lost_no_irq sample_lost_overrun 444 444" \
    sh -c "cd $OP/stats/$last && echo \$(ls) \$(stat -c %a sample_lost_overrun event_read_rejected)"
expect "defaults enabled/event/count/unit_mask/kernel/user" "0 0 0 0 1 1" \
    sh -c "echo \$(cat $OP/1/enabled $OP/1/event $OP/1/count $OP/1/unit_mask $OP/1/kernel $OP/1/user)"
expect "total and time_running before any run" "0 0" sh -c "echo \$(cat $OP/0/total $OP/0/time_running)"

# Per-file write checks (immediate EINVAL, nothing changed).
expect "enabled=2 -> EINVAL" "ERR EINVAL" optool write $OP/1/enabled 2
expect "kernel=junk -> EINVAL" "ERR EINVAL" optool write $OP/1/kernel yes
expect "unit_mask=0x100 -> EINVAL" "ERR EINVAL" optool write $OP/1/unit_mask 0x100
expect "count > 2^32-1 -> EINVAL" "ERR EINVAL" optool write $OP/1/count 4294967296
expect "event read back as decimal" ok optool write $OP/1/event 0x11
expect "event 0x11 reads 17" 17 cat $OP/1/event
expect "counter values intact" "0 0 1" sh -c "echo \$(cat $OP/1/enabled $OP/1/unit_mask $OP/1/kernel)"

reset_counters() {
    for ctr in $OP/[0-9]*; do
        echo 0 > $ctr/enabled; echo 0 > $ctr/event; echo 0 > $ctr/count; echo 0 > $ctr/unit_mask
        echo 1 > $ctr/kernel; echo 1 > $ctr/user
    done
}
# setup_fails DESC PATTERN [COUNTER FILE VALUE]... : buffer open must fail with EINVAL and the
# kernel log must have a line matching PATTERN.
setup_fails() {
    d=$1 pat=$2; shift 2
    reset_counters
    while [ $# -ge 3 ]; do echo "$3" > $OP/$1/$2; shift 3; done
    dmesg_mark
    expect "$d -> EINVAL at buffer open" "ERR EINVAL" optool bufread $(word_bytes)
    check "$d: kernel log says why" eval "dmesg_new | grep -q -- '$pat'"
}
setup_fails "no counter enabled" "oprofile: $want_type: no counter enabled"
setup_fails "unknown event" "counter 1: event 0x99 is not an event" 1 enabled 1 1 event 0x99 1 count 1000
if [ "$(arm64)" = 0 ]; then
    setup_fails "CPU_CYCLES on counter 1" "counter 1: event CPU_CYCLES cannot be counted on this counter (allowed counters: 0)" \
        1 enabled 1 1 event 0xff 1 count 1000000
else
    # ARMv8 counts CPU_CYCLES on any counter; ARMv7's cycle-counter event 0xff is none of its.
    setup_fails "ARMv7's CCNT event 0xff on ARMv8" "counter 1: event 0xff is not an event" \
        1 enabled 1 1 event 0xff 1 count 1000000
fi
setup_fails "L1D_CACHE_REFILL on counter 0" "counter 0: event L1D_CACHE_REFILL cannot be counted on this counter (allowed counters: 1, 2, 3, 4" \
    0 enabled 1 0 event 3 0 count 1000
setup_fails "count below the minimum" "counter 0: count 50 is below the minimum $min of CPU_CYCLES" \
    0 enabled 1 0 event $cyc 0 count 50
# (count 5000: L1D_CACHE_REFILL's minimum is 500 on ARMv7, 5000 on ARMv8; this is about the rest)
setup_fails "unit_mask 1" "counter $last: unit_mask 0x1 is invalid" $last enabled 1 $last event 3 $last count 5000 $last unit_mask 1
setup_fails "kernel=0 user=0" "counter 2: kernel and user are both 0" 2 enabled 1 2 event 3 2 count 5000 2 kernel 0 2 user 0
if [ $board = a8 ]; then
    setup_fails "A15 event on the A8" "counter 1: event 0x11 is not an event" 1 enabled 1 1 event 0x11 1 count 1000
fi

# Counting mode (count = 0): totals for a short and a longer busy loop, no samples.
reset_counters
echo 1 > $OP/0/enabled; echo $cyc > $OP/0/event; echo 0 > $OP/0/count
echo 1 > $OP/1/enabled; echo 3 > $OP/1/event; echo 0 > $OP/1/count
check "counting: short loop" capture /tmp/c1 optool spin 300
t1=$(cat $OP/0/total) p1=$(cat $OP/stats/period_ns) s1=$(cat $OP/stats/cpu0/sample_received)
check "counting: long loop" capture /tmp/c2 optool spin 1500
t2=$(cat $OP/0/total) p2=$(cat $OP/stats/period_ns) s2=$(cat $OP/stats/cpu0/sample_received)
r2=$(cat $OP/0/time_running) ns2=${CAPTURE_NS:-0} n=$(nproc)
echo "TOTAL short $t1 $p1 long $t2 $p2 running $r2 session_ns $ns2 cpus $n"
check "counting: CPU_CYCLES total of the short loop is non-zero ($t1)" test "$t1" -gt 0
check "counting: longer loop counts more cycles ($t2 > $t1)" test "$t2" -gt "$t1"
check "counting: period_ns grows with the loop ($p1 < $p2)" test "$p1" -lt "$p2"
check "counting: period_ns covers the loop ($p2 >= 1.5e9)" test "$p2" -ge 1500000000
# The rate the storm and sampling checks (storm.sh, events.py) take the elapsed periods from:
# QEMU's cycle counter runs at 1 GHz of guest time, 1 cycle per ns of CLOCK_MONOTONIC, on every
# CPU (idle ones too: the counter is per CPU, idle is kernel time). It counts only while perf has
# the event running, whose time perf keeps (0/time_running, summed over the CPUs), and that time
# lies inside optool's interval (before enable=1 .. after enable=0; the enable writes' own
# starting and stopping of each CPU's counter, 2.6 ms per CPU under the debug kernel and 47 ms
# per CPU on CI's busy host, is outside it). So the total is at most the time running (100 us
# per CPU for the clocks' granularity). It is less by the windows in which perf stops the whole
# PMU (perf_pmu_disable) while the event's time runs on: installing and removing the other
# counter on the same CPU (ctx_resched), the event's own start and stop. Those are short, but
# QEMU's guest time runs on while the host preempts the vCPU thread inside one: measured -65 us
# (virt-a15, busy host) to -8.5 ms per CPU (the arm64 debug kernel beside a hog). 1 % of the
# time running is allowed below: a lost or extra 2^32 wrap (4.3 s) or a counter stopped for
# good is far outside either bound. QEMU's PMU race (Documentation/events.rst, "Counts under
# QEMU") cannot strike here: its overflow timer first fires when a counter would wrap, 2^31
# cycles (2.1 s) after perf started it, beyond the 1.5 s loop (event 3 counts nothing in QEMU).
check "counting: 0/time_running lies within the session: 0 < $r2 <= $((ns2 * n)) (session $ns2 ns x $n CPUs)" \
    test "$r2" -gt 0 -a "$r2" -le $((ns2 * n))
check "counting: CPU_CYCLES total <= time running at 1 cycle/ns, less at most 1 %: $((r2 - r2 / 100)) <= $t2 <= $((r2 + 100000 * n)) (off by $((t2 - r2)))" \
    test "$t2" -ge $((r2 - r2 / 100)) -a "$t2" -le $((r2 + 100000 * n))
check "counting: no samples in counting mode ($s1 $s2)" test "$s1" = 0 -a "$s2" = 0
expect "counting: total stays after stop" "$t2" cat $OP/0/total
expect "counter files EBUSY while running" "ERR EBUSY" captured /tmp/c3 sh -c "optool write $OP/0/count 200000; true"
live=$(captured /tmp/c3 sh -c "optool spin 300 >/dev/null && cat $OP/0/total" | head -n 1)
check "counting: total readable while running ($live)" test "$live" -gt 0

if [ $board = a8 ]; then
    # No PMU interrupt on this board: sampling loses every overflow, visibly.
    reset_counters
    echo 1 > $OP/0/enabled; echo 0xff > $OP/0/event; echo 100000 > $OP/0/count
    dmesg_mark
    check "no-irq: sampling capture" capture /tmp/c4 optool spin 500
    lost=$(cat $OP/stats/sample_lost_no_irq)
    # Every overflow lost, by wall time (1 cycle/ns, checked above): the counter ran at least
    # the 500 ms spin (measured by optool spin after enable=1) and at most optool's interval.
    check "no-irq: stats/sample_lost_no_irq = elapsed periods: 5000 <= $lost <= $((${CAPTURE_NS:-0} / 100000)) (session ${CAPTURE_NS:-0} ns / 100000)" \
        test "$lost" -ge 5000 -a "$lost" -le $((${CAPTURE_NS:-0} / 100000))
    expect "no-irq: all of them on counter 0 (stats/0/sample_lost_no_irq)" "$lost 0" \
        sh -c "echo \$(cat $OP/stats/0/sample_lost_no_irq $OP/stats/1/sample_lost_no_irq)"
    check "no-irq: one kernel log line" test "$(dmesg_new | grep -c 'raised no overflow interrupt')" = 1
else
    # Event-based sampling: the cycle counter (CCNT, PMCCNTR_EL0) every 2M cycles and an event
    # counter counting cycles (0x11: CPU_CYCLES, on ARMv7 and ARMv8) every 1M cycles.
    reset_counters
    echo 1 > $OP/0/enabled; echo $cyc > $OP/0/event; echo 2000000 > $OP/0/count
    echo 1 > $OP/1/enabled; echo 0x11 > $OP/1/event; echo 1000000 > $OP/1/count
    # Counter 2 counts cycles every 2e9 (2 s here): the canary that counts QEMU's PMU races for
    # events.py (its CANARY_PERIOD; Documentation/events.rst, "Counts under QEMU").
    echo 1 > $OP/2/enabled; echo 0x11 > $OP/2/event; echo 2000000000 > $OP/2/count
    # The ARMv8 perf driver stops the whole PMU while it handles an overflow
    # (armv8pmu_handle_irq), so the handler's time is missing from both counters' totals:
    # timed by the sample_handler profile point (our part of it), for events.py's bound.
    [ "$(arm64)" = 0 ] || echo "enable sample_handler" > $OP/profile_points
    check "sampling capture" capture /tmp/buf sh -c "$(each_cpu 'dd if=/dev/zero of=/dev/null bs=64k count=20000')"
    echo "TOTAL counter0 $(cat $OP/0/total) counter1 $(cat $OP/1/total) session_ns ${CAPTURE_NS:-0} cpus $n running0 $(cat $OP/0/time_running) running1 $(cat $OP/1/time_running)"
    if [ "$(arm64)" = 1 ]; then
        awk '$2 == "sample_handler" { split($3, t, "."); print "HANDLER_NS " t[1] * 1000000000 + t[2] " nr " $4 }' $OP/profile_points
        echo "disable sample_handler" > $OP/profile_points
    fi
    print_stats
    work_pids
    print_gz opbuf /tmp/buf
    check "sampling: no sample lost for want of an interrupt" test "$(cat $OP/stats/sample_lost_no_irq)" = 0
    # kernel/user honoured: user=0 on a PMUv2 or PMUv3 core gives no user samples.
    reset_counters
    echo 1 > $OP/0/enabled; echo $cyc > $OP/0/event; echo 1000000 > $OP/0/count; echo 0 > $OP/0/user
    check "kernel-only capture" capture /tmp/kbuf sh -c 'optool spin 500 && dd if=/dev/zero of=/dev/null bs=64k count=5000'
    print_gz kbuf /tmp/kbuf
fi
# An overflow perf passes without registers is taken as a sample without a valid PC
# (stats/cpuN/sample_invalid_eip), never dropped uncounted. It cannot be provoked: the ARM PMU
# drivers (drivers/perf/arm_v7_pmu.c, arm_pmuv3.c) pass their interrupt's get_irq_regs(), which
# every interrupt entry sets. So the counter is held to 0 over the last sampling run (no
# overflow interrupt at all on the A8).
invalid=$(cat $OP/stats/cpu*/sample_invalid_eip | awk '{ s += $1 } END { print s }')
check "sampling: no overflow came without registers (stats/cpu*/sample_invalid_eip sum $invalid)" test "$invalid" = 0
check "unload" unload
check "insmod timer=1 forces timer mode" sh -c "insmod /oprofile.ko timer=1 && mkdir -p $OP && mount -t oprofilefs nodev $OP && test \"\$(cat $OP/cpu_type)\" = timer && test ! -e $OP/0"
check "timer=1 logged" sh -c "dmesg | grep -q 'timer mode at 1000 Hz per CPU (timer=1)'"
# Missed ticks: optest.ko holds the interrupts of the CPU that loads it off for 300 ms while
# timer mode samples at 1000 Hz. That CPU's tick then comes late, is one sample, and counts the
# expiries it skipped (hrtimer_forward's beyond the one sampled) in its
# stats/cpuN/sample_lost_overrun. With interrupts off for D ns (optest's irqoff_ns, measured
# inside the span) at least D / 1 ms - 1 expiries pass unsampled: the expiry pending when they
# went off comes at most a period later, and every expiry up to the late tick is counted. Each
# expiry of a CPU's timer is either a sample or a missed tick, and a timer runs within the
# session, so samples and missed ticks together are at most the session's periods on every
# CPU (under TCG most of the rest of them are missed too: the guest's ticks come late). Missed
# ticks are periods never sampled, not samples taken: received == delivered + lost holds
# without them.
check "timer: capture while optest.ko holds interrupts off for 300 ms" capture /tmp/toff \
    sh -c "insmod /optest.ko spin_rounds=0 irqoff_ms=300 && cat /sys/module/optest/parameters/irqoff_ns > /tmp/irqoff_ns && rmmod optest"
# (not `d`: check and expect set it)
offns=$(cat /tmp/irqoff_ns 2>/dev/null); offns=${offns:-0}
missed=$(cat $OP/stats/cpu*/sample_lost_overrun | awk '{ s += $1 } END { print s }')
received=$(samples_received) lost=$(samples_lost)
lo=$((offns / 1000000 - 1)) hi=$((${CAPTURE_NS:-0} * n / 1000000))
check "timer: interrupts were off $offns ns (>= 300 ms)" test "$offns" -ge 300000000
check "timer: the missed ticks are counted: stats/cpu*/sample_lost_overrun $missed >= $lo (D / 1 ms - 1), and with the $received samples <= $hi (the session's periods on $n CPUs)" \
    test "$missed" -ge "$lo" -a "$((missed + received))" -le "$hi"
expect "timer: stats/sample_lost_overrun is the CPUs' sum" "$missed" cat $OP/stats/sample_lost_overrun
delivered=$(oprof report /tmp/toff --word-size "$(word_bytes)" 2>/dev/null | sed -n 's/^Samples: \([0-9]*\) total.*/\1/p')
check "timer: sample_received $received == delivered ${delivered:-?} (oprof report) + lost $lost" \
    test -n "$delivered" -a "$received" = "$((${delivered:-0} + lost))"
check "unload timer mode" unload
summary
