"""The old import path of :mod:`scopes.progress.visit_order`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.visit_order import EarliestFirst, InRounds, Topological, Work

__all__ = ["EarliestFirst", "InRounds", "Topological", "Work"]
