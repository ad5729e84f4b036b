"""The old import path of :mod:`scopes.progress.order`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.order import PartialOrder, Time, in_time_order, less_equal, less_than

__all__ = ["PartialOrder", "Time", "in_time_order", "less_equal", "less_than"]
