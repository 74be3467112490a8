#!/usr/bin/env bash
# QEMU integration tests: boots each board with each guest script and checks the results.
#
# Boards: realview-pb-a8 (Cortex-A8, 1 CPU, no PMU interrupt) and virt-a15 (Cortex-A15, 2 CPUs,
# PMU interrupt). Guest scripts: abi.sh (tree, modes, errnos; timer mode), profile.sh (timer-mode
# profile of a real workload, stream checked on the host), events.sh (hardware events: model,
# counter files, validation errors, counting mode, no-IRQ losses on the A8, two-counter
# sampling on the A15, checked on the host too), user.sh (user images and symbols: hot 70/30
# split in timer mode and, on the A15, with CPU_CYCLES; backtraces; munmap/exec/exit churn with
# exact accounting; a module loaded while profiling), kprof.sh (Plan 9 kprof files, kpdata
# header/byte order/startclr, a kernel-bound workload alongside sampling; checked on the host
# with `oprof kprof`), points.sh (profile point table, commands, exact counts; tables parsed
# with `oprof points`), cycles.sh (50 load/unload cycles). Every log must end cleanly, without "not ok" lines and
# without a kernel splat (WARNING/BUG/Oops/panic/lockup, lockdep, KFENCE, UBSAN, SLUB, list and
# object debugging reports) in the console or dmesg.
# Kernels: the plain one on every board, and the debug one (scripts/kconfig/debug.config:
# lockdep, KFENCE, kmemleak, UBSAN, ...) on virt-a15, with checks named "virt-a15-debug ...";
# there lockdep must still be on at the end, KFENCE must count no bug and kmemleak must report
# no object leaked after the script started (check_debug).
# Prints one line per check and "N passed, M failed" at the end; exits non-zero on failure.
# BOARDS="...", SCRIPTS="..." and KVARIANT=plain|debug select a subset (developers; make check
# runs everything; KVARIANT=debug runs the debug kernel on every board in BOARDS).
# The modules must be built for each kernel run: make module testmod [KVARIANT=debug].
set -uo pipefail
VARIANTS=${KVARIANT:-}   # before lib.sh, which defaults KVARIANT to plain
. "$(dirname "$0")/../scripts/lib.sh"
BOARDS=${BOARDS:-realview-pb-a8 virt-a15}
SCRIPTS=${SCRIPTS:-abi profile events user kprof points cycles}
DEBUG_BOARDS=virt-a15   # the debug kernel's boards when KVARIANT is not given
OUT=$REPO/build/tests
mkdir -p "$OUT"
OPROF=$REPO/target/release/oprof
export PYTHONPATH=$REPO/tests${PYTHONPATH:+:$PYTHONPATH}   # logcheck.py for the inline checks
[ -x "$OPROF" ] || die "host tool missing: run 'make host'"

