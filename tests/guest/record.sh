# `oprof record` on the target (issue 12): every error is one line with the right exit status and
# leaves the system as found; a CMD's exit status; a kernel-bound run at default buffer sizes of
# at least 30 s and longer than ten event buffers that loses nothing; --duration; settings, module and mount put back
# as found; SIGINT and SIGTERM end a session cleanly; --archive/--kprof/--points; hardware events;
# a SIGKILLed recorder's session reportable and its leftovers taken over (pid file, --cleanup); a
# full disk (a 512 KiB tmpfs) stops profiling, not the command, and undoes the load and mount;
# a private session (0700/0600) never written through a foreign directory or a planted link;
# the --max-size flight recorder (its bound, its last phase, a SIGUSR1 snapshot of the first and
# a file-triggered one of the second).
# Sessions go to the host as tar.gz base64 blocks (long.tgz, sigint.tgz, agree.tgz, full.tgz) with the
# guest's own report (agree_report); tests/checks/record.py checks them there.
. /tests/lib.sh
# The script's parts (part_NAME below) as NAME:CHECKS, in the order they run. A debug kernel
# (lockdep, KASAN, KFENCE, kmemleak) runs the parts that drive the module through oprof record:
# a command's session, snapshots, the long run, SIGINT, SIGKILL and its takeover, a full disk.
# The rest check the tool's own behaviour (messages, settings, --archive, -e, privacy), the same
# on every kernel: they run on the plain kernels, which every board has. Under the arm64 debug
# kernel a fork costs 0.3 s: they took 430 of the script's 900 s there (make check's time
# budget, Documentation/testing.rst).
PARTS="errors:13 command:3 force:2 snapshots:2 long:3 duration:1 settings:4 sigint:3 sigkill:6
       full:5 sigterm:2 archive:5 hwevent:3 privacy:6 flight:5"
