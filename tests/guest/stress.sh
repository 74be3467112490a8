# Concurrency: 30 s of two processes toggling enable, one reading buffer and one writing
# settings, counter values, dump, profile point and kprof commands, with a workload on every CPU
# (hardware sampling on virt-a15 and the arm64 boards, timer mode on realview-pb-a8, whose PMU
# raises no interrupt);
# then a reader SIGKILLed in a blocking read, buffer closed by one thread while another reads,
# a process exiting with buffer open, umount and rmmod with buffer open, a second mount.
# Cases marked [release] kill or exit a task that holds buffer open while profiling runs: its
# release then runs in the exiting task. GUEST_ARGS=opskip=release skips them (as SKIP lines).
. /tests/lib.sh
plan 47
echo 1 > /proc/sys/kernel/printk
n=$(nproc)
skip_release=0; [ "$(guest_arg opskip)" != release ] || skip_release=1

# model: counter 0 samples CPU_CYCLES where the PMU has its interrupt (the default set-up has no
# counter enabled).
model() { [ "$(pmu_irq)" = 0 ] || { echo 1 > $OP/0/enabled; echo $(cycles_event) > $OP/0/event; echo 1000000 > $OP/0/count; }; }
if [ "$(pmu_irq)" = 1 ]; then
    check "load (hardware model, CPU_CYCLES every 1000000 cycles)" load
    loadargs=
else
    check "load (timer mode)" load timer=1
    loadargs=timer=1
fi
model

# run_ok DESC CMD...: CMD's last output line must start with "ok".
run_ok() {
    d=$1; shift
    out=$("$@" 2>&1 | tail -n 1)
    case $out in ok*) ok "$d: $out" ;; *) not_ok "$d: $out" ;; esac
}
# wait_for FILE WORD [PID]: WORD in FILE, written by process PID (or by a process that stays
# alive). A start-up wait, not a measurement: up to 60 s (an emulated CPU on a loaded host can
# stall for seconds), giving up at once if PID exits first; a wait over 5 s is reported as a
# TAP comment, a failure with what PID was doing (its output, state and kernel wait channel).
alive() { [ -z "$1" ] || { [ -d /proc/$1 ] && ! grep -q '^State:[[:space:]]*Z' /proc/$1/status 2>/dev/null; }; }
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt 600 ] && alive "${3:-}"; do
        sleep 0.1; i=$((i + 1))
    done
    if grep -q "$2" "$1"; then
        [ $i -le 50 ] || echo "# '$2' in $1 after $((i / 10)) s"
        return 0
    fi
    echo "# no '$2' in $1 after $((i / 10)) s; it holds: '$(cat "$1" 2>/dev/null)'"
    [ -z "${3:-}" ] || echo "# pid $3: $(grep '^State:' /proc/$3/status 2>/dev/null), wchan $(cat /proc/$3/wchan 2>/dev/null)"
    return 1
}
# hold ENABLE: a process holding buffer open, blocked reading (ENABLE 1: profiling runs); $hpid.
# The output file is removed first, so an earlier holder's "holding" cannot be taken for this one's.
hold() { rm -f /tmp/hold.out; opfuzz hold "$1" > /tmp/hold.out & hpid=$!; wait_for /tmp/hold.out holding $hpid; }
kill_hold() { kill -9 $hpid; wait $hpid 2>/dev/null; }
spinners() { i=0; while [ $i -lt $n ]; do optool spin "$1" > /dev/null & i=$((i + 1)); done; }

# 30 s of everything at once. The reader holds buffer open until the others are done (enable=1
# is EINVAL without it): they start after it, a fork on the arm64 debug kernel beside a busy host
# taking a good part of a second, so a reader of a fixed time once closed before them.
rm -f /tmp/reader.stop
opfuzz reader 120 /tmp/reader.stop > /tmp/reader.out &
rpid=$!
check "reader opened buffer" wait_for /tmp/reader.out reading $rpid
opfuzz toggle 30 > /tmp/t1.out & p1=$!
opfuzz toggle 30 > /tmp/t2.out & p2=$!
opfuzz settings 30 > /tmp/set.out & p3=$!
spinners 30000
wait $p1; wait $p2; wait $p3; touch /tmp/reader.stop; wait $rpid; rm -f /tmp/reader.stop
wait
for f in t1 t2 set reader; do
    case $(cat /tmp/$f.out | tail -n 1) in ok*) ok "30 s: $(tail -n 1 /tmp/$f.out)" ;; *) not_ok "30 s: $f: $(cat /tmp/$f.out)" ;; esac
