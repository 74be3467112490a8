# Sourced by guest test scripts: a TAP plan, assertions printing "ok - ..." / "not ok - ..." and a
# summary. Every script declares its plan right after sourcing this file, `plan N`, and then
# reports exactly N checks (the host, tests/run-qemu-tests.sh, counts them against the plan).
PASS=0 FAIL=0 PLAN=
OP=/dev/oprofile
# plan N: the number of checks this script reports (TAP "1..N"); compute N up front when it
# depends on the board or the CPUs, from the same values the checks' loops use.
plan() { PLAN=$1; echo "1..$1"; }
# Each check line is followed by the guest's uptime as a TAP comment ("# at 12.34 s"): where a
# script spends its time (Documentation/testing.rst, the time budget).
at()     { read -r _up _ < /proc/uptime; echo "# at $_up s"; }
ok()     { PASS=$((PASS + 1)); echo "ok - $*"; at; }
not_ok() { FAIL=$((FAIL + 1)); echo "not ok - $*"; at; }
# expect DESC EXPECTED CMD... : CMD's first output line must equal EXPECTED.
expect() {
    d=$1 want=$2; shift 2
    got=$("$@" 2>&1 | head -n 1)
    if [ "$got" = "$want" ]; then ok "$d"; else not_ok "$d: got '$got', want '$want'"; fi
}
# check DESC CMD... : CMD must succeed.
check() { d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
load() {
    insmod /oprofile.ko "$@" && mkdir -p $OP && mount -t oprofilefs nodev $OP
}
# dmesg_mark: remembers where the kernel log ends (its last line's timestamp); dmesg_new: the
# lines logged since, by timestamp (a wrapped ring buffer cannot shift them). Instead of
# `dmesg -c`, which would delete lines before the host scans the log for kernel reports.
dmesg_mark() {
    DMESG_MARK=$(dmesg | tail -n 1 | sed -n 's/^\[ *\([0-9]*\.[0-9]*\)\].*/\1/p')
    DMESG_MARK=${DMESG_MARK:-0}
}
dmesg_new() {
    dmesg | awk -v m="$DMESG_MARK" '{ t = $0; sub(/^\[ */, "", t); sub(/\].*/, "", t); if (t + 0 > m + 0) print }'
}
# insmod_refused ARGS MESSAGE: one check that `insmod /oprofile.ko ARGS` is refused for the
# module's reason: /oprofile.ko exists (a missing file fails insmod too, with ENOENT), insmod
# fails with EINVAL (busybox: "can't insert '/oprofile.ko': Invalid argument") and the kernel
# log's new lines say "oprofile: MESSAGE" (not `dmesg -c`: the log is kept for the host's splat
# scan). What insmod printed goes into the failure message.
insmod_refused() {
    local why
    dmesg_mark
    if [ ! -f /oprofile.ko ]; then not_ok "insmod $1: /oprofile.ko missing"
    elif why=$(insmod /oprofile.ko $1 2>&1); then not_ok "insmod $1 loaded"; rmmod oprofile
    elif [ "$why" != "insmod: can't insert '/oprofile.ko': Invalid argument" ]; then
        not_ok "insmod $1 failed for another reason: '$why'"
    elif ! dmesg_new | grep -qF "oprofile: $2"; then
        not_ok "insmod $1 refused (EINVAL) without 'oprofile: $2' in dmesg"
    else ok "insmod $1 refused (EINVAL): $2"; fi
}
unload() { umount $OP && rmmod oprofile; }
# capture OUT CMD...: one profiling session around the workload CMD (`optool capture OUT CMD...`,
# the buffer read into OUT while CMD runs). Succeeds only if optool exits 0 and its last line is
# "ok N bytes, workload status 0, session T ns": the capture worked and the workload succeeded
# (a workload that fails profiles something else than the test meant). Otherwise it fails and
# prints why and optool's whole output as "# " lines (not TAP), so the log shows it. Keeps the
# output in OUT.out (the workload's own lines, then optool's) and sets CAPTURE_NS to T, the
# session's wall time in ns (CLOCK_MONOTONIC, from before enable=1 to after enable=0).
capture() {
    local out=$1 rc=0 last
    shift
    optool capture "$out" "$@" > "$out.out" 2>&1 || rc=$?
    last=$(tail -n 1 "$out.out")
    CAPTURE_NS=${last##*, session }; CAPTURE_NS=${CAPTURE_NS% ns}
    case $rc/$last in
    "0/ok "*" bytes, workload status 0, session "*" ns") return 0 ;;
    esac
    echo "# capture $out $*: optool exit status $rc, last line '$last'; its output:"
    sed 's/^/#   /' "$out.out"
    CAPTURE_NS=
    return 1
}
# captured OUT CMD...: capture, then the workload's output (for `expect` on what CMD printed);
# on failure the first line is capture's reason.
captured() { capture "$@" && sed '$d' "$1.out"; }
# each_cpu CMD: a `sh -c` script running CMD once per CPU at the same time, whose status is 1 if
# any of them failed (it waits for each by pid: a bare `wait` returns 0 whatever the children
# did); `&& MORE` may follow it. The pids of the CMDs go to /tmp/each_cpu.pids (one line), for
# work_pids.
each_cpu() {
    echo "p=; i=0; while [ \$i -lt $(nproc) ]; do $1 & p=\"\$p \$!\"; i=\$((i + 1)); done; echo \$p > /tmp/each_cpu.pids; s=0; for c in \$p; do wait \$c || s=1; done; [ \$s = 0 ]"
}
# work_pids: prints "WORKPIDS PID..." of the last each_cpu workload that ran, for the host
# checks that hold kernel attribution to the workload's own samples (logcheck.py work_pids).
work_pids() { echo "WORKPIDS $(cat /tmp/each_cpu.pids 2>/dev/null)"; }
summary() {
    debug_report
    echo "== dmesg begin"; dmesg; echo "== dmesg end"
    echo "guest: $PASS passed, $FAIL failed, plan ${PLAN:-missing}"
}
# The debug kernel's checkers (scripts/kconfig/debug.config), which the host reads
# (tests/run-qemu-tests.sh check_debug). Nothing happens on a kernel without debugfs/kmemleak.
KMEMLEAK=/sys/kernel/debug/kmemleak
grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# kmemleak_baseline: run once, when a script sources this file, before it loads any module: the
# kernel's jiffies now (/proc/timer_list), KMEMLEAK_JIFFIES. The boot leaves objects kmemleak
# cannot prove referenced (false positives of the kernel itself, nothing to do with oprofile.ko);
# debug_report prints only the reported objects allocated at or after this point ("jiffies N" in
# each report), i.e. by the script's modules and workloads, and counts the older ones apart.
# (Greying the boot's objects instead, `scan; scan; clear`, cost 35 s of every debug boot under
# KASAN: two scans of the whole memory. Recording the point in `load` would miss the scripts
# that insmod directly, e.g. abi.sh, kprof.sh.)
kmemleak_baseline() {
    KMEMLEAK_JIFFIES=$(awk '/^jiffies: / { print $2; exit }' /proc/timer_list)
    [ -n "$KMEMLEAK_JIFFIES" ] || not_ok "kmemleak baseline: no 'jiffies:' line in /proc/timer_list"
}
[ ! -e $KMEMLEAK ] || kmemleak_baseline
# kmemleak_since: kmemleak's report (stdin) without the objects allocated before
# KMEMLEAK_JIFFIES, then "kmemleak_before_baseline N" (their count). jiffies wrap (at 2^32 on
# ARMv7, 5 minutes after boot: INITIAL_JIFFIES), so "after" is a difference modulo the word size
# (word_bytes, below) below half of it.
kmemleak_since() {
    awk -v base="${KMEMLEAK_JIFFIES:-0}" -v bits="$(($(word_bytes) * 8))" '
        function flush() { if (obj != "") { if (keep) printf "%s", obj; else old++ } obj = "" }
        /^unreferenced object / { flush(); obj = $0 "\n"; keep = 1; next }
        obj != "" && /^  comm .*, jiffies [0-9]+$/ {
            d = ($NF - base) % 2 ^ bits; if (d < 0) d += 2 ^ bits
            keep = d < 2 ^ (bits - 1)
        }
        obj != "" { obj = obj $0 "\n"; next }
        { print }
        END { flush(); print "kmemleak_before_baseline " old + 0 }'
}
# debug_report: the lockdep state (debug_locks drops to 0 after any lockdep report), KFENCE's
# counters and kmemleak's leaks (objects unreferenced and allocated since the baseline), as text
# blocks. kmemleak: a scan reports only objects at least 5 s old (MSECS_MIN_AGE) whose contents
# did not change since the previous scan: a first scan records each object's checksum, the second
# (5 s later, so the last unload's objects are old enough) reports. The last line of the block
# is kmemleak_since's count of the boot's objects left out.
debug_report() {
    ! debug_kernel || echo "== lockdep debug_locks $(awk '/debug_locks:/ { print $2 }' /proc/lockdep_stats)"
    if [ -e /sys/kernel/debug/kfence/stats ]; then
        echo "== kfence begin"; cat /sys/kernel/debug/kfence/stats; echo "== kfence end"
    fi
    if [ -e $KMEMLEAK ]; then
        echo scan > $KMEMLEAK; sleep 5; echo scan > $KMEMLEAK
        echo "== kmemleak begin"
        { cat $KMEMLEAK || echo "kmemleak: read failed"; } | kmemleak_since
        echo "== kmemleak end"
    fi
}
# dump_session: what the host needs besides the sample stream, as text blocks: the images file
# (image id -> path), /proc/modules and every module's section addresses (module attribution).
dump_session() {
    echo "== images begin"; cat $OP/images; echo "== images end"
    echo "== proc_modules begin"; cat /proc/modules; echo "== proc_modules end"
    echo "== module_sections begin"
    # One awk for every file, not a $(cat) each: a fork costs 0.3 s under the arm64 debug kernel
    # (KASAN, TCG). Not the shell's read either: a section file answers only a read at offset 0
    # (kernel/module/sysfs.c module_sect_read), and read(1) takes a byte at a time.
    set --
    for d in /sys/module/*/sections; do
        [ -d "$d" ] || continue
        for f in "$d"/.* "$d"/*; do [ -f "$f" ] && set -- "$@" "$f"; done
    done
    [ $# = 0 ] || awk '{ m = FILENAME; sub(/\/sections\/[^\/]*$/, "", m); sub(/.*\//, "", m)
                         s = FILENAME; sub(/.*\//, "", s); print m, s, $0 }' "$@"
    echo "== module_sections end"
}
# print_stream MARK FILE: FILE as a base64 block for the host (scripts/lib.sh log_stream).
print_stream() {
    echo "== $1 begin"; base64 "$2"; echo "== $1 end"
}
# print_gz MARK FILE: FILE gzipped, as a base64 block (logcheck.py stream(gz=True)). For sample
# streams and kpdata: a stream with user-stack snapshots shrinks 20-35x (7.4 MB to 0.3 MB), and
# the serial console is the slowest part of a script (the arm64 debug kernel printed 35 MB of
# user.sh streams at about 75 KB/s, most of its 480 s).
print_gz() {
    echo "== $1 begin"; gzip -c "$2" | base64; echo "== $1 end"
}
# samples_received: the sum of stats/cpu*/sample_received (samples taken on every CPU).
samples_received() { cat $OP/stats/cpu*/sample_received | awk '{ s += $1 } END { print s }'; }
# samples_lost: samples taken but not delivered (Documentation/oprofilefs.rst, "Accounting";
# tests/checks/logcheck.py received_and_lost): every stats/cpuN/ sample_lost_overflow,
# sample_invalid_eip, sample_lost_nmi_overflow, sample_lost_nmi_task, and the global
# sample_lost_no_mm, sample_lost_no_mapping, event_lost_overflow. Periods never sampled
# (sample_lost_no_irq, sample_lost_overrun) are no samples taken: not among them.
samples_lost() {
    cat $OP/stats/cpu*/sample_lost_overflow $OP/stats/cpu*/sample_invalid_eip $OP/stats/cpu*/sample_lost_nmi_overflow \
        $OP/stats/cpu*/sample_lost_nmi_task $OP/stats/sample_lost_no_mm $OP/stats/sample_lost_no_mapping \
        $OP/stats/event_lost_overflow | awk '{ s += $1 } END { print s }'
}
# be_word FILE I: big-endian 4-byte word I of FILE (kprof/kpdata), in decimal.
be_word() { od -A n -t u1 -j $(($2 * 4)) -N 4 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }'; }
# print_stats: every stats file as "STAT name value" lines.
print_stats() {
    for f in $OP/stats/cpu*/* $OP/stats/[0-9]*/* $OP/stats/*; do
        # read, not $(cat): no fork (see dump_session); a stats file answers reads at any offset.
        [ -f "$f" ] && { v=; read -r v < "$f"; echo "STAT ${f#$OP/stats/} $v"; }
    done
}
# debug_kernel: succeeds on a debug kernel (scripts/kconfig/debug.config: lockdep is there).
debug_kernel() { [ -e /proc/lockdep_stats ]; }
# guest_arg NAME: the value of NAME=VALUE on the kernel command line (scripts/qemu.sh GUEST_ARGS),
# empty if absent.
guest_arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p" | tail -n 1; }
# board: a8 (realview-pb-a8: Cortex-A8, 1 CPU, no PMU interrupt), a15 (virt-a15: Cortex-A15, 2
# CPUs), a53 (virt-a53: Cortex-A53, 2 CPUs, arm64) or imx8mp (imx8mp-evk: 4 Cortex-A53, arm64);
# every board but a8 has the PMU overflow interrupt.
board() {
    if grep -q realview /proc/device-tree/compatible; then echo a8
    elif grep -q 'fsl,imx8mp' /proc/device-tree/compatible; then echo imx8mp
    elif [ "$(uname -m)" = aarch64 ]; then echo a53
    else echo a15; fi
}
# pmu_irq: 1 where the PMU raises its overflow interrupt (hardware events sample), 0 on a8.
pmu_irq() { if [ "$(board)" = a8 ]; then echo 0; else echo 1; fi; }
# arm64: 1 on the arm64 boards (AArch64 kernel and programs), else 0.
arm64() { if [ "$(uname -m)" = aarch64 ]; then echo 1; else echo 0; fi; }
# word_bytes: the kernel's word size (pointer_size, the buffer's words): 8 on arm64, 4 on ARMv7.
word_bytes() { if [ "$(arm64)" = 1 ]; then echo 8; else echo 4; fi; }
# hw_cpu_type: the module's cpu_type in hardware mode (its model of the board's PMU): arm/armv7
# (Cortex-A8), arm/armv7-ca15, arm/armv8-ca53 (both arm64 boards' DTBs: "arm,cortex-a53-pmu").
hw_cpu_type() { case $(board) in a8) echo arm/armv7 ;; a15) echo arm/armv7-ca15 ;; *) echo arm/armv8-ca53 ;; esac; }
# cycles_event: the event number of the model's CPU_CYCLES: 0xff on ARMv7 (the cycle counter,
# CCNT), 0x11 on ARMv8 PMUv3 (PMCCNTR_EL0 or any event counter).
cycles_event() { if [ "$(arm64)" = 1 ]; then echo 0x11; else echo 0xff; fi; }
# cycles_min: the model's minimum count of CPU_CYCLES (rust/common/events.rs): 100000 on the A8
# (oprofile 1.x's armv7 table) and on ARMv8 PMUv3, 500 on the A15.
cycles_min() { if [ "$(board)" = a15 ]; then echo 500; else echo 100000; fi; }
