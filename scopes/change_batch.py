"""The old import path of :mod:`scopes.progress.change_batch`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.change_batch import ChangeBatch

__all__ = ["ChangeBatch"]
