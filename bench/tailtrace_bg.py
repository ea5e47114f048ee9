"""tailtrace started in the background for the bench scripts that drive a server while it
records (traceparent_node.py, traceresponse_gunicorn.py, scripts/jaeger_trace_view.py):
start() returns once it says its probes are attached, or exits 1 with what it said when it
stopped first. TAILTRACE is the build's binary ($BUILD, default build)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TAILTRACE = Path(__file__).resolve().parents[1] / os.environ.get("BUILD", "build") / \
    "probes" / "tailtrace"


def start(out: Path, *args: str) -> subprocess.Popen:
    """tailtrace --out OUT ARGS..., once it has attached (its stderr left to read)."""
    tt = subprocess.Popen([str(TAILTRACE), "--out", str(out), *args], stderr=subprocess.PIPE,
                          text=True)
    said = []
    for line in tt.stderr:
        said.append(line)
        if "attached to" in line:
            return tt
    tt.wait()
    sys.exit(f"tailtrace exited {tt.returncode} before it attached: {''.join(said)[-800:]}")
