"""The old import path of :mod:`scopes.progress.hooks`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.hooks import ProgressObserver

__all__ = ["ProgressObserver"]
