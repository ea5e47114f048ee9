#!/usr/bin/env bash
# The test command: build, then every C test (ctest) and every Python test (pytest);
# then the reliability passes: the tests again under ASan+UBSan and TSan
# (scripts/sanitize.sh) and each fuzz target for TT_FUZZ_SECONDS (default 60,
# scripts/fuzz.sh). TT_TEST_QUICK=1 skips the reliability passes.
# Integration tests load real BPF and need root.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
BUILD=${BUILD:-build}

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)"

# Kernel tracing filesystems (absent on a fresh machine).
mountpoint -q /sys/kernel/tracing 2>/dev/null || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
mountpoint -q /sys/kernel/debug 2>/dev/null || mount -t debugfs nodev /sys/kernel/debug 2>/dev/null || true

status=0
ctest --test-dir "$BUILD" --output-on-failure "$@" || status=1
python3 -m pytest -q tests || status=1
if [ "${TT_TEST_QUICK:-0}" != 1 ]; then
	scripts/sanitize.sh || status=1
	scripts/fuzz.sh --seconds "${TT_FUZZ_SECONDS:-60}" || status=1
fi
exit $status
