# CPU hotplug while profiling (issue 24): the sample sources follow CPUs going offline and coming
# online (rust/bridge/cpuhp.rs). In timer mode (timer=1 timer_hz=250) and then with CPU_CYCLES
# sampling (every 4000000 cycles), on every board:
#   - the run's hotplug state (oprofile/timer:online, oprofile/perf:online) is listed in
#     /sys/devices/system/cpu/hotplug/states while profiling and gone after enable=0;
# and on the boards with a second CPU (all but realview-pb-a8, which has one):
#   - phases: one capture while CPU 1 goes offline and online every 400 ms (echo 0/1 >
#     /sys/devices/system/cpu/cpu1/online; PSCI CPU_OFF/ON under QEMU; a busy loop in the CPU_CYCLES
#     run, none in timer mode, where an idle CPU is sampled as often as a busy one), with
#     stats/cpu1/sample_received read at each phase's start and end: CPU 1 is sampled in every
#     online phase and never in an offline one. The timer run starts and ends with CPU 1 online,
#     and CPU 0 is not sampled faster than 250 Hz while CPU 1 is offline (a CPU 1 timer left
#     running would be migrated to CPU 0 and sample it twice as often); the CPU_CYCLES run
#     starts and ends with CPU 1 offline (a start without it, a stop whose samples of CPU 1 wait
#     in an offline CPU's ring), 0/total never decreases (the events of CPU 1 are retired into
#     it when it goes offline) and samples + counted losses stay within the counted periods (one
#     in flight per event created). The host (tests/checks/hotplug.py) checks from the streams
#     and the STAT lines that every sample reached the stream or a loss counter, per CPU;
#   - races: for 3 s and 4 captures at least (soak: 150 s) CPU 1 goes offline and online as fast
#     as it can while captures start and stop (and kprof's own timers start and stop) in a loop
#     (on the plain kernel about 2 captures and 7 flips a second); then the
#     module unloads with kprof still ticking, CPU 1 still toggling. Nothing may fail, and the
#     runner's splat scan (lockdep, KFENCE, ... on the debug kernel) must find nothing.
# make soak: GUEST_ARGS="opsoak=1": 20 offline periods per run instead of 3, 150 s of races per
# mode.
. /tests/lib.sh
if [ "$(board)" = a8 ]; then smp=0; plan 8; else smp=1; plan 22; fi
echo 1 > /proc/sys/kernel/printk
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent
soak=$(guest_arg opsoak); soak=${soak:-0}
if [ "$soak" = 1 ]; then k=20 race=150; else k=3 race=3; fi
STATES=/sys/devices/system/cpu/hotplug/states
ON=/sys/devices/system/cpu/cpu1/online
hz=250 count=4000000

# phases.sh P STATE MS SPIN: P phases of MS ms, CPU 1 online in the first if STATE is 1 and
# flipped between phases; SPIN busy loops meanwhile. Per phase one line "PHASE i state r1a r1b r0a
# r0b csa csb ta tb": stats/cpu1 and cpu0 sample_received, /proc/uptime in centiseconds (read
# before the first and after the last counter, so the window covers the reads) and 0/total
# (0 in timer mode), at the phase's start (a) and end (b). Fails if a flip fails.
cat > /tmp/phases.sh <<'EOF'
OP=/dev/oprofile ON=/sys/devices/system/cpu/cpu1/online
p=$1 state=$2 sec=$(awk -v m="$3" 'BEGIN { print m / 1000 }') n=$4
cs() { cut -d' ' -f1 /proc/uptime | tr -d .; }
total() { cat $OP/0/total 2>/dev/null || echo 0; }
spin=
while [ "$n" -gt 0 ]; do ( while :; do :; done ) & spin="$spin $!"; n=$((n - 1)); done
i=0 rc=0
while [ $i -lt "$p" ]; do
    ta=$(total); csa=$(cs)
    r1a=$(cat $OP/stats/cpu1/sample_received); r0a=$(cat $OP/stats/cpu0/sample_received)
    sleep "$sec"
    r0b=$(cat $OP/stats/cpu0/sample_received); r1b=$(cat $OP/stats/cpu1/sample_received)
    csb=$(cs); tb=$(total)
    echo "PHASE $i $state $r1a $r1b $r0a $r0b $csa $csb $ta $tb"
    i=$((i + 1))
    [ $i -lt "$p" ] || break
    state=$((1 - state))
    echo $state > $ON || { rc=1; break; }
done
[ -z "$spin" ] || { kill $spin; wait $spin 2>/dev/null; }
exit $rc
EOF

# listed MODE: the hotplug state of MODE (timer, perf) is there while profiling, gone after.
listed() {
    check "$1: hotplug state oprofile/$1:online listed while profiling" \
        capture /tmp/listed.buf grep -q " oprofile/$1:online\$" $STATES
    check "$1: hotplug state gone after enable=0" sh -c "! grep -q ' oprofile/$1:online\$' $STATES"
}

