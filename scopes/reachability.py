"""The old import path of :mod:`scopes.progress.reachability`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.reachability import Connectivity, SummarySpec, Tracker, TrackerBuilder, connectivity_from, sparse

__all__ = ["Connectivity", "SummarySpec", "Tracker", "TrackerBuilder", "connectivity_from", "sparse"]
