# Privilege: uid 1000 can control nothing and see no kernel address; root without
# CAP_SYS_ADMIN can control nothing; kprof/kpctl shows the kernel text range only to openers with
# CAP_SYSLOG while kernel.kptr_restrict < 2 (as /proc/kallsyms, see Documentation/oprofilefs.rst
# "Privileges"). Prints the files uid 1000 can read.
. /tests/lib.sh
plan 36
echo 1 > /proc/sys/kernel/printk
KC=$OP/kprof/kpctl
check "load" load   # hardware model where there is one: counter files too
controls="enable dump buffer_size buffer_watershed cpu_buffer_size backtrace_depth user_stack_size image_ids_max profile_points kprof/kpctl"
[ -d $OP/0 ] && controls="$controls 0/enabled 0/event 0/count 0/unit_mask 0/kernel 0/user"
bad=
for f in $controls; do
    r=$(optool as 1000 optool write $OP/$f 1)
    [ "$r" = "ERR EACCES" ] || bad="$bad $f:$r"
done
check "uid 1000: every control write is EACCES ($controls)${bad:+; not:$bad}" test -z "$bad"
expect "uid 1000: open buffer -> EPERM" "ERR EPERM" optool as 1000 optool bufread 4

# What uid 1000 can read: everything but buffer, dump, images and kprof/kpdata.
optool as 1000 opfuzz access > /tmp/access
echo "== unprivileged begin"; cat /tmp/access; echo "== unprivileged end"
expect "uid 1000 cannot read exactly buffer, dump, images, kprof/kpdata" "buffer dump images kprof/kpdata" \
    sh -c "echo \$(awk '\$1 == \"-\" { print \$2 }' /tmp/access | sort)"
expect "uid 1000: buffer -> EPERM" "- buffer EPERM" grep '^- buffer ' /tmp/access
expect "uid 1000: dump -> EACCES" "- dump EACCES" grep '^- dump ' /tmp/access
expect "uid 1000: images -> EACCES" "- images EACCES" grep '^- images ' /tmp/access
expect "uid 1000: kprof/kpdata -> EACCES" "- kprof/kpdata EACCES" grep '^- kprof/kpdata ' /tmp/access
check "uid 1000 reads the settings, stats and profile points" \
    sh -c "grep -q '^R buffer_size\$' /tmp/access && grep -q '^R stats/cpu0/sample_received\$' /tmp/access && grep -q '^R profile_points\$' /tmp/access"

# Kernel addresses: kpctl's text line against /proc/kallsyms, which follows the same rule.
text() { awk '$1 == "text" { print $2, $3 }'; }
sym() { awk -v s="$1" '$3 == s { print $1 }' /proc/kallsyms; }
# hexes A B: two hex addresses, with or without 0x, as "0xA 0xB" (lower case, no leading zeros):
# compared as text, since the shell's signed 64-bit numbers cannot hold arm64's 0xffff8000....
hexes() { for h in "$1" "$2"; do h=$(echo "${h#0x}" | tr A-F a-f | sed 's/^0*//'); printf '0x%s ' "${h:-0}"; done; }
# kallsyms' hidden address: zeros, one hex digit per half byte of the kernel's word.
if [ "$(word_bytes)" = 8 ]; then zeros=0000000000000000; else zeros=00000000; fi
expect "kptr_restrict default 0" 0 cat /proc/sys/kernel/kptr_restrict
root_text=$(text < $KC)
check "root sees the text range ($root_text)" test "$root_text" != "0x0 0x0" -a -n "$root_text"
expect "root's range is _stext.._etext of /proc/kallsyms" "$(hexes 0x$(sym _stext) 0x$(sym _etext))" hexes $root_text
expect "uid 1000 sees 0x0 0x0" "0x0 0x0" sh -c "optool as 1000 cat $KC | awk '\$1 == \"text\" { print \$2, \$3 }'"
expect "as /proc/kallsyms gives uid 1000 zeros" $zeros sh -c "optool as 1000 cat /proc/kallsyms | awk '\$3 == \"_stext\" { print \$1 }'"
expect "root without CAP_SYSLOG sees 0x0 0x0" "0x0 0x0" sh -c "opfuzz nocap syslog cat $KC | awk '\$1 == \"text\" { print \$2, \$3 }'"
echo 1 > /proc/sys/kernel/kptr_restrict
expect "kptr_restrict=1: root still sees the range" "$root_text" sh -c "awk '\$1 == \"text\" { print \$2, \$3 }' $KC"
expect "kptr_restrict=1: uid 1000 sees 0x0 0x0" "0x0 0x0" sh -c "optool as 1000 cat $KC | awk '\$1 == \"text\" { print \$2, \$3 }'"
echo 2 > /proc/sys/kernel/kptr_restrict
expect "kptr_restrict=2: root sees 0x0 0x0" "0x0 0x0" sh -c "awk '\$1 == \"text\" { print \$2, \$3 }' $KC"
expect "kptr_restrict=2: /proc/kallsyms gives root zeros too" $zeros sym _stext
echo 0 > /proc/sys/kernel/kptr_restrict
# Stricter than kallsyms: perf_event_paranoid <= 1 does not open kpctl's addresses to users.
p=$(cat /proc/sys/kernel/perf_event_paranoid)
echo 1 > /proc/sys/kernel/perf_event_paranoid
check "perf_event_paranoid=1: /proc/kallsyms shows uid 1000 the addresses" \
    sh -c "test \"\$(optool as 1000 cat /proc/kallsyms | awk '\$3 == \"_stext\" { print \$1 }')\" != $zeros"
