# `make run`: the user's flow, echoed as it runs, around a real workload. With /tests/opsetup.sh
# (from `oprof setup`, for EVENT=...) hardware counters are set up; otherwise timer mode.
# Backtraces on (depth 16); kprof and all profile points on too. Prints the stream, the session
# files (images, modules), the profile point table and kpdata for the host.
. /tests/lib.sh
echo 1 > /proc/sys/kernel/printk
run() { echo "# $*"; "$@"; }
if [ -f /tests/opsetup.sh ]; then
    echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent   # emulated PMU interrupts are slow
    run insmod /oprofile.ko
else
    run insmod /oprofile.ko timer=1
fi
run mkdir -p /dev/oprofile
run mount -t oprofilefs nodev /dev/oprofile
echo "# cat /dev/oprofile/cpu_type  ->  $(cat /dev/oprofile/cpu_type)"
run sh -c 'echo 131072 > /dev/oprofile/buffer_size'
run sh -c 'echo 16384 > /dev/oprofile/cpu_buffer_size'
run sh -c 'echo 16 > /dev/oprofile/backtrace_depth'
if [ -f /tests/opsetup.sh ]; then
    grep -v '^echo 0 > .*/enabled$' /tests/opsetup.sh   # show the interesting writes
    . /tests/opsetup.sh
fi
run sh -c 'dd if=/dev/urandom of=/tmp/data bs=1M count=8 2>/dev/null'
n=$(nproc)
# opwork (tests/guest/opwork.c, with symbols): read + CRC-32 + histogram + libc qsort + write;
# busybox sha256sum and gzip (stripped: no symbols); one kernel-bound dd per CPU.
work="opwork /tmp/data /tmp/sorted 4; sha256sum /tmp/data; gzip -c /tmp/data > /tmp/data.gz; ls -l /tmp/data.gz; i=0; while [ \$i -lt $n ]; do dd if=/dev/zero of=/dev/null bs=64k count=15000 & i=\$((i+1)); done; wait"
# The seeds' extras alongside: every profile point of the module, and Plan 9 kprof.
run sh -c 'echo "enable all" > /dev/oprofile/profile_points'
run sh -c 'echo startclr > /dev/oprofile/kprof/kpctl'
echo "# optool capture /tmp/buf sh -c '<workload>'   (opens buffer, echo 1 > enable, runs, echo 0 > enable, reads)"
optool capture /tmp/buf sh -c "$work"
run sh -c 'echo stop > /dev/oprofile/kprof/kpctl'
print_stats
for d in /dev/oprofile/[0-9]*; do
    [ -d "$d" ] && [ "$(cat $d/enabled)" = 1 ] && echo "TOTAL counter ${d##*/} event $(cat $d/event) count $(cat $d/count): $(cat $d/total) events"
done
dmesg | grep 'oprofile:'
print_stream opbuf /tmp/buf
echo "== profile_points begin"; cat /dev/oprofile/profile_points; echo "== profile_points end"
print_gz kpdata /dev/oprofile/kprof/kpdata
dump_session
run umount /dev/oprofile
run rmmod oprofile
