#!/usr/bin/env bash
# The kernel matrix: tailtrace's kernel suite (tests/kernels) on the kernels people run,
# each booted under QEMU (virtme-ng, software emulation) with this machine's root file
# system shared read-only and the work tree's results writable; and on this machine's own
# kernel. Prints feature x kernel: pass, refused (one line naming the missing kernel
# feature) or FAIL, with the hook, the fallbacks and the figures; exits 1 if a kernel
# fails. docs/kernels.md.
#
#   scripts/kernels.sh [--kernels LIST] [--cache DIR] [--out DIR] [--tests EXPR] [--cpus N]
#
#   --kernels LIST  comma-separated: 5.10 (Debian 11), 6.1 (Debian 12), 6.12 (Debian 13),
#                   host (this machine, no VM); default 5.10,6.1,6.12,host
#   --cache DIR     where Debian's kernel packages are kept (default
#                   $TT_KERNEL_CACHE or /var/cache/tailtrace/kernels): fetched once
#   --out DIR       junit XML, logs and matrix.md (default results/kernels-<UTC time>)
#   --tests EXPR    pytest -k expression: run part of the suite
#   --cpus N        the guests' vCPUs (default 2; e.g. 16 to check per-CPU sizing: each
#                   vCPU is emulated, so the suite takes longer, TT_KERNEL_TIMEOUT_S)
#
# Needs root, qemu-system-x86, virtme-ng (vng), kmod, busybox-static and a build
# (scripts/install-deps.sh installs them; cmake --build build).
set -euo pipefail
TT_ME=kernels.sh
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/common.sh
. "$top/scripts/lib/common.sh"

KERNELS=5.10,6.1,6.12,host
CACHE=${TT_KERNEL_CACHE:-/var/cache/tailtrace/kernels}
OUT=""
TESTS=""
VM_MEMORY=4G
VM_CPUS=2
guest=$top/scripts/lib/kernel-guest.sh
VM_TIMEOUT_S=${TT_KERNEL_TIMEOUT_S:-600}  # a suite takes ~4 min under emulation

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
	case "$1" in
	--kernels) KERNELS=${2:?--kernels needs a list}; shift 2 ;;
	--cache) CACHE=${2:?--cache needs a directory}; shift 2 ;;
	--out) OUT=${2:?--out needs a directory}; shift 2 ;;
	--tests) TESTS=${2:?--tests needs a pytest -k expression}; shift 2 ;;
	--cpus) VM_CPUS=${2:?--cpus needs a number}; shift 2
		[[ $VM_CPUS =~ ^[1-9][0-9]*$ ]] || die "--cpus wants a whole number of vCPUs, got '$VM_CPUS'" ;;
	-h|--help) usage; exit 0 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
done
[ "$(id -u)" -eq 0 ] || die "must run as root (the suite loads BPF programs): sudo $0"
OUT=${OUT:-$top/results/kernels-$(utc_stamp)}
mkdir -p "$OUT" "$CACHE"
OUT=$(cd "$OUT" && pwd)

# suite_of KERNEL: the Debian suite whose own kernel it is.
suite_of() {
	case "$1" in
	5.10) echo bullseye ;;
	6.1) echo bookworm ;;
	6.12) echo trixie ;;
	*) die "--kernels: unknown kernel '$1': give 5.10, 6.1, 6.12 or host" ;;
	esac
}

# fetch KERNEL: Debian's linux-image of that suite, unpacked with its modules indexed, into
# $CACHE/SUITE/root; prints the vmlinuz path. apt with a private sources list and state, so
# the machine's own apt configuration is not touched.
fetch() {
	local suite dir apt_opts pkg deb ver vmlinuz
	suite=$(suite_of "$1")
	dir=$CACHE/$suite
	if vmlinuz=$(ls "$dir"/root/boot/vmlinuz-* 2>/dev/null | head -1) && [ -n "$vmlinuz" ] &&
	   [ -f "$dir/ready" ]; then
		echo "$vmlinuz"
		return 0
	fi
	mkdir -p "$dir/lists/partial" "$dir/archives/partial"
	echo "deb http://deb.debian.org/debian $suite main" >"$dir/sources.list"
	apt_opts=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o Dir::Etc::sourceparts=-
		  -o "Dir::State::lists=$dir/lists" -o "Dir::Cache=$dir"
		  -o "Dir::Cache::archives=$dir/archives" -o APT::Sandbox::User=root)
	apt-get -qq "${apt_opts[@]}" update >&2 ||
		die "cannot read Debian's $suite package index (network?): apt-get update failed"
	pkg=$(apt-cache "${apt_opts[@]}" depends linux-image-amd64 |
	      awk '/Depends: linux-image-/ {print $2; exit}')
	[ -n "$pkg" ] || die "Debian $suite: no linux-image-amd64 dependency found"
	(cd "$dir" && apt-get -qq "${apt_opts[@]}" download "$pkg" >&2) ||
		die "cannot download $pkg from Debian $suite"
	deb=$(ls "$dir/${pkg}"_*.deb | head -1)
	rm -rf "$dir/root"
	dpkg -x "$deb" "$dir/root"
	vmlinuz=$(ls "$dir"/root/boot/vmlinuz-* | head -1)
	ver=${vmlinuz##*/vmlinuz-}
	# modules: /lib/modules (Debian 11, 12) or /usr/lib/modules (13, merged /usr)
	if [ -d "$dir/root/usr/lib/modules/$ver" ]; then
		depmod -b "$dir/root/usr" "$ver"
	else
		depmod -b "$dir/root" "$ver"
	fi
	rm -f "$deb"
	touch "$dir/ready"
	log "fetched $pkg (Debian $suite) into $dir"
	echo "$vmlinuz"
}

