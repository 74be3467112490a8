# The asked sampling rate, against the guest's clock (tests/checks/rate.py): a timer-mode session
# at timer_hz=1000 and, where the PMU raises its interrupt, CPU_CYCLES every 1,000,000 cycles,
# each around `optool spin` on every CPU. The runner boots this script under QEMU's -icount
# (tests/run-qemu-tests.sh): the guest's clock and its cycle counter (1 cycle per ns in QEMU's
# PMU) then advance with the instructions the guest runs, not with the host's time, so a busy
# host cannot make the guest miss ticks, and the samples a session must hold follow from its
# length alone (CAPTURE_NS, CLOCK_MONOTONIC around enable=1 .. enable=0).
. /tests/lib.sh
irq=$(pmu_irq)
# 3 checks, + 3 where the PMU raises its interrupt (the CPU_CYCLES session).
plan $((3 + 3 * irq))
echo 1 > /proc/sys/kernel/printk
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent   # emulated PMU interrupts are slow
# session NAME: one capture around 2 s of spinning on every CPU; prints the session's length
# (RATE NAME ns N, for the host), its stats (STAT NAME:...) and its stream (block NAME).
session() {
    check "$1: capture" capture /tmp/$1.buf sh -c "$(each_cpu 'optool spin 2000')"
    echo "RATE $1 ns ${CAPTURE_NS:-0} cpus $(nproc)"
    print_stats | sed "s/^STAT /STAT $1:/"
    print_gz "$1" /tmp/$1.buf
}
HZ=1000 PERIOD=1000000
check "load (timer mode, timer_hz=$HZ)" load timer=1 timer_hz=$HZ
echo "RATE timer asked hz $HZ"
session timer
check "unload (timer mode)" unload
if [ $irq = 1 ]; then
    check "load (hardware events)" load
    for f in "0/enabled 1" "0/event $(cycles_event)" "0/count $PERIOD"; do echo ${f#* } > $OP/${f% *}; done
    echo "RATE cycles asked period $PERIOD"
    session cycles
    check "unload (hardware events)" unload
fi
summary
