# Sourced by the host test runners (tests/run-qemu-tests.sh, tests/image.sh): counting TAP checks
# against plans (DEVELOPERS.md, "Tests: plans, and adding a guest script with a host check").
# The runner sets REPO, OUT (logs and host check files), and for host_check KOUT and OPROF.

# pass/fail/skip: checks reported so far (a TAP "ok - ... # SKIP REASON" line is a skip, counted
# apart: it checked nothing); planned: the sum of the plans of every part run so far. Every
# check's name also goes to $OUT/checks.names, for tap_close's count of distinct checks.
pass=0 fail=0 skip=0 planned=0
TAP_NAMES=$OUT/checks.names
: > "$TAP_NAMES"
ok()     { pass=$((pass + 1)); echo "ok - $*"; echo "$*" >> "$TAP_NAMES"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $*"; echo "$*" >> "$TAP_NAMES"; }
skipped() { skip=$((skip + 1)); echo "ok - $*"; echo "${*% \# SKIP*}" >> "$TAP_NAMES"; }

SPLAT='WARNING:|BUG:|Oops|Internal error|Kernel panic|Unable to handle|soft lockup|hung_task|blocked for more than|rcu.*stall|UBSAN|KASAN|kernel BUG|list_del corruption|refcount_t:|sleeping function called from invalid context|scheduling while atomic|Rust panic|panicked at'

# PLAN_PINS (set by tests/run-qemu-tests.sh for the matrix make check runs): a file of "PART N"
# lines, the plan each part must declare, so a case a script or host check stops planning (or
# starts to) fails although its count still matches its own plan. A part without a line fails
# when PLAN_PINS_STRICT is set (the runner's full matrix, as make check runs it), and is not held
# to anything in a developer's subset (another kernel for a script, a board make check does not
# boot). scripts/pin-plans.py writes the file from a full run's logs.
pinned_plan() {
    awk -v p="$1" '{ n = $NF; k = $0; sub(/ [0-9]+$/, "", k) } k == p { print n; found = 1; exit }
                   END { if (!found) exit 1 }' "$PLAN_PINS"
}
check_pin() {
    local part=$1 plan=$2 pin
    [ -n "${PLAN_PINS:-}" ] || return 0
    if ! pin=$(pinned_plan "$part"); then
        [ -n "${PLAN_PINS_STRICT:-}" ] || return 0
        not_ok "$part: plan $plan is not pinned in ${PLAN_PINS#"$REPO"/} (a new part: add its line)"
    elif [ "$pin" != "$plan" ]; then
        not_ok "$part: plan $plan, pinned $pin in ${PLAN_PINS#"$REPO"/} (a case dropped or added: update the pin with the change)"
    fi
}
# tally PART FILE WHY: reports the TAP of one part (a guest script's serial log, a host check's
# stdout): each "ok - "/"not ok - " line as a check named "PART: ...", an "ok - ... # SKIP ..."
# line as a skip (a "not ok" one stays a failure), then holds the part to its plan
# line "1..N". Fewer than N checks is a failure with the missing ones counted as failed (WHY
# says why, if known; a "Bail out! REASON" line in FILE replaces it); no plan, two plans or
# more than N checks is one failure more, and so is a plan other than its pin (check_pin).
tally() {
    local part=$1 file=$2 why=$3 plan=0 plans=0 n=0 line
    while IFS= read -r line; do
        case $line in
        "ok - "*" # SKIP"*) n=$((n + 1)); skipped "$part: ${line#ok - }" ;;
        "ok - "*)     n=$((n + 1)); ok "$part: ${line#ok - }" ;;
        "not ok - "*) n=$((n + 1)); not_ok "$part: ${line#not ok - }" ;;
        "Bail out!"*) why="bailed out:${line#Bail out!}" ;;
        1..*)         plans=$((plans + 1)); plan=${line#1..}; plan=${plan%%[!0-9]*} ;;
        esac
    done < <(tr -d '\r' < "$file" | grep -aE '^(1\.\.[0-9]+|ok - |not ok - |Bail out!)')
    planned=$((planned + plan))
    [ $plans != 1 ] || check_pin "$part" "$plan"
    if [ $plans != 1 ]; then
        not_ok "$part: $plans plan lines (1..N), want one${why:+ ($why)}"
    elif [ $n -lt $plan ]; then
        fail=$((fail + plan - n - 1))
        not_ok "$part: $n of $plan planned checks reported${why:+ ($why)}: $((plan - n)) missing, counted as failed"
    elif [ $n -gt $plan ]; then
        not_ok "$part: $n checks reported, more than its plan of $plan"
    elif [ -n "$why" ]; then
        not_ok "$part: every planned check reported, but $why"
    fi
}

# splat_lines LOG: the lines of LOG that match $SPLAT, base64 lines left out.
splat_lines() { tr -d '\r' < "$1" | grep -avE '^[A-Za-z0-9+/=]+$' | grep -aE "$SPLAT"; }

