# kprof (Plan 9 kprof(3)): files, modes, kpctl commands and errnos, module parameters, the raw
# kpdata header and byte order, startclr, stop, and a kernel-bound workload profiled alongside
# a timer-mode oprofilefs session. kpdata copies go to the host (gzip + base64) for
# `oprof kprof` (host checks: tests/checks/kprof.py).
. /tests/lib.sh
plan 57
echo 1 > /proc/sys/kernel/printk
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent 2>/dev/null
KC=$OP/kprof/kpctl KD=$OP/kprof/kpdata
# kv KEY: value of KEY in kpctl.
kv() { awk -v k="$1" '$1 == k { print $2 }' $KC; }
uptime_cs() { awk '{ split($1, a, "."); print a[1] * 100 + a[2] }' /proc/uptime; }

# Module parameters: bad values fail the load with EINVAL and the module's reason, nothing stays
# registered.
for bad in "kprof_hz=0:out of range 1..=100000" "kprof_hz=100001:out of range 1..=100000" \
    "kprof_granularity=3:is not a power of two in 4..=65536" "kprof_granularity=2:is not a power of two in 4..=65536" \
    "kprof_granularity=131072:is not a power of two in 4..=65536"; do
    insmod_refused "${bad%%:*}" "${bad%%:*} ${bad#*:}"
    check "nothing left after ${bad%%:*}" sh -c "! grep -qw oprofilefs /proc/filesystems"
done

check "load with kprof_granularity=16" load timer=1 kprof_granularity=16
expect "granularity 16" 16 kv granularity
g16=$(kv slots); b16=$(kv bytes)
check "unload" unload

check "load (timer mode, defaults)" load timer=1
expect "mode of kprof/" 755 stat -c %a $OP/kprof
expect "mode of kpctl" 644 stat -c %a $KC
expect "mode of kpdata" 400 stat -c %a $KD
expect "state stopped before start" stopped kv state
expect "kprof_hz default" 1000 kv hz
expect "granularity: one instruction (ARM, A64)" 4 kv granularity
set -- $(awk '$1 == "text" { print $2, $3 }' $KC)
# The shell's numbers are signed 64-bit: arm64's text addresses (0xffff8000...) are above that,
# so they lose their top 16 bits, which every arm64 kernel address has set (the difference, all
# that is used, stays; an address without them fails the checks below).
addr() { case $1 in 0xffff????????????) printf %d "0x${1#0xffff}" ;; *) printf %d "$1" ;; esac; }
tstart=$(addr "$1"); tend=$(addr "$2")
slots=$(kv slots); bytes=$(kv bytes)
echo "KPROF text $1 $2 slots $slots bytes $bytes"
expect "slots = text / 4" $(( (tend - tstart + 3) / 4 )) echo "$slots"
expect "bytes = 8 + 4 * slots" $((8 + 4 * slots)) echo "$bytes"
expect "16-byte granularity: a quarter of the slots" $(( (tend - tstart + 15) / 16 )) echo "$g16"
expect "16-byte granularity: bytes" $((8 + 4 * g16)) echo "$b16"
expect "kpdata size = bytes" "$bytes" sh -c "cat $KD | wc -c"
expect "all zero before the first start" 0 sh -c "tr -d '\\000' < $KD | wc -c"

for bad in Start star startclr2 "stop now" "start " " start"; do
    expect "kpctl '$bad' -> EINVAL" "ERR EINVAL" optool write $KC "$bad"
done
expect "kpctl 'start' + two newlines -> EINVAL" "ERR EINVAL" optool write $KC "start
"
expect "kpctl 'start' without newline" ok optool write --raw $KC start
expect "state started" started kv state
expect "start again is harmless" ok optool write $KC start
expect "stop" ok optool write $KC stop
expect "state stopped" stopped kv state
a=$(be_word $KD 0); sleep 1; b=$(be_word $KD 0)
check "stopped: total stays ($a == $b)" test "$a" = "$b"
check "ticks were counted ($a > 0)" test "$a" -gt 0

# A kernel-bound workload (dd from /dev/zero, one per CPU) while oprofilefs samples too.
n=$(nproc)
expect "startclr" ok optool write $KC startclr
t0=$(uptime_cs)
check "capture alongside kprof" capture /tmp/buf sh -c "$(each_cpu 'dd if=/dev/zero of=/dev/null bs=64k count=20000')"
t1=$(uptime_cs)
expect "stop" ok optool write $KC stop
total=$(be_word $KD 0) kern=$(be_word $KD 1)
cs=$((t1 - t0))
echo "KPROF total $total kernel $kern centiseconds $cs cpus $n"
# The upper bound (1000 Hz x the elapsed time x CPUs) and the byte order are kprof.py's, on the
# raw copy; here the lower bound (ticks a busy host's vCPUs miss are not made up).
check "total ticks >= 20% of 1000 Hz * $cs cs ($total)" test "$total" -ge $(( cs * 2 ))
check "kernel ticks <= total ($kern <= $total)" test "$kern" -le "$total"
check "kernel-bound: kernel ticks > total / 2 ($kern)" test "$kern" -gt $((total / 2))
rcv=$(samples_received)
check "oprofilefs sampled alongside ($rcv samples)" test "$rcv" -gt 100
cp $KD /tmp/kpdata.run
expect "kpdata read at an unaligned offset" "$(head -c 11 $KD | tail -c 9 | od -A n -t x1)" \
    sh -c "dd if=$KD bs=1 skip=2 count=9 2>/dev/null | od -A n -t x1"
expect "kpdata read across the end" "$(tail -c 5 $KD | od -A n -t x1)" \
    sh -c "dd if=$KD bs=1 skip=$((bytes - 5)) count=9 2>/dev/null | od -A n -t x1"
print_gz kpdata_run /tmp/kpdata.run
# The oprofilefs stream of the same interval (timer mode): kprof.py holds kprof's attribution
# to it, and the stream's to the dd processes' own samples.
work_pids
print_gz opbuf /tmp/buf

# startclr zeroes: a fresh start counts only its own ticks.
expect "startclr" ok optool write $KC startclr
expect "stop at once" ok optool write $KC stop
small=$(be_word $KD 0)
check "startclr zeroed the counts ($small < $total)" test "$small" -lt "$total"
cp $KD /tmp/kpdata.clr
print_gz kpdata_clr /tmp/kpdata.clr

# Reopen keeps the array (allocated once); unload while started stops the clock.
expect "start" ok optool write $KC start
check "unload while kprof runs" unload
check "reload" load timer=1
expect "fresh module: stopped" stopped kv state
check "unload" unload
summary