pass=0 fail=0
ok()     { pass=$((pass + 1)); echo "ok - $*"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $*"; }

SPLAT='WARNING:|BUG:|Oops|Internal error|Kernel panic|Unable to handle|soft lockup|hung_task|blocked for more than|rcu.*stall|UBSAN|KASAN|kernel BUG|list_[a-z_]* corruption|refcount_t:|sleeping function called from invalid context|scheduling while atomic|Rust panic|panicked at'
# The debug kernel's reports: lockdep, KFENCE, SLUB debugging ("BUG kmalloc-64 (Not tainted):
# Redzone overwritten"), DEBUG_OBJECTS, and the checkers switching themselves off.
SPLAT+='|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|INFO: |BUG: KFENCE|BUG [^ ]+ \((Not tainted|Tainted)|ODEBUG:|turning off the locking correctness validator|Kernel memory leak detector disabled|Memory pool empty'

check_log() { # NAME LOG
    local name=$1 log=$2
    grep -q '^== guest done' "$log" || { not_ok "$name: guest did not finish (see $log)"; return; }
    local summary; summary=$(grep -a '^guest: ' "$log" | tail -1)
    if grep -aq '^not ok' "$log"; then
        not_ok "$name: $(grep -ac '^not ok' "$log") guest checks failed (see $log):"
        grep -a '^not ok' "$log" | sed 's/^/    /' | head -20
    else
        ok "$name: guest checks ($summary)"
    fi
    if grep -aEq "$SPLAT" "$log"; then
        not_ok "$name: kernel splat in guest log:"; grep -aE "$SPLAT" "$log" | head -5 | sed 's/^/    /'
    else
        ok "$name: no kernel splat"
    fi
}

# The debug kernel's end-of-script report (tests/guest/lib.sh debug_report): lockdep still on,
# KFENCE on with no bug counted, no kmemleak "unreferenced object" (the first one is printed).
check_debug() { # NAME LOG
    local name=$1 log=$2 base=$OUT/${1// /-} f
    if grep -aq '^== lockdep debug_locks 1' "$log"; then ok "$name: lockdep still on at the end (debug_locks 1)"
    else not_ok "$name: lockdep off or missing at the end: $(grep -a '^== lockdep' "$log" | tr -d '\r')"; fi
    log_block "$log" kfence "$base.kfence" || true
    if grep -qx 'enabled: 1' "$base.kfence" && grep -qx 'total bugs: 0' "$base.kfence"; then ok "$name: KFENCE on, no bug"
    else not_ok "$name: KFENCE state: $(tr '\n' ' ' < "$base.kfence")"; fi
    f=$base.kmemleak
    if ! log_block "$log" kmemleak "$f"; then not_ok "$name: no kmemleak report in log"
    elif [ -s "$f" ]; then
        not_ok "$name: kmemleak: $(grep -c 'unreferenced object' "$f") leaked objects (see $log), the first:"
        if grep -q 'unreferenced object' "$f"; then awk '/unreferenced object/ { n++ } n == 1' "$f"; else cat "$f"; fi |
            head -30 | sed 's/^/    /'
    else ok "$name: kmemleak: no leak"; fi
}

check_profile() { # NAME LOG CPUS
    local name=$1 log=$2 cpus=$3 buf=$OUT/$1.buf
    log_stream "$log" opbuf "$buf" || { not_ok "$name: no sample stream in log"; return; }
    "$OPROF" report "$buf" --vmlinux "$KOUT/vmlinux" --json > "$OUT/$name.json" 2> "$OUT/$name.err" ||
        { not_ok "$name: oprof report failed: $(cat "$OUT/$name.err")"; return; }
    "$OPROF" decode "$buf" > "$OUT/$name.decode" || { not_ok "$name: oprof decode failed"; return; }
    python3 - "$OUT/$name.json" "$log" "$OUT/$name.decode" "$cpus" <<'PY'
import json, re, sys
from logcheck import check, read_log, received_and_lost, res, stats as read_stats
rep = json.load(open(sys.argv[1])); log = read_log(sys.argv[2])
decode = open(sys.argv[3]).read(); cpus = int(sys.argv[4])
stats = read_stats(log)
received, lost = received_and_lost(stats)
check(rep["total"] >= 200, f"profile: {rep['total']} samples delivered (>= 200)")
check(received == rep["total"] + lost,
      f"profile: sample_received {received} == delivered {rep['total']} + lost {lost}")
check(rep["no_context"] == 0, f"profile: every sample has a mode/context ({rep['no_context']} without)")
kernel_rows = [r for r in rep["rows"] if r["image"] == "vmlinux"]
top = [r["symbol"] for r in kernel_rows[:5]]
hot = re.compile(r"clear_user|memzero|memset|copy_to_user|copy_from_user|memcpy|read_zero|iov_iter|zero")
check(any(hot.search(s) for s in top), f"profile: a zero/copy routine among the hottest kernel symbols {top}")
check(rep["kernel"] > rep["total"] // 4, f"profile: kernel-bound workload gives kernel samples ({rep['kernel']}/{rep['total']})")
check(rep["user"] > 0, f"profile: user-mode samples present ({rep['user']})")
seen = {int(c, 16) for c in re.findall(r"CpuSwitch \{ cpu: (?:0x)?([0-9a-f]+)", decode)}
check(seen >= set(range(cpus)), f"profile: CPU_SWITCH records for CPUs {sorted(seen)} (want 0..{cpus - 1})")
for c in range(cpus):
    v = stats.get(f"cpu{c}/sample_received", 0)
    check(v > 0, f"profile: stats/cpu{c}/sample_received = {v} > 0")
print("\n".join(res))
PY
}

# Event-based sampling on the A15: CCNT (counter 0) every 2M cycles, CLOCK_CYCLES (counter 1)
# every 1M cycles, a kernel-bound dd per CPU.
check_events() { # NAME LOG
    local name=$1 log=$2 buf=$OUT/$1.buf kbuf=$OUT/$1.kbuf
    log_stream "$log" opbuf "$buf" || { not_ok "$name: no sample stream in log"; return; }
    log_stream "$log" kbuf "$kbuf" || { not_ok "$name: no kernel-only sample stream in log"; return; }
    "$OPROF" report "$buf" --vmlinux "$KOUT/vmlinux" --cpu-type arm/armv7-ca15 \
        --counter 0:CPU_CYCLES:2000000 --counter 1:CLOCK_CYCLES:1000000 --json > "$OUT/$name.json" 2> "$OUT/$name.err" ||
        { not_ok "$name: oprof report failed: $(cat "$OUT/$name.err")"; return; }
    "$OPROF" report "$buf" --vmlinux "$KOUT/vmlinux" --cpu-type arm/armv7-ca15 \
        --counter 0:CPU_CYCLES:2000000 --counter 1:CLOCK_CYCLES:1000000 -n 8 > "$OUT/$name.txt" 2>&1 ||
        { not_ok "$name: oprof report (text) failed"; return; }
    "$OPROF" report "$kbuf" --json > "$OUT/$name-k.json" 2> "$OUT/$name.err" ||
        { not_ok "$name: oprof report of the kernel-only stream failed: $(cat "$OUT/$name.err")"; return; }
    python3 - "$OUT/$name.json" "$log" "$OUT/$name-k.json" "$OUT/$name.txt" <<'PY'
import json, re, sys
from logcheck import check, read_log, received_and_lost, res, stats as read_stats
rep = json.load(open(sys.argv[1])); log = read_log(sys.argv[2])
krep = json.load(open(sys.argv[3])); text = open(sys.argv[4]).read()
stats = read_stats(log)
pe = {int(k): v for k, v in rep["per_event"].items()}
s0, s1 = pe.get(0, 0), pe.get(1, 0)
check(s0 >= 200 and s1 >= 200, f"events: both counters sampled (counter 0: {s0}, counter 1: {s1})")
ratio = s1 / s0 if s0 else 0
check(1.6 <= ratio <= 2.4, f"events: sample ratio counter1/counter0 = {ratio:.3f}, periods say 2.0 (+-20%)")
m = re.search(r"^TOTAL counter0 (\d+) counter1 (\d+)$", log, re.M)
if m:
    t0, t1 = int(m[1]), int(m[2])
    for c, t, period, got in ((0, t0, 2_000_000, s0), (1, t1, 1_000_000, s1)):
        want = t / period
        check(want > 0 and abs(got - want) <= 0.2 * want,
              f"events: counter {c} samples {got} match total {t} / count {period} = {want:.0f} (+-20%)")
else:
    check(False, "events: TOTAL line missing")
received, lost = received_and_lost(stats)
check(received == rep["total"] + lost, f"events: sample_received {received} == delivered {rep['total']} + lost {lost}")
top = [r["symbol"] for r in rep["rows"] if r["image"] == "vmlinux"][:5]
hot = re.compile(r"clear_user|memzero|memset|copy_to_user|read_zero|iov_iter|zero")
check(any(hot.search(s) for s in top), f"events: cycles put dd's zero/copy routines among the hottest kernel symbols {top}")
check("CPU_CYCLES" in text and "CLOCK_CYCLES" in text and "Counter 1:" in text,
      "events: text report has a column per counter, named by event")
check(krep["total"] >= 50 and krep["user"] == 0,
      f"events: user=0 gives kernel samples only ({krep['kernel']} kernel, {krep['user']} user)")
print("\n".join(res))
PY
}

# kprof: the raw kpdata copies of kprof.sh (byte order, header, startclr) and `oprof kprof`.
check_kprof() { # NAME LOG
    local name=$1 log=$2 f
    for f in run clr; do
        log_stream "$log" kpdata_$f "$OUT/$name-$f.gz" && gunzip -c "$OUT/$name-$f.gz" > "$OUT/$name-$f.kpdata" ||
            { not_ok "$name: no kpdata_$f copy in log"; return; }
        "$OPROF" kprof "$KOUT/vmlinux" "$OUT/$name-$f.kpdata" --json > "$OUT/$name-$f.json" 2> "$OUT/$name.err" ||
            { not_ok "$name: oprof kprof failed: $(cat "$OUT/$name.err")"; return; }
    done
    "$OPROF" kprof "$KOUT/vmlinux" "$OUT/$name-run.kpdata" -n 10 > "$OUT/$name-run.txt" 2>&1 ||
        { not_ok "$name: oprof kprof (text) failed"; return; }
    python3 - "$OUT/$name" "$log" "$KOUT/System.map" <<'PY'
import json, re, struct, sys
from logcheck import check, expects, read_log, res
pre, log = sys.argv[1], read_log(sys.argv[2])
sysmap = {l.split()[2]: int(l.split()[0], 16) for l in open(sys.argv[3]) if len(l.split()) == 3}
want = expects(log)
raw = open(pre + "-run.kpdata", "rb").read()
be = struct.unpack(">2I", raw[:8]); le = struct.unpack("<2I", raw[:8])
check(be == (want["total"], want["kernel"]),
      f"kprof: raw header words, big-endian, are the guest's total/kernel {be} == {(want['total'], want['kernel'])}")
check(le != be and max(le) > 1 << 20, f"kprof: little-endian reading of the header is implausible {le}")
text = sysmap["_etext"] - sysmap["_stext"]
check(len(raw) == 8 + 4 * (text // 4), f"kprof: kpdata is 8 + 4 * (_etext - _stext) / 4 bytes ({len(raw)})")
slots = struct.unpack(f">{len(raw) // 4}I", raw)[2:]
check(sum(slots) <= be[1], f"kprof: slot ticks {sum(slots)} <= kernel ticks {be[1]}")
check(sum(slots) > be[1] // 2, f"kprof: most kernel ticks in kernel text ({sum(slots)} of {be[1]})")
rep = json.load(open(pre + "-run.json"))
check((rep["total"], rep["kernel"], rep["text"]) == (be[0], be[1], sum(slots)),
      f"kprof: oprof kprof header total/kernel/text {rep['total']}/{rep['kernel']}/{rep['text']}")
check(rep["base"] == sysmap["_stext"] and rep["granularity"] == 4,
      f"kprof: base _stext {rep['base']:#x}, 4-byte slots ({rep['granularity']})")
check(sum(s["ticks"] for s in rep["symbols"]) == rep["text"], "kprof: per-symbol ticks add up to the text ticks")
top = [s["name"] for s in rep["symbols"][:5]]
hot = re.compile(r"clear_user|memzero|memset|copy_to_user|read_zero|iov_iter|zero")
check(any(hot.search(s) for s in top), f"kprof: dd's zero/copy routines among the hottest kernel functions {top}")
clr = open(pre + "-clr.kpdata", "rb").read()
cw = struct.unpack(f">{len(clr) // 4}I", clr)
check(cw[0] == want["clr_total"] and sum(cw[2:]) <= cw[1] <= cw[0],
      f"kprof: after startclr only the new ticks remain (total {cw[0]}, kernel {cw[1]}, slots {sum(cw[2:])})")
check(sum(cw[2:]) < sum(slots) // 10, "kprof: startclr dropped the earlier slot counts")
txt = open(pre + "-run.txt").read()
check(re.search(r"ticks", txt) is not None and top[0] in txt, "kprof: text output names the hottest function")
print("\n".join(res))
PY
}

# Profile points: the tables points.sh printed, through `oprof points`.
check_points() { # NAME LOG
    local name=$1 log=$2 t
    for t in pp_initial pp_session pp_kprof pp_dmesg; do
        log_block "$log" $t "$OUT/$name-$t.txt" || { not_ok "$name: no $t table in log"; return; }
        "$OPROF" points "$OUT/$name-$t.txt" --json > "$OUT/$name-$t.json" 2> "$OUT/$name.err" ||
            { not_ok "$name: oprof points $t failed: $(cat "$OUT/$name.err")"; return; }
    done
    python3 - "$OUT/$name" "$log" <<'PY'
import json, re, sys
from logcheck import check, expects, read_log, res
pre, log = sys.argv[1], read_log(sys.argv[2])
want = expects(log)
load = lambda t: {r["name"]: r for r in json.load(open(f"{pre}-{t}.json"))}
names = {"sample_handler", "sync_pass", "buffer_read", "kprof_tick"}
init = load("pp_initial")
check(set(init) == names, f"points: every instrumented point registered itself {sorted(init)}")
check(all(not r["enabled"] and r["nr"] == 0 and r["total_ns"] == 0 for r in init.values()),
      "points: all start disabled and zero")
ses = load("pp_session")
check(ses["sample_handler"]["nr"] == want["sample_handler"],
      f"points: sample_handler nr {ses['sample_handler']['nr']} == samples taken {want['sample_handler']}")
check(ses["buffer_read"]["nr"] == want["buffer_read"], f"points: buffer_read nr {ses['buffer_read']['nr']} == 3 reads")
check(all(r["nr"] == 0 or r["avg_ns"] == -(-r["total_ns"] // r["nr"]) for r in ses.values()),
      "points: avg.ns = total / nr, rounded up")
check(ses["sample_handler"]["total_ns"] > 0 and ses["sync_pass"]["nr"] > 0, "points: handler and sync times recorded")
kp = load("pp_kprof")
check(kp["kprof_tick"]["nr"] == want["kprof_tick"], f"points: kprof_tick nr {kp['kprof_tick']['nr']} == kpdata ticks {want['kprof_tick']}")
dm = load("pp_dmesg")
check(dm == kp, "points: the table logged by 'print' equals the file")
print("\n".join(res))
PY
}

# User-space attribution: every case of user.sh through `oprof report` with the session files.
check_user() { # NAME LOG ROOT
    local name=$1 log=$2 root=$3 c cases="hot_timer churn kmod"
    grep -aq '^== hot_cycles.buf begin' "$log" && cases="$cases hot_cycles"
    for c in $cases; do
        local pre=$OUT/$name-$c
        log_stream "$log" "$c.buf" "$pre.buf" || { not_ok "$name $c: no sample stream in log"; continue; }
        for b in images proc_modules module_sections; do
            log_block "$log" "$c.$b" "$pre.$b" || not_ok "$name $c: no $b block in log"
        done
        local session=(--images "$pre.images" --proc-modules "$pre.proc_modules" --module-sections "$pre.module_sections"
                       --vmlinux "$KOUT/vmlinux" --sysroot "$root" --image-path "$root/lib" --image-path "$MODDIR"
                       --image-path "$KMODDIR")
        "$OPROF" report "$pre.buf" "${session[@]}" -l -c --json > "$pre.json" 2> "$pre.err" ||
            { not_ok "$name $c: oprof report failed: $(head -c 300 "$pre.err")"; continue; }
        "$OPROF" report "$pre.buf" "${session[@]}" -l -c -n 20 --flame "$pre.svg" > "$pre.txt" 2> "$pre.err" ||
            { not_ok "$name $c: oprof report (text, flame graph) failed: $(head -c 300 "$pre.err")"; continue; }
        "$OPROF" decode "$pre.buf" > "$pre.decode" 2> "$pre.err" || { not_ok "$name $c: oprof decode failed"; continue; }
        "$OPROF" report "$pre.buf" "${session[@]}" -g --json > "$pre-g.json" 2> "$pre.err" ||
            { not_ok "$name $c: oprof report -g failed: $(head -c 300 "$pre.err")"; continue; }
    done
    REPO=$REPO python3 - "$OUT/$name" "$log" $cases <<'PY'
import json, os, re, sys
from logcheck import check, read_log, received_and_lost, res, stats as read_stats
pre, log, cases = sys.argv[1], read_log(sys.argv[2]), sys.argv[3:]
allstats = read_stats(log)
for c in cases:
    try:
        rep = json.load(open(f"{pre}-{c}.json"))
    except (OSError, ValueError) as e:
        check(False, f"{c}: no report ({e})")
        continue
    st = {k.split(":", 1)[1]: v for k, v in allstats.items() if k.startswith(c + ":")}
    received, lost = received_and_lost(st)
    check(received > 0 and received == rep["total"] + lost,
          f"{c}: sample_received {received} == delivered {rep['total']} + lost {lost} (exact accounting)")
    rows = rep["rows"]
    lost_ctx = sum(r["samples"] for r in rows if r["image"].startswith("(user, no image)") or r["image"] == "(no context)")
    check(lost_ctx == 0, f"{c}: every user sample has its image record (COOKIE_SWITCH) and context ({lost_ctx} without)")
    def samples(image, symbol=None):
        return sum(r["samples"] for r in rows if r["image"] == image and (symbol is None or r["symbol"] == symbol))
    if c.startswith("hot"):
        a, b = samples("/bin/hot", "hot_a"), samples("/bin/hot", "hot_b")
        share = a / (a + b) if a + b else 0
        check(a + b >= 300 and abs(share - 0.70) <= 0.10,
              f"{c}: hot_a {a} / hot_b {b} samples = {share:.1%} / {1 - share:.1%} (want 70/30 +-10 points)")
        order = [r["symbol"] for r in rows if r["image"] == "/bin/hot"]
        check(order[:2] == ["hot_a", "hot_b"], f"{c}: /bin/hot's hottest symbols in order: {order[:3]}")
        check(samples("vmlinux") > 0, f"{c}: kernel symbols next to user ones ({samples('vmlinux')} vmlinux samples)")
    if c == "hot_timer":
        src = open(os.path.join(os.environ["REPO"], "tests/guest/hot.c")).read().split("\n")
        loop = 1 + next(i for i, l in enumerate(src) if "x = x * 1103515245u" in l)
        lines = json.load(open(f"{pre}-{c}-g.json"))["rows"]
        top = next((r.get("source", {}).get("display") for r in lines if r["symbol"] == "hot_a"), None)
        check(top == f"hot.c:{loop}", f"{c}: -g puts hot_a's samples on its loop, hot.c:{loop} (got {top})")
        check(rep.get("traced", 0) >= rep["total"] * 0.9, f"{c}: backtraces recorded ({rep.get('traced')} of {rep['total']} samples)")
        text = open(f"{pre}-{c}.txt").read()
        check(re.search(r"work", text) is not None and "hot_a" in text, f"{c}: call graph text names work and hot_a")
        cg = json.dumps(rep.get("callgraph"))
        check('"work"' in cg and '"hot_a"' in cg and '"main"' in cg, f"{c}: JSON call graph links main, work, hot_a")
        svg = open(f"{pre}-{c}.svg").read() if os.path.exists(f"{pre}-{c}.svg") else ""
        check(svg.startswith("<?xml") and "hot_a" in svg and "work" in svg, f"{c}: flame graph SVG shows hot_a under work")
    if c == "churn":
        lib = samples("/lib/libspin.so", "spin_in_lib")
        check(lib > 0, f"{c}: samples in dlclose()d /lib/libspin.so spin_in_lib ({lib})")
        child = samples("/bin/churn", "child_spin")
        check(child > 0, f"{c}: samples in forked and exec'd children's child_spin ({child})")
        anon = sum(r["samples"] for r in rows if r["image"].startswith("[anon]"))
        check(anon > 0, f"{c}: samples in munmap()ed anonymous code ({anon})")
        missing = sorted({r["image"] for r in rows if r["symbol"] == "(image not found)"})
        check(not missing, f"{c}: every user image found under the sysroot (missing: {missing})")
    if c == "kmod":
        dec = open(f"{pre}-{c}.decode").read()
        check("ModuleLoaded" in dec and rep.get("module_loaded", 0) >= 1, f"{c}: MODULE_LOADED in the stream")
        spin = samples("optest.ko", "optest_spin")
        check(spin >= 100, f"{c}: optest.ko's optest_spin attributed through its sections ({spin} samples)")
print("\n".join(res))
PY
}

# run_board BOARD CPUS: every script on BOARD with the kernel $KVARIANT ($KOUT, initramfs $INITRD);
# logs and check names are "BOARD" (plain) or "BOARD-VARIANT".
run_board() { # BOARD CPUS
    local board=$1 cpus=$2 s log rc label=$1
    [ "$KVARIANT" = plain ] || label=$1-$KVARIANT
    for s in $SCRIPTS; do
        log=$OUT/$label-$s.log
        step "qemu $label: $s.sh"
        rc=0; bash "$REPO/scripts/qemu.sh" "$board" "$INITRD" "$s.sh" "$log" $TIMEOUT || rc=$?
        [ $rc = 0 ] || not_ok "$label $s: qemu exited with $rc"
        check_log "$label $s" "$log"
        [ "$KVARIANT" = plain ] || check_debug "$label $s" "$log"
        if [ $s = profile ]; then
            while IFS= read -r line; do
                case $line in ok*) ok "$label ${line#ok - }" ;; *) not_ok "$label ${line#not ok - }" ;; esac
            done < <(check_profile "$label-profile" "$log" "$cpus")
        fi
        if [ $s = user ]; then
            while IFS= read -r line; do
                case $line in ok*) ok "$label ${line#ok - }" ;; *) not_ok "$label ${line#not ok - }" ;; esac
            done < <(check_user "$label-user" "$log" "${INITRD%.cpio.gz}.root")
        fi
        if [ $s = kprof ] || [ $s = points ]; then
            while IFS= read -r line; do
                case $line in ok*) ok "$label ${line#ok - }" ;; *) not_ok "$label ${line#not ok - }" ;; esac
            done < <(check_$s "$label-$s" "$log")
        fi
        if [ $s = events ] && [ $board = virt-a15 ]; then
            while IFS= read -r line; do
                case $line in ok*) ok "$label ${line#ok - }" ;; *) not_ok "$label ${line#not ok - }" ;; esac
            done < <(check_events "$label-events" "$log")
        fi
    done
}

# run_variant VARIANT BOARDS...: the kernel variant's tree, modules (lib.sh mod_dirs) and
# initramfs, then every script on each board.
run_variant() {
    KVARIANT=$1; shift; export KVARIANT
    KOUT=$(bash "$REPO/scripts/build-kernel.sh") || { not_ok "$KVARIANT kernel: build failed"; return; }
    export KOUT
    read -r MODDIR KMODDIR < <(mod_dirs "$KVARIANT")
    INITRD=$OUT/initramfs.cpio.gz; [ "$KVARIANT" = plain ] || INITRD=$OUT/initramfs-$KVARIANT.cpio.gz
    bash "$REPO/scripts/initramfs.sh" "$INITRD" "$MODDIR/oprofile.ko" ||
        { not_ok "$KVARIANT kernel: initramfs build failed"; return; }
    # A guest script takes a few minutes at most, under the debug kernel's checkers too.
    TIMEOUT=900; [ "$KVARIANT" = plain ] || TIMEOUT=1500
    for b in "$@"; do
        case $b in realview-pb-a8) run_board $b 1 ;; virt-a15) run_board $b 2 ;; *) not_ok "unknown board $b" ;; esac
    done
}

if [ -n "$VARIANTS" ]; then
    run_variant "$VARIANTS" $BOARDS
else
    run_variant plain $BOARDS
    debug_boards=$(for b in $BOARDS; do case " $DEBUG_BOARDS " in *" $b "*) echo "$b" ;; esac; done)
    [ -z "$debug_boards" ] || run_variant debug $debug_boards
fi
echo "qemu: $pass passed, $fail failed"
[ $fail = 0 ]