expect "perf_event_paranoid=1: kpctl still shows uid 1000 0x0 0x0 (documented)" "0x0 0x0" \
    sh -c "optool as 1000 cat $KC | awk '\$1 == \"text\" { print \$2, \$3 }'"
echo "$p" > /proc/sys/kernel/perf_event_paranoid
expect "a descriptor opened by root keeps root's view after setuid" "$root_text" \
    sh -c "exec 3<$KC; optool as 1000 sh -c 'cat <&3' | awk '\$1 == \"text\" { print \$2, \$3 }'"
expect "kpctl opened by root, read after kptr_restrict=2: the opener's view" "$root_text" \
    sh -c "exec 3<$KC; echo 2 > /proc/sys/kernel/kptr_restrict; awk '\$1 == \"text\" { print \$2, \$3 }' <&3; echo 0 > /proc/sys/kernel/kptr_restrict"
expect "kptr_restrict back to 0" 0 cat /proc/sys/kernel/kptr_restrict

# Root without CAP_SYS_ADMIN: EPERM at open for writing; reading works.
bad=
for f in $controls; do
    r=$(opfuzz nocap sys_admin optool write $OP/$f 1)
    [ "$r" = "ERR EPERM" ] || bad="$bad $f:$r"
done
check "root without CAP_SYS_ADMIN: every control write is EPERM${bad:+; not:$bad}" test -z "$bad"
expect "root without CAP_SYS_ADMIN: open buffer -> EPERM" "ERR EPERM" opfuzz nocap sys_admin optool bufread 4
expect "root without CAP_SYS_ADMIN reads enable" 0 opfuzz nocap sys_admin cat $OP/enable
expect "root without CAP_SYS_ADMIN reads images (mode 0400, root)" "" opfuzz nocap sys_admin cat $OP/images
expect "root without CAP_SYS_ADMIN (with CAP_SYSLOG) sees the text range" "$root_text" \
    sh -c "opfuzz nocap sys_admin cat $KC | awk '\$1 == \"text\" { print \$2, \$3 }'"
expect "root without either: writes EPERM" "ERR EPERM" opfuzz nocap sys_admin,syslog optool write $KC start
# Nothing above changed anything.
expect "settings untouched" "131072 32768 8192 0 0 16384" \
    sh -c "echo \$(cat $OP/buffer_size $OP/buffer_watershed $OP/cpu_buffer_size $OP/backtrace_depth $OP/user_stack_size $OP/image_ids_max)"
expect "kprof never started" "stopped" sh -c "awk '\$1 == \"state\" { print \$2 }' $KC"
expect "profile points all off" 0 sh -c "grep -c '^ *on ' $OP/profile_points"
expect "root: control writes work" ok optool write $OP/buffer_size 65536
expect "root: dump works" ok optool write $OP/dump 1
check "unload" unload
summary