done
expect "enable reads 0 after the togglers" 0 cat $OP/enable
expect "buffer free after the reader closed it" "ERR EINTR" optool bufread 4096 1
print_stats

# A reader SIGKILLed in a blocking read.
check "a reader holds buffer, blocked in read (stopped)" hold 0
sleep 0.3
kill_hold
expect "SIGKILLed reader released buffer" "ERR EINTR" optool bufread 4096 1
# [release]: the task holding buffer dies while profiling; its samples since the last sync (every
# 100 ms) name new images, so the final sync at release looks up paths in a dying task.
released() { # DESC: buffer free and profiling stopped afterwards
    expect "[release] $1: buffer released" "ERR EINTR" optool bufread 4096 1
    expect "[release] $1: profiling stopped" 0 cat $OP/enable
}
if [ $skip_release = 1 ]; then
    for c in "exit 30 ms after enable=1" "exit: buffer released" "exit: profiling stopped" \
             "SIGKILL 30 ms after enable=1" "SIGKILL: buffer released" "SIGKILL: profiling stopped" \
             "SIGKILL of a reader blocked while profiling" "reader: buffer released" "reader: profiling stopped"; do
        ok "[release] $c # SKIP opskip=release"
    done
else
    run_ok "[release] exit 30 ms after enable=1, buffer open" opfuzz exitopen 30
    released exit
    check "[release] SIGKILL 30 ms after enable=1, buffer open" sh -c "opfuzz exitopen 30 kill > /dev/null; test \$? = 137"
    released SIGKILL
    check "[release] SIGKILL of a reader blocked while profiling" hold 1
    spinners 600
    sleep 0.05
    kill_hold
    wait
    released reader
fi

# buffer closed by one thread while another is blocked reading it.
run_ok "close while reading (stopped)" opfuzz closerace 0
run_ok "close while reading (profiling)" opfuzz closerace 1
expect "profiling stopped by the release" 0 cat $OP/enable

# umount and rmmod while buffer is open.
check "a reader holds buffer" hold 0
check "umount with buffer open is refused" sh -c "! umount $OP 2>/tmp/umount.err"
check "umount says busy ($(cat /tmp/umount.err))" grep -q busy /tmp/umount.err
check "still mounted" grep -q " $OP oprofilefs " /proc/mounts
expect "rmmod while mounted -> EAGAIN (delete_module EWOULDBLOCK)" "ERR EAGAIN" opfuzz delmod oprofile
check "lazy umount with buffer open" umount -l $OP
check "unmounted" sh -c "! grep -q ' $OP oprofilefs ' /proc/mounts"
expect "rmmod with buffer still open after the lazy umount -> EAGAIN" "ERR EAGAIN" opfuzz delmod oprofile
check "the reader is still blocked" alive $hpid
kill_hold
expect "rmmod once the last file closed" ok opfuzz delmod oprofile
check "module gone" sh -c "! grep -q '^oprofile ' /proc/modules"

# A second mount: one superblock, one profiler.
check "reload" load $loadargs
model
mkdir -p /tmp/op2 /tmp/op3
check "second mount" mount -t oprofilefs nodev /tmp/op2
expect "write through the second mount" ok optool write /tmp/op2/buffer_size 65536
expect "seen through the first (one superblock)" 65536 cat $OP/buffer_size
check "third mount while mounted" mount -t oprofilefs nodev /tmp/op3
expect "a mount of the live superblock keeps the settings" 65536 cat /tmp/op3/buffer_size
check "buffer held through the first mount" hold 0
expect "buffer through the second mount -> EBUSY" "ERR EBUSY" optool read /tmp/op2/buffer 4
kill_hold
check "umount the second and third" sh -c "umount /tmp/op2 && umount /tmp/op3"
expect "the first mount still works" ok optool write $OP/buffer_size 32768
check "umount the last mount" umount $OP
check "mount again" mount -t oprofilefs nodev $OP
expect "a new superblock restores the defaults" 131072 cat $OP/buffer_size
check "unload" unload
summary
