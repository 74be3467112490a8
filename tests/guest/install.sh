# The installed module tree of the board image (make image; run by tests/image.sh only, typed at
# the board shell): modprobe from /lib/modules/<release> (modules.dep, extra/oprofile.ko),
# modinfo's parameter descriptions, mount autoloading the module by its alias, the insmod
# failure messages of Documentation/oprofilefs.rst's parameter table, and the DKMS-built module
# that tests/image.sh appends to the initramfs as /dkms/oprofile.ko (load, timer-mode capture).
. /tests/lib.sh
rel=$(uname -r)
# 12 + 5 refused parameters + 1 unknown parameter + 7 DKMS checks.
plan 25
echo 1 > /proc/sys/kernel/printk
gone() { test ! -e /sys/module/oprofile; }

check "modules.dep lists extra/oprofile.ko" grep -qx 'extra/oprofile.ko:' /lib/modules/$rel/modules.dep
expect "modinfo finds the installed module" /lib/modules/$rel/extra/oprofile.ko modinfo -F filename oprofile
# modinfo -F parm: "NAME:DESCRIPTION" lines; -F parmtype: "NAME:TYPE".
for p in timer:bool timer_hz:u32 kprof_hz:u32 kprof_granularity:u32; do
    check "modinfo: ${p%:*} has a description and type ${p#*:}" \
        sh -c "modinfo -F parm oprofile | grep -q '^${p%:*}:[A-Za-z]' && modinfo -F parmtype oprofile | grep -qx '$p'"
done
check "modprobe oprofile" modprobe oprofile
check "mount -t oprofilefs" sh -c "mkdir -p $OP && mount -t oprofilefs nodev $OP"
expect "cpu_type (the board's PMU model)" "$(hw_cpu_type)" cat $OP/cpu_type
check "umount, modprobe -r oprofile" sh -c "umount $OP && modprobe -r oprofile && ! test -e /sys/module/oprofile"
check "mount -t oprofilefs loads the module (alias fs-oprofilefs)" sh -c "mount -t oprofilefs nodev $OP && test -d /sys/module/oprofile"
check "umount, modprobe -r oprofile after the autoload" sh -c "umount $OP && modprobe -r oprofile && ! test -e /sys/module/oprofile"

# refused ARGS MESSAGE: modprobe with ARGS fails (EINVAL) and logs "oprofile: MESSAGE".
refused() {
    dmesg_mark
    if modprobe oprofile $1 2>/dev/null; then
        not_ok "modprobe oprofile $1 loaded"; modprobe -r oprofile
    elif gone && dmesg_new | grep -qF "oprofile: $2"; then
        ok "modprobe oprofile $1 refused: $2"
    else
        not_ok "modprobe oprofile $1: no '$2' in dmesg"
    fi
}
refused "timer=1 timer_hz=0" "timer_hz=0 out of range 1..=100000"
refused "kprof_hz=100001" "kprof_hz=100001 out of range 1..=100000"
refused "kprof_granularity=3" "kprof_granularity=3 is not a power of two in 4..=65536"
refused "timer_hz=abc" "\`abc' invalid for parameter \`timer_hz'"
refused "timer=2" "\`2' invalid for parameter \`timer'"
dmesg_mark
check "an unknown parameter is ignored with a message" \
    eval "modprobe oprofile foo=1 && dmesg_new | grep -qF \"oprofile: unknown parameter 'foo' ignored\" && modprobe -r oprofile"

# The DKMS-built module.
dk=/dkms/oprofile.ko
expect "DKMS module: vermagic of the installed module" "$(modinfo -F vermagic /lib/modules/$rel/extra/oprofile.ko)" \
    modinfo -F vermagic $dk
check "DKMS module: insmod timer=1, mount" sh -c "insmod $dk timer=1 && mount -t oprofilefs nodev $OP"
expect "DKMS module: cpu_type" timer cat $OP/cpu_type
check "DKMS module: capture" capture /tmp/buf dd if=/dev/zero of=/dev/null bs=64k count=5000
n=$(samples_received)
check "DKMS module: samples taken ($n)" test "${n:-0}" -gt 0
check "DKMS module: stream read ($(stat -c %s /tmp/buf) bytes)" test -s /tmp/buf
check "DKMS module: unload" sh -c "umount $OP && rmmod oprofile && ! test -e /sys/module/oprofile"
summary
