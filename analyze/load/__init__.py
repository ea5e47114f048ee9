"""Stage 1, load: a run directory read into DataFrames.

Owns the record schema (schema.py: dtypes from schema.json), the loader and its parquet cache
(load.py: load_run -> Run, one frame per stream), the flight recorder's capture list
(captures.py), how the analysis uses memory pages (heap.py) and the typed errors every stage
raises (errors.py).

Imports: nothing of analyze outside analyze.load. explain and render import from here, never
the other way (tests/test_layout.py checks it).
"""