# phases MODE START SPIN: the capture of phases.sh (2k + 1 phases of 400 ms from state START,
# SPIN busy loops), its per-phase checks (those of every mode; MODE's own follow), its stats and
# stream for the host.
phases() {
    echo "$2" > $ON
    check "$1: capture with CPU 1 offline and online $k times" capture /tmp/$1.buf sh /tmp/phases.sh $((2 * k + 1)) "$2" 400 "$3"
    grep '^PHASE ' /tmp/$1.buf.out | sed "s/^PHASE /PHASE $1 /"
    grep '^PHASE ' /tmp/$1.buf.out > /tmp/$1.phases
    on=$(awk '$3 == 1' /tmp/$1.phases | wc -l)
    check "$1: CPU 1 sampled in each of its $on online periods" \
        test "$on" -gt 0 -a "$(awk '$3 == 1 && $5 > $4' /tmp/$1.phases | wc -l)" = "$on"
    off=$(awk '$3 == 0' /tmp/$1.phases | wc -l)
    check "$1: CPU 1 not sampled in any of its $off offline periods" \
        test "$off" -gt 0 -a "$(awk '$3 == 0 && $5 == $4' /tmp/$1.phases | wc -l)" = "$off"
    print_stats | sed "s/^STAT /STAT $1:/"
    print_gz hotplug-$1.buf /tmp/$1.buf
}

# races MODE: captures (and kprof start/stop) in a loop while CPU 1 toggles, then the unload
# with kprof ticking; 3 checks.
races() {
    rm -f /tmp/toggle.stop /tmp/toggle.count
    ( t=0 f=0
      while [ ! -e /tmp/toggle.stop ]; do
          echo 0 > $ON || f=$((f + 1)); echo 1 > $ON || f=$((f + 1)); t=$((t + 1))
      done
      echo "$t $f" > /tmp/toggle.count ) &
    toggler=$!
    end=$(($(cut -d. -f1 /proc/uptime) + race)) i=0 bad=0
    while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ] || [ $i -lt 4 ]; do
        optool capture /tmp/race.buf true > /dev/null 2>&1 || bad=$((bad + 1))
        [ "$1" = timer ] || cat $OP/0/total > /dev/null || bad=$((bad + 1))
        if [ $((i % 2)) = 0 ]; then echo startclr > $OP/kprof/kpctl; else echo stop > $OP/kprof/kpctl; fi || bad=$((bad + 1))
        i=$((i + 1))
    done
    check "$1: $i captures and kprof starts/stops while CPU 1 toggled ($bad failures)" test $i -gt 0 -a $bad = 0
    echo startclr > $OP/kprof/kpctl
    check "$1: unload with kprof ticking while CPU 1 toggles" unload
    touch /tmp/toggle.stop; wait $toggler
    read t f < /tmp/toggle.count
    echo 1 > $ON
    check "$1: CPU 1 went offline and online $t times during the races, $f flips failed" test "$t" -gt 0 -a "$f" = 0
}

# Timer mode.
check "timer: load (timer=1 timer_hz=$hz)" load timer=1 timer_hz=$hz
listed timer
if [ $smp = 1 ]; then
    # No busy loop: idle CPUs tick at about timer_hz, a timer migrated to CPU 0 would double it.
    phases timer 1 0
    # The offline phases' CPU 0 samples against timer_hz over the phase's window (+2 cs, +2).
    fast=$(awk -v hz=$hz '$3 == 0 && $7 - $6 > hz * ($9 - $8 + 2) / 100 + 2 { n++ } END { print n + 0 }' /tmp/timer.phases)
    check "timer: CPU 0 sampled at most $hz Hz while CPU 1 is offline ($fast phases faster)" test "$fast" = 0
    races timer
else
    check "timer: unload" unload
fi

# CPU_CYCLES sampling (counting only on the A8: no PMU interrupt).
check "perf: load" load
echo 1 > $OP/0/enabled; echo $(cycles_event) > $OP/0/event; echo $count > $OP/0/count
listed perf
if [ $smp = 1 ]; then
    phases perf 0 1
    # 0/total at each phase's start and end, in order: never lower than the reading before.
    down=$(awk '{ if ($10 < last) n++; if ($11 < $10) n++; last = $11 } END { print n + 0 }' /tmp/perf.phases)
    check "perf: 0/total never decreased across CPU 1's offline periods ($down decreases)" test "$down" = 0
    total=$(cat $OP/0/total) rcv=$(samples_received)
    lost=$(($(cat $OP/stats/sample_lost_overrun) + $(cat $OP/stats/sample_lost_no_irq)))
    # One event per CPU but CPU 1, and one each time CPU 1 was online: each may have one period
    # in flight.
    events=$(($(grep -c ^processor /proc/cpuinfo) + on))
    check "perf: samples + counted losses within the counted periods: $rcv + $lost <= $((total / count)) + $events" \
        test $((rcv + lost)) -le $((total / count + events))
    races perf
else
    check "perf: unload" unload
fi
[ $smp = 0 ] || check "CPU 1 online at the end" grep -qx 1 $ON
summary
