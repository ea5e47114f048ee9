"""The analyze tests mirror the package: load/, explain/ and render/ test the stages, this folder
the pipeline and the CLI. The helpers shared by all of them (fixtures.py, synth.py,
synth_server.py) stay here and are imported by name (`from fixtures import ...`)."""
import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
