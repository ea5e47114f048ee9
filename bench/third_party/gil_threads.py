"""Four CPU-bound Python threads taking turns on the GIL, for SECONDS (default 3): each sums
squares in a pure-Python loop, so only one runs at a time and the others wait for the GIL
(docs/third-party.md, tests/probes/test_user_stacks.py and test_lock_names.py); then the
process sleeps LINGER seconds (default 0) before it exits.

    python3 gil_threads.py [SECONDS [LINGER]]
"""
import sys
import threading
import time


def spin(n: int) -> int:
    x = 0
    for i in range(n):
        x += i * i
    return x


def work(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        spin(20000)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    threads = [threading.Thread(target=work, args=(seconds,), name=f"spin{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)


if __name__ == "__main__":
    main()
