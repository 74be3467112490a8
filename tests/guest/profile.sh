# Profiles a kernel-bound and a user-bound workload; prints stats and the raw stream (gzip + base64)
# for the host to decode and check.
. /tests/lib.sh
plan 3
echo 1 > /proc/sys/kernel/printk
check "load (timer mode)" load timer=1
dd if=/dev/urandom of=/tmp/data bs=1M count=4 2>/dev/null
# One kernel-bound dd per CPU, then busybox sha256sum and gzip over the file.
work="$(each_cpu 'dd if=/dev/zero of=/dev/null bs=64k count=20000') && sha256sum /tmp/data >/dev/null && gzip -c /tmp/data >/dev/null"
check "capture" capture /tmp/buf sh -c "$work"
print_stats
work_pids
echo "STAT bytes $(stat -c %s /tmp/buf)"
print_gz opbuf /tmp/buf
check "unload" unload
summary
