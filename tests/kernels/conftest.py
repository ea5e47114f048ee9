"""The kernel suite's helpers live beside the probe tests (tests/probes/tt_run.py)."""
import sys
from pathlib import Path

import pytest

PROBES = Path(__file__).resolve().parents[1] / "probes"
if str(PROBES) not in sys.path:
    sys.path.insert(0, str(PROBES))


@pytest.fixture(autouse=True)
def _feature(request, record_property):
    """The test's feature (its mark) as a junit property before it runs: the matrix files a
    failure under it as well as a pass (scripts/lib/kernel_matrix.py)."""
    mark = request.node.get_closest_marker("feature")
    if mark:
        record_property("feature", mark.args[0])
