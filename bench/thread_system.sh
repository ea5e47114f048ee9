#!/usr/bin/env bash
# Our thread pool vs Thread System (github.com/kcenon/thread_system, the C++20 framework
# of the seed's performance guide), side by side: tp_bench's single-submit case and the
# same case on Thread System (bench/third_party/thread_system_bench.cpp), in alternating
# rounds; prints each round and the ratio of medians.
#
# Thread System needs C++20 std::format: clang-19 with libc++ (Debian 12:
#   apt-get install clang-19 libc++-19-dev libc++abi-19-dev).
# Sources: --src DIR holding checkouts thread_system/, common_system/ and simdutf/ of
# github.com/kcenon/thread_system, github.com/kcenon/common_system and
# github.com/simdutf/simdutf (cloned there if absent and the network allows).
#
#   bench/thread_system.sh --src DIR [--tasks N (1000000)] [--workers W (2)] [--repeats R (5)]
set -euo pipefail
ME=thread_system.sh
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$top/build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=bench/tt_bench_lib.sh
. "$top/bench/tt_bench_lib.sh"

src="" tasks=1000000 workers=2 repeats=5
while [ $# -gt 0 ]; do
	case $1 in
	--src) src=${2:?--src needs a directory}; shift 2 ;;
	--tasks) tasks=$(num_arg --tasks "${2-}"); shift 2 ;;
	--workers) workers=$(num_arg --workers "${2-}"); shift 2 ;;
	--repeats) repeats=$(num_arg --repeats "${2-}"); shift 2 ;;
	-h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
[ -n "$src" ] || die "--src DIR is required (see --help)"
command -v clang++-19 >/dev/null ||
	die "clang++-19 missing: apt-get install clang-19 libc++-19-dev libc++abi-19-dev"
need_bin "$BUILD/bench/tp_bench"

mkdir -p "$src"
for r in kcenon/thread_system kcenon/common_system simdutf/simdutf; do
	[ -d "$src/${r#*/}" ] || git clone -q "https://github.com/$r" "$src/${r#*/}" ||
		die "no $src/${r#*/} and cannot clone github.com/$r: put a checkout there"
done
ts=$src/thread_system
if [ ! -f "$ts/build/lib/libthread_system.a" ]; then
	echo "$ME: building Thread System in $ts/build (about 1-2 min)" >&2
	CC=clang-19 CXX=clang++-19 CXXFLAGS=-stdlib=libc++ LDFLAGS=-stdlib=libc++ \
		cmake -S "$ts" -B "$ts/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
		-DTHREAD_BUILD_INTEGRATION_TESTS=OFF -DBUILD_DOCUMENTATION=OFF -DBUILD_TESTING=OFF \
		-DFETCHCONTENT_SOURCE_DIR_SIMDUTF="$src/simdutf" -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
		-DCOMMON_SYSTEM_INCLUDE_DIR="$src/common_system/include" >"$TMP/cmake.log" 2>&1 ||
		die "configuring Thread System failed: $(tail -3 "$TMP/cmake.log")"
	cmake --build "$ts/build" --target thread_system >"$TMP/build.log" 2>&1 ||
		die "building Thread System failed: $(tail -3 "$TMP/build.log")"
fi
tsb=$src/thread_system_bench
clang++-19 -std=c++20 -stdlib=libc++ -O2 -DBUILD_WITH_COMMON_SYSTEM -DUSE_STD_FORMAT \
	-I"$ts/include" -I"$src/common_system/include" -I"$src/simdutf/include" \
	"$top/bench/third_party/thread_system_bench.cpp" "$ts/build/lib/libthread_system.a" \
	"$ts/build/_deps/simdutf-build/src/libsimdutf.a" -lpthread -o "$tsb"

ours=() theirs=()
for ((i = 1; i <= repeats; i++)); do
	a=$("$BUILD/bench/tp_bench" --tasks "$tasks" --workers "$workers" --json |
		python3 -c 'import json,sys; print(next(r for r in json.load(sys.stdin) if r["submit"] == "single")["jobs_per_s"])')
	b=$("$tsb" "$tasks" "$workers" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs_per_s"])')
	ours+=("$a") theirs+=("$b")
	printf 'round %d: tp_bench %.0f jobs/s, thread_system %.0f jobs/s, ratio %.2f\n' \
		"$i" "$a" "$b" "$(python3 -c "print($a / $b)")"
done
python3 - "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
print(f"median: tp_bench {statistics.median(a)/1e6:.2f} M jobs/s, thread_system "
      f"{statistics.median(b)/1e6:.2f} M jobs/s, ratio of medians {statistics.median(a)/statistics.median(b):.2f}")
PY
