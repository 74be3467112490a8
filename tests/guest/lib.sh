# Sourced by guest test scripts: a TAP plan, assertions printing "ok - ..." / "not ok - ..." and a
# summary. Every script declares its plan right after sourcing this file, `plan N`, and then
# reports exactly N checks (the host, tests/run-qemu-tests.sh, counts them against the plan).
PASS=0 FAIL=0 PLAN=
OP=/dev/oprofile
# plan N: the number of checks this script reports (TAP "1..N"); compute N up front when it
# depends on the board or the CPUs, from the same values the checks' loops use.
plan() { PLAN=$1; echo "1..$1"; }
ok()     { PASS=$((PASS + 1)); echo "ok - $*"; }
not_ok() { FAIL=$((FAIL + 1)); echo "not ok - $*"; }
# expect DESC EXPECTED CMD... : CMD's first output line must equal EXPECTED.
expect() {
    d=$1 want=$2; shift 2
    got=$("$@" 2>&1 | head -n 1)
    if [ "$got" = "$want" ]; then ok "$d"; else not_ok "$d: got '$got', want '$want'"; fi
}
# check DESC CMD... : CMD must succeed.
check() { d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
load() {
    insmod /oprofile.ko "$@" && mkdir -p $OP && mount -t oprofilefs nodev $OP
}
unload() { umount $OP && rmmod oprofile; }
summary() {
    echo "== dmesg begin"; dmesg; echo "== dmesg end"
    echo "guest: $PASS passed, $FAIL failed, plan ${PLAN:-missing}"
}
# dump_session: what the host needs besides the sample stream, as text blocks: the images file
# (image id -> path), /proc/modules and every module's section addresses (module attribution).
dump_session() {
    echo "== images begin"; cat $OP/images; echo "== images end"
    echo "== proc_modules begin"; cat /proc/modules; echo "== proc_modules end"
    echo "== module_sections begin"
    for d in /sys/module/*/sections; do
        [ -d "$d" ] || continue
        m=${d%/sections}; m=${m##*/}
        for f in "$d"/.* "$d"/*; do [ -f "$f" ] && echo "$m ${f##*/} $(cat "$f")"; done
    done
    echo "== module_sections end"
}
# print_stream MARK FILE: FILE as a base64 block for the host (scripts/lib.sh log_stream).
print_stream() {
    echo "== $1 begin"; base64 "$2"; echo "== $1 end"
}
# print_gz MARK FILE: FILE gzipped, as a base64 block (kpdata is mostly zeros).
print_gz() {
    echo "== $1 begin"; gzip -c "$2" | base64; echo "== $1 end"
}
# samples_received: the sum of stats/cpu*/sample_received (samples taken on every CPU).
samples_received() { cat $OP/stats/cpu*/sample_received | awk '{ s += $1 } END { print s }'; }
# be_word FILE I: big-endian 4-byte word I of FILE (kprof/kpdata), in decimal.
be_word() { od -A n -t u1 -j $(($2 * 4)) -N 4 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }'; }
# print_stats: every stats file as "STAT name value" lines.
print_stats() {
    for f in $OP/stats/cpu*/* $OP/stats/[0-9]*/* $OP/stats/*; do
        [ -f "$f" ] && echo "STAT ${f#$OP/stats/} $(cat $f)"
    done
}
# guest_arg NAME: the value of NAME=VALUE on the kernel command line (scripts/qemu.sh GUEST_ARGS),
# empty if absent.
guest_arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p" | tail -n 1; }
# board: a8 (realview-pb-a8, 1 CPU, no PMU interrupt) or a15 (virt, 2 CPUs, PMU interrupt).
board() { if grep -q realview /proc/device-tree/compatible; then echo a8; else echo a15; fi; }
