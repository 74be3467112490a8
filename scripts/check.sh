#!/usr/bin/env bash
# `make check`: every test. Sets the host up (packages, kernel) when needed, then runs the host
# crates' tests and the QEMU integration tests. Fails if any part fails.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
status=0
bash "$REPO/scripts/setup-host.sh" || die "host setup failed"
step "cargo test (host crates)"
(cd "$REPO" && cargo test --locked) || status=1
step "building the module and the host tool"
make -C "$REPO" --no-print-directory module testmod host target-tools || die "build failed"
step "QEMU integration tests"
bash "$REPO/tests/run-qemu-tests.sh" || status=1
step "make check: $([ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
