# Overflow storm: the smallest count CPU_CYCLES accepts, on every CPU, for 10 s, with a reader,
# short-lived processes exiting throughout, and
# kernel.perf_cpu_time_max_percent at its default (perf's own brakes on). The guest must stay
# responsive (a 100 ms heartbeat keeps beating; the kernel's lockup detectors stay quiet),
# throttling must be counted, and nothing may be lost silently: every sample taken reaches the
# stream or a loss counter (checked on the host from the printed stream, tests/checks/storm.py).
# The module derives its loss counters from its own cycle total (total / count periods, less the
# samples taken: common/counter.rs losses), so the periods are bounded here by what it does not
# compute: the session's wall time (optool capture's CLOCK_MONOTONIC interval around enable=1 ..
# enable=0) x 1 cycle per ns (QEMU's cycle counter runs at 1 GHz of guest time; events.sh checks
# that rate in counting mode) x CPUs. realview-pb-a8's PMU raises no interrupt, so there the storm
# is all sample_lost_no_irq, bounded from both sides; on the boards with the interrupt (virt-a15,
# the arm64 boards; on the arm64 debug kernel a pseudo-NMI) perf throttles the counter (stopped
# until the next tick, most of the 10 s), so wall time bounds the periods from above only.
. /tests/lib.sh
# 4 checks on every board, then the board's: 4 without PMU interrupt (realview-pb-a8), 5 with.
irq=$(pmu_irq)
if [ $irq = 1 ]; then plan 9; else plan 8; fi
echo 1 > /proc/sys/kernel/printk
n=$(nproc)
echo "perf_cpu_time_max_percent $(cat /proc/sys/kernel/perf_cpu_time_max_percent), perf_event_max_sample_rate $(cat /proc/sys/kernel/perf_event_max_sample_rate)"
check "load" load
min=$(cycles_min)   # common/events.rs minimum counts
echo 1 > $OP/0/enabled; echo $(cycles_event) > $OP/0/event; echo $min > $OP/0/count
rm -f /tmp/beats /tmp/storm.done
( while [ ! -e /tmp/storm.done ]; do echo beat >> /tmp/beats; sleep 0.1; done ) &
hb=$!
# Processes exiting all through the storm (their samples' tasks, files and mms go away while
# samples of them wait in the rings, or, on the arm64 debug kernel, in the NMI staging rings).
rm -f /tmp/exits
( while [ ! -e /tmp/storm.done ]; do /bin/true; echo x >> /tmp/exits; done ) &
ex=$!
check "10 s storm: CPU_CYCLES every $min cycles on $n CPU(s)" capture /tmp/storm.buf sh -c "$(each_cpu 'optool spin 10000')"
touch /tmp/storm.done
wait $hb $ex
echo "EXITS $(wc -l < /tmp/exits 2>/dev/null || echo 0) short-lived processes exited during the storm"
beats=$(wc -l < /tmp/beats)
check "the guest stayed responsive: $beats heartbeats of 100 ms during the storm (>= 10)" test "$beats" -ge 10
total=$(cat $OP/0/total) rcv=$(samples_received)
throttled=$(cat $OP/stats/event_throttled) overrun=$(cat $OP/stats/sample_lost_overrun) noirq=$(cat $OP/stats/sample_lost_no_irq)
# Readings the module rejected (stats/event_read_rejected) left their intervals out of the total
# and of the loss estimates; the samples the handler took in them were delivered all the same.
rejected=$(cat $OP/stats/event_read_rejected) unmetered=$(cat $OP/stats/event_read_rejected_overflows)
periods=$((total / min))
# The wall time's cycles on all CPUs (1 cycle per ns), an upper bound of what the counters
# counted: the session (counters running) lies inside optool's interval. A failed capture
# leaves CAPTURE_NS empty, 0 here: the bounds below fail too.
wall=$((${CAPTURE_NS:-0} * n))
echo "STORM total $total periods $periods received $rcv throttled $throttled overrun $overrun no_irq $noirq rejected $rejected/$unmetered bytes $(wc -c < /tmp/storm.buf) session_ns ${CAPTURE_NS:-0} cpus $n"
print_stats
if [ $irq = 1 ]; then
    check "samples taken ($rcv)" test "$rcv" -gt 0
    check "throttling counted: stats/event_throttled = $throttled > 0" test "$throttled" -gt 0
    # The counter's total cannot exceed the wall time's cycles (a total counting more would
    # inflate the periods and so the overrun losses computed from them).
    check "CPU_CYCLES total within the wall time: $total <= $wall cycles (${CAPTURE_NS:-0} ns x $n CPUs)" \
        test "$total" -gt 0 -a "$total" -le "$wall"
    # Samples and counted losses are periods that elapsed: at most the wall time's periods, plus
    # one in flight per CPU (common/counter.rs losses forgives one per CPU, which may then be a
    # sample as well). This bounds rcv, which the handler counts, and overrun, which is derived.
    check "samples + counted losses within the wall time's periods: $rcv + $overrun <= $((wall / min)) + $n" \
        test $((rcv + overrun)) -le $((wall / min + n))
    # The handler's count against perf's: no sample without its period (one in flight per CPU).
    # Samples taken in the intervals of rejected readings have no periods in the total.
    check "no period counted twice: $rcv - $unmetered in rejected intervals + $overrun <= $periods + $n" \
        test $((rcv - unmetered + overrun)) -le $((periods + n))
else
    check "no interrupt, no sample ($rcv)" test "$rcv" = 0
    check "no interrupt, no throttling ($throttled)" test "$throttled" = 0
    # No interrupt, no throttling: the counter runs for the whole session, which holds the 10 s
    # workload (optool spin measures 10 s of wall time on each CPU after enable=1) and lies
    # within optool's interval: each CPU's counter counts at least 10 s of cycles.
    check "every elapsed period counted in sample_lost_no_irq: $((n * (10000000000 / min))) <= $noirq <= $((wall / min))" \
        test "$noirq" -ge $((n * (10000000000 / min))) -a "$noirq" -le $((wall / min))
    check "nothing counted as overrun ($overrun)" test "$overrun" = 0
fi
print_gz storm.buf /tmp/storm.buf
check "unload" unload
summary