# dmesg_from_boot NAME LOG: one check that the guest's final kernel log dump (tests/guest/lib.sh
# summary: "== dmesg begin" ... "== dmesg end") starts with the kernel's first line ("Booting
# Linux on physical CPU ..."): the scripts set printk to 1, so a report lives only in that dump,
# and a ring that wrapped (scripts/qemu.sh boots with log_buf_len=8M) would hide it from the
# splat scan.
dmesg_from_boot() {
    local first
    first=$(tr -d '\r' < "$2" | awk '/^== dmesg begin/ { on = 1; next } on { print; exit }')
    case $first in
    *"Booting Linux on physical CPU"*) ok "$1: the kernel log dump starts at boot (none wrapped out of the splat scan)" ;;
    "") not_ok "$1: no kernel log dump (== dmesg begin) to scan" ;;
    *) not_ok "$1: the kernel log dump does not start at boot (the ring wrapped?): '${first:0:120}'" ;;
    esac
}

# check_log NAME LOG QEMU_STATUS: the runner's 3 checks of one boot (the guest ran to the end,
# no kernel splat, the kernel log dump starts at boot), then the guest script's checks against its plan. A missing or empty LOG
# fails all three (nothing to scan is no proof of no splat).
check_log() {
    local name=$1 log=$2 qrc=$3 status why=
    planned=$((planned + 3))
    if [ ! -s "$log" ]; then
        not_ok "$name: guest log $log missing or empty (qemu status $qrc)"
        not_ok "$name: no guest log to scan for a kernel splat"
        not_ok "$name: no kernel log dump to scan"
        tally "$name.sh" /dev/null "no guest log"
        return
    fi
    status=$(tr -d '\r' < "$log" | sed -n 's/^== script exit status //p' | tail -1)
    if [ "$qrc" != 0 ]; then why="qemu exited with $qrc"
    elif ! grep -aq '^== guest done' "$log"; then why="guest did not finish"
    elif [ "$status" != 0 ]; then why="guest script exited with status ${status:-unknown}"
    fi
    if [ -z "$why" ]; then ok "$name: guest ran to the end"; else not_ok "$name: $why (see $log)"; fi
    # Lines of base64 (streams the scripts print) are skipped: "Oops" turns up in them by chance
    # (once in a record.sh log). A kernel report line always has a space, ':' or '['.
    if splat_lines "$log" | grep -q .; then
        not_ok "$name: kernel splat in guest log:"; splat_lines "$log" | head -5 | sed 's/^/    /'
    else
        ok "$name: no kernel splat"
    fi
    dmesg_from_boot "$name" "$log"
    tally "$name.sh" "$log" "$why"
}

# host_check NAME CHECK LOG BOARD: runs the host check tests/checks/CHECK.py on LOG (with $KOUT,
# $OPROF, its files in $OUT, the guest's tree $SYSROOT or $OUT/initramfs.root), counts its
# checks against its plan; a non-zero exit is a failure with the reason (the "Bail out!" line or
# the last stderr line, e.g. a traceback's exception).
host_check() {
    local name=$1 py=$REPO/tests/checks/$2.py log=$3 board=$4 rc=0 why=
    local tap=${log%.log}.tap err=${log%.log}.err
    python3 "$py" --log "$log" --board "$board" --out "$OUT" --kout "$KOUT" --oprof "$OPROF" \
        --root "${SYSROOT:-$OUT/initramfs.root}" > "$tap" 2> "$err" || rc=$?
    [ $rc = 0 ] || why="tests/checks/$2.py exited with status $rc: $(grep -v '^\s*$' "$err" | tail -1)"
    tally "$name.py" "$tap" "$why"
}

# tap_close NAME: the plan of the whole run (every part's plan, each reported check counted once)
# as one more check, then a comment line with the number of distinct checks (the names without
# their board/kernel label, e.g. "virt-a15-debug ", and with every number read as N: the same
# check on another kernel or with other measured values is one), then the last line "NAME: N
# passed, M failed, K skipped"; fails if any check failed.
tap_close() {
    local n=$((pass + fail + skip + 1)) distinct
    planned=$((planned + 1))
    if [ $n = $planned ]; then
        ok "$1 plan: $n checks reported, as planned"
    else
        not_ok "$1 plan: $n checks reported, the plans say $planned"
    fi
    distinct=$(sed -E 's/^(realview-pb-a8|virt-a15|virt-a53|imx8mp-evk)(-[a-z]+)? //; s/[0-9]+/N/g' "$TAP_NAMES" | sort -u | wc -l)
    echo "# $1: $n checks, $distinct distinct (names without the board/kernel label, numbers as N)"
    echo "$1: $pass passed, $fail failed, $skip skipped"
    [ $fail = 0 ]
}
