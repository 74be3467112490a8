# Profile points: the table, its commands and errnos, and exact counts in controlled runs
# (buffer_read = reads that copied data, sample_handler = samples taken, kprof_tick = kprof
# ticks). The host parses the printed tables with `oprof points` (tests/checks/points.py) and
# compares the session's and kprof's counts with the EXPECT lines (sample_handler nr = samples
# taken, kprof_tick nr = kpdata's ticks): that comparison is made there only, not twice.
. /tests/lib.sh
plan 50
echo 1 > /proc/sys/kernel/printk
PP=$OP/profile_points
# Every point the module defines (rust/*.rs, define_profile_point!), in no particular order.
POINTS="sample_handler sample_resolve ring_push user_stack_copy bt_kernel bt_user bt_user_frame sync_pass buffer_read kprof_tick"
# field NAME N: column N of NAME's row (1 status, 2 name, 3 total, 4 nr, 5 avg.ns).
field() { awk -v n="$1" -v c="$2" '$2 == n { print $c }' $PP; }
# print_table MARK: the table as a block for the host.
print_table() { echo "== $1 begin"; cat $PP; echo "== $1 end"; }

check "load (timer mode)" load timer=1
expect "mode of profile_points" 644 stat -c %a $PP
expect "title line" "Kernel Profile Points" head -n 1 $PP
expect "header line" " status                  name             total                nr            avg.ns" sed -n 2p $PP
for p in $POINTS; do
    expect "$p listed, off, zero" "off 0.000000000 0 0" sh -c "awk '\$2 == \"$p\" { print \$1, \$3, \$4, \$5 }' $PP"
done
expect "rows between two rules" 2 sh -c "grep -c '^-------  ---' $PP"
print_table pp_initial

# Errors: nothing changes on a bad write.
for bad in "enable nosuch" "frobnicate sync_pass" "enable" "print x" "reset a b" "enable sync_pass extra"; do
    expect "'$bad' -> EINVAL" "ERR EINVAL" optool write $PP "$bad"
done
expect "all points still off" 0 sh -c "grep -c '^ *on ' $PP"

# buffer_read: exactly the reads that copied data.
expect "enable buffer_read" ok optool write $PP "enable buffer_read"
expect "buffer_read on" on field buffer_read 1
expect "7 reads of one word after a 300 ms period" "ok 7" optool reads 7 $(word_bytes) 300
expect "buffer_read nr = 7" 7 field buffer_read 4
expect "buffer_read total > 0" 1 sh -c "awk '\$2 == \"buffer_read\" { print (\$3 > 0) }' $PP"
expect "disable buffer_read" ok optool write $PP "disable buffer_read"
expect "buffer_read off" off field buffer_read 1
expect "5 more reads while disabled" "ok 5" optool reads 5 $(word_bytes) 300
expect "disabled point did not count (still 7)" 7 field buffer_read 4
expect "reset buffer_read" ok optool write $PP "reset buffer_read"
expect "reset zeroes nr" 0 field buffer_read 4
expect "reset zeroes total" 0.000000000 field buffer_read 3
expect "reset zeroes avg.ns" 0 field buffer_read 5

# sample_handler: one run per sample taken, i.e. the sum of stats/cpu*/sample_received.
expect "enable all" ok optool write $PP "enable all"
expect "reset all" ok optool write $PP "reset all"
expect "3 reads after a 500 ms period" "ok 3" optool reads 3 $(word_bytes) 500
rcv=$(samples_received)
echo "EXPECT sample_handler $rcv"
echo "EXPECT buffer_read 3"
check "samples taken ($rcv > 100)" test "$rcv" -gt 100
nsync=$(field sync_pass 4)
check "sync_pass ran ($nsync > 0)" test "$nsync" -gt 0
print_table pp_session

# kprof_tick: one run per kprof tick, i.e. kpdata word 0.
expect "reset all again" ok optool write $PP "reset all"
expect "kprof startclr" ok optool write $OP/kprof/kpctl startclr
sleep 1
expect "kprof stop" ok optool write $OP/kprof/kpctl stop
ticks=$(be_word $OP/kprof/kpdata 0)
echo "EXPECT kprof_tick $ticks"
check "kprof ticked ($ticks > 100)" test "$ticks" -gt 100
print_table pp_kprof

# print: the table in the kernel log.
dmesg_mark
expect "print" ok optool write $PP print
expect "print logs the title" 1 eval "dmesg_new | grep -c 'oprofile: Kernel Profile Points'"
expect "print logs every row" 10 eval "dmesg_new | grep -cE 'oprofile: +(on|off) +($(echo $POINTS | tr ' ' '|')) '"
echo "== pp_dmesg begin"; dmesg_new | grep 'oprofile: '; echo "== pp_dmesg end"
expect "disable all" ok optool write $PP "disable all"
expect "all points off" 0 sh -c "grep -c '^ *on ' $PP"
check "unload" unload
summary
