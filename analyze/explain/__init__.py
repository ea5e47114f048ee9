"""Stage 2, explain: the analyses of a loaded run, as DataFrames and figures.

Owns each request's decomposition (decompose.py), why each wait happened and who ended it
(waits.py, critpath.py), who held the CPU meanwhile (antagonists.py), lock chains
(lockchain.py), traced peer processes (peer.py), the percentile bands and the tail's excess
(attribute.py), the scheduler's tables (sched.py), the sort orders they share (order.py) and
Findings, what one run's analysis found (findings.py).

Imports: analyze.load and analyze.explain, never analyze.render (tests/test_layout.py checks
it). No page, table or figure is made here; an analysis may name its own finding in words
(antagonists.sentence, critpath.wait_object_line, decompose.check_words), which render places.
"""
