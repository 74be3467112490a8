# Repeated load/mount/open/enable/disable/close/umount/unload cycles, in several orders (a
# capture; an interrupted read; a capture racing a lazy umount, unloaded once it closes).
# make check: 200 cycles (100 on a debug kernel), kprof (4 MiB allocation, its own timers) and
# every profile point on in every other cycle, unloading with kprof still ticking. make soak:
# GUEST_ARGS="opcycles=1000 opsoak=1", kprof and every point on in every cycle.
# A cycle takes 3 s under virt-a15's debug kernel (lockdep, KFENCE, SLUB debugging, kmemleak's
# tracking of each load): 100 still run each order 33 times, and lockdep reports a lock order the
# first time it sees it (make check's time budget, Documentation/testing.rst).
. /tests/lib.sh
plan 3
echo 1 > /proc/sys/kernel/printk
cycles=$(guest_arg opcycles)
if [ -z "$cycles" ]; then if debug_kernel; then cycles=100; else cycles=200; fi; fi
soak=$(guest_arg opsoak); soak=${soak:-0}
i=0 bad=0 extras=0
t0=$(cut -d' ' -f1 /proc/uptime)
while [ $i -lt "$cycles" ]; do
    load timer=1 || bad=$((bad + 1))
    if [ "$soak" = 1 ] || [ $((i % 2)) = 0 ]; then
        echo "enable all" > $OP/profile_points && echo startclr > $OP/kprof/kpctl && extras=$((extras + 1)) || bad=$((bad + 1))
    fi
    case $((i % 3)) in
    0) optool capture /tmp/b true >/dev/null || bad=$((bad + 1)) ;;
    1) optool bufread 4096 0.05 >/dev/null ;;                     # open, interrupted read, close
    2) ( optool capture /tmp/b sleep 0.2 >/dev/null ) & sleep 0.1  # stop+close races umount -l
       umount -l $OP; wait; rmmod oprofile || bad=$((bad + 1)); i=$((i + 1)); continue ;;
    esac
    unload || bad=$((bad + 1))
    i=$((i + 1))
done
t1=$(cut -d' ' -f1 /proc/uptime)
echo "CYCLES $cycles in $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s, kprof and profile points on in $extras"
check "$cycles load/mount/open/enable/disable/close/umount/unload cycles ($bad failures)" test $bad = 0
check "kprof and every profile point on in $extras of them" test "$extras" = $([ "$soak" = 1 ] && echo "$cycles" || echo $(((cycles + 1) / 2)))
check "module unloaded at the end" sh -c "! grep -q '^oprofile ' /proc/modules"
summary
