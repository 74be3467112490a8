#!/bin/bash
# Runs two oprof binaries over the streams and sessions the guest tests left and compares what
# they print: stdout, stderr and exit status of each invocation, and the files they write
# (--flame SVG, --pprof profile, man pages). For refactorings that must not change behaviour.
#
# Usage: scripts/oprof-same-output.sh OLD_OPROF NEW_OPROF [TESTS_DIR...]
#   TESTS_DIR: build/tests directories of guest runs (default: build/tests of this checkout),
#   read only. VMLINUX=FILE (ARM32) and VMLINUX64=FILE (arm64) add kernel symbols, and kprof
#   runs when given. QUICK=1: only the first stream of each kind.
# Prints one line per difference and a summary `N invocations (S exit 0 ...), M differ`; exits 1 if any
# differ, 0 otherwise. Needs a few minutes for a full build/tests of three boards.
set -u
[ $# -ge 2 ] || { sed -n '2,12p' "$0"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Both run as `oprof` (clap's usage lines print argv[0]).
mkdir "$work/old-bin" "$work/new-bin"
cp "$1" "$work/old-bin/oprof" && cp "$2" "$work/new-bin/oprof" || exit 2
old=$work/old-bin/oprof new=$work/new-bin/oprof
shift 2
[ $# -gt 0 ] || set -- "$(dirname "$0")/../build/tests"
n=0 ok=0 bad=0

# Runs `oprof ARGS` with both binaries from one directory (files they write land in out/).
same() {
    n=$((n + 1))
    local side
    for side in old new; do
        rm -rf "$work/out" && mkdir "$work/out"
        (cd "$work/out" && "${!side}" "$@" >"$work/$side.stdout" 2>"$work/$side.stderr"
         echo $? >"$work/$side.rc")
        rm -rf "$work/$side.files" && mv "$work/out" "$work/$side.files"
    done
    [ "$(cat "$work/new.rc")" = 0 ] && ok=$((ok + 1))
    local what
    for what in stdout stderr rc; do
        if ! cmp -s "$work/old.$what" "$work/new.$what"; then
            echo "DIFF ($what): oprof $*"
            diff "$work/old.$what" "$work/new.$what" | head -5
            bad=$((bad + 1))
            return
        fi
    done
    if ! diff -r "$work/old.files" "$work/new.files" >/dev/null; then
        echo "DIFF (files written): oprof $*"
        bad=$((bad + 1))
    fi
}

# Every subcommand's help, completions, man pages, the event tables, argument errors.
for sub in "" record decode report annotate diff synth setup events kprof points generate; do
    same $sub --help
done
same --version
same generate completions bash
same generate man pages
for t in arm/armv7 arm/armv7-ca15 arm/armv8-ca53 timer bogus; do
    same events --cpu-type $t
done
same events --list-types
same setup --cpu-type arm/armv7-ca15 CPU_CYCLES:100000,INST_RETIRED:50000
same setup --cpu-type arm/armv7-ca15 CPU_CYCLES:100000 --report-args
same setup --cpu-type arm/armv7-ca15 NO_SUCH_EVENT:1
same report --no-such-option
same report /nonexistent
same decode /nonexistent

for dir in "$@"; do
    dir=$(realpath "$dir")
    declare -A seen=()
    for buf in "$dir"/*.buf "$dir"/*.kbuf; do
        [ -f "$buf" ] || continue
        base=${buf%.*} name=$(basename "$base")
        kind=${name#*-user-}
        [ "$kind" = "$name" ] && kind=${name##*-}
        if [ "${QUICK:-0}" = 1 ] && [ -n "${seen[$kind]:-}" ]; then continue; fi
        seen[$kind]=1
        case $name in
            *a53*) ws=8 root=$dir/initramfs-arm64.root vml=${VMLINUX64:-} ;;
            *) ws=4 root=$dir/initramfs.root vml=${VMLINUX:-} ;;
        esac
        case $name in *-debug-*) root=${root%.root}-debug.root ;; esac
        args=("$buf" --word-size $ws)
        for f in images proc_modules module_sections; do
            [ -f "$base.$f" ] && args+=("--${f//_/-}" "$base.$f")
        done
        [ -d "$root" ] && args+=(--sysroot "$root" --image-path "$root/lib" --debug-dir "${root%.root}.debug")
        [ -n "$vml" ] && args+=(--vmlinux "$vml")
        same decode "$buf" --word-size $ws
        same decode "$buf" --word-size $ws --force
        same report "${args[@]}"
        same report "${args[@]}" -l -c -n 20 --flame f.svg
        same report "${args[@]}" -l -c --json
        same report "${args[@]}" -g --json
        same report "${args[@]}" -l -v -n 10
        same report "${args[@]}" --folded
        same report "${args[@]}" --pprof p.pb.gz -n 5
        same annotate "${args[@]}" -n 3
        case $name in
            *-user-hot_timer)
                same annotate "${args[@]}" --symbol hot_a
                same annotate "${args[@]}" --symbol hot_a --json ;;
            *-user-flip)
                a=${base%-flip}-hot_timer
                [ -f "$a.buf" ] && same diff "$a.buf" "$buf" --word-size $ws \
                    --a-images "$a.images" --a-proc-modules "$a.proc_modules" \
                    --a-module-sections "$a.module_sections" --b-images "$base.images" \
                    --b-proc-modules "$base.proc_modules" --b-module-sections "$base.module_sections" \
                    ${root:+--sysroot "$root"} -l -n 20
                [ -f "$a.buf" ] && same diff "$a.buf" "$buf" --word-size $ws -l --json ;;
        esac
        # Streams read with the wrong word size, and files that are no stream.
        same decode "$buf" --word-size $((12 - ws))
        same report "$buf" --word-size $((12 - ws))
        [ -f "$base.images" ] && same report "$base.images" --word-size $ws
        [ -f "$base.images" ] && same decode "$base.images" --word-size $ws --force
    done
    unset seen
    for ses in "$dir"/*-record/*/; do
        [ -f "$ses/session.json" ] || continue
        ses=${ses%/}
        same report "$ses"
        same report "$ses" -l -n 10
        same report "$ses" -l -c --json
        same report "$ses" --folded
        same annotate "$ses" --symbol hot_a --assembly
        same annotate "$ses" -n 2
        same diff "$ses" "$ses" -l
        [ -f "$ses/profile_points" ] && same points "$ses/profile_points" && same points "$ses/profile_points" --json
        if [ -f "$ses/kpdata" ]; then
            case $ses in *a53*) vml=${VMLINUX64:-} ;; *) vml=${VMLINUX:-} ;; esac
            [ -n "$vml" ] && same kprof "$vml" "$ses/kpdata" -n 10 && same kprof "$vml" "$ses/kpdata" --json
        fi
    done
    for kp in "$dir"/*.kpdata; do
        [ -f "$kp" ] || continue
        case $kp in *a53*) vml=${VMLINUX64:-} ;; *) vml=${VMLINUX:-} ;; esac
        same kprof "${vml:-/nonexistent}" "$kp" -n 10
    done
done
echo "$n invocations ($ok exit 0 with the new oprof), $bad differ"
[ $bad = 0 ]
