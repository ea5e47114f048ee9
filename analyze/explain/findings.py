"""What the analysis found in one run, each figure computed once.

Findings(run, decomp, bands, segs, wait_objects) holds the computed frames: the
per-request decomposition (with its peer and critical-path columns, decompose.py,
peer.py, critpath.py), the percentile bands (attribute.df_bands), the critical-path
segments and the longest waits (critpath.py). What is derived from them is computed
the first time it is asked for and kept:

  masks         {band: boolean mask over decomp rows} (attribute.band_masks)
  band          each request's band (attribute.band_of): the reports and the trace label
                requests with it
  tail_excess   the ≥P99 band's excess over the ≤P50 band's, by part (attribute.tail_excess)
  peers         the traced peer processes (peer.df_peers)
  antagonists   who held the CPU while each band was runnable (antagonists.band_antagonists),
                None without the cpu event
  root_cause(band, part)  the root cause of a band's blocked part (critpath.root_cause)

summary.json and the CLI text (summary.py), the headline (words.py), report.html
(html.py) and trace.json (perfetto.py) all read one Findings: none recomputes a figure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd

from .antagonists import band_antagonists, has_occupancy
from .attribute import band_masks, band_of, tail_excess
from .critpath import root_cause
from .peer import df_peers


@dataclass
class Findings:
    run: object                       # load.Run, or None for a bare decomposition (tests)
    decomp: pd.DataFrame
    bands: pd.DataFrame
    segs: pd.DataFrame | None = None  # critical-path segments (critpath.df_critical_path)
    wait_objects: list | None = None  # critpath.df_wait_objects rows, JSON-ready
    _causes: dict = field(default_factory=dict, repr=False)

    @cached_property
    def masks(self) -> dict:
        return band_masks(self.decomp)

    @cached_property
    def band(self) -> pd.Series:
        return band_of(self.decomp, masks=self.masks)

    @cached_property
    def tail_excess(self) -> dict | None:
        return tail_excess(self.decomp) if len(self.decomp) else None

    @cached_property
    def peers(self) -> pd.DataFrame:
        return df_peers(self.run, self.decomp)

    @cached_property
    def antagonists(self) -> dict | None:
        if self.run is None or not len(self.decomp) or not has_occupancy(self.run):
            return None
        return band_antagonists(self.run, self.decomp, self.band)

    def root_cause(self, band: str, part: str | None) -> dict | None:
        """critpath.root_cause of `part` for the requests of `band` (None without a run,
        a part or such a band)."""
        if self.run is None or part is None or band not in self.masks:
            return None
        key = (band, part)
        if key not in self._causes:
            self._causes[key] = root_cause(self.run, self.decomp, self.segs, self.masks[band],
                                           part)
        return self._causes[key]
