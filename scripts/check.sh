#!/usr/bin/env bash
# `make check`: every test. Sets the host up (packages, kernel) when needed, lints the host
# checks (pyflakes3 tests/checks), the module sources (scripts/lint-module.py), the paths the
# guides name (scripts/check-guide.py) and the host crate's layers (scripts/check-layers.py),
# runs the host crates' tests (cargo test) and the QEMU integration tests (tests/run-qemu-tests.sh:
# plain kernel on realview-pb-a8, virt-a15 and virt-a53, debug kernel on virt-a15 and virt-a53)
# and the board image, installation and DKMS tests
# (tests/image.sh). The last line counts every test: "N passed, M failed, K skipped" (cargo's
# "test result:" lines, their ignored tests as skipped; the runners' "qemu: N passed, M failed,
# K skipped" and "image: ..."; one check for the lint; a part that ends without its counts is
# one failure). Exits non-zero if anything failed.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
OUT=$REPO/build
mkdir -p "$OUT/tests"
pass=0 fail=0 skip=0
# finish: the closing line, and the exit status.
finish() {
    step "make check: $([ $fail = 0 ] && echo PASSED || echo FAILED)"
    echo "$pass passed, $fail failed, $skip skipped"
    [ $fail = 0 ]; exit
}
# counted PART N M [K]: adds a part's passed/failed/skipped counts.
counted() {
    pass=$((pass + $2)); fail=$((fail + $3)); skip=$((skip + ${4:-0}))
    step "$1: $2 passed, $3 failed, ${4:-0} skipped"
}

# make check runs the whole suite: a subset asked for through the environment or make's command
# line (SCRIPTS, BOARDS, KVARIANT, GUEST_ARGS, QEMU_ARGS: the developers' knobs of
# tests/run-qemu-tests.sh and scripts/qemu.sh) is refused, so a PASSED line always means every
# check ran. The Makefile says where its KVARIANT came from (CHECK_KVARIANT_ORIGIN).
for v in SCRIPTS BOARDS GUEST_ARGS QEMU_ARGS; do
    if [ -n "${!v:-}" ]; then
        echo "not ok - make check runs every test: $v='${!v}' is set (run a subset with tests/run-qemu-tests.sh, see Documentation/testing.rst)"
        fail=$((fail + 1)); finish
    fi
done
case ${CHECK_KVARIANT_ORIGIN:-file} in
file|undefined) ;;
*) echo "not ok - make check runs both kernels: KVARIANT=${KVARIANT:-} given ($CHECK_KVARIANT_ORIGIN); run a subset with tests/run-qemu-tests.sh"
   fail=$((fail + 1)); finish ;;
esac

bash "$REPO/scripts/setup-host.sh" || { echo "not ok - host setup failed"; fail=$((fail + 1)); finish; }

step "lint: pyflakes3 tests/checks"
if pyflakes3 "$REPO/tests/checks"; then counted lint 1 0; else echo "not ok - pyflakes3 tests/checks"; counted lint 0 1; fi

