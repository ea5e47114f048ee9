#!/usr/bin/env python3
"""A small HTTP load client on pycurl: a libcurl program tailtrace did not build.

Each of --threads threads owns one pycurl.Curl handle (one keep-alive connection)
and calls perform() (libcurl's curl_easy_perform) back to back until --requests
in total are done or --duration seconds have passed. tailtrace turns every
curl_easy_perform call into a request with:

    ./run.sh --span libcurl.so.4:curl_easy_perform -- \
        python3 bench/third_party/pycurl_load.py --url http://127.0.0.1:PORT/ --requests 2000

pycurl must link the system libcurl.so.4 (scripts/install-deps.sh builds it from
source for that; the PyPI wheel bundles its own renamed copy).
Prints one JSON line: requests, errors, elapsed_s, throughput_rps, p50_ms, p99_ms, max_ms,
stopped_early (SIGINT/SIGTERM: the calls in flight finish, then the summary is printed).
"""
import argparse
import io
import json
import signal
import sys
import threading
import time

try:
    import pycurl
except ImportError:
    sys.exit("pycurl_load.py: pycurl is missing; run: bash scripts/install-deps.sh")


STOP = threading.Event()  # set by SIGINT/SIGTERM: finish the call in flight, then report


def worker(url, quota, deadline_s, lat_ms, errors, lock):
    c = pycurl.Curl()
    c.setopt(pycurl.URL, url)
    c.setopt(pycurl.TIMEOUT_MS, 10000)
    done = 0
    while done < quota and time.monotonic() < deadline_s and not STOP.is_set():
        buf = io.BytesIO()
        c.setopt(pycurl.WRITEDATA, buf)
        t0 = time.monotonic()
        try:
            c.perform()
            ok = c.getinfo(pycurl.RESPONSE_CODE) == 200
        except pycurl.error:
            ok = False
        dt_ms = (time.monotonic() - t0) * 1e3
        with lock:
            lat_ms.append(dt_ms)
            errors[0] += 0 if ok else 1
        done += 1
    c.close()


def percentile(sorted_ms, q):
    if not sorted_ms:
        return 0.0
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--requests", type=int, default=2000, help="total, split over the threads")
    ap.add_argument("--duration", type=float, default=0, help="seconds; 0 = until --requests")
    a = ap.parse_args()
    if a.threads < 1 or a.requests < 1:
        ap.error("--threads and --requests must be positive")
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: STOP.set())
    deadline_s = time.monotonic() + (a.duration if a.duration > 0 else 1e9)
    lat_ms, errors, lock = [], [0], threading.Lock()
    quotas = [a.requests // a.threads + (i < a.requests % a.threads) for i in range(a.threads)]
    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(a.url, q, deadline_s, lat_ms, errors, lock))
               for q in quotas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed_s = time.monotonic() - t0
    s = sorted(lat_ms)
    print(json.dumps({
        "requests": len(s), "errors": errors[0], "elapsed_s": round(elapsed_s, 3),
        "throughput_rps": round(len(s) / elapsed_s, 1) if elapsed_s > 0 else 0.0,
        "p50_ms": round(percentile(s, 0.50), 3), "p99_ms": round(percentile(s, 0.99), 3),
        "max_ms": round(s[-1], 3) if s else 0.0, "stopped_early": STOP.is_set(),
    }))
    return 1 if errors[0] else 0


if __name__ == "__main__":
    sys.exit(main())