! debug_kernel || PARTS="command:3 snapshots:2 long:3 sigint:3 sigkill:6 full:5"
n=1; for p in $PARTS; do n=$((n + ${p#*:})); done   # and "nothing left behind at the end"
plan $n
echo 1 > /proc/sys/kernel/printk
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent   # emulated PMU interrupts are slow
CPU_TYPE_HW=$(insmod /oprofile.ko && mkdir -p $OP && mount -t oprofilefs nodev $OP && cat $OP/cpu_type; unload)
echo "hardware model: $CPU_TYPE_HW"

# clean: neither the module nor oprofilefs is left behind.
clean() { ! grep -q '^oprofile ' /proc/modules && ! grep -q ' oprofilefs ' /proc/mounts; }
# field FILE KEY: the first "KEY": VALUE of a pretty-printed JSON file (quotes stripped).
field() { sed -n "s/^ *\"$2\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" "$1" | head -n 1; }
# err_case DESC RC TEXT CMD...: CMD fails with exit status RC, prints one line containing TEXT,
# creates no /tmp/e and leaves the system clean.
err_case() {
    d=$1 rc=$2 text=$3; shift 3
    out=$("$@" 2>&1); got=$?
    echo "$out" | sed 's/^/  | /'
    lines=$(echo "$out" | grep -c .)
    if [ "$got" = "$rc" ] && [ "$lines" = 1 ] && echo "$out" | grep -qF -- "$text" && [ ! -e /tmp/e ] && clean; then
        ok "$d"
    else
        not_ok "$d: status $got (want $rc), $lines lines, want '$text', /tmp/e $([ -e /tmp/e ] && echo exists || echo absent), clean: $(clean && echo yes || echo no)"
    fi
}
# hwm PID OUT: the peak RSS (VmHWM, kB) of process PID, followed until it is reaped, in OUT.
hwm() {
    while [ -e /proc/$1/status ]; do
        v=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB$/\1/p' /proc/$1/status 2>/dev/null)
        [ -z "$v" ] || echo "$v" > $2
        sleep 0.1
    done
}
# The recorder's peak RSS bound, kB (Documentation/oprof-record.rst, "Memory").
RSS_BOUND=40960
# dd_per_cpu: one `dd if=/dev/zero of=/dev/null` per CPU in the background, their pids in $pids
# and in /tmp/each_cpu.pids (lib.sh work_pids prints them for the host's checks).
dd_per_cpu() {
    pids= i=0 cpus=$(nproc)
    while [ $i -lt "$cpus" ]; do dd if=/dev/zero of=/dev/null bs=64k 2>/dev/null & pids="$pids $!"; i=$((i + 1)); done
    echo $pids > /tmp/each_cpu.pids
}
# session_complete DIR: every file of a session directory.
session_complete() {
    for f in samples images proc_modules module_sections kallsyms stats.json session.json; do
        [ -f "$1/$f" ] || { echo "missing $1/$f"; return 1; }
    done
}

# --- errors ---
part_errors() {
    err_case "not root: one line, status 1" 1 "must be run as root" optool as 1000 oprof record -o /tmp/e -- true
    err_case "command not found: status 127" 127 "/nonexistent/cmd: command not found" oprof record -o /tmp/e -- /nonexistent/cmd
    printf 'junk\n' > /tmp/junk; chmod +x /tmp/junk
    err_case "command that cannot be executed: status 126" 126 "/tmp/junk: Exec format error" oprof record -o /tmp/e -- /tmp/junk
    err_case "--module missing file" 1 "cannot load the oprofile module: /nope.ko: No such file or directory" \
        oprof record --module /nope.ko -o /tmp/e -- true
    cp /usr/bin/oprof /tmp/oprof-alone
    err_case "no module beside the binary and no modprobe" 1 "there is no /tmp/oprofile.ko beside oprof; give --module PATH" \
        /tmp/oprof-alone record -o /tmp/e -- true
    : > /tmp/notdir
    err_case "mount failure names the mount point" 1 "mount -t oprofilefs nodev /tmp/notdir: Not a directory" \
        oprof record --oprofilefs /tmp/notdir -o /tmp/e -- true
    err_case "unknown event lists close matches" 1 "no event \"CPU_CYCLE\" for $CPU_TYPE_HW; did you mean CPU_CYCLES?" \
        oprof record -e CPU_CYCLE -o /tmp/e -- true
    err_case "count below the minimum" 1 "count 50 is below the minimum" \
        oprof record -e CPU_CYCLES:50 -o /tmp/e -- true
    err_case "a setting out of range names the file" 1 "writing 10 to /dev/oprofile/buffer_size: Invalid argument" \
        oprof record --buffer-size 10 -o /tmp/e -- true
    err_case "watershed not below the buffer size" 1 "buffer_watershed 200000 must be below buffer_size 131072 words" \
        oprof record --watershed 200000 -o /tmp/e -- true
    err_case "unwritable session directory" 1 "cannot create the session directory /proc/oprof-session" \
        oprof record -o /proc/oprof-session -- true
    err_case "bad --duration" 1 "--duration 0: expected a positive number of seconds" oprof record --duration 0 -o /tmp/e
    err_case "--points with a name the module has no point of" 1 "--points: the module has no profile point \"nosuch\"" \
        oprof record --points=sample_handler,nosuch -o /tmp/e -- true
}

# --- a command's session ---
part_command() {
    oprof record -o /tmp/s1 -- sh -c 'exit 3'; rc=$?
    check "CMD's exit status is oprof's (3, got $rc)" [ "$rc" = 3 ]
    check "session directory complete" session_complete /tmp/s1
    check "module and oprofilefs were undone after the run" clean
}
part_force() {
    err_case "an existing session is not overwritten without --force" 1 "/tmp/s1 holds a session already; use --force" \
        sh -c 'oprof record -o /tmp/s1 -- true; s=$?; [ -f /tmp/s1/session.json ] || echo "session gone"; exit $s'
    oprof record --force -o /tmp/s1 -- true 2>/dev/null; rc=$?
    check "--force overwrites it" eval '[ $rc = 0 ] && grep -q "\"true\"" /tmp/s1/session.json'
}

# --- user-stack snapshots (-g's default --user-stack) at 1000 samples/s per busy CPU, with
# oprof record's default buffers for them: no sample lost, no snapshot lost once taken.
# A snapshot finds no free buffer when the sync pass falls a whole pool of samples behind on a
# CPU (the pool: as many buffers as 4 MiB holds, 256..2048, 1024 at the default 2048 bytes; a
# take that leaves half of it queues a sync pass at once, stats/user_stack_sync_wake): before
# that wake, 187 of 4843 once on the arm64 debug kernel with dd on both vCPUs and a busy host
# (counted in stats/user_stack_no_buffer; the sample is delivered with a frame-pointer chain). Whether the buffers keep up at a rate is a speed figure: make bench records it
# (bench.json's P2 timer-stack rows), make check does not hold a busy host to it. ---
part_snapshots() {
    insmod /oprofile.ko timer=1 timer_hz=1000
    dd_per_cpu
    # The dd's stop with the 5 s session (started in the background: a busy CPU would slow the
    # session's collection and writing afterwards, several minutes on the debug kernel).
    oprof record -g 16 --duration 5 -o /tmp/snap > /tmp/snap.out 2>&1 & rec=$!
    hwm $rec /tmp/snap.hwm & hwm_pid=$!
    while [ ! -e /tmp/snap/samples ] && kill -0 $rec 2>/dev/null; do sleep 0.2; done
    sleep 5; kill $pids; wait $rec; rc=$?
    wait $pids 2>/dev/null
    wait $hwm_pid
    cat /tmp/snap.out
    peak=$(cat /tmp/snap.hwm)
    check "snapshots: the recorder's peak RSS ($peak kB) is under its bound ($RSS_BOUND kB)" eval '[ "$peak" -gt 0 ] && [ "$peak" -lt $RSS_BOUND ]'
    for s in event_lost_overflow user_stack_no_buffer user_stack_lost; do echo "snapshots: $s $(field /tmp/snap/stats.json $s)"; done
    # (The summary's "N not taken" are periods the late timer ticks skipped, TCG's: no samples taken,
    # so no losses; record.py holds them to stats.json.)
    nobuf=$(field /tmp/snap/stats.json user_stack_no_buffer)
    check "snapshots at 1000/s/CPU: status 0, 0 samples lost, user_stack_lost 0 (found no buffer, counted: user_stack_no_buffer $nobuf)" \
        eval '[ $rc = 0 ] && grep -Eq "^oprof record: [0-9]+ samples \(0 lost(, [0-9]+ not taken)?\)" /tmp/snap.out &&
        [ "$(field /tmp/snap/stats.json user_stack_lost)" = 0 ] && [ "$nobuf" -ge 0 ] 2>/dev/null &&
        [ "$(field /tmp/snap/session.json user_stack_size)" = 2048 ]'
    rmmod oprofile
    rm -rf /tmp/snap /tmp/snap.out /tmp/snap.hwm
}

# --- a long kernel-bound system-wide run at default buffer sizes, module already loaded ---
# At least 30 s, and on until the reader has taken more than ten event buffers (the achieved
# sample rate depends on how fast the emulation runs); then Ctrl-C (SIGINT). Frame-pointer
# chains (--user-stack 0): snapshots would fill the guest's 256 MiB in 30 s. A debug kernel
# (lockdep, KASAN) runs 30 s and may lose samples to a full CPU ring while its slower sync pass
# falls behind: counted, and checked on the host to add up (record.py); whether the reader keeps
# up at default sizes is the plain kernels' check.
part_long() {
    insmod /oprofile.ko timer=1 timer_hz=2500
    dd_per_cpu; work_pids   # record.py holds dd's kernel samples to its zeroing routines
    oprof record -g 16 --user-stack 0 -o /tmp/long > /tmp/long.out 2>&1 & pid=$!
    want=$((10 * 131072 * $(word_bytes)))   # ten default event buffers (131072 words)
    # Seconds by the clock from the first bytes read (profiling is on by then), not by the
    # loop's turns: a turn takes 2 s under the arm64 debug kernel.
    i=0 t=0 t0= size=0
    while [ $i -lt 300 ]; do
        sleep 1; i=$((i + 1))
        size=$(stat -c %s /tmp/long/samples 2>/dev/null || echo 0)
        read -r up _ < /proc/uptime; up=${up%.*}
        if [ -z "$t0" ]; then [ "$size" = 0 ] || t0=$up; else t=$((up - t0)); fi
        if [ $t -ge 30 ] && { debug_kernel || [ "$size" -gt "$want" ]; }; then break; fi
    done
    kill -INT $pid; kill $pids; wait $pid; rc=$?
    wait $pids 2>/dev/null
    out=$(cat /tmp/long.out)
    echo "$out"
    echo "long run: $t s, $size bytes read (ten event buffers: $want)"
    if debug_kernel; then lost='[0-9]+'; else lost=0; fi
    check "long run: status 0 and the summary says $lost lost" eval '[ $rc = 0 ] && echo "$out" | grep -Eq "^oprof record: [0-9]+ samples \($lost lost(, [0-9]+ not taken)?\), [0-9.]+ MiB in /tmp/long\$"'
    check "long run: module left loaded, oprofilefs mount undone" eval 'grep -q "^oprofile " /proc/modules && ! grep -q " oprofilefs " /proc/mounts'
    check "long run: ended by SIGINT, default buffer_size" eval '[ "$(field /tmp/long/session.json ended_by)" = SIGINT ] && [ "$(field /tmp/long/session.json buffer_size)" = 131072 ]'
    rmmod oprofile
    tar -C /tmp -czf /tmp/long.tgz long && print_stream long.tgz /tmp/long.tgz
}

part_duration() {
    oprof record --duration 2 -o /tmp/dur 2>/dev/null; rc=$?
    check "--duration 2 ends the session after 2 s" eval '[ $rc = 0 ] && [ "$(field /tmp/dur/session.json ended_by)" = duration ] && [ "$(field /tmp/dur/session.json duration_ns)" -ge 2000000000 ] && clean'
}

# --- settings, module and mount as found; timer mode refuses -e ---
part_settings() {
    load timer=1
    echo 65536 > $OP/buffer_size; echo 4 > $OP/backtrace_depth
    oprof record --buffer-size 262144 -o /tmp/pre -- true 2>/dev/null; rc=$?
    check "settings written for the session (buffer_size 262144 in session.json)" eval '[ $rc = 0 ] && [ "$(field /tmp/pre/session.json buffer_size)" = 262144 ]'
    check "settings restored afterwards (buffer_size 65536, backtrace_depth 4)" eval '[ "$(cat $OP/buffer_size)" = 65536 ] && [ "$(cat $OP/backtrace_depth)" = 4 ]'
    check "module and mount found are left in place" eval 'grep -q "^oprofile " /proc/modules && grep -q " oprofilefs " /proc/mounts'
    out=$(oprof record -e CPU_CYCLES -o /tmp/e -- true 2>&1); rc=$?
    echo "$out" | sed 's/^/  | /'
    check "-e with cpu_type timer is refused" eval '[ $rc = 1 ] && echo "$out" | grep -q "cpu_type is timer" && [ ! -e /tmp/e ]'
    unload
}

# --- SIGINT ends a system-wide session and still writes it ---
part_sigint() {
    oprof record -g 8 -o /tmp/sigint & pid=$!
    sh -c 'i=0; while [ $i -lt 300 ]; do cat /proc/kallsyms > /dev/null; i=$((i + 1)); done' & load_pid=$!
    sleep 3; kill -INT $pid; wait $pid; rc=$?
    kill $load_pid 2>/dev/null; wait $load_pid 2>/dev/null
    check "SIGINT: status 0, ended_by SIGINT, session complete" eval '[ $rc = 0 ] && [ "$(field /tmp/sigint/session.json ended_by)" = SIGINT ] && session_complete /tmp/sigint'
    check "SIGINT: the guest's oprof report decodes it" eval 'oprof report /tmp/sigint -l -n 3 2>&1 | grep -q "^Samples: [1-9]"'
    check "SIGINT: module and oprofilefs undone" clean
    rm /tmp/sigint/kallsyms   # not needed for the host's accounting check
    tar -C /tmp -czf /tmp/sigint.tgz sigint && print_stream sigint.tgz /tmp/sigint.tgz
}

# --- SIGKILL: session.json says "recording", the report reads what was written, the pid file
# says what the dead recorder held; the next oprof record (or --cleanup) undoes it ---
# A small buffer woken every 1024 words: the stream is on disk before the kill.
part_sigkill() {
    oprof record -g 8 --user-stack 0 --buffer-size 16384 --watershed 15360 -o /tmp/killed & pid=$!
    sh -c 'i=0; while [ $i -lt 300 ]; do cat /proc/kallsyms > /dev/null; i=$((i + 1)); done' & load_pid=$!
    # Killed once its stream has begun (and 2 s into it): on the arm64 debug kernel beside a
    # busy host, 3 s from the start once ended before `samples` was made.
    i=0; while [ ! -s /tmp/killed/samples ] && [ $i -lt 300 ] && kill -0 $pid 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    sleep 2; kill -KILL $pid; wait $pid 2>/dev/null
    kill $load_pid 2>/dev/null; wait $load_pid 2>/dev/null
    check "SIGKILL: module, oprofilefs and the pid file (pid $pid) left behind, session.json recording" \
        eval 'grep -q "^oprofile " /proc/modules && grep -q " oprofilefs " /proc/mounts && grep -q "\"pid\":$pid," /run/oprof/record.pid && [ "$(field /tmp/killed/session.json state)" = recording ]'
    oprof report /tmp/killed -l -n 3 > /tmp/killed.rep 2>&1; rc=$?
    sed 's/^/  | /' /tmp/killed.rep
    check "SIGKILL: the guest's oprof report reads the session, with the note of what is missing" \
        eval '[ $rc = 0 ] && grep -q "^Samples: [1-9]" /tmp/killed.rep && grep -q "the recorder died while recording (session.json state \"recording\"): no images, stats.json, proc_modules, module_sections, kallsyms" /tmp/killed.rep'
    out=$(oprof record -o /tmp/after -- true 2>&1); rc=$?
    echo "$out" | sed 's/^/  | /'
    check "the next oprof record takes over the dead one's module and mount, and records" \
        eval '[ $rc = 0 ] && echo "$out" | grep -q "^oprof record: a dead oprof record (pid $pid) left its pid file: profiling disabled, /dev/oprofile unmounted, module oprofile unloaded\$" && session_complete /tmp/after && [ "$(field /tmp/after/session.json state)" = complete ]'
    check "after it: clean, no pid file" eval 'clean && [ ! -e /run/oprof/record.pid ]'
    oprof record -o /tmp/killed2 & pid=$!
    while [ ! -e /tmp/killed2/samples ] && kill -0 $pid 2>/dev/null; do sleep 0.2; done
    out=$(oprof record --cleanup 2>&1); rc=$?
    echo "$out" | sed 's/^/  | /'
    check "--cleanup beside a live recorder: status 1, one line naming its pid and pid file" \
        eval '[ $rc = 1 ] && [ "$(echo "$out" | grep -c .)" = 1 ] && echo "$out" | grep -qF "another oprof record is running (pid $pid, /run/oprof/record.pid)"'
    kill -KILL $pid; wait $pid 2>/dev/null
    out=$(oprof record --cleanup 2>&1); rc=$?
    echo "$out" | sed 's/^/  | /'
    check "--cleanup after SIGKILL: status 0, module unloaded, oprofilefs unmounted, no pid file" \
        eval '[ $rc = 0 ] && echo "$out" | grep -q "a dead oprof record (pid $pid)" && clean && [ ! -e /run/oprof/record.pid ]'
    rm -rf /tmp/killed /tmp/killed2 /tmp/after /tmp/killed.rep
}

# --- a full disk: samples at 1000/s per CPU fill a 512 KiB tmpfs (256 KiB of it the reserve) in a second or two; the command (8 s
# of work) runs to its end, oprof exits 1 with one error line, the session is reportable ---
part_full() {
    mkdir -p /tmp/small && mount -t tmpfs -o size=512k tmpfs /tmp/small
    rm -f /tmp/cmd_done
    oprof record -g 16 --buffer-size 65536 --watershed 32768 -o /tmp/small/full -- sh -c 'end=$(($(date +%s) + 8)); while [ $(date +%s) -lt $end ]; do cat /proc/kallsyms > /dev/null; done; touch /tmp/cmd_done' > /tmp/full.out 2>&1; rc=$?
    sed 's/^/  | /' /tmp/full.out
    check "full disk: status 1, one error line naming the samples file, ENOSPC and that CMD ran to its end" \
        eval '[ $rc = 1 ] && [ "$(grep -c "^oprof: error:" /tmp/full.out)" = 1 ] && grep -q "^oprof: error: /tmp/small/full/samples: No space left on device (os error 28): profiling stopped after [0-9]* samples ([0-9]* bytes), [1-9][0-9]* bytes read were not written; the session is partial; CMD ran to its end\$" /tmp/full.out'
    check "full disk: the command was not killed (it ran its 8 s)" [ -e /tmp/cmd_done ]
    check "full disk: module unloaded, oprofilefs unmounted (grep oprofile /proc/modules empty)" eval 'clean && ! grep -q oprofile /proc/modules'
    check "full disk: session.json complete, ended_by disk full, unwritten bytes counted" \
        eval '[ "$(field /tmp/small/full/session.json state)" = complete ] && [ "$(field /tmp/small/full/session.json ended_by)" = "disk full" ] && [ "$(field /tmp/small/full/session.json unwritten)" -gt 0 ]'
    check "full disk: the guest's oprof report reads the partial session" eval 'oprof report /tmp/small/full -l -n 3 2>&1 | grep -q "^Samples: [1-9]"'
    tar -C /tmp/small -czf /tmp/full.tgz full && print_stream full.tgz /tmp/full.tgz
    umount /tmp/small; rm -f /tmp/full.tgz /tmp/full.out /tmp/cmd_done
}

# --- the flight recorder: --max-size 64K over a workload in two phases, dd (kernel-bound) for 4 s,
# then /bin/hot for 8 s, with frame-pointer chains (about 40 bytes a sample at 2500 samples/s:
# the second phase writes several times the size even at a quarter of that rate on a busy
# host). What is kept must be the end of the second phase: no sample of dd's pid, and hot_a
# among the report's first rows (the idle CPU's samples in the idle loop may come first).
# SIGUSR1 a second into the first phase (sent by the command itself, to its parent: oprof)
# writes snapshot-1: dd's samples, and /bin/hot not yet among the images the module named.
# `touch DIR/snapshot` 4 s into the second phase writes snapshot-2: its last 64K are /bin/hot's. ---
part_flight() {
    insmod /oprofile.ko timer=1 timer_hz=2500
    oprof record --max-size 64K -g 16 --user-stack 0 -o /tmp/flight -- sh -c \
        'dd if=/dev/zero of=/dev/null bs=64k 2>/dev/null & echo $! > /tmp/flight.dd; sleep 1; kill -USR1 $PPID; sleep 3; kill $!; /bin/hot 8 > /dev/null & sleep 4; touch /tmp/flight/snapshot; wait $!' \
        > /tmp/flight.out 2>&1; rc=$?
    sed 's/^/  | /' /tmp/flight.out
    chunks=$(field /tmp/flight/session.json chunks)
    check "flight recorder: status 0, no warning, session complete, max_size 65536, older chunks dropped ($chunks)" \
        eval '[ $rc = 0 ] && [ "$(field /tmp/flight/session.json state)" = complete ] && [ "$(field /tmp/flight/session.json max_size)" = 65536 ] && [ "$chunks" -gt 0 ] && [ ! -e /tmp/flight/samples.d ] && ! grep -q warning /tmp/flight.out'
    # At most the size in closed chunks, plus the open one: a chunk (8K) and the sync pass
    # that passed it, the largest of which the decoder measures (from a CPU_SWITCH to the next).
    bytes=$(stat -c %s /tmp/flight/samples)
    oprof decode --word-size "$(word_bytes)" /tmp/flight/samples > /tmp/flight.dec 2>&1; drc=$?
    pass=$(awk -v end="$bytes" '/: CpuSwitch/ { o = $1 + 0; if (n++ && o - p > m) m = o - p; p = o }
        END { if (end - p > m) m = end - p; print m + 0 }' /tmp/flight.dec)
    bound=$((65536 + 8192 + pass))
    check "flight recorder: the kept stream ($bytes bytes) is at most --max-size + a chunk + its largest pass ($pass bytes): $bound" \
        eval '[ $drc = 0 ] && [ "$bytes" -gt 0 ] && [ "$bytes" -le $bound ]'
    ddpid=$(printf '%x' "$(cat /tmp/flight.dd)")
    snap=/tmp/flight/snapshot-1
    oprof decode --word-size "$(word_bytes)" $snap/samples > /tmp/flight-snap.dec 2>&1; sdrc=$?
    check "flight recorder: SIGUSR1 wrote $snap, a complete session that decodes, with samples of dd (pid $ddpid, hex) and no /bin/hot among its images" \
        eval '[ $sdrc = 0 ] && grep -q "^oprof record: snapshot: [1-9][0-9]* samples, [0-9]* bytes in $snap\$" /tmp/flight.out && [ "$(field $snap/session.json ended_by)" = snapshot ] && session_complete $snap && grep -q "CtxSwitch { pid: $ddpid," /tmp/flight-snap.dec && ! grep -q " /bin/hot\$" $snap/images'
    snap=/tmp/flight/snapshot-2
    oprof report $snap -l -n 5 > /tmp/flight-snap.rep 2>&1
    sed 's/^/  | /' /tmp/flight-snap.rep
    check "flight recorder: touching DIR/snapshot 4 s into /bin/hot wrote $snap (the file taken away), whose report names hot_a in its first 5 rows" \
        eval 'grep -q "^oprof record: snapshot: [1-9][0-9]* samples, [0-9]* bytes in $snap\$" /tmp/flight.out && [ ! -e /tmp/flight/snapshot ] && [ "$(field $snap/session.json ended_by)" = snapshot ] && grep -q " /bin/hot  *hot_a\$" /tmp/flight-snap.rep'
    oprof report /tmp/flight -l -n 5 > /tmp/flight.rep 2>&1
    sed 's/^/  | /' /tmp/flight.rep
    check "flight recorder: the kept stream decodes, has no sample of dd (pid $ddpid, hex) and names /bin/hot's hot_a in its first 5 rows" \
        eval '[ $drc = 0 ] && grep -q "CtxSwitch { pid: " /tmp/flight.dec && ! grep -q "CtxSwitch { pid: $ddpid," /tmp/flight.dec && grep -q " /bin/hot  *hot_a\$" /tmp/flight.rep'
    rmmod oprofile
    rm -rf /tmp/flight /tmp/flight.out /tmp/flight.dd /tmp/flight.dec /tmp/flight-snap.dec /tmp/flight.rep /tmp/flight-snap.rep
}

# --- SIGTERM while a command runs: the command gets SIGTERM, oprof returns its status ---
part_sigterm() {
    oprof record -o /tmp/term -- sleep 60 & pid=$!
    sleep 3; kill -TERM $pid; wait $pid; rc=$?
    check "SIGTERM with CMD: status 143 (CMD killed by SIGTERM), got $rc" [ "$rc" = 143 ]
    check "SIGTERM with CMD: ended_by SIGTERM, exit_status 143, clean" eval '[ "$(field /tmp/term/session.json ended_by)" = SIGTERM ] && [ "$(field /tmp/term/session.json exit_status)" = 143 ] && clean'
}

# --- --archive, --kprof, --points; the guest's report (compared with the host's) ---
part_archive() {
    oprof record -g 16 --archive --kprof --points -o /tmp/agree -- /bin/hot 3; rc=$?
    check "archive session: status 0, kpdata, profile_points, root/bin/hot" eval '[ $rc = 0 ] && [ -s /tmp/agree/kpdata ] && [ -s /tmp/agree/profile_points ] && cmp /bin/hot /tmp/agree/root/bin/hot'
    check "oprof points reads the session's profile_points" eval 'oprof points /tmp/agree/profile_points | grep -q sample_handler'
    oprof record --points=ring_push,bt_kernel -o /tmp/pts -- /bin/hot 1 2>/dev/null; rc=$?
    check "--points=ring_push,bt_kernel: only those two ran (status $rc)" eval '[ $rc = 0 ] && [ "$(oprof points /tmp/pts/profile_points | awk "\$1 == \"on\" { print \$2 }" | sort | tr "\n" " ")" = "bt_kernel ring_push " ]'
    rm -rf /tmp/pts
    echo "== agree_report begin"; oprof report /tmp/agree -l -n 10 2>/dev/null; echo "== agree_report end"
    check "guest report names hot_a from the archived /bin/hot" eval 'oprof report /tmp/agree -l -n 10 2>/dev/null | grep -q " /bin/hot  *hot_a\$"'
    echo "== agree_annotate begin"; oprof annotate /tmp/agree --symbol hot_a --assembly 2>/dev/null; echo "== agree_annotate end"
    # hot_a's multiply-accumulate: ARM's mla (cond 0xe, 0xe0......), AArch64's madd (0x1b......).
    if [ "$(arm64)" = 1 ]; then mla='1b[0-9a-f]* *madd'; else mla='e0[0-9a-f]* *mla'; fi
    check "guest oprof annotate disassembles hot_a (${mla##* })" eval 'oprof annotate /tmp/agree --symbol hot_a --assembly 2>/dev/null | grep -q ":  $mla "'
    # The archived oprof (10 MB) stays here: the host reads the same file from the initramfs
    # (record.py's --sysroot), and the serial console is slow.
    rm /tmp/agree/root/usr/bin/oprof
    tar -C /tmp -czf /tmp/agree.tgz agree && print_stream agree.tgz /tmp/agree.tgz
}

# --- a hardware event (the A8 in QEMU raises no PMU interrupt: its samples are not taken) ---
part_hwevent() {
    oprof record -e CPU_CYCLES:1000000 -o /tmp/hw -- /bin/hot 1; rc=$?
    check "hardware event: status 0, counter 0 CPU_CYCLES every 1000000 in session.json" eval '[ $rc = 0 ] && [ "$(field /tmp/hw/session.json event)" = CPU_CYCLES ] && [ "$(field /tmp/hw/session.json count)" = 1000000 ]'
    samples=$(field /tmp/hw/session.json samples); nt=$(field /tmp/hw/session.json not_taken)
    if [ "$CPU_TYPE_HW" = arm/armv7 ]; then
        check "hardware event on the A8: no samples, $nt not taken (no PMU IRQ)" eval '[ "$samples" = 0 ] && [ "$nt" -gt 0 ]'
    else
        check "hardware event: $samples samples" [ "$samples" -gt 100 ]
    fi
    check "hardware event: N/total counted (> 0)" eval '[ "$(field /tmp/hw/session.json total)" -gt 0 ]'
}

# --- privacy: a session holds process memory; root writes it only into a directory of its own
# and follows no link planted in it. ---
# modes DIR: every entry of DIR (itself included) whose mode is not 700 (directory) or 600
# (file), as "MODE PATH"; nothing when all are private.
part_privacy() {
    modes() {
        find "$1" | while read -r f; do
            m=$(stat -c %a "$f")
            if [ -d "$f" ]; then [ "$m" = 700 ] || echo "$m $f"; else [ "$m" = 600 ] || echo "$m $f"; fi
        done
    }
    umask 022
    oprof record -g 16 --archive -o /tmp/priv -- sh -c 'umask > /tmp/priv-umask; /bin/hot 1' 2>/dev/null; rc=$?
    bad=$(modes /tmp/priv)
    echo "$bad" | sed 's/^/  | /'
    check "private session (umask 022): directory and root/ 0700, files 0600 (status $rc)" \
        eval '[ $rc = 0 ] && [ -z "$bad" ] && [ "$(stat -c %a /tmp/priv)" = 700 ] && [ "$(stat -c %a /tmp/priv/samples)" = 600 ] && [ "$(stat -c %a /tmp/priv/root/bin/hot)" = 600 ]'
    check "the profiled command keeps the caller's umask ($(cat /tmp/priv-umask))" eval '[ "$(cat /tmp/priv-umask)" = 0022 ]'
    rm -rf /tmp/priv /tmp/priv-umask
    mkdir -m 700 /tmp/e && chown 1000 /tmp/e
    err_case "a directory owned by uid 1000 is refused" 1 "/tmp/e is owned by uid 1000, not by uid 0 who records" \
        sh -c 'oprof record -o /tmp/e -- true; s=$?; rmdir /tmp/e; exit $s'
    mkdir -m 755 /tmp/real; ln -s /tmp/real /tmp/e
    err_case "a symbolic link as the output directory is refused" 1 "/tmp/e is a symbolic link" \
        sh -c 'oprof record -o /tmp/e -- true; s=$?; rm /tmp/e; exit $s'
    rmdir /tmp/real
    # Links planted in the session during the run (as someone able to write there would): a file
    # created after CMD (kallsyms) and --archive's root/bin (root would copy /bin/hot into the
    # link's target, e.g. /etc/cron.d).
    echo precious > /tmp/victim; mkdir /tmp/victim.d
    out=$(oprof record -o /tmp/plant -- sh -c 'ln -s /tmp/victim /tmp/plant/kallsyms' 2>&1); rc=$?
    echo "$out" | sed 's/^/  | /'
    # A session file that cannot be written is a warning and a note (as on a full disk): the rest of
    # the session is written, the link is not followed, and session.json says what is missing.
    check "a link planted as kallsyms is not followed: a warning names it, the session notes it, the target unchanged" \
        eval '[ $rc = 0 ] && echo "$out" | grep -qF "kallsyms: not written: creating /tmp/plant/kallsyms: File exists (os error 17) (a symbolic link is there; not followed)" && grep -q "kallsyms: not written" /tmp/plant/session.json && [ "$(cat /tmp/victim)" = precious ] && clean'
    oprof record --archive -o /tmp/plant2 -- sh -c 'mkdir /tmp/plant2/root && ln -s /tmp/victim.d /tmp/plant2/root/bin && /bin/hot 1' 2>/dev/null; rc=$?
    check "--archive: a root/bin link planted during the run is not followed (nothing in its target, a note names it)" \
        eval '[ $rc = 0 ] && [ -z "$(ls -A /tmp/victim.d)" ] && grep -q "archive: opening /tmp/plant2/root/bin: .*a symbolic link is there; not followed" /tmp/plant2/session.json && clean'
    rm -rf /tmp/plant /tmp/plant2 /tmp/victim /tmp/victim.d
}

for p in $PARTS; do "part_${p%:*}"; done
check "nothing left behind at the end" clean
summary
