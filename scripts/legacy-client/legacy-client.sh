# The real OProfile 0.9.9 client (opcontrol, oprofiled, opreport; scripts/legacy-client/build.sh)
# on the guest, by hand (not part of make check): the legacy flow twice, first without
# `oprof legacy` (oprofiled's lookup_dcookie fails with ENOSYS: no user image), then with it
# (the program's symbols). Installed as /tests/legacy-client.sh by build.sh's overlay; run by
# scripts/qemu.sh BOARD INITRD legacy-client.sh LOG. Command line words (GUEST_ARGS):
#   lcevent=timer       the module's timer mode (realview-pb-a8: its PMU has no overflow IRQ);
#                       otherwise --event=CPU_CYCLES:100000 (the PMU's cycle counter)
# /vmlinux and /tests/kernel-range (build.sh with VMLINUX): --vmlinux, else --no-vmlinux.
arg() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" /proc/cmdline; }
event=$(arg lcevent)
events=--event=CPU_CYCLES:100000; [ "$event" != timer ] || events=
kernel=--no-vmlinux
[ ! -f /vmlinux ] || kernel="--vmlinux=/vmlinux --kernel-range=$(cat /tests/kernel-range)"
run() { echo "\$ $*"; "$@" 2>&1; echo "[status $?]"; }
echo 1 > /proc/sys/kernel/printk
if [ "$event" = timer ]; then insmod /oprofile.ko timer=1; else insmod /oprofile.ko; fi
echo "# module loaded: $?"
run opcontrol --version

# pass LABEL WRAP...: the whole flow, opcontrol --start run as WRAP... opcontrol --start.
pass() {
    echo "==== $1"; shift
    run opcontrol --init
    run opcontrol --setup $kernel $events
    run "$@" opcontrol --start
    run /bin/hot 3
    run opcontrol --dump
    run opcontrol --stop
    run opcontrol --shutdown
    # oprofiled's statistics, written to its log at exit, and its failed lookups.
    echo "\$ grep -E 'Lookup|sample file open|samples:' oprofiled.log"
    grep -E 'Lookup|sample file open|samples:' /var/lib/oprofile/samples/oprofiled.log
    run opreport
    run opreport -l image:/bin/hot
    if [ -f /vmlinux ]; then
        echo "\$ opreport -l image:/vmlinux | head -n 12"
        opreport -l image:/vmlinux 2>&1 | head -n 12
    fi
    run opcontrol --reset
    rm -f /var/lib/oprofile/samples/oprofiled.log
}
pass "without oprof legacy"
pass "under oprof legacy" oprof legacy --log /tmp/legacy.log --
echo "\$ head -n 5 /tmp/legacy.log; wc -l"; head -n 5 /tmp/legacy.log; wc -l < /tmp/legacy.log
echo "\$ cat /dev/oprofile/images"; cat /dev/oprofile/images
echo "\$ pidof oprof oprofiled   # the supervisor left with oprofiled"
pidof oprof oprofiled; echo "[status $?]"