# boot NAME VMLINUZ: one boot of the suite under QEMU; 0 when it gave a result (junit file).
boot() {
	local name=$1 vmlinuz=$2 rc=0
	rm -f "$OUT/$name.xml"
	# the host's root file system, read-only; OUT writable; the work tree writable in the
	# guest only (an overlay). No AVX in the guest: QEMU 7.2's emulation of it crashes
	# numpy's sort (a segfault in np.unique, measured; without AVX it runs).
	# --verbose: the guest kernel's console (a lockup, a hung task) goes to NAME.console
	timeout "$VM_TIMEOUT_S" vng -r "$vmlinuz" --disable-kvm --verbose --memory "$VM_MEMORY" \
		--cpus "$VM_CPUS" --rwdir "$OUT" --overlay-rwdir "$top" --cwd "$top" \
		--qemu-opts="-cpu max,-avx,-avx2" \
		--exec "env PATH='$PATH' TT_KERNEL_VM=1 TT_KERNEL_NAME=$name TT_KERNEL_OUT=$OUT TT_KERNEL_TESTS='$TESTS' $guest" \
		>"$OUT/$name.console" 2>&1 || rc=$?
	# vng's own exit status says little (255 when the guest script ran on its console);
	# the suite's junit file says whether it ran
	[ -f "$OUT/$name.xml" ] && return 0
	log "$name: the VM ended without a result (vng exit $rc): see $OUT/$name.console"
	return 1
}

# run_suite NAME [vmlinuz]: the kernel suite on the host, or in a VM booting vmlinuz. A VM
# that hangs is booted once more (QEMU 7.2's multi-threaded TCG hung some 6.1 guests while the
# kernel patched its own text, docs/kernels.md); a second hang fails the kernel.
run_suite() {
	local name=$1 vmlinuz=${2:-} rc=0
	if [ -z "$vmlinuz" ]; then
		TT_KERNEL_NAME=$name TT_KERNEL_OUT=$OUT TT_KERNEL_TESTS=$TESTS "$guest" || rc=$?
		return 0
	fi
	boot "$name" "$vmlinuz" && return 0
	cp "$OUT/$name.console" "$OUT/$name.hung.console" 2>/dev/null || true
	cp "$OUT/$name.log" "$OUT/$name.hung.log" 2>/dev/null || true
	log "$name: booting it once more"
	boot "$name" "$vmlinuz" || echo 1 >"$OUT/$name.rc"
	return 0
}

command -v vng >/dev/null 2>&1 || die "vng (virtme-ng) not found: run scripts/install-deps.sh"
command -v qemu-system-x86_64 >/dev/null 2>&1 || die "qemu-system-x86_64 not found: run scripts/install-deps.sh"
qemu_major=$(env_qemu_major)
[ "$qemu_major" -ge 10 ] ||
	log "warning: QEMU $qemu_major is older than 10: 7.2 hung 6.1's guests in about 1 boot of 3 (docs/kernels.md); scripts/install-deps.sh installs 10 from bookworm-backports"
# the suite runs the build as it is (the guests share it, read-only)
[ -f "$top/build/CMakeCache.txt" ] || cmake -S "$top" -B "$top/build" -G Ninja \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || die "cmake configure failed"
cmake --build "$top/build" -j"$(nproc)" >&2 || die "build failed (errors above)"

IFS=, read -r -a kernels <<<"$KERNELS"
for k in "${kernels[@]}"; do
	if [ "$k" = host ]; then
		phase "host ($(uname -r)): the kernel suite"
		run_suite host
	else
		vmlinuz=$(fetch "$k")
		phase "$k (${vmlinuz##*/vmlinuz-}): booting under QEMU, the kernel suite"
		run_suite "$k" "$vmlinuz"
	fi
	phase "$k: $(tail -1 "$OUT/$k.log" 2>/dev/null | sed 's/^=* //; s/ =*$//' || echo 'no log')"
done

python3 "$top/scripts/lib/kernel_matrix.py" "$OUT" "${kernels[@]}" | tee "$OUT/matrix.md"
