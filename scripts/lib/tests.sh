# shellcheck shell=bash
# How the test scripts (scripts/test.sh, scripts/sanitize.sh) run pytest: the tests in
# parallel (pytest-xdist, TT_TEST_WORKERS processes, default twice the CPUs: most tests
# wait on a workload, few keep a CPU busy), then the tests marked `serial` one at a time
# (timing oracles that another test's load would disturb; pyproject.toml lists the mark).
# TT_TEST_WORKERS=0 runs everything in one process, in file order.

# tests_pytest PYTEST_ARGS...: 0 when both phases pass (a phase that selects no test passes).
tests_pytest() {
	local workers=${TT_TEST_WORKERS:-$(($(nproc) * 2))} rc status=0
	if [ "$workers" = 0 ]; then
		python3 -m pytest -q "$@"
		return
	fi
	python3 -c 'import xdist' 2>/dev/null || {
		echo "tests: pytest-xdist is missing: run scripts/install-deps.sh (or TT_TEST_WORKERS=0 to run the tests one by one)" >&2
		return 2
	}
	python3 -m pytest -q -n "$workers" -m "not serial" "$@" || { rc=$?; [ "$rc" = 5 ] || status=1; }
	python3 -m pytest -q -m serial "$@" || { rc=$?; [ "$rc" = 5 ] || status=1; }
	return $status
}
