"""orders-server as a child process, the one way every test starts it: on port 0
(the kernel picks a free port), its ready line read back for the port, stopped
with SIGTERM, its own stop line read back as the oracle of what it served."""
import os
import re
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("TT_BUILD", ROOT / "build"))
SERVER = BUILD / "workloads" / "server" / "orders-server"


def need(exe):
    assert exe.exists(), f"{exe} not built: run cmake --build {BUILD}"
    return str(exe)


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([need(SERVER), "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert "listening on 127.0.0.1:" in line, f"orders-server did not start: {line!r}"
        self.port = int(line.split("127.0.0.1:")[1].split()[0])
        self.pid = self.proc.pid
        self.url = f"http://127.0.0.1:{self.port}/orders"

    def stop(self):
        """SIGTERM; returns the server's last stderr line (its connection/request counts)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err.strip().splitlines()[-1] if err.strip() else ""

    def stop_counts(self):
        """SIGTERM; the (connections, requests, errors) its stop line reports."""
        last = self.stop()
        m = re.search(r"(\d+) connections, (\d+) requests \((\d+) errors\)", last)
        assert m, last
        return tuple(int(x) for x in m.groups())
