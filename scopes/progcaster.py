"""The old import path of :mod:`scopes.progress.progcaster`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.progcaster import Progcaster, ProgressBatch, compact

__all__ = ["Progcaster", "ProgressBatch", "compact"]
