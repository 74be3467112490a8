#!/usr/bin/env bash
# `make check`: every test. Sets the host up (packages, kernels) when needed, then runs the host
# crates' tests and the QEMU integration tests (plain and debug kernels). Fails if any part fails.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
status=0
bash "$REPO/scripts/setup-host.sh" || die "host setup failed"
step "cargo test (host crates)"
(cd "$REPO" && cargo test --locked) || status=1
step "building the module and the host tool"
make -C "$REPO" --no-print-directory module testmod host KVARIANT=plain || die "build failed"
step "building the modules for the debug kernel (build/debug)"
make -C "$REPO" --no-print-directory module testmod KVARIANT=debug || die "build for the debug kernel failed"
step "QEMU integration tests (plain kernel on both boards, debug kernel on virt-a15)"
KVARIANT= bash "$REPO/tests/run-qemu-tests.sh" || status=1
step "make check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
