#!/usr/bin/env bash
# Prints the kernel build tree ($KVARIANT: plain or debug) to build modules against, setting up
# the host and building the kernel first when they are missing (progress on stderr).
set -euo pipefail
here=$(dirname "$0")
bash "$here/setup-host.sh" >&2
bash "$here/build-kernel.sh"
