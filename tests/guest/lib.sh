# Sourced by guest test scripts: assertions printing "ok - ..." / "not ok - ..." and a summary.
PASS=0 FAIL=0
OP=/dev/oprofile
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
    echo "guest: $PASS passed, $FAIL failed"
}