# tally PART NAME LOG RC: adds the counts of LOG's last line, "NAME: N passed, M failed[, K
# skipped]" (a tool's or a runner's summary), as PART; a missing line, or a non-zero exit status
# RC without a failure counted, is one failure.
tally() {
    local part=$1 name=$2 log=$3 rc=$4 p f k
    if [[ $(tail -n 1 "$log") =~ ^$name:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
        p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} k=${BASH_REMATCH[4]:-0}
        if [ "$rc" != 0 ] && [ "$f" = 0 ]; then echo "not ok - $name exited with status $rc"; f=1; fi
        counted "$part" "$p" "$f" "$k"
    else
        echo "not ok - $name ended without its '$name: N passed, M failed' line"; counted "$part" 0 1
    fi
}

# lint_script PART NAME ARGS...: runs scripts/NAME.py ARGS (its output in build/NAME.log) and
# tallies its "NAME: N passed, M failed" as PART.
lint_script() {
    local part=$1 name=$2 rc=0
    shift 2
    python3 "$REPO/scripts/$name.py" "$@" | tee "$OUT/$name.log" || rc=$?
    tally "$part" "$name" "$OUT/$name.log" $rc
}

step "lint: module sources (scripts/lint-module.py: unsafe confined, SAFETY comments, shim kernel-doc)"
lint_script "lint: module" lint-module "$REPO" "$KSRC"
step "lint: guide paths (scripts/check-guide.py: every path DEVELOPERS.md and README.md name exists)"
lint_script "lint: guide" check-guide "$REPO"
step "lint: layers (scripts/check-layers.py: the host crate's imports run cli -> view -> aggregate -> resolve -> input)"
lint_script "lint: layers" check-layers "$REPO"

step "lint: rustfmt --check (the module with the kernel's .rustfmt.toml, the host crates with cargo fmt)"
if rustfmt --edition 2021 --config-path "$KSRC/.rustfmt.toml" --check "$REPO/rust/oprofile_main.rs" &&
   (cd "$REPO" && cargo fmt --all -- --check); then counted "lint: rustfmt" 1 0
else echo "not ok - rustfmt --check: run rustfmt (see DEVELOPERS.md, Toolchain)"; counted "lint: rustfmt" 0 1; fi

step "lint: cargo clippy --all-targets (host crates, warnings are errors)"
if (cd "$REPO" && cargo clippy --locked --all-targets -- -D warnings); then counted "lint: clippy" 1 0
else echo "not ok - cargo clippy --all-targets -- -D warnings"; counted "lint: clippy" 0 1; fi

step "cargo test (host crates)"
rc=0; (cd "$REPO" && cargo test --locked --no-fail-fast 2>&1) | tee "$OUT/cargo-test.log" || rc=$?
# One "test result: ok. N passed; M failed; K ignored; ..." line per test binary and doc-test run.
read -r p f k < <(sed -n 's/^test result: [^.]*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored;.*/\1 \2 \3/p' "$OUT/cargo-test.log" |
                  awk '{ p += $1; f += $2; k += $3 } END { print p + 0, f + 0, k + 0 }')
if [ $rc != 0 ] && [ "$f" = 0 ]; then
    echo "not ok - cargo test exited with status $rc without a failed test (build error?)"; f=1
fi
counted "cargo test" "$p" "$f" "$k"

step "building the module and the host tool"
# ARMv7 (realview-pb-a8, virt-a15) and arm64 (virt-a53): each architecture's kernels, modules
# and target oprof (the arm64 kernel trees build here on first use, scripts/build-kernel.sh).
# The plain modules build through the kernel's clippy (LINT=1: CLIPPY=1 KRUSTFLAGS=-Dwarnings
# for the module only; rust-web-clippy, the clippy of the kernel's rustc) with warnings as
# errors: a clippy or rustc warning fails the build.
lint="LINT=1"
if ! make -C "$REPO" --no-print-directory module testmod host target-tools KVARIANT=plain $lint ||
   ! make -C "$REPO" --no-print-directory module testmod KVARIANT=debug ||
   ! make -C "$REPO" --no-print-directory module testmod target-tools BOARD=virt-a53 KVARIANT=plain $lint ||
   ! make -C "$REPO" --no-print-directory module testmod BOARD=virt-a53 KVARIANT=debug; then
    echo "not ok - build of the modules (plain and debug kernels, ARMv7 and arm64; the plain ones with clippy, warnings as errors), the test module or the host tools failed"
    fail=$((fail + 1)); finish
fi

# runner NAME SCRIPT: runs a test runner whose last line is "NAME: N passed, M failed, K skipped"
# (its TAP in build/tests/NAME.tap) and adds its counts; a missing last line or a non-zero exit
# without a failed check is one failure.
runner() {
    local name=$1 script=$2 rc=0
    bash "$script" | tee "$OUT/tests/$name.tap" || rc=$?
    tally "$name" "$name" "$OUT/tests/$name.tap" $rc
}

step "QEMU integration tests"
KVARIANT= runner qemu "$REPO/tests/run-qemu-tests.sh"
step "board image, installation, DKMS (tests/image.sh)"
runner image "$REPO/tests/image.sh"
finish
