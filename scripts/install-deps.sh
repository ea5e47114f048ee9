#!/usr/bin/env bash
# Install every system and Python dependency of tailtrace on Debian 12, as root.
# Idempotent: re-running it only installs what is missing.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps.sh: must run as root (try: sudo $0)" >&2
    exit 1
fi

APT_PKGS=(
    build-essential cmake pkg-config git ca-certificates
    clang llvm libclang-rt-14-dev libelf-dev libdw-dev libdebuginfod1 zlib1g-dev libcapstone-dev systemtap-sdt-dev
    libiberty-dev
    libbpf-dev bpftool bpftrace linux-perf libbpf-tools
    libcurl4-openssl-dev libnuma-dev libssl-dev
    nginx wrk curl jq procps psmisc redis-server redis-tools stress-ng
    postgresql util-linux debootstrap
    kmod busybox-static libseccomp-dev libcap-ng-dev
    prometheus
    python3 python3-pip python3-venv
    # libc's and python3's symbols from their debug files (tests/probes/test_user_stacks.py)
    libc6-dbg python3-dbg
    chromium
)

# Go: the spans tests' net/http server (tests/probes/gohttp) and `go tool pprof`, which reads
# the pprof profiles in the tests (tests/analyze/render/test_pprof.py). Debian's golang-go only
# when no Go toolchain is installed already (a newer one in /usr/local/go serves as well).
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
    APT_PKGS+=(golang-go)
fi

missing=()
for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "install-deps: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# QEMU for the kernel matrix (scripts/kernels.sh): bookworm-backports' (10.0). Bookworm's own 7.2
# hung Debian 12's 6.1 guests under software emulation in about 1 boot of 3 (docs/kernels.md).
# (scripts/lib/common.sh: env_qemu_major, 0 when there is none)
TT_ME=install-deps
. "$(dirname "$0")/lib/common.sh"
if [ "$(env_qemu_major)" -lt 10 ]; then
    . /etc/os-release
    if [ "${VERSION_CODENAME:-}" = bookworm ]; then
        if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
            echo "deb http://deb.debian.org/debian bookworm-backports main" \
                >/etc/apt/sources.list.d/bookworm-backports.list
        fi
        echo "install-deps: apt-get install -t bookworm-backports qemu-system-x86"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86
    else
        apt-get install -y -qq --no-install-recommends qemu-system-x86
    fi
fi

# Debian's nginx, prometheus, redis and postgresql packages start system services (ports 80,
# 9090, 6379, 5432); tailtrace's tests start their own (PostgreSQL: a private cluster on a Unix
# socket, tests/probes/test_flight_postgres.py).
if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now nginx prometheus redis-server postgresql >/dev/null 2>&1 || true
fi
pkill -x nginx 2>/dev/null || true
pkill -x prometheus 2>/dev/null || true
pkill -x redis-server 2>/dev/null || true

# Python side: the analysis package and its test runner (pytest-xdist runs the tests in
# parallel: scripts/lib/tests.sh); protobuf encodes the pprof profiles (analyze/render/pprof.py)
# and opentelemetry-proto the OTLP spans (analyze/render/otlp.py); perfetto's trace protos
# write trace.perfetto-trace (analyze/render/pftrace.py); prometheus-client's strict
# OpenMetrics parser checks the exporter; the OpenTelemetry SDK instruments the service whose
# trace tailtrace's spans join (tests/probes/test_otel_sdk.py); virtme-ng boots the kernel matrix's kernels
# (scripts/kernels.sh).
here=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check \
    'pandas>=1.5' 'pyarrow>=10' 'numpy>=1.23' 'matplotlib>=3.6' 'pytest>=7' \
    'pytest-xdist>=3.5' 'protobuf>=4.22' 'opentelemetry-proto>=1.27' 'perfetto>=0.59' \
    'prometheus-client>=0.16' 'opentelemetry-sdk>=1.27' \
    'opentelemetry-exporter-otlp-proto-http>=1.27' 'opentelemetry-instrumentation-wsgi' \
    'virtme-ng>=1.30'
if [ -f "$here/analyze/pyproject.toml" ] || [ -f "$here/pyproject.toml" ]; then
    "$PY" -m pip install -q --disable-pip-version-check -e "$here" 2>/dev/null || true
fi
# matplotlib builds its font cache on first use (~10 s on a fresh machine): here, not in the
# first report
MPLBACKEND=Agg "$PY" -c 'import matplotlib.font_manager' >/dev/null 2>&1 || true

# pycurl for the third-party demo (bench/third_party): built from source so that it links the
# system libcurl.so.4 (the PyPI wheel bundles a renamed libcurl that --span libcurl.so.4 cannot see).
pycurl_links_system_libcurl='import os, sys, pycurl
sys.exit(not any(os.path.basename(l.split()[-1]).startswith("libcurl.so.4") for l in open("/proc/self/maps") if "/" in l))'
if ! "$PY" -c "$pycurl_links_system_libcurl" 2>/dev/null; then
    "$PY" -m pip uninstall -y -q pycurl >/dev/null 2>&1 || true
    PYCURL_SSL_LIBRARY=openssl "$PY" -m pip install -q --disable-pip-version-check --no-binary pycurl pycurl
fi

# The kernel matrix's guests read this machine's root file system through virtio-fs: the Rust
# virtiofsd (Debian 12 has only QEMU's old C one, which virtme-ng does not use; over 9p the
# guests' Python imports take 5x as long).
if ! command -v virtiofsd >/dev/null 2>&1; then
    if command -v cargo >/dev/null 2>&1; then
        cargo install virtiofsd --locked -q || echo "install-deps: virtiofsd not installed (scripts/kernels.sh falls back to 9p, slower)" >&2
    else
        echo "install-deps: cargo not found; scripts/kernels.sh wants 'cargo install virtiofsd --locked'" >&2
    fi
fi

# Flame graphs: inferno (Rust). Optional; skipped when cargo is absent.
if ! command -v inferno-flamegraph >/dev/null 2>&1; then
    if command -v cargo >/dev/null 2>&1; then
        cargo install inferno --locked -q || echo "install-deps: inferno not installed (flame graphs will be skipped)" >&2
    else
        echo "install-deps: cargo not found; flame graphs need 'cargo install inferno --locked'" >&2
    fi
fi

# The OTLP/JSON tests read the exported file back with the OpenTelemetry Collector's own decoder
# (tests/analyze/render/otlp_json_read, Go, pdata v1.71.0): its modules, from the Go module
# proxy, into Go's module cache. It needs Go 1.26; the test skips where Go is missing.
GO=$(command -v go || echo /usr/local/go/bin/go)
if [ -x "$GO" ]; then
    (cd "$(dirname "$0")/../tests/analyze/render/otlp_json_read" && "$GO" mod download) ||
        echo "install-deps: the OTLP/JSON reader's Go modules were not downloaded (its test will try again)" >&2
fi

echo "install-deps: done"
