"""The old import path of :mod:`scopes.progress.location_index`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.location_index import INNER, SCOPE_INPUT, SCOPE_OUTPUT, LocationIndex

__all__ = ["INNER", "LocationIndex", "SCOPE_INPUT", "SCOPE_OUTPUT"]
