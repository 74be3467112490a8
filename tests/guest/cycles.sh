# Repeated load/mount/open/start/stop/close/umount/unload cycles, in several orders; every
# other cycle also runs kprof (4 MiB allocation, its own timers) and all profile points, and
# unloads with kprof still ticking.
. /tests/lib.sh
plan 2
echo 1 > /proc/sys/kernel/printk
i=0 bad=0
while [ $i -lt 50 ]; do
    load timer=1 || bad=$((bad + 1))
    if [ $((i % 2)) = 0 ]; then
        echo "enable all" > $OP/profile_points && echo startclr > $OP/kprof/kpctl || bad=$((bad + 1))
    fi
    case $((i % 3)) in
    0) optool capture /tmp/b true >/dev/null || bad=$((bad + 1)) ;;
    1) optool bufread 4096 1 >/dev/null ;;                        # open, interrupted read, close
    2) ( optool capture /tmp/b sleep 1 >/dev/null ) & sleep 0.3    # stop+close races umount -l
       umount -l $OP; wait; rmmod oprofile || bad=$((bad + 1)); i=$((i + 1)); continue ;;
    esac
    unload || bad=$((bad + 1))
    i=$((i + 1))
done
check "50 load/mount/start/stop/umount/unload cycles ($bad failures)" test $bad = 0
check "module unloaded at the end" sh -c "! grep -q '^oprofile ' /proc/modules"
summary
