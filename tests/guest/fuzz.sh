# Fuzz: 10,500 seeded writes (5,250 on a debug kernel) of random and adversarial content (random
# bytes, NUL, 64 KiB blobs, huge/negative/hex numbers, whitespace, partial writes at offsets,
# faulting pointers) spread over every file of /dev/oprofile while idle, set up and running, and
# reads at odd sizes and offsets; opfuzz (tests/guest/opfuzz.c) checks each result and read-back
# against Documentation/oprofilefs.rst and prints one RESULT line per kind of file, and one for the
# faulting buffers by class: the VFS refuses a buffer that does not end at or below the user address
# limit (a kernel address, one crossing the limit) with EFAULT before the file's own write or read,
# dump's too; one below it (NULL, PROT_NONE, ending exactly at the limit) reaches the file, which
# faults where it copies and succeeds where it copies nothing (dump). Hardware model (the counter
# files) where the CPU has one; kprof and profile points are fuzzed too.
# Replay a failure with the seed it prints:
#   GUEST_ARGS=opseed=SEED BOARDS=BOARD SCRIPTS=fuzz bash tests/run-qemu-tests.sh
. /tests/lib.sh
plan 18
echo 1 > /proc/sys/kernel/printk
seed=$(guest_arg opseed)
[ -n "$seed" ] || seed=$(od -A n -t u4 -N 4 /dev/urandom | tr -d ' ')
case $(board) in a8) b=realview-pb-a8 ;; a15) b=virt-a15 ;; a53) b=virt-a53 ;; *) b=imx8mp-evk ;; esac
echo "fuzz seed $seed (replay: GUEST_ARGS=opseed=$seed BOARDS=$b SCRIPTS=fuzz bash tests/run-qemu-tests.sh)"

# A debug kernel (KASAN on arm64) takes some 35 ms an operation: half as many there, each kind of file
# and content still written hundreds of times (make check's time budget, Documentation/testing.rst).
if debug_kernel; then writes=5250 reads=1000; else writes=10500 reads=2000; fi
check "load" load
opfuzz fuzz "$seed" $writes $reads > /tmp/fuzz.out
st=$?
grep -v '^RESULT ' /tmp/fuzz.out
n=0
while read -r tag res text; do
    [ "$tag" = RESULT ] || continue
    n=$((n + 1))
    if [ "$res" = ok ]; then ok "$text"; else not_ok "$text"; fi
done < /tmp/fuzz.out
check "opfuzz finished (status $st) with its 13 results ($n)" test "$st" = 0 -a "$n" = 13

# Afterwards the module is whole: idle, a session opens, it unloads.
expect "enable reads 0" 0 cat $OP/enable
expect "buffer opens again (interrupted read)" "ERR EINTR" optool bufread 4096 1
check "unload" unload
summary
