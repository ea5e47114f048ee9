#!/usr/bin/env bash
# One kernel of the matrix (scripts/kernels.sh): inside its VM, or on the host. Runs the kernel
# suite (tests/kernels) and writes into TT_KERNEL_OUT: NAME.uname, NAME.log, NAME.xml (junit,
# with each test's figures as properties), NAME.rc. Nothing is mounted first: the guest is a
# fresh boot (no tracefs), and tailtrace must cope with it as it is.
set -u
name=${TT_KERNEL_NAME:?} out=${TT_KERNEL_OUT:?} tests=${TT_KERNEL_TESTS:-}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
uname -r >"$out/$name.uname"
export PYTHONDONTWRITEBYTECODE=1 MPLCONFIGDIR=/tmp/tt-mpl  # the host's home is read-only
rc=0
python3 -m pytest -q -p no:cacheprovider -o junit_family=xunit1 tests/kernels \
	${tests:+-k "$tests"} --junitxml="$out/$name.xml" >"$out/$name.log" 2>&1 || rc=$?
echo "$rc" >"$out/$name.rc"
sync
exit 0
