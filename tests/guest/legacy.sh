# The legacy client's lookup_dcookie (issue 26): `oprof legacy -- CMD` answers the system call
# Linux 5.12 removed from /dev/oprofile/images through a seccomp supervisor, as legacy
# fs/dcookies.c did (Documentation/legacy-client.rst). dcookie (tests/guest/dcookie.c) calls it
# as OProfile 0.9.9's daemon/opd_cookie.c does. ARMv7 kernels only (the arm64 fragment has no
# CONFIG_SECCOMP_FILTER yet).
. /tests/lib.sh
plan 23
echo 1 > /proc/sys/kernel/printk
L="oprof legacy --log /tmp/legacy.log --"

check "load (timer mode)" load timer=1
check "session 1: capture hot and churn" capture /tmp/s1.buf sh -c '/bin/hot 1 && /bin/churn 2 40'
cp $OP/images /tmp/images1
n1=$(grep -c . /tmp/images1)
check "session 1's images lists at least 3 ids ($n1)" test "$n1" -ge 3
path1=$(awk '$1 == 1 { print $2 }' /tmp/images1)
len1=$((${#path1} + 1))

expect "without oprof legacy: ENOSYS (removed in Linux 5.12)" "ERR ENOSYS" dcookie lookup 1 4096
expect "every id of the session: its path, at size 4096 and at exactly its length; ERANGE one short" \
    "ok $n1 ids" $L dcookie check /tmp/images1
expect "id 1 answers its length with the NUL ($path1)" "OK $len1 $path1" $L dcookie lookup 1 4096
expect "id 0 (NO_COOKIE): EINVAL" "ERR EINVAL" $L dcookie lookup 0 4096
expect "id $((n1 + 1)), past the table: EINVAL" "ERR EINVAL" $L dcookie lookup $((n1 + 1)) 4096
expect "id 2^32-1: EINVAL" "ERR EINVAL" $L dcookie lookup 4294967295 4096
expect "id 1 + 2^32 (the high word set): EINVAL, not id 1" "ERR EINVAL" $L dcookie lookup2 1 1 4096
expect "size 0: ERANGE, nothing written" "ERR ERANGE" $L dcookie lookup 1 0
expect "NULL buffer and read-only buffer: EFAULT, EFAULT (the page unchanged)" "EFAULT EFAULT" $L dcookie badbuf 1
expect "a caller without CAP_SYS_ADMIN (uid 1000): EPERM" "ERR EPERM" $L optool as 1000 dcookie lookup 1 4096
expect "a call pending while the supervisor is stopped is killed; the next is served" \
    "blocked killed OK $len1 $path1" sh -c "$L dcookie stopped 1 | xargs"
expect "200 callers killed mid-call (0..2 ms in); the supervisor still serves" "OK $len1 $path1" $L dcookie killed 1 200
echo "# supervisor notes of callers gone before the answer: $(grep -c 'gone before' /tmp/legacy.log)"
expect "the command's exit status is oprof's" 3 sh -c "$L sh -c 'exit 3'; echo \$?"

# opcontrol --start's shape: the command returns, a process it started (oprofiled) keeps the
# filter; the supervisor serves it and exits when it is gone.
rm -f /tmp/late
$L sh -c '(sleep 2; dcookie lookup 1 4096 > /tmp/late) &'
check "after the command returned, the supervisor stays for its background child" test -n "$(pidof oprof)"
sleep 4
expect "the background child's call was served" "OK $len1 $path1" cat /tmp/late
check "the supervisor exited after the last process holding the filter ($(pidof oprof))" test -z "$(pidof oprof)"

# A new session (buffer opened again) starts a new table: ids are looked up in it.
check "session 2: capture hot" capture /tmp/s2.buf /bin/hot 1
cp $OP/images /tmp/images2
n2=$(grep -c . /tmp/images2)
expect "session 2: every id answers the new table's path" "ok $n2 ids" $L dcookie check /tmp/images2
if [ "$n2" -lt "$n1" ]; then
    expect "id $((n2 + 1)) of session 1, stale in session 2: EINVAL" "ERR EINVAL" $L dcookie lookup $((n2 + 1)) 4096
else
    not_ok "session 2 has no fewer ids ($n2) than session 1 ($n1): no stale id to test"
fi
check "unload" unload
echo "== legacy.log"; cat /tmp/legacy.log | tail -n 20
summary
