"""Stage 3, render: what people and tools read, made from the analyses.

Owns summary.json's dict (summary.py) and its sentences (words.py), report.html (html.py), the
figures (plot.py), trace.json for Perfetto (perfetto.py), compare's table and compare.html
(compare.py) with a sweep's seed table and knee (sweep.py), captures.html (captures.py), and how
every number is written (fmt.py).

Imports: analyze.load, analyze.explain and analyze.render; never analyze.pipeline, which drives
the stages for each command (tests/test_layout.py checks it).
"""
