#!/usr/bin/env bash
# The test command: build, then every C test (ctest) and every Python test (pytest: in
# parallel, then the `serial` ones alone; scripts/lib/tests.sh);
# then the kernel matrix: the kernel suite (tests/kernels) on Debian's 5.10, 6.1 and 6.12,
# each booted under QEMU (scripts/kernels.sh; TT_TEST_KERNELS=LIST to choose, =none to skip);
# then the reliability passes: the tests again under ASan+UBSan and TSan
# (scripts/sanitize.sh) and each fuzz target for TT_FUZZ_SECONDS (default 60,
# scripts/fuzz.sh). TT_TEST_QUICK=1 skips the matrix and the reliability passes.
# TT_TEST_BUSY=1 keeps one CPU busy for the whole run (stress-ng --cpu 1): the
# suite must hold on a busy machine (docs/reliability.md, "Timing in tests").
# Integration tests load real BPF and need root.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
BUILD=${BUILD:-build}
# shellcheck source=lib/tests.sh
. scripts/lib/tests.sh

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)"

# Kernel tracing filesystems (absent on a fresh machine).
mountpoint -q /sys/kernel/tracing 2>/dev/null || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
mountpoint -q /sys/kernel/debug 2>/dev/null || mount -t debugfs nodev /sys/kernel/debug 2>/dev/null || true

if [ "${TT_TEST_BUSY:-0}" = 1 ]; then
	command -v stress-ng >/dev/null || { echo "test.sh: TT_TEST_BUSY=1 needs stress-ng: run scripts/install-deps.sh" >&2; exit 2; }
	stress-ng --cpu 1 --timeout 0 --quiet &
	hog=$!
	trap 'kill $hog 2>/dev/null; wait $hog 2>/dev/null || true' EXIT
	echo "test.sh: stress-ng --cpu 1 running beside the tests (pid $hog)" >&2
fi

status=0
ctest --test-dir "$BUILD" --output-on-failure "$@" || status=1
tests_pytest tests || status=1
if [ "${TT_TEST_QUICK:-0}" != 1 ]; then
	if [ "${TT_TEST_KERNELS:-}" != none ]; then
		scripts/kernels.sh --kernels "${TT_TEST_KERNELS:-5.10,6.1,6.12}" --out "$BUILD/kernels" ||
			status=1
	fi
	scripts/sanitize.sh || status=1
	scripts/fuzz.sh --seconds "${TT_FUZZ_SECONDS:-60}" || status=1
fi
exit $status
