"""Stage 2, explain: the analyses of a loaded run, as DataFrames and figures.

Owns each request's decomposition (decompose.py), why each wait happened and who ended it
(waits.py, critpath.py), who held the CPU meanwhile (antagonists.py), lock chains
(lockchain.py), traced peer processes (peer.py), the percentile bands and the tail's excess
(attribute.py), the scheduler's tables (sched.py), the sort orders they share (order.py) and
Findings, what one run's analysis found (findings.py).

Imports: analyze.load and analyze.explain, never analyze.render, and no import circle
(tests/test_layout.py checks both). No page, table, figure or sentence is made here: the
analyses give figures and the names of what they found (a thread, a lock, a process);
render/words.py says them in sentences. The interval algebra they all measure with is
intervals.py.
"""
