"""The old import path of :mod:`scopes.progress.location`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.location import Location, Source, Target

__all__ = ["Location", "Source", "Target"]
