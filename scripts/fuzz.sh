#!/usr/bin/env bash
# Fuzz the code that reads untrusted bytes (libFuzzer, ASan + UBSan; clang):
#   http_parse_fuzz  orders-server's HTTP/1.x request parser
#   recfile_fuzz     the record-file (.bin) reader
# First every saved regression input (fuzz/regressions/<name>/) and seed (fuzz/corpus/<name>/)
# runs once, then each target fuzzes for --seconds, the targets side by side. A crash is
# saved under build-fuzz/crashes/; copy it into fuzz/regressions/<name>/ once fixed.
#
# Usage: scripts/fuzz.sh [--seconds N] [TARGET...]   (default: 60 s each, every target)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

seconds=60
targets=()
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
	-h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) targets+=("$1"); shift ;;
	esac
done
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds $seconds: give whole seconds" >&2; exit 2; }
[ ${#targets[@]} -gt 0 ] || targets=(http_parse_fuzz recfile_fuzz)

build=$top/build-fuzz
CC=${FUZZ_CC:-clang} cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTT_FUZZ=ON >/dev/null
cmake --build "$build" --target "${targets[@]}"

# fuzz_one TARGET: its saved regressions, then --seconds of fuzzing; 0 when nothing crashed.
fuzz_one() {
	local t=$1 name=${1%_fuzz} exe=$build/fuzz/$1 crashes=$build/crashes execs
	local work=$build/corpus/$name
	mkdir -p "$work" "$crashes"
	# saved regressions: each must pass as it is
	if compgen -G "fuzz/regressions/$name/*" >/dev/null; then
		"$exe" -runs=1 fuzz/regressions/"$name"/* >"$build/$name.regressions.log" 2>&1 ||
			{ echo "fuzz.sh: $t fails a saved regression input: $build/$name.regressions.log" >&2; return 1; }
	fi
	# new inputs go to the first (work) directory; the repo's seeds stay as they are
	if "$exe" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$crashes/$name-" \
		"$work" "fuzz/corpus/$name" >"$build/$name.log" 2>&1; then
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$name.log")
		echo "fuzz.sh: $t: ${seconds} s, ${execs:-?} executions, no crash (corpus $(ls "$work" | wc -l) inputs)" >&2
		return 0
	fi
	echo "fuzz.sh: $t crashed: $(ls -t "$crashes"/"$name"-* 2>/dev/null | head -1); log $build/$name.log:" >&2
	grep -E "^(==|SUMMARY|$t:)" "$build/$name.log" | head -n 20 >&2 || tail -n 20 "$build/$name.log" >&2
	return 1
}

# the targets fuzz side by side (each libFuzzer process is one thread; there are two)
status=0 pids=()
for t in "${targets[@]}"; do
	fuzz_one "$t" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
