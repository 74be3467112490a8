# `make run`: the user's flow with the real tool, echoed as it runs. `oprof record` loads the
# module, mounts oprofilefs, profiles a real workload with backtraces (depth 16), kprof and the
# module's profile points, and writes the session directory /tmp/session, which goes to the host
# as a tar.gz base64 block; `oprof report` then shows it on the guest too. /tests/opsetup.sh (for
# EVENT=...) sets EVENTS="-e NAME:COUNT ..." for hardware counters; otherwise timer mode.
. /tests/lib.sh
echo 1 > /proc/sys/kernel/printk
EVENTS=
[ ! -f /tests/opsetup.sh ] || . /tests/opsetup.sh
[ -z "$EVENTS" ] || echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent   # emulated PMU interrupts are slow
dd if=/dev/urandom of=/tmp/data bs=1M count=8 2>/dev/null
n=$(nproc)
# opwork (tests/guest/opwork.c, built as Debian builds C: -O2, Thumb-2, stripped; its debug file
# stays on the host): read + CRC-32 + histogram + libc qsort + write; busybox sha256sum and gzip
# (stripped, no debug package: no symbols); one kernel-bound dd per CPU. `-g` records user-stack
# snapshots, which the host report unwinds.
work="opwork /tmp/data /tmp/sorted 4; sha256sum /tmp/data; gzip -c /tmp/data > /tmp/data.gz; ls -l /tmp/data.gz; i=0; while [ \$i -lt $n ]; do dd if=/dev/zero of=/dev/null bs=64k count=15000 & i=\$((i+1)); done; wait"
echo "# oprof record -g 16 --kprof --points ${EVENTS:+$EVENTS }-o /tmp/session -- sh -c '<workload>'"
# shellcheck disable=SC2086
oprof record -g 16 --kprof --points $EVENTS -o /tmp/session -- sh -c "$work"
echo "== record exit status $?"
echo "# ls /tmp/session"
ls /tmp/session
tar -C /tmp -czf /tmp/session.tgz session
print_stream session /tmp/session.tgz
echo "# oprof report /tmp/session -l -n 8        (on the guest)"
oprof report /tmp/session -l -n 8 2>/dev/null
echo "# grep oprofile /proc/modules /proc/mounts   (oprof record left the system as it found it)"
grep oprofile /proc/modules /proc/mounts || echo "(none)"
