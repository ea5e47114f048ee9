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
# Under QEMU's emulation (TT_KERNEL_VM=1) the BPF statistics stay on for the whole suite:
# tailtrace's sampled cost windows flip their static key 20 times a second, a live patch of
# the kernel's text each time, and QEMU 7.2's multi-threaded TCG could leave a vCPU executing
# a patch site's stale int3 with interrupts off (seen on 6.1: both vCPUs spinning at
# bpf_trace_run1's static branch, the guest hung). With the statistics on, tailtrace counts
# them continuously and flips nothing.
if [ "${TT_KERNEL_VM:-0}" = 1 ]; then
	echo 1 >/proc/sys/kernel/bpf_stats_enabled
fi
rc=0
# -v names each test as it starts; a test still running after 12 min dumps every thread's
# Python stack into the log (a hang shows where it is)
python3 -m pytest -v -p no:cacheprovider -o junit_family=xunit1 -o faulthandler_timeout=720 \
	tests/kernels \
	${tests:+-k "$tests"} --junitxml="$out/$name.xml" >"$out/$name.log" 2>&1 || rc=$?
echo "$rc" >"$out/$name.rc"
sync
exit 0
