#!/usr/bin/env bash
# Sanitizer pass: the C code built under AddressSanitizer + UndefinedBehaviorSanitizer runs
# every C test (ctest) and every Python test that starts a program we build (tailtrace,
# orders-server, httpload, the test helpers); built under ThreadSanitizer it runs the thread
# pool, httpload and orders-server tests. Pure-Python analysis tests run only in the plain
# pass (no C of ours runs in them), and so does the kernel suite (tests/kernels: one
# smoke test per feature, each tested in depth by tests/probes, which runs here).
# pytest runs as in scripts/test.sh (scripts/lib/tests.sh: in parallel, then the `serial`
# tests alone). Each sanitizer writes its reports to build-<kind>/sanitizer-logs/; any
# report, or any failing test, fails the pass.
#
# Usage: scripts/sanitize.sh [asan] [tsan]      (default: both; scripts/test.sh runs it)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=lib/tests.sh
. scripts/lib/tests.sh

# The Python tests that run C of ours (tests/test_layout.py checks that every test file
# that starts a built program is in this list).
asan_tests=(tests/common tests/server tests/threadpool tests/httpload tests/probes tests/e2e
	tests/analyze/explain/test_flight_capture.py tests/analyze/explain/test_decompose_real.py)

kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(asan tsan)
status=0
for kind in "${kinds[@]}"; do
	case $kind in
	asan) flags=address,undefined tests=("${asan_tests[@]}") ;;
	tsan) flags=thread tests=(tests/threadpool tests/httpload tests/server) ;;
	*) echo "sanitize.sh: unknown sanitizer '$kind': use asan or tsan" >&2; exit 2 ;;
	esac
	build=$top/build-$kind
	logs=$build/sanitizer-logs
	echo "sanitize.sh: $kind ($flags) in $build" >&2
	cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTT_SANITIZE="$flags" >/dev/null
	cmake --build "$build" -j"$(nproc)"
	rm -rf "$logs" && mkdir -p "$logs"
	# exitcode 66: a report is never mistaken for a program's own error status.
	common="exitcode=66:log_path=$logs/$kind"
	(
		export TT_SANITIZE=$flags TT_BUILD=$build
		# a sanitized program runs 2-3x slower: one test process per CPU, not two
		export TT_TEST_WORKERS=${TT_TEST_WORKERS:-$(nproc)}
		export ORDERS_SERVER=$build/workloads/server/orders-server
		export ASAN_OPTIONS="$common:detect_leaks=1:abort_on_error=0"
		export LSAN_OPTIONS="suppressions=$top/scripts/lib/lsan.supp:print_suppressions=0"
		export UBSAN_OPTIONS="$common:halt_on_error=1:print_stacktrace=1"
		export TSAN_OPTIONS="$common:halt_on_error=1:second_deadlock_stack=1"
		# both run; either failing fails the pass (a failed ctest once slipped by here)
		c=0
		ctest --test-dir "$build" --output-on-failure || c=1
		tests_pytest "${tests[@]}" && exit "$c"
	) || status=1
	if compgen -G "$logs/*" >/dev/null; then
		echo "sanitize.sh: $kind reports in $logs:" >&2
		head -n 40 "$logs"/* >&2
		status=1
	else
		echo "sanitize.sh: $kind: no reports" >&2
	fi
done
exit $status
