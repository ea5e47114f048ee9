"""Typed errors of the analysis: each message is one line that names the fix.

They are in the first stage (load) so that every stage, and the CLI, can raise and catch them.
"""
from __future__ import annotations


class AnalysisError(Exception):
    """A run directory cannot be analysed as asked (message names the fix)."""


class MissingStreamError(AnalysisError):
    """A record stream the analysis needs is absent from the run directory."""

    def __init__(self, path, producer: str):
        self.path = str(path)
        self.producer = producer
        super().__init__(f"{self.path} is missing: it is written by {producer}")


class CorruptRecordsError(AnalysisError):
    """A record file is truncated or is not the record kind its name says."""


class ExportError(AnalysisError):
    """A backend refused or could not be reached (after the retries): exit 1, not bad input."""
