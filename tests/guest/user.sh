# User-space attribution (issue 4): programs with known hot functions, a process tree that
# munmaps/execs/exits while sampled, a module loaded while profiling. Each case prints its
# sample stream, stats and session files (images, modules) for the host checks in
# tests/checks/user.py, prefixed by the case name.
. /tests/lib.sh
irq=$(pmu_irq)
# 32 checks, + 8 where the PMU raises its interrupt (the hot_cycles and split_cycles cases with
# hardware events: the A15, the arm64 boards' A53s).
plan $((32 + 8 * irq))
echo 1 > /proc/sys/kernel/printk
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent   # emulated PMU interrupts are slow

# case NAME CMD...: one profiling session around CMD, everything printed under NAME.
case_run() {
    name=$1; shift
    check "$name: capture" capture /tmp/$name.buf "$@"
    print_stats | sed "s/^STAT /STAT $name:/"
    print_gz "$name.buf" /tmp/$name.buf
    dump_session | sed "s/^== \([a-z_]*\) /== $name.\1 /"
}

check "load (timer mode)" load timer=1
expect "images empty before any session" "" cat $OP/images
expect "mode of images (root only, like lookup_dcookie)" 400 stat -c %a $OP/images
expect "images is read-only" "ERR EINVAL" optool write $OP/images x
expect "backtrace_depth=16" ok optool write $OP/backtrace_depth 16
case_run hot_timer /bin/hot 3
check "images names /bin/hot" sh -c "grep -q '^[1-9][0-9]* /bin/hot\$' $OP/images"
check "images names libc" sh -c "grep -q '^[1-9][0-9]* /lib/libc.so.6\$' $OP/images"
# The same program with the split reversed (30/70): oprof diff against hot_timer.
case_run flip /bin/hot 2 3000 7000
# hot as Debian builds C (-O2 without frame pointer; on armhf Thumb-2, r11 no frame pointer):
# chains must end, not invent. On a debug kernel it runs 8 s: there, beside a busy host, a
# tick's handling outlasts the period (sample_lost_overrun above sample_received), so each
# user sample comes a few instructions after the last and the samples are not independent:
# 327 user samples of 3 s once gave hot_a 80.7 % (user.py wants 70 +-10). The longer run
# covers more of the program's rounds.
if debug_kernel; then thumb_s=8; else thumb_s=3; fi
case_run hot_thumb /bin/hot_t2 $thumb_s
# Distribution code's callers from user-stack snapshots (user_stack_size), unwound on the host:
# a 2:1 split of leaf's callers, a qsort callback back through libc, a corrupted stack.
expect "user_stack_size=2048" ok optool write $OP/user_stack_size 2048
expect "buffer_size=1048576 (a snapshot is about 540 words)" ok optool write $OP/buffer_size 1048576
expect "buffer_watershed=524288 (the reader woken at half)" ok optool write $OP/buffer_watershed 524288
case_run split /bin/callers split 3
case_run sort /bin/callers sort 300000
case_run corrupt /bin/callers corrupt 2
# sp in memory the interrupt must not read (not VM_READ; device-like VM_MIXEDMAP, [vvar]):
# refused, counted in stats/user_stack_refused, nothing read.
case_run noread /bin/callers refused 2 none
case_run vvar /bin/callers refused 2 vvar
# A flood of images: ten copies of busybox (ten files) run in turn, sampled with snapshots,
# under image_ids_max 4. The table stops at 4 ids (more than 4 files ran long enough to be
# sampled), the rest are refused and counted, and the stream (read by oprof decode) names no
# id above 4, in samples or executables.
expect "image_ids_max=4" ok optool write $OP/image_ids_max 4
for i in 1 2 3 4 5 6 7 8 9 10; do mkdir -p /tmp/flood/$i && cp /bin/busybox /tmp/flood/$i/; done
check "flood: capture" capture /tmp/flood.buf sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do /tmp/flood/$i/busybox sh -c "i=0; while [ \$i -lt 3000 ]; do i=\$((i + 1)); done"; done'
expect "flood: images stops at image_ids_max (4 lines)" 4 sh -c "wc -l < $OP/images"
refused=$(cat $OP/stats/image_ids_refused)
check "flood: refusals counted in stats/image_ids_refused ($refused)" [ "$refused" -gt 0 ]
oprof decode --word-size "$(word_bytes)" /tmp/flood.buf > /tmp/flood.dec 2>&1; drc=$?
ids=$(grep -o "cookie: [0-9a-f]*" /tmp/flood.dec | sort -u | tr '\n' ' ')
check "flood: the stream decodes and names ids 0-4 only (${ids% })" eval '[ $drc = 0 ] && [ -n "$ids" ] && ! grep -q "cookie: \([5-9a-f]\|[0-9a-f][0-9a-f]\)" /tmp/flood.dec'
expect "image_ids_max=16384" ok optool write $OP/image_ids_max 16384
rm -rf /tmp/flood /tmp/flood.buf /tmp/flood.buf.out /tmp/flood.dec
expect "user_stack_size=0" ok optool write $OP/user_stack_size 0
expect "backtrace_depth=8" ok optool write $OP/backtrace_depth 8
case_run churn /bin/churn 8 40
expect "backtrace_depth=0" ok optool write $OP/backtrace_depth 0
case_run kmod insmod /optest.ko spin_rounds=36000
check "optest loaded" sh -c "grep -q '^optest ' /proc/modules"
check "unload optest" rmmod optest
check "unload" unload

if [ $irq = 1 ]; then
    check "load (hardware events)" load
    # CPU_CYCLES (0xff on ARMv7, 0x11 on ARMv8; counter 0, the cycle counter) every 1M cycles,
    # user and kernel.
    for f in "0/enabled 1" "0/event $(cycles_event)" "0/count 1000000"; do echo ${f#* } > $OP/${f% *}; done
    case_run hot_cycles /bin/hot 3
    expect "backtrace_depth=16" ok optool write $OP/backtrace_depth 16
    expect "user_stack_size=2048" ok optool write $OP/user_stack_size 2048
    expect "buffer_size=1048576" ok optool write $OP/buffer_size 1048576
    expect "buffer_watershed=524288" ok optool write $OP/buffer_watershed 524288
    case_run split_cycles /bin/callers split 3
    check "unload" unload
fi
summary
